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
 * the program loops MUSTER_DEMO_ITERATIONS all-reduces through the store,
 * MUSTER_DEMO_INTERVAL_MS apart, and survives the loss of other nodes in
 * the same process.  While it waits for the others' values it looks at
 * the daemon's generation key every DEMO_SLICE_MS; when a new generation
 * has formed, it reads its node's place in it from the launcher's key
 * (docs/launcher.md, "Staying in place") and goes on there: the ranks of
 * the new world first agree on the iteration to resume at (the highest
 * any of them reached: a process started into the new world has done
 * none), then every rank prints the sum over the new world.
 *
 * In place with a CUDA device, the sums run through an NCCL communicator
 * instead, which follows the world too: a rank waiting on a collective
 * looks at the generation key every DEMO_POLL_MS; once a new generation
 * has formed it reads the recovery answer its launcher published
 * (muster_run_answer) and rebuilds the communicator in the same process
 * with muster_nccl_comm_recover (a shrink when ranks were only lost, a
 * fresh init when ranks join).  A process started into such a generation
 * (a replaced rank, an admitted standby) joins it the same way.
 * MUSTER_DEMO_RECOVER=init makes the survivors abort the old communicator
 * and initialise a fresh one instead (muster_nccl_comm_init), to compare.
 * Each all-reduce line ends with the wall clock (ns since the epoch).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <muster/muster.h>

#ifdef MUSTER_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <muster/nccl.h>
#endif

#define DEMO_DEFAULT_TIMEOUT_MS 60000
/* In place: how long one wait for the others' values lasts before the generation key is read again. */
#define DEMO_SLICE_MS 100

/* Keys a worker staying in place reads (proto/keys.h names them): the daemon's latest generation, and
 * the launcher's "rank_start world_size local_world_size node_rank num_nodes" of this node in one. */
#define DEMO_GENERATION_KEY "muster/rdzv/generation"
#define DEMO_PLACE_KEY_FMT "muster/run/%llu/place/%s"

/* What a wait in place ended with besides muster's statuses: a new generation formed. */
#define DEMO_MOVED 1000
/* In place on a GPU: how often a rank waiting on a collective reads the generation key, and how long
 * it sleeps between looks at the stream. */
#define DEMO_POLL_MS 10
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

/* Sleep ms milliseconds. */
static void demo_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The latest generation the daemon formed (0 when it cannot be read). */
static unsigned long long demo_latest(muster_t *m)
{
    void *v = NULL;
    size_t n = 0;
    unsigned long long gen = 0;
    if (muster_get(m, DEMO_GENERATION_KEY, 0, 0, &v, &n) == MUSTER_OK) {
        gen = (unsigned long long)demo_parse(v, n);
        muster_free(v);
    }
    return gen;
}

/* Read this node's place in generation gen from the launcher's key, waiting at most DEMO_SLICE_MS. */
static int demo_place(struct demo *d, muster_t *m, unsigned long long gen)
{
    char key[256], text[96];
    void *v = NULL;
    size_t n = 0;
    unsigned long long start, world;
    snprintf(key, sizeof key, DEMO_PLACE_KEY_FMT, gen, d->node_id);
    int rc = muster_get(m, key, 1, DEMO_SLICE_MS, &v, &n);
    if (rc != MUSTER_OK)
        return rc;
    snprintf(text, sizeof text, "%.*s", (int)(n < sizeof text ? n : sizeof text - 1), (const char *)v);
    muster_free(v);
    if (sscanf(text, "%llu %llu", &start, &world) != 2 || start + (unsigned long long)d->local_rank >= world)
        return MUSTER_EPROTO;
    d->rank = (long)(start + (unsigned long long)d->local_rank);
    d->world = (long)world;
    d->generation = gen;
    return MUSTER_OK;
}

/* A new generation formed: follow it (the latest, should more form meanwhile) to this node's place. */
static int demo_follow(struct demo *d, muster_t *m)
{
    unsigned long long old = d->generation;
    long old_rank = d->rank;
    long long end = demo_now_ms() + d->timeout_ms;
    int rc;
    do {
        rc = demo_place(d, m, demo_latest(m));
    } while (rc == MUSTER_ETIMEDOUT && demo_now_ms() < end);
    if (rc == MUSTER_OK)
        printf("[Rank %ld] pid %ld stays in place: generation %llu -> %llu, rank %ld -> %ld of %ld\n", d->rank,
               (long)getpid(), old, d->generation, old_rank, d->rank, d->world);
    return rc;
}

/* Publish mine under demo/<generation>/<tag>/<rank> and wait for every rank's value, looking for a new
 * generation between short waits; fills *sum and *max, or returns DEMO_MOVED. */
static int demo_gather(const struct demo *d, muster_t *m, const char *tag, float mine, float *sum, float *max)
{
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
        if (rc != MUSTER_ETIMEDOUT)
            break;
        /* A peer that died never sends its value: a new generation says the world moved on. */
        if (demo_latest(m) > d->generation)
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

/* Run the iterations of one generation from *it on; MUSTER_OK when all are done, DEMO_MOVED, or a
 * failure.  The ranks first agree on the iteration to resume at. */
static int demo_generation(const struct demo *d, muster_t *m, long *it)
{
    float sum, max;
    int rc = demo_gather(d, m, "start", (float)*it, &sum, &max);
    if (rc != MUSTER_OK)
        return rc;
    for (*it = (long)max; *it < d->iterations; (*it)++) {
        char tag[24];
        snprintf(tag, sizeof tag, "%ld", *it);
        if ((rc = demo_gather(d, m, tag, (float)(d->rank + 1), &sum, &max)) != MUSTER_OK)
            return rc;
        printf("[Rank %ld] generation %llu, iteration %ld of %ld: After all_reduce: [%.1f]\n", d->rank,
               d->generation, *it + 1, d->iterations, sum);
        if (d->interval_ms && *it + 1 < d->iterations)
            demo_sleep_ms(d->interval_ms);
    }
    printf("[Rank %ld] pid %ld finished %ld iterations in generation %llu: world %ld, sum [%.1f]\n", d->rank,
           (long)getpid(), d->iterations, d->generation, d->world, sum);
    return MUSTER_OK;
}

/* In place: iterate through the store, following the world into each new generation. */
static int demo_run_in_place(struct demo *d)
{
    int rc = MUSTER_OK;
    long it = 0;
    muster_t *m = muster_connect(NULL, &rc);
    if (!m)
        return demo_fail(d, "cannot reach the store", rc, NULL);
    printf("[Rank %ld] pid %ld starts in place: generation %llu, rank %ld of %ld\n", d->rank, (long)getpid(),
           d->generation, d->rank, d->world);
    while ((rc = demo_generation(d, m, &it)) == DEMO_MOVED)
        if ((rc = demo_follow(d, m)) != MUSTER_OK)
            break;
    if (rc != MUSTER_OK) {
        int status = demo_fail(d, "all_reduce in place", rc, m);
        muster_close(m);
        return status;
    }
    muster_close(m);
    return 0;
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

/* Wall-clock nanoseconds, comparable across processes (the lines' timestamps). */
static long long demo_wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Give g a stream and a buffer for its new communicator; MUSTER_OK or MUSTER_ENCCL. */
static int demo_gpu_open(struct demo_gpu *g)
{
    g->stream = NULL;
    g->buf = NULL;
    if (cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking) != cudaSuccess)
        return MUSTER_ENCCL;
    return cudaMalloc((void **)&g->buf, sizeof *g->buf) == cudaSuccess ? MUSTER_OK : MUSTER_ENCCL;
}

/* Let go of g's stream and buffer once its communicator is gone.  A collective of the old world that
 * never finished (the communicator was aborted) may still hold them: those are left behind, since
 * cudaFree would wait for it. */
static void demo_gpu_close(struct demo_gpu *g)
{
    if (g->stream && cudaStreamQuery(g->stream) == cudaSuccess) {
        cudaFree(g->buf);
        g->buf = NULL;
    }
    if (g->stream)
        cudaStreamDestroy(g->stream);
    g->stream = NULL;
}

/* Wait for the communicator's enqueue and the stream's work, reading the generation key every
 * DEMO_POLL_MS: MUSTER_OK, DEMO_MOVED (a new generation formed), MUSTER_ETIMEDOUT or MUSTER_ENCCL. */
static int demo_gpu_wait(const struct demo *d, muster_t *m, const struct demo_gpu *g)
{
    long long start = demo_now_ms(), looked = start;
    struct timespec nap = {0, DEMO_NAP_US * 1000L};
    int failed = 0;
    for (;;) {
        ncclResult_t async = ncclSuccess;
        long long now;
        if (!failed && ncclCommGetAsyncError(g->comm, &async) == ncclSuccess && async == ncclSuccess) {
            cudaError_t q = cudaStreamQuery(g->stream);
            if (q == cudaSuccess)
                return MUSTER_OK;
            if (q != cudaErrorNotReady)
                return MUSTER_ENCCL;
        } else if (!failed && async != ncclInProgress) {
            /* A peer died under the collective: the launchers' recovery will form the next world. */
            failed = 1;
        }
        now = demo_now_ms();
        if (now - looked >= DEMO_POLL_MS) {
            looked = now;
            if (demo_latest(m) > d->generation)
                return DEMO_MOVED;
        }
        if (now - start >= d->timeout_ms)
            return failed ? MUSTER_ENCCL : MUSTER_ETIMEDOUT;
        nanosleep(&nap, NULL);
    }
}

/* All-reduce mine with op over g's communicator; the result into *out, or DEMO_MOVED, or a failure. */
static int demo_gpu_reduce(const struct demo *d, muster_t *m, struct demo_gpu *g, float mine, ncclRedOp_t op,
                           float *out)
{
    ncclResult_t res;
    int rc;
    if (cudaMemcpyAsync(g->buf, &mine, sizeof mine, cudaMemcpyHostToDevice, g->stream) != cudaSuccess)
        return MUSTER_ENCCL;
    res = ncclAllReduce(g->buf, g->buf, 1, ncclFloat, op, g->comm, g->stream);
    if (res != ncclSuccess && res != ncclInProgress)
        return MUSTER_ENCCL;
    rc = demo_gpu_wait(d, m, g);
    if (rc == MUSTER_OK && cudaMemcpy(out, g->buf, sizeof *out, cudaMemcpyDeviceToHost) != cudaSuccess)
        rc = MUSTER_ENCCL;
    return rc;
}

/* Run one generation's iterations from *it on through the communicator: agree on the iteration to
 * resume at (the highest any rank reached), then all-reduce; MUSTER_OK, DEMO_MOVED or a failure. */
static int demo_gpu_generation(const struct demo *d, muster_t *m, struct demo_gpu *g, long *it)
{
    float sum = 0.0f, max = 0.0f;
    int rc = demo_gpu_reduce(d, m, g, (float)*it, ncclMax, &max);
    if (rc != MUSTER_OK)
        return rc;
    for (*it = (long)max; *it < d->iterations; (*it)++) {
        if ((rc = demo_gpu_reduce(d, m, g, (float)(d->rank + 1), ncclSum, &sum)) != MUSTER_OK)
            return rc;
        printf("[Rank %ld] generation %llu, iteration %ld of %ld: After all_reduce: [%.1f] at %lld\n", d->rank,
               d->generation, *it + 1, d->iterations, sum, demo_wall_ns());
        if (d->interval_ms && *it + 1 < d->iterations)
            demo_sleep_ms(d->interval_ms);
    }
    printf("[Rank %ld] pid %ld finished %ld iterations in generation %llu: world %ld, sum [%.1f]\n", d->rank,
           (long)getpid(), d->iterations, d->generation, d->world, sum);
    return MUSTER_OK;
}

/* Read the recovery answer of the latest generation for this node, following newer generations while
 * it is not published; *ans is the caller's to free. */
static int demo_gpu_answer(const struct demo *d, muster_t *m, muster_assignment **ans)
{
    long long end = demo_now_ms() + d->timeout_ms;
    int rc;
    do {
        rc = muster_run_answer(m, demo_latest(m), d->node_id, ans, DEMO_SLICE_MS);
    } while ((rc == MUSTER_ETIMEDOUT || rc == MUSTER_ENOTFOUND) && demo_now_ms() < end);
    return rc;
}

/* Build g's communicator for the generation described by ans (NULL: a first generation).  g->comm is
 * the old world's communicator (NULL for a process new to the world) and is released either way. */
static int demo_gpu_build(struct demo *d, muster_t *m, struct demo_gpu *g, const muster_assignment *ans,
                          muster_nccl_recovery *info)
{
    ncclComm_t comm = NULL;
    int rc;
    memset(info, 0, sizeof *info);
    if (ans && ans->old_node_rank == UINT32_MAX && g->comm) {
        ncclCommAbort(g->comm);   /* this node re-joined as a newcomer: its communicator is not a parent */
        g->comm = NULL;
    }
    if (ans && !d->recover_init) {
        rc = muster_nccl_comm_recover(m, g->comm, NULL, ans, (int)d->local_rank, NULL, &comm, info, d->timeout_ms);
    } else {
        if (g->comm)
            ncclCommAbort(g->comm);
        rc = muster_nccl_comm_init(m, d->generation, (int)d->rank, (int)d->world, (int)d->local_rank, NULL, &comm,
                                   d->timeout_ms);
        info->path = MUSTER_NCCL_PATH_INIT;
    }
    demo_gpu_close(g);
    g->comm = comm;
    if (rc == MUSTER_OK)
        rc = demo_gpu_open(g);
    return rc;
}

/* The name of a recovery path, for the lines. */
static const char *demo_path_name(muster_nccl_path p)
{
    return p == MUSTER_NCCL_PATH_SHRINK ? "shrink" : p == MUSTER_NCCL_PATH_GROW ? "grow" : "init";
}

/* A new generation formed: read this node's place in it and rebuild the communicator in this process. */
static int demo_gpu_follow(struct demo *d, muster_t *m, struct demo_gpu *g)
{
    long long seen = demo_wall_ns(), built;
    unsigned long long old = d->generation;
    long old_rank = d->rank;
    muster_assignment *ans = NULL;
    muster_nccl_recovery info;
    int rc = demo_gpu_answer(d, m, &ans);
    if (rc == MUSTER_OK && ans->previous_generation != old)
        rc = MUSTER_ECONFLICT;   /* more than one generation formed meanwhile: the communicator is too old */
    if (rc != MUSTER_OK) {
        if (g->comm)
            ncclCommAbort(g->comm);   /* left out, or lost: never finalize a communicator of a broken world */
        g->comm = NULL;
        muster_assignment_free(ans);
        return rc;
    }
    d->generation = ans->generation;
    d->rank = (long)ans->rank_start + d->local_rank;
    d->world = (long)ans->world_size;
    /* Nodes only lost: a fresh init then means an old communicator could not be shrunk. */
    int only_lost = ans->n_excluded > 0 && !d->recover_init;
    for (size_t i = 0; i < ans->n_members; i++)
        only_lost &= ans->members[i].old_node_rank != UINT32_MAX;
    long long answered = demo_wall_ns();
    rc = demo_gpu_build(d, m, g, ans, &info);
    built = demo_wall_ns();
    if (rc == MUSTER_OK)
        printf("[Rank %ld] pid %ld stays in place: generation %llu -> %llu, rank %ld -> %ld of %ld; communicator "
               "rebuilt by %s%s (%d ranks excluded, %s) in %.1f ms, %.1f ms after the new generation was seen\n",
               d->rank, (long)getpid(), old, d->generation, old_rank, d->rank, d->world,
               demo_path_name(info.path),
               only_lost && info.path == MUSTER_NCCL_PATH_INIT ? " in place of a shrink" : "", info.n_excluded,
               info.revoked ? "revoked" : "aborted", (double)(built - answered) / 1e6, (double)(built - seen) / 1e6);
    muster_assignment_free(ans);
    return rc;
}

/* In place on a GPU: iterate through an NCCL communicator and rebuild it in each new generation. */
static int demo_run_nccl_in_place(struct demo *d)
{
    struct demo_gpu g = {0};
    muster_assignment *ans = NULL;
    muster_nccl_recovery info;
    long it = 0;
    int rc = MUSTER_OK;
    muster_t *m = muster_connect(NULL, &rc);
    if (!m)
        return demo_fail(d, "cannot reach the store", rc, NULL);
    int version = 0;
    ncclGetVersion(&version);
    printf("[Rank %ld] pid %ld starts in place on a GPU: generation %llu, rank %ld of %ld (NCCL %d)\n", d->rank,
           (long)getpid(), d->generation, d->rank, d->world, version);
    /* Started into a generation a recovery formed (a replaced rank, an admitted standby): join its
     * communicator as a newcomer.  The launcher publishes the answer before it starts workers. */
    rc = muster_run_answer(m, d->generation, d->node_id, &ans, 0);
    if (rc == MUSTER_OK || rc == MUSTER_ENOTFOUND) {
        rc = demo_gpu_build(d, m, &g, rc == MUSTER_OK ? ans : NULL, &info);
        if (rc == MUSTER_OK && ans)
            printf("[Rank %ld] pid %ld joined generation %llu as rank %ld of %ld (%s)\n", d->rank, (long)getpid(),
                   d->generation, d->rank, d->world, demo_path_name(info.path));
    }
    muster_assignment_free(ans);
    while (rc == MUSTER_OK && (rc = demo_gpu_generation(d, m, &g, &it)) == DEMO_MOVED)
        rc = demo_gpu_follow(d, m, &g);
    if (rc != MUSTER_OK) {
        int status = rc == MUSTER_ENCCL ? demo_fail_nccl(d, "all_reduce in place", rc)
                                        : demo_fail(d, "all_reduce in place", rc, m);
        if (g.comm)
            ncclCommAbort(g.comm);
        demo_gpu_close(&g);
        muster_close(m);
        return status;
    }
    rc = muster_nccl_comm_destroy(g.comm, d->timeout_ms);
    g.comm = NULL;
    demo_gpu_close(&g);
    muster_close(m);
    return rc == MUSTER_OK ? 0 : demo_fail_nccl(d, "communicator teardown", rc);
}
#endif

int main(void)
{
    struct demo d;
    /* One line at a time, so the lines of several ranks sharing a terminal
     * or a pipe do not interleave mid-line. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (demo_read_env(&d) != 0)
        return 2;
#ifdef MUSTER_HAVE_NCCL
    if (demo_have_gpu())
        return d.in_place ? demo_run_nccl_in_place(&d) : demo_run_nccl(&d);
#endif
    if (d.in_place)
        return demo_run_in_place(&d);
    return demo_run_store(&d);
}
