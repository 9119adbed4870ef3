/*
 * The TCPStore relay of `muster run`: a listener on 127.0.0.1 that the
 * node's workers reach as MASTER_ADDR:MASTER_PORT, so an unmodified
 * torch.distributed program's env:// store goes through musterd, in the
 * job's namespace, with its token, TLS and failover, over one upstream
 * connection per node instead of one per rank.
 *
 * One relay serves one generation: it starts before the generation's
 * workers and stops after them, and every torch key is stored under
 * torch/<generation>/, so no key or parked request of one attempt reaches
 * the next.  The relay runs on a thread of its own with its own poll loop
 * and its own handle (the launcher's handle holds the membership and is
 * heartbeated from the launcher's loop); it shares no state with the
 * launcher between start and stop.
 *
 * Upstream, the relay is event-driven on libmuster's asynchronous calls
 * (muster/async.h): every worker's request is sent as soon as it is
 * decoded, many in flight on the one handle, and each connection's replies
 * go out in its request order (a queue of reply slots), as TCPStore
 * clients expect.  Where it cannot be told apart from sending each request
 * alone, a node's requests for the same key share one upstream call
 * (run_relay_comb.c; docs/launcher.md says what and why).
 *
 * A worker that sends garbage, an unknown op or more than the relay's
 * limits, or leaves a request incomplete for --relay-request-timeout, is
 * closed (TCPStore has no error reply) and counted; the others are
 * unaffected.  Upstream, a handle without failover that loses its
 * connection closes every worker's connection: their stores fail, the
 * workers exit, and the launcher restarts the generation as after any
 * failure.  A failover handle repairs itself; what an op in flight
 * becomes then follows libmuster's rules (muster.h): parked WAIT and
 * BARRIER requests are waits at musterd, which libmuster sends again after
 * the reconnect, so none of them misses a write made meanwhile.
 */
#include "run_relay.h"

#include "cli.h"
#include "deadline.h"
#include "keys.h"
#include "run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes read from one worker per wake-up. */
#define RELAY_READ_CHUNK 65536
/* Replies one connection may owe before the relay stops decoding its requests (it reads on up to
 * --relay-max-request bytes): bounds what one worker keeps in flight. */
#define RELAY_MAX_PIPELINE 4096

/* A new reply slot at the end of c's queue; NULL (c closed) when out of memory. */
struct run_relay_slot *run_relay_slot_new(struct run_relay *r, struct run_relay_conn *c)
{
    struct run_relay_slot *s = calloc(1, sizeof *s);
    if (!s) {
        run_relay_close(r, c, "out of memory");
        return NULL;
    }
    if (c->tail)
        c->tail->next = s;
    else
        c->head = s;
    c->tail = s;
    c->nslots++;
    return s;
}

/* A sink appending to slot s. */
struct tscodec_sink run_relay_slot_sink(struct run_relay_slot *s)
{
    return tscodec_out_sink(&s->out);
}

/* Mark s complete. */
void run_relay_slot_done(struct run_relay_slot *s)
{
    s->ready = 1;
}

/* Move c's complete replies at the head of its queue to its output. */
void run_relay_pump(struct run_relay_conn *c)
{
    for (struct run_relay_slot *s = c->head; s && s->ready; s = c->head) {
        if (s->out.oom)
            c->out.oom = 1;
        else if (s->out.len && !c->out.len && !c->out.p) {
            /* The usual case of one reply: take its buffer instead of copying it. */
            c->out = s->out;
            s->out.p = NULL;
        } else if (s->out.len) {
            tscodec_out_put(&c->out, s->out.p, s->out.len);
        }
        c->head = s->next;
        if (!c->head)
            c->tail = NULL;
        c->nslots--;
        free(s->out.p);
        free(s);
    }
}

/* Free every slot of c. */
static void run_relay_slots_free(struct run_relay_conn *c)
{
    for (struct run_relay_slot *s = c->head, *n; s; s = n) {
        n = s->next;
        free(s->out.p);
        free(s);
    }
    c->head = c->tail = NULL;
    c->nslots = 0;
}

static void run_relay_flush(struct run_relay *r, struct run_relay_conn *c);

/* Close c, with the reason on stderr (TCPStore has no error reply).  The replies already complete go out
 * first (as far as the socket takes them now): a refused request must not take the answers of the
 * requests before it along. */
void run_relay_close(struct run_relay *r, struct run_relay_conn *c, const char *fmt, ...)
{
    if (c->dead)
        return;
    run_relay_pump(c);
    run_relay_flush(r, c);
    if (c->dead)
        return;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    fprintf(stderr, RUN_TAG "relay: closing a worker's store connection: %s\n", why);
    if (c->park != RELAY_PARK_NONE)
        r->st.abandoned++;
    run_relay_ops_unpark(c);
    c->dead = 1;
}

/* Close every worker's connection and refuse new ones: the upstream handle cannot be repaired. */
static void run_relay_kill(struct run_relay *r, const char *why)
{
    if (!r->dead)
        fprintf(stderr, RUN_TAG "relay: the store connection is lost (%s); closing the workers' stores\n", why);
    r->dead = 1;
    for (size_t i = 0; i < r->nconns; i++)
        if (!r->conns[i]->dead) {
            run_relay_ops_unpark(r->conns[i]);
            r->conns[i]->dead = 1;
        }
}

/* An upstream call failed: close c, or every connection when the handle is beyond repair. */
void run_relay_upstream_failed(struct run_relay *r, struct run_relay_conn *c, const char *op, int rc,
                               const char *detail)
{
    r->st.upstream_errors++;
    if (muster_broken(r->up)) {
        char why[320];
        snprintf(why, sizeof why, "%s: %s", muster_strerror(rc), muster_last_error(r->up));
        run_relay_kill(r, why);
        return;
    }
    /* A failover handle answers MUSTER_ECONN for an add, compare_set or append that may or may not
     * have run: TCPStore cannot say so, so the worker's store fails instead of guessing. */
    if (!detail || !*detail)
        detail = muster_last_error(r->up);
    run_relay_close(r, c, "%s: %s%s%s", op, muster_strerror(rc), *detail ? ": " : "", detail);
}

/* Accept what the listener holds; over --relay-max-conns a connection is closed at once (counted). */
static void run_relay_accept(struct run_relay *r)
{
    for (;;) {
        int fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        r->st.accepted++;
        struct run_relay_conn *c = NULL;
        if (r->dead || r->nlive >= r->cfg.max_conns) {
            if (!r->dead) {
                r->st.limit_conns++;
                fprintf(stderr, RUN_TAG "relay: refusing a connection: %zu open (--relay-max-conns)\n", r->nlive);
            }
            close(fd);
            continue;
        }
        if (r->nconns == r->capconns) {
            size_t cap = r->capconns ? r->capconns * 2 : 16;
            struct run_relay_conn **v = realloc(r->conns, cap * sizeof *v);
            if (v) {
                r->conns = v;
                r->capconns = cap;
            }
        }
        if (r->nconns == r->capconns || !(c = calloc(1, sizeof *c))) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->req.op = -1;
        r->conns[r->nconns++] = c;
        r->nlive++;
    }
}

/* Write what c has queued; closes it when the worker is gone. */
static void run_relay_flush(struct run_relay *r, struct run_relay_conn *c)
{
    while (!c->dead && c->outoff < c->out.len) {
        ssize_t k = send(c->fd, c->out.p + c->outoff, c->out.len - c->outoff, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (k <= 0) {
            c->dead = 1;
            if (c->park != RELAY_PARK_NONE)
                r->st.abandoned++;
            run_relay_ops_unpark(c);
            return;
        }
        c->outoff += (size_t)k;
    }
    if (c->outoff == c->out.len)
        c->outoff = c->out.len = 0;
}

/* Whether c's next request (at the front of src) may be decoded: not while one of its requests waits to
 * ride on a combined call (its later ones must reach musterd after it) or it owes RELAY_MAX_PIPELINE
 * replies; while a WAIT or BARRIER is in progress, as the codec's rule for parked connections says. */
static int run_relay_may_decode(struct run_relay *r, struct run_relay_conn *c, const struct tscodec_src *src)
{
    if (c->deferred || c->nslots >= RELAY_MAX_PIPELINE)
        return 0;
    if (c->park == RELAY_PARK_NONE || c->req.op >= 0)
        return 1;
    enum tscodec_parked next = tscodec_parked_next(c->era, src);
    if (next == TSC_PARKED_ABANDON) {
        r->st.abandoned++;
        run_relay_ops_unpark(c);
    }
    return next != TSC_PARKED_HOLD;
}

/* The codec refused c's request: count the limit it broke and close it. */
static void run_relay_refuse(struct run_relay *r, struct run_relay_conn *c, const struct tscodec_error *e)
{
    uint64_t *n = e->code == TSC_ERR_KEY       ? &r->st.limit_key
                  : e->code == TSC_ERR_KEYS    ? &r->st.limit_keys
                  : e->code == TSC_ERR_VALUE   ? &r->st.limit_request /* values are bounded by the request */
                  : e->code == TSC_ERR_REQUEST ? &r->st.limit_request
                  : e->code == TSC_ERR_BAD     ? &r->st.bad_request
                                               : NULL;
    if (n)
        (*n)++;
    run_relay_close(r, c, "%s", e->why);
}

/* When the request c now holds incomplete began: 0 with none held, now when one began (took: a whole
 * request was just taken, so what is held is a new one).  As on musterd's listener, bytes behind a
 * parked request are not an incomplete request: --relay-max-request bounds them instead. */
uint64_t run_relay_partial_since(const struct run_relay_conn *c, int took, uint64_t now)
{
    int held = c->park == RELAY_PARK_NONE && !c->deferred && (c->inlen > 0 || c->req.op >= 0);
    if (!held)
        return 0;
    return !c->partial_ms || took ? now : c->partial_ms;
}

/* Decode and serve the requests c has buffered; what is not taken yet stays at the front of c->in. */
static void run_relay_decode(struct run_relay *r, struct run_relay_conn *c)
{
    struct tscodec_src src = {c->in, c->inlen, NULL, NULL};
    size_t want;
    int took = 0;
    while (!c->dead && src.n > 0) {
        if (c->era == TS_ERA_UNKNOWN && tscodec_detect(&src, &c->era) != 0)
            break;
        if (!run_relay_may_decode(r, c, &src))
            break;
        struct tscodec_error e;
        enum tscodec_result res = tscodec_step(&c->req, c->era, &r->cfg.lim, &src, &want, &e);
        if (res == TSC_ERROR) {
            run_relay_refuse(r, c, &e);
            return;
        }
        if (res == TSC_MORE)
            break;
        run_relay_ops_dispatch(r, c, &c->req);
        tscodec_reset(&c->req);
        took = 1;
    }
    run_relay_pump(c);
    /* Only when something was taken: a large value arriving chunk by chunk is not copied again each time. */
    if (src.p != c->in)
        memmove(c->in, src.p, src.n);
    c->inlen = src.n;
    c->partial_ms = run_relay_partial_since(c, took, deadline_now());
}

/* Close the connections whose request stayed incomplete for --relay-request-timeout (counted); returns
 * the milliseconds until the next such deadline, at most cap. */
static int run_relay_expire(struct run_relay *r, int cap)
{
    uint64_t limit = r->cfg.request_timeout_ms, now = deadline_now();
    int wait = cap;
    for (size_t i = 0; limit && i < r->nconns; i++) {
        struct run_relay_conn *c = r->conns[i];
        if (c->dead || !c->partial_ms)
            continue;
        if (c->partial_ms + limit <= now) {
            r->st.request_timeout++;
            run_relay_close(r, c, "request incomplete for %" PRIu64 " ms (--relay-request-timeout)", limit);
        } else if (c->partial_ms + limit - now < (uint64_t)wait) {
            wait = (int)(c->partial_ms + limit - now);
        }
    }
    return wait;
}

/* Read what c has sent (within one chunk), then serve it. */
static void run_relay_read(struct run_relay *r, struct run_relay_conn *c)
{
    /* Bytes behind a parked request wait unread; only a hostile worker sends more than a request's worth. */
    if (c->inlen + RELAY_READ_CHUNK > c->incap) {
        size_t cap = c->incap ? c->incap : RELAY_READ_CHUNK;
        while (cap < c->inlen + RELAY_READ_CHUNK)
            cap *= 2;
        uint8_t *p = realloc(c->in, cap);
        if (!p) {
            run_relay_close(r, c, "out of memory");
            return;
        }
        c->in = p;
        c->incap = cap;
    }
    ssize_t k = recv(c->fd, c->in + c->inlen, RELAY_READ_CHUNK, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (k <= 0) {
        if (c->park != RELAY_PARK_NONE)
            r->st.abandoned++;
        run_relay_ops_unpark(c);
        c->dead = 1;
        return;
    }
    c->inlen += (size_t)k;
    if (c->inlen > r->cfg.lim.max_request + TS_HANDSHAKE_LEN) {
        r->st.limit_request++;
        run_relay_close(r, c, "more than %" PRIu64 " bytes buffered (--relay-max-request)", r->cfg.lim.max_request);
        return;
    }
    run_relay_decode(r, c);
}

/* Close the connections closed during this loop turn, and free those no call in flight refers to. */
static void run_relay_reap(struct run_relay *r)
{
    size_t j = 0;
    for (size_t i = 0; i < r->nconns; i++) {
        struct run_relay_conn *c = r->conns[i];
        if (c->dead && c->fd >= 0) {
            close(c->fd);
            c->fd = -1; /* poll skips it while its calls complete */
            r->nlive--;
            run_relay_ops_unpark(c);
            run_relay_watch_conn_gone(r, c);
        }
        if (c->dead && !c->refs) {
            tscodec_reset(&c->req);
            run_relay_slots_free(c);
            run_relay_unpromise(r, c);
            free(c->in);
            free(c->out.p);
            free(c);
        } else {
            r->conns[j++] = c;
        }
    }
    r->nconns = j;
}

/* Bound what a worker leaves unread, then write or close. */
static void run_relay_output(struct run_relay *r, struct run_relay_conn *c)
{
    if (c->dead)
        return;
    run_relay_pump(c);
    if (c->out.oom) {
        run_relay_close(r, c, "out of memory");
        return;
    }
    if (c->out.len - c->outoff > r->cfg.max_output) {
        r->st.limit_output++;
        run_relay_close(r, c, "more than %" PRIu64 " reply bytes left unread (--relay-max-output)", r->cfg.max_output);
        return;
    }
    run_relay_flush(r, c);
}

/* Hand the upstream socket's readiness to the handle (callbacks answer workers). */
static void run_relay_upstream(struct run_relay *r, short revents)
{
    if (r->dead)
        return;
    int ev = 0;
    if (revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))
        ev |= MUSTER_ASYNC_READ;
    if (revents & (POLLOUT | POLLERR))
        ev |= MUSTER_ASYNC_WRITE;
    /* A failover handle reconnects inside a later call to this when its timeout says so. */
    int rc = muster_async_handle(r->up, ev);
    if (rc != MUSTER_OK && !r->failover) {
        char why[320];
        snprintf(why, sizeof why, "%s: %s", muster_strerror(rc), muster_last_error(r->up));
        run_relay_kill(r, why);
    }
    run_relay_watch_events(r);
}

/* Hold (on) or push (off) what is written to the upstream socket fd: the calls one turn submits go out
 * together instead of one segment, and one wake-up of musterd, each (-1: none; not TCP: no effect). */
static void run_relay_cork(int fd, int on)
{
    if (fd >= 0)
        (void)setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
}

/* One turn of the loop: poll the stop pipe, the listener, the upstream socket and the workers; 0 to stop. */
static int run_relay_turn(struct run_relay *r, struct pollfd **pfdp, size_t *cap)
{
    for (size_t i = 0; i < r->nconns; i++) {
        struct run_relay_conn *c = r->conns[i];
        /* A request that was held (behind a parked or combined one) goes on once that one is done. */
        if (!c->dead && c->inlen)
            run_relay_decode(r, c);
        run_relay_output(r, c);
    }
    /* What this turn decoded, and what the answers it read released, goes upstream gathered by key. */
    run_relay_comb_flush(r);
    int wait = run_relay_expire(r, 1000);
    run_relay_reap(r);
    size_t n = r->nconns + 3;
    if (n > *cap) {
        struct pollfd *p = realloc(*pfdp, n * sizeof *p);
        if (!p)
            return 1;
        *pfdp = p;
        *cap = n;
    }
    struct pollfd *pfd = *pfdp;
    int uev = r->dead ? 0 : muster_async_events(r->up), uto = r->dead ? -1 : muster_async_timeout(r->up);
    if (uto >= 0 && uto < wait)
        wait = uto;
    pfd[0] = (struct pollfd){.fd = r->stop[0], .events = POLLIN};
    pfd[1] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
    pfd[2] = (struct pollfd){.fd = r->dead ? -1 : muster_async_fd(r->up),
                             .events = (short)(((uev & MUSTER_ASYNC_READ) ? POLLIN : 0) |
                                               ((uev & MUSTER_ASYNC_WRITE) ? POLLOUT : 0))};
    for (size_t i = 0; i < r->nconns; i++) {
        struct run_relay_conn *c = r->conns[i];
        /* A worker owing too many replies is not read until they drain (TCP holds the rest). */
        short in = c->nslots >= RELAY_MAX_PIPELINE ? 0 : POLLIN;
        pfd[3 + i] = (struct pollfd){.fd = c->fd, .events = (short)(in | (c->out.len ? POLLOUT : 0))};
    }
    run_relay_cork(r->corked, 0);
    r->corked = -1;
    if (poll(pfd, (nfds_t)n, wait) < 0)
        return 1;
    if (pfd[0].revents)
        return 0;
    /* Until the next poll, when more than one socket is ready (a lone request goes out at once): the
     * answers read now release requests whose calls join those decoded now. */
    size_t ready = 0;
    for (size_t i = 2; i < n && ready < 2; i++)
        ready += pfd[i].revents != 0;
    if (ready >= 2) {
        r->corked = pfd[2].fd;
        run_relay_cork(r->corked, 1);
    }
    run_relay_upstream(r, pfd[2].revents);
    if (pfd[1].revents)
        run_relay_accept(r);
    for (size_t i = 0; i + 3 < n; i++) {
        struct run_relay_conn *c = r->conns[i];
        if (c->fd < 0)
            continue;
        if (pfd[3 + i].revents & POLLOUT)
            run_relay_flush(r, c);
        if (!c->dead && (pfd[3 + i].revents & (POLLIN | POLLHUP | POLLERR)))
            run_relay_read(r, c);
    }
    /* What was just decoded goes upstream now rather than after the next poll. */
    run_relay_comb_flush(r);
    if (!r->dead && (muster_async_events(r->up) & MUSTER_ASYNC_WRITE))
        run_relay_upstream(r, POLLOUT);
    return 1;
}

/* The relay thread: loop until the stop pipe is written. */
static void *run_relay_main(void *arg)
{
    struct run_relay *r = arg;
    struct pollfd *pfd = NULL;
    size_t cap = 0;
    r->corked = -1;
    while (run_relay_turn(r, &pfd, &cap)) {
    }
    free(pfd);
    return NULL;
}

/* Listen on 127.0.0.1 port 0 and learn the port; 0 or -1. */
static int run_relay_listen(struct run_relay *r)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    r->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (r->lfd < 0 || bind(r->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(r->lfd, 4096) < 0 ||
        getsockname(r->lfd, (struct sockaddr *)&sa, &sl) < 0) {
        fprintf(stderr, RUN_TAG "relay: cannot listen on 127.0.0.1: %s\n", strerror(errno));
        return -1;
    }
    r->port = ntohs(sa.sin_port);
    return 0;
}

/* Connect upstream (url), listen on 127.0.0.1 port 0 and start the thread serving generation gen; 0 or -1. */
int run_relay_start(struct run_relay *r, const struct run_relay_cfg *cfg, const char *url, uint64_t gen)
{
    memset(r, 0, sizeof *r);
    r->lfd = r->stop[0] = r->stop[1] = -1;
    r->inited = 1;
    r->cfg = *cfg;
    keys_torch_prefix(r->prefix, sizeof r->prefix, gen);
    muster_url u;
    r->failover = muster_url_parse(url, &u) == MUSTER_OK && u.failover;
    muster_opts o = {.client_name = "muster run relay"};
    int err = 0;
    if (!(r->up = muster_connect_opts(url, &o, &err))) {
        char where[600];
        cli_url_redacted(url, where, sizeof where); /* the URL's token stays out of logs */
        fprintf(stderr, RUN_TAG "relay: cannot connect to %s: %s\n", where, muster_strerror(err));
        return -1;
    }
    if (run_relay_listen(r) < 0 || pipe2(r->stop, O_CLOEXEC) < 0)
        return -1;
    /* Signals stay with the launcher's thread, whose handler feeds its self-pipe. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&r->thread, NULL, run_relay_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        fprintf(stderr, RUN_TAG "relay: cannot start its thread: %s\n", strerror(rc));
        return -1;
    }
    r->started = 1;
    return 0;
}

/* Print the relay's counters when a limit tripped or a worker was refused, and what it combined. */
static void run_relay_report(const struct run_relay *r)
{
    const struct run_relay_stats *s = &r->st;
    if (s->watches)
        fprintf(stderr, RUN_TAG "relay %s: watch_key registrations %" PRIu64 ", callback frames %" PRIu64 "\n",
                r->prefix, s->watches, s->watch_callbacks);
    if (s->adds_combined | s->gets_combined | s->waits_joined)
        fprintf(stderr,
                RUN_TAG "relay %s: requests %" PRIu64 ", upstream calls %" PRIu64 ", combined: adds %" PRIu64
                        ", gets %" PRIu64 ", waits %" PRIu64 " (joined in flight %" PRIu64 ")\n",
                r->prefix, s->requests, s->upstream_ops, s->adds_combined, s->gets_combined, s->waits_joined,
                s->joined_inflight);
    if (!(s->bad_request | s->limit_key | s->limit_keys | s->limit_request | s->limit_conns | s->limit_output |
          s->unsupported | s->upstream_errors | s->request_timeout | s->limit_watches))
        return;
    fprintf(stderr,
            RUN_TAG "relay %s: connections %" PRIu64 ", requests %" PRIu64 ", bad_request %" PRIu64
                    ", limit_key %" PRIu64 ", limit_keys %" PRIu64 ", limit_request %" PRIu64 ", limit_conns %" PRIu64
                    ", limit_output %" PRIu64 ", limit_watches %" PRIu64 ", request_timeout %" PRIu64
                    ", unsupported %" PRIu64 ", upstream_errors %" PRIu64 "\n",
            r->prefix, s->accepted, s->requests, s->bad_request, s->limit_key, s->limit_keys, s->limit_request,
            s->limit_conns, s->limit_output, s->limit_watches, s->request_timeout, s->unsupported, s->upstream_errors);
}

/* Stop the thread, close everything and print the counters that tripped; safe when not started. */
void run_relay_stop(struct run_relay *r)
{
    if (!r->inited)
        return;
    r->inited = 0;
    if (r->started) {
        if (write(r->stop[1], "x", 1) < 0) {
            /* The pipe is empty and open: a write cannot fail here. */
        }
        pthread_join(r->thread, NULL);
        r->started = 0;
        run_relay_report(r);
    }
    /* The handle goes first: closing it completes the calls in flight (callbacks only let go), so no
     * connection is referred to once they are freed. */
    r->closing = 1;
    muster_close(r->up);
    r->up = NULL;
    run_relay_comb_free(r);
    run_relay_watch_free(r);
    for (size_t i = 0; i < r->nconns; i++) {
        r->conns[i]->dead = 1;
        r->conns[i]->refs = 0;
    }
    run_relay_reap(r);
    free(r->conns);
    r->conns = NULL;
    r->capconns = 0;
    if (r->lfd >= 0)
        close(r->lfd);
    for (int i = 0; i < 2; i++)
        if (r->stop[i] >= 0)
            close(r->stop[i]);
    r->lfd = r->stop[0] = r->stop[1] = -1;
}
