/*
 * Durability of a real musterd with --data-dir: state and generation
 * numbers survive a restart, a torn log tail is dropped, a corrupt snapshot
 * stops the daemon from starting, compaction keeps the state, and the
 * crash test: writers run under --fsync always while the daemon is killed
 * with SIGKILL at a random moment, trial after trial on the same directory;
 * after every restart each acknowledged write is there with its value, and
 * no key that was never sent appears; and --fsync everysec keeps its bound.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <muster/rdzv.h>

#include "hclient.h"
#include "hdata.h"
#include "hhttp.h"

/* Crash trials run by default; MUSTER_CRASH_TRIALS overrides (scripts/crash-test.sh runs 100). */
#define CRASH_TRIALS 100
#define CRASH_WRITERS 4

static char datadir[4200];

/* Join a one-node round in ns; the generation, or 0. */
static uint64_t one_node_generation(muster_t *m)
{
    muster_rdzv_opts o = {.node_id = "solo", .local_world_size = 1, .min_nodes = 1, .max_nodes = 1};
    muster_assignment *a = NULL;
    uint64_t g = muster_rdzv_join(m, &o, &a, 5000) == MUSTER_OK ? a->generation : 0;
    muster_assignment_free(a);
    return g;
}

/* Wait up to 5 s for a MEMBER_LOST event of generation gen on m; 1 when it came. */
static int await_member_lost(muster_t *m, uint64_t gen)
{
    for (int64_t end = h_now_ms() + 5000; h_now_ms() < end;) {
        muster_event *ev = NULL;
        if (muster_next_event(m, &ev, 100) != MUSTER_OK)
            continue;
        int hit = ev->kind == MUSTER_EVENT_MEMBER_LOST && ev->generation == gen;
        muster_event_free(ev);
        if (hit)
            return 1;
    }
    return 0;
}

/* A generation formed by a recovery round is logged like any other: after a restart the next one is
 * newer, never the recovered number again. */
static void t_recovery_restart(void *arg)
{
    (void)arg;
    struct h_daemon d;
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon started");
        return;
    }
    muster_t *a = hc_connect(&d, "jr", NULL), *b = hc_connect(&d, "jr", NULL);
    muster_rdzv_opts o = {.node_id = "a", .local_world_size = 1, .min_nodes = 1, .max_nodes = 2, .last_call_ms = 5000};
    muster_rdzv_opts ob = o;
    ob.node_id = "b";
    muster_assignment *ga = NULL, *gb = NULL, *next = NULL;
    if (!a || !b)
        goto out;
    /* b joins first and waits; a's join closes the round at max_nodes. */
    pid_t child = fork();
    if (child == 0) {
        alarm(0);
        _exit(muster_rdzv_join(b, &ob, &gb, 10000) == MUSTER_OK ? 0 : 1);
    }
    CHECK_EQ(muster_rdzv_join(a, &o, &ga, 10000), MUSTER_OK);
    int st = -1;
    waitpid(child, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    muster_close(b); /* the child's copy is gone with it: b's connection closes now */
    b = NULL;
    CHECK(ga && await_member_lost(a, ga->generation));
    CHECK_EQ(muster_rdzv_recover(a, &o, &next, 10000), MUSTER_OK);
    uint64_t recovered = next ? next->generation : 0;
    CHECK(ga && recovered == ga->generation + 1);
    CHECK(next && next->previous_generation == ga->generation && next->n_excluded == 1);
    muster_close(a);
    a = NULL;
    hd_stop(&d);
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon restarted");
        goto out;
    }
    a = hc_connect(&d, "jr", NULL);
    muster_assignment *after = NULL;
    o.max_nodes = 1;
    CHECK(a && muster_rdzv_join(a, &o, &after, 5000) == MUSTER_OK);
    CHECK(after && after->generation == recovered + 1);
    muster_assignment_free(after);
    hd_stop(&d);
out:
    muster_assignment_free(ga);
    muster_assignment_free(next);
    muster_close(a);
    muster_close(b);
}

/* Keys, deletes, appends, counters and generation numbers survive a clean restart. */
static void t_restart(void *arg)
{
    (void)arg;
    struct h_daemon d;
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon started");
        return;
    }
    muster_t *a = hc_connect(&d, "ja", NULL), *b = hc_connect(&d, "jb", NULL);
    CHECK_EQ(hc_set_str(a, "x", "1"), MUSTER_OK);
    CHECK_EQ(hc_set_str(a, "gone", "1"), MUSTER_OK);
    CHECK_EQ(muster_delete(a, "gone", NULL, 0), MUSTER_OK);
    CHECK_EQ(muster_add(a, "n", 41, NULL, 0), MUSTER_OK);
    CHECK_EQ(muster_append(a, "log", "ab", 2, NULL, 0), MUSTER_OK);
    CHECK_EQ(muster_append(a, "log", "cd", 2, NULL, 0), MUSTER_OK);
    CHECK_EQ(hc_set_str(b, "x", "2"), MUSTER_OK);
    CHECK_EQ(one_node_generation(b), 1);
    muster_close(a);
    muster_close(b);
    hd_stop(&d);
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon restarted");
        return;
    }
    CHECK(hd_log_has(&d, "recovered"));
    a = hc_connect(&d, "ja", NULL);
    b = hc_connect(&d, "jb", NULL);
    HC_EXPECT(a, "x", "1");
    HC_EXPECT(a, "gone", NULL);
    HC_EXPECT(a, "n", "41");
    HC_EXPECT(a, "log", "abcd");
    HC_EXPECT(b, "x", "2");
    HC_EXPECT(b, "muster/rdzv/generation", "1");
    /* So did the answer musterd wrote with it (a first generation: no recovery). */
    HC_EXPECT(b, "muster/rdzv/1/answer",
              "muster-answer 2\ngeneration 1 previous 0 nodes 1 world 1 members 0 excluded 0\n");
    /* The counter survived: generation 1 is never handed out again. */
    CHECK_EQ(one_node_generation(b), 2);
    muster_close(a);
    muster_close(b);
    hd_stop(&d);
}

/* A second musterd on a data directory in use is refused (75, EX_TEMPFAIL) and says why, touching nothing:
 * two writers of one log would lose data.  The first keeps serving, and what it stored survives it. */
static void t_in_use(void *arg)
{
    (void)arg;
    struct h_daemon d, other;
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon started");
        return;
    }
    muster_t *m = hc_connect(&d, "lock", NULL);
    CHECK_EQ(hc_set_str(m, "first", "1"), MUSTER_OK);
    CHECK(hd_spawn(&other, datadir, NULL) != 0);
    CHECK_EQ(hd_reap(&other, 10000), 75);
    CHECK(hd_log_has(&other, "is in use by another musterd"));
    CHECK_EQ(hc_set_str(m, "second", "2"), MUSTER_OK);
    muster_close(m);
    hd_stop(&d);
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon restarted");
        return;
    }
    m = hc_connect(&d, "lock", NULL);
    HC_EXPECT(m, "first", "1");
    HC_EXPECT(m, "second", "2");
    muster_close(m);
    hd_stop(&d);
}

/* A half-written record at the end of the log is dropped with a log line; the rest is kept. */
static void t_torn_tail(void *arg)
{
    (void)arg;
    struct h_daemon d;
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon started");
        return;
    }
    muster_t *m = hc_connect(&d, "torn", NULL);
    CHECK_EQ(hc_set_str(m, "kept", "yes"), MUSTER_OK);
    muster_close(m);
    hd_stop(&d);
    char seg[4400];
    CHECK_EQ(hd_segment(datadir, 1, seg, sizeof seg), 0);
    FILE *fp = fopen(seg, "ab");
    /* A header promising 100 bytes, then 3 of them: what a crash mid-write leaves. */
    static const unsigned char torn[] = {0, 0, 0, 100, 1, 2, 3, 4, 9, 9, 9};
    CHECK(fp && fwrite(torn, 1, sizeof torn, fp) == sizeof torn);
    if (fp)
        fclose(fp);
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon restarted after a torn tail");
        return;
    }
    CHECK(hd_log_has(&d, "torn record"));
    m = hc_connect(&d, "torn", NULL);
    HC_EXPECT(m, "kept", "yes");
    muster_close(m);
    hd_stop(&d);
}

/* Many overwrites past --compact-bytes produce snapshots; the state is the same after a restart. */
static void t_compaction(void *arg)
{
    (void)arg;
    struct h_daemon d;
    const char *small[] = {"--compact-bytes", "4K", NULL};
    if (hd_spawn(&d, datadir, small) != 0) {
        CHECK(!"daemon started");
        return;
    }
    muster_t *m = hc_connect(&d, "cj", NULL);
    char key[32], val[64];
    for (int i = 0; i < 400; i++) {
        snprintf(key, sizeof key, "k%d", i % 20);
        snprintf(val, sizeof val, "value-%d", i);
        CHECK_EQ(hc_set_str(m, key, val), MUSTER_OK);
    }
    muster_close(m);
    hd_stop(&d);
    char snap[4400];
    snprintf(snap, sizeof snap, "%s/snapshot", datadir);
    CHECK(access(snap, F_OK) == 0);
    CHECK(hd_log_has(&d, "snapshot written"));
    CHECK(h_stat_logged(&d, "persist_snapshots") >= 1); /* --compact-bytes' counter, in the exit dump */
    if (hd_spawn(&d, datadir, NULL) != 0) {
        CHECK(!"daemon restarted");
        return;
    }
    m = hc_connect(&d, "cj", NULL);
    for (int i = 380; i < 400; i++) {
        snprintf(key, sizeof key, "k%d", i % 20);
        snprintf(val, sizeof val, "value-%d", i);
        HC_EXPECT(m, key, val);
    }
    muster_close(m);
    hd_stop(&d);
}

/* A snapshot with a flipped byte: the daemon refuses to start and says why. */
static void t_corrupt_snapshot(void *arg)
{
    (void)arg;
    char snap[4400];
    snprintf(snap, sizeof snap, "%s/snapshot", datadir);
    int fd = open(snap, O_RDWR);
    CHECK(fd >= 0);
    off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
    unsigned char c = 0;
    CHECK(size > 40 && pread(fd, &c, 1, size / 2) == 1);
    c ^= 0x5a;
    CHECK(pwrite(fd, &c, 1, size / 2) == 1);
    close(fd);
    struct h_daemon d;
    CHECK(hd_spawn(&d, datadir, NULL) != 0);
    CHECK_EQ(hd_reap(&d, 10000), 65); /* EX_DATAERR */
    CHECK(hd_log_has(&d, "is corrupt"));
    CHECK(hd_log_has(&d, "refusing to start"));
    /* Moving it away (then starting once with --repair-log) is the documented way out; what it held is gone. */
    char aside[4500];
    snprintf(aside, sizeof aside, "%s.bad", snap);
    CHECK(rename(snap, aside) == 0);
}

/* muster_persist_fsyncs_total from the metrics listener on mport, or -1. */
static double fsyncs(uint16_t mport)
{
    char *body = NULL;
    double v = hh_get(mport, "/metrics", &body, 2000) == 200 ? hh_sample(body, "muster_persist_fsyncs_total") : -1;
    free(body);
    return v;
}

/* Poll until the fsync counter passes from; when it did (h_now_ms), or -1 after limit_ms. */
static int64_t await_fsync(uint16_t mport, double from, int64_t limit_ms)
{
    int64_t end = h_now_ms() + limit_ms;
    while (h_now_ms() < end) {
        if (fsyncs(mport) > from)
            return h_now_ms();
        usleep(5000); /* the counter is what a user can watch */
    }
    return -1;
}

/* --fsync everysec: an acknowledged write is fsynced within a second (plus the fsync itself), also when
 * another write arrives just before that second is up. */
static void t_everysec(void *arg)
{
    (void)arg;
    struct h_daemon d;
    char mpf[4400];
    snprintf(mpf, sizeof mpf, "%s/everysec.mport", h_tmpdir());
    const char *flags[] = {"--fsync", "everysec", "--metrics-listen", "127.0.0.1:0", "--metrics-port-file", mpf,
                           NULL};
    if (hd_spawn(&d, datadir, flags) != 0) {
        CHECK(!"daemon started");
        return;
    }
    uint16_t mport = hh_port_file(mpf, 5000);
    muster_t *m = hc_connect(&d, "es", NULL);
    int64_t worst = 0;
    for (int round = 0; round < 3 && m && mport; round++) {
        /* After a quiet second the next write is synced at once: that fsync starts the clock. */
        usleep(1100000);
        double c0 = fsyncs(mport);
        CHECK_EQ(hc_set_str(m, "a", "1"), MUSTER_OK);
        CHECK(await_fsync(mport, c0, 3000) >= 0);
        double c1 = fsyncs(mport);
        usleep(50000);
        CHECK_EQ(hc_set_str(m, "b", "1"), MUSTER_OK);
        int64_t acked = h_now_ms();
        usleep(900000); /* the next write lands just before b's second is up */
        CHECK_EQ(hc_set_str(m, "c", "1"), MUSTER_OK);
        int64_t synced = await_fsync(mport, c1, 4000);
        int64_t lag = synced < 0 ? 4000 : synced - acked;
        worst = lag > worst ? lag : worst;
    }
    printf("  everysec: longest wait from acknowledgement to fsync %lld ms\n", (long long)worst);
    /* A second, plus room for the fsync and polling on a loaded machine. */
    CHECK(worst <= 1300);
    muster_close(m);
    hd_stop(&d);
}

/* One writer of the crash test: sets its keys in order, recording what was acknowledged. */
struct writer {
    struct h_daemon *d;
    int trial, id;
    long sent, acked; /* highest sequence sent / acknowledged; -1 none */
    pthread_t th;
};

/* Writer thread body: set t<trial>/w<id>/<seq> = v<seq> until the connection fails. */
static void *writer_main(void *arg)
{
    struct writer *w = arg;
    char url[128];
    snprintf(url, sizeof url, "%s/crash", w->d->url);
    muster_opts o = {0};
    o.connect_timeout_ms = 2000;
    o.default_timeout_ms = 5000;
    int err = 0;
    muster_t *m = muster_connect_opts(url, &o, &err);
    /* Bounded: the daemon is killed within a second; 200000 writes would take far longer. */
    for (long seq = 0; m && seq < 200000; seq++) {
        char key[64], val[32];
        snprintf(key, sizeof key, "t%d/w%d/%ld", w->trial, w->id, seq);
        snprintf(val, sizeof val, "v%ld", seq);
        __atomic_store_n(&w->sent, seq, __ATOMIC_RELEASE);
        if (muster_set(m, key, val, strlen(val), 0) != MUSTER_OK)
            break;
        __atomic_store_n(&w->acked, seq, __ATOMIC_RELEASE);
    }
    muster_close(m);
    return NULL;
}

/* After a restart: every acknowledged key of w is there with its value, and nothing past the last
 * one sent.  Returns how many of w's keys exist. */
static long verify_writer(muster_t *m, const struct writer *w)
{
    char key[64], val[32];
    for (long seq = 0; seq <= w->acked; seq++) {
        snprintf(key, sizeof key, "t%d/w%d/%ld", w->trial, w->id, seq);
        snprintf(val, sizeof val, "v%ld", seq);
        HC_EXPECT(m, key, val);
    }
    /* The write in flight at the kill may or may not have landed; nothing after it may exist. */
    void *v = NULL;
    size_t n = 0;
    snprintf(key, sizeof key, "t%d/w%d/%ld", w->trial, w->id, w->acked + 1);
    int inflight = muster_get(m, key, 0, 0, &v, &n) == MUSTER_OK;
    if (inflight) {
        snprintf(val, sizeof val, "v%ld", w->acked + 1);
        CHECK_MEM(v, n, val, strlen(val));
        CHECK_EQ(w->sent, w->acked + 1);
    }
    muster_free(v);
    snprintf(key, sizeof key, "t%d/w%d/%ld", w->trial, w->id, w->acked + 2);
    HC_EXPECT(m, key, NULL);
    return w->acked + 1 + inflight;
}

/* One trial: start, write from several threads, SIGKILL at a random moment, restart, verify. */
static void crash_trial(int trial, uint64_t *expect_keys)
{
    struct h_daemon d;
    const char *always[] = {"--fsync", "always", NULL};
    if (hd_spawn(&d, datadir, always) != 0) {
        CHECK(!"daemon started");
        return;
    }
    struct writer w[CRASH_WRITERS];
    for (int i = 0; i < CRASH_WRITERS; i++) {
        w[i] = (struct writer){.d = &d, .trial = trial, .id = i, .sent = -1, .acked = -1};
        pthread_create(&w[i].th, NULL, writer_main, &w[i]);
    }
    usleep((useconds_t)(20000 + rand() % 60000)); /* the random moment of the crash */
    kill(d.pid, SIGKILL);
    CHECK_EQ(hd_reap(&d, 10000), 128 + SIGKILL);
    for (int i = 0; i < CRASH_WRITERS; i++)
        pthread_join(w[i].th, NULL);
    if (hd_spawn(&d, datadir, always) != 0) {
        CHECK(!"daemon restarted after SIGKILL");
        return;
    }
    muster_t *m = hc_connect(&d, "crash", NULL);
    for (int i = 0; m && i < CRASH_WRITERS; i++)
        *expect_keys += (uint64_t)verify_writer(m, &w[i]);
    /* Earlier trials' keys are all still there, and no others. */
    uint64_t count = 0;
    CHECK_EQ(m ? muster_num_keys(m, &count, 0) : -1, MUSTER_OK);
    CHECK_EQ(count, *expect_keys);
    muster_close(m);
    kill(d.pid, SIGKILL); /* the next trial recovers from a kill with nothing in flight, too */
    hd_reap(&d, 10000);
}

/* The crash test: trials of SIGKILL during a write load with --fsync always. */
static void t_crash(void *arg)
{
    (void)arg;
    const char *env = getenv("MUSTER_CRASH_TRIALS");
    int trials = env ? atoi(env) : CRASH_TRIALS;
    uint64_t keys = 0;
    int64_t t0 = h_now_ms();
    srand((unsigned)t0);
    int before = h_failures();
    for (int t = 0; t < trials && h_failures() == before; t++)
        crash_trial(t, &keys);
    printf("  %d crash trials, %llu acknowledged keys checked, %lld ms\n", trials, (unsigned long long)keys,
           (long long)(h_now_ms() - t0));
}

/* Run every case against its own daemon(s); the exit status says whether all checks passed. */
int main(void)
{
    h_init("persist", 170);
    snprintf(datadir, sizeof datadir, "%s/data", h_tmpdir());
    H_RUN(t_restart, NULL);
    H_RUN(t_recovery_restart, NULL);
    H_RUN(t_in_use, NULL);
    H_RUN(t_torn_tail, NULL);
    H_RUN(t_compaction, NULL);
    H_RUN(t_corrupt_snapshot, NULL);
    snprintf(datadir, sizeof datadir, "%s/everysec", h_tmpdir());
    H_RUN(t_everysec, NULL);
    snprintf(datadir, sizeof datadir, "%s/crashdata", h_tmpdir());
    H_RUN(t_crash, NULL);
    return h_finish();
}
