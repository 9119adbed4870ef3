/*
 * musterd's TCPStore listener, and `muster run`'s relay
 * (MUSTER_TEST_TS_TARGET=relay: the suite runs twice, tstarget.h), byte by
 * byte, in the VALIDATE-era numbering (torch 2.1 and later): the handshake
 * and PING echo, the reference's SET example, every op's reply shape,
 * compare_set's rules, exactly one STOP_WAITING per WAIT, CANCEL_WAIT
 * ordering (also racing a set), queues with wake-one, LIST_KEYS, BARRIER,
 * and keys shared with native clients.
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

static struct tst T;
static uint16_t port;

/* GET key and compare the value with want. */
static void get_is(int fd, const char *key, const char *want)
{
    CHECK_EQ(tsw_req(fd, TSW_GET, key, NULL), 0);
    size_t len = 0;
    char *v = tsw_blob(fd, T_MS, &len);
    CHECK(v != NULL);
    if (v)
        CHECK_MEM(v, len, want, strlen(want));
    free(v);
}

/* Read an i64 reply and compare it with want. */
static void i64_is(int fd, int64_t want)
{
    int ok;
    int64_t v = tsw_i64(fd, T_MS, &ok);
    CHECK(ok);
    CHECK_EQ(v, want);
}

/* PING with nonce and expect exactly its echo as the next bytes. */
static void ping_ok(int fd, uint32_t nonce)
{
    struct tsw_buf b = {0};
    uint8_t echo[4], want[4] = {(uint8_t)nonce, (uint8_t)(nonce >> 8), (uint8_t)(nonce >> 16), (uint8_t)(nonce >> 24)};
    tsw_u8(&b, TSW_PING);
    tsw_u32(&b, nonce);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    CHECK_EQ(tsw_read(fd, echo, sizeof echo, T_MS), 0);
    CHECK_MEM(echo, sizeof echo, want, sizeof want);
}

/* Send a request whose strings are given, then a list: type, count, keys. */
static void send_keys(int fd, uint8_t type, const char *const *keys, size_t n)
{
    struct tsw_buf b = {0};
    tsw_u8(&b, type);
    tsw_u64(&b, n);
    for (size_t i = 0; i < n; i++)
        tsw_str(&b, keys[i]);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
}

/* VALIDATE has no reply; PING echoes its 4-byte nonce (the exact bytes torch sends). */
static void t_handshake(void *arg)
{
    (void)arg;
    static const uint8_t wire[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x0D, 0x39, 0x30, 0x00, 0x00};
    uint8_t echo[4];
    int fd = tsw_connect(port);
    CHECK(fd >= 0);
    CHECK_EQ(raw_send(fd, wire, sizeof wire), 0);
    CHECK_EQ(tsw_read(fd, echo, sizeof echo, T_MS), 0);
    CHECK_MEM(echo, sizeof echo, wire + 6, 4);
    CHECK(tsw_quiet(fd, QUIET_MS));
    ping_ok(fd, 0xDEADBEEF);
    close(fd);
}

/* The reference's example SET "/k" = "v" bytes; no reply; GET returns it; native clients see it. */
static void t_set_example(void *arg)
{
    (void)arg;
    static const uint8_t set[] = {0x01, 0x02, 0, 0, 0, 0, 0, 0, 0, 0x2F, 0x6B, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x76};
    static const uint8_t get_reply[] = {0x01, 0, 0, 0, 0, 0, 0, 0, 0x76};
    uint8_t got[sizeof get_reply];
    int fd = tsw_open(port);
    CHECK_EQ(raw_send(fd, set, sizeof set), 0);
    CHECK(tsw_quiet(fd, QUIET_MS));
    CHECK_EQ(tsw_req(fd, TSW_GET, "/k", NULL), 0);
    CHECK_EQ(tsw_read(fd, got, sizeof got, T_MS), 0);
    CHECK_MEM(got, sizeof got, get_reply, sizeof get_reply);
    /* The same key through the native protocol, in the target's namespace (under the relay's prefix). */
    int nfd = raw_open(T.d.port, T.ns);
    CHECK(nfd >= 0);
    CHECK_EQ(raw_get(nfd, 1, tst_key(&T, "/k"), 0, 0), 0);
    Muster__ServerFrame *f = raw_response(nfd, T_MS);
    CHECK(f && f->response->status == MUSTER__STATUS__OK && f->response->get);
    if (f && f->response->get)
        CHECK_MEM(f->response->get->value.data, f->response->get->value.len, "v", 1);
    raw_free(f);
    close(nfd);
    close(fd);
}

/* GET of a missing key answers an empty value (eight zero bytes). */
static void t_get_missing(void *arg)
{
    (void)arg;
    static const uint8_t empty[8] = {0};
    uint8_t got[8];
    int fd = tsw_open(port);
    CHECK_EQ(tsw_req(fd, TSW_GET, "/never-set", NULL), 0);
    CHECK_EQ(tsw_read(fd, got, sizeof got, T_MS), 0);
    CHECK_MEM(got, sizeof got, empty, sizeof empty);
    ping_ok(fd, 7); /* and the connection goes on */
    close(fd);
}

/* compare_set: create on empty expected, the "lie" on a missing key, swap on match, current on mismatch. */
static void t_compare_set(void *arg)
{
    (void)arg;
    int fd = tsw_open(port);
    char *v;
    CHECK_EQ(tsw_req(fd, TSW_COMPARE_SET, "/cs", "", "first", NULL), 0);
    CHECK_STR(v = tsw_blob(fd, T_MS, NULL), "first");
    free(v);
    CHECK_EQ(tsw_req(fd, TSW_COMPARE_SET, "/cs-missing", "expected", "desired", NULL), 0);
    CHECK_STR(v = tsw_blob(fd, T_MS, NULL), "expected");
    free(v);
    const char *missing = "/cs-missing";
    send_keys(fd, TSW_CHECK, &missing, 1);
    CHECK_EQ(tsw_byte(fd, T_MS), 1); /* NOT_READY: nothing was stored */
    CHECK_EQ(tsw_req(fd, TSW_COMPARE_SET, "/cs", "first", "second", NULL), 0);
    CHECK_STR(v = tsw_blob(fd, T_MS, NULL), "second");
    free(v);
    CHECK_EQ(tsw_req(fd, TSW_COMPARE_SET, "/cs", "wrong", "third", NULL), 0);
    CHECK_STR(v = tsw_blob(fd, T_MS, NULL), "second");
    free(v);
    get_is(fd, "/cs", "second");
    close(fd);
}

/* ADD replies the new i64 and stores decimal text; GETNUMKEYS, DELETE_KEY, APPEND. */
static void t_add_and_friends(void *arg)
{
    (void)arg;
    int fd = tsw_open(port);
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_ADD);
    tsw_str(&b, "/ctr");
    tsw_u64(&b, 5);
    tsw_u8(&b, TSW_ADD);
    tsw_str(&b, "/ctr");
    tsw_u64(&b, (uint64_t)-7);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    i64_is(fd, 5);
    i64_is(fd, -2);
    get_is(fd, "/ctr", "-2");
    CHECK_EQ(tsw_req(fd, TSW_GETNUMKEYS, NULL), 0);
    int ok;
    int64_t before = tsw_i64(fd, T_MS, &ok);
    CHECK(ok && before >= 1);
    CHECK_EQ(tsw_req(fd, TSW_DELETE_KEY, "/ctr", NULL), 0);
    i64_is(fd, 1);
    CHECK_EQ(tsw_req(fd, TSW_DELETE_KEY, "/ctr", NULL), 0);
    i64_is(fd, 0);
    CHECK_EQ(tsw_req(fd, TSW_GETNUMKEYS, NULL), 0);
    i64_is(fd, before - 1);
    CHECK_EQ(tsw_req(fd, TSW_APPEND, "/ap", "ab", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_APPEND, "/ap", "cd", NULL), 0);
    get_is(fd, "/ap", "abcd");
    close(fd);
}

/* Pipelined ADDs of 2^61: the first three are applied and answered; the fourth would overflow, and
 * closes the connection (TCPStore has no error answer) only after the three answers went out. */
static void t_add_overflow_keeps_replies(void *arg)
{
    (void)arg;
    const int64_t big = (int64_t)1 << 61;
    int fd = tsw_open(port);
    struct tsw_buf b = {0};
    for (int i = 0; i < 4; i++) {
        tsw_u8(&b, TSW_ADD);
        tsw_str(&b, "/ovf");
        tsw_u64(&b, (uint64_t)big);
    }
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    i64_is(fd, big);
    i64_is(fd, 2 * big);
    i64_is(fd, 3 * big);
    int ok = 1;
    tsw_i64(fd, T_MS, &ok);
    CHECK(!ok);   /* closed, not answered */
    close(fd);
    fd = tsw_open(port);
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)(3 * big));
    get_is(fd, "/ovf", want);
    close(fd);
}

/* MULTI_SET has no reply; MULTI_GET answers every value back to back, empty for a missing one. */
static void t_multi(void *arg)
{
    (void)arg;
    int fd = tsw_open(port);
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_MULTI_SET);
    tsw_u64(&b, 2);
    tsw_str(&b, "/m1");
    tsw_str(&b, "one");
    tsw_str(&b, "/m2");
    tsw_str(&b, "two");
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    const char *keys[] = {"/m2", "/m-missing", "/m1"};
    send_keys(fd, TSW_MULTI_GET, keys, 3);
    const char *want[] = {"two", "", "one"};
    for (int i = 0; i < 3; i++) {
        char *v = tsw_blob(fd, T_MS, NULL);
        CHECK_STR(v, want[i]);
        free(v);
    }
    CHECK(tsw_quiet(fd, QUIET_MS));
    close(fd);
}

/* CHECK is READY (0) only with every key present; WAIT answers STOP_WAITING exactly once. */
static void t_wait_once(void *arg)
{
    (void)arg;
    int a = tsw_open(port), b = tsw_open(port);
    const char *keys[] = {"/w1", "/w2"};
    send_keys(a, TSW_CHECK, keys, 2);
    CHECK_EQ(tsw_byte(a, T_MS), 1);
    send_keys(a, TSW_WAIT, keys, 2);
    CHECK(tsw_quiet(a, QUIET_MS));
    CHECK_EQ(tsw_req(b, TSW_SET, "/w1", "x", NULL), 0);
    CHECK(tsw_quiet(a, QUIET_MS));
    CHECK_EQ(tsw_req(b, TSW_SET, "/w2", "y", NULL), 0);
    CHECK_EQ(tsw_byte(a, T_MS), 0);
    /* More sets of the same keys owe nothing: the next bytes are the ping's. */
    CHECK_EQ(tsw_req(b, TSW_SET, "/w1", "again", NULL), 0);
    ping_ok(b, 1);
    ping_ok(a, 2);
    send_keys(a, TSW_CHECK, keys, 2);
    CHECK_EQ(tsw_byte(a, T_MS), 0);
    send_keys(a, TSW_WAIT, keys, 2); /* all present: at once */
    CHECK_EQ(tsw_byte(a, T_MS), 0);
    close(a);
    close(b);
}

/* A native set releases a TCPStore WAIT. */
static void t_native_releases_wait(void *arg)
{
    (void)arg;
    int a = tsw_open(port);
    const char *key = "/from-native";
    send_keys(a, TSW_WAIT, &key, 1);
    CHECK(tsw_quiet(a, QUIET_MS));
    int nfd = raw_open(T.d.port, T.ns);
    CHECK_EQ(raw_set(nfd, 1, tst_key(&T, key), "n", 1), 0);
    CHECK_EQ(raw_status(nfd, T_MS, NULL), MUSTER__STATUS__OK);
    CHECK_EQ(tsw_byte(a, T_MS), 0);
    get_is(a, key, "n");
    close(nfd);
    close(a);
}

/* CANCEL_WAIT: WAIT_CANCELED alone; after a STOP_WAITING already sent, WAIT_CANCELED follows it. */
static void t_cancel(void *arg)
{
    (void)arg;
    int a = tsw_open(port), b = tsw_open(port);
    const char *key = "/cancel-me";
    send_keys(a, TSW_WAIT, &key, 1);
    CHECK(tsw_quiet(a, QUIET_MS));
    CHECK_EQ(tsw_req(a, TSW_CANCEL_WAIT, NULL), 0);
    CHECK_EQ(tsw_byte(a, T_MS), 1);
    CHECK_EQ(tsw_req(b, TSW_SET, key, "late", NULL), 0); /* the cancelled wait owes nothing */
    ping_ok(b, 3);
    ping_ok(a, 4);
    /* Cancel with nothing parked is still answered. */
    CHECK_EQ(tsw_req(a, TSW_CANCEL_WAIT, NULL), 0);
    CHECK_EQ(tsw_byte(a, T_MS), 1);
    /* The server answered first: STOP_WAITING, then WAIT_CANCELED. */
    key = "/answered-first";
    send_keys(a, TSW_WAIT, &key, 1);
    CHECK_EQ(tsw_req(b, TSW_SET, key, "v", NULL), 0);
    CHECK_EQ(tsw_byte(a, T_MS), 0);
    CHECK_EQ(tsw_req(a, TSW_CANCEL_WAIT, NULL), 0);
    CHECK_EQ(tsw_byte(a, T_MS), 1);
    ping_ok(a, 5);
    close(a);
    close(b);
}

/* The set and the cancel race: the client must read 01, or 00 01, and nothing more. */
static void t_cancel_race(void *arg)
{
    (void)arg;
    int a = tsw_open(port), b = tsw_open(port);
    int both = 0, alone = 0;
    for (int i = 0; i < 60; i++) {
        char key[32];
        snprintf(key, sizeof key, "/race%d", i);
        const char *k = key;
        send_keys(a, TSW_WAIT, &k, 1);
        ping_ok(b, (uint32_t)i); /* b is open; a's wait is most likely parked */
        CHECK_EQ(tsw_req(b, TSW_SET, key, "v", NULL), 0);
        CHECK_EQ(tsw_req(a, TSW_CANCEL_WAIT, NULL), 0);
        int first = tsw_byte(a, T_MS);
        if (first == 0) {
            CHECK_EQ(tsw_byte(a, T_MS), 1);
            both++;
        } else {
            CHECK_EQ(first, 1);
            alone++;
        }
        ping_ok(a, 1000u + (uint32_t)i); /* nothing stale in between */
    }
    printf("  cancel race: %d answered then cancelled, %d cancelled first\n", both, alone);
    close(a);
    close(b);
}

/* Requests after a parked WAIT are answered after it, in stream order. */
static void t_stream_order(void *arg)
{
    (void)arg;
    int a = tsw_open(port), b = tsw_open(port);
    const char *key = "/order";
    struct tsw_buf buf = {0};
    tsw_u8(&buf, TSW_WAIT);
    tsw_u64(&buf, 1);
    tsw_str(&buf, key);
    tsw_u8(&buf, TSW_PING);
    tsw_u32(&buf, 0x01020304);
    CHECK_EQ(tsw_send(a, &buf), 0);
    tsw_free(&buf);
    CHECK(tsw_quiet(a, QUIET_MS));
    CHECK_EQ(tsw_req(b, TSW_SET, key, "v", NULL), 0);
    uint8_t got[5], want[5] = {0x00, 0x04, 0x03, 0x02, 0x01};
    CHECK_EQ(tsw_read(a, got, sizeof got, T_MS), 0);
    CHECK_MEM(got, sizeof got, want, sizeof want);
    close(a);
    close(b);
}

/* Queues: length, check, FIFO pops (length before the pop, then the value), empty pop. */
static void t_queue(void *arg)
{
    (void)arg;
    int fd = tsw_open(port);
    const char *q = "/q";
    CHECK_EQ(tsw_req(fd, TSW_QUEUE_LEN, q, NULL), 0);
    i64_is(fd, 0);
    send_keys(fd, TSW_CHECK, &q, 1);
    CHECK_EQ(tsw_byte(fd, T_MS), 1);
    CHECK_EQ(tsw_req(fd, TSW_QUEUE_PUSH, q, "a", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_QUEUE_PUSH, q, "bb", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_QUEUE_LEN, q, NULL), 0);
    i64_is(fd, 2);
    send_keys(fd, TSW_CHECK, &q, 1);
    CHECK_EQ(tsw_byte(fd, T_MS), 0);
    send_keys(fd, TSW_WAIT, &q, 1);
    CHECK_EQ(tsw_byte(fd, T_MS), 0);
    CHECK_EQ(tsw_req(fd, TSW_QUEUE_POP, q, NULL), 0);
    i64_is(fd, 2);
    char *v = tsw_blob(fd, T_MS, NULL);
    CHECK_STR(v, "a");
    free(v);
    CHECK_EQ(tsw_req(fd, TSW_QUEUE_POP, q, NULL), 0);
    i64_is(fd, 1);
    CHECK_STR(v = tsw_blob(fd, T_MS, NULL), "bb");
    free(v);
    CHECK_EQ(tsw_req(fd, TSW_QUEUE_POP, q, NULL), 0);
    i64_is(fd, 0);
    ping_ok(fd, 9); /* no value followed the empty pop */
    close(fd);
}

/* A push wakes one parked WAIT on the queue, not all of them. */
static void t_queue_wake_one(void *arg)
{
    (void)arg;
    int w1 = tsw_open(port), w2 = tsw_open(port), p = tsw_open(port);
    const char *q = "/q-wake";
    send_keys(w1, TSW_WAIT, &q, 1);
    send_keys(w2, TSW_WAIT, &q, 1);
    ping_ok(p, 1);
    CHECK(tsw_quiet(w1, QUIET_MS) && tsw_quiet(w2, 1));
    CHECK_EQ(tsw_req(p, TSW_QUEUE_PUSH, q, "x", NULL), 0);
    ping_ok(p, 2);
    int r1 = tsw_byte(w1, QUIET_MS), r2 = tsw_byte(w2, QUIET_MS);
    CHECK((r1 == 0) != (r2 == 0)); /* exactly one woke */
    CHECK(r1 == 0 || r1 == -1);
    CHECK(r2 == 0 || r2 == -1);
    CHECK_EQ(tsw_req(p, TSW_QUEUE_PUSH, q, "y", NULL), 0);
    CHECK_EQ(tsw_byte(r1 == 0 ? w2 : w1, T_MS), 0);
    close(w1);
    close(w2);
    close(p);
}

/* LIST_KEYS: the count, then every key of a fresh store (init/ included; queues are not keys): the
 * listener's namespace, or the relay's generation. */
static void t_list_keys(void *arg)
{
    (void)arg;
    struct tst t2;
    uint16_t p2 = tst_start(&t2, NULL);
    int fd = tsw_open(p2);
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_ADD);
    tsw_str(&b, "init/");
    tsw_u64(&b, 1);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    i64_is(fd, 1);
    CHECK_EQ(tsw_req(fd, TSW_SET, "/a", "1", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_SET, "/b", "2", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_QUEUE_PUSH, "/queue-only", "x", NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_LIST_KEYS, NULL), 0);
    i64_is(fd, 3);
    int seen = 0;
    for (int i = 0; i < 3; i++) {
        char *k = tsw_blob(fd, T_MS, NULL);
        CHECK(k != NULL);
        if (k && (!strcmp(k, "init/") || !strcmp(k, "/a") || !strcmp(k, "/b")))
            seen++;
        free(k);
    }
    CHECK_EQ(seen, 3);
    CHECK(tsw_quiet(fd, QUIET_MS));
    close(fd);
    CHECK_EQ(tst_stop(&t2), 0);
}

/* Queue a request of type whose fields are the given byte strings (lengths given). */
static void req_bytes(struct tsw_buf *b, uint8_t type, const char *const *f, const size_t *len, int n)
{
    tsw_u8(b, type);
    for (int i = 0; i < n; i++) {
        tsw_u64(b, len[i]);
        tsw_raw(b, f[i], len[i]);
    }
}

/* Keys are bytes: `nul\0key`, `nul` and `nul%00key` are three keys, each with its own value, present to
 * CHECK, deleted alone; LIST_KEYS gives them back byte for byte. */
static void t_binary_keys(void *arg)
{
    (void)arg;
    struct tst t2;
    uint16_t p2 = tst_start(&t2, NULL);
    int fd = tsw_open(p2);
    static const char *keys[] = {"nul\0key", "nul", "nul%00key"};
    static const size_t klen[] = {7, 3, 9};
    static const char *vals[] = {"a", "bb", "ccc"};
    struct tsw_buf b = {0};
    for (int i = 0; i < 3; i++) {
        const char *f[] = {keys[i], vals[i]};
        const size_t l[] = {klen[i], strlen(vals[i])};
        req_bytes(&b, TSW_SET, f, l, 2);
    }
    for (int i = 0; i < 3; i++)
        req_bytes(&b, TSW_GET, &keys[i], &klen[i], 1);
    CHECK_EQ(tsw_send(fd, &b), 0);
    b.n = 0;
    for (int i = 0; i < 3; i++) {
        size_t len = 0;
        char *v = tsw_blob(fd, T_MS, &len);
        CHECK(v && len == strlen(vals[i]) && memcmp(v, vals[i], len) == 0);
        free(v);
    }
    req_bytes(&b, TSW_DELETE_KEY, &keys[0], &klen[0], 1);
    tsw_u8(&b, TSW_CHECK);
    tsw_u64(&b, 2);
    for (int i = 0; i < 2; i++) {
        tsw_u64(&b, klen[i]);
        tsw_raw(&b, keys[i], klen[i]);
    }
    tsw_u8(&b, TSW_LIST_KEYS);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    i64_is(fd, 1);
    CHECK_EQ(tsw_byte(fd, T_MS), 1); /* NOT_READY: nul\0key is gone, nul is there */
    i64_is(fd, 2);
    int seen = 0;
    for (int i = 0; i < 2; i++) {
        size_t len = 0;
        char *k = tsw_blob(fd, T_MS, &len);
        seen += k && ((len == klen[1] && !memcmp(k, keys[1], len)) || (len == klen[2] && !memcmp(k, keys[2], len)));
        free(k);
    }
    CHECK_EQ(seen, 2);
    close(fd);
    CHECK_EQ(tst_stop(&t2), 0);
}

static void barrier(int fd, const char *key, int64_t ws);

/* TCPStore waits have no server deadline: under --max-wait-timeout 200 a WAIT and a BARRIER stay parked for
 * 700 ms (the relay's upstream waits run out and are sent again meanwhile), then the set and the last
 * arrival release each exactly once. */
static void t_long_wait(void *arg)
{
    (void)arg;
    struct tst t2;
    const char *extra[] = {"--wait-timeout", "200", "--max-wait-timeout", "200", NULL};
    uint16_t p2 = tst_start(&t2, extra);
    int a = tsw_open(p2), b = tsw_open(p2), c = tsw_open(p2);
    const char *key = "/long";
    send_keys(a, TSW_WAIT, &key, 1);
    barrier(b, "/long-bar", 2);
    CHECK(tsw_quiet(a, 700) && tsw_quiet(b, 1));
    CHECK_EQ(tsw_req(c, TSW_SET, key, "v", NULL), 0);
    CHECK_EQ(tsw_byte(a, T_MS), 0);
    barrier(c, "/long-bar", 2);
    CHECK_EQ(tsw_byte(c, T_MS), 0);
    CHECK_EQ(tsw_byte(b, T_MS), 0);
    ping_ok(a, 11);
    ping_ok(b, 12);
    close(a);
    close(b);
    close(c);
    CHECK_EQ(tst_stop(&t2), 0);
}

/* Send BARRIER key world_size. */
static void barrier(int fd, const char *key, int64_t ws)
{
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_BARRIER);
    tsw_str(&b, key);
    tsw_u64(&b, (uint64_t)ws);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
}

/* BARRIER: the world_size-th arrival releases all; the count is the key's value; a key is single-use. */
static void t_barrier(void *arg)
{
    (void)arg;
    int fd[4];
    for (int i = 0; i < 4; i++)
        fd[i] = tsw_open(port);
    barrier(fd[0], "/bar", 3);
    barrier(fd[1], "/bar", 3);
    CHECK(tsw_quiet(fd[0], QUIET_MS) && tsw_quiet(fd[1], 1));
    barrier(fd[2], "/bar", 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(tsw_byte(fd[i], T_MS), 0);
    get_is(fd[3], "/bar", "3");
    barrier(fd[3], "/bar", 3); /* the count stays above world_size */
    CHECK_EQ(tsw_byte(fd[3], T_MS), 0);
    /* Native adds count as arrivals. */
    barrier(fd[0], "/nbar", 3);
    CHECK(tsw_quiet(fd[0], QUIET_MS));
    int nfd = raw_open(T.d.port, T.ns);
    Muster__AddReq add = MUSTER__ADD_REQ__INIT;
    add.key = (char *)tst_key(&T, "/nbar");
    add.delta = 2;
    Muster__Request r = MUSTER__REQUEST__INIT;
    r.id = 1;
    r.op_case = MUSTER__REQUEST__OP_ADD;
    r.add = &add;
    CHECK_EQ(raw_send_request(nfd, &r), 0);
    CHECK_EQ(raw_status(nfd, T_MS, NULL), MUSTER__STATUS__OK);
    CHECK_EQ(tsw_byte(fd[0], T_MS), 0);
    /* A parked barrier is cancelled like a wait. */
    barrier(fd[1], "/cbar", 2);
    CHECK(tsw_quiet(fd[1], QUIET_MS));
    CHECK_EQ(tsw_req(fd[1], TSW_CANCEL_WAIT, NULL), 0);
    CHECK_EQ(tsw_byte(fd[1], T_MS), 1);
    close(nfd);
    for (int i = 0; i < 4; i++)
        close(fd[i]);
}

int main(void)
{
    h_init("tcpstore-wire", 120);
    port = tst_start(&T, NULL);
    if (!port)
        return h_finish();
    H_RUN(t_handshake, NULL);
    H_RUN(t_set_example, NULL);
    H_RUN(t_get_missing, NULL);
    H_RUN(t_compare_set, NULL);
    H_RUN(t_add_and_friends, NULL);
    H_RUN(t_add_overflow_keeps_replies, NULL);
    H_RUN(t_multi, NULL);
    H_RUN(t_wait_once, NULL);
    H_RUN(t_native_releases_wait, NULL);
    H_RUN(t_cancel, NULL);
    H_RUN(t_cancel_race, NULL);
    H_RUN(t_stream_order, NULL);
    H_RUN(t_queue, NULL);
    H_RUN(t_queue_wake_one, NULL);
    H_RUN(t_list_keys, NULL);
    H_RUN(t_binary_keys, NULL);
    H_RUN(t_long_wait, NULL);
    H_RUN(t_barrier, NULL);
    if (!T.relay) {
        CHECK_EQ(h_stat(&T.d, "tcpstore_validate_era"), h_stat(&T.d, "tcpstore_connections_accepted"));
        CHECK_EQ(h_stat(&T.d, "tcpstore_bad_request"), 1);   /* t_add_overflow_keeps_replies' refused ADD */
    }
    CHECK_EQ(tst_stop(&T), 0);
    if (T.relay) {
        /* The relay closed no worker's connection but the one whose ADD overflowed, and counted no
         * refusal. */
        char buf[1 << 14];
        tst_relay_report(&T, buf, sizeof buf);
        const char *closed = strstr(buf, "closing a worker's store connection");
        CHECK(closed == NULL || (strstr(closed, "overflow") != NULL &&
                                 strstr(closed + 1, "closing a worker's store connection") == NULL));
        CHECK(strstr(buf, "bad_request") == NULL || strstr(buf, "bad_request 0,") != NULL);
    }
    return h_finish();
}
