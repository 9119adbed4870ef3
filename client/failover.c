/*
 * Failover of an established handle (URLs with several endpoints, or
 * ?failover=1): when the connection is lost or a standby answers
 * NOT_LEADER, reconnect (conn_establish: same endpoints, redirects and
 * backoff) under the caller's deadline, say hello again with the same
 * namespace and token, restore watches, and send the call again when that
 * is safe.
 *
 * What is safe is decided per op by the op list (proto/oplist.h, the
 * OPL_RESEND flag).  A NOT_LEADER answer means the op was refused before
 * it ran, so any op goes to the leader.  A lost connection leaves an op in
 * flight undecided: it may have run before the server died.  Ops whose
 * repetition changes nothing (set, get, delete, waits, ...) are sent
 * again; the others (add, compare_set, append, barrier arrival, rendezvous
 * join) come back as MUSTER_ECONN, retryable, and are never repeated
 * behind the caller's back.
 */
#include <string.h>

#include "internal.h"
#include "oplist.h"

/* Whether op may be sent again after the connection carrying it was lost (OPL_RESEND in the op list). */
int failover_idempotent(Muster__Request__OpCase op)
{
#define FAILOVER_RESEND(c, n, f) \
    case MUSTER__REQUEST__OP_##c: \
        return ((f) & OPL_RESEND) != 0;
    switch (op) {
        OPLIST(FAILOVER_RESEND)
    default:
        return 0;
    }
#undef FAILOVER_RESEND
}

/* Whether m lost its connection (or was redirected) in a way failover repairs. */
int failover_lost(const muster_t *m)
{
    return m->broken == MUSTER_ECONN || m->broken == MUSTER_ESHUTDOWN || m->broken == MUSTER_ENOTLEADER;
}

/* Remember a NOT_LEADER answer's leader address and drop the connection to go there. */
void failover_redirect(muster_t *m, const char *leader)
{
    /* Words instead of an address ("no leader: ...") leave only the list to try. */
    m->has_redirect = url_parse_endpoint(leader, &m->redirect) == 0;
    log_emit(m, MUSTER_LOG_INFO, "%s:%u is not the leader (%s); reconnecting", m->url.host,
             (unsigned)m->url.port, leader);
    conn_drop(m);
    m->broken = MUSTER_ENOTLEADER;
}

/* The rendezvous membership ended with the old connection: tell the caller. */
static void failover_end_membership(muster_t *m)
{
    if (!m->rdzv_member)
        return;
    m->rdzv_member = 0;
    m->rdzv_lost = 1;
    event_push_lost(m, m->rdzv_generation, m->rdzv_node);
}

/* Register every recorded watch again on a new connection before deadline. */
static int failover_restore_watches(muster_t *m, uint64_t deadline)
{
    for (size_t i = 0; i < m->n_watches; i++) {
        Muster__WatchReq op = MUSTER__WATCH_REQ__INIT;
        op.prefix = m->watches[i].prefix;
        Muster__Request req = MUSTER__REQUEST__INIT;
        req.op_case = MUSTER__REQUEST__OP_WATCH;
        req.watch = &op;
        Muster__Response *resp;
        int rc = wire_once(m, &req, &resp, deadline);
        if (rc != MUSTER_OK)
            return rc;
        m->watches[i].server_id = resp->watch->watch_id;
        wire_free(resp);
    }
    return MUSTER_OK;
}

/* Reconnect a lost handle and restore what the server tied to the old connection. */
static int failover_reconnect(muster_t *m, uint64_t deadline)
{
    char why[sizeof m->last_error];
    memcpy(why, m->last_error, sizeof why);
    failover_end_membership(m);
    int rc = conn_establish(m, deadline);
    if (rc != MUSTER_OK)
        return rc;
    log_emit(m, MUSTER_LOG_WARN, "reconnected to %s:%u after: %s", m->url.host, (unsigned)m->url.port, why);
    /* Changes made while no connection watched are not replayed; the
     * dropped count is how a watcher learns it missed some. */
    if (m->n_watches > 0)
        m->ev_dropped++;
    return failover_restore_watches(m, deadline);
}

/* Before a call on a failover handle: notice a closed socket, reconnect a
 * lost connection, and restore watches and membership state; a muster_err. */
int failover_ready(muster_t *m, uint64_t deadline)
{
    /* A leader that died while the handle was idle shows as a readable EOF:
     * find out now, before an op is sent into a dead connection. */
    if (!m->broken)
        wire_pump(m, 0, 0);
    for (unsigned i = 0; m->broken && i < FAILOVER_MAX_RESENDS; i++) {
        if (!failover_lost(m) && m->broken != MUSTER_ETIMEDOUT)
            return error_set(m, MUSTER_ECONN, "connection unusable after an earlier error (%s)",
                             muster_strerror(m->broken));
        int rc = failover_reconnect(m, deadline);
        if (rc != MUSTER_OK && (!failover_lost(m) || deadline_left(deadline) == 0))
            return rc;
    }
    return m->broken ? MUSTER_ECONN : MUSTER_OK;
}

/* Milliseconds a re-issued blocking op may wait at the server before deadline. */
static uint32_t failover_left(uint64_t deadline)
{
    int left = deadline_left(deadline) - (int)CALL_GRACE_MS;
    return left > 0 ? (uint32_t)left : 1u;
}

/* Set the server-side timeout of a blocking op to what is left before deadline. */
void failover_set_timeout(Muster__Request *req, uint64_t deadline)
{
    uint32_t t = failover_left(deadline);
    if (req->op_case == MUSTER__REQUEST__OP_GET && req->get->wait)
        req->get->timeout_ms = t;
    else if (req->op_case == MUSTER__REQUEST__OP_WAIT)
        req->wait->timeout_ms = t;
    else if (req->op_case == MUSTER__REQUEST__OP_MULTI_GET && req->multi_get->wait)
        req->multi_get->timeout_ms = t;
    else if (req->op_case == MUSTER__REQUEST__OP_BARRIER)
        req->barrier->timeout_ms = t;
    else if (req->op_case == MUSTER__REQUEST__OP_RDZV_JOIN)
        req->rdzv_join->timeout_ms = t;
}

/* Report a non-repeatable op lost in flight: retryable, and said to be undecided. */
static int failover_undecided(muster_t *m)
{
    char why[sizeof m->last_error];
    memcpy(why, m->last_error, sizeof why);
    why[96] = '\0';
    return error_set(m, MUSTER_ECONN, "connection lost with the request in flight (%s): it may or may not "
                                      "have taken effect, so it was not sent again", why);
}

/* call_run for a failover handle: reconnect, follow the leader and send
 * again what is safe to send again, all before deadline. */
int failover_run(muster_t *m, Muster__Request *req, Muster__Response **resp, uint64_t deadline)
{
    int rc = MUSTER_ECONN;
    for (unsigned sent = 0; sent < FAILOVER_MAX_RESENDS; sent++) {
        rc = failover_ready(m, deadline);
        if (rc != MUSTER_OK)
            return rc;
        if (sent > 0)
            failover_set_timeout(req, deadline);
        rc = wire_once(m, req, resp, deadline);
        if (rc == MUSTER_ENOTLEADER && !m->broken)
            failover_redirect(m, m->last_error);
        else if (!failover_lost(m))
            return rc;
        else if (!failover_idempotent(req->op_case))
            return failover_undecided(m);
        if (deadline_left(deadline) == 0)
            return rc;
    }
    return rc;
}
