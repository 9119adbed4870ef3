/*
 * The lifecycle of TCPStore connections under musterd's connection bounds:
 * a client that closes while its input is held unread behind a parked WAIT
 * or BARRIER is noticed at once (its connection, fd and parked request are
 * released and counted, so --max-connections is not exhausted by the
 * dead), also when it resets instead of closing, and the native
 * connections' idle and request timeouts apply to TCPStore connections too.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"
#include "tswire.h"

#define T_MS 3000
#define CLIENTS 4

/* Poll a counter of d until it equals want or ms pass; the last value read. */
static long long stat_becomes(struct h_daemon *d, const char *name, long long want, int ms)
{
    long long v = h_stat(d, name);
    for (int64_t end = h_now_ms() + ms; v != want && h_now_ms() < end; v = h_stat(d, name)) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return v;
}

/* Send a parked request (WAIT on a key nobody sets, or a BARRIER) followed by more pipelined
 * requests than the server reads ahead, from a child (the unread tail may block the sender). */
static pid_t park_with_backlog(int fd, int barrier)
{
    enum { PINGS = 70000 }; /* 350 KB: past the 256 KiB read-ahead plus one 64 KiB read */
    struct tsw_buf b = {0};
    if (barrier) {
        tsw_u8(&b, TSW_BARRIER);
        tsw_str(&b, "/lifecycle-barrier");
        tsw_u64(&b, 1000); /* a world size that is never reached */
    } else {
        tsw_u8(&b, TSW_WAIT);
        tsw_u64(&b, 1);
        tsw_str(&b, "/lifecycle-never");
    }
    for (uint32_t i = 0; i < PINGS; i++) {
        tsw_u8(&b, TSW_PING);
        tsw_u32(&b, i);
    }
    pid_t pid = fork();
    if (pid == 0)
        _exit(raw_send(fd, b.p, b.n) == 0 ? 0 : 1);
    tsw_free(&b);
    return pid;
}

/* A new client can set key to val and read it back. */
static void served(uint16_t port, const char *key, const char *val)
{
    int fd = tsw_open(port);
    CHECK_EQ(tsw_req(fd, TSW_SET, key, val, NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_GET, key, NULL), 0);
    size_t n = 0;
    char *v = tsw_blob(fd, T_MS, &n);
    CHECK(v && n == strlen(val) && memcmp(v, val, n) == 0);
    free(v);
    close(fd);
}

/* CLIENTS clients park a request each behind a held backlog, then go (reset: with SO_LINGER 0, so
 * the kernel sends a reset instead of a FIN); their slots come back with the parked requests counted,
 * and with --max-connections equal to their number, a new client gets in and is served. */
static void gone_while_held(int reset)
{
    struct h_daemon d;
    char max[16];
    snprintf(max, sizeof max, "%d", CLIENTS);
    const char *extra[] = {"--max-connections", max, NULL};
    uint16_t port = tsw_start(&d, extra);
    CHECK(port);
    if (!port)
        return;
    int fds[CLIENTS];
    pid_t pids[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        fds[i] = tsw_open(port);
        CHECK(fds[i] >= 0);
        pids[i] = park_with_backlog(fds[i], i % 2);
    }
    for (int i = 0; i < CLIENTS; i++) {
        int st = 0;
        CHECK_EQ(waitpid(pids[i], &st, 0), pids[i]);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    CHECK(tsw_quiet(fds[0], 300)); /* parked: nothing is answered */
    CHECK_EQ(h_stat(&d, "tcpstore_connections_current"), CLIENTS);
    long long ab0 = h_stat(&d, "tcpstore_waits_abandoned");
    for (int i = 0; i < CLIENTS; i++) {
        struct linger lg = {1, 0};
        if (reset)
            CHECK_EQ(setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
        close(fds[i]);
    }
    CHECK_EQ(stat_becomes(&d, "tcpstore_connections_current", 0, T_MS), 0);
    CHECK_EQ(h_stat(&d, "tcpstore_waits_abandoned"), ab0 + CLIENTS);
    served(port, "/after", "ok");
    CHECK_EQ(h_stop(&d), 0);
}

/* Clients that close with a parked request and a held backlog free their slots. */
static void t_close_while_held(void *arg)
{
    (void)arg;
    gone_while_held(0);
}

/* Clients that reset instead are released the same way: epoll reports a reset as an error and a
 * hang-up, not the read-side hang-up a FIN gives. */
static void t_reset_while_held(void *arg)
{
    (void)arg;
    gone_while_held(1);
}

/* Input held behind a parked request is bounded by --tcpstore-max-request: past it the connection is
 * closed and counted, and other clients are served. */
static void t_held_over_bound(void *arg)
{
    (void)arg;
    struct h_daemon d;
    const char *extra[] = {"--tcpstore-max-request", "100K", "--tcpstore-max-value", "64K", NULL};
    uint16_t port = tsw_start(&d, extra);
    CHECK(port);
    if (!port)
        return;
    int fd = tsw_open(port);
    pid_t pid = park_with_backlog(fd, 0);
    CHECK(tsw_closed(fd, T_MS));
    int st = 0;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    close(fd);
    CHECK_EQ(h_stat(&d, "limit_tcpstore_request"), 1);
    CHECK_EQ(stat_becomes(&d, "tcpstore_connections_current", 0, T_MS), 0);
    served(port, "/other", "1");
    CHECK_EQ(h_stop(&d), 0);
}

/* Send the first bytes of a SET (4 of its key's 10 bytes), then nothing. */
static void send_half_set(int fd)
{
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_SET);
    tsw_u64(&b, 10);
    tsw_raw(&b, "/hal", 4);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
}

/* --idle-timeout and --request-timeout apply to TCPStore connections as to native ones: a silent
 * connection after its requests is closed, as is one whose request stays incomplete, each counted; a
 * parked WAIT is not idle, and a connection that never sent a byte (torch 1.x's second socket) is
 * left alone. */
static void t_timeouts(void *arg)
{
    (void)arg;
    enum { MS = 600 };
    struct h_daemon d;
    const char *extra[] = {"--idle-timeout", "600", "--request-timeout", "600", NULL};
    uint16_t port = tsw_start(&d, extra);
    CHECK(port);
    if (!port)
        return;
    int idle = tsw_open(port), parked = tsw_open(port), half = tsw_open(port), silent = tsw_connect(port);
    int64_t t0 = h_now_ms();
    CHECK_EQ(tsw_req(idle, TSW_SET, "/idle", "1", NULL), 0);
    CHECK_EQ(tsw_send_wait(parked, "/later"), 0);
    send_half_set(half);
    CHECK(tsw_closed(idle, 3 * MS));
    CHECK(tsw_closed(half, 3 * MS));
    CHECK(h_now_ms() - t0 < 3 * MS);
    CHECK_EQ(h_stat(&d, "idle_closed"), 1);
    CHECK_EQ(h_stat(&d, "request_timeout"), 1);
    CHECK(tsw_quiet(parked, 2 * MS)); /* still parked, not closed */
    int setter = tsw_open(port);
    CHECK_EQ(tsw_req(setter, TSW_SET, "/later", "x", NULL), 0);
    CHECK_EQ(tsw_byte(parked, 3 * MS), 0); /* STOP_WAITING */
    CHECK(tsw_quiet(silent, 10)); /* no byte, no close */
    CHECK_EQ(h_stat(&d, "tcpstore_connections_current"), 3);
    close(idle);
    close(parked);
    close(half);
    close(silent);
    close(setter);
    CHECK_EQ(h_stop(&d), 0);
}

/* The idle count of a connection whose parked WAIT was answered starts at the answer: the timer that
 * found it waiting a while before must not close it as idle right after its reply. */
static void t_idle_after_wait(void *arg)
{
    (void)arg;
    enum { MS = 600 };
    struct h_daemon d;
    const char *extra[] = {"--idle-timeout", "600", NULL};
    uint16_t port = tsw_start(&d, extra);
    CHECK(port);
    if (!port)
        return;
    int parked = tsw_open(port);
    CHECK_EQ(tsw_send_wait(parked, "/answered"), 0);
    /* Past the first idle deadline (the timer finds the WAIT parked), short of the second one. */
    CHECK(tsw_quiet(parked, MS * 5 / 3));
    int setter = tsw_open(port);
    CHECK_EQ(tsw_req(setter, TSW_SET, "/answered", "1", NULL), 0);
    CHECK_EQ(tsw_byte(parked, 3 * MS), 0); /* STOP_WAITING */
    int64_t answered = h_now_ms();
    CHECK(tsw_quiet(parked, MS / 2)); /* not idle yet: the count began at the answer */
    CHECK(tsw_closed(parked, 3 * MS)); /* then idle */
    CHECK(h_now_ms() - answered >= MS - 50);
    close(parked);
    close(setter);
    CHECK_EQ(h_stop(&d), 0);
}

/* A connection in the middle of a request is not idle: a request begun after the connection's last whole
 * one is bounded by --request-timeout from its first byte, and closed and counted as such, not as idle. */
static void t_partial_not_idle(void *arg)
{
    (void)arg;
    enum { MS = 600 };
    struct h_daemon d;
    const char *extra[] = {"--idle-timeout", "600", "--request-timeout", "600", NULL};
    uint16_t port = tsw_start(&d, extra);
    CHECK(port);
    if (!port)
        return;
    int half = tsw_open(port);
    CHECK(tsw_quiet(half, MS / 2)); /* half the idle time passes after the handshake */
    send_half_set(half);
    CHECK(tsw_closed(half, 3 * MS));
    CHECK_EQ(h_stat(&d, "request_timeout"), 1);
    CHECK_EQ(h_stat(&d, "idle_closed"), 0);
    close(half);
    CHECK_EQ(h_stop(&d), 0);
}

int main(void)
{
    h_init("tcpstore-lifecycle", 120);
    signal(SIGPIPE, SIG_IGN);
    H_RUN(t_close_while_held, NULL);
    H_RUN(t_reset_while_held, NULL);
    H_RUN(t_held_over_bound, NULL);
    H_RUN(t_timeouts, NULL);
    H_RUN(t_idle_after_wait, NULL);
    H_RUN(t_partial_not_idle, NULL);
    return h_finish();
}
