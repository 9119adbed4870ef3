/*
 * Watches under load: a watcher that stops reading while 1 MiB values are
 * written under its prefix must not grow the daemon past its output limit.
 * Its watch is ended with a WATCH_ENDED event instead, and other clients
 * are served meanwhile.  A connection holds at most --max-watches-per-conn
 * watches.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hclient.h"

#define T_VALUE (1u << 20)
#define T_SETS 300
#define T_MAX_OUTPUT_MIB 4
#define T_WATCHES 8

/* The daemon's resident set in KiB, or -1. */
static long t_rss_kib(const struct h_daemon *d)
{
    char path[64], line[256];
    long kib = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)d->pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(fp);
    return kib;
}

/* Read events from w until its watch id ends (at most max events, 10 s); how many SETs came first, or -1. */
static int t_until_ended(muster_t *w, uint64_t id, int max)
{
    int64_t end = h_now_ms() + 10000;
    int sets = 0;
    for (int i = 0; i < max && h_now_ms() < end; i++) {
        muster_event *ev = NULL;
        if (muster_next_event(w, &ev, 2000) != MUSTER_OK)
            return -1;
        int kind = (int)ev->kind;
        int ended = kind == MUSTER_EVENT_WATCH_ENDED && ev->watch_id == id;
        if (ended)
            CHECK_STR(ev->key, "big/");
        muster_event_free(ev);
        if (ended)
            return sets;
        sets += kind == MUSTER_EVENT_SET;
    }
    return -1;
}

/* 300 sets of 1 MiB under a prefix whose watcher reads nothing: the daemon stays small, the watch ends. */
static void t_flood(const struct h_daemon *d)
{
    muster_t *w = hc_connect(d, "flood", NULL), *m = hc_connect(d, "flood", NULL);
    char *val = malloc(T_VALUE);
    uint64_t id = 0;
    int done = 0;
    if (!w || !m || !val)
        goto out;
    CHECK_EQ(muster_watch(w, "big/", &id, 0), MUSTER_OK);
    long before = t_rss_kib(d);
    int64_t t0 = h_now_ms();
    for (; done < T_SETS && h_now_ms() - t0 < 30000; done++) {
        memset(val, 'a' + done % 26, T_VALUE);
        if (muster_set(m, "big/value", val, T_VALUE, 0) != MUSTER_OK)
            break;
    }
    long after = t_rss_kib(d);
    printf("  %d sets of 1 MiB in %lld ms; musterd RSS %ld -> %ld KiB (max-output %d MiB)\n", done,
           (long long)(h_now_ms() - t0), before, after, T_MAX_OUTPUT_MIB);
    CHECK_EQ(done, T_SETS);
    /* What is held for the watcher is bounded by --max-output, not by what was written. */
    CHECK(after > 0 && after - before < 8 * 1024 * T_MAX_OUTPUT_MIB);
    /* The writer was served all along; the watcher learns which watch lost events. */
    int sets = t_until_ended(w, id, 64);
    printf("  the watcher read %d events before its watch ended\n", sets);
    CHECK(sets >= 0 && sets < T_SETS);
    CHECK_EQ(hc_set_str(m, "big/after", "small"), MUSTER_OK);
    muster_event *ev = NULL;
    CHECK_EQ(muster_next_event(w, &ev, 300), MUSTER_ETIMEDOUT);
    muster_event_free(ev);
    /* The handle itself still works, and can watch again. */
    HC_EXPECT(w, "big/after", "small");
    CHECK_EQ(muster_watch(w, "big/", &id, 0), MUSTER_OK);
out:
    free(val);
    muster_close(w);
    muster_close(m);
}

/* One connection may hold T_WATCHES watches; another connection is not affected by its count. */
static void t_watches_per_conn(const struct h_daemon *d)
{
    muster_t *a = hc_connect(d, "many", NULL), *b = hc_connect(d, "many", NULL);
    uint64_t ids[T_WATCHES], id = 0;
    if (!a || !b)
        goto out;
    for (int i = 0; i < T_WATCHES; i++)
        CHECK_EQ(muster_watch(a, "p/", &ids[i], 0), MUSTER_OK);
    CHECK_EQ(muster_watch(a, "p/", &id, 0), MUSTER_ELIMIT);
    CHECK_EQ(muster_watch(b, "p/", &id, 0), MUSTER_OK);
    CHECK_EQ(muster_unwatch(a, ids[0], 0), MUSTER_OK);
    CHECK_EQ(muster_watch(a, "p/", &id, 0), MUSTER_OK);
out:
    muster_close(a);
    muster_close(b);
}

/* Run the watch limit tests against one daemon with a 4 MiB output limit. */
int main(void)
{
    static const char *const args[] = {"--max-value", "1M", "--max-frame", "2M", "--max-output", "4M",
                                       "--max-watches-per-conn", "8", NULL};
    struct h_daemon d;
    h_init("watch_flood", 90);
    /* Under AddressSanitizer freed values would stay resident in its quarantine and read as growth. */
    char asan[512];
    const char *prev = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "%s%squarantine_size_mb=1", prev ? prev : "", prev && *prev ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
    if (h_start(&d, args) < 0)
        return h_finish();
    H_RUN(t_flood, &d);
    H_RUN(t_watches_per_conn, &d);
    CHECK(h_stat(&d, "limit_watch_output") >= 1);
    CHECK(h_stat(&d, "limit_watches_per_conn") >= 1);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
