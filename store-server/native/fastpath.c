/*
 * The native protocol's hot path without protobuf-c.  A get or add frame
 * costs protobuf-c four allocations and a descriptor walk to decode and two
 * more walks to answer, which made a native request dearer than the same
 * request through the TCPStore listener.  Here the common shape of those
 * two requests is read in place, and their OK replies are written straight
 * into the output buffer.  Anything else (another op, an unknown or
 * repeated field, a long key, a malformed frame) is declined and takes the
 * general path, so every check, limit and error is the one protobuf-c's
 * path gives; tests/unit/test_fastpath.c compares the two byte for byte.
 * A join's answer without a member list is written here too: a formation
 * answers thousands of nodes in one loop turn.
 */
#include "fastpath.h"

#include "pbuf.h"

#include <string.h>

/* Wire tags (field number << 3 | wire type) of the fields read and written here. */
enum {
    FP_FRAME_REQUEST = 2 << 3 | 2,  /* ClientFrame.request */
    FP_FRAME_RESPONSE = 2 << 3 | 2, /* ServerFrame.response */
    FP_ID = 1 << 3 | 0,             /* Request.id, Response.id */
    FP_OP_GET = 11 << 3 | 2,        /* Request.get, Response.get */
    FP_OP_ADD = 12 << 3 | 2,        /* Request.add, Response.add */
    FP_RES_SET = 10 << 3 | 2,       /* Response.set */
    FP_OP_RDZV_JOIN = 30 << 3 | 2,  /* Response.rdzv_join (a two-byte varint key) */
    FP_KEY = 1 << 3 | 2,            /* GetReq.key, AddReq.key; GetRes.value */
    FP_VARINT2 = 2 << 3 | 0,        /* GetReq.wait, AddReq.delta */
    FP_VARINT3 = 3 << 3 | 0,        /* GetReq.timeout_ms */
    FP_VARINT1 = 1 << 3 | 0,        /* AddRes.value */
};

/* Read a length-delimited field's length at *p and check it fits before end; 0, or -1. */
static int fastpath_len(const uint8_t **p, const uint8_t *end, size_t *n)
{
    uint64_t v;
    if (pbuf_varint_get(p, end, &v) != 0 || v > (uint64_t)(end - *p))
        return -1;
    *n = (size_t)v;
    return 0;
}

/* Copy a key of n bytes at p into out->key; -1 when it is too long or holds a NUL. */
static int fastpath_key(const uint8_t *p, size_t n, struct fastpath_req *out)
{
    if (n > FASTPATH_KEY_MAX || memchr(p, 0, n))
        return -1;
    memcpy(out->key, p, n);
    out->key[n] = '\0';
    return 0;
}

/* Decode GetReq (op FP_OP_GET) or AddReq fields of n bytes at p into out; 0, or -1 to decline. */
static int fastpath_op(int op, const uint8_t *p, size_t n, struct fastpath_req *out)
{
    const uint8_t *end = p + n;
    unsigned seen = 0;
    while (p < end) {
        uint8_t tag = *p++;
        uint64_t v = 0;
        size_t kn;
        unsigned bit = tag == FP_KEY ? 1u : tag == FP_VARINT2 ? 2u : tag == FP_VARINT3 && op == FP_OP_GET ? 4u : 0u;
        if (!bit || (seen & bit))
            return -1;
        seen |= bit;
        if (tag == FP_KEY) {
            if (fastpath_len(&p, end, &kn) != 0 || fastpath_key(p, kn, out) != 0)
                return -1;
            p += kn;
        } else if (pbuf_varint_get(&p, end, &v) != 0) {
            return -1;
        }
        if (op == FP_OP_GET && tag == FP_VARINT2)
            out->get.wait = v != 0;
        else if (op == FP_OP_GET && tag == FP_VARINT3)
            out->get.timeout_ms = (uint32_t)v;
        else if (tag == FP_VARINT2)
            out->add.delta = (int64_t)v;
    }
    return 0;
}

/* Point out->req at its get or add message, whose key is out->key. */
static void fastpath_link(int op, struct fastpath_req *out)
{
    if (op == FP_OP_GET) {
        out->get.key = out->key;
        out->req.op_case = MUSTER__REQUEST__OP_GET;
        out->req.get = &out->get;
    } else {
        out->add.key = out->key;
        out->req.op_case = MUSTER__REQUEST__OP_ADD;
        out->req.add = &out->add;
    }
}

/* Decode Request fields of n bytes at p into out; 0, or -1 to decline. */
static int fastpath_request(const uint8_t *p, size_t n, struct fastpath_req *out)
{
    const uint8_t *end = p + n;
    int op = 0, have_id = 0;
    while (p < end) {
        uint8_t tag = *p++;
        if (tag == FP_ID && !have_id) {
            have_id = 1;
            if (pbuf_varint_get(&p, end, &out->req.id) != 0)
                return -1;
            continue;
        }
        size_t on;
        if ((tag != FP_OP_GET && tag != FP_OP_ADD) || op || fastpath_len(&p, end, &on) != 0)
            return -1;
        op = tag;
        if (fastpath_op(op, p, on, out) != 0)
            return -1;
        p += on;
    }
    if (!op)
        return -1;
    fastpath_link(op, out);
    return 0;
}

/* Decode a get or add frame in place (see fastpath.h); 1 when decoded, 0 to decline. */
int fastpath_decode(const uint8_t *body, size_t len, struct fastpath_req *out)
{
    const uint8_t *p = body, *end = body + len;
    size_t n;
    if (len < 2 || *p++ != FP_FRAME_REQUEST || fastpath_len(&p, end, &n) != 0 || n != (size_t)(end - p))
        return 0;
    /* Field by field: the key buffer is written only as far as the key goes. */
    out->req = (Muster__Request)MUSTER__REQUEST__INIT;
    out->get = (Muster__GetReq)MUSTER__GET_REQ__INIT;
    out->add = (Muster__AddReq)MUSTER__ADD_REQ__INIT;
    out->key[0] = '\0';
    return fastpath_request(p, n, out) == 0;
}

/* ------------------------------------------------------- rendezvous answers */

/* A join's answer (RdzvJoinRes{assignment}) without a member list: a formation answers every node of the
 * generation in one loop turn, thousands of them, and protobuf-c packed each answer's three nested
 * messages by walking their descriptors twice.  Fields are written in number order and proto3's zeros
 * and empty strings left out, as protobuf-c does. */

/* Bytes of field (number f < 16) holding varint v; 0 when v is 0 (left out). */
static size_t fastpath_u_size(uint64_t v)
{
    return v ? 1 + pbuf_varint_put(NULL, v) : 0;
}

/* Bytes of a length-delimited field (number < 16) of n bytes. */
static size_t fastpath_len_size(size_t n)
{
    return 1 + pbuf_varint_put(NULL, n) + n;
}

/* Bytes of string field (number < 16) s; 0 when it is NULL or empty (left out). */
static size_t fastpath_s_size(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n ? fastpath_len_size(n) : 0;
}

/* Put varint field f holding v (nothing when v is 0); past the bytes. */
static uint8_t *fastpath_put_u(uint8_t *p, unsigned f, uint64_t v)
{
    if (v) {
        *p++ = (uint8_t)(f << 3);
        p += pbuf_varint_put(p, v);
    }
    return p;
}

/* Put length-delimited field f's key and length n; past them. */
static uint8_t *fastpath_put_len(uint8_t *p, unsigned f, size_t n)
{
    *p++ = (uint8_t)(f << 3 | 2);
    return p + pbuf_varint_put(p, n);
}

/* Put string field f holding s (nothing when NULL or empty); past the bytes. */
static uint8_t *fastpath_put_s(uint8_t *p, unsigned f, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (!n)
        return p;
    p = fastpath_put_len(p, f, n);
    memcpy(p, s, n);
    return p + n;
}

/* Packed size of one Excluded. */
static size_t fastpath_excluded_size(const Muster__Excluded *x)
{
    return fastpath_s_size(x->node_id) + fastpath_u_size(x->old_node_rank) + fastpath_s_size(x->cause);
}

/* Packed size of an Assignment without members. */
static size_t fastpath_assignment_size(const Muster__Assignment *a)
{
    size_t n = fastpath_u_size(a->generation) + fastpath_u_size(a->node_rank) + fastpath_u_size(a->num_nodes) +
               fastpath_u_size(a->rank_start) + fastpath_u_size(a->local_world_size) +
               fastpath_u_size(a->world_size) + fastpath_s_size(a->node_id) +
               fastpath_u_size(a->previous_generation) + fastpath_u_size(a->old_node_rank) +
               fastpath_s_size(a->credential);
    for (size_t i = 0; i < a->n_excluded; i++)
        n += fastpath_len_size(fastpath_excluded_size(a->excluded[i]));
    return n;
}

/* Pack an Assignment without members at p; past it. */
static uint8_t *fastpath_assignment_pack(uint8_t *p, const Muster__Assignment *a)
{
    p = fastpath_put_u(p, 1, a->generation);
    p = fastpath_put_u(p, 2, a->node_rank);
    p = fastpath_put_u(p, 3, a->num_nodes);
    p = fastpath_put_u(p, 4, a->rank_start);
    p = fastpath_put_u(p, 5, a->local_world_size);
    p = fastpath_put_u(p, 6, a->world_size);
    p = fastpath_put_s(p, 8, a->node_id);
    p = fastpath_put_u(p, 9, a->previous_generation);
    p = fastpath_put_u(p, 10, a->old_node_rank);
    for (size_t i = 0; i < a->n_excluded; i++) {
        const Muster__Excluded *x = a->excluded[i];
        p = fastpath_put_len(p, 11, fastpath_excluded_size(x));
        p = fastpath_put_s(p, 1, x->node_id);
        p = fastpath_put_u(p, 2, x->old_node_rank);
        p = fastpath_put_s(p, 3, x->cause);
    }
    return fastpath_put_s(p, 12, a->credential);
}

/* Whether res is a RdzvJoinRes written here: an assignment without members, of the message layouts this
 * file was written for (one that has gained a field since goes the general way). */
static int fastpath_join_res(const Muster__RdzvJoinRes *res)
{
    const Muster__Assignment *a = res->assignment;
    return res->base.descriptor->n_fields == 1 && a && a->base.descriptor->n_fields == 12 && a->n_members == 0 &&
           muster__excluded__descriptor.n_fields == 3;
}

/* ------------------------------------------------------------------ replies */

/* The Response tag of result's oneof member, or 0 when result is not one written here (a result type that
 * has gained a field since this file was written goes the general way, so nothing it carries is lost). */
static unsigned fastpath_res_tag(const ProtobufCMessage *result)
{
    const ProtobufCMessageDescriptor *d = result ? result->descriptor : NULL;
    if (d == &muster__get_res__descriptor && d->n_fields == 1)
        return FP_OP_GET;
    if (d == &muster__add_res__descriptor && d->n_fields == 1)
        return FP_OP_ADD;
    if (d == &muster__rdzv_join_res__descriptor && fastpath_join_res((const Muster__RdzvJoinRes *)result))
        return FP_OP_RDZV_JOIN;
    return d == &muster__set_res__descriptor && d->n_fields == 0 ? FP_RES_SET : 0;
}

/* Packed size of result (a GetRes, AddRes, SetRes or RdzvJoinRes, by its tag). */
static size_t fastpath_res_size(unsigned tag, const ProtobufCMessage *result)
{
    if (tag == FP_OP_GET) {
        size_t n = ((const Muster__GetRes *)result)->value.len;
        return n ? 1 + pbuf_varint_put(NULL, n) + n : 0;
    }
    if (tag == FP_OP_ADD) {
        int64_t v = ((const Muster__AddRes *)result)->value;
        return v ? 1 + pbuf_varint_put(NULL, (uint64_t)v) : 0;
    }
    if (tag == FP_OP_RDZV_JOIN)
        return fastpath_len_size(fastpath_assignment_size(((const Muster__RdzvJoinRes *)result)->assignment));
    return 0;
}

/* Packed size of the Response inside the frame. */
static size_t fastpath_resp_size(uint64_t id, unsigned tag, const ProtobufCMessage *result)
{
    size_t rn = fastpath_res_size(tag, result);
    return (id ? 1 + pbuf_varint_put(NULL, id) : 0) + pbuf_varint_put(NULL, tag) + pbuf_varint_put(NULL, rn) + rn;
}

/* Packed size of the OK reply frame (see fastpath.h); 0 when result is not written here. */
size_t fastpath_reply_size(uint64_t id, const ProtobufCMessage *result)
{
    unsigned tag = fastpath_res_tag(result);
    if (!tag)
        return 0;
    size_t n = fastpath_resp_size(id, tag, result);
    return 1 + pbuf_varint_put(NULL, n) + n;
}

/* Pack the OK reply frame at p (see fastpath.h). */
void fastpath_reply_pack(uint8_t *p, uint64_t id, const ProtobufCMessage *result)
{
    unsigned tag = fastpath_res_tag(result);
    *p++ = FP_FRAME_RESPONSE;
    p += pbuf_varint_put(p, fastpath_resp_size(id, tag, result));
    if (id) {
        *p++ = FP_ID;
        p += pbuf_varint_put(p, id);
    }
    p += pbuf_varint_put(p, tag);
    p += pbuf_varint_put(p, fastpath_res_size(tag, result));
    if (tag == FP_OP_RDZV_JOIN) {
        const Muster__Assignment *a = ((const Muster__RdzvJoinRes *)result)->assignment;
        p = fastpath_put_len(p, 1, fastpath_assignment_size(a));
        fastpath_assignment_pack(p, a);
    } else if (tag == FP_OP_GET) {
        const ProtobufCBinaryData *v = &((const Muster__GetRes *)result)->value;
        if (v->len) {
            *p++ = FP_KEY;
            p += pbuf_varint_put(p, v->len);
            memcpy(p, v->data, v->len);
        }
    } else if (tag == FP_OP_ADD && ((const Muster__AddRes *)result)->value) {
        *p++ = FP_VARINT1;
        pbuf_varint_put(p, (uint64_t)((const Muster__AddRes *)result)->value);
    }
}
