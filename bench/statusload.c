/*
 * What the HTTP status endpoints cost with many jobs (bench/statusload.sh):
 * N one-node jobs form generation 1 and break (each joins, then closes its
 * connection), then: the bytes and time of /v1/status and /metrics, the
 * store's ping latency while a client GETs /v1/status back to back (the
 * same URI, and a new offset each time so no answer is reused), and
 * musterd's resident memory with 40 GETs whose answers are never read.
 *
 *   muster-statusload URL METRICS_PORT MUSTERD_PID N
 */
#include <arpa/inet.h>
#include <muster/muster.h>
#include <muster/rdzv.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint16_t s_port;
static atomic_int s_stop;
static atomic_int s_uncached;

/* Monotonic milliseconds as a double. */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A socket connected to the metrics listener (rcvbuf bytes of receive buffer when > 0); -1 on failure. */
static int http_open(int rcvbuf)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(s_port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send a GET of path on fd. */
static void http_ask(int fd, const char *path)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n)
        perror("write");
}

/* GET path; the bytes of the whole answer, and its lines in *lines when not NULL. */
static size_t http_get(const char *path, size_t *lines)
{
    int fd = http_open(0);
    if (fd < 0)
        return 0;
    http_ask(fd, path);
    static char buf[1 << 16];
    size_t total = 0, nl = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0) {
        total += (size_t)r;
        for (ssize_t i = 0; i < r; i++)
            nl += buf[i] == '\n';
    }
    close(fd);
    if (lines)
        *lines = nl;
    return total;
}

/* Print the bytes, lines and median time of 5 GETs of path. */
static void measure(const char *path)
{
    double t[5];
    size_t bytes = 0, lines = 0;
    for (int i = 0; i < 5; i++) {
        double t0 = now_ms();
        bytes = http_get(path, &lines);
        t[i] = now_ms() - t0;
    }
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (t[j] < t[i]) {
                double x = t[i];
                t[i] = t[j];
                t[j] = x;
            }
    printf("GET %-22s %10zu bytes %8zu lines  median %.1f ms (min %.1f, max %.1f)\n", path, bytes, lines, t[2], t[0],
           t[4]);
}

/* GET /v1/status back to back until told to stop (a new offset each time when s_uncached). */
static void *hammer(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !atomic_load(&s_stop); i++) {
        char path[64];
        snprintf(path, sizeof path, atomic_load(&s_uncached) ? "/v1/status?offset=%u" : "/v1/status", i % 1000);
        http_get(path, NULL);
    }
    return NULL;
}

/* Ping the store every millisecond for secs seconds; print the worst and the 99th percentile. */
static void pings(muster_t *m, const char *what, int secs)
{
    static uint64_t v[200000];
    size_t n = 0;
    for (double end = now_ms() + secs * 1000.0; now_ms() < end && n < sizeof v / sizeof v[0]; usleep(1000)) {
        double t0 = now_ms();
        if (muster_ping(m, NULL, 10000) == MUSTER_OK)
            v[n++] = (uint64_t)((now_ms() - t0) * 1000);
    }
    uint64_t worst = 0;
    for (size_t i = 0; i < n; i++)
        worst = v[i] > worst ? v[i] : worst;
    size_t above = 0;
    uint64_t p99 = 0;
    for (uint64_t cut = 0; cut <= worst; cut += 100) { /* smallest 0.1 ms step with <= 1% above it */
        above = 0;
        for (size_t i = 0; i < n; i++)
            above += v[i] > cut;
        if (above * 100 <= n) {
            p99 = cut;
            break;
        }
    }
    printf("ping %-34s %6zu pings  p99 <= %.1f ms  max %.1f ms\n", what, n, p99 / 1000.0, worst / 1000.0);
}

/* musterd's resident set in MiB. */
static double rss_mib(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    double kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lf", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib / 1024;
}

/* N one-node jobs form generation 1 and break. */
static void make_jobs(const char *url, int n)
{
    for (int i = 0; i < n; i++) {
        char u[256];
        snprintf(u, sizeof u, "%s/job%05d", url, i);
        int err = 0;
        muster_t *m = muster_connect(u, &err);
        muster_rdzv_opts o = {.node_id = "solo", .local_world_size = 1, .min_nodes = 1, .max_nodes = 1};
        muster_assignment *a = NULL;
        if (!m || muster_rdzv_join(m, &o, &a, 10000) != MUSTER_OK) {
            fprintf(stderr, "job %d: cannot join\n", i);
            exit(1);
        }
        muster_assignment_free(a);
        muster_close(m);
    }
}

/* 40 GETs of /v1/status?offset=K (distinct answers) whose answers are never read: musterd's memory after. */
static void unread(int pid)
{
    double before = rss_mib(pid);
    int fds[40];
    for (int i = 0; i < 40; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/status?offset=%d", i);
        fds[i] = http_open(4096);
        if (fds[i] >= 0)
            http_ask(fds[i], path);
    }
    sleep(2);
    printf("40 unread GETs: musterd RSS %.1f -> %.1f MiB (+%.1f)\n", before, rss_mib(pid), rss_mib(pid) - before);
    for (int i = 0; i < 40; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s URL METRICS_PORT MUSTERD_PID N\n", argv[0]);
        return 2;
    }
    s_port = (uint16_t)atoi(argv[2]);
    int pid = atoi(argv[3]), n = atoi(argv[4]);
    double t0 = now_ms();
    make_jobs(argv[1], n);
    printf("%d one-node jobs formed and broken in %.1f s; musterd RSS %.1f MiB\n", n, (now_ms() - t0) / 1000,
           rss_mib(pid));
    measure("/v1/status");
    measure("/v1/status?offset=5000");
    measure("/metrics");
    int err = 0;
    muster_t *m = muster_connect(argv[1], &err);
    pings(m, "idle", 2);
    pthread_t th;
    pthread_create(&th, NULL, hammer, NULL);
    pings(m, "while GET /v1/status back to back", 3);
    atomic_store(&s_uncached, 1);
    pings(m, "while GET /v1/status?offset=<new>", 3);
    atomic_store(&s_stop, 1);
    pthread_join(th, NULL);
    muster_close(m);
    unread(pid);
    return 0;
}
