/*
 * Calls: the entry point of every synchronous op of the public API (kv.c,
 * rdzv.c, watch.c).  call_run submits the request as a call in flight
 * (flight.c) and waits for it to complete; the asynchronous calls
 * (async.c) submit the same way with a callback, so deadlines, errors,
 * failover and re-sending are one code path for both.  The wait drives the
 * socket or sleeps while another thread drives it, so threads that share
 * a handle do not hold each other up.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* A synchronous caller's view of its call: filled by call_done. */
struct call_sync {
    int pending;
    int rc;
    Muster__Response *resp;
    char detail[sizeof ((muster_t *)0)->last_error];
};

/* The effective timeout for a call: timeout_ms, or the handle default for 0. */
uint32_t call_timeout(const muster_t *m, uint32_t timeout_ms)
{
    return timeout_ms ? timeout_ms : m->default_timeout_ms;
}

/* Completion of a synchronous call: keep the answer for the waiting caller. */
static void call_done(muster_t *m, struct flight_result *r, void *arg)
{
    struct call_sync *s = arg;
    s->rc = r->rc;
    if (r->rc == MUSTER_OK) {
        s->resp = r->resp;
        r->resp = NULL;
    }
    snprintf(s->detail, sizeof s->detail, "%s", r->detail);
    flight_signal(m, &s->pending);
}

/* Whether the synchronous call in arg completed (under the lock). */
static int call_ready(muster_t *m, void *arg)
{
    (void)m;
    return ((struct call_sync *)arg)->pending == 0;
}

/* Send req and wait for its response; see internal.h. */
int call_run(muster_t *m, Muster__Request *req, Muster__Response **resp, uint32_t timeout_ms)
{
    *resp = NULL;
    struct call_sync s = {.pending = 1};
    int rc = flight_submit(m, req, timeout_ms, call_done, &s);
    if (rc != MUSTER_OK)
        return rc;
    flight_wait(m, call_ready, &s, 0);
    /* The call's own message, whatever other threads' calls recorded meanwhile; a success clears it, so
     * a later failure's text never reads as an earlier call's. */
    flight_lock(m);
    if (s.rc != MUSTER_OK)
        memcpy(m->last_error, s.detail, sizeof s.detail);
    else
        m->last_error[0] = '\0';
    flight_unlock(m);
    *resp = s.resp;
    return s.rc;
}

/* Send req and wait for its response, which says nothing more than its status; the status. */
int call_run_status(muster_t *m, Muster__Request *req, uint32_t timeout_ms)
{
    Muster__Response *resp;
    int rc = call_run(m, req, &resp, timeout_ms);
    wire_free(resp);
    return rc;
}

/* Record (or clear, for MUSTER_OK) a failure's reason on m for a layered library. */
int muster_set_error(muster_t *m, int code, const char *fmt, ...)
{
    va_list ap;
    if (!m)
        return code;
    flight_lock(m);
    if (code == MUSTER_OK || !fmt) {
        m->last_error[0] = '\0';
    } else {
        va_start(ap, fmt);
        vsnprintf(m->last_error, sizeof m->last_error, fmt, ap);
        va_end(ap);
    }
    flight_unlock(m);
    return code;
}
