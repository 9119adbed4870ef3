/*
 * Parked requests waiting for keys to exist, or for one key's count to reach
 * a number (TCPStore's BARRIER: arrivals added to the key's decimal text).
 * Front ends (native, TCPStore) park with a done callback and an owner
 * pointer; the waiter completes after the set that supplies its last
 * missing key (or the count), on its deadline, or on shutdown.  Completions after a set run from a wake
 * call deferred to a later callback of the same loop iteration, so the request that
 * made the set is answered before the waiters it released.
 */
#ifndef MUSTERD_WAITERS_H
#define MUSTERD_WAITERS_H

#include <stddef.h>
#include <stdint.h>

struct ns;
struct core_timer;
struct waiter;

/* Called once with OK, TIMEOUT or SHUTTING_DOWN; the waiter is freed when it returns.
 * It must not cancel w nor change the keyspace. */
typedef void (*waiter_done_fn)(struct waiter *w, int status);

/* One key of one waiter, linked into the namespace's list for that key while missing. */
struct wlink {
    struct waiter *w;
    struct wkey *wk; /* NULL while the key is not missing */
    struct wlink *prev, *next;
};

struct waiter {
    struct ns *ns;
    waiter_done_fn done;
    void *owner;     /* the front end's context (a connection) */
    struct core_share *share; /* whom the parked request is charged to besides its namespace, or NULL */
    uint64_t id;     /* the front end's request id */
    int kind;        /* the front end's tag for what to answer */
    uint32_t timeout_ms;
    int counting;       /* waiters_park_count's: its one key must hold a count of at least at_least */
    int queues;         /* waiters_park_queued's: a non-empty queue makes its key present */
    int by_queue;       /* completed by a queue push (one waiter per push) */
    uint64_t skip;      /* a queue counts as present only with more values than this, but for its own push */
    int64_t at_least;
    uint64_t generation; /* the generation whose member (or member's worker) parked it; 0 = none */
    size_t nkeys, missing;
    char **keys;     /* copies, NUL-terminated */
    size_t *klens;
    struct wlink *links;
    struct core_timer *timer;
    struct waiter *prev, *next;   /* the namespace's waiters */
    int queued;                   /* on the core's wake queue */
    struct waiter *qprev, *qnext;
};

/* Park a waiter for keys (klens NULL: NUL-terminated) with a deadline, counted in share (the owner's
 * count, or NULL) and the namespace's; NULL with *status LIMIT or INTERNAL.  At least one key should be
 * missing: the caller answers at once when none is. */
struct waiter *waiters_park(struct ns *ns, const char *const *keys, const size_t *klens, size_t n,
                            uint32_t timeout_ms, waiter_done_fn done, void *owner, struct core_share *share, uint64_t id,
                            int kind, int *status);
/* Park a waiter until key holds decimal int64 text of at least at_least (it is re-checked at every set of
 * the key, from any front end); otherwise as waiters_park. */
struct waiter *waiters_park_count(struct ns *ns, const char *key, size_t klen, int64_t at_least,
                                  uint32_t timeout_ms, waiter_done_fn done, void *owner, struct core_share *share,
                                  uint64_t id, int kind, int *status);
/* As waiters_park, but a key whose queue holds more than skip values (queues.c) is present too, and a queue
 * push releases the waiter (the oldest one it completes, one per push): TCPStore's WAIT and CHECK. */
struct waiter *waiters_park_queued(struct ns *ns, const char *const *keys, const size_t *klens, size_t n,
                                   uint64_t skip, uint32_t timeout_ms, waiter_done_fn done, void *owner,
                                   struct core_share *share, uint64_t id, int kind, int *status);
/* A value was pushed to key's queue: complete the oldest queue-aware waiter it leaves with every key present
 * (at once, so a second push finds the next one); the others wait on. */
void waiters_queue_pushed(struct ns *ns, const char *key, size_t klen);
/* Whether key is present to a queue-aware wait: it holds a value, or its queue holds more than skip values. */
int waiters_present(const struct ns *ns, const char *key, size_t klen, uint64_t skip);
/* Free a waiter without calling done (its owner went away). */
void waiters_cancel(struct waiter *w);
/* A key was set: count it off for every waiter missing it, completing those with nothing left. */
void waiters_key_set(struct ns *ns, const char *key, size_t klen);
/* Complete every waiter of ns parked by a member of generation gen (or a worker of one) with status: the
 * generation broke, and what they wait for may never come. */
void waiters_fail_generation(struct ns *ns, uint64_t gen, int status);
/* Complete every waiter of ns with status (SHUTTING_DOWN on drain). */
void waiters_fail_all(struct ns *ns, int status);
/* Free every waiter of ns without callbacks (at exit). */
void waiters_ns_destroy(struct ns *ns);

#endif
