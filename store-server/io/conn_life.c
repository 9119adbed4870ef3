/*
 * The life of a connection, one mechanism for both front ends (native
 * connections in native/conn.c, TCPStore ones in tcpstore/tcpstore.c).
 * A connection is open, then flushing its last bytes, then lingering with
 * its write side shut, then dead; one libevent timer per connection keeps
 * whichever deadline comes next:
 *
 *   open, greeting   the first request by greet_ms (--hello-timeout, or
 *                    --tcpstore-validate-timeout once a first byte came)
 *   open, paused     its output read within --slow-timeout
 *   open             --request-timeout for a request left incomplete;
 *                    otherwise --idle-timeout since the last request or
 *                    reply (a connection waiting on the server is not
 *                    idle, and the answer that ends its wait starts the
 *                    count)
 *   flushing         --slow-timeout (--drain-timeout while draining)
 *   lingering        --linger-timeout for the peer's EOF (a fifth of it
 *                    while draining)
 *
 * A closing connection shuts its write side and reads until the peer's EOF
 * (lingering) so unread input does not turn the close into a reset that
 * could eat the last reply.  Freeing is deferred to a fresh loop turn
 * through the same timer, so code deep in a keyspace change never sees a
 * connection vanish under it; the front end's release hook then lets go of
 * what its subsystems hold.
 */
#include "conn_life.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "persist.h"
#include "server.h"

static void conn_life_arm(struct conn_life *l);
static void conn_life_timer_cb(evutil_socket_t fd, short what, void *arg);

/* Enter a state and note when. */
static void conn_life_set_state(struct conn_life *l, enum life_state s)
{
    l->state = s;
    l->state_ms = clock_now_ms();
}

/* Set up l around an accepted fd with the front end's callbacks; 0, or -1 with fd closed. */
int conn_life_open(struct conn_life *l, struct server *srv, int fd, int tls, const struct conn_io_ops *io_ops,
                   const struct life_ops *ops, const struct sockaddr *sa, uint64_t id)
{
    if (conn_io_open(&l->io, srv, fd, tls, io_ops) != 0)
        return -1;
    if (!(l->timer = evtimer_new(srv->base, conn_life_timer_cb, l))) {
        conn_io_free(&l->io);
        return -1;
    }
    l->ops = ops;
    l->id = id;
    l->greeting = 1;
    l->last_rx_ms = clock_now_ms();
    conn_life_set_state(l, LIFE_OPEN);
    /* Only copied here: formatting it (inet_ntop, snprintf) was a tenth of a connect storm's user time,
     * and most connections never log their address. */
    memcpy(&l->addr, sa, sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
    return 0;
}

/* Free what conn_life_open made: held replies, the I/O (a drain may end here) and the timer. */
void conn_life_fini(struct conn_life *l)
{
    persist_hold_drop(l->io.srv, &l->io.hold);
    conn_io_free(&l->io);
    event_free(l->timer);
}

/* Start reading, with the first request due by greet_ms (0: no bound yet). */
void conn_life_start(struct conn_life *l, uint64_t greet_ms)
{
    l->greet_ms = greet_ms;
    conn_io_start(&l->io);
    conn_life_arm(l);
}

/* Bound the first request by greet_ms from now on (while still greeting). */
void conn_life_greet_by(struct conn_life *l, uint64_t greet_ms)
{
    if (!l->greeting || l->greet_ms == greet_ms)
        return;
    l->greet_ms = greet_ms;
    conn_life_arm(l);
}

/* The first request came: the idle and request deadlines apply from now. */
void conn_life_greeted(struct conn_life *l)
{
    if (!l->greeting)
        return;
    l->greeting = 0;
    conn_life_arm(l);
}

/* Whether bytes can still be queued for l. */
int conn_life_live(const struct conn_life *l)
{
    return l->state == LIFE_OPEN;
}

/* The later of two times. */
static uint64_t conn_life_max(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* The next deadline of l's timer in monotonic ms, or 0 for none. */
static uint64_t conn_life_deadline(const struct conn_life *l)
{
    const struct server *srv = l->io.srv;
    const struct options *o = &srv->opt;
    switch (l->state) {
    case LIFE_OPEN:
        if (l->paused)
            return l->paused_ms + o->slow_timeout;
        if (l->greeting)
            return l->greet_ms;
        /* A request under way is not idle: --request-timeout alone bounds it. */
        if (l->partial_ms && o->request_timeout)
            return l->partial_ms + o->request_timeout;
        return o->idle_timeout ? conn_life_max(l->last_rx_ms, l->answer_ms) + o->idle_timeout : 0;
    case LIFE_FLUSHING:
        return l->state_ms + (srv->draining ? o->drain_timeout : o->slow_timeout);
    case LIFE_LINGER:
        return l->state_ms + (srv->draining ? o->linger_timeout / 5 : o->linger_timeout);
    case LIFE_DEAD:
        return 0;
    }
    return 0;
}

/* (Re)arm l's timer for its next deadline. */
static void conn_life_arm(struct conn_life *l)
{
    clock_timer_at(l->timer, conn_life_deadline(l));
}

/* The timer: the deferred release, or a deadline that passed. */
static void conn_life_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn_life *l = arg;
    struct server *srv = l->io.srv;
    uint64_t at = conn_life_deadline(l), now = clock_now_ms();
    if (l->state == LIFE_DEAD || l->state == LIFE_LINGER) {
        l->ops->release(l);
    } else if (!at) {
        return; /* nothing is due any more */
    } else if (at > now) {
        conn_life_arm(l); /* an idle deadline moved on with traffic */
    } else if (l->state == LIFE_FLUSHING || l->paused) {
        stats_inc(&srv->stats, STAT_LIMIT_OUTPUT);
        log_msg(LOG_WARN, "%s %llu %s: closed: output not read within the timeout", l->ops->label,
                (unsigned long long)l->id, conn_life_peer(l));
        conn_life_close(l, "slow reader");
    } else if (l->greeting) {
        l->ops->expired(l, LIFE_EXP_GREETING);
    } else if (l->partial_ms && srv->opt.request_timeout && l->partial_ms + srv->opt.request_timeout <= now) {
        l->ops->expired(l, LIFE_EXP_REQUEST);
    } else if (l->ops->waiting(l) || evbuffer_get_length(l->io.out)) {
        /* Silent but waiting on the server, or still taking output: not idle.  last_rx_ms stays (it
         * dates an incomplete request); the answer that ends the wait moves answer_ms on again. */
        l->answer_ms = now;
        conn_life_arm(l);
    } else {
        l->ops->expired(l, LIFE_EXP_IDLE);
    }
}

/* Output was queued on out: write it soon, and stop reading a client whose output passed --max-output. */
void conn_life_sent(struct conn_life *l, struct evbuffer *out)
{
    struct server *srv = l->io.srv;
    /* Inside the read callback the request was just timed (last_rx_ms); only output queued from elsewhere
     * (a woken wait, an event) needs the clock read here, which keeps it off the request/reply path. */
    if (!l->io.busy)
        l->answer_ms = clock_now_ms();
    conn_io_kick(&l->io);
    if (l->paused || evbuffer_get_length(out) <= srv->opt.max_output)
        return;
    /* Backpressure: a client that does not read its replies stops being read. */
    l->paused = 1;
    l->paused_ms = clock_now_ms();
    conn_io_reading(&l->io, 0);
    stats_inc(&srv->stats, STAT_OUTPUT_PAUSED);
    conn_life_arm(l);
}

/* The input now holds held bytes of an incomplete request: start or stop its --request-timeout. */
void conn_life_note_partial(struct conn_life *l, size_t held)
{
    uint64_t partial = conn_io_partial_since(l->partial_ms, l->last_rx_ms, held);
    if (partial != l->partial_ms && conn_life_live(l)) {
        l->partial_ms = partial;
        conn_life_arm(l);
    }
}

/* Stop taking requests, flush what is queued, then linger and close. */
void conn_life_finish(struct conn_life *l)
{
    if (!conn_life_live(l))
        return;
    conn_life_set_state(l, LIFE_FLUSHING);
    /* Replies held for changes that can never be durable never go out: drop them, so the close does not
     * wait out --drain-timeout for them, and the client learns at once that those requests failed. */
    if (persist_held_for_good(l->io.srv, &l->io.hold))
        persist_hold_drop(l->io.srv, &l->io.hold);
    conn_io_reading(&l->io, 1); /* input is discarded from now on, and the peer's close is seen */
    conn_io_finish(&l->io);
    conn_life_arm(l);
}

/* Close at once: stop every callback; the release hook runs on a later loop turn. */
void conn_life_close(struct conn_life *l, const char *why)
{
    if (l->state == LIFE_DEAD)
        return;
    if (log_enabled(LOG_DEBUG))
        log_msg(LOG_DEBUG, "%s %llu %s: closed: %s", l->ops->label, (unsigned long long)l->id, conn_life_peer(l),
                why);
    conn_life_set_state(l, LIFE_DEAD);
    conn_io_stop(&l->io);
    event_active(l->timer, EV_TIMEOUT, 0);
}

/* The connection whose I/O io is. */
struct conn_life *conn_life_of(struct conn_io *io)
{
    return (struct conn_life *)((char *)io - offsetof(struct conn_life, io));
}

/* Output was written out (or nothing was queued): finish a close, or resume a paused reader. */
void conn_life_written(struct conn_io *io)
{
    struct conn_life *l = conn_life_of(io);
    size_t left = evbuffer_get_length(io->out);
    if (l->state == LIFE_FLUSHING && left == 0 && !persist_holding(&io->hold)) {
        conn_io_shutdown(io);
        conn_life_set_state(l, LIFE_LINGER);
        conn_io_want(io, 1);
        conn_life_arm(l);
    } else if (l->paused && conn_life_live(l) && left <= io->srv->opt.max_output / 2) {
        l->paused = 0;
        conn_io_reading(io, 1);
        conn_life_arm(l);
        conn_io_again(io);
    }
}

/* The peer's address as text ("1.2.3.4:5" or "[::1]:5"), formatted on first use. */
const char *conn_life_peer(struct conn_life *l)
{
    char host[INET6_ADDRSTRLEN] = "?";
    const struct sockaddr *sa = (const struct sockaddr *)&l->addr;
    if (l->peer[0])
        return l->peer;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        snprintf(l->peer, sizeof l->peer, "%s:%u", host, ntohs(in->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        snprintf(l->peer, sizeof l->peer, "[%s]:%u", host, ntohs(in6->sin6_port));
    } else {
        snprintf(l->peer, sizeof l->peer, "?");
    }
    return l->peer;
}
