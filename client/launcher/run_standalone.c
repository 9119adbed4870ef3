/*
 * The private musterd of `muster run --standalone`: found next to the muster
 * binary (or in the build tree, or on PATH), started on 127.0.0.1 port 0
 * with a port file in a temporary directory, and stopped when the launcher
 * is done.
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How often the port file is looked at while musterd starts. */
#define RUN_SERVER_POLL_MS 10
/* How long a stopping musterd gets before SIGKILL. */
#define RUN_SERVER_STOP_MS 5000

/* Places to look for musterd, relative to the directory holding muster itself. */
static const char *const run_standalone_dirs[] = {
    ".",                   /* installed side by side */
    "../store-server",     /* build tree: build/client/muster */
    "../../store-server",  /* build tree: build/client/cli/muster */
};

/* Sleep for ms milliseconds (a poll interval, not a synchronisation). */
static void run_standalone_nap(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* Find the musterd binary; fills path (PATH_MAX bytes) or leaves plain "musterd" for a PATH search. */
static void run_standalone_find(char *path)
{
    char self[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
    snprintf(path, PATH_MAX, "musterd");
    if (k <= 0)
        return;
    self[k] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return;
    *slash = '\0';
    for (size_t i = 0; i < sizeof run_standalone_dirs / sizeof run_standalone_dirs[0]; i++) {
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof cand, "%s/%s/musterd", self, run_standalone_dirs[i]) >= (int)sizeof cand)
            continue;
        if (access(cand, X_OK) == 0) {
            snprintf(path, PATH_MAX, "%s", cand);
            return;
        }
    }
}

/* In the forked child: exec musterd listening on port 0; never returns. */
static void run_standalone_child(const char *path, const struct run_server *s, pid_t parent)
{
    setpgid(0, 0);
    /* A launcher killed outright still takes its private store down (SIGTERM drains it). */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(126);
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
    }
    /* The log goes to a file: its counter dump at exit is no business of the job's output. */
    char *const args[] = {(char *)path,    "--listen",          "127.0.0.1:0", "--port-file",
                          (char *)s->port_file, "--log-file", (char *)s->log_file, NULL};
    execvp(path, args);
    dprintf(STDERR_FILENO, RUN_TAG "cannot run %s: %s\n", path, strerror(errno));
    _exit(127);
}

/* Read the port file; returns the port, or 0 while it is absent or incomplete. */
static unsigned run_standalone_read_port(const char *port_file)
{
    char buf[32];
    int fd = open(port_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    /* musterd ends the line with a newline; without one the file may still be being written. */
    if (k <= 1 || buf[k - 1] != '\n')
        return 0;
    buf[k] = '\0';
    char *end;
    unsigned long port = strtoul(buf, &end, 10);
    return (*end == '\n' && port > 0 && port < 65536) ? (unsigned)port : 0;
}

/* Copy the private musterd's log to stderr (when it failed to start). */
static void run_standalone_show_log(const struct run_server *s)
{
    char buf[4096];
    int fd = open(s->log_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t k;
    while ((k = read(fd, buf, sizeof buf)) > 0)
        if (write(STDERR_FILENO, buf, (size_t)k) < 0)
            break;
    close(fd);
}

/* Start musterd on 127.0.0.1 port 0 and learn its port; returns 0 or -1 (message printed). */
int run_standalone_start(struct run_server *s, uint32_t timeout_ms)
{
    char path[PATH_MAX];
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/muster-run-XXXXXX");
    if (!mkdtemp(s->dir)) {
        fprintf(stderr, RUN_TAG "cannot create a temporary directory: %s\n", strerror(errno));
        s->dir[0] = '\0';
        return -1;
    }
    snprintf(s->port_file, sizeof s->port_file, "%s/port", s->dir);
    snprintf(s->log_file, sizeof s->log_file, "%s/musterd.log", s->dir);
    run_standalone_find(path);
    pid_t parent = getpid();
    s->pid = run_proc_fork();
    if (s->pid == 0)
        run_standalone_child(path, s, parent);
    if (s->pid < 0) {
        fprintf(stderr, RUN_TAG "fork: %s\n", strerror(errno));
        s->pid = 0;
        return -1;
    }
    for (uint32_t waited = 0; waited <= timeout_ms; waited += RUN_SERVER_POLL_MS) {
        if ((s->port = run_standalone_read_port(s->port_file)) > 0)
            return 0;
        if (run_standalone_died(s)) {
            fprintf(stderr, RUN_TAG "musterd (%s) exited before listening\n", path);
            run_standalone_show_log(s);
            return -1;
        }
        run_standalone_nap(RUN_SERVER_POLL_MS);
    }
    fprintf(stderr, RUN_TAG "musterd (%s) did not start listening within %u ms\n", path, timeout_ms);
    return -1;
}

/* Whether the private musterd has exited on its own (reaps it if so). */
int run_standalone_died(struct run_server *s)
{
    int st;
    if (s->pid <= 0)
        return 0;
    if (waitpid(s->pid, &st, WNOHANG) != s->pid)
        return 0;
    s->pid = 0;
    return 1;
}

/* Stop the private musterd and remove its directory; safe to call twice. */
void run_standalone_stop(struct run_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        int waited = 0;
        while (!run_standalone_died(s) && waited < RUN_SERVER_STOP_MS) {
            run_standalone_nap(RUN_SERVER_POLL_MS);
            waited += RUN_SERVER_POLL_MS;
        }
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->pid = 0;
        }
    }
    if (s->dir[0]) {
        unlink(s->port_file);
        unlink(s->log_file);
        rmdir(s->dir);
        s->dir[0] = '\0';
    }
}
