/*
 * Internals shared by the TCPStore front end's files: tcpstore.c (listener,
 * connections, input loop, replies), tcpstore_ops.c (the op table and handlers),
 * tcpstore_park.c (parked WAIT and BARRIER callers, the core's queues) and
 * tcpstore_watch.c (the old numbering's WATCH_KEY, on the core's watches).  The wire codec (numberings,
 * grammars, the incremental request decoder, reply encoding) is proto/tscodec.c,
 * shared with the relay of `muster run`.
 */
#ifndef MUSTERD_TCPSTORE_INT_H
#define MUSTERD_TCPSTORE_INT_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "conn_io.h"
#include "conn_life.h"
#include "core.h"
#include "keyspace.h"
#include "stats.h"
#include "tscodec.h"

struct source;

struct server;
struct ns;
struct listener;
struct event;
struct waiter;

struct ts_park;

/* One TCPStore client connection. */
struct ts_conn {
    struct conn_life life; /* first: socket, buffers, state, deadlines, the peer's address (conn_life.c) */
    struct tcpstore *ts;
    struct ts_conn *prev, *next;
    enum ts_era era;
    struct ts_req req;
    struct tscodec_sink sink; /* replies: tcpstore_put on this connection */
    struct ts_park *park; /* the parked WAIT or BARRIER, or NULL */
    size_t nwatches;          /* its WATCH_KEY registrations: core watches it owns (--max-watches-per-conn) */
    struct core_share share; /* its parked request, and its address's (--max-waiters-per-source) */
    struct source *src;      /* its address's entry (source.c), or NULL */
};

/* A parked WAIT or BARRIER caller: its core waiter. */
struct ts_park {
    struct ts_conn *c;
    struct waiter *w; /* WAIT's on its keys (queue-aware), BARRIER's on a count */
};

/* A watched key: the value it last held (sent as a change's old value) and its registrations (core watches
 * of the key, tcpstore_watch.c). */
struct ts_wkey {
    UT_hash_handle hh;
    size_t refs;
    uint8_t *val; /* malloc'd; NULL when empty or absent */
    size_t vlen;
    int present;  /* the key exists */
    size_t klen;
    char key[];
};

/* The front end: one listener, one namespace. */
struct tcpstore {
    struct server *srv;
    struct ns *ns;
    struct listener *listener;
    struct tscodec_limits lim; /* --tcpstore-max-key, -value, -keys-per-request, -request */
    struct ts_conn *conns;
    size_t nconns;
    struct ts_wkey *wkeys;
    struct tscodec_out frame; /* the callback frame of the change being fanned out (tcpstore_watch.c) */
    uint64_t next_id;
};

/* tcpstore.c: replies and connection control. */
/* Queue raw bytes on c's output. */
void tcpstore_put(struct ts_conn *c, const void *p, size_t n);
/* Count stat, log why at info level and close c (TCPStore has no error reply). */
void tcpstore_fail(struct ts_conn *c, enum stat_id stat, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same for a well-formed request the store refused: close once the replies before it went out. */
void tcpstore_decline(struct ts_conn *c, enum stat_id stat, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Close c at once (freed on a later loop turn); its parked request is dropped silently. */
void tcpstore_close(struct ts_conn *c, const char *why);
/* Flush what c has queued, then close it. */
void tcpstore_finish(struct ts_conn *c);
/* c's parked request ended: go on with its buffered input on a later callback. */
void tcpstore_resume(struct ts_conn *c);
/* Whether bytes can still be queued for c. */
int tcpstore_live(const struct ts_conn *c);
/* The peer's address as text, formatted on first use. */
const char *tcpstore_peer(struct ts_conn *c);

/* tcpstore_ops.c: the op table. */
/* Handle one decoded request. */
void tsops_dispatch(struct ts_conn *c, struct ts_req *r);

/* tcpstore_park.c: parked callers and queues. */
/* WAIT: answer STOP_WAITING now when every key is present, else park c. */
void tspark_wait(struct ts_conn *c, struct ts_req *r);
/* BARRIER: count the arrival at key; answer or park c. */
void tspark_barrier(struct ts_conn *c, const char *key, size_t klen, int64_t world_size);
/* CANCEL_WAIT: drop c's parked request and answer WAIT_CANCELED. */
void tspark_cancel_wait(struct ts_conn *c);
/* Drop c's parked request without an answer (its connection closes or gave up). */
void tspark_abandon(struct ts_conn *c);
/* Whether key holds a value or a non-empty queue. */
int tspark_present(struct tcpstore *ts, const char *key, size_t klen);
/* QUEUE_PUSH: append a value (taken) and wake one parked WAIT on the key; 0, or -1 over the limits. */
int tspark_queue_push(struct ts_conn *c, const char *key, size_t klen, uint8_t *val, size_t vlen);
/* QUEUE_POP: answer the length before the pop, then the value when there was one. */
void tspark_queue_pop(struct ts_conn *c, const char *key, size_t klen);
/* The length of the queue at key. */
size_t tspark_queue_len(struct tcpstore *ts, const char *key, size_t klen);

/* tcpstore_watch.c: WATCH_KEY (old numbering). */
/* WATCH_KEY: register a watch of key for c and answer KEY_CALLBACK_REGISTERED. */
void tswatch_register(struct ts_conn *c, const char *key, size_t klen);
/* Drop every watch of c (it is being freed), with its references to the watched keys. */
void tswatch_conn_gone(struct ts_conn *c);
/* Free every watched key left and the frame buffer (at exit, after every connection). */
void tswatch_fini(struct tcpstore *ts);

#endif
