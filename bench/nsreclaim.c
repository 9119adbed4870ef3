/*
 * Namespace creation and reclamation, over libmuster on loopback (bench/ns_reclaim.sh runs it):
 *
 *   muster-nsreclaim create URL SECONDS PREFIX   one address creating namespaces PREFIX/i, each with one
 *                                                key, as fast as it can: accepted and refused per second
 *   muster-nsreclaim fill URL N PREFIX           create N such namespaces; the time it took
 *   muster-nsreclaim ping URL SECONDS            pings on one connection: count, p99 and max round trip
 *
 * URL is tcp://HOST:PORT (no namespace).  Each prints one JSON line per result.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "muster/muster.h"

/* Monotonic microseconds. */
static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Create namespace prefix/i on url with one key; MUSTER_OK or the error. */
static int make_one(const char *url, const char *prefix, long i)
{
    char u[512];
    int err = MUSTER_OK;
    snprintf(u, sizeof u, "%s/%s-%ld?timeout=5000", url, prefix, i);
    muster_t *m = muster_connect(u, &err);
    if (!m)
        return err ? err : MUSTER_EINTERNAL;
    err = muster_set(m, "k", "v", 1, 5000);
    muster_close(m);
    return err;
}

/* Create namespaces for seconds; one JSON line per second and a summary. */
static int run_create(const char *url, double seconds, const char *prefix)
{
    uint64_t t0 = now_us(), end = t0 + (uint64_t)(seconds * 1e6), next = t0 + 1000000;
    long i = 0, ok = 0, refused = 0, other = 0, sec_ok = 0, sec_ref = 0, first_ok = -1;
    int sec = 0;
    char why[256] = "";
    for (uint64_t t = t0; t < end; t = now_us(), i++) {
        int rc = make_one(url, prefix, i);
        if (rc == MUSTER_OK) {
            ok++, sec_ok++;
        } else if (rc == MUSTER_ELIMIT) {
            refused++, sec_ref++;
        } else {
            other++;
            snprintf(why, sizeof why, "%s", muster_strerror(rc));
        }
        if (now_us() >= next) {
            printf("{\"second\": %d, \"accepted\": %ld, \"refused\": %ld}\n", sec, sec_ok, sec_ref);
            if (first_ok < 0)
                first_ok = sec_ok;
            sec++, next += 1000000, sec_ok = sec_ref = 0;
        }
    }
    double took = (double)(now_us() - t0) / 1e6;
    printf("{\"mode\": \"create\", \"seconds\": %.2f, \"attempts\": %ld, \"accepted\": %ld, \"refused\": %ld, "
           "\"other_errors\": %ld, \"accepted_per_s\": %.1f, \"attempts_per_s\": %.1f, \"first_second\": %ld%s%s%s}\n",
           took, i, ok, refused, other, ok / took, i / took, first_ok, *why ? ", \"error\": \"" : "", why,
           *why ? "\"" : "");
    return 0;
}

/* Create n namespaces; one JSON line. */
static int run_fill(const char *url, long n, const char *prefix)
{
    uint64_t t0 = now_us();
    long ok = 0;
    for (long i = 0; i < n; i++)
        ok += make_one(url, prefix, i) == MUSTER_OK;
    double took = (double)(now_us() - t0) / 1e6;
    printf("{\"mode\": \"fill\", \"asked\": %ld, \"created\": %ld, \"seconds\": %.2f, \"per_s\": %.0f}\n", n, ok,
           took, ok / took);
    return ok == n ? 0 : 1;
}

/* Order two round trips, for qsort. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Ping for seconds on one connection (each ping timed here, 1 ms apart); one JSON line. */
static int run_ping(const char *url, double seconds)
{
    char u[512];
    int err = MUSTER_OK;
    snprintf(u, sizeof u, "%s/bench-ping?timeout=5000", url);
    muster_t *m = muster_connect(u, &err);
    if (!m) {
        fprintf(stderr, "ping: cannot connect: %s\n", muster_strerror(err));
        return 1;
    }
    size_t cap = 1 << 20, n = 0;
    uint64_t *rtt = malloc(cap * sizeof *rtt), end = now_us() + (uint64_t)(seconds * 1e6);
    while (rtt && n < cap && now_us() < end) {
        uint64_t t = now_us();
        if (muster_ping(m, NULL, 5000) != MUSTER_OK)
            break;
        rtt[n++] = now_us() - t;
        struct timespec gap = {0, 1000000};
        nanosleep(&gap, NULL);
    }
    muster_close(m);
    if (!n) {
        free(rtt);
        return 1;
    }
    qsort(rtt, n, sizeof *rtt, cmp_u64);
    printf("{\"mode\": \"ping\", \"pings\": %zu, \"p50_us\": %" PRIu64 ", \"p99_us\": %" PRIu64
           ", \"max_us\": %" PRIu64 "}\n",
           n, rtt[n / 2], rtt[n * 99 / 100], rtt[n - 1]);
    free(rtt);
    return 0;
}

/* Dispatch on the mode word. */
int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "create") == 0)
        return run_create(argv[2], atof(argv[3]), argv[4]);
    if (argc == 5 && strcmp(argv[1], "fill") == 0)
        return run_fill(argv[2], atol(argv[3]), argv[4]);
    if (argc == 4 && strcmp(argv[1], "ping") == 0)
        return run_ping(argv[2], atof(argv[3]));
    fprintf(stderr, "usage: muster-nsreclaim create URL SECONDS PREFIX | fill URL N PREFIX | ping URL SECONDS\n");
    return 2;
}
