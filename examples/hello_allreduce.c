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
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <muster/muster.h>

#ifdef MUSTER_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <muster/nccl.h>
#endif

#define DEMO_DEFAULT_TIMEOUT_MS 60000

/* The job as the launcher described it. */
struct demo {
    long rank;
    long world;
    unsigned long long generation;
    unsigned timeout_ms;
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
    return 0;
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
        return demo_run_nccl(&d);
#endif
    return demo_run_store(&d);
}
