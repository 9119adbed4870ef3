/*
 * In-process tests of the state core (store-server/core/): rendezvous
 * rounds, last call, heartbeats, leaving, barriers, waiters and watches, driven
 * through the core's hooks with a fake clock.  Timers fire only when a test
 * advances time, and deferred calls run when it says a loop turn ends, so
 * every case runs in microseconds: no daemon, no socket, no sleep.  This
 * program links the core library alone, not the daemon.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "core.h"
#include "harness.h"
#include "muster.pb-c.h"
#include "rdzv.h"
#include "stats.h"
#include "tcore.h"
#include "waiters.h"
#include "watch.h"

/* ---------------------------------------------------------------- cases */

/* A round closes at min_nodes with no last call, ranks in id order, the generation logged first. */
static void t_round_min(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node a = {.session = 1}, b = {.session = 2};
    t_world_init(&w, 0);
    CHECK_EQ(t_join(&w, &b, "zeta", 2, 4, 0), MUSTER__STATUS__OK);
    CHECK_EQ(b.replies, 0);
    CHECK(b.parked != 0);
    CHECK_EQ(w.core.nwaiters, 1);
    CHECK_EQ(t_join(&w, &a, "alpha", 2, 4, 0), MUSTER__STATUS__OK);
    CHECK_EQ(a.replies, 1);
    CHECK_EQ(b.replies, 1);
    CHECK_EQ(a.a.generation, 1);
    CHECK_EQ(a.a.node_rank, 0);
    CHECK_EQ(b.a.node_rank, 1);
    CHECK_EQ(b.a.world_size, 2);
    CHECK_EQ(w.gens, 1);
    CHECK_EQ(w.last_gen, 1);
    CHECK(a.parked == 0 && b.parked == 0);
    CHECK_EQ(w.core.nwaiters, 0);
    CHECK_EQ(w.stats.c[STAT_RDZV_GENERATIONS], 1);
    /* A join whose min/max differ from the open round's is refused. */
    struct t_node c = {.session = 3}, d = {.session = 4};
    CHECK_EQ(t_join(&w, &c, "c", 3, 3, 0), MUSTER__STATUS__OK);
    CHECK_EQ(t_join(&w, &d, "d", 2, 2, 0), MUSTER__STATUS__CONFLICT);
    CHECK_EQ(t_join(&w, &d, "c", 3, 3, 0), MUSTER__STATUS__CONFLICT);
    t_world_fini(&w);
}

/* With a last call, the round waits last_call_ms after reaching min; max closes it at once. */
static void t_round_last_call(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node n[4] = {{.session = 1}, {.session = 2}, {.session = 3}, {.session = 4}};
    t_world_init(&w, 0);
    CHECK_EQ(t_join(&w, &n[0], "a", 2, 3, 100), MUSTER__STATUS__OK);
    CHECK_EQ(t_join(&w, &n[1], "b", 2, 3, 100), MUSTER__STATUS__OK);
    t_advance(99);
    CHECK_EQ(n[0].replies, 0);
    CHECK_EQ(t_join(&w, &n[2], "c", 2, 3, 100), MUSTER__STATUS__OK);
    CHECK_EQ(n[0].replies, 1);
    CHECK_EQ(n[2].a.num_nodes, 3);
    /* The next round: two nodes and the last call running out. */
    for (int i = 0; i < 3; i++)
        rdzv_leave(n[i].node, 1);
    CHECK_EQ(t_join(&w, &n[0], "a", 2, 3, 100), MUSTER__STATUS__OK);
    CHECK_EQ(t_join(&w, &n[3], "d", 2, 3, 100), MUSTER__STATUS__OK);
    t_advance(50);
    CHECK_EQ(n[3].replies, 0);
    t_advance(50);
    CHECK_EQ(n[3].replies, 1);
    CHECK_EQ(n[3].a.generation, 2);
    CHECK_EQ(n[3].a.num_nodes, 2);
    t_world_fini(&w);
}

/* A parked join times out on its deadline, and the below-minimum round stays open for others. */
static void t_join_timeout(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node a = {.session = 1};
    t_world_init(&w, 0);
    CHECK_EQ(t_join(&w, &a, "a", 2, 2, 0), MUSTER__STATUS__OK);
    t_advance(999);
    CHECK_EQ(a.replies, 0);
    t_advance(1);
    CHECK_EQ(a.replies, 1);
    CHECK_EQ(a.status, MUSTER__STATUS__TIMEOUT);
    CHECK_EQ(a.share.conn, 0);
    CHECK_EQ(w.core.nwaiters, 0);
    CHECK_EQ(w.stats.c[STAT_TIMEOUTS], 1);
    t_world_fini(&w);
}

/* A member that misses its heartbeats breaks the generation: the others hear MEMBER_LOST, the broken
 * key is set, and the survivor's next heartbeat is told the generation ended. */
static void t_heartbeat_expiry(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node n[3] = {{0}};
    char msg[128];
    t_world_init(&w, 1000);
    uint64_t gen = t_form(&w, n, 3);
    t_advance(600);
    CHECK_EQ(rdzv_heartbeat(n[0].node, gen, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(rdzv_heartbeat(n[1].node, gen, msg, sizeof msg), MUSTER__STATUS__OK);
    t_advance(399);
    CHECK_EQ(n[0].events, 0);
    t_advance(1); /* n2's deadline */
    CHECK_EQ(n[0].events, 1);
    CHECK_EQ(n[0].last_event, RDZV_MEMBER_LOST);
    CHECK_EQ(n[1].events, 1);
    CHECK_EQ(n[2].events, 0);
    CHECK_EQ(w.stats.c[STAT_RDZV_HEARTBEAT_TIMEOUTS], 1);
    CHECK_STR(t_value(&w, "muster/rdzv/1/broken"), "n2");
    CHECK_EQ(rdzv_heartbeat(n[0].node, gen, msg, sizeof msg), MUSTER__STATUS__STALE_GENERATION);
    /* The survivors' heartbeat timers were disarmed with the break: nothing more fires. */
    t_advance(5000);
    CHECK_EQ(n[0].events, 1);
    struct rdzv_info ri;
    CHECK_EQ(rdzv_info(w.ns, &ri), 0);
    CHECK_EQ(ri.running, 0);
    CHECK_EQ(ri.failures, 1);
    t_world_fini(&w);
}

/* Leaving unfinished breaks the generation; a join during a running generation tells members
 * NODE_WAITING, and the round it opened closes once the generation is broken. */
static void t_leave_breaks(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node n[2] = {{0}}, late = {.session = 9};
    char msg[128];
    t_world_init(&w, 0);
    uint64_t gen = t_form(&w, n, 2);
    CHECK_EQ(t_join(&w, &late, "late", 1, 2, 0), MUSTER__STATUS__OK);
    CHECK_EQ(late.replies, 0); /* a running generation holds the round */
    CHECK_EQ(n[0].last_event, RDZV_NODE_WAITING);
    CHECK_EQ(n[1].events, 1);
    rdzv_leave(n[1].node, 0);
    CHECK(n[1].node == NULL);
    CHECK_EQ(n[0].events, 2);
    CHECK_EQ(n[0].last_event, RDZV_MEMBER_LOST);
    CHECK_EQ(n[0].event_gen, gen);
    CHECK_EQ(late.replies, 1); /* the break let the waiting round close */
    CHECK_EQ(late.a.generation, gen + 1);
    CHECK_EQ(rdzv_heartbeat(n[0].node, gen, msg, sizeof msg), MUSTER__STATUS__STALE_GENERATION);
    CHECK_EQ(rdzv_heartbeat(n[1].node, gen, msg, sizeof msg), MUSTER__STATUS__NOT_MEMBER);
    /* The owner going away (a closed connection) ends its node. */
    rdzv_node_gone(n[0].node);
    CHECK(n[0].node == NULL);
    CHECK(rdzv_in_use(w.ns)); /* "late" is a member of the next generation */
    t_world_fini(&w);
}

/* Every member leaving finished completes the generation: no failure, no event, no broken key. */
static void t_leave_finished(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node n[3] = {{0}};
    struct rdzv_info ri;
    t_world_init(&w, 1000);
    CHECK(!rdzv_in_use(w.ns));
    t_form(&w, n, 3);
    CHECK(rdzv_in_use(w.ns));
    rdzv_leave(n[0].node, 1);
    rdzv_leave(n[1].node, 1);
    CHECK_EQ(rdzv_info(w.ns, &ri), 0);
    CHECK_EQ(ri.running, 1);
    CHECK_EQ(ri.completed, 0);
    CHECK(rdzv_in_use(w.ns)); /* the generation runs: the namespace's idle reclamation must wait */
    rdzv_leave(n[2].node, 1);
    CHECK(!rdzv_in_use(w.ns)); /* the job ended */
    CHECK_EQ(rdzv_info(w.ns, &ri), 0);
    CHECK_EQ(ri.running, 0);
    CHECK_EQ(ri.completed, 1);
    CHECK_EQ(ri.failures, 0);
    CHECK_EQ(n[2].events + n[1].events + n[0].events, 0);
    CHECK_STR(t_value(&w, "muster/rdzv/1/broken"), "");
    t_advance(5000); /* finished members owe no heartbeats */
    CHECK_EQ(w.stats.c[STAT_RDZV_HEARTBEAT_TIMEOUTS], 0);
    t_world_fini(&w);
}

/* Draining answers parked joins SHUTTING_DOWN. */
static void t_rdzv_shutdown(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node a = {.session = 1};
    t_world_init(&w, 0);
    CHECK_EQ(t_join(&w, &a, "", 2, 2, 0), MUSTER__STATUS__OK);
    rdzv_shutdown(w.ns);
    CHECK_EQ(a.status, MUSTER__STATUS__SHUTTING_DOWN);
    CHECK_EQ(a.parked, 0);
    CHECK_EQ(w.core.nwaiters, 0);
    t_world_fini(&w);
}

/* ------------------------------------------------------------- barriers */

/* What an arrival was told. */
struct t_arrival {
    int done, status;
    uint64_t round;
    uint32_t arrival;
};

/* An arrival's end. */
static void t_barrier_done(struct barrier_arrival *a, int status, uint64_t round, uint32_t arrival)
{
    struct t_arrival *t = a->owner;
    t->done++;
    t->status = status;
    t->round = round;
    t->arrival = arrival;
}

/* The count-th arrival releases its round; the next arrival opens round 2; a lone arrival times out. */
static void t_barrier(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_arrival x[4] = {{0}};
    struct barrier_arrival *a;
    const char *why;
    t_world_init(&w, 0);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(barrier_arrive(w.ns, "b", 1, 3, 1000, NULL, t_barrier_done, &x[i], NULL, 1, &a, &why),
                 MUSTER__STATUS__OK);
        CHECK(a != NULL);
    }
    CHECK_EQ(barrier_arrive(w.ns, "b", 1, 4, 1000, NULL, t_barrier_done, &x[3], NULL, 1, &a, &why),
             MUSTER__STATUS__BAD_REQUEST);
    CHECK_EQ(x[0].done, 0);
    CHECK_EQ(barrier_arrive(w.ns, "b", 1, 3, 1000, NULL, t_barrier_done, &x[2], NULL, 1, &a, &why),
             MUSTER__STATUS__OK);
    CHECK(a == NULL);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(x[i].done, 1);
        CHECK_EQ(x[i].status, MUSTER__STATUS__OK);
        CHECK_EQ(x[i].round, 1);
    }
    CHECK_EQ(x[2].arrival, 3);
    CHECK_EQ(w.core.nwaiters, 0);
    CHECK_EQ(barrier_arrive(w.ns, "b", 1, 2, 100, NULL, t_barrier_done, &x[3], NULL, 1, &a, &why),
             MUSTER__STATUS__OK);
    t_advance(99);
    CHECK_EQ(x[3].done, 0);
    t_advance(1);
    CHECK_EQ(x[3].done, 1);
    CHECK_EQ(x[3].status, MUSTER__STATUS__TIMEOUT);
    CHECK_EQ(x[3].round, 2);
    CHECK_EQ(w.stats.c[STAT_TIMEOUTS], 1);
    t_world_fini(&w);
}

/* -------------------------------------------------------------- waiters */

/* What a waiter was told. */
struct t_wait {
    int done, status;
};

/* A waiter's end. */
static void t_wait_done(struct waiter *wt, int status)
{
    struct t_wait *t = wt->owner;
    t->done++;
    t->status = status;
}

/* A waiter wakes after the set of its last missing key, from a deferred call (not inside the set), and
 * one whose keys never come times out. */
static void t_waiters(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_wait a = {0}, b = {0};
    const char *keys[] = {"k1", "k2"};
    int st;
    t_world_init(&w, 0);
    CHECK(waiters_park(w.ns, keys, NULL, 2, 1000, t_wait_done, &a, NULL, 1, 0, &st) != NULL);
    CHECK(waiters_park(w.ns, keys, NULL, 1, 500, t_wait_done, &b, NULL, 2, 0, &st) != NULL);
    CHECK_EQ(w.core.nwaiters, 2);
    CHECK_EQ(ks_set(&w.ns->ks, "k2", 2, (uint8_t *)"v", 1, 0), MUSTER__STATUS__OK);
    CHECK_EQ(w.sets, 1); /* the set reached the sink */
    t_turn();
    CHECK_EQ(a.done, 0);
    CHECK_EQ(ks_set(&w.ns->ks, "k1", 2, (uint8_t *)"v", 1, 0), MUSTER__STATUS__OK);
    CHECK_EQ(a.done, 0); /* woken later in the turn, so the setter is answered first */
    t_turn();
    CHECK_EQ(a.done, 1);
    CHECK_EQ(a.status, MUSTER__STATUS__OK);
    CHECK_EQ(b.done, 1);
    CHECK_EQ(w.stats.c[STAT_WAITS_WOKEN], 2);
    const char *missing[] = {"never"};
    struct t_wait c = {0};
    CHECK(waiters_park(w.ns, missing, NULL, 1, 300, t_wait_done, &c, NULL, 3, 0, &st) != NULL);
    t_advance(300);
    CHECK_EQ(c.done, 1);
    CHECK_EQ(c.status, MUSTER__STATUS__TIMEOUT);
    CHECK_EQ(w.core.nwaiters, 0);
    t_world_fini(&w);
}

/* A counting waiter (TCPStore's BARRIER) wakes when its key's count reaches its number, whoever adds or
 * sets it; a value that is not a count keeps it parked; waiters of lower numbers wake first. */
static void t_count_waiters(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_wait two = {0}, three = {0};
    int64_t n;
    int st;
    t_world_init(&w, 0);
    CHECK_EQ(ks_add(&w.ns->ks, "bar", 3, 1, &n), MUSTER__STATUS__OK);
    CHECK(waiters_park_count(w.ns, "bar", 3, 2, 1000, t_wait_done, &two, NULL, 1, 0, &st) != NULL);
    CHECK(waiters_park_count(w.ns, "bar", 3, 3, 1000, t_wait_done, &three, NULL, 2, 0, &st) != NULL);
    t_turn();
    CHECK_EQ(two.done + three.done, 0); /* the key exists, but its count is 1 */
    CHECK_EQ(ks_add(&w.ns->ks, "bar", 3, 1, &n), MUSTER__STATUS__OK);
    t_turn();
    CHECK_EQ(two.done, 1);
    CHECK_EQ(two.status, MUSTER__STATUS__OK);
    CHECK_EQ(three.done, 0); /* re-parked on the key: 2 < 3 */
    CHECK_EQ(ks_set(&w.ns->ks, "bar", 3, (uint8_t *)"x", 1, 0), MUSTER__STATUS__OK);
    t_turn();
    CHECK_EQ(three.done, 0); /* not a count */
    CHECK_EQ(ks_set(&w.ns->ks, "bar", 3, (uint8_t *)"7", 1, 0), MUSTER__STATUS__OK);
    t_turn();
    CHECK_EQ(three.done, 1);
    CHECK_EQ(three.status, MUSTER__STATUS__OK);
    CHECK_EQ(w.core.nwaiters, 0);
    t_world_fini(&w);
}

/* The parked-request budget: the namespace's share runs out with LIMIT, counted. */
static void t_budget(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_wait t[3] = {{0}};
    const char *keys[] = {"x"};
    int st;
    t_world_init(&w, 0);
    w.core.lim.max_waiters_per_ns = 2;
    CHECK(waiters_park(w.ns, keys, NULL, 1, 100, t_wait_done, &t[0], NULL, 1, 0, &st) != NULL);
    CHECK(waiters_park(w.ns, keys, NULL, 1, 100, t_wait_done, &t[1], NULL, 2, 0, &st) != NULL);
    CHECK(waiters_park(w.ns, keys, NULL, 1, 100, t_wait_done, &t[2], NULL, 3, 0, &st) == NULL);
    CHECK_EQ(st, MUSTER__STATUS__LIMIT);
    CHECK_EQ(w.stats.c[STAT_LIMIT_WAITERS_PER_NS], 1);
    CHECK_STR(core_waiter_why(&w.core, &w.ns->nwaiters, NULL),
              "too many parked requests in this namespace (--max-waiters-per-ns, at most half of --max-waiters)");
    waiters_fail_all(w.ns, MUSTER__STATUS__SHUTTING_DOWN);
    CHECK_EQ(t[0].status, MUSTER__STATUS__SHUTTING_DOWN);
    t_world_fini(&w);
}

/* An address's share: its connections' parked requests together, in any namespace, stop at
 * --max-waiters-per-source, and never above half of --max-waiters whatever the flags say. */
static void t_budget_source(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_wait t[8] = {{0}};
    const char *keys[] = {"x"};
    size_t from_source = 0;
    struct core_share c1 = {0, &from_source}, c2 = {0, &from_source}, other = {0, NULL};
    int st;
    t_world_init(&w, 0);
    struct ns *ns2 = calloc(1, sizeof *ns2 + 4);
    memcpy(ns2->name, "two", 4);
    core_ns_init(&w.core, ns2, 1000, 1 << 20, 1 << 20);
    w.core.lim.max_waiters = 8;
    w.core.lim.max_waiters_per_source = 1000; /* above half: 4 is the share */
    for (int i = 0; i < 4; i++) /* two connections, two namespaces */
        CHECK(waiters_park(i % 2 ? ns2 : w.ns, keys, NULL, 1, 100, t_wait_done, &t[i], i < 2 ? &c1 : &c2,
                           (uint64_t)i + 1, 0, &st) != NULL);
    CHECK(waiters_park(ns2, keys, NULL, 1, 100, t_wait_done, &t[4], &c1, 5, 0, &st) == NULL);
    CHECK_EQ(st, MUSTER__STATUS__LIMIT);
    CHECK_EQ(w.stats.c[STAT_LIMIT_WAITERS_PER_SOURCE], 1);
    CHECK_STR(core_waiter_why(&w.core, &w.ns->nwaiters, &c1),
              "too many parked requests from this address (--max-waiters-per-source, at most half of --max-waiters)");
    CHECK_EQ(from_source, 4);
    CHECK_EQ(c1.conn + c2.conn, 4);
    /* Another address still parks in what is left. */
    for (int i = 5; i < 8; i++)
        CHECK(waiters_park(i < 7 ? w.ns : ns2, keys, NULL, 1, 100, t_wait_done, &t[i], &other, (uint64_t)i + 1, 0,
                           &st) != NULL);
    waiters_fail_all(w.ns, MUSTER__STATUS__SHUTTING_DOWN);
    waiters_fail_all(ns2, MUSTER__STATUS__SHUTTING_DOWN);
    core_ns_fini(ns2);
    free(ns2);
    CHECK_EQ(from_source, 0);
    CHECK_EQ(c1.conn + c2.conn + other.conn, 0);
    t_world_fini(&w);
}

/* -------------------------------------------------------------- watches */

/* A fake connection owning watches: what its callback was told. */
struct t_watcher {
    size_t nwatches;
    int events, sets, deletes;
    uint64_t last_id;
    char key[64], val[64];
    int end_next; /* ask for the watch to end at the next event (the front end's output limit) */
    size_t memo_seen; /* the change's memo as this watcher found it */
};

/* A match: note it, and end the watch when asked to. */
static int t_watch_notify(void *owner, const struct watch *w, struct watch_change *ch)
{
    struct t_watcher *o = owner;
    enum ks_change what = ch->what;
    const char *key = ch->key;
    size_t klen = ch->klen;
    const void *val = ch->val;
    size_t vlen = ch->vlen;
    o->memo_seen = ch->memo;
    ch->memo = 7; /* what the first watcher of a change works out, the others find */
    o->events++;
    if (what == KS_SET)
        o->sets++;
    else
        o->deletes++;
    o->last_id = w->id;
    snprintf(o->key, sizeof o->key, "%.*s", (int)klen, key);
    snprintf(o->val, sizeof o->val, "%.*s", val ? (int)vlen : 0, val ? (const char *)val : "");
    if (o->end_next) {
        o->end_next = 0;
        return 1;
    }
    return 0;
}

static const struct watch_owner_ops t_watch_ops = {.notify = t_watch_notify};

/* Register prefix for o; the watch id, 0 when refused (status in *st). */
static uint64_t t_watch(struct t_world *w, struct t_watcher *o, const char *prefix, int *st)
{
    struct watch *wt = watch_add(w->ns, prefix, strlen(prefix), &t_watch_ops, o, &o->nwatches, st);
    return wt ? wt->id : 0;
}

/* One set reaches every watcher of a matching prefix (with its value) and no other; a delete reaches
 * the same watchers without a value. */
static void t_watch_fanout(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_watcher a = {0}, b = {0}, c = {0}, d = {0};
    int st;
    t_world_init(&w, 0);
    CHECK(core_ns_empty(w.ns));
    uint64_t ia = t_watch(&w, &a, "job/", &st);
    CHECK_EQ(st, MUSTER__STATUS__OK);
    uint64_t ib = t_watch(&w, &b, "job/rank", &st);
    CHECK(t_watch(&w, &c, "other/", &st) != 0);
    CHECK(t_watch(&w, &d, "", &st) != 0); /* the empty prefix matches every key */
    CHECK(ia != 0 && ib != 0 && ia != ib);
    CHECK_EQ(w.core.nwatches, 4);
    CHECK(!core_ns_empty(w.ns)); /* a namespace with watches is not forgotten */
    CHECK_EQ(ks_set(&w.ns->ks, "job/rank0", 9, (uint8_t *)"addr", 4, 0), MUSTER__STATUS__OK);
    CHECK_EQ(a.sets, 1);
    CHECK_EQ(a.last_id, ia);
    CHECK_STR(a.key, "job/rank0");
    CHECK_STR(a.val, "addr");
    CHECK_EQ(b.sets, 1);
    CHECK_EQ(b.last_id, ib);
    CHECK_STR(b.val, "addr");
    CHECK_EQ(c.events, 0);
    CHECK_EQ(d.sets, 1);
    CHECK_EQ(w.sets, 1); /* the record went to the sink too */
    CHECK_EQ(d.memo_seen, 0); /* the newest watch is told first, with a fresh memo */
    CHECK_EQ(b.memo_seen, 7); /* the others of the same change find what it left */
    CHECK_EQ(a.memo_seen, 7);
    /* A key shorter than a prefix does not match it. */
    CHECK_EQ(ks_set(&w.ns->ks, "job/r", 5, (uint8_t *)"x", 1, 0), MUSTER__STATUS__OK);
    CHECK_EQ(a.sets, 2);
    CHECK_EQ(b.sets, 1);
    CHECK_EQ(d.memo_seen, 0); /* each change starts a fresh memo */
    CHECK_EQ(ks_delete(&w.ns->ks, "job/rank0", 9), 1);
    CHECK_EQ(a.deletes, 1);
    CHECK_EQ(b.deletes, 1);
    CHECK_STR(b.key, "job/rank0");
    CHECK_STR(b.val, "");
    CHECK_EQ(c.events, 0);
    CHECK_EQ(d.deletes, 1);
    CHECK_EQ(watch_fanout(w.ns, KS_SET, "other/k", 7, NULL), 2); /* c and d */
    CHECK_EQ(c.sets, 1);
    t_world_fini(&w); /* frees the watches left */
}

/* Unwatch removes one watch of its owner only; removing an owner's watches leaves the others'; a callback
 * that asks to end its watch (the output limit) removes it and its counts. */
static void t_watch_remove(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_watcher a = {0}, b = {0};
    int st;
    t_world_init(&w, 0);
    uint64_t a1 = t_watch(&w, &a, "k", &st);
    uint64_t a2 = t_watch(&w, &a, "k", &st);
    uint64_t b1 = t_watch(&w, &b, "k", &st);
    CHECK_EQ(a.nwatches, 2);
    CHECK_EQ(w.core.nwatches, 3);
    CHECK_EQ(watch_del_id(w.ns, &b, a1), 0); /* not b's */
    CHECK_EQ(watch_del_id(w.ns, &a, 9999), 0);
    CHECK_EQ(watch_del_id(w.ns, &a, a1), 1);
    CHECK_EQ(watch_del_id(w.ns, &a, a1), 0); /* already gone */
    CHECK_EQ(a.nwatches, 1);
    CHECK_EQ(ks_set(&w.ns->ks, "k1", 2, (uint8_t *)"v", 1, 0), MUSTER__STATUS__OK);
    CHECK_EQ(a.events, 1);
    CHECK_EQ(a.last_id, a2);
    CHECK_EQ(b.events, 1);
    /* b's watch ends at its next event: it is told, then removed. */
    b.end_next = 1;
    CHECK_EQ(ks_set(&w.ns->ks, "k2", 2, (uint8_t *)"v", 1, 0), MUSTER__STATUS__OK);
    CHECK_EQ(b.events, 2);
    CHECK_EQ(b.last_id, b1);
    CHECK_EQ(b.nwatches, 0);
    CHECK_EQ(w.core.nwatches, 1);
    CHECK_EQ(ks_set(&w.ns->ks, "k3", 2, (uint8_t *)"v", 1, 0), MUSTER__STATUS__OK);
    CHECK_EQ(b.events, 2);
    CHECK_EQ(a.events, 3);
    /* An owner that goes takes its watches. */
    t_watch(&w, &b, "k", &st);
    watch_del_owner(w.ns, &a);
    CHECK_EQ(a.nwatches, 0);
    CHECK_EQ(b.nwatches, 1);
    CHECK_EQ(w.core.nwatches, 1);
    CHECK_EQ(ks_delete(&w.ns->ks, "k1", 2), 1);
    CHECK_EQ(a.events, 3);
    CHECK_EQ(b.deletes, 1);
    watch_del_owner(w.ns, &b);
    CHECK_EQ(w.core.nwatches, 0);
    CHECK(core_ns_empty(w.ns) == 0); /* keys are left */
    t_world_fini(&w);
}

/* The watch limits: an owner's share, then the server's, each refused with LIMIT and counted. */
static void t_watch_limit(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_watcher a = {0}, b = {0}, c = {0};
    int st;
    t_world_init(&w, 0);
    w.core.lim.max_watches = 3;
    w.core.lim.max_watches_per_conn = 2;
    CHECK(t_watch(&w, &a, "x", &st) != 0);
    CHECK(t_watch(&w, &a, "y", &st) != 0);
    CHECK_EQ(watch_full(&w.core, &a.nwatches), STAT_LIMIT_WATCHES_PER_CONN);
    CHECK_EQ(t_watch(&w, &a, "z", &st), 0);
    CHECK_EQ(st, MUSTER__STATUS__LIMIT);
    CHECK_EQ(w.stats.c[STAT_LIMIT_WATCHES_PER_CONN], 1);
    CHECK_EQ(a.nwatches, 2);
    CHECK(t_watch(&w, &b, "x", &st) != 0);
    CHECK_EQ(t_watch(&w, &c, "x", &st), 0);
    CHECK_EQ(st, MUSTER__STATUS__LIMIT);
    CHECK_EQ(watch_full(&w.core, &c.nwatches), STAT_LIMIT_WATCHES);
    CHECK_EQ(w.stats.c[STAT_LIMIT_WATCHES], 1);
    CHECK_EQ(c.nwatches, 0);
    CHECK_EQ(w.core.nwatches, 3);
    /* A freed slot can be taken again. */
    watch_del_owner(w.ns, &b);
    CHECK(t_watch(&w, &c, "x", &st) != 0);
    CHECK_EQ(st, MUSTER__STATUS__OK);
    t_world_fini(&w);
}

/* Run the core tests. */
int main(void)
{
    h_init("unit-core", 30);
    int64_t t0 = h_now_ms();
    H_RUN(t_round_min, NULL);
    H_RUN(t_round_last_call, NULL);
    H_RUN(t_join_timeout, NULL);
    H_RUN(t_heartbeat_expiry, NULL);
    H_RUN(t_leave_breaks, NULL);
    H_RUN(t_leave_finished, NULL);
    H_RUN(t_rdzv_shutdown, NULL);
    H_RUN(t_barrier, NULL);
    H_RUN(t_waiters, NULL);
    H_RUN(t_count_waiters, NULL);
    H_RUN(t_budget, NULL);
H_RUN(t_budget_source, NULL);
    H_RUN(t_watch_fanout, NULL);
    H_RUN(t_watch_remove, NULL);
    H_RUN(t_watch_limit, NULL);
    /* Fake time: the whole program runs in far less than the deadlines it exercises. */
    CHECK(h_now_ms() - t0 < 1000);
    return h_finish();
}
