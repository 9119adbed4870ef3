/*
 * The daemon's etcd client (store-server/ha/ha_etcd*.c) against a real
 * 3-member etcd cluster: put and range with binary data, create-if-absent
 * as used by the leader election, leases, a prefix watch delivering every
 * change in order, and moving on to a live member when one is lost.
 * Skipped when etcd is not installed.
 */
#include <event2/event.h>
#include <stdio.h>
#include <string.h>

#include "ha_etcd.h"
#include "harness.h"
#include "hetcd.h"

/* How long one awaited reply may take. */
#define WAIT_MS 5000

static struct event_base *base;
static struct hetcd cluster;

/* What a call's callback recorded. */
struct reply {
    int done;
    enum ha_etcd_err err;
    json_t *j; /* a reference, freed by the case */
};

/* Record a call's outcome. */
static void on_reply(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct reply *r = arg;
    r->done = 1;
    r->err = err;
    r->j = json_incref(reply);
}

/* A timer that only ends a loop turn. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

/* Run the loop until *flag is set or WAIT_MS passed; whether it was set. */
static int await(const int *flag)
{
    int64_t until = h_now_ms() + WAIT_MS;
    while (!*flag && h_now_ms() < until) {
        struct event *t = evtimer_new(base, on_tick, NULL);
        struct timeval tv = {0, 50000};
        evtimer_add(t, &tv); /* bounds each turn when nothing arrives */
        event_base_loop(base, EVLOOP_ONCE);
        event_free(t);
    }
    return *flag;
}

/* Wait for r and check it succeeded. */
static int await_ok(struct reply *r)
{
    CHECK(await(&r->done));
    CHECK_EQ(r->err, HA_ETCD_OK);
    return r->done && r->err == HA_ETCD_OK;
}

/* A value with NUL and high bytes survives put and range unchanged. */
static void case_put_range(struct ha_etcd *e)
{
    static const uint8_t val[] = {0, 1, 0xff, 'x', 0, 0xfe};
    struct reply p = {0}, g = {0};
    CHECK_EQ(ha_etcd_put(e, "t/put", 5, val, sizeof val, 0, on_reply, &p), 0);
    if (!await_ok(&p))
        return;
    CHECK(ha_etcd_int(json_object_get(p.j, "header"), "revision", 0) > 1);
    CHECK_EQ(ha_etcd_range(e, "t/put", 5, 0, on_reply, &g), 0);
    if (await_ok(&g)) {
        struct ha_etcd_kv kv;
        json_t *kvs = json_object_get(g.j, "kvs");
        CHECK_EQ(json_array_size(kvs), 1);
        CHECK_EQ(ha_etcd_kv_decode(json_array_get(kvs, 0), &kv), 0);
        CHECK_MEM(kv.key, kv.klen, "t/put", 5);
        CHECK_MEM(kv.val, kv.vlen, val, sizeof val);
        ha_etcd_kv_clear(&kv);
    }
    json_decref(p.j);
    json_decref(g.j);
}

/* The first create wins; the second fails and reports the holder's value. */
static void case_create(struct ha_etcd *e)
{
    struct reply a = {0}, b = {0};
    ha_etcd_create(e, "t/leader", 8, (const uint8_t *)"one", 3, 0, on_reply, &a);
    ha_etcd_create(e, "t/leader", 8, (const uint8_t *)"two", 3, 0, on_reply, &b);
    if (!await_ok(&a) || !await_ok(&b))
        return;
    CHECK(json_is_true(json_object_get(a.j, "succeeded")));
    CHECK(!json_is_true(json_object_get(b.j, "succeeded")));
    json_t *rr = json_object_get(json_array_get(json_object_get(b.j, "responses"), 0), "response_range");
    struct ha_etcd_kv kv;
    CHECK_EQ(ha_etcd_kv_decode(json_array_get(json_object_get(rr, "kvs"), 0), &kv), 0);
    CHECK_MEM(kv.val, kv.vlen, "one", 3);
    ha_etcd_kv_clear(&kv);
    json_decref(a.j);
    json_decref(b.j);
}

/* A granted lease can be renewed and holds a key. */
static void case_lease(struct ha_etcd *e)
{
    struct reply g = {0}, k = {0}, p = {0}, r = {0};
    ha_etcd_lease_grant(e, 5, on_reply, &g);
    if (!await_ok(&g))
        return;
    int64_t id = ha_etcd_int(g.j, "ID", 0);
    CHECK(id != 0);
    CHECK_EQ(ha_etcd_int(g.j, "TTL", 0), 5);
    ha_etcd_lease_keepalive(e, id, on_reply, &k);
    if (await_ok(&k))
        CHECK(ha_etcd_int(k.j, "TTL", 0) > 0);
    ha_etcd_put(e, "t/leased", 8, (const uint8_t *)"v", 1, id, on_reply, &p);
    await_ok(&p);
    ha_etcd_range(e, "t/leased", 8, 0, on_reply, &r);
    if (await_ok(&r)) {
        struct ha_etcd_kv kv;
        CHECK_EQ(ha_etcd_kv_decode(json_array_get(json_object_get(r.j, "kvs"), 0), &kv), 0);
        CHECK_EQ(kv.lease, id);
        ha_etcd_kv_clear(&kv);
    }
    json_decref(g.j);
    json_decref(k.j);
    json_decref(p.j);
    json_decref(r.j);
}

/* What a watch has delivered. */
struct seen {
    int n;
    char keys[8][16];
    int deleted[8];
    int64_t rev[8];
    int want, enough; /* enough: want events arrived */
};

/* Record one watch event. */
static void on_event(void *arg, enum ha_etcd_err err, const struct ha_etcd_kv *kv)
{
    struct seen *s = arg;
    if (err != HA_ETCD_OK || s->n == 8)
        return;
    snprintf(s->keys[s->n], sizeof s->keys[0], "%.*s", (int)kv->klen, kv->key);
    s->deleted[s->n] = kv->deleted;
    s->rev[s->n++] = kv->mod_rev;
    s->enough = s->n >= s->want;
}

/* A prefix watch delivers puts and deletes of its prefix only, in revision order. */
static void case_watch(struct ha_etcd *e)
{
    struct reply p1 = {0}, p2 = {0}, p3 = {0};
    ha_etcd_put(e, "w/a", 3, (const uint8_t *)"1", 1, 0, on_reply, &p1);
    if (!await_ok(&p1))
        return;
    int64_t from = ha_etcd_int(json_object_get(p1.j, "header"), "revision", 0);
    struct seen s = {.want = 3};
    struct ha_etcd_watch *w = ha_etcd_watch_new(e, "w/", 2, 1, from, on_event, &s);
    CHECK(w != NULL);
    ha_etcd_put(e, "x/other", 7, (const uint8_t *)"2", 1, 0, on_reply, &p2);
    await_ok(&p2);
    struct reply d = {0};
    ha_etcd_call(e, "/v3/kv/deleterange", json_pack("{s:o}", "key", ha_etcd_b64("w/a", 3)), on_reply, &d);
    await_ok(&d);
    ha_etcd_put(e, "w/b", 3, (const uint8_t *)"3", 1, 0, on_reply, &p3);
    await_ok(&p3);
    CHECK(await(&s.enough));
    CHECK_EQ(s.n, 3);
    CHECK_STR(s.keys[0], "w/a");
    CHECK_EQ(s.deleted[0], 0);
    CHECK_EQ(s.rev[0], from);
    CHECK_STR(s.keys[1], "w/a");
    CHECK_EQ(s.deleted[1], 1);
    CHECK_STR(s.keys[2], "w/b");
    CHECK(s.rev[1] < s.rev[2]);
    ha_etcd_watch_free(w);
    json_decref(p1.j);
    json_decref(p2.j);
    json_decref(p3.j);
    json_decref(d.j);
}

/* With the current member killed, a call fails as unreachable, the next one reaches another member,
 * and a watch opened on the lost member resumes elsewhere without missing a change. */
static void case_member_lost(struct ha_etcd *e)
{
    struct seen s = {.want = 1};
    struct reply a = {0}, b = {0}, p = {0};
    /* The watch starts from a known revision, as the daemon's watches do.  Started "from now" it could
     * be cut off before etcd confirmed it, and then "now" on the next member would be after the put. */
    ha_etcd_range(e, "t/put", 5, 0, on_reply, &p);
    await_ok(&p);
    int64_t from = ha_etcd_int(json_object_get(p.j, "header"), "revision", 0) + 1;
    struct ha_etcd_watch *w = ha_etcd_watch_new(e, "m/", 2, 1, from, on_event, &s);
    CHECK(w != NULL);
    hetcd_kill(&cluster, 0);
    CHECK_STR(ha_etcd_endpoint(e), strtok(cluster.endpoints, ","));
    ha_etcd_range(e, "t/put", 5, 0, on_reply, &a);
    CHECK(await(&a.done));
    CHECK_EQ(a.err, HA_ETCD_UNREACHABLE);
    /* The lost member may have been etcd's leader: while the others elect a new one a put can
     * fail; the caller retries (bounded), as a daemon would. */
    for (int i = 0; i < 20; i++) {
        json_decref(b.j);
        memset(&b, 0, sizeof b);
        ha_etcd_put(e, "m/after", 7, (const uint8_t *)"v", 1, 0, on_reply, &b);
        if (await(&b.done) && b.err == HA_ETCD_OK)
            break;
        struct timeval tv = {0, 250000};
        event_base_loopexit(base, &tv);
        event_base_dispatch(base);
    }
    CHECK_EQ(b.err, HA_ETCD_OK);
    CHECK(await(&s.enough));
    CHECK_STR(s.keys[0], "m/after");
    ha_etcd_watch_free(w);
    json_decref(a.j);
    json_decref(b.j);
    json_decref(p.j);
}

/* Malformed endpoint lists are refused. */
static void case_bad_endpoints(void *unused)
{
    (void)unused;
    CHECK(ha_etcd_new(base, "", 1) == NULL);
    CHECK(ha_etcd_new(base, "nohost", 1) == NULL);
    CHECK(ha_etcd_new(base, "h:0", 1) == NULL);
    CHECK(ha_etcd_new(base, "h:70000", 1) == NULL);
    CHECK(ha_etcd_new(base, "h:1,,h:2", 1) == NULL);
    struct ha_etcd *e = ha_etcd_new(base, "a:1,b:2", 1);
    CHECK(e != NULL);
    if (e)
        CHECK_STR(ha_etcd_endpoint(e), "a:1");
    ha_etcd_free(e);
    ha_etcd_free(NULL);
}

int main(void)
{
    h_init("etcd_client", 60);
    if (!hetcd_available())
        h_skip("etcd is not installed");
    base = event_base_new();
    H_RUN(case_bad_endpoints, NULL);
    if (hetcd_start(&cluster, 3) != 0) {
        CHECK(!"etcd cluster started");
        return h_finish();
    }
    struct ha_etcd *e = ha_etcd_new(base, cluster.endpoints, 2);
    H_RUN(case_put_range, e);
    H_RUN(case_create, e);
    H_RUN(case_lease, e);
    H_RUN(case_watch, e);
    H_RUN(case_member_lost, e);
    ha_etcd_free(e);
    hetcd_stop(&cluster);
    event_base_free(base);
    return h_finish();
}
