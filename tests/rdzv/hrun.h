/*
 * Helpers of the `muster run` tests: launchers of the built CLI (named by
 * MUSTER_TEST_CLI) with their output in files, bounded waits, shell-script
 * workers and the $OUT directory they write into.
 */
#ifndef MUSTER_TEST_HRUN_H
#define MUSTER_TEST_HRUN_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "harness.h"

/* The CLI under test (set by the test's main from MUSTER_TEST_CLI). */
extern const char *hr_cli;
/* The current case's output directory, exported to its workers as $OUT. */
extern char hr_out_dir[PATH_MAX];

/* A launcher process started by a test. */
struct hr_launcher {
    pid_t pid;
    char out[PATH_MAX];
    char err[PATH_MAX];
    int status;
};

/* Sleep one polling step while awaiting a process exit or a file. */
void hr_nap(void);
/* Write an executable shell script named name into the test directory; returns its path (static). */
const char *hr_script(const char *name, const char *body);
/* A fresh, empty output directory for a case's workers (exported to them as $OUT). */
void hr_fresh_out(const char *name);
/* Start `muster run ARGS...` with stdout/stderr in files named after tag. */
void hr_launch(struct hr_launcher *l, const char *tag, const char *const *args);
/* Wait up to ms for the launcher to exit; returns its exit code (128+signal), or -1 after killing it. */
int hr_finish(struct hr_launcher *l, int ms);
/* Read a small file into buf ("" when absent). */
const char *hr_slurp(const char *path, char *buf, size_t n);
/* Read $OUT/name into buf. */
const char *hr_out_file(const char *name, char *buf, size_t n);
/* Print a launcher's stderr when a case failed (diagnosis). */
void hr_show(const struct hr_launcher *l, int failures_before);
/* Whether $OUT/name exists, waiting up to ms for it. */
int hr_await_file(const char *name, int ms);
/* Create the empty file $OUT/name (a signal to the workers); 0, or -1 (a failed check) when it cannot be. */
int hr_touch(const char *name);

#endif
