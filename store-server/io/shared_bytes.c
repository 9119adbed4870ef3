/*
 * One copy of bytes that many peers are sent: the members of a large
 * generation, an HTTP answer of many jobs.  Copying them into every
 * peer's buffer costs N times their size in one loop turn (N answers of
 * an N-member list is O(N^2) bytes); a block is instead added to each
 * buffer by reference (evbuffer_add_reference), and freed when the last
 * buffer has written or dropped it.  The block counts once against
 * --max-buffer-memory, and each buffer's owner subtracts what its buffer
 * holds by reference (struct shared_tally) from its own count.
 */
#include "shared_bytes.h"

#include <event2/buffer.h>
#include <stdlib.h>

#include "server.h"

struct shared_bytes {
    struct server *srv;
    size_t refs, len;
    int extra_stat;
    uint8_t data[];
};

/* One buffer's reference: the block, and the tally its length is added to. */
struct shared_ref {
    struct shared_bytes *b;
    struct shared_tally *t;
};

/* Add n (or take it, when neg) to buffer_bytes_current and the block's extra stat. */
static void shared_bytes_count(struct shared_bytes *b, int neg)
{
    uint64_t d = neg ? -(uint64_t)b->len : (uint64_t)b->len;
    b->srv->stats.c[STAT_BUFFER_BYTES] += d;
    if (b->extra_stat >= 0)
        b->srv->stats.c[b->extra_stat] += d;
}

/* A new block of len bytes to fill, counted; NULL when memory ran out. */
struct shared_bytes *shared_bytes_new(struct server *srv, size_t len, int extra_stat)
{
    struct shared_bytes *b = malloc(sizeof *b + len);
    if (!b)
        return NULL;
    *b = (struct shared_bytes){srv, 1, len, extra_stat};
    shared_bytes_count(b, 0);
    return b;
}

/* The block's bytes. */
uint8_t *shared_bytes_data(struct shared_bytes *b)
{
    return b->data;
}

/* The block's length. */
size_t shared_bytes_len(const struct shared_bytes *b)
{
    return b->len;
}

/* Take one more reference to b. */
struct shared_bytes *shared_bytes_ref(struct shared_bytes *b)
{
    b->refs++;
    return b;
}

/* Drop one reference, freeing and uncounting the block with the last. */
void shared_bytes_unref(struct shared_bytes *b)
{
    if (!b || --b->refs > 0)
        return;
    shared_bytes_count(b, 1);
    free(b);
}

/* A new tally with its owner's reference. */
struct shared_tally *shared_tally_new(void)
{
    struct shared_tally *t = malloc(sizeof *t);
    if (t)
        *t = (struct shared_tally){1, 0};
    return t;
}

/* Drop one reference to t. */
void shared_tally_unref(struct shared_tally *t)
{
    if (t && --t->refs == 0)
        free(t);
}

/* evbuffer's cleanup of a reference: the buffer wrote or dropped the bytes. */
static void shared_bytes_done(const void *data, size_t len, void *arg)
{
    struct shared_ref *r = arg;
    (void)data;
    (void)len;
    if (r->t) {
        r->t->bytes -= r->b->len;
        shared_tally_unref(r->t);
    }
    shared_bytes_unref(r->b);
    free(r);
}

/* Append the block to out by reference, counted in t while it is there. */
int shared_bytes_send(struct shared_bytes *b, struct evbuffer *out, struct shared_tally *t)
{
    if (b->len == 0)
        return 0;   /* nothing to send, and evbuffer may never free an empty reference */
    struct shared_ref *r = malloc(sizeof *r);
    if (!r)
        return -1;
    *r = (struct shared_ref){b, t};
    if (evbuffer_add_reference(out, b->data, b->len, shared_bytes_done, r) != 0) {
        free(r);
        return -1;
    }
    b->refs++;
    if (t) {
        t->refs++;
        t->bytes += b->len;
    }
    return 0;
}
