/*
 * Writes the seed corpora of the fuzz targets (run by hand when the
 * protocol, the record format or a script encoding changes):
 *
 *   gen-corpus frame DIR     one ClientFrame body per file (no length
 *                            prefix): one per op plus hello and odd cases
 *   gen-corpus conns DIR     scripts of native requests on several
 *                            connections (fuzz_script.h)
 *   gen-corpus tcpstore DIR  scripts of TCPStore requests
 *   gen-corpus durable DIR   data directories: MANIFEST, snapshot and log
 *                            segments, whole, torn and damaged
 *
 * The options corpus is plain text written by hand.
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_script.h"
#include "muster.pb-c.h"
#include "precord.h"
#include "tcpstore_int.h"

/* Write a packed ClientFrame to DIR/name. */
static int gen_write(const char *dir, const char *name, const Muster__ClientFrame *f)
{
    char path[4096];
    size_t n = muster__client_frame__get_packed_size(f);
    uint8_t *buf = malloc(n ? n : 1);
    FILE *out;
    if (!buf)
        return -1;
    muster__client_frame__pack(f, buf);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    out = fopen(path, "wb");
    if (!out || fwrite(buf, 1, n, out) != n) {
        free(buf);
        if (out)
            fclose(out);
        return -1;
    }
    free(buf);
    return fclose(out);
}

/* Write a Request with the given op case and op message. */
static int gen_req(const char *dir, const char *name, Muster__Request__OpCase c, void *op)
{
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    Muster__Request r = MUSTER__REQUEST__INIT;
    r.id = 1;
    r.op_case = c;
    /* Every op pointer of the oneof shares one union slot. */
    r.set = op;
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_REQUEST;
    f.request = &r;
    return gen_write(dir, name, &f);
}

/* Write hello and the key-value ops. */
static int gen_kv(const char *dir)
{
    static char *keys[] = {"a", "b/c", "d"};
    static ProtobufCBinaryData vals[] = {{1, (uint8_t *)"1"}, {0, NULL}, {3, (uint8_t *)"x\0y"}};
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    Muster__Hello h = MUSTER__HELLO__INIT;
    Muster__SetReq set = MUSTER__SET_REQ__INIT;
    Muster__GetReq get = MUSTER__GET_REQ__INIT;
    Muster__AddReq add = MUSTER__ADD_REQ__INIT;
    Muster__CompareSetReq cas = MUSTER__COMPARE_SET_REQ__INIT;
    Muster__DeleteReq del = MUSTER__DELETE_REQ__INIT;
    Muster__CheckReq check = MUSTER__CHECK_REQ__INIT;
    Muster__WaitReq wait = MUSTER__WAIT_REQ__INIT;
    Muster__NumKeysReq num = MUSTER__NUM_KEYS_REQ__INIT;
    Muster__MultiGetReq mget = MUSTER__MULTI_GET_REQ__INIT;
    Muster__MultiSetReq mset = MUSTER__MULTI_SET_REQ__INIT;
    Muster__AppendReq app = MUSTER__APPEND_REQ__INIT;
    Muster__ListReq list = MUSTER__LIST_REQ__INIT;
    int rc = 0;
    h.protocol_version = 1;
    h.namespace_ = "job";
    h.token = "t";
    h.client_name = "seed";
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_HELLO;
    f.hello = &h;
    rc |= gen_write(dir, "hello", &f);
    set.key = "k";
    set.value = vals[2];
    rc |= gen_req(dir, "set", MUSTER__REQUEST__OP_SET, &set);
    get.key = "k";
    get.wait = 1;
    get.timeout_ms = 100;
    rc |= gen_req(dir, "get-wait", MUSTER__REQUEST__OP_GET, &get);
    add.key = "n";
    add.delta = -5;
    rc |= gen_req(dir, "add", MUSTER__REQUEST__OP_ADD, &add);
    cas.key = "k";
    cas.expected = vals[0];
    cas.desired = vals[2];
    rc |= gen_req(dir, "compare-set", MUSTER__REQUEST__OP_COMPARE_SET, &cas);
    del.key = "k";
    rc |= gen_req(dir, "delete", MUSTER__REQUEST__OP_DELETE, &del);
    check.n_keys = wait.n_keys = mget.n_keys = mset.n_keys = mset.n_values = 3;
    check.keys = wait.keys = mget.keys = mset.keys = keys;
    mset.values = vals;
    wait.timeout_ms = 50;
    mget.wait = 1;
    rc |= gen_req(dir, "check", MUSTER__REQUEST__OP_CHECK, &check);
    rc |= gen_req(dir, "wait", MUSTER__REQUEST__OP_WAIT, &wait);
    rc |= gen_req(dir, "num-keys", MUSTER__REQUEST__OP_NUM_KEYS, &num);
    rc |= gen_req(dir, "multi-get", MUSTER__REQUEST__OP_MULTI_GET, &mget);
    rc |= gen_req(dir, "multi-set", MUSTER__REQUEST__OP_MULTI_SET, &mset);
    app.key = "k";
    app.value = vals[0];
    rc |= gen_req(dir, "append", MUSTER__REQUEST__OP_APPEND, &app);
    list.prefix = "b/";
    list.after = "b/a";
    list.limit = 2;
    rc |= gen_req(dir, "list", MUSTER__REQUEST__OP_LIST, &list);
    return rc;
}

/* Write ping, barrier, watch and the rendezvous ops. */
static int gen_other(const char *dir)
{
    Muster__PingReq ping = MUSTER__PING_REQ__INIT;
    Muster__BarrierReq bar = MUSTER__BARRIER_REQ__INIT;
    Muster__WatchReq watch = MUSTER__WATCH_REQ__INIT;
    Muster__UnwatchReq unwatch = MUSTER__UNWATCH_REQ__INIT;
    Muster__RdzvJoinReq join = MUSTER__RDZV_JOIN_REQ__INIT;
    Muster__RdzvLeaveReq leave = MUSTER__RDZV_LEAVE_REQ__INIT;
    Muster__RdzvHeartbeatReq hb = MUSTER__RDZV_HEARTBEAT_REQ__INIT;
    int rc = 0;
    ping.payload.data = (uint8_t *)"pong";
    ping.payload.len = 4;
    rc |= gen_req(dir, "ping", MUSTER__REQUEST__OP_PING, &ping);
    bar.name = "b";
    bar.count = 1;
    bar.timeout_ms = 10;
    rc |= gen_req(dir, "barrier", MUSTER__REQUEST__OP_BARRIER, &bar);
    watch.prefix = "w/";
    rc |= gen_req(dir, "watch", MUSTER__REQUEST__OP_WATCH, &watch);
    unwatch.watch_id = 1;
    rc |= gen_req(dir, "unwatch", MUSTER__REQUEST__OP_UNWATCH, &unwatch);
    join.node_id = "node-a";
    join.local_world_size = 2;
    join.min_nodes = 1;
    join.max_nodes = 2;
    join.last_call_ms = 10;
    join.timeout_ms = 20;
    rc |= gen_req(dir, "rdzv-join", MUSTER__REQUEST__OP_RDZV_JOIN, &join);
    rc |= gen_req(dir, "rdzv-leave", MUSTER__REQUEST__OP_RDZV_LEAVE, &leave);
    hb.generation = 1;
    rc |= gen_req(dir, "rdzv-heartbeat", MUSTER__REQUEST__OP_RDZV_HEARTBEAT, &hb);
    return rc;
}

/* Write hand-made odd bodies: unknown op field, no op, truncated, empty. */
static int gen_odd(const char *dir)
{
    static const struct {
        const char *name;
        size_t len;
        const char *bytes;
    } odd[] = {
        {"unknown-op", 7, "\x12\x05\x08\x07\x9a\x06\x00"},
        {"no-op", 4, "\x12\x02\x08\x09"},
        {"truncated", 5, "\x12\x10\x08\x01\x52"},
        {"empty", 0, ""},
        {"unknown-frame", 3, "\x1a\x01\x00"},
    };
    char path[4096];
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        FILE *f;
        snprintf(path, sizeof path, "%s/%s", dir, odd[i].name);
        f = fopen(path, "wb");
        if (!f || fwrite(odd[i].bytes, 1, odd[i].len, f) != odd[i].len) {
            if (f)
                fclose(f);
            return -1;
        }
        fclose(f);
    }
    return 0;
}

/* Write n bytes to DIR/name. */
static int gen_bytes(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n)) {
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

/* A named script: its steps, four bytes each (raw steps carry their bytes after them). */
struct gen_script {
    const char *name;
    size_t len;
    const unsigned char *steps;
};
#define GEN_SCRIPT(name, ...) {name, sizeof((const unsigned char[]){__VA_ARGS__}), (const unsigned char[]){__VA_ARGS__}}

/* Write the scripts of the conns target: the interactions one request per input never reaches. */
static int gen_conns(const char *dir)
{
#define H(c) FZ_STEP(c, CF_HELLO), 0, 0, 0
    const struct gen_script s[] = {
        GEN_SCRIPT("wait-then-set", H(0), H(1), FZ_STEP(0, CF_WAIT), 0x03, 15, 0, FZ_STEP(1, CF_SET), 0, 0, 0,
                   FZ_STEP(1, CF_SET), 1, 0, 1, FZ_STEP(0, CF_GET), 0, 0x10, 0),
        GEN_SCRIPT("get-wait-then-set", H(0), H(1), FZ_STEP(0, CF_GET), 2, 0x1f, 0, FZ_STEP(0, CF_MULTI_GET), 0x06,
                   0x1f, 0, FZ_STEP(1, CF_MULTI_SET), 0x06, 0, 0, FZ_STEP(0, CF_NUM_KEYS), 0, 0, 0),
        GEN_SCRIPT("barrier-release", H(0), H(1), H(2), FZ_STEP(1, CF_SET), 0, 0, 4, FZ_STEP(0, CF_BARRIER), 7,
                   3 | 15 << 2, 8, FZ_STEP(1, CF_BARRIER), 7, 3 | 15 << 2, 8, FZ_STEP(2, CF_BARRIER), 7, 3 | 15 << 2,
                   8, FZ_STEP(0, CF_BARRIER), 7, 3 | 15 << 2, 0),
        GEN_SCRIPT("watch-fan-out", H(0), H(1), H(2), FZ_STEP(0, CF_WATCH), 8, 0, 0, FZ_STEP(1, CF_WATCH), 3, 0, 0,
                   FZ_STEP(1, CF_WATCH), 8, 0, 0, FZ_STEP(2, CF_SET), 3, 0, 2, FZ_STEP(2, CF_APPEND), 3, 0, 2,
                   FZ_STEP(2, CF_SET), 4, 0, 6, FZ_STEP(2, CF_DELETE), 3, 0, 0, FZ_STEP(1, CF_UNWATCH), 0, 1, 0,
                   FZ_STEP(2, CF_SET), 4, 0, 0),
        GEN_SCRIPT("close-with-parked-work", H(0), H(1), FZ_STEP(0, CF_GET), 2, 0x1f, 0, FZ_STEP(0, CF_WAIT), 0x05,
                   0, 0, FZ_STEP(0, CF_BARRIER), 0, 2 | 15 << 2, 0, FZ_STEP(0, CF_WATCH), 8, 0, 0,
                   FZ_STEP(0, CF_CLOSE), 0, 0, 0, FZ_STEP(1, CF_SET), 2, 0, 0, FZ_STEP(1, CF_SET), 3, 0, 0,
                   FZ_STEP(1, CF_BARRIER), 0, 2 | 15 << 2, 0),
        GEN_SCRIPT("rdzv-round", H(0), H(1), FZ_STEP(0, CF_JOIN), 0, 1 | 4, 2 | 15 << 3, FZ_STEP(1, CF_JOIN), 1,
                   1 | 4, 0x80 | 2 | 15 << 3, FZ_STEP(0, CF_HEARTBEAT), 0, 1, 0, FZ_STEP(1, CF_LEAVE), 0, 1, 0,
                   FZ_STEP(0, CF_JOIN), 0, 1 | 4, 2 | 15 << 3, FZ_STEP(1, CF_CLOSE), 0, 0, 0),
        GEN_SCRIPT("rdzv-last-call", H(0), H(1), FZ_STEP(0, CF_JOIN), 0, 1 | 8, 1 | 15 << 3, FZ_STEP(1, CF_JOIN), 1,
                   1 | 8, 1 | 15 << 3, FZ_STEP(0, CF_TICK), 0, 2, 0, FZ_STEP(0, CF_HEARTBEAT), 0, 1, 0,
                   FZ_STEP(1, CF_TICK), 0, 3, 0, FZ_STEP(0, CF_LEAVE), 0, 0, 0),
        GEN_SCRIPT("deadlines", H(0), FZ_STEP(0, CF_WAIT), 0x01, 1, 0, FZ_STEP(0, CF_BARRIER), 1, 2 | 1 << 2, 0,
                   FZ_STEP(0, CF_GET), 0, 0x11, 0, FZ_STEP(0, CF_TICK), 0, 3, 0, FZ_STEP(0, CF_PING), 0, 0, 2),
        GEN_SCRIPT("slow-watcher", H(0), H(1), FZ_STEP(0, CF_WATCH), 8, 0, 0, FZ_STEP(0, CF_DEAF), 0, 0, 0,
                   FZ_STEP(1, CF_SET), 3, 0, 6, FZ_STEP(1, CF_SET), 4, 0, 6, FZ_STEP(1, CF_SET), 3, 0, 6,
                   FZ_STEP(1, CF_SET), 4, 0, 6, FZ_STEP(1, CF_SET), 3, 0, 6, FZ_STEP(1, CF_TICK), 0, 3, 0,
                   FZ_STEP(0, CF_DEAF), 0, 0, 0),
        GEN_SCRIPT("namespaces-and-tokens", FZ_STEP(0, CF_HELLO), 0, 2 | 1 << 2, 0, FZ_STEP(1, CF_HELLO), 0,
                   2 | 2 << 2, 0, FZ_STEP(2, CF_HELLO), 0, 1, 0, FZ_STEP(3, CF_HELLO), 0, 0x40, 0,
                   FZ_STEP(0, CF_SET), 0, 0, 0, FZ_STEP(2, CF_GET), 0, 0, 0, FZ_STEP(0, CF_HELLO), 0, 0, 0,
                   FZ_STEP(1, CF_HELLO), 0, 2 | 1 << 2, 0),
        GEN_SCRIPT("limits", H(0), FZ_STEP(0, CF_WAIT), 1, 0, 0, FZ_STEP(0, CF_WAIT), 2, 0, 0, FZ_STEP(0, CF_WAIT),
                   4, 0, 0, FZ_STEP(0, CF_WAIT), 8, 0, 0, FZ_STEP(0, CF_WAIT), 16, 0, 0, FZ_STEP(0, CF_WAIT), 32, 0, 0,
                   FZ_STEP(0, CF_WAIT), 1, 0, 0, FZ_STEP(0, CF_WATCH), 0, 0, 0, FZ_STEP(0, CF_WATCH), 1, 0, 0,
                   FZ_STEP(0, CF_WATCH), 2, 0, 0, FZ_STEP(0, CF_WATCH), 3, 0, 0, FZ_STEP(0, CF_SET), 7, 0, 7,
                   FZ_STEP(0, CF_SET), 6, 0, 0, FZ_STEP(0, CF_ADD), 5, 0x80, 0, FZ_STEP(0, CF_ADD), 5, 0x80, 0),
        GEN_SCRIPT("pipelined", H(0), FZ_STEP(0, CF_BATCH), 0, 0, 0, FZ_STEP(0, CF_SET), 0, 0, 0, FZ_STEP(0, CF_CAS),
                   0, 0, 1, FZ_STEP(0, CF_ADD), 0, 0, 3, FZ_STEP(0, CF_CHECK), 0x3f, 0, 0, FZ_STEP(0, CF_LIST), 8, 1,
                   0, FZ_STEP(0, CF_MULTI_SET), 0x07, 0x20, 0, FZ_STEP(0, CF_BATCH), 0, 0, 0),
        GEN_SCRIPT("raw-and-half-close", H(0), FZ_STEP(0, CF_RAW), 5, 0, 0, 0, 0, 0, 9, 0x12,
                   FZ_STEP(1, CF_HELLO), 0, 0, 0, FZ_STEP(1, CF_GET), 0, 0x1f, 0, FZ_STEP(1, CF_HALF_CLOSE), 0, 0, 0,
                   FZ_STEP(2, CF_SET), 0, 0, 0),
    };
#undef H
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (gen_bytes(dir, s[i].name, s[i].steps, s[i].len) != 0)
            return -1;
    return 0;
}

/* Write the scripts of the tcpstore target. */
static int gen_tcpstore(const char *dir)
{
#define V(c) FZ_STEP(c, TS_VALIDATE), 0, 0, 0
    const struct gen_script s[] = {
        GEN_SCRIPT("ops", V(0), FZ_STEP(0, TS_SET), 0, 0, 0, FZ_STEP(0, TS_GET), 0, 0, 0, FZ_STEP(0, TS_ADD), 1, 0, 3,
                   FZ_STEP(0, TS_COMPARE_SET), 0, 0, 2, FZ_STEP(0, TS_APPEND), 0, 0, 2, FZ_STEP(0, TS_CHECK), 0x07, 0,
                   0, FZ_STEP(0, TS_GETNUMKEYS), 0, 0, 0, FZ_STEP(0, TS_MULTI_SET), 0x43, 0, 0,
                   FZ_STEP(0, TS_MULTI_GET), 0x43, 0, 0, FZ_STEP(0, TS_LIST_KEYS), 0, 0, 0, FZ_STEP(0, TS_DELETE_KEY),
                   0, 0, 0, FZ_STEP(0, TS_PING), 0, 7, 0),
        GEN_SCRIPT("wait-then-set", V(0), V(1), FZ_STEP(0, TS_WAIT), 0x06, 0, 0, FZ_STEP(1, TS_SET), 1, 0, 0,
                   FZ_STEP(1, TS_SET), 2, 0, 0, FZ_STEP(0, TS_GET), 2, 0, 0),
        GEN_SCRIPT("cancel-wait", V(0), FZ_STEP(0, TS_WAIT), 0x04, 0, 0, FZ_STEP(0, TS_GET), 0, 0, 0,
                   FZ_STEP(0, TS_CANCEL_WAIT), 0, 0, 0, FZ_STEP(0, TS_CANCEL_WAIT), 0, 0, 0),
        GEN_SCRIPT("barrier", V(0), V(1), V(2), FZ_STEP(0, TS_BARRIER), 4, 3, 0, FZ_STEP(1, TS_BARRIER), 4, 3, 0,
                   FZ_STEP(2, TS_BARRIER), 4, 3, 0, FZ_STEP(0, TS_BARRIER), 4, 0xff, 0),
        GEN_SCRIPT("queue", V(0), V(1), FZ_STEP(0, TS_WAIT), 0x08, 0, 0, FZ_STEP(1, TS_QUEUE_PUSH), 3, 0, 0,
                   FZ_STEP(1, TS_QUEUE_PUSH), 3, 0, 2, FZ_STEP(1, TS_QUEUE_LEN), 3, 0, 0, FZ_STEP(0, TS_QUEUE_POP), 3,
                   0, 0, FZ_STEP(1, TS_QUEUE_POP), 3, 0, 0, FZ_STEP(1, TS_QUEUE_POP), 3, 0, 0),
        GEN_SCRIPT("old-numbering", FZ_STEP(0, TS_SET), 0, 0, 0, FZ_STEP(0, TS_GET), 0, 0, 0, FZ_STEP(0, TS_WAIT),
                   0x02, 0, 0, FZ_STEP(0, TS_ADD), 1, 0, 3, FZ_STEP(1, TS_WAIT), 0x04, 0, 0, FZ_STEP(0, TS_SET), 2, 0,
                   0, FZ_STEP(0, TS_PING), 0, 0, 0),
        GEN_SCRIPT("close-with-parked-work", V(0), V(1), V(2), FZ_STEP(0, TS_WAIT), 0x04, 0, 0,
                   FZ_STEP(1, TS_BARRIER), 4, 2, 0, FZ_STEP(2, TS_WAIT), 0x08, 0, 0, FZ_STEP(0, TA_CLOSE), 0, 0, 0,
                   FZ_STEP(1, TA_CLOSE), 0, 0, 0, FZ_STEP(3, TS_VALIDATE), 0, 0, 0, FZ_STEP(3, TS_SET), 2, 0, 0,
                   FZ_STEP(3, TS_BARRIER), 4, 2, 0),
        GEN_SCRIPT("slow-reader", V(0), V(1), FZ_STEP(1, TS_SET), 0, 0, 6, FZ_STEP(0, TA_DEAF), 0, 0, 0,
                   FZ_STEP(0, TS_GET), 0, 0, 0, FZ_STEP(0, TS_GET), 0, 0, 0, FZ_STEP(0, TS_GET), 0, 0, 0,
                   FZ_STEP(0, TS_GET), 0, 0, 0, FZ_STEP(0, TA_TICK), 0, 3, 0, FZ_STEP(0, TS_GET), 0, 0, 0),
        GEN_SCRIPT("partial-request", V(0), FZ_STEP(0, TA_RAW), 6, 0, 0, 1, 4, 0, 0, 0, 0, FZ_STEP(1, TA_RAW), 3, 0,
                   0, 0, 0xce, 0xf7, FZ_STEP(0, TA_TICK), 0, 3, 0, FZ_STEP(0, TA_TICK), 0, 3, 0),
        GEN_SCRIPT("limits", V(0), FZ_STEP(0, TS_SET), 7, 0, 0, V(1), FZ_STEP(1, TS_SET), 0, 0, 7, V(2),
                   FZ_STEP(2, TS_VALIDATE), 0, 1, 0, FZ_STEP(3, TA_HALF_CLOSE), 0, 0, 0),
    };
#undef V
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        if (gen_bytes(dir, s[i].name, s[i].steps, s[i].len) != 0)
            return -1;
    return 0;
}

/* A data directory being put together: the flags byte, then the files separated by "@@@@". */
struct gen_dir {
    struct evbuffer *b;
};

/* Start a directory with flags. */
static void gen_dir_start(struct gen_dir *d, unsigned flags)
{
    unsigned char f = (unsigned char)flags;
    d->b = evbuffer_new();
    evbuffer_add(d->b, &f, 1);
}

/* End the current file (the next one follows). */
static void gen_dir_next(struct gen_dir *d)
{
    evbuffer_add(d->b, "@@@@", 4);
}

/* Append a set record of ns. */
static void gen_set(struct gen_dir *d, const char *ns, const char *key, size_t klen, const char *val)
{
    prec_put(d->b, PREC_SET, ns, strlen(ns), 1, key, klen, (const uint8_t *)val, strlen(val), 0);
}

/* Append a snapshot of two keys and a generation: begin (next segment next), records, end. */
static void gen_snapshot(struct gen_dir *d, uint64_t next)
{
    prec_put(d->b, PREC_SNAP_BEGIN, "", 0, next, NULL, 0, NULL, 0, 0);
    gen_set(d, "job", "a", 1, "1");
    gen_set(d, "other", "b\0c", 3, "binary key");
    prec_put(d->b, PREC_GEN, "job", 3, 0, NULL, 0, NULL, 0, 4);
    prec_put(d->b, PREC_SNAP_END, "", 0, 3, NULL, 0, NULL, 0, 0);
}

/* Append a segment of a few records. */
static void gen_segment(struct gen_dir *d, const char *tag)
{
    gen_set(d, "job", tag, strlen(tag), "value");
    gen_set(d, "job", "a", 1, tag);
    prec_put(d->b, PREC_DEL, "job", 3, 2, "a", 1, NULL, 0, 0);
    prec_put(d->b, PREC_GEN, "job", 3, 3, NULL, 0, NULL, 0, 5);
    gen_set(d, "", "in-default", 10, tag);
}

/* Append a record in the first format: a wire Request holding a SetReq. */
static void gen_legacy_set(struct gen_dir *d)
{
    Muster__Request r = MUSTER__REQUEST__INIT;
    Muster__SetReq set = MUSTER__SET_REQ__INIT;
    uint8_t body[64], hdr[PREC_HDR];
    size_t n;
    set.key = "legacy";
    set.value.data = (uint8_t *)"old";
    set.value.len = 3;
    r.op_case = MUSTER__REQUEST__OP_SET;
    r.set = &set;
    body[0] = PREC_SET;
    body[1] = 3;
    memcpy(body + 2, "job", 3);
    n = 5 + muster__request__pack(&r, body + 5);
    hdr[0] = (uint8_t)(n >> 24), hdr[1] = (uint8_t)(n >> 16), hdr[2] = (uint8_t)(n >> 8), hdr[3] = (uint8_t)n;
    uLong crc = crc32(0L, body, (uInt)n);
    hdr[4] = (uint8_t)(crc >> 24), hdr[5] = (uint8_t)(crc >> 16), hdr[6] = (uint8_t)(crc >> 8), hdr[7] = (uint8_t)crc;
    evbuffer_add(d->b, hdr, sizeof hdr);
    evbuffer_add(d->b, body, n);
}

/* Write the directory to DIR/name and free it. */
static int gen_dir_write(struct gen_dir *d, const char *dir, const char *name)
{
    size_t n = evbuffer_get_length(d->b);
    int rc = gen_bytes(dir, name, evbuffer_pullup(d->b, -1), n);
    evbuffer_free(d->b);
    return rc;
}

/* Damage the byte at offset at (from the end when negative) of the directory so far. */
static void gen_flip(struct gen_dir *d, long at)
{
    size_t n = evbuffer_get_length(d->b);
    uint8_t *p = evbuffer_pullup(d->b, -1);
    p[at < 0 ? (long)n + at : at] ^= 0x40;
}

/* Cut the last n bytes of the directory so far. */
static void gen_cut(struct gen_dir *d, size_t n)
{
    struct evbuffer *t = evbuffer_new();
    evbuffer_remove_buffer(d->b, t, evbuffer_get_length(d->b) - n);
    evbuffer_free(d->b);
    d->b = t;
}

/* Flags of a data directory input (fuzz_durable.c). */
enum { GD_REPAIR = 1, GD_MANIFEST = 2, GD_SNAPSHOT = 4, GD_SEGS1 = 8, GD_SEGS2 = 16, GD_FROM2 = 0x20, GD_FIXCRC = 0x80 };

#define GEN_MANIFEST(snap, first, last) \
    "muster-data-dir 1\nsnapshot 000000000000000" #snap "\nsegments 000000000000000" #first " 000000000000000" #last "\n"

/* Write the data directory seeds of the durable target. */
static int gen_durable(const char *dir)
{
    static const uint8_t huge[PREC_HDR] = {0x40, 0, 0, 0, 0, 0, 0, 0}; /* announces a 1 GiB body */
    struct gen_dir d;
    int rc = 0;
    /* A whole directory: MANIFEST, snapshot covering segment 1, segments 2 and 3. */
    gen_dir_start(&d, GD_MANIFEST | GD_SNAPSHOT | GD_SEGS2 | GD_FROM2);
    evbuffer_add_printf(d.b, GEN_MANIFEST(2, 2, 3));
    gen_dir_next(&d);
    gen_snapshot(&d, 2);
    gen_dir_next(&d);
    gen_segment(&d, "two");
    gen_dir_next(&d);
    gen_segment(&d, "three");
    rc |= gen_dir_write(&d, dir, "whole");
    /* No MANIFEST (an old directory), two segments, the last torn in its last record. */
    gen_dir_start(&d, GD_SEGS2);
    gen_segment(&d, "one");
    gen_dir_next(&d);
    gen_segment(&d, "two");
    gen_cut(&d, 5);
    rc |= gen_dir_write(&d, dir, "torn-tail");
    /* The last segment ends in zeros (its size reached the disk before its data). */
    gen_dir_start(&d, GD_SEGS1);
    gen_segment(&d, "one");
    evbuffer_add(d.b, "\0\0\0\0\0\0\0\0\0\0\0\0", 12);
    rc |= gen_dir_write(&d, dir, "zero-tail");
    /* Damage in the middle of a segment with intact records after it: refused, or cut with repair. */
    for (unsigned repair = 0; repair < 2; repair++) {
        gen_dir_start(&d, GD_SEGS2 | repair);
        gen_segment(&d, "one");
        gen_flip(&d, 30);
        gen_dir_next(&d);
        gen_segment(&d, "two");
        rc |= gen_dir_write(&d, dir, repair ? "damaged-repair" : "damaged");
    }
    /* A header announcing a 1 GiB body in a small file: a torn tail, read without allocating it... */
    gen_dir_start(&d, GD_SEGS1);
    gen_segment(&d, "one");
    evbuffer_add(d.b, huge, sizeof huge);
    evbuffer_add(d.b, "short", 5);
    rc |= gen_dir_write(&d, dir, "huge-length-tail");
    /* ... and with intact records after it: damage, not a tail. */
    gen_dir_start(&d, GD_SEGS1);
    evbuffer_add(d.b, huge, sizeof huge);
    gen_segment(&d, "after");
    rc |= gen_dir_write(&d, dir, "huge-length-then-records");
    /* The MANIFEST names a segment that is not there. */
    gen_dir_start(&d, GD_MANIFEST | GD_SEGS2);
    evbuffer_add_printf(d.b, GEN_MANIFEST(0, 1, 3));
    gen_dir_next(&d);
    gen_segment(&d, "one");
    gen_dir_next(&d);
    gen_segment(&d, "two");
    rc |= gen_dir_write(&d, dir, "missing-segment");
    /* The MANIFEST names a snapshot that is not there (with repair: accepted, and said). */
    gen_dir_start(&d, GD_MANIFEST | GD_SEGS1 | GD_FROM2 | GD_REPAIR);
    evbuffer_add_printf(d.b, GEN_MANIFEST(2, 2, 2));
    gen_dir_next(&d);
    gen_segment(&d, "two");
    rc |= gen_dir_write(&d, dir, "missing-snapshot-repair");
    /* A snapshot whose end record counts wrong, and one cut short. */
    gen_dir_start(&d, GD_SNAPSHOT);
    prec_put(d.b, PREC_SNAP_BEGIN, "", 0, 1, NULL, 0, NULL, 0, 0);
    gen_set(&d, "job", "a", 1, "1");
    prec_put(d.b, PREC_SNAP_END, "", 0, 7, NULL, 0, NULL, 0, 0);
    rc |= gen_dir_write(&d, dir, "snapshot-bad-count");
    gen_dir_start(&d, GD_SNAPSHOT | GD_SEGS1);
    gen_snapshot(&d, 1);
    gen_cut(&d, 3);
    gen_dir_next(&d);
    gen_segment(&d, "one");
    rc |= gen_dir_write(&d, dir, "snapshot-torn");
    /* Records of the first format, and checksums fixed up after mutation. */
    gen_dir_start(&d, GD_SEGS1 | GD_FIXCRC);
    gen_legacy_set(&d);
    gen_segment(&d, "one");
    rc |= gen_dir_write(&d, dir, "legacy-records");
    return rc;
}

/* Write every seed of the named target into dir. */
int main(int argc, char **argv)
{
    const char *target = argc == 3 ? argv[1] : "frame", *dir = argv[argc - 1];
    int rc;
    if (argc != 2 && argc != 3) {
        fprintf(stderr, "usage: %s [frame|conns|tcpstore|durable] DIR\n", argv[0]);
        return 2;
    }
    if (strcmp(target, "frame") == 0)
        rc = gen_kv(dir) || gen_other(dir) || gen_odd(dir);
    else if (strcmp(target, "conns") == 0)
        rc = gen_conns(dir);
    else if (strcmp(target, "tcpstore") == 0)
        rc = gen_tcpstore(dir);
    else if (strcmp(target, "durable") == 0)
        rc = gen_durable(dir);
    else {
        fprintf(stderr, "gen-corpus: unknown target %s\n", target);
        return 2;
    }
    if (rc) {
        fprintf(stderr, "gen-corpus: cannot write into %s\n", dir);
        return 1;
    }
    return 0;
}
