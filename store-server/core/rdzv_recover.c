/*
 * Recovery rounds and standbys: how the survivors of a broken generation
 * agree on the next one without restarting.  Losses (rdzv_lose, the one
 * place a member of the latest generation is recorded as gone), standbys'
 * admission and members' reports of a failed peer live here too.
 *
 * When generation g breaks (a member's connection closed, it missed its
 * heartbeats, left, or was reported), the others are told MEMBER_LOST at
 * once, once per generation (rdzv_lose).  A survivor that can go on in
 * place joins g's recovery round (a join with recover set).  The round
 * opens with the first such join and closes when every live member of g
 * that was not lost has joined it, or at --recovery-timeout; a member lost
 * while it is open extends it, at most twice, and is listed in the answer.
 * Whoever has not joined by the deadline is excluded too, so the round
 * never closes with a member that has been lost and never waits for ever.
 *
 * Closing forms g + 1 from, in this order: the survivors, in their order in
 * g (what communicator shrinking needs); then newcomers (plain joins, in
 * arrival order); then standbys, longest waiting first; up to g's
 * max_nodes.  Every node of it is answered in the same loop turn with the
 * same generation, member order and excluded list (each excluded member with
 * its rank in g and the cause); each survivor's rank in g is its
 * old_node_rank.  g + 1 is taken from the counter that is logged before
 * anyone hears the number, so it is never handed out twice.  g is revoked by
 * that: a member of g that was excluded, or asks after g was replaced, is
 * answered EXCLUDED and may only come back as a newcomer.  With fewer than
 * g's min_nodes at the deadline, the recovery fails: its survivors are
 * answered TIMEOUT and the job re-forms the old way (plain joins).
 *
 * While a recovery round is open, the open round (plain joins) does not
 * close on its own: its joiners are the recovery's newcomers.
 *
 * Armed recovery: a live member may send its recover join while g still
 * runs (armed).  It parks in the recovery round's queue with no deadline;
 * the break opens the round at once (rdzv_recover_open_armed), each armed
 * join's deadline then starts, and when every survivor armed ahead the
 * round closes at the end of the loop turn of the break.  That saves each
 * survivor the round trip that follows MEMBER_LOST: at thousands of
 * members the daemon's reads of those recover calls, not forming the
 * generation, were most of the time from the break to the agreement.  A
 * member lost while armed (missed heartbeats, a report) is answered
 * EXCLUDED at the break.  Until that turn ends (rec_deferred) the round
 * does not close, so members lost in the same batch of events (that died
 * together) are excluded by one recovery; and the armed members' MEMBER_LOST
 * event waits too, so that each one's event and answer leave in one write.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "rdzv_int.h"
#include "status.h"
#include "stats.h"
#include "waiters.h"

static void rdzv_recover_close(struct rdzv *rz, int at_deadline);

/* Count the survivors of the latest generation that have not joined its recovery round (once, when
 * it opens; afterwards rdzv_recover_moved keeps the count, so a join costs O(1), not a scan). */
static size_t rdzv_recover_missing(const struct rdzv *rz)
{
    size_t missing = 0;
    for (size_t i = 0; i < rz->members.n; i++) {
        const struct rdzv_node *m = rz->members.v[i];
        missing += !m->lost && m->queue != RDZV_Q_RECOVER;
    }
    return missing;
}

/* Keep the open round's count of missing survivors: member n of the latest generation joined the round
 * (joined > 0), left it still a survivor (joined < 0: its join timed out or was cancelled), or was lost
 * while not in it (joined 0). */
void rdzv_recover_moved(struct rdzv *rz, const struct rdzv_node *n, int joined)
{
    if (!rz->rec_open || rz->rec_closing || n->generation != rz->generation || !n->generation)
        return;
    if (joined >= 0)
        rz->rec_missing -= rz->rec_missing > 0;
    else if (!n->lost)
        rz->rec_missing++;
}

/* Why member n of generation gen was excluded, from the gone list. */
static const char *rdzv_recover_cause(const struct rdzv *rz, const struct rdzv_node *n)
{
    for (size_t i = 0; i < rz->n_gone; i++)
        if (strcmp(rz->gone[i].id, n->id) == 0)
            return rz->gone[i].cause;
    return "lost";
}

/* Tell member m of the latest generation that it broke (lost: the id of the loss that broke it), unless m is
 * lost or was told already: MEMBER_LOST is told once per generation.  A member told at the break may join
 * the round within the break's turn (a report and a recover join sent together), and the end of the turn
 * must not tell it again. */
static void rdzv_recover_tell(struct rdzv *rz, struct rdzv_node *m, const char *lost)
{
    if (m->lost || m->told_gen == rz->generation)
        return;
    m->told_gen = rz->generation;
    rdzv_push(m, RDZV_MEMBER_LOST, rz->generation, lost);
}

/* Tell the members parked in the round (armed ahead, or joined in the turn of the break) the break that
 * rdzv_lose held back from them, before anything is answered; the turn is over. */
static void rdzv_recover_tell_armed(struct rdzv *rz)
{
    if (!rz->rec_deferred)
        return;
    rz->rec_deferred = 0;
    if (rz->gone_gen != rz->generation || rz->n_gone == 0 || !rz->gone[0].broke)
        return;
    const struct core_hooks *h = &rdzv_core(rz)->hooks;
    uint64_t t = h->mono_us(h->ctx);
    for (size_t i = 0; i < rz->rec.n; i++)
        rdzv_recover_tell(rz, rz->rec.v[i], rz->gone[0].id);
    rz->told_us = h->mono_us(h->ctx) - t;
}

/* The round's deadline passed. */
static void rdzv_recover_deadline_cb(void *arg)
{
    struct rdzv *rz = arg;
    if (rz->rec_open)
        rdzv_recover_close(rz, 1);
}

/* Arm the round's deadline --recovery-timeout from now; 0, or -1 when no timer could be made. */
static int rdzv_recover_arm(struct rdzv *rz)
{
    const struct core_hooks *h = &rdzv_core(rz)->hooks;
    if (!rz->rec_timer && !(rz->rec_timer = h->timer_new(h->ctx, rdzv_recover_deadline_cb, rz)))
        return -1;
    rdzv_arm(rz, rz->rec_timer, rdzv_core(rz)->lim.recovery_timeout);
    rz->rec_deadline_ms = rdzv_wall_ms(rz) + rdzv_core(rz)->lim.recovery_timeout;
    return 0;
}

/* Answer a parked survivor with an error and take it out of the round. */
static void rdzv_recover_refuse(struct rdzv_node *n, int status, const char *msg)
{
    uint64_t id = n->join_id;
    rdzv_unpark(n);
    rdzv_reply(n, id, status, msg, NULL);
}

/* Compare survivors by their rank in the generation they survived. */
static int rdzv_cmp_old_rank(const void *a, const void *b)
{
    const struct rdzv_node *x = *(struct rdzv_node *const *)a, *y = *(struct rdzv_node *const *)b;
    return x->node_rank < y->node_rank ? -1 : x->node_rank > y->node_rank;
}

/* Compare parked nodes by arrival. */
static int rdzv_cmp_seq(const void *a, const void *b)
{
    const struct rdzv_node *x = *(struct rdzv_node *const *)a, *y = *(struct rdzv_node *const *)b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The next generation's nodes in order: survivors by old rank, newcomers by arrival, then standbys, at
 * most max; 0, or -1 when memory ran out. */
static int rdzv_recover_pick(struct rdzv *rz, struct rdzv_set *out)
{
    size_t max = rz->gen_max ? rz->gen_max : SIZE_MAX;
    for (size_t i = 0; i < rz->rec.n; i++)
        if (rdzv_set_add(out, rz->rec.v[i]) != 0)
            return -1;
    if (out->n > 1) /* qsort's array may not be NULL, even empty */
        qsort(out->v, out->n, sizeof *out->v, rdzv_cmp_old_rank);
    struct rdzv_set fresh = {0};
    for (size_t i = 0; i < rz->round.n; i++)
        if (rz->round.v[i]->owner.ops->live(rz->round.v[i]->owner.arg) && rdzv_set_add(&fresh, rz->round.v[i]) != 0) {
            free(fresh.v);
            return -1;
        }
    if (fresh.n > 1)
        qsort(fresh.v, fresh.n, sizeof *fresh.v, rdzv_cmp_seq);
    for (size_t i = 0; i < fresh.n && out->n < max; i++)
        if (rdzv_set_add(out, fresh.v[i]) != 0) {
            free(fresh.v);
            return -1;
        }
    free(fresh.v);
    if (out->n < max)
        rdzv_take_standbys(rz, out, max - out->n);
    return 0;
}

/* Give up the recovery (too few nodes at the deadline, or no memory): its survivors hear status. */
static void rdzv_recover_fail(struct rdzv *rz, int status, const char *msg)
{
    rdzv_recover_tell_armed(rz);
    stats_inc(rdzv_core(rz)->stats, STAT_RDZV_RECOVERY_FAILED);
    core_log(rdzv_core(rz), CORE_LOG_WARN, "ns '%s': recovery of generation %" PRIu64 " failed: %s", rz->ns->name,
             rz->generation, msg);
    rdzv_event(rz, RDZV_EV_RECOVERY_FAILED, rz->generation, NULL, 0, msg);
    while (rz->rec.n > 0)
        rdzv_recover_refuse(rz->rec.v[rz->rec.n - 1], status, msg);
    rz->rec_open = rz->rec_closing = 0;
    rdzv_core(rz)->hooks.timer_disarm(rz->rec_timer);
    rdzv_round_check(rz);
}

/* Every member of the generation was lost and nobody waits in its round (the whole job died, the
 * usual end of a job whose members armed): there is nothing to recover, so the round ends now, not as a
 * failure at its deadline; a job that died without arming never opened one.  Later joins form a new
 * generation the plain way. */
static void rdzv_recover_vanished(struct rdzv *rz)
{
    core_log(rdzv_core(rz), CORE_LOG_INFO, "ns '%s': recovery round of generation %" PRIu64 " ended: every "
             "member was lost", rz->ns->name, rz->generation);
    rz->rec_open = 0;
    rz->rec_extended = 0;
    rdzv_core(rz)->hooks.timer_disarm(rz->rec_timer);
    rdzv_round_check(rz);
}

/* Keep the daemon's own timings of the recovery that formed at t0 (monotonic us) and was answered by t1:
 * from the break to the formation (detection to agreement: mostly the survivors' way back), and the
 * time musterd took to form it and answer every node (its share). */
static void rdzv_recover_timed(struct rdzv *rz, uint64_t t0, uint64_t t1)
{
    struct stats *st = rdzv_core(rz)->stats;
    const uint64_t *f = rz->form_us;
    st->c[STAT_RDZV_AGREE_US] = t0 >= rz->broke_us ? t0 - rz->broke_us : 0;
    st->c[STAT_RDZV_ANSWER_US] = t1 - t0;
    core_log(rdzv_core(rz), CORE_LOG_INFO,
             "ns '%s': generation %" PRIu64 " agreed %.1f ms after the break (telling it to the armed: %.2f ms); "
             "forming and answering its %zu nodes took %.1f ms (ids %.2f, queues %.2f, members %.2f, answer "
             "%.2f, replies %.2f)", rz->ns->name, rz->generation, st->c[STAT_RDZV_AGREE_US] / 1000.0,
             rz->told_us / 1000.0, rz->members.n, (t1 - t0) / 1000.0, f[RDZV_FORM_IDS] / 1000.0,
             f[RDZV_FORM_QUEUES] / 1000.0, f[RDZV_FORM_MEMBERS] / 1000.0, f[RDZV_FORM_ANSWER] / 1000.0,
             f[RDZV_FORM_REPLIES] / 1000.0);
}

/* Close the recovery round (at_deadline: whoever has not joined is excluded) and form the next
 * generation, or wait for the deadline when it would be below min_nodes. */
static void rdzv_recover_close(struct rdzv *rz, int at_deadline)
{
    uint64_t prev = rz->generation;
    rdzv_recover_tell_armed(rz);
    rz->rec_closing = 1; /* the losses below must not re-enter; rec_open keeps the open round waiting */
    /* Whoever is not in the round now is excluded, and listed: at the deadline those that did not join;
     * and at any time those whose connection is closing but not yet released (a later turn would find
     * them no longer members and the list would leave them out). */
    for (size_t i = rz->members.n; i-- > 0;) {
        struct rdzv_node *m = rz->members.v[i];
        if (m->lost || m->queue == RDZV_Q_RECOVER)
            continue;
        if (!m->owner.ops->live(m->owner.arg))
            rdzv_lose(rz, m, m->id, "closed its connection");
        else if (at_deadline)
            rdzv_lose(rz, m, m->id, "did not join the recovery round within --recovery-timeout");
    }
    struct rdzv_set next = {0};
    if (rdzv_recover_pick(rz, &next) != 0) {
        free(next.v);
        rdzv_recover_fail(rz, CORE_INTERNAL, "out of memory");
        return;
    }
    rz->rec_closing = 0;
    if (next.n == 0 && !at_deadline) {
        free(next.v);
        rdzv_recover_vanished(rz);
        return;
    }
    if (next.n < rz->gen_min || next.n == 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "recovery round of generation %" PRIu64 " has %zu of min_nodes %" PRIu32 " nodes",
                 prev, next.n, rz->gen_min);
        for (size_t i = 0; i < next.n; i++) /* standbys taken out of their queue go back to it */
            if (next.v[i]->queue == RDZV_Q_NONE && rdzv_set_add(&rz->standbys, next.v[i]) == 0)
                next.v[i]->queue = RDZV_Q_STANDBY;
        free(next.v);
        if (at_deadline)
            rdzv_recover_fail(rz, CORE_TIMEOUT, msg);
        /* else every survivor is in: wait for newcomers or standbys until the deadline */
        rz->rec_short = !at_deadline;
        return;
    }
    rdzv_core(rz)->hooks.timer_disarm(rz->rec_timer);
    rz->rec_extended = 0;
    stats_inc(rdzv_core(rz)->stats, STAT_RDZV_RECOVERIES);
    stats_add(rdzv_core(rz)->stats, STAT_RDZV_EXCLUDED, rz->gone_gen == prev ? rz->n_gone : 0);
    for (size_t i = 0; rz->gone_gen == prev && i < rz->n_gone; i++)
        rdzv_event(rz, RDZV_EV_EXCLUDED, prev, rz->gone[i].id, strlen(rz->gone[i].id), rz->gone[i].cause);
    rz->rec_open = 0;
    const struct core_hooks *h = &rdzv_core(rz)->hooks;
    uint64_t t0 = h->mono_us(h->ctx);
    rdzv_form(rz, &next, 1, prev);
    rdzv_recover_timed(rz, t0, h->mono_us(h->ctx));
    rdzv_round_check(rz);
}

/* The end of the loop turn in which a generation broke with armed members: close the round if it can. */
static void rdzv_recover_check_cb(void *arg)
{
    struct rdzv *rz = arg;
    rdzv_recover_tell_armed(rz);
    rdzv_recover_check(rz);
}

/* Open the latest generation's recovery round (opener: the node whose join opens it); 0, or -1 when it
 * failed for want of a timer (its parked survivors were answered). */
static int rdzv_recover_open(struct rdzv *rz, const struct rdzv_node *opener)
{
    rz->rec_open = 1;
    rz->rec_extended = 0;
    rz->rec_short = 0;
    rz->rec_missing = rdzv_recover_missing(rz);
    if (rdzv_recover_arm(rz) != 0) {
        rdzv_recover_fail(rz, CORE_INTERNAL, "cannot make the recovery round's timer");
        return -1;
    }
    core_log(rdzv_core(rz), CORE_LOG_INFO, "ns '%s': recovery round of generation %" PRIu64 " opened by '%s'",
             rz->ns->name, rz->generation, opener->id);
    rdzv_event(rz, RDZV_EV_RECOVERY_OPENED, rz->generation, opener->id, strlen(opener->id), NULL);
    return 0;
}

/* Answer m, parked in the round and lost meanwhile (why), EXCLUDED. */
static void rdzv_recover_refuse_one(struct rdzv *rz, struct rdzv_node *m, const char *why)
{
    char msg[RDZV_CAUSE_MAX + 64];
    snprintf(msg, sizeof msg, "excluded from generation %" PRIu64 ": %s", rz->generation, why);
    rdzv_recover_refuse(m, CORE_EXCLUDED, msg);
}

/* Answer every parked survivor that was lost meanwhile EXCLUDED, naming the cause (when the round opens). */
static void rdzv_recover_refuse_lost(struct rdzv *rz)
{
    for (size_t i = rz->rec.n; i-- > 0;)
        if (rz->rec.v[i]->lost)
            rdzv_recover_refuse_one(rz, rz->rec.v[i], rdzv_recover_cause(rz, rz->rec.v[i]));
}

/* The latest generation just broke (it ran until now): the members that armed their recovery are in its
 * round already, so open it, start their deadlines, and close it if no survivor is missing. */
void rdzv_recover_open_armed(struct rdzv *rz)
{
    if (rz->rec_open || rz->rec.n == 0)
        return;
    struct core *core = rdzv_core(rz);
    for (size_t i = 0; i < rz->rec.n; i++)
        rdzv_arm(rz, rz->rec.v[i]->join_timer, core_timeout(core, rz->rec.v[i]->armed_ms));
    if (rdzv_recover_open(rz, rz->rec.v[0]) != 0)
        return;
    rdzv_recover_refuse_lost(rz);
    /* Close at the end of this loop turn, not now: the other connections that closed in the same batch
     * of events (members that died together) are then lost first, and one recovery excludes them all. */
    const struct core_hooks *h = &rdzv_core(rz)->hooks;
    if (!rz->rec_defer && !(rz->rec_defer = h->timer_new(h->ctx, rdzv_recover_check_cb, rz))) {
        rdzv_recover_check(rz);
        return;
    }
    rz->rec_deferred = 1;
    h->defer(rz->rec_defer);
}

/* Join the latest generation's recovery round for n; a core status with msg filled when not parked.  An
 * armed join (the generation still runs) waits in the round's queue for the break. */
int rdzv_recover_join(struct rdzv_node *n, const struct rdzv_join_req *j, uint64_t id, char *msg, size_t len)
{
    struct rdzv *rz = n->rz;
    int st = CORE_OK;
    if (!n->generation)
        snprintf(msg, len, "this connection was never a member: join as a newcomer"), st = CORE_NOT_MEMBER;
    else if (n->generation != rz->generation)
        snprintf(msg, len, "generation %" PRIu64 " was replaced by %" PRIu64 ": join again as a newcomer",
                 n->generation, rz->generation), st = CORE_EXCLUDED;
    else if (n->lost)
        snprintf(msg, len, "excluded from generation %" PRIu64 ": %s", n->generation, rdzv_recover_cause(rz, n)),
            st = CORE_EXCLUDED;
    else if ((rz->running && !j->armed) || rz->completed)
        snprintf(msg, len, "generation %" PRIu64 " is %s: nothing to recover (report a failed member first, "
                 "or arm the recovery)", rz->generation, rz->running ? "running" : "complete"), st = CORE_CONFLICT;
    if (st != CORE_OK) {
        stats_inc(rdzv_core(rz)->stats, STAT_RDZV_BAD_RECOVER);
        return st;
    }
    if ((st = rdzv_park(n, RDZV_Q_RECOVER, j, id, msg, len)) != CORE_OK)
        return st;
    if (rz->running) { /* armed: the break opens the round */
        stats_inc(rdzv_core(rz)->stats, STAT_RDZV_ARMED);
        return CORE_OK;
    }
    if (!rz->rec_open && rdzv_recover_open(rz, n) != 0)
        return CORE_OK; /* answered */
    rdzv_recover_check(rz);
    return CORE_OK;
}

/* A member that armed its recovery and now joins the plain round (j) wants a new world instead: its armed
 * join is answered CONFLICT and the join goes on. */
void rdzv_recover_disarm(struct rdzv_node *n, const struct rdzv_join_req *j)
{
    if (!n->joining || n->queue != RDZV_Q_RECOVER || !n->rz->running || j->recover)
        return;
    uint64_t id = n->join_id;
    rdzv_unpark(n);
    rdzv_reply(n, id, CORE_CONFLICT, "the armed recovery was replaced by a join of the next round", NULL);
}

/* Member lost of the latest generation was lost (why) while its recovery round may be open: if it was
 * parked in the round it is answered EXCLUDED, the deadline is extended (at most twice), and the round may
 * close without it.  O(1) but for the queue's removal: a job dying whole loses every member one by one,
 * and a scan of the round (or of the gone list for the cause) per loss made that O(n^2). */
void rdzv_recover_lost(struct rdzv *rz, struct rdzv_node *lost, const char *why)
{
    if (!rz->rec_open || rz->rec_closing)
        return;
    if (lost->joining && lost->queue == RDZV_Q_RECOVER)
        rdzv_recover_refuse_one(rz, lost, why);
    if (rz->rec_extended < 2) {
        rz->rec_extended++;
        rdzv_recover_arm(rz);
    }
    /* A round short of min_nodes with every survivor in only gets shorter by a loss: it goes on waiting for
     * newcomers, standbys or its deadline (their joins check it), unless nobody is left in it.  Picking
     * and sorting it again at each loss cost O(n log n) per member of a job dying whole. */
    if (rz->rec_short && (rz->rec.n > 0 || rz->round.n > 0 || rz->standbys.n > 0))
        return;
    rdzv_recover_check(rz);
}

/* A node arrived or left that decides whether the recovery round can close: close it when no survivor
 * is missing. */
void rdzv_recover_check(struct rdzv *rz)
{
    if (rz->rec_open && !rz->rec_closing && !rz->rec_deferred && rz->rec_missing == 0)
        rdzv_recover_close(rz, 0);
}

/* Free the recovery round's timer (at exit). */
void rdzv_recover_destroy(struct rdzv *rz)
{
    if (rz->rec_timer)
        rdzv_core(rz)->hooks.timer_free(rz->rec_timer);
    if (rz->rec_defer)
        rdzv_core(rz)->hooks.timer_free(rz->rec_defer);
    rz->rec_timer = rz->rec_defer = NULL;
}

/* ------------------------------------------------- losses, standbys, reports */

/* Record that a member of the latest generation was lost (id, its rank, why, whether its loss broke the
 * generation), for recovery answers and reports. */
static void rdzv_note_gone(struct rdzv *rz, const char *id, uint32_t rank, const char *why, int broke)
{
    if (rz->gone_gen != rz->generation) {
        rz->n_gone = 0;
        rz->gone_gen = rz->generation;
    }
    if (rz->n_gone == rz->cap_gone) {
        size_t cap = rz->cap_gone ? rz->cap_gone * 2 : 4;
        struct rdzv_gone *v = realloc(rz->gone, cap * sizeof *v);
        if (!v)
            return; /* the answer then lists one excluded member fewer; membership is still right */
        rz->gone = v;
        rz->cap_gone = cap;
    }
    struct rdzv_gone *g = &rz->gone[rz->n_gone++];
    snprintf(g->id, sizeof g->id, "%s", id);
    snprintf(g->cause, sizeof g->cause, "%s", why);
    g->old_rank = rank;
    g->broke = broke;
}

/* Member lost of the latest generation (known as id) is gone for why: break the generation if it runs,
 * record the loss, tell the other members if it broke the generation, and let a recovery round go on
 * without it.
 *
 * MEMBER_LOST tells a break: each member hears it once per generation, naming the loss that broke it.
 * A loss after the break (a second failure) is not pushed: the recovery's answer lists every excluded
 * member with its cause, and so do the job's timeline and status.  Pushing each later loss to every
 * survivor made a job that died whole (its n connections closing one after another while a recovery
 * round was open) cost n^2 / 2 events on the daemon's one thread: seconds at 4,096 members, during
 * which every other job waited. */
void rdzv_lose(struct rdzv *rz, struct rdzv_node *lost, const char *id, const char *why)
{
    if (lost->generation == 0 || lost->generation != rz->generation || lost->lost || rz->completed)
        return;
    if (lost->queue != RDZV_Q_RECOVER)
        rdzv_recover_moved(rz, lost, 0);
    lost->lost = 1;
    if (rz->live_members)
        rz->live_members--;
    int first = rz->running;
    lost->broke = first;
    if (first)
        rdzv_break(rz, id, why);
    else
        rdzv_event(rz, RDZV_EV_LOST, rz->generation, id, strlen(id), why);
    rdzv_note_gone(rz, id, lost->node_rank, why, first);
    /* What the members and their workers wait for may never come now: their waits end, naming the loss
     * (the front end words it with rdzv_broken_by). */
    if (first)
        waiters_fail_generation(rz->ns, rz->generation, CORE_STALE_GENERATION);
    if (first)
        rdzv_recover_open_armed(rz);
    /* Those in the recovery round (armed) hear at the end of the break's turn, with their answer. */
    for (size_t i = 0; first && i < rz->members.n; i++) {
        struct rdzv_node *m = rz->members.v[i];
        if (m != lost && !(rz->rec_deferred && m->joining && m->queue == RDZV_Q_RECOVER))
            rdzv_recover_tell(rz, m, id);
    }
    if (!first)
        rdzv_recover_lost(rz, lost, why);
    /* A round that waited for this generation to end may close now. */
    rdzv_round_check(rz);
}

/* Take up to want standbys, longest waiting first, out of their queue into to; how many. */
size_t rdzv_take_standbys(struct rdzv *rz, struct rdzv_set *to, size_t want)
{
    size_t k = 0;
    while (k < want && rz->standbys.n > 0) {
        struct rdzv_node *n = rz->standbys.v[0];
        if (rdzv_set_add(to, n) != 0)
            break;
        /* Out of the queue but still parked: rdzv_form releases and answers it with the others. */
        rdzv_set_del(&rz->standbys, n);
        n->queue = RDZV_Q_NONE;
        k++;
    }
    stats_add(rdzv_core(rz)->stats, STAT_RDZV_STANDBYS_ADMITTED, k);
    return k;
}

/* Whether peer's own liveness agrees with a report of it: it reports itself, or its heartbeats, when
 * the job has them, have stopped for half the timeout (it missed a beat; clients beat every third). */
static int rdzv_report_agrees(const struct rdzv_node *n, const struct rdzv_node *peer)
{
    uint64_t hb = rdzv_core(peer->rz)->lim.heartbeat_timeout, now = rdzv_wall_ms(peer->rz);
    return n == peer || (hb && peer->seen_ms && now > peer->seen_ms && now - peer->seen_ms > hb / 2);
}

/* Member n says member node_id of its generation failed (cause: free text).  A report is a vote: the
 * peer is lost, as if its connection closed, when a second member reports it too or when its own
 * liveness agrees (rdzv_report_agrees); otherwise the vote is held (counted) and the peer stays.  One
 * member can then never exclude the others alone.  OK (*gen: the generation), or NOT_MEMBER /
 * NOT_FOUND with msg filled. */
int rdzv_report(struct rdzv_node *n, const char *node_id, const char *cause, uint64_t *gen, char *msg, size_t len)
{
    struct rdzv *rz = n->rz;
    struct stats *st = rdzv_core(rz)->stats;
    if (!n->generation || n->generation != rz->generation || n->lost || rz->completed) {
        stats_inc(st, STAT_RDZV_BAD_REPORTS);
        snprintf(msg, len, "this connection is not a member of the latest generation");
        return CORE_NOT_MEMBER;
    }
    struct rdzv_node *peer = NULL;
    for (size_t i = 0; i < rz->members.n && !peer; i++)
        if (strcmp(rz->members.v[i]->id, node_id) == 0)
            peer = rz->members.v[i];
    *gen = rz->generation;
    if (!peer) {
        stats_inc(st, STAT_RDZV_BAD_REPORTS);
        snprintf(msg, len, "node '%s' is not a member of generation %" PRIu64, node_id, rz->generation);
        return CORE_NOT_FOUND;
    }
    if (peer->lost) /* another survivor reported it first, or the server saw it go: nothing more to do */
        return CORE_OK;
    stats_inc(st, STAT_RDZV_REPORTS);
    int second = n != peer && peer->suspect_by[0] && strcmp(peer->suspect_by, n->id) != 0;
    if (!second && !rdzv_report_agrees(n, peer)) {
        snprintf(peer->suspect_by, sizeof peer->suspect_by, "%s", n->id);
        stats_inc(st, STAT_RDZV_REPORTS_HELD);
        return CORE_OK;
    }
    char why[RDZV_CAUSE_MAX + 1];
    snprintf(why, sizeof why, "reported failed by '%.40s'%s%.40s%s%s%.100s", n->id, second ? " and '" : "",
             second ? peer->suspect_by : "", second ? "'" : "", cause && *cause ? ": " : "", cause ? cause : "");
    rdzv_lose(rz, peer, peer->id, why);
    return CORE_OK;
}
