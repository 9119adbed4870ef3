/*
 * Server-side rendezvous.  Per namespace (= job) there is one open round
 * (parked joins), the latest generation (its members, running or broken),
 * and a generation counter that only grows.
 *
 * A round closes at max_nodes joiners, or when min_nodes have joined and
 * last_call_ms has passed since the min was reached; but never while a
 * generation is running: a node that joins then waits, and the members are
 * told NODE_WAITING so they can re-form.  Closing sorts the joiners by node
 * id (byte order), numbers them, and answers them all in the same loop turn.
 *
 * Each owner (a connection of the native protocol) that ever joined has one
 * node record (*owner->slot): its pending join, if any, and its membership.  A member is live while its
 * generation runs; it stays as a stale record after the generation breaks
 * (so its heartbeat can be told STALE_GENERATION) until the connection
 * re-joins, leaves or closes.  Losing a live member - close, leave, missed
 * heartbeat, or a re-join - breaks the generation: every other member gets
 * MEMBER_LOST in the same loop turn, and muster/rdzv/<gen>/broken is set
 * through the keyspace so non-members can wait or watch for it.
 *
 * A connection's node record and its joins, leaves and heartbeats are in
 * rdzv_node.c; recovery rounds in rdzv_recover.c.
 *
 * Nothing here touches a socket, a timer or the log: replies and events go
 * to the node's owner through its callbacks (struct rdzv_owner_ops), timers
 * and the log through the core's hooks.
 */
#include "rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>
#include <utlist.h>

#include "core.h"
#include "keys.h"
#include "rdzv_int.h"
#include "status.h"
#include "stats.h"

/* ----------------------------------------------------------- helpers */

/* Append a node to a set; 0, or -1 when memory ran out. */
int rdzv_set_add(struct rdzv_set *s, struct rdzv_node *n)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        struct rdzv_node **v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = n;
    return 0;
}

/* Remove a node from a set (order kept); a no-op when absent. */
void rdzv_set_del(struct rdzv_set *s, const struct rdzv_node *n)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i] == n) {
            memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
            s->n--;
            return;
        }
    }
}

/* The core of a namespace's rendezvous state. */
struct core *rdzv_core(const struct rdzv *rz)
{
    return rz->ns->core;
}

/* Arm a timer for ms milliseconds from now. */
void rdzv_arm(const struct rdzv *rz, struct core_timer *t, uint64_t ms)
{
    rdzv_core(rz)->hooks.timer_arm(t, ms);
}

/* Disarm a timer (a no-op when it is not pending). */
static void rdzv_disarm(const struct rdzv *rz, struct core_timer *t)
{
    rdzv_core(rz)->hooks.timer_disarm(t);
}

/* Store a small text value under key through the keyspace (waking waiters and watchers). */
static void rdzv_publish(struct rdzv *rz, const char *key, const char *val)
{
    int st = ks_set(&rz->ns->ks, key, strlen(key), (uint8_t *)(uintptr_t)val, strlen(val), 0);
    if (st != CORE_OK)
        core_log(rdzv_core(rz), CORE_LOG_WARN, "ns '%s': cannot publish %s (status %d)", rz->ns->name, key, st);
}

/* Tell a node's owner of a membership event. */
void rdzv_push(struct rdzv_node *to, int kind, uint64_t gen, const char *node_id)
{
    to->owner.ops->event(to->owner.arg, kind, gen, node_id);
}

/* Answer a node's join request id through its owner. */
void rdzv_reply(struct rdzv_node *n, uint64_t id, int status, const char *msg, const struct rdzv_assignment *a)
{
    n->owner.ops->reply(n->owner.arg, id, status, msg, a);
}

/* Wall-clock milliseconds, from the core's hook when there is one. */
uint64_t rdzv_wall_ms(const struct rdzv *rz)
{
    const struct core *core = rdzv_core(rz);
    if (core->hooks.wall_ms)
        return core->hooks.wall_ms(core->hooks.ctx);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The namespace's rendezvous state, created on first use; NULL when memory ran out. */
struct rdzv *rdzv_of(struct ns *ns)
{
    if (ns->rdzv)
        return ns->rdzv;
    struct rdzv *rz = calloc(1, sizeof *rz);
    if (!rz)
        return NULL;
    rz->ns = ns;
    ns->rdzv = rz;
    return rz;
}

/* The first event of a ring of 8. */
#define RDZV_RING_FIRST 8

/* Make room in the timeline ring for one more event before it wraps: allocate it at the first event, double
 * it while it is full and below RDZV_RING; 0, or -1 when memory ran out (the event is then not kept). */
static int rdzv_ring_room(struct rdzv *rz)
{
    if (rz->ring_n < rz->ring_cap || rz->ring_cap == RDZV_RING)
        return 0;
    size_t cap = rz->ring_cap ? rz->ring_cap * 2 : RDZV_RING_FIRST;
    struct rdzv_event *v = realloc(rz->ring, cap * sizeof *v);
    if (!v)
        return rz->ring_cap ? 0 : -1; /* a full ring just wraps sooner */
    stats_add(rdzv_core(rz)->stats, STAT_RDZV_TIMELINE_BYTES, (cap - rz->ring_cap) * sizeof *v);
    rz->ring = v;
    rz->ring_next = rz->ring_n; /* not wrapped yet: the events are 0..n-1 in order */
    rz->ring_cap = cap;
    return 0;
}

/* Record one timeline event in the job's ring (what: len bytes, may be NULL; cause may be NULL). */
void rdzv_event(struct rdzv *rz, enum rdzv_event_kind kind, uint64_t gen, const char *what, size_t len,
                const char *cause)
{
    if (rdzv_ring_room(rz) != 0)
        return;
    struct rdzv_event *ev = &rz->ring[rz->ring_next];
    ev->wall_ms = rdzv_wall_ms(rz);
    ev->generation = gen;
    ev->kind = kind;
    if (len > RDZV_ID_MAX)
        len = RDZV_ID_MAX;
    memcpy(ev->what, what ? what : "", what ? len : 0);
    ev->what[what ? len : 0] = 0;
    snprintf(ev->cause, sizeof ev->cause, "%s", cause ? cause : "");
    rz->ring_next = (rz->ring_next + 1) % rz->ring_cap;
    if (rz->ring_n < rz->ring_cap)
        rz->ring_n++;
}

/* ---------------------------------------------------------- breaking */

/* Break the running generation: not running, counted, its heartbeats stopped, the broken key set. */
void rdzv_break(struct rdzv *rz, const char *id, const char *why)
{
    rz->running = 0;
    rz->broke_us = rdzv_core(rz)->hooks.mono_us(rdzv_core(rz)->hooks.ctx);
    rz->told_us = 0;
    rz->failures++;
    stats_inc(rdzv_core(rz)->stats, STAT_RDZV_FAILURES);
    rdzv_event(rz, RDZV_EV_FAILED, rz->generation, id, strlen(id), why);
    core_log(rdzv_core(rz), CORE_LOG_INFO, "ns '%s': generation %" PRIu64 " broken: node '%s' %s", rz->ns->name,
             rz->generation, id, why);
    for (size_t i = 0; i < rz->members.n; i++)
        rdzv_disarm(rz, rz->members.v[i]->hb_timer);
    char key[64];
    keys_rdzv_broken(key, sizeof key, rz->generation);
    rdzv_publish(rz, key, id);
}

/* ------------------------------------------------------------- round */

/* Release a joiner's parked request: its deadline, its pending id and its waiter slot. */
static void rdzv_release(struct rdzv_node *n)
{
    struct core *core = rdzv_core(n->rz);
    n->joining = 0;
    rdzv_disarm(n->rz, n->join_timer);
    n->owner.ops->unpark(n->owner.arg, n->join_id);
    core_waiter_put(core, &n->rz->ns->nwaiters, n->owner.share);
    stats_dec(core->stats, STAT_RDZV_PARKED_JOINS);
}

/* The set a node's queue keeps its parked nodes in. */
struct rdzv_set *rdzv_queue_set(struct rdzv *rz, enum rdzv_queue q)
{
    return q == RDZV_Q_RECOVER ? &rz->rec : q == RDZV_Q_STANDBY ? &rz->standbys : &rz->round;
}

/* Release a parked node's request and its queue's bookkeeping, leaving its entry in the queue's set for the
 * caller to remove (n->queue becomes RDZV_Q_NONE); the queue it was in. */
static enum rdzv_queue rdzv_unpark_keep(struct rdzv_node *n)
{
    enum rdzv_queue was = n->queue;
    rdzv_release(n);
    if (was == RDZV_Q_ROUND)
        HASH_DELETE(hh_round, n->rz->round_ids, n);
    if (was == RDZV_Q_ROUND && n->generation && n->generation == n->rz->generation && n->rz->round_members)
        n->rz->round_members--;
    n->queue = RDZV_Q_NONE;
    if (was == RDZV_Q_RECOVER)
        rdzv_recover_moved(n->rz, n, -1);
    return was;
}

/* Take a node out of its queue and release its parked request (no reply here). */
void rdzv_unpark(struct rdzv_node *n)
{
    if (n->joining)
        rdzv_set_del(rdzv_queue_set(n->rz, rdzv_unpark_keep(n)), n);
}

/* Take every node of nodes out of its queue, as rdzv_unpark does, but drop the entries from each queue's set
 * in one ordered pass: n removals one by one cost O(n^2) searches and moves (a recovery's set is in arrival
 * order, its answer in rank order). */
static void rdzv_unpark_all(struct rdzv *rz, const struct rdzv_set *nodes)
{
    int touched[RDZV_Q_STANDBY + 1] = {0};
    for (size_t i = 0; i < nodes->n; i++)
        if (nodes->v[i]->joining)
            touched[rdzv_unpark_keep(nodes->v[i])] = 1;
    for (int q = RDZV_Q_ROUND; q <= RDZV_Q_STANDBY; q++) {
        struct rdzv_set *s = rdzv_queue_set(rz, (enum rdzv_queue)q);
        size_t j = 0;
        for (size_t i = 0; touched[q] && i < s->n; i++)
            if (s->v[i]->queue == (enum rdzv_queue)q)   /* the unparked are RDZV_Q_NONE now */
                s->v[j++] = s->v[i];
        if (touched[q])
            s->n = j;
    }
}

/* Drop joiners whose owner is already going away (a closing connection): they cannot be members. */
static void rdzv_round_purge(struct rdzv *rz)
{
    for (size_t i = rz->round.n; i-- > 0;)
        if (!rz->round.v[i]->owner.ops->live(rz->round.v[i]->owner.arg))
            rdzv_unpark(rz->round.v[i]);
}

/* Order nodes by id, byte by byte. */
static int rdzv_cmp(const void *a, const void *b)
{
    const struct rdzv_node *x = *(struct rdzv_node *const *)a, *y = *(struct rdzv_node *const *)b;
    return strcmp(x->id, y->id);
}

/* Make the nodes the members of a new generation in their order; the world size.  A node that was a
 * member of prev keeps its old rank in old_rank (recovery); the others get RDZV_NO_RANK. */
static uint64_t rdzv_adopt(struct rdzv *rz, struct rdzv_set *nodes, uint64_t prev)
{
    uint64_t world = 0;
    uint64_t hb = rdzv_core(rz)->lim.heartbeat_timeout;
    rz->generation++;
    rz->running = 1;
    rz->completed = 0;
    /* Logged before anyone is told the number, so a restart never hands it out again. */
    core_emit(rdzv_core(rz), &(struct record){.kind = RECORD_GEN, .ns = rz->ns->name, .gen = rz->generation});
    free(rz->members.v);
    rz->members = *nodes;
    rz->live_members = nodes->n;
    rdzv_keys_credentials(nodes);
    for (size_t i = 0; i < nodes->n; i++) {
        struct rdzv_node *n = nodes->v[i];
        /* A member of prev that was lost from it (it joined again as a newcomer, its worker replaced) is
         * new to this generation: it is in prev's excluded list, and a survivor's rank would make the
         * answer list its old rank twice. */
        n->old_rank = prev && n->generation == prev && !n->lost ? n->node_rank : RDZV_NO_RANK;
        n->generation = rz->generation;
        n->lost = 0;
        n->suspect_by[0] = '\0';   /* a report is a vote about one generation */
        n->node_rank = (uint32_t)i;
        n->rank_start = (uint32_t)world;
        world += n->lws;
        if (hb)
            rdzv_arm(rz, n->hb_timer, hb);
    }
    return world;
}

/* A node of a set being formed, with its place in the set (rdzv_form_unique sorts these). */
struct rdzv_place {
    struct rdzv_node *n;
    size_t pos;
};

/* Order places by node id, then by place in the set. */
static int rdzv_cmp_place(const void *a, const void *b)
{
    const struct rdzv_place *x = a, *y = b;
    int c = strcmp(x->n->id, y->n->id);
    return c ? c : x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Keep one node per id in a set about to form a generation: the round, the recovery queue, the standbys
 * and the members are queues of their own, so two nodes can claim one id (a newcomer with a survivor's,
 * a standby with a joiner's).  The first in the set's order keeps it; a later one is answered CONFLICT
 * and leaves its queue, so places, answers and ranks never collide.  O(n log n), once per formation; prev:
 * the generation a recovery replaces (0 for a plain round). */
static void rdzv_form_unique(struct rdzv *rz, struct rdzv_set *nodes, uint64_t prev)
{
    /* Survivors of one generation have distinct ids (it was formed with them): a recovery that admits
     * nobody else needs no sort (half a millisecond at 4,096 nodes, in the turn that answers them). */
    size_t survivors = 0;
    for (size_t i = 0; prev && i < nodes->n; i++)
        survivors += nodes->v[i]->generation == prev && !nodes->v[i]->lost;
    if (prev && survivors == nodes->n)
        return;
    struct rdzv_place *v = nodes->n > 1 ? malloc(nodes->n * sizeof *v) : NULL;
    if (!v)
        return;   /* one node, or no memory: the set is kept as it is */
    for (size_t i = 0; i < nodes->n; i++)
        v[i] = (struct rdzv_place){nodes->v[i], i};
    qsort(v, nodes->n, sizeof *v, rdzv_cmp_place);
    size_t ndup = 0;
    for (size_t i = 1; i < nodes->n; i++)
        if (strcmp(v[i].n->id, v[i - 1].n->id) == 0) {
            nodes->v[v[i].pos] = NULL;
            v[ndup++].n = v[i].n;   /* v[0..ndup) are read no more as places: reuse them for the refused */
        }
    size_t j = 0;
    for (size_t i = 0; i < nodes->n; i++)
        if (nodes->v[i])
            nodes->v[j++] = nodes->v[i];
    nodes->n = j;
    for (size_t k = 0; k < ndup; k++) {
        struct rdzv_node *d = v[k].n;
        char msg[RDZV_ID_MAX + 96];
        uint64_t id = d->join_id;
        snprintf(msg, sizeof msg, "node_id '%s' is already taken by another node of generation %" PRIu64, d->id,
                 rz->generation + 1);
        stats_inc(rdzv_core(rz)->stats, STAT_RDZV_DUPLICATE_IDS);
        rdzv_unpark(d);
        rdzv_reply(d, id, CORE_CONFLICT, msg, NULL);
    }
    free(v);
}

/* Note that formation step s ended now (*t: when it began; the next one begins now). */
static void rdzv_form_step(struct rdzv *rz, enum rdzv_form_step s, uint64_t *t)
{
    const struct core_hooks *h = &rdzv_core(rz)->hooks;
    uint64_t now = h->mono_us(h->ctx);
    rz->form_us[s] = now - *t;
    *t = now;
}

/* Form the next generation from the nodes in order (sorted by id first unless keep_order) and answer
 * them all; prev is the generation a recovery round replaces (0 otherwise). */
void rdzv_form(struct rdzv *rz, struct rdzv_set *nodes, int keep_order, uint64_t prev)
{
    const struct core_hooks *h = &rdzv_core(rz)->hooks;
    uint64_t t0 = h->mono_us(h->ctx), t = t0;
    rdzv_form_unique(rz, nodes, prev);
    rdzv_form_step(rz, RDZV_FORM_IDS, &t);
    rdzv_unpark_all(rz, nodes);
    rdzv_form_step(rz, RDZV_FORM_QUEUES, &t);
    if (!keep_order)
        qsort(nodes->v, nodes->n, sizeof *nodes->v, rdzv_cmp);
    /* Joins checked local_world_size * max_nodes <= UINT32_MAX, so the sum fits. */
    uint32_t world = (uint32_t)rdzv_adopt(rz, nodes, prev);
    rdzv_form_step(rz, RDZV_FORM_MEMBERS, &t);
    stats_inc(rdzv_core(rz)->stats, STAT_RDZV_GENERATIONS);
    rz->world = world;
    rz->formed++;
    rz->recoveries += prev != 0;
    if (prev) {
        char why[48];
        snprintf(why, sizeof why, "recovery of generation %" PRIu64, prev);
        rdzv_event(rz, RDZV_EV_RECOVERED, rz->generation, NULL, 0, why);
    } else {
        rdzv_event(rz, RDZV_EV_ASSIGNED, rz->generation, NULL, 0, NULL);
    }
    /* The answer, then the generation key, then the joins' replies: whoever sees the generation
     * (a watch, a get) can read its answer, and a member answered reads both. */
    struct answer_member *mv = rdzv_answer_members(rz);
    rdzv_answer_publish(rz, world, prev, mv);
    char gen[24];
    snprintf(gen, sizeof gen, "%" PRIu64, rz->generation);
    rdzv_publish(rz, KEYS_RDZV_GENERATION, gen);
    rdzv_form_step(rz, RDZV_FORM_ANSWER, &t);
    rdzv_answer_joins(rz, world, prev, mv);
    free(mv);
    rdzv_form_step(rz, RDZV_FORM_REPLIES, &t);
    core_log(rdzv_core(rz), CORE_LOG_INFO,
             "ns '%s': generation %" PRIu64 " formed: %zu nodes, world size %" PRIu32 "%s; formed and answered in "
             "%.1f ms", rz->ns->name, rz->generation, rz->members.n, world, prev ? " (recovery)" : "",
             (t - t0) / 1000.0);
}

/* Order the open round's joiners for admission: members of the latest generation first (the last call
 * prefers them over newcomers), then by arrival. */
static int rdzv_cmp_admit(const void *a, const void *b)
{
    const struct rdzv_node *x = *(struct rdzv_node *const *)a, *y = *(struct rdzv_node *const *)b;
    int xm = x->generation && x->generation == x->rz->generation, ym = y->generation && y->generation == y->rz->generation;
    if (xm != ym)
        return ym - xm;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Close the open round: its first max_nodes joiners (members of the generation before first) form the
 * next generation, standbys fill it up to max_nodes, and joiners beyond max_nodes become standbys. */
static void rdzv_round_close(struct rdzv *rz)
{
    struct rdzv_set joiners = rz->round;
    memset(&rz->round, 0, sizeof rz->round);
    rz->round_members = 0;
    HASH_CLEAR(hh_round, rz->round_ids);
    if (rz->last_call)
        rdzv_disarm(rz, rz->last_call);
    for (size_t i = 0; i < joiners.n; i++)
        joiners.v[i]->queue = RDZV_Q_NONE; /* out of the round already; still parked until formed */
    uint32_t max = rz->max, min = rz->min, last_call = rz->last_call_ms;
    if (joiners.n > max) {
        qsort(joiners.v, joiners.n, sizeof *joiners.v, rdzv_cmp_admit);
        for (size_t i = max; i < joiners.n; i++) { /* over-subscribed: the rest wait as standbys */
            struct rdzv_node *n = joiners.v[i];
            if (rdzv_set_add(&rz->standbys, n) == 0)
                n->queue = RDZV_Q_STANDBY;
        }
        joiners.n = max;
    }
    rdzv_take_standbys(rz, &joiners, max - joiners.n);
    rdzv_form(rz, &joiners, 0, 0);
    rz->gen_min = min;
    rz->gen_max = max;
    rz->gen_last_call = last_call;
}

/* The last call ended: close the round if it still has its minimum. */
static void rdzv_last_call_cb(void *arg)
{
    struct rdzv *rz = arg;
    rdzv_round_purge(rz);
    if (!rz->running && !rz->rec_open && rz->round.n >= rz->min && rz->round.n > 0)
        rdzv_round_close(rz);
}

/* Whether the open round re-forms a broken generation with every live member of it back and nobody
 * else: no one more is expected, so a last call would only add its wait to a restart.  (Newcomers and
 * scale-ups still get the last call.)  O(1): both counts are kept as nodes park, leave and are lost. */
static int rdzv_round_all_back(const struct rdzv *rz)
{
    return rz->generation && !rz->running && !rz->completed && rz->live_members == 0 && rz->round.n > 0 &&
           rz->round_members == rz->round.n;
}

/* Decide what the open round does now: close, start or keep its last call, or wait. */
void rdzv_round_check(struct rdzv *rz)
{
    /* While survivors recover, the open round's joiners are the recovery's newcomers. */
    if (rz->rec_open)
        return;
    /* The purge walks the whole round, so it runs only when the round may close now: once per
     * round, not once per join (which made a storm of n joins cost O(n^2)).  Dead joiners left
     * in the count can at worst start the last call early; its callback purges and re-checks. */
    if (!rz->running && rz->round.n >= rz->min && (rz->round.n >= rz->max || rz->last_call_ms == 0))
        rdzv_round_purge(rz);
    if (rz->running || rz->round.n == 0 || rz->round.n < rz->min) {
        /* Below the minimum the last call starts over once it is reached again. */
        if (rz->last_call)
            rdzv_disarm(rz, rz->last_call);
        return;
    }
    if (rz->round.n >= rz->max || rz->last_call_ms == 0) {
        rdzv_round_close(rz);
        return;
    }
    if (rdzv_round_all_back(rz)) {
        rdzv_round_purge(rz);   /* a joiner whose connection died is not back */
        if (rz->round.n >= rz->min && rz->round.n > 0 && rdzv_round_all_back(rz)) {
            rdzv_round_close(rz);
            return;
        }
    }
    const struct core_hooks *h = &rdzv_core(rz)->hooks;
    if (!rz->last_call && !(rz->last_call = h->timer_new(h->ctx, rdzv_last_call_cb, rz))) {
        rdzv_round_close(rz);
        return;
    }
    if (!h->timer_pending(rz->last_call))
        rdzv_arm(rz, rz->last_call, rz->last_call_ms);
}

/* -------------------------------------------------------------- hooks */

/* The server is draining: answer parked joins of ns with SHUTTING_DOWN. */
void rdzv_shutdown(struct ns *ns)
{
    struct rdzv *rz = ns->rdzv;
    if (!rz)
        return;
    struct rdzv_set *queues[] = {&rz->round, &rz->rec, &rz->standbys};
    for (size_t q = 0; q < sizeof queues / sizeof queues[0]; q++) {
        while (queues[q]->n > 0) {
            struct rdzv_node *n = queues[q]->v[queues[q]->n - 1];
            uint64_t id = n->join_id;
            rdzv_unpark(n);
            rdzv_reply(n, id, CORE_SHUTTING_DOWN, "server is shutting down", NULL);
        }
    }
}

/* Free ns->rdzv (at exit), detaching any owner still pointing into it. */
void rdzv_ns_destroy(struct ns *ns)
{
    struct rdzv *rz = ns->rdzv;
    if (!rz)
        return;
    HASH_CLEAR(hh_round, rz->round_ids); /* the table only: its nodes are freed below */
    struct rdzv_node *n, *tmp;
    DL_FOREACH_SAFE(rz->nodes, n, tmp) {
        if (n->joining)
            rdzv_release(n);
        rdzv_node_free(n);
    }
    if (rz->last_call)
        rdzv_core(rz)->hooks.timer_free(rz->last_call);
    rdzv_recover_destroy(rz);
    free(rz->round.v);
    free(rz->members.v);
    free(rz->rec.v);
    free(rz->standbys.v);
    free(rz->gone);
    stats_add(rdzv_core(rz)->stats, STAT_RDZV_TIMELINE_BYTES, -(uint64_t)(rz->ring_cap * sizeof *rz->ring));
    free(rz->ring);
    free(rz);
    ns->rdzv = NULL;
}

/* ---------------------------------------------------------- counters */

/* Note a key write: an NCCL id key (nccl/<gen>/...) becomes an id-published event. */
void rdzv_note_key(struct ns *ns, const char *key, size_t klen)
{
    struct rdzv *rz = ns->rdzv;
    uint64_t gen;
    if (!rz || !keys_nccl_id_generation(key, klen, &gen))
        return;
    rdzv_event(rz, RDZV_EV_ID_PUBLISHED, gen, key, klen, NULL);
}

/* Raise ns's generation counter to at least gen (recovery), so no number is reused. */
void rdzv_restore_generation(struct ns *ns, uint64_t gen)
{
    struct rdzv *rz = rdzv_of(ns);
    if (rz && gen > rz->generation)
        rz->generation = gen;
}

/* The latest generation counter of ns (0 = none). */
uint64_t rdzv_generation(const struct ns *ns)
{
    const struct rdzv *rz = ns->rdzv;
    return rz ? rz->generation : 0;
}
