/* Prefix watches as state: each namespace's registry of (owner, prefix) watches, the --max-watches and
 * per-owner counts, and the fan-out of a key change to the matching watches through their owner's
 * callback.  No wire message is built here; the front end turns a match into its event. */
#ifndef MUSTERD_CORE_WATCH_H
#define MUSTERD_CORE_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "keyspace.h"

struct core;
struct ns;
struct watch;

/* One key change as its watches' owners see it. */
struct watch_change {
    enum ks_change what; /* KS_SET (val, vlen: the new value) or KS_DELETE (val NULL) */
    const char *key;     /* NUL-terminated */
    size_t klen;
    const void *val;
    size_t vlen;
    size_t memo; /* the owners' own, 0 before the first match: what they work out once per change
                  * rather than once per watch (the native front end keeps its event's size here) */
};

/* How a watch's owner hears of its matches. */
struct watch_owner_ops {
    /* A key under w's prefix changed.  Return nonzero to end w (it is removed after the call returns);
     * the call must not remove watches itself. */
    int (*notify)(void *owner, const struct watch *w, struct watch_change *ch);
};

struct watch {
    uint64_t id;
    const struct watch_owner_ops *ops;
    void *owner;
    size_t *owner_count; /* the owner's count (the per-owner limit), or NULL */
    struct watch *prev, *next;
    size_t plen;
    char prefix[];
};

/* Which share of watches is used up: 0 none, else the counter that counts the trip (STAT_LIMIT_WATCHES
 * for the server's, STAT_LIMIT_WATCHES_PER_CONN for the owner's). */
int watch_full(const struct core *core, const size_t *owner_count);
/* Register a watch of prefix for owner in ns, counted in the core and in *owner_count (may be NULL).
 * The new watch, or NULL with *status LIMIT (counted; watch_full says which) or INTERNAL. */
struct watch *watch_add(struct ns *ns, const char *prefix, size_t plen, const struct watch_owner_ops *ops,
                        void *owner, size_t *owner_count, int *status);
/* Remove owner's watch id from ns; 1 when there was one, else 0. */
int watch_del_id(struct ns *ns, void *owner, uint64_t id);
/* Remove every watch of owner in ns. */
void watch_del_owner(struct ns *ns, void *owner);
/* Tell every watch of ns whose prefix key starts with about a change (e: the new entry, NULL when
 * deleted), newest watch first; returns how many matched. */
size_t watch_fanout(struct ns *ns, enum ks_change what, const char *key, size_t klen, const struct ks_entry *e);
/* Free every watch of ns (core_ns_fini calls it), leaving the owners' counts alone. */
void watch_ns_fini(struct ns *ns);

#endif
