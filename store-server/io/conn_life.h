/* One connection's life, the same for both front ends: states, the one timer and its deadlines,
 * backpressure on output, the flush-then-linger close and the deferred free. */
#ifndef MUSTERD_CONN_LIFE_H
#define MUSTERD_CONN_LIFE_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "conn_io.h"

struct server;
struct event;
struct conn_life;

enum life_state {
    LIFE_OPEN,     /* serving requests (greeting while the first one is awaited) */
    LIFE_FLUSHING, /* writing its last bytes, input discarded; then lingers */
    LIFE_LINGER,   /* write side shut; discarding input until the peer's EOF or a short timer */
    LIFE_DEAD,     /* stopped; released from a fresh loop turn */
};

/* Which of the owner's deadlines passed. */
enum life_expiry {
    LIFE_EXP_GREETING, /* the first request (a native hello, a TCPStore client's first request) */
    LIFE_EXP_REQUEST,  /* a request stayed incomplete for --request-timeout */
    LIFE_EXP_IDLE,     /* nothing arrived for --idle-timeout and nothing waits on the server */
};

/* What a front end answers for its connections. */
struct life_ops {
    const char *label; /* names the connection in log lines ("conn", "tcpstore conn") */
    /* A deadline passed: count it and fail or close the connection. */
    void (*expired)(struct conn_life *l, enum life_expiry why);
    /* Whether a silent connection is waiting on the server (a parked request, a membership, watches)
     * rather than idle. */
    int (*waiting)(const struct conn_life *l);
    /* The close hook: release what the front end and its subsystems hold for the connection, call
     * conn_life_fini and free it.  Runs from a fresh loop turn after conn_life_close, or at exit. */
    void (*release)(struct conn_life *l);
};

/* Embedded first in each front end's connection. */
struct conn_life {
    struct conn_io io; /* socket, buffers, events and held replies (conn_io.c) */
    const struct life_ops *ops;
    struct event *timer; /* every deadline below, and the deferred release */
    enum life_state state;
    int paused;          /* reading stopped because output is above --max-output */
    int greeting;        /* the first request is still awaited (greet_ms bounds it, 0: unbounded) */
    uint64_t id;         /* the session id in log lines */
    uint64_t state_ms, paused_ms, greet_ms;
    uint64_t last_rx_ms; /* when the last whole request was taken */
    uint64_t answer_ms;  /* when output was last queued, or the timer last found the connection waiting */
    uint64_t partial_ms; /* when the request now incomplete began, or 0 */
    struct sockaddr_in6 addr; /* the peer's address (an AF_INET one fits too) */
    char peer[64];            /* the same as text, formatted on first use: read it through conn_life_peer() */
};

/* Set up l around an accepted fd (tls: through OpenSSL) with the front end's I/O and life callbacks;
 * open, greeting, not yet reading.  0, or -1 with fd closed and nothing to free. */
int conn_life_open(struct conn_life *l, struct server *srv, int fd, int tls, const struct conn_io_ops *io_ops,
                   const struct life_ops *ops, const struct sockaddr *sa, uint64_t id);
/* Free what conn_life_open made (the release hook calls it). */
void conn_life_fini(struct conn_life *l);
/* Start reading, with the first request due by greet_ms (0: no bound yet). */
void conn_life_start(struct conn_life *l, uint64_t greet_ms);
/* Bound the first request by greet_ms from now on (while still greeting). */
void conn_life_greet_by(struct conn_life *l, uint64_t greet_ms);
/* The first request came: the idle and request deadlines apply from now. */
void conn_life_greeted(struct conn_life *l);
/* Whether bytes can still be queued for l. */
int conn_life_live(const struct conn_life *l);
/* Output was queued on out: write it soon, and stop reading a client whose output passed --max-output. */
void conn_life_sent(struct conn_life *l, struct evbuffer *out);
/* The input now holds held bytes of an incomplete request: start or stop its --request-timeout. */
void conn_life_note_partial(struct conn_life *l, size_t held);
/* Stop reading requests, flush what is queued, then linger and close (the drain; a failed client). */
void conn_life_finish(struct conn_life *l);
/* Close at once: stop every callback; the release hook runs on a later loop turn. */
void conn_life_close(struct conn_life *l, const char *why);
/* The written callback both front ends give conn_io: finish a close, or resume a paused reader. */
void conn_life_written(struct conn_io *io);
/* The connection whose I/O io is. */
struct conn_life *conn_life_of(struct conn_io *io);
/* The peer's address as text ("1.2.3.4:5" or "[::1]:5"), formatted on first use. */
const char *conn_life_peer(struct conn_life *l);

#endif
