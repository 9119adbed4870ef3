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
 * Closing is deferred to a fresh loop turn (through the connection's timer
 * event), so code deep in a keyspace change never sees a connection vanish
 * under it.
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

#include <muster/muster.h>

#include "conn_io.h"
#include "clock.h"
#include "log.h"
#include "ns.h"
#include "ops.h"
#include "pbuf.h"
#include "persist.h"
#include "op_rdzv.h"
#include "server.h"
#include "source.h"
#include "tls.h"
#include "op_watch.h"

/* Frames handled per read callback before yielding to other connections. */
#define CONN_BATCH 64
/* How long a closing connection waits for the peer's EOF after its last frame. */
#define CONN_LINGER_MS 1000
/* Connections being refused at once; beyond this, refusals are silent closes. */
#define CONN_MAX_REFUSING 1024

static void conn_arm(struct conn *c);

/* Whether frames can still be sent to c. */
int conn_live(const struct conn *c)
{
    return c->state <= CONN_OPEN;
}

/* Enter a state and note when. */
static void conn_set_state(struct conn *c, enum conn_state s)
{
    c->state = s;
    c->state_ms = clock_now_ms();
}

/* Pack one ServerFrame of body bytes straight into the output buffer's free space; 0 on success. */
static int conn_send_sized(struct conn *c, const Muster__ServerFrame *f, size_t body)
{
    if (!conn_live(c))
        return -1;
    /* With --data-dir, a frame waits while logged state is not durable yet. */
    struct evbuffer *out = persist_output(c->srv, &c->io.hold, c->io.bev);
    struct evbuffer_iovec v;
    if (body > UINT32_MAX || evbuffer_reserve_space(out, FRAME_HDR + body, &v, 1) != 1) {
        conn_close(c, "cannot buffer output");
        return -1;
    }
    frame_put_len(v.iov_base, (uint32_t)body);
    protobuf_c_message_pack(&f->base, (uint8_t *)v.iov_base + FRAME_HDR);
    v.iov_len = FRAME_HDR + body;
    evbuffer_commit_space(out, &v, 1);
    conn_io_kick(&c->io);
    stats_inc(&c->srv->stats, STAT_FRAMES_OUT);
    stats_add(&c->srv->stats, STAT_BYTES_OUT, FRAME_HDR + body);
    if (!c->paused && evbuffer_get_length(out) > c->srv->opt.max_output) {
        /* Backpressure: a client that does not read its replies stops being read. */
        c->paused = 1;
        c->paused_ms = clock_now_ms();
        conn_io_reading(&c->io, 0);
        stats_inc(&c->srv->stats, STAT_OUTPUT_PAUSED);
        conn_arm(c);
    }
    return 0;
}

/* Pack one ServerFrame into the output buffer; 0 on success. */
static int conn_send(struct conn *c, const Muster__ServerFrame *f)
{
    return conn_send_sized(c, f, protobuf_c_message_get_packed_size(&f->base));
}

/* Send Response{id, status, msg, result}; result (any *Res message, or NULL) picks the oneof case. */
void conn_reply(struct conn *c, uint64_t id, int status, const char *msg, const ProtobufCMessage *result)
{
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
    size_t n = evbuffer_get_length(c->io.out);
    return c->io.hold.held ? n + evbuffer_get_length(c->io.hold.held) : n;
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
    if (!conn_live(c))
        return;
    conn_set_state(c, CONN_FLUSHING);
    conn_io_reading(&c->io, 1); /* input is discarded from now on */
    conn_io_finish(&c->io);
    conn_arm(c);
}

/* Send ServerFrame{error{status, msg}}, then close once it is flushed. */
void conn_fail(struct conn *c, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_msg(LOG_INFO, "conn %llu %s: closing: %s", (unsigned long long)c->session_id, conn_peer(c), msg);
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
    if (c->state == CONN_DEAD)
        return;
    if (log_enabled(LOG_DEBUG))
        log_msg(LOG_DEBUG, "conn %llu %s: closed: %s", (unsigned long long)c->session_id, conn_peer(c), why);
    conn_set_state(c, CONN_DEAD);
    conn_io_stop(&c->io);
    event_active(c->timer, EV_TIMEOUT, 0);
}

/* Cancel every parked request of c without replying. */
static void conn_cancel_pending(struct conn *c)
{
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

/* Release everything c holds and tell the subsystems it is gone. */
static void conn_free(struct conn *c)
{
    struct server *srv = c->srv;
    conn_cancel_pending(c);
    persist_hold_drop(srv, &c->io.hold);
    op_rdzv_conn_closed(c); /* the rendezvous hook: a member's connection is its session */
    watch_conn_closed(c);
    if (c->ns)
        ns_conn_left(c->ns);
    if (c->admitted) {
        srv->nconns--;
        srv->stats.c[STAT_CONN_CURRENT]--;
    } else {
        srv->nrefusing--;
    }
    stats_inc(&srv->stats, STAT_CONN_CLOSED);
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    conn_io_free(&c->io);
    event_free(c->timer);
    free(c);
}

/* Free every connection at once, without replies (at exit). */
void conn_free_all(struct server *srv)
{
    while (srv->conns)
        conn_free(srv->conns);
}

/* Park request id with a cancel callback; -1 when the id is already pending or memory ran out. */
int conn_pending_add(struct conn *c, uint64_t id, void (*cancel)(void *arg), void *arg)
{
    if (conn_pending_has(c, id))
        return -1;
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
    struct conn_pending *p = NULL;
    HASH_FIND(hh, c->pending, &id, sizeof id, p);
    return p != NULL;
}

/* The next deadline of c's timer in monotonic ms, or 0 for none. */
static uint64_t conn_deadline(const struct conn *c)
{
    const struct options *o = &c->srv->opt;
    switch (c->state) {
    case CONN_HELLO:
        return c->born_ms + o->hello_timeout;
    case CONN_OPEN:
        if (c->paused)
            return c->paused_ms + o->slow_timeout;
        return clock_sooner(o->idle_timeout ? c->last_rx_ms + o->idle_timeout : 0,
                           c->partial_ms && o->request_timeout ? c->partial_ms + o->request_timeout : 0);
    case CONN_FLUSHING:
        return c->state_ms + (c->srv->draining ? o->drain_timeout : o->slow_timeout);
    case CONN_LINGER:
        return c->state_ms + (c->srv->draining ? CONN_LINGER_MS / 5 : CONN_LINGER_MS);
    case CONN_DEAD:
        return 0;
    }
    return 0;
}

/* (Re)arm c's timer for its next deadline. */
static void conn_arm(struct conn *c)
{
    clock_timer_at(c->timer, conn_deadline(c));
}

/* The timer: deferred free, or a hello/idle/slow/flush/linger deadline that passed. */
static void conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    struct server *srv = c->srv;
    uint64_t at = conn_deadline(c);
    if (c->state == CONN_DEAD || c->state == CONN_LINGER) {
        conn_free(c);
    } else if (!at) {
        return; /* nothing is due any more */
    } else if (at > clock_now_ms()) {
        conn_arm(c); /* an idle deadline moved on with traffic */
    } else if (c->state == CONN_FLUSHING || c->paused) {
        stats_inc(&srv->stats, STAT_LIMIT_OUTPUT);
        log_msg(LOG_WARN, "conn %llu %s: closed: output not read within the timeout",
                (unsigned long long)c->session_id, conn_peer(c));
        conn_close(c, "slow reader");
    } else if (c->state == CONN_HELLO) {
        stats_inc(&srv->stats, STAT_HELLO_TIMEOUT);
        /* A TLS handshake that never finished cannot carry the error frame: the hello timeout bounds it. */
        if (c->io.bev && !c->io.got_input)
            conn_close(c, "TLS handshake not finished within the hello timeout");
        else
            conn_fail(c, MUSTER__STATUS__TIMEOUT, "no hello within %llu ms",
                      (unsigned long long)srv->opt.hello_timeout);
    } else if (c->partial_ms && srv->opt.request_timeout && c->partial_ms + srv->opt.request_timeout <= clock_now_ms()) {
        stats_inc(&srv->stats, STAT_REQUEST_TIMEOUT);
        conn_fail(c, MUSTER__STATUS__TIMEOUT, "frame incomplete for %llu ms",
                  (unsigned long long)srv->opt.request_timeout);
    } else if (c->pending || c->rdzv || evbuffer_get_length(c->io.out)) {
        /* Silent but waiting on the server, or still taking output: not idle. */
        c->last_rx_ms = clock_now_ms();
        conn_arm(c);
    } else {
        stats_inc(&srv->stats, STAT_IDLE_CLOSED);
        conn_fail(c, MUSTER__STATUS__TIMEOUT, "idle for %llu ms", (unsigned long long)srv->opt.idle_timeout);
    }
}

/* Check a hello's token for namespace name; 1 when it may go on, else 0 after refusing the hello.
 *
 * After a wrong token, the source address waits --auth-backoff (doubling per failure, up to
 * --auth-backoff-max) before its next token is even compared; a hello in that window is answered
 * LIMIT with the wait, not UNAUTHENTICATED, since its token was not judged and libmuster retries
 * LIMIT within its connect deadline.  Those refusals do not lengthen the wait, so a client with the
 * right token behind the same address waits at most --auth-backoff-max per failure of the other.
 * Only namespaces with a token are held back: an address's open namespaces keep working. */
static int conn_token_ok(struct conn *c, const char *name, const char *token)
{
    struct server *srv = c->srv;
    const struct sockaddr *sa = (const struct sockaddr *)&c->addr;
    if (!ns_configured(srv, name))
        return 1;
    uint64_t wait = source_hello_wait(srv, sa);
    if (wait) {
        stats_inc(&srv->stats, STAT_AUTH_THROTTLED);
        conn_fail(c, MUSTER__STATUS__LIMIT, "too many failed hellos from this address: retry in %llu ms",
                  (unsigned long long)wait);
        return 0;
    }
    if (ns_token_ok(srv, name, token))
        return 1;
    source_hello_failed(srv, sa);
    stats_inc(&srv->stats, STAT_AUTH_FAILED);
    conn_fail(c, MUSTER__STATUS__UNAUTHENTICATED, "wrong token for namespace '%s'", name);
    return 0;
}

/* Handle Hello: version, namespace, token; answer HelloReply with the limits. */
static void conn_hello(struct conn *c, const Muster__Hello *h)
{
    struct server *srv = c->srv;
    const struct options *o = &srv->opt;
    const char *name = h->namespace_ && *h->namespace_ ? h->namespace_ : "default";
    int st = MUSTER__STATUS__INTERNAL;
    struct ns *ns = NULL;
    if (c->ns) {
        stats_inc(&srv->stats, STAT_HELLO_BAD);
        conn_fail(c, MUSTER__STATUS__BAD_REQUEST, "hello sent twice");
    } else if (h->protocol_version != MUSTER_PROTOCOL_VERSION) {
        stats_inc(&srv->stats, STAT_HELLO_BAD);
        conn_fail(c, MUSTER__STATUS__BAD_REQUEST, "protocol version %u not supported (this server speaks %d)",
                  h->protocol_version, MUSTER_PROTOCOL_VERSION);
    } else if (strlen(name) > NS_NAME_MAX) {
        stats_inc(&srv->stats, STAT_HELLO_BAD);
        conn_fail(c, MUSTER__STATUS__BAD_REQUEST, "namespace name longer than %d bytes", NS_NAME_MAX);
    } else if (o->closed_namespaces && !ns_configured(srv, name)) {
        stats_inc(&srv->stats, STAT_NS_REFUSED);
        conn_fail(c, MUSTER__STATUS__UNAUTHENTICATED, "namespace '%s' is not configured on this server", name);
    } else if (!conn_token_ok(c, name, h->token)) {
        /* conn_token_ok answered */
    } else if (!(ns = ns_open(srv, name, (const struct sockaddr *)&c->addr, &st))) {
        conn_fail(c, st, "cannot open namespace '%s'%s", name,
                  st == MUSTER__STATUS__LIMIT ? ": namespace limit reached (server or this address)" : "");
    } else {
        c->ns = ns;
        ns->nconns++;
        snprintf(c->name, sizeof c->name, "%s", h->client_name ? h->client_name : "");
        conn_set_state(c, CONN_OPEN);
        conn_arm(c);
        stats_inc(&srv->stats, STAT_HELLO_OK);
        if (log_enabled(LOG_DEBUG))
            log_msg(LOG_DEBUG, "conn %llu %s: hello ns '%s' client '%s'", (unsigned long long)c->session_id,
                    conn_peer(c), ns->name, c->name);
        Muster__Limits lim = MUSTER__LIMITS__INIT;
        lim.max_frame = (uint32_t)o->max_frame;
        lim.max_key = (uint32_t)o->max_key;
        lim.max_value = (uint32_t)o->max_value;
        lim.max_keys_per_request = (uint32_t)o->max_keys_per_request;
        lim.default_wait_timeout_ms = (uint32_t)o->wait_timeout;
        lim.heartbeat_timeout_ms = (uint32_t)o->heartbeat_timeout;
        Muster__HelloReply r = MUSTER__HELLO_REPLY__INIT;
        r.server_version = MUSTER_VERSION;
        r.protocol_version = MUSTER_PROTOCOL_VERSION;
        r.limits = &lim;
        r.session_id = c->session_id;
        Muster__ServerFrame f = MUSTER__SERVER_FRAME__INIT;
        f.frame_case = MUSTER__SERVER_FRAME__FRAME_HELLO_REPLY;
        f.hello_reply = &r;
        conn_send(c, &f);
    }
}

/* Decode and handle one complete frame: len body bytes at body (unpacking copies what it keeps). */
static void conn_frame(struct conn *c, const uint8_t *body, uint32_t len)
{
    struct stats *st = &c->srv->stats;
    Muster__ClientFrame *f = muster__client_frame__unpack(NULL, len, body);
    c->last_rx_ms = clock_now_ms();
    stats_inc(st, STAT_FRAMES_IN);
    stats_add(st, STAT_BYTES_IN, FRAME_HDR + len);
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
        conn_hello(c, f->hello);
    } else if (f->frame_case == MUSTER__CLIENT_FRAME__FRAME_REQUEST) {
        ops_dispatch(c, f->request);
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
    int pre = c->state == CONN_HELLO;
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
    struct evbuffer *in = c->io.in;
    size_t want = FRAME_HDR;
    for (int n = 0;; n++) {
        if (!conn_live(c) || c->paused)
            return;
        size_t avail = evbuffer_get_length(in);
        if (avail < FRAME_HDR)
            break;
        if (n == CONN_BATCH) {
            /* Fairness: let other connections run, come back on a later turn. */
            conn_io_want(&c->io, FRAME_HDR);
            conn_io_again(&c->io);
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
    conn_io_want(&c->io, want);
}

/* Handle the whole frames at the start of buf (n bytes, read with nothing buffered before them)
 * in place; the bytes of frames not handled go to the input buffer. */
static void conn_process_direct(struct conn *c, const uint8_t *buf, size_t n)
{
    size_t off = 0;
    int k = 0;
    for (; k < CONN_BATCH && conn_live(c) && !c->paused && n - off >= FRAME_HDR; k++) {
        uint32_t len = frame_len(buf + off);
        if (conn_check_len(c, len) != 0)
            return;
        if (n - off - FRAME_HDR < len)
            break;
        conn_frame(c, buf + off + FRAME_HDR, len);
        off += FRAME_HDR + (size_t)len;
    }
    if (off < n && evbuffer_add(c->io.in, buf + off, n - off) != 0) {
        conn_close(c, "out of memory");
        return;
    }
    if (k < CONN_BATCH) {
        conn_process(c); /* no whole frame is left: this sets the next want */
        return;
    }
    conn_io_want(&c->io, FRAME_HDR);
    conn_io_again(&c->io);
}

/* The connection whose I/O io is. */
static struct conn *conn_of(struct conn_io *io)
{
    return (struct conn *)((char *)io - offsetof(struct conn, io));
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
    uint64_t partial = conn_io_partial_since(c->partial_ms, c->last_rx_ms, evbuffer_get_length(io->in));
    if (partial != c->partial_ms && conn_live(c)) {
        c->partial_ms = partial;
        conn_arm(c);
    }
}

/* Output was written out (or nothing was queued): finish a close, or resume a paused reader. */
static void conn_written(struct conn_io *io)
{
    struct conn *c = conn_of(io);
    size_t left = evbuffer_get_length(io->out);
    if (c->state == CONN_FLUSHING && left == 0 && !persist_holding(&io->hold)) {
        /* Shut our side and read until the peer's EOF, so unread input does
         * not turn the close into a reset that could eat the last frame. */
        conn_io_shutdown(io);
        conn_set_state(c, CONN_LINGER);
        conn_io_want(io, 1);
        conn_arm(c);
    } else if (c->paused && left <= c->srv->opt.max_output / 2) {
        c->paused = 0;
        conn_io_reading(io, 1);
        conn_arm(c);
        conn_io_again(io);
    }
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
static const struct conn_io_ops conn_ops = {conn_input, conn_written, conn_closed};

/* Format a peer address as text ("1.2.3.4:5" or "[::1]:5"). */
static void conn_peer_name(const struct sockaddr *sa, char *buf, size_t n)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        snprintf(buf, n, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
        snprintf(buf, n, "[%s]:%u", host, port);
    } else {
        snprintf(buf, n, "?");
    }
}

/* The peer's address as text, formatted on first use. */
const char *conn_peer(struct conn *c)
{
    if (!c->peer[0])
        conn_peer_name((const struct sockaddr *)&c->addr, c->peer, sizeof c->peer);
    return c->peer;
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
    c->io.want = FRAME_HDR;
    if (conn_io_open(&c->io, srv, fd, tls, &conn_ops) != 0) {
        free(c);
        return NULL;
    }
    if (!(c->timer = evtimer_new(srv->base, conn_timer_cb, c))) {
        conn_io_free(&c->io);
        free(c);
        return NULL;
    }
    c->session_id = ++srv->next_session;
    c->born_ms = c->last_rx_ms = clock_now_ms();
    conn_set_state(c, CONN_HELLO);
    /* Only copied here: formatting it (inet_ntop, snprintf) was a tenth of a connect storm's
     * user time, and most connections never log their address. */
    memcpy(&c->addr, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
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
    srv->nconns++;
    stats_inc(&srv->stats, STAT_CONN_CURRENT);
    if (log_enabled(LOG_DEBUG))
        log_msg(LOG_DEBUG, "conn %llu %s: accepted", (unsigned long long)c->session_id, conn_peer(c));
    conn_io_start(&c->io);
    conn_arm(c);
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
