/* Latency histogram for the load generator: log-linear buckets, about 1.5% resolution. */
#include "hist.h"

#include <string.h>

/* Bucket index of a value: values below 2^HIST_SUB are exact, above that the
 * top HIST_SUB+1 bits select the bucket. */
static unsigned hist_index(uint64_t v)
{
    if (v < (1u << HIST_SUB))
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - HIST_SUB;
    unsigned idx = ((shift + 1) << HIST_SUB) + (unsigned)((v >> shift) & ((1u << HIST_SUB) - 1));
    return idx < HIST_BUCKETS ? idx : HIST_BUCKETS - 1;
}

/* Smallest value that maps to bucket idx, plus half the bucket width (its midpoint). */
static uint64_t hist_value(unsigned idx)
{
    if (idx < (1u << HIST_SUB))
        return idx;
    unsigned shift = (idx >> HIST_SUB) - 1;
    uint64_t low = ((uint64_t)(1u << HIST_SUB) + (idx & ((1u << HIST_SUB) - 1))) << shift;
    return low + ((1ull << shift) >> 1);
}

/* Empty a histogram. */
void hist_reset(struct hist *h)
{
    memset(h, 0, sizeof *h);
    h->min_ns = UINT64_MAX;
}

/* Record one sample in nanoseconds. */
void hist_add(struct hist *h, uint64_t ns)
{
    h->bucket[hist_index(ns)]++;
    h->count++;
    h->sum_ns += ns;
    if (ns < h->min_ns)
        h->min_ns = ns;
    if (ns > h->max_ns)
        h->max_ns = ns;
}

/* Add every sample of src to dst. */
void hist_merge(struct hist *dst, const struct hist *src)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        dst->bucket[i] += src->bucket[i];
    dst->count += src->count;
    dst->sum_ns += src->sum_ns;
    if (src->min_ns < dst->min_ns)
        dst->min_ns = src->min_ns;
    if (src->max_ns > dst->max_ns)
        dst->max_ns = src->max_ns;
}

/* The sample value at quantile q (0..1), in nanoseconds; 0 when empty. */
uint64_t hist_quantile(const struct hist *h, double q)
{
    if (h->count == 0)
        return 0;
    uint64_t rank = (uint64_t)(q * (double)h->count);
    if (rank >= h->count)
        rank = h->count - 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->bucket[i];
        if (seen > rank) {
            uint64_t v = hist_value(i);
            /* Clamp the bucket midpoint into the observed range. */
            return v < h->min_ns ? h->min_ns : v > h->max_ns ? h->max_ns : v;
        }
    }
    return h->max_ns;
}

/* Mean sample value in nanoseconds; 0 when empty. */
double hist_mean(const struct hist *h)
{
    return h->count ? (double)h->sum_ns / (double)h->count : 0.0;
}
