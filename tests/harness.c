/*
 * Test harness: counted checks, hard timeout, private temp dir, and the life
 * cycle of a real musterd (start on port 0, read its port file, SIGTERM,
 * reap).  Test programs are single processes, so plain statics hold the
 * harness state; the SIGALRM handler uses only async-signal-safe calls.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define H_MAX_DAEMONS 16
#define H_START_MS 10000   /* port file must appear within this */
#define H_STOP_MS 10000    /* a SIGTERM'd daemon must exit within this */
#define H_STAT_MS 5000     /* a SIGUSR1 dump must appear within this */
#define H_POLL_NS 5000000L /* poll step while awaiting a file or an exit */

static const char *h_name = "test";
static int h_nchecks;
static int h_nfails;
static char h_dir[PATH_MAX];
static int h_ndaemons;
static volatile pid_t h_pids[H_MAX_DAEMONS];
static char h_logs[H_MAX_DAEMONS][PATH_MAX];
/* Children other than daemons (launchers, forked helpers, workers) that the hard timeout kills. */
#define H_MAX_CHILDREN 256
static volatile pid_t h_children[H_MAX_CHILDREN];

/* SIGKILL every tracked child and the process group it may lead (async-signal-safe); returns how many. */
static int h_kill_tracked(void)
{
    int n = 0;
    for (int i = 0; i < H_MAX_CHILDREN; i++) {
        pid_t pid = h_children[i];
        if (pid <= 0)
            continue;
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        n++;
    }
    return n;
}

/* Kill every daemon still running and exit: the hard timeout fired. */
static void h_on_alarm(int sig)
{
    static const char msg[] = "\nFAIL: hard timeout: test program ran too long; daemon logs kept in ";
    (void)sig;
    (void)!write(2, msg, sizeof msg - 1);
    (void)!write(2, h_dir, strlen(h_dir));
    (void)!write(2, "\n", 1);
    for (int i = 0; i < H_MAX_DAEMONS; i++)
        if (h_pids[i] > 0)
            kill(h_pids[i], SIGKILL);
    /* A child left running would outlive the test and hold its ports, files and CPU. */
    h_kill_tracked();
    _exit(1);
}

/* Sleep one polling step while awaiting a condition. */
static void h_poll_step(void)
{
    struct timespec ts = {0, H_POLL_NS};
    nanosleep(&ts, NULL);
}

/* Start the harness: name for messages, hard timeout in seconds. */
void h_init(const char *name, unsigned timeout_s)
{
    const char *base = getenv("TMPDIR");
    h_name = name;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, h_on_alarm);
    alarm(timeout_s);
    snprintf(h_dir, sizeof h_dir, "%s/muster-%s-XXXXXX", base && *base ? base : "/tmp", name);
    if (!mkdtemp(h_dir)) {
        fprintf(stderr, "%s: mkdtemp %s: %s\n", name, h_dir, strerror(errno));
        exit(1);
    }
}

/* Remove one entry of the temp dir (nftw callback). */
static int h_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* Print a log file's warnings and errors (at most 60) to stderr: the tail alone is often the exit's stat
 * dump, and the line that explains a failure came long before it. */
static void h_dump_warnings(const char *path)
{
    FILE *f = fopen(path, "re");
    char line[1024];
    int shown = 0;
    if (!f)
        return;
    while (shown < 60 && fgets(line, sizeof line, f))
        if (strstr(line, " warn ") || strstr(line, " error ")) {
            if (!shown++)
                fprintf(stderr, "---- %s (warnings and errors) ----\n", path);
            fputs(line, stderr);
        }
    fclose(f);
}

/* Print a log file's warnings and its tail to stderr (for failure diagnosis). */
static void h_dump_file(const char *path)
{
    char buf[8192];
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    h_dump_warnings(path);
    if (fd < 0)
        return;
    /* Only the tail: a long-running daemon's log would bury the failure. */
    if (fstat(fd, &st) == 0 && st.st_size > (off_t)sizeof buf - 1)
        lseek(fd, st.st_size - (off_t)sizeof buf + 1, SEEK_SET);
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n > 0) {
        buf[n] = 0;
        fprintf(stderr, "---- %s (tail) ----\n%s\n---- end ----\n", path, buf);
    }
}

/* Print the summary, stop leftover daemons and tracked children, remove the temp dir; returns the exit status. */
int h_finish(void)
{
    for (int i = 0; i < h_ndaemons; i++) {
        if (h_pids[i] > 0) {
            kill(h_pids[i], SIGKILL);
            waitpid(h_pids[i], NULL, 0);
            h_pids[i] = 0;
        }
    }
    h_kill_tracked();
    for (int i = 0; i < H_MAX_CHILDREN; i++) {
        if (h_children[i] > 0)
            waitpid(h_children[i], NULL, 0);
        h_children[i] = 0;
    }
    for (int i = 0; h_nfails && i < h_ndaemons; i++)
        h_dump_file(h_logs[i]);
    printf("%s: %d checks, %d failed\n", h_name, h_nchecks, h_nfails);
    if (h_dir[0])
        nftw(h_dir, h_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return h_nfails ? 1 : 0;
}

/* The private temporary directory of this test program. */
const char *h_tmpdir(void)
{
    return h_dir;
}

/* Monotonic milliseconds. */
int64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleep ms milliseconds. */
void h_nap(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Read one line (up to n - 1 bytes, newline kept) from fd within ms; its length, or -1 when no whole
 * line came (end of file, or the time ran out).  buf is always NUL-terminated. */
int h_read_line(int fd, char *buf, size_t n, int ms)
{
    size_t got = 0;
    int64_t end = h_now_ms() + ms;
    while (got + 1 < n && h_now_ms() < end) {
        struct timeval tv = {0, 20000};
        fd_set rs;
        FD_ZERO(&rs);
        FD_SET(fd, &rs);
        if (select(fd + 1, &rs, NULL, NULL, &tv) <= 0)
            continue;
        if (read(fd, buf + got, 1) <= 0)
            break;
        if (buf[got++] == '\n')
            break;
    }
    buf[got] = '\0';
    return got > 0 && buf[got - 1] == '\n' ? (int)got : -1;
}

/* Have the hard timeout (and h_finish) SIGKILL pid, a child that is not a daemon, with the process group
 * it may lead, until h_untrack says it was reaped. */
void h_track(pid_t pid)
{
    for (int i = 0; i < H_MAX_CHILDREN && pid > 0; i++) {
        if (h_children[i] <= 0) {
            h_children[i] = pid;
            return;
        }
    }
    if (pid > 0)
        CHECK(!"too many tracked children in one test program");
}

/* Forget a tracked child (reaped, or never started). */
void h_untrack(pid_t pid)
{
    for (int i = 0; i < H_MAX_CHILDREN && pid > 0; i++)
        if (h_children[i] == pid)
            h_children[i] = 0;
}

/* SIGKILL and reap the child *pid (when > 0) and close *fd (when >= 0), its report pipe; both are then -1. */
void h_kill_child(pid_t *pid, int *fd)
{
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        h_untrack(*pid);
    }
    if (*fd >= 0)
        close(*fd);
    *pid = -1;
    *fd = -1;
}

/* Exit with the skip status after saying why. */
void h_skip(const char *why)
{
    printf("%s: skipped: %s\n", h_name, why);
    if (h_dir[0])
        nftw(h_dir, h_rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    exit(H_SKIP);
}

/* Record one check. */
void h_check(int ok, const char *file, int line, const char *expr)
{
    h_nchecks++;
    if (!ok) {
        h_nfails++;
        printf("FAIL %s:%d: %s\n", file, line, expr);
    }
}

/* Record one integer comparison. */
void h_check_eq(long long a, long long b, const char *file, int line, const char *ea, const char *eb)
{
    h_nchecks++;
    if (a != b) {
        h_nfails++;
        printf("FAIL %s:%d: %s == %s (%lld != %lld)\n", file, line, ea, eb, a, b);
    }
}

/* Record one string comparison. */
void h_check_str(const char *a, const char *b, const char *file, int line, const char *ea, const char *eb)
{
    h_nchecks++;
    if (!a || !b || strcmp(a, b) != 0) {
        h_nfails++;
        printf("FAIL %s:%d: %s == %s (\"%s\" != \"%s\")\n", file, line, ea, eb, a ? a : "(null)",
               b ? b : "(null)");
    }
}

/* Record one byte-range comparison. */
void h_check_mem(const void *a, size_t alen, const void *b, size_t blen, const char *file, int line,
                 const char *ea, const char *eb)
{
    h_nchecks++;
    if (alen != blen || (alen && (!a || !b || memcmp(a, b, alen) != 0))) {
        h_nfails++;
        printf("FAIL %s:%d: %s == %s (%zu vs %zu bytes, contents %s)\n", file, line, ea, eb, alen, blen,
               alen == blen ? "differ" : "not compared");
    }
}

/* Print a case result from the failure count before it (used by H_RUN). */
void h_case_end(const char *name, int failures_before)
{
    printf("%s %s\n", h_nfails == failures_before ? "ok  " : "FAIL", name);
}

/* Failures recorded so far. */
int h_failures(void)
{
    return h_nfails;
}

/* Read a whole small file into buf (NUL-terminated); returns bytes read or -1. */
static ssize_t h_read_file(const char *path, char *buf, size_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = 0, r;
    if (fd < 0)
        return -1;
    while ((size_t)got < n - 1 && (r = read(fd, buf + got, n - 1 - got)) > 0)
        got += r;
    close(fd);
    buf[got] = 0;
    return got;
}

/* Exec musterd in the child with the standard test flags plus extra. */
static void h_exec_daemon(const char *bin, const char *portfile, const char *log, const char *const *extra)
{
    const char *argv[64];
    int n = 0, fd;
    argv[n++] = bin;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--port-file";
    argv[n++] = portfile;
    for (int i = 0; extra && extra[i] && n < 63; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    fd = open("/dev/null", O_RDONLY);
    if (fd >= 0) {
        dup2(fd, 0);
        close(fd);
    }
    alarm(0);
    execv(bin, (char *const *)argv);
    fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
    _exit(127);
}

/* Decode a waitpid status into an exit code, or 128+signal. */
static int h_exit_code(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return -1;
}

/* Forget a reaped daemon in the registry. */
static void h_unregister(pid_t pid)
{
    for (int i = 0; i < h_ndaemons; i++)
        if (h_pids[i] == pid)
            h_pids[i] = 0;
}

/* Poll until the port file holds a full line; returns the port or 0. */
static uint16_t h_await_port(struct h_daemon *d, const char *portfile)
{
    char buf[64];
    int64_t end = h_now_ms() + H_START_MS;
    while (h_now_ms() < end) {
        ssize_t n = h_read_file(portfile, buf, sizeof buf);
        if (n > 0 && buf[n - 1] == '\n') {
            unsigned long p = strtoul(buf, NULL, 10);
            return p > 0 && p < 65536 ? (uint16_t)p : 0;
        }
        if (!h_alive(d))
            return 0;
        h_poll_step();
    }
    return 0;
}

/* Start musterd with --listen 127.0.0.1:0 --port-file plus extra (NULL-terminated, may be NULL). */
int h_start(struct h_daemon *d, const char *const *extra)
{
    const char *bin = getenv("MUSTER_TEST_MUSTERD");
    char portfile[PATH_MAX + 16];
    memset(d, 0, sizeof *d);
    if (!bin || !*bin)
        h_skip("MUSTER_TEST_MUSTERD is not set");
    if (h_ndaemons == H_MAX_DAEMONS) {
        CHECK(!"too many daemons in one test program");
        return -1;
    }
    if (snprintf(d->dir, sizeof d->dir, "%s/d%d", h_dir, h_ndaemons) >= (int)sizeof d->dir ||
        snprintf(d->log, sizeof d->log, "%s/musterd.log", d->dir) >= (int)sizeof d->log) {
        CHECK(!"temp dir path too long");
        return -1;
    }
    mkdir(d->dir, 0700);
    snprintf(portfile, sizeof portfile, "%s/port", d->dir);
    d->pid = fork();
    if (d->pid == 0)
        h_exec_daemon(bin, portfile, d->log, extra);
    if (d->pid < 0) {
        CHECK(!"fork musterd");
        return -1;
    }
    h_pids[h_ndaemons] = d->pid;
    snprintf(h_logs[h_ndaemons++], PATH_MAX, "%s", d->log);
    d->port = h_await_port(d, portfile);
    snprintf(d->url, sizeof d->url, "tcp://127.0.0.1:%u", d->port);
    CHECK(d->port != 0);
    if (!d->port) {
        /* h_finish prints the daemon's log, which usually says why. */
        if (d->pid > 0)
            printf("  musterd wrote no port file within %d ms\n", H_START_MS);
        else
            printf("  musterd exited with status %d before writing its port file\n", d->status);
        h_stop(d);
        return -1;
    }
    return 0;
}

/* Whether the daemon process is still running. */
int h_alive(struct h_daemon *d)
{
    int ws;
    if (d->pid <= 0)
        return 0;
    if (waitpid(d->pid, &ws, WNOHANG) == d->pid) {
        d->status = h_exit_code(ws);
        h_unregister(d->pid);
        d->pid = 0;
        return 0;
    }
    return 1;
}

/* Send SIGTERM and reap, bounded; returns the exit code (or 128+signal, or -1 if it had to be killed). */
int h_stop(struct h_daemon *d)
{
    int64_t end = h_now_ms() + H_STOP_MS;
    if (d->pid <= 0)
        return d->status;
    kill(d->pid, SIGTERM);
    while (h_alive(d) && h_now_ms() < end)
        h_poll_step();
    if (d->pid > 0) {
        fprintf(stderr, "%s: musterd %d ignored SIGTERM for %d ms; killing it\n", h_name, (int)d->pid,
                H_STOP_MS);
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        h_unregister(d->pid);
        d->pid = 0;
        d->status = -1;
    }
    return d->status;
}

/* Read the whole log into a malloc'd NUL-terminated buffer; NULL on failure. */
static char *h_slurp(const char *path)
{
    struct stat st;
    char *buf;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) < 0 || !(buf = malloc((size_t)st.st_size + 1))) {
        close(fd);
        return NULL;
    }
    n = read(fd, buf, (size_t)st.st_size);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return buf;
}

/* Count occurrences of needle in hay. */
static int h_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

/* The value of "stat NAME=" in the last complete dump of log text, or -1. */
static long long h_parse_stat(const char *log, const char *name)
{
    char key[128];
    const char *begin = NULL, *end, *p;
    for (p = log; (p = strstr(p, "stats begin")); p++)
        begin = p;
    if (!begin || !(end = strstr(begin, "stats end")))
        return -1;
    snprintf(key, sizeof key, "stat %s=", name);
    p = strstr(begin, key);
    return p && p < end ? strtoll(p + strlen(key), NULL, 10) : -1;
}

/* Ask the daemon for a stats dump (SIGUSR1) and return counter name, or -1 when absent. */
long long h_stat(struct h_daemon *d, const char *name)
{
    /* The dump is "stats begin", one "stat NAME=VALUE" line per counter, "stats end". */
    char *log = h_slurp(d->log);
    int before = log ? h_count(log, "stats end") : 0;
    int64_t end = h_now_ms() + H_STAT_MS;
    long long v = -1;
    free(log);
    if (d->pid <= 0 || kill(d->pid, SIGUSR1) < 0)
        return -1;
    while (h_now_ms() < end) {
        log = h_slurp(d->log);
        if (log && h_count(log, "stats end") > before) {
            v = h_parse_stat(log, name);
            free(log);
            return v;
        }
        free(log);
        h_poll_step();
    }
    fprintf(stderr, "%s: no stats dump within %d ms of SIGUSR1\n", h_name, H_STAT_MS);
    return -1;
}

/* The counter name from the last dump already in the log (e.g. the exit dump), or -1. */
long long h_stat_logged(const struct h_daemon *d, const char *name)
{
    char *log = h_slurp(d->log);
    long long v = log ? h_parse_stat(log, name) : -1;
    free(log);
    return v;
}

/* Print the daemon's log to stderr (for failure diagnosis). */
void h_dump_log(const struct h_daemon *d)
{
    h_dump_file(d->log);
}

/* Write "tcp://127.0.0.1:PORT[/ns][?token=T]" into buf. */
void h_url(const struct h_daemon *d, const char *ns, const char *token, char *buf, size_t n)
{
    snprintf(buf, n, "%s%s%s%s%s", d->url, ns ? "/" : "", ns ? ns : "", token ? "?token=" : "",
             token ? token : "");
}
