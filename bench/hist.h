/* Latency histogram for the load generator: log-linear buckets, about 1.5% resolution, 1 ns .. 1000 s. */
#ifndef BENCH_HIST_H
#define BENCH_HIST_H

#include <stdint.h>

/* 2^HIST_SUB sub-buckets per power of two. */
#define HIST_SUB 6
#define HIST_MAJOR 40
#define HIST_BUCKETS (HIST_MAJOR << HIST_SUB)

struct hist {
    uint64_t count;
    uint64_t sum_ns;
    uint64_t min_ns;
    uint64_t max_ns;
    uint64_t bucket[HIST_BUCKETS];
};

/* Empty a histogram. */
void hist_reset(struct hist *h);
/* Record one sample in nanoseconds. */
void hist_add(struct hist *h, uint64_t ns);
/* Add every sample of src to dst. */
void hist_merge(struct hist *dst, const struct hist *src);
/* The sample value at quantile q (0..1), in nanoseconds; 0 when empty. */
uint64_t hist_quantile(const struct hist *h, double q);
/* Mean sample value in nanoseconds; 0 when empty. */
double hist_mean(const struct hist *h);

#endif
