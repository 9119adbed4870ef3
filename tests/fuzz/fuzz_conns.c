/*
 * libFuzzer target for interactions between native connections: an input
 * is a script of steps, each acting on one of four connections of a fresh
 * in-process server - hello, any op with keys, values, counts and timeouts
 * drawn from small tables (so waits meet sets, barriers fill, watches see
 * each other's writes and rendezvous rounds form), raw bytes, close,
 * half-close, stop reading, or letting a few milliseconds pass so
 * deadlines fire.  The server runs its real handlers (fuzz_net.c); bounds
 * are set low so the limits trip.
 *
 * Checked on every input: each frame the server sends decodes, stays
 * within the max frame it announces, and answers a request that was sent
 * and not answered yet; and once every client has closed, no connection,
 * parked request, watch or rendezvous node is left anywhere.
 *
 * Steps are encoded as fuzz_script.h says.
 */
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "frame.h"
#include "fuzz_net.h"
#include "fuzz_script.h"
#include "ns.h"
#include "rdzv.h"
#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Steps run per input; the rest is ignored. */
#define CF_MAX_STEPS 192
/* Request ids tracked per connection (ids above it are not checked). */
#define CF_MAX_IDS 256
/* Milliseconds one input may sleep in all. */
#define CF_SLEEP_BUDGET 8

/* The daemon's settings: low bounds and short deadlines. */
static char *cf_argv[] = {"musterd-fuzz", "--log-level", "error", "--token", "secure=t", "--max-value", "4K",
                          "--max-key", "256", "--max-frame", "8K", "--max-output", "8K", "--wait-timeout", "5",
                          "--max-wait-timeout", "20", "--max-waiters-per-conn", "6", "--max-watches-per-conn", "3",
                          "--max-keys-per-ns", "64", "--max-keys-per-request", "8", "--slow-timeout", "10",
                          "--heartbeat-timeout", "15", "--auth-backoff", "2", "--auth-backoff-max", "4", NULL};

/* Per connection: the ids sent and answered (0 unsent, 1 sent, 2 answered). */
struct cf_conn {
    uint64_t next_id;
    uint8_t ids[CF_MAX_IDS];
    int tainted; /* raw bytes went out: requests with ids not tracked here may exist */
    int generation;
};

struct cf_state {
    struct fz_net net;
    struct cf_conn c[FZ_CONNS];
    int batch;   /* steps are sent without turning the loop, so they arrive together */
    int slept;   /* ms slept so far */
};

/* Keys: indexes 0-5 are ordinary (3 and 4 under the watched prefix "w/"), 6 is empty, 7 too long. */
static const char *cf_key(unsigned i)
{
    static char longkey[300];
    static const char *const keys[] = {"a", "b", "c", "w/a", "w/b", "n", "", longkey};
    if (!longkey[0])
        memset(longkey, 'k', sizeof longkey - 1);
    return keys[i & 7];
}

/* Values: numbers, text, empty, binary, exactly --max-value, one byte over. */
static ProtobufCBinaryData cf_val(unsigned i)
{
    static uint8_t big[4097];
    static const char *const small[] = {"1", "-7", "x", "", "9223372036854775807", "a\0b"};
    static const size_t lens[] = {1, 2, 1, 0, 19, 3};
    ProtobufCBinaryData d;
    i &= 7;
    if (i < 6) {
        d.data = (uint8_t *)small[i];
        d.len = lens[i];
        return d;
    }
    if (!big[0])
        memset(big, 'v', sizeof big);
    d.data = big;
    d.len = i == 6 ? 4096 : 4097;
    return d;
}

/* Fill keys from a mask: bits 0-5 pick ordinary keys, bit 6 the empty key, bit 7 repeats "a"; returns n. */
static size_t cf_keys(unsigned mask, char **keys)
{
    size_t n = 0;
    for (unsigned b = 0; b < 7; b++)
        if (mask & (1u << b))
            keys[n++] = (char *)cf_key(b);
    if (mask & 0x80)
        keys[n++] = (char *)"a";
    return n;
}

/* Check and forget every whole frame client i received; returns the bytes taken. */
static size_t cf_consume(struct fz_net *net, int i)
{
    struct cf_state *s = net->arg;
    struct fz_client *fc = &net->c[i];
    struct cf_conn *cc = &s->c[i];
    size_t at = 0;
    if (fc->lost)
        return fc->nin;
    while (fc->nin - at >= FRAME_HDR) {
        uint32_t len = frame_len(fc->in + at);
        /* A client is never sent a frame above the limit the hello reply announces. */
        if (len == 0 || len > net->srv.opt.max_frame)
            abort();
        if (fc->nin - at - FRAME_HDR < len)
            break;
        Muster__ServerFrame *f = muster__server_frame__unpack(NULL, len, fc->in + at + FRAME_HDR);
        if (!f || f->frame_case == MUSTER__SERVER_FRAME__FRAME__NOT_SET)
            abort();
        if (f->frame_case == MUSTER__SERVER_FRAME__FRAME_RESPONSE && !cc->tainted) {
            uint64_t id = f->response->id;
            /* Every answer is to a request sent on this connection, and only one per request. */
            if (id == 0 || id >= cc->next_id || (id < CF_MAX_IDS && cc->ids[id] != 1))
                abort();
            if (id < CF_MAX_IDS)
                cc->ids[id] = 2;
        }
        muster__server_frame__free_unpacked(f, NULL);
        at += FRAME_HDR + len;
    }
    return at;
}

/* Make sure client i is connected, starting its id book afresh for a new connection. */
static void cf_open(struct cf_state *s, int i)
{
    fz_open(&s->net, i);
    if (s->c[i].generation != s->net.c[i].generation) {
        memset(&s->c[i], 0, sizeof s->c[i]);
        s->c[i].next_id = 1;
        s->c[i].generation = s->net.c[i].generation;
    }
}

/* Send a ClientFrame as client i. */
static void cf_send_frame(struct cf_state *s, int i, Muster__ClientFrame *f)
{
    uint8_t stack[16384];
    size_t n = frame_size(&f->base);
    uint8_t *buf = n <= sizeof stack ? stack : malloc(n);
    if (!buf)
        abort();
    frame_pack(&f->base, buf);
    /* A frame cut short leaves the stream out of step: what the server reads next is not ours to check. */
    if (fz_send(&s->net, i, buf, n) < n)
        s->c[i].tainted = 1;
    if (buf != stack)
        free(buf);
}

/* Send a Request with op case c (op: its message) as client i, under the connection's next id. */
static void cf_request(struct cf_state *s, int i, Muster__Request__OpCase c, void *op)
{
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    Muster__Request r = MUSTER__REQUEST__INIT;
    struct cf_conn *cc;
    cf_open(s, i);
    cc = &s->c[i];
    r.id = cc->next_id++;
    if (r.id < CF_MAX_IDS)
        cc->ids[r.id] = 1;
    r.op_case = c;
    r.set = op; /* every op pointer of the oneof shares one union slot */
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_REQUEST;
    f.request = &r;
    cf_send_frame(s, i, &f);
}

/* Send a Hello: namespace, token and protocol version picked by x. */
static void cf_hello(struct cf_state *s, int i, unsigned x)
{
    static const char *const names[] = {"job", "other", "secure", ""};
    static const char *const tokens[] = {"", "t", "bad", ""};
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    Muster__Hello h = MUSTER__HELLO__INIT;
    h.protocol_version = x & 0x40 ? 7 : 1;
    h.namespace_ = (char *)names[x & 3];
    h.token = (char *)tokens[(x >> 2) & 3];
    h.client_name = (char *)"fuzz";
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_HELLO;
    f.hello = &h;
    cf_open(s, i);
    cf_send_frame(s, i, &f);
}

/* The key-value ops. */
static void cf_kv(struct cf_state *s, int i, enum cf_action a, unsigned k, unsigned x, unsigned v)
{
    char *keys[8];
    ProtobufCBinaryData vals[8];
    size_t n = cf_keys(k, keys);
    switch (a) {
    case CF_SET: {
        Muster__SetReq m = MUSTER__SET_REQ__INIT;
        m.key = (char *)cf_key(k);
        m.value = cf_val(v);
        cf_request(s, i, MUSTER__REQUEST__OP_SET, &m);
        break;
    }
    case CF_GET: {
        Muster__GetReq m = MUSTER__GET_REQ__INIT;
        m.key = (char *)cf_key(k);
        m.wait = (x & 0x10) != 0;
        m.timeout_ms = x & 15;
        cf_request(s, i, MUSTER__REQUEST__OP_GET, &m);
        break;
    }
    case CF_ADD: {
        Muster__AddReq m = MUSTER__ADD_REQ__INIT;
        m.key = (char *)cf_key(k);
        m.delta = x & 0x80 ? INT64_MAX : (int8_t)v;
        cf_request(s, i, MUSTER__REQUEST__OP_ADD, &m);
        break;
    }
    case CF_CAS: {
        Muster__CompareSetReq m = MUSTER__COMPARE_SET_REQ__INIT;
        m.key = (char *)cf_key(k);
        m.expected = cf_val(x);
        m.desired = cf_val(v);
        cf_request(s, i, MUSTER__REQUEST__OP_COMPARE_SET, &m);
        break;
    }
    case CF_DELETE: {
        Muster__DeleteReq m = MUSTER__DELETE_REQ__INIT;
        m.key = (char *)cf_key(k);
        cf_request(s, i, MUSTER__REQUEST__OP_DELETE, &m);
        break;
    }
    case CF_CHECK: {
        Muster__CheckReq m = MUSTER__CHECK_REQ__INIT;
        m.keys = keys;
        m.n_keys = n;
        cf_request(s, i, MUSTER__REQUEST__OP_CHECK, &m);
        break;
    }
    case CF_WAIT: {
        Muster__WaitReq m = MUSTER__WAIT_REQ__INIT;
        m.keys = keys;
        m.n_keys = n;
        m.timeout_ms = x & 15;
        cf_request(s, i, MUSTER__REQUEST__OP_WAIT, &m);
        break;
    }
    case CF_NUM_KEYS: {
        Muster__NumKeysReq m = MUSTER__NUM_KEYS_REQ__INIT;
        cf_request(s, i, MUSTER__REQUEST__OP_NUM_KEYS, &m);
        break;
    }
    case CF_MULTI_GET: {
        Muster__MultiGetReq m = MUSTER__MULTI_GET_REQ__INIT;
        m.keys = keys;
        m.n_keys = n;
        m.wait = (x & 0x10) != 0;
        m.timeout_ms = x & 15;
        cf_request(s, i, MUSTER__REQUEST__OP_MULTI_GET, &m);
        break;
    }
    case CF_MULTI_SET: {
        Muster__MultiSetReq m = MUSTER__MULTI_SET_REQ__INIT;
        for (size_t j = 0; j < n; j++)
            vals[j] = cf_val(v + j);
        m.keys = keys;
        m.n_keys = n;
        m.values = vals;
        m.n_values = x & 0x20 && n ? n - 1 : n; /* a count that disagrees is a bad request */
        cf_request(s, i, MUSTER__REQUEST__OP_MULTI_SET, &m);
        break;
    }
    case CF_APPEND: {
        Muster__AppendReq m = MUSTER__APPEND_REQ__INIT;
        m.key = (char *)cf_key(k);
        m.value = cf_val(v);
        cf_request(s, i, MUSTER__REQUEST__OP_APPEND, &m);
        break;
    }
    case CF_LIST: {
        Muster__ListReq m = MUSTER__LIST_REQ__INIT;
        m.prefix = (char *)(k & 8 ? cf_key(k) : "");
        m.after = (char *)(v & 8 ? cf_key(v) : "");
        m.limit = x & 3;
        cf_request(s, i, MUSTER__REQUEST__OP_LIST, &m);
        break;
    }
    default:
        break;
    }
}

/* Ping, barrier, watch and the rendezvous ops. */
static void cf_other(struct cf_state *s, int i, enum cf_action a, unsigned k, unsigned x, unsigned v)
{
    static const char *const nodes[] = {"n0", "n1", "n2", ""};
    switch (a) {
    case CF_PING: {
        Muster__PingReq m = MUSTER__PING_REQ__INIT;
        m.payload = cf_val(v);
        cf_request(s, i, MUSTER__REQUEST__OP_PING, &m);
        break;
    }
    case CF_BARRIER: {
        Muster__BarrierReq m = MUSTER__BARRIER_REQ__INIT;
        m.name = (char *)cf_key(k);
        m.count = x & 3;
        m.timeout_ms = (x >> 2) & 15;
        m.fetch = (char *)(v & 8 ? cf_key(v) : "");
        cf_request(s, i, MUSTER__REQUEST__OP_BARRIER, &m);
        break;
    }
    case CF_WATCH: {
        Muster__WatchReq m = MUSTER__WATCH_REQ__INIT;
        m.prefix = (char *)(k & 8 ? "w/" : cf_key(k));
        cf_request(s, i, MUSTER__REQUEST__OP_WATCH, &m);
        break;
    }
    case CF_UNWATCH: {
        Muster__UnwatchReq m = MUSTER__UNWATCH_REQ__INIT;
        m.watch_id = x & 7;
        cf_request(s, i, MUSTER__REQUEST__OP_UNWATCH, &m);
        break;
    }
    case CF_JOIN: {
        Muster__RdzvJoinReq m = MUSTER__RDZV_JOIN_REQ__INIT;
        m.node_id = (char *)nodes[k & 3];
        m.local_world_size = x & 3;
        m.min_nodes = 1 + ((x >> 2) & 1);
        m.max_nodes = x & 0x40 ? 1 : m.min_nodes + ((x >> 3) & 3);
        m.last_call_ms = v & 7;
        m.timeout_ms = (v >> 3) & 15;
        m.want_members = (v & 0x80) != 0;
        cf_request(s, i, MUSTER__REQUEST__OP_RDZV_JOIN, &m);
        break;
    }
    case CF_LEAVE: {
        Muster__RdzvLeaveReq m = MUSTER__RDZV_LEAVE_REQ__INIT;
        m.finished = x & 1;
        cf_request(s, i, MUSTER__REQUEST__OP_RDZV_LEAVE, &m);
        break;
    }
    case CF_HEARTBEAT: {
        Muster__RdzvHeartbeatReq m = MUSTER__RDZV_HEARTBEAT_REQ__INIT;
        m.generation = x & 3;
        cf_request(s, i, MUSTER__REQUEST__OP_RDZV_HEARTBEAT, &m);
        break;
    }
    default:
        break;
    }
}

/* Run one step at data (size bytes left); returns the bytes it took. */
static size_t cf_step(struct cf_state *s, const uint8_t *data, size_t size)
{
    int i = data[0] & 3;
    enum cf_action a = (enum cf_action)((data[0] >> 2) % CF_NACTIONS);
    unsigned k = size > 1 ? data[1] : 0, x = size > 2 ? data[2] : 0, v = size > 3 ? data[3] : 0;
    size_t used = size < 4 ? size : 4;
    switch (a) {
    case CF_HELLO:
        cf_hello(s, i, x);
        break;
    case CF_CLOSE:
        fz_close(&s->net, i);
        break;
    case CF_HALF_CLOSE:
        fz_shutdown(&s->net, i);
        break;
    case CF_DEAF:
        s->net.c[i].deaf = !s->net.c[i].deaf;
        break;
    case CF_TICK:
        if (s->slept + 1 + (int)(x & 3) <= CF_SLEEP_BUDGET) {
            s->slept += 1 + (int)(x & 3);
            fz_tick(&s->net, 1 + (int)(x & 3));
        }
        break;
    case CF_RAW: {
        size_t n = k & 31;
        if (n > size - used)
            n = size - used;
        cf_open(s, i);
        s->c[i].tainted = 1;
        fz_send(&s->net, i, data + used, n);
        used += n;
        break;
    }
    case CF_BATCH:
        s->batch = !s->batch;
        break;
    default:
        if (a >= CF_PING)
            cf_other(s, i, a, k, x, v);
        else
            cf_kv(s, i, a, k, x, v);
        break;
    }
    if (!s->batch)
        fz_pump(&s->net, 16);
    return used;
}

/* Abort unless no namespace holds a connection, parked request, watch or rendezvous node. */
static void cf_check_ns(struct ns *ns, void *arg)
{
    struct rdzv_info ri;
    (void)arg;
    if (ns_conns(ns) || ns->nwaiters || ns->waiters || ns->wkeys || ns->watches)
        abort();
    if (rdzv_info(ns, &ri) == 0 && (ri.joining || ri.members))
        abort();
}

/* Run the script on a fresh server, close every client, and check that nothing is left. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct cf_state s;
    memset(&s, 0, sizeof s);
    s.net.consume = cf_consume;
    s.net.arg = &s;
    fz_init(&s.net, (int)(sizeof cf_argv / sizeof cf_argv[0]) - 1, cf_argv, conn_accept);
    for (int steps = 0; size && steps < CF_MAX_STEPS; steps++) {
        size_t used = cf_step(&s, data, size);
        data += used;
        size -= used;
    }
    fz_pump(&s.net, 64);
    /* Closing every client must end every connection and everything they parked or watched. */
    if (fz_close_all(&s.net) != 0)
        abort();
    if (s.net.srv.nconns || s.net.srv.nrefusing || s.net.srv.core.nwaiters || s.net.srv.core.nwatches)
        abort();
    ns_each(&s.net.srv, cf_check_ns, NULL);
    fz_fini(&s.net);
    return 0;
}
