/* A real etcd cluster on loopback ports for the high-availability tests. */
#include "hetcd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* How long the members may take to report healthy on a machine that is not loaded; hetcd_start_ms
 * stretches it with the load, up to HETCD_START_MAX_MS. */
#define HETCD_START_MS 15000
#define HETCD_START_MAX_MS 60000
/* Starts of a cluster whose member exited before it was healthy (a port chosen for it was taken by
 * another process before etcd bound it), each on new ports. */
#define HETCD_TRIES 3
/* The most all the attempts of one hetcd_start may take (tests/meson.build adds it to the etcd tests'
 * timeouts: the start is not counted in a test's own alarm). */
#define HETCD_BUDGET_MS 90000

/* Whether an etcd binary is on PATH (tests skip without one). */
int hetcd_available(void)
{
    return system("command -v etcd >/dev/null 2>&1") == 0;
}

/* A loopback port free right now (bound to port 0, then released). */
static uint16_t hetcd_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    uint16_t port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* The path of member i's data directory (suffix "") or log (".log") in start attempt try. */
static void hetcd_path(char *buf, size_t n, int try, int i, const char *suffix)
{
    snprintf(buf, n, "%s/etcd-%d-%d%s", h_tmpdir(), try, i, suffix);
}

/* Exec member i of c in start attempt try (in the child); never returns. */
static void hetcd_exec(const struct hetcd *c, int try, int i, const char *cluster)
{
    char name[16], dir[4096], curl[64], purl[64], log[4096], token[4096];
    snprintf(name, sizeof name, "m%d", i);
    hetcd_path(dir, sizeof dir, try, i, "");
    hetcd_path(log, sizeof log, try, i, ".log");
    snprintf(token, sizeof token, "%s-%d", h_tmpdir(), try);
    snprintf(curl, sizeof curl, "http://127.0.0.1:%u", (unsigned)c->client_port[i]);
    snprintf(purl, sizeof purl, "http://127.0.0.1:%u", (unsigned)c->peer_port[i]);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test program */
    FILE *f = freopen(log, "w", stderr);
    (void)f;
    dup2(2, 1);
    execlp("etcd", "etcd", "--name", name, "--data-dir", dir, "--listen-client-urls", curl,
           "--advertise-client-urls", curl, "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
           "--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", token,
           "--heartbeat-interval", "50", "--election-timeout", "500", (char *)NULL);
    _exit(127);
}

/* Whether member i answers GET /health with health true. */
static int hetcd_healthy(const struct hetcd *c, int i)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(c->client_port[i]),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {1, 0};
    char buf[2048] = "";
    size_t got = 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        static const char req[] = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
        if (write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
            ssize_t n;
            while (got < sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0)
                got += (size_t)n;
        }
    }
    if (fd >= 0)
        close(fd);
    buf[got] = '\0';
    return strstr(buf, "\"health\":\"true\"") != NULL;
}

/* The start deadline for the machine as it is now: HETCD_START_MS, stretched by the one-minute load
 * per CPU when that is over 1 (a loaded machine starts etcd slower), at most HETCD_START_MAX_MS.  Read
 * again at every poll, so the deadline follows the load while the members start. */
static int64_t hetcd_start_ms(double *load)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *load = 0;
    if (getloadavg(load, 1) != 1 || cpus < 1 || *load <= (double)cpus)
        return HETCD_START_MS;
    double ms = HETCD_START_MS * *load / (double)cpus;
    return ms > HETCD_START_MAX_MS ? HETCD_START_MAX_MS : (int64_t)ms;
}

/* Print the last lines of member i's log in attempt try to stderr (why it exited or is not healthy). */
static void hetcd_log_tail(int try, int i)
{
    char path[4096], line[1024], last[8][1024];
    int n = 0;
    hetcd_path(path, sizeof path, try, i, ".log");
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        snprintf(last[n++ % 8], sizeof last[0], "%s", line);
    fclose(f);
    for (int k = n > 8 ? n - 8 : 0; k < n; k++)
        fprintf(stderr, "  etcd %d: %s", i, last[k % 8]);
}

/* Whether member i has exited (reaped here, its pid cleared). */
static int hetcd_exited(struct hetcd *c, int i)
{
    if (c->pid[i] <= 0 || waitpid(c->pid[i], NULL, WNOHANG) != c->pid[i])
        return 0;
    c->pid[i] = 0;
    return 1;
}

/* Start attempt try of an n-member cluster on new ports and wait until every member answers /health, at
 * most until end (h_now_ms): 0; 1 when a member exited first (worth another attempt); -1 when one is still
 * not healthy at the deadline. */
static int hetcd_try(struct hetcd *c, int n, int try, int64_t end)
{
    char cluster[512] = "";
    memset(c, 0, sizeof *c);
    c->n = n;
    for (int i = 0; i < n; i++) {
        c->client_port[i] = hetcd_free_port();
        c->peer_port[i] = hetcd_free_port();
        size_t len = strlen(cluster), elen = strlen(c->endpoints);
        snprintf(cluster + len, sizeof cluster - len, "%sm%d=http://127.0.0.1:%u", i ? "," : "", i,
                 (unsigned)c->peer_port[i]);
        snprintf(c->endpoints + elen, sizeof c->endpoints - elen, "%s127.0.0.1:%u", i ? "," : "",
                 (unsigned)c->client_port[i]);
    }
    for (int i = 0; i < n; i++) {
        c->pid[i] = fork();
        if (c->pid[i] == 0)
            hetcd_exec(c, try, i, cluster);
        if (c->pid[i] < 0)
            return -1;
    }
    int64_t t0 = h_now_ms();
    for (int i = 0; i < n;) {
        double load;
        if (hetcd_healthy(c, i)) {
            i++;
            continue;
        }
        for (int k = 0; k < n; k++)
            if (hetcd_exited(c, k)) {
                fprintf(stderr, "etcd member %d exited while starting (attempt %d of %d):\n", k, try, HETCD_TRIES);
                hetcd_log_tail(try, k);
                return 1;
            }
        int64_t limit = hetcd_start_ms(&load);
        if (t0 + limit > end)
            limit = end - t0;
        if (h_now_ms() - t0 > limit) {
            fprintf(stderr, "etcd member %d not healthy after %lld ms (load %.2f on %ld CPUs; log in %s):\n", i,
                    (long long)limit, load, sysconf(_SC_NPROCESSORS_ONLN), h_tmpdir());
            hetcd_log_tail(try, i);
            return -1;
        }
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* Start an n-member cluster and wait until every member answers /health, within a deadline that
 * follows the machine's load; a member that exits first has the cluster started again on new ports,
 * HETCD_TRIES times in all, within HETCD_BUDGET_MS.  The test's alarm is held meanwhile.  0, or -1. */
int hetcd_start(struct hetcd *c, int n)
{
    unsigned alarm_left = alarm(0);
    int64_t end = h_now_ms() + HETCD_BUDGET_MS;
    int rc = 1;
    for (int try = 1; try <= HETCD_TRIES && rc > 0 && h_now_ms() < end; try++)
        if ((rc = hetcd_try(c, n, try, end)) != 0)
            hetcd_stop(c);
    if (alarm_left)
        alarm(alarm_left);
    return rc == 0 ? 0 : -1;
}

/* SIGKILL member i and reap it. */
void hetcd_kill(struct hetcd *c, int i)
{
    if (c->pid[i] <= 0)
        return;
    kill(c->pid[i], SIGKILL);
    waitpid(c->pid[i], NULL, 0);
    c->pid[i] = 0;
}

/* Stop every member still running. */
void hetcd_stop(struct hetcd *c)
{
    for (int i = 0; i < c->n; i++)
        hetcd_kill(c, i);
}
