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
