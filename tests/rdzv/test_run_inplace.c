/*
 * `muster run --recovery in-place` end to end: real launchers (the built
 * CLI, MUSTER_TEST_CLI) against the test's own musterd, each running one
 * worker of the C demo (MUSTER_TEST_DEMO) in its in-place mode, which
 * all-reduces through the store for a number of iterations and follows the
 * world into each new generation in the same process.  Covers a node's
 * launcher SIGKILLed (the survivors' workers keep their PIDs and finish
 * with the sum of the smaller world), a worker SIGKILLed (only it is
 * replaced, the world keeps its size), a --standby launcher admitted after
 * a loss (the world back to its size), a launcher beyond --nnodes MAX
 * waiting as a standby until a loss admits it, and the flags' usage.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hclient.h"
#include "hrun.h"

/* Launchers of one case at most. */
#define T_NODES 4
/* A launcher's output is read in this much. */
#define T_OUT_MAX 65536

/* The demo binary. */
static const char *t_demo;

/* Start launcher node "n<i>" of a case (tag) in place: --nnodes nn, one demo worker, extra flag or NULL. */
static void t_launch(struct hr_launcher *l, const char *tag, int i, const char *url, const char *nn, const char *flag)
{
    char name[64], id[16];
    snprintf(name, sizeof name, "%s-n%d", tag, i);
    snprintf(id, sizeof id, "n%d", i);
    const char *args[] = {"--url", url, "--nnodes", nn, "--nproc-per-node", "1", "--recovery", "in-place",
                          "--max-restarts", "3", "--node-id", id, "--last-call", "1000", "--grace", "1",
                          "--rdzv-timeout", "30", flag ? flag : t_demo, flag ? t_demo : NULL, NULL};
    hr_launch(l, name, args);
}

/* Read a launcher's stdout (the demo's lines) into buf. */
static const char *t_out(const struct hr_launcher *l, char *buf)
{
    return hr_slurp(l->out, buf, T_OUT_MAX);
}

/* Whether the launcher's worker has printed its all-reduce of iteration it, waiting up to ms. */
static int t_reached(const struct hr_launcher *l, int it, int ms)
{
    static char buf[T_OUT_MAX];
    char want[48];
    snprintf(want, sizeof want, "iteration %d of", it);
    for (int64_t end = h_now_ms() + ms;; hr_nap()) {
        if (strstr(t_out(l, buf), want))
            return 1;
        if (h_now_ms() >= end)
            return 0;
    }
}

/* The PID on the first line holding marker ("starts in place:", "finished"), 0 when none. */
static long t_pid(const char *out, const char *marker)
{
    const char *at = strstr(out, marker);
    while (at && at > out && at[-1] != '\n')
        at--;
    const char *pid = at ? strstr(at, "pid ") : NULL;
    return pid ? strtol(pid + 4, NULL, 10) : 0;
}

/* How many lines of out hold needle. */
static int t_count(const char *out, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(out, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Check that a worker started once (same PID) unless replaced, and finished in a world of world ranks
 * with the sum over it of rank + 1; returns the finishing PID. */
static long t_finished(const struct hr_launcher *l, int world, int same_pid, int before)
{
    static char out[T_OUT_MAX];
    char want[64];
    t_out(l, out);
    snprintf(want, sizeof want, "world %d, sum [%d.0]", world, world * (world + 1) / 2);
    CHECK(strstr(out, want) != NULL);
    long first = t_pid(out, " starts in place:"), last = t_pid(out, " finished ");
    CHECK(last > 0);
    if (same_pid) {
        CHECK_EQ(first, last);
        CHECK_EQ(t_count(out, " starts in place:"), 1);
    }
    if (h_failures() != before)
        printf("---- %s ----\n%s---- end ----\n", l->out, out);
    return last;
}

/* Start a daemon and the case's demo settings; returns 0, or -1 when no daemon started. */
static int t_begin(struct h_daemon *d, const char *tag, char *url, size_t n)
{
    hr_fresh_out(tag);
    if (h_start(d, NULL) < 0)
        return -1;
    h_url(d, tag, NULL, url, n);
    setenv("MUSTER_DEMO_INPLACE", "1", 1);
    setenv("MUSTER_DEMO_ITERATIONS", "40", 1);
    setenv("MUSTER_DEMO_INTERVAL_MS", "100", 1);
    setenv("MUSTER_DEMO_TIMEOUT_MS", "20000", 1);
    return 0;
}

/* Four nodes; the launchers of the first `lost` nodes after node 0 are SIGKILLed at once (their workers
 * die with them) once every worker reached iteration `at`: the survivors recover into the next generation
 * with the same worker processes and finish with the sum over the ranks left.  Each worker learns its
 * place from musterd's answer.  The launchers arm their recovery at each heartbeat (every second). */
static void t_launchers_killed(const char *tag, int lost, const char *nn, int at)
{
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher l[T_NODES];
    char url[128];
    if (t_begin(&d, tag, url, sizeof url) < 0)
        return;
    for (int i = 0; i < T_NODES; i++)
        t_launch(&l[i], tag, i, url, nn, NULL);
    for (int i = 0; i < T_NODES; i++)
        CHECK(t_reached(&l[i], at, 20000));
    long long armed = h_stat(&d, "rdzv_armed_recover_joins");
    for (int i = 1; i <= lost; i++)
        kill(l[i].pid, SIGKILL);
    for (int i = 1; i <= lost; i++)
        CHECK_EQ(hr_finish(&l[i], 5000), 128 + SIGKILL);
    int64_t t0 = h_now_ms();
    for (int i = lost + 1; i <= T_NODES; i++) {
        struct hr_launcher *s = &l[i % T_NODES];
        CHECK_EQ(hr_finish(s, 30000), 0);
        t_finished(s, T_NODES - lost, 1, before);
        hr_show(s, before);
    }
    CHECK(h_now_ms() - t0 < 20000);
    CHECK(h_stat(&d, "rdzv_recoveries") >= 1);
    if (at >= 15) /* 1.5 s in: every launcher armed before the kill */
        CHECK(armed >= T_NODES);
    CHECK(h_stat(&d, "rdzv_armed_recover_joins") > armed); /* the survivors armed the next generation */
    CHECK_EQ(h_stop(&d), 0);
}

/* One launcher killed, twice over (a fresh job each time): early, and once every launcher armed. */
static void t_launcher_killed(void *arg)
{
    (void)arg;
    t_launchers_killed("lk", 1, "3:4", 5);
    t_launchers_killed("lk2", 1, "3:4", 15);
}

/* Two launchers killed at once: one recovery excludes both, or a second one follows. */
static void t_two_killed(void *arg)
{
    (void)arg;
    t_launchers_killed("two", 2, "2:4", 15);
}

/* Three nodes; one worker is SIGKILLed: its launcher joins again and replaces only it, the others
 * recover in place, and the world keeps its three ranks. */
static void t_worker_killed(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher l[3];
    char url[128], buf[T_OUT_MAX];
    if (t_begin(&d, "wk", url, sizeof url) < 0)
        return;
    for (int i = 0; i < 3; i++)
        t_launch(&l[i], "wk", i, url, "2:3", NULL);
    for (int i = 0; i < 3; i++)
        CHECK(t_reached(&l[i], 5, 20000));
    long victim = t_pid(t_out(&l[1], buf), " starts in place:");
    CHECK(victim > 0 && kill((pid_t)victim, SIGKILL) == 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(hr_finish(&l[i], 30000), 0);
        long pid = t_finished(&l[i], 3, i != 1, before);
        if (i == 1)
            CHECK(pid != victim);
        hr_show(&l[i], before);
    }
    CHECK(strstr(hr_slurp(l[1].err, buf, sizeof buf), "started 1 worker(s) in place of the failed one(s)") != NULL);
    CHECK(strstr(hr_slurp(l[0].err, buf, sizeof buf), "stays in place as rank 0") != NULL);
    CHECK_EQ(h_stop(&d), 0);
}

/* Three nodes and a --standby launcher: the standby starts no worker until a node's launcher is
 * SIGKILLed, then is admitted, and the world is back to three ranks. */
static void t_standby_admitted(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher l[T_NODES];
    char url[128], buf[T_OUT_MAX];
    if (t_begin(&d, "sb", url, sizeof url) < 0)
        return;
    for (int i = 0; i < 3; i++)
        t_launch(&l[i], "sb", i, url, "2:3", NULL);
    for (int i = 0; i < 3; i++)
        CHECK(t_reached(&l[i], 3, 20000));
    t_launch(&l[3], "sb", 3, url, "2:3", "--standby");
    for (int i = 0; i < 50; i++) /* half a second: the standby is parked, not admitted */
        hr_nap();
    CHECK(strstr(hr_slurp(l[3].err, buf, sizeof buf), "waiting as a standby") != NULL);
    CHECK_STR(t_out(&l[3], buf), "");
    kill(l[0].pid, SIGKILL);
    CHECK_EQ(hr_finish(&l[0], 5000), 128 + SIGKILL);
    for (int i = 1; i < T_NODES; i++) {
        CHECK_EQ(hr_finish(&l[i], 30000), 0);
        t_finished(&l[i], 3, 1, before);
        hr_show(&l[i], before);
    }
    CHECK(strstr(t_out(&l[3], buf), "starts in place: generation 2, rank 2 of 3") != NULL);
    CHECK_EQ(h_stop(&d), 0);
}

/* --nnodes 2:2 with three launchers: the third waits as a standby (the daemon parks joiners beyond
 * MAX) and is admitted when a node is lost. */
static void t_beyond_max(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher l[3];
    char url[128], buf[T_OUT_MAX];
    if (t_begin(&d, "bm", url, sizeof url) < 0)
        return;
    for (int i = 0; i < 3; i++)
        t_launch(&l[i], "bm", i, url, "2:2", NULL);
    int extra = -1;
    for (int64_t end = h_now_ms() + 20000; extra < 0 && h_now_ms() < end; hr_nap())
        for (int i = 0; i < 3; i++)
            if (t_reached(&l[i], 3, 0) && t_reached(&l[(i + 1) % 3], 3, 0))
                extra = (i + 2) % 3;
    CHECK(extra >= 0);
    if (extra < 0)
        extra = 2;
    CHECK_STR(t_out(&l[extra], buf), "");
    int victim = (extra + 1) % 3;
    kill(l[victim].pid, SIGKILL);
    CHECK_EQ(hr_finish(&l[victim], 5000), 128 + SIGKILL);
    for (int i = 0; i < 3; i++) {
        if (i == victim)
            continue;
        CHECK_EQ(hr_finish(&l[i], 30000), 0);
        t_finished(&l[i], 2, 1, before);
        hr_show(&l[i], before);
    }
    CHECK(strstr(t_out(&l[extra], buf), "starts in place: generation 2, rank 1 of 2") != NULL);
    CHECK_EQ(h_stop(&d), 0);
}

/* A recovery mode that does not exist, or --standby with --standalone, is a usage error (2); --help
 * names both flags. */
static void t_usage(void *arg)
{
    (void)arg;
    struct hr_launcher l;
    char buf[8192];
    hr_fresh_out("usage");
    hr_launch(&l, "usage-mode", (const char *[]){"--recovery", "sideways", "true", NULL});
    CHECK_EQ(hr_finish(&l, 10000), 2);
    CHECK(strstr(hr_slurp(l.err, buf, sizeof buf), "--recovery is restart or in-place") != NULL);
    hr_launch(&l, "usage-standby", (const char *[]){"--standalone", "--standby", "true", NULL});
    CHECK_EQ(hr_finish(&l, 10000), 2);
    hr_launch(&l, "usage-help", (const char *[]){"--help", NULL});
    CHECK_EQ(hr_finish(&l, 10000), 0);
    hr_slurp(l.out, buf, sizeof buf);
    CHECK(strstr(buf, "--recovery MODE") != NULL);
    CHECK(strstr(buf, "--standby") != NULL);
}

int main(void)
{
    h_init("rdzv_run_inplace", 150);
    hr_cli = getenv("MUSTER_TEST_CLI");
    t_demo = getenv("MUSTER_TEST_DEMO");
    if (!hr_cli || !*hr_cli || !t_demo || !*t_demo)
        h_skip("MUSTER_TEST_CLI or MUSTER_TEST_DEMO is not set");
    H_RUN(t_usage, NULL);
    H_RUN(t_launcher_killed, NULL);
    H_RUN(t_two_killed, NULL);
    H_RUN(t_worker_killed, NULL);
    H_RUN(t_standby_admitted, NULL);
    H_RUN(t_beyond_max, NULL);
    return h_finish();
}
