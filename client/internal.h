/*
 * Internals of libmuster shared by its source files (never installed).
 *
 * A handle owns one socket, an output buffer of packed frames not yet
 * written, an input buffer of bytes not yet decoded, a table of responses
 * that arrived for requests nobody is waiting on yet (pipelining and
 * out-of-order blocking ops), and a FIFO of pushed events.
 *
 * Calling pattern for an op (rdzv.c, watch.c; kv.c fills req with kvreq.c):
 *     Muster__Request req = MUSTER__REQUEST__INIT;  ...fill the op...
 *     Muster__Response *resp;
 *     int rc = call_run(m, &req, &resp, call_timeout(m, timeout_ms));
 *     if (rc == MUSTER_OK) { ...read resp->...; wire_free(resp); }
 * call_run submits the request as a call in flight (flight.c), which
 * assigns the id and sends it, and waits for that call to complete: a
 * non-OK status mapped to its muster_err (keeping the server's message for
 * muster_last_error), the result case checked against the op.  The
 * asynchronous calls (async.c) submit the same way with a callback instead
 * of waiting, so both run through one engine.
 *
 * Threads: every field of a handle is guarded by its lock (struct muster's
 * last section).  A thread waiting for a call either drives the socket
 * (polls it with the lock released) or sleeps on cond until the driver
 * hands over; see flight.c.
 *
 * Layers, lowest first; each file calls only files of the layers before
 * it, so no file depends on one that depends on it (tests/check_layers.sh
 * checks the built objects):
 *     deadline.c log.c url.c   clocks, the log callback, URL parsing
 *     error.c                  recording errors on the handle
 *     sock.c < tls.c           the socket, and TLS over it
 *     event.c                  the event queue and the watch records
 *     wire.c                   frames, pump, stash, one request on the wire
 *     conn.c                   connect, hello, close; the handle's accessors
 *     failover.c               reconnect, re-send, restore watches
 *     call.c                   call_run: wire or failover
 *     kvreq.c                  the key-value ops' Requests (kv.c, async.c)
 *     kv.c rdzv.c pipeline.c watch.c async.c   the public calls
 * The sections below follow that order.
 */
#ifndef MUSTER_CLIENT_INTERNAL_H
#define MUSTER_CLIENT_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <muster/muster.h>

#include "deadline.h"
#include "frame.h"

/* Added to a call's timeout for the client-side deadline, so the server's
 * TIMEOUT reply to a blocking op normally arrives before the client gives up. */
#define CALL_GRACE_MS 1000u
/* flight_submit's timeout_ms for a call with no client deadline (an armed recovery, rdzv.c). */
#define FLIGHT_FOREVER UINT32_MAX
/* Per-call default when neither the options nor the URL set one. */
#define CALL_DEFAULT_TIMEOUT_MS 30000u
/* Largest server frame accepted after the hello; a reply this large means a
 * confused peer, not a real answer (values are capped far lower). */
#define WIRE_MAX_FRAME (256u << 20)
/* Largest frame accepted before the hello reply (which is tiny). */
#define WIRE_MAX_HELLO_FRAME (64u << 10)
/* Most events queued before the oldest are dropped (see event.c). */
#define EVENT_QUEUE_MAX 65536u

/* Most NOT_LEADER redirects followed in one connect attempt before backing
 * off, so two standbys naming each other cannot loop. */
#define CONN_MAX_REDIRECTS 4
/* Most times one call is sent again after a failover before giving up
 * (each also bounded by the call's deadline). */
#define FAILOVER_MAX_RESENDS 8

struct stash_entry;
struct event_node;
struct flight;

/* A watch the caller holds on a failover handle (event.c keeps them, failover.c restores them). */
struct watch_reg {
    char *prefix;
    uint64_t id;          /* as the caller knows it */
    uint64_t server_id;   /* as the current connection knows it */
};

/* Limits announced by the server in its hello reply. */
struct conn_limits {
    uint32_t max_frame;
    uint32_t max_key;
    uint32_t max_value;
    uint32_t max_keys_per_request;
    uint32_t default_wait_timeout_ms;
    uint32_t heartbeat_timeout_ms;
};

/* A growable byte buffer; bytes [off, len) are live. */
struct buf {
    uint8_t *data;
    size_t off;
    size_t len;
    size_t cap;
};

struct ssl_st;
struct ssl_ctx_st;

struct muster {
    int fd;
    struct ssl_st *tls;            /* the TLS session when the URL asks for TLS (tls.c) */
    struct ssl_ctx_st *tls_ctx;
    int tls_refused;               /* the TLS peer sent an alert (e.g. refused our certificate) */
    int broken;                    /* 0, or the error that made the handle unusable */
    muster_url url;
    uint32_t default_timeout_ms;
    char client_name[128];
    int connect_final;            /* the last connect attempt named a host that does not exist */
    char credential[40];          /* $MUSTER_CREDENTIAL at connect: a member's, handed to its workers */
    muster_log_fn log_fn;
    void *log_arg;
    uint64_t rng;                  /* backoff jitter state (per handle: no globals) */

    /* Failover (m->url.failover): which endpoint worked last, where a
     * standby said the leader is, and what must be restored on reconnect. */
    size_t ep_cur;
    uint64_t conn_gen;             /* connections established so far */
    uint64_t watch_seq;            /* the last watch id handed to the caller */
    int has_redirect;
    muster_endpoint redirect;
    struct watch_reg *watches;     /* registered watches (event.c) */
    size_t n_watches;
    size_t cap_watches;
    int rdzv_member;               /* joined and not left on this connection */
    int rdzv_lost;                 /* membership ended by a reconnect: heartbeat says ESTALE */
    uint64_t rdzv_generation;
    char rdzv_node[128];
    /* An armed recovery (rdzv.c, muster_rdzv_arm): the arming its call in flight belongs to (0: none),
     * whether that call's answer is still to come, and its outcome once it came. */
    uint64_t armed_seq;
    uint64_t armed_made;           /* armings so far (each call's id for its callback) */
    int armed_pending;
    int armed_rc;
    uint64_t armed_generation;
    Muster__Response *armed_resp;
    char armed_detail[256];

    uint64_t next_id;
    uint64_t session_id;
    char server_version[64];
    struct conn_limits limits;

    struct buf out;
    struct buf in;
    struct stash_entry *stash;     /* uthash by request id */
    struct event_node *ev_head;
    struct event_node *ev_tail;
    size_t ev_count;
    uint64_t ev_dropped;

    char last_error[256];

    /* Threads and calls in flight (flight.c).  lock guards the whole handle. */
    pthread_mutex_t lock;
    pthread_cond_t cond;           /* a call completed, or the driver let go */
    int sync_ready;                /* lock, cond and wake_fd exist */
    int wake_fd;                   /* eventfd that interrupts the driver's poll */
    int driving;                   /* a thread polls the socket with the lock released */
    int closing;                   /* muster_close has begun: no new calls */
    struct flight *fl_head;        /* calls in flight, in submission order */
    struct flight *fl_tail;
    uint64_t fl_soonest;           /* no call's client deadline is before this (0: no call in flight) */
    int fl_unsent;                 /* some call may be waiting unsent (failover): flight_recover looks */
    struct flight *fl_ids;         /* those sent on this connection, by request id (uthash) */
    struct flight *done_head;      /* completed, callbacks not yet run */
    struct flight *done_tail;
    /* The caller's event loop (async.c): told the fd, events and next deadline when they change. */
    void (*loop_update)(void *arg, int fd, int events, int timeout_ms);
    void (*loop_detach)(void *arg);
    void *loop_arg;
    int loop_fd;
    int loop_events;
    uint64_t loop_deadline;
};

/* ------------------------------------------------------------ deadline.c */

/* The clock and deadlines: deadline.h, shared with libmuster-nccl and the CLI. */

/* ----------------------------------------------------------------- log.c */

/* Send a formatted diagnostic to the handle's log callback, if any. */
void log_emit(const muster_t *m, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* --------------------------------------------------------------- error.c */

/* Record a failure on m (message for muster_last_error) and return code. */
int error_set(muster_t *m, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Mark m unusable with code (and a message); returns code. */
int error_break(muster_t *m, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Map a wire status to a muster_err (unknown statuses become MUSTER_EPROTO). */
int error_from_status(int status);

/* ----------------------------------------------------------------- url.c */

/* Parse a NUL-terminated "HOST:PORT" or "[V6]:PORT" (a leader's address) into *e; 0 or -1. */
int url_parse_endpoint(const char *text, muster_endpoint *e);

/* ---------------------------------------------------------------- sock.c */

/* Resolve host:port and connect to the first address that answers, before
 * deadline; returns the non-blocking fd, or -1 with the reason in why. */
int sock_connect(const char *host, uint16_t port, uint64_t deadline, char *why, size_t whylen);  /* -2: no such host */
/* poll() fd for events until deadline; returns revents, 0 on timeout, -1 on error. */
int sock_wait(int fd, short events, uint64_t deadline);

/* ----------------------------------------------------------------- tls.c */

/* Run the TLS handshake on m's connected socket before deadline; MUSTER_OK or an error with why filled. */
int tls_connect(muster_t *m, uint64_t deadline, char *why, size_t n);
/* Free m's TLS session and context (before its socket is closed); safe without TLS. */
void tls_close(muster_t *m);
/* Whether OpenSSL holds decrypted bytes not yet read (0 without TLS). */
int tls_pending(const muster_t *m);
/* Read without waiting, like recv(MSG_DONTWAIT), through TLS when m uses it. */
ssize_t tls_recv(muster_t *m, void *buf, size_t n);
/* Write without waiting, like send(MSG_DONTWAIT | MSG_NOSIGNAL), through TLS when m uses it. */
ssize_t tls_send(muster_t *m, const void *buf, size_t n);
/* sock_wait for m's socket, answering POLLIN at once while TLS holds decrypted bytes. */
int tls_wait(muster_t *m, short events, uint64_t deadline);

/* --------------------------------------------------------------- event.c */

/* Queue a pushed event (takes ownership of ev). */
void event_push(muster_t *m, Muster__Event *ev);
/* Free every queued event. */
void event_clear(muster_t *m);
/* Record a watch the server registered (id as the caller knows it); a muster_err. */
int event_watch_add(muster_t *m, const char *prefix, uint64_t id);
/* The server's current id for the caller's watch id (itself when unknown). */
uint64_t event_watch_server_id(const muster_t *m, uint64_t id);
/* Whether the caller's watch id is recorded on m. */
int event_watch_known(const muster_t *m, uint64_t id);
/* Forget the caller's watch id. */
void event_watch_remove(muster_t *m, uint64_t id);
/* Free the watch records. */
void event_watch_clear(muster_t *m);
/* Queue a MEMBER_LOST event for this handle's own membership (after a reconnect). */
void event_push_lost(muster_t *m, uint64_t generation, const char *node_id);
/* Hand the oldest queued event (there must be one) to the caller as *ev
 * and drop it from the queue; MUSTER_ENOMEM leaves it queued. */
int event_take(muster_t *m, muster_event **ev);

/* ---------------------------------------------------------------- wire.c */

/* Send req once and wait for its response before deadline (no failover). */
int wire_once(muster_t *m, Muster__Request *req, Muster__Response **resp, uint64_t deadline);
/* Assign req the next id (into *id) and append its frame to the output
 * buffer; MUSTER_ELIMIT when it exceeds the server's frame limit. */
int wire_queue(muster_t *m, Muster__Request *req, uint64_t *id);
/* Write the whole output buffer before deadline, reading (and stashing)
 * whatever the server sends meanwhile so neither side stalls. */
int wire_flush(muster_t *m, uint64_t deadline);
/* Wait before deadline for the response to id; *resp is caller-owned (wire_free). */
int wire_wait(muster_t *m, uint64_t id, uint64_t deadline, Muster__Response **resp);
/* Map resp's status to a muster_err, recording the server's message; checks
 * an OK result's case against op. */
int wire_check(muster_t *m, const Muster__Response *resp, Muster__Request__OpCase op);
/* Drop a stashed response for id, if any (abandoned pipelined requests). */
void wire_forget(muster_t *m, uint64_t id);
/* Remove and return the oldest stashed response of any id, or NULL. */
Muster__Response *wire_take(muster_t *m);
/* Write what the socket takes of the output buffer without waiting; a muster_err. */
int wire_write_some(muster_t *m);
/* Whether queued output waits to be written. */
int wire_pending_out(const muster_t *m);
/* Read what the socket has (waiting until deadline for at least one frame
 * when block != 0) and dispatch complete frames; returns a muster_err. */
int wire_pump(muster_t *m, uint64_t deadline, int block);
/* Write a ClientFrame (the hello) straight to the socket before deadline. */
int wire_send_frame(muster_t *m, const Muster__ClientFrame *frame, uint64_t deadline);
/* Read the next ServerFrame before deadline, no dispatch (for the hello reply). */
int wire_read_frame(muster_t *m, uint64_t deadline, size_t cap, Muster__ServerFrame **out);
/* Free a response returned by call_run, wire_once or wire_wait; NULL is a no-op. */
void wire_free(Muster__Response *resp);
/* Forget unsent and half-read bytes (a connection that is gone); the stash stays. */
void wire_reset_io(muster_t *m);
/* Free the handle's buffers and stashed responses. */
void wire_clear(muster_t *m);

/* ---------------------------------------------------------------- conn.c */

/* Connect and say hello before deadline, trying the URL's endpoints (and
 * redirects) with backoff; the socket only, stash and events are kept. */
int conn_establish(muster_t *m, uint64_t deadline);
/* Close the socket and forget unsent and half-read bytes (not the stash or events). */
void conn_drop(muster_t *m);
/* Free the handle and everything it holds, with no callback run (calls in flight must be gone). */
void conn_free(muster_t *m);

/* ------------------------------------------------------------ failover.c */

/* Whether op may be sent again after the connection carrying it was lost. */
int failover_idempotent(Muster__Request__OpCase op);
/* Whether m lost its connection (or was redirected) in a way failover repairs. */
int failover_lost(const muster_t *m);
/* Remember a NOT_LEADER answer's leader address and drop the connection to go there. */
void failover_redirect(muster_t *m, const char *leader);
/* Before a call on a failover handle: notice a closed socket, reconnect a
 * lost connection, and restore watches and membership state; a muster_err. */
int failover_ready(muster_t *m, uint64_t deadline);
/* call_run for a failover handle: reconnect, follow the leader and send
 * again what is safe to send again, all before deadline. */
int failover_run(muster_t *m, Muster__Request *req, Muster__Response **resp, uint64_t deadline);
/* Set the server-side timeout of a blocking op to what is left before deadline. */
void failover_set_timeout(Muster__Request *req, uint64_t deadline);

/* -------------------------------------------------------------- flight.c */

/* How one call ended, handed to its completion function. */
struct flight_result {
    int rc;                        /* a muster_err */
    int answered;                  /* the server answered (resp is set, rc is its status) */
    int undecided;                 /* lost in flight on a failover handle and not safe to send again */
    Muster__Request__OpCase op;
    Muster__Response *resp;        /* the answer; a completion function may take it (set it NULL) */
    const char *detail;            /* the message for rc ("" for MUSTER_OK) */
    uint64_t started_us;           /* when the call was submitted (deadline_now_us) */
};

/* Runs once per submitted call, without the handle's lock, on the thread
 * that completed it (a driving thread, the caller's loop, or muster_close). */
typedef void (*flight_fn)(muster_t *m, struct flight_result *r, void *arg);

/* Take and release the handle's lock. */
void flight_lock(muster_t *m);
void flight_unlock(muster_t *m);
/* Submit req as a call in flight with the client deadline timeout_ms +
 * CALL_GRACE_MS; fn(arg) runs exactly once when MUSTER_OK is returned,
 * never otherwise.  req is only read during the call. */
int flight_submit(muster_t *m, Muster__Request *req, uint32_t timeout_ms, flight_fn fn, void *arg);
/* Until ready(m, arg) holds (checked under the lock) or deadline passes
 * (0: no deadline of its own), drive the socket or wait for the thread
 * that does; MUSTER_OK or MUSTER_ETIMEDOUT. */
int flight_wait(muster_t *m, int (*ready)(muster_t *m, void *arg), void *arg, uint64_t deadline);
/* Decrement *count under the lock and wake the waiters (completion functions of waiting callers). */
void flight_signal(muster_t *m, int *count);
/* Wake whoever waits on the handle (a waiter's condition changed); called with the lock held. */
void flight_broadcast(muster_t *m);
/* Do the socket work that revents (poll bits, 0 for none) allows, complete
 * calls and run their callbacks; the caller holds no lock. */
void flight_handle(muster_t *m, short revents);
/* What the driving loop should wait for: fd, POLLIN/POLLOUT bits, and the
 * milliseconds until the next deadline (-1: none, 0: work is due now). */
void flight_wants(muster_t *m, int *fd, short *events, int *timeout_ms);
/* Complete every call in flight with MUSTER_ECANCELED and refuse new ones (muster_close). */
void flight_cancel_all(muster_t *m);

/* ---------------------------------------------------------------- call.c */

/* The effective timeout for a call: timeout_ms, or the handle default for 0. */
uint32_t call_timeout(const muster_t *m, uint32_t timeout_ms);
/* Send req and wait for its response; see the top of this file. */
int call_run(muster_t *m, Muster__Request *req, Muster__Response **resp, uint32_t timeout_ms);
/* Send req and wait for its response, which says nothing more than its status; the status. */
int call_run_status(muster_t *m, Muster__Request *req, uint32_t timeout_ms);

/* --------------------------------------------------------------- kvreq.c */

/* One key-value op's Request, filled by a kvreq_* function from the op's
 * arguments for kv.c (call_run) and async.c (flight_submit).  req points
 * into op, so a filled kvreq is used where it was filled and not copied;
 * it borrows the caller's keys and values until kvreq_free. */
struct kvreq {
    Muster__Request req;
    union {
        Muster__SetReq set;
        Muster__GetReq get;
        Muster__AddReq add;
        Muster__CompareSetReq compare_set;
        Muster__DeleteReq delete_;
        Muster__CheckReq check;
        Muster__WaitReq wait;
        Muster__NumKeysReq num_keys;
        Muster__MultiGetReq multi_get;
        Muster__MultiSetReq multi_set;
        Muster__AppendReq append;
        Muster__ListReq list;
        Muster__PingReq ping;
        Muster__BarrierReq barrier;
        Muster__QueuePushReq queue_push;
        Muster__QueuePopReq queue_pop;
        Muster__QueueLenReq queue_len;
    } op;
    ProtobufCBinaryData *vals;     /* multi_set's value array, owned (kvreq_free) */
    char *key1;                    /* a one-key list's key (kvreq_wait_count) */
    uint32_t timeout_ms;           /* the call's effective timeout (call_timeout) */
};

/* Each fills *k for its op and returns MUSTER_OK, or MUSTER_EINVAL for
 * arguments the op refuses (NULL m or key, NULL bytes with a length, an
 * empty or NULL-holding key list, a barrier count of 0), leaving *k
 * unfilled; kvreq_multi_set may also fail with MUSTER_ENOMEM.  Blocking
 * ops send the effective timeout to the server. */
int kvreq_set(struct kvreq *k, muster_t *m, const char *key, const void *value, size_t len, uint32_t timeout_ms);
int kvreq_get(struct kvreq *k, muster_t *m, const char *key, int wait, uint32_t timeout_ms);
int kvreq_add(struct kvreq *k, muster_t *m, const char *key, int64_t delta, uint32_t timeout_ms);
int kvreq_compare_set(struct kvreq *k, muster_t *m, const char *key, const void *expected, size_t elen,
                      const void *desired, size_t dlen, uint32_t timeout_ms);
int kvreq_delete(struct kvreq *k, muster_t *m, const char *key, uint32_t timeout_ms);
int kvreq_check(struct kvreq *k, muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms);
int kvreq_wait(struct kvreq *k, muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms);
int kvreq_wait_count(struct kvreq *k, muster_t *m, const char *key, int64_t at_least, uint32_t timeout_ms);
int kvreq_wait_skip(struct kvreq *k, muster_t *m, const char *key, uint64_t skip, uint32_t timeout_ms);
int kvreq_num_keys(struct kvreq *k, muster_t *m, uint32_t timeout_ms);
int kvreq_multi_get(struct kvreq *k, muster_t *m, const char *const *keys, size_t n, int wait, uint32_t timeout_ms);
int kvreq_multi_set(struct kvreq *k, muster_t *m, const char *const *keys, const void *const *values,
                    const size_t *lens, size_t n, uint32_t timeout_ms);
int kvreq_append(struct kvreq *k, muster_t *m, const char *key, const void *value, size_t len,
                 uint32_t timeout_ms);
int kvreq_list(struct kvreq *k, muster_t *m, const char *prefix, const char *after, uint32_t limit,
               uint32_t timeout_ms);
int kvreq_ping(struct kvreq *k, muster_t *m, const void *payload, size_t len, uint32_t timeout_ms);
int kvreq_queue_push(struct kvreq *k, muster_t *m, const char *key, const void *value, size_t len,
                     uint32_t timeout_ms);
int kvreq_queue_pop(struct kvreq *k, muster_t *m, const char *key, uint32_t timeout_ms);
int kvreq_queue_len(struct kvreq *k, muster_t *m, const char *key, uint32_t timeout_ms);
int kvreq_barrier(struct kvreq *k, muster_t *m, const char *name, uint32_t count, const char *key,
                  uint32_t timeout_ms);
/* Free what a filled k owns; safe to call once after any successful fill. */
void kvreq_free(struct kvreq *k);

#endif
