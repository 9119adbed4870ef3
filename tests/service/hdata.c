/*
 * Helpers for tests of musterd's data directory (see hdata.h).
 */
#include "hdata.h"
#include "hhttp.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int hd_nstarted;

/* Exec musterd in the child with stderr to logpath (never returns). */
static void hd_exec(const char *bin, const char *logpath, const char *const *argv, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(fd, 2);
    execv(bin, (char *const *)argv);
    _exit(127);
}

/* Wait for the port file, or for the daemon to exit first; the port, or 0. */
static uint16_t hd_await_port(struct h_daemon *d, const char *pf)
{
    for (int i = 0; i < 1000; i++) {
        uint16_t port = hh_port_read(pf);
        if (port)
            return port;
        int ws;
        if (waitpid(d->pid, &ws, WNOHANG) == d->pid) {
            d->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
            d->pid = -d->pid; /* reaped: hd_reap answers from status */
            return 0;
        }
        usleep(10000); /* nothing to block on but the file and the child */
    }
    return 0;
}

/* Start musterd on port 0 with --data-dir dir and extra flags (see hdata.h). */
int hd_spawn(struct h_daemon *d, const char *dir, const char *const *extra)
{
    const char *bin = getenv("MUSTER_TEST_MUSTERD");
    if (!bin)
        h_skip("MUSTER_TEST_MUSTERD is not set");
    memset(d, 0, sizeof *d);
    /* The test's temp dir is short; longer paths are refused rather than cut. */
    if (snprintf(d->dir, sizeof d->dir / 2, "%s/run%d", h_tmpdir(), hd_nstarted++) >= (int)sizeof d->dir / 2)
        return -1;
    mkdir(d->dir, 0700);
    char pf[PATH_MAX];
    snprintf(pf, sizeof pf, "%.*s/port", (int)sizeof d->dir / 2, d->dir);
    snprintf(d->log, sizeof d->log, "%.*s/musterd.log", (int)sizeof d->dir / 2, d->dir);
    const char *argv[32] = {bin, "--listen", "127.0.0.1:0", "--port-file", pf, "--data-dir", dir};
    int n = 7;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t parent = getpid();
    d->pid = fork();
    if (d->pid == 0)
        hd_exec(bin, d->log, argv, parent);
    d->port = hd_await_port(d, pf);
    snprintf(d->url, sizeof d->url, "tcp://127.0.0.1:%u", d->port);
    return d->port ? 0 : -1;
}

/* Wait for d to exit within ms; its exit code (128+signal when killed), or -1 after killing it. */
int hd_reap(struct h_daemon *d, int ms)
{
    if (d->pid < 0)
        return d->status; /* already reaped while waiting for its port */
    int ws = 0;
    for (int i = 0; i < ms / 10; i++) {
        if (waitpid(d->pid, &ws, WNOHANG) == d->pid)
            return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        usleep(10000); /* a child's exit can only be polled for or blocked on */
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, &ws, 0);
    return -1;
}

/* SIGTERM d and expect a clean exit. */
void hd_stop(struct h_daemon *d)
{
    if (d->pid > 0)
        kill(d->pid, SIGTERM);
    CHECK_EQ(hd_reap(d, 10000), 0);
}

/* Whether d's log contains text. */
int hd_log_has(const struct h_daemon *d, const char *text)
{
    FILE *fp = fopen(d->log, "r");
    char line[4096];
    int found = 0;
    while (fp && !found && fgets(line, sizeof line, fp))
        found = strstr(line, text) != NULL;
    if (fp)
        fclose(fp);
    return found;
}

/* The path of the newest or oldest log segment in dir (see hdata.h). */
int hd_segment(const char *dir, int last, char *buf, size_t n)
{
    DIR *dp = opendir(dir);
    char best[64] = "";
    for (struct dirent *e; dp && (e = readdir(dp));) {
        if (strncmp(e->d_name, "log.", 4) != 0 || strlen(e->d_name) != 20)
            continue;
        int cmp = strcmp(e->d_name, best);
        if (!*best || (last ? cmp > 0 : cmp < 0))
            snprintf(best, sizeof best, "%s", e->d_name);
    }
    if (dp)
        closedir(dp);
    snprintf(buf, n, "%s/%s", dir, best);
    return *best ? 0 : -1;
}

/* The size of path in bytes, or -1. */
long long hd_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* XOR the byte at offset off of path with x; 0 on success. */
int hd_flip(const char *path, long long off, unsigned char x)
{
    int fd = open(path, O_RDWR);
    unsigned char c = 0;
    int ok = fd >= 0 && pread(fd, &c, 1, off) == 1;
    c ^= x;
    ok = ok && pwrite(fd, &c, 1, off) == 1;
    if (fd >= 0)
        close(fd);
    return ok ? 0 : -1;
}
