/*
 * The TCPStore op table: each op's handler (its name and the grammar of its
 * request are the codec's, proto/tscodec.c, shared with the relay).  Handlers work on the same
 * keyspace as native clients, so a value set here is what `muster get`
 * reads, and an add here counts in the same decimal text as a native add.
 * Replies are untagged: the client knows what to read from what it asked,
 * and set, append, multi_set and queue_push have none at all.  An error has
 * no reply either, so it closes the connection (counted), as torch's own
 * servers do.
 */
#include <uthash.h>

#include "muster.pb-c.h"
#include "ha.h"
#include "rdzv.h"
#include "status.h"
#include "ns.h"
#include "server.h"
#include "tcpstore_int.h"

/* The namespace's keyspace for c. */
static struct keyspace *tsops_ks(struct ts_conn *c)
{
    return &c->ts->ns->ks;
}

/* The first key of a request, as text for the keyspace. */
static const char *tsops_key(const struct ts_req *r)
{
    return (const char *)r->b[0].p;
}

/* Close c after a keyspace write was refused; st is its wire status. */
static void tsops_refused(struct ts_conn *c, const struct ts_req *r, int st)
{
    const char *op = tscodec_name(r->op);
    if (st == MUSTER__STATUS__NOT_A_NUMBER || st == MUSTER__STATUS__OVERFLOW)
        tcpstore_decline(c, STAT_TS_BAD_REQUEST, "%s '%.200s': %s", op, tsops_key(r),
                         st == MUSTER__STATUS__OVERFLOW ? "int64 overflow" : "value is not a decimal integer");
    else
        tcpstore_decline(c, STAT_TS_LIMIT_STORE, "%s '%.200s': refused by the namespace's limits (status %d)", op,
                         tsops_key(r), st);
}

/* VALIDATE: a repeated handshake must still carry the magic; no reply. */
static void tsops_validate(struct ts_conn *c, struct ts_req *r)
{
    if (r->u32 != TS_MAGIC)
        tcpstore_fail(c, STAT_TS_BAD_REQUEST, "bad VALIDATE magic 0x%08x", r->u32);
}

/* SET: store the value (its buffer is handed over, not copied); no reply. */
static void tsops_set(struct ts_conn *c, struct ts_req *r)
{
    uint8_t *val = r->b[1].p;
    r->b[1].p = NULL;
    int st = ks_set(tsops_ks(c), tsops_key(r), r->b[0].len, val, r->b[1].len, 1);
    if (st != MUSTER__STATUS__OK)
        tsops_refused(c, r, st);
}

/* COMPARE_SET: TCPStore's rules (keyspace.c); the reply is the value the caller compares. */
static void tsops_compare_set(struct ts_conn *c, struct ts_req *r)
{
    const struct ks_entry *e = NULL;
    int swapped;
    int st = ks_compare_set(tsops_ks(c), tsops_key(r), r->b[0].len, r->b[1].p, r->b[1].len, r->b[2].p, r->b[2].len,
                            &e, &swapped);
    if (st != MUSTER__STATUS__OK)
        tsops_refused(c, r, st);
    else if (e)
        tscodec_put_blob(&c->sink, ks_val(e), e->vlen);
    else
        tscodec_put_blob(&c->sink, r->b[1].p, r->b[1].len); /* absent key, non-empty expected */
}

/* GET: the value, or an empty one for an absent key (as the libuv server answers). */
static void tsops_get(struct ts_conn *c, struct ts_req *r)
{
    const struct ks_entry *e = ks_get(tsops_ks(c), tsops_key(r), r->b[0].len);
    tscodec_put_blob(&c->sink, e ? ks_val(e) : NULL, e ? e->vlen : 0);
}

/* ADD: int64 kept as decimal text; the reply is the new value. */
static void tsops_add(struct ts_conn *c, struct ts_req *r)
{
    int64_t v = 0;
    int st = ks_add(tsops_ks(c), tsops_key(r), r->b[0].len, r->i64, &v);
    if (st != MUSTER__STATUS__OK)
        tsops_refused(c, r, st);
    else
        tscodec_put_i64(&c->sink, v);
}

/* CHECK: READY (0) only when every key holds a value or a non-empty queue. */
static void tsops_check(struct ts_conn *c, struct ts_req *r)
{
    size_t i = 0;
    while (i < r->n && tspark_present(c->ts, r->keys[i], r->klens[i]))
        i++;
    tscodec_put_u8(&c->sink, i == r->n ? TS_READY : TS_NOT_READY);
}

/* WAIT: STOP_WAITING once every key is present (parked meanwhile). */
static void tsops_wait(struct ts_conn *c, struct ts_req *r)
{
    tspark_wait(c, r);
}

/* GETNUMKEYS: keys in the namespace (native ones too; queues are not keys). */
static void tsops_num_keys(struct ts_conn *c, struct ts_req *r)
{
    (void)r;
    tscodec_put_i64(&c->sink, (int64_t)ks_count(tsops_ks(c)));
}

/* DELETE_KEY: 1 when the key existed, else 0. */
static void tsops_delete(struct ts_conn *c, struct ts_req *r)
{
    tscodec_put_i64(&c->sink, ks_delete(tsops_ks(c), tsops_key(r), r->b[0].len));
}

/* APPEND: extend or create; no reply. */
static void tsops_append(struct ts_conn *c, struct ts_req *r)
{
    size_t len;
    int st = ks_append(tsops_ks(c), tsops_key(r), r->b[0].len, r->b[1].p, r->b[1].len, &len);
    if (st != MUSTER__STATUS__OK)
        tsops_refused(c, r, st);
}

/* MULTI_GET: every value back to back, empty for absent keys, no count. */
static void tsops_multi_get(struct ts_conn *c, struct ts_req *r)
{
    for (size_t i = 0; i < r->n && tcpstore_live(c); i++) {
        const struct ks_entry *e = ks_get(tsops_ks(c), r->keys[i], r->klens[i]);
        tscodec_put_blob(&c->sink, e ? ks_val(e) : NULL, e ? e->vlen : 0);
    }
}

/* MULTI_SET: every pair in order (values handed over); no reply. */
static void tsops_multi_set(struct ts_conn *c, struct ts_req *r)
{
    for (size_t i = 0; i < r->n; i++) {
        uint8_t *val = r->vals[i];
        r->vals[i] = NULL;
        int st = ks_set(tsops_ks(c), r->keys[i], r->klens[i], val, r->vlens[i], 1);
        if (st != MUSTER__STATUS__OK) {
            tcpstore_fail(c, STAT_TS_LIMIT_STORE, "multi_set '%.200s': refused by the namespace's limits (status %d)",
                          r->keys[i], st);
            return;
        }
    }
}

/* CANCEL_WAIT: always answered WAIT_CANCELED, after any STOP_WAITING already queued. */
static void tsops_cancel_wait(struct ts_conn *c, struct ts_req *r)
{
    (void)r;
    tspark_cancel_wait(c);
}

/* PING: echo the nonce. */
static void tsops_ping(struct ts_conn *c, struct ts_req *r)
{
    tscodec_put_u32(&c->sink, r->u32);
}

/* QUEUE_PUSH: append to the key's queue, waking one parked WAIT; no reply. */
static void tsops_queue_push(struct ts_conn *c, struct ts_req *r)
{
    uint8_t *val = r->b[1].p;
    r->b[1].p = NULL;
    if (tspark_queue_push(c, tsops_key(r), r->b[0].len, val, r->b[1].len) != 0)
        tcpstore_fail(c, STAT_TS_LIMIT_STORE, "queue_push '%.200s': queues are full", tsops_key(r));
}

/* QUEUE_POP: the length before the pop, then the value when there was one. */
static void tsops_queue_pop(struct ts_conn *c, struct ts_req *r)
{
    tspark_queue_pop(c, tsops_key(r), r->b[0].len);
}

/* QUEUE_LEN: the queue's length. */
static void tsops_queue_len(struct ts_conn *c, struct ts_req *r)
{
    tscodec_put_i64(&c->sink, (int64_t)tspark_queue_len(c->ts, tsops_key(r), r->b[0].len));
}

/* ks_each callback of LIST_KEYS: send one key. */
static int tsops_list_one(void *arg, const struct ks_entry *e)
{
    tscodec_put_blob(arg, e->key, e->klen);
    return 0;
}

/* LIST_KEYS: the count, then every key of the namespace (hash order). */
static void tsops_list_keys(struct ts_conn *c, struct ts_req *r)
{
    (void)r;
    struct keyspace *ks = tsops_ks(c);
    tscodec_put_i64(&c->sink, (int64_t)ks_count(ks));
    ks_each(ks, tsops_list_one, &c->sink);
}

/* BARRIER: count the arrival in the key; STOP_WAITING once the count reaches world_size. */
static void tsops_barrier(struct ts_conn *c, struct ts_req *r)
{
    tspark_barrier(c, tsops_key(r), r->b[0].len, r->i64);
}

/* WATCH_KEY (old numbering): watch the key on this connection; KEY_CALLBACK_REGISTERED, then callbacks. */
static void tsops_watch_key(struct ts_conn *c, struct ts_req *r)
{
    tswatch_register(c, tsops_key(r), r->b[0].len);
}

/* A handler of one decoded request. */
typedef void (*tsops_fn)(struct ts_conn *c, struct ts_req *r);

/* The handlers, by op.  An op without one is an op this server does not serve. */
static const tsops_fn tsops_handlers[TS_NOPS] = {
    [TS_VALIDATE] = tsops_validate,
    [TS_SET] = tsops_set,
    [TS_COMPARE_SET] = tsops_compare_set,
    [TS_GET] = tsops_get,
    [TS_ADD] = tsops_add,
    [TS_CHECK] = tsops_check,
    [TS_WAIT] = tsops_wait,
    [TS_GETNUMKEYS] = tsops_num_keys,
    [TS_DELETE_KEY] = tsops_delete,
    [TS_APPEND] = tsops_append,
    [TS_MULTI_GET] = tsops_multi_get,
    [TS_MULTI_SET] = tsops_multi_set,
    [TS_CANCEL_WAIT] = tsops_cancel_wait,
    [TS_PING] = tsops_ping,
    [TS_QUEUE_PUSH] = tsops_queue_push,
    [TS_QUEUE_POP] = tsops_queue_pop,
    [TS_QUEUE_LEN] = tsops_queue_len,
    [TS_LIST_KEYS] = tsops_list_keys,
    [TS_BARRIER] = tsops_barrier,
    /* Torch 1.x sends WATCH_KEY on a second connection it opens per store. */
    [TS_WATCH_KEY] = tsops_watch_key,
};

/* Whether the request may write the keys it names: TCPStore clients are never rendezvous members, so the
 * world's keys (core/rdzv_keys.c) are refused to them, and the connection is closed (the protocol has no
 * error answer) with the rule in the log.  1 when it may go on. */
static int tsops_writer_ok(struct ts_conn *c, const struct ts_req *r)
{
    char why[256];
    switch (r->op) {
    case TS_SET: case TS_COMPARE_SET: case TS_ADD: case TS_DELETE_KEY: case TS_APPEND: case TS_QUEUE_PUSH:
    case TS_QUEUE_POP:
        if (rdzv_keys_may_write(c->ts->ns, NULL, NULL, tsops_key(r), r->b[0].len, why, sizeof why) == CORE_OK)
            return 1;
        break;
    case TS_MULTI_SET:
        for (size_t i = 0; i < r->n; i++)
            if (rdzv_keys_may_write(c->ts->ns, NULL, NULL, r->keys[i], r->klens[i], why, sizeof why) != CORE_OK) {
                tcpstore_fail(c, STAT_FORBIDDEN, "%s '%.200s': %s", tscodec_name(r->op), r->keys[i], why);
                return 0;
            }
        return 1;
    default:
        return 1;
    }
    tcpstore_fail(c, STAT_FORBIDDEN, "%s '%.200s': %s", tscodec_name(r->op), tsops_key(r), why);
    return 0;
}

/* Handle one decoded request. */
void tsops_dispatch(struct ts_conn *c, struct ts_req *r)
{
    tsops_fn fn = tsops_handlers[r->op];
    stats_inc(&c->ts->srv->stats, STAT_TS_REQUESTS);
    if (!fn) {
        tcpstore_fail(c, STAT_TS_UNSUPPORTED, "%s (type byte %u) is not supported", tscodec_name(r->op), r->code);
        return;
    }
    /* TCPStore's protocol has no error answer: a standby closes with the leader named in its log, so the
     * client fails instead of writing into a copy that is not the replicated one. */
    if (!ha_serving(c->ts->srv)) {
        const char *leader = ha_leader(c->ts->srv);
        tcpstore_fail(c, STAT_TS_UNSUPPORTED, "%s refused: this musterd is not the leader (leader: %s)",
                      tscodec_name(r->op), *leader ? leader : "none known");
        return;
    }
    if (tsops_writer_ok(c, r))
        fn(c, r);
}
