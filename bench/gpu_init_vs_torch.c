/*
 * gpu_init_vs_torch (muster side): how long a worker started by `muster
 * run` takes to hold a ready NCCL communicator and finish its first
 * all-reduce, phase by phase, in the same shape as gpu_init_vs_torch.py
 * measures torch's init_process_group('nccl').  Optionally also the
 * all-reduce bus bandwidth at one message size (nccl-tests' convention:
 * busbw = algbw * 2(n-1)/n).
 *
 * Usage (as a worker): gpu_init_vs_torch [--bytes N] [--iters K]
 * Prints one JSON line per rank on stdout; times are CLOCK_REALTIME
 * nanoseconds so a script can compare them with the launcher's start time
 * (BENCH_T0_NS, copied into the line when set).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <muster/nccl.h>

#define BENCH_TIMEOUT_MS 120000
#define BENCH_WARMUP 5

/* Phase timestamps of one worker, wall clock. */
struct bench_times {
    long long start;   /* main() entered */
    long long ctx;     /* CUDA context ready on the device */
    long long ready;   /* communicator ready */
    long long first;   /* first all-reduce complete on the device */
};

/* Wall-clock nanoseconds. */
static long long bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Issue one all-reduce of count floats and wait until it is complete. */
static int bench_allreduce(ncclComm_t comm, float *buf, size_t count, cudaStream_t stream)
{
    ncclResult_t res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream);
    if (res != ncclSuccess && res != ncclInProgress)
        return MUSTER_ENCCL;
    if (muster_nccl_comm_wait(comm, BENCH_TIMEOUT_MS) != MUSTER_OK)
        return MUSTER_ENCCL;
    return cudaStreamSynchronize(stream) == cudaSuccess ? MUSTER_OK : MUSTER_ENCCL;
}

/* Bus bandwidth in GB/s of an all-reduce of bytes over world ranks, or -1. */
static double bench_busbw(ncclComm_t comm, size_t bytes, int iters, int world, cudaStream_t stream)
{
    float *buf = NULL;
    size_t count = bytes / sizeof(float);
    double secs, algbw;
    long long t0;
    int rc = MUSTER_OK;
    if (cudaMalloc((void **)&buf, count * sizeof(float)) != cudaSuccess)
        return -1.0;
    cudaMemset(buf, 0, count * sizeof(float));
    for (int i = 0; rc == MUSTER_OK && i < BENCH_WARMUP; i++)
        rc = bench_allreduce(comm, buf, count, stream);
    t0 = bench_now_ns();
    for (int i = 0; rc == MUSTER_OK && i < iters; i++)
        rc = bench_allreduce(comm, buf, count, stream);
    secs = (double)(bench_now_ns() - t0) / 1e9 / iters;
    cudaFree(buf);
    if (rc != MUSTER_OK)
        return -1.0;
    algbw = (double)(count * sizeof(float)) / secs / 1e9;
    return algbw * 2.0 * (world - 1) / world;
}

/* Parse --bytes and --iters; returns 0, or -1 on a bad argument. */
static int bench_args(int argc, char **argv, size_t *bytes, int *iters)
{
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--bytes") == 0)
            *bytes = strtoull(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--iters") == 0)
            *iters = atoi(argv[++i]);
        else
            return -1;
    }
    return *iters > 0 ? 0 : -1;
}

/* Print this worker's JSON line. */
static void bench_report(const struct bench_times *t, int rank, int world, double busbw, size_t bytes)
{
    const char *t0 = getenv("BENCH_T0_NS");
    int v = 0;
    ncclGetVersion(&v);
    printf("{\"impl\": \"muster\", \"rank\": %d, \"world\": %d, \"nccl\": \"%d.%d.%d\", \"t0_ns\": %s, "
           "\"start_ns\": %lld, \"ctx_ns\": %lld, \"ready_ns\": %lld, \"first_ns\": %lld, \"busbw_bytes\": %zu, "
           "\"busbw_gbps\": %.3f}\n",
           rank, world, v / 10000, v / 100 % 100, v % 100, t0 && *t0 ? t0 : "null", t->start, t->ctx, t->ready,
           t->first, bytes, busbw);
}

/* Make the CUDA context on LOCAL_RANK's device; 0, or -1 without a device. */
static int bench_device(void)
{
    const char *lr = getenv("LOCAL_RANK");
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1)
        return -1;
    if (cudaSetDevice((lr ? atoi(lr) : 0) % devices) != cudaSuccess || cudaFree(NULL) != cudaSuccess)
        return -1;
    return 0;
}

/* All-reduce rank + 1 once; returns whether the sum came out right. */
static int bench_first(ncclComm_t comm, int rank, int world, cudaStream_t stream)
{
    float *one = NULL, value = (float)(rank + 1);
    int ok = cudaMalloc((void **)&one, sizeof *one) == cudaSuccess &&
             cudaMemcpy(one, &value, sizeof value, cudaMemcpyHostToDevice) == cudaSuccess &&
             bench_allreduce(comm, one, 1, stream) == MUSTER_OK &&
             cudaMemcpy(&value, one, sizeof value, cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(one);
    if (ok && value != (float)world * (world + 1) / 2) {
        fprintf(stderr, "gpu_init_vs_torch: rank %d: wrong sum %.1f\n", rank, value);
        ok = 0;
    }
    return ok;
}

int main(int argc, char **argv)
{
    struct bench_times t = {bench_now_ns(), 0, 0, 0};
    size_t bytes = 0;
    int iters = 20, rank = 0, world = 0, rc, ok;
    muster_t *m = NULL;
    ncclComm_t comm = NULL;
    cudaStream_t stream = NULL;
    double busbw = -1.0;

    if (bench_args(argc, argv, &bytes, &iters) != 0) {
        fprintf(stderr, "usage: gpu_init_vs_torch [--bytes N] [--iters K]\n");
        return 2;
    }
    /* The CUDA context is made first and timed apart, as the torch side
     * does, so the communicator's own cost stands alone. */
    if (bench_device() != 0 || cudaStreamCreate(&stream) != cudaSuccess) {
        fprintf(stderr, "gpu_init_vs_torch: no usable CUDA device\n");
        return 1;
    }
    t.ctx = bench_now_ns();
    rc = muster_nccl_init_from_env(&m, &comm, &rank, &world, BENCH_TIMEOUT_MS);
    if (rc != MUSTER_OK) {
        fprintf(stderr, "gpu_init_vs_torch: communicator: %s: %s\n", muster_strerror(rc), ncclGetLastError(NULL));
        return 1;
    }
    t.ready = bench_now_ns();
    ok = bench_first(comm, rank, world, stream);
    t.first = bench_now_ns();
    if (ok && bytes)
        busbw = bench_busbw(comm, bytes, iters, world, stream);
    if (ok)
        bench_report(&t, rank, world, busbw, bytes);
    cudaStreamDestroy(stream);
    rc = ok ? muster_nccl_comm_destroy(comm, BENCH_TIMEOUT_MS) : (ncclCommAbort(comm), MUSTER_ENCCL);
    muster_close(m);
    return rc == MUSTER_OK ? 0 : 1;
}
