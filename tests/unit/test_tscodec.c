/*
 * Unit tests of the TCPStore wire codec (proto/tscodec.c), which musterd's
 * TCPStore listener and the relay of `muster run` share: both numberings,
 * requests arriving a byte at a time or split anywhere, each limit, garbage
 * type bytes, the buffer source the daemon reads leftovers through, and
 * reply encoding.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tscodec.h"

/* The limits most cases decode under. */
static const struct tscodec_limits lim = {.max_key = 16, .max_value = 64, .max_keys = 4, .max_request = 256};

/* A request being written by hand, independent of the codec's encoders. */
struct req_buf {
    uint8_t p[4096];
    size_t n;
};

/* Append one byte. */
static void rb_u8(struct req_buf *b, uint8_t v)
{
    b->p[b->n++] = v;
}

/* Append a little-endian integer of size bytes. */
static void rb_le(struct req_buf *b, uint64_t v, size_t size)
{
    for (size_t i = 0; i < size; i++)
        rb_u8(b, (uint8_t)(v >> (8 * i)));
}

/* Append a length-prefixed string. */
static void rb_str(struct req_buf *b, const char *s)
{
    size_t n = strlen(s);
    rb_le(b, n, 8);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* Decode one request from a span of p[0..n) as era; returns the result, *used the bytes taken. */
static enum tscodec_result decode(enum ts_era era, const struct tscodec_limits *l, const uint8_t *p, size_t n,
                                  struct ts_req *r, size_t *used, size_t *want, struct tscodec_error *e)
{
    struct tscodec_src src = {p, n, NULL, NULL};
    enum tscodec_result res = tscodec_step(r, era, l, &src, want, e);
    *used = n - src.n;
    return res;
}

/* The numbering of a connection follows its first bytes: the handshake, a prefix of it, anything else. */
static void t_detect(void *unused)
{
    static const uint8_t hs[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x01};
    static const uint8_t old_set[] = {0x00, 0x05, 0, 0, 0, 0, 0, 0, 0};
    enum ts_era era = TS_ERA_UNKNOWN;
    (void)unused;
    struct tscodec_src src = {hs, 0, NULL, NULL};
    CHECK_EQ(tscodec_detect(&src, &era), 1);
    for (size_t k = 1; k < TS_HANDSHAKE_LEN; k++) {
        src.n = k;
        CHECK_EQ(tscodec_detect(&src, &era), TS_HANDSHAKE_LEN);
        CHECK_EQ(era, TS_ERA_UNKNOWN);
    }
    src.n = sizeof hs;
    CHECK_EQ(tscodec_detect(&src, &era), 0);
    CHECK_EQ(era, TS_ERA_VALIDATE);
    CHECK_EQ(src.n, sizeof hs); /* detecting takes nothing */
    era = TS_ERA_UNKNOWN;
    src = (struct tscodec_src){old_set, 2, NULL, NULL};
    CHECK_EQ(tscodec_detect(&src, &era), 0);
    CHECK_EQ(era, TS_ERA_LEGACY);
    era = TS_ERA_UNKNOWN;
    src = (struct tscodec_src){(const uint8_t *)"\x03", 1, NULL, NULL};
    CHECK_EQ(tscodec_detect(&src, &era), 0);
    CHECK_EQ(era, TS_ERA_LEGACY);
}

/* Type bytes map to ops by numbering; names follow the ops. */
static void t_numberings(void *unused)
{
    (void)unused;
    for (int code = 0; code < TS_WATCH_KEY; code++)
        CHECK_EQ(tscodec_op(TS_ERA_VALIDATE, (uint8_t)code), code);
    CHECK_EQ(tscodec_op(TS_ERA_VALIDATE, TS_WATCH_KEY), -1);
    CHECK_EQ(tscodec_op(TS_ERA_VALIDATE, 0xff), -1);
    CHECK_EQ(tscodec_op(TS_ERA_LEGACY, 0), TS_SET);
    CHECK_EQ(tscodec_op(TS_ERA_LEGACY, 3), TS_ADD);
    CHECK_EQ(tscodec_op(TS_ERA_LEGACY, 7), TS_WATCH_KEY);
    CHECK_EQ(tscodec_op(TS_ERA_LEGACY, 8), TS_DELETE_KEY);
    CHECK_EQ(tscodec_op(TS_ERA_LEGACY, 12), TS_CANCEL_WAIT);
    CHECK_EQ(tscodec_op(TS_ERA_LEGACY, 13), -1);
    CHECK_STR(tscodec_name(TS_COMPARE_SET), "compare_set");
    CHECK_STR(tscodec_name(TS_WATCH_KEY), "watch_key");
    CHECK_STR(tscodec_name(-1), "?");
    CHECK_STR(tscodec_name(TS_NOPS), "?");
}

/* A VALIDATE-era stream: handshake, set, compare_set, add, multi_set, ping, each decoded in turn. */
static void t_validate_era(void *unused)
{
    struct req_buf b = {0};
    struct ts_req r = {.op = -1};
    struct tscodec_error e;
    size_t used, want, at = 0;
    (void)unused;
    rb_u8(&b, TS_VALIDATE), rb_le(&b, TS_MAGIC, 4);
    rb_u8(&b, TS_SET), rb_str(&b, "/k"), rb_str(&b, "v1");
    rb_u8(&b, TS_COMPARE_SET), rb_str(&b, "/k"), rb_str(&b, "v1"), rb_str(&b, "v2");
    rb_u8(&b, TS_ADD), rb_str(&b, "/n"), rb_le(&b, (uint64_t)-3, 8);
    rb_u8(&b, TS_MULTI_SET), rb_le(&b, 2, 8), rb_str(&b, "a"), rb_str(&b, "1"), rb_str(&b, "b"), rb_str(&b, "");
    rb_u8(&b, TS_PING), rb_le(&b, 0xA1B2C3D4u, 4);
    CHECK_EQ(decode(TS_ERA_VALIDATE, &lim, b.p, b.n, &r, &used, &want, &e), TSC_DONE);
    CHECK(r.op == TS_VALIDATE && r.u32 == TS_MAGIC && used == 5);
    tscodec_reset(&r);
    at += used;
    CHECK_EQ(decode(TS_ERA_VALIDATE, &lim, b.p + at, b.n - at, &r, &used, &want, &e), TSC_DONE);
    CHECK(r.op == TS_SET && r.nb == 2);
    CHECK_STR((char *)r.b[0].p, "/k");
    CHECK_STR((char *)r.b[1].p, "v1");
    tscodec_reset(&r);
    at += used;
    CHECK_EQ(decode(TS_ERA_VALIDATE, &lim, b.p + at, b.n - at, &r, &used, &want, &e), TSC_DONE);
    CHECK(r.op == TS_COMPARE_SET && r.nb == 3);
    CHECK_STR((char *)r.b[2].p, "v2");
    tscodec_reset(&r);
    at += used;
    CHECK_EQ(decode(TS_ERA_VALIDATE, &lim, b.p + at, b.n - at, &r, &used, &want, &e), TSC_DONE);
    CHECK(r.op == TS_ADD && r.i64 == -3);
    tscodec_reset(&r);
    at += used;
    CHECK_EQ(decode(TS_ERA_VALIDATE, &lim, b.p + at, b.n - at, &r, &used, &want, &e), TSC_DONE);
    CHECK(r.op == TS_MULTI_SET && r.n == 2 && r.klens[1] == 1 && r.vlens[1] == 0);
    CHECK_STR(r.keys[0], "a");
    CHECK_STR((char *)r.vals[0], "1");
    tscodec_reset(&r);
    at += used;
    CHECK_EQ(decode(TS_ERA_VALIDATE, &lim, b.p + at, b.n - at, &r, &used, &want, &e), TSC_DONE);
    CHECK(r.op == TS_PING && r.u32 == 0xA1B2C3D4u);
    CHECK_EQ(at + used, b.n);
    tscodec_reset(&r);
    CHECK_EQ(r.op, -1);
}

/* The old numbering: SET is type byte 0, CHECK 4 with a key list, WATCH_KEY 7; no handshake. */
static void t_legacy_era(void *unused)
{
    struct req_buf b = {0};
    struct ts_req r = {.op = -1};
    struct tscodec_error e;
    size_t used, want;
    (void)unused;
    rb_u8(&b, 0), rb_str(&b, "init/"), rb_str(&b, "x");
    rb_u8(&b, 4), rb_le(&b, 2, 8), rb_str(&b, "k1"), rb_str(&b, "k2");
    rb_u8(&b, 7), rb_str(&b, "/w");
    CHECK_EQ(decode(TS_ERA_LEGACY, &lim, b.p, b.n, &r, &used, &want, &e), TSC_DONE);
    CHECK(r.op == TS_SET && r.code == 0);
    CHECK_STR((char *)r.b[0].p, "init/");
    tscodec_reset(&r);
    size_t at = used;
    CHECK_EQ(decode(TS_ERA_LEGACY, &lim, b.p + at, b.n - at, &r, &used, &want, &e), TSC_DONE);
    CHECK(r.op == TS_CHECK && r.code == 4 && r.n == 2 && r.vals == NULL);
    CHECK_STR(r.keys[1], "k2");
    tscodec_reset(&r);
    at += used;
    CHECK_EQ(decode(TS_ERA_LEGACY, &lim, b.p + at, b.n - at, &r, &used, &want, &e), TSC_DONE);
    CHECK(r.op == TS_WATCH_KEY && r.code == 7);
    CHECK_EQ(at + used, b.n);
    tscodec_reset(&r);
}

/* Feed b a byte at a time, as the relay's buffer does (what is not taken stays); 1 when it decodes whole. */
static int feed_bytewise(const struct req_buf *b, struct ts_req *r)
{
    uint8_t held[sizeof b->p];
    size_t nheld = 0;
    struct tscodec_error e;
    for (size_t i = 0; i < b->n; i++) {
        held[nheld++] = b->p[i];
        size_t used, want = 0;
        enum tscodec_result res = decode(TS_ERA_VALIDATE, &lim, held, nheld, r, &used, &want, &e);
        memmove(held, held + used, nheld - used);
        nheld -= used;
        if (res == TSC_DONE)
            return i + 1 == b->n && nheld == 0;
        /* Needs more bytes than are held, and never more than the rest of the request. */
        if (res != TSC_MORE || want <= nheld || want > nheld + b->n - i - 1)
            return 0;
    }
    return 0;
}

/* A request arriving a byte at a time, or in two pieces split anywhere, decodes to the same request. */
static void t_partial(void *unused)
{
    struct req_buf b = {0};
    struct ts_req r = {.op = -1};
    struct tscodec_error e;
    (void)unused;
    rb_u8(&b, TS_MULTI_SET), rb_le(&b, 2, 8), rb_str(&b, "key-1"), rb_str(&b, "value-1"), rb_str(&b, "k2");
    rb_str(&b, "v2");
    CHECK(feed_bytewise(&b, &r));
    CHECK(r.op == TS_MULTI_SET && r.n == 2);
    CHECK_STR((char *)r.vals[1], "v2");
    tscodec_reset(&r);
    for (size_t k = 0; k <= b.n; k++) {
        size_t used1, used2, want = 0;
        enum tscodec_result res = decode(TS_ERA_VALIDATE, &lim, b.p, k, &r, &used1, &want, &e);
        CHECK_EQ(res, k == b.n ? TSC_DONE : TSC_MORE);
        if (res == TSC_MORE) {
            CHECK_EQ(decode(TS_ERA_VALIDATE, &lim, b.p + used1, b.n - used1, &r, &used2, &want, &e), TSC_DONE);
            CHECK_EQ(used1 + used2, b.n);
        }
        CHECK(r.n == 2 && r.klens[0] == 5 && memcmp(r.keys[0], "key-1", 5) == 0);
        tscodec_reset(&r);
    }
    /* Nothing at all: one byte is needed. */
    size_t used, want = 0;
    CHECK_EQ(decode(TS_ERA_VALIDATE, &lim, b.p, 0, &r, &used, &want, &e), TSC_MORE);
    CHECK_EQ(want, 1);
    /* A string's length taken: its whole body is awaited, nothing copied meanwhile. */
    CHECK_EQ(decode(TS_ERA_VALIDATE, &lim, b.p, 1 + 8 + 8 + 2, &r, &used, &want, &e), TSC_MORE);
    CHECK_EQ(used, 1 + 8 + 8);
    CHECK_EQ(want, 5);
    tscodec_reset(&r);
}

/* A chained buffer standing in for the daemon's evbuffer: the codec reads it through callbacks. */
struct test_buf {
    const uint8_t *p;
    size_t n;
};

/* Bytes the test buffer holds. */
static size_t tb_len(void *buf)
{
    return ((struct test_buf *)buf)->n;
}

/* Copy from the front of the test buffer. */
static void tb_copy(void *buf, void *dst, size_t n)
{
    memcpy(dst, ((struct test_buf *)buf)->p, n);
}

/* Take from the front of the test buffer. */
static void tb_take(void *buf, void *dst, size_t n)
{
    struct test_buf *t = buf;
    memcpy(dst, t->p, n);
    t->p += n;
    t->n -= n;
}

/* The buffer source: detection, peeking and decoding read through the callbacks as through a span. */
static void t_buf_source(void *unused)
{
    static const struct tscodec_buf_ops ops = {tb_len, tb_copy, tb_take};
    struct req_buf b = {0};
    struct ts_req r = {.op = -1};
    struct tscodec_error e;
    enum ts_era era = TS_ERA_UNKNOWN;
    size_t want = 0;
    uint8_t first;
    (void)unused;
    rb_u8(&b, TS_VALIDATE), rb_le(&b, TS_MAGIC, 4);
    rb_u8(&b, TS_WAIT), rb_le(&b, 1, 8), rb_str(&b, "/w");
    struct test_buf tb = {b.p, 3};
    struct tscodec_src src = {NULL, 0, &tb, &ops};
    CHECK_EQ(tscodec_detect(&src, &era), TS_HANDSHAKE_LEN);
    tb.n = b.n;
    CHECK_EQ(tscodec_detect(&src, &era), 0);
    CHECK_EQ(era, TS_ERA_VALIDATE);
    CHECK_EQ(tscodec_avail(&src), b.n);
    CHECK_EQ(tscodec_step(&r, era, &lim, &src, &want, &e), TSC_DONE);
    CHECK_EQ(r.u32, TS_MAGIC);
    tscodec_reset(&r);
    tscodec_peek(&src, &first, 1);
    CHECK_EQ(first, TS_WAIT);
    CHECK_EQ(tscodec_step(&r, era, &lim, &src, &want, &e), TSC_DONE);
    CHECK(r.op == TS_WAIT && r.n == 1);
    CHECK_STR(r.keys[0], "/w");
    CHECK_EQ(tscodec_avail(&src), 0);
    tscodec_reset(&r);
}

/* Decode b as one VALIDATE-era request under l, expecting a refusal of kind code that says why. */
static void refused(const struct req_buf *b, const struct tscodec_limits *l, enum tscodec_err code, const char *why)
{
    struct ts_req r = {.op = -1};
    struct tscodec_error e = {0};
    size_t used, want;
    CHECK_EQ(decode(TS_ERA_VALIDATE, l, b->p, b->n, &r, &used, &want, &e), TSC_ERROR);
    CHECK_EQ(e.code, code);
    CHECK_STR(e.why, why);
    tscodec_reset(&r); /* frees whatever was taken before the refusal */
}

/* Each limit trips on the length or count that breaks it, before the bytes it announces arrive. */
static void t_limits(void *unused)
{
    struct req_buf b = {0};
    (void)unused;
    rb_u8(&b, TS_GET), rb_le(&b, 17, 8); /* only the length */
    refused(&b, &lim, TSC_ERR_KEY, "key of 17 bytes exceeds the limit of 16");
    b.n = 0;
    rb_u8(&b, TS_SET), rb_str(&b, "/k"), rb_le(&b, 65, 8);
    refused(&b, &lim, TSC_ERR_VALUE, "value of 65 bytes exceeds the limit of 64");
    b.n = 0;
    rb_u8(&b, TS_MULTI_SET), rb_le(&b, 2, 8), rb_str(&b, "a"), rb_le(&b, 65, 8);
    refused(&b, &lim, TSC_ERR_VALUE, "value of 65 bytes exceeds the limit of 64");
    b.n = 0;
    rb_u8(&b, TS_WAIT), rb_le(&b, 5, 8);
    refused(&b, &lim, TSC_ERR_KEYS, "5 keys in one request exceed the limit of 4");
    b.n = 0;
    /* Under the key and value limits, over the request's: 1 + 8 + 16 + 2 * (8 + 64) > 150, known at the
     * second value's length. */
    struct tscodec_limits small = lim;
    small.max_request = 150;
    rb_u8(&b, TS_COMPARE_SET), rb_str(&b, "0123456789abcdef");
    rb_le(&b, 64, 8), memset(b.p + b.n, 'x', 64), b.n += 64;
    rb_le(&b, 64, 8);
    refused(&b, &small, TSC_ERR_REQUEST, "request of more than 150 bytes");
    b.n = 0;
    /* A count whose strings' lengths alone cannot fit the request bound is refused at the count. */
    small.max_request = 40;
    rb_u8(&b, TS_MULTI_GET), rb_le(&b, 4, 8);
    refused(&b, &small, TSC_ERR_REQUEST, "request of more than 40 bytes");
    b.n = 0;
    /* With no value bound of its own (the relay's), a value is bounded by the request alone. */
    struct tscodec_limits relay = {.max_key = 16, .max_value = UINT64_MAX, .max_keys = 4, .max_request = 100};
    rb_u8(&b, TS_SET), rb_str(&b, "/k"), rb_le(&b, UINT64_MAX - 1, 8);
    refused(&b, &relay, TSC_ERR_REQUEST, "request of more than 100 bytes");
    b.n = 0;
    rb_u8(&b, TS_SET), rb_str(&b, "/k"), rb_str(&b, "fits");
    struct ts_req r = {.op = -1};
    struct tscodec_error e;
    size_t used, want;
    CHECK_EQ(decode(TS_ERA_VALIDATE, &relay, b.p, b.n, &r, &used, &want, &e), TSC_DONE);
    tscodec_reset(&r);
}

/* Type bytes a numbering does not have are garbage, in either numbering. */
static void t_garbage(void *unused)
{
    struct req_buf b = {0};
    struct ts_req r = {.op = -1};
    struct tscodec_error e;
    size_t used, want;
    (void)unused;
    rb_u8(&b, 19);
    refused(&b, &lim, TSC_ERR_BAD, "unknown type byte 19 (VALIDATE-era numbering)");
    b.p[0] = 0xff;
    refused(&b, &lim, TSC_ERR_BAD, "unknown type byte 255 (VALIDATE-era numbering)");
    b.p[0] = 13;
    CHECK_EQ(decode(TS_ERA_LEGACY, &lim, b.p, b.n, &r, &used, &want, &e), TSC_ERROR);
    CHECK_EQ(e.code, TSC_ERR_BAD);
    CHECK_STR(e.why, "unknown type byte 13 (old numbering)");
    tscodec_reset(&r);
    b.p[0] = 0xff;
    CHECK_EQ(decode(TS_ERA_LEGACY, &lim, b.p, b.n, &r, &used, &want, &e), TSC_ERROR);
    CHECK_EQ(e.code, TSC_ERR_BAD);
    tscodec_reset(&r);
}

/* Replies: one byte, PING's u32 echo, a little-endian i64, blobs small (one piece) and large. */
static void t_replies(void *unused)
{
    static const uint8_t want_head[] = {TS_WAIT_CANCELED, 0xD4, 0xC3, 0xB2, 0xA1, 0xFE, 0xFF, 0xFF, 0xFF,
                                        0xFF, 0xFF, 0xFF, 0xFF, 2, 0, 0, 0, 0, 0, 0, 0, 'o', 'k'};
    struct tscodec_out o = {0};
    struct tscodec_sink s = tscodec_out_sink(&o);
    char big[300];
    uint8_t le[8];
    (void)unused;
    memset(big, 'b', sizeof big);
    tscodec_put_u8(&s, TS_WAIT_CANCELED);
    tscodec_put_u32(&s, 0xA1B2C3D4u);
    tscodec_put_i64(&s, -2);
    tscodec_put_blob(&s, "ok", 2);
    tscodec_put_blob(&s, big, sizeof big);
    tscodec_put_blob(&s, NULL, 0);
    tscodec_put(&s, "raw", 3);
    CHECK_MEM(o.p, sizeof want_head, want_head, sizeof want_head);
    CHECK_EQ(o.len, sizeof want_head + 8 + sizeof big + 8 + 3);
    tscodec_le64(le, sizeof big);
    CHECK_MEM(o.p + sizeof want_head, 8, le, 8);
    CHECK(memcmp(o.p + sizeof want_head + 8, big, sizeof big) == 0);
    CHECK_MEM(o.p + o.len - 3, 3, "raw", 3);
    CHECK(!o.oom);
    free(o.p);
}

int main(void)
{
    h_init("tscodec", 30);
    H_RUN(t_detect, NULL);
    H_RUN(t_numberings, NULL);
    H_RUN(t_validate_era, NULL);
    H_RUN(t_legacy_era, NULL);
    H_RUN(t_partial, NULL);
    H_RUN(t_buf_source, NULL);
    H_RUN(t_limits, NULL);
    H_RUN(t_garbage, NULL);
    H_RUN(t_replies, NULL);
    return h_finish();
}
