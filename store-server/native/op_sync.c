/*
 * The native protocol's barrier op.  The barrier itself (rounds, counts,
 * deadlines) is core/barrier.c; this file turns a request into an arrival
 * owned by the connection, and the arrival's end into the reply.
 */
#include "op_sync.h"

#include <string.h>

#include "barrier.h"
#include "conn.h"
#include "core.h"
#include "server.h"

/* A native arrival's end: answer its request. */
static void op_sync_barrier_done(struct barrier_arrival *a, int status, uint64_t round, uint32_t arrival)
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
        uint32_t count, arrived;
        const char *name = barrier_name(a->b, &count, &arrived);
        conn_replyf(c, a->id, status, "barrier '%.200s' round %llu timed out after %u ms with %u of %u arrivals",
                    name, (unsigned long long)round, a->timeout_ms, arrived, count);
    } else {
        conn_reply(c, a->id, status, "server is shutting down", NULL);
    }
}

/* The connection went away: its arrival leaves the round. */
static void op_sync_barrier_cancel(void *arg)
{
    barrier_cancel(arg);
}

/* The barrier op of the native protocol (an op table row). */
void op_sync_barrier(struct conn *c, Muster__Request *req)
{
    Muster__BarrierReq *q = req->barrier;
    struct barrier_arrival *a = NULL;
    const char *why = NULL;
    uint32_t t = core_timeout(&c->srv->core, q->timeout_ms);
    int st = barrier_arrive(c->ns, q->name, strlen(q->name), q->count, t, q->fetch, op_sync_barrier_done, c, &c->share,
                            req->id, &a, &why);
    if (st != MUSTER__STATUS__OK) {
        if (st == MUSTER__STATUS__BAD_REQUEST)
            stats_inc(&c->srv->stats, STAT_BAD_REQUEST);
        conn_replyf(c, req->id, st, "barrier '%.200s': %s", q->name, why);
    } else if (a && conn_pending_add(c, req->id, op_sync_barrier_cancel, a) != 0) {
        barrier_cancel(a);
        conn_reply(c, req->id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
    }
}
