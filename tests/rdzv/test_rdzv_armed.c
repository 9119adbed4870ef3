/*
 * Armed recovery against a real musterd whose namespaces may park only three
 * requests (--max-waiters-per-ns 3): three members form a generation, a
 * client parks a blocking get, two members arm their recovery and the third
 * is refused (LIMIT: no room to park).  When the first member's connection
 * closes, the armed survivor and the refused one both recover into the same
 * next generation: libmuster's recover() falls back to a recover join for
 * an arming the daemon refused.  musterd's counters say what happened.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <muster/async.h>
#include <muster/rdzv.h>

#include "hclient.h"

static struct h_daemon d;

/* One member: its handle, options, last answer and the status of its last call. */
struct t_member {
    muster_t *m;
    muster_rdzv_opts o;
    muster_assignment *a;
    int rc;
    char id[8];
};

/* Join (a thread: the round closes when all three are in). */
static void *t_join(void *arg)
{
    struct t_member *x = arg;
    x->rc = muster_rdzv_join(x->m, &x->o, &x->a, 10000);
    return NULL;
}

/* Wait for MEMBER_LOST of the member's generation (up to 10 s), then recover (a thread). */
static void *t_recover(void *arg)
{
    struct t_member *x = arg;
    uint64_t gen = x->a->generation;
    int64_t end = h_now_ms() + 10000;
    int lost = 0;
    while (!lost && h_now_ms() < end) {
        muster_event *ev = NULL;
        if (muster_next_event(x->m, &ev, 200) == MUSTER_OK)
            lost = ev->kind == MUSTER_EVENT_MEMBER_LOST && ev->generation == gen;
        muster_event_free(ev);
    }
    muster_assignment_free(x->a);
    x->a = NULL;
    x->rc = lost ? muster_rdzv_recover(x->m, &x->o, &x->a, 10000) : MUSTER_ETIMEDOUT;
    return NULL;
}

/* Run fn on each member of v[from..n) in its own thread and wait for all. */
static void t_each(struct t_member *v, int from, int n, void *(*fn)(void *))
{
    pthread_t tid[3];
    for (int i = from; i < n; i++)
        CHECK_EQ(pthread_create(&tid[i], NULL, fn, &v[i]), 0);
    for (int i = from; i < n; i++)
        pthread_join(tid[i], NULL);
}

/* A blocking get's callback: nothing to do (the get is cancelled when its handle closes). */
static void t_ignore(muster_t *m, const muster_reply *r, void *arg)
{
    (void)m, (void)r, (void)arg;
}

/* Two armed, one refused for want of room: both survivors recover into one generation. */
static void t_refused_arming_falls_back(void *unused)
{
    (void)unused;
    struct t_member v[3];
    for (int i = 0; i < 3; i++) {
        memset(&v[i], 0, sizeof v[i]);
        snprintf(v[i].id, sizeof v[i].id, "n%d", i);
        v[i].m = hc_connect(&d, "lim", NULL);
        v[i].o = (muster_rdzv_opts){.node_id = v[i].id, .local_world_size = 1, .min_nodes = 2, .max_nodes = 3,
                                    .last_call_ms = 10000,
                                    .want_members = 1};
        if (!v[i].m)
            return;
    }
    t_each(v, 0, 3, t_join);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(v[i].rc, MUSTER_OK);
    muster_t *kv = hc_connect(&d, "lim", NULL);
    CHECK_EQ(muster_async_get(kv, "never", 1, 30000, t_ignore, NULL), MUSTER_OK);
    int64_t end = h_now_ms() + 5000;
    while (h_stat(&d, "waits_parked") < 1 && h_now_ms() < end)
        usleep(10000);
    long long limited = h_stat(&d, "limit_waiters_per_ns");
    CHECK_EQ(muster_rdzv_arm(v[0].m, &v[0].o, 10000), MUSTER_OK);
    CHECK_EQ(muster_rdzv_arm(v[1].m, &v[1].o, 10000), MUSTER_OK);
    CHECK_EQ(muster_rdzv_arm(v[1].m, &v[1].o, 10000), MUSTER_OK); /* a no-op: armed already */
    CHECK_EQ(muster_rdzv_arm(v[2].m, &v[2].o, 10000), MUSTER_OK); /* sent; the daemon has no room */
    end = h_now_ms() + 5000;
    while (h_stat(&d, "limit_waiters_per_ns") == limited && h_now_ms() < end)
        usleep(10000);
    CHECK_EQ(h_stat(&d, "rdzv_armed_recover_joins"), 2);
    CHECK_EQ(h_stat(&d, "limit_waiters_per_ns"), limited + 1);
    muster_close(v[0].m); /* its connection closes: the generation breaks */
    muster_assignment_free(v[0].a);
    t_each(v, 1, 3, t_recover);
    for (int i = 1; i < 3; i++) {
        CHECK_EQ(v[i].rc, MUSTER_OK);
        if (v[i].rc != MUSTER_OK)
            continue;
        CHECK_EQ(v[i].a->generation, v[1].a->generation);
        CHECK_EQ(v[i].a->previous_generation, 1);
        CHECK_EQ(v[i].a->num_nodes, 2);
        CHECK_EQ(v[i].a->n_excluded, 1);
        CHECK_STR(v[i].a->excluded[0].node_id, "n0");
    }
    CHECK_EQ(h_stat(&d, "rdzv_recoveries"), 1);
    for (int i = 1; i < 3; i++) {
        muster_assignment_free(v[i].a);
        muster_close(v[i].m);
    }
    muster_close(kv);
}

int main(void)
{
    h_init("rdzv_armed", 60);
    static const char *const args[] = {"--max-waiters-per-ns", "3", NULL};
    if (h_start(&d, args) < 0)
        return h_finish();
    H_RUN(t_refused_arming_falls_back, NULL);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
