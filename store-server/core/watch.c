/*
 * Watches as state.  Each namespace keeps a list of (owner, prefix)
 * watches; every keyspace change the front end hands to watch_fanout walks
 * it and calls the owner of each match.  The walk is linear in the
 * namespace's watches, which are few (a launcher or a dashboard each), and
 * bounded in total by --max-watches and per owner by --max-watches-per-conn
 * (the core's limits).  What a match becomes on the wire, and what happens
 * when its owner cannot take it, is the owner's business: its callback may
 * ask for the watch to end.
 */
#include "watch.h"

#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#include "core.h"
#include "status.h"
#include "stats.h"

/* Which share of watches is used up: 0 none, else the counter that counts the trip. */
int watch_full(const struct core *core, const size_t *owner_count)
{
    if (core->nwatches >= core->lim.max_watches)
        return STAT_LIMIT_WATCHES;
    if (owner_count && *owner_count >= core->lim.max_watches_per_conn)
        return STAT_LIMIT_WATCHES_PER_CONN;
    return 0;
}

/* Unlink w from its namespace list, uncount it and free it. */
static void watch_free(struct ns *ns, struct watch *w)
{
    DL_DELETE(ns->watches, w);
    if (w->owner_count)
        (*w->owner_count)--;
    ns->core->nwatches--;
    free(w);
}

/* Register a watch of prefix for owner in ns. */
struct watch *watch_add(struct ns *ns, const char *prefix, size_t plen, const struct watch_owner_ops *ops,
                        void *owner, size_t *owner_count, int *status)
{
    struct core *core = ns->core;
    int full = watch_full(core, owner_count);
    if (full) {
        stats_inc(core->stats, (enum stat_id)full);
        *status = CORE_LIMIT;
        return NULL;
    }
    struct watch *w = calloc(1, sizeof *w + plen + 1);
    if (!w) {
        *status = CORE_INTERNAL;
        return NULL;
    }
    memcpy(w->prefix, prefix, plen);
    w->plen = plen;
    w->id = ++core->next_watch;
    w->ops = ops;
    w->owner = owner;
    w->owner_count = owner_count;
    DL_PREPEND(ns->watches, w);
    if (owner_count)
        (*owner_count)++;
    core->nwatches++;
    *status = CORE_OK;
    return w;
}

/* Remove owner's watch id from ns. */
int watch_del_id(struct ns *ns, void *owner, uint64_t id)
{
    for (struct watch *w = ns->watches; w; w = w->next) {
        if (w->id == id && w->owner == owner) {
            watch_free(ns, w);
            return 1;
        }
    }
    return 0;
}

/* Remove every watch of owner in ns. */
void watch_del_owner(struct ns *ns, void *owner)
{
    for (struct watch *w = ns->watches, *next; w; w = next) {
        next = w->next;
        if (w->owner == owner)
            watch_free(ns, w);
    }
}

/* Tell every matching watch of ns about a change; how many matched. */
size_t watch_fanout(struct ns *ns, enum ks_change what, const char *key, size_t klen, const struct ks_entry *e)
{
    size_t n = 0;
    struct watch_change ch = {what, key, klen, e ? ks_val(e) : NULL, e ? e->vlen : 0, 0};
    for (struct watch *w = ns->watches, *next; w; w = next) {
        next = w->next;
        if (klen < w->plen || memcmp(key, w->prefix, w->plen) != 0)
            continue;
        n++;
        if (w->ops->notify(w->owner, w, &ch))
            watch_free(ns, w);
    }
    return n;
}

/* Free every watch of ns; their owners' counts are left alone (at exit an owner may be gone first). */
void watch_ns_fini(struct ns *ns)
{
    while (ns->watches) {
        struct watch *w = ns->watches;
        ns->watches = w->next;
        ns->core->nwatches--;
        free(w);
    }
}
