/* muster-relaybench: W TCPStore clients (one thread and one connection each) doing ADDs as
 * torch's TCPStore client does (one request, wait for its reply, the next), for a fixed
 * time, against --port or $MASTER_PORT on 127.0.0.1: a relay of `muster run` or musterd's
 * TCPStore listener.  --key same: every client adds to one key (what the relay combines);
 * own: each to a key of its own.  Prints one JSON line: requests per second over the timed
 * window (after --warmup) and latency quantiles in microseconds.  --cpu N pins the clients
 * (all threads) to CPU N, whatever CPU the launcher that started them is on.
 *
 *   muster-relaybench --port 29610 --workers 8 --seconds 3 --key same --label direct */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hist.h"

/* Most clients one run starts. */
#define RB_MAX_WORKERS 1024

/* The run's settings and its clients' shared clock. */
struct rb_cfg {
    unsigned port;
    int workers;
    double seconds, warmup;
    int same;
    int cpu;                   /* pin the clients to this CPU (-1: leave as started) */
    const char *label;
    uint64_t start_ns, measure_ns, stop_ns;
};

/* One client's thread and what it measured. */
struct rb_worker {
    const struct rb_cfg *cfg;
    int id;
    pthread_t th;
    uint64_t ops;
    int failed;
    struct hist h;
};

/* CLOCK_MONOTONIC in nanoseconds. */
static uint64_t rb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Send all n bytes; 0 or -1. */
static int rb_send(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Read exactly n bytes; 0 or -1. */
static int rb_recv(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n > 0) {
        ssize_t k = recv(fd, b, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Connect to 127.0.0.1:port and send TCPStore's VALIDATE handshake; fd or -1. */
static int rb_connect(unsigned port)
{
    static const uint8_t hs[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || rb_send(fd, hs, sizeof hs) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Little-endian u64 into b. */
static void rb_le64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

/* One client: ADD 1 in a loop until the stop time, timing each reply after the warmup. */
static void *rb_worker_main(void *arg)
{
    struct rb_worker *w = arg;
    const struct rb_cfg *c = w->cfg;
    char key[32];
    int klen = c->same ? snprintf(key, sizeof key, "bench/ctr") : snprintf(key, sizeof key, "bench/ctr%d", w->id);
    uint8_t req[1 + 8 + sizeof key + 8];
    size_t n = 0;
    req[n++] = 4; /* ADD, VALIDATE-era numbering */
    rb_le64(req + n, (uint64_t)klen);
    n += 8;
    memcpy(req + n, key, (size_t)klen);
    n += (size_t)klen;
    rb_le64(req + n, 1);
    n += 8;
    hist_reset(&w->h);
    int fd = rb_connect(c->port);
    if (fd < 0) {
        w->failed = 1;
        return NULL;
    }
    while (rb_now() < c->start_ns) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    /* Bounded by the stop time: each round trip either answers or fails the client. */
    for (;;) {
        uint64_t t0 = rb_now();
        if (t0 >= c->stop_ns)
            break;
        uint8_t rep[8];
        if (rb_send(fd, req, n) < 0 || rb_recv(fd, rep, sizeof rep) < 0) {
            w->failed = 1;
            break;
        }
        uint64_t t1 = rb_now();
        if (t0 >= c->measure_ns && t1 <= c->stop_ns) {
            hist_add(&w->h, t1 - t0);
            w->ops++;
        }
    }
    close(fd);
    return NULL;
}

/* Parse the command line into c; exits 2 on a bad one. */
static void rb_args(int argc, char **argv, struct rb_cfg *c)
{
    static const struct option opts[] = {{"port", 1, 0, 'p'},   {"workers", 1, 0, 'w'}, {"seconds", 1, 0, 's'},
                                         {"warmup", 1, 0, 'u'}, {"key", 1, 0, 'k'},     {"label", 1, 0, 'l'},
                                         {"cpu", 1, 0, 'c'},    {0, 0, 0, 0}};
    const char *env = getenv("MASTER_PORT");
    *c = (struct rb_cfg){.port = env ? (unsigned)atoi(env) : 0, .workers = 8, .seconds = 3, .warmup = 0.5,
                         .same = 1, .cpu = -1, .label = "run"};
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 'p': c->port = (unsigned)atoi(optarg); break;
        case 'w': c->workers = atoi(optarg); break;
        case 's': c->seconds = atof(optarg); break;
        case 'u': c->warmup = atof(optarg); break;
        case 'k': c->same = strcmp(optarg, "own") != 0; break;
        case 'l': c->label = optarg; break;
        case 'c': c->cpu = atoi(optarg); break;
        default: exit(2);
        }
    }
    if (!c->port || c->port > 65535 || c->workers < 1 || c->workers > RB_MAX_WORKERS || c->seconds <= 0) {
        fprintf(stderr, "usage: muster-relaybench [--port P | $MASTER_PORT] [--workers 1..%d] [--seconds S] "
                        "[--warmup S] [--key same|own] [--label L] [--cpu N]\n", RB_MAX_WORKERS);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    struct rb_cfg c;
    rb_args(argc, argv, &c);
    static struct rb_worker w[RB_MAX_WORKERS];
    if (c.cpu >= 0) {
        /* Under `muster run` the launcher (and its relay) may sit on another CPU than the clients. */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(c.cpu, &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) {
            perror("muster-relaybench: sched_setaffinity");
            return 1;
        }
    }
    c.start_ns = rb_now() + 200000000ull; /* every client connected first */
    c.measure_ns = c.start_ns + (uint64_t)(c.warmup * 1e9);
    c.stop_ns = c.measure_ns + (uint64_t)(c.seconds * 1e9);
    for (int i = 0; i < c.workers; i++) {
        w[i].cfg = &c;
        w[i].id = i;
        if (pthread_create(&w[i].th, NULL, rb_worker_main, &w[i]) != 0) {
            fprintf(stderr, "muster-relaybench: cannot start thread %d\n", i);
            return 1;
        }
    }
    static struct hist all;
    hist_reset(&all);
    uint64_t ops = 0;
    int failed = 0;
    for (int i = 0; i < c.workers; i++) {
        pthread_join(w[i].th, NULL);
        hist_merge(&all, &w[i].h);
        ops += w[i].ops;
        failed += w[i].failed;
    }
    printf("{\"label\":\"%s\",\"workers\":%d,\"key\":\"%s\",\"seconds\":%.3f,\"ops\":%" PRIu64
           ",\"rps\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"mean_us\":%.1f,\"failed\":%d}\n",
           c.label, c.workers, c.same ? "same" : "own", c.seconds, ops, (double)ops / c.seconds,
           (double)hist_quantile(&all, 0.5) / 1e3, (double)hist_quantile(&all, 0.99) / 1e3, hist_mean(&all) / 1e3,
           failed);
    return failed ? 1 : 0;
}
