/*
 * Rendezvous rounds against a real musterd: min/max/last-call closing,
 * deterministic ranks, conflicts, server-chosen ids, join timeouts, growing
 * generation numbers, leave and re-join, node-waiting events, and the keys
 * the daemon publishes.  Concurrent joiners are threads, each with its own
 * handle; every check runs on the main thread.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <muster/rdzv.h>

#include "hclient.h"

/* One node joining a round from its own thread. */
struct joiner {
    muster_t *m;
    muster_rdzv_opts o;
    char id[64];
    uint32_t timeout_ms;
    muster_assignment *a;
    int rc;
    int64_t t_start;
    int64_t t_done;
    pthread_t th;
};

static struct h_daemon d;

/* Thread body: one blocking join. */
static void *joiner_main(void *arg)
{
    struct joiner *j = arg;
    j->rc = muster_rdzv_join(j->m, &j->o, &j->a, j->timeout_ms);
    j->t_done = h_now_ms();
    return NULL;
}

/* Prepare a joiner in namespace ns (connects on the main thread). */
static void joiner_init(struct joiner *j, const char *ns, const char *id, uint32_t lws, uint32_t min,
                        uint32_t max, uint32_t last_call)
{
    memset(j, 0, sizeof *j);
    j->m = hc_connect(&d, ns, NULL);
    snprintf(j->id, sizeof j->id, "%s", id);
    j->o.node_id = j->id;
    j->o.local_world_size = lws;
    j->o.min_nodes = min;
    j->o.max_nodes = max;
    j->o.last_call_ms = last_call;
    j->timeout_ms = 10000;
}

/* Start the joiner's thread. */
static void joiner_start(struct joiner *j)
{
    j->t_start = h_now_ms();
    if (pthread_create(&j->th, NULL, joiner_main, j) != 0) {
        CHECK(!"pthread_create");
        j->rc = -1;
        j->th = 0;
    }
}

/* Wait for the joiner's thread to finish its join. */
static void joiner_wait(struct joiner *j)
{
    if (j->th)
        pthread_join(j->th, NULL);
    j->th = 0;
}

/* Free the joiner's assignment and close its handle. */
static void joiner_free(struct joiner *j)
{
    muster_assignment_free(j->a);
    j->a = NULL;
    muster_close(j->m);
    j->m = NULL;
}

/* Start n joiners and wait for all of them. */
static void join_all(struct joiner *js, int n)
{
    for (int i = 0; i < n; i++)
        joiner_start(&js[i]);
    for (int i = 0; i < n; i++)
        joiner_wait(&js[i]);
}

/* Read a key as a string into buf ("" when absent). */
static void read_key(muster_t *m, const char *key, char *buf, size_t n)
{
    void *v = NULL;
    size_t len = 0;
    buf[0] = '\0';
    if (muster_get(m, key, 0, 0, &v, &len) == MUSTER_OK && len < n) {
        memcpy(buf, v, len);
        buf[len] = '\0';
    }
    muster_free(v);
}

/* Three joiners, min 2, max 4, last call 300 ms: all land in one generation after the last call. */
static void t_last_call(void *arg)
{
    (void)arg;
    struct joiner js[3];
    const char *ids[3] = {"n1", "n2", "n3"};
    for (int i = 0; i < 3; i++)
        joiner_init(&js[i], "lastcall", ids[i], 1, 2, 4, 300);
    join_all(js, 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(js[i].rc, MUSTER_OK);
        if (js[i].rc != MUSTER_OK)
            continue;
        CHECK_EQ(js[i].a->num_nodes, 3);
        CHECK_EQ(js[i].a->world_size, 3);
        CHECK(js[i].a->generation == js[0].a->generation);
        /* Not at max: the round waited for the last call. */
        CHECK(js[i].t_done - js[i].t_start >= 250);
        CHECK(js[i].t_done - js[i].t_start < 3000);
    }
    for (int i = 0; i < 3; i++)
        joiner_free(&js[i]);
}

/* At max_nodes the round closes at once, long before the last call would end. */
static void t_max_closes(void *arg)
{
    (void)arg;
    struct joiner js[2];
    joiner_init(&js[0], "maxclose", "a", 1, 1, 2, 5000);
    joiner_init(&js[1], "maxclose", "b", 1, 1, 2, 5000);
    join_all(js, 2);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(js[i].rc, MUSTER_OK);
        CHECK(js[i].t_done - js[i].t_start < 2000);
        if (js[i].rc == MUSTER_OK)
            CHECK_EQ(js[i].a->num_nodes, 2);
    }
    joiner_free(&js[0]);
    joiner_free(&js[1]);
}

/* Ranks follow node id byte order; rank_start is the prefix sum of local world sizes. */
static void t_deterministic_ranks(void *arg)
{
    (void)arg;
    struct joiner js[3];
    joiner_init(&js[0], "ranks", "node-c", 1, 3, 3, 0);
    joiner_init(&js[1], "ranks", "node-a", 2, 3, 3, 0);
    joiner_init(&js[2], "ranks", "node-b", 3, 3, 3, 0);
    /* Two ask for the member list; the third gets only its own place (the small default). */
    js[0].o.want_members = js[1].o.want_members = 1;
    join_all(js, 3);
    static const uint32_t want_rank[3] = {2, 0, 1}, want_start[3] = {5, 0, 2};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(js[i].rc, MUSTER_OK);
        if (js[i].rc != MUSTER_OK)
            continue;
        muster_assignment *a = js[i].a;
        CHECK_EQ(a->node_rank, want_rank[i]);
        CHECK_EQ(a->rank_start, want_start[i]);
        CHECK_EQ(a->world_size, 6);
        CHECK_EQ(a->local_world_size, js[i].o.local_world_size);
        CHECK_STR(a->node_id, js[i].id);
        CHECK_EQ(a->n_members, js[i].o.want_members ? 3u : 0u);
        CHECK(js[i].o.want_members || a->members == NULL);
        if (a->n_members == 3) {
            CHECK_STR(a->members[0].node_id, "node-a");
            CHECK_STR(a->members[1].node_id, "node-b");
            CHECK_STR(a->members[2].node_id, "node-c");
            CHECK_EQ(a->members[2].rank_start, 5);
            CHECK_EQ(a->members[1].local_world_size, 3);
        }
    }
    for (int i = 0; i < 3; i++)
        joiner_free(&js[i]);
}

/* Two joiners that cannot share a round: exactly one is refused with CONFLICT, the other waits. */
static void conflict_pair(const char *ns, const char *id1, uint32_t min1, const char *id2, uint32_t min2)
{
    struct joiner js[2];
    joiner_init(&js[0], ns, id1, 1, min1, 3, 0);
    joiner_init(&js[1], ns, id2, 1, min2, 3, 0);
    js[0].timeout_ms = js[1].timeout_ms = 800;
    join_all(js, 2);
    int conflicts = (js[0].rc == MUSTER_ECONFLICT) + (js[1].rc == MUSTER_ECONFLICT);
    int timeouts = (js[0].rc == MUSTER_ETIMEDOUT) + (js[1].rc == MUSTER_ETIMEDOUT);
    CHECK_EQ(conflicts, 1);
    CHECK_EQ(timeouts, 1);
    joiner_free(&js[0]);
    joiner_free(&js[1]);
}

/* Disagreeing min/max and a duplicate node id are refused with CONFLICT; "" gets a unique id. */
static void t_conflicts(void *arg)
{
    (void)arg;
    struct joiner anon[2];
    conflict_pair("conflict-params", "x", 3, "y", 2);
    conflict_pair("conflict-id", "x", 3, "x", 3);
    joiner_init(&anon[0], "anon", "", 1, 2, 2, 0);
    joiner_init(&anon[1], "anon", "", 1, 2, 2, 0);
    join_all(anon, 2);
    CHECK_EQ(anon[0].rc, MUSTER_OK);
    CHECK_EQ(anon[1].rc, MUSTER_OK);
    if (anon[0].a && anon[1].a) {
        CHECK(anon[0].a->node_id[0] != '\0');
        CHECK(strcmp(anon[0].a->node_id, anon[1].a->node_id) != 0);
        CHECK(anon[0].a->node_rank != anon[1].a->node_rank);
    }
    joiner_free(&anon[0]);
    joiner_free(&anon[1]);
}

/* A join times out server-side, the handle stays usable, and the timed-out node is not in the next round. */
static void t_join_timeout(void *arg)
{
    (void)arg;
    struct joiner lone, js[2];
    joiner_init(&lone, "timeout", "lone", 1, 2, 2, 0);
    lone.timeout_ms = 300;
    int64_t t0 = h_now_ms();
    lone.rc = muster_rdzv_join(lone.m, &lone.o, &lone.a, lone.timeout_ms);
    int64_t took = h_now_ms() - t0;
    CHECK_EQ(lone.rc, MUSTER_ETIMEDOUT);
    CHECK(took >= 250 && took < 1200);
    CHECK_EQ(hc_set_str(lone.m, "after/timeout", "ok"), MUSTER_OK);
    HC_EXPECT(lone.m, "after/timeout", "ok");
    joiner_init(&js[0], "timeout", "p", 1, 2, 2, 0);
    joiner_init(&js[1], "timeout", "q", 1, 2, 2, 0);
    js[0].o.want_members = 1;
    join_all(js, 2);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(js[i].rc, MUSTER_OK);
        if (js[i].a)
            CHECK_EQ(js[i].a->num_nodes, 2);
    }
    CHECK(js[0].a && js[0].a->n_members == 2);
    if (js[0].a && js[0].a->n_members == 2) {
        CHECK_STR(js[0].a->members[0].node_id, "p");
        CHECK_STR(js[0].a->members[1].node_id, "q");
    }
    joiner_free(&lone);
    joiner_free(&js[0]);
    joiner_free(&js[1]);
}

/* Wait up to ms for the next membership event on m; returns its kind or 0. */
static int next_membership(muster_t *m, uint32_t ms, uint64_t *gen, char *node, size_t n)
{
    int64_t end = h_now_ms() + ms;
    while (h_now_ms() < end) {
        muster_event *ev = NULL;
        if (muster_next_event(m, &ev, (uint32_t)(end - h_now_ms())) != MUSTER_OK)
            return 0;
        int kind = ev->kind;
        if (kind == MUSTER_EVENT_MEMBER_LOST || kind == MUSTER_EVENT_NODE_WAITING) {
            if (gen)
                *gen = ev->generation;
            if (node)
                snprintf(node, n, "%s", ev->node_id ? ev->node_id : "");
            muster_event_free(ev);
            return kind;
        }
        muster_event_free(ev);
    }
    return 0;
}

/* Leave breaks the generation: the other member hears MEMBER_LOST, its heartbeat goes stale,
 * the broken key names the node, and the re-formed world gets the next generation. */
static void t_leave_and_rejoin(void *arg)
{
    (void)arg;
    struct joiner js[2];
    char node[128], val[64], key[96];
    uint64_t gen = 0;
    joiner_init(&js[0], "leave", "a", 1, 2, 2, 0);
    joiner_init(&js[1], "leave", "b", 1, 2, 2, 0);
    join_all(js, 2);
    if (js[0].rc != MUSTER_OK || js[1].rc != MUSTER_OK) {
        CHECK(!"first generation did not form");
        joiner_free(&js[0]);
        joiner_free(&js[1]);
        return;
    }
    uint64_t g1 = js[0].a->generation;
    CHECK(g1 >= 1);
    snprintf(key, sizeof key, "%llu", (unsigned long long)g1);
    read_key(js[0].m, "muster/rdzv/generation", val, sizeof val);
    CHECK_STR(val, key);
    CHECK_EQ(muster_rdzv_heartbeat(js[1].m, g1, 0), MUSTER_OK);
    CHECK_EQ(muster_rdzv_leave(js[0].m, 0), MUSTER_OK);
    CHECK_EQ(next_membership(js[1].m, 2000, &gen, node, sizeof node), MUSTER_EVENT_MEMBER_LOST);
    CHECK(gen == g1);
    CHECK_STR(node, "a");
    CHECK_EQ(muster_rdzv_heartbeat(js[1].m, g1, 0), MUSTER_ESTALE);
    snprintf(key, sizeof key, "muster/rdzv/%llu/broken", (unsigned long long)g1);
    read_key(js[1].m, key, val, sizeof val);
    CHECK_STR(val, "a");
    /* A handle that never joined is no member. */
    muster_t *other = hc_connect(&d, "leave", NULL);
    CHECK_EQ(muster_rdzv_heartbeat(other, g1, 0), MUSTER_ENOTMEMBER);
    muster_close(other);
    muster_assignment_free(js[0].a);
    muster_assignment_free(js[1].a);
    js[0].a = js[1].a = NULL;
    join_all(js, 2);
    CHECK_EQ(js[0].rc, MUSTER_OK);
    CHECK_EQ(js[1].rc, MUSTER_OK);
    if (js[0].a && js[1].a) {
        CHECK(js[0].a->generation == g1 + 1);
        CHECK(js[1].a->generation == g1 + 1);
    }
    joiner_free(&js[0]);
    joiner_free(&js[1]);
}

/* Members that leave finished do not break their generation: the one still running hears nothing and
 * keeps heartbeating, no failure is counted and no broken key appears; once the last one finishes the
 * generation is complete, and the job's next round forms the next generation. */
static void t_finish(void *arg)
{
    (void)arg;
    struct joiner js[2];
    char key[96];
    joiner_init(&js[0], "finish", "a", 1, 2, 2, 0);
    joiner_init(&js[1], "finish", "b", 1, 2, 2, 0);
    join_all(js, 2);
    if (js[0].rc != MUSTER_OK || js[1].rc != MUSTER_OK) {
        CHECK(!"generation did not form");
        joiner_free(&js[0]);
        joiner_free(&js[1]);
        return;
    }
    uint64_t g1 = js[0].a->generation;
    long long failures = h_stat(&d, "rdzv_failures");
    CHECK_EQ(muster_rdzv_finish(js[0].m, 0), MUSTER_OK);
    muster_event *ev = NULL;
    CHECK_EQ(muster_next_event(js[1].m, &ev, 300), MUSTER_ETIMEDOUT); /* no MEMBER_LOST */
    muster_event_free(ev);
    CHECK_EQ(muster_rdzv_heartbeat(js[1].m, g1, 0), MUSTER_OK);
    CHECK_EQ(muster_rdzv_finish(js[1].m, 0), MUSTER_OK);
    CHECK_EQ(muster_rdzv_finish(js[1].m, 0), MUSTER_ENOTMEMBER);
    CHECK_EQ(h_stat(&d, "rdzv_failures"), failures);
    snprintf(key, sizeof key, "muster/rdzv/%llu/broken", (unsigned long long)g1);
    size_t n = 0;
    void *v = NULL;
    CHECK_EQ(muster_get(js[1].m, key, 0, 0, &v, &n), MUSTER_ENOTFOUND);
    muster_free(v);
    muster_assignment_free(js[0].a);
    muster_assignment_free(js[1].a);
    js[0].a = js[1].a = NULL;
    join_all(js, 2);
    CHECK_EQ(js[0].rc, MUSTER_OK);
    if (js[0].a)
        CHECK(js[0].a->generation == g1 + 1);
    joiner_free(&js[0]);
    joiner_free(&js[1]);
}

/* A join while a generation runs parks (even with min_nodes reached), tells the members
 * NODE_WAITING, and the members' re-join forms a bigger world in the next generation. */
static void t_node_waiting(void *arg)
{
    (void)arg;
    struct joiner js[2], late;
    char node[128];
    uint64_t gen = 0;
    joiner_init(&js[0], "grow", "a", 1, 1, 3, 0);
    joiner_start(&js[0]);
    joiner_wait(&js[0]);
    CHECK_EQ(js[0].rc, MUSTER_OK);
    if (js[0].rc != MUSTER_OK) {
        joiner_free(&js[0]);
        return;
    }
    uint64_t g1 = js[0].a->generation;
    CHECK_EQ(js[0].a->num_nodes, 1);
    /* The round's last call comes from its first joiner: long enough for a and b to come back. */
    joiner_init(&late, "grow", "c", 1, 1, 3, 1500);
    late.timeout_ms = 8000;
    joiner_start(&late);
    CHECK_EQ(next_membership(js[0].m, 2000, &gen, node, sizeof node), MUSTER_EVENT_NODE_WAITING);
    CHECK(gen == g1);
    CHECK_STR(node, "c");
    CHECK_EQ(muster_rdzv_heartbeat(js[0].m, g1, 0), MUSTER_OK);
    /* Re-form: a re-joins (which breaks its generation) and b comes along. */
    joiner_init(&js[1], "grow", "b", 1, 1, 3, 0);
    muster_assignment_free(js[0].a);
    js[0].a = NULL;
    join_all(js, 2);
    joiner_wait(&late);
    CHECK_EQ(js[0].rc, MUSTER_OK);
    CHECK_EQ(js[1].rc, MUSTER_OK);
    CHECK_EQ(late.rc, MUSTER_OK);
    if (js[0].a && late.a) {
        CHECK(js[0].a->generation == g1 + 1);
        CHECK(late.a->generation == g1 + 1);
        CHECK_EQ(late.a->num_nodes, 3);
        CHECK_EQ(late.a->node_rank, 2);
    }
    joiner_free(&js[0]);
    joiner_free(&js[1]);
    joiner_free(&late);
}

/* The daemon counts rounds, generations and failures. */
static void t_counters(void *arg)
{
    (void)arg;
    CHECK(h_stat(&d, "rdzv_generations") >= 6);
    CHECK(h_stat(&d, "rdzv_rounds") >= 6);
    CHECK(h_stat(&d, "rdzv_failures") >= 2);
}

/* A join parked when the daemon drains is answered SHUTTING_DOWN, and the daemon exits 0. */
static void t_drain(void *arg)
{
    (void)arg;
    struct joiner j;
    long long before = h_stat(&d, "rdzv_rounds");
    joiner_init(&j, "drain", "x", 1, 2, 2, 0);
    joiner_start(&j);
    /* The round is open once the daemon counts it: then the join is parked. */
    int64_t end = h_now_ms() + 5000;
    while (h_stat(&d, "rdzv_rounds") == before && h_now_ms() < end) {
    }
    CHECK(h_stat(&d, "rdzv_rounds") == before + 1);
    CHECK_EQ(h_stop(&d), 0);
    joiner_wait(&j);
    CHECK_EQ(j.rc, MUSTER_ESHUTDOWN);
    joiner_free(&j);
}

int main(void)
{
    h_init("rdzv_rounds", 120);
    if (h_start(&d, NULL) < 0)
        return h_finish();
    H_RUN(t_last_call, NULL);
    H_RUN(t_max_closes, NULL);
    H_RUN(t_deterministic_ranks, NULL);
    H_RUN(t_conflicts, NULL);
    H_RUN(t_join_timeout, NULL);
    H_RUN(t_leave_and_rejoin, NULL);
    H_RUN(t_node_waiting, NULL);
    H_RUN(t_finish, NULL);
    H_RUN(t_counters, NULL);
    H_RUN(t_drain, NULL);
    return h_finish();
}
