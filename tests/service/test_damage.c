/*
 * A damaged or incomplete data directory, as an operator meets it: a byte
 * flipped in the middle of the newest log segment, a record length damaged
 * to point past the end, a torn last record; the deliberate way past damage
 * (--repair-log); and (MANIFEST) a deleted snapshot or segment.  Whatever
 * the daemon cannot recover faithfully stops it with exit status 65 and a
 * message naming the file, never a start with part of the state.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hclient.h"
#include "hdata.h"

#define NKEYS 1000

static char datadir[4200];

/* Point datadir at a fresh directory called name. */
static void fresh(const char *name)
{
    snprintf(datadir, sizeof datadir, "%s/%s", h_tmpdir(), name);
}

/* Start on datadir (extra flags), set keys k<from>..k<to-1> = v<i> in namespace dj, stop; 0 on success. */
static int fill(int from, int to, const char *const *extra)
{
    struct h_daemon d;
    if (hd_spawn(&d, datadir, extra) != 0) {
        CHECK(!"daemon started");
        return -1;
    }
    muster_t *m = hc_connect(&d, "dj", NULL);
    char key[32], val[32];
    for (int i = from; m && i < to; i++) {
        snprintf(key, sizeof key, "k%d", i);
        snprintf(val, sizeof val, "v%d", i);
        CHECK_EQ(hc_set_str(m, key, val), MUSTER_OK);
    }
    muster_close(m);
    hd_stop(&d);
    return m ? 0 : -1;
}

/* How many of k<from>..k<to-1> d holds with their values; the first missing one in *gap (-1: none). */
static int count_keys(struct h_daemon *d, int from, int to, int *gap)
{
    muster_t *m = hc_connect(d, "dj", NULL);
    int n = 0;
    *gap = -1;
    for (int i = from; m && i < to; i++) {
        char key[32], val[32];
        void *v = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "k%d", i);
        snprintf(val, sizeof val, "v%d", i);
        if (muster_get(m, key, 0, 0, &v, &len) == MUSTER_OK && len == strlen(val) && memcmp(v, val, len) == 0)
            n++;
        else if (*gap < 0)
            *gap = i;
        muster_free(v);
    }
    muster_close(m);
    return n;
}

/* Start on datadir and expect a refusal: exit 65 and a log naming what. */
static void expect_refusal(const char *what)
{
    struct h_daemon d;
    CHECK(hd_spawn(&d, datadir, NULL) != 0);
    CHECK_EQ(hd_reap(&d, 10000), 65); /* EX_DATAERR */
    CHECK(hd_log_has(&d, "refusing to start"));
    if (!hd_log_has(&d, what)) {
        CHECK(!"the refusal names the file");
        h_dump_log(&d);
    }
}

/* Whether datadir holds a file whose name contains part. */
static int dir_has(const char *part)
{
    DIR *dp = opendir(datadir);
    int found = 0;
    for (struct dirent *e; dp && !found && (e = readdir(dp));)
        found = strstr(e->d_name, part) != NULL;
    if (dp)
        closedir(dp);
    return found;
}

/* One flipped byte at 30% of the newest segment: refused with the file and offset named, the file left
 * as it was; --repair-log then starts with the keys before the damage, and later starts need no flag. */
static void t_mid_segment_damage(void *arg)
{
    (void)arg;
    fresh("mid");
    if (fill(0, NKEYS, NULL) != 0)
        return;
    char seg[4400];
    CHECK_EQ(hd_segment(datadir, 1, seg, sizeof seg), 0);
    long long size = hd_size(seg);
    CHECK(size > 10000);
    CHECK_EQ(hd_flip(seg, size * 3 / 10, 0x40), 0);
    expect_refusal(seg);
    CHECK_EQ(hd_size(seg), size); /* nothing was cut */
    struct h_daemon d;
    const char *repair[] = {"--repair-log", NULL};
    if (hd_spawn(&d, datadir, repair) != 0) {
        CHECK(!"daemon started with --repair-log");
        return;
    }
    CHECK(hd_log_has(&d, "repair: log"));
    int gap, n = count_keys(&d, 0, NKEYS, &gap);
    /* A consistent prefix: every key before the damaged record, none after it. */
    CHECK(n > NKEYS / 5 && n < NKEYS * 2 / 5);
    CHECK_EQ(gap, n);
    hd_stop(&d);
    CHECK(dir_has(".dropped."));
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon restarted after the repair without the flag");
        return;
    }
    CHECK_EQ(count_keys(&d, 0, NKEYS, &gap), n);
    hd_stop(&d);
}

/* The first record's length damaged to point past the end of the file: the intact records behind it
 * show it is damage, not a torn write. */
static void t_length_past_end(void *arg)
{
    (void)arg;
    fresh("len");
    if (fill(0, 100, NULL) != 0)
        return;
    char seg[4400];
    CHECK_EQ(hd_segment(datadir, 1, seg, sizeof seg), 0);
    long long size = hd_size(seg);
    CHECK_EQ(hd_flip(seg, 1, 0x7f), 0); /* length byte 1 of the big-endian u32: now megabytes */
    expect_refusal(seg);
    CHECK_EQ(hd_size(seg), size);
}

/* The last record complete but failing its checksum, up to the end of the file: a torn write (its size
 * made durable before its data); it alone is dropped. */
static void t_torn_last_record(void *arg)
{
    (void)arg;
    fresh("tornlast");
    if (fill(0, 100, NULL) != 0)
        return;
    char seg[4400];
    CHECK_EQ(hd_segment(datadir, 1, seg, sizeof seg), 0);
    CHECK_EQ(hd_flip(seg, hd_size(seg) - 1, 0x01), 0);
    struct h_daemon d;
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon started after a torn last record");
        return;
    }
    CHECK(hd_log_has(&d, "torn record"));
    int gap;
    CHECK_EQ(count_keys(&d, 0, 100, &gap), 99);
    CHECK_EQ(gap, 99);
    hd_stop(&d);
}

/* With --compact-bytes 4K, fill 300 keys so a snapshot and later segments exist; 0 on success. */
static int fill_compacted(void)
{
    const char *small[] = {"--compact-bytes", "4K", NULL};
    if (fill(0, 300, small) != 0)
        return -1;
    char snap[4400];
    snprintf(snap, sizeof snap, "%s/snapshot", datadir);
    CHECK(access(snap, F_OK) == 0);
    return access(snap, F_OK);
}

/* A deleted snapshot: refused, naming it; --repair-log accepts the loss and starts with what the
 * segments hold. */
static void t_missing_snapshot(void *arg)
{
    (void)arg;
    fresh("nosnap");
    if (fill_compacted() != 0)
        return;
    char snap[4400];
    snprintf(snap, sizeof snap, "%s/snapshot", datadir);
    CHECK_EQ(unlink(snap), 0);
    expect_refusal("snapshot");
    struct h_daemon d;
    const char *repair[] = {"--repair-log", NULL};
    if (hd_spawn(&d, datadir, repair) != 0) {
        CHECK(!"daemon started with --repair-log");
        return;
    }
    CHECK(hd_log_has(&d, "repair: accepting the loss: snapshot"));
    int gap;
    CHECK(count_keys(&d, 0, 300, &gap) < 300);
    hd_stop(&d);
}

/* A deleted oldest segment (after the snapshot): refused, naming it. */
static void t_missing_segment(void *arg)
{
    (void)arg;
    fresh("noseg");
    if (fill_compacted() != 0)
        return;
    char seg[4400];
    CHECK_EQ(hd_segment(datadir, 0, seg, sizeof seg), 0);
    CHECK_EQ(unlink(seg), 0);
    expect_refusal(seg);
    const char *repair[] = {"--repair-log", NULL};
    struct h_daemon d;
    if (hd_spawn(&d, datadir, repair) != 0) {
        CHECK(!"daemon started with --repair-log");
        return;
    }
    CHECK(hd_log_has(&d, "repair: accepting the loss: log segment"));
    hd_stop(&d);
}

/* Run every case; the exit status says whether all checks passed. */
int main(void)
{
    h_init("damage", 170);
    H_RUN(t_mid_segment_damage, NULL);
    H_RUN(t_length_past_end, NULL);
    H_RUN(t_torn_last_record, NULL);
    H_RUN(t_missing_snapshot, NULL);
    H_RUN(t_missing_segment, NULL);
    return h_finish();
}
