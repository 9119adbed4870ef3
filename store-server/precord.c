/*
 * Durable record framing.  Each record is a 4-byte big-endian body length,
 * the zlib crc32 of the body, then the body: a kind byte, a namespace
 * length byte, the namespace, and a packed protobuf Request reusing the
 * wire messages.  A record whose header or body is cut short, or whose
 * checksum does not match, is "torn": the writer died in the middle of it.
 */
#include "precord.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "frame.h"

/* Pack req and append it framed; 0, or -1 when memory ran out. */
static int prec_frame(struct evbuffer *out, enum prec_kind kind, const char *ns, size_t nslen,
                      const Muster__Request *req)
{
    size_t plen = muster__request__get_packed_size(req);
    size_t body = 2 + nslen + plen;
    struct evbuffer_iovec v;
    if (nslen > 255 || body > PREC_MAX_BODY || evbuffer_reserve_space(out, PREC_HDR + body, &v, 1) != 1)
        return -1;
    uint8_t *p = v.iov_base;
    p[PREC_HDR] = (uint8_t)kind;
    p[PREC_HDR + 1] = (uint8_t)nslen;
    memcpy(p + PREC_HDR + 2, ns, nslen);
    muster__request__pack(req, p + PREC_HDR + 2 + nslen);
    frame_put_len(p, (uint32_t)body);
    frame_put_len(p + 4, (uint32_t)crc32(0L, p + PREC_HDR, (uInt)body));
    v.iov_len = PREC_HDR + body;
    return evbuffer_commit_space(out, &v, 1);
}

/* Append one framed record to out; 0, or -1 when memory ran out. */
int prec_put(struct evbuffer *out, enum prec_kind kind, const char *ns, size_t nslen, uint64_t id, const char *key,
             size_t klen, const uint8_t *val, size_t vlen, uint64_t gen)
{
    Muster__Request req = MUSTER__REQUEST__INIT;
    Muster__SetReq set = MUSTER__SET_REQ__INIT;
    Muster__DeleteReq del = MUSTER__DELETE_REQ__INIT;
    Muster__RdzvHeartbeatReq hb = MUSTER__RDZV_HEARTBEAT_REQ__INIT;
    Muster__PingReq ping = MUSTER__PING_REQ__INIT;
    char kbuf[1];
    char *k = kbuf;
    /* Keys are protobuf strings: copy to NUL-terminate only when the caller's is not. */
    if (key && key[klen] != 0) {
        if (!(k = strndup(key, klen)))
            return -1;
    } else {
        k = key ? (char *)key : (kbuf[0] = 0, kbuf);
    }
    req.id = id;
    if (kind == PREC_SET) {
        set.key = k;
        set.value.data = (uint8_t *)val;
        set.value.len = vlen;
        req.op_case = MUSTER__REQUEST__OP_SET;
        req.set = &set;
    } else if (kind == PREC_DEL) {
        del.key = k;
        req.op_case = MUSTER__REQUEST__OP_DELETE;
        req.delete_ = &del;
    } else if (kind == PREC_GEN) {
        hb.generation = gen;
        req.op_case = MUSTER__REQUEST__OP_RDZV_HEARTBEAT;
        req.rdzv_heartbeat = &hb;
    } else {
        req.op_case = MUSTER__REQUEST__OP_PING;
        req.ping = &ping;
    }
    int rc = prec_frame(out, kind, ns, nslen, &req);
    if (k != key && k != kbuf)
        free(k);
    return rc;
}

/* Whether a decoded request carries the op its record kind needs. */
static int prec_valid(const struct prec *r)
{
    switch (r->kind) {
    case PREC_SET:
        return r->req->op_case == MUSTER__REQUEST__OP_SET && r->req->set->key[0];
    case PREC_DEL:
        return r->req->op_case == MUSTER__REQUEST__OP_DELETE && r->req->delete_->key[0];
    case PREC_GEN:
        return r->req->op_case == MUSTER__REQUEST__OP_RDZV_HEARTBEAT;
    case PREC_SNAP_BEGIN:
    case PREC_SNAP_END:
        return r->req->op_case == MUSTER__REQUEST__OP_PING;
    }
    return 0;
}

/* Read the next record from fp into *r (see precord.h). */
enum prec_read prec_get(FILE *fp, struct prec *r)
{
    memset(r, 0, sizeof *r);
    uint8_t hdr[PREC_HDR];
    size_t got = fread(hdr, 1, sizeof hdr, fp);
    if (got == 0 && feof(fp))
        return PREC_EOF;
    if (got < sizeof hdr)
        return PREC_TORN;
    uint32_t len = frame_len(hdr), crc = frame_len(hdr + 4);
    if (len < 2 || len > PREC_MAX_BODY)
        return PREC_TORN;
    uint8_t *body = malloc(len);
    if (!body)
        return PREC_CORRUPT;
    if (fread(body, 1, len, fp) < len || crc32(0L, body, (uInt)len) != crc) {
        free(body);
        return PREC_TORN;
    }
    size_t nslen = body[1];
    enum prec_read rc = PREC_CORRUPT;
    if (2 + nslen <= len) {
        r->kind = (enum prec_kind)body[0];
        memcpy(r->ns, body + 2, nslen);
        r->ns[nslen] = 0;
        r->req = muster__request__unpack(NULL, len - 2 - nslen, body + 2 + nslen);
        rc = (r->req && prec_valid(r)) ? PREC_OK : PREC_CORRUPT;
    }
    free(body);
    if (rc != PREC_OK)
        prec_free(r);
    return rc;
}

/* Free what prec_get allocated in r. */
void prec_free(struct prec *r)
{
    if (r->req)
        muster__request__free_unpacked(r->req, NULL);
    r->req = NULL;
}

/* Call fn on each record of path (see precord.h). */
int prec_read_file(const char *path, int (*fn)(void *arg, const struct prec *r), void *arg, long *good, char *why,
                   size_t whylen)
{
    FILE *fp = fopen(path, "rbe");
    if (!fp) {
        snprintf(why, whylen, "cannot open: %s", strerror(errno));
        return -1;
    }
    int rc = 0;
    for (;;) {
        long at = ftell(fp);
        struct prec r;
        enum prec_read st = prec_get(fp, &r);
        if (st == PREC_EOF)
            break;
        if (st == PREC_TORN) {
            *good = at;
            rc = 1;
            break;
        }
        if (st == PREC_CORRUPT) {
            snprintf(why, whylen, "undecodable record at offset %ld", at);
            rc = -1;
            break;
        }
        int frc = fn(arg, &r);
        prec_free(&r);
        if (frc != 0) {
            snprintf(why, whylen, "unexpected record at offset %ld", at);
            rc = -1;
            break;
        }
    }
    if (ferror(fp)) {
        snprintf(why, whylen, "read error: %s", strerror(errno));
        rc = -1;
    }
    fclose(fp);
    return rc;
}
