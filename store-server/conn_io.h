/* Connection I/O: plain sockets on bare events, TLS on bufferevent_openssl, behind one small interface. */
#ifndef MUSTERD_CONN_IO_H
#define MUSTERD_CONN_IO_H

#include <stddef.h>
#include <stdint.h>

struct conn;
struct evbuffer;

/* Set up c's I/O around fd (tls: through OpenSSL); 0, or -1 with fd closed and nothing left to free. */
int conn_io_open(struct conn *c, int fd, int tls);
/* Release c's I/O and close its socket. */
void conn_io_free(struct conn *c);
/* Start reading and writing (after accept). */
void conn_io_start(struct conn *c);
/* Stop every callback of c for good (it is being closed). */
void conn_io_stop(struct conn *c);
/* The buffer replies are packed into. */
struct evbuffer *conn_io_out(struct conn *c);
/* The buffer of input received but not yet handled. */
struct evbuffer *conn_io_in(struct conn *c);
/* Turn reading from the socket on or off (backpressure). */
void conn_io_reading(struct conn *c, int on);
/* Output was queued outside c's own input handling: write it on this loop turn. */
void conn_io_kick(struct conn *c);
/* Input holds frames left over after a batch: handle them on a later turn. */
void conn_io_again(struct conn *c);
/* The input must hold want bytes before the next frame can be handled. */
void conn_io_want(struct conn *c, size_t want);
/* The connection is closing once its output is out: decide on a later turn (the output may be empty). */
void conn_io_finish(struct conn *c);
/* Shut the write side of the socket. */
void conn_io_shutdown(struct conn *c);

/* Provided by conn.c: handle input (buf, n bytes just read, or NULL: what the input buffer holds). */
void conn_input(struct conn *c, const uint8_t *buf, size_t n);
/* Provided by conn.c: output was written out (or nothing was queued); act on the new level. */
void conn_output_written(struct conn *c);

#endif
