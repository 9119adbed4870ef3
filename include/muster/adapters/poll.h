/*
 * libmuster with a plain poll() loop (header only; see muster/async.h).
 *
 * In a loop of your own, for each handle: muster_poll_prepare() fills a
 * struct pollfd and lowers *timeout_ms to the handle's next deadline;
 * after poll(), muster_poll_process() hands the revents to the handle.
 * muster_poll_once() does one such round for a single handle.
 *
 *     struct pollfd p;
 *     int t = -1;
 *     muster_poll_prepare(m, &p, &t);
 *     poll(&p, 1, t);
 *     muster_poll_process(m, &p);
 */
#ifndef MUSTER_ADAPTERS_POLL_H
#define MUSTER_ADAPTERS_POLL_H

#include <poll.h>

#include <muster/async.h>

/* Fill p for m, and lower *timeout_ms (-1: none yet) to m's next deadline. */
static inline void muster_poll_prepare(muster_t *m, struct pollfd *p, int *timeout_ms)
{
    int ev = muster_async_events(m);
    int t = muster_async_timeout(m);
    p->fd = muster_async_fd(m);
    p->events = (short)(((ev & MUSTER_ASYNC_READ) ? POLLIN : 0) | ((ev & MUSTER_ASYNC_WRITE) ? POLLOUT : 0));
    p->revents = 0;
    if (t >= 0 && (*timeout_ms < 0 || t < *timeout_ms))
        *timeout_ms = t;
}

/* Hand p's revents to m (a timeout is an empty revents); as muster_async_handle. */
static inline int muster_poll_process(muster_t *m, const struct pollfd *p)
{
    int ev = 0;
    if (p->revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))
        ev |= MUSTER_ASYNC_READ;
    if (p->revents & (POLLOUT | POLLERR))
        ev |= MUSTER_ASYNC_WRITE;
    return muster_async_handle(m, ev);
}

/* One round for m alone: wait up to timeout_ms (-1: until something is due)
 * and process; returns as muster_async_handle, or -1 when poll() failed. */
static inline int muster_poll_once(muster_t *m, int timeout_ms)
{
    struct pollfd p;
    muster_poll_prepare(m, &p, &timeout_ms);
    if (poll(&p, 1, timeout_ms) < 0)
        return -1;
    return muster_poll_process(m, &p);
}

#endif
