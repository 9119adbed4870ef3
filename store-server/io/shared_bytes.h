/* Bytes sent to many peers from one copy: a reference-counted block that output buffers hold by
 * reference, its size counted once in buffer_bytes_current while any copy still waits to be sent. */
#ifndef MUSTERD_SHARED_BYTES_H
#define MUSTERD_SHARED_BYTES_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;
struct server;
struct shared_bytes;

/* How many shared bytes one buffer holds by reference: its owner subtracts them from what it counts, so
 * the block is counted once.  Reference-counted, since a buffer can outlive its owner (a bufferevent's
 * buffers are freed after it). */
struct shared_tally {
    size_t refs, bytes;
};

/* A new block of len bytes to fill (one reference, the caller's), counted in buffer_bytes_current and, when
 * extra_stat is not negative, in that stat too; NULL when memory ran out. */
struct shared_bytes *shared_bytes_new(struct server *srv, size_t len, int extra_stat);
/* The block's bytes (to fill before it is first sent). */
uint8_t *shared_bytes_data(struct shared_bytes *b);
/* The block's length. */
size_t shared_bytes_len(const struct shared_bytes *b);
/* Take one more reference to b; b. */
struct shared_bytes *shared_bytes_ref(struct shared_bytes *b);
/* Drop one reference, freeing (and uncounting) the block with the last; NULL is fine. */
void shared_bytes_unref(struct shared_bytes *b);
/* Append the block to out by reference, holding a reference until out drops those bytes, and add its
 * length to t (NULL: none) for as long; 0, or -1 when memory ran out (nothing added). */
int shared_bytes_send(struct shared_bytes *b, struct evbuffer *out, struct shared_tally *t);

/* A new tally with one reference (its owner's); NULL when memory ran out. */
struct shared_tally *shared_tally_new(void);
/* Drop one reference to t; NULL is fine. */
void shared_tally_unref(struct shared_tally *t);

#endif
