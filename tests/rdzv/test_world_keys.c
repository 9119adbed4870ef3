/*
 * Only the world may write the world (store-server/core/rdzv_keys.c),
 * against a real musterd: keys under muster/rdzv/ are musterd's alone; in a
 * namespace that formed a generation, nccl/<g>/ and muster/run/<g>/ keys
 * are written only by live members of g and by connections presenting a
 * member's credential (the workers `muster run` starts, through
 * $MUSTER_CREDENTIAL); anyone else is refused FORBIDDEN with the rule named,
 * and counted.  A namespace without rendezvous keeps plain nccl/ keys.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
