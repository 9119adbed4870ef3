/* The store's state as a library: the hooks the daemon fills once, the parked-request budget, and the
 * namespace the state modules share.  Nothing here knows libevent, sockets, connections or the log. */
#ifndef MUSTERD_CORE_H
#define MUSTERD_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "keyspace.h"
#include "record.h"

struct stats;
struct core_timer;
struct waiter;
struct wkey;
struct barrier;
struct ns;
struct watch;

/* Log levels of the log hook: the numbers of log.h's (core_event.c checks they agree). */
enum core_log_level { CORE_LOG_ERROR = 0, CORE_LOG_WARN = 1, CORE_LOG_INFO = 2, CORE_LOG_DEBUG = 3 };

/* A timer's (or a deferred call's) callback. */
typedef void (*core_timer_fn)(void *arg);

/* How the state reaches the outside world: timers, the clocks and the log.  The daemon fills them with an
 * adapter over its event loop (base/core_event.c); tests with a fake clock. */
struct core_hooks {
    void *ctx;
    /* A new disarmed timer calling fn(arg); NULL when memory ran out. */
    struct core_timer *(*timer_new)(void *ctx, core_timer_fn fn, void *arg);
    /* Fire ms milliseconds from now (a pending timer is moved). */
    void (*timer_arm)(struct core_timer *t, uint64_t ms);
    /* Run the callback from the loop later in this turn, after the current callback returns. */
    void (*defer)(struct core_timer *t);
    void (*timer_disarm)(struct core_timer *t);
    int (*timer_pending)(const struct core_timer *t);
    void (*timer_free)(struct core_timer *t);
    /* Wall-clock milliseconds (timeline events). */
    uint64_t (*wall_ms)(void *ctx);
    /* Monotonic microseconds (what the state's own work takes, for the counters). */
    uint64_t (*mono_us)(void *ctx);
    /* Write one line at level. */
    void (*log)(void *ctx, int level, const char *line);
};

/* The limits the state enforces, copied from the daemon's options. */
struct core_limits {
    uint64_t wait_timeout, max_wait_timeout;                      /* a parked request's deadline */
    uint64_t max_waiters, max_waiters_per_ns, max_waiters_per_conn; /* parked requests */
    uint64_t max_waiters_per_source;                              /* parked requests of one address */
    uint64_t heartbeat_timeout;                                   /* a rendezvous member's; 0 = none */
    uint64_t recovery_timeout;                                    /* a recovery round's deadline */
    uint64_t max_standbys;                                        /* parked standbys of one job; 0 = none */
    uint64_t max_watches, max_watches_per_conn;                   /* watches (watch.c) */
};

struct core {
    struct core_hooks hooks;
    struct core_limits lim;
    struct stats *stats;
    size_t nwaiters;             /* parked requests (the max_waiters count) */
    size_t nwatches;             /* watches of every front end (the max_watches count) */
    uint64_t next_watch;         /* the last watch id given (watch.c) */
    struct record_sink sink;     /* where the state's records go (records.c sets it) */
    enum record_origin applying; /* where the change being applied came from (LOCAL outside records_apply) */
    struct waiter *wake_queue;   /* waiters whose keys all arrived (waiters.c) */
    struct core_timer *wake;
};

/* A namespace (job): its keyspace, parked waiters, barriers, rendezvous state and watches.  Its owner (the
 * daemon's namespace table) keeps it in a table by name through hh and its own part behind owner. */
struct ns {
    UT_hash_handle hh;
    struct core *core;
    struct keyspace ks;
    struct wkey *wkeys;       /* keys some waiter is missing (waiters.c) */
    struct waiter *waiters;   /* every parked waiter of this namespace (waiters.c) */
    struct barrier *barriers; /* by name (barrier.c) */
    void *rdzv;               /* rendezvous state, owned by rdzv.c */
    size_t nwaiters;          /* parked requests of any kind (the max_waiters_per_ns count) */
    struct watch *watches;    /* prefix watches, newest first (watch.c) */
    struct queue *queues;     /* TCPStore's queues, by key (queues.c) */
    uint64_t queue_items, queue_bytes; /* queued values, and their keys' and values' bytes */
    void *owner;              /* the owner's part, never read here */
    char name[];
};

/* Start a core with its hooks, limits and counter block (hooks or stats may be filled later). */
void core_init(struct core *core, const struct core_hooks *hooks, const struct core_limits *lim,
               struct stats *stats);
/* Free what the core made (the wake timer); namespaces are freed by their owner first. */
void core_fini(struct core *core);
/* Clamp a request's timeout_ms: 0 = wait_timeout, above max_wait_timeout is cut. */
uint32_t core_timeout(const struct core *core, uint32_t timeout_ms);
/* Whom a parked request is charged to besides the server and its namespace: its connection, and the
 * address that connection came from, over all of that address's connections and namespaces. */
struct core_share {
    size_t conn;    /* the connection's parked requests (max_waiters_per_conn) */
    size_t *source; /* its address's (max_waiters_per_source), or NULL */
};

/* Reserve one parked-request slot in the core's, a namespace's and an owner's shares (either may be
 * NULL); OK, or LIMIT (counted) when one of them is used up. */
int core_waiter_take(struct core *core, size_t *ns_count, struct core_share *share);
/* Release a slot core_waiter_take reserved with the same counts. */
void core_waiter_put(struct core *core, size_t *ns_count, struct core_share *share);
/* Why core_waiter_take refused with the same counts: words for the LIMIT reply. */
const char *core_waiter_why(const struct core *core, const size_t *ns_count, const struct core_share *share);
/* Hand r to the sink now, marked with where the change came from (before anyone is told of it). */
void core_emit(struct core *core, const struct record *r);
/* Log one formatted line through the hook (dropped when there is none). */
void core_log(const struct core *core, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Start ns's state: its keyspace with these limits, whose changes go to the sink, the rendezvous
 * timeline, the key's waiters and the watches (native ones and the TCPStore listener's WATCH_KEY). */
void core_ns_init(struct core *core, struct ns *ns, uint64_t max_keys, uint64_t max_bytes, uint64_t max_value);
/* Free ns's state (rendezvous, waiters, barriers, watches, keys), not ns itself. */
void core_ns_fini(struct ns *ns);
/* Whether ns's state holds nothing (no keys, parked requests, barriers, rendezvous state or watches). */
int core_ns_empty(const struct ns *ns);

#endif
