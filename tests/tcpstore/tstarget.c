/* The byte-level TCPStore suites' targets: musterd's listener, or `muster run`'s relay (tstarget.h). */
#include "tstarget.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tswire.h"

extern char **environ;

/* The worker the relay's launcher runs: it names the relay's port and generation, then stays until the
 * suite is done (bounded: 4 minutes). */
static const char tst_worker[] = "#!/bin/sh\n"
                                 "echo \"$MASTER_PORT $MUSTER_GENERATION\" > \"$TST_DIR/port.tmp\"\n"
                                 "mv \"$TST_DIR/port.tmp\" \"$TST_DIR/port\"\n"
                                 "i=0; while [ ! -e \"$TST_DIR/stop\" ] && [ $i -lt 12000 ]; do\n"
                                 "  sleep 0.02; i=$((i + 1)); done\n";

/* Write the worker script into t->dir; its path in path. */
static int tst_script(const struct tst *t, char *path, size_t n)
{
    snprintf(path, n, "%s/worker.sh", t->dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(tst_worker, f);
    fclose(f);
    return chmod(path, 0755);
}

/* Start `muster run` against t's daemon with the worker; 0 once the relay's port is known. */
static int tst_relay(struct tst *t, const char *cli)
{
    static int seq;
    char script[4200], url[200], out[4200], err[4200], pf[4200];
    snprintf(t->dir, sizeof t->dir, "%s/relay%d", h_tmpdir(), seq++);
    mkdir(t->dir, 0700);
    snprintf(t->ns, sizeof t->ns, "tsrelay%d", seq);
    snprintf(url, sizeof url, "%s/%s", t->d.url, t->ns);
    if (tst_script(t, script, sizeof script) != 0)
        return -1;
    const char *argv[] = {cli,  "run",           "--url", url, "--nproc-per-node", "1", "--max-restarts", "0",
                          "--rdzv-timeout", "30", script, NULL};
    snprintf(out, sizeof out, "%s/launcher.out", t->dir);
    snprintf(err, sizeof err, "%s/launcher.err", t->dir);
    setenv("TST_DIR", t->dir, 1);
    unsetenv("MUSTER_URL");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int rc = posix_spawn(&t->launcher, cli, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        t->launcher = 0;
        return -1;
    }
    snprintf(pf, sizeof pf, "%s/port", t->dir);
    unsigned port = 0;
    unsigned long long gen = 0;
    for (int i = 0; i < 750 && !port; i++) { /* 15 s */
        FILE *f = fopen(pf, "r");
        if (f) {
            if (fscanf(f, "%u %llu", &port, &gen) != 2)
                port = 0;
            fclose(f);
        }
        if (!port)
            usleep(20000);
    }
    if (!port || port > 65535)
        return -1;
    t->port = (uint16_t)port;
    snprintf(t->prefix, sizeof t->prefix, "torch/%llu/", gen);
    return 0;
}

/* Start the target MUSTER_TEST_TS_TARGET names; its TCPStore port, 0 on failure. */
uint16_t tst_start(struct tst *t, const char *const *extra)
{
    const char *kind = getenv("MUSTER_TEST_TS_TARGET");
    memset(t, 0, sizeof *t);
    t->relay = kind && strcmp(kind, "relay") == 0;
    if (!t->relay) {
        snprintf(t->ns, sizeof t->ns, "tcpstore");
        t->port = tsw_start(&t->d, extra);
        return t->port;
    }
    const char *cli = getenv("MUSTER_TEST_CLI");
    if (!cli || !*cli)
        h_skip("MUSTER_TEST_CLI is not set: the relay target needs the muster CLI");
    if (h_start(&t->d, extra) != 0)
        return 0;
    if (tst_relay(t, cli) != 0) {
        CHECK(!"the relay's launcher did not name its port within 15 s");
        return 0;
    }
    return t->port;
}

/* The native key of a TCPStore key, in a static buffer. */
const char *tst_key(const struct tst *t, const char *key)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s%s", t->prefix, key);
    return buf;
}

/* The relay's report (its launcher's stderr) in buf; "" without one. */
const char *tst_relay_report(const struct tst *t, char *buf, size_t n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/launcher.err", t->dir);
    FILE *f = t->relay ? fopen(path, "r") : NULL;
    size_t got = f ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = '\0';
    if (f)
        fclose(f);
    return buf;
}

/* Stop the relay (if any) and the daemon; 0 when both ended cleanly. */
int tst_stop(struct tst *t)
{
    int rc = 0;
    if (t->launcher > 0) {
        char stop[4200];
        snprintf(stop, sizeof stop, "%s/stop", t->dir);
        FILE *f = fopen(stop, "w");
        if (f)
            fclose(f);
        int status = -1;
        for (int i = 0; i < 1000; i++) { /* 20 s */
            if (waitpid(t->launcher, &status, WNOHANG) == t->launcher)
                break;
            status = -1;
            usleep(20000);
        }
        if (status == -1) {
            kill(t->launcher, SIGKILL);
            waitpid(t->launcher, &status, 0);
        }
        rc = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
        t->launcher = 0;
    }
    return h_stop(&t->d) != 0 ? -1 : rc;
}
