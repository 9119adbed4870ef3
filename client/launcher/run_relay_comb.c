/*
 * What the relay combines, and where it parks: requests of the node's
 * workers for the same key that can ride on one upstream call and still
 * get, each of them, the answer musterd would have given it alone (a get
 * or wait that joins a call in flight: had it reached musterd up to one
 * round trip sooner; docs/launcher.md, "what the relay combines").
 *
 *   - ADD (and BARRIER's count): while two adds of a key are in flight,
 *     the adds of that key that arrive wait in one batch, sent as a single
 *     add of their sum once one of those answers.  The answer v is the
 *     count after the whole batch; the batch's requests are handed base +
 *     the running sum in arrival order (base = v - sum), which is what each
 *     would have seen had the adds run one after another at that point.
 *     An add whose delta would make the batch's sum overflow int64 goes on
 *     its own, and a batch that overflows at musterd is sent again add by
 *     add: only the add that overflows fails, as it would one by one.  An
 *     ADD of 0 (torch's barrier reading its count) that arrives while an add
 *     of the key is in flight joins it, as a get would (below), and reads
 *     the count after it.
 *   - GET: a get of a key that arrives while a get of it is in flight
 *     joins that call (run_relay_comb_ride): a node's workers asking in
 *     different loop turns share it.  Not when a write of the key went
 *     upstream after the call (it is sealed) or a write of the worker's own
 *     sent after it is unanswered; then, as for adds, two are in flight and
 *     later gets wait in a batch for a later call.  A joined get reads what
 *     musterd held after its worker's writes and after everything the node
 *     heard from the store before it came (musterd answers the connection
 *     in order); only a write made elsewhere within the round trip that the
 *     worker learnt of outside the store can be missed.
 *   - WAIT of one key, and BARRIER once its count is short: parked at
 *     musterd as a wait (WaitReq, with at_least for a count), so a write of
 *     the key from anywhere releases it and the relay watches nothing.
 *     Later waits of the key with the same count join the wait in flight
 *     under the get's rules, or wait in a batch sent when it answers (or
 *     merged into its re-send after a timeout).  A WAIT of several keys, or
 *     a count that differs from the batch's, parks alone.
 *     A wait released by a queue push (TCPStore's queues: one waiter per
 *     push) releases one of the batch's workers; the others wait again.
 *
 * A connection whose ADD or GET waits in a batch decodes nothing more until
 * the batch is sent, so its own later requests still reach musterd after it
 * (a parked connection decodes nothing but CANCEL_WAIT anyway).  Upstream
 * waits last RELAY_PARK_CHUNK_MS and are sent again while anyone still
 * waits: TCPStore waits never time out on the server.  One whose workers
 * all gave up (CANCEL_WAIT, a closed connection) is left to its timeout.
 */
#include "run_relay.h"

#include <stdlib.h>
#include <string.h>

/* Buckets of the key table. */
#define RELAY_COMB_BUCKETS 256
/* Calls of one key and kind in flight before the next requests wait in a batch: for ADD and GET two keep
 * the upstream busy while one answer is on its way back, and combining starts only where requests pile up;
 * a wait answers only when the key is written, so one is enough. */
#define RELAY_COMB_DEPTH(kind) ((kind) == COMB_WAIT ? 1u : 2u)
/* The timeout of one upstream wait: it is sent again when it runs out and someone still waits. */
#define RELAY_PARK_CHUNK_MS 60000u

/* The kinds of combined calls. */
enum run_relay_comb_kind { COMB_ADD, COMB_GET, COMB_WAIT, COMB_KINDS };

/* One request riding on a combined call. */
struct run_relay_member {
    struct run_relay_conn *c;
    struct run_relay_slot *s;  /* its reply (NULL for WAIT and BARRIER: c->pslot, checked by pseq) */
    uint64_t pseq;
    int64_t delta, world;      /* ADD: the increment; BARRIER (s NULL): the count that releases it; a
                                * wait: its at_least (0: presence) */
};

/* One upstream call and the requests riding on it. */
struct run_relay_batch {
    struct run_relay *r;
    struct run_relay_key *key;     /* NULL: a wait parked alone (its member's keys) */
    enum run_relay_comb_kind kind;
    int64_t sum;
    int64_t at_least;              /* a wait: the count that releases it (0: its keys present) */
    uint64_t seq;                  /* its place among the upstream calls (r->upseq when sent) */
    size_t oidx;                   /* while open: its place in r->open */
    struct run_relay_member *m;
    size_t n, cap;
};

/* The combining state of one native key, by kind: calls in flight, the last one sent (while in flight)
 * and the batch waiting to be sent. */
struct run_relay_key {
    struct run_relay_key *next;
    uint32_t hash;
    unsigned inflight[COMB_KINDS];
    struct run_relay_batch *queued[COMB_KINDS];
    struct run_relay_batch *open[COMB_KINDS]; /* gathering this loop turn's requests (r->open) */
    struct run_relay_batch *flying[COMB_KINDS]; /* the call of each kind sent last, while in flight and no
                                                 * other write of the key was sent after it: later gets,
                                                 * waits and adds of 0 join it */
    int64_t at_least;              /* the waits' count while one is in flight or queued */
    unsigned holds;                /* answers being handed out (a barrier short of its count parks on it) */
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

/* The entry of key k (hash h), or NULL when it has none. */
static struct run_relay_key *run_relay_comb_find(const struct run_relay *r, const char *k, uint32_t h)
{
    if (!r->keys)
        return NULL;
    for (struct run_relay_key *e = r->keys[h % r->nbuckets]; e; e = e->next)
        if (e->hash == h && strcmp(e->name, k) == 0)
            return e;
    return NULL;
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
    struct run_relay_key *found = run_relay_comb_find(r, k, h);
    if (found)
        return found;
    struct run_relay_key **b = &r->keys[h % r->nbuckets];
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
    if (e->holds)
        return;
    for (int i = 0; i < COMB_KINDS; i++)
        if (e->inflight[i] || e->queued[i] || e->open[i])
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
static int run_relay_comb_add_alone(struct run_relay *r, struct run_relay_key *e, const struct run_relay_member *m);

/* The name of kind, for messages. */
static const char *run_relay_comb_name(const struct run_relay_member *m, enum run_relay_comb_kind kind)
{
    return kind == COMB_GET ? "get" : kind == COMB_WAIT ? "wait" : m->s ? "add" : "barrier";
}

/* Submit b's upstream call: an add of its sum, a get, or a wait (a batch parked alone waits on its
 * member's keys). */
static int run_relay_comb_call(struct run_relay *r, struct run_relay_batch *b)
{
    if (b->kind == COMB_ADD)
        return muster_async_add(r->up, b->key->name, b->sum, 0, run_relay_comb_done, b);
    if (b->kind == COMB_GET)
        return muster_async_get(r->up, b->key->name, 0, 0, run_relay_comb_done, b);
    const struct run_relay_conn *c = b->m[0].c;
    const char *one = b->key ? b->key->name : c->pkeys[0];
    if (b->at_least > 0)
        return muster_async_wait_count(r->up, one, b->at_least, RELAY_PARK_CHUNK_MS, run_relay_comb_done, b);
    if (b->key || c->npkeys == 1)
        return muster_async_wait_skip(r->up, one, run_relay_comb_promised(r, one), RELAY_PARK_CHUNK_MS,
                                      run_relay_comb_done, b);
    return muster_async_wait(r->up, (const char *const *)c->pkeys, c->npkeys, RELAY_PARK_CHUNK_MS,
                             run_relay_comb_done, b);
}

/* No call of e's key sent so far may be joined any more: a write of the key goes upstream after them. */
static void run_relay_comb_seal(struct run_relay_key *e)
{
    if (e)
        e->flying[COMB_ADD] = e->flying[COMB_GET] = e->flying[COMB_WAIT] = NULL;
}

/* b went upstream: number it; it becomes the call of its kind that later requests of its key join, and an
 * add, a write, seals the key's others and is its members' write in flight. */
static void run_relay_comb_sent(struct run_relay *r, struct run_relay_batch *b)
{
    struct run_relay_key *e = b->key;
    b->seq = ++r->upseq;
    if (e)
        e->inflight[b->kind]++;
    if (b->kind == COMB_ADD) {
        run_relay_comb_seal(e);
        for (size_t i = 0; i < b->n; i++)
            b->m[i].c->wseq = b->seq;
    }
    if (e)
        e->flying[b->kind] = b;
}

/* An add's answer came: it is no longer its members' write in flight (run_relay_comb_ride). */
static void run_relay_comb_landed(const struct run_relay_batch *b)
{
    for (size_t i = 0; b->kind == COMB_ADD && i < b->n; i++)
        if (b->m[i].c->wseq == b->seq)
            b->m[i].c->wseq = 0;
}

/* c sends a write of native key k upstream now: no get or wait of k sent before it may be joined any more, nor,
 * by c's later requests until its answer comes, any call sent before it; its number (run_relay_comb_landed's
 * counterpart for the ops: run_relay_comb_write_done). */
uint64_t run_relay_comb_wrote(struct run_relay *r, struct run_relay_conn *c, const char *k)
{
    c->wseq = ++r->upseq;
    run_relay_comb_seal(run_relay_comb_find(r, k, run_relay_comb_hash(k)));
    return c->wseq;
}

/* The answer of c's write numbered seq came: it is no longer c's write in flight. */
void run_relay_comb_write_done(struct run_relay_conn *c, uint64_t seq)
{
    if (seq && c->wseq == seq)
        c->wseq = 0;
}

/* Send b upstream as one of its key's calls in flight; on failure its members' connections are closed. */
static void run_relay_comb_send(struct run_relay *r, struct run_relay_batch *b)
{
    int rc = run_relay_comb_call(r, b);
    r->st.upstream_ops++;
    if (rc == MUSTER_OK) {
        run_relay_comb_sent(r, b);
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
    } else if (b->kind == COMB_WAIT || count >= m->world) {
        run_relay_ops_release(c);
    } else {
        run_relay_comb_park(r, c, m->world); /* a barrier short of its count */
    }
}

/* Keep only b's members still owed an answer. */
static void run_relay_comb_prune(struct run_relay_batch *b)
{
    size_t j = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (run_relay_comb_live(&b->m[i]))
            b->m[j++] = b->m[i];
        else
            b->m[i].c->refs--;
    }
    b->n = j;
}

/* A wait of b ran out with workers still waiting: send it again, with the batch that waited behind it. */
static void run_relay_comb_rewait(struct run_relay *r, struct run_relay_batch *b)
{
    struct run_relay_key *e = b->key;
    struct run_relay_batch *q = e ? e->queued[COMB_WAIT] : NULL;
    if (q) {
        e->queued[COMB_WAIT] = NULL;
        for (size_t i = 0; i < q->n; i++)
            if (run_relay_comb_join(b, &q->m[i]) != 0)
                run_relay_close(r, q->m[i].c, "out of memory");
        run_relay_comb_drop(q);
    }
    run_relay_comb_prune(b);
    if (!b->n || r->dead)
        run_relay_comb_drop(b);
    else
        run_relay_comb_send(r, b);
}

/* The workers still to pop a value a queue push released their WAIT of key for. */
uint64_t run_relay_comb_promised(const struct run_relay *r, const char *key)
{
    uint64_t n = 0;
    /* Nearly always none: the scan runs only while a queue push's release is promised to a worker. */
    for (size_t i = 0; r->npromised && i < r->nconns; i++) {
        const struct run_relay_conn *c = r->conns[i];
        n += !c->dead && c->promised && strcmp(c->promised, key) == 0;
    }
    return n;
}

/* A queue push released b's wait: musterd releases one wait per push, so one of b's workers (the first still
 * waiting) is released and the others wait again, as each would had it waited alone.  Until the released
 * worker sends its next request (its pop), the value it was released for is not the others': their wait
 * skips it (run_relay_comb_promised). */
static void run_relay_comb_handoff(struct run_relay *r, struct run_relay_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        struct run_relay_conn *c = b->m[i].c;
        if (!run_relay_comb_live(&b->m[i]))
            continue;
        run_relay_unpromise(r, c);
        if (c->npkeys == 1 && (c->promised = strdup(c->pkeys[0])))
            r->npromised++;
        run_relay_ops_release(c);
        break;
    }
    run_relay_comb_rewait(r, b);
}

/* Send e's batch of kind that waited for a call in flight, now that one answered. */
static void run_relay_comb_next(struct run_relay *r, struct run_relay_key *e, enum run_relay_comb_kind kind)
{
    struct run_relay_batch *next = e->queued[kind];
    if (!next || e->inflight[kind] >= RELAY_COMB_DEPTH(kind))
        return;
    e->queued[kind] = NULL;
    if (kind != COMB_WAIT)
        for (size_t j = 0; j < next->n; j++)
            next->m[j].c->deferred--;
    else
        run_relay_comb_prune(next);
    if (r->dead || !next->n)
        run_relay_comb_drop(next);
    else
        run_relay_comb_send(r, next);
}

/* A combined call answered: hand each member its share, then send the batch that waited for it. */
static void run_relay_comb_done(muster_t *m, const muster_reply *rep, void *arg)
{
    (void)m;
    struct run_relay_batch *b = arg;
    struct run_relay *r = b->r;
    struct run_relay_key *e = b->key;
    enum run_relay_comb_kind kind = b->kind;
    if (e && e->flying[kind] == b)
        e->flying[kind] = NULL;
    run_relay_comb_landed(b);
    if (r->closing) {
        run_relay_comb_drop(b);
        return;
    }
    if (e) {
        e->inflight[kind]--;
        e->holds++;
    }
    if (kind == COMB_WAIT && rep->err == MUSTER_ETIMEDOUT) {
        run_relay_comb_rewait(r, b);
    } else if (kind == COMB_ADD && rep->err == MUSTER_EOVERFLOW && b->n > 1) {
        /* The sum overflowed at musterd: each add again on its own, so a batch-mate of the one that
         * overflows (an add of 0, say) still gets its answer. */
        for (size_t i = 0; i < b->n; i++)
            if (run_relay_comb_live(&b->m[i]))
                run_relay_comb_add_alone(r, e, &b->m[i]);
        run_relay_comb_drop(b);
    } else if (kind == COMB_WAIT && rep->err == MUSTER_OK && rep->number) {
        run_relay_comb_handoff(r, b);
    } else {
        int ok = rep->err == MUSTER_OK || (kind == COMB_GET && rep->err == MUSTER_ENOTFOUND);
        /* ADD: the count before the batch, then after each member in arrival order; the sum never
         * overflowed (run_relay_comb_submit checks), and unsigned arithmetic keeps a partial count that
         * would leave int64 defined. */
        uint64_t count = (uint64_t)rep->number - (uint64_t)b->sum;
        uint64_t *combined = kind == COMB_ADD   ? &r->st.adds_combined
                             : kind == COMB_GET ? &r->st.gets_combined
                                                : &r->st.waits_joined;
        *combined += b->n - 1;
        for (size_t i = 0; i < b->n; i++) {
            struct run_relay_member *mb = &b->m[i];
            count += (uint64_t)mb->delta;
            if (!run_relay_comb_live(mb))
                continue;
            if (!ok) {
                run_relay_upstream_failed(r, mb->c, run_relay_comb_name(mb, kind), rep->err, rep->detail);
                continue;
            }
            run_relay_comb_answer(r, b, mb, rep, (int64_t)count);
        }
        run_relay_comb_drop(b);
    }
    if (e) {
        run_relay_comb_next(r, e, kind);
        e->holds--;
        run_relay_comb_forget(r, e);
    }
}

/* Send m's ADD of e's key upstream on its own, as one of the key's calls in flight: its delta would make
 * the batch's sum overflow, or the batch it rode in overflowed at musterd.  So only the add that
 * overflows fails, as it would one by one.  0, or -1 with m's connection closed. */
static int run_relay_comb_add_alone(struct run_relay *r, struct run_relay_key *e, const struct run_relay_member *m)
{
    struct run_relay_batch *b = run_relay_comb_batch(r, e, COMB_ADD);
    if (!b || run_relay_comb_join(b, m) != 0) {
        free(b);
        run_relay_close(r, m->c, "out of memory");
        return -1;
    }
    run_relay_comb_send(r, b);
    return 0;
}

/* Send a batch of one member on its own (a wait that cannot share its key's batch); 0, or -1 with m's
 * connection closed. */
static int run_relay_comb_alone(struct run_relay *r, enum run_relay_comb_kind kind, const struct run_relay_member *m)
{
    struct run_relay_batch *b = run_relay_comb_batch(r, NULL, kind);
    if (!b || run_relay_comb_join(b, m) != 0) {
        free(b);
        run_relay_close(r, m->c, "out of memory");
        return -1;
    }
    b->at_least = m->world;
    run_relay_comb_send(r, b);
    return 0;
}

/* The batch of kind gathering e's requests this loop turn, made (and listed in r->open) when absent; NULL
 * when out of memory. */
static struct run_relay_batch *run_relay_comb_open(struct run_relay *r, struct run_relay_key *e,
                                                   enum run_relay_comb_kind kind)
{
    if (e->open[kind])
        return e->open[kind];
    if (r->nopen == r->capopen) {
        size_t cap = r->capopen ? r->capopen * 2 : 64;
        struct run_relay_batch **v = realloc(r->open, cap * sizeof *v);
        if (!v)
            return NULL;
        r->open = v;
        r->capopen = cap;
    }
    struct run_relay_batch *b = run_relay_comb_batch(r, e, kind);
    if (b) {
        b->oidx = r->nopen;
        r->open[r->nopen++] = b;
        e->open[b->kind] = b;
    }
    return b;
}

/* Send open batch b now: the loop turn ends, or a member's connection has a later request that must reach
 * musterd after it. */
static void run_relay_comb_close(struct run_relay *r, struct run_relay_batch *b)
{
    struct run_relay_key *e = b->key;
    r->open[b->oidx] = NULL;
    e->open[b->kind] = NULL;
    for (size_t i = 0; i < b->n; i++)
        if (b->m[i].c->open == b)
            b->m[i].c->open = NULL;
    /* Adds are sent whoever left meanwhile: musterd would have run an add it had read. */
    if (b->kind != COMB_ADD)
        run_relay_comb_prune(b);
    if (!b->n || r->dead)
        run_relay_comb_drop(b);
    else
        run_relay_comb_send(r, b);
    run_relay_comb_forget(r, e);
}

/* Send the batch holding c's last request, before c's next request goes upstream. */
void run_relay_comb_flush_conn(struct run_relay *r, struct run_relay_conn *c)
{
    if (c->open)
        run_relay_comb_close(r, c->open);
}

/* The loop turn ends: send every batch gathered in it. */
void run_relay_comb_flush(struct run_relay *r)
{
    for (size_t i = 0; i < r->nopen; i++)
        if (r->open[i])
            run_relay_comb_close(r, r->open[i]);
    r->nopen = 0;
}

/* Join member m to e's call of kind in flight, when it may: a get, a wait counting to the same at_least, or an
 * ADD of 0 (torch's barrier reading its count: it reads the count after the add in flight, as a get would);
 * no other write of the key was sent after it (a write seals it), and no write of m's connection sent after it
 * is still unanswered.  So a node's workers asking one key in different loop turns share one call.  The answer
 * read is one musterd gave after every write of the worker and everything the node heard from the store before
 * the request came: musterd answers the one connection in order, so a call that musterd answered before any of
 * those is answered here before it too, and is no longer in flight.  1 when joined, 0 when it may not, -1 with
 * m's connection closed. */
static int run_relay_comb_ride(struct run_relay *r, struct run_relay_key *e, enum run_relay_comb_kind kind,
                               const struct run_relay_member *m)
{
    struct run_relay_batch *f = e->flying[kind];
    if (!f || (m->c->wseq && m->c->wseq >= f->seq) || (kind == COMB_WAIT && f->at_least != m->world) ||
        (kind == COMB_ADD && (m->delta != 0 || !m->s)))
        return 0;
    if (run_relay_comb_join(f, m) != 0) {
        run_relay_close(r, m->c, "out of memory");
        return -1;
    }
    r->st.joined_inflight++;
    return 1;
}

/* Put member m in e's batch of kind gathering this turn's requests (sent when the turn ends), or, with
 * RELAY_COMB_DEPTH calls of it in flight, in the batch waiting for one of them to answer; 0, or -1 with m's
 * connection closed. */
static int run_relay_comb_submit(struct run_relay *r, const char *k, enum run_relay_comb_kind kind,
                                 const struct run_relay_member *m)
{
    struct run_relay_key *e = run_relay_comb_key(r, k);
    if (!e) {
        run_relay_close(r, m->c, "out of memory");
        return -1;
    }
    int rode = run_relay_comb_ride(r, e, kind, m);
    if (rode)
        return rode > 0 ? 0 : -1;
    int busy = e->inflight[kind] || e->queued[kind] || e->open[kind];
    if (kind == COMB_WAIT && busy && e->at_least != m->world) {
        run_relay_comb_forget(r, e);
        return run_relay_comb_alone(r, kind, m);
    }
    if (kind == COMB_WAIT)
        e->at_least = m->world;
    int queue = e->inflight[kind] >= RELAY_COMB_DEPTH(kind);
    struct run_relay_batch *b = queue ? e->queued[kind] : run_relay_comb_open(r, e, kind);
    if (!b && queue && (b = run_relay_comb_batch(r, e, kind)))
        e->queued[kind] = b;
    if (b)
        b->at_least = e->at_least;
    int64_t sum;
    if (b && kind == COMB_ADD && b->n > 0 && __builtin_add_overflow(b->sum, m->delta, &sum))
        return run_relay_comb_add_alone(r, e, m);   /* the batch's sum would overflow: not combined */
    if (!b || run_relay_comb_join(b, m) != 0) {
        run_relay_comb_forget(r, e);
        run_relay_close(r, m->c, "out of memory");
        return -1;
    }
    if (!queue)
        m->c->open = b;
    else if (kind != COMB_WAIT)
        m->c->deferred++;
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

/* Park c's WAIT (at_least 0: until its keys are present) or BARRIER (until its one key counts at_least) at
 * musterd; released by the wait's answer. */
int run_relay_comb_park(struct run_relay *r, struct run_relay_conn *c, int64_t at_least)
{
    struct run_relay_member m = {c, NULL, c->pseq, 0, at_least};
    if (c->npkeys == 1)
        return run_relay_comb_submit(r, c->pkeys[0], COMB_WAIT, &m);
    return run_relay_comb_alone(r, COMB_WAIT, &m);
}

/* Free the combining table (every call is done: the handle is closed). */
void run_relay_comb_free(struct run_relay *r)
{
    for (size_t i = 0; r->keys && i < r->nbuckets; i++)
        while (r->keys[i]) {
            struct run_relay_key *e = r->keys[i];
            r->keys[i] = e->next;
            for (int k = 0; k < COMB_KINDS; k++) {
                if (e->queued[k])
                    run_relay_comb_drop(e->queued[k]);
                if (e->open[k])
                    run_relay_comb_drop(e->open[k]);
            }
            free(e);
        }
    free(r->keys);
    r->keys = NULL;
    free(r->open);
    r->open = NULL;
    r->nopen = r->capopen = 0;
}
