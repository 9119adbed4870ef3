/*
 * muster-pingpong: the loopback TCP round-trip floor.  A forked echo server answers each
 * request of --req bytes with --resp bytes over one TCP_NODELAY connection; the client
 * times --iters synchronous round trips.  Sizes default to those of a small native
 * get (a 64-byte value), so the daemon's round trip can be compared with the cost of the
 * two system calls and the wake-up that any server must pay.  Prints JSON on stdout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "hist.h"
#include "json.h"

struct pp_cfg {
    int cpu_client;
    int cpu_server;
    unsigned iters;
    unsigned warmup;
    unsigned req;
    unsigned resp;
};

/* Pin the calling process to cpu (negative: leave it to the scheduler). */
static void pingpong_pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) < 0)
        perror("sched_setaffinity");
}

/* Read exactly n bytes; returns 0, or -1 on error or end of stream. */
static int pingpong_read(int fd, uint8_t *buf, size_t n)
{
    while (n) {
        ssize_t r = read(fd, buf, n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return -1;
        }
        buf += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Write exactly n bytes; returns 0 or -1. */
static int pingpong_write(int fd, const uint8_t *buf, size_t n)
{
    while (n) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Echo server: accept one connection and answer every request until it closes. */
static void pingpong_server(int lfd, const struct pp_cfg *cfg)
{
    pingpong_pin(cfg->cpu_server);
    int fd = accept(lfd, NULL, NULL);
    if (fd < 0)
        _exit(1);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t *in = malloc(cfg->req), *out = calloc(1, cfg->resp);
    while (in && out && pingpong_read(fd, in, cfg->req) == 0)
        if (pingpong_write(fd, out, cfg->resp) < 0)
            break;
    _exit(0);
}

/* Client: time the round trips; returns 0 or -1. */
static int pingpong_client(uint16_t port, const struct pp_cfg *cfg, struct hist *h, double *secs)
{
    pingpong_pin(cfg->cpu_client);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    uint8_t *req = calloc(1, cfg->req), *resp = malloc(cfg->resp);
    if (!req || !resp)
        return -1;
    uint64_t start = 0;
    for (unsigned i = 0; i < cfg->warmup + cfg->iters; i++) {
        if (i == cfg->warmup)
            start = clock_ns();
        uint64_t t = clock_ns();
        if (pingpong_write(fd, req, cfg->req) < 0 || pingpong_read(fd, resp, cfg->resp) < 0)
            return -1;
        if (i >= cfg->warmup)
            hist_add(h, clock_ns() - t);
    }
    *secs = (double)(clock_ns() - start) / 1e9;
    close(fd);
    free(req);
    free(resp);
    return 0;
}

/* Parse "--name value" pairs into cfg; returns 0 or -1. */
static int pingpong_args(int argc, char **argv, struct pp_cfg *cfg)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (!strcmp(argv[i], "--cpu-client"))
            cfg->cpu_client = (int)v;
        else if (!strcmp(argv[i], "--cpu-server"))
            cfg->cpu_server = (int)v;
        else if (!strcmp(argv[i], "--iters") && v > 0)
            cfg->iters = (unsigned)v;
        else if (!strcmp(argv[i], "--warmup") && v >= 0)
            cfg->warmup = (unsigned)v;
        else if (!strcmp(argv[i], "--req") && v > 0)
            cfg->req = (unsigned)v;
        else if (!strcmp(argv[i], "--resp") && v > 0)
            cfg->resp = (unsigned)v;
        else
            return -1;
    }
    return argc % 2 == 1 ? 0 : -1;
}

/* Print the report. */
static void pingpong_report(const struct pp_cfg *cfg, const struct hist *h, double secs)
{
    struct json j;
    json_begin(&j, stdout);
    json_str(&j, "tool", "muster-pingpong");
    json_u64(&j, "req_bytes", cfg->req);
    json_u64(&j, "resp_bytes", cfg->resp);
    json_dbl(&j, "cpu_client", cfg->cpu_client);
    json_dbl(&j, "cpu_server", cfg->cpu_server);
    json_u64(&j, "iters", cfg->iters);
    json_dbl(&j, "ops_per_s", secs > 0 ? cfg->iters / secs : 0);
    json_obj(&j, "latency_us");
    json_dbl(&j, "mean", hist_mean(h) / 1e3);
    json_dbl(&j, "min", (double)h->min_ns / 1e3);
    json_dbl(&j, "p50", (double)hist_quantile(h, 0.5) / 1e3);
    json_dbl(&j, "p99", (double)hist_quantile(h, 0.99) / 1e3);
    json_dbl(&j, "p999", (double)hist_quantile(h, 0.999) / 1e3);
    json_dbl(&j, "max", (double)h->max_ns / 1e3);
    json_end(&j);
    json_end(&j);
}

/* Fork the echo server, run the client, print JSON; returns the exit code. */
int main(int argc, char **argv)
{
    struct pp_cfg cfg = {-1, -1, 50000, 2000, 32, 80};
    if (pingpong_args(argc, argv, &cfg) < 0) {
        fprintf(stderr, "usage: muster-pingpong [--cpu-client N] [--cpu-server N] [--iters N] [--warmup N] "
                        "[--req BYTES] [--resp BYTES]\n");
        return 2;
    }
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 1) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &len) < 0) {
        perror("muster-pingpong: listen");
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0)
        pingpong_server(lfd, &cfg);
    close(lfd);
    static struct hist h;
    hist_reset(&h);
    double secs = 0;
    int rc = pingpong_client(ntohs(a.sin_port), &cfg, &h, &secs);
    int status;
    if (rc < 0)
        kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    if (rc < 0) {
        perror("muster-pingpong: client");
        return 1;
    }
    pingpong_report(&cfg, &h, secs);
    return 0;
}
