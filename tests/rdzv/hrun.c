/*
 * Helpers of the `muster run` tests (test_run.c, test_run_torchrun.c):
 * start the built CLI's launcher with its output in files, wait for it
 * with a bound, write shell-script workers, and read what they leave in
 * their $OUT directory.
 */
#include "hrun.h"

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

extern char **environ;

const char *hr_cli;
char hr_out_dir[PATH_MAX];

/* Sleep one polling step while awaiting a process exit or a file. */
void hr_nap(void)
{
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
}

/* Write an executable shell script named name into the test directory; returns its path. */
const char *hr_script(const char *name, const char *body)
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
void hr_fresh_out(const char *name)
{
    snprintf(hr_out_dir, sizeof hr_out_dir, "%s/%s", h_tmpdir(), name);
    mkdir(hr_out_dir, 0700);
}

/* Start `muster run ARGS...` with stdout/stderr in files named after tag. */
void hr_launch(struct hr_launcher *l, const char *tag, const char *const *args)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = hr_cli;
    argv[n++] = "run";
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    snprintf(l->out, sizeof l->out, "%s/%s.out", h_tmpdir(), tag);
    snprintf(l->err, sizeof l->err, "%s/%s.err", h_tmpdir(), tag);
    setenv("OUT", hr_out_dir, 1);
    setenv("MUSTER", hr_cli, 1);
    unsetenv("MUSTER_URL");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, l->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, l->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = posix_spawn(&l->pid, hr_cli, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    CHECK_EQ(rc, 0);
    if (rc)
        l->pid = -1;
    h_track(l->pid);
    l->status = -1;
}

/* Wait up to ms for the launcher to exit; returns its exit code (128+signal), or -1 after killing it. */
int hr_finish(struct hr_launcher *l, int ms)
{
    int64_t end = h_now_ms() + ms;
    int st;
    while (l->pid > 0 && h_now_ms() < end) {
        if (waitpid(l->pid, &st, WNOHANG) == l->pid) {
            h_untrack(l->pid);
            l->pid = 0;
            l->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return l->status;
        }
        hr_nap();
    }
    if (l->pid > 0) {
        printf("  launcher %d still running after %d ms; killing it\n", (int)l->pid, ms);
        kill(l->pid, SIGKILL);
        waitpid(l->pid, NULL, 0);
        h_untrack(l->pid);
        l->pid = 0;
    }
    return -1;
}

/* Read a small file into buf ("" when absent). */
const char *hr_slurp(const char *path, char *buf, size_t n)
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
const char *hr_out_file(const char *name, char *buf, size_t n)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", hr_out_dir, name);
    return hr_slurp(path, buf, n);
}

/* Print a launcher's stderr when a case failed (diagnosis). */
void hr_show(const struct hr_launcher *l, int failures_before)
{
    char buf[8192];
    if (h_failures() != failures_before)
        printf("---- %s ----\n%s---- end ----\n", l->err, hr_slurp(l->err, buf, sizeof buf));
}

/* Create the empty file $OUT/name (a signal to the workers); 0, or -1 (a failed check) when it cannot be. */
int hr_touch(const char *name)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", hr_out_dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    return f && fclose(f) == 0 ? 0 : -1;
}

/* Whether $OUT/name exists, waiting up to ms for it. */
int hr_await_file(const char *name, int ms)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", hr_out_dir, name);
    int64_t end = h_now_ms() + ms;
    for (;;) {
        if (access(path, F_OK) == 0)
            return 1;
        if (h_now_ms() >= end)
            return 0;
        hr_nap();
    }
}
