/*
 * Oneof members through descriptors: the op table and the reply path name
 * a sub-message by field number or by its type instead of a switch over
 * every case, so adding an op to the proto needs no code here.  The same
 * descriptors let the daemon find a string field holding a NUL byte in a
 * packed frame, which protobuf-c would otherwise silently cut.
 */
#include "pbuf.h"

#include <stdint.h>
#include <string.h>

/* The sub-message msg holds in oneof member f (a message field of msg's descriptor), or NULL when f is
 * none, or not a oneof message member, or not the member set. */
ProtobufCMessage *pbuf_oneof_at(const ProtobufCMessage *msg, const ProtobufCFieldDescriptor *f)
{
    if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE || !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
        return NULL;
    const char *base = (const char *)msg;
    if (*(const uint32_t *)(base + f->quantifier_offset) != f->id)
        return NULL;
    return *(ProtobufCMessage *const *)(base + f->offset);
}

/* Put sub into the oneof member of msg whose type is sub's type; -1 when msg has no such member. */
int pbuf_oneof_set(ProtobufCMessage *msg, const ProtobufCMessage *sub)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->descriptor != sub->descriptor ||
            !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
            continue;
        char *base = (char *)msg;
        *(uint32_t *)(base + f->quantifier_offset) = f->id;
        *(const ProtobufCMessage **)(base + f->offset) = sub;
        return 0;
    }
    return -1;
}

/* pbuf_string_has_nul, with a bound on nesting (deeper frames are left to the unpacker). */
static int pbuf_nul_at(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n, int depth)
{
    const uint8_t *end = p + n;
    uint64_t tag, len;
    while (p < end && pbuf_varint_get(&p, end, &tag) == 0) {
        switch (tag & 7) {
        case 0:
            if (pbuf_varint_get(&p, end, &len) != 0)
                return 0;
            break;
        case 1:
        case 5: {
            size_t w = (tag & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < w)
                return 0;
            p += w;
            break;
        }
        case 2: {
            if (pbuf_varint_get(&p, end, &len) != 0 || len > (uint64_t)(end - p))
                return 0; /* malformed: the unpacker refuses it */
            const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
            if (f && f->type == PROTOBUF_C_TYPE_STRING && memchr(p, 0, (size_t)len))
                return 1;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && depth < 8 &&
                pbuf_nul_at(f->descriptor, p, (size_t)len, depth + 1))
                return 1;
            p += len;
            break;
        }
        default:
            return 0;
        }
    }
    return 0;
}

/* Whether a packed message has a string field holding a NUL byte (see pbuf.h). */
int pbuf_string_has_nul(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t n)
{
    return pbuf_nul_at(d, p, n, 0);
}

/* Put the key of msg type d's field named field (wire type 2: length-delimited) and the length len at p
 * (p NULL: only counted); the bytes they take, or 0 when d has no such field. */
size_t pbuf_put_len_key(uint8_t *p, const ProtobufCMessageDescriptor *d, const char *field, size_t len)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, field);
    if (!f)
        return 0;
    size_t k = pbuf_varint_put(p, (uint64_t)f->id << 3 | 2);
    return k + pbuf_varint_put(p ? p + k : NULL, len);
}
