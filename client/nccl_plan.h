/*
 * The decision behind muster_nccl_comm_recover(), as a pure function: from
 * the NCCL runtime (version, which optional symbols it has) and the
 * recovery answer, which path rebuilds the communicator, whether the parent
 * is revoked or aborted, which global ranks of the parent are excluded and
 * which rank this process gets.  No NCCL, CUDA or store call is made here,
 * so the unit test links this file alone.  Every survivor computes the same
 * plan from the same answer; see include/muster/nccl.h for the table.
 */
#ifndef MUSTER_NCCL_PLAN_H
#define MUSTER_NCCL_PLAN_H

#include <muster/rdzv.h>

/* Paths; equal to MUSTER_NCCL_PATH_* in muster/nccl.h (checked there). */
#define NCCL_PLAN_SHRINK 1
#define NCCL_PLAN_GROW 2
#define NCCL_PLAN_INIT 3

/* First NCCL releases with each call, as NCCL_VERSION() encodes them. */
#define NCCL_PLAN_SHRINK_VERSION 22700
#define NCCL_PLAN_REVOKE_VERSION 22807
#define NCCL_PLAN_GROW_VERSION 22900

/* What the runtime offers and where this process stands. */
struct nccl_plan_in {
    int version;                /* ncclGetVersion() */
    int have_revoke;            /* ncclCommRevoke resolved in the loaded libnccl */
    int have_shrink;            /* ncclCommShrink resolved */
    int have_grow;              /* ncclCommGrow and ncclCommGetUniqueId resolved */
    const muster_assignment *recovery;  /* from muster_rdzv_recover (or a standby's join), with members */
    const muster_assignment *previous;  /* the assignment the parent was built from, with members; NULL:
                                           every node ran as many ranks as the survivors run now */
    int local_rank;             /* this process's local rank on its node */
    int parent_nranks;          /* ncclCommCount(parent); 0 without a parent (a newcomer) */
    int parent_rank;            /* ncclCommUserRank(parent); -1 without a parent */
};

/* The plan; free with nccl_plan_free(). */
struct nccl_plan {
    int path;                   /* NCCL_PLAN_* */
    int survivor;               /* this process holds a rank of the parent */
    int orphan;                 /* its node survived but this process holds no parent: it takes part in
                                   the survivors' vote as unhealthy, which makes every survivor re-init */
    int revoke;                 /* survivors on SHRINK/GROW: revoke and drain the parent (else the shrink
                                   aborts its work with NCCL_SHRINK_ABORT) */
    int announced;              /* a newcomer: GROW or INIT is read from the new rank 0's announcement */
    int rank;                   /* this process's rank in the new communicator */
    int world;                  /* ranks in the new communicator */
    int shrunk_world;           /* GROW: ranks after the shrink (the survivors' ranks) */
    int old_world;              /* ranks of the parent; 0 for a newcomer */
    int old_rank;               /* this process's rank in the parent; -1 for a newcomer */
    int n_excluded;             /* global ranks of the parent left out, ascending */
    int *excluded;
};

/* Decide; MUSTER_OK, MUSTER_EINVAL (NULL, not a recovery answer, no members list, a local rank out of
 * range), MUSTER_ECONFLICT (the answer disagrees with the parent or with previous) or MUSTER_ENOMEM.
 * On error *out holds nothing to free. */
int nccl_plan_make(const struct nccl_plan_in *in, struct nccl_plan *out);
/* Free the plan's excluded list; safe on a zeroed plan. */
void nccl_plan_free(struct nccl_plan *p);
/* The path's name ("shrink", "grow", "init"), for messages and tests. */
const char *nccl_plan_path_name(int path);

#endif
