/*
 * Only the world may write the world (store-server/core/rdzv_keys.c),
 * against a real musterd: keys under muster/rdzv/ are musterd's alone; in a
 * namespace that formed a generation, nccl/<g>/ and muster/run/<g>/ keys
 * are written only by live members of g and by connections presenting a
 * member's credential (the workers `muster run` starts, through
 * $MUSTER_CREDENTIAL); anyone else is refused FORBIDDEN with the rule named,
 * and counted.  A namespace without rendezvous keeps plain nccl/ keys.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <muster/rdzv.h>

#include "hclient.h"

static struct h_daemon d;

/* Connect to namespace ns presenting credential cred (NULL: none). */
static muster_t *t_connect(const char *ns, const char *cred)
{
    if (cred)
        setenv("MUSTER_CREDENTIAL", cred, 1);
    muster_t *m = hc_connect(&d, ns, NULL);
    unsetenv("MUSTER_CREDENTIAL");
    return m;
}

/* Set key on m, expecting want; a refusal must name the rule. */
static void t_set(muster_t *m, const char *key, int want)
{
    int rc = muster_set(m, key, "x", 1, 0);
    CHECK_EQ(rc, want);
    if (want == MUSTER_EFORBIDDEN)
        CHECK(strstr(muster_last_error(m), "written") != NULL);
    if (rc != want)
        printf("set '%s': %s (%s)\n", key, muster_strerror(rc), muster_last_error(m));
}

/* A member, its worker, an outsider and a forger in a namespace with generation 1. */
static void t_rules(void *unused)
{
    (void)unused;
    muster_rdzv_opts o = {.node_id = "a", .local_world_size = 1, .min_nodes = 1, .max_nodes = 1};
    muster_assignment *a = NULL;
    muster_t *member = t_connect("wk", NULL), *plain = t_connect("wk", NULL);
    long long before = h_stat(&d, "forbidden");
    CHECK_EQ(muster_rdzv_join(member, &o, &a, 5000), MUSTER_OK);
    CHECK_EQ(a->generation, 1);
    CHECK_EQ(strlen(a->credential), 32);
    /* musterd's own keys: nobody else, not even a member. */
    t_set(plain, "muster/rdzv/generation", MUSTER_EFORBIDDEN);
    t_set(member, "muster/rdzv/generation", MUSTER_EFORBIDDEN);
    t_set(plain, "muster/rdzv/2/answer", MUSTER_EFORBIDDEN);
    CHECK_EQ(muster_add(plain, "muster/rdzv/1/x", 1, NULL, 0), MUSTER_EFORBIDDEN);
    HC_EXPECT(plain, "muster/rdzv/generation", "1");
    /* An outsider can neither pre-seed the next generation's id nor write the running one's. */
    t_set(plain, "nccl/2/world/id/0", MUSTER_EFORBIDDEN);
    t_set(plain, "nccl/1/world/id/0", MUSTER_EFORBIDDEN);
    t_set(plain, "muster/run/1/done", MUSTER_EFORBIDDEN);
    const char *keys[2] = {"ok/1", "nccl/1/world/id/1"};
    const void *vals[2] = {"v", "v"};
    size_t lens[2] = {1, 1};
    CHECK_EQ(muster_multi_set(plain, keys, vals, lens, 2, 0), MUSTER_EFORBIDDEN);
    HC_EXPECT(plain, "ok/1", NULL);   /* nothing of a refused request was written */
    /* The member writes its generation's keys, not the next one's. */
    t_set(member, "nccl/1/world/id/0", MUSTER_OK);
    t_set(member, "nccl/2/world/id/0", MUSTER_EFORBIDDEN);
    /* Its worker, with the credential its launcher handed down, writes them too; a forger does not. */
    muster_t *worker = t_connect("wk", a->credential), *forger = t_connect("wk", "0123456789abcdef0123456789abcdef");
    t_set(worker, "nccl/1/world/unhealthy", MUSTER_OK);
    t_set(worker, "muster/run/1/x", MUSTER_OK);
    t_set(forger, "nccl/1/world/id/0", MUSTER_EFORBIDDEN);
    CHECK(strstr(muster_last_error(forger), "unknown credential") != NULL);
    /* Keys that name no generation are anyone's. */
    t_set(plain, "nccl/world", MUSTER_OK);
    t_set(plain, "muster/run/completed", MUSTER_OK);
    /* Once the member has left, its credential writes nothing more. */
    CHECK_EQ(muster_rdzv_leave(member, 0), MUSTER_OK);
    t_set(worker, "nccl/1/world/id/0", MUSTER_EFORBIDDEN);
    CHECK_EQ(h_stat(&d, "forbidden") - before, 11);   /* each refusal above, counted once */
    muster_assignment_free(a);
    muster_close(member);
    muster_close(plain);
    muster_close(worker);
    muster_close(forger);
}

/* A join on its own thread (it blocks until the round closes). */
struct t_joiner {
    muster_t *m;
    const char *id;
    muster_assignment *a;
    int rc;
    pthread_t th;
};

/* Thread body: join a round of two. */
static void *t_join_main(void *arg)
{
    struct t_joiner *j = arg;
    muster_rdzv_opts o = {.node_id = j->id, .local_world_size = 1, .min_nodes = 2, .max_nodes = 2};
    j->rc = muster_rdzv_join(j->m, &o, &j->a, 10000);
    return NULL;
}

/* Close a handle after a pause (a member's connection dies). */
static void *t_close_later(void *arg)
{
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    muster_close(arg);
    return NULL;
}

/* A plain client that follows generation gen (?generation= in its URL). */
static muster_t *t_follower(const char *ns, uint64_t gen)
{
    char url[512], full[600];
    h_url(&d, ns, NULL, url, sizeof url);
    snprintf(full, sizeof full, "%s%sgeneration=%llu", url, strchr(url, '?') ? "&" : "?", (unsigned long long)gen);
    int err = 0;
    muster_t *m = muster_connect(full, &err);
    CHECK(m != NULL);
    return m;
}

/* A follower's blocking get, timed. */
struct t_waiter {
    muster_t *m;
    int rc;
    int64_t ms;
};

/* Run one blocking get of a key that never comes. */
static void *t_wait_main(void *arg)
{
    struct t_waiter *w = arg;
    void *v = NULL;
    size_t n = 0;
    int64_t t0 = h_now_ms();
    w->rc = muster_get(w->m, "never", 1, 20000, &v, &n);
    w->ms = h_now_ms() - t0;
    return NULL;
}

/* A member's worker blocked on a key that will never come is released when its generation breaks, at
 * once, with an error naming the lost node and its rank; so is a plain client that opted in with
 * ?generation=, and its later waits end at once; a plain client's wait runs to its own timeout (it
 * belongs to no generation). */
static void t_waits_end_with_generation(void *unused)
{
    (void)unused;
    struct t_joiner a = {t_connect("wg", NULL), "a", NULL, -1, 0}, b = {t_connect("wg", NULL), "b", NULL, -1, 0};
    pthread_create(&a.th, NULL, t_join_main, &a);
    pthread_create(&b.th, NULL, t_join_main, &b);
    pthread_join(a.th, NULL);
    pthread_join(b.th, NULL);
    CHECK_EQ(a.rc, MUSTER_OK);
    CHECK_EQ(b.rc, MUSTER_OK);
    if (a.rc != MUSTER_OK || b.rc != MUSTER_OK)
        return;
    muster_t *worker = t_connect("wg", a.a->credential), *plain = t_connect("wg", NULL);
    muster_t *follower = t_follower("wg", a.a->generation);
    pthread_t killer, fth;
    struct t_waiter fw = {follower, -1, 0};
    pthread_create(&fth, NULL, t_wait_main, &fw);
    pthread_create(&killer, NULL, t_close_later, b.m);
    void *v = NULL;
    size_t n = 0;
    int64_t t0 = h_now_ms();
    CHECK_EQ(muster_get(worker, "never", 1, 20000, &v, &n), MUSTER_ESTALE);
    CHECK(h_now_ms() - t0 < 5000);
    CHECK(strstr(muster_last_error(worker), "node 'b' (node rank 1) was lost") != NULL);
    pthread_join(killer, NULL);
    pthread_join(fth, NULL);
    CHECK_EQ(fw.rc, MUSTER_ESTALE);
    CHECK(fw.ms < 5000);
    t0 = h_now_ms();
    CHECK_EQ(muster_wait(follower, (const char *[]){"never"}, 1, 20000), MUSTER_ESTALE);
    CHECK(h_now_ms() - t0 < 2000);
    CHECK(strstr(muster_last_error(follower), "has ended: node 'b' (node rank 1) was lost") != NULL);
    muster_close(follower);
    CHECK_EQ(muster_get(plain, "never", 1, 300, &v, &n), MUSTER_ETIMEDOUT);
    muster_assignment_free(a.a);
    muster_assignment_free(b.a);
    muster_close(a.m);
    muster_close(worker);
    muster_close(plain);
}

/* A namespace that never formed a generation has no world: its nccl/ keys are plain keys, and only
 * muster/rdzv/ stays musterd's. */
static void t_no_world(void *unused)
{
    (void)unused;
    muster_t *m = t_connect("plain", NULL);
    t_set(m, "nccl/5/world/id/0", MUSTER_OK);
    t_set(m, "muster/run/5/done", MUSTER_OK);
    t_set(m, "muster/rdzv/generation", MUSTER_EFORBIDDEN);
    muster_close(m);
}

int main(void)
{
    h_init("world_keys", 60);
    if (h_start(&d, NULL) != 0)
        return h_finish();
    H_RUN(t_rules, NULL);
    H_RUN(t_no_world, NULL);
    H_RUN(t_waits_end_with_generation, NULL);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
