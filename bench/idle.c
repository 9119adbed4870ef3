/* Idle mode of the load generator: open N connections, handshake, optionally park every one
 * of them in a blocking op that never completes (wait on a key nobody sets, a join or a
 * barrier one member short), announce readiness, hold for a while, then optionally burst:
 * every connection sends one add at the same moment.  A driving script reads the server's
 * memory while the connections are held, or kills this process to test clean-up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "frame.h"
#include "loadgen.h"
#include "report.h"

enum { IS_HS = 1, IS_READY, IS_PARKED, IS_BURST, IS_DONE, IS_FAILED };

struct idle {
    struct lg *lg;
    struct tmpl park;        /* the request that never completes */
    struct tmpl probe;       /* native: a ping behind the park proves it was registered */
    struct tmpl burst;
    unsigned settled, parked, burst_done, burst_failed;
    uint64_t t0, last_open, burst_t0, burst_last;
};

/* A connection is ready: park it if asked to, else count it. */
static void idle_ready(struct idle *I, struct lconn *c)
{
    if (I->lg->cfg.op == OP_NONE) {
        c->state = IS_READY;
        I->settled++;
        return;
    }
    lg_send(I->lg, c, &I->park, c->idx);
    if (I->lg->cfg.proto == PROTO_NATIVE)
        lg_send(I->lg, c, &I->probe, 0);
    c->state = IS_PARKED;
    I->settled++;
    if (I->lg->cfg.proto != PROTO_NATIVE)
        I->parked++;
}

/* Connect finished: handshake. */
static void idle_on_open(struct lnet *net, struct lconn *c)
{
    struct idle *I = net->mode;
    I->last_open = c->t_open;
    c->state = IS_HS;
    int rc = lg_handshake(I->lg, c);
    if (rc == 0)
        idle_ready(I, c);
    else if (rc < 0)
        lnet_close(net, c);
}

/* A connection failed or was closed. */
static void idle_on_fail(struct lnet *net, struct lconn *c, int err)
{
    struct idle *I = net->mode;
    lg_count_fail(I->lg, c, err);
    if (c->state <= IS_HS)
        I->settled++;
    if (c->state == IS_BURST)
        I->burst_failed++;
    c->state = IS_FAILED;
}

/* Bytes arrived on c. */
static void idle_on_read(struct lnet *net, struct lconn *c)
{
    struct idle *I = net->mode;
    struct reply r;
    struct slot s;
    int k = 0;
    while (c->state != IS_FAILED && (k = lg_next_reply(I->lg, c, &r, &s)) > 0) {
        int bad = r.status != 0 || r.frame == MUSTER__SERVER_FRAME__FRAME_ERROR;
        if (c->state == IS_HS) {
            idle_ready(I, c);
        } else if (c->state == IS_PARKED && lnet_inflight(c) == 1) {
            I->parked++; /* the probe came back: the park is registered */
        } else if (c->state == IS_BURST) {
            c->state = IS_DONE;
            I->burst_done++;
            I->burst_last = clock_ns();
            hist_add(&I->lg->hist, I->burst_last - s.sent_ns);
            I->lg->st.ok += !bad;
        }
        if (bad)
            I->lg->st.errors++;
    }
    if (k < 0 && c->state != IS_FAILED) {
        I->lg->st.bad_replies++;
        idle_on_fail(net, c, 0);
        lnet_close(net, c);
    }
}

/* Build the park, probe and burst templates. */
static int idle_templates(struct idle *I)
{
    const struct lg_cfg *cfg = &I->lg->cfg;
    char key[96], bkey[96];
    snprintf(key, sizeof key, "%snever", cfg->key_prefix);
    snprintf(bkey, sizeof bkey, "%sburst", cfg->key_prefix);
    /* one member short of the count, so the round never closes */
    struct opspec park = {.op = cfg->op, .key = key, .count = cfg->conns + 1, .timeout_ms = cfg->timeout_ms, .wait = 1};
    struct opspec probe = {.op = OP_PING, .key = ""};
    struct opspec burst = {.op = OP_ADD, .key = bkey};
    if (cfg->op == OP_GET || cfg->op == OP_WAIT || cfg->op == OP_JOIN || cfg->op == OP_BARRIER) {
        if (lg_tmpl(I->lg, &park, &I->park) < 0)
            return -1;
    } else if (cfg->op != OP_NONE) {
        return -1;
    }
    if (cfg->proto == PROTO_NATIVE && lg_tmpl(I->lg, &probe, &I->probe) < 0)
        return -1;
    return lg_tmpl(I->lg, &burst, &I->burst);
}

/* Poll until cond counts reach n, the deadline passes or a signal arrives. */
static void idle_pump(struct idle *I, const unsigned *count, unsigned n, uint64_t deadline)
{
    while ((!count || *count < n) && clock_ns() < deadline && !lg_stopped())
        if (lnet_poll(&I->lg->net, 10) < 0)
            break;
}

/* Every ready connection sends one add at once; wait for the answers. */
static void idle_burst(struct idle *I, uint64_t deadline)
{
    struct lnet *net = &I->lg->net;
    unsigned sent = 0;
    I->burst_t0 = clock_ns();
    for (unsigned i = 0; i < net->n; i++) {
        struct lconn *c = &net->c[i];
        if (c->state != IS_READY)
            continue;
        lg_send(I->lg, c, &I->burst, 0);
        c->state = IS_BURST;
        lnet_flush(net, c);
        sent++;
    }
    while (I->burst_done + I->burst_failed < sent && clock_ns() < deadline && !lg_stopped())
        if (lnet_poll(net, 10) < 0)
            break;
    I->lg->st.timeouts += sent - I->burst_done - I->burst_failed;
}

/* Print the idle report. */
static void idle_report(const struct idle *I)
{
    const struct lg *lg = I->lg;
    struct json j;
    report_head(&j, lg);
    json_u64(&j, "settled", I->settled);
    json_u64(&j, "parked", I->parked);
    json_u64(&j, "open_at_end", lg->net.open);
    json_dbl(&j, "connect_all_s", I->last_open ? (double)(I->last_open - I->t0) / 1e9 : -1);
    if (lg->cfg.burst) {
        json_u64(&j, "burst_ok", I->burst_done);
        json_dbl(&j, "burst_s", I->burst_last ? (double)(I->burst_last - I->burst_t0) / 1e9 : -1);
        report_latency(&j, "burst_latency_us", &lg->hist);
    }
    report_stats(&j, lg, I->burst_done);
    json_end(&j);
}

/* Run the idle mode; returns the exit code. */
int idle_run(struct lg *lg)
{
    static struct idle I;
    I.lg = lg;
    if (idle_templates(&I) < 0) {
        fprintf(stderr, "muster-loadgen: idle parks with op none, get, wait, join or barrier\n");
        return 2;
    }
    if (lnet_init(&lg->net, lg->cfg.host, lg->cfg.port, lg->cfg.conns, lg->cfg.sources, 4) < 0)
        return 2;
    lg->net.mode = &I;
    lg->net.on_open = idle_on_open;
    lg->net.on_read = idle_on_read;
    lg->net.on_fail = idle_on_fail;
    uint64_t deadline = clock_ns() + (uint64_t)(lg->cfg.timeout * 1e9);
    lg_window_begin(lg);
    I.t0 = lg->t_begin;
    for (unsigned i = 0; i < lg->net.n; i++) {
        lnet_connect(&lg->net, &lg->net.c[i]);
        if (i % 256 == 255)
            lnet_poll(&lg->net, 0);
    }
    idle_pump(&I, &I.settled, lg->net.n, deadline);
    idle_pump(&I, &I.parked, lg->cfg.op == OP_NONE ? 0 : I.settled, deadline);
    char msg[96];
    snprintf(msg, sizeof msg, "ready %u/%u connections, %u parked", lg->net.open, lg->net.n, I.parked);
    lg_ready(lg, msg);
    uint64_t hold_end = clock_ns() + (uint64_t)(lg->cfg.hold * 1e9);
    idle_pump(&I, NULL, 0, hold_end < deadline ? hold_end : deadline);
    if (lg->cfg.burst)
        idle_burst(&I, deadline);
    lg_window_end(lg);
    idle_report(&I);
    lnet_free(&lg->net);
    return 0;
}
