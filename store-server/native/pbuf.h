/* Generic access to protobuf-c oneof members through message descriptors. */
#ifndef MUSTERD_PBUF_H
#define MUSTERD_PBUF_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

/* The sub-message msg holds in oneof member f (a message field of msg's descriptor), or NULL when f is
 * none, or not a oneof message member, or not the member set.  The caller looks f up (once: ops.c). */
ProtobufCMessage *pbuf_oneof_at(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f);
/* Put sub into the oneof member of msg whose type is sub's type; -1 when msg has no such member. */
int pbuf_oneof_set(ProtobufCMessage *msg, const ProtobufCMessage *sub);
/* Whether the packed message of n bytes at p (of type d) has a string field, at any depth, holding a NUL
 * byte: protobuf-c hands such a string over cut at the NUL, so it cannot be taken faithfully. */
int pbuf_string_has_nul(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n);

/* Read a varint whose value fits 64 bits at *p (before end) into *v; 0, or -1 when it runs past end or
 * does not fit.  Inline, as the writer below: the request fast path (fastpath.c) reads a few per request. */
static inline int pbuf_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;
    for (unsigned i = 0; i < 10 && *p < end; i++) {
        uint8_t b = *(*p)++;
        if (i == 9 && b > 1)
            return -1;
        r |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

/* Put v as a varint at p (p NULL: only counted); the bytes it takes. */
static inline size_t pbuf_varint_put(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (p)
            p[n] = b | (v ? 0x80 : 0);
        n++;
    } while (v);
    return n;
}

/* Put the key of msg type d's field named field (wire type 2: length-delimited) and the length len at p
 * (p NULL: only counted); the bytes they take, or 0 when d has no such field.  Lets a frame be composed
 * around bytes packed once elsewhere: protobuf-c packs only whole messages. */
size_t pbuf_put_len_key(uint8_t *p, const ProtobufCMessageDescriptor *d, const char *field, size_t len);

#endif
