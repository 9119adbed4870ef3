/* muster-tsstorm: simulated torch ranks doing init_process_group's store traffic over
 * TCPStore's protocol, many connections on one epoll set (bench/storm.sh runs several).
 * Each rank, as torch 2.x's TCPStore client and distributed_c10d do it:
 *   connect; VALIDATE + PING (VALIDATE era only; connect and handshake retried with backoff,
 *   as the client does); ADD init/ 1 (waitForWorkers' rank counter); the store-based barrier:
 *   ADD K 1, ADD K 0, the rank that reads the world size SETs K:last_worker, every rank WAITs
 *   on K:last_worker; then the NCCL unique id: rank 0 SETs 128 bytes under D/0, every other
 *   rank WAITs on it and GETs it (torch's get), and the bytes are checked.
 * Rank r connects to node r / per-node, whose address is line node of --targets (or every
 * rank to --connect).  The launch is --start-at (CLOCK_REALTIME ns, shared by all processes);
 * the output is one JSON object with wall-clock times, so the script takes the last rank
 * over every process.  Bounded by --timeout and the retry limit. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TSS_BATCH 256          /* connects started between two epoll waits */
#define TSS_RETRY_NS 10000000ull /* first reconnect delay, doubled up to 1 s */
#define TSS_RETRIES 30         /* reconnects of one rank before it fails */
#define TSS_ID 128             /* ncclUniqueId bytes */
#define TSS_MAGIC 0x3C85F7CEu

enum { S_IDLE, S_CONNECT, S_PING, S_INIT, S_ADD1, S_ADD0, S_BARWAIT, S_IDWAIT, S_GET, S_DONE, S_FAILED };
/* Type bytes: [0] torch 1.13's numbering, [1] the VALIDATE era's. */
enum { C_VALIDATE, C_SET, C_GET, C_ADD, C_WAIT, C_PING };
static const int tss_codes[2][6] = {{-1, 0, 2, 3, 5, -1}, {0, 1, 3, 4, 6, 13}};

struct tss_conn {
    int fd;
    uint8_t state, retries, handshook;
    uint16_t inlen, outlen, outoff;
    uint64_t retry_at;
    uint8_t in[8 + TSS_ID + 8];
    uint8_t out[400];
};

struct tss {
    struct sockaddr_in *addrs; /* per node */
    unsigned nnodes, per_node;
    uint64_t world, first, count;
    int era_new;
    double timeout;
    uint64_t start_at;
    int ep;
    struct tss_conn *c;
    uint8_t id[TSS_ID];
    uint64_t done, failed, retries, pending_retry, next_open;
    uint64_t t_hs_last, t_init_last, t_bar_last, t_id_first, t_id_last;
    uint64_t n_hs, n_init, n_bar; /* ranks past the handshake, the init/ ADD, the barrier */
    uint64_t *id_ns; /* per rank: the id in hand, ns after the launch */
    char kbar[128], klast[160], kid[128];
    char why[160];
};

/* CLOCK_REALTIME now in ns: processes compare launch and finish times on it. */
static uint64_t tss_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Append a little-endian integer of width bytes to c's output. */
static void tss_le(struct tss_conn *c, uint64_t v, int width)
{
    for (int i = 0; i < width; i++, v >>= 8)
        c->out[c->outlen++] = (uint8_t)v;
}

/* Append a u64 length and bytes to c's output. */
static void tss_str(struct tss_conn *c, const void *p, size_t n)
{
    tss_le(c, n, 8);
    memcpy(c->out + c->outlen, p, n);
    c->outlen = (uint16_t)(c->outlen + n);
}

/* Append the type byte of command cmd in the configured numbering. */
static void tss_cmd(struct tss *T, struct tss_conn *c, int cmd)
{
    c->out[c->outlen++] = (uint8_t)tss_codes[T->era_new][cmd];
}

/* Append a request: ADD key v, SET key value, WAIT [key] or GET key. */
static void tss_req(struct tss *T, struct tss_conn *c, int cmd, const char *key, const void *val, size_t vlen,
                    int64_t add)
{
    tss_cmd(T, c, cmd);
    if (cmd == C_WAIT)
        tss_le(c, 1, 8);
    tss_str(c, key, strlen(key));
    if (cmd == C_SET)
        tss_str(c, val, vlen);
    else if (cmd == C_ADD)
        tss_le(c, (uint64_t)add, 8);
}

/* Write c's pending output; 0, or -1 when the connection failed. */
static int tss_flush(struct tss *T, struct tss_conn *c)
{
    while (c->outoff < c->outlen) {
        ssize_t n = send(c->fd, c->out + c->outoff, c->outlen - c->outoff, MSG_NOSIGNAL);
        if (n < 0 && errno == EAGAIN) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u64 = (uint64_t)(c - T->c)};
            return epoll_ctl(T->ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
        if (n <= 0)
            return -1;
        c->outoff = (uint16_t)(c->outoff + n);
    }
    c->outoff = c->outlen = 0;
    return 0;
}

/* Fail rank i for good, with the first reason kept for the report. */
static void tss_fail(struct tss *T, struct tss_conn *c, const char *why)
{
    if (!T->why[0])
        snprintf(T->why, sizeof T->why, "rank %" PRIu64 ": %s", T->first + (uint64_t)(c - T->c), why);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->state = S_FAILED;
    T->failed++;
}

static void tss_open(struct tss *T, struct tss_conn *c);

/* Drop c's socket and reconnect it later, doubling the delay (torch retries connect and handshake). */
static void tss_retry(struct tss *T, struct tss_conn *c, const char *why)
{
    if (c->handshook || c->retries >= TSS_RETRIES) {
        tss_fail(T, c, why);
        return;
    }
    close(c->fd);
    c->fd = -1;
    uint64_t d = TSS_RETRY_NS << (c->retries < 7 ? c->retries : 7);
    d = d > 1000000000ull ? 1000000000ull : d;
    c->retry_at = tss_now() + d / 2 + (uint64_t)rand() % (d / 2 + 1);
    c->retries++;
    c->state = S_IDLE;
    T->retries++;
    T->pending_retry++;
}

/* Start connecting c (non-blocking); a failure here is retried like a refused connect. */
static void tss_open(struct tss *T, struct tss_conn *c)
{
    uint64_t rank = T->first + (uint64_t)(c - T->c);
    const struct sockaddr_in *a = &T->addrs[T->nnodes == 1 ? 0 : rank / T->per_node];
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        tss_fail(T, c, strerror(errno));
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->inlen = c->outlen = c->outoff = 0;
    c->state = S_CONNECT;
    struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = (uint64_t)(c - T->c)};
    if ((connect(c->fd, (const struct sockaddr *)a, sizeof *a) < 0 && errno != EINPROGRESS) ||
        epoll_ctl(T->ep, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        tss_retry(T, c, strerror(errno));
}

/* The connect finished: send the handshake (or, before VALIDATE existed, the first ADD). */
static void tss_connected(struct tss *T, struct tss_conn *c)
{
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)(c - T->c)};
    if (err || epoll_ctl(T->ep, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
        tss_retry(T, c, strerror(err ? err : errno));
        return;
    }
    if (T->era_new) {
        tss_cmd(T, c, C_VALIDATE);
        tss_le(c, TSS_MAGIC, 4);
        tss_cmd(T, c, C_PING);
        tss_le(c, (uint64_t)(c - T->c) + 1, 4);
        c->state = S_PING;
    } else {
        c->handshook = 1;
        tss_req(T, c, C_ADD, "init/", NULL, 0, 1);
        c->state = S_INIT;
    }
    if (tss_flush(T, c) < 0)
        tss_retry(T, c, "send failed");
}

/* Bytes the reply awaited in c's state needs (GET: once its length is in). */
static size_t tss_want(const struct tss_conn *c)
{
    switch (c->state) {
    case S_PING: return 4;
    case S_INIT: case S_ADD1: case S_ADD0: return 8;
    case S_BARWAIT: case S_IDWAIT: return 1;
    case S_GET: {
        if (c->inlen < 8)
            return 8;
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--)
            n = n << 8 | c->in[i];
        return n > TSS_ID ? SIZE_MAX : 8 + (size_t)n;
    }
    default: return SIZE_MAX;
    }
}

/* Read a little-endian i64 from p. */
static int64_t tss_i64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return (int64_t)v;
}

/* Rank of c holds the id: record when. */
static void tss_have_id(struct tss *T, struct tss_conn *c, uint64_t now)
{
    c->state = S_DONE;
    T->done++;
    uint64_t t = now > T->start_at ? now - T->start_at : 0;
    T->id_ns[c - T->c] = t;
    if (!T->t_id_first || now < T->t_id_first)
        T->t_id_first = now;
    if (now > T->t_id_last)
        T->t_id_last = now;
}

/* Handle one whole reply to c's current step and send the next step. */
static void tss_step(struct tss *T, struct tss_conn *c, uint64_t now)
{
    uint64_t rank = T->first + (uint64_t)(c - T->c);
    switch (c->state) {
    case S_PING:
        if (c->in[0] != (uint8_t)((c - T->c) + 1)) {
            tss_fail(T, c, "ping echoed another nonce");
            return;
        }
        c->handshook = 1;
        T->t_hs_last = now > T->t_hs_last ? now : T->t_hs_last;
        T->n_hs++;
        tss_req(T, c, C_ADD, "init/", NULL, 0, 1);
        c->state = S_INIT;
        break;
    case S_INIT:
        T->t_init_last = now > T->t_init_last ? now : T->t_init_last;
        T->n_init++;
        if (!T->era_new)
            T->t_hs_last = T->t_init_last, T->n_hs++;
        tss_req(T, c, C_ADD, T->kbar, NULL, 0, 1);
        c->state = S_ADD1;
        break;
    case S_ADD1:
        tss_req(T, c, C_ADD, T->kbar, NULL, 0, 0);
        c->state = S_ADD0;
        break;
    case S_ADD0:
        if (tss_i64(c->in) == (int64_t)T->world)
            tss_req(T, c, C_SET, T->klast, "1", 1, 0);
        tss_req(T, c, C_WAIT, T->klast, NULL, 0, 0);
        c->state = S_BARWAIT;
        break;
    case S_BARWAIT:
        T->t_bar_last = now > T->t_bar_last ? now : T->t_bar_last;
        T->n_bar++;
        if (rank == 0) {
            tss_req(T, c, C_SET, T->kid, T->id, TSS_ID, 0);
            if (tss_flush(T, c) < 0)
                tss_fail(T, c, "send failed");
            else
                tss_have_id(T, c, now);
            return;
        }
        tss_req(T, c, C_WAIT, T->kid, NULL, 0, 0);
        c->state = S_IDWAIT;
        break;
    case S_IDWAIT:
        tss_req(T, c, C_GET, T->kid, NULL, 0, 0);
        c->state = S_GET;
        break;
    case S_GET:
        if (c->inlen != 8 + TSS_ID || memcmp(c->in + 8, T->id, TSS_ID) != 0) {
            tss_fail(T, c, "the id read back differs");
            return;
        }
        tss_have_id(T, c, now);
        return;
    }
    if (tss_flush(T, c) < 0)
        tss_fail(T, c, "send failed");
}

/* Read what c's socket holds and take every whole reply in it. */
static void tss_read(struct tss *T, struct tss_conn *c, uint64_t now)
{
    for (int rounds = 0; rounds < 16 && c->state != S_DONE && c->state != S_FAILED; rounds++) {
        size_t want = tss_want(c);
        if (want == SIZE_MAX) {
            tss_fail(T, c, "an unexpected reply");
            return;
        }
        if (c->inlen < want) {
            ssize_t n = recv(c->fd, c->in + c->inlen, want - c->inlen, 0);
            if (n < 0 && errno == EAGAIN)
                return;
            if (n <= 0) {
                tss_retry(T, c, n == 0 ? "closed by the server" : strerror(errno));
                return;
            }
            c->inlen = (uint16_t)(c->inlen + n);
            continue;
        }
        tss_step(T, c, now);
        c->inlen = 0;
    }
}

/* Handle one readiness of connection i. */
static void tss_event(struct tss *T, struct tss_conn *c, uint32_t events, uint64_t now)
{
    if (c->state == S_CONNECT) {
        tss_connected(T, c);
        return;
    }
    if (c->state == S_DONE || c->state == S_FAILED || c->fd < 0)
        return;
    if ((events & EPOLLOUT) && c->outlen) {
        if (tss_flush(T, c) < 0) {
            tss_fail(T, c, "send failed");
            return;
        }
        if (!c->outlen) {
            struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)(c - T->c)};
            epoll_ctl(T->ep, EPOLL_CTL_MOD, c->fd, &ev);
        }
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
        tss_read(T, c, now);
}

/* Reconnect the ranks whose retry delay has passed. */
static void tss_retries(struct tss *T, uint64_t now)
{
    for (uint64_t i = 0; i < T->count && T->pending_retry; i++) {
        struct tss_conn *c = &T->c[i];
        if (c->state == S_IDLE && c->retry_at && c->retry_at <= now) {
            T->pending_retry--;
            c->retry_at = 0;
            tss_open(T, c);
        }
    }
}

/* Read the targets file: one "HOST PORT" per node; returns the count or -1. */
static int tss_targets(struct tss *T, const char *path, const char *single)
{
    unsigned cap = 1024;
    T->addrs = calloc(cap, sizeof *T->addrs);
    FILE *f = single ? NULL : fopen(path, "r");
    if (!T->addrs || (!single && !f))
        return -1;
    char host[64], line[128];
    unsigned port;
    while (single ? T->nnodes == 0 : fgets(line, sizeof line, f) != NULL) {
        if (single ? sscanf(single, "%63[^:]:%u", host, &port) != 2 : sscanf(line, "%63s %u", host, &port) != 2)
            break;
        if (T->nnodes == cap && !(T->addrs = realloc(T->addrs, (cap *= 2) * sizeof *T->addrs)))
            return -1;
        struct sockaddr_in *a = &T->addrs[T->nnodes++];
        memset(a, 0, sizeof *a);
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
            return -1;
    }
    if (f)
        fclose(f);
    return (int)T->nnodes;
}

/* Order two u64 for qsort. */
static int tss_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The p-th quantile (0..1) of the ranks' id times in ms, over the ranks that got it. */
static double tss_quantile(struct tss *T, double p)
{
    uint64_t *v = malloc((T->done + 1) * sizeof *v), n = 0;
    if (!v)
        return -1;
    for (uint64_t i = 0; i < T->count; i++)
        if (T->c[i].state == S_DONE)
            v[n++] = T->id_ns[i];
    qsort(v, n, sizeof *v, tss_cmp);
    double r = n ? (double)v[(uint64_t)(p * (double)(n - 1))] / 1e6 : -1;
    free(v);
    return r;
}

/* Milliseconds from the launch to t (-1 when t never came). */
static double tss_ms(const struct tss *T, uint64_t t)
{
    return t ? ((double)t - (double)T->start_at) / 1e6 : -1;
}

/* Parse the options, run the storm to the end or the deadline and print the JSON line. */
int main(int argc, char **argv)
{
    struct tss T = {.per_node = 8, .era_new = 1, .timeout = 120};
    const char *targets = NULL, *single = NULL, *tag = "";
    static const struct option opts[] = {
        {"targets", required_argument, NULL, 't'}, {"connect", required_argument, NULL, 'c'},
        {"world", required_argument, NULL, 'w'},   {"first", required_argument, NULL, 'f'},
        {"count", required_argument, NULL, 'n'},   {"per-node", required_argument, NULL, 'p'},
        {"era", required_argument, NULL, 'e'},     {"start-at", required_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 'T'}, {"tag", required_argument, NULL, 'g'},
        {NULL, 0, NULL, 0},
    };
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 't': targets = optarg; break;
        case 'c': single = optarg; break;
        case 'w': T.world = strtoull(optarg, NULL, 10); break;
        case 'f': T.first = strtoull(optarg, NULL, 10); break;
        case 'n': T.count = strtoull(optarg, NULL, 10); break;
        case 'p': T.per_node = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'e': T.era_new = strcmp(optarg, "old") != 0; break;
        case 's': T.start_at = strtoull(optarg, NULL, 10); break;
        case 'T': T.timeout = strtod(optarg, NULL); break;
        case 'g': tag = optarg; break;
        default: goto usage;
        }
    }
    if ((!targets == !single) || !T.world || !T.count || T.first + T.count > T.world || !T.per_node ||
        T.timeout <= 0 || T.timeout > 3600) {
    usage:
        fprintf(stderr, "usage: muster-tsstorm (--targets FILE | --connect HOST:PORT) --world N --first R --count C "
                        "[--per-node 8] [--era new|old] [--start-at REALTIME_NS] [--timeout S] [--tag T]\n");
        return 2;
    }
    if (tss_targets(&T, targets, single) < 1 || (!single && (T.world - 1) / T.per_node >= T.nnodes)) {
        fprintf(stderr, "muster-tsstorm: bad or short targets (%u nodes for %" PRIu64 " ranks)\n", T.nnodes, T.world);
        return 2;
    }
    snprintf(T.kbar, sizeof T.kbar, "/worker/attempt_0/store_based_barrier_key:%s0", tag);
    snprintf(T.klast, sizeof T.klast, "%s:last_worker", T.kbar);
    snprintf(T.kid, sizeof T.kid, "/worker/attempt_0/default_pg/%s0", tag);
    for (int i = 0; i < TSS_ID; i++)
        T.id[i] = (uint8_t)(i * 7 + 1);
    T.c = calloc(T.count, sizeof *T.c);
    T.id_ns = calloc(T.count, sizeof *T.id_ns);
    struct epoll_event *evs = calloc(1024, sizeof *evs);
    if (!T.c || !T.id_ns || !evs || (T.ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        perror("muster-tsstorm");
        return 1;
    }
    for (uint64_t i = 0; i < T.count; i++)
        T.c[i].fd = -1;
    srand((unsigned)getpid());
    uint64_t now = tss_now();
    if (!T.start_at)
        T.start_at = now;
    while (now < T.start_at) { /* bounded by the launch time, checked against the timeout below */
        if (T.start_at - now > (uint64_t)(T.timeout * 1e9))
            break;
        struct timespec d = {.tv_sec = (time_t)((T.start_at - now) / 1000000000ull),
                             .tv_nsec = (long)((T.start_at - now) % 1000000000ull)};
        nanosleep(&d, NULL);
        now = tss_now();
    }
    uint64_t deadline = T.start_at + (uint64_t)(T.timeout * 1e9);
    while (T.done + T.failed < T.count && now < deadline) {
        for (unsigned k = 0; k < TSS_BATCH && T.next_open < T.count; k++)
            tss_open(&T, &T.c[T.next_open++]);
        int ms = T.next_open < T.count ? 0 : T.pending_retry ? 5 : 100;
        int n = epoll_wait(T.ep, evs, 1024, ms);
        now = tss_now();
        for (int i = 0; i < n; i++)
            tss_event(&T, &T.c[evs[i].data.u64], evs[i].events, now);
        if (T.pending_retry)
            tss_retries(&T, now);
    }
    uint64_t unfinished = T.count - T.done - T.failed;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    printf("{\"first\":%" PRIu64 ",\"count\":%" PRIu64 ",\"world\":%" PRIu64 ",\"done\":%" PRIu64
           ",\"failed\":%" PRIu64 ",\"unfinished\":%" PRIu64 ",\"retries\":%" PRIu64 ",\"start_at\":%" PRIu64
           ",\"t_id_last\":%" PRIu64 ",\"hs_last_ms\":%.1f,\"init_last_ms\":%.1f,\"barrier_last_ms\":%.1f"
           ",\"id_first_ms\":%.1f,\"id_p50_ms\":%.1f,\"id_p99_ms\":%.1f,\"id_last_ms\":%.1f,\"n_hs\":%" PRIu64 ",\"n_init\":%" PRIu64 ",\"n_bar\":%" PRIu64 ",\"cpu_s\":%.3f,\"why\":\"%s\"}\n",
           T.first, T.count, T.world, T.done, T.failed, unfinished, T.retries, T.start_at, T.t_id_last,
           tss_ms(&T, T.t_hs_last), tss_ms(&T, T.t_init_last), tss_ms(&T, T.t_bar_last), tss_ms(&T, T.t_id_first),
           tss_quantile(&T, 0.5), tss_quantile(&T, 0.99), tss_ms(&T, T.t_id_last), T.n_hs, T.n_init, T.n_bar, cpu,
           T.why[0] ? T.why : (unfinished ? "timeout" : ""));
    return T.done == T.count ? 0 : 1;
}
