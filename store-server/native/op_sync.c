/*
 * The native protocol's barrier op.  The barrier itself (rounds, counts,
 * deadlines) is core/barrier.c; this file turns a request into an arrival
 * owned by the connection, and the arrival's end into the reply.
 */
#include "op_sync.h"

#include <stdio.h>
#include <string.h>

#include "barrier.h"
#include "conn.h"
#include "core.h"
#include "server.h"

/* Append to buf (len bytes, NUL-terminated) the client names of the arrivals of a's round other than a,
 * at most 8, so a timeout says who did arrive ("rank 3", set by the hello's client_name). */
static void op_sync_arrived(const struct barrier_arrival *a, char *buf, size_t len)
{
    size_t off = strlen(buf);
    int shown = 0, more = 0;
    for (const struct barrier_arrival *o = barrier_arrivals(a->b); o; o = o->next) {
        if (o == a)
            continue;
        const struct conn *c = o->owner;
        if (shown == 8) {
            more++;
            continue;
        }
        off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s'%.40s'", shown ? ", " : "; arrived: ",
                                c->name[0] ? c->name : "(unnamed)");
        shown++;
    }
    if (more)
        snprintf(buf + off, off < len ? len - off : 0, " and %d more", more);
}

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
        char who[512] = "";
        const char *name = barrier_name(a->b, &count, &arrived);
        op_sync_arrived(a, who, sizeof who);
        conn_replyf(c, a->id, status,
                    "barrier '%.200s' round %llu timed out after %u ms with %u of %u arrivals (%u missing)%s", name,
                    (unsigned long long)round, a->timeout_ms, arrived, count, count - arrived, who);
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
