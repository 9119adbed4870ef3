/*
 * Read-only views of a namespace's rendezvous state, for metrics, `muster
 * status` and the status page: the summary, the members of the latest
 * generation, the open round's joiners, the standbys, the members lost
 * from a generation (a recovery's excluded list) and the timeline ring;
 * and the words of a timed-out join (who joined, who has not come back).
 *
 * Nothing here changes the state; a view's strings point into it and are
 * valid until the state next changes (the caller copies what it keeps).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "rdzv.h"
#include "rdzv_int.h"

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
    out->formed = rz->formed;
    out->recoveries = rz->recoveries;
    out->standbys = rz->standbys.n;
    out->recovering = rz->rec_open;
    out->recovery_joined = rz->running ? 0 : rz->rec.n;
    out->armed = rz->running ? rz->rec.n : 0;
    out->recovery_deadline_ms = rz->rec_open ? rz->rec_deadline_ms : 0;
    return 0;
}

/* Whether ns's rendezvous is in use: a node (member, joiner, standby), a running generation or an open
 * recovery round.  A generation that broke or completed with no node left is not. */
int rdzv_in_use(const struct ns *ns)
{
    const struct rdzv *rz = ns->rdzv;
    return rz && (rz->nodes || rz->running || rz->rec_open || rz->round.n || rz->standbys.n || rz->rec.n);
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

/* Fill *v with node n's view at wall-clock time now. */
static void rdzv_view_of(const struct rdzv_node *n, uint64_t now, struct rdzv_node_view *v)
{
    const struct rdzv_owner_ops *ops = n->owner.ops;
    *v = (struct rdzv_node_view){
        .node_id = n->id,
        .peer = ops && ops->peer ? ops->peer(n->owner.arg) : NULL,
        .node_rank = n->node_rank,
        .rank_start = n->rank_start,
        .local_world_size = n->lws,
        .old_node_rank = n->old_rank,
        .seen_ms = n->seen_ms,
        .seen_age_ms = n->seen_ms && now > n->seen_ms ? now - n->seen_ms : 0,
        .lost = n->lost,
        .broke = n->lost && n->broke,
        .recovering = n->joining && n->queue == RDZV_Q_RECOVER && !n->rz->running, /* armed ones wait */
        .joining = n->joining && n->queue == RDZV_Q_ROUND,
        .standby = n->joining && n->queue == RDZV_Q_STANDBY,
    };
}

/* Call fn with the view of each node of set s of ns, in the set's order. */
static void rdzv_each_in(const struct rdzv *rz, const struct rdzv_set *s, rdzv_view_fn fn, void *arg)
{
    uint64_t now = rdzv_wall_ms(rz);
    for (size_t i = 0; i < s->n; i++) {
        struct rdzv_node_view v;
        rdzv_view_of(s->v[i], now, &v);
        fn(arg, &v);
    }
}

/* Call fn with a view of each member of ns's latest generation in rank order. */
void rdzv_each_member_view(const struct ns *ns, rdzv_view_fn fn, void *arg)
{
    const struct rdzv *rz = ns->rdzv;
    if (rz)
        rdzv_each_in(rz, &rz->members, fn, arg);
}

/* Call fn with a view of each node parked in ns's open round, in arrival order. */
void rdzv_each_joiner(const struct ns *ns, rdzv_view_fn fn, void *arg)
{
    const struct rdzv *rz = ns->rdzv;
    if (rz)
        rdzv_each_in(rz, &rz->round, fn, arg);
}

/* Call fn with a view of each parked standby of ns, longest waiting first. */
void rdzv_each_standby(const struct ns *ns, rdzv_view_fn fn, void *arg)
{
    const struct rdzv *rz = ns->rdzv;
    if (rz)
        rdzv_each_in(rz, &rz->standbys, fn, arg);
}

/* Call fn for each member lost from generation *gen (set to it; 0 when none) with its rank and cause:
 * the excluded list of that generation's recovery. */
void rdzv_each_gone(const struct ns *ns, uint64_t *gen, void (*fn)(void *arg, const struct rdzv_excluded *e),
                    void *arg)
{
    const struct rdzv *rz = ns->rdzv;
    *gen = rz && rz->n_gone ? rz->gone_gen : 0;
    for (size_t i = 0; *gen && i < rz->n_gone; i++) {
        const struct rdzv_gone *g = &rz->gone[i];
        fn(arg, &(struct rdzv_excluded){g->id, g->old_rank, g->cause, g->broke});
    }
}

/* Call fn for each kept timeline event of ns, oldest first. */
void rdzv_each_event(const struct ns *ns, void (*fn)(void *arg, const struct rdzv_event *ev), void *arg)
{
    const struct rdzv *rz = ns->rdzv;
    if (!rz)
        return;
    size_t first = (rz->ring_next + rz->ring_cap - rz->ring_n) % (rz->ring_cap ? rz->ring_cap : 1);
    for (size_t i = 0; i < rz->ring_n; i++)
        fn(arg, &rz->ring[(first + i) % rz->ring_cap]);
}

/* Append to buf at *off the ids of the nodes in s that are not self and pass keep, at most 8, each with
 * how long ago it was last seen when ago is set; how many passed. */
static size_t rdzv_list(const struct rdzv_set *s, const struct rdzv_node *self, int (*keep)(const struct rdzv_node *),
                        int ago, uint64_t now, char *buf, size_t len, size_t *off)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct rdzv_node *m = s->v[i];
        if (m == self || (keep && !keep(m)))
            continue;
        if (k++ >= 8)
            continue;
        *off += (size_t)snprintf(buf + *off, *off < len ? len - *off : 0, "%s%.40s", k > 1 ? ", " : "", m->id);
        if (ago && m->seen_ms && now >= m->seen_ms)
            *off += (size_t)snprintf(buf + *off, *off < len ? len - *off : 0, " (last seen %.1f s ago)",
                                     (double)(now - m->seen_ms) / 1000.0);
    }
    if (k > 8)
        *off += (size_t)snprintf(buf + *off, *off < len ? len - *off : 0, " and %zu more", k - 8);
    return k;
}

/* Whether member m of the latest generation has not come back to the open round. */
static int rdzv_not_back(const struct rdzv_node *m)
{
    return m->queue != RDZV_Q_ROUND && m->queue != RDZV_Q_RECOVER;
}

/* Words for n's timed-out join: who joined the round, and which members of the generation before have
 * not come back, with when each was last seen. */
void rdzv_who(const struct rdzv_node *n, char *buf, size_t len)
{
    const struct rdzv *rz = n->rz;
    uint64_t now = rdzv_wall_ms(rz);
    size_t off = 0;
    if (n->queue == RDZV_Q_STANDBY) {
        snprintf(buf, len, "no round had room for this standby in time (%zu standbys waiting)", rz->standbys.n);
        return;
    }
    int rec = n->queue == RDZV_Q_RECOVER;
    off += (size_t)snprintf(buf, len, "round did not close in time: %zu of min %u nodes joined",
                            rec ? rz->rec.n : rz->round.n, rec ? rz->gen_min : rz->min);
    if (rz->round.n > 1 || (n->queue != RDZV_Q_ROUND && rz->round.n > 0)) {
        off += (size_t)snprintf(buf + off, off < len ? len - off : 0, " (others: ");
        rdzv_list(&rz->round, n, NULL, 0, now, buf, len, &off);
        off += (size_t)snprintf(buf + off, off < len ? len - off : 0, ")");
    }
    if (rz->running) {
        snprintf(buf + off, off < len ? len - off : 0, "; generation %" PRIu64 " is running: the round waits for it "
                 "to end", rz->generation);
    } else if (rz->generation && rz->members.n > 0) {
        size_t mark = off;
        off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "; not back from generation %" PRIu64 ": ",
                                rz->generation);
        if (rdzv_list(&rz->members, n, rdzv_not_back, 1, now, buf, len, &off) == 0 && mark < len)
            buf[mark] = '\0', off = mark;
    }
}
