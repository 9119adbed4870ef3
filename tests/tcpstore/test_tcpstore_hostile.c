/*
 * musterd's TCPStore listener against bad or slow clients, and in the old
 * numbering (torch 1.x-2.0, no handshake): oversize fields close only their
 * connection (counted), a half-sent request stalls no one, a stalled first
 * request times out while a silent connection is left alone, old clients'
 * abandoned waits leave no stale byte (WATCH_KEY: test_tcpstore_watch.c),
 * the listener shares --max-connections, a drain closes parked clients,
 * and a namespace with a token is refused.  The I/O path: requests sent a
 * byte at a time, a pipeline far larger than one read, a backlog held
 * unread behind a parked WAIT (without spinning), --tcpstore-max-request,
 * --max-output backpressure and the slow-reader close, and replies held
 * until durable with --data-dir.
 *
 * With MUSTER_TEST_TS_TARGET=relay the cases that are not about the
 * listener's own flags, counters or process run against `muster run`'s
 * relay (tstarget.h), its refusals read from its report.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"
#include "tstarget.h"
#include "tswire.h"

#define T_MS 3000
#define QUIET_MS 200

static struct tst T;
static uint16_t port;

/* Append a request with a type byte, a key and an i64 (ADD, BARRIER). */
static void key_i64_into(struct tsw_buf *b, uint8_t type, const char *key, int64_t v)
{
    tsw_u8(b, type);
    tsw_str(b, key);
    tsw_u64(b, (uint64_t)v);
}

/* Send a request with a type byte, a key and an i64 (ADD, BARRIER). */
static void key_i64(int fd, uint8_t type, const char *key, int64_t v)
{
    struct tsw_buf b = {0};
    key_i64_into(&b, type, key, v);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
}

/* Expect an i64 reply equal to want. */
static void i64_is(int fd, int64_t want)
{
    int ok;
    int64_t v = tsw_i64(fd, T_MS, &ok);
    CHECK(ok);
    CHECK_EQ(v, want);
}

/* A fresh VALIDATE-era connection answers a PING (the server is fine). */
static void server_fine(void)
{
    int fd = tsw_open(port);
    struct tsw_buf b = {0};
    uint8_t echo[4];
    tsw_u8(&b, TSW_PING);
    tsw_u32(&b, 42);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    CHECK_EQ(tsw_read(fd, echo, sizeof echo, T_MS), 0);
    CHECK_EQ(echo[0], 42);
    close(fd);
}

/* Oversize key, value announced over the limit, too many keys, unknown code, bad magic: each closes. */
static void t_oversize(void *arg)
{
    (void)arg;
    struct tsw_buf b = {0};
    long long key0 = T.relay ? 0 : h_stat(&T.d, "limit_tcpstore_key");
    long long val0 = T.relay ? 0 : h_stat(&T.d, "limit_tcpstore_value");
    long long keys0 = T.relay ? 0 : h_stat(&T.d, "limit_tcpstore_keys_per_request");
    long long bad0 = T.relay ? 0 : h_stat(&T.d, "tcpstore_bad_request");
    int fd = tsw_open(port);
    tsw_u8(&b, TSW_GET);
    tsw_u64(&b, 8192 + 1); /* only the length: it is refused before the body is awaited */
    CHECK_EQ(tsw_send(fd, &b), 0);
    CHECK(tsw_closed(fd, T_MS));
    close(fd);
    fd = tsw_open(port);
    tsw_u8(&b, TSW_SET);
    tsw_str(&b, "/big");
    /* The listener's --tcpstore-max-value; the relay has no value flag: --relay-max-request bounds it. */
    tsw_u64(&b, T.relay ? (64u << 20) + 1 : (8u << 20) + 1);
    CHECK_EQ(tsw_send(fd, &b), 0);
    CHECK(tsw_closed(fd, T_MS));
    close(fd);
    fd = tsw_open(port);
    tsw_u8(&b, TSW_WAIT);
    tsw_u64(&b, 128 * 1024 + 1);
    CHECK_EQ(tsw_send(fd, &b), 0);
    CHECK(tsw_closed(fd, T_MS));
    close(fd);
    fd = tsw_open(port);
    tsw_u8(&b, 19); /* one past BARRIER */
    CHECK_EQ(tsw_send(fd, &b), 0);
    CHECK(tsw_closed(fd, T_MS));
    close(fd);
    fd = tsw_open(port);
    tsw_u8(&b, TSW_VALIDATE);
    tsw_u32(&b, 0x3C85F7CF);
    CHECK_EQ(tsw_send(fd, &b), 0);
    CHECK(tsw_closed(fd, T_MS));
    close(fd);
    tsw_free(&b);
    if (!T.relay)
        CHECK_EQ(h_stat(&T.d, "limit_tcpstore_key"), key0 + 1);
    if (!T.relay)
        CHECK_EQ(h_stat(&T.d, "limit_tcpstore_value"), val0 + 1);
    if (!T.relay)
        CHECK_EQ(h_stat(&T.d, "limit_tcpstore_keys_per_request"), keys0 + 1);
    if (!T.relay)
        CHECK_EQ(h_stat(&T.d, "tcpstore_bad_request"), bad0 + 2);
    server_fine();
}

/* A client stopping inside a request delays no one; finishing it later works. */
static void t_half_sent(void *arg)
{
    (void)arg;
    static const uint8_t head[] = {TSW_SET, 0x04, 0x00, 0x00, 0x00}; /* type and half the key length */
    static const uint8_t rest[] = {0x00, 0x00, 0x00, 0x00, '/', 'h', 'a', 'f', 0x01, 0, 0, 0, 0, 0, 0, 0, 'z'};
    int a = tsw_open(port), b = tsw_open(port);
    CHECK_EQ(raw_send(a, head, sizeof head), 0);
    /* A large value arriving in two halves from a third client. */
    int c = tsw_open(port);
    size_t big = 200u << 10; /* within --max-value: the keyspace applies it to every front end */
    char *val = malloc(big);
    memset(val, 'v', big);
    struct tsw_buf buf = {0};
    tsw_u8(&buf, TSW_SET);
    tsw_str(&buf, "/big-half");
    tsw_u64(&buf, big);
    tsw_raw(&buf, val, big / 2);
    CHECK_EQ(tsw_send(c, &buf), 0);
    int64_t t0 = h_now_ms();
    for (int i = 0; i < 50; i++) {
        key_i64(b, TSW_ADD, "/counter", 1);
        i64_is(b, i + 1);
    }
    CHECK(h_now_ms() - t0 < 2000);
    CHECK_EQ(raw_send(a, rest, sizeof rest), 0);
    CHECK_EQ(tsw_req(a, TSW_GET, "/haf", NULL), 0);
    char *v = tsw_blob(a, T_MS, NULL);
    CHECK_STR(v, "z");
    free(v);
    tsw_raw(&buf, val + big / 2, big - big / 2);
    tsw_u8(&buf, TSW_PING); /* its echo says the set was applied */
    tsw_u32(&buf, 77);
    CHECK_EQ(tsw_send(c, &buf), 0);
    uint8_t echo[4];
    CHECK_EQ(tsw_read(c, echo, sizeof echo, T_MS), 0);
    size_t len = 0;
    CHECK_EQ(tsw_req(b, TSW_GET, "/big-half", NULL), 0);
    v = tsw_blob(b, T_MS, &len);
    CHECK(v && len == big && v[0] == 'v' && v[big - 1] == 'v');
    free(v);
    free(val);
    tsw_free(&buf);
    close(a);
    close(b);
    close(c);
}

/* The old numbering: detected without a handshake; ADD, SET, GET, CHECK, GETNUMKEYS, DELETE_KEY, CANCEL_WAIT. */
static void t_legacy_ops(void *arg)
{
    (void)arg;
    long long old0 = T.relay ? 0 : h_stat(&T.d, "tcpstore_legacy_era");
    int fd = tsw_connect(port);
    key_i64(fd, TSW_OLD_ADD, "init/", 1);
    i64_is(fd, 1);
    CHECK_EQ(tsw_req(fd, TSW_OLD_SET, "/old", "value", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_OLD_GET, "/old", NULL), 0);
    char *v = tsw_blob(fd, T_MS, NULL);
    CHECK_STR(v, "value");
    free(v);
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_OLD_CHECK);
    tsw_u64(&b, 2);
    tsw_str(&b, "/old");
    tsw_str(&b, "init/");
    tsw_u8(&b, TSW_OLD_CHECK);
    tsw_u64(&b, 1);
    tsw_str(&b, "/absent");
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    CHECK_EQ(tsw_byte(fd, T_MS), 0); /* READY */
    CHECK_EQ(tsw_byte(fd, T_MS), 1); /* NOT_READY */
    CHECK_EQ(tsw_req(fd, TSW_OLD_GETNUMKEYS, NULL), 0);
    int ok;
    int64_t n = tsw_i64(fd, T_MS, &ok);
    CHECK(ok && n >= 2);
    CHECK_EQ(tsw_req(fd, TSW_OLD_DELETE_KEY, "/old", NULL), 0);
    i64_is(fd, 1);
    CHECK_EQ(tsw_req(fd, TSW_OLD_CANCEL_WAIT, NULL), 0);
    CHECK_EQ(tsw_byte(fd, T_MS), 1);
    if (!T.relay)
        CHECK_EQ(h_stat(&T.d, "tcpstore_legacy_era"), old0 + 1);
    close(fd);
}

/* An old client's timed-out wait (it just sends its next request) is dropped: no stale byte later. */
static void t_legacy_abandoned_wait(void *arg)
{
    (void)arg;
    long long ab0 = T.relay ? 0 : h_stat(&T.d, "tcpstore_waits_abandoned");
    int a = tsw_connect(port), b = tsw_open(port);
    struct tsw_buf buf = {0};
    tsw_u8(&buf, TSW_OLD_WAIT);
    tsw_u64(&buf, 1);
    tsw_str(&buf, "/old-wait");
    CHECK_EQ(tsw_send(a, &buf), 0);
    tsw_free(&buf);
    CHECK(tsw_quiet(a, QUIET_MS));
    key_i64(a, TSW_OLD_ADD, "/old-ctr", 1);
    i64_is(a, 1); /* the reply, not a STOP_WAITING byte in front of it */
    CHECK_EQ(tsw_req(b, TSW_SET, "/old-wait", "now", NULL), 0);
    CHECK_EQ(tsw_req(a, TSW_OLD_GETNUMKEYS, NULL), 0);
    int ok;
    int64_t n = tsw_i64(a, T_MS, &ok);
    CHECK(ok && n >= 2 && n < 1000);
    CHECK(tsw_quiet(a, QUIET_MS));
    if (!T.relay)
        CHECK_EQ(h_stat(&T.d, "tcpstore_waits_abandoned"), ab0 + 1);
    close(a);
    close(b);
}

/* A stalled first request is closed after --tcpstore-validate-timeout; a silent connection stays. */
static void t_validate_timeout(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's own flags, counters or process */
    static const uint8_t part[] = {0x00, 0xCE};
    int silent = tsw_connect(port), stalled = tsw_connect(port);
    CHECK_EQ(raw_send(stalled, part, sizeof part), 0);
    CHECK(tsw_closed(stalled, T_MS));
    CHECK(tsw_quiet(silent, 2 * QUIET_MS)); /* still open: it never started a request */
    static const uint8_t rest[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x0D, 1, 2, 3, 4};
    uint8_t echo[4];
    CHECK_EQ(raw_send(silent, rest, sizeof rest), 0);
    CHECK_EQ(tsw_read(silent, echo, sizeof echo, T_MS), 0);
    CHECK_EQ(echo[3], 4);
    CHECK(h_stat(&T.d, "tcpstore_validate_timeout") >= 1);
    close(silent);
    close(stalled);
}

/* TCPStore connections count in --max-connections; one too many is closed at once. */
static void t_max_connections(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's own flags, counters or process */
    struct h_daemon d2;
    const char *extra[] = {"--max-connections", "2", NULL};
    uint16_t p2 = tsw_start(&d2, extra);
    int a = tsw_open(p2), b = tsw_open(p2), c = tsw_connect(p2);
    CHECK(tsw_closed(c, T_MS));
    CHECK_EQ(h_stat(&d2, "limit_connections"), 1);
    close(a);
    close(b);
    close(c);
    CHECK_EQ(h_stop(&d2), 0);
}

/* TCPStore has no error answer: a SET past the namespace's --max-keys-per-ns closes the connection,
 * counted as limit_tcpstore_store, and the keys stored before it stay readable. */
static void t_store_quota(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's own flags, counters or process */
    struct h_daemon d2;
    const char *extra[] = {"--max-keys-per-ns", "3", NULL};
    uint16_t p2 = tsw_start(&d2, extra);
    int fd = tsw_open(p2);
    CHECK_EQ(tsw_req(fd, TSW_SET, "/q0", "v0", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_SET, "/q1", "v1", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_SET, "/q2", "v2", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_SET, "/q3", "v3", NULL), 0);
    CHECK(tsw_closed(fd, T_MS));
    close(fd);
    CHECK_EQ(h_stat(&d2, "limit_tcpstore_store"), 1);
    int again = tsw_open(p2);
    for (int i = 0; i < 3; i++) {
        char key[8], want[8];
        snprintf(key, sizeof key, "/q%d", i);
        snprintf(want, sizeof want, "v%d", i);
        CHECK_EQ(tsw_req(again, TSW_GET, key, NULL), 0);
        size_t n = 0;
        char *v = tsw_blob(again, T_MS, &n);
        CHECK(v && n == 2 && memcmp(v, want, 2) == 0);
        free(v);
    }
    close(again);
    CHECK_EQ(h_stop(&d2), 0);
}

/* SIGTERM drains: a parked TCPStore wait sees its connection close, and the daemon exits 0. */
static void t_drain(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's own flags, counters or process */
    struct h_daemon d2;
    uint16_t p2 = tsw_start(&d2, NULL);
    int a = tsw_open(p2);
    struct tsw_buf buf = {0};
    tsw_u8(&buf, TSW_WAIT);
    tsw_u64(&buf, 1);
    tsw_str(&buf, "/never");
    CHECK_EQ(tsw_send(a, &buf), 0);
    tsw_free(&buf);
    CHECK(tsw_quiet(a, QUIET_MS));
    int64_t t0 = h_now_ms();
    CHECK_EQ(h_stop(&d2), 0);
    CHECK(h_now_ms() - t0 < 4000);
    CHECK(tsw_closed(a, T_MS));
    close(a);
}

/* The listener's namespace cannot have a token (TCPStore clients cannot send one). */
static void t_token_refused(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's own flags, counters or process */
    const char *bin = getenv("MUSTER_TEST_MUSTERD");
    pid_t pid = fork();
    if (pid == 0) {
        (void)!freopen("/dev/null", "w", stderr);
        execl(bin, bin, "--listen", "127.0.0.1:0", "--tcpstore-listen", "127.0.0.1:0", "--token", "tcpstore=secret",
              (char *)NULL);
        _exit(127);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 78); /* EX_CONFIG */
}

/* Requests sent one byte per write are answered exactly as if sent whole. */
static void t_byte_by_byte(void *arg)
{
    (void)arg;
    static const uint8_t hs[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C};
    struct tsw_buf b = {0};
    int fd = tsw_connect(port);
    tsw_raw(&b, hs, sizeof hs);
    tsw_u8(&b, TSW_SET);
    tsw_str(&b, "/bytes");
    tsw_str(&b, "one-by-one");
    key_i64_into(&b, TSW_ADD, "/bytes-ctr", 5);
    tsw_u8(&b, TSW_MULTI_GET);
    tsw_u64(&b, 2);
    tsw_str(&b, "/bytes");
    tsw_str(&b, "/bytes-absent");
    tsw_u8(&b, TSW_PING);
    tsw_u32(&b, 0x04030201);
    for (size_t i = 0; i < b.n; i++)
        CHECK_EQ(raw_send(fd, b.p + i, 1), 0);
    tsw_free(&b);
    i64_is(fd, 5);
    size_t len = 99;
    char *v = tsw_blob(fd, T_MS, NULL);
    CHECK_STR(v, "one-by-one");
    free(v);
    v = tsw_blob(fd, T_MS, &len);
    CHECK(v != NULL && len == 0);
    free(v);
    uint8_t echo[4];
    CHECK_EQ(tsw_read(fd, echo, sizeof echo, T_MS), 0);
    CHECK(echo[0] == 1 && echo[3] == 4);
    CHECK(tsw_quiet(fd, QUIET_MS));
    close(fd);
}

/* One write of over a megabyte of requests (many reads, many batches): every reply, in order. */
static void t_big_pipeline(void *arg)
{
    (void)arg;
    enum { PAIRS = 10000 };
    char val[101];
    memset(val, 'p', sizeof val - 1);
    val[sizeof val - 1] = 0;
    struct tsw_buf b = {0};
    int fd = tsw_open(port);
    for (int i = 0; i < PAIRS; i++) {
        tsw_u8(&b, TSW_SET);
        tsw_str(&b, "/pipe");
        tsw_str(&b, val);
        key_i64_into(&b, TSW_ADD, "/pipe-ctr", 1);
    }
    CHECK(b.n > (1u << 20));
    /* The server reads on while its 80 KB of replies wait in its output: sending it all first cannot block. */
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    int ok = 1, in_order = 1;
    for (int i = 0; i < PAIRS && ok && in_order; i++)
        in_order = tsw_i64(fd, T_MS, &ok) == i + 1;
    CHECK(ok && in_order);
    CHECK_EQ(tsw_req(fd, TSW_GET, "/pipe", NULL), 0);
    char *v = tsw_blob(fd, T_MS, NULL);
    CHECK_STR(v, val);
    free(v);
    close(fd);
}

/* CPU time (user + system) of process pid in clock ticks, or -1. */
static long long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    /* Fields after the command: state and 10 more, then utime and stime. */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (long long)(ut + st);
}

/* Wait up to ms for child pid to exit; 1 when it did (its status in *st). */
static int child_done(pid_t pid, int ms, int *st)
{
    for (int64_t end = h_now_ms() + ms; h_now_ms() < end;) {
        if (waitpid(pid, st, WNOHANG) == pid)
            return 1;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* More requests than the server reads ahead, pipelined behind a parked WAIT: held unread without the loop
 * spinning on the readable socket, then all answered in order once the WAIT is released. */
static void t_parked_backlog(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's own flags, counters or process */
    enum { PINGS = 70000 }; /* 350 KB: past the 256 KiB read-ahead plus one 64 KiB read */
    struct tsw_buf b = {0};
    int a = tsw_open(port), setter = tsw_open(port);
    tsw_u8(&b, TSW_WAIT);
    tsw_u64(&b, 1);
    tsw_str(&b, "/backlog-go");
    for (uint32_t i = 0; i < PINGS; i++) {
        tsw_u8(&b, TSW_PING);
        tsw_u32(&b, i);
    }
    /* A child sends: the tail the server leaves unread may not fit the socket buffers. */
    pid_t pid = fork();
    if (pid == 0)
        _exit(raw_send(a, b.p, b.n) == 0 ? 0 : 1);
    CHECK(pid > 0);
    int st = 0, done = child_done(pid, 1000, &st);
    long long t0 = cpu_ticks(T.d.pid);
    int64_t w0 = h_now_ms();
    CHECK(tsw_quiet(a, 500));
    long long used = cpu_ticks(T.d.pid) - t0, window = (h_now_ms() - w0) * sysconf(_SC_CLK_TCK) / 1000;
    CHECK(t0 >= 0 && used * 4 < window); /* a spinning loop would use all of it */
    CHECK_EQ(tsw_req(setter, TSW_SET, "/backlog-go", "1", NULL), 0);
    CHECK_EQ(tsw_byte(a, T_MS), 0); /* STOP_WAITING */
    uint8_t *echo = malloc(4 * (size_t)PINGS);
    CHECK(echo && tsw_read(a, echo, 4 * (size_t)PINGS, T_MS) == 0);
    int in_order = echo != NULL;
    for (uint32_t i = 0; in_order && i < PINGS; i++)
        in_order = echo[4 * i] == (uint8_t)i && echo[4 * i + 1] == (uint8_t)(i >> 8) &&
                   echo[4 * i + 2] == (uint8_t)(i >> 16);
    CHECK(in_order);
    free(echo);
    CHECK(done || child_done(pid, T_MS, &st));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    tsw_free(&b);
    close(a);
    close(setter);
}

/* --tcpstore-max-request bounds a whole request (a multi_set's values together), counted. */
static void t_max_request(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's own flags, counters or process */
    struct h_daemon d2;
    const char *extra[] = {"--tcpstore-max-key", "64", "--tcpstore-max-value", "1K", "--tcpstore-max-request", "2K",
                           NULL};
    uint16_t p2 = tsw_start(&d2, extra);
    char val[901];
    memset(val, 'm', sizeof val - 1);
    val[sizeof val - 1] = 0;
    struct tsw_buf b = {0};
    int fd = tsw_open(p2);
    uint8_t echo[4] = {0};
    for (int pairs = 2; pairs <= 3; pairs++) {
        tsw_u8(&b, TSW_MULTI_SET);
        tsw_u64(&b, (uint64_t)pairs);
        for (int i = 0; i < pairs; i++) {
            tsw_str(&b, i ? "/mr1" : "/mr0");
            tsw_str(&b, val);
        }
        tsw_u8(&b, TSW_PING);
        tsw_u32(&b, 9);
        CHECK_EQ(tsw_send(fd, &b), 0);
        if (pairs == 2) { /* 1,849 bytes: taken, as the PING's echo says */
            CHECK_EQ(tsw_read(fd, echo, sizeof echo, T_MS), 0);
            CHECK_EQ(echo[0], 9);
        }
    }
    tsw_free(&b);
    CHECK(tsw_closed(fd, T_MS)); /* 2,769 bytes: refused */
    close(fd);
    CHECK_EQ(h_stat(&d2, "limit_tcpstore_request"), 1);
    CHECK_EQ(h_stop(&d2), 0);
}

/* Output above --max-output stops reading the client's requests until it reads its replies; a client that
 * never reads is closed after --slow-timeout. */
static void t_backpressure(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's own flags, counters or process */
    enum { GETS = 100 };
    struct h_daemon d2;
    const char *extra[] = {"--max-value", "256K", "--max-frame", "300K", "--max-output", "1M", "--slow-timeout", "500",
                           NULL};
    uint16_t p2 = tsw_start(&d2, extra);
    size_t big = 200u << 10; /* within --max-value: the keyspace applies it to every front end */
    char *val = malloc(big + 1);
    memset(val, 'o', big);
    val[big] = 0;
    int a = tsw_open(p2), slow = tsw_open(p2);
    CHECK_EQ(tsw_req(a, TSW_SET, "/bp", val, NULL), 0);
    struct tsw_buf b = {0};
    uint8_t echo[4];
    tsw_u8(&b, TSW_PING); /* its echo says the value is set */
    tsw_u32(&b, 1);
    CHECK_EQ(tsw_send(a, &b), 0);
    CHECK_EQ(tsw_read(a, echo, sizeof echo, T_MS), 0);
    for (int i = 0; i < GETS; i++) {
        tsw_u8(&b, TSW_GET);
        tsw_str(&b, "/bp");
    }
    CHECK_EQ(raw_send(slow, b.p, b.n), 0);
    CHECK_EQ(tsw_send(a, &b), 0);
    tsw_free(&b);
    int whole = 1;
    for (int i = 0; i < GETS && whole; i++) {
        size_t len = 0;
        char *v = tsw_blob(a, T_MS, &len);
        whole = v && len == big && v[0] == 'o' && v[big - 1] == 'o';
        free(v);
    }
    CHECK(whole);
    CHECK(h_stat(&d2, "output_paused") >= 2);
    /* Reading would make it a client that reads: watch the counter until the close, then the socket. */
    for (int64_t end = h_now_ms() + 2 * T_MS; h_stat(&d2, "limit_output") < 1 && h_now_ms() < end;) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ(h_stat(&d2, "limit_output"), 1);
    CHECK(tsw_closed(slow, T_MS));
    free(val);
    close(a);
    close(slow);
    CHECK_EQ(h_stop(&d2), 0);
}

/* With --data-dir, replies wait until the change is on disk and then go out; the state survives a restart. */
static void t_durable(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's own flags, counters or process */
    struct h_daemon d2;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/ts-data", h_tmpdir());
    const char *extra[] = {"--data-dir", dir, NULL};
    uint16_t p2 = tsw_start(&d2, extra);
    int fd = tsw_open(p2);
    CHECK_EQ(tsw_req(fd, TSW_SET, "/durable", "kept", NULL), 0);
    key_i64(fd, TSW_ADD, "/durable-ctr", 7);
    i64_is(fd, 7);
    CHECK(h_stat(&d2, "persist_held_frames") >= 1);
    close(fd);
    CHECK_EQ(h_stop(&d2), 0);
    p2 = tsw_start(&d2, extra);
    fd = tsw_open(p2);
    CHECK_EQ(tsw_req(fd, TSW_GET, "/durable", NULL), 0);
    char *v = tsw_blob(fd, T_MS, NULL);
    CHECK_STR(v, "kept");
    free(v);
    close(fd);
    CHECK_EQ(h_stop(&d2), 0);
}

int main(void)
{
    h_init("tcpstore-hostile", 120);
    const char *extra[] = {"--tcpstore-validate-timeout", "300", NULL};
    port = tst_start(&T, getenv("MUSTER_TEST_TS_TARGET") ? NULL : extra);
    if (!port)
        return h_finish();
    H_RUN(t_oversize, NULL);
    H_RUN(t_half_sent, NULL);
    H_RUN(t_legacy_ops, NULL);
    H_RUN(t_legacy_abandoned_wait, NULL);
    H_RUN(t_validate_timeout, NULL);
    H_RUN(t_max_connections, NULL);
    H_RUN(t_store_quota, NULL);
    H_RUN(t_drain, NULL);
    H_RUN(t_token_refused, NULL);
    H_RUN(t_byte_by_byte, NULL);
    H_RUN(t_big_pipeline, NULL);
    H_RUN(t_parked_backlog, NULL);
    H_RUN(t_max_request, NULL);
    H_RUN(t_backpressure, NULL);
    H_RUN(t_durable, NULL);
    CHECK_EQ(tst_stop(&T), 0);
    if (T.relay) {
        /* The relay's report when it stops: t_oversize's refusals, counted under its own names. */
        char buf[1 << 14];
        tst_relay_report(&T, buf, sizeof buf);
        CHECK(strstr(buf, "bad_request 2,") != NULL);
        CHECK(strstr(buf, "limit_key 1,") != NULL);
        CHECK(strstr(buf, "limit_keys 1,") != NULL);
        CHECK(strstr(buf, "limit_request 1,") != NULL);
    }
    return h_finish();
}
