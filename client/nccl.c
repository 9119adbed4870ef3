/*
 * libmuster-nccl: exchange NCCL unique ids through the store and build a
 * ready communicator with a bounded, cancellable, non-blocking init.
 *
 * Ids are made by ranks, never by the daemon: ncclGetUniqueId starts a root
 * thread and a listening socket in the calling process, which must live
 * until every rank has checked in.  Root k of a world of n ranks split into
 * r roots belongs to the first rank of NCCL's contiguous block k (the first
 * n % r blocks hold n / r + 1 ranks, the rest n / r).  Keys are
 * nccl/<generation>/<comm_name>/id/<root>, so each generation reads only
 * ids made for it.
 */
#include <muster/nccl.h>

#include <cuda_runtime_api.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deadline.h"
#include "keys.h"
#include "nccl_int.h"

/* Longest communicator name accepted (it becomes part of a key). */
#define NCCL_NAME_MAX 128
/* Room for any key this file builds. */
#define NCCL_KEY_MAX (NCCL_NAME_MAX + 64)
/* How often each rank looks for the generation's "broken" key while it
 * waits (for ids, or for the init): every 100 ms, stretched in large worlds
 * so that all ranks together send at most about 10,000 checks a second. */
#define NCCL_CHECK_MIN_MS 100
#define NCCL_CHECKS_PER_SEC 10000
/* First and largest sleep between two polls of an in-progress communicator. */
#define NCCL_POLL_MIN_US 1000
#define NCCL_POLL_MAX_US 10000
/* Smallest NCCL release with ncclCommInitRankScalable, as NCCL_VERSION() encodes it. */
#define NCCL_SCALABLE_VERSION 22300

/* Milliseconds left before deadline (on the library's clock, deadline.h), at least 1 so that it never
 * reads as "default". */
uint32_t nccl_left_ms(uint64_t deadline)
{
    uint64_t now = deadline_now();
    if (deadline <= now)
        return 1;
    return deadline - now > UINT32_MAX ? UINT32_MAX : (uint32_t)(deadline - now);
}

/* Sleep for us microseconds (restarted after signals). */
void nccl_sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The deadline for a call given its timeout (0 = the default). */
uint64_t nccl_deadline(uint32_t timeout_ms)
{
    return deadline_after(timeout_ms ? timeout_ms : MUSTER_NCCL_DEFAULT_TIMEOUT_MS);
}

/* Whether name is usable as the communicator part of a key. */
int nccl_name_ok(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n <= NCCL_NAME_MAX && strchr(name, '/') == NULL;
}

/* First rank of root k's block when world ranks are split into nroots blocks. */
static int nccl_block_first(int world, int nroots, int k)
{
    int per = world / nroots, extra = world % nroots;
    return k * per + (k < extra ? k : extra);
}

/* The root whose block holds rank. */
static int nccl_block_of(int world, int nroots, int rank)
{
    int per = world / nroots, extra = world % nroots;
    int big = extra * (per + 1);   /* ranks held by the larger first blocks */
    if (rank < big)
        return rank / (per + 1);
    return extra + (rank - big) / per;
}

/* Create root k's id and publish it where no key is yet.  A key that already holds an id is not this
 * root's: someone wrote it first (a forged id would make every rank bootstrap to an address the writer
 * chose), so it is refused rather than adopted. */
static int nccl_publish(muster_t *m, const char *key, uint64_t deadline)
{
    ncclUniqueId id;
    int swapped = 0;
    if (ncclGetUniqueId(&id) != ncclSuccess)
        return MUSTER_ENCCL;
    int rc = muster_compare_set(m, key, "", 0, &id, sizeof id, &swapped, NULL, NULL, nccl_left_ms(deadline));
    if (rc == MUSTER_OK && !swapped)
        return muster_set_error(m, MUSTER_EFORBIDDEN, "'%s' held an id before its root published one: refusing "
                                "an id this root did not write", key);
    return rc;
}

/* Tell whether the watched generation has ended: its broken key exists, a
 * member was lost, or a heartbeat was answered stale (MUSTER_ECANCELED); or
 * whether the abort key, when set, exists (MUSTER_ENCCL).  Throttled by time. */
int nccl_watch_poll(struct nccl_watch *w)
{
    uint64_t now = deadline_now();
    if (w->events) {
        muster_event *ev = NULL;
        /* Events other than a lost member are consumed and dropped here;
         * the header says so. */
        while (muster_next_event(w->events, &ev, 0) == MUSTER_OK) {
            int lost = ev->kind == MUSTER_EVENT_MEMBER_LOST;
            muster_event_free(ev);
            if (lost)
                return MUSTER_ECANCELED;
        }
        if (w->beat_ms && now >= w->next_beat_ms) {
            w->next_beat_ms = now + w->beat_ms;
            if (muster_rdzv_heartbeat(w->events, w->generation, 0) == MUSTER_ESTALE)
                return MUSTER_ECANCELED;
        }
    }
    if (now >= w->next_check_ms) {
        const char *keys[1] = {w->broken_key};
        int present = 0;
        w->next_check_ms = now + w->check_ms;
        if (muster_check(w->store, keys, 1, &present, 0) == MUSTER_OK && present)
            return MUSTER_ECANCELED;
        keys[0] = w->abort_key;
        if (w->abort_key[0] && muster_check(w->store, keys, 1, &present, 0) == MUSTER_OK && present)
            return MUSTER_ENCCL;
    }
    return MUSTER_OK;
}

/* Set up the cancel sources for generation of world ranks on store m
 * (events may be NULL). */
void nccl_watch_init(struct nccl_watch *w, muster_t *m, muster_t *events, uint64_t generation, int world)
{
    uint64_t spread = (uint64_t)(world > 0 ? world : 1) * 1000 / NCCL_CHECKS_PER_SEC;
    memset(w, 0, sizeof *w);
    w->store = m;
    w->events = events;
    w->generation = generation;
    w->check_ms = spread > NCCL_CHECK_MIN_MS ? (uint32_t)spread : NCCL_CHECK_MIN_MS;
    keys_rdzv_broken(w->broken_key, sizeof w->broken_key, generation);
    if (events) {
        w->beat_ms = muster_rdzv_heartbeat_interval(events);
        w->next_beat_ms = deadline_now() + w->beat_ms;
    }
}

/* Fetch all nroots ids, waiting for their owners; with a watch, the wait is
 * cut into slices of the watch's check interval so that a broken
 * generation ends it early. */
static int nccl_fetch(muster_t *m, const char *const *keys, int nroots, ncclUniqueId *ids, uint64_t deadline,
                      struct nccl_watch *w)
{
    void **vals = calloc((size_t)nroots, sizeof *vals);
    size_t *lens = calloc((size_t)nroots, sizeof *lens);
    int rc = vals && lens ? MUSTER_ETIMEDOUT : MUSTER_ENOMEM;
    while (rc == MUSTER_ETIMEDOUT && deadline_now() < deadline) {
        uint32_t slice = nccl_left_ms(deadline);
        if (w && slice > w->check_ms)
            slice = w->check_ms;
        rc = muster_multi_get(m, keys, (size_t)nroots, 1, vals, lens, slice);
        if (rc == MUSTER_ESTALE)
            rc = MUSTER_ECANCELED;   /* musterd ended the wait: the generation broke */
        if (rc == MUSTER_ETIMEDOUT && w && nccl_watch_poll(w) == MUSTER_ECANCELED)
            rc = MUSTER_ECANCELED;
    }
    for (int k = 0; rc == MUSTER_OK && k < nroots; k++) {
        if (lens[k] != sizeof ids[k])
            rc = MUSTER_EPROTO;   /* not an id: someone else wrote this key */
        else
            memcpy(&ids[k], vals[k], sizeof ids[k]);
    }
    for (int k = 0; vals && k < nroots; k++)
        muster_free(vals[k]);
    free(vals);
    free(lens);
    return rc;
}

/* Validate the arguments shared by the exchange and the init. */
static int nccl_args_ok(muster_t *m, const char *name, int rank, int world, int nroots)
{
    return m && name && nccl_name_ok(name) && world >= 1 && rank >= 0 && rank < world && nroots >= 1 &&
           nroots <= world;
}

/* The exchange itself: publish the root this rank owns, then fetch them
 * all; w (may be NULL) ends it early when the generation breaks. */
static int nccl_exchange(muster_t *m, uint64_t generation, const char *name, int rank, int world, int nroots,
                         ncclUniqueId *ids, uint64_t deadline, struct nccl_watch *w)
{
    char(*keys)[NCCL_KEY_MAX] = calloc((size_t)nroots, sizeof *keys);
    const char **kp = calloc((size_t)nroots, sizeof *kp);
    int rc = MUSTER_ENOMEM;
    if (keys && kp) {
        int root = nccl_block_of(world, nroots, rank);
        for (int k = 0; k < nroots; k++) {
            keys_nccl_id(keys[k], sizeof keys[k], generation, name, k);
            kp[k] = keys[k];
        }
        /* A generation that already broke gets no new root thread. */
        rc = w ? nccl_watch_poll(w) : MUSTER_OK;
        if (rc == MUSTER_OK && nccl_block_first(world, nroots, root) == rank)
            rc = nccl_publish(m, keys[root], deadline);
        if (rc == MUSTER_OK)
            rc = nccl_fetch(m, kp, nroots, ids, deadline, w);
    }
    free(kp);
    free(keys);
    return rc;
}

/* Publish this rank's root id if it owns one, then fetch every root's id. */
int muster_nccl_exchange_ids(muster_t *m, uint64_t generation, const char *comm_name, int rank,
                             int world_size, int nroots, ncclUniqueId *ids, uint32_t timeout_ms)
{
    const char *name = comm_name ? comm_name : MUSTER_NCCL_DEFAULT_NAME;
    struct nccl_watch w;
    if (!ids || !nccl_args_ok(m, name, rank, world_size, nroots))
        return MUSTER_EINVAL;
    nccl_watch_init(&w, m, NULL, generation, world_size);
    return nccl_exchange(m, generation, name, rank, world_size, nroots, ids, nccl_deadline(timeout_ms), &w);
}

/* One root per MUSTER_NCCL_RANKS_PER_ROOT ranks when the loaded NCCL has scalable init, else one. */
int muster_nccl_nroots(int world_size)
{
    int version = 0;
    if (world_size <= MUSTER_NCCL_RANKS_PER_ROOT)
        return 1;
    if (ncclGetVersion(&version) != ncclSuccess || version < NCCL_SCALABLE_VERSION)
        return 1;
    return (world_size + MUSTER_NCCL_RANKS_PER_ROOT - 1) / MUSTER_NCCL_RANKS_PER_ROOT;
}

/* Poll an in-progress communicator until it settles, the deadline passes or
 * the watch (may be NULL) reports the generation gone.  The sleep between
 * polls starts at 1 ms and grows to 10 ms: short inits stay fast and long
 * ones do not spin. */
int nccl_settle(ncclComm_t comm, uint64_t deadline, struct nccl_watch *w)
{
    long pause = NCCL_POLL_MIN_US;
    for (;;) {
        ncclResult_t state = ncclInProgress;
        if (ncclCommGetAsyncError(comm, &state) != ncclSuccess)
            return MUSTER_ENCCL;
        if (state == ncclSuccess)
            return MUSTER_OK;
        if (state != ncclInProgress)
            return MUSTER_ENCCL;
        if (deadline_now() >= deadline)
            return MUSTER_ETIMEDOUT;
        int cut = w ? nccl_watch_poll(w) : MUSTER_OK;
        if (cut != MUSTER_OK)
            return cut;
        nccl_sleep_us(pause);
        pause = pause * 2 > NCCL_POLL_MAX_US ? NCCL_POLL_MAX_US : pause * 2;
    }
}

/* Wait for the last call on a non-blocking communicator to leave ncclInProgress. */
int muster_nccl_comm_wait(ncclComm_t comm, uint32_t timeout_ms)
{
    if (!comm)
        return MUSTER_EINVAL;
    return nccl_settle(comm, nccl_deadline(timeout_ms), NULL);
}

/* Make the chosen CUDA device current: the explicit one, else local_rank
 * modulo the number of visible devices. */
int nccl_set_device(int local_rank, const muster_nccl_opts *opts)
{
    int count = 0, dev = opts ? opts->cuda_device : -1;
    if (dev < 0) {
        if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1)
            return MUSTER_ENCCL;
        dev = (local_rank < 0 ? 0 : local_rank) % count;
    }
    return cudaSetDevice(dev) == cudaSuccess ? MUSTER_OK : MUSTER_ENCCL;
}

/* Start the non-blocking init of rank of world from nroots ids with config. */
static ncclResult_t nccl_start(ncclComm_t *comm, int world, int rank, int nroots, ncclUniqueId *ids,
                               ncclConfig_t *config)
{
#if NCCL_VERSION_CODE >= NCCL_SCALABLE_VERSION
    if (nroots > 1)
        return ncclCommInitRankScalable(comm, world, rank, nroots, ids, config);
#endif
    return ncclCommInitRankConfig(comm, world, ids[0], rank, config);
}

/* A non-blocking config named name (the name must outlive the communicator's init). */
ncclConfig_t nccl_config(const char *name)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
#if NCCL_VERSION_CODE >= 22700
    config.commName = name;
#else
    (void)name;
#endif
    return config;
}

/* Init from exchanged ids and wait for the communicator under the watch;
 * a partial communicator is aborted before returning an error.  The config
 * (and the name it points to) stays alive until the init has settled,
 * since the init runs on NCCL's own thread. */
int nccl_init(ncclComm_t *out, int world, int rank, int nroots, ncclUniqueId *ids, const char *name,
              uint64_t deadline, struct nccl_watch *w)
{
    ncclConfig_t config = nccl_config(name);
    ncclComm_t comm = NULL;
    ncclResult_t res;
    int rc = MUSTER_ENCCL;
    res = nccl_start(&comm, world, rank, nroots, ids, &config);
    if (res == ncclSuccess || res == ncclInProgress)
        rc = nccl_settle(comm, deadline, w);
    if (rc != MUSTER_OK) {
        if (comm)
            ncclCommAbort(comm);
        return rc;
    }
    *out = comm;
    return MUSTER_OK;
}

/* Pick the device, exchange the ids and initialise the communicator, all under one deadline. */
int muster_nccl_comm_init(muster_t *m, uint64_t generation, int rank, int world_size, int local_rank,
                          const muster_nccl_opts *opts, ncclComm_t *comm, uint32_t timeout_ms)
{
    const char *name = opts && opts->comm_name ? opts->comm_name : MUSTER_NCCL_DEFAULT_NAME;
    uint64_t deadline = nccl_deadline(timeout_ms);
    int nroots = muster_nccl_nroots(world_size);
    struct nccl_watch w;
    ncclUniqueId *ids;
    int rc;

    if (!comm || !nccl_args_ok(m, name, rank, world_size, nroots))
        return MUSTER_EINVAL;
    *comm = NULL;
    rc = nccl_set_device(local_rank, opts);
    if (rc != MUSTER_OK)
        return rc;
    ids = calloc((size_t)nroots, sizeof *ids);
    if (!ids)
        return MUSTER_ENOMEM;
    nccl_watch_init(&w, m, opts ? opts->events : NULL, generation, world_size);
    rc = nccl_exchange(m, generation, name, rank, world_size, nroots, ids, deadline, &w);
    if (rc == MUSTER_OK)
        rc = nccl_watch_poll(&w);
    if (rc == MUSTER_OK)
        rc = nccl_init(comm, world_size, rank, nroots, ids, name, deadline, &w);
    free(ids);
    return rc;
}

/* Finalize and destroy a communicator, aborting it when that fails or stalls. */
int muster_nccl_comm_destroy(ncclComm_t comm, uint32_t timeout_ms)
{
    ncclResult_t res;
    int rc;
    if (!comm)
        return MUSTER_OK;
    res = ncclCommFinalize(comm);
    rc = res == ncclSuccess || res == ncclInProgress ? nccl_settle(comm, nccl_deadline(timeout_ms), NULL)
                                                     : MUSTER_ENCCL;
    /* Destroy after a clean finalize is local; anything else needs abort,
     * which never waits for peers that may be gone. */
    if (rc == MUSTER_OK && ncclCommDestroy(comm) == ncclSuccess)
        return MUSTER_OK;
    ncclCommAbort(comm);
    return rc == MUSTER_OK ? MUSTER_ENCCL : rc;
}

/* Read a non-negative decimal environment variable; fallback when unset. */
static int nccl_env_int(const char *name, long long fallback, long long max, long long *out)
{
    const char *s = getenv(name);
    char *end = NULL;
    long long v;
    if (!s || !*s) {
        *out = fallback;
        return fallback >= 0;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || *end || v < 0 || v > max)
        return 0;
    *out = v;
    return 1;
}

/* Connect to the store named by the launcher's environment and build the world communicator. */
int muster_nccl_init_from_env(muster_t **store, ncclComm_t *comm, int *rank, int *world_size,
                              uint32_t timeout_ms)
{
    long long r, n, local, gen;
    char client[64];
    muster_opts mo = {0};
    muster_t *m;
    uint64_t deadline = nccl_deadline(timeout_ms);
    int rc;

    if (!store || !comm)
        return MUSTER_EINVAL;
    *store = NULL;
    *comm = NULL;
    if (!nccl_env_int("RANK", -1, INT_MAX, &r) || !nccl_env_int("WORLD_SIZE", -1, INT_MAX, &n) ||
        !nccl_env_int("LOCAL_RANK", r, INT_MAX, &local) || !nccl_env_int("MUSTER_GENERATION", 0, LLONG_MAX, &gen) ||
        r >= n)
        return MUSTER_EINVAL;
    snprintf(client, sizeof client, "rank %lld", r);
    mo.client_name = client;
    mo.connect_timeout_ms = nccl_left_ms(deadline);
    m = muster_connect_opts(NULL, &mo, &rc);
    if (!m)
        return rc;
    rc = muster_nccl_comm_init(m, (uint64_t)gen, (int)r, (int)n, (int)local, NULL, comm, nccl_left_ms(deadline));
    if (rc != MUSTER_OK) {
        muster_close(m);
        return rc;
    }
    *store = m;
    if (rank)
        *rank = (int)r;
    if (world_size)
        *world_size = (int)n;
    return MUSTER_OK;
}
