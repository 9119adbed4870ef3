/*
 * TCPStore request decoding and reply encoding, for musterd's listener and
 * the relay of `muster run` alike.  A request is a type byte and then the
 * fields its op's grammar lists; a string is a little-endian u64 length and
 * that many raw bytes.  The decoder is incremental: it takes only whole
 * fields, keeps its place in the request between calls, and says how many
 * bytes it needs next, so a client that stops halfway costs its own buffer
 * and no one else's time.  Every length is checked against its limit before
 * the bytes it announces are awaited, and nothing is allocated for bytes
 * that have not arrived.  Replies are untagged: the client knows what to
 * read from what it asked.
 */
#include "tscodec.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One field of a request's grammar. */
enum tscodec_field {
    TF_END,
    TF_U32,   /* little-endian u32 */
    TF_I64,   /* little-endian i64 */
    TF_KEY,   /* u64 length + bytes, at most max_key */
    TF_VALUE, /* u64 length + bytes, at most max_value */
    TF_KEYS,  /* u64 count + count keys */
    TF_PAIRS, /* u64 count + count (key, value) */
};

/* Name and grammar of one op. */
struct tscodec_row {
    const char *name;
    enum tscodec_field fields[TS_MAX_FIELDS];
};

/* The grammars, by op. */
static const struct tscodec_row tscodec_rows[TS_NOPS] = {
    [TS_VALIDATE] = {"validate", {TF_U32}},
    [TS_SET] = {"set", {TF_KEY, TF_VALUE}},
    [TS_COMPARE_SET] = {"compare_set", {TF_KEY, TF_VALUE, TF_VALUE}},
    [TS_GET] = {"get", {TF_KEY}},
    [TS_ADD] = {"add", {TF_KEY, TF_I64}},
    [TS_CHECK] = {"check", {TF_KEYS}},
    [TS_WAIT] = {"wait", {TF_KEYS}},
    [TS_GETNUMKEYS] = {"getnumkeys", {TF_END}},
    [TS_DELETE_KEY] = {"delete_key", {TF_KEY}},
    [TS_APPEND] = {"append", {TF_KEY, TF_VALUE}},
    [TS_MULTI_GET] = {"multi_get", {TF_KEYS}},
    [TS_MULTI_SET] = {"multi_set", {TF_PAIRS}},
    [TS_CANCEL_WAIT] = {"cancel_wait", {TF_END}},
    [TS_PING] = {"ping", {TF_U32}},
    [TS_QUEUE_PUSH] = {"queue_push", {TF_KEY, TF_VALUE}},
    [TS_QUEUE_POP] = {"queue_pop", {TF_KEY}},
    [TS_QUEUE_LEN] = {"queue_len", {TF_KEY}},
    [TS_LIST_KEYS] = {"list_keys", {TF_END}},
    [TS_BARRIER] = {"barrier", {TF_KEY, TF_I64}},
    [TS_WATCH_KEY] = {"watch_key", {TF_KEY}},
};

/* The older numbering (torch 1.x to 2.0, with WATCH_KEY): op by type byte. */
static const signed char tscodec_legacy_map[] = {
    TS_SET,       TS_COMPARE_SET, TS_GET,          TS_ADD,         TS_CHECK,
    TS_WAIT,      TS_GETNUMKEYS,  TS_WATCH_KEY,    TS_DELETE_KEY,  TS_APPEND,
    TS_MULTI_GET, TS_MULTI_SET,   TS_CANCEL_WAIT,
};

/* The op of type byte code in era, or -1 when the numbering has no such code. */
int tscodec_op(enum ts_era era, uint8_t code)
{
    if (era == TS_ERA_VALIDATE)
        return code < TS_WATCH_KEY ? code : -1;
    return code < sizeof tscodec_legacy_map ? tscodec_legacy_map[code] : -1;
}

/* The op's name, for messages ("?" out of range). */
const char *tscodec_name(int op)
{
    return op >= 0 && op < TS_NOPS ? tscodec_rows[op].name : "?";
}

/* Bytes src holds. */
size_t tscodec_avail(const struct tscodec_src *src)
{
    return src->p ? src->n : src->ops->len(src->buf);
}

/* Copy n bytes from the front of src without taking them (src holds at least n). */
void tscodec_peek(const struct tscodec_src *src, void *dst, size_t n)
{
    if (src->p)
        memcpy(dst, src->p, n);
    else
        src->ops->copy(src->buf, dst, n);
}

/* Take n bytes from the front of src into dst (src holds at least n). */
static void tscodec_take(struct tscodec_src *src, void *dst, size_t n)
{
    if (!src->p) {
        src->ops->take(src->buf, dst, n);
        return;
    }
    memcpy(dst, src->p, n);
    src->p += n;
    src->n -= n;
}

/* What a connection with a parked WAIT or BARRIER does with the next request at the front of src. */
enum tscodec_parked tscodec_parked_next(enum ts_era era, const struct tscodec_src *src)
{
    uint8_t code;
    if (era == TS_ERA_LEGACY)
        return TSC_PARKED_ABANDON;
    tscodec_peek(src, &code, 1);
    return code == TS_CANCEL_WAIT ? TSC_PARKED_DECODE : TSC_PARKED_HOLD;
}

/* Decide the numbering from src's first bytes into *era; 0 when known, else the bytes needed. */
size_t tscodec_detect(const struct tscodec_src *src, enum ts_era *era)
{
    static const uint8_t handshake[TS_HANDSHAKE_LEN] = {0x00, 0xCE, 0xF7, 0x85, 0x3C};
    uint8_t buf[TS_HANDSHAKE_LEN];
    size_t have = tscodec_avail(src);
    if (have == 0)
        return 1;
    if (have > sizeof buf)
        have = sizeof buf;
    tscodec_peek(src, buf, have);
    /* An old client's first request never starts with the magic: as a SET
     * it would announce a key of about 1 GB. */
    if (memcmp(buf, handshake, have) != 0) {
        *era = TS_ERA_LEGACY;
        return 0;
    }
    if (have < TS_HANDSHAKE_LEN)
        return TS_HANDSHAKE_LEN;
    *era = TS_ERA_VALIDATE;
    return 0;
}

/* Free what a request holds and make it empty (op -1), ready for the next. */
void tscodec_reset(struct ts_req *r)
{
    for (unsigned i = 0; i < r->nb; i++)
        free(r->b[i].p);
    /* List slots are zeroed when made, so the ones not yet filled free as NULL. */
    for (size_t i = 0; i < r->n; i++) {
        if (r->keys)
            free(r->keys[i]);
        if (r->vals)
            free(r->vals[i]);
    }
    free(r->keys);
    free(r->klens);
    free(r->vals);
    free(r->vlens);
    memset(r, 0, sizeof *r);
    r->op = -1;
}

/* One decoding call: the request, its era and limits, the source, and where a need or a refusal goes. */
struct tscodec_cur {
    struct ts_req *r;
    enum ts_era era;
    const struct tscodec_limits *lim;
    struct tscodec_src *src;
    size_t *want;
    struct tscodec_error *err;
};

/* Refuse the request: TSC_ERROR with the kind and the sentence set. */
static enum tscodec_result tscodec_refuse(struct tscodec_cur *c, enum tscodec_err code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum tscodec_result tscodec_refuse(struct tscodec_cur *c, enum tscodec_err code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    c->err->code = code;
    vsnprintf(c->err->why, sizeof c->err->why, fmt, ap);
    va_end(ap);
    return TSC_ERROR;
}

/* Refuse a request that would grow past max_request. */
static enum tscodec_result tscodec_too_big(struct tscodec_cur *c)
{
    return tscodec_refuse(c, TSC_ERR_REQUEST, "request of more than %llu bytes",
                          (unsigned long long)c->lim->max_request);
}

/* Whether len more bytes would take the request past max_request (no overflow whatever the limits). */
static int tscodec_over(const struct tscodec_cur *c, uint64_t len)
{
    uint64_t max = c->lim->max_request;
    return c->r->bytes > max || len > max - c->r->bytes;
}

/* Take an n-byte little-endian integer when it is there; TSC_MORE sets *want. */
static enum tscodec_result tscodec_le(struct tscodec_cur *c, size_t n, uint64_t *out)
{
    uint8_t b[8];
    if (tscodec_avail(c->src) < n) {
        *c->want = n;
        return TSC_MORE;
    }
    tscodec_take(c->src, b, n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | b[i];
    *out = v;
    c->r->bytes += n;
    return TSC_DONE;
}

/* Take the current string's length and check it: against its own limit, then the request's. */
static enum tscodec_result tscodec_len(struct tscodec_cur *c, int is_key)
{
    struct ts_req *r = c->r;
    uint64_t limit = is_key ? c->lim->max_key : c->lim->max_value;
    enum tscodec_result res = tscodec_le(c, 8, &r->len);
    if (res != TSC_DONE)
        return res;
    if (r->len > limit)
        return tscodec_refuse(c, is_key ? TSC_ERR_KEY : TSC_ERR_VALUE, "%s of %llu bytes exceeds the limit of %llu",
                              is_key ? "key" : "value", (unsigned long long)r->len, (unsigned long long)limit);
    if (tscodec_over(c, r->len))
        return tscodec_too_big(c);
    r->have_len = 1;
    return TSC_DONE;
}

/* Take a string (its length checked before the body is awaited) into *out. */
static enum tscodec_result tscodec_str(struct tscodec_cur *c, int is_key, struct ts_blob *out)
{
    struct ts_req *r = c->r;
    enum tscodec_result res;
    if (!r->have_len && (res = tscodec_len(c, is_key)) != TSC_DONE)
        return res;
    if (tscodec_avail(c->src) < r->len) {
        *c->want = (size_t)r->len;
        return TSC_MORE;
    }
    if (!(out->p = malloc((size_t)r->len + 1)))
        return tscodec_refuse(c, TSC_ERR_NOMEM, "out of memory");
    out->len = (size_t)r->len;
    if (out->len)
        tscodec_take(c->src, out->p, out->len);
    out->p[out->len] = 0;
    r->bytes += out->len;
    r->have_len = 0;
    return TSC_DONE;
}

/* Take a single KEY or VALUE field into the request's next blob. */
static enum tscodec_result tscodec_single(struct tscodec_cur *c, int is_key)
{
    struct ts_req *r = c->r;
    struct ts_blob b = {0};
    enum tscodec_result res = tscodec_str(c, is_key, &b);
    if (res == TSC_DONE)
        r->b[r->nb++] = b;
    return res;
}

/* Take a list's count and make room for its strings. */
static enum tscodec_result tscodec_count(struct tscodec_cur *c, int pairs)
{
    struct ts_req *r = c->r;
    uint64_t n, max = c->lim->max_keys;
    enum tscodec_result res = tscodec_le(c, 8, &n);
    if (res != TSC_DONE)
        return res;
    if (n > max)
        return tscodec_refuse(c, TSC_ERR_KEYS, "%llu keys in one request exceed the limit of %llu",
                              (unsigned long long)n, (unsigned long long)max);
    /* Each string needs at least its 8-byte length: a count the request bound cannot hold is refused
     * now, before room for it is made. */
    uint64_t room = c->lim->max_request > r->bytes ? c->lim->max_request - r->bytes : 0;
    if (n > room / (pairs ? 16 : 8))
        return tscodec_too_big(c);
    r->n = (size_t)n;
    size_t slots = r->n ? r->n : 1;
    r->keys = calloc(slots, sizeof *r->keys);
    r->klens = calloc(slots, sizeof *r->klens);
    if (pairs) {
        r->vals = calloc(slots, sizeof *r->vals);
        r->vlens = calloc(slots, sizeof *r->vlens);
    }
    if (!r->keys || !r->klens || (pairs && (!r->vals || !r->vlens)))
        return tscodec_refuse(c, TSC_ERR_NOMEM, "out of memory");
    return TSC_DONE;
}

/* Take a KEYS or PAIRS list: its count, then every string. */
static enum tscodec_result tscodec_list(struct tscodec_cur *c, int pairs)
{
    struct ts_req *r = c->r;
    enum tscodec_result res;
    if (!r->keys && (res = tscodec_count(c, pairs)) != TSC_DONE)
        return res;
    size_t total = pairs ? 2 * r->n : r->n;
    while (r->got < total) {
        int is_key = !pairs || r->got % 2 == 0;
        size_t i = pairs ? r->got / 2 : r->got;
        struct ts_blob b = {0};
        if ((res = tscodec_str(c, is_key, &b)) != TSC_DONE)
            return res;
        if (is_key) {
            r->keys[i] = (char *)b.p;
            r->klens[i] = b.len;
        } else {
            r->vals[i] = b.p;
            r->vlens[i] = b.len;
        }
        r->got++;
    }
    return TSC_DONE;
}

/* Take one field of the grammar. */
static enum tscodec_result tscodec_field(struct tscodec_cur *c, enum tscodec_field f)
{
    struct ts_req *r = c->r;
    uint64_t v;
    enum tscodec_result res;
    switch (f) {
    case TF_U32:
        if ((res = tscodec_le(c, 4, &v)) == TSC_DONE)
            r->u32 = (uint32_t)v;
        return res;
    case TF_I64:
        if ((res = tscodec_le(c, 8, &v)) == TSC_DONE)
            r->i64 = (int64_t)v;
        return res;
    case TF_KEY:
    case TF_VALUE:
        return tscodec_single(c, f == TF_KEY);
    case TF_KEYS:
    case TF_PAIRS:
        return tscodec_list(c, f == TF_PAIRS);
    case TF_END:
        break;
    }
    return TSC_DONE;
}

/* Take the type byte and learn the op; an unknown one is garbage. */
static enum tscodec_result tscodec_type(struct tscodec_cur *c)
{
    struct ts_req *r = c->r;
    if (tscodec_avail(c->src) < 1) {
        *c->want = 1;
        return TSC_MORE;
    }
    tscodec_take(c->src, &r->code, 1);
    r->bytes = 1;
    if ((r->op = tscodec_op(c->era, r->code)) < 0)
        return tscodec_refuse(c, TSC_ERR_BAD, "unknown type byte %u (%s numbering)", r->code,
                              c->era == TS_ERA_VALIDATE ? "VALIDATE-era" : "old");
    return TSC_DONE;
}

/* Take request bytes from src into r; TSC_MORE sets *want (bytes src must hold), TSC_ERROR fills *err. */
enum tscodec_result tscodec_step(struct ts_req *r, enum ts_era era, const struct tscodec_limits *lim,
                                 struct tscodec_src *src, size_t *want, struct tscodec_error *err)
{
    struct tscodec_cur c = {r, era, lim, src, want, err};
    enum tscodec_result res;
    if (r->op < 0 && (res = tscodec_type(&c)) != TSC_DONE)
        return res;
    const struct tscodec_row *row = &tscodec_rows[r->op];
    while (r->field < TS_MAX_FIELDS && row->fields[r->field] != TF_END) {
        if ((res = tscodec_field(&c, row->fields[r->field])) != TSC_DONE)
            return res;
        r->field++;
    }
    return TSC_DONE;
}

/* Write v little-endian into 8 bytes. */
void tscodec_le64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

/* Send raw bytes. */
void tscodec_put(const struct tscodec_sink *s, const void *p, size_t n)
{
    s->put(s->arg, p, n);
}

/* Send one byte. */
void tscodec_put_u8(const struct tscodec_sink *s, uint8_t v)
{
    s->put(s->arg, &v, 1);
}

/* Send a little-endian u32 (PING's echo). */
void tscodec_put_u32(const struct tscodec_sink *s, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    s->put(s->arg, b, sizeof b);
}

/* Send a little-endian 64-bit integer. */
void tscodec_put_i64(const struct tscodec_sink *s, int64_t v)
{
    uint8_t b[8];
    tscodec_le64(b, (uint64_t)v);
    s->put(s->arg, b, sizeof b);
}

/* Send a u64 length and the bytes. */
void tscodec_put_blob(const struct tscodec_sink *s, const void *p, size_t n)
{
    uint8_t b[8 + 256];
    tscodec_le64(b, n);
    if (n > sizeof b - 8) {
        s->put(s->arg, b, 8);
        s->put(s->arg, p, n);
        return;
    }
    /* A small value goes out as one piece: one append and one check instead of two. */
    if (n)
        memcpy(b + 8, p, n);
    s->put(s->arg, b, 8 + n);
}

/* Append raw bytes to o. */
void tscodec_out_put(struct tscodec_out *o, const void *p, size_t n)
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

/* The sink callback of a struct tscodec_out. */
static void tscodec_out_sink_put(void *arg, const void *p, size_t n)
{
    tscodec_out_put(arg, p, n);
}

/* A sink that appends to o. */
struct tscodec_sink tscodec_out_sink(struct tscodec_out *o)
{
    return (struct tscodec_sink){tscodec_out_sink_put, o};
}

/* Send a WATCH_KEY callback frame. */
void tscodec_put_watch_frame(const struct tscodec_sink *s, int deleted, int was_present, const void *key,
                             size_t klen, const void *old, size_t olen, const void *new_, size_t nlen)
{
    tscodec_put_u8(s, deleted ? TS_KEY_DELETED : was_present ? TS_KEY_UPDATED : TS_KEY_CREATED);
    tscodec_put_blob(s, key, klen);
    tscodec_put_blob(s, old, olen);
    tscodec_put_blob(s, deleted ? NULL : new_, deleted ? 0 : nlen);
}
