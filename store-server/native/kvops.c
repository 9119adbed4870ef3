/*
 * Key-value op handlers.  The dispatcher (ops.c) has already checked the
 * hello, key and value sizes, key counts and non-empty keys from the op
 * table, so each handler only does its op.  Blocking forms park a waiter
 * (waiters.c) whose done callback answers the request by id.
 */
#include "kvops.h"

#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "ns.h"
#include "queues.h"
#include "rdzv.h"
#include "server.h"
#include "waiters.h"

/* What a parked native request answers when its keys are in. */
enum kvops_kind { KV_GET, KV_WAIT, KV_MULTI_GET };

/* The namespace's keyspace for a connection. */
static struct keyspace *kvops_ks(struct conn *c)
{
    return &c->ns->ks;
}

/* Answer an error naming the key (cut short when long). */
static void kvops_key_error(struct conn *c, uint64_t id, int status, const char *what, const char *key)
{
    conn_replyf(c, id, status, "%s: '%.200s'", what, key);
}

/* Answer a keyspace write that failed with st. */
static void kvops_write_error(struct conn *c, uint64_t id, int st, const char *key)
{
    static const char *const why[] = {
        [MUSTER__STATUS__LIMIT] = "namespace or value size limit reached writing",
        [MUSTER__STATUS__NOT_A_NUMBER] = "value is not a decimal int64",
        [MUSTER__STATUS__OVERFLOW] = "add would overflow int64 at",
        [MUSTER__STATUS__INTERNAL] = "out of memory writing",
    };
    const char *w = (st >= 0 && st < (int)(sizeof why / sizeof why[0]) && why[st]) ? why[st] : "cannot write";
    kvops_key_error(c, id, st, w, key);
}

/* Answer GetRes with the stored value of e. */
static void kvops_reply_value(struct conn *c, uint64_t id, const struct ks_entry *e)
{
    Muster__GetRes r = MUSTER__GET_RES__INIT;
    r.value.data = ks_val(e);
    r.value.len = e->vlen;
    conn_reply(c, id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* Answer MultiGetRes with the values of n keys, which all exist. */
static void kvops_reply_values(struct conn *c, uint64_t id, char *const *keys, const size_t *klens, size_t n)
{
    ProtobufCBinaryData *vals = calloc(n ? n : 1, sizeof *vals);
    if (!vals) {
        conn_reply(c, id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct ks_entry *e = ks_get(kvops_ks(c), keys[i], klens ? klens[i] : strlen(keys[i]));
        vals[i].data = e ? ks_val(e) : NULL;
        vals[i].len = e ? e->vlen : 0;
    }
    Muster__MultiGetRes r = MUSTER__MULTI_GET_RES__INIT;
    r.n_values = n;
    r.values = vals;
    conn_reply(c, id, MUSTER__STATUS__OK, NULL, &r.base);
    free(vals);
}

/* Words for a timed-out wait: how many of its keys are there, and which are missing (at most 8 named). */
static void kvops_missing(struct conn *c, const struct waiter *w, char *buf, size_t len)
{
    size_t off = 0, absent = 0;
    int named = 0;
    for (size_t i = 0; i < w->nkeys; i++)
        absent += ks_get(kvops_ks(c), w->keys[i], w->klens[i]) == NULL;
    if (w->nkeys == 1 && !w->counting) {
        snprintf(buf, len, "waiting for '%.200s'", w->keys[0]);
        return;
    }
    if (w->nkeys == 1) {
        snprintf(buf, len, "waiting for '%.200s' to count %lld", w->keys[0], (long long)w->at_least);
        return;
    }
    off += (size_t)snprintf(buf, len, "waiting for %zu keys: %zu of them present; missing:", w->nkeys,
                            w->nkeys - absent);
    for (size_t i = 0; i < w->nkeys && named < 8; i++) {
        if (ks_get(kvops_ks(c), w->keys[i], w->klens[i]))
            continue;
        off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s '%.48s'", named ? "," : "", w->keys[i]);
        named++;
    }
    if (absent > (size_t)named)
        snprintf(buf + off, off < len ? len - off : 0, " and %zu more", absent - (size_t)named);
}

/* Answer id STALE_GENERATION: generation gen ended (when), naming the lost node where it is known. */
static void kvops_reply_stale(struct conn *c, uint64_t id, uint64_t gen, const char *when)
{
    const char *lost = "";
    uint32_t rank = 0;
    if (rdzv_broken_by(c->ns, gen, &lost, &rank) == 0)
        conn_replyf(c, id, MUSTER__STATUS__STALE_GENERATION, "generation %llu %s: node '%.128s' (node rank %u) was lost",
                    (unsigned long long)gen, when, lost, rank);
    else
        conn_replyf(c, id, MUSTER__STATUS__STALE_GENERATION, "generation %llu %s", (unsigned long long)gen, when);
}

/* A parked request's end: answer it by id from the current keyspace, or with the status. */
static void kvops_wait_done(struct waiter *w, int status)
{
    struct conn *c = w->owner;
    conn_pending_remove(c, w->id);
    if (status == MUSTER__STATUS__TIMEOUT) {
        char missing[640];
        kvops_missing(c, w, missing, sizeof missing);
        conn_replyf(c, w->id, status, "timed out after %u ms %s", w->timeout_ms, missing);
    } else if (status == MUSTER__STATUS__STALE_GENERATION) {
        kvops_reply_stale(c, w->id, w->generation, "broke while this waited");
    } else if (status != MUSTER__STATUS__OK) {
        conn_reply(c, w->id, status, "server is shutting down", NULL);
    } else if (w->kind == KV_GET) {
        kvops_reply_value(c, w->id, ks_get(kvops_ks(c), w->keys[0], w->klens[0]));
    } else if (w->kind == KV_MULTI_GET) {
        kvops_reply_values(c, w->id, w->keys, w->klens, w->nkeys);
    } else {
        Muster__WaitRes r = MUSTER__WAIT_RES__INIT;
        r.queue = w->by_queue != 0;
        conn_reply(c, w->id, MUSTER__STATUS__OK, NULL, &r.base);
    }
}

/* The connection went away: drop its waiter silently. */
static void kvops_wait_cancel(void *arg)
{
    waiters_cancel(arg);
}

/* Park request id of c until keys exist (at_least > 0: until its one key counts that high; a wait: or its
 * queue holds more than skip values), answering errors itself. */
static void kvops_park(struct conn *c, uint64_t id, enum kvops_kind kind, char *const *keys, size_t n,
                       uint32_t timeout_ms, int64_t at_least, uint64_t skip)
{
    int st;
    uint32_t t = core_timeout(&c->srv->core, timeout_ms);
    /* A client following a generation (Hello.generation) waits for nothing once that generation ended. */
    if (c->follow_gen && !rdzv_keys_member_generation(c->ns, c->rdzv, c->cred) &&
        rdzv_generation_ended(c->ns, c->follow_gen)) {
        kvops_reply_stale(c, id, c->follow_gen, "has ended");
        return;
    }
    struct waiter *w =
        at_least > 0   ? waiters_park_count(c->ns, keys[0], strlen(keys[0]), at_least, t, kvops_wait_done, c,
                                            &c->share, id, kind, &st)
        : kind == KV_WAIT ? waiters_park_queued(c->ns, (const char *const *)keys, NULL, n, skip, t, kvops_wait_done,
                                             c, &c->share, id, kind, &st)
                        : waiters_park(c->ns, (const char *const *)keys, NULL, n, t, kvops_wait_done, c, &c->share, id,
                                       kind, &st);
    if (!w) {
        conn_reply(c, id, st,
                   st == MUSTER__STATUS__LIMIT ? core_waiter_why(&c->srv->core, &c->ns->nwaiters, &c->share)
                                               : "out of memory",
                   NULL);
        return;
    }
    /* A member's (or its worker's) wait ends when its generation breaks (waiters_fail_generation). */
    w->generation = rdzv_keys_member_generation(c->ns, c->rdzv, c->cred);
    if (!w->generation)
        w->generation = c->follow_gen;   /* the client's opt-in (0 = none) */
    if (conn_pending_add(c, id, kvops_wait_cancel, w) != 0) {
        waiters_cancel(w);
        conn_reply(c, id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
    }
}

/* Index of the first of n keys that is absent, or n when all exist (queues: a queue of more than skip values
 * makes its key present, as for check and wait). */
static size_t kvops_first_missing(struct conn *c, char *const *keys, size_t n, int queues, uint64_t skip)
{
    for (size_t i = 0; i < n; i++) {
        size_t klen = strlen(keys[i]);
        if (queues ? !waiters_present(c->ns, keys[i], klen, skip) : !ks_get(kvops_ks(c), keys[i], klen))
            return i;
    }
    return n;
}

/* set: store the value (its decoded buffer is handed to the keyspace, not copied). */
void kvops_set(struct conn *c, Muster__Request *req)
{
    Muster__SetReq *s = req->set;
    uint8_t *val = s->value.data;
    /* Take the buffer protobuf-c decoded; free_unpacked skips a NULL pointer. */
    s->value.data = NULL;
    int st = ks_set(kvops_ks(c), s->key, strlen(s->key), val, s->value.len, 1);
    if (st != MUSTER__STATUS__OK) {
        kvops_write_error(c, req->id, st, s->key);
        return;
    }
    Muster__SetRes r = MUSTER__SET_RES__INIT;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* get: answer the value, NOT_FOUND, or park until set when wait is true. */
void kvops_get(struct conn *c, Muster__Request *req)
{
    Muster__GetReq *g = req->get;
    const struct ks_entry *e = ks_get(kvops_ks(c), g->key, strlen(g->key));
    if (e)
        kvops_reply_value(c, req->id, e);
    else if (!g->wait)
        kvops_key_error(c, req->id, MUSTER__STATUS__NOT_FOUND, "key not found", g->key);
    else
        kvops_park(c, req->id, KV_GET, &g->key, 1, g->timeout_ms, 0, 0);
}

/* add: int64 kept as decimal text. */
void kvops_add(struct conn *c, Muster__Request *req)
{
    Muster__AddReq *a = req->add;
    int64_t v = 0;
    int st = ks_add(kvops_ks(c), a->key, strlen(a->key), a->delta, &v);
    if (st != MUSTER__STATUS__OK) {
        kvops_write_error(c, req->id, st, a->key);
        return;
    }
    Muster__AddRes r = MUSTER__ADD_RES__INIT;
    r.value = v;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* compare_set with TCPStore's rules. */
void kvops_compare_set(struct conn *c, Muster__Request *req)
{
    Muster__CompareSetReq *q = req->compare_set;
    const struct ks_entry *e = NULL;
    int swapped = 0;
    int st = ks_compare_set(kvops_ks(c), q->key, strlen(q->key), q->expected.data, q->expected.len, q->desired.data,
                            q->desired.len, &e, &swapped);
    if (st != MUSTER__STATUS__OK) {
        kvops_write_error(c, req->id, st, q->key);
        return;
    }
    Muster__CompareSetRes r = MUSTER__COMPARE_SET_RES__INIT;
    r.value = e ? (ProtobufCBinaryData){e->vlen, ks_val(e)} : q->expected;
    r.swapped = swapped;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* delete: deleted says whether the key existed. */
void kvops_delete(struct conn *c, Muster__Request *req)
{
    Muster__DeleteRes r = MUSTER__DELETE_RES__INIT;
    r.deleted = ks_delete(kvops_ks(c), req->delete_->key, strlen(req->delete_->key));
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* check: whether every key exists. */
void kvops_check(struct conn *c, Muster__Request *req)
{
    Muster__CheckReq *q = req->check;
    Muster__CheckRes r = MUSTER__CHECK_RES__INIT;
    r.all_present = kvops_first_missing(c, q->keys, q->n_keys, 1, 0) == q->n_keys;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* Whether key holds a decimal count of at least at_least. */
static int kvops_counts(struct conn *c, const char *key, int64_t at_least)
{
    const struct ks_entry *e = ks_get(kvops_ks(c), key, strlen(key));
    int64_t n;
    return e && ks_entry_int(e, &n) == 0 && n >= at_least;
}

/* wait: park until every key exists (with at_least, until its one key counts that high). */
void kvops_wait(struct conn *c, Muster__Request *req)
{
    Muster__WaitReq *q = req->wait;
    if (q->at_least < 0 || ((q->at_least > 0 || q->skip > 0) && q->n_keys != 1) || (q->at_least && q->skip)) {
        conn_replyf(c, req->id, MUSTER__STATUS__BAD_REQUEST,
                    "wait with at_least %lld or skip %llu takes one key and not both, not %zu keys",
                    (long long)q->at_least, (unsigned long long)q->skip, q->n_keys);
        return;
    }
    int done = q->at_least > 0 ? kvops_counts(c, q->keys[0], q->at_least)
                               : kvops_first_missing(c, q->keys, q->n_keys, 1, q->skip) == q->n_keys;
    if (done) {
        Muster__WaitRes r = MUSTER__WAIT_RES__INIT;
        conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
        return;
    }
    kvops_park(c, req->id, KV_WAIT, q->keys, q->n_keys, q->timeout_ms, q->at_least, q->skip);
}

/* num_keys: keys in the namespace. */
void kvops_num_keys(struct conn *c, Muster__Request *req)
{
    Muster__NumKeysRes r = MUSTER__NUM_KEYS_RES__INIT;
    r.count = ks_count(kvops_ks(c));
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* multi_get: all values or NOT_FOUND; with wait, park until all exist. */
void kvops_multi_get(struct conn *c, Muster__Request *req)
{
    Muster__MultiGetReq *q = req->multi_get;
    size_t miss = kvops_first_missing(c, q->keys, q->n_keys, 0, 0);
    if (miss == q->n_keys)
        kvops_reply_values(c, req->id, q->keys, NULL, q->n_keys);
    else if (!q->wait)
        kvops_key_error(c, req->id, MUSTER__STATUS__NOT_FOUND, "key not found", q->keys[miss]);
    else
        kvops_park(c, req->id, KV_MULTI_GET, q->keys, q->n_keys, q->timeout_ms, 0, 0);
}

/* Whether all n writes of a multi_set fit the namespace limits together; wire status. */
static int kvops_multi_fits(struct conn *c, const Muster__MultiSetReq *q)
{
    struct keyspace *ks = kvops_ks(c);
    uint64_t keys = ks->count, bytes = ks->bytes;
    for (size_t i = 0; i < q->n_keys; i++) {
        size_t klen = strlen(q->keys[i]);
        const struct ks_entry *e = ks_get(ks, q->keys[i], klen);
        /* A key repeated in one request is counted twice: a safe overestimate. */
        keys += !e;
        bytes += klen + q->values[i].len - (e ? e->klen + e->vlen : 0);
    }
    if (keys > ks->max_keys) {
        stats_inc(&c->srv->stats, STAT_LIMIT_KEYS_PER_NS);
        return MUSTER__STATUS__LIMIT;
    }
    if (bytes > ks->max_bytes) {
        stats_inc(&c->srv->stats, STAT_LIMIT_BYTES_PER_NS);
        return MUSTER__STATUS__LIMIT;
    }
    return MUSTER__STATUS__OK;
}

/* multi_set: all keys or none (limits are checked before any write). */
void kvops_multi_set(struct conn *c, Muster__Request *req)
{
    Muster__MultiSetReq *q = req->multi_set;
    if (q->n_keys != q->n_values) {
        conn_replyf(c, req->id, MUSTER__STATUS__BAD_REQUEST, "%zu keys but %zu values", q->n_keys, q->n_values);
        return;
    }
    if (kvops_multi_fits(c, q) != MUSTER__STATUS__OK) {
        conn_reply(c, req->id, MUSTER__STATUS__LIMIT, "namespace limit reached by multi_set", NULL);
        return;
    }
    int st = MUSTER__STATUS__OK;
    for (size_t i = 0; i < q->n_keys; i++) {
        uint8_t *val = q->values[i].data;
        q->values[i].data = NULL;
        int s = ks_set(kvops_ks(c), q->keys[i], strlen(q->keys[i]), val, q->values[i].len, 1);
        if (s != MUSTER__STATUS__OK)
            st = s;
    }
    if (st != MUSTER__STATUS__OK) {
        conn_reply(c, req->id, st, "out of memory during multi_set", NULL);
        return;
    }
    Muster__MultiSetRes r = MUSTER__MULTI_SET_RES__INIT;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* append: create or extend. */
void kvops_append(struct conn *c, Muster__Request *req)
{
    Muster__AppendReq *a = req->append;
    size_t len = 0;
    int st = ks_append(kvops_ks(c), a->key, strlen(a->key), a->value.data, a->value.len, &len);
    if (st != MUSTER__STATUS__OK) {
        kvops_write_error(c, req->id, st, a->key);
        return;
    }
    Muster__AppendRes r = MUSTER__APPEND_RES__INIT;
    r.length = len;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* Byte order of two entries' keys, for qsort. */
static int kvops_key_cmp(const void *a, const void *b)
{
    const struct ks_entry *x = *(const struct ks_entry *const *)a, *y = *(const struct ks_entry *const *)b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int d = memcmp(x->key, y->key, n);
    return d ? d : (x->klen > y->klen) - (x->klen < y->klen);
}

/* Whether e's key has the prefix and sorts strictly after `after` ("" = from the start). */
static int kvops_list_match(const struct ks_entry *e, const char *prefix, size_t plen, const char *after, size_t alen)
{
    if (e->klen < plen || memcmp(e->key, prefix, plen) != 0)
        return 0;
    if (!alen)
        return 1;
    size_t n = e->klen < alen ? e->klen : alen;
    int d = memcmp(e->key, after, n);
    return d > 0 || (d == 0 && e->klen > alen);
}

/* What kvops_list collects while it walks the keyspace. */
struct kvops_list_walk {
    const struct ks_entry **m;
    size_t n, plen, alen;
    const char *prefix, *after;
};

/* ks_each callback of kvops_list: keep e when it matches. */
static int kvops_list_one(void *arg, const struct ks_entry *e)
{
    struct kvops_list_walk *w = arg;
    /* A key with a NUL (set through the TCPStore listener) cannot be sent as a native string: leave it
     * out rather than send it cut, naming another key. */
    if (kvops_list_match(e, w->prefix, w->plen, w->after, w->alen) && !memchr(e->key, 0, e->klen))
        w->m[w->n++] = e;
    return 0;
}

/* list: one page of keys with a prefix, in byte order.  This admin op
 * collects and sorts the matches, O(n log n) in the namespace's keys. */
void kvops_list(struct conn *c, Muster__Request *req)
{
    Muster__ListReq *q = req->list;
    struct keyspace *ks = kvops_ks(c);
    const struct options *o = &c->srv->opt;
    const struct ks_entry **m = malloc((ks->count ? ks->count : 1) * sizeof *m);
    char **keys = malloc((ks->count ? ks->count : 1) * sizeof *keys);
    if (!m || !keys) {
        free(m);
        free(keys);
        conn_reply(c, req->id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
        return;
    }
    struct kvops_list_walk w = {m, 0, strlen(q->prefix), strlen(q->after), q->prefix, q->after};
    ks_each(ks, kvops_list_one, &w);
    size_t n = w.n;
    qsort(m, n, sizeof *m, kvops_key_cmp);
    size_t limit = (q->limit && q->limit < o->max_keys_per_request) ? q->limit : o->max_keys_per_request;
    size_t take = 0, bytes = 0, room = o->max_frame - 1024;
    /* A page also stops before it would outgrow a frame. */
    while (take < n && take < limit && bytes + m[take]->klen + 8 <= room) {
        bytes += m[take]->klen + 8;
        keys[take] = (char *)m[take]->key;
        take++;
    }
    Muster__ListRes r = MUSTER__LIST_RES__INIT;
    r.n_keys = take;
    r.keys = keys;
    r.more = take < n;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
    free((void *)m);
    free(keys);
}

/* ping: echo the payload (allowed before hello). */
void kvops_ping(struct conn *c, Muster__Request *req)
{
    Muster__PingRes r = MUSTER__PING_RES__INIT;
    r.payload = req->ping->payload;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* queue_push: append to the key's queue (queues.c), releasing one parked wait it completes. */
void kvops_queue_push(struct conn *c, Muster__Request *req)
{
    Muster__QueuePushReq *q = req->queue_push;
    uint8_t *val = q->value.data;
    q->value.data = NULL; /* taken by the queue, as set takes it */
    uint64_t len = 0;
    int st = queues_push(c->ns, q->key, strlen(q->key), val, q->value.len, &len);
    if (st != MUSTER__STATUS__OK) {
        kvops_write_error(c, req->id, st, q->key);
        return;
    }
    Muster__QueuePushRes r = MUSTER__QUEUE_PUSH_RES__INIT;
    r.length = len;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* queue_pop: the length before the pop, and the oldest value when there was one. */
void kvops_queue_pop(struct conn *c, Muster__Request *req)
{
    Muster__QueuePopReq *q = req->queue_pop;
    Muster__QueuePopRes r = MUSTER__QUEUE_POP_RES__INIT;
    uint8_t *val;
    size_t vlen;
    queues_pop(c->ns, q->key, strlen(q->key), &r.length, &val, &vlen);
    r.value.data = val;
    r.value.len = vlen;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
    free(val);
}

/* queue_len: the queue's length. */
void kvops_queue_len(struct conn *c, Muster__Request *req)
{
    Muster__QueueLenRes r = MUSTER__QUEUE_LEN_RES__INIT;
    r.length = queues_len(c->ns, req->queue_len->key, strlen(req->queue_len->key));
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}
