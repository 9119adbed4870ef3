/* The state core's fake world for in-process tests (see tcore.h). */
#include "tcore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "muster.pb-c.h"

/* ------------------------------------------------------------ fake loop */

/* A fake timer: armed at a time on the fake clock, or deferred to the end of the turn. */
struct core_timer {
    core_timer_fn fn;
    void *arg;
    int armed, deferred;
    uint64_t at;
    struct core_timer *next;
};

/* The fake loop: its clock and every timer. */
static struct {
    uint64_t now;
    struct core_timer *all;
} t_loop;

/* A new disarmed timer. */
struct core_timer *t_timer_new(void *ctx, core_timer_fn fn, void *arg)
{
    (void)ctx;
    struct core_timer *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->fn = fn;
    t->arg = arg;
    t->next = t_loop.all;
    t_loop.all = t;
    return t;
}

/* Fire ms from now on the fake clock. */
void t_timer_arm(struct core_timer *t, uint64_t ms)
{
    t->armed = 1;
    t->at = t_loop.now + ms;
}

/* Run at the end of this turn. */
void t_timer_defer(struct core_timer *t)
{
    t->deferred = 1;
}

/* Disarm. */
void t_timer_disarm(struct core_timer *t)
{
    t->armed = t->deferred = 0;
}

/* Whether armed. */
int t_timer_pending(const struct core_timer *t)
{
    return t->armed;
}

/* Unlink and free. */
void t_timer_free(struct core_timer *t)
{
    for (struct core_timer **p = &t_loop.all; *p; p = &(*p)->next) {
        if (*p == t) {
            *p = t->next;
            break;
        }
    }
    free(t);
}

/* The fake wall clock follows the fake monotonic one. */
uint64_t t_wall_ms(void *ctx)
{
    (void)ctx;
    return 1700000000000ull + t_loop.now;
}

/* The fake monotonic clock in microseconds. */
uint64_t t_mono_us(void *ctx)
{
    (void)ctx;
    return t_loop.now * 1000;
}

/* Lines the core logged. */
static int t_log_lines;

/* Count a log line. */
void t_log(void *ctx, int level, const char *line)
{
    (void)ctx;
    (void)level;
    (void)line;
    t_log_lines++;
}

static const struct core_hooks t_hooks = {
    .timer_new = t_timer_new,
    .timer_arm = t_timer_arm,
    .defer = t_timer_defer,
    .timer_disarm = t_timer_disarm,
    .timer_pending = t_timer_pending,
    .timer_free = t_timer_free,
    .wall_ms = t_wall_ms,
    .mono_us = t_mono_us,
    .log = t_log,
};

/* End the loop turn: run deferred calls (the callback frees or re-arms, as with the real loop). */
void t_turn(void)
{
    for (int again = 1; again;) {
        again = 0;
        for (struct core_timer *t = t_loop.all; t; t = t->next) {
            if (t->deferred) {
                t->deferred = t->armed = 0;
                t->fn(t->arg);
                again = 1;
                break;
            }
        }
    }
}

/* Advance the fake clock by ms, firing due timers in time order, each in its own turn. */
void t_advance(uint64_t ms)
{
    uint64_t end = t_loop.now + ms;
    t_turn();
    for (;;) {
        struct core_timer *due = NULL;
        for (struct core_timer *t = t_loop.all; t; t = t->next)
            if (t->armed && t->at <= end && (!due || t->at < due->at))
                due = t;
        if (!due)
            break;
        t_loop.now = due->at;
        due->armed = 0;
        due->fn(due->arg);
        t_turn();
    }
    t_loop.now = end;
}

/* ----------------------------------------------------------- the state */


/* The sink: count records. */
void t_sink(void *arg, const struct record *r, enum record_origin from)
{
    struct t_world *w = arg;
    (void)from;
    if (r->kind == RECORD_GEN)
        w->gens++, w->last_gen = r->gen;
    else if (r->kind == RECORD_SET)
        w->sets++;
}

/* Start a world with the given heartbeat timeout. */
void t_world_init(struct t_world *w, uint64_t heartbeat_ms)
{
    memset(w, 0, sizeof *w);
    t_loop.now = 0;
    struct core_limits lim = {.wait_timeout = 5000, .max_wait_timeout = 60000, .max_waiters = 100,
                              .max_waiters_per_ns = 100, .max_waiters_per_conn = 10,
                              .max_waiters_per_source = 100,
                              .heartbeat_timeout = heartbeat_ms, .recovery_timeout = 2000, .max_watches = 100,
                              .max_watches_per_conn = 10};
    core_init(&w->core, &t_hooks, &lim, &w->stats);
    w->core.sink = (struct record_sink){t_sink, w};
    w->ns = calloc(1, sizeof *w->ns + 4);
    memcpy(w->ns->name, "job", 4);
    core_ns_init(&w->core, w->ns, 1000, 1 << 20, 1 << 20);
}

/* Free the world; nothing may be left parked or armed. */
void t_world_fini(struct t_world *w)
{
    core_ns_fini(w->ns);
    free(w->ns);
    core_fini(&w->core);
    CHECK_EQ(w->core.nwaiters, 0);
    CHECK_EQ(w->core.nwatches, 0);
    CHECK(t_loop.all == NULL);
}

/* ---------------------------------------------------------- rdzv owners */


/* Park: remember the id. */
int t_park(void *owner, uint64_t id, struct rdzv_node *n)
{
    struct t_node *o = owner;
    (void)n;
    o->parked = id;
    return 0;
}

/* Unpark: forget it. */
void t_unpark(void *owner, uint64_t id)
{
    struct t_node *o = owner;
    if (o->parked == id)
        o->parked = 0;
}

/* Write down what every node of a round must agree on: generation, the one it replaced, the member
 * order with old ranks (when listed) and the excluded members with their causes. */
static void t_agreed(struct t_node *o, const struct rdzv_assignment *a)
{
    size_t off = 0, cap = sizeof o->agreed;
    off += (size_t)snprintf(o->agreed, cap, "gen %llu prev %llu |", (unsigned long long)a->generation,
                            (unsigned long long)a->previous_generation);
    for (size_t i = 0; i < a->n_members && off < cap; i++)
        off += (size_t)snprintf(o->agreed + off, cap - off, " %s:%d->%u", a->members[i].id,
                                (int)a->members[i].old_rank, a->members[i].node_rank);
    for (size_t i = 0; i < a->n_excluded && off < cap; i++)
        off += (size_t)snprintf(o->agreed + off, cap - off, " x %s:%u:%s", a->excluded[i].node_id,
                                a->excluded[i].old_node_rank, a->excluded[i].cause);
}

/* A join's answer. */
void t_reply(void *owner, uint64_t id, int status, const char *msg, const struct rdzv_assignment *a)
{
    struct t_node *o = owner;
    (void)id;
    (void)msg;
    o->replies++;
    o->status = status;
    snprintf(o->msg, sizeof o->msg, "%s", msg ? msg : "");
    if (a) {
        o->a = *a;
        snprintf(o->id, sizeof o->id, "%s", a->node_id);
        o->a.node_id = o->id;
        o->a.members = NULL;
        o->a.excluded = NULL;
        t_agreed(o, a);
    }
}

/* A membership event. */
void t_event(void *owner, int kind, uint64_t gen, const char *node_id)
{
    struct t_node *o = owner;
    (void)node_id;
    o->events++;
    o->last_event = kind;
    o->event_gen = gen;
}

/* Whether the fake connection is open. */
int t_live(void *owner)
{
    return !((struct t_node *)owner)->gone;
}

/* A made-up address for the fake connection, from its session id (valid until the next call). */
const char *t_peer(void *owner)
{
    static char buf[32];
    snprintf(buf, sizeof buf, "10.0.0.%llu:5000", (unsigned long long)((struct t_node *)owner)->session);
    return buf;
}

const struct rdzv_owner_ops t_ops = {t_park, t_unpark, t_reply, t_event, t_live, t_peer};

/* Join with id, the round's min/max and last call; the join's status. */
int t_join(struct t_world *w, struct t_node *o, const char *id, uint32_t min, uint32_t max, uint32_t last_call)
{
    struct rdzv_join_req j = {.node_id = id, .local_world_size = 1, .min_nodes = min, .max_nodes = max,
                              .last_call_ms = last_call, .timeout_ms = 1000};
    char msg[256];
    return t_join_req(w, o, &j, msg, sizeof msg);
}

/* Send join j as o's (the next request id); the join's status, with msg filled when refused. */
int t_join_req(struct t_world *w, struct t_node *o, const struct rdzv_join_req *j, char *msg, size_t len)
{
    static uint64_t next_req = 1;
    struct rdzv_owner owner = {&t_ops, o, &o->node, o->session, &o->share};
    return rdzv_join(w->ns, &owner, j, next_req++, msg, len);
}

/* Node o's connection closes. */
void t_kill(struct t_node *o)
{
    o->gone = 1;
    rdzv_node_gone(o->node);
}

/* Every open connection of v[0..n) closes (nothing left parked at the end of a case). */
void t_close_all(struct t_node *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!v[i].gone && v[i].node)
            t_kill(&v[i]);
}

/* Form a generation of n nodes n0..n(n-1) that a recovery can shrink (min 1, max n, two local ranks each,
 * the member list asked for, a long last call: it closes at n); its number. */
uint64_t t_form_members(struct t_world *w, struct t_node *v, int n)
{
    char id[16], msg[256];
    for (int i = 0; i < n; i++) {
        v[i].session = (uint64_t)i + 1;
        snprintf(id, sizeof id, "n%d", i);
        struct rdzv_join_req j = {.node_id = id, .local_world_size = 2, .min_nodes = 1, .max_nodes = (uint32_t)n,
                                  .last_call_ms = 60000, .timeout_ms = 30000, .want_members = 1};
        CHECK_EQ(t_join_req(w, &v[i], &j, msg, sizeof msg), MUSTER__STATUS__OK);
    }
    return v[0].a.generation;
}

/* Form a generation of n nodes (min = max = n, ids n0, n1, ...); its number. */
uint64_t t_form(struct t_world *w, struct t_node *nodes, int n)
{
    char id[16];
    for (int i = 0; i < n; i++) {
        nodes[i].session = (uint64_t)i + 1;
        snprintf(id, sizeof id, "n%d", i);
        CHECK_EQ(t_join(w, &nodes[i], id, (uint32_t)n, (uint32_t)n, 0), MUSTER__STATUS__OK);
    }
    for (int i = 0; i < n; i++)
        CHECK_EQ(nodes[i].status, MUSTER__STATUS__OK);
    return nodes[0].a.generation;
}

/* The value of key in w's namespace as a string ("" when absent). */
const char *t_value(struct t_world *w, const char *key)
{
    static char buf[128];
    const struct ks_entry *e = ks_get(&w->ns->ks, key, strlen(key));
    snprintf(buf, sizeof buf, "%.*s", e ? (int)e->vlen : 0, e ? (const char *)ks_val(e) : "");
    return buf;
}

