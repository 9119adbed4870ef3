/*
 * Parked requests waiting for keys.  Each namespace keeps a table of the
 * keys some waiter is missing; each entry heads a list of links, one per
 * (waiter, key).  A set of key K looks K up once and walks only K's list:
 * no scan of unrelated waiters.  A waiter counts its missing keys and
 * is queued at zero; the wake event completes it after a re-check that no
 * key it already counted was deleted since (those are parked again).
 * Deadlines are per-waiter timers.
 */
#include "waiters.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>
#include <utlist.h>

#include "core.h"
#include "queues.h"
#include "status.h"
#include "stats.h"

/* A key some waiters are missing, heading their links. */
struct wkey {
    UT_hash_handle hh;
    struct wlink *head;
    size_t klen;
    char key[];
};

/* Link key i of w into its namespace list, creating the list head; 0 on success. */
static int waiters_link(struct waiter *w, size_t i)
{
    struct ns *ns = w->ns;
    struct wkey *wk = NULL;
    HASH_FIND(hh, ns->wkeys, w->keys[i], w->klens[i], wk);
    if (!wk) {
        if (!(wk = calloc(1, sizeof *wk + w->klens[i] + 1)))
            return -1;
        memcpy(wk->key, w->keys[i], w->klens[i]);
        wk->klen = w->klens[i];
        HASH_ADD_KEYPTR(hh, ns->wkeys, wk->key, wk->klen, wk);
    }
    struct wlink *l = &w->links[i];
    l->wk = wk;
    DL_PREPEND(wk->head, l);
    w->missing++;
    return 0;
}

/* Take one link out of its key's list, dropping the list head when it empties. */
static void waiters_unlink(struct ns *ns, struct wlink *l)
{
    struct wkey *wk = l->wk;
    if (!wk)
        return;
    DL_DELETE(wk->head, l);
    l->wk = NULL;
    l->prev = l->next = NULL;
    if (!wk->head) {
        HASH_DEL(ns->wkeys, wk);
        free(wk);
    }
}

/* Take w off the core's wake queue. */
static void waiters_unqueue(struct waiter *w)
{
    struct core *core = w->ns->core;
    if (!w->queued)
        return;
    DL_DELETE2(core->wake_queue, w, qprev, qnext);
    w->queued = 0;
    w->qprev = w->qnext = NULL;
}

/* Unlink w from every list and the core's accounting, and free it. */
static void waiters_free(struct waiter *w)
{
    struct ns *ns = w->ns;
    struct core *core = ns->core;
    waiters_unqueue(w);
    for (size_t i = 0; i < w->nkeys; i++)
        waiters_unlink(ns, &w->links[i]);
    DL_DELETE(ns->waiters, w);
    if (w->timer)
        core->hooks.timer_free(w->timer);
    core_waiter_put(core, &ns->nwaiters, w->share);
    stats_dec(core->stats, STAT_WAITERS_CURRENT);
    free(w);
}

/* Call w's done callback with status, then free it. */
static void waiters_complete(struct waiter *w, int status)
{
    for (size_t i = 0; i < w->nkeys; i++)
        waiters_unlink(w->ns, &w->links[i]);
    w->done(w, status);
    waiters_free(w);
}

/* Whether key i of w is what w waits for: present, and for a counting waiter holding a count that high. */
static int waiters_holds(const struct waiter *w, size_t i)
{
    const struct ks_entry *e = ks_get(&w->ns->ks, w->keys[i], w->klens[i]);
    int64_t n;
    if (!e)
        return w->queues && queues_len(w->ns, w->keys[i], w->klens[i]) > w->skip;
    return !w->counting || (ks_entry_int(e, &n) == 0 && n >= w->at_least);
}

/* Whether key is present to a queue-aware wait: it holds a value, or its queue holds more than skip values. */
int waiters_present(const struct ns *ns, const char *key, size_t klen, uint64_t skip)
{
    return ks_get(&ns->ks, key, klen) != NULL || queues_len(ns, key, klen) > skip;
}

/* Park again every key of w that does not hold now; the new missing count. */
static size_t waiters_recheck(struct waiter *w)
{
    for (size_t i = 0; i < w->nkeys; i++)
        if (!w->links[i].wk && !waiters_holds(w, i))
            waiters_link(w, i);
    return w->missing;
}

/* The deadline: complete with TIMEOUT (or OK if the keys all arrived meanwhile). */
static void waiters_timeout_cb(void *arg)
{
    struct waiter *w = arg;
    struct stats *stats = w->ns->core->stats;
    if (waiters_recheck(w) == 0) {
        stats_inc(stats, STAT_WAITS_WOKEN);
        waiters_complete(w, CORE_OK);
        return;
    }
    stats_inc(stats, STAT_TIMEOUTS);
    waiters_complete(w, CORE_TIMEOUT);
}

/* Allocate a waiter with room for n keys of the given lengths, copying them. */
static struct waiter *waiters_alloc(const char *const *keys, const size_t *klens, size_t n)
{
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++)
        bytes += (klens ? klens[i] : strlen(keys[i])) + 1;
    size_t head = sizeof(struct waiter) + n * (sizeof(struct wlink) + sizeof(char *) + sizeof(size_t));
    struct waiter *w = calloc(1, head + bytes);
    if (!w)
        return NULL;
    w->links = (struct wlink *)(w + 1);
    w->keys = (char **)(w->links + n);
    w->klens = (size_t *)(w->keys + n);
    char *p = (char *)(w->klens + n);
    for (size_t i = 0; i < n; i++) {
        size_t len = klens ? klens[i] : strlen(keys[i]);
        memcpy(p, keys[i], len);
        p[len] = 0;
        w->keys[i] = p;
        w->klens[i] = len;
        w->links[i].w = w;
        p += len + 1;
    }
    w->nkeys = n;
    return w;
}

/* Park a waiter for keys (for the count at_least of its one key when counting) with a deadline. */
static struct waiter *waiters_park_as(struct ns *ns, const char *const *keys, const size_t *klens, size_t n,
                                      int counting, int64_t at_least, int queues, uint64_t skip, uint32_t timeout_ms,
                                      waiter_done_fn done, void *owner, struct core_share *share, uint64_t id,
                                      int kind, int *status)
{
    struct core *core = ns->core;
    if ((*status = core_waiter_take(core, &ns->nwaiters, share)) != CORE_OK)
        return NULL;
    struct waiter *w = waiters_alloc(keys, klens, n);
    if (w)
        w->timer = core->hooks.timer_new(core->hooks.ctx, waiters_timeout_cb, w);
    if (!w || !w->timer) {
        free(w);
        core_waiter_put(core, &ns->nwaiters, share);
        *status = CORE_INTERNAL;
        return NULL;
    }
    w->ns = ns;
    w->done = done;
    w->owner = owner;
    w->share = share;
    w->id = id;
    w->kind = kind;
    w->counting = counting;
    w->at_least = at_least;
    w->queues = queues;
    w->skip = skip;
    w->timeout_ms = timeout_ms;
    DL_PREPEND(ns->waiters, w);
    core->hooks.timer_arm(w->timer, timeout_ms);
    if (waiters_recheck(w) == 0)
        core->hooks.defer(w->timer); /* nothing missing: complete on the next turn */
    stats_inc(core->stats, STAT_WAITS_PARKED);
    stats_inc(core->stats, STAT_WAITERS_CURRENT);
    return w;
}

/* Park a waiter for keys with a deadline; see waiters.h. */
struct waiter *waiters_park(struct ns *ns, const char *const *keys, const size_t *klens, size_t n,
                            uint32_t timeout_ms, waiter_done_fn done, void *owner, struct core_share *share, uint64_t id,
                            int kind, int *status)
{
    return waiters_park_as(ns, keys, klens, n, 0, 0, 0, 0, timeout_ms, done, owner, share, id, kind, status);
}

/* Park a waiter for keys or non-empty queues; see waiters.h. */
struct waiter *waiters_park_queued(struct ns *ns, const char *const *keys, const size_t *klens, size_t n,
                                   uint64_t skip, uint32_t timeout_ms, waiter_done_fn done, void *owner,
                                   struct core_share *share, uint64_t id, int kind, int *status)
{
    return waiters_park_as(ns, keys, klens, n, 0, 0, 1, skip, timeout_ms, done, owner, share, id, kind, status);
}

/* Park a waiter until key holds a count of at least at_least; see waiters.h. */
struct waiter *waiters_park_count(struct ns *ns, const char *key, size_t klen, int64_t at_least,
                                  uint32_t timeout_ms, waiter_done_fn done, void *owner, struct core_share *share,
                                  uint64_t id, int kind, int *status)
{
    const char *keys[1] = {key};
    return waiters_park_as(ns, keys, &klen, 1, 1, at_least, 0, 0, timeout_ms, done, owner, share, id, kind, status);
}

/* Free a waiter without calling done (its owner went away). */
void waiters_cancel(struct waiter *w)
{
    stats_inc(w->ns->core->stats, STAT_WAITS_CANCELED);
    waiters_free(w);
}

/* The wake event: complete every queued waiter whose keys are all still there. */
static void waiters_wake_cb(void *arg)
{
    struct core *core = arg;
    while (core->wake_queue) {
        struct waiter *w = core->wake_queue;
        waiters_unqueue(w);
        if (waiters_recheck(w) == 0) {
            stats_inc(core->stats, STAT_WAITS_WOKEN);
            waiters_complete(w, CORE_OK);
        }
    }
}

/* Queue w for completion from the wake event. */
static void waiters_enqueue(struct waiter *w)
{
    struct core *core = w->ns->core;
    if (w->queued)
        return;
    if (!core->wake && !(core->wake = core->hooks.timer_new(core->hooks.ctx, waiters_wake_cb, core))) {
        core_log(core, CORE_LOG_ERROR, "cannot create the wake event; waiter completes on its deadline");
        return;
    }
    w->queued = 1;
    DL_PREPEND2(core->wake_queue, w, qprev, qnext);
    core->hooks.defer(core->wake);
}

/* A key was set: count it off for every waiter missing it, queueing those with nothing left. */
void waiters_key_set(struct ns *ns, const char *key, size_t klen)
{
    struct wkey *wk = NULL;
    HASH_FIND(hh, ns->wkeys, key, klen, wk);
    if (!wk)
        return;
    HASH_DEL(ns->wkeys, wk);
    for (struct wlink *l = wk->head, *next; l; l = next) {
        next = l->next;
        l->wk = NULL;
        l->prev = l->next = NULL;
        if (--l->w->missing == 0)
            waiters_enqueue(l->w);
    }
    free(wk);
}

/* Whether every key of w holds now, key (of klen bytes, just pushed to) whatever its queue's length. */
static int waiters_all_hold(const struct waiter *w, const char *key, size_t klen)
{
    for (size_t i = 0; i < w->nkeys; i++) {
        int pushed = w->klens[i] == klen && memcmp(w->keys[i], key, klen) == 0;
        if (!pushed && !waiters_holds(w, i))
            return 0;
    }
    return 1;
}

/* A value was pushed to key's queue: complete the oldest queue-aware waiter it completes.  Unlike a set,
 * this completes at once rather than from the wake event, so that each push releases exactly one waiter
 * even when several pushes come in one loop turn; the others stay linked to the key for the next push. */
void waiters_queue_pushed(struct ns *ns, const char *key, size_t klen)
{
    struct wkey *wk = NULL;
    HASH_FIND(hh, ns->wkeys, key, klen, wk);
    if (!wk)
        return;
    /* Links are prepended: the oldest is the list's tail, head->prev. */
    for (struct wlink *l = wk->head->prev;; l = l->prev) {
        struct waiter *w = l->w;
        if (w->queues && !w->queued && waiters_all_hold(w, key, klen)) {
            stats_inc(ns->core->stats, STAT_WAITS_WOKEN);
            w->by_queue = 1;
            waiters_complete(w, CORE_OK);
            return;
        }
        if (l == wk->head)
            return;
    }
}

/* Complete every waiter of ns with status (SHUTTING_DOWN on drain). */
void waiters_fail_all(struct ns *ns, int status)
{
    while (ns->waiters) {
        struct waiter *w = ns->waiters;
        /* One whose keys all arrived is answered with them, not failed. */
        int st = (w->queued && waiters_recheck(w) == 0) ? CORE_OK : status;
        if (st == CORE_SHUTTING_DOWN)
            stats_inc(ns->core->stats, STAT_SHUTDOWN_ANSWERED);
        waiters_complete(w, st);
    }
}

/* Complete the waiters of a broken generation. */
void waiters_fail_generation(struct ns *ns, uint64_t gen, int status)
{
    struct waiter *w = ns->waiters, *next;
    for (; w; w = next) {
        next = w->next;
        if (w->generation == gen && gen != 0 && !(w->queued && waiters_recheck(w) == 0))
            waiters_complete(w, status);
    }
}

/* Free every waiter of ns without callbacks (at exit). */
void waiters_ns_destroy(struct ns *ns)
{
    while (ns->waiters)
        waiters_free(ns->waiters);
}
