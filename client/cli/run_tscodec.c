/*
 * The relay's TCPStore codec: numberings, grammars and reply encoding, with
 * the same wire rules as musterd's listener (store-server/tcpstore_parse.c).
 * A request is a type byte and then the fields its op's grammar lists; a
 * string is a little-endian u64 length and that many raw bytes.
 *
 * Unlike the daemon's incremental decoder, this one decodes a request only
 * once all of it is buffered, and leaves its strings in the buffer: the
 * relay serves one node's workers, whose requests are small.  It still says
 * how many bytes it needs next, so the caller decodes again only when they
 * have arrived, and every length is checked against its limit before the
 * bytes it announces are awaited.
 */
#include "run_relay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One field of a request's grammar. */
enum tsc_field { TSC_F_END, TSC_F_U32, TSC_F_I64, TSC_F_KEY, TSC_F_VALUE, TSC_F_KEYS, TSC_F_PAIRS };

/* Name and grammar of one op. */
struct tsc_row {
    const char *name;
    enum tsc_field f[TSC_MAX_FIELDS];
};

/* The grammars, by op (the same as musterd's op table). */
static const struct tsc_row run_tscodec_rows[TSC_NOPS] = {
    [TSC_VALIDATE] = {"validate", {TSC_F_U32}},
    [TSC_SET] = {"set", {TSC_F_KEY, TSC_F_VALUE}},
    [TSC_COMPARE_SET] = {"compare_set", {TSC_F_KEY, TSC_F_VALUE, TSC_F_VALUE}},
    [TSC_GET] = {"get", {TSC_F_KEY}},
    [TSC_ADD] = {"add", {TSC_F_KEY, TSC_F_I64}},
    [TSC_CHECK] = {"check", {TSC_F_KEYS}},
    [TSC_WAIT] = {"wait", {TSC_F_KEYS}},
    [TSC_GETNUMKEYS] = {"getnumkeys", {TSC_F_END}},
    [TSC_DELETE_KEY] = {"delete_key", {TSC_F_KEY}},
    [TSC_APPEND] = {"append", {TSC_F_KEY, TSC_F_VALUE}},
    [TSC_MULTI_GET] = {"multi_get", {TSC_F_KEYS}},
    [TSC_MULTI_SET] = {"multi_set", {TSC_F_PAIRS}},
    [TSC_CANCEL_WAIT] = {"cancel_wait", {TSC_F_END}},
    [TSC_PING] = {"ping", {TSC_F_U32}},
    [TSC_QUEUE_PUSH] = {"queue_push", {TSC_F_KEY, TSC_F_VALUE}},
    [TSC_QUEUE_POP] = {"queue_pop", {TSC_F_KEY}},
    [TSC_QUEUE_LEN] = {"queue_len", {TSC_F_KEY}},
    [TSC_LIST_KEYS] = {"list_keys", {TSC_F_END}},
    [TSC_BARRIER] = {"barrier", {TSC_F_KEY, TSC_F_I64}},
    [TSC_WATCH_KEY] = {"watch_key", {TSC_F_KEY}},
};

/* The older numbering (torch 1.x to 2.0, with WATCH_KEY): op by type byte. */
static const signed char run_tscodec_legacy[] = {
    TSC_SET,       TSC_COMPARE_SET, TSC_GET,         TSC_ADD,        TSC_CHECK,
    TSC_WAIT,      TSC_GETNUMKEYS,  TSC_WATCH_KEY,   TSC_DELETE_KEY, TSC_APPEND,
    TSC_MULTI_GET, TSC_MULTI_SET,   TSC_CANCEL_WAIT,
};

/* The numbering c speaks, from its first bytes; TSC_ERA_UNKNOWN while too few have arrived. */
enum tsc_era run_tscodec_detect(const uint8_t *p, size_t n)
{
    static const uint8_t hs[TSC_HANDSHAKE_LEN] = {0x00, 0xCE, 0xF7, 0x85, 0x3C};
    size_t k = n < TSC_HANDSHAKE_LEN ? n : TSC_HANDSHAKE_LEN;
    if (n == 0)
        return TSC_ERA_UNKNOWN;
    /* An old client's first request never starts with the magic: as a SET it would announce a ~1 GB key. */
    if (memcmp(p, hs, k) != 0)
        return TSC_ERA_LEGACY;
    return k == TSC_HANDSHAKE_LEN ? TSC_ERA_VALIDATE : TSC_ERA_UNKNOWN;
}

/* The op's name, for messages. */
const char *run_tscodec_name(int op)
{
    return op >= 0 && op < TSC_NOPS ? run_tscodec_rows[op].name : "?";
}

/* A decoding position: the buffer, how far it has been read, and the limits. */
struct tsc_cur {
    const uint8_t *p;
    size_t n, at;
    size_t want;
    const struct tsc_limits *lim;
    int err;
    char *why;
    size_t whylen;
};

/* Read an n-byte little-endian integer: 1, or 0 when the bytes have not arrived. */
static int run_tscodec_le(struct tsc_cur *c, size_t n, uint64_t *out)
{
    if (c->n - c->at < n) {
        c->want = c->at + n;
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | c->p[c->at + i];
    c->at += n;
    *out = v;
    return 1;
}

/* Refuse the request: -1 with the counter and the reason set. */
static int run_tscodec_refuse(struct tsc_cur *c, int err, const char *what, uint64_t got, uint64_t limit)
{
    c->err = err;
    snprintf(c->why, c->whylen, "%s of %llu exceeds the limit of %llu", what, (unsigned long long)got,
             (unsigned long long)limit);
    return -1;
}

/* Read one string (its length checked first): 1, 0 for more bytes, -1 over a limit. */
static int run_tscodec_str(struct tsc_cur *c, int is_key, struct tsc_str *s)
{
    uint64_t len;
    if (!run_tscodec_le(c, 8, &len))
        return 0;
    if (is_key && len > c->lim->max_key)
        return run_tscodec_refuse(c, TSC_ERR_KEY, "key bytes", len, c->lim->max_key);
    if (len > c->lim->max_request || c->at + len > c->lim->max_request)
        return run_tscodec_refuse(c, TSC_ERR_REQUEST, "request bytes", c->at + len, c->lim->max_request);
    if (c->n - c->at < len) {
        c->want = c->at + (size_t)len;
        return 0;
    }
    s->p = c->p + c->at;
    s->len = (size_t)len;
    c->at += (size_t)len;
    return 1;
}

/* Read a KEYS or PAIRS list into r->list: 1, 0 for more bytes, -1 refused. */
static int run_tscodec_list(struct tsc_cur *c, struct tsc_req *r, int pairs)
{
    uint64_t n;
    if (!run_tscodec_le(c, 8, &n))
        return 0;
    if (n > c->lim->max_keys)
        return run_tscodec_refuse(c, TSC_ERR_KEYS, "keys in one request", n, c->lim->max_keys);
    /* Each string needs at least its 8-byte length: a count the request bound cannot hold is refused now. */
    if (n * (pairs ? 16 : 8) > c->lim->max_request)
        return run_tscodec_refuse(c, TSC_ERR_REQUEST, "request bytes", n * (pairs ? 16 : 8), c->lim->max_request);
    size_t total = (size_t)n * (pairs ? 2 : 1);
    free(r->list);
    r->list = calloc(total ? total : 1, sizeof *r->list);
    if (!r->list) {
        c->err = TSC_ERR_REQUEST;
        snprintf(c->why, c->whylen, "out of memory");
        return -1;
    }
    r->n = (size_t)n;
    for (size_t i = 0; i < total; i++) {
        int rc = run_tscodec_str(c, !pairs || i % 2 == 0, &r->list[i]);
        if (rc <= 0)
            return rc;
    }
    return 1;
}

/* Read one field of the grammar: 1, 0 for more bytes, -1 refused. */
static int run_tscodec_field(struct tsc_cur *c, struct tsc_req *r, enum tsc_field f)
{
    uint64_t v;
    switch (f) {
    case TSC_F_U32:
        if (!run_tscodec_le(c, 4, &v))
            return 0;
        r->u32 = (uint32_t)v;
        return 1;
    case TSC_F_I64:
        if (!run_tscodec_le(c, 8, &v))
            return 0;
        r->i64 = (int64_t)v;
        return 1;
    case TSC_F_KEY:
    case TSC_F_VALUE:
        return run_tscodec_str(c, f == TSC_F_KEY, &r->b[r->nb++]);
    case TSC_F_KEYS:
    case TSC_F_PAIRS:
        return run_tscodec_list(c, r, f == TSC_F_PAIRS);
    case TSC_F_END:
        break;
    }
    return 1;
}

/* Decode one request from p[0..n): 1 with *used, 0 when *want bytes must be there first, or -1 with
 * an enum tsc_err in *err and the reason in why. */
int run_tscodec_parse(enum tsc_era era, const struct tsc_limits *lim, const uint8_t *p, size_t n,
                      struct tsc_req *r, size_t *used, size_t *want, int *err, char *why, size_t whylen)
{
    struct tsc_cur c = {.p = p, .n = n, .lim = lim, .why = why, .whylen = whylen};
    memset(r, 0, sizeof *r);
    if (n < 1) {
        *want = 1;
        return 0;
    }
    r->code = p[0];
    c.at = 1;
    if (era == TSC_ERA_VALIDATE)
        r->op = r->code < TSC_WATCH_KEY ? r->code : -1;
    else
        r->op = r->code < sizeof run_tscodec_legacy ? run_tscodec_legacy[r->code] : -1;
    if (r->op < 0) {
        *err = TSC_ERR_BAD;
        snprintf(why, whylen, "unknown type byte %u (%s numbering)", r->code,
                 era == TSC_ERA_VALIDATE ? "VALIDATE-era" : "old");
        return -1;
    }
    const struct tsc_row *row = &run_tscodec_rows[r->op];
    for (unsigned i = 0; i < TSC_MAX_FIELDS && row->f[i] != TSC_F_END; i++) {
        int rc = run_tscodec_field(&c, r, row->f[i]);
        if (rc <= 0) {
            *want = c.want;
            *err = c.err;
            run_tscodec_free(r);
            return rc;
        }
    }
    *used = c.at;
    return 1;
}

/* Free what a decoded request allocated. */
void run_tscodec_free(struct tsc_req *r)
{
    free(r->list);
    r->list = NULL;
    r->n = 0;
}

/* Append raw bytes. */
void run_tscodec_put(struct tsc_out *o, const void *p, size_t n)
{
    if (o->oom || n == 0)
        return;
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n)
            cap *= 2;
        uint8_t *q = realloc(o->p, cap);
        if (!q) {
            o->oom = 1;
            return;
        }
        o->p = q;
        o->cap = cap;
    }
    memcpy(o->p + o->len, p, n);
    o->len += n;
}

/* Append one byte. */
void run_tscodec_put_u8(struct tsc_out *o, uint8_t v)
{
    run_tscodec_put(o, &v, 1);
}

/* Append a little-endian 64-bit integer. */
void run_tscodec_put_i64(struct tsc_out *o, int64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    run_tscodec_put(o, b, sizeof b);
}

/* Append a u64 length and the bytes. */
void run_tscodec_put_blob(struct tsc_out *o, const void *p, size_t n)
{
    run_tscodec_put_i64(o, (int64_t)n);
    run_tscodec_put(o, p, n);
}
