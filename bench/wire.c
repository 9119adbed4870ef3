/* The muster native protocol for the load generator: request templates packed with the
 * generated protobuf-c code, and a scanner that pulls id, status and the few result fields
 * the modes check out of a ServerFrame without allocating. */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

#include "frame.h"

/* Pack one ClientFrame into a fresh template buffer. */
static int wire_pack(const Muster__ClientFrame *f, struct tmpl *t)
{
    t->len = frame_size(&f->base);
    t->buf = malloc(t->len);
    if (!t->buf)
        return -1;
    frame_pack(&f->base, t->buf);
    t->id_off = t->key_off = TMPL_NONE;
    t->reply = RK_FRAME;
    return 0;
}

/* Build the Hello template for namespace ns. */
int wire_hello(const char *ns, struct tmpl *t)
{
    Muster__Hello h = MUSTER__HELLO__INIT;
    h.protocol_version = 1;
    h.namespace_ = (char *)ns;
    h.client_name = "muster-loadgen";
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_HELLO;
    f.hello = &h;
    return wire_pack(&f, t);
}

/* Fill the op-specific part of req from spec; key is the placeholder key text. */
static int wire_fill(Muster__Request *req, const struct opspec *spec, char *key, char **keyv,
                     ProtobufCBinaryData value, void *u)
{
    switch (spec->op) {
    case OP_SET: {
        Muster__SetReq *m = u;
        muster__set_req__init(m);
        m->key = key;
        m->value = value;
        req->op_case = MUSTER__REQUEST__OP_SET;
        req->set = m;
        return 0;
    }
    case OP_GET: {
        Muster__GetReq *m = u;
        muster__get_req__init(m);
        m->key = key;
        m->wait = spec->wait;
        m->timeout_ms = spec->timeout_ms;
        req->op_case = MUSTER__REQUEST__OP_GET;
        req->get = m;
        return 0;
    }
    case OP_ADD: {
        Muster__AddReq *m = u;
        muster__add_req__init(m);
        m->key = key;
        m->delta = 1;
        req->op_case = MUSTER__REQUEST__OP_ADD;
        req->add = m;
        return 0;
    }
    case OP_WAIT: {
        Muster__WaitReq *m = u;
        muster__wait_req__init(m);
        m->n_keys = 1;
        m->keys = keyv;
        m->timeout_ms = spec->timeout_ms;
        req->op_case = MUSTER__REQUEST__OP_WAIT;
        req->wait = m;
        return 0;
    }
    case OP_CHECK: {
        Muster__CheckReq *m = u;
        muster__check_req__init(m);
        m->n_keys = 1;
        m->keys = keyv;
        req->op_case = MUSTER__REQUEST__OP_CHECK;
        req->check = m;
        return 0;
    }
    case OP_PING: {
        Muster__PingReq *m = u;
        muster__ping_req__init(m);
        req->op_case = MUSTER__REQUEST__OP_PING;
        req->ping = m;
        return 0;
    }
    case OP_BARRIER: {
        Muster__BarrierReq *m = u;
        muster__barrier_req__init(m);
        m->name = key;
        m->count = spec->count;
        m->timeout_ms = spec->timeout_ms;
        if (spec->fetch)
            m->fetch = (char *)spec->fetch;
        req->op_case = MUSTER__REQUEST__OP_BARRIER;
        req->barrier = m;
        return 0;
    }
    case OP_JOIN: {
        Muster__RdzvJoinReq *m = u;
        muster__rdzv_join_req__init(m);
        m->node_id = key;
        m->local_world_size = 1;
        m->min_nodes = spec->count;
        m->max_nodes = spec->count;
        m->timeout_ms = spec->timeout_ms;
        req->op_case = MUSTER__REQUEST__OP_RDZV_JOIN;
        req->rdzv_join = m;
        return 0;
    }
    default:
        return -1;
    }
}

/* Build the template of one request; its key is spec->key followed by 8 patched digits. */
int wire_tmpl(const struct opspec *spec, struct tmpl *t)
{
    /* Room for the largest op message; all of them are a few pointers and scalars. */
    union {
        Muster__SetReq set;
        Muster__GetReq get;
        Muster__AddReq add;
        Muster__WaitReq wait;
        Muster__CheckReq check;
        Muster__PingReq ping;
        Muster__BarrierReq barrier;
        Muster__RdzvJoinReq join;
    } u;
    char key[256];
    if (strlen(spec->key) + TMPL_DIGITS >= sizeof key)
        return -1;
    strcpy(key, spec->key);
    memset(key + strlen(key), '0', TMPL_DIGITS);
    key[strlen(spec->key) + TMPL_DIGITS] = 0;
    char *keyv[1] = {key};
    uint8_t *val = malloc(spec->value_size ? spec->value_size : 1);
    if (!val)
        return -1;
    memset(val, spec->value_byte ? spec->value_byte : 'v', spec->value_size);
    ProtobufCBinaryData value = {spec->value_size, val};
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.id = WIRE_ID_BASE;
    int rc = wire_fill(&req, spec, key, keyv, value, &u);
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_REQUEST;
    f.request = &req;
    if (rc == 0)
        rc = wire_pack(&f, t);
    free(val);
    if (rc < 0)
        return -1;
    static const uint8_t id_bytes[9] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    const uint8_t *hit = memmem(t->buf, t->len, id_bytes, sizeof id_bytes);
    t->id_off = hit ? (size_t)(hit - t->buf) : TMPL_NONE;
    if (!hit || (spec->op != OP_PING && tmpl_find_key(t, key) < 0)) {
        tmpl_free(t);
        return -1;
    }
    return 0;
}

/* Read a varint at *p (bounded by end); returns 0 or -1. */
static int wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* Step over one field of wire type wt (the tag already read); for length-delimited fields
 * return the body in *sub / *sublen.  Returns 0 or -1. */
static int wire_field(const uint8_t **p, const uint8_t *end, unsigned wt, uint64_t *num,
                      const uint8_t **sub, size_t *sublen)
{
    uint64_t len;
    switch (wt) {
    case 0:
        return wire_varint(p, end, num);
    case 1:
    case 5:
        if ((size_t)(end - *p) < (wt == 1 ? 8u : 4u))
            return -1;
        *p += wt == 1 ? 8 : 4;
        return 0;
    case 2:
        if (wire_varint(p, end, &len) < 0 || len > (uint64_t)(end - *p))
            return -1;
        *sub = *p;
        *sublen = (size_t)len;
        *p += len;
        return 0;
    default:
        return -1;
    }
}

/* Find field `want` in a message body: its varint in *num or its bytes in *sub. */
static int wire_find(const uint8_t *p, size_t n, unsigned want, uint64_t *num, const uint8_t **sub,
                     size_t *sublen)
{
    const uint8_t *end = p + n;
    while (p < end) {
        uint64_t tag, v = 0;
        const uint8_t *s = NULL;
        size_t sl = 0;
        if (wire_varint(&p, end, &tag) < 0 || wire_field(&p, end, (unsigned)(tag & 7), &v, &s, &sl) < 0)
            return -1;
        if ((tag >> 3) == want) {
            *num = v;
            *sub = s;
            *sublen = sl;
            return 1;
        }
    }
    return 0;
}

/* Pull the interesting part of a result message into r. */
static void wire_result(int field, const uint8_t *p, size_t n, struct reply *r)
{
    uint64_t v = 0;
    const uint8_t *s = NULL;
    size_t sl = 0;
    if (field == MUSTER__RESPONSE__RESULT_GET && wire_find(p, n, 1, &v, &s, &sl) > 0) {
        r->val = s;
        r->vlen = sl;
    } else if (field == MUSTER__RESPONSE__RESULT_ADD && wire_find(p, n, 1, &v, &s, &sl) > 0) {
        r->num = (int64_t)v;
    } else if (field == MUSTER__RESPONSE__RESULT_BARRIER) {
        /* BarrierRes: round (1), and the fetched value (4) when one was asked for */
        if (wire_find(p, n, 1, &v, &s, &sl) > 0)
            r->num = (int64_t)v;
        if (wire_find(p, n, 4, &v, &s, &sl) > 0) {
            r->val = s;
            r->vlen = sl;
        }
    } else if (field == MUSTER__RESPONSE__RESULT_RDZV_JOIN && wire_find(p, n, 1, &v, &s, &sl) > 0) {
        /* RdzvJoinRes.assignment.rank_start (field 4); absent means rank 0. */
        const uint8_t *a = s;
        size_t al = sl;
        r->num = wire_find(a, al, 4, &v, &s, &sl) > 0 ? (int64_t)v : 0;
    }
}

/* Scan a Response body into r. */
static int wire_response(const uint8_t *p, size_t n, struct reply *r)
{
    const uint8_t *end = p + n;
    while (p < end) {
        uint64_t tag, v = 0;
        const uint8_t *s = NULL;
        size_t sl = 0;
        if (wire_varint(&p, end, &tag) < 0 || wire_field(&p, end, (unsigned)(tag & 7), &v, &s, &sl) < 0)
            return -1;
        unsigned f = (unsigned)(tag >> 3);
        if (f == 1)
            r->id = v;
        else if (f == 2)
            r->status = (int)v;
        else if (f >= 10 && (tag & 7) == 2) {
            r->result = (int)f;
            wire_result((int)f, s, sl, r);
        }
    }
    return 0;
}

/* Parse one ServerFrame at p; returns bytes consumed, 0 when incomplete, -1 when malformed. */
ssize_t wire_parse(const uint8_t *p, size_t n, struct reply *r)
{
    if (n < FRAME_HDR)
        return 0;
    uint32_t len = frame_len(p);
    if (n < FRAME_HDR + (size_t)len)
        return 0;
    memset(r, 0, sizeof *r);
    const uint8_t *q = p + FRAME_HDR, *end = q + len;
    uint64_t tag, v = 0;
    const uint8_t *s = NULL;
    size_t sl = 0;
    if (wire_varint(&q, end, &tag) < 0 || wire_field(&q, end, (unsigned)(tag & 7), &v, &s, &sl) < 0)
        return -1;
    r->frame = (int)(tag >> 3);
    if (r->frame == MUSTER__SERVER_FRAME__FRAME_RESPONSE && wire_response(s, sl, r) < 0)
        return -1;
    if (r->frame == MUSTER__SERVER_FRAME__FRAME_ERROR) {
        r->status = wire_find(s, sl, 1, &v, &s, &sl) > 0 ? (int)v : MUSTER__STATUS__INTERNAL;
        if (r->status == 0)
            r->status = MUSTER__STATUS__INTERNAL;
    }
    return (ssize_t)(FRAME_HDR + len);
}

/* Bytes of a frame that stops half way: a header promising 64 bytes, then 8 of them. */
size_t wire_stall(uint8_t *out)
{
    frame_put_len(out, 64);
    memset(out + FRAME_HDR, 0x12, 8);
    return FRAME_HDR + 8;
}
