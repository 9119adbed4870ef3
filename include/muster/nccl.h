/*
 * libmuster-nccl: a ready NCCL communicator from a muster rendezvous.
 *
 * The only part of muster that needs CUDA and NCCL.  One designated rank
 * per root creates an NCCL unique id and publishes it under a key scoped by
 * job (the handle's namespace), generation and communicator name:
 *     nccl/<generation>/<comm_name>/id/<root>
 * never by a local counter, so a new generation always reads a new id and a
 * stale key is never read.  The other ranks fetch it with a blocking get.
 * Init is non-blocking (config.blocking = 0), polled with
 * ncclCommGetAsyncError under the caller's deadline, and aborted on the
 * deadline, when the generation's key muster/rdzv/<generation>/broken
 * appears, or when a membership event arrives on the optional rendezvous
 * handle.  For worlds above MUSTER_NCCL_RANKS_PER_ROOT ranks and NCCL >=
 * 2.23 (checked at run time), ncclCommInitRankScalable is used with one
 * root per that many ranks; every rank fetches all the roots' ids.
 *
 * Link with -lmuster-nccl -lmuster -lnccl -lcudart (pkg-config muster-nccl).
 */
#ifndef MUSTER_NCCL_H
#define MUSTER_NCCL_H

#include <muster/muster.h>
#include <muster/rdzv.h>
#include <muster/world.h>
#include <nccl.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ranks per bootstrap root: larger worlds get one root per this many. */
#define MUSTER_NCCL_RANKS_PER_ROOT 128
/* The deadline used when a timeout_ms argument below is 0. */
#define MUSTER_NCCL_DEFAULT_TIMEOUT_MS 120000
/* The communicator name used when none is given. */
#define MUSTER_NCCL_DEFAULT_NAME "world"

/* Errors: MUSTER_ENCCL means CUDA or NCCL failed; ncclGetLastError(NULL)
 * and cudaGetLastError() say more.  MUSTER_ECANCELED means the generation
 * ended while waiting: the key muster/rdzv/<generation>/broken appeared in
 * the store (the daemon sets it when a member is lost), or the optional
 * rendezvous handle reported a lost member or a stale heartbeat.
 * MUSTER_ETIMEDOUT means the deadline passed.  Every one of them leaves no
 * communicator behind (a partial one is aborted). */

/* Options for muster_nccl_comm_init(); start from MUSTER_NCCL_OPTS_INIT
 * (a NULL opts means the same), then set fields. */
typedef struct muster_nccl_opts {
    const char *comm_name;     /* NULL = "world"; 1..128 bytes, no '/' */
    int cuda_device;           /* -1 = local_rank modulo the visible device count */
    muster_t *events;          /* optional: the caller's rendezvous handle.  While
                                  the init runs it is heartbeated at its interval
                                  and its events are read: MEMBER_LOST aborts the
                                  init (MUSTER_ECANCELED); other events that
                                  arrive meanwhile are dropped */
} muster_nccl_opts;

#define MUSTER_NCCL_OPTS_INIT {NULL, -1, NULL}

/* Exchange the unique id(s) for (generation, comm_name) through the store m
 * and initialise rank `rank` of `world_size` on the chosen CUDA device (made
 * current first) within timeout_ms; on success *comm is ready to use, else
 * *comm is NULL.  The communicator is non-blocking: any later NCCL call on
 * it may return ncclInProgress, after which muster_nccl_comm_wait() must
 * succeed before the next call.  m is used from this thread only during
 * the call. */
MUSTER_API int muster_nccl_comm_init(muster_t *m, uint64_t generation, int rank, int world_size,
                                     int local_rank, const muster_nccl_opts *opts, ncclComm_t *comm,
                                     uint32_t timeout_ms);

/* Publish or fetch only the unique ids (no GPU needed): the first rank of
 * each of the nroots contiguous blocks (NCCL's rank-to-root mapping) creates
 * that root's id with ncclGetUniqueId and publishes it unless the key
 * already holds one; everyone waits for all nroots ids and copies them into
 * ids[] (caller-allocated, nroots entries, 1 <= nroots <= world_size).
 * comm_name NULL = "world".  MUSTER_ECANCELED when the generation's broken
 * key appears first; MUSTER_EPROTO when a key holds something that is not
 * 128 bytes. */
MUSTER_API int muster_nccl_exchange_ids(muster_t *m, uint64_t generation, const char *comm_name, int rank,
                                        int world_size, int nroots, ncclUniqueId *ids, uint32_t timeout_ms);

/* Number of roots used for a world of this size (1 below the threshold). */
MUSTER_API int muster_nccl_nroots(int world_size);

/* Wait until the last NCCL call on a non-blocking communicator has left
 * ncclInProgress: MUSTER_OK, MUSTER_ENCCL (the communicator failed:
 * muster_nccl_comm_destroy() then aborts it) or MUSTER_ETIMEDOUT. */
MUSTER_API int muster_nccl_comm_wait(ncclComm_t comm, uint32_t timeout_ms);

/* Finalize then destroy a communicator; aborts instead when finalize fails
 * or does not complete within timeout_ms.  The communicator is gone after
 * the call whatever it returns.  NULL is a no-op. */
MUSTER_API int muster_nccl_comm_destroy(ncclComm_t comm, uint32_t timeout_ms);

/* Recovery in place: when muster_world_next() (include/muster/world.h)
 * gives a world change formed by a recovery round, every process of the
 * new generation calls muster_nccl_comm_recover() with it; a process that
 * holds the previous generation's communicator (change->carried) passes it
 * as the parent, any other passes NULL (a parent it passes anyway is
 * aborted: it is not the previous generation's).  The parent's size and
 * this process's rank in it come from the change, never from the parent,
 * which may hold an error.  Every process computes the same plan from the
 * same answer:
 *
 *   new generation                     NCCL at run time      path
 *   ---------------------------------  --------------------  ------------------------------
 *   survivors only, someone excluded   ncclCommShrink        SHRINK: shrink the parent
 *   survivors and newcomers/standbys   Shrink and Grow       GROW: shrink, then ncclCommGrow
 *                                      (2.29+)               with the newcomers
 *   survivors and newcomers/standbys   no ncclCommGrow       INIT: abort the parent, fresh id
 *   nobody excluded, or a survivor's   any                   INIT
 *   local world size changed
 *
 * Before SHRINK or GROW, and before anything that could fail on a parent
 * holding an error, the survivors vote: each whose parent holds an error,
 * and each process of a surviving node that holds none (its worker was
 * replaced, or its previous rebuild failed), counts itself, and one
 * barrier's release tells every survivor whether all can shrink; if not,
 * all re-initialise (INIT).  A process that cannot go on still arrives at
 * the vote, so nobody waits for it there.  A vote can pass and a shrink
 * still fail (a proxy that sees the dead peer's socket close after it):
 * after the shrink the survivors vote again; a survivor whose shrink failed
 * counts itself, which also ends the others' wait for the shrunk
 * communicator, and when any failed all let it go and re-initialise (INIT;
 * the info's path says INIT).
 *
 * How the parent's in-flight work is stopped, and how it is released:
 *   SHRINK/GROW with ncclCommRevoke (2.28.7+): revoke, wait until the parent
 *     is quiescent (ncclCommGetAsyncError leaves ncclInProgress), shrink with
 *     NCCL_SHRINK_DEFAULT, wait for the child, then ncclCommDestroy the parent
 *     (after a drained revoke NCCL documents destroy as safe: it frees
 *     locally and waits for no peer).
 *   SHRINK/GROW without it (2.27 to 2.28.6): shrink with NCCL_SHRINK_ABORT,
 *     wait for the child, then ncclCommAbort the parent, never
 *     ncclCommDestroy: after an aborting shrink the parent's resources are
 *     still held and a destroy waits for peers that are gone.
 *   INIT: ncclCommAbort the parent first (it is not needed again), then the
 *     new rank 0's fresh id and ncclCommInitRankConfig of the new world.
 * The parent stays alive until the child is ready because the child's init
 * runs over the parent's bootstrap.  A revoke that ends in an error falls
 * back to the aborting shrink.  GROW's intermediate (shrunk) communicator
 * is finalized and destroyed once the grown one is ready.
 *
 * Excluded ranks: the parent's global ranks follow the previous
 * generation's node order, so node k held old rank_start(k) ..
 * rank_start(k) + local_world_size(k) - 1; the excluded list names nodes by
 * old_node_rank and the shrink drops all their ranks.  The layout is the
 * uniform one: every node ran as many ranks as the survivors run now (a
 * survivor whose local world size changed makes the plan INIT).  A process
 * of an excluded
 * node (muster_world_next answered MUSTER_EEXCLUDED) must ncclCommAbort
 * its communicator before it exits or joins again, never finalize or
 * destroy it: those wait for the survivors, who have moved on.
 *
 * The path and the excluded list depend on the NCCL loaded at run time
 * (ncclGetVersion; ncclCommRevoke, ncclCommShrink, ncclCommGrow and
 * ncclCommGetUniqueId are looked up in the loaded libnccl, so the library
 * still loads against an NCCL without them): every process of a job must
 * load the same NCCL.  Newcomers cannot tell GROW from INIT alone (they do
 * not know the old layout), so the new rank 0, always a survivor, announces
 * its path and id under nccl/<generation>/<comm_name>/id/recover.
 * scripts/gpu-recover.sh runs these paths on a GPU (bench/results/gpu/). */

/* The path muster_nccl_comm_recover() took. */
typedef enum muster_nccl_path {
    MUSTER_NCCL_PATH_SHRINK = 1, /* nobody added: ncclCommShrink of the parent */
    MUSTER_NCCL_PATH_GROW = 2,   /* ranks added, NCCL 2.29+: shrink, then ncclCommGrow */
    MUSTER_NCCL_PATH_INIT = 3    /* a fresh communicator of the new world */
} muster_nccl_path;

/* What muster_nccl_comm_recover() built. */
typedef struct muster_nccl_recovery {
    int rank;                   /* this process's rank in the new communicator */
    int world_size;
    muster_nccl_path path;
    int revoked;                /* 1: the parent was revoked; 0: its work was aborted */
    int n_excluded;             /* ranks of the parent left out (survivors; 0 for a newcomer) */
} muster_nccl_recovery;

/* Build the communicator of the generation a recovery round formed.
 * change: from muster_world_next, previous_generation set; parent: this
 * process's communicator of change->previous_generation when
 * change->carried, else NULL.  The CUDA device is the current one
 * (carried) or chosen as by muster_nccl_comm_init.  On success *comm is
 * ready, *info (may be NULL) says how, and muster_last_error(m) is empty.
 * On failure the parent is released (aborted) whatever the step, *comm is
 * NULL and muster_last_error(m) names the generation, the rank, the path
 * and the step that failed with NCCL's own words: MUSTER_EINVAL (no
 * change, not a recovery's, a bad comm_name), MUSTER_ECONFLICT (the answer
 * disagrees with the previous rank the change holds), MUSTER_ENCCL,
 * MUSTER_ETIMEDOUT, or MUSTER_ECANCELED (the new generation broke too:
 * call muster_world_next again, with nothing carried). */
MUSTER_API int muster_nccl_comm_recover(muster_t *m, ncclComm_t parent, const muster_world_change *change,
                                        const muster_nccl_opts *opts, ncclComm_t *comm,
                                        muster_nccl_recovery *info, uint32_t timeout_ms);

/* One call for workers started by `muster run`: reads MUSTER_URL, RANK,
 * WORLD_SIZE, LOCAL_RANK (default RANK) and MUSTER_GENERATION (default 0),
 * connects, and returns a ready communicator plus the store handle (caller
 * frees both: muster_nccl_comm_destroy, then muster_close) and the rank and
 * world size (out params may be NULL).  MUSTER_EINVAL when the variables
 * are missing or malformed.  timeout_ms covers the connect too. */
MUSTER_API int muster_nccl_init_from_env(muster_t **store, ncclComm_t *comm, int *rank, int *world_size,
                                         uint32_t timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
