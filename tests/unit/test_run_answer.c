/*
 * The text form of the recovery answer that `muster run --recovery
 * in-place` publishes for its workers (client/run_answer.c), linked alone
 * with the recovery decision (client/nccl_plan.c): an answer formatted once
 * parses back, for every node, into the assignment that node got (members,
 * excluded list, its own place), and the parsed answer gives every worker
 * the same NCCL plan as the launcher's own answer would.  Excluded, unknown
 * and malformed cases are refused with their statuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nccl_plan.h"
#include "run_answer.h"

#define OLD_NONE UINT32_MAX
#define V2283 22803

/* A recovery of generation 7 into 8: old nodes a, b ("node b", a space), c, d; c was lost and d's place
 * went to the newcomer e; the survivors keep their old order. */
static void t_build(muster_assignment *a, muster_member *m, muster_excluded *x, size_t me)
{
    static const char *ids[] = {"a", "node b", "d", "e"};
    static const uint32_t old[] = {0, 1, 3, OLD_NONE};
    memset(a, 0, sizeof *a);
    for (uint32_t i = 0; i < 4; i++) {
        memset(&m[i], 0, sizeof m[i]);
        snprintf(m[i].node_id, sizeof m[i].node_id, "%s", ids[i]);
        m[i].node_rank = i;
        m[i].rank_start = 2 * i;
        m[i].local_world_size = 2;
        m[i].old_node_rank = old[i];
    }
    memset(x, 0, sizeof *x);
    snprintf(x->node_id, sizeof x->node_id, "c");
    x->old_node_rank = 2;
    snprintf(x->cause, sizeof x->cause, "closed its connection");
    a->generation = 8;
    a->previous_generation = 7;
    a->num_nodes = 4;
    a->world_size = 8;
    a->n_members = 4;
    a->members = m;
    a->n_excluded = 1;
    a->excluded = x;
    snprintf(a->node_id, sizeof a->node_id, "%s", m[me].node_id);
    a->node_rank = m[me].node_rank;
    a->rank_start = m[me].rank_start;
    a->local_world_size = m[me].local_world_size;
    a->old_node_rank = m[me].old_node_rank;
}

/* Free a parsed answer (libmuster's muster_assignment_free, which this test does not link). */
static void t_free(muster_assignment *a)
{
    if (!a)
        return;
    free(a->members);
    free(a->excluded);
    free(a);
}

/* Every node parses back the answer it got, and the same plan follows from both. */
static void t_round_trip(void *unused)
{
    (void)unused;
    muster_assignment a;
    muster_member m[4];
    muster_excluded x;
    char *text = NULL;
    size_t len = 0;
    t_build(&a, m, &x, 0);
    CHECK_EQ(run_answer_format(&a, &text, &len), MUSTER_OK);
    CHECK(text && len == strlen(text));
    for (size_t me = 0; me < 4; me++) {
        muster_assignment want, *got = NULL;
        muster_member wm[4];
        muster_excluded wx;
        t_build(&want, wm, &wx, me);
        CHECK_EQ(run_answer_parse(text, len, wm[me].node_id, &got), MUSTER_OK);
        if (!got)
            continue;
        CHECK_STR(got->node_id, want.node_id);
        CHECK_EQ(got->generation, 8);
        CHECK_EQ(got->previous_generation, 7);
        CHECK_EQ(got->node_rank, want.node_rank);
        CHECK_EQ(got->rank_start, want.rank_start);
        CHECK_EQ(got->local_world_size, 2);
        CHECK_EQ(got->world_size, 8);
        CHECK_EQ(got->num_nodes, 4);
        CHECK_EQ(got->old_node_rank, want.old_node_rank);
        CHECK_EQ(got->n_members, 4);
        for (size_t i = 0; i < 4 && got->n_members == 4; i++) {
            CHECK_STR(got->members[i].node_id, wm[i].node_id);
            CHECK_EQ(got->members[i].old_node_rank, wm[i].old_node_rank);
            CHECK_EQ(got->members[i].rank_start, wm[i].rank_start);
        }
        CHECK_EQ(got->n_excluded, 1);
        if (got->n_excluded == 1) {
            CHECK_STR(got->excluded[0].node_id, "c");
            CHECK_EQ(got->excluded[0].old_node_rank, 2);
        }
        /* The plan a worker makes from the parsed answer is the one the launcher's answer gives. */
        for (int lr = 0; lr < 2; lr++) {
            int survivor = wm[me].old_node_rank != OLD_NONE;
            struct nccl_plan_in in = {.version = V2283, .have_shrink = 1, .local_rank = lr,
                                      .parent_nranks = survivor ? 8 : 0, .parent_rank = -1};
            struct nccl_plan p1, p2;
            in.recovery = &want;
            CHECK_EQ(nccl_plan_make(&in, &p1), MUSTER_OK);
            in.recovery = got;
            CHECK_EQ(nccl_plan_make(&in, &p2), MUSTER_OK);
            CHECK_EQ(p1.path, p2.path);
            CHECK_EQ(p1.rank, p2.rank);
            CHECK_EQ(p1.n_excluded, p2.n_excluded);
            CHECK_EQ(p2.path, NCCL_PLAN_INIT);   /* a newcomer and no ncclCommGrow in 2.28 */
            CHECK_EQ(p2.rank, (int)(2 * me) + lr);
            nccl_plan_free(&p1);
            nccl_plan_free(&p2);
        }
        t_free(got);
    }
    free(text);
}

/* Only lost nodes: the survivors' plan from the parsed answer is a shrink by the lost node's ranks. */
static void t_shrink(void *unused)
{
    (void)unused;
    muster_member m[2] = {{"n0", 0, 0, 1, 0}, {"n2", 1, 1, 1, 2}};
    muster_excluded x = {"n1", 1, "closed its connection"};
    muster_assignment a = {.generation = 3, .num_nodes = 2, .world_size = 2, .n_members = 2, .members = m,
                           .previous_generation = 2, .n_excluded = 1, .excluded = &x};
    muster_assignment *got = NULL;
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ(run_answer_format(&a, &text, &len), MUSTER_OK);
    CHECK_EQ(run_answer_parse(text, len, "n2", &got), MUSTER_OK);
    if (got) {
        struct nccl_plan_in in = {.version = V2283, .have_shrink = 1, .recovery = got, .parent_nranks = 3,
                                  .parent_rank = 2};
        struct nccl_plan p;
        CHECK_EQ(nccl_plan_make(&in, &p), MUSTER_OK);
        CHECK_EQ(p.path, NCCL_PLAN_SHRINK);
        CHECK_EQ(p.rank, 1);
        CHECK_EQ(p.n_excluded, 1);
        CHECK(p.excluded && p.excluded[0] == 1);
        nccl_plan_free(&p);
    }
    t_free(got);
    free(text);
}

/* Refusals: an excluded node, a node in neither list, texts that are not answers, bad input. */
static void t_refused(void *unused)
{
    (void)unused;
    muster_assignment a, *got = NULL;
    muster_member m[4];
    muster_excluded x;
    char *text = NULL, *bad;
    size_t len = 0;
    t_build(&a, m, &x, 0);
    CHECK_EQ(run_answer_format(&a, &text, &len), MUSTER_OK);
    CHECK_EQ(run_answer_parse(text, len, "c", &got), MUSTER_EEXCLUDED);
    CHECK(got == NULL);
    CHECK_EQ(run_answer_parse(text, len, "z", &got), MUSTER_ENOTFOUND);
    CHECK_EQ(run_answer_parse("0 2 1 0 2", 9, "a", &got), MUSTER_EPROTO);
    CHECK_EQ(run_answer_parse(text, len - 3, "a", &got), MUSTER_EPROTO);   /* cut short */
    bad = strdup(text);
    if (bad) {
        char *m2 = strstr(bad, "m 1 2 ");
        if (m2)
            m2[4] = '3';   /* rank_start 3: the members no longer add up */
        CHECK_EQ(run_answer_parse(bad, len, "a", &got), MUSTER_EPROTO);
        free(bad);
    }
    CHECK(got == NULL);
    CHECK_EQ(run_answer_parse(text, len, NULL, &got), MUSTER_EINVAL);
    free(text);
    /* A plain join's answer has no members list to publish; an id with a newline cannot be written. */
    a.members = NULL;
    CHECK_EQ(run_answer_format(&a, &text, &len), MUSTER_EINVAL);
    a.members = m;
    snprintf(m[1].node_id, sizeof m[1].node_id, "two\nlines");
    CHECK_EQ(run_answer_format(&a, &text, &len), MUSTER_EINVAL);
    CHECK(text == NULL);
}

int main(void)
{
    h_init("run-answer", 30);
    H_RUN(t_round_trip, NULL);
    H_RUN(t_shrink, NULL);
    H_RUN(t_refused, NULL);
    return h_finish();
}
