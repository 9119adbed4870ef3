/*
 * `muster run` end to end: real launchers (the built CLI, named by
 * MUSTER_TEST_CLI) starting real shell-script workers, with a private
 * musterd (--standalone) or the test's own.  Covers the worker environment,
 * a restart after a worker kills itself, the restart limit (and a killed
 * worker reported by its signal), prefixed output,
 * SIGINT forwarding, two launchers forming one world where one is killed
 * and the survivor finishes the job alone, and error messages that name the
 * store without its token.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hclient.h"
#include "hrun.h"

static const char env_worker[] =
    "[ \"$WORLD_SIZE\" = 3 ] && [ \"$LOCAL_WORLD_SIZE\" = 3 ] || exit 3\n"
    "[ \"$GROUP_RANK\" = 0 ] && [ \"$RANK\" = \"$LOCAL_RANK\" ] || exit 4\n"
    "[ \"$MASTER_ADDR\" = 127.0.0.1 ] && [ -n \"$MASTER_PORT\" ] || exit 5\n"
    /* MASTER_ADDR:MASTER_PORT is the node's TCPStore relay, not the store itself. */
    "[ \"$MUSTER_URL\" != \"tcp://$MASTER_ADDR:$MASTER_PORT\" ] || exit 6\n"
    "[ \"$TORCHELASTIC_USE_AGENT_STORE\" = True ] && [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] || exit 10\n"
    "[ \"$ROLE_RANK\" = \"$RANK\" ] && [ \"$ROLE_WORLD_SIZE\" = 3 ] && [ \"$OMP_NUM_THREADS\" = 1 ] || exit 11\n"
    "[ \"$TORCHELASTIC_RUN_ID\" = default ] && [ \"$TORCHELASTIC_MAX_RESTARTS\" = 0 ] || exit 12\n"
    "[ -n \"$TORCHELASTIC_ERROR_FILE\" ] || exit 13\n"
    "[ \"$MUSTER_GENERATION\" -ge 1 ] || exit 7\n"
    "\"$MUSTER\" set \"w/$RANK\" \"$RANK\" && [ \"$(\"$MUSTER\" get \"w/$RANK\")\" = \"$RANK\" ] || exit 8\n"
    "echo \"$MUSTER_GENERATION\" > \"$OUT/rank.$RANK\"\n";

/* --standalone with three workers: each sees its rank, the world and a working store. */
static void t_standalone_env(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    char buf[64];
    hr_fresh_out("env");
    const char *w = hr_script("env.sh", env_worker);
    const char *args[] = {"--standalone", "--nproc-per-node", "3", w, NULL};
    hr_launch(&l, "env", args);
    CHECK_EQ(hr_finish(&l, 20000), 0);
    for (int r = 0; r < 3; r++) {
        snprintf(buf, sizeof buf, "rank.%d", r);
        CHECK(hr_await_file(buf, 0));
    }
    char gen0[32];
    hr_out_file("rank.0", gen0, sizeof gen0);
    CHECK(gen0[0] != '\0');
    CHECK_STR(hr_out_file("rank.2", buf, sizeof buf), gen0);
    hr_show(&l, before);
}

static const char crash_worker[] =
    "if [ \"$RANK\" = 1 ] && [ ! -e \"$OUT/killed\" ]; then : > \"$OUT/killed\"; kill -9 $$; fi\n"
    "echo \"$MUSTER_GENERATION $MUSTER_RESTART_COUNT\" > \"$OUT/done.$RANK\"\n";

/* A worker that kills itself once: the launcher restarts, and the next generation succeeds. */
static void t_restart(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    char buf[64];
    unsigned long long gen = 0, restarts = 9;
    hr_fresh_out("restart");
    const char *w = hr_script("crash.sh", crash_worker);
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--grace", "1", w, NULL};
    hr_launch(&l, "restart", args);
    CHECK_EQ(hr_finish(&l, 20000), 0);
    CHECK(hr_await_file("killed", 0));
    CHECK_EQ(sscanf(hr_out_file("done.1", buf, sizeof buf), "%llu %llu", &gen, &restarts), 2);
    CHECK(gen >= 2);
    CHECK_EQ(restarts, 1);
    hr_show(&l, before);
}

/* With no restarts allowed the launcher exits with the dead worker's status (128+SIGKILL). */
static void t_no_restarts(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    hr_fresh_out("norestart");
    const char *w = hr_script("crash0.sh", crash_worker);
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--grace", "1", w, NULL};
    hr_launch(&l, "norestart", args);
    CHECK_EQ(hr_finish(&l, 20000), 128 + SIGKILL);
    CHECK(!hr_await_file("done.1", 0));
    /* The signal by name, as torchrun reports it, and no hint at @record, which cannot catch one. */
    char buf[8192];
    hr_slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "a worker failed with status 137 (SIGKILL)\n") != NULL);
    CHECK(strstr(buf, "rank 1 (local_rank 1) failed: exitcode -9 (SIGKILL)\n") != NULL);
    CHECK(strstr(buf, "Signal 9 (SIGKILL) received") != NULL);
    CHECK(strstr(buf, "record") == NULL);
    hr_show(&l, before);
}

/* --prefix-output tags every worker line with its rank, on the matching stream. */
static void t_prefix_output(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    char buf[4096];
    hr_fresh_out("prefix");
    const char *w = hr_script("talk.sh", "echo \"hello from $RANK\"\necho \"oops $RANK\" >&2\nprintf 'no newline'\n");
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--prefix-output", w, NULL};
    hr_launch(&l, "prefix", args);
    CHECK_EQ(hr_finish(&l, 20000), 0);
    hr_slurp(l.out, buf, sizeof buf);
    CHECK(strstr(buf, "[0]: hello from 0\n") != NULL);
    CHECK(strstr(buf, "[1]: hello from 1\n") != NULL);
    CHECK(strstr(buf, "[1]: no newline\n") != NULL);
    CHECK(strstr(buf, "oops") == NULL);
    hr_slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "[0]: oops 0\n") != NULL);
    CHECK(strstr(buf, "[1]: oops 1\n") != NULL);
    hr_show(&l, before);
}

/* SIGINT to the launcher reaches the workers, and the launcher exits 128+SIGINT. */
static void t_sigint(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    hr_fresh_out("sigint");
    const char *w = hr_script("sleepy.sh", ": > \"$OUT/up.$RANK\"\nexec sleep 30\n");
    const char *args[] = {"--standalone", "--nproc-per-node", "2", w, NULL};
    hr_launch(&l, "sigint", args);
    CHECK(hr_await_file("up.0", 10000) && hr_await_file("up.1", 10000));
    int64_t t0 = h_now_ms();
    kill(l.pid, SIGINT);
    CHECK_EQ(hr_finish(&l, 10000), 128 + SIGINT);
    CHECK(h_now_ms() - t0 < 5000);
    hr_show(&l, before);
}

/* With the store gone, a launcher retrying to reconnect (for up to --rdzv-timeout) still stops
 * within a second or so of SIGTERM. */
static void t_sigterm_store_gone(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher l;
    char url[128];
    hr_fresh_out("gone");
    const char *extra[] = {"--heartbeat-timeout", "1500", NULL};
    if (h_start(&d, extra) < 0)
        return;
    h_url(&d, "gone", NULL, url, sizeof url);
    const char *w = hr_script("gone.sh", ": > \"$OUT/up.$RANK\"\nexec sleep 30\n");
    const char *args[] = {"--url", url, "--nproc-per-node", "1", "--rdzv-timeout", "60", "--grace", "1", "--max-restarts", "3", w, NULL};
    hr_launch(&l, "gone", args);
    CHECK(hr_await_file("up.0", 10000));
    kill(d.pid, SIGKILL);
    h_stop(&d);
    /* The heartbeat (every 0.5 s) finds the store gone; the worker is stopped, then reconnects start. */
    char buf[4096];
    for (int64_t end = h_now_ms() + 8000; h_now_ms() < end && !strstr(hr_slurp(l.err, buf, sizeof buf), "lost");)
        hr_nap();
    CHECK(strstr(buf, "lost") != NULL);
    for (int i = 0; i < 150; i++) /* 1.5 s: past the worker's stop, into the reconnect loop */
        hr_nap();
    int64_t t0 = h_now_ms();
    kill(l.pid, SIGTERM);
    CHECK_EQ(hr_finish(&l, 10000), 128 + SIGTERM);
    CHECK(h_now_ms() - t0 < 2000);
    hr_show(&l, before);
}

/* Whether process pid is gone (or a zombie) within ms. */
static int gone_within(pid_t pid, int ms)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    for (int64_t end = h_now_ms() + ms; h_now_ms() < end; hr_nap()) {
        const char *s = hr_slurp(path, buf, sizeof buf);
        const char *close_paren = strrchr(s, ')');
        if (!*s || (close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z'))
            return 1;
    }
    return 0;
}

/* A worker wrapped in a shell whose launcher is SIGKILLed: the shell's child (the real worker, a
 * grandchild of the launcher) is killed too, not left running. */
static void t_wrapped_worker_launcher_killed(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    char buf[64];
    hr_fresh_out("wrapped");
    const char *w = hr_script("wrapped.sh", "sleep 300 &\necho $! > \"$OUT/gc.$RANK\"\nwait\n");
    const char *args[] = {"--standalone", "--nproc-per-node", "1", w, NULL};
    hr_launch(&l, "wrapped", args);
    CHECK(hr_await_file("gc.0", 10000));
    hr_nap();
    pid_t gc = (pid_t)atoi(hr_out_file("gc.0", buf, sizeof buf));
    CHECK(gc > 0 && kill(gc, 0) == 0);
    kill(l.pid, SIGKILL);
    CHECK_EQ(hr_finish(&l, 5000), 128 + SIGKILL);
    CHECK(gc > 0 && gone_within(gc, 3000));
    if (gc > 0)
        kill(gc, SIGKILL);
    hr_show(&l, before);
}

static const char pair_worker[] =
    "\"$MUSTER\" set \"up/$MUSTER_GENERATION/$RANK\" \"$WORLD_SIZE\" || exit 9\n"
    "if [ \"$WORLD_SIZE\" = 4 ]; then exec sleep 60; fi\n";

/* Wait for the four workers of the first world and check what they saw. */
static uint64_t await_world_of_four(muster_t *m)
{
    void *v = NULL;
    size_t n = 0;
    char keys[4][64];
    const char *kp[4];
    if (muster_get(m, "muster/rdzv/generation", 1, 15000, &v, &n) != MUSTER_OK) {
        CHECK(!"no generation formed");
        return 0;
    }
    uint64_t gen = strtoull(v, NULL, 10);
    muster_free(v);
    for (int r = 0; r < 4; r++) {
        snprintf(keys[r], sizeof keys[r], "up/%llu/%d", (unsigned long long)gen, r);
        kp[r] = keys[r];
    }
    CHECK_EQ(muster_wait(m, kp, 4, 15000), MUSTER_OK);
    HC_EXPECT(m, keys[0], "4");
    HC_EXPECT(m, keys[3], "4");
    return gen;
}

/* Two launchers form one world of four ranks; one is SIGKILLed; the survivor re-forms alone
 * in the next generation and its workers finish the job. */
static void t_two_launchers(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher la, lb;
    char url[128], key[64];
    hr_fresh_out("pair");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "pair", NULL, url, sizeof url);
    const char *w = hr_script("pair.sh", pair_worker);
    const char *a[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "2", "--max-restarts", "1",
                       "--node-id", "a", "--last-call", "3000", "--grace", "1", w, NULL};
    const char *b[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "2", "--max-restarts", "1",
                       "--node-id", "b", "--last-call", "3000", "--grace", "1", w, NULL};
    hr_launch(&la, "pair-a", a);
    hr_launch(&lb, "pair-b", b);
    muster_t *m = hc_connect(&d, "pair", NULL);
    uint64_t g1 = m ? await_world_of_four(m) : 0;
    kill(lb.pid, SIGKILL);
    CHECK_EQ(hr_finish(&lb, 5000), 128 + SIGKILL);
    CHECK_EQ(hr_finish(&la, 30000), 0);
    if (m && g1) {
        snprintf(key, sizeof key, "up/%llu/0", (unsigned long long)g1 + 1);
        HC_EXPECT(m, key, "2");
        snprintf(key, sizeof key, "up/%llu/1", (unsigned long long)g1 + 1);
        HC_EXPECT(m, key, "2");
        snprintf(key, sizeof key, "up/%llu/2", (unsigned long long)g1 + 1);
        HC_EXPECT(m, key, NULL);
    }
    muster_close(m);
    hr_show(&la, before);
    hr_show(&lb, before);
    CHECK_EQ(h_stop(&d), 0);
}

/* Two launchers whose workers finish at different times both exit 0 without a restart:
 * the first to finish waits for the other before leaving, and the daemon counts the job as
 * completed, not as a failure. */
static void t_two_finish(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher la, lb;
    char url[128], buf[4096];
    hr_fresh_out("finish");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "finish", NULL, url, sizeof url);
    /* Node 0's workers are slower (a stand-in for uneven work, not a synchronisation). */
    const char *w = hr_script("finish.sh", "if [ \"$GROUP_RANK\" = 0 ]; then sleep 1; fi\n");
    const char *a[] = {"--url", url, "--nnodes", "2", "--nproc-per-node", "2", "--node-id", "a", w, NULL};
    const char *b[] = {"--url", url, "--nnodes", "2", "--nproc-per-node", "2", "--node-id", "b", w, NULL};
    hr_launch(&la, "finish-a", a);
    hr_launch(&lb, "finish-b", b);
    CHECK_EQ(hr_finish(&lb, 20000), 0);
    CHECK_EQ(hr_finish(&la, 20000), 0);
    CHECK(strstr(hr_slurp(lb.err, buf, sizeof buf), "broken") == NULL);
    CHECK_EQ(h_stat(&d, "rdzv_failures"), 0);
    hr_show(&la, before);
    hr_show(&lb, before);
    CHECK_EQ(h_stop(&d), 0);
    CHECK(strstr(hr_slurp(d.log, buf, sizeof buf), "completed: every node finished") != NULL);
}

/* A launcher arriving after the job completed runs nothing and exits 0, saying so; once the completion
 * key is deleted, the same name runs again. */
static void t_completed_before(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher la, lb, lc;
    char url[128], buf[4096];
    hr_fresh_out("again");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "again", NULL, url, sizeof url);
    const char *w = hr_script("again.sh", "\"$MUSTER\" add runs 1 >/dev/null || exit 9\n");
    const char *a[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "1", w, NULL};
    hr_launch(&la, "again-a", a);
    CHECK_EQ(hr_finish(&la, 20000), 0);
    hr_launch(&lb, "again-b", a);
    CHECK_EQ(hr_finish(&lb, 20000), 0);
    CHECK(strstr(hr_slurp(lb.err, buf, sizeof buf), "already completed (generation 1)") != NULL);
    muster_t *m = hc_connect(&d, "again", NULL);
    HC_EXPECT(m, "runs", "1"); /* the late launcher started no worker */
    int deleted = 0;
    CHECK_EQ(m ? muster_delete(m, "muster/run/completed", &deleted, 0) : -1, MUSTER_OK);
    hr_launch(&lc, "again-c", a);
    CHECK_EQ(hr_finish(&lc, 20000), 0);
    HC_EXPECT(m, "runs", "2");
    muster_close(m);
    hr_show(&la, before);
    hr_show(&lb, before);
    hr_show(&lc, before);
    CHECK_EQ(h_stop(&d), 0);
}

/* A launch without a job name (the default namespace) after an earlier unnamed job completed there runs
 * nothing and fails: a scheduler must not read "nothing to run" as success. */
static void t_completed_unnamed(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher la, lb;
    char url[128], buf[4096];
    hr_fresh_out("unnamed");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, NULL, NULL, url, sizeof url);
    const char *w = hr_script("unnamed.sh", "exit 0\n");
    const char *a[] = {"--url", url, "--nnodes", "1", "--nproc-per-node", "1", w, NULL};
    hr_launch(&la, "unnamed-a", a);
    CHECK_EQ(hr_finish(&la, 20000), 0);
    hr_launch(&lb, "unnamed-b", a);
    CHECK_EQ(hr_finish(&lb, 20000), 5);
    CHECK(strstr(hr_slurp(lb.err, buf, sizeof buf), "no job name of its own") != NULL);
    hr_show(&la, before);
    hr_show(&lb, before);
    CHECK_EQ(h_stop(&d), 0);
}

static const char grow_worker[] =
    "\"$MUSTER\" set \"grow/$MUSTER_GENERATION/$RANK\" \"$WORLD_SIZE $MUSTER_RESTART_COUNT\" || exit 9\n"
    "if [ \"$WORLD_SIZE\" = 2 ]; then exec sleep 60; fi\n";

/* A second launcher arriving while a one-node world runs: the first re-forms (without using up a
 * restart) and both finish in a world of four. */
static void t_scale_up(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher la, lb;
    char url[128], key[64];
    void *v = NULL;
    size_t n = 0;
    hr_fresh_out("grow");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "grow", NULL, url, sizeof url);
    const char *w = hr_script("grow.sh", grow_worker);
    const char *a[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "2", "--node-id", "a",
                       "--last-call", "100", "--grace", "1", w, NULL};
    const char *b[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "2", "--node-id", "b",
                       "--last-call", "100", "--grace", "1", w, NULL};
    hr_launch(&la, "grow-a", a);
    muster_t *m = hc_connect(&d, "grow", NULL);
    /* The lone world's rank 1 is up: now the second node arrives. */
    CHECK(m && muster_get(m, "grow/1/1", 1, 15000, &v, &n) == MUSTER_OK);
    muster_free(v);
    hr_launch(&lb, "grow-b", b);
    CHECK_EQ(hr_finish(&la, 20000), 0);
    CHECK_EQ(hr_finish(&lb, 20000), 0);
    if (m) {
        HC_EXPECT(m, "grow/2/0", "4 0");
        HC_EXPECT(m, "grow/2/3", "4 0");
        snprintf(key, sizeof key, "grow/3/0");
        HC_EXPECT(m, key, NULL);
    }
    muster_close(m);
    hr_show(&la, before);
    hr_show(&lb, before);
    CHECK_EQ(h_stop(&d), 0);
}

/* A round that never fills ends the launcher with exit 3 after --rdzv-timeout; bad command
 * lines exit 2. */
static void t_timeout_and_usage(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher l;
    char url[128], buf[4096];
    hr_fresh_out("usage");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "lonely", NULL, url, sizeof url);
    const char *lonely[] = {"--url", url, "--nnodes", "2", "--rdzv-timeout", "0.5", "true", NULL};
    int64_t t0 = h_now_ms();
    hr_launch(&l, "lonely", lonely);
    CHECK_EQ(hr_finish(&l, 10000), 3);
    CHECK(h_now_ms() - t0 < 5000);
    CHECK(strstr(hr_slurp(l.err, buf, sizeof buf), "rendezvous failed") != NULL);
    hr_show(&l, before);
    const char *const bad[][4] = {
        {NULL},
        {"--nnodes", "3:2", "true", NULL},
        {"--nproc-per-node", "0", "true", NULL},
        {"--standalone", "--url", url, "true"},
        {"--frobnicate", "true", NULL},
        {"--relay-request-timeout", "soon", "true", NULL},
        {"-m", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[5] = {bad[i][0], bad[i][0] ? bad[i][1] : NULL, bad[i][0] ? bad[i][2] : NULL,
                               bad[i][0] ? bad[i][3] : NULL, NULL};
        hr_launch(&l, "usage", args);
        CHECK_EQ(hr_finish(&l, 10000), 2);
    }
    hr_launch(&l, "help", (const char *[]){"--help", NULL});
    CHECK_EQ(hr_finish(&l, 10000), 0);
    CHECK(strstr(hr_slurp(l.out, buf, sizeof buf), "--nproc-per-node") != NULL);
    CHECK_EQ(h_stop(&d), 0);
}

/* A store URL's token never appears in the launcher's error messages: not when the store refuses
 * the connection (a wrong token), not when the URL does not parse. */
static void t_token_not_shown(void *arg)
{
    (void)arg;
    int before = h_failures();
    const char *const tok[] = {"--token", "job=the-right-one", NULL};
    struct h_daemon d;
    struct hr_launcher l;
    char url[160], buf[8192];
    hr_fresh_out("token");
    if (h_start(&d, tok) < 0)
        return;
    h_url(&d, "job", "s3cret-wrong", url, sizeof url);
    hr_launch(&l, "token_refused", (const char *[]){"--url", url, "--rdzv-timeout", "2", "true", NULL});
    CHECK(hr_finish(&l, 15000) > 0);
    hr_slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "cannot connect to 127.0.0.1:") != NULL);
    CHECK(strstr(buf, "/job") != NULL);
    CHECK(strstr(buf, "s3cret") == NULL);
    hr_show(&l, before);
    hr_launch(&l, "token_bad_url", (const char *[]){"--url", "tcp://127.0.0.1:99999/job?token=s3cret-bad", "true", NULL});
    CHECK_EQ(hr_finish(&l, 10000), 2);
    hr_slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "bad store URL") != NULL);
    CHECK(strstr(buf, "s3cret") == NULL);
    hr_show(&l, before);
    hr_launch(&l, "token_bad_endpoint", (const char *[]){"--rdzv-endpoint", "127.0.0.1:0x1?token=s3cret-ep", "true", NULL});
    CHECK_EQ(hr_finish(&l, 10000), 2);
    hr_slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "bad store URL") != NULL);
    CHECK(strstr(buf, "s3cret") == NULL);
    hr_show(&l, before);
    CHECK_EQ(h_stop(&d), 0);
}

int main(void)
{
    h_init("rdzv_run", 150);
    hr_cli = getenv("MUSTER_TEST_CLI");
    if (!hr_cli || !*hr_cli)
        h_skip("MUSTER_TEST_CLI is not set");
    H_RUN(t_standalone_env, NULL);
    H_RUN(t_restart, NULL);
    H_RUN(t_no_restarts, NULL);
    H_RUN(t_prefix_output, NULL);
    H_RUN(t_sigint, NULL);
    H_RUN(t_sigterm_store_gone, NULL);
    H_RUN(t_wrapped_worker_launcher_killed, NULL);
    H_RUN(t_two_launchers, NULL);
    H_RUN(t_two_finish, NULL);
    H_RUN(t_completed_before, NULL);
    H_RUN(t_completed_unnamed, NULL);
    H_RUN(t_scale_up, NULL);
    H_RUN(t_timeout_and_usage, NULL);
    H_RUN(t_token_not_shown, NULL);
    return h_finish();
}
