/*
 * libmuster on a libevent loop (header only; see muster/async.h).  The
 * library itself does not need libevent: include this header, link
 * libevent yourself.
 *
 *     struct event_base *base = event_base_new();
 *     muster_t *m = muster_connect(url, &err);
 *     muster_libevent_attach(m, base);
 *     muster_async_get(m, "k", 1, 5000, on_get, ctx);
 *     event_base_dispatch(base);
 *
 * The adapter keeps a read event, a write event armed while output waits,
 * and a timer for the next deadline, and follows the socket across a
 * failover reconnect.  muster_close() frees it.  Its hooks run on the
 * thread that changed the handle; when other threads call on the handle,
 * enable libevent's threading first (evthread_use_pthreads()).
 */
#ifndef MUSTER_ADAPTERS_LIBEVENT_H
#define MUSTER_ADAPTERS_LIBEVENT_H

#include <stdlib.h>

#include <event2/event.h>

#include <muster/async.h>

/* One handle's events on one base. */
typedef struct muster_libevent {
    muster_t *m;
    struct event_base *base;
    struct event *rd;
    struct event *wr;
    struct event *timer;
    int fd;
} muster_libevent;

/* A libevent callback: pass the readiness (or the timeout) to the handle. */
static inline void muster_libevent_on(evutil_socket_t fd, short what, void *arg)
{
    muster_libevent *a = (muster_libevent *)arg;
    (void)fd;
    int ev = ((what & EV_READ) ? MUSTER_ASYNC_READ : 0) | ((what & EV_WRITE) ? MUSTER_ASYNC_WRITE : 0);
    muster_async_handle(a->m, ev);
}

/* Free the socket's two events. */
static inline void muster_libevent_drop_io(muster_libevent *a)
{
    if (a->rd)
        event_free(a->rd);
    if (a->wr)
        event_free(a->wr);
    a->rd = a->wr = NULL;
    a->fd = -1;
}

/* The update hook: follow the socket, arm writing and the timer as asked. */
static inline void muster_libevent_update(void *arg, int fd, int events, int timeout_ms)
{
    muster_libevent *a = (muster_libevent *)arg;
    if (fd != a->fd) {
        muster_libevent_drop_io(a);
        if (fd >= 0) {
            a->rd = event_new(a->base, fd, EV_READ | EV_PERSIST, muster_libevent_on, a);
            a->wr = event_new(a->base, fd, EV_WRITE, muster_libevent_on, a);
            a->fd = fd;
            if (a->rd)
                event_add(a->rd, NULL);
        }
    }
    if (a->wr && (events & MUSTER_ASYNC_WRITE))
        event_add(a->wr, NULL);
    else if (a->wr)
        event_del(a->wr);
    if (timeout_ms < 0) {
        event_del(a->timer);
    } else {
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        event_add(a->timer, &tv);
    }
}

/* The detach hook: free the events and the adapter. */
static inline void muster_libevent_detach(void *arg)
{
    muster_libevent *a = (muster_libevent *)arg;
    muster_libevent_drop_io(a);
    event_free(a->timer);
    free(a);
}

/* Drive m from base; MUSTER_OK, MUSTER_ENOMEM, or MUSTER_EINVAL. */
static inline int muster_libevent_attach(muster_t *m, struct event_base *base)
{
    if (!m || !base)
        return MUSTER_EINVAL;
    muster_libevent *a = (muster_libevent *)calloc(1, sizeof *a);
    if (!a)
        return MUSTER_ENOMEM;
    a->m = m;
    a->base = base;
    a->fd = -1;
    a->timer = evtimer_new(base, muster_libevent_on, a);
    if (!a->timer) {
        free(a);
        return MUSTER_ENOMEM;
    }
    muster_loop hooks = {muster_libevent_update, muster_libevent_detach};
    int rc = muster_async_attach(m, &hooks, a);
    if (rc != MUSTER_OK)
        muster_libevent_detach(a);
    return rc;
}

#endif
