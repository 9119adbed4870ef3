/*
 * Where a byte-level TCPStore suite talks: musterd's TCPStore listener (the
 * default) or, with MUSTER_TEST_TS_TARGET=relay, the relay `muster run`
 * hosts for its workers, in front of a musterd of the suite's own.  The same
 * cases run against both, so the two servers cannot drift apart; where they
 * differ by design (the relay keeps a generation's keys under a prefix), a
 * case asserts each one's answer.
 */
#ifndef MUSTER_TEST_TSTARGET_H
#define MUSTER_TEST_TSTARGET_H

#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

/* A started target. */
struct tst {
    struct h_daemon d;     /* the musterd behind it */
    uint16_t port;         /* the TCPStore port */
    int relay;             /* 1: through `muster run`'s relay */
    char ns[64];           /* the namespace native clients find its keys in */
    char prefix[64];       /* their prefix there: "" for the listener, "torch/<gen>/" through the relay */
    pid_t launcher;        /* the relay's `muster run`, or 0 */
    char dir[4096];        /* the relay's files */
};

/* Start the target MUSTER_TEST_TS_TARGET names, with extra musterd flags; its TCPStore port, 0 on failure
 * (skips the program when the relay is asked for and MUSTER_TEST_CLI is not set). */
uint16_t tst_start(struct tst *t, const char *const *extra);
/* The native key of a TCPStore key (prefix + key), in a static buffer. */
const char *tst_key(const struct tst *t, const char *key);
/* The relay's report (its launcher's stderr, complete once tst_stop returned) in buf; "" without one. */
const char *tst_relay_report(const struct tst *t, char *buf, size_t n);
/* Stop the relay (if any) and the daemon; 0 when both ended cleanly. */
int tst_stop(struct tst *t);

#endif
