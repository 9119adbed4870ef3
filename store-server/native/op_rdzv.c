/*
 * The native protocol's rendezvous ops.  The rounds, generations and
 * heartbeats are core/rdzv.c; this file is a connection's side of them:
 * it turns requests into calls on the connection's node (c->rdzv), keeps
 * a parked join in the connection's pending ids, and builds the protobuf
 * replies and membership events the core asks for through the owner
 * callbacks.
 */
#include "op_rdzv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "core.h"
#include "rdzv.h"
#include "server.h"
#include "shared_bytes.h"
#include "pbuf.h"

_Static_assert((int)RDZV_MEMBER_LOST == (int)MUSTER__MEMBERSHIP_EVENT__KIND__MEMBER_LOST, "wire kind");
_Static_assert((int)RDZV_NODE_WAITING == (int)MUSTER__MEMBERSHIP_EVENT__KIND__NODE_WAITING, "wire kind");

/* The connection closed while its join was parked (conn_pending cancel). */
static void op_rdzv_cancel(void *arg)
{
    rdzv_join_cancel(arg);
}

/* Park join id on the connection, cancelled with it. */
static int op_rdzv_park(void *owner, uint64_t id, struct rdzv_node *n)
{
    return conn_pending_add(owner, id, op_rdzv_cancel, n);
}

/* Forget parked join id (a no-op once the connection forgot it). */
static void op_rdzv_unpark(void *owner, uint64_t id)
{
    conn_pending_remove(owner, id);
}

/* Pack the formation's members once, as Assignment.members entries (key, length, Member), into a shared
 * block every answer that asked for them sends by reference; NULL when memory ran out. */
static struct shared_bytes *op_rdzv_members_pack(struct server *srv, const struct rdzv_assignment *as)
{
    const ProtobufCMessageDescriptor *ad = &muster__assignment__descriptor;
    size_t n = as->n_members, total = 0;
    Muster__Member *mv = calloc(n, sizeof *mv);
    size_t *len = calloc(n, sizeof *len);   /* each member's packed size, taken once */
    struct shared_bytes *b = NULL;
    for (size_t i = 0; mv && len && i < n; i++) {
        muster__member__init(&mv[i]);
        mv[i].node_id = (char *)as->members[i].id;
        mv[i].node_rank = as->members[i].node_rank;
        mv[i].rank_start = as->members[i].rank_start;
        mv[i].local_world_size = as->members[i].local_world_size;
        mv[i].old_node_rank = as->members[i].old_rank;
        len[i] = muster__member__get_packed_size(&mv[i]);
        total += pbuf_put_len_key(NULL, ad, "members", len[i]) + len[i];
    }
    uint8_t *p = mv && len && (b = shared_bytes_new(srv, total, -1)) ? shared_bytes_data(b) : NULL;
    for (size_t i = 0; p && i < n; i++) {
        p += pbuf_put_len_key(p, ad, "members", len[i]);
        p += muster__member__pack(&mv[i], p);
    }
    free(mv);
    free(len);
    return b;
}

/* The core's release of the formation's shared slot: the answers still being sent keep their references. */
static void op_rdzv_members_release(void *p)
{
    shared_bytes_unref(p);
}

/* The formation's packed members: made by the first answer that asks, kept in the core's shared slot. */
static struct shared_bytes *op_rdzv_members(struct conn *c, const struct rdzv_assignment *as)
{
    if (!as->shared->p) {
        as->shared->p = op_rdzv_members_pack(c->srv, as);
        as->shared->release = op_rdzv_members_release;
    }
    return as->shared->p;
}

/* Send Response{id, OK, rdzv_join{assignment = a, then the members block}}: the frame is composed around the
 * shared block (a's own fields first; protobuf readers accept fields in any order), so each answer costs
 * its own fields, not a copy of the list. */
static void op_rdzv_send_with_members(struct conn *c, uint64_t id, const Muster__Assignment *a,
                                      struct shared_bytes *members)
{
    const ProtobufCMessageDescriptor *fd = &muster__server_frame__descriptor, *rd = &muster__response__descriptor,
                                     *jd = &muster__rdzv_join_res__descriptor;
    Muster__Response r = MUSTER__RESPONSE__INIT;
    r.id = id;
    size_t own = muster__assignment__get_packed_size(a), al = own + shared_bytes_len(members);
    size_t jl = pbuf_put_len_key(NULL, jd, "assignment", al) + al;
    size_t rl = muster__response__get_packed_size(&r) + pbuf_put_len_key(NULL, rd, "rdzv_join", jl) + jl;
    size_t body = pbuf_put_len_key(NULL, fd, "response", rl) + rl;
    if (body > c->srv->opt.max_frame) {
        /* A client never has to take a frame above the limit it was told. */
        stats_inc(&c->srv->stats, STAT_LIMIT_RESPONSE);
        conn_replyf(c, id, MUSTER__STATUS__LIMIT, "reply of %zu bytes would exceed max frame %llu", body,
                    (unsigned long long)c->srv->opt.max_frame);
        return;
    }
    size_t hlen = body - shared_bytes_len(members);
    uint8_t *head = malloc(hlen), *p = head;
    if (!head) {
        conn_reply(c, id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
        return;
    }
    p += pbuf_put_len_key(p, fd, "response", rl);
    p += muster__response__pack(&r, p);
    p += pbuf_put_len_key(p, rd, "rdzv_join", jl);
    p += pbuf_put_len_key(p, jd, "assignment", al);
    muster__assignment__pack(a, p);
    conn_send_spliced(c, head, hlen, members);
    free(head);
}

/* Send a join's assignment: RdzvJoinRes with the member list (shared) when the join asked for it. */
static void op_rdzv_assignment(struct conn *c, uint64_t id, const struct rdzv_assignment *as)
{
    struct shared_bytes *members = as->n_members ? op_rdzv_members(c, as) : NULL;
    size_t nx = as->n_excluded;
    Muster__Excluded *xv = calloc(nx ? nx : 1, sizeof *xv);
    Muster__Excluded **xp = calloc(nx ? nx : 1, sizeof *xp);
    if (!xv || !xp || (as->n_members && !members)) {
        free(xv);
        free(xp);
        conn_reply(c, id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
        return;
    }
    for (size_t i = 0; i < nx; i++) {
        muster__excluded__init(&xv[i]);
        xv[i].node_id = (char *)as->excluded[i].node_id;
        xv[i].old_node_rank = as->excluded[i].old_node_rank;
        xv[i].cause = (char *)as->excluded[i].cause;
        xp[i] = &xv[i];
    }
    Muster__Assignment a = MUSTER__ASSIGNMENT__INIT;
    a.generation = as->generation;
    a.node_rank = as->node_rank;
    a.num_nodes = as->num_nodes;
    a.rank_start = as->rank_start;
    a.local_world_size = as->local_world_size;
    a.world_size = as->world_size;
    a.node_id = (char *)as->node_id;
    a.previous_generation = as->previous_generation;
    a.old_node_rank = as->old_node_rank;
    a.n_excluded = nx;
    a.excluded = nx ? xp : NULL;
    a.credential = (char *)(as->credential ? as->credential : "");
    if (members) {
        op_rdzv_send_with_members(c, id, &a, members);
    } else {
        Muster__RdzvJoinRes r = MUSTER__RDZV_JOIN_RES__INIT;
        r.assignment = &a;
        conn_reply(c, id, MUSTER__STATUS__OK, NULL, &r.base);
    }
    free(xv);
    free(xp);
}

/* Answer join id: its assignment, or an error. */
static void op_rdzv_reply(void *owner, uint64_t id, int status, const char *msg, const struct rdzv_assignment *a)
{
    if (status == MUSTER__STATUS__OK && a)
        op_rdzv_assignment(owner, id, a);
    else
        conn_reply(owner, id, status, msg, NULL);
}

/* The last membership event's frame: a break tells one event to every member of a generation, so it is
 * packed once and copied to each (a pure function of its three fields; the daemon is one thread). */
struct op_rdzv_memo {
    int kind;
    uint64_t gen;
    char node_id[RDZV_ID_MAX + 1];
    uint8_t body[RDZV_ID_MAX + 64];
    size_t len;
};
static struct op_rdzv_memo op_rdzv_last_event;

/* Push a membership event to the connection. */
static void op_rdzv_event(void *owner, int kind, uint64_t gen, const char *node_id)
{
    struct conn *c = owner;
    struct op_rdzv_memo *last = &op_rdzv_last_event;
    if (!last->len || last->kind != kind || last->gen != gen || strcmp(last->node_id, node_id) != 0) {
        Muster__MembershipEvent me = MUSTER__MEMBERSHIP_EVENT__INIT;
        me.kind = (Muster__MembershipEvent__Kind)kind;
        me.generation = gen;
        me.node_id = (char *)node_id;
        Muster__Event ev = MUSTER__EVENT__INIT;
        ev.event_case = MUSTER__EVENT__EVENT_MEMBERSHIP;
        ev.membership = &me;
        Muster__ServerFrame f = MUSTER__SERVER_FRAME__INIT;
        f.frame_case = MUSTER__SERVER_FRAME__FRAME_EVENT;
        f.event = &ev;
        last->len = 0;
        if (strlen(node_id) > RDZV_ID_MAX || protobuf_c_message_get_packed_size(&f.base) > sizeof last->body) {
            conn_push_event(c, &ev); /* not from the core: its ids are bounded */
            return;
        }
        last->kind = kind;
        last->gen = gen;
        snprintf(last->node_id, sizeof last->node_id, "%s", node_id);
        last->len = protobuf_c_message_pack(&f.base, last->body);
    }
    if (conn_send_packed(c, last->body, last->len) == 0)
        stats_inc(&c->srv->stats, STAT_EVENTS_PUSHED);
}

/* Whether frames can still be sent to the connection. */
static int op_rdzv_live(void *owner)
{
    return conn_live(owner);
}

/* The connection's peer address, for status pages. */
static const char *op_rdzv_peer(void *owner)
{
    return conn_peer(owner);
}

static const struct rdzv_owner_ops op_rdzv_ops = {
    .park = op_rdzv_park,
    .unpark = op_rdzv_unpark,
    .reply = op_rdzv_reply,
    .event = op_rdzv_event,
    .live = op_rdzv_live,
    .peer = op_rdzv_peer,
};

/* rdzv_join: join the namespace's next round; answered when it closes (an op table row). */
void op_rdzv_join(struct conn *c, Muster__Request *req)
{
    const Muster__RdzvJoinReq *q = req->rdzv_join;
    struct rdzv_owner owner = {&op_rdzv_ops, c, &c->rdzv, c->life.id, &c->share};
    struct rdzv_join_req j = {.node_id = q->node_id,
                              .local_world_size = q->local_world_size,
                              .min_nodes = q->min_nodes,
                              .max_nodes = q->max_nodes,
                              .last_call_ms = q->last_call_ms,
                              .timeout_ms = q->timeout_ms,
                              .want_members = q->want_members,
                              .recover = q->recover,
                              .standby = q->standby,
                              .armed = q->armed};
    char msg[256];
    int st = rdzv_join(c->ns, &owner, &j, req->id, msg, sizeof msg);
    if (st != MUSTER__STATUS__OK)
        conn_reply(c, req->id, st, msg, NULL);
}

/* rdzv_leave: end this connection's membership (an op table row). */
void op_rdzv_leave(struct conn *c, Muster__Request *req)
{
    if (!c->rdzv) {
        conn_reply(c, req->id, MUSTER__STATUS__NOT_MEMBER, "this connection never joined", NULL);
        return;
    }
    rdzv_leave(c->rdzv, req->rdzv_leave->finished);
    Muster__RdzvLeaveRes r = MUSTER__RDZV_LEAVE_RES__INIT;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* rdzv_heartbeat: keep this connection's membership alive (an op table row). */
void op_rdzv_heartbeat(struct conn *c, Muster__Request *req)
{
    char msg[128];
    uint64_t gen = req->rdzv_heartbeat->generation;
    int st = rdzv_heartbeat(c->rdzv, gen, msg, sizeof msg);
    if (st != MUSTER__STATUS__OK) {
        conn_reply(c, req->id, st, msg, NULL);
        return;
    }
    Muster__RdzvHeartbeatRes r = MUSTER__RDZV_HEARTBEAT_RES__INIT;
    r.generation = gen;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* rdzv_report: this member says another member of its generation failed (an op table row). */
void op_rdzv_report(struct conn *c, Muster__Request *req)
{
    const Muster__RdzvReportReq *q = req->rdzv_report;
    char msg[256];
    uint64_t gen = 0;
    if (!c->rdzv) {
        stats_inc(&c->srv->stats, STAT_RDZV_BAD_REPORTS);
        conn_reply(c, req->id, MUSTER__STATUS__NOT_MEMBER, "this connection never joined", NULL);
        return;
    }
    int st = rdzv_report(c->rdzv, q->node_id, q->cause, &gen, msg, sizeof msg);
    if (st != MUSTER__STATUS__OK) {
        conn_reply(c, req->id, st, msg, NULL);
        return;
    }
    Muster__RdzvReportRes r = MUSTER__RDZV_REPORT_RES__INIT;
    r.generation = gen;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* A connection is closing: drop its membership or parked join (c->rdzv). */
void op_rdzv_conn_closed(struct conn *c)
{
    if (c->rdzv)
        rdzv_node_gone(c->rdzv);
}
