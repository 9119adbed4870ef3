/*
 * Hello: the first frame of a native connection names its protocol
 * version, namespace and token; the answer is HelloReply with the limits,
 * or an error frame and the close.
 *
 * Guessing tokens is slowed per source address (source.c): after a wrong
 * token, the address's next token is compared only once its wait is over
 * (--auth-backoff, doubling per failure up to --auth-backoff-max).  A hello
 * that comes during the wait is held, not refused: its connection reads
 * nothing more until the wait ends, then its token is compared.  So the
 * right token behind a guessing address gets in, only later, and a client
 * that does not retry is not turned away.  Held hellos of one address are
 * compared one per wait, a wrong one doubling it, so opening many
 * connections does not buy more guesses.  A hello whose wait would outlast
 * its --hello-timeout is answered LIMIT with the wait instead (libmuster
 * retries LIMIT within its connect deadline).  Only namespaces with a
 * token are held back: an address's open namespaces keep working.
 */
#include "hello.h"

#include <event2/event.h>
#include <stdio.h>
#include <string.h>

#include <muster/muster.h>

#include "clock.h"
#include "conn.h"
#include "log.h"
#include "ns.h"
#include "server.h"
#include "source.h"

static int hello_run(struct conn *c, const Muster__Hello *h);

/* The held hello's wait is over: run it again, then handle what its client sent behind it. */
static void hello_held_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn *c = arg;
    Muster__ClientFrame *f = c->held;
    c->held = NULL;
    if (!f)
        return;
    if (conn_live(c) && hello_run(c, f->hello) == HELLO_HELD) {
        c->held = f;
        return;
    }
    muster__client_frame__free_unpacked(f, NULL);
    if (conn_live(c))
        conn_io_again(&c->life.io);
}

/* Hold c's hello for wait ms; 0, or -1 when the wait would outlast its hello deadline (or no timer). */
static int hello_hold(struct conn *c, uint64_t wait)
{
    uint64_t at = clock_now_ms() + wait;
    if (c->life.greeting && c->life.greet_ms && at >= c->life.greet_ms)
        return -1;
    if (!c->held_ev && !(c->held_ev = evtimer_new(c->srv->base, hello_held_cb, c)))
        return -1;
    clock_timer_at(c->held_ev, at);
    return 0;
}

/* Check a hello's token for namespace name: HELLO_DONE when it may go on, HELLO_HELD, or HELLO_REFUSED
 * after refusing the hello. */
static int hello_token(struct conn *c, const char *name, const char *token)
{
    struct server *srv = c->srv;
    const struct sockaddr *sa = (const struct sockaddr *)&c->life.addr;
    if (!ns_configured(srv, name))
        return HELLO_DONE;
    uint64_t wait = source_hello_wait(srv, sa);
    if (wait) {
        stats_inc(&srv->stats, STAT_AUTH_THROTTLED);
        if (hello_hold(c, wait) == 0)
            return HELLO_HELD;
        conn_fail(c, MUSTER__STATUS__LIMIT, "too many failed hellos from this address: retry in %llu ms",
                  (unsigned long long)wait);
        return HELLO_REFUSED;
    }
    int ok = ns_token_ok(srv, name, token);
    source_hello_checked(srv, sa, ok);
    if (ok)
        return HELLO_DONE;
    stats_inc(&srv->stats, STAT_AUTH_FAILED);
    if (!token || !*token)
        conn_fail(c, MUSTER__STATUS__UNAUTHENTICATED,
                  "namespace '%s' needs a token and none was given (add ?token=T to the store URL)", name);
    else
        conn_fail(c, MUSTER__STATUS__UNAUTHENTICATED, "wrong token for namespace '%s'", name);
    return HELLO_REFUSED;
}

/* Answer a hello that opened ns: HelloReply with the limits. */
static void hello_reply(struct conn *c, struct ns *ns, const Muster__Hello *h)
{
    struct server *srv = c->srv;
    const struct options *o = &srv->opt;
    c->ns = ns;
    ns_conn_joined(ns);
    snprintf(c->name, sizeof c->name, "%s", h->client_name ? h->client_name : "");
    /* A credential longer than any the daemon makes matches none: it is kept cut, and refused later. */
    snprintf(c->cred, sizeof c->cred, "%s", h->credential ? h->credential : "");
    c->follow_gen = h->generation;
    conn_life_greeted(&c->life);
    stats_inc(&srv->stats, STAT_HELLO_OK);
    if (log_enabled(LOG_DEBUG))
        log_msg(LOG_DEBUG, "conn %llu %s: hello ns '%s' client '%s'", (unsigned long long)c->life.id, conn_peer(c),
                ns->name, c->name);
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
    r.session_id = c->life.id;
    Muster__ServerFrame f = MUSTER__SERVER_FRAME__INIT;
    f.frame_case = MUSTER__SERVER_FRAME__FRAME_HELLO_REPLY;
    f.hello_reply = &r;
    conn_send(c, &f);
}

/* Handle Hello: version, namespace, token; HELLO_HELD when it waits out its address's backoff. */
static int hello_run(struct conn *c, const Muster__Hello *h)
{
    struct server *srv = c->srv;
    const char *name = h->namespace_ && *h->namespace_ ? h->namespace_ : "default";
    int st = MUSTER__STATUS__INTERNAL, tok;
    struct ns *ns = NULL;
    char why[192];
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
    } else if (srv->opt.closed_namespaces && !ns_configured(srv, name)) {
        stats_inc(&srv->stats, STAT_NS_REFUSED);
        conn_fail(c, MUSTER__STATUS__UNAUTHENTICATED, "namespace '%s' is not configured on this server", name);
    } else if ((tok = hello_token(c, name, h->token)) != HELLO_DONE) {
        return tok;
    } else if (!(ns = ns_open(srv, name, (const struct sockaddr *)&c->life.addr, &st, why, sizeof why))) {
        conn_fail(c, st, "cannot open namespace '%s'%s%s", name, why[0] ? ": " : "", why);
    } else {
        hello_reply(c, ns, h);
    }
    return HELLO_DONE;
}

/* Handle the hello frame f: HELLO_HELD when c keeps f until its address's wait is over (its input
 * waits too), else HELLO_DONE (answered, f still the caller's). */
int hello_handle(struct conn *c, Muster__ClientFrame *f)
{
    if (hello_run(c, f->hello) != HELLO_HELD)
        return HELLO_DONE;
    c->held = f;
    return HELLO_HELD;
}

/* A connection closed: drop its held hello and the hello's timer. */
void hello_conn_closed(struct conn *c)
{
    if (c->held_ev)
        event_free(c->held_ev);
    c->held_ev = NULL;
    if (c->held)
        muster__client_frame__free_unpacked(c->held, NULL);
    c->held = NULL;
}
