/*
 * Barriers: per namespace, per name, a current round number (from 1), the
 * round's expected count and its parked arrivals.  The count-th arrival
 * releases every arrival of the round with the round number; the next
 * arrival opens the following round, so a name is reusable.  An arrival
 * may ask for a key's value at release (fetch), answered with the round.  A timed-out
 * arrival leaves its round (the others keep waiting for a full count).
 * A barrier's round number must outlive its rounds, so names are kept until
 * exit; their number per namespace is bounded by --max-keys-per-ns.
 */
#include "barrier.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <utlist.h>

#include "core.h"
#include "status.h"
#include "stats.h"

struct barrier {
    UT_hash_handle hh;
    struct ns *ns;
    uint64_t round;
    uint32_t count;   /* expected arrivals of the open round; 0 before the first */
    uint32_t arrived;
    struct barrier_arrival *head;
    size_t nlen;
    char name[];
};

/* Unlink arrival a from its barrier, free its timer and slot, and free it. */
static void barrier_free_arrival(struct barrier_arrival *a)
{
    struct barrier *b = a->b;
    DL_DELETE(b->head, a);
    if (--b->arrived == 0)
        b->count = 0;
    b->ns->core->hooks.timer_free(a->timer);
    core_waiter_put(b->ns->core, &b->ns->nwaiters, a->share);
    free(a);
}

/* Call a's done with status, then free it. */
static void barrier_finish(struct barrier_arrival *a, int status, uint64_t round)
{
    a->done(a, status, round, a->arrival);
    barrier_free_arrival(a);
}

/* A parked arrival's deadline passed: it leaves the round. */
static void barrier_timeout_cb(void *arg)
{
    struct barrier_arrival *a = arg;
    stats_inc(a->b->ns->core->stats, STAT_TIMEOUTS);
    barrier_finish(a, CORE_TIMEOUT, a->b->round);
}

/* The barrier called name in ns, created when absent; NULL with *st set. */
static struct barrier *barrier_get(struct ns *ns, const char *name, size_t nlen, int *st)
{
    struct barrier *b = NULL;
    HASH_FIND(hh, ns->barriers, name, nlen, b);
    if (b)
        return b;
    /* Barrier names are bounded like keys. */
    if (HASH_COUNT(ns->barriers) >= ns->ks.max_keys) {
        stats_inc(ns->core->stats, STAT_LIMIT_KEYS_PER_NS);
        *st = CORE_LIMIT;
        return NULL;
    }
    if (!(b = calloc(1, sizeof *b + nlen + 1))) {
        *st = CORE_INTERNAL;
        return NULL;
    }
    memcpy(b->name, name, nlen);
    b->nlen = nlen;
    b->ns = ns;
    b->round = 1;
    HASH_ADD_KEYPTR(hh, ns->barriers, b->name, nlen, b);
    return b;
}

/* Release every arrival of b's round and open the next round. */
static void barrier_release(struct barrier *b)
{
    uint64_t round = b->round++;
    stats_inc(b->ns->core->stats, STAT_BARRIER_ROUNDS);
    while (b->head)
        barrier_finish(b->head, CORE_OK, round);
}

/* Arrive at barrier name of ns; see barrier.h. */
int barrier_arrive(struct ns *ns, const char *name, size_t nlen, uint32_t count, uint32_t timeout_ms, const char *fetch,
                   barrier_done_fn done, void *owner, struct core_share *share, uint64_t id, struct barrier_arrival **out,
                   const char **why)
{
    size_t flen = fetch ? strlen(fetch) : 0;
    int st = CORE_OK;
    *out = NULL;
    if (count == 0)
        return *why = "barrier count must be at least 1", CORE_BAD_REQUEST;
    struct barrier *b = barrier_get(ns, name, nlen, &st);
    if (!b)
        return *why = "cannot create barrier", st;
    if (b->arrived && b->count != count)
        return *why = "count differs from the other arrivals of this round", CORE_BAD_REQUEST;
    struct core *core = ns->core;
    if ((st = core_waiter_take(core, &ns->nwaiters, share)) != CORE_OK)
        return *why = core_waiter_why(core, &ns->nwaiters, share), st;
    struct barrier_arrival *a = calloc(1, sizeof *a + flen + 1);
    if (a && !(a->timer = core->hooks.timer_new(core->hooks.ctx, barrier_timeout_cb, a))) {
        free(a);
        a = NULL;
    }
    if (!a) {
        core_waiter_put(core, &ns->nwaiters, share);
        return *why = "out of memory", CORE_INTERNAL;
    }
    if (flen)
        memcpy(a->fetch, fetch, flen);
    a->b = b;
    a->done = done;
    a->owner = owner;
    a->share = share;
    a->id = id;
    a->arrival = ++b->arrived;
    a->timeout_ms = timeout_ms;
    b->count = count;
    DL_PREPEND(b->head, a);
    if (b->arrived == count) {
        barrier_release(b);
        return CORE_OK;
    }
    core->hooks.timer_arm(a->timer, timeout_ms);
    *out = a;
    return CORE_OK;
}

/* Take an arrival out of its round without calling done (its owner went away). */
void barrier_cancel(struct barrier_arrival *a)
{
    barrier_free_arrival(a);
}

/* Complete every parked arrival of ns with status (SHUTTING_DOWN on drain). */
void barrier_fail_all(struct ns *ns, int status)
{
    struct barrier *b, *tmp;
    HASH_ITER(hh, ns->barriers, b, tmp) {
        while (b->head) {
            if (status == CORE_SHUTTING_DOWN)
                stats_inc(ns->core->stats, STAT_SHUTDOWN_ANSWERED);
            barrier_finish(b->head, status, b->round);
        }
    }
}

/* Free every barrier of ns (at exit). */
void barrier_ns_destroy(struct ns *ns)
{
    struct barrier *b, *tmp;
    HASH_ITER(hh, ns->barriers, b, tmp) {
        while (b->head)
            barrier_free_arrival(b->head);
        HASH_DEL(ns->barriers, b);
        free(b);
    }
}

/* The parked arrivals of b's open round, in arrival order (linked through next). */
const struct barrier_arrival *barrier_arrivals(const struct barrier *b)
{
    return b->head;
}

/* A barrier's name and the open round's expected and arrived counts (for a timeout's words). */
const char *barrier_name(const struct barrier *b, uint32_t *count, uint32_t *arrived)
{
    *count = b->count;
    *arrived = b->arrived;
    return b->name;
}
