/* TCPStore's binary protocol for the load generator: both numberings (torch 1.13's, before
 * the VALIDATE handshake existed, and the VALIDATE era of torch 2.x), request templates and
 * the untagged, in-order replies.  Integers are little-endian, strings are u64 length + bytes. */
#include "tsproto.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TS_MAGIC 0x3C85F7CEu

/* One command: its code in each numbering (-1 = absent there) and its reply shape. */
struct ts_row {
    enum ts_cmd cmd;
    const char *name;
    int8_t old_code;
    int8_t new_code;
    uint8_t reply;
};

/* The command table; the numbering changed when VALIDATE took code 0. */
static const struct ts_row ts_rows[TS_N] = {
    {TS_VALIDATE, "validate", -1, 0, RK_NONE},
    {TS_SET, "set", 0, 1, RK_NONE},
    {TS_GET, "get", 2, 3, RK_BYTES},
    {TS_ADD, "add", 3, 4, RK_I64},
    {TS_CHECK, "check", 4, 5, RK_U8},
    {TS_WAIT, "wait", 5, 6, RK_U8},
    {TS_NUMKEYS, "num_keys", 6, 7, RK_I64},
    {TS_PING, "ping", -1, 13, RK_U32},
};

/* The wire code of cmd in the given numbering, or -1. */
static int tsproto_code(enum ts_cmd cmd, int old)
{
    return old ? ts_rows[cmd].old_code : ts_rows[cmd].new_code;
}

/* Append a little-endian integer of width bytes. */
static uint8_t *tsproto_le(uint8_t *p, uint64_t v, int width)
{
    for (int i = 0; i < width; i++, v >>= 8)
        *p++ = (uint8_t)v;
    return p;
}

/* Append a u64 length and the bytes. */
static uint8_t *tsproto_str(uint8_t *p, const void *s, size_t n)
{
    p = tsproto_le(p, n, 8);
    memcpy(p, s, n);
    return p + n;
}

/* Map a load-generator op to a TCPStore command, or -1 when the protocol has none. */
static int tsproto_cmd_of(enum lg_op op)
{
    switch (op) {
    case OP_SET: return TS_SET;
    case OP_GET: return TS_GET;
    case OP_ADD: return TS_ADD;
    case OP_WAIT: return TS_WAIT;
    case OP_CHECK: return TS_CHECK;
    case OP_PING: return TS_PING;
    default: return -1;
    }
}

/* Build the template of cmd for key text key (may be NULL) and an optional value. */
int tsproto_tmpl_cmd(enum ts_cmd cmd, int old, const char *key, const uint8_t *val, size_t vlen, struct tmpl *t)
{
    int code = tsproto_code(cmd, old);
    if (code < 0)
        return -1;
    size_t klen = key ? strlen(key) : 0;
    t->buf = malloc(1 + 8 + 8 + klen + 8 + vlen + 8);
    if (!t->buf)
        return -1;
    uint8_t *p = t->buf;
    *p++ = (uint8_t)code;
    if (cmd == TS_WAIT || cmd == TS_CHECK)
        p = tsproto_le(p, 1, 8);
    if (key)
        p = tsproto_str(p, key, klen);
    if (cmd == TS_SET)
        p = tsproto_str(p, val, vlen);
    else if (cmd == TS_ADD)
        p = tsproto_le(p, 1, 8);
    else if (cmd == TS_PING || cmd == TS_VALIDATE)
        p = tsproto_le(p, cmd == TS_PING ? (uint64_t)getpid() : TS_MAGIC, 4);
    t->len = (size_t)(p - t->buf);
    t->id_off = t->key_off = TMPL_NONE;
    t->reply = ts_rows[cmd].reply;
    if (key && klen >= TMPL_DIGITS && tmpl_find_key(t, key) < 0) {
        tmpl_free(t);
        return -1;
    }
    return 0;
}

/* Build the template of one request; its key is spec->key followed by 8 patched digits. */
int tsproto_tmpl(const struct opspec *spec, int old, struct tmpl *t)
{
    int cmd = tsproto_cmd_of(spec->op);
    if (cmd < 0)
        return -1;
    char key[256];
    if (strlen(spec->key) + TMPL_DIGITS >= sizeof key)
        return -1;
    snprintf(key, sizeof key, "%s%0*u", spec->key, TMPL_DIGITS, 0u);
    uint8_t *val = malloc(spec->value_size ? spec->value_size : 1);
    if (!val)
        return -1;
    memset(val, spec->value_byte ? spec->value_byte : 'v', spec->value_size);
    int rc = tsproto_tmpl_cmd((enum ts_cmd)cmd, old, cmd == TS_PING ? NULL : key, val, spec->value_size, t);
    free(val);
    return rc;
}

/* Read a little-endian u64. */
static uint64_t tsproto_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* Parse one reply of shape kind at p; returns bytes consumed, 0 when incomplete, -1 when bad. */
ssize_t tsproto_parse(int kind, const uint8_t *p, size_t n, struct reply *r)
{
    memset(r, 0, sizeof *r);
    r->frame = 2;
    switch (kind) {
    case RK_U8:
        if (n < 1)
            return 0;
        r->num = p[0];
        return 1;
    case RK_U32:
        if (n < 4)
            return 0;
        r->num = (int64_t)(p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        return 4;
    case RK_I64:
        if (n < 8)
            return 0;
        r->num = (int64_t)tsproto_get64(p);
        return 8;
    case RK_BYTES: {
        if (n < 8)
            return 0;
        uint64_t len = tsproto_get64(p);
        if (len > (1u << 30))
            return -1;
        if (n < 8 + len)
            return 0;
        r->val = p + 8;
        r->vlen = (size_t)len;
        return (ssize_t)(8 + len);
    }
    default:
        return -1;
    }
}

/* Bytes of an ADD that stops half way: type, key length 16, then 4 key bytes. */
size_t tsproto_stall(int old, uint8_t *out)
{
    uint8_t *p = out;
    *p++ = (uint8_t)tsproto_code(TS_ADD, old);
    p = tsproto_le(p, 16, 8);
    memcpy(p, "/sta", 4);
    return (size_t)(p + 4 - out);
}

/* Wait up to ms for n bytes on a blocking-mode probe socket; returns bytes read, or -1. */
static ssize_t tsproto_recv(int fd, uint8_t *buf, size_t n, int ms)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int k = poll(&pfd, 1, ms);
        if (k <= 0)
            return k < 0 && errno != EINTR ? -1 : (ssize_t)got;
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            return r < 0 && errno == EAGAIN ? (ssize_t)got : -1;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* Tell the numbering a connected socket's server speaks: 1 old (torch 1.13), 0 VALIDATE era,
 * -1 unknown.  The probe is the old GETNUMKEYS (one byte, code 6): an old server answers
 * an i64; a VALIDATE-era server rejects a first byte other than VALIDATE and stays silent
 * or closes.  The socket is spent afterwards. */
int tsproto_probe(int fd, int ms)
{
    uint8_t b = (uint8_t)tsproto_code(TS_NUMKEYS, 1);
    if (write(fd, &b, 1) != 1)
        return -1;
    uint8_t buf[8];
    ssize_t got = tsproto_recv(fd, buf, sizeof buf, ms);
    return got == 8 ? 1 : 0;
}
