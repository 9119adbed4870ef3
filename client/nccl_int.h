/*
 * libmuster-nccl internals shared by nccl.c (ids and init) and
 * nccl_recover.c (recovery in place): deadlines, the watch on a
 * generation, and waiting for a non-blocking communicator.  Hidden: not
 * part of the library's exports.
 */
#ifndef MUSTER_NCCL_INT_H
#define MUSTER_NCCL_INT_H

#include <muster/nccl.h>

/* What can cut a wait short besides the deadline: the generation's broken
 * key in the store, and membership events on an optional rendezvous handle. */
struct nccl_watch {
    muster_t *store;
    muster_t *events;          /* NULL when the caller passed none */
    uint64_t generation;
    char broken_key[64];
    char abort_key[256];       /* when set: its presence ends the wait with MUSTER_ENCCL (a peer gave up) */
    uint32_t check_ms;
    uint64_t next_check_ms;
    uint64_t next_beat_ms;
    uint32_t beat_ms;
};

/* Milliseconds left before deadline, at least 1. */
uint32_t nccl_left_ms(uint64_t deadline);
/* Sleep for us microseconds (restarted after signals). */
void nccl_sleep_us(long us);
/* The deadline for a call given its timeout (0 = the default). */
uint64_t nccl_deadline(uint32_t timeout_ms);
/* Whether name is usable as the communicator part of a key. */
int nccl_name_ok(const char *name);
/* Set up the cancel sources for generation of world ranks on store m (events may be NULL). */
void nccl_watch_init(struct nccl_watch *w, muster_t *m, muster_t *events, uint64_t generation, int world);
/* MUSTER_ECANCELED once the watched generation has ended, MUSTER_ENCCL once the abort key exists,
 * else MUSTER_OK (throttled). */
int nccl_watch_poll(struct nccl_watch *w);
/* Poll an in-progress communicator until it settles, the deadline passes or w (may be NULL) fires. */
int nccl_settle(ncclComm_t comm, uint64_t deadline, struct nccl_watch *w);
/* Make the chosen CUDA device current. */
int nccl_set_device(int local_rank, const muster_nccl_opts *opts);
/* A non-blocking config named name (the name must outlive the communicator's init). */
ncclConfig_t nccl_config(const char *name);
/* Init rank of world from nroots ids and wait for it; a partial communicator is aborted. */
int nccl_init(ncclComm_t *out, int world, int rank, int nroots, ncclUniqueId *ids, const char *name,
              uint64_t deadline, struct nccl_watch *w);

#endif
