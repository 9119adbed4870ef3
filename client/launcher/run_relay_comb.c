/*
 * What the relay combines: requests of the node's workers for the same key
 * that can ride on one upstream call and still get, each of them, the
 * answer musterd would have given it alone (docs/launcher.md, "what the
 * relay combines").
 *
 *   - ADD (and BARRIER's count): while two adds of a key are in flight,
 *     the adds of that key that arrive wait in one batch, sent as a single
 *     add of their sum once one of those answers.  The answer v is the
 *     count after the whole batch; the batch's requests are handed base +
 *     the running sum in arrival order (base = v - sum), which is what each
 *     would have seen had the adds run one after another at that point.
 *   - GET: likewise, the gets of a key that arrive while two are in flight
 *     wait for a later call, so every get reads the store after it arrived
 *     (never an answer read before it).
 *   - WAIT of one key: the first look joins a check of that key already in
 *     flight.  A key written after that check ran shows up as a watch event,
 *     which releases the WAIT (or has it looked at again when it comes
 *     before the check's answer): joining only delays.
 *
 * A connection whose request waits in a batch decodes nothing more until
 * the batch is sent, so its own later requests still reach musterd after it.
 */
#include "run_relay.h"

#include <stdlib.h>
#include <string.h>

/* Buckets of the key table. */
#define RELAY_COMB_BUCKETS 256
/* Calls of one key and kind in flight before the next requests wait in a batch: two keep the upstream
 * busy while one answer is on its way back, and combining starts only where requests pile up. */
#define RELAY_COMB_DEPTH 2

/* The kinds of combined calls. */
enum run_relay_comb_kind { COMB_ADD, COMB_GET, COMB_WAIT, COMB_KINDS };

/* One request riding on a combined call. */
struct run_relay_member {
    struct run_relay_conn *c;
    struct run_relay_slot *s;  /* its reply (NULL for WAIT and BARRIER: c->pslot, checked by pseq) */
    uint64_t pseq;
    int64_t delta, world;      /* ADD: the increment; BARRIER (s NULL): the count that releases it */
};

/* One upstream call and the requests riding on it. */
struct run_relay_batch {
    struct run_relay *r;
    struct run_relay_key *key;
    enum run_relay_comb_kind kind;
    int64_t sum;
    struct run_relay_member *m;
    size_t n, cap;
};

/* The combining state of one native key, by kind: calls in flight, the last one sent (while in flight)
 * and the batch waiting to be sent. */
struct run_relay_key {
    struct run_relay_key *next;
    uint32_t hash;
    unsigned inflight[COMB_KINDS];
    struct run_relay_batch *last[COMB_KINDS], *queued[COMB_KINDS];
    char name[];
};

/* FNV-1a of a native key. */
static uint32_t run_relay_comb_hash(const char *k)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)k; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

/* The entry of key k, made when absent; NULL when out of memory. */
static struct run_relay_key *run_relay_comb_key(struct run_relay *r, const char *k)
{
    if (!r->keys) {
        if (!(r->keys = calloc(RELAY_COMB_BUCKETS, sizeof *r->keys)))
            return NULL;
        r->nbuckets = RELAY_COMB_BUCKETS;
    }
    uint32_t h = run_relay_comb_hash(k);
    struct run_relay_key **b = &r->keys[h % r->nbuckets];
    for (struct run_relay_key *e = *b; e; e = e->next)
        if (e->hash == h && strcmp(e->name, k) == 0)
            return e;
    size_t len = strlen(k);
    struct run_relay_key *e = calloc(1, sizeof *e + len + 1);
    if (!e)
        return NULL;
    memcpy(e->name, k, len + 1);
    e->hash = h;
    e->next = *b;
    *b = e;
    return e;
}

/* Free e when nothing of it is in flight or queued. */
static void run_relay_comb_forget(struct run_relay *r, struct run_relay_key *e)
{
    for (int i = 0; i < COMB_KINDS; i++)
        if (e->inflight[i] || e->queued[i])
            return;
    for (struct run_relay_key **p = &r->keys[e->hash % r->nbuckets]; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            free(e);
            return;
        }
}

/* Add a member to b; 0, or -1 when out of memory. */
static int run_relay_comb_join(struct run_relay_batch *b, const struct run_relay_member *m)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4;
        struct run_relay_member *v = realloc(b->m, cap * sizeof *v);
        if (!v)
            return -1;
        b->m = v;
        b->cap = cap;
    }
    b->m[b->n++] = *m;
    b->sum += m->delta;
    m->c->refs++;
    return 0;
}

/* A new batch of kind for e. */
static struct run_relay_batch *run_relay_comb_batch(struct run_relay *r, struct run_relay_key *e,
                                                    enum run_relay_comb_kind kind)
{
    struct run_relay_batch *b = calloc(1, sizeof *b);
    if (b) {
        b->r = r;
        b->key = e;
        b->kind = kind;
    }
    return b;
}

/* Let go of b's members and free it. */
static void run_relay_comb_drop(struct run_relay_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        b->m[i].c->refs--;
    free(b->m);
    free(b);
}

static void run_relay_comb_done(muster_t *m, const muster_reply *rep, void *arg);

/* The name of kind, for messages. */
static const char *run_relay_comb_name(const struct run_relay_member *m, enum run_relay_comb_kind kind)
{
    return kind == COMB_GET ? "get" : kind == COMB_WAIT ? "wait" : m->s ? "add" : "barrier";
}

/* Send b upstream as e's call in flight; on failure its members' connections are closed. */
static void run_relay_comb_send(struct run_relay *r, struct run_relay_batch *b)
{
    struct run_relay_key *e = b->key;
    const char *k = e->name;
    int rc = b->kind == COMB_ADD   ? muster_async_add(r->up, k, b->sum, 0, run_relay_comb_done, b)
             : b->kind == COMB_GET ? muster_async_get(r->up, k, 0, 0, run_relay_comb_done, b)
                                   : muster_async_check(r->up, &k, 1, 0, run_relay_comb_done, b);
    r->st.upstream_ops++;
    if (rc == MUSTER_OK) {
        e->inflight[b->kind]++;
        e->last[b->kind] = b;
        return;
    }
    for (size_t i = 0; i < b->n; i++)
        run_relay_upstream_failed(r, b->m[i].c, run_relay_comb_name(&b->m[i], b->kind), rc, "");
    run_relay_comb_drop(b);
}

/* Whether member m's request is still owed an answer. */
static int run_relay_comb_live(const struct run_relay_member *m)
{
    return !m->c->dead && (m->s || (m->c->park != RELAY_PARK_NONE && m->c->pseq == m->pseq));
}

/* Hand one member its share of a successful answer. */
static void run_relay_comb_answer(struct run_relay *r, struct run_relay_batch *b, struct run_relay_member *m,
                                  const muster_reply *rep, int64_t count)
{
    struct run_relay_conn *c = m->c;
    if (b->kind == COMB_ADD && m->s) {
        struct tscodec_sink sk = run_relay_slot_sink(m->s);
        tscodec_put_i64(&sk, count);
        run_relay_slot_done(m->s);
    } else if (b->kind == COMB_GET) {
        struct tscodec_sink sk = run_relay_slot_sink(m->s);
        tscodec_put_blob(&sk, rep->err == MUSTER_OK ? rep->value : NULL, rep->err == MUSTER_OK ? rep->len : 0);
        run_relay_slot_done(m->s);
    } else if (b->kind == COMB_ADD ? count >= m->world : rep->number != 0) {
        run_relay_ops_release(c);
    } else {
        run_relay_ops_not_yet(r, c);
    }
}

/* A combined call answered: hand each member its share, then send the batch that waited for it. */
static void run_relay_comb_done(muster_t *m, const muster_reply *rep, void *arg)
{
    (void)m;
    struct run_relay_batch *b = arg;
    struct run_relay *r = b->r;
    struct run_relay_key *e = b->key;
    if (r->closing) {
        run_relay_comb_drop(b);
        return;
    }
    e->inflight[b->kind]--;
    if (e->last[b->kind] == b)
        e->last[b->kind] = NULL;
    int ok = rep->err == MUSTER_OK || (b->kind == COMB_GET && rep->err == MUSTER_ENOTFOUND);
    int64_t count = rep->number - b->sum; /* ADD: the count before the batch */
    uint64_t *combined = b->kind == COMB_ADD   ? &r->st.adds_combined
                         : b->kind == COMB_GET ? &r->st.gets_combined
                                               : &r->st.waits_joined;
    *combined += b->n - 1;
    for (size_t i = 0; i < b->n; i++) {
        struct run_relay_member *mb = &b->m[i];
        count += mb->delta;
        if (!run_relay_comb_live(mb))
            continue;
        if (!ok)
            run_relay_upstream_failed(r, mb->c, run_relay_comb_name(mb, b->kind), rep->err, rep->detail);
        else
            run_relay_comb_answer(r, b, mb, rep, count);
    }
    enum run_relay_comb_kind kind = b->kind;
    run_relay_comb_drop(b);
    struct run_relay_batch *next = e->queued[kind];
    if (next && e->inflight[kind] < RELAY_COMB_DEPTH) {
        e->queued[kind] = NULL;
        for (size_t j = 0; j < next->n; j++)
            next->m[j].c->deferred--;
        if (r->dead)
            run_relay_comb_drop(next);
        else
            run_relay_comb_send(r, next);
    }
    run_relay_comb_forget(r, e);
}

/* Start or join e's call of kind for member m; 0, or -1 with m's connection closed. */
static int run_relay_comb_submit(struct run_relay *r, const char *k, enum run_relay_comb_kind kind,
                                 const struct run_relay_member *m)
{
    struct run_relay_key *e = run_relay_comb_key(r, k);
    struct run_relay_batch *b = NULL;
    /* WAIT joins the look in flight; ADD and GET wait for a later call (so it reads after they came),
     * once RELAY_COMB_DEPTH of theirs are in flight. */
    int join = kind == COMB_WAIT && e && e->last[kind];
    int queue = !join && e && e->inflight[kind] >= RELAY_COMB_DEPTH;
    if (e)
        b = join ? e->last[kind] : queue ? e->queued[kind] : NULL;
    if (e && !b && (b = run_relay_comb_batch(r, e, kind)) && queue)
        e->queued[kind] = b;
    if (!b || run_relay_comb_join(b, m) != 0) {
        if (b && !b->n && e->last[kind] != b && e->queued[kind] != b)
            free(b);
        if (e)
            run_relay_comb_forget(r, e);
        run_relay_close(r, m->c, "out of memory");
        return -1;
    }
    if (queue) {
        m->c->deferred++;
    } else if (!join) {
        run_relay_comb_send(r, b);
        run_relay_comb_forget(r, e); /* when the send failed */
    }
    return 0;
}

/* ADD of key k by c, answered into s; with s NULL, BARRIER's count for c's park (released at world). */
int run_relay_comb_add(struct run_relay *r, struct run_relay_conn *c, struct run_relay_slot *s, const char *k,
                       int64_t delta, int64_t world)
{
    struct run_relay_member m = {c, s, c->pseq, delta, world};
    return run_relay_comb_submit(r, k, COMB_ADD, &m);
}

/* GET of key k by c, answered into s. */
int run_relay_comb_get(struct run_relay *r, struct run_relay_conn *c, struct run_relay_slot *s, const char *k)
{
    struct run_relay_member m = {c, s, c->pseq, 0, 0};
    return run_relay_comb_submit(r, k, COMB_GET, &m);
}

/* The first look of c's parked single-key WAIT (c->pkeys[0]). */
int run_relay_comb_wait(struct run_relay *r, struct run_relay_conn *c)
{
    struct run_relay_member m = {c, NULL, c->pseq, 0, 0};
    return run_relay_comb_submit(r, c->pkeys[0], COMB_WAIT, &m);
}

/* Free the combining table (every call is done: the handle is closed). */
void run_relay_comb_free(struct run_relay *r)
{
    for (size_t i = 0; r->keys && i < r->nbuckets; i++)
        while (r->keys[i]) {
            struct run_relay_key *e = r->keys[i];
            r->keys[i] = e->next;
            for (int k = 0; k < COMB_KINDS; k++)
                if (e->queued[k])
                    run_relay_comb_drop(e->queued[k]);
            free(e);
        }
    free(r->keys);
    r->keys = NULL;
}
