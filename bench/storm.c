/* Storm mode of the load generator: N simulated ranks connect at once, pass a barrier and
 * all end up holding the same 128-byte id, the way a job's ranks bootstrap NCCL.
 *   native, op barrier: hello + (rank 0: set the id) + barrier(N, fetch the id) in one write:
 *                       the release answers every rank with the id.
 *   native, op join:    hello + rdzv_join(min = max = N) in one write; rank 0 sets the id,
 *                       the rest get(id, wait).
 *   TCPStore:           add(arrived); the N-th arrival sets go; wait(go); rank 0 sets the id,
 *                       the rest wait(id) + get(id): exactly what TCPStore clients must do.
 * Connects that fail before the handshake is through are retried with backoff, as real
 * clients do; any later failure, error reply or wrong id fails that rank. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "frame.h"
#include "loadgen.h"
#include "report.h"
#include "tsproto.h"

#define STORM_BATCH 256                 /* connects started between two polls */
#define STORM_RETRY_NS 10000000ull      /* first connect retry delay, doubled up to 1 s */

enum { SS_CONNECT = 0, SS_HS, SS_ARRIVE, SS_GO, SS_WAITID, SS_GET, SS_SETID, SS_DONE, SS_FAILED };

/* Templates of the steps. */
enum { T_SETID, T_GETID, T_GETWAIT, T_BARRIER, T_JOIN, T_ADD, T_SETGO, T_WAITGO, T_WAITID, T_COUNT };

struct storm {
    struct lg *lg;
    struct tmpl t[T_COUNT];
    uint8_t *id;             /* the expected id bytes */
    unsigned done, failed;
    uint64_t t0, last_open, last_done;
    struct hist open_h;      /* per-rank connect-finished time since t0 */
};

/* Build one step template. */
static int storm_tmpl(struct storm *S, int which, enum lg_op op, const char *key, size_t vsize, uint8_t vbyte, int wait,
                      const char *fetch)
{
    const struct lg_cfg *cfg = &S->lg->cfg;
    struct opspec spec = {.op = op, .key = key, .count = cfg->conns, .timeout_ms = cfg->timeout_ms,
                          .value_size = vsize, .value_byte = vbyte, .wait = wait, .fetch = fetch};
    return lg_tmpl(S->lg, &spec, &S->t[which]);
}

/* Build every template the configured protocol and op need. */
static int storm_templates(struct storm *S)
{
    const struct lg_cfg *cfg = &S->lg->cfg;
    char k[4][128], id[140];
    snprintf(k[0], sizeof k[0], "%sid", cfg->key_prefix);
    snprintf(k[1], sizeof k[1], "%sgo", cfg->key_prefix);
    snprintf(k[2], sizeof k[2], "%sarrived", cfg->key_prefix);
    snprintf(k[3], sizeof k[3], "%snode", cfg->key_prefix);
    snprintf(id, sizeof id, "%s00000000", k[0]); /* the id key as rank 0 writes it (number 0) */
    int rc = storm_tmpl(S, T_SETID, OP_SET, k[0], cfg->value_size, 'I', 0, NULL);
    if (cfg->proto == PROTO_NATIVE) {
        rc |= storm_tmpl(S, T_GETWAIT, OP_GET, k[0], 0, 0, 1, NULL);
        rc |= cfg->op == OP_JOIN ? storm_tmpl(S, T_JOIN, OP_JOIN, k[3], 0, 0, 0, NULL)
                                 : storm_tmpl(S, T_BARRIER, OP_BARRIER, k[1], 0, 0, 0, id);
        return rc || (cfg->op != OP_JOIN && cfg->op != OP_BARRIER) ? -1 : 0;
    }
    rc |= storm_tmpl(S, T_GETID, OP_GET, k[0], 0, 0, 0, NULL);
    rc |= storm_tmpl(S, T_ADD, OP_ADD, k[2], 0, 0, 0, NULL);
    rc |= storm_tmpl(S, T_SETGO, OP_SET, k[1], 1, '1', 0, NULL);
    rc |= storm_tmpl(S, T_WAITGO, OP_WAIT, k[1], 0, 0, 0, NULL);
    rc |= storm_tmpl(S, T_WAITID, OP_WAIT, k[0], 0, 0, 0, NULL);
    return rc || cfg->op != OP_BARRIER ? -1 : 0;
}

/* Queue step template `which` on c and move c to state st. */
static void storm_step(struct storm *S, struct lconn *c, int which, int st)
{
    lg_send(S->lg, c, &S->t[which], 0);
    c->state = st;
}

/* c holds the id: record its finishing time. */
static void storm_finish(struct storm *S, struct lconn *c)
{
    c->state = SS_DONE;
    c->t_mark = clock_ns();
    S->last_done = c->t_mark;
    S->done++;
    S->lg->st.ok++;
    hist_add(&S->lg->hist, c->t_mark - S->t0);
}

/* Fail rank c for good. */
static void storm_fail(struct storm *S, struct lconn *c, const char *why)
{
    if (c->state == SS_DONE || c->state == SS_FAILED)
        return;
    if (S->failed < 5)
        fprintf(stderr, "muster-loadgen: rank %u failed: %s\n", c->idx, why);
    c->state = SS_FAILED;
    S->failed++;
    lnet_close(&S->lg->net, c);
}

/* The handshake is through (or not needed): take the first rendezvous step. */
static void storm_arrive(struct storm *S, struct lconn *c)
{
    const struct lg_cfg *cfg = &S->lg->cfg;
    if (cfg->proto != PROTO_NATIVE) {
        storm_step(S, c, T_ADD, SS_ARRIVE);
    } else if (cfg->op == OP_JOIN) {
        /* node ids sort like the rank index, so connection 0 becomes rank 0 */
        lg_send(S->lg, c, &S->t[T_JOIN], c->idx);
        c->state = SS_ARRIVE;
    } else {
        if (c->idx == 0)
            lg_send(S->lg, c, &S->t[T_SETID], 0);
        storm_step(S, c, T_BARRIER, SS_ARRIVE);
    }
}

/* Connect finished: handshake, or go straight to the first step. */
static void storm_on_open(struct lnet *net, struct lconn *c)
{
    struct storm *S = net->mode;
    S->last_open = c->t_open;
    hist_add(&S->open_h, c->t_open - S->t0);
    c->state = SS_HS;
    int rc = lg_handshake(S->lg, c);
    /* A native rank pipelines its first step behind the Hello instead of waiting for the
     * HelloReply: the server handles a connection's frames in order and answers a refused
     * hello with an error frame, so nothing is lost and each rank saves a round trip.
     * TCPStore ranks wait for their PING reply, as torch's client does. */
    if (rc == 0 || (rc > 0 && S->lg->cfg.proto == PROTO_NATIVE))
        storm_arrive(S, c);
    else if (rc < 0)
        storm_fail(S, c, "handshake");
}

/* A connection failed: retry it while the rank has not got past its handshake. */
static void storm_on_fail(struct lnet *net, struct lconn *c, int err)
{
    struct storm *S = net->mode;
    if (c->state <= SS_HS && err != 0 && err != ENOMEM && clock_ns() < S->t0 + (uint64_t)(S->lg->cfg.timeout * 1e9)) {
        unsigned shift = c->tries < 7 ? c->tries - 1 : 6;
        uint64_t delay = STORM_RETRY_NS << shift;
        delay += (uint64_t)rand() % (delay / 2 + 1);
        S->lg->st.retries++;
        c->state = SS_CONNECT;
        c->t_open = 0;
        lnet_retry_later(net, c, delay);
        return;
    }
    lg_count_fail(S->lg, c, err);
    storm_fail(S, c, err ? strerror(err) : "closed by server");
}

/* Whether the id reply carries the expected bytes. */
static int storm_id_ok(const struct storm *S, const struct reply *r)
{
    if (S->lg->cfg.floor)
        return r->vlen > 0;
    return r->vlen == S->lg->cfg.value_size && memcmp(r->val, S->id, r->vlen) == 0;
}

/* Advance a native rank on one reply. */
static void storm_native(struct storm *S, struct lconn *c, const struct reply *r)
{
    if (r->frame == MUSTER__SERVER_FRAME__FRAME_ERROR || (r->frame == MUSTER__SERVER_FRAME__FRAME_RESPONSE && r->status)) {
        S->lg->st.errors++;
        storm_fail(S, c, "error reply");
        return;
    }
    if (r->frame == MUSTER__SERVER_FRAME__FRAME_HELLO_REPLY)
        return; /* the first step went out behind the Hello */
    if (c->state == SS_ARRIVE && lnet_inflight(c) > 0)
        return; /* rank 0's id write, answered before its barrier */
    else if (c->state == SS_ARRIVE && S->lg->cfg.op == OP_JOIN && r->num == 0)
        storm_step(S, c, T_SETID, SS_SETID);
    else if (c->state == SS_ARRIVE && S->lg->cfg.op == OP_JOIN)
        storm_step(S, c, T_GETWAIT, SS_GET);
    else if (c->state == SS_ARRIVE && storm_id_ok(S, r))
        storm_finish(S, c); /* the barrier's release carried the id */
    else if (c->state == SS_ARRIVE)
        storm_fail(S, c, "barrier released without the id");
    else if (c->state == SS_SETID)
        storm_finish(S, c);
    else if (c->state == SS_GET && storm_id_ok(S, r))
        storm_finish(S, c);
    else
        storm_fail(S, c, "wrong id");
}

/* Advance a TCPStore rank on one reply. */
static void storm_tcpstore(struct storm *S, struct lconn *c, const struct reply *r)
{
    const struct lg *lg = S->lg;
    switch (c->state) {
    case SS_HS:
        if ((uint32_t)r->num != lg->nonce)
            storm_fail(S, c, "ping nonce");
        else
            storm_arrive(S, c);
        return;
    case SS_ARRIVE:
        if (r->num == (int64_t)lg->cfg.conns)
            lg_send(S->lg, c, &S->t[T_SETGO], 0);
        storm_step(S, c, T_WAITGO, SS_GO);
        return;
    case SS_GO:
        if (c->idx == 0) {
            lg_send(S->lg, c, &S->t[T_SETID], 0);
            storm_finish(S, c);
        } else {
            storm_step(S, c, T_WAITID, SS_WAITID);
        }
        return;
    case SS_WAITID:
        storm_step(S, c, T_GETID, SS_GET);
        return;
    case SS_GET:
        if (storm_id_ok(S, r))
            storm_finish(S, c);
        else
            storm_fail(S, c, "wrong id");
        return;
    default:
        return;
    }
}

/* Bytes arrived on c: advance its rank through every complete reply. */
static void storm_on_read(struct lnet *net, struct lconn *c)
{
    struct storm *S = net->mode;
    struct reply r;
    struct slot s;
    int k = 0;
    while (c->state != SS_FAILED && (k = lg_next_reply(S->lg, c, &r, &s)) > 0) {
        if (S->lg->cfg.proto == PROTO_NATIVE)
            storm_native(S, c, &r);
        else
            storm_tcpstore(S, c, &r);
    }
    if (k < 0 && c->state != SS_FAILED) {
        S->lg->st.bad_replies++;
        storm_fail(S, c, "unparsable reply");
    }
}

/* Start every connect, STORM_BATCH at a time with a poll in between, then run to the end. */
static void storm_drive(struct storm *S, uint64_t deadline)
{
    struct lnet *net = &S->lg->net;
    for (unsigned i = 0; i < net->n; i++) {
        lnet_connect(net, &net->c[i]);
        if (i % STORM_BATCH == STORM_BATCH - 1)
            lnet_poll(net, 0);
    }
    while (S->done + S->failed < net->n && clock_ns() < deadline && !lg_stopped())
        if (lnet_poll(net, 10) < 0)
            break;
}

/* Print the storm report. */
static void storm_report(const struct storm *S)
{
    const struct lg *lg = S->lg;
    struct json j;
    report_head(&j, lg);
    json_u64(&j, "ranks", lg->cfg.conns);
    json_u64(&j, "sources", lg->cfg.sources);
    json_u64(&j, "ranks_ok", S->done);
    json_u64(&j, "ranks_failed", lg->cfg.conns - S->done);
    json_bool(&j, "complete", S->done == lg->cfg.conns);
    json_dbl(&j, "total_s", S->done == lg->cfg.conns ? (double)(S->last_done - S->t0) / 1e9 : -1);
    json_dbl(&j, "connect_all_s", S->open_h.count == lg->cfg.conns ? (double)(S->last_open - S->t0) / 1e9 : -1);
    report_stats(&j, lg, S->done);
    report_latency(&j, "rank_done_us", &lg->hist);
    report_latency(&j, "rank_connected_us", &S->open_h);
    json_end(&j);
}

/* Run the storm mode; returns 0 when every rank got the id. */
int storm_run(struct lg *lg)
{
    static struct storm S;
    S.lg = lg;
    if (!lg->cfg.value_size)
        lg->cfg.value_size = 128;
    hist_reset(&S.open_h);
    S.id = malloc(lg->cfg.value_size);
    if (!S.id || storm_templates(&S) < 0) {
        fprintf(stderr, "muster-loadgen: storm supports op barrier (all protocols) and join (native)\n");
        return 2;
    }
    memset(S.id, 'I', lg->cfg.value_size);
    if (lnet_init(&lg->net, lg->cfg.host, lg->cfg.port, lg->cfg.conns, lg->cfg.sources, 4) < 0)
        return 2;
    /* A rank writes once and then waits for the reply (rank 0's two requests go out in one
     * write), so Nagle never holds anything back here, and skipping TCP_NODELAY takes a syscall
     * per rank off the generator while it races the server through the connects. */
    lg->net.nagle = 1;
    lg->net.mode = &S;
    lg->net.on_open = storm_on_open;
    lg->net.on_read = storm_on_read;
    lg->net.on_fail = storm_on_fail;
    lg_window_begin(lg);
    S.t0 = lg->t_begin;
    storm_drive(&S, S.t0 + (uint64_t)(lg->cfg.timeout * 1e9));
    lg_window_end(lg);
    lg->st.timeouts = lg->cfg.conns - S.done - S.failed;
    storm_report(&S);
    lnet_free(&lg->net);
    return S.done == lg->cfg.conns ? 0 : 1;
}
