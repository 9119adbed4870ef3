/*
 * `muster run` end to end: real launchers (the built CLI, named by
 * MUSTER_TEST_CLI) starting real shell-script workers, with a private
 * musterd (--standalone) or the test's own.  Covers the worker environment,
 * a restart after a worker kills itself, the restart limit, prefixed output,
 * SIGINT forwarding, two launchers forming one world where one is killed
 * and the survivor finishes the job alone, and error messages that name the
 * store without its token.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hclient.h"

extern char **environ;

static const char *cli;
static char out_dir[PATH_MAX];

/* A launcher process started by a test. */
struct launcher {
    pid_t pid;
    char out[PATH_MAX];
    char err[PATH_MAX];
    int status;
};

/* Sleep one polling step while awaiting a process exit or a file. */
static void nap(void)
{
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
}

/* Write an executable shell script named name into the test directory; returns its path. */
static const char *script(const char *name, const char *body)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", h_tmpdir(), name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fprintf(f, "#!/bin/sh\n%s", body);
        fclose(f);
    }
    chmod(path, 0755);
    return path;
}

/* A fresh, empty output directory for a case's workers (exported to them as $OUT). */
static void fresh_out(const char *name)
{
    snprintf(out_dir, sizeof out_dir, "%s/%s", h_tmpdir(), name);
    mkdir(out_dir, 0700);
}

/* Start `muster run ARGS...` with stdout/stderr in files named after tag. */
static void launch(struct launcher *l, const char *tag, const char *const *args)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = cli;
    argv[n++] = "run";
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    snprintf(l->out, sizeof l->out, "%s/%s.out", h_tmpdir(), tag);
    snprintf(l->err, sizeof l->err, "%s/%s.err", h_tmpdir(), tag);
    setenv("OUT", out_dir, 1);
    setenv("MUSTER", cli, 1);
    unsetenv("MUSTER_URL");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, l->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, l->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = posix_spawn(&l->pid, cli, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    CHECK_EQ(rc, 0);
    if (rc)
        l->pid = -1;
    l->status = -1;
}

/* Wait up to ms for the launcher to exit; returns its exit code (128+signal), or -1 after killing it. */
static int finish(struct launcher *l, int ms)
{
    int64_t end = h_now_ms() + ms;
    int st;
    while (l->pid > 0 && h_now_ms() < end) {
        if (waitpid(l->pid, &st, WNOHANG) == l->pid) {
            l->pid = 0;
            l->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return l->status;
        }
        nap();
    }
    if (l->pid > 0) {
        printf("  launcher %d still running after %d ms; killing it\n", (int)l->pid, ms);
        kill(l->pid, SIGKILL);
        waitpid(l->pid, NULL, 0);
        l->pid = 0;
    }
    return -1;
}

/* Read a small file into buf ("" when absent). */
static const char *slurp(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return buf;
    size_t k = fread(buf, 1, n - 1, f);
    buf[k] = '\0';
    fclose(f);
    return buf;
}

/* Read $OUT/name into buf. */
static const char *out_file(const char *name, char *buf, size_t n)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    return slurp(path, buf, n);
}

/* Print a launcher's stderr when a case failed (diagnosis). */
static void show(const struct launcher *l, int failures_before)
{
    char buf[8192];
    if (h_failures() != failures_before)
        printf("---- %s ----\n%s---- end ----\n", l->err, slurp(l->err, buf, sizeof buf));
}

/* Whether $OUT/name exists, waiting up to ms for it. */
static int await_file(const char *name, int ms)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    int64_t end = h_now_ms() + ms;
    for (;;) {
        if (access(path, F_OK) == 0)
            return 1;
        if (h_now_ms() >= end)
            return 0;
        nap();
    }
}

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
    struct launcher l;
    char buf[64];
    fresh_out("env");
    const char *w = script("env.sh", env_worker);
    const char *args[] = {"--standalone", "--nproc-per-node", "3", w, NULL};
    launch(&l, "env", args);
    CHECK_EQ(finish(&l, 20000), 0);
    for (int r = 0; r < 3; r++) {
        snprintf(buf, sizeof buf, "rank.%d", r);
        CHECK(await_file(buf, 0));
    }
    char gen0[32];
    out_file("rank.0", gen0, sizeof gen0);
    CHECK(gen0[0] != '\0');
    CHECK_STR(out_file("rank.2", buf, sizeof buf), gen0);
    show(&l, before);
}

static const char crash_worker[] =
    "if [ \"$RANK\" = 1 ] && [ ! -e \"$OUT/killed\" ]; then : > \"$OUT/killed\"; kill -9 $$; fi\n"
    "echo \"$MUSTER_GENERATION $MUSTER_RESTART_COUNT\" > \"$OUT/done.$RANK\"\n";

/* A worker that kills itself once: the launcher restarts, and the next generation succeeds. */
static void t_restart(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct launcher l;
    char buf[64];
    unsigned long long gen = 0, restarts = 9;
    fresh_out("restart");
    const char *w = script("crash.sh", crash_worker);
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "--grace", "1", w, NULL};
    launch(&l, "restart", args);
    CHECK_EQ(finish(&l, 20000), 0);
    CHECK(await_file("killed", 0));
    CHECK_EQ(sscanf(out_file("done.1", buf, sizeof buf), "%llu %llu", &gen, &restarts), 2);
    CHECK(gen >= 2);
    CHECK_EQ(restarts, 1);
    show(&l, before);
}

/* With no restarts allowed the launcher exits with the dead worker's status (128+SIGKILL). */
static void t_no_restarts(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct launcher l;
    fresh_out("norestart");
    const char *w = script("crash0.sh", crash_worker);
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--grace", "1", w, NULL};
    launch(&l, "norestart", args);
    CHECK_EQ(finish(&l, 20000), 128 + SIGKILL);
    CHECK(!await_file("done.1", 0));
    show(&l, before);
}

/* --prefix-output tags every worker line with its rank, on the matching stream. */
static void t_prefix_output(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct launcher l;
    char buf[4096];
    fresh_out("prefix");
    const char *w = script("talk.sh", "echo \"hello from $RANK\"\necho \"oops $RANK\" >&2\nprintf 'no newline'\n");
    const char *args[] = {"--standalone", "--nproc-per-node", "2", "--prefix-output", w, NULL};
    launch(&l, "prefix", args);
    CHECK_EQ(finish(&l, 20000), 0);
    slurp(l.out, buf, sizeof buf);
    CHECK(strstr(buf, "[0]: hello from 0\n") != NULL);
    CHECK(strstr(buf, "[1]: hello from 1\n") != NULL);
    CHECK(strstr(buf, "[1]: no newline\n") != NULL);
    CHECK(strstr(buf, "oops") == NULL);
    slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "[0]: oops 0\n") != NULL);
    CHECK(strstr(buf, "[1]: oops 1\n") != NULL);
    show(&l, before);
}

/* SIGINT to the launcher reaches the workers, and the launcher exits 128+SIGINT. */
static void t_sigint(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct launcher l;
    fresh_out("sigint");
    const char *w = script("sleepy.sh", ": > \"$OUT/up.$RANK\"\nexec sleep 30\n");
    const char *args[] = {"--standalone", "--nproc-per-node", "2", w, NULL};
    launch(&l, "sigint", args);
    CHECK(await_file("up.0", 10000) && await_file("up.1", 10000));
    int64_t t0 = h_now_ms();
    kill(l.pid, SIGINT);
    CHECK_EQ(finish(&l, 10000), 128 + SIGINT);
    CHECK(h_now_ms() - t0 < 5000);
    show(&l, before);
}

/* With the store gone, a launcher retrying to reconnect (for up to --rdzv-timeout) still stops
 * within a second or so of SIGTERM. */
static void t_sigterm_store_gone(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct launcher l;
    char url[128];
    fresh_out("gone");
    const char *extra[] = {"--heartbeat-timeout", "1500", NULL};
    if (h_start(&d, extra) < 0)
        return;
    h_url(&d, "gone", NULL, url, sizeof url);
    const char *w = script("gone.sh", ": > \"$OUT/up.$RANK\"\nexec sleep 30\n");
    const char *args[] = {"--url", url, "--nproc-per-node", "1", "--rdzv-timeout", "60", "--grace", "1", "--max-restarts", "3", w, NULL};
    launch(&l, "gone", args);
    CHECK(await_file("up.0", 10000));
    kill(d.pid, SIGKILL);
    h_stop(&d);
    /* The heartbeat (every 0.5 s) finds the store gone; the worker is stopped, then reconnects start. */
    char buf[4096];
    for (int64_t end = h_now_ms() + 8000; h_now_ms() < end && !strstr(slurp(l.err, buf, sizeof buf), "lost");)
        nap();
    CHECK(strstr(buf, "lost") != NULL);
    for (int i = 0; i < 150; i++) /* 1.5 s: past the worker's stop, into the reconnect loop */
        nap();
    int64_t t0 = h_now_ms();
    kill(l.pid, SIGTERM);
    CHECK_EQ(finish(&l, 10000), 128 + SIGTERM);
    CHECK(h_now_ms() - t0 < 2000);
    show(&l, before);
}

/* Whether process pid is gone (or a zombie) within ms. */
static int gone_within(pid_t pid, int ms)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    for (int64_t end = h_now_ms() + ms; h_now_ms() < end; nap()) {
        const char *s = slurp(path, buf, sizeof buf);
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
    struct launcher l;
    char buf[64];
    fresh_out("wrapped");
    const char *w = script("wrapped.sh", "sleep 300 &\necho $! > \"$OUT/gc.$RANK\"\nwait\n");
    const char *args[] = {"--standalone", "--nproc-per-node", "1", w, NULL};
    launch(&l, "wrapped", args);
    CHECK(await_file("gc.0", 10000));
    nap();
    pid_t gc = (pid_t)atoi(out_file("gc.0", buf, sizeof buf));
    CHECK(gc > 0 && kill(gc, 0) == 0);
    kill(l.pid, SIGKILL);
    CHECK_EQ(finish(&l, 5000), 128 + SIGKILL);
    CHECK(gc > 0 && gone_within(gc, 3000));
    if (gc > 0)
        kill(gc, SIGKILL);
    show(&l, before);
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
    struct launcher la, lb;
    char url[128], key[64];
    fresh_out("pair");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "pair", NULL, url, sizeof url);
    const char *w = script("pair.sh", pair_worker);
    const char *a[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "2", "--max-restarts", "1",
                       "--node-id", "a", "--last-call", "3000", "--grace", "1", w, NULL};
    const char *b[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "2", "--max-restarts", "1",
                       "--node-id", "b", "--last-call", "3000", "--grace", "1", w, NULL};
    launch(&la, "pair-a", a);
    launch(&lb, "pair-b", b);
    muster_t *m = hc_connect(&d, "pair", NULL);
    uint64_t g1 = m ? await_world_of_four(m) : 0;
    kill(lb.pid, SIGKILL);
    CHECK_EQ(finish(&lb, 5000), 128 + SIGKILL);
    CHECK_EQ(finish(&la, 30000), 0);
    if (m && g1) {
        snprintf(key, sizeof key, "up/%llu/0", (unsigned long long)g1 + 1);
        HC_EXPECT(m, key, "2");
        snprintf(key, sizeof key, "up/%llu/1", (unsigned long long)g1 + 1);
        HC_EXPECT(m, key, "2");
        snprintf(key, sizeof key, "up/%llu/2", (unsigned long long)g1 + 1);
        HC_EXPECT(m, key, NULL);
    }
    muster_close(m);
    show(&la, before);
    show(&lb, before);
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
    struct launcher la, lb;
    char url[128], buf[4096];
    fresh_out("finish");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "finish", NULL, url, sizeof url);
    /* Node 0's workers are slower (a stand-in for uneven work, not a synchronisation). */
    const char *w = script("finish.sh", "if [ \"$GROUP_RANK\" = 0 ]; then sleep 1; fi\n");
    const char *a[] = {"--url", url, "--nnodes", "2", "--nproc-per-node", "2", "--node-id", "a", w, NULL};
    const char *b[] = {"--url", url, "--nnodes", "2", "--nproc-per-node", "2", "--node-id", "b", w, NULL};
    launch(&la, "finish-a", a);
    launch(&lb, "finish-b", b);
    CHECK_EQ(finish(&lb, 20000), 0);
    CHECK_EQ(finish(&la, 20000), 0);
    CHECK(strstr(slurp(lb.err, buf, sizeof buf), "broken") == NULL);
    CHECK_EQ(h_stat(&d, "rdzv_failures"), 0);
    show(&la, before);
    show(&lb, before);
    CHECK_EQ(h_stop(&d), 0);
    CHECK(strstr(slurp(d.log, buf, sizeof buf), "completed: every node finished") != NULL);
}

/* A launcher arriving after the job completed runs nothing and exits 0, saying so; once the completion
 * key is deleted, the same name runs again. */
static void t_completed_before(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct launcher la, lb, lc;
    char url[128], buf[4096];
    fresh_out("again");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "again", NULL, url, sizeof url);
    const char *w = script("again.sh", "\"$MUSTER\" add runs 1 >/dev/null || exit 9\n");
    const char *a[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "1", w, NULL};
    launch(&la, "again-a", a);
    CHECK_EQ(finish(&la, 20000), 0);
    launch(&lb, "again-b", a);
    CHECK_EQ(finish(&lb, 20000), 0);
    CHECK(strstr(slurp(lb.err, buf, sizeof buf), "already completed (generation 1)") != NULL);
    muster_t *m = hc_connect(&d, "again", NULL);
    HC_EXPECT(m, "runs", "1"); /* the late launcher started no worker */
    int deleted = 0;
    CHECK_EQ(m ? muster_delete(m, "muster/run/completed", &deleted, 0) : -1, MUSTER_OK);
    launch(&lc, "again-c", a);
    CHECK_EQ(finish(&lc, 20000), 0);
    HC_EXPECT(m, "runs", "2");
    muster_close(m);
    show(&la, before);
    show(&lb, before);
    show(&lc, before);
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
    struct launcher la, lb;
    char url[128], key[64];
    void *v = NULL;
    size_t n = 0;
    fresh_out("grow");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "grow", NULL, url, sizeof url);
    const char *w = script("grow.sh", grow_worker);
    const char *a[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "2", "--node-id", "a",
                       "--last-call", "100", "--grace", "1", w, NULL};
    const char *b[] = {"--url", url, "--nnodes", "1:2", "--nproc-per-node", "2", "--node-id", "b",
                       "--last-call", "100", "--grace", "1", w, NULL};
    launch(&la, "grow-a", a);
    muster_t *m = hc_connect(&d, "grow", NULL);
    /* The lone world's rank 1 is up: now the second node arrives. */
    CHECK(m && muster_get(m, "grow/1/1", 1, 15000, &v, &n) == MUSTER_OK);
    muster_free(v);
    launch(&lb, "grow-b", b);
    CHECK_EQ(finish(&la, 20000), 0);
    CHECK_EQ(finish(&lb, 20000), 0);
    if (m) {
        HC_EXPECT(m, "grow/2/0", "4 0");
        HC_EXPECT(m, "grow/2/3", "4 0");
        snprintf(key, sizeof key, "grow/3/0");
        HC_EXPECT(m, key, NULL);
    }
    muster_close(m);
    show(&la, before);
    show(&lb, before);
    CHECK_EQ(h_stop(&d), 0);
}

/* A round that never fills ends the launcher with exit 3 after --rdzv-timeout; bad command
 * lines exit 2. */
static void t_timeout_and_usage(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct launcher l;
    char url[128], buf[4096];
    fresh_out("usage");
    if (h_start(&d, NULL) < 0)
        return;
    h_url(&d, "lonely", NULL, url, sizeof url);
    const char *lonely[] = {"--url", url, "--nnodes", "2", "--rdzv-timeout", "0.5", "true", NULL};
    int64_t t0 = h_now_ms();
    launch(&l, "lonely", lonely);
    CHECK_EQ(finish(&l, 10000), 3);
    CHECK(h_now_ms() - t0 < 5000);
    CHECK(strstr(slurp(l.err, buf, sizeof buf), "rendezvous failed") != NULL);
    show(&l, before);
    const char *const bad[][4] = {
        {NULL},
        {"--nnodes", "3:2", "true", NULL},
        {"--nproc-per-node", "0", "true", NULL},
        {"--standalone", "--url", url, "true"},
        {"--frobnicate", "true", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[5] = {bad[i][0], bad[i][0] ? bad[i][1] : NULL, bad[i][0] ? bad[i][2] : NULL,
                               bad[i][0] ? bad[i][3] : NULL, NULL};
        launch(&l, "usage", args);
        CHECK_EQ(finish(&l, 10000), 2);
    }
    launch(&l, "help", (const char *[]){"--help", NULL});
    CHECK_EQ(finish(&l, 10000), 0);
    CHECK(strstr(slurp(l.out, buf, sizeof buf), "--nproc-per-node") != NULL);
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
    struct launcher l;
    char url[160], buf[8192];
    fresh_out("token");
    if (h_start(&d, tok) < 0)
        return;
    h_url(&d, "job", "s3cret-wrong", url, sizeof url);
    launch(&l, "token_refused", (const char *[]){"--url", url, "--rdzv-timeout", "2", "true", NULL});
    CHECK(finish(&l, 15000) > 0);
    slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "cannot connect to 127.0.0.1:") != NULL);
    CHECK(strstr(buf, "/job") != NULL);
    CHECK(strstr(buf, "s3cret") == NULL);
    show(&l, before);
    launch(&l, "token_bad_url", (const char *[]){"--url", "tcp://127.0.0.1:99999/job?token=s3cret-bad", "true", NULL});
    CHECK_EQ(finish(&l, 10000), 2);
    slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "bad store URL") != NULL);
    CHECK(strstr(buf, "s3cret") == NULL);
    show(&l, before);
    launch(&l, "token_bad_endpoint", (const char *[]){"--rdzv-endpoint", "127.0.0.1:0x1?token=s3cret-ep", "true", NULL});
    CHECK_EQ(finish(&l, 10000), 2);
    slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "bad store URL") != NULL);
    CHECK(strstr(buf, "s3cret") == NULL);
    show(&l, before);
    CHECK_EQ(h_stop(&d), 0);
}

int main(void)
{
    h_init("rdzv_run", 150);
    cli = getenv("MUSTER_TEST_CLI");
    if (!cli || !*cli)
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
    H_RUN(t_scale_up, NULL);
    H_RUN(t_timeout_and_usage, NULL);
    H_RUN(t_token_not_shown, NULL);
    return h_finish();
}
