/*
 * Parked TCPStore callers, and queues.
 *
 * A WAIT whose keys are not all present parks a core waiter (waiters.c) on
 * them, so a set from any client, native or TCPStore, releases it.
 * TCPStore servers never time a wait out (the client does, and sends
 * CANCEL_WAIT), so the core waiter's deadline is the longest one it takes.
 *
 * Queues are the core's (queues.c), shared with native clients and so with
 * the relay of `muster run`: a key can hold a value and a queue, CHECK and
 * WAIT count a non-empty queue as present (a queue-aware waiter,
 * waiters_park_queued), and a push releases only the oldest parked WAIT it
 * completes (a blocking pop is WAIT then QUEUE_POP, so releasing every
 * waiter would hand one value to several poppers).
 *
 * BARRIER counts arrivals in the decimal text of the key itself and parks
 * a counting core waiter (waiters_park_count) until that count reaches the
 * caller's world size, whoever wrote it: a native `muster add` counts as an
 * arrival too.  So every TCPStore park is a core waiter, like a native one:
 * the same budget, deadline, drain and wake.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "muster.pb-c.h"
#include "ns.h"
#include "queues.h"
#include "server.h"
#include "tcpstore_int.h"
#include "waiters.h"

/* The core waiter's deadline: TCPStore waits end by a set or a cancel, not on the server's clock. */
#define TSPARK_FOREVER_MS UINT32_MAX

static void tspark_waiter_done(struct waiter *w, int status);

/* Whether key holds a value or a non-empty queue. */
int tspark_present(struct tcpstore *ts, const char *key, size_t klen)
{
    return waiters_present(ts->ns, key, klen, 0);
}

/* Free a park (cancelling its core waiter); its connection no longer has one. */
static void tspark_free(struct ts_park *p)
{
    if (p->w)
        waiters_cancel(p->w);
    p->c->park = NULL;
    free(p);
}

/* The core waiter ended: OK answers STOP_WAITING and lets the connection go on; shutdown (or the far
 * deadline) closes the connection, since TCPStore has no way to say why. */
static void tspark_waiter_done(struct waiter *w, int status)
{
    struct ts_park *p = w->owner;
    struct ts_conn *c = p->c;
    p->w = NULL; /* the core frees it after this returns */
    tspark_free(p);
    if (status != MUSTER__STATUS__OK) {
        tcpstore_finish(c);
        return;
    }
    tscodec_put_u8(&c->sink, TS_STOP_WAITING);
    tcpstore_resume(c);
}

/* Park c until w's condition holds (w made by park, with p as its owner); 0, or -1 at a limit. */
static int tspark_park(struct ts_conn *c, struct ts_park *p)
{
    p->c = c;
    c->park = p;
    return p->w ? 0 : -1;
}

/* WAIT: answer STOP_WAITING now when every key is present, else park c. */
void tspark_wait(struct ts_conn *c, struct ts_req *r)
{
    size_t i = 0;
    int st;
    while (i < r->n && tspark_present(c->ts, r->keys[i], r->klens[i]))
        i++;
    if (i == r->n) {
        tscodec_put_u8(&c->sink, TS_STOP_WAITING);
        return;
    }
    struct ts_park *p = calloc(1, sizeof *p);
    if (!p) {
        tcpstore_close(c, "out of memory");
        return;
    }
    p->w = waiters_park_queued(c->ts->ns, (const char *const *)r->keys, r->klens, r->n, 0, TSPARK_FOREVER_MS,
                               tspark_waiter_done, p, &c->share, c->life.id, 0, &st);
    if (tspark_park(c, p) != 0) {
        tspark_free(p);
        tcpstore_fail(c, STAT_TS_LIMIT_STORE, "cannot park a wait (--max-waiters or memory)");
    }
}

/* QUEUE_PUSH: append a value (taken) and wake one parked WAIT on the key; 0, or -1 over the limits. */
int tspark_queue_push(struct ts_conn *c, const char *key, size_t klen, uint8_t *val, size_t vlen)
{
    uint64_t len;
    return queues_push(c->ts->ns, key, klen, val, vlen, &len) == MUSTER__STATUS__OK ? 0 : -1;
}

/* QUEUE_POP: answer the length before the pop, then the value when there was one. */
void tspark_queue_pop(struct ts_conn *c, const char *key, size_t klen)
{
    uint64_t before;
    uint8_t *val;
    size_t vlen;
    queues_pop(c->ts->ns, key, klen, &before, &val, &vlen);
    tscodec_put_i64(&c->sink, (int64_t)before);
    if (before)
        tscodec_put_blob(&c->sink, val, vlen);
    free(val);
}

/* The length of the queue at key. */
size_t tspark_queue_len(struct tcpstore *ts, const char *key, size_t klen)
{
    return (size_t)queues_len(ts->ns, key, klen);
}

/* BARRIER: count the arrival at key; answer or park c. */
void tspark_barrier(struct ts_conn *c, const char *key, size_t klen, int64_t world_size)
{
    int64_t count = 0;
    int st = ks_add(&c->ts->ns->ks, key, klen, 1, &count);
    if (st != MUSTER__STATUS__OK) {
        tcpstore_fail(c, STAT_TS_BAD_REQUEST, "barrier '%.200s': the key does not hold a count (status %d)", key, st);
        return;
    }
    if (count >= world_size) {
        tscodec_put_u8(&c->sink, TS_STOP_WAITING);
        return;
    }
    struct ts_park *p = calloc(1, sizeof *p);
    if (p)
        p->w = waiters_park_count(c->ts->ns, key, klen, world_size, TSPARK_FOREVER_MS, tspark_waiter_done, p,
                                  &c->share, c->life.id, 0, &st);
    if (!p || tspark_park(c, p) != 0) {
        if (p)
            tspark_free(p);
        tcpstore_fail(c, STAT_TS_LIMIT_STORE, "cannot park a barrier (--max-waiters or memory)");
    }
}

/* CANCEL_WAIT: drop c's parked request and answer WAIT_CANCELED. */
void tspark_cancel_wait(struct ts_conn *c)
{
    if (c->park) {
        stats_inc(&c->ts->srv->stats, STAT_TS_WAITS_CANCELED);
        tspark_free(c->park);
    }
    tscodec_put_u8(&c->sink, TS_WAIT_CANCELED);
}

/* Drop c's parked request without an answer (its connection closes or gave up). */
void tspark_abandon(struct ts_conn *c)
{
    if (c->park) {
        stats_inc(&c->ts->srv->stats, STAT_TS_WAITS_ABANDONED);
        tspark_free(c->park);
    }
}
