/*
 * TCPStore request decoding.  A request is a type byte and then the fields
 * its op's grammar lists (tcpstore_ops.c); a string is a little-endian u64
 * length and that many raw bytes.  The decoder is incremental: it takes
 * only whole fields, keeps its place in the connection's request between
 * callbacks, and says how many bytes it needs next, so a client that stops
 * halfway costs its own buffer and no one else's time.  It reads from a
 * struct ts_src: the bytes just received, straight from the receive buffer
 * (the common case: nothing was left over), or the input buffer.
 * Every length is checked against its limit before the bytes it announces
 * are awaited, and nothing is allocated for bytes that have not arrived.
 */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"
#include "tcpstore_int.h"

/* The older numbering (torch 1.x to 2.0, with WATCH_KEY): op by type byte. */
static const signed char tsparse_legacy_map[] = {
    TS_SET,       TS_COMPARE_SET, TS_GET,          TS_ADD,         TS_CHECK,
    TS_WAIT,      TS_GETNUMKEYS,  TS_WATCH_KEY,    TS_DELETE_KEY,  TS_APPEND,
    TS_MULTI_GET, TS_MULTI_SET,   TS_CANCEL_WAIT,
};

/* The op of type byte code in era, or -1 when the numbering has no such code. */
int tsparse_op(enum ts_era era, uint8_t code)
{
    if (era == TS_ERA_VALIDATE)
        return code < TS_WATCH_KEY ? code : -1;
    return code < sizeof tsparse_legacy_map ? tsparse_legacy_map[code] : -1;
}

/* Bytes src holds. */
size_t tsparse_avail(const struct ts_src *src)
{
    return src->p ? src->n : evbuffer_get_length(src->in);
}

/* Copy n bytes from the front of src without taking them (src holds at least n). */
void tsparse_peek(const struct ts_src *src, void *dst, size_t n)
{
    if (src->p)
        memcpy(dst, src->p, n);
    else
        evbuffer_copyout(src->in, dst, n);
}

/* Take n bytes from the front of src into dst (src holds at least n). */
static void tsparse_take(struct ts_src *src, void *dst, size_t n)
{
    if (!src->p) {
        evbuffer_remove(src->in, dst, n);
        return;
    }
    memcpy(dst, src->p, n);
    src->p += n;
    src->n -= n;
}

/* Decide c's numbering from its first bytes; 0 when known, else the bytes still needed. */
size_t tsparse_detect(struct ts_conn *c, const struct ts_src *src)
{
    static const uint8_t handshake[TS_HANDSHAKE_LEN] = {0x00, 0xCE, 0xF7, 0x85, 0x3C};
    uint8_t buf[TS_HANDSHAKE_LEN];
    size_t have = tsparse_avail(src);
    if (have == 0)
        return 1;
    if (have > sizeof buf)
        have = sizeof buf;
    tsparse_peek(src, buf, have);
    /* An old client's first request never starts with the magic: as a SET
     * it would announce a key of about 1 GB. */
    if (memcmp(buf, handshake, have) != 0) {
        c->era = TS_ERA_LEGACY;
        return 0;
    }
    if (have < TS_HANDSHAKE_LEN)
        return TS_HANDSHAKE_LEN;
    c->era = TS_ERA_VALIDATE;
    return 0;
}

/* Free what a request holds and make it empty. */
void tsparse_reset(struct ts_req *r)
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

/* Take an n-byte little-endian integer when it is there; TSP_MORE sets *want. */
static enum tsparse_result tsparse_le(struct ts_conn *c, struct ts_src *src, size_t n, uint64_t *out, size_t *want)
{
    uint8_t b[8];
    if (tsparse_avail(src) < n) {
        *want = n;
        return TSP_MORE;
    }
    tsparse_take(src, b, n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | b[i];
    *out = v;
    c->req.bytes += n;
    return TSP_DONE;
}

/* Take a string of at most limit bytes into *out (its length first, checked before the body is
 * awaited); over a limit the connection is failed and counted as stat. */
static enum tsparse_result tsparse_str(struct ts_conn *c, struct ts_src *src, uint64_t limit, enum stat_id stat,
                                       const char *what, struct ts_blob *out, size_t *want)
{
    struct ts_req *r = &c->req;
    const struct options *o = &c->ts->srv->opt;
    if (!r->have_len) {
        enum tsparse_result res = tsparse_le(c, src, 8, &r->len, want);
        if (res != TSP_DONE)
            return res;
        if (r->len > limit) {
            tcpstore_fail(c, stat, "%s of %llu bytes exceeds the limit of %llu", what, (unsigned long long)r->len,
                          (unsigned long long)limit);
            return TSP_ERROR;
        }
        if (r->bytes + r->len > o->tcpstore_max_request) {
            tcpstore_fail(c, STAT_TS_LIMIT_REQUEST, "request of more than %llu bytes",
                          (unsigned long long)o->tcpstore_max_request);
            return TSP_ERROR;
        }
        r->have_len = 1;
    }
    if (tsparse_avail(src) < r->len) {
        *want = (size_t)r->len;
        return TSP_MORE;
    }
    if (!(out->p = malloc((size_t)r->len + 1))) {
        tcpstore_close(c, "out of memory");
        return TSP_ERROR;
    }
    out->len = (size_t)r->len;
    if (out->len)
        tsparse_take(src, out->p, out->len);
    out->p[out->len] = 0;
    r->bytes += out->len;
    r->have_len = 0;
    return TSP_DONE;
}

/* Take a single KEY or VALUE field into the request's next blob. */
static enum tsparse_result tsparse_single(struct ts_conn *c, struct ts_src *src, int is_key, size_t *want)
{
    struct ts_req *r = &c->req;
    const struct options *o = &c->ts->srv->opt;
    struct ts_blob b = {0};
    enum tsparse_result res =
        is_key ? tsparse_str(c, src, o->tcpstore_max_key, STAT_TS_LIMIT_KEY, "key", &b, want)
               : tsparse_str(c, src, o->tcpstore_max_value, STAT_TS_LIMIT_VALUE, "value", &b, want);
    if (res == TSP_DONE)
        r->b[r->nb++] = b;
    return res;
}

/* Take a list's count and make room for its strings. */
static enum tsparse_result tsparse_count(struct ts_conn *c, struct ts_src *src, int pairs, size_t *want)
{
    struct ts_req *r = &c->req;
    uint64_t n, max = c->ts->srv->opt.tcpstore_max_keys;
    enum tsparse_result res = tsparse_le(c, src, 8, &n, want);
    if (res != TSP_DONE)
        return res;
    if (n > max) {
        tcpstore_fail(c, STAT_TS_LIMIT_KEYS, "%llu keys in one request exceed the limit of %llu",
                      (unsigned long long)n, (unsigned long long)max);
        return TSP_ERROR;
    }
    r->n = (size_t)n;
    size_t slots = r->n ? r->n : 1;
    r->keys = calloc(slots, sizeof *r->keys);
    r->klens = calloc(slots, sizeof *r->klens);
    if (pairs) {
        r->vals = calloc(slots, sizeof *r->vals);
        r->vlens = calloc(slots, sizeof *r->vlens);
    }
    if (!r->keys || !r->klens || (pairs && (!r->vals || !r->vlens))) {
        tcpstore_close(c, "out of memory");
        return TSP_ERROR;
    }
    return TSP_DONE;
}

/* Take a KEYS or PAIRS list: its count, then every string. */
static enum tsparse_result tsparse_list(struct ts_conn *c, struct ts_src *src, int pairs, size_t *want)
{
    struct ts_req *r = &c->req;
    const struct options *o = &c->ts->srv->opt;
    enum tsparse_result res;
    if (!r->keys && (res = tsparse_count(c, src, pairs, want)) != TSP_DONE)
        return res;
    size_t total = pairs ? 2 * r->n : r->n;
    while (r->got < total) {
        int is_key = !pairs || r->got % 2 == 0;
        size_t i = pairs ? r->got / 2 : r->got;
        struct ts_blob b = {0};
        res = is_key ? tsparse_str(c, src, o->tcpstore_max_key, STAT_TS_LIMIT_KEY, "key", &b, want)
                     : tsparse_str(c, src, o->tcpstore_max_value, STAT_TS_LIMIT_VALUE, "value", &b, want);
        if (res != TSP_DONE)
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
    return TSP_DONE;
}

/* Take one field of the grammar. */
static enum tsparse_result tsparse_field(struct ts_conn *c, struct ts_src *src, enum ts_field f, size_t *want)
{
    struct ts_req *r = &c->req;
    uint64_t v;
    enum tsparse_result res;
    switch (f) {
    case TF_U32:
        if ((res = tsparse_le(c, src, 4, &v, want)) == TSP_DONE)
            r->u32 = (uint32_t)v;
        return res;
    case TF_I64:
        if ((res = tsparse_le(c, src, 8, &v, want)) == TSP_DONE)
            r->i64 = (int64_t)v;
        return res;
    case TF_KEY:
    case TF_VALUE:
        return tsparse_single(c, src, f == TF_KEY, want);
    case TF_KEYS:
    case TF_PAIRS:
        return tsparse_list(c, src, f == TF_PAIRS, want);
    case TF_END:
        break;
    }
    return TSP_DONE;
}

/* Take request bytes from src into c->req; TSP_MORE sets *want (bytes the input must hold). */
enum tsparse_result tsparse_step(struct ts_conn *c, struct ts_src *src, size_t *want)
{
    struct ts_req *r = &c->req;
    if (r->op < 0) {
        if (tsparse_avail(src) < 1) {
            *want = 1;
            return TSP_MORE;
        }
        tsparse_take(src, &r->code, 1);
        r->bytes = 1;
        if ((r->op = tsparse_op(c->era, r->code)) < 0) {
            tcpstore_fail(c, STAT_TS_BAD_REQUEST, "unknown type byte %u (%s numbering)", r->code,
                          c->era == TS_ERA_VALIDATE ? "VALIDATE-era" : "old");
            return TSP_ERROR;
        }
    }
    const struct tsops_row *row = tsops_row(r->op);
    while (r->field < TS_MAX_FIELDS && row->fields[r->field] != TF_END) {
        enum tsparse_result res = tsparse_field(c, src, row->fields[r->field], want);
        if (res != TSP_DONE)
            return res;
        r->field++;
    }
    return TSP_DONE;
}
