/*
 * Parked TCPStore callers, and queues.
 *
 * A WAIT whose keys are not all present parks a core waiter (waiters.c) on
 * the missing ones, so a set from any client, native or TCPStore, releases
 * it.  TCPStore servers never time a wait out (the client does, and sends
 * CANCEL_WAIT), so the core waiter's deadline is the longest one it takes.
 *
 * Queues live beside the key-value map, as in the libuv server: a key can
 * hold a value and a queue, CHECK and WAIT count a non-empty queue as
 * present, and a push wakes only the first parked WAIT it completes (a
 * blocking pop is WAIT then QUEUE_POP, so waking every waiter would hand
 * one value to several poppers).  For that each WAIT is also linked, per
 * missing key, into that key's queue entry.
 *
 * BARRIER counts arrivals in the decimal text of the key itself and parks
 * a counting core waiter (waiters_park_count) until that count reaches the
 * caller's world size, whoever wrote it: a native `muster add` counts as an
 * arrival too.  So every TCPStore park is a core waiter, like a native one:
 * the same budget, deadline, drain and wake.
 */
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#include "log.h"
#include "muster.pb-c.h"
#include "ns.h"
#include "server.h"
#include "tcpstore_int.h"
#include "waiters.h"

/* The core waiter's deadline: TCPStore waits end by a set or a cancel, not on the server's clock. */
#define TSPARK_FOREVER_MS UINT32_MAX

static void tspark_waiter_done(struct waiter *w, int status);
static int tspark_bar_park(struct ts_conn *c, const char *key, size_t klen, int64_t world_size);

/* The queue entry of key, created when asked and absent; NULL when absent or out of memory. */
static struct tsq *tspark_q(struct tcpstore *ts, const char *key, size_t klen, int create)
{
    struct tsq *q = NULL;
    HASH_FIND(hh, ts->queues, key, klen, q);
    if (q || !create)
        return q;
    if (!(q = calloc(1, sizeof *q + klen + 1)))
        return NULL;
    memcpy(q->key, key, klen);
    q->klen = klen;
    HASH_ADD_KEYPTR(hh, ts->queues, q->key, klen, q);
    return q;
}

/* Drop a queue entry that holds neither values nor parked WAITs. */
static void tspark_q_trim(struct tcpstore *ts, struct tsq *q)
{
    if (q->len == 0 && !q->whead) {
        HASH_DEL(ts->queues, q);
        free(q);
    }
}

/* Whether key holds a value or a non-empty queue. */
int tspark_present(struct tcpstore *ts, const char *key, size_t klen)
{
    if (ks_get(&ts->ns->ks, key, klen))
        return 1;
    struct tsq *q = tspark_q(ts, key, klen, 0);
    return q && q->len > 0;
}

/* Keys of a parked WAIT that are absent now. */
static size_t tspark_missing(const struct ts_park *p)
{
    size_t m = 0;
    for (size_t i = 0; i < p->n; i++)
        m += !tspark_present(p->c->ts, p->keys[i], p->klens[i]);
    return m;
}

/* Park a core waiter on the keys of p that are absent now; 0, or -1 at a limit. */
static int tspark_core(struct ts_park *p)
{
    struct ts_conn *c = p->c;
    const char **mk = calloc(p->n, sizeof *mk);
    size_t *ml = calloc(p->n, sizeof *ml), m = 0;
    int st = MUSTER__STATUS__INTERNAL;
    if (mk && ml) {
        for (size_t i = 0; i < p->n; i++)
            if (!tspark_present(c->ts, p->keys[i], p->klens[i])) {
                mk[m] = p->keys[i];
                ml[m++] = p->klens[i];
            }
        p->w = waiters_park(c->ts->ns, mk, ml, m, TSPARK_FOREVER_MS, tspark_waiter_done, p, &c->share, c->life.id, 0,
                            &st);
    }
    free(mk);
    free(ml);
    return p->w ? 0 : -1;
}

/* Link p into the queue entry of each of its absent keys; 0, or -1 when out of memory. */
static int tspark_link(struct ts_park *p)
{
    struct tcpstore *ts = p->c->ts;
    if (!(p->qlinks = calloc(p->n, sizeof *p->qlinks)))
        return -1;
    for (size_t i = 0; i < p->n; i++) {
        if (tspark_present(ts, p->keys[i], p->klens[i]))
            continue;
        struct tsq *q = tspark_q(ts, p->keys[i], p->klens[i], 1);
        if (!q)
            return -1;
        struct ts_qlink *l = &p->qlinks[i];
        l->p = p;
        l->q = q;
        DL_APPEND(q->whead, l);
    }
    return 0;
}

/* Take p out of every queue entry it is linked into. */
static void tspark_unlink(struct ts_park *p)
{
    for (size_t i = 0; p->qlinks && i < p->n; i++) {
        struct ts_qlink *l = &p->qlinks[i];
        struct tsq *q = l->q;
        if (!q)
            continue;
        DL_DELETE(q->whead, l);
        l->q = NULL;
        tspark_q_trim(p->c->ts, q);
    }
}

/* Free a park and everything it holds; its connection no longer has one. */
static void tspark_free(struct ts_park *p)
{
    if (p->w)
        waiters_cancel(p->w);
    tspark_unlink(p);
    for (size_t i = 0; i < p->n; i++)
        free(p->keys[i]);
    free(p->keys);
    free(p->klens);
    free(p->qlinks);
    p->c->park = NULL;
    free(p);
}

/* The park's condition holds: answer STOP_WAITING and let the connection go on. */
static void tspark_release(struct ts_park *p)
{
    struct ts_conn *c = p->c;
    tspark_free(p);
    tscodec_put_u8(&c->sink, TS_STOP_WAITING);
    tcpstore_resume(c);
}

/* The core waiter ended: OK releases the WAIT; shutdown (or the far deadline) closes the
 * connection, since TCPStore has no way to say why. */
static void tspark_waiter_done(struct waiter *w, int status)
{
    struct ts_park *p = w->owner;
    struct ts_conn *c = p->c;
    p->w = NULL; /* the core frees it after this returns */
    if (status == MUSTER__STATUS__OK) {
        tspark_release(p);
        return;
    }
    tspark_free(p);
    tcpstore_finish(c);
}

/* WAIT: answer STOP_WAITING now when every key is present, else park c (taking r's key list). */
void tspark_wait(struct ts_conn *c, struct ts_req *r)
{
    size_t i = 0;
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
    p->c = c;
    p->keys = r->keys;
    p->klens = r->klens;
    p->n = r->n;
    r->keys = NULL;
    r->klens = NULL;
    r->n = 0;
    c->park = p;
    /* Old clients have no queues: their waits need no queue links. */
    if ((c->era == TS_ERA_VALIDATE && tspark_link(p) != 0) || tspark_core(p) != 0) {
        tspark_free(p);
        tcpstore_fail(c, STAT_TS_LIMIT_STORE, "cannot park a wait (--max-waiters or memory)");
    }
}

/* Re-park the core waiter of p on what is absent now (a queue push satisfied one of its keys). */
static void tspark_rewait(struct ts_park *p)
{
    if (p->w) {
        waiters_cancel(p->w);
        p->w = NULL;
    }
    if (tspark_core(p) != 0) {
        struct ts_conn *c = p->c;
        tspark_free(p);
        tcpstore_fail(c, STAT_TS_LIMIT_STORE, "cannot park a wait (--max-waiters or memory)");
    }
}

/* A push to q: release the first parked WAIT it completes; re-park the others it helped. */
static void tspark_wake_one(struct tsq *q)
{
    for (struct ts_qlink *l = q->whead, *next; l; l = next) {
        next = l->next;
        if (tspark_missing(l->p) == 0) {
            tspark_release(l->p);
            return;
        }
        tspark_rewait(l->p);
    }
}

/* QUEUE_PUSH: append a value (taken) and wake one parked WAIT on the key; 0, or -1 over the limits. */
int tspark_queue_push(struct ts_conn *c, const char *key, size_t klen, uint8_t *val, size_t vlen)
{
    struct tcpstore *ts = c->ts;
    const struct options *o = &ts->srv->opt;
    struct ts_qitem *it = NULL;
    struct tsq *q = NULL;
    /* Queued values are bounded like a namespace's keys and bytes. */
    if (ts->queue_items >= o->max_keys_per_ns || ts->queue_bytes + vlen > o->max_bytes_per_ns ||
        !(it = calloc(1, sizeof *it)) || !(q = tspark_q(ts, key, klen, 1))) {
        free(it);
        free(val);
        return -1;
    }
    it->data = val;
    it->len = vlen;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->len++;
    ts->queue_items++;
    ts->queue_bytes += vlen;
    tspark_wake_one(q);
    return 0;
}

/* QUEUE_POP: answer the length before the pop, then the value when there was one. */
void tspark_queue_pop(struct ts_conn *c, const char *key, size_t klen)
{
    struct tcpstore *ts = c->ts;
    struct tsq *q = tspark_q(ts, key, klen, 0);
    size_t len = q ? q->len : 0;
    tscodec_put_i64(&c->sink, (int64_t)len);
    if (!len)
        return;
    struct ts_qitem *it = q->head;
    q->head = it->next;
    if (!q->head)
        q->tail = NULL;
    q->len--;
    ts->queue_items--;
    ts->queue_bytes -= it->len;
    tscodec_put_blob(&c->sink, it->data, it->len);
    free(it->data);
    free(it);
    tspark_q_trim(ts, q);
}

/* The length of the queue at key. */
size_t tspark_queue_len(struct tcpstore *ts, const char *key, size_t klen)
{
    struct tsq *q = tspark_q(ts, key, klen, 0);
    return q ? q->len : 0;
}

/* BARRIER: count the arrival at key; answer or park c. */
void tspark_barrier(struct ts_conn *c, const char *key, size_t klen, int64_t world_size)
{
    int64_t count = 0;
    /* The add runs the change hook, which releases earlier callers now satisfied. */
    int st = ks_add(&c->ts->ns->ks, key, klen, 1, &count);
    if (st != MUSTER__STATUS__OK)
        tcpstore_fail(c, STAT_TS_BAD_REQUEST, "barrier '%.200s': the key does not hold a count (status %d)", key, st);
    else if (count >= world_size)
        tscodec_put_u8(&c->sink, TS_STOP_WAITING);
    else if (tspark_bar_park(c, key, klen, world_size) != 0)
        tcpstore_fail(c, STAT_TS_LIMIT_STORE, "cannot park a barrier (--max-waiters or memory)");
}

/* Park c as a BARRIER caller until key's count reaches world_size; 0, or -1 at a limit or out of memory. */
static int tspark_bar_park(struct ts_conn *c, const char *key, size_t klen, int64_t world_size)
{
    int st;
    struct ts_park *p = calloc(1, sizeof *p);
    if (!p)
        return -1;
    p->c = c;
    p->w = waiters_park_count(c->ts->ns, key, klen, world_size, TSPARK_FOREVER_MS, tspark_waiter_done, p, &c->share,
                              c->life.id, 0, &st);
    if (!p->w) {
        free(p);
        return -1;
    }
    c->park = p;
    return 0;
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

/* Free every queue (at exit; parked callers are gone by then). */
void tspark_fini(struct tcpstore *ts)
{
    struct tsq *q, *qt;
    HASH_ITER(hh, ts->queues, q, qt) {
        while (q->head) {
            struct ts_qitem *it = q->head;
            q->head = it->next;
            free(it->data);
            free(it);
        }
        HASH_DEL(ts->queues, q);
        free(q);
    }
}
