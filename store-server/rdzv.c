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
 * Each connection that ever joined has one node record (conn->rdzv): its
 * pending join, if any, and its membership.  A member is live while its
 * generation runs; it stays as a stale record after the generation breaks
 * (so its heartbeat can be told STALE_GENERATION) until the connection
 * re-joins, leaves or closes.  Losing a live member - close, leave, missed
 * heartbeat, or a re-join - breaks the generation: every other member gets
 * MEMBER_LOST in the same loop turn, and muster/rdzv/<gen>/broken is set
 * through the keyspace so non-members can wait or watch for it.
 */
#include "rdzv.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uthash.h>
#include <utlist.h>

#include "conn.h"
#include "keys.h"
#include "log.h"
#include "ns.h"
#include "records.h"
#include "server.h"

struct rdzv;

/* One connection's rendezvous state: a pending join and/or a membership. */
struct rdzv_node {
    struct rdzv_node *prev, *next; /* every node of the namespace */
    struct conn *conn;
    struct rdzv *rz;
    char id[RDZV_ID_MAX + 1];
    uint32_t lws;
    int want_members;              /* its join asked for the member list */
    int joining;                   /* in the open round */
    uint64_t join_id;              /* the parked request */
    struct event *join_timer;
    uint64_t generation;           /* of its latest membership; 0 = never a member */
    uint32_t node_rank, rank_start;
    struct event *hb_timer;
    UT_hash_handle hh_round;       /* in rz->round_ids while joining */
};

/* A growable array of node pointers. */
struct rdzv_set {
    struct rdzv_node **v;
    size_t n, cap;
};

/* A namespace's rendezvous state. */
struct rdzv {
    struct ns *ns;
    struct rdzv_node *nodes;   /* every node record */
    struct rdzv_set round;     /* the open round's joiners */
    struct rdzv_node *round_ids; /* the same joiners by id, so a join checks its id in O(1) */
    uint32_t min, max, last_call_ms;
    struct event *last_call;
    uint64_t generation;       /* the latest generation formed; 0 = none yet */
    struct rdzv_set members;   /* that generation's members */
    int running;               /* the latest generation is running (not broken) */
    int completed;             /* every member of the latest generation left finished */
    uint64_t failures;         /* generations broken */
    uint32_t world;            /* world size of the latest generation */
    struct rdzv_event ring[RDZV_RING]; /* the timeline, a ring */
    size_t ring_next, ring_n;
};

/* ----------------------------------------------------------- helpers */

/* Append a node to a set; 0, or -1 when memory ran out. */
static int rdzv_set_add(struct rdzv_set *s, struct rdzv_node *n)
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
static void rdzv_set_del(struct rdzv_set *s, const struct rdzv_node *n)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i] == n) {
            memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof *s->v);
            s->n--;
            return;
        }
    }
}

/* Arm a timer for ms milliseconds from now. */
static void rdzv_arm(struct event *ev, uint64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    evtimer_add(ev, &tv);
}

/* Whether a node is a member of the running generation. */
static int rdzv_live(const struct rdzv_node *n)
{
    return n->rz->running && n->generation == n->rz->generation;
}

/* Store a small text value under key through the keyspace (waking waiters and watchers). */
static void rdzv_publish(struct rdzv *rz, const char *key, const char *val)
{
    int st = ks_set(&rz->ns->ks, key, strlen(key), (uint8_t *)(uintptr_t)val, strlen(val), 0);
    if (st != MUSTER__STATUS__OK)
        log_msg(LOG_WARN, "ns '%s': cannot publish %s (status %d)", rz->ns->name, key, st);
}

/* Push a membership event to a node's connection. */
static void rdzv_push(struct rdzv_node *to, int kind, uint64_t gen, const char *node_id)
{
    Muster__MembershipEvent me = MUSTER__MEMBERSHIP_EVENT__INIT;
    me.kind = (Muster__MembershipEvent__Kind)kind;
    me.generation = gen;
    me.node_id = (char *)node_id;
    Muster__Event ev = MUSTER__EVENT__INIT;
    ev.event_case = MUSTER__EVENT__EVENT_MEMBERSHIP;
    ev.membership = &me;
    conn_push_event(to->conn, &ev);
}

/* The namespace's rendezvous state, created on first use; NULL when memory ran out. */
static struct rdzv *rdzv_of(struct ns *ns)
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

static void rdzv_round_check(struct rdzv *rz);

/* Record one timeline event in the job's ring (what may be NULL). */
static void rdzv_event(struct rdzv *rz, enum rdzv_event_kind kind, uint64_t gen, const char *what, size_t len)
{
    struct rdzv_event *ev = &rz->ring[rz->ring_next];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ev->wall_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    ev->generation = gen;
    ev->kind = kind;
    if (len > RDZV_ID_MAX)
        len = RDZV_ID_MAX;
    memcpy(ev->what, what ? what : "", what ? len : 0);
    ev->what[what ? len : 0] = 0;
    rz->ring_next = (rz->ring_next + 1) % RDZV_RING;
    if (rz->ring_n < RDZV_RING)
        rz->ring_n++;
}

/* ---------------------------------------------------------- breaking */

/* Break the running generation because member lost (known as id) went away: tell every other member now. */
static void rdzv_break(struct rdzv *rz, struct rdzv_node *lost, const char *id, const char *why)
{
    if (!rdzv_live(lost))
        return;
    struct stats *st = &rz->ns->srv->stats;
    rz->running = 0;
    rz->failures++;
    stats_inc(st, STAT_RDZV_FAILURES);
    rdzv_event(rz, RDZV_EV_FAILED, rz->generation, id, strlen(id));
    log_msg(LOG_INFO, "ns '%s': generation %" PRIu64 " broken: node '%s' %s", rz->ns->name, rz->generation, id,
            why);
    for (size_t i = 0; i < rz->members.n; i++) {
        struct rdzv_node *m = rz->members.v[i];
        evtimer_del(m->hb_timer);
        if (m != lost)
            rdzv_push(m, MUSTER__MEMBERSHIP_EVENT__KIND__MEMBER_LOST, rz->generation, id);
    }
    char key[64];
    keys_rdzv_broken(key, sizeof key, rz->generation);
    rdzv_publish(rz, key, id);
    /* A round that waited for this generation to end may close now. */
    rdzv_round_check(rz);
}

/* A member's heartbeat deadline passed: it counts as lost. */
static void rdzv_hb_expired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rdzv_node *n = arg;
    if (!rdzv_live(n))
        return;
    stats_inc(&n->rz->ns->srv->stats, STAT_RDZV_HEARTBEAT_TIMEOUTS);
    rdzv_break(n->rz, n, n->id, "missed its heartbeats");
}

/* ------------------------------------------------------------- round */

/* Release a joiner's parked request: its deadline, its pending id and its waiter slot. */
static void rdzv_release(struct rdzv_node *n)
{
    n->joining = 0;
    evtimer_del(n->join_timer);
    conn_pending_remove(n->conn, n->join_id);
    server_waiter_put(n->rz->ns->srv, &n->rz->ns->nwaiters, &n->conn->nwaiters);
    stats_dec(&n->rz->ns->srv->stats, STAT_RDZV_PARKED_JOINS);
}

/* Take a node out of the open round and release its parked request (no reply here). */
static void rdzv_unpark(struct rdzv_node *n)
{
    if (!n->joining)
        return;
    rdzv_release(n);
    rdzv_set_del(&n->rz->round, n);
    HASH_DELETE(hh_round, n->rz->round_ids, n);
}

/* Drop joiners whose connection is already closing: they cannot be members. */
static void rdzv_round_purge(struct rdzv *rz)
{
    for (size_t i = rz->round.n; i-- > 0;)
        if (!conn_live(rz->round.v[i]->conn))
            rdzv_unpark(rz->round.v[i]);
}

/* Order nodes by id, byte by byte. */
static int rdzv_cmp(const void *a, const void *b)
{
    const struct rdzv_node *x = *(struct rdzv_node *const *)a, *y = *(struct rdzv_node *const *)b;
    return strcmp(x->id, y->id);
}

/* Make the closed round's joiners the members of a new generation (ranks in id order). */
static uint64_t rdzv_adopt(struct rdzv *rz, struct rdzv_set *joiners)
{
    uint64_t world = 0;
    uint64_t hb = rz->ns->srv->opt.heartbeat_timeout;
    qsort(joiners->v, joiners->n, sizeof *joiners->v, rdzv_cmp);
    rz->generation++;
    rz->running = 1;
    rz->completed = 0;
    /* Logged before anyone is told the number, so a restart never hands it out again. */
    records_emit(rz->ns->srv, &(struct record){.kind = RECORD_GEN, .ns = rz->ns->name, .gen = rz->generation});
    free(rz->members.v);
    rz->members = *joiners;
    for (size_t i = 0; i < joiners->n; i++) {
        struct rdzv_node *n = joiners->v[i];
        n->generation = rz->generation;
        n->node_rank = (uint32_t)i;
        n->rank_start = (uint32_t)world;
        world += n->lws;
        if (hb)
            rdzv_arm(n->hb_timer, hb);
    }
    return world;
}

/* Answer each member of the new generation with its assignment (members share one list).
 * Only joins that asked (want_members) get the whole list: sent to all, a round of n
 * nodes would cost O(n^2) bytes, some GB at 16k nodes. */
static void rdzv_answer(struct rdzv *rz, uint32_t world)
{
    size_t n = rz->members.n;
    Muster__Member *mv = calloc(n ? n : 1, sizeof *mv);
    Muster__Member **mp = calloc(n ? n : 1, sizeof *mp);
    for (size_t i = 0; mv && mp && i < n; i++) {
        const struct rdzv_node *m = rz->members.v[i];
        muster__member__init(&mv[i]);
        mv[i].node_id = (char *)m->id;
        mv[i].node_rank = m->node_rank;
        mv[i].rank_start = m->rank_start;
        mv[i].local_world_size = m->lws;
        mp[i] = &mv[i];
    }
    for (size_t i = 0; i < n; i++) {
        struct rdzv_node *m = rz->members.v[i];
        if (!mv || !mp) {
            conn_reply(m->conn, m->join_id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
            continue;
        }
        Muster__Assignment a = MUSTER__ASSIGNMENT__INIT;
        a.generation = rz->generation;
        a.node_rank = m->node_rank;
        a.num_nodes = (uint32_t)n;
        a.rank_start = m->rank_start;
        a.local_world_size = m->lws;
        a.world_size = world;
        a.n_members = m->want_members ? n : 0;
        a.members = m->want_members ? mp : NULL;
        a.node_id = m->id;
        Muster__RdzvJoinRes r = MUSTER__RDZV_JOIN_RES__INIT;
        r.assignment = &a;
        conn_reply(m->conn, m->join_id, MUSTER__STATUS__OK, NULL, &r.base);
    }
    free(mv);
    free(mp);
}

/* Close the open round: form the next generation from its joiners and answer them all. */
static void rdzv_round_close(struct rdzv *rz)
{
    struct rdzv_set joiners = rz->round;
    memset(&rz->round, 0, sizeof rz->round);
    HASH_CLEAR(hh_round, rz->round_ids);
    if (rz->last_call)
        evtimer_del(rz->last_call);
    for (size_t i = 0; i < joiners.n; i++)
        rdzv_release(joiners.v[i]);
    /* Joins checked local_world_size * max_nodes <= UINT32_MAX, so the sum fits. */
    uint32_t world = (uint32_t)rdzv_adopt(rz, &joiners);
    stats_inc(&rz->ns->srv->stats, STAT_RDZV_GENERATIONS);
    log_msg(LOG_INFO, "ns '%s': generation %" PRIu64 " formed: %zu nodes, world size %" PRIu32, rz->ns->name,
            rz->generation, rz->members.n, world);
    rz->world = world;
    rdzv_event(rz, RDZV_EV_ASSIGNED, rz->generation, NULL, 0);
    rdzv_answer(rz, world);
    char gen[24];
    snprintf(gen, sizeof gen, "%" PRIu64, rz->generation);
    rdzv_publish(rz, KEYS_RDZV_GENERATION, gen);
}

/* The last call ended: close the round if it still has its minimum. */
static void rdzv_last_call_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rdzv *rz = arg;
    rdzv_round_purge(rz);
    if (!rz->running && rz->round.n >= rz->min && rz->round.n > 0)
        rdzv_round_close(rz);
}

/* Decide what the open round does now: close, start or keep its last call, or wait. */
static void rdzv_round_check(struct rdzv *rz)
{
    /* The purge walks the whole round, so it runs only when the round may close now: once per
     * round, not once per join (which made a storm of n joins cost O(n^2)).  Dead joiners left
     * in the count can at worst start the last call early; its callback purges and re-checks. */
    if (!rz->running && rz->round.n >= rz->min && (rz->round.n >= rz->max || rz->last_call_ms == 0))
        rdzv_round_purge(rz);
    if (rz->running || rz->round.n == 0 || rz->round.n < rz->min) {
        /* Below the minimum the last call starts over once it is reached again. */
        if (rz->last_call)
            evtimer_del(rz->last_call);
        return;
    }
    if (rz->round.n >= rz->max || rz->last_call_ms == 0) {
        rdzv_round_close(rz);
        return;
    }
    if (!rz->last_call && !(rz->last_call = evtimer_new(rz->ns->srv->base, rdzv_last_call_cb, rz))) {
        rdzv_round_close(rz);
        return;
    }
    if (!evtimer_pending(rz->last_call, NULL))
        rdzv_arm(rz->last_call, rz->last_call_ms);
}

/* ------------------------------------------------------------- nodes */

/* A parked join's deadline passed: answer TIMEOUT and leave the round. */
static void rdzv_join_expired(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rdzv_node *n = arg;
    if (!n->joining)
        return;
    uint64_t id = n->join_id;
    rdzv_unpark(n);
    stats_inc(&n->rz->ns->srv->stats, STAT_TIMEOUTS);
    conn_replyf(n->conn, id, MUSTER__STATUS__TIMEOUT, "round did not close in time (%zu of min %u nodes joined)",
                n->rz->round.n + 1, n->rz->min);
    rdzv_round_check(n->rz);
}

/* The connection closed while its join was parked (conn_pending cancel): leave the round silently. */
static void rdzv_join_cancel(void *arg)
{
    struct rdzv_node *n = arg;
    if (!n->joining)
        return;
    /* conn.c already forgot the pending id; removing it again is a no-op. */
    rdzv_unpark(n);
    rdzv_round_check(n->rz);
}

/* The node record of connection c, created on first use; NULL when memory ran out. */
static struct rdzv_node *rdzv_node_of(struct conn *c)
{
    if (c->rdzv)
        return c->rdzv;
    struct rdzv *rz = rdzv_of(c->ns);
    struct rdzv_node *n = rz ? calloc(1, sizeof *n) : NULL;
    if (!n)
        return NULL;
    n->conn = c;
    n->rz = rz;
    n->join_timer = evtimer_new(c->srv->base, rdzv_join_expired, n);
    n->hb_timer = evtimer_new(c->srv->base, rdzv_hb_expired, n);
    if (!n->join_timer || !n->hb_timer) {
        if (n->join_timer)
            event_free(n->join_timer);
        if (n->hb_timer)
            event_free(n->hb_timer);
        free(n);
        return NULL;
    }
    DL_APPEND(rz->nodes, n);
    c->rdzv = n;
    return n;
}

/* Free a node record that is neither joining nor a live member. */
static void rdzv_node_free(struct rdzv_node *n)
{
    struct rdzv *rz = n->rz;
    if (n->generation == rz->generation)
        rdzv_set_del(&rz->members, n);
    DL_DELETE(rz->nodes, n);
    event_free(n->join_timer);
    event_free(n->hb_timer);
    if (n->conn)
        n->conn->rdzv = NULL;
    free(n);
}

/* --------------------------------------------------------------- ops */

/* Check a join's parameters; a wire status with msg filled. */
static int rdzv_join_check(const Muster__RdzvJoinReq *j, char *msg, size_t len)
{
    if (strlen(j->node_id) > RDZV_ID_MAX) {
        snprintf(msg, len, "node_id longer than %d bytes", RDZV_ID_MAX);
    } else if (j->local_world_size < 1 || j->local_world_size > RDZV_MAX_LOCAL) {
        snprintf(msg, len, "local_world_size must be 1..%u", RDZV_MAX_LOCAL);
    } else if (j->min_nodes < 1 || j->max_nodes < j->min_nodes || j->max_nodes > RDZV_MAX_NODES) {
        snprintf(msg, len, "need 1 <= min_nodes <= max_nodes <= %u", RDZV_MAX_NODES);
    } else if ((uint64_t)j->local_world_size * j->max_nodes > UINT32_MAX) {
        snprintf(msg, len, "local_world_size * max_nodes exceeds 2^32 ranks");
    } else {
        return MUSTER__STATUS__OK;
    }
    return MUSTER__STATUS__BAD_REQUEST;
}

/* Whether some joiner of the open round other than self uses id. */
static int rdzv_id_taken(const struct rdzv *rz, const struct rdzv_node *self, const char *id)
{
    struct rdzv_node *found;
    HASH_FIND(hh_round, rz->round_ids, id, strlen(id), found);
    return found && found != self;
}

/* Give a node that joined with "" an id no joiner of the round uses. */
static void rdzv_auto_id(const struct rdzv *rz, struct rdzv_node *n)
{
    snprintf(n->id, sizeof n->id, "node-%" PRIu64, n->conn->session_id);
    for (unsigned k = 1; rdzv_id_taken(rz, n, n->id) && k <= rz->round.n + 1; k++)
        snprintf(n->id, sizeof n->id, "node-%" PRIu64 "-%u", n->conn->session_id, k);
}

/* Whether the join agrees with the open round; a wire status with msg filled. */
static int rdzv_join_fits(const struct rdzv *rz, const Muster__RdzvJoinReq *j, char *msg, size_t len)
{
    if (rz->round.n > 0 && (j->min_nodes != rz->min || j->max_nodes != rz->max)) {
        snprintf(msg, len, "the open round has min_nodes %u max_nodes %u, this join %u %u", rz->min, rz->max,
                 j->min_nodes, j->max_nodes);
        return MUSTER__STATUS__CONFLICT;
    }
    if (*j->node_id && rdzv_id_taken(rz, NULL, j->node_id)) {
        snprintf(msg, len, "node_id '%s' has already joined this round", j->node_id);
        return MUSTER__STATUS__CONFLICT;
    }
    return MUSTER__STATUS__OK;
}

/* Put node n into the open round with its request and deadline; a wire status. */
static int rdzv_park(struct rdzv_node *n, const Muster__Request *req)
{
    const Muster__RdzvJoinReq *j = req->rdzv_join;
    struct rdzv *rz = n->rz;
    struct server *srv = n->conn->srv;
    int st = server_waiter_take(srv, &rz->ns->nwaiters, &n->conn->nwaiters);
    if (st != MUSTER__STATUS__OK)
        return st;
    if (rdzv_set_add(&rz->round, n) != 0 || conn_pending_add(n->conn, req->id, rdzv_join_cancel, n) != 0) {
        rdzv_set_del(&rz->round, n);
        server_waiter_put(srv, &rz->ns->nwaiters, &n->conn->nwaiters);
        return MUSTER__STATUS__INTERNAL;
    }
    stats_inc(&srv->stats, STAT_RDZV_PARKED_JOINS);
    if (rz->round.n == 1) {
        rz->min = j->min_nodes;
        rz->max = j->max_nodes;
        rz->last_call_ms = j->last_call_ms;
        stats_inc(&srv->stats, STAT_RDZV_ROUNDS);
    }
    n->joining = 1;
    n->join_id = req->id;
    n->lws = j->local_world_size;
    n->want_members = j->want_members;
    if (*j->node_id)
        snprintf(n->id, sizeof n->id, "%s", j->node_id);
    else
        rdzv_auto_id(rz, n);
    HASH_ADD_KEYPTR(hh_round, rz->round_ids, n->id, strlen(n->id), n);
    rdzv_arm(n->join_timer, server_timeout(srv, j->timeout_ms));
    rdzv_event(rz, RDZV_EV_JOINED, rz->generation + 1, n->id, strlen(n->id));
    return MUSTER__STATUS__OK;
}

/* rdzv_join: join the namespace's next round; answer later with conn_reply (an op table row). */
void rdzv_op_join(struct conn *c, Muster__Request *req)
{
    char msg[256];
    const Muster__RdzvJoinReq *j = req->rdzv_join;
    int st = rdzv_join_check(j, msg, sizeof msg);
    struct rdzv_node *n = st == MUSTER__STATUS__OK ? rdzv_node_of(c) : NULL;
    if (st == MUSTER__STATUS__OK && !n)
        snprintf(msg, sizeof msg, "out of memory"), st = MUSTER__STATUS__INTERNAL;
    if (n && n->joining)
        snprintf(msg, sizeof msg, "a join is already pending on this connection"), st = MUSTER__STATUS__BAD_REQUEST;
    if (st == MUSTER__STATUS__OK)
        st = rdzv_join_fits(n->rz, j, msg, sizeof msg);
    if (st != MUSTER__STATUS__OK) {
        conn_reply(c, req->id, st, msg, NULL);
        return;
    }
    struct rdzv *rz = n->rz;
    char old_id[RDZV_ID_MAX + 1];
    memcpy(old_id, n->id, sizeof old_id);
    if ((st = rdzv_park(n, req)) != MUSTER__STATUS__OK) {
        conn_reply(c, req->id, st,
                   st == MUSTER__STATUS__LIMIT ? server_waiter_why(c->srv, &c->ns->nwaiters, &c->nwaiters)
                                               : "out of memory",
                   NULL);
        return;
    }
    /* A member joining again wants a new world: its generation ends, and as the node is already
     * in the round, a round closing on that break includes it. */
    if (rdzv_live(n))
        rdzv_break(rz, n, old_id, "joined again");
    else if (rz->running)
        for (size_t i = 0; i < rz->members.n; i++)
            rdzv_push(rz->members.v[i], MUSTER__MEMBERSHIP_EVENT__KIND__NODE_WAITING, rz->generation, n->id);
    rdzv_round_check(rz);
}

/* The running generation's last member left finished: it completed, which is not a failure. */
static void rdzv_complete_check(struct rdzv *rz)
{
    if (!rz->running || rz->members.n > 0)
        return;
    rz->running = 0;
    rz->completed = 1;
    rdzv_event(rz, RDZV_EV_COMPLETED, rz->generation, NULL, 0);
    log_msg(LOG_INFO, "ns '%s': generation %" PRIu64 " completed: every node finished", rz->ns->name, rz->generation);
    /* A round that waited for this generation to end may close now. */
    rdzv_round_check(rz);
}

/* rdzv_leave: end this connection's membership (an op table row). */
void rdzv_op_leave(struct conn *c, Muster__Request *req)
{
    struct rdzv_node *n = c->rdzv;
    if (!n) {
        conn_reply(c, req->id, MUSTER__STATUS__NOT_MEMBER, "this connection never joined", NULL);
        return;
    }
    if (n->joining) {
        uint64_t id = n->join_id;
        rdzv_unpark(n);
        conn_reply(c, id, MUSTER__STATUS__NOT_MEMBER, "left before the round closed", NULL);
        rdzv_round_check(n->rz);
    }
    if (n->generation)
        rdzv_event(n->rz, RDZV_EV_LEFT, n->generation, n->id, strlen(n->id));
    struct rdzv *rz = n->rz;
    if (req->rdzv_leave->finished && rdzv_live(n)) {
        rdzv_node_free(n); /* out of the members, and its heartbeats are no longer due */
        rdzv_complete_check(rz);
    } else {
        rdzv_break(rz, n, n->id, "left");
        rdzv_node_free(n);
    }
    Muster__RdzvLeaveRes r = MUSTER__RDZV_LEAVE_RES__INIT;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* rdzv_heartbeat: keep this connection's membership alive (an op table row). */
void rdzv_op_heartbeat(struct conn *c, Muster__Request *req)
{
    struct rdzv_node *n = c->rdzv;
    uint64_t gen = req->rdzv_heartbeat->generation;
    if (!n || n->generation == 0) {
        conn_reply(c, req->id, MUSTER__STATUS__NOT_MEMBER, "this connection is not a member", NULL);
        return;
    }
    if (!rdzv_live(n) || gen != n->generation) {
        conn_replyf(c, req->id, MUSTER__STATUS__STALE_GENERATION, "generation %" PRIu64 " has ended (latest %" PRIu64 ")",
                    gen, n->rz->generation);
        return;
    }
    uint64_t hb = c->srv->opt.heartbeat_timeout;
    if (hb)
        rdzv_arm(n->hb_timer, hb);
    Muster__RdzvHeartbeatRes r = MUSTER__RDZV_HEARTBEAT_RES__INIT;
    r.generation = gen;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* -------------------------------------------------------------- hooks */

/* A connection is closing: drop its membership or parked join (c->rdzv). */
void rdzv_conn_closed(struct conn *c)
{
    struct rdzv_node *n = c->rdzv;
    if (!n)
        return;
    /* The parked join was normally cancelled already, through conn_pending. */
    if (n->joining)
        rdzv_join_cancel(n);
    rdzv_break(n->rz, n, n->id, "closed its connection");
    rdzv_node_free(n);
}

/* The server is draining: answer parked joins of ns with SHUTTING_DOWN. */
void rdzv_shutdown(struct ns *ns)
{
    struct rdzv *rz = ns->rdzv;
    if (!rz)
        return;
    while (rz->round.n > 0) {
        struct rdzv_node *n = rz->round.v[rz->round.n - 1];
        uint64_t id = n->join_id;
        rdzv_unpark(n);
        conn_reply(n->conn, id, MUSTER__STATUS__SHUTTING_DOWN, "server is shutting down", NULL);
    }
}

/* Free ns->rdzv (at exit), detaching any connection still pointing into it. */
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
        event_free(rz->last_call);
    free(rz->round.v);
    free(rz->members.v);
    free(rz);
    ns->rdzv = NULL;
}

/* ------------------------------------------------------------ reports */

/* Fill *out for ns; 0, or -1 when the job never used rendezvous. */
int rdzv_info(const struct ns *ns, struct rdzv_info *out)
{
    const struct rdzv *rz = ns->rdzv;
    memset(out, 0, sizeof *out);
    if (!rz)
        return -1;
    out->generation = rz->generation;
    out->running = rz->running;
    out->completed = rz->completed;
    out->members = rz->members.n;
    out->joining = rz->round.n;
    out->world_size = rz->world;
    out->failures = rz->failures;
    return 0;
}

/* Call fn for each member of ns's latest generation in rank order. */
void rdzv_each_member(const struct ns *ns, rdzv_member_fn fn, void *arg)
{
    const struct rdzv *rz = ns->rdzv;
    for (size_t i = 0; rz && i < rz->members.n; i++) {
        const struct rdzv_node *m = rz->members.v[i];
        fn(arg, m->id, m->node_rank, m->rank_start, m->lws);
    }
}

/* Call fn for each kept timeline event of ns, oldest first. */
void rdzv_each_event(const struct ns *ns, void (*fn)(void *arg, const struct rdzv_event *ev), void *arg)
{
    const struct rdzv *rz = ns->rdzv;
    if (!rz)
        return;
    size_t first = (rz->ring_next + RDZV_RING - rz->ring_n) % RDZV_RING;
    for (size_t i = 0; i < rz->ring_n; i++)
        fn(arg, &rz->ring[(first + i) % RDZV_RING]);
}

/* Note a key write: an NCCL id key (nccl/<gen>/...) becomes an id-published event. */
void rdzv_note_key(struct ns *ns, const char *key, size_t klen)
{
    struct rdzv *rz = ns->rdzv;
    uint64_t gen;
    if (!rz || !keys_nccl_id_generation(key, klen, &gen))
        return;
    rdzv_event(rz, RDZV_EV_ID_PUBLISHED, gen, key, klen);
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
