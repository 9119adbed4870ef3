/*
 * Calls: the entry point of every op of the public API (kv.c, rdzv.c,
 * watch.c).  call_run turns the caller's timeout into a deadline and sends
 * the request once over the wire (wire.c), or, on a failover handle,
 * through failover_run (failover.c), which reconnects and sends again what
 * is safe to send again.  This is the top of the transport: nothing below
 * it calls back up.
 */
#include "internal.h"

/* The effective timeout for a call: timeout_ms, or the handle default for 0. */
uint32_t call_timeout(const muster_t *m, uint32_t timeout_ms)
{
    return timeout_ms ? timeout_ms : m->default_timeout_ms;
}

/* Send req and wait for its response; see internal.h. */
int call_run(muster_t *m, Muster__Request *req, Muster__Response **resp, uint32_t timeout_ms)
{
    *resp = NULL;
    uint64_t deadline = deadline_after((uint64_t)timeout_ms + CALL_GRACE_MS);
    if (m->url.failover)
        return failover_run(m, req, resp, deadline);
    if (m->broken)
        return error_set(m, MUSTER_ECONN, "connection unusable after an earlier error (%s)",
                         muster_strerror(m->broken));
    return wire_once(m, req, resp, deadline);
}
