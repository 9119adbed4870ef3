/*
 * The relay's op table: each TCPStore request of a worker becomes native ops
 * on the relay's one upstream handle, under the generation's key prefix, and
 * is answered with the bytes musterd's own TCPStore listener would send
 * (store-server/tcpstore/tcpstore_ops.c): set, append and multi_set have no reply,
 * an absent key reads as an empty value, an add answers the new count.
 *
 * WAIT and BARRIER do not block the upstream handle: they are parked here
 * and looked at again when the relay's watch on the prefix reports a change
 * to one of their keys (run_relay.c), so one handle serves every worker.
 * Queues and WATCH_KEY have no native counterpart and close the connection
 * (counted as unsupported), as the listener does for WATCH_KEY.
 */
#include "run_relay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The native key for a torch key of len bytes (prefix + key), or NULL for a key holding a NUL byte. */
static char *run_relay_ops_key(const struct run_relay *r, const char *key, size_t len)
{
    if (memchr(key, 0, len))
        return NULL;
    size_t pl = strlen(r->prefix);
    char *k = malloc(pl + len + 1);
    if (!k)
        return NULL;
    memcpy(k, r->prefix, pl);
    memcpy(k + pl, key, len);
    k[pl + len] = '\0';
    return k;
}

/* Free n native keys and their array. */
static void run_relay_ops_free_keys(char **keys, size_t n)
{
    for (size_t i = 0; keys && i < n; i++)
        free(keys[i]);
    free(keys);
}

/* Native keys for n torch keys (lens: their lengths); NULL (c closed) on failure. */
static char **run_relay_ops_keys(struct run_relay *r, struct run_relay_conn *c, char *const *list, const size_t *lens,
                                 size_t n)
{
    char **keys = calloc(n ? n : 1, sizeof *keys);
    for (size_t i = 0; keys && i < n; i++) {
        if (!(keys[i] = run_relay_ops_key(r, list[i], lens[i]))) {
            run_relay_ops_free_keys(keys, n);
            keys = NULL;
        }
    }
    if (!keys) {
        r->st.bad_request++;
        run_relay_close(r, c, "a key holds a NUL byte (or out of memory)");
    }
    return keys;
}

/* One native key for the request's first single field; NULL (c closed) on failure. */
static char *run_relay_ops_key1(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    char *key = (char *)q->b[0].p;
    char **keys = run_relay_ops_keys(r, c, &key, &q->b[0].len, 1);
    if (!keys)
        return NULL;
    char *k = keys[0];
    free(keys);
    return k;
}

/* SET: no reply. */
static void run_relay_ops_set(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q, const char *k)
{
    int rc = muster_set(r->up, k, q->b[1].p, q->b[1].len, 0);
    if (rc != MUSTER_OK)
        run_relay_upstream_failed(r, c, "set", rc);
}

/* COMPARE_SET: the value the caller compares (TCPStore's rules, kept by musterd). */
static void run_relay_ops_compare_set(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q,
                                      const char *k)
{
    void *v = NULL;
    size_t vlen = 0;
    int rc = muster_compare_set(r->up, k, q->b[1].p, q->b[1].len, q->b[2].p, q->b[2].len, NULL, &v, &vlen, 0);
    if (rc == MUSTER_OK)
        tscodec_put_blob(&c->sink, v, vlen);
    else
        run_relay_upstream_failed(r, c, "compare_set", rc);
    muster_free(v);
}

/* GET: the value, or an empty one for an absent key (as the listener answers). */
static void run_relay_ops_get(struct run_relay *r, struct run_relay_conn *c, const char *k)
{
    void *v = NULL;
    size_t vlen = 0;
    int rc = muster_get(r->up, k, 0, 0, &v, &vlen);
    if (rc == MUSTER_OK || rc == MUSTER_ENOTFOUND)
        tscodec_put_blob(&c->sink, rc == MUSTER_OK ? v : NULL, rc == MUSTER_OK ? vlen : 0);
    else
        run_relay_upstream_failed(r, c, "get", rc);
    muster_free(v);
}

/* ADD: the new count. */
static void run_relay_ops_add(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q, const char *k)
{
    int64_t v = 0;
    int rc = muster_add(r->up, k, q->i64, &v, 0);
    if (rc == MUSTER_OK)
        tscodec_put_i64(&c->sink, v);
    else
        run_relay_upstream_failed(r, c, "add", rc);
}

/* DELETE_KEY: 1 when the key existed. */
static void run_relay_ops_delete(struct run_relay *r, struct run_relay_conn *c, const char *k)
{
    int deleted = 0;
    int rc = muster_delete(r->up, k, &deleted, 0);
    if (rc == MUSTER_OK)
        tscodec_put_i64(&c->sink, deleted);
    else
        run_relay_upstream_failed(r, c, "delete_key", rc);
}

/* APPEND: no reply. */
static void run_relay_ops_append(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q, const char *k)
{
    int rc = muster_append(r->up, k, q->b[1].p, q->b[1].len, NULL, 0);
    if (rc != MUSTER_OK)
        run_relay_upstream_failed(r, c, "append", rc);
}

/* BARRIER: count the arrival; answer once the count reaches the world size, parked meanwhile. */
static void run_relay_ops_barrier(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q, char *k)
{
    int64_t v = 0;
    int rc = muster_add(r->up, k, 1, &v, 0);
    if (rc != MUSTER_OK) {
        run_relay_upstream_failed(r, c, "barrier", rc);
        free(k);
    } else if (v >= q->i64) {
        tscodec_put_u8(&c->sink, TS_STOP_WAITING);
        free(k);
    } else {
        c->pkeys = malloc(sizeof *c->pkeys);
        if (!c->pkeys) {
            free(k);
            run_relay_close(r, c, "out of memory");
            return;
        }
        c->pkeys[0] = k;
        c->npkeys = 1;
        c->world = q->i64;
        c->park = RELAY_PARK_BARRIER;
        r->st.parked++;
    }
}

/* Requests with one key: set, compare_set, get, add, delete_key, append, barrier. */
static void run_relay_ops_single(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    char *k = run_relay_ops_key1(r, c, q);
    if (!k)
        return;
    switch (q->op) {
    case TS_SET: run_relay_ops_set(r, c, q, k); break;
    case TS_COMPARE_SET: run_relay_ops_compare_set(r, c, q, k); break;
    case TS_GET: run_relay_ops_get(r, c, k); break;
    case TS_ADD: run_relay_ops_add(r, c, q, k); break;
    case TS_DELETE_KEY: run_relay_ops_delete(r, c, k); break;
    case TS_APPEND: run_relay_ops_append(r, c, q, k); break;
    case TS_BARRIER: run_relay_ops_barrier(r, c, q, k); return; /* keeps k when parked */
    }
    free(k);
}

/* CHECK and WAIT: READY / STOP_WAITING when every key is present; a WAIT is parked otherwise. */
static void run_relay_ops_check(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    char **keys = run_relay_ops_keys(r, c, q->keys, q->klens, q->n);
    if (!keys)
        return;
    int present = 0;
    int rc = q->n ? muster_check(r->up, (const char *const *)keys, q->n, &present, 0) : MUSTER_OK;
    if (q->n == 0)
        present = 1;
    if (rc != MUSTER_OK) {
        run_relay_upstream_failed(r, c, tscodec_name(q->op), rc);
    } else if (q->op == TS_CHECK) {
        tscodec_put_u8(&c->sink, present ? TS_READY : TS_NOT_READY);
    } else if (present) {
        tscodec_put_u8(&c->sink, TS_STOP_WAITING);
    } else {
        c->pkeys = keys;
        c->npkeys = q->n;
        c->park = RELAY_PARK_WAIT;
        r->st.parked++;
        return;
    }
    run_relay_ops_free_keys(keys, q->n);
}

/* MULTI_GET: every value back to back, empty for absent keys. */
static void run_relay_ops_multi_get(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    char **keys = run_relay_ops_keys(r, c, q->keys, q->klens, q->n);
    if (!keys)
        return;
    for (size_t i = 0; i < q->n && !c->dead; i++)
        run_relay_ops_get(r, c, keys[i]);
    run_relay_ops_free_keys(keys, q->n);
}

/* MULTI_SET: every pair at once; no reply. */
static void run_relay_ops_multi_set(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    char **keys = run_relay_ops_keys(r, c, q->keys, q->klens, q->n);
    if (!keys)
        return;
    const void **vals = calloc(q->n ? q->n : 1, sizeof *vals);
    size_t *lens = calloc(q->n ? q->n : 1, sizeof *lens);
    int rc = vals && lens ? MUSTER_OK : MUSTER_ENOMEM;
    for (size_t i = 0; rc == MUSTER_OK && i < q->n; i++) {
        vals[i] = q->vals[i];
        lens[i] = q->vlens[i];
    }
    if (rc == MUSTER_OK && q->n)
        rc = muster_multi_set(r->up, (const char *const *)keys, vals, lens, q->n, 0);
    if (rc != MUSTER_OK)
        run_relay_upstream_failed(r, c, "multi_set", rc);
    free(vals);
    free(lens);
    run_relay_ops_free_keys(keys, q->n);
}

/* GETNUMKEYS and LIST_KEYS: the keys of this generation (under the prefix), listed page by page. */
static void run_relay_ops_list(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    struct tscodec_out keys = {0};
    struct tscodec_sink ks = tscodec_out_sink(&keys);
    int64_t count = 0;
    char *after = NULL;
    size_t pl = strlen(r->prefix);
    int more = 1, rc = MUSTER_OK;
    while (more && rc == MUSTER_OK) {
        char **page = NULL;
        size_t n = 0;
        rc = muster_list(r->up, r->prefix, after, 1000, &page, &n, &more, 0);
        for (size_t i = 0; rc == MUSTER_OK && i < n; i++)
            tscodec_put_blob(&ks, page[i] + pl, strlen(page[i]) - pl);
        count += rc == MUSTER_OK ? (int64_t)n : 0;
        free(after);
        after = rc == MUSTER_OK && n ? strdup(page[n - 1]) : NULL;
        muster_free_list((void **)page, n);
        more = more && after;
    }
    free(after);
    if (rc != MUSTER_OK) {
        run_relay_upstream_failed(r, c, tscodec_name(q->op), rc);
    } else {
        tscodec_put_i64(&c->sink, count);
        if (q->op == TS_LIST_KEYS)
            tscodec_put(&c->sink, keys.p, keys.len);
    }
    free(keys.p);
}

/* Serve one decoded request of c (run_relay_ops.c); c may be parked or closed by it. */
void run_relay_ops_dispatch(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    r->st.requests++;
    switch (q->op) {
    case TS_VALIDATE:
        if (q->u32 != TS_MAGIC) {
            r->st.bad_request++;
            run_relay_close(r, c, "bad VALIDATE magic 0x%08x", q->u32);
        }
        return;
    case TS_CHECK:
    case TS_WAIT: run_relay_ops_check(r, c, q); return;
    case TS_MULTI_GET: run_relay_ops_multi_get(r, c, q); return;
    case TS_MULTI_SET: run_relay_ops_multi_set(r, c, q); return;
    case TS_GETNUMKEYS:
    case TS_LIST_KEYS: run_relay_ops_list(r, c, q); return;
    case TS_CANCEL_WAIT:
        if (c->park != RELAY_PARK_NONE) {
            r->st.canceled++;
            run_relay_ops_unpark(c);
        }
        tscodec_put_u8(&c->sink, TS_WAIT_CANCELED);
        return;
    case TS_PING: tscodec_put_u32(&c->sink, q->u32); return;
    case TS_QUEUE_PUSH:
    case TS_QUEUE_POP:
    case TS_QUEUE_LEN:
    case TS_WATCH_KEY:
        r->st.unsupported++;
        run_relay_close(r, c, "%s (type byte %u) is not supported by the relay", tscodec_name(q->op), q->code);
        return;
    default: run_relay_ops_single(r, c, q); return;
    }
}

/* Drop c's parked request without an answer. */
void run_relay_ops_unpark(struct run_relay_conn *c)
{
    run_relay_ops_free_keys(c->pkeys, c->npkeys);
    c->pkeys = NULL;
    c->npkeys = 0;
    c->park = RELAY_PARK_NONE;
}

/* The int64 held as decimal text in a value; -1 when it is not one. */
static int64_t run_relay_ops_count(const void *value, size_t len)
{
    char buf[24];
    if (!value || len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, value, len);
    buf[len] = '\0';
    char *end;
    long long v = strtoll(buf, &end, 10);
    return *end ? -1 : (int64_t)v;
}

/* Whether key is one of c's parked keys (NULL matches any). */
static int run_relay_ops_parked_on(const struct run_relay_conn *c, const char *key)
{
    for (size_t i = 0; key && i < c->npkeys; i++)
        if (strcmp(c->pkeys[i], key) == 0)
            return 1;
    return key == NULL;
}

/* Look again at c's parked request after a change to key (NULL: any key); answers it when it is done. */
void run_relay_ops_recheck(struct run_relay *r, struct run_relay_conn *c, const char *key, const void *value,
                           size_t vlen)
{
    if (c->park == RELAY_PARK_NONE || c->dead || !run_relay_ops_parked_on(c, key))
        return;
    int done = 0, rc = MUSTER_OK;
    if (c->park == RELAY_PARK_BARRIER) {
        void *v = NULL;
        /* An event carries the value; after a gap in events the count is read again. */
        if (!key)
            rc = muster_get(r->up, c->pkeys[0], 0, 0, &v, &vlen);
        done = rc == MUSTER_OK && run_relay_ops_count(key ? value : v, vlen) >= c->world;
        muster_free(v);
    } else {
        rc = muster_check(r->up, (const char *const *)c->pkeys, c->npkeys, &done, 0);
    }
    if (rc != MUSTER_OK && rc != MUSTER_ENOTFOUND) {
        run_relay_upstream_failed(r, c, c->park == RELAY_PARK_BARRIER ? "barrier" : "wait", rc);
    } else if (done) {
        run_relay_ops_unpark(c);
        tscodec_put_u8(&c->sink, TS_STOP_WAITING);
    }
}
