/*
 * Unit tests of the record interface (store-server/server/records.c), with state
 * made in-process and no daemon: records applied to the live namespaces
 * and dumped back, the same through a private image (what compaction
 * rebuilds), the origin the sink is told, clearing, dropping a namespace,
 * refusals, and the byte
 * codec's view of a record (store-server/durable/precord.c).
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "keyspace.h"
#include "ns.h"
#include "options.h"
#include "precord.h"
#include "records.h"
#include "server.h"

/* Records in a canonical text form, sorted, so two states compare as two lists. */
struct t_list {
    char **v;
    size_t n, cap;
    enum record_origin from[64]; /* the sink's origins, in order */
};

/* Append bytes as hex to buf at *at. */
static void t_hex(char *buf, size_t *at, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        *at += (size_t)sprintf(buf + *at, "%02x", ((const unsigned char *)p)[i]);
}

/* Add r's canonical form to l. */
static void t_add(struct t_list *l, const struct record *r)
{
    char *s = malloc(64 + 2 * (strlen(r->ns) + r->klen + r->vlen));
    size_t at = (size_t)sprintf(s, "%d %s ", (int)r->kind, r->ns);
    t_hex(s, &at, r->key ? r->key : "", r->key ? r->klen : 0);
    s[at++] = ' ';
    t_hex(s, &at, r->val ? r->val : (const uint8_t *)"", r->val ? r->vlen : 0);
    sprintf(s + at, " %llu", (unsigned long long)r->gen);
    if (l->n == l->cap)
        l->v = realloc(l->v, (l->cap = l->cap ? l->cap * 2 : 16) * sizeof *l->v);
    l->v[l->n++] = s;
}

/* record_fn: collect one record. */
static int t_collect(void *arg, const struct record *r)
{
    t_add(arg, r);
    return 0;
}

/* The sink: collect one record and where it came from. */
static void t_sink(void *arg, const struct record *r, enum record_origin from)
{
    struct t_list *l = arg;
    if (l->n < 64)
        l->from[l->n] = from;
    t_add(l, r);
}

/* Order two canonical forms, for qsort. */
static int t_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Free l's records. */
static void t_clear(struct t_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Dump st into l, sorted. */
static void t_dump(struct records *st, struct t_list *l)
{
    memset(l, 0, sizeof *l);
    CHECK_EQ(records_dump(st, t_collect, l), 0);
    if (l->n)
        qsort(l->v, l->n, sizeof *l->v, t_cmp);
}

/* Expect two lists to hold the same records. */
static void t_same(const struct t_list *a, const struct t_list *b)
{
    CHECK_EQ(a->n, b->n);
    for (size_t i = 0; i < a->n && i < b->n; i++)
        CHECK_STR(a->v[i], b->v[i]);
}

/* A server with default options and no loop: enough for namespaces and their state. */
static struct server *t_server(void)
{
    struct server *srv = calloc(1, sizeof *srv);
    char *argv[] = {"test-records", NULL};
    CHECK_EQ(options_parse(&srv->opt, 1, argv), -1);
    return srv;
}

/* Free what t_server made. */
static void t_server_free(struct server *srv)
{
    ns_destroy_all(srv);
    options_free(&srv->opt);
    free(srv);
}

/* A record of kind in ns. */
static struct record t_rec(enum record_kind kind, const char *ns, const char *key, size_t klen, const char *val,
                           size_t vlen, uint64_t gen)
{
    return (struct record){.kind = kind, .ns = ns, .key = key, .klen = klen, .val = (const uint8_t *)val,
                           .vlen = vlen, .gen = gen};
}

/* The records every round trip starts from: binary keys and values, an empty value, a deletion, generations
 * (one lower than the last: a counter never goes back) and the empty namespace name (read as "default"). */
static void t_fill(struct records *st)
{
    struct record in[] = {
        t_rec(RECORD_SET, "job", "a", 1, "1", 1, 0),
        t_rec(RECORD_SET, "job", "k\0y", 3, "v\0\xff", 3, 0),
        t_rec(RECORD_SET, "job", "empty", 5, "", 0, 0),
        t_rec(RECORD_GEN, "job", NULL, 0, NULL, 0, 5),
        t_rec(RECORD_GEN, "job", NULL, 0, NULL, 0, 3),
        t_rec(RECORD_SET, "job", "gone", 4, "x", 1, 0),
        t_rec(RECORD_DEL, "job", "gone", 4, NULL, 0, 0),
        t_rec(RECORD_SET, "other", "z", 1, "zz", 2, 0),
        t_rec(RECORD_GEN, "gens-only", NULL, 0, NULL, 0, 7),
        t_rec(RECORD_SET, "", "d", 1, "dv", 2, 0),
    };
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        CHECK_EQ(records_apply(st, &in[i], RECORD_REPLAY), 0);
}

/* What t_fill leaves, in canonical form (sorted). */
static void t_expected(struct t_list *l)
{
    memset(l, 0, sizeof *l);
    struct record out[] = {
        t_rec(RECORD_SET, "job", "a", 1, "1", 1, 0),
        t_rec(RECORD_SET, "job", "k\0y", 3, "v\0\xff", 3, 0),
        t_rec(RECORD_SET, "job", "empty", 5, "", 0, 0),
        t_rec(RECORD_GEN, "job", NULL, 0, NULL, 0, 5),
        t_rec(RECORD_SET, "other", "z", 1, "zz", 2, 0),
        t_rec(RECORD_GEN, "gens-only", NULL, 0, NULL, 0, 7),
        t_rec(RECORD_SET, "default", "d", 1, "dv", 2, 0),
    };
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        t_add(l, &out[i]);
    qsort(l->v, l->n, sizeof *l->v, t_cmp);
}

/* record_fn: apply one record to the state at arg, as a replay does. */
static int t_apply(void *arg, const struct record *r)
{
    return records_apply(arg, r, RECORD_REPLAY);
}

/* Live namespaces → records → image → records → fresh live namespaces: the same records every time. */
static void t_round_trip(void *unused)
{
    (void)unused;
    struct server *srv = t_server(), *srv2 = t_server();
    struct records *live = records_live(srv), *img = records_image_new(), *live2 = records_live(srv2);
    CHECK(img != NULL);
    struct t_list want, a, b, c;
    t_expected(&want);
    t_fill(live);
    t_dump(live, &a);
    t_same(&a, &want);
    CHECK(ns_find(srv, "default") != NULL);
    /* Into an image, as compaction rebuilds one. */
    CHECK_EQ(records_dump(live, t_apply, img), 0);
    t_dump(img, &b);
    t_same(&b, &want);
    /* And back into live namespaces, as a snapshot is loaded. */
    CHECK_EQ(records_dump(img, t_apply, live2), 0);
    t_dump(live2, &c);
    t_same(&c, &want);
    /* A dump's records come per namespace: its generation first, then its keys. */
    struct t_list raw = {0};
    CHECK_EQ(records_dump(img, t_collect, &raw), 0);
    int seen_job_key = 0;
    for (size_t i = 0; i < raw.n; i++) {
        if (strncmp(raw.v[i], "1 job ", 6) == 0)
            seen_job_key = 1;
        if (strncmp(raw.v[i], "3 job ", 6) == 0)
            CHECK(!seen_job_key);
    }
    t_clear(&raw);
    t_clear(&want);
    t_clear(&a);
    t_clear(&b);
    t_clear(&c);
    records_image_free(img);
    t_server_free(srv);
    t_server_free(srv2);
}

/* record_fn: stop the walk at once. */
static int t_stop(void *arg, const struct record *r)
{
    (void)r;
    ++*(int *)arg;
    return 42;
}

/* The sink hears every change of the live keyspaces at the change, marked with its origin; an image has no
 * sink; a walk stops at fn's first non-zero. */
static void t_sink_origin(void *unused)
{
    (void)unused;
    struct server *srv = t_server();
    struct records *live = records_live(srv);
    struct t_list heard = {0};
    records_sink(srv, &(struct record_sink){t_sink, &heard});
    /* A change made here (a request's ks_set): LOCAL. */
    int st = 0;
    struct ns *ns = ns_get(srv, "job", &st);
    CHECK(ns != NULL);
    CHECK_EQ(ks_set(&ns->ks, "k", 1, (uint8_t *)"v", 1, 0), 0);
    CHECK_EQ(heard.n, 1);
    CHECK_EQ(heard.from[0], RECORD_LOCAL);
    /* Replicated and replayed changes: the same record, marked so. */
    struct record set = t_rec(RECORD_SET, "job", "r\0k", 3, "rv", 2, 0);
    struct record del = t_rec(RECORD_DEL, "job", "k", 1, NULL, 0, 0);
    CHECK_EQ(records_apply(live, &set, RECORD_REPLICA), 0);
    CHECK_EQ(records_apply(live, &del, RECORD_REPLAY), 0);
    CHECK_EQ(heard.n, 3);
    CHECK_EQ(heard.from[1], RECORD_REPLICA);
    CHECK_EQ(heard.from[2], RECORD_REPLAY);
    struct t_list want = {0};
    t_add(&want, &(struct record){.kind = RECORD_SET, .ns = "job", .key = "k", .klen = 1, .val = (const uint8_t *)"v",
                                   .vlen = 1});
    t_add(&want, &set);
    t_add(&want, &del);
    t_same(&heard, &want);
    /* After an apply the origin is LOCAL again. */
    CHECK_EQ(ks_set(&ns->ks, "k2", 2, (uint8_t *)"v", 1, 0), 0);
    CHECK_EQ(heard.n, 4);
    CHECK_EQ(heard.from[3], RECORD_LOCAL);
    /* Clearing deletes every key as DEL records of that origin; generations stay. */
    struct record gen = t_rec(RECORD_GEN, "job", NULL, 0, NULL, 0, 9);
    CHECK_EQ(records_apply(live, &gen, RECORD_REPLICA), 0);
    size_t before = heard.n;
    CHECK_EQ(records_clear(live, RECORD_REPLICA), 0);
    CHECK_EQ(heard.n, before + 2);
    for (size_t i = before; i < heard.n; i++) {
        CHECK_EQ(heard.from[i], RECORD_REPLICA);
        CHECK(heard.v[i][0] == '2');
    }
    CHECK_EQ(ks_count(&ns->ks), 0);
    struct t_list left;
    t_dump(live, &left);
    CHECK_EQ(left.n, 1);
    if (left.n)
        CHECK_STR(left.v[0], "3 job   9");
    /* A walk stops at the first non-zero. */
    int calls = 0;
    CHECK_EQ(records_apply(live, &set, RECORD_LOCAL), 0);
    CHECK_EQ(records_dump(live, t_stop, &calls), 42);
    CHECK_EQ(calls, 1);
    /* No sink: nothing is heard. */
    records_sink(srv, NULL);
    before = heard.n;
    CHECK_EQ(records_apply(live, &del, RECORD_REPLICA), 0);
    CHECK_EQ(heard.n, before);
    t_clear(&heard);
    t_clear(&want);
    t_clear(&left);
    t_server_free(srv);
}

/* The live state refuses what its limits refuse, and a kind that is no record. */
static void t_refused(void *unused)
{
    (void)unused;
    struct server *srv = t_server();
    srv->opt.max_keys_per_ns = 1;
    struct records *live = records_live(srv);
    struct record a = t_rec(RECORD_SET, "job", "a", 1, "1", 1, 0), b = t_rec(RECORD_SET, "job", "b", 1, "2", 1, 0);
    CHECK_EQ(records_apply(live, &a, RECORD_REPLAY), 0);
    CHECK_EQ(records_apply(live, &b, RECORD_REPLAY), -1);
    struct record odd = t_rec((enum record_kind)4, "job", "a", 1, NULL, 0, 0);
    CHECK_EQ(records_apply(live, &odd, RECORD_REPLAY), -1);
    struct records *img = records_image_new();
    CHECK_EQ(records_apply(img, &a, RECORD_REPLAY), 0);
    CHECK_EQ(records_apply(img, &b, RECORD_REPLAY), 0); /* an image has no limits */
    records_image_free(img);
    t_server_free(srv);
}

/* The codec: a record framed and read back is the same record; a snapshot's framing is no record. */
static void t_codec(void *unused)
{
    (void)unused;
    struct evbuffer *b = evbuffer_new();
    struct record in[] = {
        t_rec(RECORD_SET, "job", "k\0y", 3, "v\0\xff", 3, 0),
        t_rec(RECORD_SET, "job", "e", 1, "", 0, 0),
        t_rec(RECORD_DEL, "", "k", 1, NULL, 0, 0),
        t_rec(RECORD_GEN, "job", NULL, 0, NULL, 0, 1234567890123ULL),
        t_rec(RECORD_DROP, "job", NULL, 0, NULL, 0, 0),
    };
    size_t n = sizeof in / sizeof in[0];
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(prec_put_record(b, i + 1, &in[i]), 0);
    CHECK_EQ(prec_put(b, PREC_SNAP_END, "", 0, n, NULL, 0, NULL, 0, 0), 0);
    size_t len = evbuffer_get_length(b), at = 0;
    const uint8_t *p = evbuffer_pullup(b, (ssize_t)len);
    struct t_list want = {0}, got = {0};
    for (size_t i = 0; i < n; i++)
        t_add(&want, &in[i]);
    for (size_t i = 0; i <= n; i++) {
        struct prec pr;
        struct record r;
        CHECK_EQ(prec_next(p, len, &at, &pr), PREC_OK);
        CHECK_EQ(pr.id, i + 1 <= n ? i + 1 : n);
        if (prec_record(&pr, &r))
            t_add(&got, &r);
        else
            CHECK_EQ(i, n);
        prec_free(&pr);
    }
    CHECK_EQ(at, len);
    t_same(&got, &want);
    t_clear(&want);
    t_clear(&got);
    evbuffer_free(b);
}

/* A DROP forgets a namespace, keys and generation counter, in the live state (the sink hears it with its
 * origin) and in an image; a live namespace a connection is in only loses its keys, as DELs. */
static void t_drop(void *unused)
{
    (void)unused;
    struct server *srv = t_server();
    struct records *live = records_live(srv), *img = records_image_new();
    struct t_list heard = {0}, left;
    struct record recs[] = {
        t_rec(RECORD_SET, "job", "a", 1, "1", 1, 0),
        t_rec(RECORD_GEN, "job", NULL, 0, NULL, 0, 7),
        t_rec(RECORD_SET, "other", "b", 1, "2", 1, 0),
    };
    struct record drop = t_rec(RECORD_DROP, "job", NULL, 0, NULL, 0, 0);
    for (size_t i = 0; i < 3; i++) {
        CHECK_EQ(records_apply(live, &recs[i], RECORD_REPLAY), 0);
        CHECK_EQ(records_apply(img, &recs[i], RECORD_REPLAY), 0);
    }
    records_sink(srv, &(struct record_sink){t_sink, &heard});
    CHECK_EQ(records_apply(live, &drop, RECORD_REPLICA), 0);
    CHECK_EQ(heard.n, 1);
    CHECK_EQ(heard.from[0], RECORD_REPLICA);
    if (heard.n)
        CHECK_STR(heard.v[0], "6 job   0");
    CHECK(ns_find(srv, "job") == NULL);
    CHECK_EQ(records_apply(live, &drop, RECORD_REPLAY), 0); /* dropping what is gone: nothing */
    CHECK_EQ(heard.n, 1);
    CHECK_EQ(records_apply(img, &drop, RECORD_REPLAY), 0);
    for (int i = 0; i < 2; i++) {
        t_dump(i ? img : live, &left);
        CHECK_EQ(left.n, 1);
        if (left.n)
            CHECK_STR(left.v[0], "1 other 62 32 0");
        t_clear(&left);
    }
    /* In use here: the keys go as DELs, the namespace and its counter stay. */
    CHECK_EQ(records_apply(live, &recs[0], RECORD_REPLAY), 0);
    CHECK_EQ(records_apply(live, &recs[1], RECORD_REPLAY), 0);
    struct ns *ns = ns_find(srv, "job");
    CHECK(ns != NULL);
    if (ns) {
        ns_conn_joined(ns);
        CHECK_EQ(records_apply(live, &drop, RECORD_REPLICA), 0);
        CHECK(ns_find(srv, "job") == ns);
        CHECK_EQ(ks_count(&ns->ks), 0);
        CHECK(heard.v[heard.n - 1][0] == '2');
        ns_conn_left(ns);
    }
    t_clear(&heard);
    records_sink(srv, NULL);
    records_image_free(img);
    t_server_free(srv);
}

int main(void)
{
    h_init("unit-records", 30);
    H_RUN(t_drop, NULL);
    H_RUN(t_round_trip, NULL);
    H_RUN(t_sink_origin, NULL);
    H_RUN(t_refused, NULL);
    H_RUN(t_codec, NULL);
    return h_finish();
}
