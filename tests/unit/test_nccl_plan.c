/*
 * The decision of libmuster-nccl's recovery (client/nccl_plan.c), linked
 * alone: no NCCL, no GPU, no store.  Recovery answers are built by hand the
 * way muster_rdzv_recover() returns them (survivors first in their old
 * order, then newcomers with old_node_rank UINT32_MAX, the excluded list by
 * old rank) and fed with runtimes of several NCCL releases: 2.28.3 (the GPU
 * machine's: shrink, no revoke), 2.28.9 (revoke), 2.29 (grow), 2.26 (none).
 * Checked: the path, revoke or abort, the excluded global ranks (the same
 * on every survivor, and the shrink's renumbering giving every survivor its
 * new rank), the newcomers' ranks, and the refusal of bad input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nccl_plan.h"

#define OLD_NONE UINT32_MAX
#define V2263 22603
#define V2283 22803
#define V2289 22809
#define V2292 22902
#define MAX_NODES 16

/* One node of a built answer: its id, local world size and old rank (OLD_NONE for a newcomer). */
struct spec {
    const char *id;
    uint32_t lws;
    uint32_t old;
};

/* A built answer with its own storage. */
struct answer {
    muster_assignment a;
    muster_member m[MAX_NODES];
    muster_excluded x[MAX_NODES];
};

/* Build the answer node `me` receives: generation gen replacing gen - 1, members ms (in order), the
 * excluded nodes xs (id, old rank). */
static void build(struct answer *out, uint64_t gen, const struct spec *ms, size_t n, const struct spec *xs,
                  size_t nx, size_t me)
{
    uint32_t start = 0;
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < n; i++) {
        snprintf(out->m[i].node_id, sizeof out->m[i].node_id, "%s", ms[i].id);
        out->m[i].node_rank = (uint32_t)i;
        out->m[i].rank_start = start;
        out->m[i].local_world_size = ms[i].lws;
        out->m[i].old_node_rank = ms[i].old;
        start += ms[i].lws;
    }
    for (size_t i = 0; i < nx; i++) {
        snprintf(out->x[i].node_id, sizeof out->x[i].node_id, "%s", xs[i].id);
        out->x[i].old_node_rank = xs[i].old;
        snprintf(out->x[i].cause, sizeof out->x[i].cause, "closed its connection");
    }
    out->a.generation = gen;
    out->a.previous_generation = gen - 1;
    snprintf(out->a.node_id, sizeof out->a.node_id, "%s", ms[me].id);
    out->a.node_rank = (uint32_t)me;
    out->a.num_nodes = (uint32_t)n;
    out->a.rank_start = out->m[me].rank_start;
    out->a.local_world_size = out->m[me].local_world_size;
    out->a.world_size = start;
    out->a.n_members = n;
    out->a.members = out->m;
    out->a.old_node_rank = ms[me].old;
    out->a.n_excluded = nx;
    out->a.excluded = nx ? out->x : NULL;
}

/* Build a plain (non-recovery) assignment of generation gen with nodes ms, as a previous one. */
static void build_plain(struct answer *out, uint64_t gen, const struct spec *ms, size_t n, size_t me)
{
    build(out, gen, ms, n, NULL, 0, me);
    out->a.previous_generation = 0;
    out->a.old_node_rank = OLD_NONE;
    for (size_t i = 0; i < n; i++)
        out->m[i].old_node_rank = OLD_NONE;
}

/* A runtime: version and which optional symbols exist (revoke, shrink, grow). */
static struct nccl_plan_in rt(int version, int revoke, int shrink, int grow)
{
    struct nccl_plan_in in;
    memset(&in, 0, sizeof in);
    in.version = version;
    in.have_revoke = revoke;
    in.have_shrink = shrink;
    in.have_grow = grow;
    in.parent_rank = -1;
    return in;
}

/* Plan for local rank lr of the answer, as a survivor (parent of parent_n ranks, rank parent_r) or a
 * newcomer (parent_n 0). */
static int plan(struct nccl_plan_in in, const struct answer *ans, const struct answer *prev, int lr, int parent_n,
                int parent_r, struct nccl_plan *p)
{
    in.recovery = &ans->a;
    in.previous = prev ? &prev->a : NULL;
    in.local_rank = lr;
    in.parent_nranks = parent_n;
    in.parent_rank = parent_r;
    return nccl_plan_make(&in, p);
}

/* The excluded list as text ("4,5"). */
static const char *ranks_text(const struct nccl_plan *p)
{
    static char buf[512];
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; i < p->n_excluded && off < sizeof buf; i++)
        off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%d", i ? "," : "", p->excluded[i]);
    return buf;
}

/* Four nodes of two ranks, node c lost: shrink by ranks 4,5 with revoke on 2.28.9, aborting on 2.28.3. */
static void t_shrink_one_lost(void *unused)
{
    static const struct spec ms[] = {{"a", 2, 0}, {"b", 2, 1}, {"d", 2, 3}};
    static const struct spec xs[] = {{"c", 0, 2}};
    struct answer ans;
    struct nccl_plan p;
    (void)unused;
    build(&ans, 5, ms, 3, xs, 1, 2);
    CHECK_EQ(plan(rt(V2289, 1, 1, 0), &ans, NULL, 1, 8, 7, &p), MUSTER_OK);
    CHECK_STR(nccl_plan_path_name(p.path), "shrink");
    CHECK_EQ(p.revoke, 1);
    CHECK_EQ(p.survivor, 1);
    CHECK_EQ(p.announced, 0);
    CHECK_STR(ranks_text(&p), "4,5");
    CHECK_EQ(p.old_rank, 7);
    CHECK_EQ(p.old_world, 8);
    CHECK_EQ(p.rank, 5);
    CHECK_EQ(p.world, 6);
    nccl_plan_free(&p);
    /* The GPU machine's 2.28.3 has shrink but no revoke: the shrink aborts the parent's work. */
    CHECK_EQ(plan(rt(V2283, 0, 1, 0), &ans, NULL, 1, 8, 7, &p), MUSTER_OK);
    CHECK_STR(nccl_plan_path_name(p.path), "shrink");
    CHECK_EQ(p.revoke, 0);
    CHECK_STR(ranks_text(&p), "4,5");
    nccl_plan_free(&p);
    /* Both checks count: a revoke symbol in an older release, or a new release without it, aborts. */
    CHECK_EQ(plan(rt(V2283, 1, 1, 0), &ans, NULL, 1, 8, 7, &p), MUSTER_OK);
    CHECK_EQ(p.revoke, 0);
    nccl_plan_free(&p);
    CHECK_EQ(plan(rt(V2289, 0, 1, 0), &ans, NULL, 1, 8, 7, &p), MUSTER_OK);
    CHECK_EQ(p.revoke, 0);
    nccl_plan_free(&p);
    /* No ncclCommShrink (2.26): a fresh init, and no revoke. */
    CHECK_EQ(plan(rt(V2263, 0, 0, 0), &ans, NULL, 1, 8, 7, &p), MUSTER_OK);
    CHECK_STR(nccl_plan_path_name(p.path), "init");
    CHECK_EQ(p.revoke, 0);
    CHECK_EQ(p.rank, 5);
    nccl_plan_free(&p);
}

/* Every survivor and local rank computes the same excluded list, and NCCL's renumbering (old rank
 * minus the excluded ranks below it) gives exactly the new rank the answer assigns. */
static void t_same_on_every_survivor(void *unused)
{
    static const struct spec ms[] = {{"n1", 3, 1}, {"n3", 3, 3}, {"n4", 3, 4}};
    static const struct spec xs[] = {{"n2", 0, 2}, {"n0", 0, 0}};
    char first[512] = "";
    int seen[9] = {0};
    (void)unused;
    for (size_t me = 0; me < 3; me++) {
        for (int lr = 0; lr < 3; lr++) {
            struct answer ans;
            struct nccl_plan p;
            int below = 0;
            build(&ans, 9, ms, 3, xs, 2, me);
            CHECK_EQ(plan(rt(V2289, 1, 1, 0), &ans, NULL, lr, 15, (int)ms[me].old * 3 + lr, &p), MUSTER_OK);
            CHECK_EQ(p.path, NCCL_PLAN_SHRINK);
            if (!first[0])
                snprintf(first, sizeof first, "%s", ranks_text(&p));
            CHECK_STR(ranks_text(&p), first);
            for (int i = 0; i < p.n_excluded; i++)
                below += p.excluded[i] < p.old_rank;
            CHECK_EQ(p.old_rank - below, p.rank);
            if (p.rank >= 0 && p.rank < 9)
                seen[p.rank]++;
            nccl_plan_free(&p);
        }
    }
    CHECK_STR(first, "0,1,2,6,7,8");
    for (int r = 0; r < 9; r++)
        CHECK_EQ(seen[r], 1);
}

/* A standby admitted: survivors shrink then grow on 2.29, re-init before; the newcomer follows rank 0. */
static void t_newcomer(void *unused)
{
    static const struct spec ms[] = {{"a", 2, 0}, {"c", 2, 2}, {"s", 2, OLD_NONE}};
    static const struct spec xs[] = {{"b", 0, 1}};
    struct answer ans;
    struct nccl_plan p;
    (void)unused;
    build(&ans, 4, ms, 3, xs, 1, 1);
    CHECK_EQ(plan(rt(V2292, 1, 1, 1), &ans, NULL, 0, 6, 4, &p), MUSTER_OK);
    CHECK_STR(nccl_plan_path_name(p.path), "grow");
    CHECK_EQ(p.revoke, 1);
    CHECK_STR(ranks_text(&p), "2,3");
    CHECK_EQ(p.rank, 2);
    CHECK_EQ(p.shrunk_world, 4);
    CHECK_EQ(p.world, 6);
    nccl_plan_free(&p);
    CHECK_EQ(plan(rt(V2289, 1, 1, 0), &ans, NULL, 0, 6, 4, &p), MUSTER_OK);
    CHECK_STR(nccl_plan_path_name(p.path), "init");
    CHECK_EQ(p.revoke, 0);   /* INIT aborts the parent: no revoke */
    nccl_plan_free(&p);
    /* The newcomer: no parent, ranks after the survivors', path announced by rank 0. */
    build(&ans, 4, ms, 3, xs, 1, 2);
    CHECK_EQ(plan(rt(V2292, 1, 1, 1), &ans, NULL, 1, 0, -1, &p), MUSTER_OK);
    CHECK_EQ(p.survivor, 0);
    CHECK_EQ(p.announced, 1);
    CHECK_EQ(p.path, NCCL_PLAN_GROW);
    CHECK_EQ(p.rank, 5);
    CHECK_EQ(p.old_rank, -1);
    CHECK_EQ(p.revoke, 0);
    nccl_plan_free(&p);
}

/* Nobody excluded: NCCL cannot shrink by zero ranks, so the parent is aborted and re-initialised. */
static void t_nobody_excluded(void *unused)
{
    static const struct spec ms[] = {{"a", 1, 0}, {"b", 1, 1}};
    static const struct spec grown[] = {{"a", 1, 0}, {"b", 1, 1}, {"s", 1, OLD_NONE}};
    struct answer ans;
    struct nccl_plan p;
    (void)unused;
    build(&ans, 3, ms, 2, NULL, 0, 0);
    CHECK_EQ(plan(rt(V2292, 1, 1, 1), &ans, NULL, 0, 2, 0, &p), MUSTER_OK);
    CHECK_EQ(p.path, NCCL_PLAN_INIT);
    CHECK_EQ(p.n_excluded, 0);
    nccl_plan_free(&p);
    build(&ans, 3, grown, 3, NULL, 0, 1);
    CHECK_EQ(plan(rt(V2292, 1, 1, 1), &ans, NULL, 0, 2, 1, &p), MUSTER_OK);
    CHECK_EQ(p.path, NCCL_PLAN_INIT);
    CHECK_EQ(p.rank, 1);
    CHECK_EQ(p.world, 3);
    nccl_plan_free(&p);
}

/* With the previous assignment, nodes of different sizes: node b (ranks 4,5) lost. */
static void t_previous_layout(void *unused)
{
    static const struct spec old[] = {{"a", 4, 0}, {"b", 2, 1}, {"c", 2, 2}};
    static const struct spec ms[] = {{"a", 4, 0}, {"c", 2, 2}};
    static const struct spec shrunk_c[] = {{"a", 4, 0}, {"c", 1, 2}};
    static const struct spec xs[] = {{"b", 0, 1}};
    struct answer prev, ans;
    struct nccl_plan p;
    (void)unused;
    build_plain(&prev, 6, old, 3, 2);
    build(&ans, 7, ms, 2, xs, 1, 1);
    CHECK_EQ(plan(rt(V2289, 1, 1, 0), &ans, &prev, 1, 8, 7, &p), MUSTER_OK);
    CHECK_EQ(p.path, NCCL_PLAN_SHRINK);
    CHECK_STR(ranks_text(&p), "4,5");
    CHECK_EQ(p.rank, 5);
    nccl_plan_free(&p);
    /* Without previous the uniform layout cannot hold (survivors run 4 and 2 ranks). */
    CHECK_EQ(plan(rt(V2289, 1, 1, 0), &ans, NULL, 1, 8, 7, &p), MUSTER_ECONFLICT);
    /* c now runs one rank: the shrink would not give the answer's ranks, so re-init. */
    build(&ans, 7, shrunk_c, 2, xs, 1, 1);
    CHECK_EQ(plan(rt(V2289, 1, 1, 0), &ans, &prev, 0, 8, 6, &p), MUSTER_OK);
    CHECK_EQ(p.path, NCCL_PLAN_INIT);
    CHECK_EQ(p.rank, 4);
    CHECK_EQ(p.world, 5);
    nccl_plan_free(&p);
}

/* Input that is not a usable recovery answer is refused with EINVAL; an answer that disagrees with
 * the parent or with previous, with ECONFLICT; the plan is left empty either way. */
static void t_bad_input(void *unused)
{
    static const struct spec ms[] = {{"a", 2, 0}, {"b", 2, 1}, {"d", 2, 3}};
    static const struct spec xs[] = {{"c", 0, 2}};
    static const struct spec dup[] = {{"c", 0, 1}};
    static const struct spec order[] = {{"b", 2, 1}, {"a", 2, 0}, {"d", 2, 3}};
    static const struct spec late[] = {{"s", 2, OLD_NONE}, {"a", 2, 0}, {"b", 2, 1}, {"d", 2, 3}};
    static const struct spec tail[] = {{"a", 2, 0}, {"b", 2, 1}, {"d", 2, 3}, {"s", 2, OLD_NONE}};
    static const struct spec old[] = {{"a", 2, 0}, {"b", 2, 1}, {"x", 2, 2}, {"d", 2, 3}};
    struct nccl_plan_in in = rt(V2289, 1, 1, 0);
    struct answer ans, prev;
    struct nccl_plan p;
    (void)unused;
    CHECK_EQ(nccl_plan_make(NULL, &p), MUSTER_EINVAL);
    CHECK_EQ(nccl_plan_make(&in, NULL), MUSTER_EINVAL);
    CHECK_EQ(nccl_plan_make(&in, &p), MUSTER_EINVAL);   /* no recovery answer */
    build(&ans, 5, ms, 3, xs, 1, 0);
    ans.a.previous_generation = 0;   /* a plain join's answer */
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);
    ans.a.previous_generation = 5;   /* not older than the generation */
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);
    build(&ans, 5, ms, 3, xs, 1, 0);
    ans.a.members = NULL;            /* joined without want_members */
    ans.a.n_members = 0;
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);
    build(&ans, 5, ms, 3, xs, 1, 0);
    CHECK_EQ(plan(in, &ans, NULL, 2, 8, 0, &p), MUSTER_EINVAL);   /* local rank past the node's */
    CHECK_EQ(plan(in, &ans, NULL, -1, 8, 0, &p), MUSTER_EINVAL);
    ans.a.world_size = 7;            /* sizes that do not add up */
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);
    build(&ans, 5, ms, 3, xs, 1, 0);
    ans.m[1].local_world_size = 3;   /* a member's rank_start that does not follow */
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);
    build(&ans, 5, ms, 3, xs, 1, 0);
    ans.a.rank_start = 2;            /* this node's own place disagrees with its member entry */
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);
    build(&ans, 5, ms, 3, xs, 1, 0);
    /* A process of a surviving node without its parent (its worker was replaced, or its last rebuild
     * failed): an orphan, which votes unhealthy and then follows rank 0's announcement. */
    CHECK_EQ(plan(in, &ans, NULL, 0, 0, -1, &p), MUSTER_OK);
    CHECK_EQ(p.survivor, 0);
    CHECK_EQ(p.orphan, 1);
    CHECK_EQ(p.announced, 1);
    CHECK_EQ(p.revoke, 0);
    nccl_plan_free(&p);
    build(&ans, 5, ms, 3, dup, 1, 0);
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);    /* old rank 1 twice */
    build(&ans, 5, order, 3, xs, 1, 0);
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);    /* survivors out of old order */
    build(&ans, 5, late, 4, xs, 1, 1);
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);    /* a newcomer ahead of survivors */
    build(&ans, 5, tail, 4, xs, 1, 3);
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 0, &p), MUSTER_EINVAL);    /* a newcomer with a parent */
    /* Mismatched sizes against the parent: its size, this process's rank in it. */
    build(&ans, 5, ms, 3, xs, 1, 2);
    CHECK_EQ(plan(in, &ans, NULL, 0, 6, 6, &p), MUSTER_ECONFLICT);
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 3, &p), MUSTER_ECONFLICT);
    CHECK_EQ(plan(in, &ans, NULL, 0, 8, 6, &p), MUSTER_OK);
    nccl_plan_free(&p);
    /* Against previous: another generation, another node at an old rank. */
    build_plain(&prev, 3, old, 4, 0);
    CHECK_EQ(plan(in, &ans, &prev, 0, 8, 6, &p), MUSTER_ECONFLICT);
    prev.a.generation = 4;
    CHECK_EQ(plan(in, &ans, &prev, 0, 8, 6, &p), MUSTER_ECONFLICT);
    snprintf(prev.m[2].node_id, sizeof prev.m[2].node_id, "c");
    CHECK_EQ(plan(in, &ans, &prev, 0, 8, 6, &p), MUSTER_OK);
    nccl_plan_free(&p);
    CHECK_EQ(p.n_excluded, 0);
    CHECK(p.excluded == NULL);
}

int main(void)
{
    h_init("nccl-plan", 30);
    H_RUN(t_shrink_one_lost, NULL);
    H_RUN(t_same_on_every_survivor, NULL);
    H_RUN(t_newcomer, NULL);
    H_RUN(t_nobody_excluded, NULL);
    H_RUN(t_previous_layout, NULL);
    H_RUN(t_bad_input, NULL);
    return h_finish();
}
