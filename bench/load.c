/* Load and fill modes of the load generator.  load: N connections, each keeping `depth`
 * requests of one op in flight (depth 1 = closed loop), bounded by a request count and a
 * duration, with a latency histogram over the measured window; optional stalled
 * connections that stop half way through a request.  fill: write `keys` keys of
 * `value-size` bytes as fast as one pipelined connection can. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "frame.h"
#include "loadgen.h"
#include "report.h"
#include "tsproto.h"
#include "wire.h"

#define FILL_DEPTH 64     /* native sets in flight while filling */
#define FILL_CHUNK 256    /* TCPStore sets (no reply) between two fencing gets */
#define DRAIN_NS 5000000000ull

enum { LS_HS = 1, LS_READY, LS_FILL, LS_RUN, LS_STALLED, LS_FAILED };

struct load {
    struct lg *lg;
    struct tmpl op;          /* the measured request */
    struct tmpl set;         /* fill: one key */
    struct tmpl fence;       /* fill over TCPStore: a get that proves the sets before it landed */
    unsigned settled;        /* connections through the handshake, or failed */
    int issuing;
    uint64_t issued, limit, stop_at, inflight;
    uint64_t fill_next, fill_total, fill_done, fill_chunk;
};

/* Next pseudo-random number of connection c (xorshift64 kept in c->budget). */
static uint64_t load_rand(struct lconn *c)
{
    uint64_t x = c->budget;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c->budget = x;
    return x;
}

/* Whether the measured op is answered with success. */
static int load_ok(const struct lg *lg, const struct reply *r)
{
    if (lg->cfg.proto == PROTO_NATIVE)
        return r->frame == MUSTER__SERVER_FRAME__FRAME_RESPONSE && r->status == 0;
    /* TCPStore has no error replies; CHECK's READY and WAIT's STOP_WAITING are both 0. */
    return (lg->cfg.op != OP_WAIT && lg->cfg.op != OP_CHECK) || r->num == 0;
}

/* Send the next measured request on c if the count and the clock allow. */
static void load_issue(struct load *L, struct lconn *c)
{
    if (!L->issuing)
        return;
    if (L->issued >= L->limit || clock_ns() >= L->stop_at) {
        L->issuing = 0;
        return;
    }
    uint32_t key = L->lg->cfg.op == OP_BARRIER ? 0 : (uint32_t)(load_rand(c) % L->lg->cfg.keys);
    if (lg_send(L->lg, c, &L->op, key) == 0) {
        L->issued++;
        L->inflight++;
    }
}

/* Queue the next fill requests on c. */
static void load_fill_issue(struct load *L, struct lconn *c)
{
    struct lg *lg = L->lg;
    if (lg->cfg.proto == PROTO_NATIVE) {
        while (L->fill_next < L->fill_total && lnet_inflight(c) < FILL_DEPTH)
            lg_send(lg, c, &L->set, (uint32_t)L->fill_next++);
        return;
    }
    if (lnet_inflight(c) || L->fill_next >= L->fill_total)
        return;
    uint64_t first = L->fill_next;
    while (L->fill_next < L->fill_total && L->fill_next - first < FILL_CHUNK)
        lg_send(lg, c, &L->set, (uint32_t)L->fill_next++);
    L->fill_chunk = L->fill_next - first;
    lg_send(lg, c, &L->fence, (uint32_t)(L->fill_next - 1));
}

/* A handshake finished (or was not needed): c can carry requests, or stall later. */
static void load_ready(struct load *L, struct lconn *c)
{
    L->settled++;
    c->state = c->idx < L->lg->cfg.conns ? LS_READY : LS_STALLED;
}

/* A stalled connection sends half a request, then stays silent until the end of the run. */
static void load_stall(struct load *L, struct lconn *c)
{
    const struct lg *lg = L->lg;
    uint8_t *p = lnet_reserve(c, 16);
    if (!p)
        return;
    size_t n = lg->cfg.proto == PROTO_NATIVE ? wire_stall(p) : tsproto_stall(lg->cfg.proto == PROTO_TS_OLD, p);
    c->wlen -= (uint32_t)(16 - n);
    lnet_flush(&L->lg->net, c);
}

/* Connect finished: start the handshake. */
static void load_on_open(struct lnet *net, struct lconn *c)
{
    struct load *L = net->mode;
    c->state = LS_HS;
    int rc = lg_handshake(L->lg, c);
    if (rc == 0)
        load_ready(L, c);
    else if (rc < 0)
        lnet_close(net, c);
}

/* A connection failed or was closed. */
static void load_on_fail(struct lnet *net, struct lconn *c, int err)
{
    struct load *L = net->mode;
    lg_count_fail(L->lg, c, err);
    if (c->state == LS_HS || c->state == 0)
        L->settled++;
    L->inflight -= lnet_inflight(c);
    c->head = c->tail;
    c->state = LS_FAILED;
}

/* Handle the handshake reply on c. */
static void load_hs_reply(struct load *L, struct lconn *c, const struct reply *r)
{
    struct lg *lg = L->lg;
    int ok = lg->cfg.proto == PROTO_NATIVE ? r->frame == MUSTER__SERVER_FRAME__FRAME_HELLO_REPLY
                                           : (uint32_t)r->num == lg->nonce;
    if (!ok) {
        lg->st.bad_replies++;
        fprintf(stderr, "muster-loadgen: handshake refused (status %d)\n", r->status);
        load_on_fail(&lg->net, c, 0);
        lnet_close(&lg->net, c);
        return;
    }
    if (lnet_inflight(c) == 0)
        load_ready(L, c);
}

/* Handle one reply to a fill request on c. */
static void load_fill_reply(struct load *L, struct lconn *c, const struct reply *r)
{
    if (L->lg->cfg.proto == PROTO_NATIVE) {
        L->fill_done++;
        if (r->status)
            L->lg->st.errors++;
    } else {
        L->fill_done += L->fill_chunk;
    }
    load_fill_issue(L, c);
}

/* Bytes arrived on c: handle every complete reply. */
static void load_on_read(struct lnet *net, struct lconn *c)
{
    struct load *L = net->mode;
    struct lg *lg = L->lg;
    struct reply r;
    struct slot s;
    int k = 0;
    while (c->state != LS_FAILED && (k = lg_next_reply(lg, c, &r, &s)) > 0) {
        if (c->state == LS_HS) {
            load_hs_reply(L, c, &r);
        } else if (c->state == LS_FILL) {
            load_fill_reply(L, c, &r);
        } else if (c->state == LS_RUN) {
            L->inflight--;
            hist_add(&lg->hist, clock_ns() - s.sent_ns);
            if (load_ok(lg, &r))
                lg->st.ok++;
            else
                lg->st.errors++;
            load_issue(L, c);
        }
    }
    if (k < 0 && c->state != LS_FAILED) {
        lg->st.bad_replies++;
        load_on_fail(net, c, 0);
        lnet_close(net, c);
    }
}

/* Poll until done(L) holds, the deadline passes or a stop signal arrives; returns 1 when done. */
static int load_pump(struct load *L, int (*done)(const struct load *), uint64_t deadline)
{
    while (!done(L)) {
        if (lg_stopped() || clock_ns() >= deadline)
            return 0;
        if (lnet_poll(&L->lg->net, 10) < 0)
            return 0;
    }
    return 1;
}

/* Every connection finished its handshake or failed. */
static int load_all_settled(const struct load *L)
{
    return L->settled >= L->lg->net.n;
}

/* The fill finished. */
static int load_fill_finished(const struct load *L)
{
    return L->fill_done >= L->fill_total;
}

/* Nothing is being issued and nothing is in flight. */
static int load_drained(const struct load *L)
{
    return !L->issuing && L->inflight == 0;
}

/* Build the fill templates for keys prefix + digits with value_size-byte values. */
static int load_fill_tmpl(struct load *L, const char *prefix)
{
    struct opspec set = {.op = OP_SET, .key = prefix, .value_size = L->lg->cfg.value_size};
    struct opspec get = {.op = OP_GET, .key = prefix};
    if (lg_tmpl(L->lg, &set, &L->set) < 0)
        return -1;
    return L->lg->cfg.proto == PROTO_NATIVE ? 0 : lg_tmpl(L->lg, &get, &L->fence);
}

/* Fill `total` keys through connection c; returns 1 when all were written in time. */
static int load_fill(struct load *L, struct lconn *c, uint64_t total, uint64_t deadline)
{
    L->fill_next = L->fill_done = 0;
    L->fill_total = total;
    c->state = LS_FILL;
    load_fill_issue(L, c);
    lnet_flush(&L->lg->net, c);
    int ok = load_pump(L, load_fill_finished, deadline);
    c->state = LS_READY;
    return ok;
}

/* Connect every connection and wait for the handshakes; returns the ready count. */
static unsigned load_connect_all(struct load *L, uint64_t deadline)
{
    struct lnet *net = &L->lg->net;
    net->mode = L;
    net->on_open = load_on_open;
    net->on_read = load_on_read;
    net->on_fail = load_on_fail;
    for (unsigned i = 0; i < net->n; i++) {
        net->c[i].budget = 0x9E3779B97F4A7C15ull * (i + 1) + L->lg->cfg.seed;
        lnet_connect(net, &net->c[i]);
    }
    load_pump(L, load_all_settled, deadline);
    unsigned ready = 0;
    for (unsigned i = 0; i < L->lg->cfg.conns; i++)
        ready += net->c[i].state == LS_READY;
    return ready;
}

/* Start the measured window: every ready connection issues `depth` requests. */
static void load_start(struct load *L)
{
    struct lg *lg = L->lg;
    lg_window_begin(lg);
    L->issuing = 1;
    L->stop_at = lg->t_begin + (uint64_t)(lg->cfg.duration * 1e9);
    /* The stalls start with the measured window, after any prefill. */
    for (unsigned i = lg->cfg.conns; i < lg->net.n; i++)
        if (lg->net.c[i].state == LS_STALLED)
            load_stall(L, &lg->net.c[i]);
    for (unsigned i = 0; i < lg->cfg.conns; i++) {
        struct lconn *c = &lg->net.c[i];
        if (c->state != LS_READY)
            continue;
        c->state = LS_RUN;
        for (unsigned d = 0; d < lg->cfg.depth; d++)
            load_issue(L, c);
        lnet_flush(&lg->net, c);
    }
}

/* The measured op's template. */
static int load_op_tmpl(struct load *L)
{
    struct lg *lg = L->lg;
    struct opspec spec = {.op = lg->cfg.op, .key = lg->cfg.key_prefix, .value_size = lg->cfg.value_size,
                          .count = lg->cfg.conns, .timeout_ms = lg->cfg.timeout_ms};
    if (lg->cfg.op == OP_BARRIER && lg->cfg.depth != 1)
        return -1; /* a barrier releases a whole round: one arrival per connection at a time */
    return lg_tmpl(lg, &spec, &L->op);
}

/* Print the load report. */
static void load_report(const struct load *L, unsigned ready)
{
    const struct lg *lg = L->lg;
    struct json j;
    report_head(&j, lg);
    json_u64(&j, "keys", lg->cfg.keys);
    json_u64(&j, "stalled_conns", lg->cfg.stall);
    json_u64(&j, "ready_conns", ready);
    json_u64(&j, "requests", L->issued);
    report_stats(&j, lg, lg->st.ok);
    report_latency(&j, "latency_us", &lg->hist);
    json_end(&j);
}

/* Run the load mode; returns the exit code. */
int load_run(struct lg *lg)
{
    static struct load L;
    L.lg = lg;
    if (!lg->cfg.requests)
        lg->cfg.requests = 200000;
    if (!lg->cfg.keys)
        lg->cfg.keys = 1000;
    if (!lg->cfg.value_size)
        lg->cfg.value_size = 64;
    L.limit = lg->cfg.requests;
    uint64_t deadline = clock_ns() + (uint64_t)(lg->cfg.timeout * 1e9);
    unsigned depth = lg->cfg.depth > FILL_DEPTH ? lg->cfg.depth : FILL_DEPTH;
    if (load_op_tmpl(&L) < 0 ||
        lnet_init(&lg->net, lg->cfg.host, lg->cfg.port, lg->cfg.conns + lg->cfg.stall, lg->cfg.sources, depth) < 0) {
        fprintf(stderr, "muster-loadgen: op %s is not available over %s%s\n", lg_op_name(lg->cfg.op), report_proto(lg),
                lg->cfg.op == OP_BARRIER ? " (barrier needs --depth 1)" : "");
        return 2;
    }
    unsigned ready = load_connect_all(&L, deadline);
    int needs_keys = lg->cfg.op == OP_GET || lg->cfg.op == OP_WAIT || lg->cfg.op == OP_CHECK;
    if (ready && needs_keys &&
        (load_fill_tmpl(&L, lg->cfg.key_prefix) < 0 || !load_fill(&L, &lg->net.c[0], lg->cfg.keys, deadline)))
        fprintf(stderr, "muster-loadgen: prefill of %u keys did not finish\n", lg->cfg.keys);
    if (ready) {
        load_start(&L);
        load_pump(&L, load_drained, L.stop_at + DRAIN_NS < deadline ? L.stop_at + DRAIN_NS : deadline);
        lg_window_end(lg);
        lg->st.timeouts += L.inflight;
    }
    load_report(&L, ready);
    lnet_free(&lg->net);
    return ready ? 0 : 1;
}

/* Run the fill mode: one connection writes `keys` keys; returns the exit code. */
int fill_run(struct lg *lg)
{
    static struct load L;
    L.lg = lg;
    lg->cfg.conns = 1;
    lg->cfg.op = OP_SET;
    if (!lg->cfg.keys)
        lg->cfg.keys = 100000;
    if (!lg->cfg.value_size)
        lg->cfg.value_size = 64;
    uint64_t deadline = clock_ns() + (uint64_t)(lg->cfg.timeout * 1e9);
    if (lnet_init(&lg->net, lg->cfg.host, lg->cfg.port, 1, 1, FILL_DEPTH) < 0 ||
        load_fill_tmpl(&L, lg->cfg.key_prefix) < 0)
        return 2;
    unsigned ready = load_connect_all(&L, deadline);
    int ok = 0;
    if (ready) {
        lg_window_begin(lg);
        ok = load_fill(&L, &lg->net.c[0], lg->cfg.keys, deadline);
        lg_window_end(lg);
    }
    lg->st.ok = L.fill_done;
    struct json j;
    report_head(&j, lg);
    json_u64(&j, "keys", lg->cfg.keys);
    json_str(&j, "key_prefix", lg->cfg.key_prefix);
    json_bool(&j, "complete", ok);
    report_stats(&j, lg, L.fill_done);
    json_end(&j);
    lnet_free(&lg->net);
    return ok ? 0 : 1;
}
