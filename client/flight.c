/*
 * Calls in flight: the one engine under every call of the library, the
 * synchronous ones (call.c, pipeline.c) and the asynchronous ones
 * (async.c).  A call is submitted (its frame queued and written at once
 * when the socket takes it), matched to its answer by request id, and
 * completed exactly once: answered, timed out at its client deadline, lost
 * with its connection, or cancelled by muster_close.  Completion functions
 * run after the handle's lock is released, so they may submit again.
 *
 * Threads.  Every touch of the handle happens under m->lock.  Whoever
 * needs progress either runs one step of socket work (flight_handle, from
 * the caller's loop) or waits in flight_wait: one waiting thread at a time
 * is the driver and polls the socket (and the wake eventfd) with the lock
 * released; the others sleep on m->cond until their call completes or the
 * driver lets go.  A submit from another thread writes its own frame and
 * pokes the eventfd, so a thread parked in a long blocking get never delays
 * another thread's set: the driver reads the set's answer and completes it.
 *
 * Failover (m->url.failover).  The request is kept packed so that it can
 * be sent again.  When the connection is lost, calls in flight that are
 * safe to repeat (the op list's OPL_RESEND) wait unsent and the others
 * complete MUSTER_ECONN, undecided; a NOT_LEADER answer makes its call
 * unsent (it never ran).  The next step reconnects (failover_ready, which
 * blocks the stepping thread up to the earliest deadline among the unsent
 * calls) and sends them again with the time they have left.
 *
 * Deadlines.  A call's client deadline is its timeout plus CALL_GRACE_MS.
 * When it passes for a call the server has not answered, the handle breaks
 * with MUSTER_ETIMEDOUT as a synchronous call always did: the server did
 * not answer a request it had a second longer to answer, so the connection
 * is not trusted.  The handle keeps a bound no deadline is before
 * (fl_soonest: lowered at each submit, made exact by a scan), so a step
 * scans the calls only once that bound has passed, not on every answer:
 * with thousands in flight (a pipelining relay) a step stays O(1).
 */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <muster/async.h>

#include "internal.h"

/* uthash must not exit() on allocation failure inside a library. */
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (flight_oom = 1)
#include <uthash.h>

/* Longest a waiting thread sleeps before it looks again (it is woken sooner by every completion). */
#define FLIGHT_NAP_MS 1000u

/* One call in flight. */
struct flight {
    uint64_t id;                   /* request id on the current connection; 0 while unsent */
    Muster__Request__OpCase op;
    uint64_t deadline;             /* the client deadline */
    uint64_t started_us;
    uint8_t *req;                  /* the packed request (failover handles: to send it again) */
    size_t req_len;
    unsigned sends;
    int last_rc;                   /* why the last reconnect failed, for an unsent call that expires */
    flight_fn fn;
    void *arg;
    struct flight_result res;
    char detail[256];
    struct flight *prev;
    struct flight *next;
    UT_hash_handle hh;
};

/* Take the handle's lock. */
void flight_lock(muster_t *m)
{
    pthread_mutex_lock(&m->lock);
}

/* Release the handle's lock. */
void flight_unlock(muster_t *m)
{
    pthread_mutex_unlock(&m->lock);
}

/* Interrupt the driver's poll, so it sees new output or a new deadline. */
static void flight_wake(muster_t *m)
{
    uint64_t one = 1;
    if (m->driving && write(m->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        log_emit(m, MUSTER_LOG_DEBUG, "wake: %s", strerror(errno));
}

/* Append f to the list of calls in flight. */
static void flight_link(muster_t *m, struct flight *f)
{
    f->prev = m->fl_tail;
    f->next = NULL;
    if (m->fl_tail)
        m->fl_tail->next = f;
    else
        m->fl_head = f;
    m->fl_tail = f;
    if (!m->fl_soonest || f->deadline < m->fl_soonest)
        m->fl_soonest = f->deadline;
}

/* Forget f's request id (its answer, should one still come, is dropped). */
static void flight_unsend(muster_t *m, struct flight *f)
{
    if (f->id)
        HASH_DEL(m->fl_ids, f);
    f->id = 0;
}

/* Unlink f from the calls in flight. */
static void flight_unlink(muster_t *m, struct flight *f)
{
    flight_unsend(m, f);
    if (f->prev)
        f->prev->next = f->next;
    else
        m->fl_head = f->next;
    if (f->next)
        f->next->prev = f->prev;
    else
        m->fl_tail = f->prev;
    f->prev = f->next = NULL;
}

/* Complete f with rc (and resp, when answered): it moves to the done list,
 * its callback runs once the lock is released. */
static void flight_finish(muster_t *m, struct flight *f, int rc, Muster__Response *resp)
{
    flight_unlink(m, f);
    f->res.rc = rc;
    f->res.resp = resp;
    f->res.answered = resp != NULL;
    f->res.op = f->op;
    f->res.started_us = f->started_us;
    snprintf(f->detail, sizeof f->detail, "%s", rc == MUSTER_OK ? "" : m->last_error);
    f->res.detail = f->detail;
    if (m->done_tail)
        m->done_tail->next = f;
    else
        m->done_head = f;
    m->done_tail = f;
}

/* Run the callbacks of the completed calls in list (the lock is not held) and free them. */
static void flight_run_done(muster_t *m, struct flight *list)
{
    while (list) {
        struct flight *f = list;
        list = f->next;
        if (f->fn)
            f->fn(m, &f->res, f->arg);
        wire_free(f->res.resp);
        free(f->req);
        free(f);
    }
}

/* Detach the done list (under the lock) for flight_run_done. */
static struct flight *flight_take_done(muster_t *m)
{
    struct flight *list = m->done_head;
    m->done_head = m->done_tail = NULL;
    return list;
}

/* Queue req for f on the current connection and index it by its new id; a muster_err. */
static int flight_send(muster_t *m, struct flight *f, Muster__Request *req)
{
    int flight_oom = 0;
    int rc = wire_queue(m, req, &f->id);
    if (rc != MUSTER_OK) {
        f->id = 0;
        return rc;
    }
    HASH_ADD(hh, m->fl_ids, id, sizeof f->id, f);
    if (flight_oom) {
        /* The frame is queued already: the answer will find no call and be dropped. */
        f->id = 0;
        return error_set(m, MUSTER_ENOMEM, "out of memory indexing a request");
    }
    f->sends++;
    return MUSTER_OK;
}

/* Send f's kept request again on a new connection, with the time it has left; a muster_err. */
static int flight_resend(muster_t *m, struct flight *f)
{
    if (f->sends >= FAILOVER_MAX_RESENDS)
        return error_set(m, MUSTER_ECONN, "gave up after sending the request %u times", f->sends);
    Muster__Request *req = muster__request__unpack(NULL, f->req_len, f->req);
    if (!req)
        return error_set(m, MUSTER_ENOMEM, "out of memory sending a request again");
    if (f->sends > 0)
        failover_set_timeout(req, f->deadline);
    int rc = flight_send(m, f, req);
    muster__request__free_unpacked(req, NULL);
    return rc;
}

/* Match the answers read so far to their calls; a NOT_LEADER answer on a
 * failover handle leaves its call unsent and sends the handle to the leader. */
static void flight_collect(muster_t *m)
{
    Muster__Response *resp;
    char leader[sizeof m->last_error] = "";
    while ((resp = wire_take(m)) != NULL) {
        struct flight *f = NULL;
        HASH_FIND(hh, m->fl_ids, &resp->id, sizeof resp->id, f);
        if (!f) {
            wire_free(resp);
            continue;
        }
        int rc = wire_check(m, resp, f->op);
        if (rc == MUSTER_ENOTLEADER && m->url.failover) {
            memcpy(leader, m->last_error, sizeof leader);
            flight_unsend(m, f);
            m->fl_unsent = 1;
            wire_free(resp);
            continue;
        }
        flight_finish(m, f, rc, resp);
    }
    /* Answers already read are settled first: only the rest are left to decide. */
    if (leader[0] && !m->broken)
        failover_redirect(m, leader);
}

/* Complete the calls whose client deadline passed; one the server owed an answer breaks the handle. */
static void flight_expire(muster_t *m)
{
    uint64_t now = deadline_now(), soonest = 0;
    if (m->fl_soonest > now)
        return; /* nothing is due yet: no scan */
    struct flight *f = m->fl_head, *next;
    for (; f; f = next) {
        next = f->next;
        if (f->deadline > now) {
            if (!soonest || f->deadline < soonest)
                soonest = f->deadline;
            continue;
        }
        if (f->id && !m->broken) {
            error_break(m, MUSTER_ETIMEDOUT, "no reply to request %llu before the client deadline",
                        (unsigned long long)f->id);
            flight_finish(m, f, MUSTER_ETIMEDOUT, NULL);
        } else if (f->id || !f->last_rc) {
            flight_finish(m, f, error_set(m, MUSTER_ETIMEDOUT, "no reply before the client deadline"), NULL);
        } else {
            flight_finish(m, f, f->last_rc, NULL);
        }
    }
    m->fl_soonest = soonest;
}

/* Whether a call lost with this broken connection may wait for the next one. */
static int flight_survives(const muster_t *m)
{
    return m->url.failover && (failover_lost(m) || m->broken == MUSTER_ETIMEDOUT);
}

/* Settle the calls sent on a connection that broke: those failover may
 * send again wait unsent, the others complete with the handle's error. */
static void flight_orphan(muster_t *m)
{
    if (!m->broken)
        return;
    struct flight *f = m->fl_head, *next;
    char why[sizeof m->last_error];
    memcpy(why, m->last_error, sizeof why);
    for (; f; f = next) {
        next = f->next;
        if (!f->id && flight_survives(m))
            continue;
        if (!flight_survives(m)) {
            flight_finish(m, f, m->broken, NULL);
        } else if (failover_idempotent(f->op)) {
            flight_unsend(m, f);
            m->fl_unsent = 1;
        } else {
            why[96] = '\0';
            error_set(m, MUSTER_ECONN, "connection lost with the request in flight (%s): it may or may not "
                                       "have taken effect, so it was not sent again", why);
            f->res.undecided = 1;
            flight_finish(m, f, MUSTER_ECONN, NULL);
            memcpy(m->last_error, why, sizeof why);
        }
    }
}

/* The earliest client deadline among unsent calls (0 when there is none). */
static uint64_t flight_unsent_deadline(const muster_t *m)
{
    uint64_t d = 0;
    for (const struct flight *f = m->fl_head; f; f = f->next)
        if (!f->id && (!d || f->deadline < d))
            d = f->deadline;
    return d;
}

/* On a failover handle with unsent calls: reconnect (blocking, up to the
 * earliest of their deadlines) and send them; failures complete them. */
static void flight_recover(muster_t *m)
{
    if (!m->fl_unsent)
        return; /* no call became unsent since the last look: no scan on every step */
    uint64_t deadline = flight_unsent_deadline(m);
    if (!deadline) {
        m->fl_unsent = 0;
        return;
    }
    int rc = m->broken ? failover_ready(m, deadline) : MUSTER_OK;
    struct flight *f = m->fl_head, *next;
    for (; f; f = next) {
        next = f->next;
        if (f->id)
            continue;
        if (rc != MUSTER_OK) {
            f->last_rc = rc;
            if (!failover_lost(m) || deadline_left(f->deadline) == 0)
                flight_finish(m, f, rc, NULL);
            continue;
        }
        int src = flight_resend(m, f);
        if (src != MUSTER_OK)
            flight_finish(m, f, src, NULL);
    }
    if (rc == MUSTER_OK)
        wire_write_some(m);
}

/* Milliseconds until the next deadline (-1: none; 0: work is due now). */
static int flight_next_ms(const muster_t *m)
{
    if (m->done_head || m->stash || tls_pending(m) || (m->broken && m->fl_head))
        return 0;
    /* A bound passed early only wakes the loop for a scan that makes it exact (flight_expire). */
    return m->fl_head && m->fl_soonest ? deadline_left(m->fl_soonest) : -1;
}

/* Tell the caller's loop (async.c's hooks) what the handle waits for now, when that changed. */
static void flight_notify(muster_t *m)
{
    if (!m->loop_update)
        return;
    int fd = m->fd, ms = flight_next_ms(m);
    int events = (fd >= 0 ? MUSTER_ASYNC_READ : 0) | (fd >= 0 && wire_pending_out(m) ? MUSTER_ASYNC_WRITE : 0);
    uint64_t deadline = ms < 0 ? 0 : deadline_after((uint64_t)ms);
    if (fd == m->loop_fd && events == m->loop_events && deadline == m->loop_deadline && ms != 0)
        return;
    m->loop_fd = fd;
    m->loop_events = events;
    m->loop_deadline = deadline;
    m->loop_update(m->loop_arg, fd, events, ms);
}

/* One step of work under the lock: read and write what revents allows,
 * settle answers, deadlines and lost connections, reconnect when due. */
static void flight_step(muster_t *m, short revents)
{
    if (!m->broken && m->fd >= 0) {
        if ((revents & (POLLIN | POLLHUP | POLLERR)) || tls_pending(m))
            wire_pump(m, 0, 0);
        wire_write_some(m);
    }
    flight_collect(m);
    flight_expire(m);
    flight_orphan(m);
    if (m->url.failover)
        flight_recover(m);
    flight_notify(m);
}

/* Submit req as a call in flight; see internal.h. */
int flight_submit(muster_t *m, Muster__Request *req, uint32_t timeout_ms, flight_fn fn, void *arg)
{
    flight_lock(m);
    int rc = MUSTER_OK;
    if (m->closing)
        rc = error_set(m, MUSTER_ECANCELED, "the handle is closing");
    else if (m->broken && !m->url.failover)
        rc = error_set(m, MUSTER_ECONN, "connection unusable after an earlier error (%s)",
                       muster_strerror(m->broken));
    struct flight *f = rc == MUSTER_OK ? calloc(1, sizeof *f) : NULL;
    if (rc == MUSTER_OK && !f)
        rc = error_set(m, MUSTER_ENOMEM, "out of memory submitting a call");
    if (rc != MUSTER_OK) {
        flight_unlock(m);
        return rc;
    }
    f->op = req->op_case;
    f->fn = fn;
    f->arg = arg;
    f->started_us = deadline_now_us();
    f->deadline = timeout_ms == FLIGHT_FOREVER ? UINT64_MAX : deadline_after((uint64_t)timeout_ms + CALL_GRACE_MS);
    if (m->url.failover) {
        f->req_len = muster__request__get_packed_size(req);
        f->req = malloc(f->req_len ? f->req_len : 1);
        if (!f->req)
            rc = error_set(m, MUSTER_ENOMEM, "out of memory keeping a request");
        else
            muster__request__pack(req, f->req);
        /* A leader that died while the handle was idle shows as a readable
         * EOF: notice it now, so the call goes to a new connection rather
         * than into a dead one (where an add would come back undecided). */
        if (!m->broken)
            wire_pump(m, 0, 0);
    }
    if (rc == MUSTER_OK && !m->broken)
        rc = flight_send(m, f, req);
    if (rc != MUSTER_OK) {
        free(f->req);
        free(f);
        flight_unlock(m);
        return rc;
    }
    flight_link(m, f);
    if (!f->id)
        m->fl_unsent = 1; /* submitted while the connection is down: failover sends it */
    if (!m->broken)
        wire_write_some(m);
    flight_wake(m);
    flight_notify(m);
    flight_unlock(m);
    return MUSTER_OK;
}

/* Do the socket work that revents allows and run the completed calls' callbacks (no lock held). */
void flight_handle(muster_t *m, short revents)
{
    flight_lock(m);
    flight_step(m, revents);
    struct flight *done = flight_take_done(m);
    /* What this step read (an event, say) may be what a driver polls for. */
    pthread_cond_broadcast(&m->cond);
    flight_wake(m);
    flight_unlock(m);
    flight_run_done(m, done);
}

/* What the driving loop should wait for (see internal.h). */
void flight_wants(muster_t *m, int *fd, short *events, int *timeout_ms)
{
    flight_lock(m);
    *fd = m->fd;
    *events = (short)((m->fd >= 0 ? POLLIN : 0) | (m->fd >= 0 && wire_pending_out(m) ? POLLOUT : 0));
    *timeout_ms = flight_next_ms(m);
    flight_unlock(m);
}

/* Poll the socket and the wake eventfd with the lock released, then step;
 * called and returns with the lock held, the completed calls' callbacks run. */
static void flight_drive(muster_t *m, uint64_t deadline)
{
    int ms = flight_next_ms(m);
    if (deadline && (ms < 0 || deadline_left(deadline) < ms))
        ms = deadline_left(deadline);
    struct pollfd p[2] = {{.fd = m->fd, .events = POLLIN}, {.fd = m->wake_fd, .events = POLLIN}};
    if (m->fd >= 0 && wire_pending_out(m))
        p[0].events |= POLLOUT;
    m->driving = 1;
    flight_unlock(m);
    int n = poll(p, 2, ms < 0 ? (int)FLIGHT_NAP_MS * 60 : ms);
    flight_lock(m);
    m->driving = 0;
    uint64_t drained;
    if (n > 0 && (p[1].revents & POLLIN) && read(m->wake_fd, &drained, sizeof drained) < 0)
        drained = 0;
    /* A reconnect by another thread meanwhile makes these bits another socket's. */
    flight_step(m, n > 0 && p[0].fd == m->fd ? p[0].revents : 0);
    struct flight *done = flight_take_done(m);
    pthread_cond_broadcast(&m->cond);
    flight_unlock(m);
    flight_run_done(m, done);
    flight_lock(m);
}

/* Sleep on the handle's condition until woken, deadline (0: none), or a nap. */
static void flight_nap(muster_t *m, uint64_t deadline)
{
    uint64_t until = deadline_after(FLIGHT_NAP_MS);
    if (deadline && deadline < until)
        until = deadline;
    /* deadline_now is CLOCK_MONOTONIC milliseconds, the clock the condition was made with. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ms = (uint64_t)deadline_left(until);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&m->cond, &m->lock, &ts);
}

/* Drive or wait until ready(m, arg) holds or deadline passes; see internal.h. */
int flight_wait(muster_t *m, int (*ready)(muster_t *m, void *arg), void *arg, uint64_t deadline)
{
    int rc = MUSTER_OK;
    flight_lock(m);
    while (!ready(m, arg)) {
        if (deadline && deadline_left(deadline) == 0) {
            rc = MUSTER_ETIMEDOUT;
            break;
        }
        if (m->driving)
            flight_nap(m, deadline);
        else
            flight_drive(m, deadline);
    }
    flight_unlock(m);
    return rc;
}

/* Decrement *count under the lock and wake the waiters.  The waiter may
 * be the driver itself (it took over while this callback was on its way),
 * so its poll is interrupted too, not only the condition signalled. */
void flight_signal(muster_t *m, int *count)
{
    flight_lock(m);
    (*count)--;
    flight_broadcast(m);
    flight_unlock(m);
}

/* Wake whoever waits on the handle; see internal.h. */
void flight_broadcast(muster_t *m)
{
    pthread_cond_broadcast(&m->cond);
    flight_wake(m);
}

/* Complete every call in flight with MUSTER_ECANCELED and refuse new ones. */
void flight_cancel_all(muster_t *m)
{
    flight_lock(m);
    m->closing = 1;
    while (m->fl_head) {
        error_set(m, MUSTER_ECANCELED, "the handle was closed with the call in flight");
        flight_finish(m, m->fl_head, MUSTER_ECANCELED, NULL);
    }
    struct flight *done = flight_take_done(m);
    flight_unlock(m);
    flight_run_done(m, done);
}
