/*
 * The relay's op table: each TCPStore request of a worker becomes native
 * asynchronous calls on the relay's one upstream handle, under the
 * generation's key prefix, sent at once (many in flight), and is answered
 * with the bytes musterd's own TCPStore listener would send
 * (store-server/tcpstore/tcpstore_ops.c): set, append and multi_set have no
 * reply, an absent key reads as an empty value, an add answers the new count.
 * Each request that has a reply takes a slot in its connection's queue when
 * it is decoded, so replies go out in request order whatever order the
 * upstream answers come in.  ADD, GET and a one-key WAIT go through
 * run_relay_comb.c, which combines them per key.
 *
 * WAIT and BARRIER do not block the upstream handle: they are parked at
 * musterd as waits (run_relay_comb.c), so a write of their keys from
 * anywhere releases them and one handle serves every worker.  Queues are
 * musterd's (queue_push, queue_pop, queue_len: the listener's queues, kept
 * by the core); WATCH_KEY is a native watch of the key (run_relay_watch.c).
 */
#include "run_relay.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The native key for a torch key of len bytes: the prefix, then the key with NUL written %00 and '%' written
 * %25 (native keys are strings, and torch keys are bytes: escaping '%' too keeps the mapping one to one, so
 * `a\0b`, `a` and `a%00b` stay three keys, as on the listener); NULL when out of memory. */
static char *run_relay_ops_key(const struct run_relay *r, const char *key, size_t len)
{
    size_t pl = strlen(r->prefix), esc = 0;
    for (size_t i = 0; i < len; i++)
        esc += key[i] == '\0' || key[i] == '%';
    char *k = malloc(pl + len + 2 * esc + 1), *p = k + pl;
    if (!k)
        return NULL;
    memcpy(k, r->prefix, pl);
    for (size_t i = 0; i < len; i++) {
        if (key[i] == '\0' || key[i] == '%') {
            *p++ = '%';
            *p++ = '0' + (key[i] == '%' ? 2 : 0);
            *p++ = key[i] == '%' ? '5' : '0';
        } else {
            *p++ = key[i];
        }
    }
    *p = '\0';
    return k;
}

/* The torch key of a native key of this relay (its prefix taken off, %00 and %25 undone) into out (as long
 * as the native key); its length. */
size_t run_relay_torch_key(const struct run_relay *r, const char *native, char *out)
{
    const char *s = native + strlen(r->prefix);
    size_t n = 0;
    while (*s) {
        if (s[0] == '%' && s[1] == '0' && s[2] == '0') {
            out[n++] = '\0';
            s += 3;
        } else if (s[0] == '%' && s[1] == '2' && s[2] == '5') {
            out[n++] = '%';
            s += 3;
        } else {
            out[n++] = *s++;
        }
    }
    return n;
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
    if (!keys)
        run_relay_close(r, c, "out of memory");
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

/* One upstream call answering into one connection. */
struct run_relay_call {
    struct run_relay *r;
    struct run_relay_conn *c;
    struct run_relay_slot *s; /* its reply, or NULL (no reply) */
    int op;                   /* the TCPStore op */
    uint64_t pseq;
    uint64_t wseq;            /* a write: its number (run_relay_comb_wrote), or 0 */
    /* GETNUMKEYS and LIST_KEYS: the pages read so far */
    struct tscodec_out keys;
    int64_t count;
};

/* Whether op may change its key (ADD and BARRIER are numbered by run_relay_comb.c; APPEND, QUEUE_PUSH and
 * MULTI_SET are tagged TS_SET). */
static int run_relay_ops_writes(int op)
{
    return op == TS_SET || op == TS_APPEND || op == TS_COMPARE_SET || op == TS_DELETE_KEY || op == TS_QUEUE_PUSH ||
           op == TS_QUEUE_POP;
}

/* A call for c (answering into s), holding c until it completes (a write: as c's write in flight, numbered
 * just before); NULL (c closed) when out of memory. */
static struct run_relay_call *run_relay_ops_call(struct run_relay *r, struct run_relay_conn *c,
                                                 struct run_relay_slot *s, int op)
{
    struct run_relay_call *k = calloc(1, sizeof *k);
    if (!k) {
        run_relay_close(r, c, "out of memory");
        return NULL;
    }
    *k = (struct run_relay_call){r, c, s, op, c->pseq, run_relay_ops_writes(op) ? c->wseq : 0, {0}, 0};
    c->refs++;
    r->st.upstream_ops++;
    return k;
}

/* Let go of a call (a write's answer came, or it never will). */
static void run_relay_ops_call_free(struct run_relay_call *k)
{
    run_relay_comb_write_done(k->c, k->wseq);
    k->c->refs--;
    free(k->keys.p);
    free(k);
}

/* Whether a completed call still has someone to answer: the relay is not closing and c is open. */
static int run_relay_ops_live(const struct run_relay_call *k)
{
    return !k->r->closing && !k->c->dead;
}

/* A submit failed: undo the call and close its connection. */
static void run_relay_ops_unsent(struct run_relay_call *k, int rc)
{
    struct run_relay *r = k->r;
    struct run_relay_conn *c = k->c;
    int op = k->op;
    run_relay_ops_call_free(k);
    run_relay_upstream_failed(r, c, tscodec_name(op), rc, "");
}

/* Completion of a call whose reply is only a status: SET, APPEND, MULTI_SET (no reply bytes). */
static void run_relay_ops_status_done(muster_t *m, const muster_reply *rep, void *arg)
{
    (void)m;
    struct run_relay_call *k = arg;
    if (run_relay_ops_live(k) && rep->err != MUSTER_OK)
        run_relay_upstream_failed(k->r, k->c, tscodec_name(k->op), rep->err, rep->detail);
    run_relay_ops_call_free(k);
}

/* Completion of COMPARE_SET (the value the caller compares), DELETE_KEY (1 when the key existed), CHECK
 * (READY / NOT_READY), QUEUE_POP (the length before, then the value when there was one) and QUEUE_LEN. */
static void run_relay_ops_value_done(muster_t *m, const muster_reply *rep, void *arg)
{
    (void)m;
    struct run_relay_call *k = arg;
    if (!run_relay_ops_live(k)) {
        run_relay_ops_call_free(k);
        return;
    }
    if (rep->err != MUSTER_OK) {
        run_relay_upstream_failed(k->r, k->c, tscodec_name(k->op), rep->err, rep->detail);
    } else {
        struct tscodec_sink sk = run_relay_slot_sink(k->s);
        switch (k->op) {
        case TS_COMPARE_SET: tscodec_put_blob(&sk, rep->value, rep->len); break;
        case TS_CHECK: tscodec_put_u8(&sk, rep->number ? TS_READY : TS_NOT_READY); break;
        case TS_QUEUE_POP:
            tscodec_put_i64(&sk, rep->number);
            if (rep->number > 0)
                tscodec_put_blob(&sk, rep->value, rep->len);
            break;
        default: tscodec_put_i64(&sk, rep->number); break; /* DELETE_KEY, QUEUE_LEN */
        }
        run_relay_slot_done(k->s);
    }
    run_relay_ops_call_free(k);
}

/* Submit a call whose completion is fn; c is closed when it cannot be sent. */
#define RELAY_SUBMIT(k, expr)                                                                                   \
    do {                                                                                                        \
        int rc_ = (expr);                                                                                       \
        if (rc_ != MUSTER_OK)                                                                                   \
            run_relay_ops_unsent((k), rc_);                                                                     \
    } while (0)

/* Requests with one key: set, compare_set, get, add, delete_key, append, barrier, and the queue ops. */
static void run_relay_ops_single(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    char *k = run_relay_ops_key1(r, c, q);
    if (!k)
        return;
    struct run_relay_slot *s = NULL;
    int wants_slot = q->op == TS_COMPARE_SET || q->op == TS_GET || q->op == TS_ADD || q->op == TS_DELETE_KEY ||
                     q->op == TS_BARRIER || q->op == TS_QUEUE_POP || q->op == TS_QUEUE_LEN;
    if (wants_slot && !(s = run_relay_slot_new(r, c))) {
        free(k);
        return;
    }
    struct run_relay_call *call = NULL;
    if (run_relay_ops_writes(q->op))
        run_relay_comb_wrote(r, c, k);
    switch (q->op) {
    case TS_SET:
        if ((call = run_relay_ops_call(r, c, NULL, TS_SET)))
            RELAY_SUBMIT(call, muster_async_set(r->up, k, q->b[1].p, q->b[1].len, 0, run_relay_ops_status_done, call));
        break;
    case TS_APPEND:
        /* Tagged as a SET: a status-only call that answers nothing. */
        if ((call = run_relay_ops_call(r, c, NULL, TS_SET)))
            RELAY_SUBMIT(call,
                         muster_async_append(r->up, k, q->b[1].p, q->b[1].len, 0, run_relay_ops_status_done, call));
        break;
    case TS_COMPARE_SET:
        if ((call = run_relay_ops_call(r, c, s, TS_COMPARE_SET)))
            RELAY_SUBMIT(call, muster_async_compare_set(r->up, k, q->b[1].p, q->b[1].len, q->b[2].p, q->b[2].len, 0,
                                                        run_relay_ops_value_done, call));
        break;
    case TS_DELETE_KEY:
        if ((call = run_relay_ops_call(r, c, s, TS_DELETE_KEY)))
            RELAY_SUBMIT(call, muster_async_delete(r->up, k, 0, run_relay_ops_value_done, call));
        break;
    case TS_QUEUE_PUSH:
        if ((call = run_relay_ops_call(r, c, NULL, TS_SET)))
            RELAY_SUBMIT(call, muster_async_queue_push(r->up, k, q->b[1].p, q->b[1].len, 0, run_relay_ops_status_done,
                                                       call));
        break;
    case TS_QUEUE_POP:
        if ((call = run_relay_ops_call(r, c, s, TS_QUEUE_POP)))
            RELAY_SUBMIT(call, muster_async_queue_pop(r->up, k, 0, run_relay_ops_value_done, call));
        break;
    case TS_QUEUE_LEN:
        if ((call = run_relay_ops_call(r, c, s, TS_QUEUE_LEN)))
            RELAY_SUBMIT(call, muster_async_queue_len(r->up, k, 0, run_relay_ops_value_done, call));
        break;
    case TS_GET: run_relay_comb_get(r, c, s, k); break;
    case TS_ADD: run_relay_comb_add(r, c, s, k, q->i64, 0); break;
    case TS_BARRIER:
        /* Parked from now: its count's answer releases it, or it waits at musterd for the rest. */
        c->pkeys = malloc(sizeof *c->pkeys);
        if (!c->pkeys) {
            run_relay_close(r, c, "out of memory");
            break;
        }
        c->pkeys[0] = k;
        c->npkeys = 1;
        c->world = q->i64;
        c->park = RELAY_PARK_BARRIER;
        c->pslot = s;
        r->st.parked++;
        run_relay_comb_add(r, c, NULL, k, 1, q->i64);
        return; /* c keeps k */
    }
    free(k);
}

/* CHECK and WAIT: READY / STOP_WAITING when every key is present; a WAIT is parked otherwise. */
static void run_relay_ops_check(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    char **keys = run_relay_ops_keys(r, c, q->keys, q->klens, q->n);
    struct run_relay_slot *s = keys ? run_relay_slot_new(r, c) : NULL;
    if (!s) {
        run_relay_ops_free_keys(keys, q->n);
        return;
    }
    struct tscodec_sink sk = run_relay_slot_sink(s);
    if (q->n == 0) {
        tscodec_put_u8(&sk, q->op == TS_CHECK ? TS_READY : TS_STOP_WAITING);
        run_relay_slot_done(s);
    } else if (q->op == TS_CHECK) {
        struct run_relay_call *k = run_relay_ops_call(r, c, s, TS_CHECK);
        if (k)
            RELAY_SUBMIT(k, muster_async_check(r->up, (const char *const *)keys, q->n, 0, run_relay_ops_value_done,
                                               k));
    } else {
        c->pkeys = keys;
        c->npkeys = q->n;
        c->park = RELAY_PARK_WAIT;
        c->pslot = s;
        r->st.parked++;
        run_relay_comb_park(r, c, 0);
        return; /* c keeps keys */
    }
    run_relay_ops_free_keys(keys, q->n);
}

/* MULTI_GET: every value back to back, empty for absent keys: one GET each, answered in order. */
static void run_relay_ops_multi_get(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    char **keys = run_relay_ops_keys(r, c, q->keys, q->klens, q->n);
    if (!keys)
        return;
    for (size_t i = 0; i < q->n && !c->dead; i++) {
        struct run_relay_slot *s = run_relay_slot_new(r, c);
        if (s)
            run_relay_comb_get(r, c, s, keys[i]);
    }
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
    if (!vals || !lens) {
        run_relay_close(r, c, "out of memory");
    } else if (q->n) {
        for (size_t i = 0; i < q->n; i++) {
            vals[i] = q->vals[i];
            lens[i] = q->vlens[i];
            run_relay_comb_wrote(r, c, keys[i]);
        }
        struct run_relay_call *k = run_relay_ops_call(r, c, NULL, TS_SET);
        if (k)
            RELAY_SUBMIT(k, muster_async_multi_set(r->up, (const char *const *)keys, (const void *const *)vals,
                                                   lens, q->n, 0, run_relay_ops_status_done, k));
    }
    free(vals);
    free(lens);
    run_relay_ops_free_keys(keys, q->n);
}

/* Completion of one page of GETNUMKEYS or LIST_KEYS: keep its keys, then ask for the next or answer. */
static void run_relay_ops_list_done(muster_t *m, const muster_reply *rep, void *arg)
{
    (void)m;
    struct run_relay_call *k = arg;
    struct run_relay *r = k->r;
    if (!run_relay_ops_live(k)) {
        run_relay_ops_call_free(k);
        return;
    }
    if (rep->err != MUSTER_OK) {
        run_relay_upstream_failed(r, k->c, tscodec_name(k->op), rep->err, rep->detail);
        run_relay_ops_call_free(k);
        return;
    }
    struct tscodec_sink ks = tscodec_out_sink(&k->keys);
    for (size_t i = 0; i < rep->n; i++) {
        char *tk = malloc(strlen(rep->keys[i]) + 1);
        if (tk)
            tscodec_put_blob(&ks, tk, run_relay_torch_key(r, rep->keys[i], tk));
        else
            k->keys.oom = 1;
        free(tk);
    }
    k->count += (int64_t)rep->n;
    if (rep->more && rep->n) {
        r->st.upstream_ops++;
        int rc = muster_async_list(r->up, r->prefix, rep->keys[rep->n - 1], 1000, 0, run_relay_ops_list_done, k);
        if (rc != MUSTER_OK)
            run_relay_ops_unsent(k, rc);
        return;
    }
    struct tscodec_sink sk = run_relay_slot_sink(k->s);
    tscodec_put_i64(&sk, k->count);
    if (k->op == TS_LIST_KEYS)
        tscodec_put(&sk, k->keys.p, k->keys.len);
    if (k->keys.oom)
        k->s->out.oom = 1; /* the connection is closed: a short list cannot be sent */
    run_relay_slot_done(k->s);
    run_relay_ops_call_free(k);
}

/* GETNUMKEYS and LIST_KEYS: the keys of this generation (under the prefix), listed page by page. */
static void run_relay_ops_list(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    struct run_relay_slot *s = run_relay_slot_new(r, c);
    struct run_relay_call *k = s ? run_relay_ops_call(r, c, s, q->op) : NULL;
    if (k)
        RELAY_SUBMIT(k, muster_async_list(r->up, r->prefix, NULL, 1000, 0, run_relay_ops_list_done, k));
}

/* A reply known at once, in its place in c's queue. */
static void run_relay_ops_now(struct run_relay *r, struct run_relay_conn *c, int u8, int has_u32, uint32_t u32)
{
    struct run_relay_slot *s = run_relay_slot_new(r, c);
    if (!s)
        return;
    struct tscodec_sink sk = run_relay_slot_sink(s);
    if (has_u32)
        tscodec_put_u32(&sk, u32);
    else
        tscodec_put_u8(&sk, (uint8_t)u8);
    run_relay_slot_done(s);
}

/* Serve one decoded request of c (run_relay_ops.c); c may be parked or closed by it. */
void run_relay_ops_dispatch(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q)
{
    r->st.requests++;
    /* Its next request after a queue push released it: the value is no longer promised (it pops it now). */
    run_relay_unpromise(r, c);
    /* What this request sends upstream must reach musterd after c's earlier one, gathered this turn. */
    if (q->op != TS_CANCEL_WAIT && q->op != TS_PING && q->op != TS_VALIDATE)
        run_relay_comb_flush_conn(r, c);
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
        run_relay_ops_now(r, c, TS_WAIT_CANCELED, 0, 0);
        return;
    case TS_PING: run_relay_ops_now(r, c, 0, 1, q->u32); return;
    case TS_WATCH_KEY: {
        char *k = run_relay_ops_key1(r, c, q);
        if (k)
            run_relay_watch_key(r, c, k);
        return;
    }
    default: run_relay_ops_single(r, c, q); return;
    }
}

/* c no longer holds a value a queue push released for it (it sent its next request, or it is freed). */
void run_relay_unpromise(struct run_relay *r, struct run_relay_conn *c)
{
    if (!c->promised)
        return;
    free(c->promised);
    c->promised = NULL;
    r->npromised--;
}

/* Drop c's parked request without an answer (its slot goes out empty). */
void run_relay_ops_unpark(struct run_relay_conn *c)
{
    if (c->pslot)
        run_relay_slot_done(c->pslot);
    run_relay_ops_free_keys(c->pkeys, c->npkeys);
    c->pslot = NULL;
    c->pkeys = NULL;
    c->npkeys = 0;
    c->park = RELAY_PARK_NONE;
    c->pseq++;
}

/* Answer c's WAIT or BARRIER (STOP_WAITING) and end its park. */
void run_relay_ops_release(struct run_relay_conn *c)
{
    if (c->pslot) {
        struct tscodec_sink sk = run_relay_slot_sink(c->pslot);
        tscodec_put_u8(&sk, TS_STOP_WAITING);
    }
    run_relay_ops_unpark(c);
}
