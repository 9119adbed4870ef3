/*
 * hello_allreduce: the first distributed program, in C.
 *
 * Each rank contributes rank + 1, the ranks sum their values with an
 * all-reduce, and every rank prints the sum:
 *
 *     muster run --standalone --nproc-per-node 4 hello_allreduce
 *     [Rank 0] Before all_reduce: [1.0]
 *     ...
 *     [Rank 0] After all_reduce: [10.0]
 *
 * `muster run` sets RANK, WORLD_SIZE, LOCAL_RANK, MUSTER_URL and
 * MUSTER_GENERATION, the way torchrun sets the variables that
 * init_process_group('nccl') reads.  With a CUDA device (and muster built
 * with NCCL) the sum runs through an NCCL communicator from
 * libmuster-nccl; without one the program says so and sums through the
 * store instead, so it runs on any machine.  MUSTER_DEMO_TIMEOUT_MS bounds
 * every wait (default 60000).
 *
 * In place (MUSTER_DEMO_INPLACE=1, under `muster run --recovery in-place`):
 * the program loops MUSTER_DEMO_ITERATIONS all-reduces,
 * MUSTER_DEMO_INTERVAL_MS apart, and survives the loss of other nodes in
 * the same process.  It is one loop over libmuster's world API
 * (muster/world.h): ask the world where this process stands
 * (muster_world_next), build what depends on it, confirm
 * (muster_world_ready), iterate until a collective fails or the world
 * changes (muster_world_changed), and ask again.  The ranks of each world
 * first agree on the iteration to resume at (the highest any reached).
 * Without a GPU the sums go through the store; with one through an NCCL
 * communicator, rebuilt in place by muster_nccl_comm_recover (a shrink when
 * nodes were only lost, a fresh init when some joined), or re-initialised
 * (MUSTER_DEMO_RECOVER=init, to compare).  On a GPU each all-reduce line
 * ends with the wall clock (ns since the epoch), and each rebuild line
 * gives when the change was noticed, answered and built.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <muster/muster.h>
#include <muster/world.h>

#ifdef MUSTER_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <muster/nccl.h>
#endif

#define DEMO_DEFAULT_TIMEOUT_MS 60000
/* In place: how long one wait for the others' values lasts before the world is looked at again. */
#define DEMO_SLICE_MS 100

/* What a wait in place ended with besides muster's statuses: a new generation formed. */
#define DEMO_MOVED 1000
/* In place on a GPU: how long a rank waiting on a collective sleeps between looks at the stream and
 * the world (a look at the world reads pushed events only: no request). */
#define DEMO_NAP_US 200

/* The job as the launcher described it. */
struct demo {
    long rank;
    long world;
    unsigned long long generation;
    unsigned timeout_ms;
    /* In place. */
    int in_place;
    long local_rank;
    const char *node_id;
    long iterations;
    unsigned interval_ms;
    int recover_init;   /* MUSTER_DEMO_RECOVER=init: survivors re-initialise instead of recovering */
};

/* Read a non-negative decimal environment variable into *out (fallback when unset). */
static int demo_env(const char *name, long long fallback, long long *out)
{
    const char *s = getenv(name);
    char *end = NULL;
    if (!s || !*s) {
        *out = fallback;
        return fallback >= 0;
    }
    errno = 0;
    *out = strtoll(s, &end, 10);
    return errno == 0 && *end == '\0' && *out >= 0;
}

/* Fill d's in-place settings from the environment; 0, or -1 (message printed). */
static int demo_read_in_place(struct demo *d)
{
    long long on, iterations, interval, local;
    if (!demo_env("MUSTER_DEMO_INPLACE", 0, &on) || !demo_env("MUSTER_DEMO_ITERATIONS", 1, &iterations) ||
        !demo_env("MUSTER_DEMO_INTERVAL_MS", 0, &interval) || !demo_env("LOCAL_RANK", 0, &local) ||
        iterations < 1 || iterations > 1000000 || interval > 3600000) {
        fprintf(stderr, "hello_allreduce: MUSTER_DEMO_INPLACE, _ITERATIONS or _INTERVAL_MS is malformed\n");
        return -1;
    }
    d->in_place = on != 0;
    d->iterations = (long)iterations;
    d->interval_ms = (unsigned)interval;
    d->local_rank = (long)local;
    d->node_id = getenv("MUSTER_NODE_ID");
    const char *how = getenv("MUSTER_DEMO_RECOVER");
    if (how && *how && strcmp(how, "init") != 0 && strcmp(how, "recover") != 0) {
        fprintf(stderr, "hello_allreduce: MUSTER_DEMO_RECOVER is recover (the default) or init\n");
        return -1;
    }
    d->recover_init = how && strcmp(how, "init") == 0;
    if (d->in_place && (!d->node_id || !*d->node_id)) {
        fprintf(stderr, "hello_allreduce: MUSTER_DEMO_INPLACE needs MUSTER_NODE_ID (start it with `muster run`)\n");
        return -1;
    }
    return 0;
}

/* Fill d from the environment; 0 on success, -1 (message printed) otherwise. */
static int demo_read_env(struct demo *d)
{
    long long rank, world, gen, timeout;
    if (!demo_env("RANK", -1, &rank) || !demo_env("WORLD_SIZE", -1, &world) || rank >= world ||
        world > 1000000) {
        fprintf(stderr, "hello_allreduce: RANK and WORLD_SIZE must be set (start it with `muster run`)\n");
        return -1;
    }
    if (!demo_env("MUSTER_GENERATION", 0, &gen) || !demo_env("MUSTER_DEMO_TIMEOUT_MS", DEMO_DEFAULT_TIMEOUT_MS,
                                                              &timeout) || timeout < 1 || timeout > 86400000) {
        fprintf(stderr, "hello_allreduce: MUSTER_GENERATION or MUSTER_DEMO_TIMEOUT_MS is malformed\n");
        return -1;
    }
    d->rank = (long)rank;
    d->world = (long)world;
    d->generation = (unsigned long long)gen;
    d->timeout_ms = (unsigned)timeout;
    return demo_read_in_place(d);
}

/* Print a failure of a muster call and return the exit status. */
static int demo_fail(const struct demo *d, const char *what, int err, muster_t *m)
{
    const char *detail = m ? muster_last_error(m) : "";
    fprintf(stderr, "hello_allreduce: [Rank %ld] %s: %s%s%s\n", d->rank, what, muster_strerror(err),
            *detail ? ": " : "", detail);
    return 1;
}

/* The number held in a store value of len bytes (0 when it is not one). */
static float demo_parse(const void *value, size_t len)
{
    char text[32];
    if (len >= sizeof text)
        return 0.0f;
    memcpy(text, value, len);
    text[len] = '\0';
    return strtof(text, NULL);
}

/* Publish this rank's value and wait for everyone's; fills *sum. */
static int demo_store_sum(const struct demo *d, muster_t *m, float mine, float *sum)
{
    char **keys = calloc((size_t)d->world, sizeof *keys);
    void **vals = calloc((size_t)d->world, sizeof *vals);
    size_t *lens = calloc((size_t)d->world, sizeof *lens);
    char text[32];
    int rc = keys && vals && lens ? MUSTER_OK : MUSTER_ENOMEM;
    for (long r = 0; rc == MUSTER_OK && r < d->world; r++) {
        if (asprintf(&keys[r], "demo/%llu/%ld", d->generation, r) < 0) {
            keys[r] = NULL;
            rc = MUSTER_ENOMEM;
        }
    }
    snprintf(text, sizeof text, "%.9g", mine);
    if (rc == MUSTER_OK)
        rc = muster_set(m, keys[d->rank], text, strlen(text), d->timeout_ms);
    if (rc == MUSTER_OK)
        rc = muster_multi_get(m, (const char *const *)keys, (size_t)d->world, 1, vals, lens, d->timeout_ms);
    *sum = 0.0f;
    for (long r = 0; rc == MUSTER_OK && r < d->world; r++)
        *sum += demo_parse(vals[r], lens[r]);   /* in rank order, as every rank does */
    for (long r = 0; keys && vals && r < d->world; r++) {
        free(keys[r]);
        muster_free(vals[r]);
    }
    free(keys);
    free(vals);
    free(lens);
    return rc;
}

/* The no-GPU path: the same all-reduce, summed through the store. */
static int demo_run_store(const struct demo *d)
{
    float value = (float)(d->rank + 1), sum = 0.0f;
    int rc = MUSTER_OK;
    muster_t *m;

    printf("[Rank %ld] no CUDA device: reducing through the store\n", d->rank);
    m = muster_connect(NULL, &rc);
    if (!m)
        return demo_fail(d, "cannot reach the store", rc, NULL);
    printf("[Rank %ld] Before all_reduce: [%.1f]\n", d->rank, value);
    rc = demo_store_sum(d, m, value, &sum);
    if (rc != MUSTER_OK) {
        int status = demo_fail(d, "all_reduce through the store", rc, m);
        muster_close(m);
        return status;
    }
    printf("[Rank %ld] After all_reduce: [%.1f]\n", d->rank, sum);
    muster_close(m);
    return 0;
}

/* ------------------------------------------------------------ in place */

/* Monotonic milliseconds. */
static long long demo_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wall-clock nanoseconds, comparable across processes (the lines' timestamps). */
static long long demo_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleep ms milliseconds. */
static void demo_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Publish mine under demo/<generation>/<tag>/<rank> and wait for every rank's value, looking at the
 * world between short waits; fills *sum and *max, or returns DEMO_MOVED. */
static int demo_gather(const struct demo *d, muster_world *w, const char *tag, float mine, float *sum, float *max)
{
    muster_t *m = muster_world_store(w);
    char **keys = calloc((size_t)d->world, sizeof *keys);
    void **vals = calloc((size_t)d->world, sizeof *vals);
    size_t *lens = calloc((size_t)d->world, sizeof *lens);
    char text[32];
    int rc = keys && vals && lens ? MUSTER_OK : MUSTER_ENOMEM;
    for (long r = 0; rc == MUSTER_OK && r < d->world; r++)
        if (asprintf(&keys[r], "demo/%llu/%s/%ld", d->generation, tag, r) < 0)
            keys[r] = NULL, rc = MUSTER_ENOMEM;
    snprintf(text, sizeof text, "%.9g", mine);
    if (rc == MUSTER_OK)
        rc = muster_set(m, keys[d->rank], text, strlen(text), d->timeout_ms);
    for (long long end = demo_now_ms() + d->timeout_ms; rc == MUSTER_OK || rc == MUSTER_ETIMEDOUT;) {
        rc = muster_multi_get(m, (const char *const *)keys, (size_t)d->world, 1, vals, lens, DEMO_SLICE_MS);
        if (rc == MUSTER_ESTALE) {
            rc = DEMO_MOVED;   /* musterd ended the wait: this generation broke, a peer was lost */
            break;
        }
        if (rc != MUSTER_ETIMEDOUT)
            break;
        /* A peer that died never sends its value: a new generation says the world moved on. */
        if (muster_world_changed(w))
            rc = DEMO_MOVED;
        else if (demo_now_ms() >= end)
            break;
    }
    *sum = *max = 0.0f;
    for (long r = 0; rc == MUSTER_OK && r < d->world; r++) {
        float v = demo_parse(vals[r], lens[r]);
        *sum += v; /* in rank order, as every rank does */
        *max = v > *max ? v : *max;
    }
    for (long r = 0; keys && vals && r < d->world; r++) {
        free(keys[r]);
        muster_free(vals[r]);
    }
    free(keys);
    free(vals);
    free(lens);
    return rc;
}

#ifdef MUSTER_HAVE_NCCL
/* Whether this process sees at least one CUDA device. */
static int demo_have_gpu(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

/* Wait for the stream's work under the deadline, watching the communicator
 * for errors: a peer that died mid-collective must not hang this rank. */
static int demo_sync(cudaStream_t stream, ncclComm_t comm, unsigned timeout_ms)
{
    struct timespec pause = {0, 1000000}, start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        cudaError_t q = cudaStreamQuery(stream);
        ncclResult_t async = ncclSuccess;
        if (q == cudaSuccess)
            return MUSTER_OK;
        if (q != cudaErrorNotReady || ncclCommGetAsyncError(comm, &async) != ncclSuccess ||
            (async != ncclSuccess && async != ncclInProgress))
            return MUSTER_ENCCL;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= timeout_ms)
            return MUSTER_ETIMEDOUT;
        nanosleep(&pause, NULL);
    }
}

/* All-reduce (sum) one float in place on the device through comm. */
static int demo_nccl_sum(ncclComm_t comm, float mine, float *sum, unsigned timeout_ms)
{
    float *buf = NULL;
    cudaStream_t stream = NULL;
    int rc = MUSTER_ENCCL;
    ncclResult_t res;
    if (cudaMalloc((void **)&buf, sizeof *buf) != cudaSuccess)
        return MUSTER_ENCCL;
    if (cudaStreamCreate(&stream) == cudaSuccess &&
        cudaMemcpy(buf, &mine, sizeof mine, cudaMemcpyHostToDevice) == cudaSuccess) {
        res = ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, stream);
        rc = res == ncclSuccess || res == ncclInProgress ? muster_nccl_comm_wait(comm, timeout_ms) : MUSTER_ENCCL;
        if (rc == MUSTER_OK)
            rc = demo_sync(stream, comm, timeout_ms);
        if (rc == MUSTER_OK && cudaMemcpy(sum, buf, sizeof *sum, cudaMemcpyDeviceToHost) != cudaSuccess)
            rc = MUSTER_ENCCL;
    }
    if (stream)
        cudaStreamDestroy(stream);
    cudaFree(buf);
    return rc;
}

/* Print an NCCL-side failure with NCCL's own detail. */
static int demo_fail_nccl(const struct demo *d, const char *what, int err)
{
    const char *detail = err == MUSTER_ENCCL ? ncclGetLastError(NULL) : "";
    fprintf(stderr, "hello_allreduce: [Rank %ld] %s: %s%s%s\n", d->rank, what, muster_strerror(err),
            detail && *detail ? ": " : "", detail ? detail : "");
    return 1;
}

/* The GPU path: a communicator from libmuster-nccl and ncclAllReduce. */
static int demo_run_nccl(const struct demo *d)
{
    muster_t *m = NULL;
    ncclComm_t comm = NULL;
    float value = (float)(d->rank + 1), sum = 0.0f;
    int rc = muster_nccl_init_from_env(&m, &comm, NULL, NULL, d->timeout_ms);
    if (rc != MUSTER_OK)
        return demo_fail_nccl(d, "NCCL communicator", rc);
    printf("[Rank %ld] Before all_reduce: [%.1f]\n", d->rank, value);
    rc = demo_nccl_sum(comm, value, &sum, d->timeout_ms);
    if (rc != MUSTER_OK) {
        ncclCommAbort(comm);
        muster_close(m);
        return demo_fail_nccl(d, "all_reduce", rc);
    }
    printf("[Rank %ld] After all_reduce: [%.1f]\n", d->rank, sum);
    rc = muster_nccl_comm_destroy(comm, d->timeout_ms);
    muster_close(m);
    return rc == MUSTER_OK ? 0 : demo_fail_nccl(d, "communicator teardown", rc);
}


/* ------------------------------------------------------ in place on a GPU */

/* A communicator of one generation with the stream and the device buffer its collectives use. */
struct demo_gpu {
    ncclComm_t comm;
    cudaStream_t stream;
    float *buf;
};

/* Give g a stream and a buffer for its new communicator; MUSTER_OK or MUSTER_ENCCL. */
static int demo_gpu_open(struct demo_gpu *g)
{
    if (!g->stream && cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking) != cudaSuccess)
        return MUSTER_ENCCL;
    return g->buf || cudaMalloc((void **)&g->buf, sizeof *g->buf) == cudaSuccess ? MUSTER_OK : MUSTER_ENCCL;
}

/* Let go of g's stream and buffer after its communicator was aborted.  A collective that never finished
 * may still hold them: those are left behind, since cudaFree would wait for it. */
static void demo_gpu_close(struct demo_gpu *g)
{
    if (g->stream && cudaStreamQuery(g->stream) == cudaSuccess)
        cudaFree(g->buf);
    if (g->stream)
        cudaStreamDestroy(g->stream);
    g->stream = NULL;
    g->buf = NULL;
}

/* Wait for the stream's work: MUSTER_OK, DEMO_MOVED (the collective failed or the world changed: ask the
 * world), MUSTER_ETIMEDOUT or MUSTER_ENCCL. */
static int demo_gpu_wait(const struct demo *d, muster_world *w, const struct demo_gpu *g)
{
    struct timespec nap = {0, DEMO_NAP_US * 1000L};
    for (long long end = demo_now_ms() + d->timeout_ms;; nanosleep(&nap, NULL)) {
        ncclResult_t async = ncclSuccess;
        if (ncclCommGetAsyncError(g->comm, &async) != ncclSuccess || (async != ncclSuccess && async != ncclInProgress))
            return DEMO_MOVED;   /* a peer died under the collective: the next world is on its way */
        /* While the non-blocking communicator is still enqueueing, the stream may look idle. */
        cudaError_t q = async == ncclSuccess ? cudaStreamQuery(g->stream) : cudaErrorNotReady;
        if (q == cudaSuccess)
            return MUSTER_OK;
        if (q != cudaErrorNotReady)
            return MUSTER_ENCCL;
        if (muster_world_changed(w))
            return DEMO_MOVED;
        if (demo_now_ms() >= end)
            return MUSTER_ETIMEDOUT;
    }
}

/* All-reduce mine with op over g's communicator; the result into *out, or DEMO_MOVED, or a failure. */
static int demo_gpu_reduce(const struct demo *d, muster_world *w, struct demo_gpu *g, float mine, int max,
                           float *out)
{
    if (cudaMemcpyAsync(g->buf, &mine, sizeof mine, cudaMemcpyHostToDevice, g->stream) != cudaSuccess)
        return MUSTER_ENCCL;
    ncclResult_t res = ncclAllReduce(g->buf, g->buf, 1, ncclFloat, max ? ncclMax : ncclSum, g->comm, g->stream);
    if (res != ncclSuccess && res != ncclInProgress)
        return DEMO_MOVED;
    int rc = demo_gpu_wait(d, w, g);
    if (rc == MUSTER_OK && cudaMemcpy(out, g->buf, sizeof *out, cudaMemcpyDeviceToHost) != cudaSuccess)
        rc = MUSTER_ENCCL;
    return rc;
}

/* Build g's communicator for the world c describes; the old one (if any) is handed over or aborted. */
static int demo_gpu_build(const struct demo *d, muster_t *m, struct demo_gpu *g, const muster_world_change *c,
                          muster_nccl_recovery *info)
{
    ncclComm_t parent = g->comm, comm = NULL;
    int rc;
    memset(info, 0, sizeof *info);
    info->path = MUSTER_NCCL_PATH_INIT;
    g->comm = NULL;
    if (c->previous_generation && !d->recover_init) {
        rc = muster_nccl_comm_recover(m, c->carried ? parent : NULL, c, NULL, &comm, info, d->timeout_ms);
        if (parent && !c->carried)
            ncclCommAbort(parent);
    } else {
        if (parent)
            ncclCommAbort(parent);   /* never finalize a communicator of a broken world */
        rc = muster_nccl_comm_init(m, c->generation, c->rank, c->world_size, c->local_rank, NULL, &comm,
                                   d->timeout_ms);
    }
    if (parent)
        demo_gpu_close(g);
    g->comm = comm;
    return rc == MUSTER_OK ? demo_gpu_open(g) : rc;
}
#endif

/* ---------------------------------------------------------- the loop */

/* A worker in place: its world handle, and on a GPU its communicator. */
struct demo_place {
    muster_world *w;
    int gpu;
#ifdef MUSTER_HAVE_NCCL
    struct demo_gpu g;
#endif
};

/* All-reduce mine (sum, or max), through the store or the communicator. */
static int demo_reduce(const struct demo *d, struct demo_place *p, const char *tag, float mine, int max, float *out)
{
    float sum = 0.0f, top = 0.0f;
#ifdef MUSTER_HAVE_NCCL
    if (p->gpu)
        return demo_gpu_reduce(d, p->w, &p->g, mine, max, out);
#endif
    int rc = demo_gather(d, p->w, tag, mine, &sum, &top);
    *out = max ? top : sum;
    return rc;
}

/* Run one world's iterations from *it on; MUSTER_OK when all are done, DEMO_MOVED, or a failure. */
static int demo_generation(const struct demo *d, struct demo_place *p, long *it)
{
    float sum = 0.0f, start = 0.0f;
    int rc = demo_reduce(d, p, "start", (float)*it, 1, &start);
    for (*it = (long)start; rc == MUSTER_OK && *it < d->iterations; (*it)++) {
        char tag[24];
        snprintf(tag, sizeof tag, "%ld", *it);
        if ((rc = demo_reduce(d, p, tag, (float)(d->rank + 1), 0, &sum)) != MUSTER_OK)
            break;
        printf("[Rank %ld] generation %llu, iteration %ld of %ld: After all_reduce: [%.1f] at %lld\n", d->rank,
               d->generation, *it + 1, d->iterations, sum, demo_wall_ns());
        if (d->interval_ms && *it + 1 < d->iterations)
            demo_sleep_ms(d->interval_ms);
    }
    if (rc == MUSTER_OK)
        printf("[Rank %ld] pid %ld finished %ld iterations in generation %llu: world %ld, sum [%.1f]\n", d->rank,
               (long)getpid(), d->iterations, d->generation, d->world, sum);
    return rc;
}

/* Build what depends on the world c describes (on a GPU the communicator) and say where this process
 * stands; first: this process's first world; noticed: when the change was noticed (wall ns). */
static int demo_build(struct demo *d, struct demo_place *p, const muster_world_change *c, int first,
                      long long noticed)
{
    long long answered = demo_wall_ns();
    long old_rank = d->rank;
    unsigned long long old = d->generation;
    char how[224] = "";
    int rc = MUSTER_OK;
    d->generation = c->generation;
    d->rank = c->rank;
    d->world = c->world_size;
    if (first)
        printf("[Rank %ld] pid %ld starts in place: generation %llu, rank %ld of %ld (%s)\n", d->rank,
               (long)getpid(), d->generation, d->rank, d->world, p->gpu ? "NCCL" : "through the store");
#ifdef MUSTER_HAVE_NCCL
    muster_nccl_recovery info;
    if (p->gpu && (rc = demo_gpu_build(d, muster_world_store(p->w), &p->g, c, &info)) == MUSTER_OK)
        snprintf(how, sizeof how, "; communicator rebuilt by %s%s (%d ranks excluded, %s) in %.1f ms (noticed at "
                 "%lld, answered at %lld, built at %lld)", info.path == MUSTER_NCCL_PATH_SHRINK ? "shrink" : info.path == MUSTER_NCCL_PATH_GROW ? "grow" : "init",
                 c->plan == MUSTER_WORLD_SHRINK && info.path == MUSTER_NCCL_PATH_INIT ? " in place of a shrink" : "",
                 info.n_excluded, info.revoked ? "revoked" : "aborted", (double)(demo_wall_ns() - answered) / 1e6,
                 noticed, answered, demo_wall_ns());
#endif
    if (rc == MUSTER_OK && !first)
        printf("[Rank %ld] pid %ld stays in place: generation %llu -> %llu (%llu skipped), rank %ld -> %ld of %ld%s\n",
               d->rank, (long)getpid(), old, d->generation, (unsigned long long)c->skipped, old_rank, d->rank, d->world,
               how);
    else if (rc == MUSTER_OK && c->previous_generation)
        printf("[Rank %ld] pid %ld joined generation %llu as rank %ld of %ld%s\n", d->rank, (long)getpid(),
               d->generation, d->rank, d->world, how);
    return rc;
}

/* In place: one loop over the world API, through the store or an NCCL communicator. */
static int demo_run_in_place(struct demo *d, int gpu)
{
    struct demo_place p = {.gpu = gpu};
    const muster_world_change *c = NULL;
    long it = 0;
    int rc = MUSTER_OK;
    if (!(p.w = muster_world_open(NULL, NULL, &rc)))
        return demo_fail(d, "cannot open the world", rc, NULL);
    long long noticed = demo_wall_ns();
    rc = muster_world_next(p.w, d->timeout_ms, &c);
    for (int first = 1; rc == MUSTER_OK; first = 0) {
        rc = demo_build(d, &p, c, first, noticed);
        if (rc == MUSTER_OK) {
            muster_world_ready(p.w);
            if ((rc = demo_generation(d, &p, &it)) != DEMO_MOVED)
                break;
        } else if (!muster_world_changed(p.w)) {
            break;   /* a rebuild that failed while the world stands still is a real failure */
        }
        noticed = demo_wall_ns();
        rc = muster_world_next(p.w, d->timeout_ms, &c);
    }
    if (rc != MUSTER_OK) {
        const char *why = *muster_world_error(p.w) ? muster_world_error(p.w) : muster_last_error(muster_world_store(p.w));
        fprintf(stderr, "hello_allreduce: [Rank %ld] all_reduce in place: %s%s%s\n", d->rank, muster_strerror(rc),
                *why ? ": " : "", why);
    }
#ifdef MUSTER_HAVE_NCCL
    if (p.g.comm && rc == MUSTER_OK && muster_nccl_comm_destroy(p.g.comm, d->timeout_ms) != MUSTER_OK)
        rc = demo_fail_nccl(d, "communicator teardown", MUSTER_ENCCL);
    else if (p.g.comm && rc != MUSTER_OK)
        ncclCommAbort(p.g.comm);
    p.g.comm = NULL;
    demo_gpu_close(&p.g);
#endif
    muster_world_close(p.w);
    return rc == MUSTER_OK ? 0 : 1;
}

int main(void)
{
    struct demo d;
    int gpu = 0;
    /* One line at a time, so the lines of several ranks sharing a terminal
     * or a pipe do not interleave mid-line. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (demo_read_env(&d) != 0)
        return 2;
#ifdef MUSTER_HAVE_NCCL
    gpu = demo_have_gpu();
    if (gpu && !d.in_place)
        return demo_run_nccl(&d);
#endif
    if (d.in_place)
        return demo_run_in_place(&d, gpu);
    return demo_run_store(&d);
}
