/*
 * Test harness shared by every muster test program: counted checks, a hard
 * timeout, a private temporary directory, and a real musterd started on
 * 127.0.0.1 port 0 whose port is read back from its --port-file.
 *
 * A test program calls h_init() first and returns h_finish() from main();
 * the exit status is non-zero when any check failed.  Children other than
 * daemons are registered with h_track(), so a hard timeout kills them too.  The musterd binary is
 * named by MUSTER_TEST_MUSTERD (set by tests/meson.build).
 */
#ifndef MUSTER_TEST_HARNESS_H
#define MUSTER_TEST_HARNESS_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Exit status meson reads as "skipped". */
#define H_SKIP 77

/* Count a check; print file:line and the expression when it fails. */
#define CHECK(cond) h_check(!!(cond), __FILE__, __LINE__, #cond)
/* Compare two integers; print both values when they differ. */
#define CHECK_EQ(a, b) h_check_eq((long long)(a), (long long)(b), __FILE__, __LINE__, #a, #b)
/* Compare two NUL-terminated strings (NULL is allowed and differs from any string). */
#define CHECK_STR(a, b) h_check_str((a), (b), __FILE__, __LINE__, #a, #b)
/* Compare two byte ranges. */
#define CHECK_MEM(a, alen, b, blen) h_check_mem((a), (alen), (b), (blen), __FILE__, __LINE__, #a, #b)
/* Run one test case fn(arg) and print its name with ok/FAIL. */
#define H_RUN(fn, arg)                        \
    do {                                      \
        int h_before_ = h_failures();         \
        fn(arg);                              \
        h_case_end(#fn, h_before_);           \
    } while (0)

/* A musterd started for a test. */
struct h_daemon {
    pid_t pid;                 /* 0 once reaped */
    uint16_t port;
    char dir[PATH_MAX];        /* private directory holding port file and log */
    char log[PATH_MAX];        /* the daemon's stderr */
    char url[64];              /* tcp://127.0.0.1:PORT */
    int status;                /* exit code after h_stop(), 128+signal when killed */
};

/* Start the harness: name for messages, hard timeout in seconds. */
void h_init(const char *name, unsigned timeout_s);
/* Print the summary, stop leftover daemons and tracked children, remove the temp dir; returns the exit status. */
int h_finish(void);
/* The private temporary directory of this test program. */
const char *h_tmpdir(void);
/* Monotonic milliseconds. */
int64_t h_now_ms(void);
/* Sleep ms milliseconds. */
void h_nap(int ms);
/* Read one line (up to n - 1 bytes, newline kept) from fd within ms; its length, or -1 when no whole
 * line came (end of file, or the time ran out).  buf is always NUL-terminated. */
int h_read_line(int fd, char *buf, size_t n, int ms);
/* Have the hard timeout (and h_finish) SIGKILL pid, a child that is not a daemon (a launcher, a forked
 * helper, a worker), with the process group it may lead, until h_untrack says it was reaped. */
void h_track(pid_t pid);
/* Forget a tracked child (reaped, or never started). */
void h_untrack(pid_t pid);
/* SIGKILL and reap the child *pid (when > 0) and close *fd (when >= 0), its report pipe; both are then -1. */
void h_kill_child(pid_t *pid, int *fd);
/* Exit with the skip status after saying why. */
void h_skip(const char *why);

/* Record one check. */
void h_check(int ok, const char *file, int line, const char *expr);
/* Record one integer comparison. */
void h_check_eq(long long a, long long b, const char *file, int line, const char *ea, const char *eb);
/* Record one string comparison. */
void h_check_str(const char *a, const char *b, const char *file, int line, const char *ea, const char *eb);
/* Record one byte-range comparison. */
void h_check_mem(const void *a, size_t alen, const void *b, size_t blen, const char *file, int line,
                 const char *ea, const char *eb);
/* Print a case result from the failure count before it (used by H_RUN). */
void h_case_end(const char *name, int failures_before);
/* Failures recorded so far. */
int h_failures(void);

/* Start musterd with --listen 127.0.0.1:0 --port-file plus extra (NULL-terminated, may be NULL). */
int h_start(struct h_daemon *d, const char *const *extra);
/* Send SIGTERM and reap, bounded; returns the exit code (or 128+signal, or -1 if it had to be killed). */
int h_stop(struct h_daemon *d);
/* Whether the daemon process is still running. */
int h_alive(struct h_daemon *d);
/* Ask the daemon for a stats dump (SIGUSR1) and return counter name, or -1 when absent. */
long long h_stat(struct h_daemon *d, const char *name);
/* The counter name from the last dump already in the log (e.g. the exit dump), or -1. */
long long h_stat_logged(const struct h_daemon *d, const char *name);
/* Print the daemon's log to stderr (for failure diagnosis). */
void h_dump_log(const struct h_daemon *d);
/* Write "tcp://127.0.0.1:PORT[/ns][?token=T]" into buf. */
void h_url(const struct h_daemon *d, const char *ns, const char *token, char *buf, size_t n);

#endif
