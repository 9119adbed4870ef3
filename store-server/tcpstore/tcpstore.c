/*
 * The TCPStore front end: a second kind of listener on the daemon's one
 * event loop, speaking the protocol of torch.distributed's TCPStore to
 * unmodified torch clients (the wire codec is proto/tscodec.c, shared with
 * the relay of `muster run`; tcpstore_ops.c holds the ops; this file holds
 * connections).  Its keys live in one namespace
 * (--tcpstore-namespace), shared with native clients.
 *
 * Connections use the same I/O and the same life as native ones
 * (conn_io.c, conn_life.c: deadlines, backpressure, flush, linger, the
 * deferred release): one recv per wakeup, requests decoded straight from the bytes just read, replies
 * appended to the output buffer and written once per callback.  The
 * numbering is decided from the first bytes (00 CE F7 85 3C is the
 * VALIDATE handshake of torch 2.1 and later; anything else is the older
 * numbering).  Requests are decoded incrementally and answered in stream
 * order.  While a WAIT or BARRIER is parked, a VALIDATE-era connection's
 * next request waits unread unless it is CANCEL_WAIT; an old client (no
 * CANCEL_WAIT, never pipelining) that sends anything has given up on its
 * wait, which is then dropped without an answer.  --tcpstore-max-request
 * bounds one request (checked as it is decoded, proto/tscodec.c) and the
 * input a parked request holds back (reading goes on, so a close is seen;
 * more input than that closes the connection, counted).  A request
 * that cannot be served closes its connection (the protocol has no error
 * reply), counted.
 */
#include "tcpstore.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sysexits.h>
#include <unistd.h>
#include <utlist.h>

#include "listener.h"
#include "clock.h"
#include "log.h"
#include "ns.h"
#include "server.h"
#include "source.h"
#include "tcpstore_int.h"

/* Requests handled per read callback before yielding to other connections. */
#define TCPSTORE_BATCH 64

/* Whether bytes can still be queued for c. */
int tcpstore_live(const struct ts_conn *c)
{
    return conn_life_live(&c->life);
}

/* Queue raw bytes on c's output; a client that stops reading stops being read. */
void tcpstore_put(struct ts_conn *c, const void *p, size_t n)
{
    if (!tcpstore_live(c))
        return;
    /* With --data-dir, replies wait while logged state is not durable yet. */
    struct evbuffer *out = persist_output(c->ts->srv, &c->life.io.hold, NULL);
    if (n && evbuffer_add(out, p, n) != 0) {
        tcpstore_close(c, "cannot buffer output");
        return;
    }
    conn_life_sent(&c->life, out);
}

/* The sink callback of c's replies (the codec's encoders write through it). */
static void tcpstore_sink_put(void *arg, const void *p, size_t n)
{
    tcpstore_put(arg, p, n);
}

/* Close c at once (freed on a later loop turn); its parked request is dropped silently. */
void tcpstore_close(struct ts_conn *c, const char *why)
{
    tspark_abandon(c);
    conn_life_close(&c->life, why);
}

/* Count stat and log why (fmt, ap) with how c is being closed; the message into msg (n bytes). */
static void tcpstore_note(struct ts_conn *c, enum stat_id stat, const char *how, char *msg, size_t n, const char *fmt,
                          va_list ap)
{
    vsnprintf(msg, n, fmt, ap);
    stats_inc(&c->ts->srv->stats, stat);
    log_msg(LOG_INFO, "tcpstore conn %llu %s: %s: %s", (unsigned long long)c->life.id, tcpstore_peer(c), how, msg);
}

/* Count stat, log why at info level and close c (TCPStore has no error reply). */
void tcpstore_fail(struct ts_conn *c, enum stat_id stat, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    tcpstore_note(c, stat, "closing", msg, sizeof msg, fmt, ap);
    va_end(ap);
    tcpstore_close(c, msg);
}

/* Count stat, log why and close c once what it has queued went out: for a well-formed request the store
 * refused (TCPStore has no error reply), so the answers of the requests before it still reach the client,
 * and nothing after it is read. */
void tcpstore_decline(struct ts_conn *c, enum stat_id stat, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    tcpstore_note(c, stat, "closing after its replies", msg, sizeof msg, fmt, ap);
    va_end(ap);
    tcpstore_finish(c);
}

/* Flush what c has queued, then close it. */
void tcpstore_finish(struct ts_conn *c)
{
    if (!tcpstore_live(c))
        return;
    tspark_abandon(c);
    conn_life_finish(&c->life);
}

/* c's parked request ended: go on with its buffered input on a later callback. */
void tcpstore_resume(struct ts_conn *c)
{
    if (tcpstore_live(c))
        conn_io_again(&c->life.io);
}

/* Forget the request c was decoding. */
static void tcpstore_req_reset(struct ts_conn *c)
{
    tscodec_reset(&c->req);
}

/* The close hooks: what each part of the front end lets go of when a connection goes, in order. */
static void (*const tcpstore_close_hooks[])(struct ts_conn *c) = {
    tspark_abandon,     /* its parked WAIT or BARRIER, without a reply */
    tswatch_conn_gone,  /* its WATCH_KEY registrations */
    tcpstore_req_reset,
};

/* The release hook: run the close hooks, unlink and uncount c, free it. */
static void tcpstore_free(struct conn_life *l)
{
    struct ts_conn *c = (struct ts_conn *)l;
    struct tcpstore *ts = c->ts;
    struct server *srv = ts->srv;
    for (size_t i = 0; i < sizeof tcpstore_close_hooks / sizeof tcpstore_close_hooks[0]; i++)
        tcpstore_close_hooks[i](c);
    source_conn_put(srv, c->src);
    DL_DELETE(ts->conns, c);
    ts->nconns--;
    srv->nconns--;
    srv->stats.c[STAT_TS_CURRENT]--;
    conn_life_fini(&c->life);
    free(c);
}

/* A deadline of c passed: the first request's, an incomplete request's, or the idle one. */
static void tcpstore_expired(struct conn_life *l, enum life_expiry why)
{
    struct ts_conn *c = (struct ts_conn *)l;
    const struct options *o = &c->ts->srv->opt;
    if (why == LIFE_EXP_GREETING)
        tcpstore_fail(c, STAT_TS_VALIDATE_TIMEOUT, "first request not complete within %llu ms",
                      (unsigned long long)o->tcpstore_validate_timeout);
    else if (why == LIFE_EXP_REQUEST)
        tcpstore_fail(c, STAT_REQUEST_TIMEOUT, "request incomplete for %llu ms",
                      (unsigned long long)o->request_timeout);
    else
        tcpstore_fail(c, STAT_IDLE_CLOSED, "idle for %llu ms", (unsigned long long)o->idle_timeout);
}

/* Whether silent c waits on the server: a parked request, or watches (torch's callback connection never
 * sends again). */
static int tcpstore_waiting(const struct conn_life *l)
{
    const struct ts_conn *c = (const struct ts_conn *)l;
    return c->park || c->nwatches;
}

/* The TCPStore front end's answers to the connection life. */
static const struct life_ops tcpstore_life_ops = {"tcpstore conn", tcpstore_expired, tcpstore_waiting,
                                                  tcpstore_free};

/* Decide the numbering from the first bytes; 0 when known, else the bytes still needed. */
static size_t tcpstore_detect(struct ts_conn *c, const struct tscodec_src *src)
{
    size_t need = tscodec_detect(src, &c->era);
    if (need)
        return need;
    int legacy = c->era == TS_ERA_LEGACY;
    stats_inc(&c->ts->srv->stats, legacy ? STAT_TS_LEGACY_ERA : STAT_TS_VALIDATE_ERA);
    if (log_enabled(LOG_DEBUG))
        log_msg(LOG_DEBUG, "tcpstore conn %llu %s: %s numbering", (unsigned long long)c->life.id, tcpstore_peer(c),
                legacy ? "old (torch 1.x-2.0)" : "VALIDATE-era");
    return 0;
}

/* A request begins while c has one parked: 1 to go on decoding it, 0 to leave it unread (the rule is the
 * codec's, shared with the relay). */
static int tcpstore_while_parked(struct ts_conn *c, const struct tscodec_src *src)
{
    enum tscodec_parked next = tscodec_parked_next(c->era, src);
    if (next == TSC_PARKED_ABANDON)
        tspark_abandon(c);
    return next != TSC_PARKED_HOLD;
}

/* Handle the request just decoded and make room for the next. */
static void tcpstore_request(struct ts_conn *c)
{
    c->life.last_rx_ms = clock_now_ms();
    conn_life_greeted(&c->life);
    tsops_dispatch(c, &c->req);
    tscodec_reset(&c->req);
}

/* The codec refused c's request: count it under the listener's name for the limit and close c. */
static void tcpstore_refuse(struct ts_conn *c, const struct tscodec_error *e)
{
    static const enum stat_id stat[] = {
        [TSC_ERR_BAD] = STAT_TS_BAD_REQUEST,     [TSC_ERR_KEY] = STAT_TS_LIMIT_KEY,
        [TSC_ERR_VALUE] = STAT_TS_LIMIT_VALUE,   [TSC_ERR_KEYS] = STAT_TS_LIMIT_KEYS,
        [TSC_ERR_REQUEST] = STAT_TS_LIMIT_REQUEST,
    };
    if (e->code == TSC_ERR_NOMEM)
        tcpstore_close(c, e->why);
    else
        tcpstore_fail(c, stat[e->code], "%s", e->why);
}

/* Decode and handle requests from src (a batch at a time), then wait for more bytes. */
static void tcpstore_process(struct ts_conn *c, struct tscodec_src *src)
{
    size_t want = 1;
    /* A connection that has sent nothing is left alone: torch 1.x opens a second one per store that
     * stays silent unless watchKey is used.  Its first byte starts --tcpstore-validate-timeout. */
    uint64_t vt = c->ts->srv->opt.tcpstore_validate_timeout;
    if (c->life.greeting && !c->life.greet_ms && vt && tscodec_avail(src))
        conn_life_greet_by(&c->life, clock_now_ms() + vt);
    for (int n = 0;; n++) {
        if (!tcpstore_live(c) || c->life.paused)
            return;
        if (c->era == TS_ERA_UNKNOWN && (want = tcpstore_detect(c, src)) != 0)
            break;
        if (c->req.op < 0 && tscodec_avail(src) == 0) {
            want = 1;
            break;
        }
        if (c->park && c->req.op < 0 && !tcpstore_while_parked(c, src))
            return; /* answered in order: the rest waits for the parked request */
        if (n == TCPSTORE_BATCH) {
            /* Fairness: let other connections run, come back on a later turn. */
            conn_io_want(&c->life.io, 1);
            conn_io_again(&c->life.io);
            return;
        }
        struct tscodec_error e;
        enum tscodec_result res = tscodec_step(&c->req, c->era, &c->ts->lim, src, &want, &e);
        if (res == TSC_ERROR) {
            tcpstore_refuse(c, &e);
            return;
        }
        if (res == TSC_MORE)
            break;
        tcpstore_request(c);
    }
    conn_io_want(&c->life.io, want);
}

/* Bytes an input buffer holds (the codec reads leftovers through these). */
static size_t tcpstore_in_len(void *buf)
{
    return evbuffer_get_length(buf);
}

/* Copy n bytes from the front of an input buffer, leaving them. */
static void tcpstore_in_copy(void *buf, void *dst, size_t n)
{
    evbuffer_copyout(buf, dst, n);
}

/* Move n bytes from the front of an input buffer. */
static void tcpstore_in_take(void *buf, void *dst, size_t n)
{
    evbuffer_remove(buf, dst, n);
}

/* The codec's view of an input buffer. */
static const struct tscodec_buf_ops tcpstore_in_ops = {tcpstore_in_len, tcpstore_in_copy, tcpstore_in_take};

/* The connection whose I/O io is. */
static struct ts_conn *tcpstore_of(struct conn_io *io)
{
    return (struct ts_conn *)conn_life_of(io);
}

/* Input behind a parked request keeps being read, so a client that closes is always seen (its FIN
 * cannot arrive through a full receive window), up to --tcpstore-max-request: more closes c, counted.
 * Torch clients send nothing behind a wait but CANCEL_WAIT; only a hostile one gets near the bound. */
static void tcpstore_hold_check(struct ts_conn *c)
{
    uint64_t max = c->ts->srv->opt.tcpstore_max_request;
    if (!tcpstore_live(c))
        return;
    if (!c->park) {
        conn_io_read_ahead(&c->life.io, 0);
        return;
    }
    if (evbuffer_get_length(c->life.io.in) > max) {
        tcpstore_fail(c, STAT_TS_LIMIT_REQUEST, "more than %llu bytes sent behind a parked request",
                      (unsigned long long)max);
        return;
    }
    /* Past the bound, not at it: the close above comes before reading would ever wait. */
    conn_io_read_ahead(&c->life.io, max + 1);
}

/* Note when the request now incomplete began (input behind a parked request is bounded by size instead). */
static void tcpstore_note_partial(struct ts_conn *c)
{
    size_t held = c->park ? 0 : evbuffer_get_length(c->life.io.in) + (c->req.op >= 0);
    conn_life_note_partial(&c->life, held);
}

/* Handle input (buf, n bytes just read, or NULL: what the input buffer holds). */
static void tcpstore_input(struct conn_io *io, const uint8_t *buf, size_t n)
{
    struct ts_conn *c = tcpstore_of(io);
    if (!tcpstore_live(c)) {
        evbuffer_drain(io->in, evbuffer_get_length(io->in)); /* closing: input is discarded */
        return;
    }
    if (buf) {
        /* Nothing left over: decode straight from the receive buffer, keep only what is not taken. */
        struct tscodec_src span = {buf, n, NULL, NULL};
        tcpstore_process(c, &span);
        if (tcpstore_live(c) && span.n && evbuffer_add(io->in, span.p, span.n) != 0)
            tcpstore_close(c, "out of memory");
    } else {
        struct tscodec_src queued = {NULL, 0, io->in, &tcpstore_in_ops};
        tcpstore_process(c, &queued);
    }
    tcpstore_hold_check(c);
    tcpstore_note_partial(c);
}

/* The peer closed or the socket failed. */
static void tcpstore_closed(struct conn_io *io, int error, const char *why)
{
    (void)error;
    tcpstore_close(tcpstore_of(io), why);
}

/* What the shared I/O calls back into. */
static const struct conn_io_ops tcpstore_ops = {tcpstore_input, conn_life_written, tcpstore_closed};

/* The peer's address as text, formatted on first use. */
const char *tcpstore_peer(struct ts_conn *c)
{
    return conn_life_peer(&c->life);
}

/* Allocate a connection around fd and link it in; NULL on failure (fd closed). */
static struct ts_conn *tcpstore_new(struct tcpstore *ts, int fd, const struct sockaddr *sa)
{
    struct server *srv = ts->srv;
    struct ts_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->life.io.want = 1;
    if (conn_life_open(&c->life, srv, fd, 0, &tcpstore_ops, &tcpstore_life_ops, sa, ts->next_id + 1) != 0) {
        free(c);
        return NULL;
    }
    ts->next_id++;
    c->ts = ts;
    c->req.op = -1;
    c->sink = (struct tscodec_sink){tcpstore_sink_put, c};
    DL_PREPEND(ts->conns, c);
    c->src = source_conn_take(srv, sa);
    c->share.source = source_waiters(c->src);
    ts->nconns++;
    srv->nconns++;
    return c;
}

/* Take over a socket accepted on the TCPStore listener. */
void tcpstore_accept(struct server *srv, int fd, const struct sockaddr *sa, socklen_t salen)
{
    (void)salen;
    struct tcpstore *ts = srv->tcpstore;
    /* TCPStore has no way to say "too many connections": over the shared
     * --max-connections budget, the socket is just closed. */
    if (srv->draining || srv->nconns >= srv->opt.max_connections) {
        if (!srv->draining)
            stats_inc(&srv->stats, STAT_LIMIT_CONNECTIONS);
        close(fd);
        return;
    }
    /* --nodelay needs no setsockopt here: accepted sockets inherit it from the listener. */
    struct ts_conn *c = tcpstore_new(ts, fd, sa);
    if (!c)
        return;
    stats_inc(&srv->stats, STAT_TS_ACCEPTED);
    stats_inc(&srv->stats, STAT_TS_CURRENT);
    conn_life_start(&c->life, 0);
    if (log_enabled(LOG_DEBUG))
        log_msg(LOG_DEBUG, "tcpstore conn %llu %s: accepted", (unsigned long long)c->life.id, tcpstore_peer(c));
}

/* Check the front end's options against each other; 0 or EX_USAGE after logging why. */
static int tcpstore_check_options(const struct options *o)
{
    if (o->tcpstore_max_key == 0 || o->tcpstore_max_keys == 0) {
        log_msg(LOG_ERROR, "--tcpstore-max-key and --tcpstore-max-keys-per-request must be positive");
        return EX_USAGE;
    }
    /* The largest single request (a set) must fit what one connection may buffer. */
    if (o->tcpstore_max_request < o->tcpstore_max_key + o->tcpstore_max_value + 64) {
        log_msg(LOG_ERROR, "--tcpstore-max-request (%llu) must be at least --tcpstore-max-key + "
                           "--tcpstore-max-value + 64 (%llu)",
                (unsigned long long)o->tcpstore_max_request,
                (unsigned long long)(o->tcpstore_max_key + o->tcpstore_max_value + 64));
        return EX_USAGE;
    }
    return 0;
}

/* Open the front end's namespace (it cannot have a token: TCPStore clients send none). */
static int tcpstore_open_ns(struct tcpstore *ts)
{
    struct server *srv = ts->srv;
    const char *name = srv->opt.tcpstore_namespace;
    int st = 0;
    if (!*name || strlen(name) > NS_NAME_MAX) {
        log_msg(LOG_ERROR, "--tcpstore-namespace: expected 1 to %d bytes", NS_NAME_MAX);
        return EX_USAGE;
    }
    if (!ns_token_ok(srv, name, "")) {
        log_msg(LOG_ERROR, "namespace '%s' requires a token, which TCPStore clients cannot send; "
                           "pick another --tcpstore-namespace", name);
        return EX_CONFIG;
    }
    if (!(ts->ns = ns_get(srv, name, &st))) {
        log_msg(LOG_ERROR, "cannot open namespace '%s' for the TCPStore listener", name);
        return EX_SOFTWARE;
    }
    ns_pin(ts->ns, 1);
    return 0;
}

/* Bind --tcpstore-listen (a no-op when it is empty) and write its port file; 0 or a sysexits status. */
int tcpstore_start(struct server *srv)
{
    const struct options *o = &srv->opt;
    if (!o->tcpstore_listen || !*o->tcpstore_listen)
        return 0;
    int rc = tcpstore_check_options(o);
    if (rc)
        return rc;
    char host[256];
    uint16_t port;
    if (listener_parse(o->tcpstore_listen, host, sizeof host, &port) != 0) {
        log_msg(LOG_ERROR, "--tcpstore-listen %s: expected HOST:PORT or [IPV6]:PORT", o->tcpstore_listen);
        return EX_USAGE;
    }
    struct tcpstore *ts = calloc(1, sizeof *ts);
    if (!ts)
        return EX_OSERR;
    ts->srv = srv;
    ts->lim = (struct tscodec_limits){o->tcpstore_max_key, o->tcpstore_max_value, o->tcpstore_max_keys,
                                      o->tcpstore_max_request};
    srv->tcpstore = ts;
    if ((rc = tcpstore_open_ns(ts)) != 0)
        return rc;
    if ((rc = listener_open_with(srv, o->tcpstore_listen, tcpstore_accept, &ts->listener)) != 0)
        return rc;
    if ((rc = server_write_port_file(o->tcpstore_port_file, listener_port(ts->listener))) != 0)
        return rc;
    log_msg(LOG_INFO, "TCPStore listener on %s, namespace '%s'; max-key=%llu max-value=%llu max-keys=%llu",
            listener_name(ts->listener), ts->ns->name, (unsigned long long)o->tcpstore_max_key,
            (unsigned long long)o->tcpstore_max_value, (unsigned long long)o->tcpstore_max_keys);
    return 0;
}

/* Stop accepting, flush every TCPStore connection and close it (part of the server's drain). */
void tcpstore_drain(struct server *srv)
{
    struct tcpstore *ts = srv->tcpstore;
    if (!ts)
        return;
    listener_close(ts->listener);
    ts->listener = NULL;
    for (struct ts_conn *c = ts->conns; c; c = c->next)
        tcpstore_finish(c);
}

/* Free the front end and every connection it holds (at exit); safe when it never started. */
void tcpstore_fini(struct server *srv)
{
    struct tcpstore *ts = srv->tcpstore;
    if (!ts)
        return;
    while (ts->conns)
        tcpstore_free(&ts->conns->life);
    listener_close(ts->listener);
    tswatch_fini(ts);
    if (ts->ns)
        ns_pin(ts->ns, 0);
    free(ts);
    srv->tcpstore = NULL;
}
