/*
 * libmuster: client for the musterd key-value and rendezvous daemon.
 *
 * Handles: a muster_t is one connection to one musterd namespace.  Create it
 * with muster_connect(), free it with muster_close() (NULL is fine).
 *
 * Threads: a handle is safe to share between threads, and the library has
 * no global state.  Calls on one handle are in flight together (requests
 * carry ids): a thread blocked in a wait or a barrier does not delay
 * another thread's set on the same handle, because the waiting thread
 * reads the socket without holding the handle and completes the other
 * calls as their answers arrive.  muster_last_error() is the handle's
 * latest failure, whichever thread's it was.  muster_close() must be the
 * last call, made when no other thread uses the handle.  Every call here
 * also has an asynchronous form that completes through a callback:
 * muster/async.h.
 *
 * Errors: every function returns a muster_err (MUSTER_OK = 0) or, where it
 * returns a pointer, NULL with the reason in *err.  muster_strerror() gives a
 * static message; muster_last_error() gives the detail of the last call on a
 * handle: its failure's reason, or "" after a success.  Retryable codes (muster_err_retryable()):
 * MUSTER_ETIMEDOUT, MUSTER_ECONN, MUSTER_ESHUTDOWN, MUSTER_ESTALE (re-join),
 * MUSTER_ENOTLEADER (retry at the leader muster_last_error() names) and
 * MUSTER_ECANCELED (re-join).  The others mean the same call will fail
 * the same way.
 *
 * Deadlines: every call that talks to the server takes timeout_ms; 0 means
 * the handle's default (the URL's ?timeout=, else 30000 ms).  Blocking ops
 * pass the deadline to the server, which enforces it and answers
 * MUSTER_ETIMEDOUT; the connection stays usable afterwards.  The client
 * waits one second longer than timeout_ms so that the server's answer
 * normally arrives first.
 *
 * Broken handles: when the connection is lost (MUSTER_ECONN), the server
 * sends something unparseable (MUSTER_EPROTO), or the client's own deadline
 * passes before the server answered (MUSTER_ETIMEDOUT: a server that did
 * not answer within the extra second is not trusted), the handle becomes
 * unusable: the other calls in flight complete with the same error and
 * every later call returns MUSTER_ECONN.  muster_broken()
 * tells which case a MUSTER_ETIMEDOUT was.  Close the handle and connect
 * again; without failover (below) the library never reconnects behind the
 * caller's back, because the server ties watches and rendezvous membership
 * to the connection.
 *
 * Failover: a handle whose URL lists several endpoints (or says
 * ?failover=1) serves a high-availability set and repairs itself instead
 * of breaking.  Connecting tries the endpoints in order, starting from the
 * last one that worked, moving on at once when one fails and backing off
 * (the same jittered backoff) after a whole pass failed, all within the
 * connect deadline.  Each connection is checked with one request after the
 * hello; a standby's NOT_LEADER names the leader, which is tried next even
 * if the URL does not list it (at most 4 redirects in a row, so standbys
 * cannot send the client in circles); "no leader" means back off and try
 * again.  On an established handle, a lost connection or a NOT_LEADER
 * answer makes the call reconnect by the same rules, within the call's own
 * deadline, say hello again with the same namespace and token, and then:
 *   - an op answered NOT_LEADER never ran: it is sent to the leader;
 *   - set, get, delete, check, wait, num_keys, multi_get, multi_set, list,
 *     ping, watch, unwatch and queue_len in flight on the lost connection
 *     are sent again; waits (get/multi_get with wait, muster_wait) with
 *     the time left of the caller's timeout;
 *   - add, compare_set, append, barrier, rdzv_join, queue_push and
 *     queue_pop in flight may or may not have run: they return MUSTER_ECONN
 *     (retryable, the handle is usable again) and are never repeated by
 *     the library;
 *   - pipelines classify each unanswered op the same way: a lost add's
 *     muster_pipeline_result() is MUSTER_ECONN, the others are answered;
 *   - watches are registered again and keep the ids the caller holds;
 *     changes made while no connection watched are not replayed, and
 *     muster_events_dropped() grows by one to say some may be missed;
 *   - a rendezvous membership does not survive: the handle queues a
 *     MUSTER_EVENT_MEMBER_LOST for its own node and generation, and
 *     muster_rdzv_heartbeat() returns MUSTER_ESTALE until the next join, so
 *     the generation re-forms as after any member loss.
 * muster_next_event() with a timeout reconnects an idle handle too.  The
 * socket changes with a reconnect: take muster_fd() again after each call.
 * Progress goes to the log callback ("reconnected to ..." at WARN).  A
 * handle the server answered with garbage (MUSTER_EPROTO) stays broken.
 *
 * Ownership: buffers the library returns (values, key lists) belong to the
 * caller and are freed with muster_free() / muster_free_list().  Input
 * buffers are only read during the call.
 *
 * The library never prints.  Install a log callback to see its diagnostics.
 */
#ifndef MUSTER_MUSTER_H
#define MUSTER_MUSTER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MUSTER_API __attribute__((visibility("default")))

#define MUSTER_PROTOCOL_VERSION 1
#define MUSTER_DEFAULT_PORT 29600

/* Error codes.  1..13 equal the wire Status values of proto/muster.proto. */
typedef enum muster_err {
    MUSTER_OK = 0,
    MUSTER_ENOTFOUND = 1,     /* key absent */
    MUSTER_ETIMEDOUT = 2,     /* deadline passed (server- or client-side); retryable */
    MUSTER_EBADREQ = 3,       /* the server rejected a field of the request */
    MUSTER_EUNKNOWNOP = 4,    /* the server does not know this op */
    MUSTER_EAUTH = 5,         /* wrong token / not authenticated */
    MUSTER_ELIMIT = 6,        /* a server bound tripped (size, count, waiters) */
    MUSTER_ESHUTDOWN = 7,     /* the server is draining; retryable elsewhere/later */
    MUSTER_ENOTNUM = 8,       /* add on a non-numeric value */
    MUSTER_EOVERFLOW = 9,     /* add would overflow int64 */
    MUSTER_ESTALE = 10,       /* generation ended; re-join; retryable */
    MUSTER_ENOTMEMBER = 11,   /* rendezvous op without membership */
    MUSTER_ECONFLICT = 12,    /* join parameters disagree with the round */
    MUSTER_EINTERNAL = 13,    /* server-side bug */
    MUSTER_ENOTLEADER = 14,   /* a standby answered; retry at the leader it names; retryable */
    MUSTER_EEXCLUDED = 15,    /* this node was excluded from the generation it names; join as a newcomer */
    MUSTER_EFORBIDDEN = 16,   /* a write to a key of the job's world that this connection may not make */
    MUSTER_EINVAL = 100,      /* bad argument to a library call (client side) */
    MUSTER_ECONN = 101,       /* cannot connect, or the connection was lost; retryable */
    MUSTER_EPROTO = 102,      /* the server sent something this library cannot parse */
    MUSTER_ENOMEM = 103,      /* allocation failed */
    MUSTER_EURL = 104,        /* the store URL could not be parsed */
    MUSTER_ENCCL = 105,       /* NCCL or CUDA failed (libmuster-nccl) */
    MUSTER_ECANCELED = 106,   /* aborted by a membership event (libmuster-nccl), or the handle was
                               * closed with the call in flight (muster/async.h) */
} muster_err;

/* A static, never-NULL description of an error code. */
MUSTER_API const char *muster_strerror(int err);
/* Whether retrying the same call later may succeed. */
MUSTER_API int muster_err_retryable(int err);

/* ------------------------------------------------------------------ URLs */

/* The most endpoints one URL may list. */
#define MUSTER_URL_MAX_ENDPOINTS 8

/* One server address of a URL. */
typedef struct muster_endpoint {
    char host[256];        /* a name, an IPv4 literal, or an IPv6 literal without brackets */
    uint16_t port;
} muster_endpoint;

/* A parsed store URL: tcp://HOST[:PORT][/NAMESPACE][?token=T&timeout=MS&name=N]
 * HOST may be a bracketed IPv6 literal; PORT defaults to 29600.  "env://"
 * (optionally with the same query) reads MASTER_ADDR (required; a bare IPv6
 * literal is fine) and MASTER_PORT (default 29600), and the namespace from
 * MUSTER_NAMESPACE.  NULL or "" means the MUSTER_URL environment variable,
 * else tcp://127.0.0.1:29600.  Parsing is strict: unknown or repeated query
 * parameters, fragments, ports outside 1..65535, a namespace with
 * characters other than [A-Za-z0-9._-], and fields longer than this struct
 * holds are errors.  token and name are percent-decoded (%00 refused);
 * timeout is milliseconds, at least 1.  tls://HOST... is the same with TLS
 * (as is ?tls=1); ?ca=, ?cert= and ?key= name PEM files (percent-decoded).
 * With TLS, data may wait inside the library: poll muster_fd() only after a
 * call has returned with nothing buffered (the library's own waits know).
 *
 * Several endpoints: the authority may list up to MUSTER_URL_MAX_ENDPOINTS
 * comma-separated endpoints, the members of a high-availability set:
 * tcp://a:29600,b:29600,[::1]:29600/ns (tls:// alike; each endpoint has its
 * own optional port).  For env:// MASTER_ADDR may be such a list too: each
 * element is HOST, HOST:PORT, [V6][:PORT] or a bare IPv6 literal, and
 * MASTER_PORT is the port of those without one.  An empty element, a bad
 * endpoint or more than the limit is MUSTER_EURL, and
 * muster_url_parse_detail() names the endpoint.  ?failover=0|1 turns the
 * handle's automatic failover (see "Failover" at muster_connect) off or on;
 * it is on by default exactly when the URL lists more than one endpoint.
 * ?generation=G (a rendezvous generation) makes this client's blocking waits
 * follow G: they end MUSTER_ESTALE, naming the lost node, when G breaks, and
 * at once once it has (a member, or a worker with $MUSTER_CREDENTIAL,
 * follows its own generation without asking). */
typedef struct muster_url {
    char host[256];        /* the first endpoint (the same as endpoints[0]) */
    uint16_t port;
    char ns[256];
    char token[256];
    char name[128];
    uint32_t timeout_ms;   /* 0 when absent */
    int tls;               /* tls:// or ?tls=1: speak TLS, verifying the server's certificate */
    char tls_ca[256];      /* ?ca=PATH: CA bundle to verify the server with ("" = the system's) */
    char tls_cert[256];    /* ?cert=PATH: client certificate, for servers that require one */
    char tls_key[256];     /* ?key=PATH: its private key */
    int failover;          /* 1: reconnect and follow the leader by itself (see muster_connect) */
    size_t n_endpoints;    /* 1..MUSTER_URL_MAX_ENDPOINTS */
    muster_endpoint endpoints[MUSTER_URL_MAX_ENDPOINTS];
    uint64_t generation;   /* ?generation=G: blocking waits end MUSTER_ESTALE when G breaks (0 = none) */
} muster_url;

/* Parse text into *out; MUSTER_EURL with no change to *out on error. */
MUSTER_API int muster_url_parse(const char *text, muster_url *out);
/* As muster_url_parse, and on MUSTER_EURL writes what is wrong into why (n
 * bytes, may be NULL/0): the bad endpoint by position and text when one is
 * malformed, else the expected form.  Never includes the query (tokens). */
MUSTER_API int muster_url_parse_detail(const char *text, muster_url *out, char *why, size_t n);

/* ---------------------------------------------------------------- handles */

typedef struct muster muster_t;

/* Levels passed to a log callback (lower is more severe). */
typedef enum muster_log_level {
    MUSTER_LOG_ERROR = 0,
    MUSTER_LOG_WARN = 1,
    MUSTER_LOG_INFO = 2,
    MUSTER_LOG_DEBUG = 3,
} muster_log_level;

/* Receives one diagnostic line (no trailing newline), valid during the call. */
typedef void (*muster_log_fn)(void *arg, int level, const char *msg);

/* Options for muster_connect_opts(); zero-initialise, then set fields. */
typedef struct muster_opts {
    uint32_t connect_timeout_ms;   /* overall connect deadline; 0 = handle default */
    uint32_t default_timeout_ms;   /* per-call default; 0 = URL's, else 30000 */
    const char *client_name;       /* shown in server logs; NULL = URL's or "libmuster" */
    muster_log_fn log_fn;          /* NULL = silent */
    void *log_arg;
} muster_opts;

/* Connect to the store at url (see muster_url_parse), retrying with
 * exponential backoff and jitter until the connect deadline (several
 * endpoints: see "Failover" at the top; a bad URL is logged with the detail
 * of muster_url_parse_detail through opts->log_fn).  A server that
 * refuses the hello with LIMIT (full, or out of namespaces) is retried too;
 * when that is still so at the deadline, *err is MUSTER_ELIMIT, not
 * MUSTER_ECONN.  Returns a handle, or NULL with *err set (err may be NULL). */
MUSTER_API muster_t *muster_connect(const char *url, int *err);
/* As muster_connect with explicit options (opts may be NULL). */
MUSTER_API muster_t *muster_connect_opts(const char *url, const muster_opts *opts, int *err);
/* Close the connection and free the handle; NULL is a no-op.  Asynchronous
 * calls still in flight complete first, with MUSTER_ECANCELED. */
MUSTER_API void muster_close(muster_t *m);

/* The detail for the last failed call on m: the server's message, or the
 * library's own ("" when none).  Valid until the next call on m. */
MUSTER_API const char *muster_last_error(const muster_t *m);
/* Record the reason of a failure on m for muster_last_error and return code; code MUSTER_OK (or a NULL
 * fmt) clears it.  For libraries layered on libmuster (libmuster-nccl), so one handle says why its
 * caller's last call failed, whichever layer failed it. */
MUSTER_API int muster_set_error(muster_t *m, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* 0 while m is usable, else the error that broke it (see "Broken handles"). */
MUSTER_API int muster_broken(const muster_t *m);
/* The socket fd, for poll(): readable when the server has sent something
 * (on a failover handle it changes after a reconnect: ask again each time).
 * Events already read during other calls wait in the handle's queue, so
 * drain muster_next_event(m, &ev, 0) after polling AND after other calls. */
MUSTER_API int muster_fd(const muster_t *m);
/* The server's session id for this connection. */
MUSTER_API uint64_t muster_session_id(const muster_t *m);
/* The server's limit on value size, from the hello reply. */
MUSTER_API uint32_t muster_max_value(const muster_t *m);

/* Free a buffer returned by the library. */
MUSTER_API void muster_free(void *p);
/* Free an array of n buffers returned by the library, and the array. */
MUSTER_API void muster_free_list(void **list, size_t n);

/* --------------------------------------------------------- key-value ops */

/* Keys are NUL-terminated strings of 1 to the server's max_key bytes; any
 * byte but NUL may appear.  Keys written through the daemon's TCPStore
 * listener may hold a NUL: those cannot be named here, and list pages and
 * watch events leave them out (proto/muster.proto, "Keys"). */

/* Set key to the len bytes at value. */
MUSTER_API int muster_set(muster_t *m, const char *key, const void *value, size_t len, uint32_t timeout_ms);
/* Get key: with wait != 0 blocks until it exists (server-enforced deadline),
 * else MUSTER_ENOTFOUND at once.  *value (caller frees with muster_free) is
 * NUL-terminated beyond *len for convenience. */
MUSTER_API int muster_get(muster_t *m, const char *key, int wait, uint32_t timeout_ms, void **value, size_t *len);
/* Add delta to the int64 kept as decimal text at key (absent = 0); *result
 * (may be NULL) receives the new value. */
MUSTER_API int muster_add(muster_t *m, const char *key, int64_t delta, int64_t *result, uint32_t timeout_ms);
/* TCPStore compare_set (see proto); *swapped (may be NULL) says whether it
 * wrote; *value (may be NULL, caller frees) receives the answer value. */
MUSTER_API int muster_compare_set(muster_t *m, const char *key, const void *expected, size_t elen,
                                  const void *desired, size_t dlen, int *swapped, void **value,
                                  size_t *vlen, uint32_t timeout_ms);
/* Delete key; *deleted (may be NULL) says whether it existed (an absent key
 * is MUSTER_OK with *deleted = 0, not an error). */
MUSTER_API int muster_delete(muster_t *m, const char *key, int *deleted, uint32_t timeout_ms);
/* *present = 1 when all n keys exist. */
MUSTER_API int muster_check(muster_t *m, const char *const *keys, size_t n, int *present, uint32_t timeout_ms);
/* Block until all n keys exist (server-enforced deadline). */
MUSTER_API int muster_wait(muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms);
/* Block until key holds a decimal count of at least at_least (> 0), the way
 * TCPStore's barrier waits on the count that muster_add keeps: the server
 * parks the call and re-checks at every write of key. */
MUSTER_API int muster_wait_count(muster_t *m, const char *key, int64_t at_least, uint32_t timeout_ms);
/* Number of keys in the namespace. */
MUSTER_API int muster_num_keys(muster_t *m, uint64_t *count, uint32_t timeout_ms);
/* Get n keys at once, all or nothing (MUSTER_ENOTFOUND when one is absent
 * and wait == 0).  values and lens are caller arrays of n entries; each
 * values[i] (NUL-terminated beyond lens[i]) is caller-owned: free each with
 * muster_free(), or all with muster_free_list() if values came from malloc. */
MUSTER_API int muster_multi_get(muster_t *m, const char *const *keys, size_t n, int wait, void **values,
                                size_t *lens, uint32_t timeout_ms);
/* Set n keys at once, atomically. */
MUSTER_API int muster_multi_set(muster_t *m, const char *const *keys, const void *const *values,
                                const size_t *lens, size_t n, uint32_t timeout_ms);
/* Append to key (created when absent); *length (may be NULL) gets the new size. */
MUSTER_API int muster_append(muster_t *m, const char *key, const void *value, size_t len, uint64_t *length,
                             uint32_t timeout_ms);
/* TCPStore's queues (its QUEUE_PUSH, QUEUE_POP, QUEUE_LEN), beside the
 * keys: a key may hold a value and a queue; a non-empty queue makes its key
 * present to muster_check and muster_wait, and a push releases one parked
 * wait (a blocking pop is muster_wait, then muster_queue_pop).  In memory
 * only: not kept by --data-dir, not replicated, not listed as keys.
 * Push: *length (may be NULL) gets the length after.  Pop: *before is the
 * length before; *value (muster_free) and *len hold the oldest value when
 * *before > 0, else *value is NULL. */
MUSTER_API int muster_queue_push(muster_t *m, const char *key, const void *value, size_t len, uint64_t *length,
                                 uint32_t timeout_ms);
MUSTER_API int muster_queue_pop(muster_t *m, const char *key, uint64_t *before, void **value, size_t *len,
                                uint32_t timeout_ms);
MUSTER_API int muster_queue_len(muster_t *m, const char *key, uint64_t *length, uint32_t timeout_ms);
/* One page of keys with prefix after `after` (NULL = from the start), at
 * most limit (0 = server max).  *keys is an array of NUL-terminated strings
 * (free with muster_free_list(keys, n)); *more says another page exists. */
MUSTER_API int muster_list(muster_t *m, const char *prefix, const char *after, uint32_t limit, char ***keys,
                           size_t *n, int *more, uint32_t timeout_ms);
/* Round trip to the server; *rtt_us (may be NULL) receives the time taken. */
MUSTER_API int muster_ping(muster_t *m, uint64_t *rtt_us, uint32_t timeout_ms);
/* Wait at barrier `name` until count arrivals; *round (may be NULL) gets the round. */
MUSTER_API int muster_barrier(muster_t *m, const char *name, uint32_t count, uint64_t *round, uint32_t timeout_ms);
/* As muster_barrier, and the round's release also answers with key's value at that moment:
 * MUSTER_OK with *value (caller frees with muster_free) and *len (may be NULL), or
 * MUSTER_ENOTFOUND when the key did not exist (the barrier was still passed; *round is set).
 * One round trip for "everyone arrived and everyone holds rank 0's id". */
MUSTER_API int muster_barrier_fetch(muster_t *m, const char *name, uint32_t count, const char *key, void **value,
                                    size_t *len, uint64_t *round, uint32_t timeout_ms);

/* ---------------------------------------------------------------- events */

typedef enum muster_event_kind {
    MUSTER_EVENT_SET = 1,           /* watch: key set; value present */
    MUSTER_EVENT_DELETE = 2,        /* watch: key deleted */
    MUSTER_EVENT_MEMBER_LOST = 3,   /* rendezvous: generation broken */
    MUSTER_EVENT_NODE_WAITING = 4,  /* rendezvous: a node waits to join */
    MUSTER_EVENT_SHUTDOWN = 5,      /* server draining */
    MUSTER_EVENT_WATCH_ENDED = 6,   /* watch: the server ended watch_id because this handle left too much
                                     * output unread; later changes under key (the prefix) were missed:
                                     * re-read them and watch again */
} muster_event_kind;

/* A pushed event.  Free with muster_event_free(). */
typedef struct muster_event {
    muster_event_kind kind;
    uint64_t watch_id;     /* watch events */
    char *key;             /* watch events (NUL-terminated) */
    void *value;           /* SET events */
    size_t value_len;
    uint64_t generation;   /* membership events */
    char *node_id;         /* membership events */
    char *reason;          /* shutdown */
} muster_event;

/* Watch keys with prefix; events arrive through muster_next_event(). */
MUSTER_API int muster_watch(muster_t *m, const char *prefix, uint64_t *watch_id, uint32_t timeout_ms);
/* Stop a watch. */
MUSTER_API int muster_unwatch(muster_t *m, uint64_t watch_id, uint32_t timeout_ms);
/* Next pushed event, waiting up to timeout_ms (0 = do not wait): returns
 * MUSTER_OK with *ev set, or MUSTER_ETIMEDOUT when none came. */
MUSTER_API int muster_next_event(muster_t *m, muster_event **ev, uint32_t timeout_ms);
/* Free an event; NULL is a no-op. */
MUSTER_API void muster_event_free(muster_event *ev);
/* Events dropped because the queue was full (65536 unread events): the
 * oldest go first.  A non-zero count means the caller missed changes. */
MUSTER_API uint64_t muster_events_dropped(const muster_t *m);

/* -------------------------------------------------------------- pipeline */

/* A batch of independent ops sent back to back and answered together: one
 * round trip instead of one per op.  Build it, run it once, read each op's
 * result by the index it was added at, destroy it.  Ops are not atomic as a
 * group (use muster_multi_set for that); the server applies them in order. */
typedef struct muster_pipeline muster_pipeline;

/* A new empty batch on m (m must outlive it); NULL with *err on failure. */
MUSTER_API muster_pipeline *muster_pipeline_create(muster_t *m, int *err);
/* Free the batch and its results; NULL is a no-op. */
MUSTER_API void muster_pipeline_destroy(muster_pipeline *p);
/* Add a set (the value is copied). */
MUSTER_API int muster_pipeline_set(muster_pipeline *p, const char *key, const void *value, size_t len);
/* Add a non-blocking get. */
MUSTER_API int muster_pipeline_get(muster_pipeline *p, const char *key);
/* Add an add. */
MUSTER_API int muster_pipeline_add(muster_pipeline *p, const char *key, int64_t delta);
/* Add a delete. */
MUSTER_API int muster_pipeline_delete(muster_pipeline *p, const char *key);
/* Number of ops added so far. */
MUSTER_API size_t muster_pipeline_count(const muster_pipeline *p);
/* Send every op and wait for all answers under one deadline.  MUSTER_OK
 * means every op was answered (each may still have failed: see
 * muster_pipeline_result); other codes are transport failures. */
MUSTER_API int muster_pipeline_run(muster_pipeline *p, uint32_t timeout_ms);
/* The outcome of op i after a run, as a muster_err.  For a get, *value and
 * *len (may be NULL) borrow the value until destroy; for an add, *number
 * (may be NULL) gets the new value; for a delete, *number is 1 when the key
 * existed.  MUSTER_EINVAL before the run or for i out of range. */
MUSTER_API int muster_pipeline_result(const muster_pipeline *p, size_t i, const void **value, size_t *len,
                                      int64_t *number);

#ifdef __cplusplus
}
#endif
#endif
