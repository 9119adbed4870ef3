/*
 * Barriers: per namespace, per name, a current round number (from 1), the
 * round's expected count and its parked arrivals.  The count-th arrival
 * releases every arrival of the round with the round number; the next
 * arrival opens the following round, so a name is reusable.  An arrival
 * may ask for a key's value at release (fetch), answered with the round.  A timed-out
 * arrival leaves its round (the others keep waiting for a full count).
 * A barrier's round number must outlive its rounds, so names are kept until
 * exit; their number per namespace is bounded by --max-keys-per-ns.
 */
#include "barrier.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "conn.h"
#include "keyspace.h"
#include "ns.h"
#include "server.h"

struct barrier {
    UT_hash_handle hh;
    struct ns *ns;
    uint64_t round;
    uint32_t count;   /* expected arrivals of the open round; 0 before the first */
    uint32_t arrived;
    struct barrier_arrival *head;
    size_t nlen;
    char name[];
};

/* Unlink arrival a from its barrier, free its timer and slot, and free it. */
static void barrier_free_arrival(struct barrier_arrival *a)
{
    struct barrier *b = a->b;
    if (a->prev)
        a->prev->next = a->next;
    else
        b->head = a->next;
    if (a->next)
        a->next->prev = a->prev;
    if (--b->arrived == 0)
        b->count = 0;
    event_free(a->timer);
    server_waiter_put(b->ns->srv, &b->ns->nwaiters, a->share);
    free(a);
}

/* Call a's done with status, then free it. */
static void barrier_finish(struct barrier_arrival *a, int status, uint64_t round)
{
    a->done(a, status, round, a->arrival);
    barrier_free_arrival(a);
}

/* A parked arrival's deadline passed: it leaves the round. */
static void barrier_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct barrier_arrival *a = arg;
    stats_inc(&a->b->ns->srv->stats, STAT_TIMEOUTS);
    barrier_finish(a, MUSTER__STATUS__TIMEOUT, a->b->round);
}

/* The barrier called name in ns, created when absent; NULL with *st set. */
static struct barrier *barrier_get(struct ns *ns, const char *name, size_t nlen, int *st)
{
    struct barrier *b = NULL;
    HASH_FIND(hh, ns->barriers, name, nlen, b);
    if (b)
        return b;
    /* Barrier names are bounded like keys. */
    if (HASH_COUNT(ns->barriers) >= ns->ks.max_keys) {
        stats_inc(&ns->srv->stats, STAT_LIMIT_KEYS_PER_NS);
        *st = MUSTER__STATUS__LIMIT;
        return NULL;
    }
    if (!(b = calloc(1, sizeof *b + nlen + 1))) {
        *st = MUSTER__STATUS__INTERNAL;
        return NULL;
    }
    memcpy(b->name, name, nlen);
    b->nlen = nlen;
    b->ns = ns;
    b->round = 1;
    HASH_ADD_KEYPTR(hh, ns->barriers, b->name, nlen, b);
    return b;
}

/* Release every arrival of b's round and open the next round. */
static void barrier_release(struct barrier *b)
{
    uint64_t round = b->round++;
    stats_inc(&b->ns->srv->stats, STAT_BARRIER_ROUNDS);
    while (b->head)
        barrier_finish(b->head, MUSTER__STATUS__OK, round);
}

/* Arrive at barrier name of ns; see barrier.h. */
int barrier_arrive(struct ns *ns, const char *name, size_t nlen, uint32_t count, uint32_t timeout_ms, const char *fetch,
                   barrier_done_fn done, void *owner, size_t *share, uint64_t id, struct barrier_arrival **out,
                   const char **why)
{
    size_t flen = fetch ? strlen(fetch) : 0;
    int st = MUSTER__STATUS__OK;
    *out = NULL;
    if (count == 0)
        return *why = "barrier count must be at least 1", MUSTER__STATUS__BAD_REQUEST;
    struct barrier *b = barrier_get(ns, name, nlen, &st);
    if (!b)
        return *why = "cannot create barrier", st;
    if (b->arrived && b->count != count)
        return *why = "count differs from the other arrivals of this round", MUSTER__STATUS__BAD_REQUEST;
    if ((st = server_waiter_take(ns->srv, &ns->nwaiters, share)) != MUSTER__STATUS__OK)
        return *why = server_waiter_why(ns->srv, &ns->nwaiters, share), st;
    struct barrier_arrival *a = calloc(1, sizeof *a + flen + 1);
    if (a && !(a->timer = evtimer_new(ns->srv->base, barrier_timeout_cb, a))) {
        free(a);
        a = NULL;
    }
    if (!a) {
        server_waiter_put(ns->srv, &ns->nwaiters, share);
        return *why = "out of memory", MUSTER__STATUS__INTERNAL;
    }
    if (flen)
        memcpy(a->fetch, fetch, flen);
    a->b = b;
    a->done = done;
    a->owner = owner;
    a->share = share;
    a->id = id;
    a->arrival = ++b->arrived;
    a->timeout_ms = timeout_ms;
    a->next = b->head;
    b->count = count;
    if (b->head)
        b->head->prev = a;
    b->head = a;
    if (b->arrived == count) {
        barrier_release(b);
        return MUSTER__STATUS__OK;
    }
    struct timeval tv = {(time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000};
    evtimer_add(a->timer, &tv);
    *out = a;
    return MUSTER__STATUS__OK;
}

/* Take an arrival out of its round without calling done (its owner went away). */
void barrier_cancel(struct barrier_arrival *a)
{
    barrier_free_arrival(a);
}

/* Complete every parked arrival of ns with status (SHUTTING_DOWN on drain). */
void barrier_fail_all(struct ns *ns, int status)
{
    struct barrier *b, *tmp;
    HASH_ITER(hh, ns->barriers, b, tmp) {
        while (b->head) {
            if (status == MUSTER__STATUS__SHUTTING_DOWN)
                stats_inc(&ns->srv->stats, STAT_SHUTDOWN_ANSWERED);
            barrier_finish(b->head, status, b->round);
        }
    }
}

/* Free every barrier of ns (at exit). */
void barrier_ns_destroy(struct ns *ns)
{
    struct barrier *b, *tmp;
    HASH_ITER(hh, ns->barriers, b, tmp) {
        while (b->head)
            barrier_free_arrival(b->head);
        HASH_DEL(ns->barriers, b);
        free(b);
    }
}

/* A native arrival's end: answer its request. */
static void barrier_op_done(struct barrier_arrival *a, int status, uint64_t round, uint32_t arrival)
{
    struct conn *c = a->owner;
    conn_pending_remove(c, a->id);
    if (status == MUSTER__STATUS__OK) {
        Muster__BarrierRes r = MUSTER__BARRIER_RES__INIT;
        r.round = round;
        r.arrival = arrival;
        /* Read at release, once per arrival: nothing writes between the replies of one round. */
        const struct ks_entry *e = a->fetch[0] ? ks_get(&c->ns->ks, a->fetch, strlen(a->fetch)) : NULL;
        if (e) {
            r.found = 1;
            r.value.data = ks_val(e);
            r.value.len = e->vlen;
        }
        conn_reply(c, a->id, status, NULL, &r.base);
    } else if (status == MUSTER__STATUS__TIMEOUT) {
        conn_replyf(c, a->id, status, "barrier '%.200s' round %llu timed out after %u ms with %u of %u arrivals",
                    a->b->name, (unsigned long long)round, a->timeout_ms, a->b->arrived, a->b->count);
    } else {
        conn_reply(c, a->id, status, "server is shutting down", NULL);
    }
}

/* The connection went away: its arrival leaves the round. */
static void barrier_op_cancel(void *arg)
{
    barrier_cancel(arg);
}

/* The barrier op of the native protocol (an op table row). */
void barrier_op(struct conn *c, Muster__Request *req)
{
    Muster__BarrierReq *q = req->barrier;
    struct barrier_arrival *a = NULL;
    const char *why = NULL;
    uint32_t t = server_timeout(c->srv, q->timeout_ms);
    int st = barrier_arrive(c->ns, q->name, strlen(q->name), q->count, t, q->fetch, barrier_op_done, c, &c->nwaiters,
                            req->id, &a, &why);
    if (st != MUSTER__STATUS__OK) {
        if (st == MUSTER__STATUS__BAD_REQUEST)
            stats_inc(&c->srv->stats, STAT_BAD_REQUEST);
        conn_replyf(c, req->id, st, "barrier '%.200s': %s", q->name, why);
    } else if (a && conn_pending_add(c, req->id, barrier_op_cancel, a) != 0) {
        barrier_cancel(a);
        conn_reply(c, req->id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
    }
}
