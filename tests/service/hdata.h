/*
 * Helpers for tests of musterd's data directory: start a daemon on a given
 * directory (port 0, port file), reap it, read its log, and find and damage
 * the directory's files the way a disk or an operator would.
 *
 * Daemons are started here rather than by h_start(), which keeps a small
 * fixed table: the crash test starts a hundred.  Each dies with the test
 * (PR_SET_PDEATHSIG) if the test itself is killed by its timeout.
 */
#ifndef MUSTER_TEST_HDATA_H
#define MUSTER_TEST_HDATA_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* Start musterd on port 0 with --data-dir dir and extra flags (NULL-terminated, may be NULL); fills d
 * (url, pid, log); 0 once it listens, -1 when it exited or wrote no port file within 10 s. */
int hd_spawn(struct h_daemon *d, const char *dir, const char *const *extra);
/* Wait for d to exit within ms; its exit code (128+signal when killed), or -1 after killing it. */
int hd_reap(struct h_daemon *d, int ms);
/* SIGTERM d and expect a clean exit. */
void hd_stop(struct h_daemon *d);
/* Whether d's log contains text. */
int hd_log_has(const struct h_daemon *d, const char *text);
/* The path of the newest (last = 1) or oldest (last = 0) log segment in dir, into buf; 0 on success. */
int hd_segment(const char *dir, int last, char *buf, size_t n);
/* The size of path in bytes, or -1. */
long long hd_size(const char *path);
/* XOR the byte at offset off of path with x; 0 on success. */
int hd_flip(const char *path, long long off, unsigned char x);

#endif
