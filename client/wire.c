/*
 * The wire: the lowest layer of a handle's traffic.  Queue request frames
 * and write them out, read server frames, and match responses to requests
 * by id.  Responses for ids nobody waits on yet are stashed (pipelined and
 * out-of-order blocking ops); pushed events go to the event queue
 * (event.c).  wire_once sends one request and waits for its answer on the
 * current connection; reconnecting and sending again are failover.c's, and
 * call_run (call.c) chooses between the two.
 *
 * Every wait is bounded by an absolute deadline.  When the client's own
 * deadline passes in the middle of a call, the request may still be
 * answered later (or be half written), so the handle is broken rather than
 * left with a stream whose replies no longer line up with its requests.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "internal.h"

/* uthash must not exit() on allocation failure inside a library. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (stash_oom = 1)
#include <uthash.h>

/* Bytes asked of recv() at a time. */
#define WIRE_READ_CHUNK (64u << 10)

/* A response waiting for its caller. */
struct stash_entry {
    uint64_t id;
    Muster__Response *resp;
    UT_hash_handle hh;
};

/* Make room for extra more bytes at the end of b; 0 or -1 on allocation failure. */
static int wire_reserve(struct buf *b, size_t extra)
{
    if (b->off > 0 && b->off == b->len)
        b->off = b->len = 0;
    if (b->cap - b->len >= extra)
        return 0;
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if (b->cap - b->len >= extra)
            return 0;
    }
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < extra)
        cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d)
        return -1;
    b->data = d;
    b->cap = cap;
    return 0;
}

/* Assign req the next id (into *id) and append its frame to the output
 * buffer; MUSTER_ELIMIT when it exceeds the server's frame limit. */
int wire_queue(muster_t *m, Muster__Request *req, uint64_t *id)
{
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_REQUEST;
    f.request = req;
    req->id = m->next_id + 1;
    size_t size = frame_size(&f.base);
    /* Refuse here rather than let the server close the connection over it. */
    if (m->limits.max_frame && size - FRAME_HDR > m->limits.max_frame)
        return error_set(m, MUSTER_ELIMIT, "request of %zu bytes exceeds the server's frame limit of %u",
                         size - FRAME_HDR, m->limits.max_frame);
    if (wire_reserve(&m->out, size) != 0)
        return error_set(m, MUSTER_ENOMEM, "out of memory queueing a request");
    m->out.len += frame_pack(&f.base, m->out.data + m->out.len);
    m->next_id++;
    *id = req->id;
    return MUSTER_OK;
}

/* Read what the socket holds without waiting; MUSTER_OK (maybe nothing read) or an error. */
static int wire_read_some(muster_t *m)
{
    if (wire_reserve(&m->in, WIRE_READ_CHUNK) != 0)
        return error_break(m, MUSTER_ENOMEM, "out of memory reading a reply");
    for (;;) {
        ssize_t n = tls_recv(m, m->in.data + m->in.len, m->in.cap - m->in.len);
        if (n > 0) {
            m->in.len += (size_t)n;
            return MUSTER_OK;
        }
        if (n == 0)
            return error_break(m, MUSTER_ECONN, "the server closed the connection");
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return MUSTER_OK;
        if (errno != EINTR)
            return error_break(m, MUSTER_ECONN, "read failed: %s", strerror(errno));
    }
}

/* What a frame header no muster server sends says about the port (it speaks HTTP, or TLS), or NULL:
 * a client pointed at the wrong port learns which instead of an absurd frame length. */
static const char *wire_foreign(const uint8_t *h)
{
    if (memcmp(h, "HTTP", 4) == 0)
        return "the port speaks HTTP, not muster's protocol (musterd's --metrics-listen port, or another "
               "server?)";
    /* A TLS record: an alert or a handshake, version 3.x. */
    if ((h[0] == 0x15 || h[0] == 0x16) && h[1] == 0x03)
        return "the port speaks TLS: use a tls:// URL for musterd's --tls-listen port";
    return NULL;
}

/* Take the next complete frame out of the input buffer: 1 with *out, 0 when
 * incomplete, or a negative muster_err (the handle is then broken). */
static int wire_next_frame(muster_t *m, size_t cap, Muster__ServerFrame **out)
{
    struct buf *b = &m->in;
    size_t have = b->len - b->off;
    if (have < FRAME_HDR)
        return 0;
    uint32_t len = frame_len(b->data + b->off);
    if ((len == 0 || len > cap) && wire_foreign(b->data + b->off))
        return -error_break(m, MUSTER_EPROTO, "%s", wire_foreign(b->data + b->off));
    if (len == 0 || len > cap)
        return -error_break(m, MUSTER_EPROTO, "server frame of %u bytes is outside 1..%zu", len, cap);
    if (have < FRAME_HDR + (size_t)len) {
        if (wire_reserve(b, FRAME_HDR + (size_t)len - have) != 0)
            return -error_break(m, MUSTER_ENOMEM, "out of memory for a %u byte reply", len);
        return 0;
    }
    *out = muster__server_frame__unpack(NULL, len, b->data + b->off + FRAME_HDR);
    b->off += FRAME_HDR + (size_t)len;
    if (!*out)
        return -error_break(m, MUSTER_EPROTO, "cannot decode a server frame of %u bytes", len);
    return 1;
}

/* Keep a response for a later wire_wait; a repeated id is a protocol error. */
static int wire_stash(muster_t *m, Muster__Response *resp)
{
    struct stash_entry *e = NULL;
    int stash_oom = 0;
    HASH_FIND(hh, m->stash, &resp->id, sizeof resp->id, e);
    if (e) {
        muster__response__free_unpacked(resp, NULL);
        return error_break(m, MUSTER_EPROTO, "server answered request %llu twice",
                           (unsigned long long)e->id);
    }
    e = calloc(1, sizeof *e);
    if (e) {
        e->id = resp->id;
        e->resp = resp;
        HASH_ADD(hh, m->stash, id, sizeof e->id, e);
    }
    if (!e || stash_oom) {
        free(e);
        muster__response__free_unpacked(resp, NULL);
        return error_break(m, MUSTER_ENOMEM, "out of memory keeping a reply");
    }
    return MUSTER_OK;
}

/* Remove and return the stashed response for id, or NULL. */
static Muster__Response *wire_unstash(muster_t *m, uint64_t id)
{
    struct stash_entry *e = NULL;
    HASH_FIND(hh, m->stash, &id, sizeof id, e);
    if (!e)
        return NULL;
    Muster__Response *resp = e->resp;
    HASH_DEL(m->stash, e);
    free(e);
    return resp;
}

/* Drop a stashed response for id, if any (abandoned pipelined requests). */
void wire_forget(muster_t *m, uint64_t id)
{
    wire_free(wire_unstash(m, id));
}

/* Remove and return the oldest stashed response of any id, or NULL. */
Muster__Response *wire_take(muster_t *m)
{
    /* uthash iterates in insertion order, so answers come out as they arrived. */
    return m->stash ? wire_unstash(m, m->stash->id) : NULL;
}

/* Route one frame: the response to want_id goes to *resp (returns 1), other
 * responses are stashed, events queued; returns 0, or a negative muster_err. */
static int wire_dispatch(muster_t *m, Muster__ServerFrame *f, uint64_t want_id, Muster__Response **resp)
{
    int rc = 0;
    Muster__Response *r = f->response;
    switch (f->frame_case) {
    case MUSTER__SERVER_FRAME__FRAME_RESPONSE:
        /* Detach the member and clear the case so the frame's free skips it. */
        f->response = NULL;
        f->frame_case = MUSTER__SERVER_FRAME__FRAME__NOT_SET;
        if (r->id == 0 || r->id > m->next_id) {
            rc = -error_break(m, MUSTER_EPROTO, "server answered request %llu, never sent",
                              (unsigned long long)r->id);
            wire_free(r);
        } else if (r->id == want_id) {
            *resp = r;
            rc = 1;
        } else {
            rc = -wire_stash(m, r);
        }
        break;
    case MUSTER__SERVER_FRAME__FRAME_EVENT:
        event_push(m, f->event);
        f->event = NULL;
        f->frame_case = MUSTER__SERVER_FRAME__FRAME__NOT_SET;
        break;
    case MUSTER__SERVER_FRAME__FRAME_ERROR:
        rc = -error_break(m, f->error->status ? error_from_status(f->error->status) : MUSTER_EPROTO,
                          "server: %s", f->error->message);
        break;
    default:
        rc = -error_break(m, MUSTER_EPROTO, "unexpected server frame (case %d)", (int)f->frame_case);
        break;
    }
    muster__server_frame__free_unpacked(f, NULL);
    return rc;
}

/* Dispatch every complete buffered frame, stopping early at the response to
 * want_id (returns 1 with *resp); 0 when it did not come, negative on error. */
static int wire_drain(muster_t *m, uint64_t want_id, Muster__Response **resp)
{
    for (;;) {
        Muster__ServerFrame *f = NULL;
        int rc = wire_next_frame(m, WIRE_MAX_FRAME, &f);
        if (rc <= 0)
            return rc;
        rc = wire_dispatch(m, f, want_id, resp);
        if (rc != 0)
            return rc;
    }
}

/* Read what the socket has (waiting until deadline for at least one frame
 * when block != 0) and dispatch complete frames; returns a muster_err. */
int wire_pump(muster_t *m, uint64_t deadline, int block)
{
    if (m->broken)
        return m->broken;
    uint64_t before = m->ev_count + m->ev_dropped;
    Muster__Response *none = NULL;
    for (;;) {
        int rc = wire_read_some(m);
        if (rc == MUSTER_OK)
            rc = -wire_drain(m, 0, &none);
        if (rc != MUSTER_OK)
            return rc;
        if (!block || m->ev_count + m->ev_dropped != before)
            return MUSTER_OK;
        int rev = tls_wait(m, POLLIN, deadline);
        if (rev == 0)
            return MUSTER_ETIMEDOUT;
        if (rev < 0)
            return error_break(m, MUSTER_ECONN, "poll failed: %s", strerror(errno));
    }
}

/* Write the output buffer before deadline; with can_read, also take in what
 * the server sends meanwhile so that neither side stalls on full buffers. */
static int wire_write_out(muster_t *m, uint64_t deadline, int can_read)
{
    struct buf *b = &m->out;
    Muster__Response *none = NULL;
    while (b->off < b->len) {
        int rev = tls_wait(m, (short)(POLLOUT | (can_read ? POLLIN : 0)), deadline);
        if (rev == 0)
            return error_break(m, MUSTER_ETIMEDOUT, "deadline passed while sending a request");
        if (rev < 0)
            return error_break(m, MUSTER_ECONN, "poll failed: %s", strerror(errno));
        if (can_read && (rev & (POLLIN | POLLHUP | POLLERR))) {
            int rc = wire_read_some(m);
            if (rc == MUSTER_OK)
                rc = -wire_drain(m, 0, &none);
            if (rc != MUSTER_OK)
                return rc;
        }
        if (!(rev & (POLLOUT | POLLERR | POLLHUP)))
            continue;
        ssize_t n = tls_send(m, b->data + b->off, b->len - b->off);
        if (n > 0)
            b->off += (size_t)n;
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return error_break(m, MUSTER_ECONN, "write failed: %s", strerror(errno));
    }
    b->off = b->len = 0;
    return MUSTER_OK;
}

/* Write what the socket takes of the output buffer without waiting; a muster_err. */
int wire_write_some(muster_t *m)
{
    struct buf *b = &m->out;
    if (m->broken)
        return m->broken;
    while (b->off < b->len) {
        ssize_t n = tls_send(m, b->data + b->off, b->len - b->off);
        if (n > 0) {
            b->off += (size_t)n;
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return MUSTER_OK;
        if (errno != EINTR)
            return error_break(m, MUSTER_ECONN, "write failed: %s", strerror(errno));
    }
    b->off = b->len = 0;
    return MUSTER_OK;
}

/* Whether queued output waits to be written. */
int wire_pending_out(const muster_t *m)
{
    return m->out.off < m->out.len;
}

/* Write the whole output buffer before deadline, reading (and stashing)
 * whatever the server sends meanwhile so neither side stalls. */
int wire_flush(muster_t *m, uint64_t deadline)
{
    if (m->broken)
        return m->broken;
    return wire_write_out(m, deadline, 1);
}

/* Wait before deadline for input and read it; id names the awaited reply
 * in the timeout's message (0: the hello reply). */
static int wire_await(muster_t *m, uint64_t deadline, uint64_t id)
{
    int rev = tls_wait(m, POLLIN, deadline);
    if (rev == 0 && id)
        return error_break(m, MUSTER_ETIMEDOUT, "no reply to request %llu before the client deadline",
                           (unsigned long long)id);
    if (rev == 0)
        return error_break(m, MUSTER_ETIMEDOUT, "no hello reply before the deadline");
    if (rev < 0)
        return error_break(m, MUSTER_ECONN, "poll failed: %s", strerror(errno));
    return wire_read_some(m);
}

/* Wait before deadline for the response to id; *resp is caller-owned (wire_free). */
int wire_wait(muster_t *m, uint64_t id, uint64_t deadline, Muster__Response **resp)
{
    *resp = wire_unstash(m, id);
    if (*resp)
        return MUSTER_OK;
    for (;;) {
        if (m->broken)
            return m->broken;
        int rc = wire_drain(m, id, resp);
        if (rc == 1)
            return MUSTER_OK;
        if (rc < 0)
            return -rc;
        rc = wire_await(m, deadline, id);
        if (rc != MUSTER_OK)
            return rc;
    }
}

/* Map resp's status to a muster_err, recording the server's message; checks
 * an OK result's case against op. */
int wire_check(muster_t *m, const Muster__Response *resp, Muster__Request__OpCase op)
{
    if (resp->status != MUSTER__STATUS__OK) {
        int code = error_from_status((int)resp->status);
        const char *msg = resp->error_message && *resp->error_message ? resp->error_message
                                                                       : muster_strerror(code);
        return error_set(m, code, "%s", msg);
    }
    /* Result and op cases share field numbers by design of the proto. */
    if ((int)resp->result_case != (int)op)
        return error_set(m, MUSTER_EPROTO, "reply to op %d carries result %d", (int)op,
                         (int)resp->result_case);
    return MUSTER_OK;
}

/* Send req once and wait for its response before deadline (no failover). */
int wire_once(muster_t *m, Muster__Request *req, Muster__Response **resp, uint64_t deadline)
{
    *resp = NULL;
    uint64_t id = 0;
    int rc = wire_queue(m, req, &id);
    if (rc == MUSTER_OK)
        rc = wire_flush(m, deadline);
    if (rc == MUSTER_OK)
        rc = wire_wait(m, id, deadline, resp);
    if (rc == MUSTER_OK) {
        rc = wire_check(m, *resp, req->op_case);
        if (rc != MUSTER_OK) {
            wire_free(*resp);
            *resp = NULL;
        }
    }
    return rc;
}

/* Write a ClientFrame (the hello) straight to the socket before deadline. */
int wire_send_frame(muster_t *m, const Muster__ClientFrame *frame, uint64_t deadline)
{
    size_t size = frame_size(&frame->base);
    if (wire_reserve(&m->out, size) != 0)
        return error_set(m, MUSTER_ENOMEM, "out of memory");
    m->out.len += frame_pack(&frame->base, m->out.data + m->out.len);
    return wire_write_out(m, deadline, 0);
}

/* Read the next ServerFrame before deadline, no dispatch (for the hello reply). */
int wire_read_frame(muster_t *m, uint64_t deadline, size_t cap, Muster__ServerFrame **out)
{
    for (;;) {
        int rc = wire_next_frame(m, cap, out);
        if (rc == 1)
            return MUSTER_OK;
        if (rc < 0)
            return -rc;
        rc = wire_await(m, deadline, 0);
        if (rc != MUSTER_OK)
            return rc;
    }
}

/* Free a response returned by call_run, wire_once or wire_wait; NULL is a no-op. */
void wire_free(Muster__Response *resp)
{
    if (resp)
        muster__response__free_unpacked(resp, NULL);
}

/* Forget unsent and half-read bytes (a connection that is gone); the stash stays. */
void wire_reset_io(muster_t *m)
{
    m->in.off = m->in.len = 0;
    m->out.off = m->out.len = 0;
}

/* Free the handle's buffers and stashed responses. */
void wire_clear(muster_t *m)
{
    struct stash_entry *e, *tmp;
    HASH_ITER(hh, m->stash, e, tmp) {
        HASH_DEL(m->stash, e);
        wire_free(e->resp);
        free(e);
    }
    free(m->in.data);
    free(m->out.data);
    memset(&m->in, 0, sizeof m->in);
    memset(&m->out, 0, sizeof m->out);
}
