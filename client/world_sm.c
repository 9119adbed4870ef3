/* The worker's side of a world change: a pure state machine (world_sm.h). */
#include "world_sm.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Free the last change's lists and parsed answer. */
static void wsm_drop(struct wsm *s)
{
    free(s->asg.members);
    free(s->asg.excluded);
    answer_free(&s->parsed);
    memset(&s->asg, 0, sizeof s->asg);
    memset(&s->change, 0, sizeof s->change);
}

/* Start a machine. */
void wsm_init(struct wsm *s, const char *node_id, int local_rank, uint64_t start, int rank, int world)
{
    memset(s, 0, sizeof *s);
    snprintf(s->node_id, sizeof s->node_id, "%s", node_id);
    s->local_rank = local_rank;
    s->start = s->latest = start;
    s->start_rank = rank;
    s->start_world = world;
}

/* Free what the last change holds. */
void wsm_fini(struct wsm *s)
{
    wsm_drop(s);
}

/* End the call with status and a formatted reason ("" for MUSTER_OK). */
static void wsm_done(struct wsm *s, int status, const char *fmt, ...)
{
    va_list ap;
    s->act = WSM_DONE;
    s->status = status;
    s->why[0] = '\0';
    if (fmt) {
        va_start(ap, fmt);
        vsnprintf(s->why, sizeof s->why, fmt, ap);
        va_end(ap);
    }
}

/* Decide the next action of a call in progress at now. */
static void wsm_step(struct wsm *s, uint64_t now)
{
    if (s->latest > s->answered) {
        s->act = WSM_READ;
        s->reading = s->latest;
    } else if (now >= s->deadline) {
        wsm_done(s, MUSTER_ETIMEDOUT, "no generation after %" PRIu64 " formed within %" PRIu32 " ms", s->answered,
                 s->timeout_ms);
    } else {
        s->act = WSM_WAIT;
    }
}

/* A call starts: an unconfirmed change was not built, so nothing is held any more. */
void wsm_begin(struct wsm *s, uint64_t now, uint32_t timeout_ms)
{
    if (s->unconfirmed) {
        s->held = 0;
        s->unconfirmed = 0;
    }
    s->timeout_ms = timeout_ms;
    s->deadline = now + timeout_ms;
    s->status = MUSTER_OK;
    s->why[0] = '\0';
    wsm_step(s, now);
}

/* The generation key read gen. */
void wsm_generation(struct wsm *s, uint64_t now, uint64_t gen)
{
    if (gen > s->latest)
        s->latest = gen;
    if (s->act == WSM_WAIT)
        wsm_step(s, now);
}

/* Time passed. */
void wsm_tick(struct wsm *s, uint64_t now)
{
    if ((s->act == WSM_WAIT || s->act == WSM_READ) && now >= s->deadline)
        wsm_done(s, MUSTER_ETIMEDOUT, "%s generation %" PRIu64 " within %" PRIu32 " ms",
                 s->act == WSM_READ ? "no answer of" : "no generation after",
                 s->act == WSM_READ ? s->reading : s->answered, s->timeout_ms);
}

/* The worker built the last change's world. */
void wsm_ready(struct wsm *s)
{
    if (!s->unconfirmed)
        return;
    s->unconfirmed = 0;
    s->held = s->change.generation;
    s->held_rank = s->change.rank;
    s->held_world = s->change.world_size;
}

/* The plan every process of the answer's generation derives from it. */
static muster_world_plan wsm_plan(const struct answer *a)
{
    for (size_t i = 0; i < a->n_members; i++)
        if (a->members[i].old_rank == ANSWER_NO_RANK)
            return MUSTER_WORLD_GROW;
    return a->n_excluded ? MUSTER_WORLD_SHRINK : MUSTER_WORLD_INIT;
}

/* Copy the parsed lists into the change's assignment (me: this node's line); 0 or -1 (no memory). */
static int wsm_assignment(struct wsm *s, const struct answer_member *me)
{
    const struct answer *a = &s->parsed;
    muster_assignment *g = &s->asg;
    g->members = calloc(a->n_members ? a->n_members : 1, sizeof *g->members);
    g->excluded = a->n_excluded ? calloc(a->n_excluded, sizeof *g->excluded) : NULL;
    if (!g->members || (a->n_excluded && !g->excluded))
        return -1;
    for (size_t i = 0; i < a->n_members; i++) {
        const struct answer_member *m = &a->members[i];
        snprintf(g->members[i].node_id, sizeof g->members[i].node_id, "%s", m->id);
        g->members[i].node_rank = m->node_rank;
        g->members[i].rank_start = m->rank_start;
        g->members[i].local_world_size = m->local_world_size;
        g->members[i].old_node_rank = m->old_rank;
    }
    for (size_t i = 0; i < a->n_excluded; i++) {
        snprintf(g->excluded[i].node_id, sizeof g->excluded[i].node_id, "%s", a->excluded[i].id);
        snprintf(g->excluded[i].cause, sizeof g->excluded[i].cause, "%s", a->excluded[i].cause);
        g->excluded[i].old_node_rank = a->excluded[i].old_rank;
    }
    g->n_members = a->n_members;
    g->n_excluded = a->n_excluded;
    g->generation = a->generation;
    g->previous_generation = a->previous;
    snprintf(g->node_id, sizeof g->node_id, "%s", s->node_id);
    g->node_rank = me->node_rank;
    g->num_nodes = a->nodes;
    g->rank_start = me->rank_start;
    g->local_world_size = me->local_world_size;
    g->world_size = a->world;
    g->old_node_rank = me->old_rank;
    return 0;
}

/* Give the change a recovery's answer makes for this node (me). */
static void wsm_recovered(struct wsm *s, const struct answer_member *me)
{
    const struct answer *a = &s->parsed;
    muster_world_change *c = &s->change;
    if ((uint32_t)s->local_rank >= me->local_world_size) {
        wsm_done(s, MUSTER_EPROTO, "local rank %d is outside node '%s''s %" PRIu32 " ranks in generation %" PRIu64,
                 s->local_rank, s->node_id, me->local_world_size, a->generation);
        return;
    }
    if (wsm_assignment(s, me) != 0) {
        wsm_done(s, MUSTER_ENOMEM, "out of memory copying the answer of generation %" PRIu64, a->generation);
        return;
    }
    c->plan = wsm_plan(a);
    c->rank = (int)(me->rank_start + (uint32_t)s->local_rank);
    c->world_size = (int)a->world;
    c->carried = s->held != 0 && s->held == a->previous && me->old_rank != ANSWER_NO_RANK;
    c->previous_rank = c->carried ? s->held_rank : -1;
    c->previous_world_size = c->carried ? s->held_world : 0;
    c->node_rank = me->node_rank;
    c->num_nodes = a->nodes;
    c->old_node_rank = me->old_rank;
    c->n_excluded = s->asg.n_excluded;
    c->excluded = s->asg.excluded;
    c->assignment = &s->asg;
}

/* Decide what the parsed answer of generation gen means for this process. */
static void wsm_decide(struct wsm *s, uint64_t gen)
{
    const struct answer *a = &s->parsed;
    const struct answer_member *me = answer_member_of(a, s->node_id);
    const struct answer_excluded *x;
    muster_world_change *c = &s->change;
    c->generation = gen;
    c->previous_generation = a->previous;
    c->skipped = gen - (s->answered ? s->answered : s->start) - (s->answered ? 1 : 0);
    c->local_rank = s->local_rank;
    c->previous_rank = -1;
    c->old_node_rank = UINT32_MAX;
    if (a->previous == 0 && gen == s->start && !s->answered) {
        c->plan = MUSTER_WORLD_INIT;   /* the first generation of this process, formed by a plain round */
        c->rank = s->start_rank;
        c->world_size = s->start_world;
        c->num_nodes = a->nodes;
    } else if (a->previous == 0) {
        wsm_done(s, MUSTER_ESTALE, "generation %" PRIu64 " was formed by a plain round (a restart): the launcher "
                 "stops this worker", gen);
        return;
    } else if (me) {
        wsm_recovered(s, me);
        if (s->act == WSM_DONE)
            return;
    } else if ((x = answer_excluded_of(a, s->node_id))) {
        wsm_done(s, MUSTER_EEXCLUDED, "node '%s' was excluded from generation %" PRIu64 ": %s", s->node_id,
                 a->previous, x->cause);
        return;
    } else {
        wsm_done(s, MUSTER_EEXCLUDED, "node '%s' is not a member of generation %" PRIu64, s->node_id, gen);
        return;
    }
    s->answered = gen;
    s->unconfirmed = 1;
    wsm_done(s, MUSTER_OK, NULL);
}

/* The answer key of gen held text (NULL: absent). */
void wsm_answer(struct wsm *s, uint64_t now, uint64_t gen, const char *text, size_t len)
{
    const char *why = NULL;
    if (s->act == WSM_WAIT && gen > s->answered && text) {
        s->act = WSM_READ;   /* an answer that came before its generation key: it is the generation */
        s->reading = gen;
    }
    if (s->act != WSM_READ || gen != s->reading)
        return;   /* an answer nobody asked for (a stale read) */
    if (gen > s->latest)
        s->latest = gen;
    if (s->latest > gen) {
        wsm_step(s, now);   /* a newer generation formed meanwhile: skip to it */
        return;
    }
    if (!text) {
        wsm_done(s, MUSTER_EPROTO, "generation %" PRIu64 " has no answer key (is musterd older than this library?)",
                 gen);
        return;
    }
    wsm_drop(s);
    if (answer_parse(text, len, &s->parsed, &why) != 0) {
        wsm_done(s, MUSTER_EPROTO, "the answer of generation %" PRIu64 " is malformed: %s", gen, why);
        return;
    }
    if (s->parsed.generation != gen) {
        wsm_done(s, MUSTER_EPROTO, "the answer key of generation %" PRIu64 " names generation %" PRIu64, gen,
                 s->parsed.generation);
        return;
    }
    wsm_decide(s, gen);
}
