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

/* How long a member may take to report healthy. */
#define HETCD_START_MS 15000

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

/* Exec member i of c (in the child); never returns. */
static void hetcd_exec(const struct hetcd *c, int i, const char *cluster)
{
    char name[16], dir[4096], curl[64], purl[64], log[4096];
    snprintf(name, sizeof name, "m%d", i);
    snprintf(dir, sizeof dir, "%s/etcd-%d", h_tmpdir(), i);
    snprintf(log, sizeof log, "%s/etcd-%d.log", h_tmpdir(), i);
    snprintf(curl, sizeof curl, "http://127.0.0.1:%u", (unsigned)c->client_port[i]);
    snprintf(purl, sizeof purl, "http://127.0.0.1:%u", (unsigned)c->peer_port[i]);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test program */
    FILE *f = freopen(log, "w", stderr);
    (void)f;
    dup2(2, 1);
    execlp("etcd", "etcd", "--name", name, "--data-dir", dir, "--listen-client-urls", curl,
           "--advertise-client-urls", curl, "--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
           "--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", h_tmpdir(),
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

/* Start an n-member cluster and wait until every member answers /health; 0, or -1. */
int hetcd_start(struct hetcd *c, int n)
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
            hetcd_exec(c, i, cluster);
        if (c->pid[i] < 0)
            return -1;
    }
    for (int i = 0; i < n; i++) {
        int64_t until = h_now_ms() + HETCD_START_MS;
        while (!hetcd_healthy(c, i)) {
            if (h_now_ms() > until) {
                fprintf(stderr, "etcd member %d not healthy after %d ms (log in %s)\n", i, HETCD_START_MS, h_tmpdir());
                return -1;
            }
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    return 0;
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
