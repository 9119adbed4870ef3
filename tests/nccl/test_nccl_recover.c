/*
 * muster_nccl_comm_recover() against a real musterd with no GPU: bad input
 * is refused with a typed error before anything is touched (no key is
 * written, *comm stays NULL, *info zeroed), and a valid newcomer's call
 * ends with MUSTER_ENCCL at the device choice on a machine without a GPU.
 * The paths themselves need GPUs; their decisions are covered by
 * tests/unit/test_nccl_plan.c.
 */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <muster/nccl.h>

#include "hclient.h"

#define OLD_NONE UINT32_MAX

static struct h_daemon d;

/* A recovery answer: generation 5 replacing 4, nodes a (old 0), b (old 1), s (a newcomer), c excluded
 * (old 2); two ranks each; as node `me` receives it. */
struct answer {
    muster_assignment a;
    muster_member m[3];
    muster_excluded x[1];
};

/* Fill ans as node me (0..2) receives it. */
static void answer_build(struct answer *ans, uint32_t me)
{
    static const char *const ids[] = {"a", "b", "s"};
    static const uint32_t old[] = {0, 1, OLD_NONE};
    memset(ans, 0, sizeof *ans);
    for (uint32_t i = 0; i < 3; i++) {
        snprintf(ans->m[i].node_id, sizeof ans->m[i].node_id, "%s", ids[i]);
        ans->m[i].node_rank = i;
        ans->m[i].rank_start = 2 * i;
        ans->m[i].local_world_size = 2;
        ans->m[i].old_node_rank = old[i];
    }
    snprintf(ans->x[0].node_id, sizeof ans->x[0].node_id, "c");
    ans->x[0].old_node_rank = 2;
    ans->a.generation = 5;
    ans->a.previous_generation = 4;
    snprintf(ans->a.node_id, sizeof ans->a.node_id, "%s", ids[me]);
    ans->a.node_rank = me;
    ans->a.num_nodes = 3;
    ans->a.rank_start = 2 * me;
    ans->a.local_world_size = 2;
    ans->a.world_size = 6;
    ans->a.n_members = 3;
    ans->a.members = ans->m;
    ans->a.old_node_rank = old[me];
    ans->a.n_excluded = 1;
    ans->a.excluded = ans->x;
}

/* The world change ans makes for local rank lr of a process holding nothing (a newcomer's view). */
static muster_world_change change_of(const struct answer *ans, int lr)
{
    muster_world_change c;
    memset(&c, 0, sizeof c);
    c.generation = ans->a.generation;
    c.previous_generation = ans->a.previous_generation;
    c.plan = MUSTER_WORLD_GROW;
    c.rank = (int)ans->a.rank_start + lr;
    c.world_size = (int)ans->a.world_size;
    c.local_rank = lr;
    c.previous_rank = -1;
    c.node_rank = ans->a.node_rank;
    c.num_nodes = ans->a.num_nodes;
    c.old_node_rank = ans->a.old_node_rank;
    c.n_excluded = ans->a.n_excluded;
    c.excluded = ans->a.excluded;
    c.assignment = &ans->a;
    return c;
}

/* Call recover without a parent; checks *comm and *info come back empty and a reason was given. */
static int recover_call(muster_t *m, const muster_world_change *c, const muster_nccl_opts *opts)
{
    ncclComm_t comm = (ncclComm_t)&d;   /* any non-NULL value: the call must clear it */
    muster_nccl_recovery info;
    int rc;
    memset(&info, 0xff, sizeof info);
    rc = muster_nccl_comm_recover(m, NULL, c, opts, &comm, &info, 2000);
    CHECK(comm == NULL);
    CHECK_EQ(info.rank, 0);
    CHECK_EQ(info.world_size, 0);
    CHECK_EQ(info.path, 0);
    if (m && rc != MUSTER_OK)
        CHECK(*muster_last_error(m) != '\0');
    return rc;
}

/* NULL, not a recovery's change, a bad name, an answer that does not add up, a local rank outside the
 * node: each refused with its error and a reason, and nothing is written to the store. */
static void test_refuses_bad_input(void *unused)
{
    muster_t *m = hc_connect(&d, NULL, NULL);
    muster_nccl_opts bad_name = MUSTER_NCCL_OPTS_INIT;
    struct answer ans;
    muster_world_change c;
    (void)unused;
    answer_build(&ans, 2);
    c = change_of(&ans, 0);
    CHECK_EQ(muster_nccl_comm_recover(m, NULL, &c, NULL, NULL, NULL, 2000), MUSTER_EINVAL);
    CHECK(strstr(muster_last_error(m), "comm is NULL") != NULL);
    CHECK_EQ(recover_call(NULL, &c, NULL), MUSTER_EINVAL);
    CHECK_EQ(recover_call(m, NULL, NULL), MUSTER_EINVAL);
    bad_name.comm_name = "tp/0";
    CHECK_EQ(recover_call(m, &c, &bad_name), MUSTER_EINVAL);
    CHECK(strstr(muster_last_error(m), "tp/0") != NULL);
    c.previous_generation = 0;   /* a first generation's change */
    CHECK_EQ(recover_call(m, &c, NULL), MUSTER_EINVAL);
    CHECK(strstr(muster_last_error(m), "muster_nccl_comm_init") != NULL);
    ans.a.world_size = 8;        /* sizes that do not add up */
    c = change_of(&ans, 0);
    CHECK_EQ(recover_call(m, &c, NULL), MUSTER_EINVAL);
    CHECK(strstr(muster_last_error(m), "generation 5") != NULL);
    answer_build(&ans, 2);
    c = change_of(&ans, 2);      /* local rank past the node's */
    CHECK_EQ(recover_call(m, &c, NULL), MUSTER_EINVAL);
    HC_EXPECT(m, "nccl/5/world/id/recover", NULL);
    /* A success clears the text an earlier failure left. */
    CHECK_EQ(muster_set(m, "k", "v", 1, 0), MUSTER_OK);
    CHECK_EQ(strcmp(muster_last_error(m), ""), 0);
    muster_close(m);
}

/* A valid newcomer on a machine without a GPU gets past the checks and stops at the device choice,
 * naming the step. */
static void test_newcomer_without_gpu(void *unused)
{
    muster_t *m = hc_connect(&d, NULL, NULL);
    struct answer ans;
    muster_world_change c;
    int count = 0;
    (void)unused;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
        h_skip("a GPU is present: scripts/gpu-recover.sh covers this machine");
        muster_close(m);
        return;
    }
    answer_build(&ans, 2);
    c = change_of(&ans, 1);
    CHECK_EQ(recover_call(m, &c, NULL), MUSTER_ENCCL);
    CHECK(strstr(muster_last_error(m), "CUDA device") != NULL);
    muster_close(m);
}

int main(void)
{
    h_init("nccl_recover", 60);
    if (h_start(&d, NULL) != 0)
        return h_finish();
    H_RUN(test_refuses_bad_input, NULL);
    H_RUN(test_newcomer_without_gpu, NULL);
    return h_finish();
}
