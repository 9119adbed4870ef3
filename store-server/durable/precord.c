/*
 * Durable record framing.  Each record is a 4-byte big-endian body length,
 * the zlib crc32 of the body, then the body: a kind byte, a namespace
 * length byte, the namespace, and a packed message.  The kind byte's high
 * bit says which message: set, a muster.Record (proto/record.proto, whose
 * keys are bytes); clear, the first format's wire Request (a SetReq,
 * DeleteReq, ... whose keys are protobuf strings), which is still read but
 * no longer written.
 *
 * Torn or damaged.  A crash in the middle of an append leaves the last
 * record of the newest segment incomplete: its header or body cut short by
 * the end of the file, or (the file's size made durable before its data)
 * bytes up to the end that fail the checksum, or zeros.  Only that may be
 * dropped.  So a record that fails its checks is a torn tail when it
 * reaches the end of the file - its header does not fit, or its length
 * runs exactly to or past the end - or only zero bytes follow it; and, in
 * every case, no intact record starts at any later offset.  The last rule
 * is the conservative one: a length field damaged to point past the end
 * looks like a torn tail, but the intact records behind it show it is not.
 * Anything else is damage, and recovery refuses to start (persist.c).
 */
#include "precord.h"

#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "frame.h"
#include "muster.pb-c.h"
#include "record.h"
#include "record.pb-c.h"

/* The kind byte's flag for a muster.Record body (clear: the first format's wire Request). */
#define PREC_FORMAT_RECORD 0x80

/* Append one framed record to out; 0, or -1 when memory ran out. */
int prec_put(struct evbuffer *out, enum prec_kind kind, const char *ns, size_t nslen, uint64_t id, const char *key,
             size_t klen, const uint8_t *val, size_t vlen, uint64_t gen)
{
    Muster__Record rec = MUSTER__RECORD__INIT;
    rec.id = id;
    rec.key.data = (uint8_t *)key;
    rec.key.len = key ? klen : 0;
    rec.value.data = (uint8_t *)val;
    rec.value.len = val ? vlen : 0;
    rec.generation = gen;
    size_t plen = muster__record__get_packed_size(&rec);
    size_t body = 2 + nslen + plen;
    struct evbuffer_iovec v;
    if (nslen > 255 || body > PREC_MAX_BODY || evbuffer_reserve_space(out, PREC_HDR + body, &v, 1) != 1)
        return -1;
    uint8_t *p = v.iov_base;
    p[PREC_HDR] = (uint8_t)kind | PREC_FORMAT_RECORD;
    p[PREC_HDR + 1] = (uint8_t)nslen;
    memcpy(p + PREC_HDR + 2, ns, nslen);
    muster__record__pack(&rec, p + PREC_HDR + 2 + nslen);
    frame_put_len(p, (uint32_t)body);
    frame_put_len(p + 4, (uint32_t)crc32(0L, p + PREC_HDR, (uInt)body));
    v.iov_len = PREC_HDR + body;
    return evbuffer_commit_space(out, &v, 1);
}

/* Append r as one framed record (id: the log's number for it, 0 in a snapshot); 0, or -1. */
int prec_put_record(struct evbuffer *out, uint64_t id, const struct record *r)
{
    /* The kind byte's numbers are record.h's. */
    enum prec_kind kind = r->kind == RECORD_SET    ? PREC_SET
                          : r->kind == RECORD_DEL  ? PREC_DEL
                          : r->kind == RECORD_DROP ? PREC_DROP
                                                   : PREC_GEN;
    return prec_put(out, kind, r->ns, strlen(r->ns), id, r->key, r->klen, r->val, r->vlen, r->gen);
}

/* View p as a record (pointing into p); whether p is a set, delete, generation or drop record. */
int prec_record(const struct prec *p, struct record *r)
{
    static const enum record_kind kinds[] = {[PREC_SET] = RECORD_SET, [PREC_DEL] = RECORD_DEL,
                                             [PREC_GEN] = RECORD_GEN, [PREC_DROP] = RECORD_DROP};
    if (p->kind != PREC_SET && p->kind != PREC_DEL && p->kind != PREC_GEN && p->kind != PREC_DROP)
        return 0;
    *r = (struct record){.kind = kinds[p->kind],
                         .ns = p->ns, .key = p->key, .klen = p->klen, .val = p->val, .vlen = p->vlen, .gen = p->gen};
    return 1;
}

/* Fill r from a first-format body (a wire Request); whether its op matches its kind. */
static int prec_from_request(struct prec *r, Muster__Request *req)
{
    r->msg = req;
    r->legacy = 1;
    r->id = req->id;
    switch (r->kind) {
    case PREC_SET:
        if (req->op_case != MUSTER__REQUEST__OP_SET)
            return 0;
        r->key = req->set->key;
        r->val = req->set->value.data;
        r->vlen = req->set->value.len;
        break;
    case PREC_DEL:
        if (req->op_case != MUSTER__REQUEST__OP_DELETE)
            return 0;
        r->key = req->delete_->key;
        break;
    case PREC_GEN:
        if (req->op_case != MUSTER__REQUEST__OP_RDZV_HEARTBEAT)
            return 0;
        r->gen = req->rdzv_heartbeat->generation;
        return 1;
    case PREC_SNAP_BEGIN:
    case PREC_SNAP_END:
        return req->op_case == MUSTER__REQUEST__OP_PING;
    case PREC_DROP: /* newer than the first format */
        return 0;
    }
    r->klen = r->key ? strlen(r->key) : 0;
    return 1;
}

/* Fill r from a muster.Record body. */
static void prec_from_record(struct prec *r, Muster__Record *rec)
{
    r->msg = rec;
    r->id = rec->id;
    r->key = (const char *)rec->key.data;
    r->klen = rec->key.len;
    r->val = rec->value.data;
    r->vlen = rec->value.len;
    r->gen = rec->generation;
}

/* Decode a record body of len bytes (checksum already verified) into r. */
static enum prec_read prec_decode(const uint8_t *b, size_t len, struct prec *r)
{
    size_t nslen = b[1];
    if (2 + nslen > len)
        return PREC_CORRUPT;
    r->kind = (enum prec_kind)(b[0] & ~PREC_FORMAT_RECORD);
    memcpy(r->ns, b + 2, nslen);
    r->ns[nslen] = 0;
    const uint8_t *m = b + 2 + nslen;
    size_t mlen = len - 2 - nslen;
    int ok = r->kind >= PREC_SET && r->kind <= PREC_DROP;
    if (ok && (b[0] & PREC_FORMAT_RECORD)) {
        Muster__Record *rec = muster__record__unpack(NULL, mlen, m);
        if (rec)
            prec_from_record(r, rec);
        ok = rec != NULL;
    } else if (ok) {
        Muster__Request *req = muster__request__unpack(NULL, mlen, m);
        ok = req && prec_from_request(r, req);
        if (req && !r->msg)
            muster__request__free_unpacked(req, NULL);
    }
    if (ok && (r->kind == PREC_SET || r->kind == PREC_DEL))
        ok = r->klen > 0;
    if (!r->val)
        r->val = (const uint8_t *)""; /* an empty value: never a NULL to copy from */
    if (!ok) {
        prec_free(r);
        return PREC_CORRUPT;
    }
    return PREC_OK;
}

/* Read the record at *at of the n bytes at p into *r, moving *at past it when OK. */
enum prec_read prec_next(const uint8_t *p, size_t n, size_t *at, struct prec *r)
{
    memset(r, 0, sizeof *r);
    if (*at >= n)
        return PREC_EOF;
    const uint8_t *h = p + *at;
    size_t left = n - *at;
    if (left < PREC_HDR)
        return PREC_BAD;
    uint32_t len = frame_len(h), crc = frame_len(h + 4);
    if (len < 2 || len > PREC_MAX_BODY || len > left - PREC_HDR || crc32(0L, h + PREC_HDR, (uInt)len) != crc)
        return PREC_BAD;
    enum prec_read rc = prec_decode(h + PREC_HDR, len, r);
    if (rc == PREC_OK)
        *at += PREC_HDR + len;
    return rc;
}

/* Whether an intact, decodable record starts at any offset after at. */
static int prec_intact_after(const uint8_t *p, size_t n, size_t at)
{
    for (size_t o = at + 1; o + PREC_HDR + 2 <= n; o++) {
        uint32_t len = frame_len(p + o);
        if (len < 2 || len > n - o - PREC_HDR)
            continue;
        size_t next = o;
        struct prec r;
        if (prec_next(p, n, &next, &r) == PREC_OK) {
            prec_free(&r);
            return 1;
        }
    }
    return 0;
}

/* Whether a bad record at offset at of the n bytes at p is a torn tail (see the top of this file). */
int prec_tail_torn(const uint8_t *p, size_t n, size_t at)
{
    size_t left = n - at;
    int reaches_end = left < PREC_HDR;
    if (!reaches_end) {
        uint32_t len = frame_len(p + at);
        reaches_end = len >= 2 && len <= PREC_MAX_BODY && len >= left - PREC_HDR;
    }
    for (size_t i = at; !reaches_end && i < n && p[i] == 0; i++)
        reaches_end = i + 1 == n;
    return reaches_end && !prec_intact_after(p, n, at);
}

/* Free what prec_next allocated in r. */
void prec_free(struct prec *r)
{
    if (r->msg && r->legacy)
        muster__request__free_unpacked(r->msg, NULL);
    else if (r->msg)
        muster__record__free_unpacked(r->msg, NULL);
    r->msg = NULL;
}

/* Say what is wrong with the bad record at offset at of the n bytes at p. */
static void prec_describe(const uint8_t *p, size_t n, size_t at, struct prec_end *end)
{
    const char *what = "checksum mismatch";
    uint32_t len = n - at >= PREC_HDR ? frame_len(p + at) : 0;
    if (n - at < PREC_HDR)
        what = "header cut short";
    else if (len < 2 || len > PREC_MAX_BODY)
        what = "impossible length";
    else if (len > n - at - PREC_HDR)
        what = "length runs past the end of the file";
    snprintf(end->why, sizeof end->why, "damaged record at offset %zu (%s)%s", at, what,
             prec_intact_after(p, n, at) ? ", intact records follow it" : "");
}

/* Call fn on each record of the n bytes at p (see prec_read_file). */
static int prec_read_mem(const uint8_t *p, size_t n, int (*fn)(void *arg, const struct prec *r), void *arg,
                         struct prec_end *end)
{
    for (size_t at = 0;;) {
        struct prec r;
        size_t start = at;
        enum prec_read st = prec_next(p, n, &at, &r);
        end->at = (long)start;
        if (st == PREC_EOF)
            return 0;
        if (st == PREC_BAD) {
            if (prec_tail_torn(p, n, start))
                return 1;
            prec_describe(p, n, start, end);
            return -1;
        }
        if (st == PREC_CORRUPT) {
            snprintf(end->why, sizeof end->why, "undecodable record at offset %zu", start);
            return -1;
        }
        int frc = fn(arg, &r);
        prec_free(&r);
        if (frc != 0) {
            snprintf(end->why, sizeof end->why, "unexpected record at offset %zu", start);
            return -1;
        }
    }
}

/* Call fn on each record of path (see precord.h). */
int prec_read_file(const char *path, int (*fn)(void *arg, const struct prec *r), void *arg, struct prec_end *end)
{
    memset(end, 0, sizeof *end);
    end->at = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(end->why, sizeof end->why, "cannot open: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    end->size = (long long)sb.st_size;
    size_t n = (size_t)sb.st_size;
    void *p = n ? mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (n && p == MAP_FAILED) {
        snprintf(end->why, sizeof end->why, "cannot map: %s", strerror(errno));
        return -1;
    }
    if (p)
        madvise(p, n, MADV_SEQUENTIAL);
    int rc = n ? prec_read_mem(p, n, fn, arg, end) : 0;
    if (p)
        munmap(p, n);
    return rc;
}
