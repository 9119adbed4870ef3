/* libmuster rendezvous calls: join (blocking, server-enforced deadline), heartbeat, leave. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <muster/rdzv.h>

#include "internal.h"
#include "keys.h"
#include "world_sm.h"

/* Heartbeat timeout assumed when the server did not announce one (musterd's default). */
#define RDZV_DEFAULT_HEARTBEAT_MS 3000u

/* Copy a wire string into a fixed field; returns -1 when it does not fit. */
static int rdzv_copy_id(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        return -1;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
    return 0;
}

/* Build the caller's assignment from the wire one; returns a muster_err. */
static int rdzv_convert(muster_t *m, const Muster__Assignment *wa, muster_assignment **out)
{
    muster_assignment *a = calloc(1, sizeof *a);
    if (!a)
        return error_set(m, MUSTER_ENOMEM, "out of memory");
    a->generation = wa->generation;
    a->node_rank = wa->node_rank;
    a->num_nodes = wa->num_nodes;
    a->rank_start = wa->rank_start;
    a->local_world_size = wa->local_world_size;
    a->world_size = wa->world_size;
    a->n_members = wa->n_members;
    if (wa->n_members > 0 && !(a->members = calloc(wa->n_members, sizeof *a->members))) {
        free(a);
        return error_set(m, MUSTER_ENOMEM, "out of memory");
    }
    int bad = rdzv_copy_id(a->node_id, sizeof a->node_id, wa->node_id);
    for (size_t i = 0; i < wa->n_members && !bad; i++) {
        const Muster__Member *w = wa->members[i];
        muster_member *mm = &a->members[i];
        bad = rdzv_copy_id(mm->node_id, sizeof mm->node_id, w->node_id);
        mm->node_rank = w->node_rank;
        mm->rank_start = w->rank_start;
        mm->local_world_size = w->local_world_size;
        mm->old_node_rank = w->old_node_rank;
    }
    a->previous_generation = wa->previous_generation;
    a->old_node_rank = wa->old_node_rank;
    snprintf(a->credential, sizeof a->credential, "%s", wa->credential ? wa->credential : "");
    if (!bad && wa->n_excluded > 0 && !(a->excluded = calloc(wa->n_excluded, sizeof *a->excluded)))
        bad = 1;
    a->n_excluded = a->excluded ? wa->n_excluded : 0;
    for (size_t i = 0; i < a->n_excluded && !bad; i++) {
        const Muster__Excluded *w = wa->excluded[i];
        bad = rdzv_copy_id(a->excluded[i].node_id, sizeof a->excluded[i].node_id, w->node_id);
        a->excluded[i].old_node_rank = w->old_node_rank;
        snprintf(a->excluded[i].cause, sizeof a->excluded[i].cause, "%s", w->cause ? w->cause : "");
    }
    /* The list comes only when the join asked for it (want_members). */
    if (bad || (a->n_members && a->num_nodes != a->n_members) || a->node_rank >= a->num_nodes) {
        muster_assignment_free(a);
        return error_set(m, MUSTER_EPROTO, "inconsistent assignment from the server");
    }
    *out = a;
    return MUSTER_OK;
}

/* Note the membership a join gave, so a failover can say it ended. */
static void rdzv_remember(muster_t *m, const muster_assignment *a)
{
    m->rdzv_member = 1;
    m->rdzv_lost = 0;
    m->rdzv_generation = a->generation;
    memcpy(m->rdzv_node, a->node_id, sizeof m->rdzv_node);
}

/* Fill a join request from opts (recover: the recovery round); MUSTER_OK, or MUSTER_EINVAL with the error
 * set.  The request's strings point into opts. */
static int rdzv_join_fill(muster_t *m, const muster_rdzv_opts *opts, int recover, uint32_t timeout_ms,
                          Muster__RdzvJoinReq *join)
{
    if (opts->local_world_size < 1 || opts->min_nodes < 1 || opts->max_nodes < opts->min_nodes)
        return error_set(m, MUSTER_EINVAL, "need local_world_size >= 1 and 1 <= min_nodes <= max_nodes");
    if (opts->node_id && strlen(opts->node_id) >= sizeof((muster_assignment *)0)->node_id)
        return error_set(m, MUSTER_EINVAL, "node_id longer than 127 bytes");
    *join = (Muster__RdzvJoinReq)MUSTER__RDZV_JOIN_REQ__INIT;
    join->node_id = (char *)(opts->node_id ? opts->node_id : "");
    join->local_world_size = opts->local_world_size;
    join->min_nodes = opts->min_nodes;
    join->max_nodes = opts->max_nodes;
    join->last_call_ms = opts->last_call_ms;
    join->want_members = opts->want_members != 0;
    join->standby = opts->standby != 0 && !recover;
    join->recover = recover != 0;
    join->timeout_ms = timeout_ms;
    return MUSTER_OK;
}

/* Turn a join's response into the caller's assignment and note the membership; frees resp. */
static int rdzv_answered(muster_t *m, Muster__Response *resp, muster_assignment **out)
{
    int rc;
    if (!resp->rdzv_join || !resp->rdzv_join->assignment)
        rc = error_set(m, MUSTER_EPROTO, "join answered without an assignment");
    else
        rc = rdzv_convert(m, resp->rdzv_join->assignment, out);
    wire_free(resp);
    if (rc == MUSTER_OK)
        rdzv_remember(m, *out);
    return rc;
}

/* Forget an armed recovery's answer, and the answer still to come (its callback then ignores it); under
 * the lock. */
static void rdzv_disarm_locked(muster_t *m)
{
    m->armed_seq = 0;
    m->armed_pending = 0;
    wire_free(m->armed_resp);
    m->armed_resp = NULL;
}

/* Forget an armed recovery (rdzv_disarm_locked, taking the lock). */
static void rdzv_disarm(muster_t *m)
{
    flight_lock(m);
    rdzv_disarm_locked(m);
    flight_unlock(m);
}

/* Send a join (recover: the recovery round) and wait for its assignment; *out is caller-owned. */
static int rdzv_join_as(muster_t *m, const muster_rdzv_opts *opts, int recover, muster_assignment **out,
                        uint32_t timeout_ms)
{
    if (!m || !opts || !out)
        return MUSTER_EINVAL;
    *out = NULL;
    Muster__RdzvJoinReq join;
    int rc = rdzv_join_fill(m, opts, recover, call_timeout(m, timeout_ms), &join);
    if (rc != MUSTER_OK)
        return rc;
    rdzv_disarm(m); /* a join replaces an armed recovery (the daemon answers that one CONFLICT) */
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_RDZV_JOIN;
    req.rdzv_join = &join;
    Muster__Response *resp;
    rc = call_run(m, &req, &resp, join.timeout_ms);
    return rc == MUSTER_OK ? rdzv_answered(m, resp, out) : rc;
}

/* Join the job's next round and wait (up to timeout_ms, server-enforced)
 * for its assignment; *out is caller-owned (muster_assignment_free). */
int muster_rdzv_join(muster_t *m, const muster_rdzv_opts *opts, muster_assignment **out,
                     uint32_t timeout_ms)
{
    return rdzv_join_as(m, opts, 0, out, timeout_ms);
}

/* The armed recovery's answer (or failure) arrived: keep it for muster_rdzv_recover, unless that arming
 * was dropped or replaced meanwhile (the answer is then freed with the call). */
static void rdzv_armed_done(muster_t *m, struct flight_result *r, void *arg)
{
    flight_lock(m);
    if ((uint64_t)(uintptr_t)arg == m->armed_seq && m->armed_pending) {
        m->armed_pending = 0;
        m->armed_rc = r->rc;
        m->armed_resp = r->rc == MUSTER_OK ? r->resp : NULL;
        if (r->rc == MUSTER_OK)
            r->resp = NULL;
        snprintf(m->armed_detail, sizeof m->armed_detail, "%s", r->detail);
        flight_broadcast(m);
    }
    flight_unlock(m);
}

/* Arm this member's recovery of its running generation; see rdzv.h. */
int muster_rdzv_arm(muster_t *m, const muster_rdzv_opts *opts, uint32_t timeout_ms)
{
    if (!m || !opts)
        return MUSTER_EINVAL;
    if (!m->rdzv_member || m->rdzv_lost)
        return error_set(m, MUSTER_ENOTMEMBER, "this handle is not a member of a generation: join first");
    Muster__RdzvJoinReq join;
    int rc = rdzv_join_fill(m, opts, 1, call_timeout(m, timeout_ms), &join);
    if (rc != MUSTER_OK)
        return rc;
    join.armed = 1;
    flight_lock(m);
    if (m->armed_seq && m->armed_generation == m->rdzv_generation && (m->armed_pending || m->armed_rc == MUSTER_OK)) {
        flight_unlock(m);
        return MUSTER_OK; /* armed already (a refused arming, LIMIT say, is tried again) */
    }
    if (m->broken) { /* a failover would send it to a new connection, which is no member */
        flight_unlock(m);
        return error_set(m, MUSTER_ECONN, "the store connection is down: nothing to arm");
    }
    rdzv_disarm_locked(m);
    uint64_t seq = ++m->armed_made;
    m->armed_seq = seq;
    m->armed_pending = 1;
    m->armed_generation = m->rdzv_generation;
    flight_unlock(m);
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_RDZV_JOIN;
    req.rdzv_join = &join;
    /* No client deadline: the daemon keeps it until the generation breaks, then times it out itself. */
    rc = flight_submit(m, &req, FLIGHT_FOREVER, rdzv_armed_done, (void *)(uintptr_t)seq);
    if (rc != MUSTER_OK)
        rdzv_disarm(m);
    return rc;
}

/* Whether the armed recovery was answered (under the lock). */
static int rdzv_armed_ready(muster_t *m, void *arg)
{
    (void)arg;
    return !m->armed_pending;
}

/* Wait up to timeout_ms for the armed recovery's answer and take it. */
static int rdzv_armed_take(muster_t *m, muster_assignment **out, uint32_t timeout_ms)
{
    uint32_t ms = call_timeout(m, timeout_ms);
    if (flight_wait(m, rdzv_armed_ready, NULL, deadline_after((uint64_t)ms + CALL_GRACE_MS)) != MUSTER_OK)
        return error_set(m, MUSTER_ETIMEDOUT, "the armed recovery was not answered within %u ms", ms);
    flight_lock(m);
    Muster__Response *resp = m->armed_resp;
    int rc = m->armed_rc;
    char detail[sizeof m->armed_detail];
    memcpy(detail, m->armed_detail, sizeof detail);
    m->armed_resp = NULL;
    m->armed_seq = 0;
    flight_unlock(m);
    if (rc != MUSTER_OK)
        return error_set(m, rc, "%s", detail);
    m->last_error[0] = '\0';
    return rdzv_answered(m, resp, out);
}

/* Join the recovery round of this handle's broken generation and wait for the agreed next one. */
int muster_rdzv_recover(muster_t *m, const muster_rdzv_opts *opts, muster_assignment **out,
                        uint32_t timeout_ms)
{
    /* A failover gave this handle a new connection, which was never a member: the daemon would say
     * NOT_MEMBER; say what it means for the caller. */
    if (m && m->rdzv_lost)
        return error_set(m, MUSTER_EEXCLUDED, "the store connection was re-established (failover); this node "
                                              "cannot recover in place: join again as a newcomer");
    if (m && opts && out && m->armed_seq && m->armed_generation == m->rdzv_generation) {
        *out = NULL;
        int rc = rdzv_armed_take(m, out, timeout_ms);
        if (rc != MUSTER_ELIMIT)
            return rc;
        /* The daemon could not park the armed join (--max-waiters...): it never counted; join now. */
    }
    return rdzv_join_as(m, opts, 1, out, timeout_ms);
}

/* Report that member node_id of this handle's generation failed. */
int muster_rdzv_report(muster_t *m, const char *node_id, const char *cause, uint32_t timeout_ms)
{
    if (!m || !node_id || !*node_id)
        return MUSTER_EINVAL;
    Muster__RdzvReportReq rep = MUSTER__RDZV_REPORT_REQ__INIT;
    rep.node_id = (char *)node_id;
    rep.cause = (char *)(cause ? cause : "");
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_RDZV_REPORT;
    req.rdzv_report = &rep;
    return call_run_status(m, &req, call_timeout(m, timeout_ms));
}

/* Tell the server this member is alive; MUSTER_ESTALE when its generation broke. */
int muster_rdzv_heartbeat(muster_t *m, uint64_t generation, uint32_t timeout_ms)
{
    if (!m)
        return MUSTER_EINVAL;
    /* The new connection never had the membership: say so the way a broken generation does. */
    if (m->rdzv_lost)
        return error_set(m, MUSTER_ESTALE, "the store connection was re-established (failover); the "
                                           "generation must re-form: join again");
    Muster__RdzvHeartbeatReq hb = MUSTER__RDZV_HEARTBEAT_REQ__INIT;
    hb.generation = generation;
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_RDZV_HEARTBEAT;
    req.rdzv_heartbeat = &hb;
    return call_run_status(m, &req, call_timeout(m, timeout_ms));
}

/* How often to heartbeat (a third of the server's heartbeat timeout), in ms. */
uint32_t muster_rdzv_heartbeat_interval(const muster_t *m)
{
    uint32_t t = (m && m->limits.heartbeat_timeout_ms) ? m->limits.heartbeat_timeout_ms : RDZV_DEFAULT_HEARTBEAT_MS;
    return t / 3 > 0 ? t / 3 : 1;
}

/* Leave the job, finished or not. */
static int rdzv_leave_as(muster_t *m, int finished, uint32_t timeout_ms)
{
    if (!m)
        return MUSTER_EINVAL;
    Muster__RdzvLeaveReq leave = MUSTER__RDZV_LEAVE_REQ__INIT;
    leave.finished = finished != 0;
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_RDZV_LEAVE;
    req.rdzv_leave = &leave;
    rdzv_disarm(m); /* the daemon answers an armed recovery NOT_MEMBER once this node is gone */
    int rc = call_run_status(m, &req, call_timeout(m, timeout_ms));
    if (rc == MUSTER_OK || rc == MUSTER_ENOTMEMBER)
        m->rdzv_member = m->rdzv_lost = 0;
    return rc;
}

/* Leave the job; the generation, if running, breaks for the others. */
int muster_rdzv_leave(muster_t *m, uint32_t timeout_ms)
{
    return rdzv_leave_as(m, 0, timeout_ms);
}

/* Leave the job having finished its work: the generation does not break. */
int muster_rdzv_finish(muster_t *m, uint32_t timeout_ms)
{
    return rdzv_leave_as(m, 1, timeout_ms);
}

/* Free an assignment; NULL is a no-op. */
void muster_assignment_free(muster_assignment *a)
{
    if (!a)
        return;
    free(a->members);
    free(a->excluded);
    free(a);
}

/* Copy the change's assignment (members and excluded lists) into a new one; NULL when out of memory. */
static muster_assignment *rdzv_copy_assignment(const muster_assignment *src)
{
    muster_assignment *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    *a = *src;
    a->members = calloc(src->n_members ? src->n_members : 1, sizeof *a->members);
    a->excluded = src->n_excluded ? calloc(src->n_excluded, sizeof *a->excluded) : NULL;
    if (!a->members || (src->n_excluded && !a->excluded)) {
        muster_assignment_free(a);
        return NULL;
    }
    memcpy(a->members, src->members, src->n_members * sizeof *a->members);
    if (src->n_excluded)
        memcpy(a->excluded, src->excluded, src->n_excluded * sizeof *a->excluded);
    return a;
}

/* Read the world-change answer musterd stored for generation and give node_id's part of it. */
int muster_run_answer(muster_t *m, uint64_t generation, const char *node_id, muster_assignment **out,
                      uint32_t timeout_ms)
{
    char key[64];
    void *v = NULL;
    size_t n = 0;
    struct wsm sm;
    int rc;
    if (!out)
        return MUSTER_EINVAL;
    *out = NULL;
    if (!m || !node_id || !*node_id || generation == 0)
        return MUSTER_EINVAL;
    keys_rdzv_answer(key, sizeof key, generation);
    rc = muster_get(m, key, timeout_ms > 0, timeout_ms, &v, &n);
    if (rc != MUSTER_OK)
        return rc;
    /* The worker's machine decides, as for muster_world_next: a process new to generation. */
    wsm_init(&sm, node_id, 0, generation, 0, 0);
    wsm_begin(&sm, 0, 1);
    wsm_answer(&sm, 0, generation, v, n);
    muster_free(v);
    rc = sm.status;
    if (rc == MUSTER_OK && sm.change.previous_generation == 0)
        rc = error_set(m, MUSTER_ENOTFOUND, "generation %" PRIu64 " was formed by a plain round: no recovery",
                       generation);
    else if (rc == MUSTER_OK && !(*out = rdzv_copy_assignment(sm.change.assignment)))
        rc = MUSTER_ENOMEM;
    else if (rc != MUSTER_OK)
        rc = error_set(m, rc, "%s", sm.why);
    wsm_fini(&sm);
    return rc;
}
