/*
 * libmuster-nccl: which way a recovery rebuilds the communicator (pure).
 *
 * The parent communicator's global ranks follow the previous generation's
 * node order: node k held ranks old_start(k) .. old_start(k) + lws(k) - 1.
 * The recovery answer names the previous generation's nodes by old rank
 * (survivors in members[].old_node_rank, the others in excluded[]), so the
 * excluded global ranks are the union of those ranges; old_start and lws
 * come from the previous assignment when the caller has it, else from the
 * uniform layout (every node ran as many ranks as the survivors run now).
 * ncclCommShrink keeps the survivors' order and closes the gaps, so its
 * result matches the new generation exactly when every survivor kept its
 * local world size and nobody was added; this file checks that instead of
 * assuming it, and falls back to a fresh init when it does not hold.
 */
#include "nccl_plan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Per node of the previous generation: its first global rank, its rank count, and who it is now. */
struct nccl_plan_old {
    uint32_t start;
    uint32_t lws;
    int seen;                   /* 1 survivor, 2 excluded */
};

/* Check the answer's own shape: a recovery answer, members listed, ranks adding up. */
static int nccl_plan_answer_ok(const muster_assignment *a, int local_rank)
{
    uint64_t start = 0;
    if (a->previous_generation == 0 || a->generation <= a->previous_generation)
        return 0;   /* a plain join's answer: there is no parent generation to recover from */
    if (!a->members || a->n_members != a->num_nodes || a->num_nodes == 0 || a->node_rank >= a->num_nodes)
        return 0;
    if (local_rank < 0 || (uint32_t)local_rank >= a->local_world_size || a->world_size > INT_MAX)
        return 0;
    if (a->n_excluded && !a->excluded)
        return 0;
    for (size_t i = 0; i < a->n_members; i++) {
        const muster_member *mm = &a->members[i];
        if (mm->node_rank != i || mm->rank_start != start || mm->local_world_size == 0)
            return 0;
        start += mm->local_world_size;
    }
    if (start != a->world_size)
        return 0;
    {
        const muster_member *me = &a->members[a->node_rank];
        return me->rank_start == a->rank_start && me->local_world_size == a->local_world_size &&
               me->old_node_rank == a->old_node_rank && strcmp(me->node_id, a->node_id) == 0;
    }
}

/* Count the survivors, which must come first in ascending old rank; 0 when the order is not that. */
static size_t nccl_plan_survivors(const muster_assignment *a)
{
    size_t s = 0;
    while (s < a->n_members && a->members[s].old_node_rank != UINT32_MAX) {
        if (s > 0 && a->members[s].old_node_rank <= a->members[s - 1].old_node_rank)
            return 0;
        s++;
    }
    for (size_t i = s; i < a->n_members; i++)
        if (a->members[i].old_node_rank != UINT32_MAX)
            return 0;
    return s;
}

/* Fill old[] (old_nodes entries) from previous, or uniformly from the survivors' local world size;
 * MUSTER_OK or MUSTER_ECONFLICT. */
static int nccl_plan_old_layout(const struct nccl_plan_in *in, size_t survivors, struct nccl_plan_old *old, size_t old_nodes)
{
    const muster_assignment *a = in->recovery, *p = in->previous;
    uint64_t start = 0;
    if (p) {
        if (p->generation != a->previous_generation || p->num_nodes != old_nodes || !p->members ||
            p->n_members != p->num_nodes)
            return MUSTER_ECONFLICT;
        for (size_t k = 0; k < old_nodes; k++) {
            if (p->members[k].node_rank != k || p->members[k].rank_start != start || !p->members[k].local_world_size)
                return MUSTER_ECONFLICT;
            old[k].start = p->members[k].rank_start;
            old[k].lws = p->members[k].local_world_size;
            start += old[k].lws;
        }
    } else {
        uint32_t lws = a->members[0].local_world_size;
        for (size_t i = 1; i < survivors; i++)
            if (a->members[i].local_world_size != lws)
                return MUSTER_ECONFLICT;   /* no uniform layout to infer: the caller must pass previous */
        for (size_t k = 0; k < old_nodes; k++) {
            old[k].start = (uint32_t)start;
            old[k].lws = lws;
            start += lws;
        }
    }
    return start > INT_MAX ? MUSTER_ECONFLICT : MUSTER_OK;
}

/* Mark who each old node is now; the survivors and the excluded must cover the old nodes once each.
 * With previous, their node ids must match it. */
static int nccl_plan_mark(const struct nccl_plan_in *in, size_t survivors, struct nccl_plan_old *old, size_t old_nodes)
{
    const muster_assignment *a = in->recovery, *p = in->previous;
    for (size_t i = 0; i < survivors + a->n_excluded; i++) {
        int ex = i >= survivors;
        uint32_t k = ex ? a->excluded[i - survivors].old_node_rank : a->members[i].old_node_rank;
        const char *id = ex ? a->excluded[i - survivors].node_id : a->members[i].node_id;
        if (k >= old_nodes || old[k].seen)
            return p ? MUSTER_ECONFLICT : MUSTER_EINVAL;
        if (p && strcmp(p->members[k].node_id, id) != 0)
            return MUSTER_ECONFLICT;
        old[k].seen = ex ? 2 : 1;
    }
    return MUSTER_OK;
}

/* Whether the shrink of the parent yields the new generation's survivor ranks exactly. */
static int nccl_plan_layout_kept(const muster_assignment *a, size_t survivors, const struct nccl_plan_old *old, size_t old_nodes)
{
    for (size_t i = 0; i < survivors; i++) {
        const muster_member *mm = &a->members[i];
        uint32_t k = mm->old_node_rank, below = 0;
        for (size_t j = 0; j < old_nodes; j++)
            if (old[j].seen == 2 && old[j].start < old[k].start)
                below += old[j].lws;
        if (mm->local_world_size != old[k].lws || mm->rank_start != old[k].start - below)
            return 0;
    }
    return 1;
}

/* List the excluded global ranks of the parent, ascending. */
static int nccl_plan_excluded(struct nccl_plan *out, const struct nccl_plan_old *old, size_t old_nodes)
{
    int n = 0;
    for (size_t k = 0; k < old_nodes; k++)
        if (old[k].seen == 2)
            n += (int)old[k].lws;
    out->excluded = n ? malloc((size_t)n * sizeof *out->excluded) : NULL;
    if (n && !out->excluded)
        return MUSTER_ENOMEM;
    for (size_t k = 0; k < old_nodes; k++)
        for (uint32_t r = 0; old[k].seen == 2 && r < old[k].lws; r++)
            out->excluded[out->n_excluded++] = (int)(old[k].start + r);
    return MUSTER_OK;
}

/* Pick the path from the runtime and the answer's shape. */
static void nccl_plan_path(const struct nccl_plan_in *in, struct nccl_plan *out, size_t survivors, int kept)
{
    const muster_assignment *a = in->recovery;
    int added = survivors < a->n_members;
    int shrink = in->have_shrink && in->version >= NCCL_PLAN_SHRINK_VERSION && a->n_excluded > 0 && kept;
    int grow = in->have_grow && in->version >= NCCL_PLAN_GROW_VERSION;
    if (!added)
        out->path = shrink ? NCCL_PLAN_SHRINK : NCCL_PLAN_INIT;
    else
        /* Grow needs a healthy parent whose ranks are exactly the survivors': the shrink makes one.
         * With nobody excluded the parent may hold failed work and cannot be shrunk (NCCL wants at
         * least one excluded rank), so that case re-initialises. */
        out->path = shrink && grow ? NCCL_PLAN_GROW : NCCL_PLAN_INIT;
    out->revoke = out->survivor && out->path != NCCL_PLAN_INIT && in->have_revoke &&
                  in->version >= NCCL_PLAN_REVOKE_VERSION;
}

/* Decide the recovery path, the excluded ranks and this process's new rank. */
int nccl_plan_make(const struct nccl_plan_in *in, struct nccl_plan *out)
{
    const muster_assignment *a;
    struct nccl_plan_old *old;
    size_t survivors, old_nodes;
    int rc, kept;

    if (!out)
        return MUSTER_EINVAL;
    memset(out, 0, sizeof *out);
    out->old_rank = -1;
    if (!in || !in->recovery || !nccl_plan_answer_ok(in->recovery, in->local_rank))
        return MUSTER_EINVAL;
    a = in->recovery;
    survivors = nccl_plan_survivors(a);
    if (survivors == 0)
        return MUSTER_EINVAL;   /* a recovery always keeps a survivor, listed first */
    /* A process of a surviving node holds the parent, unless it is new (its worker was replaced) or its
     * last rebuild failed: that orphan votes the parent unhealthy, so every survivor re-initialises. */
    out->survivor = a->old_node_rank != UINT32_MAX && in->parent_nranks > 0;
    out->orphan = a->old_node_rank != UINT32_MAX && in->parent_nranks == 0;
    if (a->old_node_rank == UINT32_MAX && in->parent_nranks > 0)
        return MUSTER_EINVAL;   /* a newcomer's node held no rank of the parent */
    old_nodes = survivors + a->n_excluded;
    old = calloc(old_nodes, sizeof *old);
    if (!old)
        return MUSTER_ENOMEM;
    rc = nccl_plan_old_layout(in, survivors, old, old_nodes);
    if (rc == MUSTER_OK)
        rc = nccl_plan_mark(in, survivors, old, old_nodes);
    if (rc == MUSTER_OK && out->survivor) {
        const struct nccl_plan_old *me = &old[a->old_node_rank];
        out->old_world = (int)(old[old_nodes - 1].start + old[old_nodes - 1].lws);
        out->old_rank = (int)me->start + in->local_rank;
        if ((uint32_t)in->local_rank >= me->lws || in->parent_nranks != out->old_world ||
            (in->parent_rank >= 0 && in->parent_rank != out->old_rank))
            rc = MUSTER_ECONFLICT;   /* this parent is not the previous generation's communicator */
    }
    if (rc == MUSTER_OK)
        rc = nccl_plan_excluded(out, old, old_nodes);
    kept = rc == MUSTER_OK && nccl_plan_layout_kept(a, survivors, old, old_nodes);
    free(old);
    if (rc != MUSTER_OK) {
        nccl_plan_free(out);
        return rc;
    }
    out->rank = (int)a->rank_start + in->local_rank;
    out->world = (int)a->world_size;
    out->shrunk_world = (int)(a->members[survivors - 1].rank_start + a->members[survivors - 1].local_world_size);
    out->announced = !out->survivor;
    nccl_plan_path(in, out, survivors, kept);
    return MUSTER_OK;
}

/* Free the excluded list. */
void nccl_plan_free(struct nccl_plan *p)
{
    if (!p)
        return;
    free(p->excluded);
    p->excluded = NULL;
    p->n_excluded = 0;
}

/* The path's name. */
const char *nccl_plan_path_name(int path)
{
    switch (path) {
    case NCCL_PLAN_SHRINK:
        return "shrink";
    case NCCL_PLAN_GROW:
        return "grow";
    case NCCL_PLAN_INIT:
        return "init";
    default:
        return "?";
    }
}
