/*
 * The Requests of the key-value ops, built once for both ways of running
 * them: the blocking calls (kv.c) and the asynchronous ones (async.c).
 * Each kvreq_* function checks an op's arguments and fills a caller-owned
 * struct kvreq (internal.h) with the op's message, the Request pointing at
 * it, and the call's effective timeout.  Blocking ops (get with wait, wait,
 * multi_get with wait, barrier) always send an explicit timeout, so the
 * server's default never applies behind the caller's back.  The Request
 * borrows the caller's keys and values; nothing is copied.
 */
#include <stdlib.h>

#include "internal.h"

/* A binary field borrowing len bytes at p. */
static ProtobufCBinaryData kvreq_bytes(const void *p, size_t len)
{
    ProtobufCBinaryData b = {len, (uint8_t *)(uintptr_t)p};
    return b;
}

/* Whether a key list of n entries is usable (non-empty, no NULL keys). */
static int kvreq_keys_ok(const char *const *keys, size_t n)
{
    if (!keys || n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!keys[i])
            return 0;
    return 1;
}

/* Start k as a Request of case op, with m's effective timeout for timeout_ms. */
static void kvreq_start(struct kvreq *k, muster_t *m, Muster__Request__OpCase op, uint32_t timeout_ms)
{
    Muster__Request init = MUSTER__REQUEST__INIT;
    k->req = init;
    k->req.op_case = op;
    k->vals = NULL;
    k->timeout_ms = call_timeout(m, timeout_ms);
}

/* A set of the len bytes at value to key. */
int kvreq_set(struct kvreq *k, muster_t *m, const char *key, const void *value, size_t len, uint32_t timeout_ms)
{
    if (!m || !key || (!value && len))
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_SET, timeout_ms);
    Muster__SetReq op = MUSTER__SET_REQ__INIT;
    op.key = (char *)key;
    op.value = kvreq_bytes(value, len);
    k->op.set = op;
    k->req.set = &k->op.set;
    return MUSTER_OK;
}

/* A get of key, parked at the server until it exists when wait != 0. */
int kvreq_get(struct kvreq *k, muster_t *m, const char *key, int wait, uint32_t timeout_ms)
{
    if (!m || !key)
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_GET, timeout_ms);
    Muster__GetReq op = MUSTER__GET_REQ__INIT;
    op.key = (char *)key;
    op.wait = wait != 0;
    op.timeout_ms = wait ? k->timeout_ms : 0;
    k->op.get = op;
    k->req.get = &k->op.get;
    return MUSTER_OK;
}

/* An add of delta to the integer at key. */
int kvreq_add(struct kvreq *k, muster_t *m, const char *key, int64_t delta, uint32_t timeout_ms)
{
    if (!m || !key)
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_ADD, timeout_ms);
    Muster__AddReq op = MUSTER__ADD_REQ__INIT;
    op.key = (char *)key;
    op.delta = delta;
    k->op.add = op;
    k->req.add = &k->op.add;
    return MUSTER_OK;
}

/* A TCPStore compare_set of key from the elen bytes at expected to the dlen at desired. */
int kvreq_compare_set(struct kvreq *k, muster_t *m, const char *key, const void *expected, size_t elen,
                      const void *desired, size_t dlen, uint32_t timeout_ms)
{
    if (!m || !key || (!expected && elen) || (!desired && dlen))
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_COMPARE_SET, timeout_ms);
    Muster__CompareSetReq op = MUSTER__COMPARE_SET_REQ__INIT;
    op.key = (char *)key;
    op.expected = kvreq_bytes(expected, elen);
    op.desired = kvreq_bytes(desired, dlen);
    k->op.compare_set = op;
    k->req.compare_set = &k->op.compare_set;
    return MUSTER_OK;
}

/* A delete of key. */
int kvreq_delete(struct kvreq *k, muster_t *m, const char *key, uint32_t timeout_ms)
{
    if (!m || !key)
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_DELETE, timeout_ms);
    Muster__DeleteReq op = MUSTER__DELETE_REQ__INIT;
    op.key = (char *)key;
    k->op.delete_ = op;
    k->req.delete_ = &k->op.delete_;
    return MUSTER_OK;
}

/* A check that all n keys exist. */
int kvreq_check(struct kvreq *k, muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms)
{
    if (!m || !kvreq_keys_ok(keys, n))
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_CHECK, timeout_ms);
    Muster__CheckReq op = MUSTER__CHECK_REQ__INIT;
    op.n_keys = n;
    op.keys = (char **)keys;
    k->op.check = op;
    k->req.check = &k->op.check;
    return MUSTER_OK;
}

/* A wait until all n keys exist (server-enforced deadline). */
int kvreq_wait(struct kvreq *k, muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms)
{
    if (!m || !kvreq_keys_ok(keys, n))
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_WAIT, timeout_ms);
    Muster__WaitReq op = MUSTER__WAIT_REQ__INIT;
    op.n_keys = n;
    op.keys = (char **)keys;
    op.timeout_ms = k->timeout_ms;
    k->op.wait = op;
    k->req.wait = &k->op.wait;
    return MUSTER_OK;
}

/* A wait for one key with WaitReq's one-key fields (at_least, skip); the key list outlives this call, since
 * the request is packed after it returns. */
static int kvreq_wait_one(struct kvreq *k, muster_t *m, const char *key, int64_t at_least, uint64_t skip,
                          uint32_t timeout_ms)
{
    if (!key)
        return MUSTER_EINVAL;
    k->key1 = (char *)key;
    int rc = kvreq_wait(k, m, (const char *const *)&k->key1, 1, timeout_ms);
    k->op.wait.at_least = at_least;
    k->op.wait.skip = skip;
    return rc;
}

/* A wait until key holds a decimal count of at least at_least (server-enforced deadline). */
int kvreq_wait_count(struct kvreq *k, muster_t *m, const char *key, int64_t at_least, uint32_t timeout_ms)
{
    return at_least > 0 ? kvreq_wait_one(k, m, key, at_least, 0, timeout_ms) : MUSTER_EINVAL;
}

/* A wait until key exists, counting its queue as present only with more than skip values. */
int kvreq_wait_skip(struct kvreq *k, muster_t *m, const char *key, uint64_t skip, uint32_t timeout_ms)
{
    return kvreq_wait_one(k, m, key, 0, skip, timeout_ms);
}

/* A count of the keys in the namespace. */
int kvreq_num_keys(struct kvreq *k, muster_t *m, uint32_t timeout_ms)
{
    if (!m)
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_NUM_KEYS, timeout_ms);
    Muster__NumKeysReq op = MUSTER__NUM_KEYS_REQ__INIT;
    k->op.num_keys = op;
    k->req.num_keys = &k->op.num_keys;
    return MUSTER_OK;
}

/* A get of n keys at once, all or nothing, waiting for them when wait != 0. */
int kvreq_multi_get(struct kvreq *k, muster_t *m, const char *const *keys, size_t n, int wait, uint32_t timeout_ms)
{
    if (!m || !kvreq_keys_ok(keys, n))
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_MULTI_GET, timeout_ms);
    Muster__MultiGetReq op = MUSTER__MULTI_GET_REQ__INIT;
    op.n_keys = n;
    op.keys = (char **)keys;
    op.wait = wait != 0;
    op.timeout_ms = wait ? k->timeout_ms : 0;
    k->op.multi_get = op;
    k->req.multi_get = &k->op.multi_get;
    return MUSTER_OK;
}

/* An atomic set of n keys; MUSTER_ENOMEM when the value array cannot be made. */
int kvreq_multi_set(struct kvreq *k, muster_t *m, const char *const *keys, const void *const *values,
                    const size_t *lens, size_t n, uint32_t timeout_ms)
{
    if (!m || !kvreq_keys_ok(keys, n) || !values || !lens)
        return MUSTER_EINVAL;
    ProtobufCBinaryData *vals = calloc(n, sizeof *vals);
    if (!vals)
        return MUSTER_ENOMEM;
    for (size_t i = 0; i < n; i++)
        vals[i] = kvreq_bytes(values[i], lens[i]);
    kvreq_start(k, m, MUSTER__REQUEST__OP_MULTI_SET, timeout_ms);
    k->vals = vals;
    Muster__MultiSetReq op = MUSTER__MULTI_SET_REQ__INIT;
    op.n_keys = n;
    op.keys = (char **)keys;
    op.n_values = n;
    op.values = vals;
    k->op.multi_set = op;
    k->req.multi_set = &k->op.multi_set;
    return MUSTER_OK;
}

/* An append of the len bytes at value to key (created when absent). */
int kvreq_append(struct kvreq *k, muster_t *m, const char *key, const void *value, size_t len,
                 uint32_t timeout_ms)
{
    if (!m || !key || (!value && len))
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_APPEND, timeout_ms);
    Muster__AppendReq op = MUSTER__APPEND_REQ__INIT;
    op.key = (char *)key;
    op.value = kvreq_bytes(value, len);
    k->op.append = op;
    k->req.append = &k->op.append;
    return MUSTER_OK;
}

/* A list of one page of keys with prefix after `after` (NULL for either: ""). */
int kvreq_list(struct kvreq *k, muster_t *m, const char *prefix, const char *after, uint32_t limit,
               uint32_t timeout_ms)
{
    if (!m)
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_LIST, timeout_ms);
    Muster__ListReq op = MUSTER__LIST_REQ__INIT;
    op.prefix = (char *)(prefix ? prefix : "");
    op.after = (char *)(after ? after : "");
    op.limit = limit;
    k->op.list = op;
    k->req.list = &k->op.list;
    return MUSTER_OK;
}

/* A ping carrying the len bytes at payload, which the server echoes. */
int kvreq_ping(struct kvreq *k, muster_t *m, const void *payload, size_t len, uint32_t timeout_ms)
{
    if (!m)
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_PING, timeout_ms);
    Muster__PingReq op = MUSTER__PING_REQ__INIT;
    op.payload = kvreq_bytes(payload, len);
    k->op.ping = op;
    k->req.ping = &k->op.ping;
    return MUSTER_OK;
}

/* An arrival at barrier `name` of count, fetching key at release when key is not NULL. */
int kvreq_barrier(struct kvreq *k, muster_t *m, const char *name, uint32_t count, const char *key,
                  uint32_t timeout_ms)
{
    if (!m || !name || count == 0)
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_BARRIER, timeout_ms);
    Muster__BarrierReq op = MUSTER__BARRIER_REQ__INIT;
    op.name = (char *)name;
    op.count = count;
    op.timeout_ms = k->timeout_ms;
    op.fetch = (char *)(key ? key : "");
    k->op.barrier = op;
    k->req.barrier = &k->op.barrier;
    return MUSTER_OK;
}

/* Free what a filled k owns (multi_set's value array); the Request is unusable after. */
void kvreq_free(struct kvreq *k)
{
    free(k->vals);
    k->vals = NULL;
}

/* A push of the len bytes at value to key's queue. */
int kvreq_queue_push(struct kvreq *k, muster_t *m, const char *key, const void *value, size_t len,
                     uint32_t timeout_ms)
{
    if (!m || !key || (!value && len))
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_QUEUE_PUSH, timeout_ms);
    Muster__QueuePushReq op = MUSTER__QUEUE_PUSH_REQ__INIT;
    op.key = (char *)key;
    op.value = kvreq_bytes(value, len);
    k->op.queue_push = op;
    k->req.queue_push = &k->op.queue_push;
    return MUSTER_OK;
}

/* A pop of the oldest value of key's queue. */
int kvreq_queue_pop(struct kvreq *k, muster_t *m, const char *key, uint32_t timeout_ms)
{
    if (!m || !key)
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_QUEUE_POP, timeout_ms);
    Muster__QueuePopReq op = MUSTER__QUEUE_POP_REQ__INIT;
    op.key = (char *)key;
    k->op.queue_pop = op;
    k->req.queue_pop = &k->op.queue_pop;
    return MUSTER_OK;
}

/* The length of key's queue. */
int kvreq_queue_len(struct kvreq *k, muster_t *m, const char *key, uint32_t timeout_ms)
{
    if (!m || !key)
        return MUSTER_EINVAL;
    kvreq_start(k, m, MUSTER__REQUEST__OP_QUEUE_LEN, timeout_ms);
    Muster__QueueLenReq op = MUSTER__QUEUE_LEN_REQ__INIT;
    op.key = (char *)key;
    k->op.queue_len = op;
    k->req.queue_len = &k->op.queue_len;
    return MUSTER_OK;
}
