/*
 * The public watch calls: muster_watch and muster_unwatch, and
 * muster_next_event, which waits on the wire for the event queue
 * (event.c) to fill.  On a failover handle a watch is recorded so that
 * failover.c registers it again after a reconnect, and the caller keeps
 * the id it was given; an unwatch forgets the record first, so a
 * reconnect does not bring the watch back.
 */
#include <poll.h>

#include "internal.h"

/* Watch keys with prefix; events arrive through muster_next_event(). */
int muster_watch(muster_t *m, const char *prefix, uint64_t *watch_id, uint32_t timeout_ms)
{
    if (!m || !prefix)
        return MUSTER_EINVAL;
    Muster__WatchReq op = MUSTER__WATCH_REQ__INIT;
    op.prefix = (char *)prefix;
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_WATCH;
    req.watch = &op;
    Muster__Response *resp;
    int rc = call_run(m, &req, &resp, call_timeout(m, timeout_ms));
    uint64_t id = rc == MUSTER_OK ? resp->watch->watch_id : 0;
    if (rc == MUSTER_OK && m->url.failover) {
        flight_lock(m);
        rc = event_watch_add(m, prefix, id);
        id = m->watch_seq;
        if (rc != MUSTER_OK)
            error_set(m, rc, "out of memory recording a watch");
        flight_unlock(m);
    }
    if (rc == MUSTER_OK && watch_id)
        *watch_id = id;
    wire_free(resp);
    return rc;
}

/* Send one unwatch for the server's id sid before deadline. */
static int watch_unwatch_once(muster_t *m, uint64_t sid, uint64_t deadline)
{
    Muster__UnwatchReq op = MUSTER__UNWATCH_REQ__INIT;
    op.watch_id = sid;
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_UNWATCH;
    req.unwatch = &op;
    Muster__Response *resp;
    int rc = wire_once(m, &req, &resp, deadline);
    wire_free(resp);
    return rc;
}

/* Stop a watch on a failover handle: it is forgotten first, so a reconnect
 * does not bring it back, and a watch that died with its connection is gone. */
static int watch_unwatch_failover(muster_t *m, uint64_t watch_id, uint64_t deadline)
{
    if (!event_watch_known(m, watch_id))
        return error_set(m, MUSTER_ENOTFOUND, "no watch %llu on this handle", (unsigned long long)watch_id);
    uint64_t sid = event_watch_server_id(m, watch_id), gen = m->conn_gen;
    event_watch_remove(m, watch_id);
    int rc = failover_ready(m, deadline);
    if (rc != MUSTER_OK || gen != m->conn_gen)
        return rc;
    rc = watch_unwatch_once(m, sid, deadline);
    if (failover_lost(m))
        return MUSTER_OK;
    if (rc == MUSTER_ENOTLEADER && !m->broken)
        failover_redirect(m, m->last_error);
    return rc == MUSTER_ENOTLEADER ? MUSTER_OK : rc;
}

/* Stop a watch.  The one round trip runs under the handle's lock: an
 * unwatch must not be sent again on a new connection (the server's id
 * would name another watch there), which a call in flight would do. */
int muster_unwatch(muster_t *m, uint64_t watch_id, uint32_t timeout_ms)
{
    if (!m)
        return MUSTER_EINVAL;
    uint64_t deadline = deadline_after((uint64_t)call_timeout(m, timeout_ms) + CALL_GRACE_MS);
    int rc;
    flight_lock(m);
    if (m->url.failover)
        rc = watch_unwatch_failover(m, watch_id, deadline);
    else if (m->broken)
        rc = error_set(m, MUSTER_ECONN, "connection unusable after an earlier error (%s)",
                       muster_strerror(m->broken));
    else
        rc = watch_unwatch_once(m, watch_id, deadline);
    flight_unlock(m);
    return rc;
}

/* Whether an event waits, or the connection broke (under the lock). */
static int watch_ready(muster_t *m, void *arg)
{
    (void)arg;
    return m->ev_head || m->broken;
}

/* Next pushed event, waiting up to timeout_ms (0 = do not wait).  The wait
 * drives the socket like any call's, so other threads' calls complete. */
int muster_next_event(muster_t *m, muster_event **ev, uint32_t timeout_ms)
{
    if (!m || !ev)
        return MUSTER_EINVAL;
    *ev = NULL;
    uint64_t deadline = deadline_after(timeout_ms);
    int rc = MUSTER_OK;
    flight_lock(m);
    /* A failover handle reconnects (and watches again) to wait for events. */
    if (!m->ev_head && m->url.failover && timeout_ms > 0)
        rc = failover_ready(m, deadline);
    /* Events already queued are handed out without touching the socket: a loop taking them one by one
     * reads once, when the queue runs dry, rather than once per event. */
    int queued = m->ev_head != NULL;
    flight_unlock(m);
    if (rc == MUSTER_OK && !queued)
        flight_handle(m, POLLIN);
    if (rc == MUSTER_OK && timeout_ms > 0)
        flight_wait(m, watch_ready, NULL, deadline);
    flight_lock(m);
    /* A broken handle still hands out what it read before it broke
     * (a shutdown notice typically arrives just before the close). */
    if (m->ev_head)
        rc = event_take(m, ev);
    else if (rc == MUSTER_OK)
        rc = m->broken ? m->broken : MUSTER_ETIMEDOUT;
    flight_unlock(m);
    return rc;
}
