/* Connection I/O for both front ends: plain sockets on bare events, TLS on bufferevent_openssl (native only). */
#ifndef MUSTERD_CONN_IO_H
#define MUSTERD_CONN_IO_H

#include <stddef.h>
#include <stdint.h>

#include "persist.h"

struct server;
struct conn_io;
struct bufferevent;
struct event;
struct evbuffer;

/* What the owner of a connection's I/O (conn.c, tcpstore.c) is told. */
struct conn_io_ops {
    /* Handle input: buf, n bytes just read while the input buffer is empty (the owner keeps what it does
     * not consume), or NULL: what the input buffer holds. */
    void (*input)(struct conn_io *io, const uint8_t *buf, size_t n);
    /* Output was written out (or nothing was queued): act on the new level. */
    void (*written)(struct conn_io *io);
    /* The peer closed (error 0) or the socket failed (error 1), as why says. */
    void (*closed)(struct conn_io *io, int error, const char *why);
};

/* One connection's socket, buffers and events; embedded in its owner's struct. */
struct conn_io {
    const struct conn_io_ops *ops;
    struct server *srv;
    struct conn_io *prev_io, *next_io; /* srv->ios */
    size_t counted;            /* bytes of in and out counted in the server's buffer total */
    struct bufferevent *bev;   /* TLS connections only */
    struct event *rev, *wev;   /* plain connections: persistent read; write while output is left */
    struct event *aev;         /* plain connections: frames left after a batch (activated only, never added) */
    struct event *cev;         /* the peer's close (EPOLLRDHUP), watched while reading is off */
    struct evbuffer *in, *out; /* input not yet handled, output not yet written (a bufferevent's own with TLS) */
    int fd;                    /* plain connections' socket */
    int busy;                  /* inside its read callback: replies are written once at its end */
    int writing;               /* wev is added */
    int dead;                  /* stopped for good: no callback acts any more */
    int got_input;             /* some input arrived (with TLS: the handshake finished) */
    size_t want;               /* bytes the input must hold before the next frame can be handled */
    size_t ahead;              /* input read ahead of that frame before reading waits (0: the default) */
    struct persist_hold hold;  /* replies waiting for the log to be durable (persist.c) */
    struct shared_tally *tally; /* bytes out holds by reference, counted once elsewhere (NULL: none yet) */
};

/* Set up io around fd (tls: through OpenSSL) with the owner's ops; 0, or -1 with fd closed and nothing to free. */
int conn_io_open(struct conn_io *io, struct server *srv, int fd, int tls, const struct conn_io_ops *ops);
/* The tally of the shared bytes io's output holds by reference (made on first use); NULL when memory ran out. */
struct shared_tally *conn_io_tally(struct conn_io *io);
/* Release io and close its socket. */
void conn_io_free(struct conn_io *io);
/* Start reading and writing (after accept). */
void conn_io_start(struct conn_io *io);
/* Stop every callback of io for good (its connection is being closed). */
void conn_io_stop(struct conn_io *io);
/* Turn reading from the socket on or off (backpressure). */
void conn_io_reading(struct conn_io *io, int on);
/* Output was queued: write it at the end of the read callback, or on this loop turn when outside it. */
void conn_io_kick(struct conn_io *io);
/* Input holds frames left over after a batch: handle them on a later turn. */
void conn_io_again(struct conn_io *io);
/* The input must hold want bytes before the next frame can be handled. */
void conn_io_want(struct conn_io *io, size_t want);
/* Let the input grow to bytes ahead of the frame being waited for before reading waits (0: the default). */
void conn_io_read_ahead(struct conn_io *io, size_t bytes);
/* Whether the input holds as much as is read ahead of the frame being waited for (reading then waits). */
int conn_io_full(const struct conn_io *io);
/* The connection is closing once its output is out: decide on a later turn (the output may be empty). */
void conn_io_finish(struct conn_io *io);
/* Shut the write side of the socket. */
void conn_io_shutdown(struct conn_io *io);
/* Shut the write side and discard the input held, so a close sends no reset (a failed TLS connection). */
void conn_io_discard_input(struct conn_io *io);

/* When the request incomplete in an input holding held bytes began: now, partial_ms, or 0 (none);
 * last_done_ms is when the last whole request was taken. */
uint64_t conn_io_partial_since(uint64_t partial_ms, uint64_t last_done_ms, size_t held);

#endif
