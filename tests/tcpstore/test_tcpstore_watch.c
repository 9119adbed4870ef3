/*
 * WATCH_KEY of the old TCPStore numbering (torch 1.x-2.0), byte by byte
 * against the frames torch 1.13's own server sends: the registration is
 * answered KEY_CALLBACK_REGISTERED (3), and each change to the key sends
 *
 *     type | u64 len | key | u64 len | old value | u64 len | new value
 *
 * with KEY_CREATED (1, old empty), KEY_UPDATED (0) or KEY_DELETED (2, new
 * empty), whoever wrote: set, add, compare_set, append, delete, a native
 * client.  Writes that change nothing (a failed compare_set, a delete of an
 * absent key) and other keys send nothing; a key watched twice gets every
 * frame twice.  A watching connection still serves requests, is not idle
 * under --idle-timeout, and leaves no watch behind when it closes
 * (tcpstore_watches_current); --max-watches-per-conn closes it, counted.
 * With MUSTER_TEST_TS_TARGET=relay the frames are checked through
 * `muster run`'s relay (tstarget.h); the listener's counters, limit and
 * idle cases are the listener's alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"
#include "tstarget.h"
#include "tswire.h"

#define T_MS 3000
#define QUIET_MS 200

/* The first byte of WATCH_KEY's answer and of each callback frame. */
enum { W_UPDATED = 0, W_CREATED = 1, W_DELETED = 2, W_REGISTERED = 3 };

static struct tst T;
static uint16_t port;

/* Register a watch of key on fd and expect KEY_CALLBACK_REGISTERED. */
static void watch(int fd, const char *key)
{
    CHECK_EQ(tsw_req(fd, TSW_OLD_WATCH_KEY, key, NULL), 0);
    CHECK_EQ(tsw_byte(fd, T_MS), W_REGISTERED);
}

/* Expect exactly the callback frame (type, key, old, new) next on fd. */
static void frame_is(int fd, int type, const char *key, const char *old, const char *new_)
{
    struct tsw_buf want = {0};
    tsw_u8(&want, (uint8_t)type);
    tsw_str(&want, key);
    tsw_str(&want, old);
    tsw_str(&want, new_);
    uint8_t *got = calloc(1, want.n);
    CHECK(got != NULL);
    if (got) {
        int rc = tsw_read(fd, got, want.n, T_MS);
        CHECK_EQ(rc, 0);
        if (rc == 0)
            CHECK_MEM(got, want.n, want.p, want.n);
    }
    free(got);
    tsw_free(&want);
}

/* Expect an i64 reply equal to want. */
static void i64_is(int fd, int64_t want)
{
    int ok;
    int64_t v = tsw_i64(fd, T_MS, &ok);
    CHECK(ok);
    CHECK_EQ(v, want);
}

/* Send an old-numbering ADD and expect its sum. */
static void add(int fd, const char *key, int64_t delta, int64_t sum)
{
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_OLD_ADD);
    tsw_str(&b, key);
    tsw_u64(&b, (uint64_t)delta);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    i64_is(fd, sum);
}

/* Send an old-numbering COMPARE_SET and expect the value it answers. */
static void cas(int fd, const char *key, const char *expected, const char *desired, const char *answer)
{
    size_t len = 0;
    CHECK_EQ(tsw_req(fd, TSW_OLD_COMPARE_SET, key, expected, desired, NULL), 0);
    char *v = tsw_blob(fd, T_MS, &len);
    CHECK_STR(v, answer);
    free(v);
}

/* Wait (bounded) until counter name reads want; returns the last value read. */
static long long stat_becomes(const char *name, long long want)
{
    long long v = -1;
    for (int64_t end = h_now_ms() + T_MS; h_now_ms() < end; usleep(20000))
        if ((v = h_stat(&T.d, name)) == want)
            break;
    return v;
}

/* Every kind of change, from every kind of writer, as torch 1.13's server frames it. */
static void t_callbacks(void *arg)
{
    (void)arg;
    long long cb0 = T.relay ? 0 : h_stat(&T.d, "tcpstore_watch_callbacks");
    int w = tsw_connect(port), a = tsw_connect(port), n = raw_open(T.d.port, T.ns);
    CHECK(w >= 0 && a >= 0 && n >= 0);
    watch(w, "/k");
    CHECK_EQ(tsw_req(a, TSW_OLD_SET, "/k", "v1", NULL), 0);
    frame_is(w, W_CREATED, "/k", "", "v1");
    CHECK_EQ(tsw_req(a, TSW_OLD_SET, "/k", "v22", NULL), 0);
    frame_is(w, W_UPDATED, "/k", "v1", "v22");
    add(a, "/other", 1, 1); /* another key: nothing */
    cas(a, "/k", "v22", "v3", "v3");
    frame_is(w, W_UPDATED, "/k", "v22", "v3");
    cas(a, "/k", "nope", "v4", "v3"); /* not swapped: nothing */
    CHECK_EQ(tsw_req(a, TSW_OLD_APPEND, "/k", "+x", NULL), 0);
    frame_is(w, W_UPDATED, "/k", "v3", "v3+x");
    CHECK_EQ(tsw_req(a, TSW_OLD_DELETE_KEY, "/k", NULL), 0);
    i64_is(a, 1);
    frame_is(w, W_DELETED, "/k", "v3+x", "");
    CHECK_EQ(tsw_req(a, TSW_OLD_DELETE_KEY, "/k", NULL), 0);
    i64_is(a, 0); /* absent: nothing */
    add(a, "/k", 5, 5);
    frame_is(w, W_CREATED, "/k", "", "5");
    add(a, "/k", 2, 7);
    frame_is(w, W_UPDATED, "/k", "5", "7");
    /* A native client writes the same namespace. */
    CHECK_EQ(raw_set(n, 1, tst_key(&T, "/k"), "native", 6), 0);
    CHECK_EQ(raw_status(n, T_MS, NULL), MUSTER_OK);
    frame_is(w, W_UPDATED, "/k", "7", "native");
    /* Reads and waits change nothing. */
    CHECK_EQ(tsw_req(a, TSW_OLD_GET, "/k", NULL), 0);
    free(tsw_blob(a, T_MS, NULL));
    CHECK(tsw_quiet(w, QUIET_MS));
    if (!T.relay)
        CHECK_EQ(h_stat(&T.d, "tcpstore_watch_callbacks"), cb0 + 8);
    close(w);
    close(a);
    close(n);
}

/* The watching connection still serves requests; a key watched twice gets each frame twice, and
 * a key watched on two connections gets it on both. */
static void t_twice_and_requests(void *arg)
{
    (void)arg;
    int w = tsw_connect(port), v = tsw_connect(port), a = tsw_connect(port);
    watch(w, "/t");
    watch(w, "/t");
    watch(v, "/t");
    CHECK_EQ(tsw_req(w, TSW_OLD_SET, "/t", "x", NULL), 0); /* written by the watcher itself */
    frame_is(w, W_CREATED, "/t", "", "x");
    frame_is(w, W_CREATED, "/t", "", "x");
    frame_is(v, W_CREATED, "/t", "", "x");
    CHECK_EQ(tsw_req(w, TSW_OLD_GET, "/t", NULL), 0);
    size_t len = 0;
    char *val = tsw_blob(w, T_MS, &len);
    CHECK_STR(val, "x");
    free(val);
    close(w);
    CHECK_EQ(tsw_req(a, TSW_OLD_SET, "/t", "y", NULL), 0);
    frame_is(v, W_UPDATED, "/t", "x", "y");
    CHECK(tsw_quiet(v, QUIET_MS));
    close(v);
    close(a);
}

/* A watching connection that closes takes its watches with it; others keep theirs. */
static void t_close_leaves_none(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's counters */
    CHECK_EQ(stat_becomes("tcpstore_watches_current", 0), 0);
    int w = tsw_connect(port), v = tsw_connect(port), a = tsw_connect(port);
    watch(w, "/c1");
    watch(w, "/c2");
    watch(w, "/c2");
    watch(v, "/c2");
    CHECK_EQ(h_stat(&T.d, "tcpstore_watches_current"), 4);
    close(w);
    CHECK_EQ(stat_becomes("tcpstore_watches_current", 1), 1);
    long long cb0 = h_stat(&T.d, "tcpstore_watch_callbacks");
    CHECK_EQ(tsw_req(a, TSW_OLD_SET, "/c1", "1", NULL), 0);
    CHECK_EQ(tsw_req(a, TSW_OLD_SET, "/c2", "2", NULL), 0);
    frame_is(v, W_CREATED, "/c2", "", "2");
    CHECK(tsw_quiet(v, QUIET_MS));
    CHECK_EQ(h_stat(&T.d, "tcpstore_watch_callbacks"), cb0 + 1);
    close(v);
    CHECK_EQ(stat_becomes("tcpstore_watches_current", 0), 0);
    close(a);
}

/* --max-watches-per-conn: one watch too many closes the connection (no error reply), counted. */
static void t_limit(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's flag (the relay's is --relay-max-watches) */
    long long l0 = h_stat(&T.d, "limit_watches_per_conn");
    int w = tsw_connect(port);
    char key[16];
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof key, "/lim%d", i);
        watch(w, key);
    }
    CHECK_EQ(tsw_req(w, TSW_OLD_WATCH_KEY, "/lim4", NULL), 0);
    CHECK(tsw_closed(w, T_MS));
    close(w);
    CHECK_EQ(h_stat(&T.d, "limit_watches_per_conn"), l0 + 1);
    CHECK_EQ(stat_becomes("tcpstore_watches_current", 0), 0);
}

/* Under --idle-timeout a silent watching connection stays open (torch's callback socket never
 * sends again), while a silent plain one is closed. */
static void t_idle(void *arg)
{
    (void)arg;
    if (T.relay)
        return; /* the listener's --idle-timeout */
    struct h_daemon idle;
    const char *extra[] = {"--idle-timeout", "300", NULL};
    uint16_t p = tsw_start(&idle, extra);
    if (!p)
        return;
    int w = tsw_connect(p), plain = tsw_connect(p);
    watch(w, "/idle");
    add(plain, "/n", 1, 1);
    CHECK(tsw_closed(plain, T_MS));
    usleep(900 * 1000);
    int a = tsw_connect(p);
    CHECK_EQ(tsw_req(a, TSW_OLD_SET, "/idle", "late", NULL), 0);
    frame_is(w, W_CREATED, "/idle", "", "late");
    close(a);
    close(w);
    close(plain);
    CHECK_EQ(h_stop(&idle), 0);
}

int main(void)
{
    h_init("tcpstore-watch", 60);
    const char *extra[] = {"--max-watches-per-conn", "4", NULL};
    if (!(port = tst_start(&T, getenv("MUSTER_TEST_TS_TARGET") ? NULL : extra)))
        return h_finish();
    H_RUN(t_callbacks, NULL);
    H_RUN(t_twice_and_requests, NULL);
    H_RUN(t_close_leaves_none, NULL);
    H_RUN(t_limit, NULL);
    H_RUN(t_idle, NULL);
    CHECK_EQ(tst_stop(&T), 0);
    return h_finish();
}
