/*
 * Records and state.  This file alone knows how a record (record.h) maps
 * to state and back: a SET writes the key's whole value into its
 * namespace's keyspace, a DEL removes the key, a GEN raises the
 * namespace's rendezvous generation counter (never lowers it: no number is
 * handed out twice), a DROP forgets the namespace, keys and counter (the
 * idle sweep of ns.c emits it; a live namespace that a connection is in
 * only loses its keys); and the state, dumped, is per namespace its
 * generation (when there is one), then one SET per key.
 *
 * Two kinds of state take records.  The live one is the daemon's
 * namespaces: replay of the data directory, an --ha standby following the
 * leader and the loading of either snapshot apply records to it, and the
 * --ha snapshot writer dumps it.  An image is a private copy of just keys
 * and counters, with no limits and no hooks: compaction rebuilds one on
 * its own thread from the files and dumps it as the new snapshot.
 *
 * The other direction is the sink.  The state code emits a record through
 * core_emit (core/core.c) at the change itself (the keyspace change hook, a
 * generation being adopted), synchronously, so it is logged before anyone
 * is told; durability registers as the sink (persist.c).  A change that
 * records_apply makes emits a record too, marked with where it came from,
 * so the sink can tell a replayed or replicated change from a new one.
 */
#include "records.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "core.h"
#include "keyspace.h"
#include "muster.pb-c.h"
#include "ns.h"
#include "rdzv.h"
#include "server.h"
#include "stats.h"

/* One namespace of an image. */
struct records_img {
    UT_hash_handle hh;
    struct keyspace ks;
    uint64_t gen;
    char name[];
};

/* One namespace of either kind of state, as the mapping below sees it. */
struct records_ns {
    const char *name;
    struct keyspace *ks;
    struct ns *live;         /* the live namespace, or NULL */
    struct records_img *img; /* the image's namespace, or NULL */
};

/* A walk over the namespaces of a state: fn returns non-zero to stop. */
typedef int (*records_ns_fn)(struct records *st, const struct records_ns *n, void *arg);

/* ------------------------------------------------------------ the states */

/* The live state of srv (server.h holds it). */
struct records *records_live(struct server *srv)
{
    srv->records.srv = srv;
    return &srv->records;
}

/* A new, empty image; NULL when memory ran out. */
struct records *records_image_new(void)
{
    struct records *st = calloc(1, sizeof *st);
    if (st && !(st->img_stats = calloc(1, sizeof *st->img_stats))) {
        free(st);
        st = NULL;
    }
    return st;
}

/* Free an image; NULL is fine. */
void records_image_free(struct records *st)
{
    if (!st)
        return;
    struct records_img *ns, *tmp;
    HASH_ITER(hh, st->img, ns, tmp) {
        HASH_DEL(st->img, ns);
        ks_fini(&ns->ks);
        free(ns);
    }
    free(st->img_stats);
    free(st);
}

/* The image's namespace called name, created on first use; NULL when memory ran out. */
static struct records_img *records_img_get(struct records *st, const char *name)
{
    struct records_img *ns = NULL;
    HASH_FIND_STR(st->img, name, ns);
    if (ns)
        return ns;
    size_t len = strlen(name);
    if (!(ns = calloc(1, sizeof *ns + len + 1)))
        return NULL;
    memcpy(ns->name, name, len);
    ks_init(&ns->ks, UINT64_MAX, UINT64_MAX, UINT64_MAX, st->img_stats, NULL, NULL);
    HASH_ADD(hh, st->img, name[0], len, ns);
    return ns;
}

/* Namespace name of st into *n, created on first use; 0, or -1 when refused (a limit, or memory). */
static int records_ns_get(struct records *st, const char *name, struct records_ns *n)
{
    memset(n, 0, sizeof *n);
    if (st->srv) {
        int status = MUSTER__STATUS__OK;
        if (!(n->live = ns_get(st->srv, name, &status)))
            return -1;
        n->name = n->live->name;
        n->ks = &n->live->ks;
        return 0;
    }
    if (!(n->img = records_img_get(st, name)))
        return -1;
    n->name = n->img->name;
    n->ks = &n->img->ks;
    return 0;
}

/* The generation counter of n (0: none). */
static uint64_t records_ns_gen(const struct records_ns *n)
{
    return n->live ? rdzv_generation(n->live) : n->img->gen;
}

/* Raise the generation counter of n to at least gen. */
static void records_ns_raise(const struct records_ns *n, uint64_t gen)
{
    if (n->live)
        rdzv_restore_generation(n->live, gen);
    else if (gen > n->img->gen)
        n->img->gen = gen;
}

/* What a walk over the live namespaces carries through ns_each. */
struct records_live_walk {
    struct records *st;
    records_ns_fn fn;
    void *arg;
    int rc;
};

/* ns_each callback: one live namespace, unless the walk has stopped. */
static void records_live_one(struct ns *ns, void *arg)
{
    struct records_live_walk *w = arg;
    if (w->rc)
        return;
    struct records_ns n = {.name = ns->name, .ks = &ns->ks, .live = ns};
    w->rc = w->fn(w->st, &n, w->arg);
}

/* Call fn on every namespace of st until it returns non-zero; that value, or 0. */
static int records_each_ns(struct records *st, records_ns_fn fn, void *arg)
{
    if (st->srv) {
        struct records_live_walk w = {st, fn, arg, 0};
        ns_each(st->srv, records_live_one, &w);
        return w.rc;
    }
    /* An image's namespaces are removed only by a DROP being applied, never during a walk, so the walk may
     * change their keyspaces. */
    for (struct records_img *ns = st->img; ns; ns = ns->hh.next) {
        struct records_ns n = {.name = ns->name, .ks = &ns->ks, .img = ns};
        int rc = fn(st, &n, arg);
        if (rc)
            return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------ sink */

/* Send the live state's records to sink from now on (NULL: nowhere); the core emits them (core_emit). */
void records_sink(struct server *srv, const struct record_sink *sink)
{
    srv->core.sink = sink ? *sink : (struct record_sink){0};
}

/* ----------------------------------------------------------- record → state */

/* How a clear goes: the origin its deletions are applied with, and whether memory ran out somewhere. */
struct records_clearing {
    enum record_origin from;
    int failed;
};

static int records_clear_ns(struct records *st, const struct records_ns *n, void *arg);

/* Apply a DROP of namespace name to st: the namespace, keys and counter, is gone (nothing when absent).  A
 * live one in use here (a connection said hello to it) keeps its counter and loses its keys as DELs. */
static int records_drop(struct records *st, const char *name, enum record_origin from)
{
    if (!st->srv) {
        struct records_img *img = NULL;
        HASH_FIND_STR(st->img, name, img);
        if (img) {
            HASH_DEL(st->img, img);
            ks_fini(&img->ks);
            free(img);
        }
        return 0;
    }
    struct ns *ns = ns_find(st->srv, name);
    if (!ns)
        return 0;
    enum record_origin outer = st->srv->core.applying;
    st->srv->core.applying = from;
    int rc = ns_drop(st->srv, ns, NULL);
    st->srv->core.applying = outer;
    if (rc != 0) {
        struct records_ns n = {.name = ns->name, .ks = &ns->ks, .live = ns};
        struct records_clearing c = {from, 0};
        records_clear_ns(st, &n, &c);
    }
    return 0;
}

/* Apply r to st (its namespace created on first use); 0, or -1 when st refused it. */
int records_apply(struct records *st, const struct record *r, enum record_origin from)
{
    struct records_ns n;
    if (r->kind == RECORD_DROP)
        return records_drop(st, r->ns && r->ns[0] ? r->ns : "default", from);
    if (r->kind != RECORD_SET && r->kind != RECORD_DEL && r->kind != RECORD_GEN)
        return -1;
    if (records_ns_get(st, r->ns && r->ns[0] ? r->ns : "default", &n) != 0)
        return -1;
    /* Only the live state has a sink; an image's changes go nowhere. */
    enum record_origin *applying = st->srv ? &st->srv->core.applying : &st->img_applying;
    enum record_origin outer = *applying;
    *applying = from;
    int rc = 0;
    if (r->kind == RECORD_SET) {
        uint8_t *val = (uint8_t *)(uintptr_t)(r->val ? r->val : (const uint8_t *)"");
        rc = ks_set(n.ks, r->key, r->klen, val, r->vlen, 0) == MUSTER__STATUS__OK ? 0 : -1;
    } else if (r->kind == RECORD_DEL) {
        ks_delete(n.ks, r->key, r->klen);
    } else {
        records_ns_raise(&n, r->gen);
    }
    *applying = outer;
    return rc;
}

/* ----------------------------------------------------------- state → records */

/* Where a dump of one namespace sends its records. */
struct records_dump_walk {
    record_fn fn;
    void *arg;
    const char *ns;
};

/* ks_each callback of records_dump: one key as a SET record. */
static int records_dump_key(void *arg, const struct ks_entry *e)
{
    const struct records_dump_walk *w = arg;
    struct record r = {.kind = RECORD_SET, .ns = w->ns, .key = e->key, .klen = e->klen, .val = ks_val(e),
                       .vlen = e->vlen};
    return w->fn(w->arg, &r);
}

/* One namespace as records: its generation when non-zero, then its keys. */
static int records_dump_ns(struct records *st, const struct records_ns *n, void *arg)
{
    (void)st;
    const struct records_dump_walk *outer = arg;
    struct records_dump_walk w = {outer->fn, outer->arg, n->name};
    uint64_t gen = records_ns_gen(n);
    if (gen) {
        struct record r = {.kind = RECORD_GEN, .ns = n->name, .gen = gen};
        int rc = w.fn(w.arg, &r);
        if (rc)
            return rc;
    }
    return ks_each(n->ks, records_dump_key, &w);
}

/* Call fn with st as records (see records.h). */
int records_dump(struct records *st, record_fn fn, void *arg)
{
    struct records_dump_walk w = {fn, arg, NULL};
    return records_each_ns(st, records_dump_ns, &w);
}

/* ------------------------------------------------------------------ clear */

/* One key of a namespace, copied (a key may hold any byte). */
struct records_kcopy {
    char *k;
    size_t len;
};

/* Keys of one namespace, collected before they are deleted (ks_each must not change the keyspace). */
struct records_keys {
    struct records_kcopy *k;
    size_t n, cap;
};

/* ks_each callback: remember one key; -1 when memory ran out. */
static int records_note_key(void *arg, const struct ks_entry *e)
{
    struct records_keys *ks = arg;
    if (ks->n == ks->cap) {
        size_t cap = ks->cap ? ks->cap * 2 : 64;
        struct records_kcopy *k = realloc(ks->k, cap * sizeof *k);
        if (!k)
            return -1;
        ks->k = k;
        ks->cap = cap;
    }
    if (!(ks->k[ks->n].k = malloc(e->klen ? e->klen : 1)))
        return -1;
    memcpy(ks->k[ks->n].k, e->key, e->klen);
    ks->k[ks->n++].len = e->klen;
    return 0;
}

/* Delete every key of one namespace as DEL records (memory running out while the keys are noted leaves the
 * rest of it; the walk goes on with the next namespace). */
static int records_clear_ns(struct records *st, const struct records_ns *n, void *arg)
{
    struct records_clearing *c = arg;
    struct records_keys keys = {0};
    if (ks_each(n->ks, records_note_key, &keys) != 0)
        c->failed = 1;
    for (size_t i = 0; i < keys.n; i++) {
        struct record r = {.kind = RECORD_DEL, .ns = n->name, .key = keys.k[i].k, .klen = keys.k[i].len};
        records_apply(st, &r, c->from);
        free(keys.k[i].k);
    }
    free(keys.k);
    return 0;
}

/* Delete every key of st (namespaces and generation counters stay), as DEL records applied with from. */
int records_clear(struct records *st, enum record_origin from)
{
    struct records_clearing c = {from, 0};
    records_each_ns(st, records_clear_ns, &c);
    return c.failed ? -1 : 0;
}
