/*
 * The core: what the state modules (keyspace, waiters, barriers,
 * rendezvous, watches) share.  The hooks are how they reach timers, clocks and the
 * log without knowing the event loop; the parked-request budget counts
 * waits, barrier arrivals and joins alike; and a namespace's change hook
 * is wired here, so a key change reaches the sink, the rendezvous timeline
 * and the key's waiters in the same order whoever made it.
 */
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "barrier.h"
#include "status.h"
#include "rdzv.h"
#include "stats.h"
#include "queues.h"
#include "waiters.h"
#include "watch.h"

/* Start a core with its hooks, limits and counter block (hooks or stats may be filled later). */
void core_init(struct core *core, const struct core_hooks *hooks, const struct core_limits *lim,
               struct stats *stats)
{
    memset(core, 0, sizeof *core);
    if (hooks)
        core->hooks = *hooks;
    if (lim)
        core->lim = *lim;
    core->stats = stats;
}

/* Free what the core made (the wake timer); namespaces are freed by their owner first. */
void core_fini(struct core *core)
{
    if (core->wake)
        core->hooks.timer_free(core->wake);
    core->wake = NULL;
}

/* Clamp a request's timeout_ms: 0 = wait_timeout, above max_wait_timeout is cut. */
uint32_t core_timeout(const struct core *core, uint32_t timeout_ms)
{
    if (timeout_ms == 0)
        return (uint32_t)core->lim.wait_timeout;
    return timeout_ms > core->lim.max_wait_timeout ? (uint32_t)core->lim.max_wait_timeout : timeout_ms;
}

/* A namespace's or an address's share: its flag, but never more than half of max_waiters, so one job or
 * one address, however many connections it opens, always leaves the other half to everyone else. */
static uint64_t core_half_share(const struct core_limits *l, uint64_t flag)
{
    return flag < l->max_waiters / 2 ? flag : l->max_waiters / 2;
}

/* Which share of parked requests is used up: 0 none, else the counter that counts the trip. */
static int core_waiter_full(const struct core *core, const size_t *ns_count, const struct core_share *share)
{
    const struct core_limits *l = &core->lim;
    if (core->nwaiters >= l->max_waiters)
        return STAT_LIMIT_WAITERS;
    if (ns_count && *ns_count >= core_half_share(l, l->max_waiters_per_ns))
        return STAT_LIMIT_WAITERS_PER_NS;
    if (share && share->source && *share->source >= core_half_share(l, l->max_waiters_per_source))
        return STAT_LIMIT_WAITERS_PER_SOURCE;
    if (share && share->conn >= l->max_waiters_per_conn)
        return STAT_LIMIT_WAITERS_PER_CONN;
    return 0;
}

/* Reserve one parked-request slot; OK, or LIMIT (counted) when a share is used up. */
int core_waiter_take(struct core *core, size_t *ns_count, struct core_share *share)
{
    int full = core_waiter_full(core, ns_count, share);
    if (full) {
        stats_inc(core->stats, (enum stat_id)full);
        return CORE_LIMIT;
    }
    core->nwaiters++;
    if (ns_count)
        (*ns_count)++;
    if (share) {
        share->conn++;
        if (share->source)
            (*share->source)++;
    }
    return CORE_OK;
}

/* Release a slot core_waiter_take reserved with the same counts. */
void core_waiter_put(struct core *core, size_t *ns_count, struct core_share *share)
{
    core->nwaiters--;
    if (ns_count)
        (*ns_count)--;
    if (share) {
        share->conn--;
        if (share->source)
            (*share->source)--;
    }
}

/* Why core_waiter_take refused with the same counts: words for the LIMIT reply. */
const char *core_waiter_why(const struct core *core, const size_t *ns_count, const struct core_share *share)
{
    switch (core_waiter_full(core, ns_count, share)) {
    case STAT_LIMIT_WAITERS_PER_NS:
        return "too many parked requests in this namespace (--max-waiters-per-ns, at most half of --max-waiters)";
    case STAT_LIMIT_WAITERS_PER_SOURCE:
        return "too many parked requests from this address (--max-waiters-per-source, at most half of "
               "--max-waiters)";
    case STAT_LIMIT_WAITERS_PER_CONN:
        return "too many parked requests on this connection (--max-waiters-per-conn)";
    default:
        return "too many parked requests on this server (--max-waiters)";
    }
}

/* Hand r to the sink now, marked with where the change came from. */
void core_emit(struct core *core, const struct record *r)
{
    if (core->sink.take)
        core->sink.take(core->sink.arg, r, core->applying);
}

/* Log one formatted line through the hook (dropped when there is none). */
void core_log(const struct core *core, int level, const char *fmt, ...)
{
    if (!core->hooks.log)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    core->hooks.log(core->hooks.ctx, level, line);
}

/* The keyspace change hook: emit the change as a record (logged before anyone is told), note it in the
 * rendezvous timeline, wake the key's waiters, tell the matching watches (of either front end).
 * Waking only queues the waiters (they are answered from a deferred call), so watch events still go out
 * first. */
static void core_ns_changed(void *arg, enum ks_change what, const char *key, size_t klen, const struct ks_entry *e)
{
    struct ns *ns = arg;
    struct record r = {.kind = what == KS_DELETE ? RECORD_DEL : RECORD_SET, .ns = ns->name, .key = key,
                       .klen = klen, .val = e ? ks_val(e) : NULL, .vlen = e ? e->vlen : 0};
    core_emit(ns->core, &r);
    rdzv_note_key(ns, key, klen);
    if (what == KS_SET)
        waiters_key_set(ns, key, klen);
    watch_fanout(ns, what, key, klen, e);
}

/* Start ns's state: its keyspace with these limits and the change hook. */
void core_ns_init(struct core *core, struct ns *ns, uint64_t max_keys, uint64_t max_bytes, uint64_t max_value)
{
    ns->core = core;
    ks_init(&ns->ks, max_keys, max_bytes, max_value, core->stats, core_ns_changed, ns);
}

/* Free ns's state (rendezvous, waiters, barriers, watches, queues, keys), not ns itself. */
void core_ns_fini(struct ns *ns)
{
    rdzv_ns_destroy(ns);
    waiters_ns_destroy(ns);
    queues_ns_destroy(ns);
    barrier_ns_destroy(ns);
    watch_ns_fini(ns);
    ks_fini(&ns->ks);
}

/* Whether ns's state holds nothing (no keys, queues, parked requests, barriers, rendezvous state or watches). */
int core_ns_empty(const struct ns *ns)
{
    return ns->ks.count == 0 && ns->nwaiters == 0 && !ns->waiters && !ns->wkeys && !ns->barriers && !ns->rdzv &&
           !ns->watches && !ns->queues;
}
