/*
 * Client connections.  Input handling cuts frames out of what was read
 * (conn_io.c does the socket side): it checks a frame's length against the
 * limit as soon as the 4-byte header is in, before any body byte is waited
 * for, and then waits for the whole frame, so a client that stops halfway
 * just sits there without costing anyone else.  Replies are packed straight
 * into the output buffer's free space.  When a client reads
 * too slowly its output stays above --max-output: its requests stop being
 * read, and if that lasts --slow-timeout it is closed.
 *
 * The connection's life (hello, idle, incomplete-frame and slow-reader
 * deadlines, the flush-then-linger close, the deferred release) is
 * conn_life.c's, shared with the TCPStore front end; this file answers its
 * deadlines and runs the close hooks.
 */
#include "conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <utlist.h>

#include <muster/muster.h>

#include "conn_io.h"
#include "conn_life.h"
#include "clock.h"
#include "fastpath.h"
#include "hello.h"
#include "log.h"
#include "ns.h"
#include "ops.h"
#include "pbuf.h"
#include "persist.h"
#include "op_rdzv.h"
#include "server.h"
#include "shared_bytes.h"
#include "source.h"
#include "tls.h"
#include "op_watch.h"

/* Frames handled per read callback before yielding to other connections. */
#define CONN_BATCH 64
/* Connections being refused at once; beyond this, refusals are silent closes. */
#define CONN_MAX_REFUSING 1024

/* Whether frames can still be sent to c. */
int conn_live(const struct conn *c)
{
    return conn_life_live(&c->life);
}

/* Reserve room for one frame of body bytes in c's output and write its header; the body's place, or NULL
 * (c is closed when the output cannot take it). */
static uint8_t *conn_frame_begin(struct conn *c, size_t body, struct evbuffer **out, struct evbuffer_iovec *v)
{
    if (!conn_live(c))
        return NULL;
    /* With --data-dir, a frame waits while logged state is not durable yet. */
    *out = persist_output(c->srv, &c->life.io.hold, c->life.io.bev);
    if (body > UINT32_MAX || evbuffer_reserve_space(*out, FRAME_HDR + body, v, 1) != 1) {
        conn_close(c, "cannot buffer output");
        return NULL;
    }
    frame_put_len(v->iov_base, (uint32_t)body);
    return (uint8_t *)v->iov_base + FRAME_HDR;
}

/* Commit the frame of body bytes written at v to out, count it and have it written. */
static void conn_frame_end(struct conn *c, struct evbuffer *out, struct evbuffer_iovec *v, size_t body)
{
    v->iov_len = FRAME_HDR + body;
    evbuffer_commit_space(out, v, 1);
    stats_inc(&c->srv->stats, STAT_FRAMES_OUT);
    stats_add(&c->srv->stats, STAT_BYTES_OUT, FRAME_HDR + body);
    conn_life_sent(&c->life, out);
}

/* Pack one ServerFrame of body bytes straight into the output buffer's free space; 0 on success. */
static int conn_send_sized(struct conn *c, const Muster__ServerFrame *f, size_t body)
{
    struct evbuffer *out;
    struct evbuffer_iovec v;
    uint8_t *p = conn_frame_begin(c, body, &out, &v);
    if (!p)
        return -1;
    protobuf_c_message_pack(&f->base, p);
    conn_frame_end(c, out, &v, body);
    return 0;
}

/* Send an OK Response{id, result} without protobuf-c when fastpath.c writes result's type and the frame
 * is within the limit; 0 when sent or c cannot take it, -1 when the general path must answer. */
static int conn_reply_fast(struct conn *c, uint64_t id, const ProtobufCMessage *result)
{
    size_t body = fastpath_reply_size(id, result);
    if (!body || body > c->srv->opt.max_frame)
        return -1;
    struct evbuffer *out;
    struct evbuffer_iovec v;
    uint8_t *p = conn_frame_begin(c, body, &out, &v);
    if (p) {
        fastpath_reply_pack(p, id, result);
        conn_frame_end(c, out, &v, body);
    }
    return 0;
}

/* Send one ServerFrame whose body is head's bytes then tail's, the tail by reference (shared_bytes.c): the
 * caller composed head around it (pbuf_put_len_key); 0 on success. */
int conn_send_spliced(struct conn *c, const uint8_t *head, size_t hlen, struct shared_bytes *tail)
{
    if (!conn_live(c))
        return -1;
    size_t body = hlen + shared_bytes_len(tail);
    struct evbuffer *out = persist_output(c->srv, &c->life.io.hold, c->life.io.bev);
    uint8_t hdr[FRAME_HDR];
    frame_put_len(hdr, (uint32_t)body);
    if (body > UINT32_MAX || evbuffer_expand(out, FRAME_HDR + hlen) != 0 || evbuffer_add(out, hdr, sizeof hdr) != 0 ||
        evbuffer_add(out, head, hlen) != 0 || shared_bytes_send(tail, out, conn_io_tally(&c->life.io)) != 0) {
        conn_close(c, "cannot buffer output");
        return -1;
    }
    stats_inc(&c->srv->stats, STAT_FRAMES_OUT);
    stats_add(&c->srv->stats, STAT_BYTES_OUT, FRAME_HDR + body);
    conn_life_sent(&c->life, out);
    return 0;
}

/* Send one ServerFrame packed before (body: len bytes, the same for many connections); 0 on success. */
int conn_send_packed(struct conn *c, const uint8_t *body, size_t len)
{
    struct evbuffer *out;
    struct evbuffer_iovec v;
    uint8_t *p = conn_frame_begin(c, len, &out, &v);
    if (!p)
        return -1;
    memcpy(p, body, len);
    conn_frame_end(c, out, &v, len);
    return 0;
}

/* Pack one ServerFrame into the output buffer; 0 on success. */
int conn_send(struct conn *c, const Muster__ServerFrame *f)
{
    return conn_send_sized(c, f, protobuf_c_message_get_packed_size(&f->base));
}

/* Send Response{id, status, msg, result}; result (any *Res message, or NULL) picks the oneof case. */
void conn_reply(struct conn *c, uint64_t id, int status, const char *msg, const ProtobufCMessage *result)
{
    if (status == MUSTER__STATUS__OK && !msg && conn_reply_fast(c, id, result) == 0)
        return;
    Muster__Response r = MUSTER__RESPONSE__INIT;
    r.id = id;
    r.status = (Muster__Status)status;
    if (msg)
        r.error_message = (char *)msg;
    if (result && pbuf_oneof_set(&r.base, result) != 0)
        log_msg(LOG_ERROR, "reply of unknown type %s", result->descriptor->name);
    if (status != MUSTER__STATUS__OK)
        stats_inc(&c->srv->stats, STAT_RESPONSES_ERROR);
    Muster__ServerFrame f = MUSTER__SERVER_FRAME__INIT;
    f.frame_case = MUSTER__SERVER_FRAME__FRAME_RESPONSE;
    f.response = &r;
    size_t body = protobuf_c_message_get_packed_size(&f.base);
    uint64_t limit = c->srv->opt.max_frame;
    if (body > limit) {
        /* A client never has to take a frame above the limit it was told. */
        char why[128];
        snprintf(why, sizeof why, "reply of %zu bytes would exceed max frame %llu", body, (unsigned long long)limit);
        stats_inc(&c->srv->stats, STAT_LIMIT_RESPONSE);
        conn_reply(c, id, MUSTER__STATUS__LIMIT, why, NULL);
        return;
    }
    conn_send_sized(c, &f, body);
}

/* Send an error Response whose message is formatted. */
void conn_replyf(struct conn *c, uint64_t id, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    conn_reply(c, id, status, msg, NULL);
}

/* Bytes queued for c and not yet written: the socket's output buffer plus frames held for the log. */
size_t conn_output_len(const struct conn *c)
{
    size_t n = evbuffer_get_length(c->life.io.out);
    return c->life.io.hold.held ? n + evbuffer_get_length(c->life.io.hold.held) : n;
}

/* Push a server event (no request id). */
void conn_push_event(struct conn *c, const Muster__Event *ev)
{
    Muster__ServerFrame f = MUSTER__SERVER_FRAME__INIT;
    f.frame_case = MUSTER__SERVER_FRAME__FRAME_EVENT;
    f.event = (Muster__Event *)ev;
    if (conn_send(c, &f) == 0)
        stats_inc(&c->srv->stats, STAT_EVENTS_PUSHED);
}

/* Stop reading, flush what is queued, then close (used by the drain). */
void conn_finish(struct conn *c)
{
    conn_life_finish(&c->life);
}

/* Send ServerFrame{error{status, msg}}, then close once it is flushed. */
void conn_fail(struct conn *c, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct log_field lf[] = {{"conn", NULL, (long long)c->life.id}, {"peer", conn_peer(c), 0}, {"error", msg, 0}};
    log_fields(LOG_INFO, lf, 3, "conn %llu %s: closing: %s", (unsigned long long)c->life.id, conn_peer(c), msg);
    Muster__ProtocolError e = MUSTER__PROTOCOL_ERROR__INIT;
    e.status = (Muster__Status)status;
    e.message = msg;
    Muster__ServerFrame f = MUSTER__SERVER_FRAME__INIT;
    f.frame_case = MUSTER__SERVER_FRAME__FRAME_ERROR;
    f.error = &e;
    if (conn_send(c, &f) == 0)
        conn_finish(c);
}

/* Close at once (freed on the next loop turn); parked requests are cancelled without replies. */
void conn_close(struct conn *c, const char *why)
{
    conn_life_close(&c->life, why);
}

/* Cancel every parked request of c without replying. */
static void conn_cancel_pending(struct conn *c)
{
    if (c->first_used) {
        c->first_used = 0;
        if (c->first.cancel)
            c->first.cancel(c->first.arg);
    }
    struct conn_pending *p, *tmp;
    HASH_ITER(hh, c->pending, p, tmp) {
        HASH_DEL(c->pending, p);
        void (*cancel)(void *) = p->cancel;
        void *arg = p->arg;
        free(p);
        if (cancel)
            cancel(arg);
    }
}

/* A connection left its namespace (the namespace's idle time starts when the last one goes). */
static void conn_ns_left(struct conn *c)
{
    if (c->ns)
        ns_conn_left(c->ns);
}

/* The close hooks: what each subsystem lets go of when a connection goes, in order. */
static void (*const conn_close_hooks[])(struct conn *c) = {
    conn_cancel_pending, /* parked requests: cancelled without replies */
    op_rdzv_conn_closed, /* a member's connection is its session */
    watch_conn_closed,
    conn_ns_left,
    hello_conn_closed, /* a hello held out its address's token wait */
};

/* The release hook: run the close hooks, uncount and unlink c, free it. */
static void conn_free(struct conn_life *l)
{
    struct conn *c = (struct conn *)l;
    struct server *srv = c->srv;
    for (size_t i = 0; i < sizeof conn_close_hooks / sizeof conn_close_hooks[0]; i++)
        conn_close_hooks[i](c);
    if (c->admitted) {
        srv->nconns--;
        srv->stats.c[STAT_CONN_CURRENT]--;
    } else {
        srv->nrefusing--;
    }
    stats_inc(&srv->stats, STAT_CONN_CLOSED);
    source_conn_put(srv, c->src);
    DL_DELETE(srv->conns, c);
    conn_life_fini(&c->life);
    free(c);
}

/* Free every connection at once, without replies (at exit). */
void conn_free_all(struct server *srv)
{
    while (srv->conns)
        conn_free(&srv->conns->life);
}

/* Park request id with a cancel callback; -1 when the id is already pending or memory ran out. */
int conn_pending_add(struct conn *c, uint64_t id, void (*cancel)(void *arg), void *arg)
{
    if (conn_pending_has(c, id))
        return -1;
    if (!c->first_used) {
        c->first = (struct conn_pending){.id = id, .cancel = cancel, .arg = arg};
        c->first_used = 1;
        return 0;
    }
    struct conn_pending *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->id = id;
    p->cancel = cancel;
    p->arg = arg;
    HASH_ADD(hh, c->pending, id, sizeof p->id, p);
    return 0;
}

/* Forget parked request id (a no-op when it is not parked). */
void conn_pending_remove(struct conn *c, uint64_t id)
{
    if (c->first_used && c->first.id == id) {
        c->first_used = 0;
        return;
    }
    struct conn_pending *p = NULL;
    HASH_FIND(hh, c->pending, &id, sizeof id, p);
    if (p) {
        HASH_DEL(c->pending, p);
        free(p);
    }
}

/* Whether request id is parked on c. */
int conn_pending_has(const struct conn *c, uint64_t id)
{
    if (c->first_used && c->first.id == id)
        return 1;
    struct conn_pending *p = NULL;
    HASH_FIND(hh, c->pending, &id, sizeof id, p);
    return p != NULL;
}

/* A deadline of c passed: the hello's, an incomplete frame's, or the idle one. */
static void conn_expired(struct conn_life *l, enum life_expiry why)
{
    struct conn *c = (struct conn *)l;
    struct server *srv = c->srv;
    if (why == LIFE_EXP_GREETING) {
        stats_inc(&srv->stats, STAT_HELLO_TIMEOUT);
        /* A TLS handshake that never finished cannot carry the error frame: the hello timeout bounds it. */
        if (l->io.bev && !l->io.got_input)
            conn_close(c, "TLS handshake not finished within the hello timeout");
        else
            conn_fail(c, MUSTER__STATUS__TIMEOUT, "no hello within %llu ms",
                      (unsigned long long)srv->opt.hello_timeout);
    } else if (why == LIFE_EXP_REQUEST) {
        stats_inc(&srv->stats, STAT_REQUEST_TIMEOUT);
        conn_fail(c, MUSTER__STATUS__TIMEOUT, "frame incomplete for %llu ms",
                  (unsigned long long)srv->opt.request_timeout);
    } else {
        stats_inc(&srv->stats, STAT_IDLE_CLOSED);
        conn_fail(c, MUSTER__STATUS__TIMEOUT, "idle for %llu ms", (unsigned long long)srv->opt.idle_timeout);
    }
}

/* Whether silent c waits on the server: a parked request, a rendezvous membership, or watches (a
 * watcher may rightly hear nothing for hours; the TCPStore front end counts its watches the same way). */
static int conn_waiting(const struct conn_life *l)
{
    const struct conn *c = (const struct conn *)l;
    return c->first_used || c->pending || c->rdzv || c->nwatches || c->held;
}

/* The native front end's answers to the connection life. */
static const struct life_ops conn_life_ops = {"conn", conn_expired, conn_waiting, conn_free};

/* Decode and handle one complete frame: len body bytes at body (unpacking copies what it keeps). */
static void conn_frame(struct conn *c, const uint8_t *body, uint32_t len)
{
    struct stats *st = &c->srv->stats;
    uint64_t now = clock_now_ns();
    c->life.last_rx_ms = now / 1000000u;
    stats_inc(st, STAT_FRAMES_IN);
    stats_add(st, STAT_BYTES_IN, FRAME_HDR + len);
    struct fastpath_req fr;
    if (fastpath_decode(body, len, &fr)) {
        ops_dispatch(c, &fr.req, now);
        return;
    }
    Muster__ClientFrame *f = muster__client_frame__unpack(NULL, len, body);
    if (!f) {
        stats_inc(st, STAT_BAD_FRAME);
        conn_fail(c, MUSTER__STATUS__BAD_REQUEST, "undecodable frame of %u bytes", len);
        return;
    }
    /* A key (or name) with a NUL would reach the handlers cut there, naming another key: refuse it. */
    int nul = pbuf_string_has_nul(&muster__client_frame__descriptor, body, len);
    if (nul && f->frame_case == MUSTER__CLIENT_FRAME__FRAME_REQUEST) {
        stats_inc(st, STAT_BAD_REQUEST);
        conn_reply(c, f->request->id, MUSTER__STATUS__BAD_REQUEST,
                   "a key or name holds a NUL byte: native keys are strings without NUL", NULL);
    } else if (nul) {
        stats_inc(st, STAT_BAD_FRAME);
        conn_fail(c, MUSTER__STATUS__BAD_REQUEST, "hello holds a NUL byte in a string");
    } else if (f->frame_case == MUSTER__CLIENT_FRAME__FRAME_HELLO) {
        if (hello_handle(c, f) == HELLO_HELD)
            return; /* c keeps f until its address's token wait is over */
    } else if (f->frame_case == MUSTER__CLIENT_FRAME__FRAME_REQUEST) {
        ops_dispatch(c, f->request, now);
    } else {
        stats_inc(st, STAT_BAD_FRAME);
        conn_fail(c, MUSTER__STATUS__BAD_REQUEST, "frame holds neither hello nor request");
    }
    muster__client_frame__free_unpacked(f, NULL);
}

/* Check a frame length from a header against the limit in force; 0 when acceptable. */
static int conn_check_len(struct conn *c, uint32_t len)
{
    struct server *srv = c->srv;
    int pre = c->life.greeting;
    uint64_t limit = pre ? srv->opt.pre_hello_max_frame : srv->opt.max_frame;
    if (len == 0) {
        stats_inc(&srv->stats, STAT_BAD_FRAME);
        conn_fail(c, MUSTER__STATUS__BAD_REQUEST, "frame of length 0");
        return -1;
    }
    if (len > limit) {
        stats_inc(&srv->stats, pre ? STAT_LIMIT_PRE_HELLO_FRAME : STAT_LIMIT_FRAME);
        conn_fail(c, MUSTER__STATUS__LIMIT, "frame of %u bytes exceeds limit %llu%s", len, (unsigned long long)limit,
                  pre ? " (before hello)" : "");
        return -1;
    }
    return 0;
}

/* Handle every complete frame in the input buffer (a batch at a time), then wait for the next one. */
static void conn_process(struct conn *c)
{
    struct evbuffer *in = c->life.io.in;
    size_t want = FRAME_HDR;
    for (int n = 0;; n++) {
        if (!conn_live(c) || c->life.paused || c->held)
            return;
        size_t avail = evbuffer_get_length(in);
        if (avail < FRAME_HDR)
            break;
        if (n == CONN_BATCH) {
            /* Fairness: let other connections run, come back on a later turn. */
            conn_io_want(&c->life.io, FRAME_HDR);
            conn_io_again(&c->life.io);
            return;
        }
        uint8_t hdr[FRAME_HDR];
        evbuffer_copyout(in, hdr, FRAME_HDR);
        uint32_t len = frame_len(hdr);
        if (conn_check_len(c, len) != 0)
            return;
        if (avail - FRAME_HDR < len) {
            want = FRAME_HDR + (size_t)len;
            break;
        }
        const uint8_t *p = evbuffer_pullup(in, (ssize_t)(FRAME_HDR + len));
        if (!p) {
            conn_close(c, "out of memory");
            return;
        }
        conn_frame(c, p + FRAME_HDR, len);
        evbuffer_drain(in, FRAME_HDR + len);
    }
    conn_io_want(&c->life.io, want);
}

/* Handle the whole frames at the start of buf (n bytes, read with nothing buffered before them)
 * in place; the bytes of frames not handled go to the input buffer. */
static void conn_process_direct(struct conn *c, const uint8_t *buf, size_t n)
{
    size_t off = 0;
    int k = 0;
    for (; k < CONN_BATCH && conn_live(c) && !c->life.paused && !c->held && n - off >= FRAME_HDR; k++) {
        uint32_t len = frame_len(buf + off);
        if (conn_check_len(c, len) != 0)
            return;
        if (n - off - FRAME_HDR < len)
            break;
        conn_frame(c, buf + off + FRAME_HDR, len);
        off += FRAME_HDR + (size_t)len;
    }
    if (off < n && evbuffer_add(c->life.io.in, buf + off, n - off) != 0) {
        conn_close(c, "out of memory");
        return;
    }
    if (k < CONN_BATCH) {
        conn_process(c); /* no whole frame is left: this sets the next want */
        return;
    }
    conn_io_want(&c->life.io, FRAME_HDR);
    conn_io_again(&c->life.io);
}

/* The connection whose I/O io is. */
static struct conn *conn_of(struct conn_io *io)
{
    return (struct conn *)conn_life_of(io);
}

/* Handle input (buf, n bytes just read, or NULL: what the input buffer holds). */
static void conn_input(struct conn_io *io, const uint8_t *buf, size_t n)
{
    struct conn *c = conn_of(io);
    if (!conn_live(c)) {
        evbuffer_drain(io->in, evbuffer_get_length(io->in)); /* closing: input is discarded */
        return;
    }
    if (buf)
        conn_process_direct(c, buf, n);
    else
        conn_process(c);
    conn_life_note_partial(&c->life, evbuffer_get_length(io->in));
}

/* The peer closed or the socket failed: close (a TLS failure is counted and logged first). */
static void conn_closed(struct conn_io *io, int error, const char *why)
{
    struct conn *c = conn_of(io);
    if (error && io->bev) {
        tls_note_error(c->srv, io->bev, conn_peer(c));
        conn_io_discard_input(io); /* so the alert reaches the client, not a reset */
    }
    conn_close(c, why);
}

/* What the shared I/O calls back into. */
static const struct conn_io_ops conn_ops = {conn_input, conn_life_written, conn_closed};

/* The peer's address as text, formatted on first use. */
const char *conn_peer(struct conn *c)
{
    return conn_life_peer(&c->life);
}

/* Allocate a connection around fd and link it into the server; NULL on failure (fd closed). */
static struct conn *conn_new(struct server *srv, int fd, const struct sockaddr *sa, int tls)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->srv = srv;
    c->life.io.want = FRAME_HDR;
    if (conn_life_open(&c->life, srv, fd, tls, &conn_ops, &conn_life_ops, sa, srv->next_session + 1) != 0) {
        free(c);
        return NULL;
    }
    srv->next_session++;
    DL_PREPEND(srv->conns, c);
    return c;
}

/* Take over an accepted socket (tls: from a TLS listener), refusing it when over --max-connections. */
static void conn_accept_as(struct server *srv, int fd, const struct sockaddr *sa, int tls)
{
    int refuse = srv->nconns >= srv->opt.max_connections;
    if (srv->draining || (refuse && srv->nrefusing >= CONN_MAX_REFUSING)) {
        stats_inc(&srv->stats, srv->draining ? STAT_CONN_CLOSED : STAT_LIMIT_CONNECTIONS);
        close(fd);
        return;
    }
    /* --nodelay needs no setsockopt here: accepted sockets inherit it from the listener. */
    struct conn *c = conn_new(srv, fd, sa, tls);
    if (!c)
        return;
    stats_inc(&srv->stats, STAT_CONN_ACCEPTED);
    if (refuse) {
        srv->nrefusing++;
        stats_inc(&srv->stats, STAT_LIMIT_CONNECTIONS);
        conn_fail(c, MUSTER__STATUS__LIMIT, "too many connections (limit %llu)",
                  (unsigned long long)srv->opt.max_connections);
        return;
    }
    c->admitted = 1;
    c->src = source_conn_take(srv, sa);
    c->share.source = source_waiters(c->src);
    srv->nconns++;
    stats_inc(&srv->stats, STAT_CONN_CURRENT);
    if (log_enabled(LOG_DEBUG))
        log_msg(LOG_DEBUG, "conn %llu %s: accepted", (unsigned long long)c->life.id, conn_peer(c));
    conn_life_start(&c->life, clock_now_ms() + srv->opt.hello_timeout);
}

/* Take over an accepted socket; refuse it with a LIMIT error frame when over --max-connections. */
void conn_accept(struct server *srv, int fd, const struct sockaddr *sa, socklen_t salen)
{
    (void)salen;
    conn_accept_as(srv, fd, sa, 0);
}

/* As conn_accept, for a socket of a TLS listener (the handshake runs before the first frame). */
void conn_accept_tls(struct server *srv, int fd, const struct sockaddr *sa, socklen_t salen)
{
    (void)salen;
    conn_accept_as(srv, fd, sa, 1);
}
