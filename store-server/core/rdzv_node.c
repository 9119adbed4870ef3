/*
 * A connection's node in a job's rendezvous: its record (created at its
 * first join, freed when it leaves or its connection closes), its joins
 * (checked, then parked in the open round, the recovery round or the
 * standbys), its leave and its heartbeats.  Rounds, forming and breaking a
 * generation are rdzv.c's; recovery rounds rdzv_recover.c's.
 *
 * As everywhere in the core, nothing here touches a socket, a timer or the
 * log: replies go through the node's owner, timers through the core's hooks.
 */
#include "rdzv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <utlist.h>

#include "core.h"
#include "rdzv_int.h"
#include "status.h"
#include "stats.h"

/* Whether a node is a member of the running generation. */
static int rdzv_live(const struct rdzv_node *n)
{
    return n->rz->running && n->generation == n->rz->generation;
}

/* A member's heartbeat deadline passed: it counts as lost. */
static void rdzv_hb_expired(void *arg)
{
    struct rdzv_node *n = arg;
    if (!rdzv_live(n))
        return;
    stats_inc(rdzv_core(n->rz)->stats, STAT_RDZV_HEARTBEAT_TIMEOUTS);
    rdzv_lose(n->rz, n, n->id, "missed its heartbeats");
}

/* ------------------------------------------------------------- nodes */

/* A parked join's deadline passed: answer TIMEOUT and leave the round. */
static void rdzv_join_expired(void *arg)
{
    struct rdzv_node *n = arg;
    if (!n->joining)
        return;
    uint64_t id = n->join_id;
    char msg[1536];
    rdzv_who(n, msg, sizeof msg);
    rdzv_unpark(n);
    stats_inc(rdzv_core(n->rz)->stats, STAT_TIMEOUTS);
    rdzv_reply(n, id, CORE_TIMEOUT, msg, NULL);
    rdzv_round_check(n->rz);
}

/* The owner dropped n's parked join (its connection is closing): n leaves the round silently. */
void rdzv_join_cancel(struct rdzv_node *n)
{
    if (!n->joining)
        return;
    /* The owner already forgot the parked id; unpark tells it again, which must be a no-op. */
    rdzv_unpark(n);
    rdzv_round_check(n->rz);
}

/* The node record of owner in ns (*owner->slot), created on first use; NULL when memory ran out. */
static struct rdzv_node *rdzv_node_of(struct ns *ns, const struct rdzv_owner *owner)
{
    if (*owner->slot)
        return *owner->slot;
    struct rdzv *rz = rdzv_of(ns);
    struct rdzv_node *n = rz ? calloc(1, sizeof *n) : NULL;
    if (!n)
        return NULL;
    const struct core_hooks *h = &ns->core->hooks;
    n->owner = *owner;
    n->rz = rz;
    n->join_timer = h->timer_new(h->ctx, rdzv_join_expired, n);
    n->hb_timer = h->timer_new(h->ctx, rdzv_hb_expired, n);
    if (!n->join_timer || !n->hb_timer) {
        if (n->join_timer)
            h->timer_free(n->join_timer);
        if (n->hb_timer)
            h->timer_free(n->hb_timer);
        free(n);
        return NULL;
    }
    DL_APPEND(rz->nodes, n);
    *owner->slot = n;
    return n;
}

/* Free a node record that is neither joining nor a live member. */
void rdzv_node_free(struct rdzv_node *n)
{
    struct rdzv *rz = n->rz;
    if (n->generation == rz->generation)
        rdzv_set_del(&rz->members, n);
    DL_DELETE(rz->nodes, n);
    rdzv_keys_forget(n);
    rdzv_core(rz)->hooks.timer_free(n->join_timer);
    rdzv_core(rz)->hooks.timer_free(n->hb_timer);
    *n->owner.slot = NULL;
    free(n);
}

/* --------------------------------------------------------------- ops */

/* Check a join's parameters; a core status with msg filled. */
static int rdzv_join_check(const struct rdzv_join_req *j, char *msg, size_t len)
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
        return CORE_OK;
    }
    return CORE_BAD_REQUEST;
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
    snprintf(n->id, sizeof n->id, "node-%" PRIu64, n->owner.session_id);
    for (unsigned k = 1; rdzv_id_taken(rz, n, n->id) && k <= rz->round.n + 1; k++)
        snprintf(n->id, sizeof n->id, "node-%" PRIu64 "-%u", n->owner.session_id, k);
}

/* Whether the join agrees with the open round; a core status with msg filled. */
static int rdzv_join_fits(const struct rdzv *rz, const struct rdzv_join_req *j, char *msg, size_t len)
{
    if (rz->round.n > 0 && (j->min_nodes != rz->min || j->max_nodes != rz->max)) {
        snprintf(msg, len, "the open round has min_nodes %u max_nodes %u, this join %u %u", rz->min, rz->max,
                 j->min_nodes, j->max_nodes);
        return CORE_CONFLICT;
    }
    if (*j->node_id && rdzv_id_taken(rz, NULL, j->node_id)) {
        snprintf(msg, len, "node_id '%s' has already joined this round", j->node_id);
        return CORE_CONFLICT;
    }
    return CORE_OK;
}

/* Put node n into queue q with its request id and deadline; a core status with msg filled. */
int rdzv_park(struct rdzv_node *n, enum rdzv_queue q, const struct rdzv_join_req *j, uint64_t id, char *msg,
              size_t len)
{
    struct rdzv *rz = n->rz;
    struct core *core = rdzv_core(rz);
    struct rdzv_set *set = rdzv_queue_set(rz, q);
    int st = core_waiter_take(core, &rz->ns->nwaiters, n->owner.share);
    if (st != CORE_OK) {
        snprintf(msg, len, "%s", core_waiter_why(core, &rz->ns->nwaiters, n->owner.share));
        return st;
    }
    if (rdzv_set_add(set, n) != 0 || n->owner.ops->park(n->owner.arg, id, n) != 0) {
        rdzv_set_del(set, n);
        core_waiter_put(core, &rz->ns->nwaiters, n->owner.share);
        snprintf(msg, len, "out of memory");
        return CORE_INTERNAL;
    }
    stats_inc(core->stats, STAT_RDZV_PARKED_JOINS);
    if (q == RDZV_Q_ROUND && rz->round.n == 1) {
        rz->min = j->min_nodes;
        rz->max = j->max_nodes;
        rz->last_call_ms = j->last_call_ms;
        stats_inc(core->stats, STAT_RDZV_ROUNDS);
    }
    n->joining = 1;
    n->queue = q;
    if (q == RDZV_Q_ROUND && n->generation && n->generation == rz->generation)
        rz->round_members++;
    n->seq = ++rz->seq;
    n->seen_ms = rdzv_wall_ms(rz);
    n->join_id = id;
    n->lws = j->local_world_size;
    n->want_members = j->want_members;
    if (q != RDZV_Q_RECOVER) { /* a survivor keeps its id */
        if (*j->node_id)
            snprintf(n->id, sizeof n->id, "%s", j->node_id);
        else
            rdzv_auto_id(rz, n);
    }
    if (q == RDZV_Q_ROUND)
        HASH_ADD_KEYPTR(hh_round, rz->round_ids, n->id, strlen(n->id), n);
    if (q == RDZV_Q_RECOVER)
        rdzv_recover_moved(rz, n, 1);
    n->armed_ms = j->timeout_ms;
    int armed = q == RDZV_Q_RECOVER && rz->running; /* its deadline starts at the break */
    if (!armed)
        rdzv_arm(rz, n->join_timer, core_timeout(core, j->timeout_ms));
    rdzv_event(rz, RDZV_EV_JOINED, rz->generation + 1, n->id, strlen(n->id),
               q == RDZV_Q_STANDBY ? "as a standby" : armed ? "the recovery round, armed" :
               q == RDZV_Q_RECOVER ? "the recovery round" : NULL);
    return CORE_OK;
}

/* The node record of owner for a join j, checked; NULL with the status in *st and msg filled. */
static struct rdzv_node *rdzv_joiner(struct ns *ns, const struct rdzv_owner *owner, const struct rdzv_join_req *j,
                                     int *st, char *msg, size_t len)
{
    struct rdzv_node *n = NULL;
    if ((*st = rdzv_join_check(j, msg, len)) != CORE_OK)
        return NULL;
    if (j->recover && j->standby)
        snprintf(msg, len, "a join is either a recovery or a standby, not both"), *st = CORE_BAD_REQUEST;
    else if (!(n = rdzv_node_of(ns, owner)))
        snprintf(msg, len, "out of memory"), *st = CORE_INTERNAL;
    if (*st != CORE_OK)
        return NULL;
    rdzv_recover_disarm(n, j);
    if (n->joining)
        snprintf(msg, len, "a join is already pending on this connection"), *st = CORE_BAD_REQUEST;
    else if (!j->recover)
        *st = rdzv_join_fits(n->rz, j, msg, len);
    return *st == CORE_OK ? n : NULL;
}

/* Park a standby: it waits for a round that has room (rdzv_take_standbys); a recovery may admit it. */
static int rdzv_standby_join(struct rdzv_node *n, const struct rdzv_join_req *j, uint64_t id, char *msg, size_t len)
{
    if (*j->node_id && rdzv_id_taken(n->rz, NULL, j->node_id)) {
        snprintf(msg, len, "node_id '%s' has already joined this round", j->node_id);
        return CORE_CONFLICT;
    }
    /* A flood of standbys must not decide who fills a slot: one job parks at most --max-standbys. */
    uint64_t max = rdzv_core(n->rz)->lim.max_standbys;
    if (max && n->rz->standbys.n >= max) {
        stats_inc(rdzv_core(n->rz)->stats, STAT_RDZV_LIMIT_STANDBYS);
        snprintf(msg, len, "namespace '%s' already parks %zu standbys (--max-standbys %llu)", n->rz->ns->name,
                 n->rz->standbys.n, (unsigned long long)max);
        return CORE_LIMIT;
    }
    int st = rdzv_park(n, RDZV_Q_STANDBY, j, id, msg, len);
    if (st == CORE_OK)
        rdzv_recover_check(n->rz);
    return st;
}

/* Join ns's next round for owner; the answer comes through reply.  Not OK (msg filled): nothing parked. */
int rdzv_join(struct ns *ns, const struct rdzv_owner *owner, const struct rdzv_join_req *j, uint64_t id,
              char *msg, size_t len)
{
    int st;
    struct rdzv_node *n = rdzv_joiner(ns, owner, j, &st, msg, len);
    if (!n)
        return st;
    if (j->recover)
        return rdzv_recover_join(n, j, id, msg, len);
    if (j->standby)
        return rdzv_standby_join(n, j, id, msg, len);
    struct rdzv *rz = n->rz;
    char old_id[RDZV_ID_MAX + 1];
    memcpy(old_id, n->id, sizeof old_id);
    if ((st = rdzv_park(n, RDZV_Q_ROUND, j, id, msg, len)) != CORE_OK)
        return st;
    /* A member joining again wants a new world: its generation ends, and as the node is already
     * in the round, a round closing on that break includes it. */
    if (rdzv_live(n))
        rdzv_lose(rz, n, old_id, "joined again");
    else if (rz->running)
        for (size_t i = 0; i < rz->members.n; i++)
            rdzv_push(rz->members.v[i], RDZV_NODE_WAITING, rz->generation, n->id);
    else if (n->generation == rz->generation)
        rdzv_lose(rz, n, old_id, "joined again as a newcomer");
    rdzv_recover_check(rz);
    rdzv_round_check(rz);
    return CORE_OK;
}

/* The running generation's last member left finished: it completed, which is not a failure. */
static void rdzv_complete_check(struct rdzv *rz)
{
    if (!rz->running || rz->members.n > 0)
        return;
    rz->running = 0;
    rz->completed = 1;
    rdzv_event(rz, RDZV_EV_COMPLETED, rz->generation, NULL, 0, NULL);
    core_log(rdzv_core(rz), CORE_LOG_INFO, "ns '%s': generation %" PRIu64 " completed: every node finished",
             rz->ns->name, rz->generation);
    /* A round that waited for this generation to end may close now. */
    rdzv_round_check(rz);
}

/* End node n's membership (a parked join is answered NOT_MEMBER first); n is freed. */
void rdzv_leave(struct rdzv_node *n, int finished)
{
    if (n->joining) {
        uint64_t id = n->join_id;
        rdzv_unpark(n);
        rdzv_reply(n, id, CORE_NOT_MEMBER, "left before the round closed", NULL);
        rdzv_round_check(n->rz);
    }
    if (n->generation)
        rdzv_event(n->rz, RDZV_EV_LEFT, n->generation, n->id, strlen(n->id), finished ? "finished" : NULL);
    struct rdzv *rz = n->rz;
    if (finished && rdzv_live(n)) {
        rdzv_node_free(n); /* out of the members, and its heartbeats are no longer due */
        rdzv_complete_check(rz);
    } else {
        rdzv_lose(rz, n, n->id, "left");
        rdzv_node_free(n);
    }
}

/* Keep n's membership of generation gen alive; OK, or NOT_MEMBER / STALE_GENERATION with msg filled. */
int rdzv_heartbeat(struct rdzv_node *n, uint64_t gen, char *msg, size_t len)
{
    if (!n || n->generation == 0) {
        snprintf(msg, len, "this connection is not a member");
        return CORE_NOT_MEMBER;
    }
    if (!rdzv_live(n) || gen != n->generation) {
        snprintf(msg, len, "generation %" PRIu64 " has ended (latest %" PRIu64 ")", gen, n->rz->generation);
        return CORE_STALE_GENERATION;
    }
    uint64_t hb = rdzv_core(n->rz)->lim.heartbeat_timeout;
    if (hb)
        rdzv_arm(n->rz, n->hb_timer, hb);
    n->seen_ms = rdzv_wall_ms(n->rz);
    return CORE_OK;
}

/* The owner is going away: n's parked join and membership end (breaking its generation); n is freed. */
void rdzv_node_gone(struct rdzv_node *n)
{
    /* The parked join was normally cancelled already, through the owner's cancel. */
    if (n->joining)
        rdzv_join_cancel(n);
    rdzv_lose(n->rz, n, n->id, "closed its connection");
    rdzv_node_free(n);
}
