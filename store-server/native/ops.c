/*
 * THE op table: one row per Request op case with its name, handler, flags
 * and field checks.  Names and flags come from the op list
 * (proto/oplist.h), which libmuster's failover reads too; this file adds
 * the handler and the field checks.  ops_dispatch() runs everything generic
 * from the row (hello done, pending id, drain, key/value sizes, key counts,
 * non-empty keys) so handlers contain only their op.  Adding an op is one
 * line in the list and one row here.
 */
#include "ops.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "op_sync.h"
#include "conn.h"
#include "ha.h"
#include "kvops.h"
#include "pbuf.h"
#include "rdzv.h"
#include "op_rdzv.h"
#include "server.h"
#include "status.h"
#include "op_watch.h"

/* The core answers with the wire's numbers (core/status.h); a renumbered Status would break here. */
#define OPS_SAME_STATUS(x) _Static_assert((int)CORE_##x == (int)MUSTER__STATUS__##x, "core status " #x)
OPS_SAME_STATUS(OK);
OPS_SAME_STATUS(NOT_FOUND);
OPS_SAME_STATUS(TIMEOUT);
OPS_SAME_STATUS(BAD_REQUEST);
OPS_SAME_STATUS(LIMIT);
OPS_SAME_STATUS(SHUTTING_DOWN);
OPS_SAME_STATUS(NOT_A_NUMBER);
OPS_SAME_STATUS(OVERFLOW);
OPS_SAME_STATUS(STALE_GENERATION);
OPS_SAME_STATUS(NOT_MEMBER);
OPS_SAME_STATUS(CONFLICT);
OPS_SAME_STATUS(INTERNAL);
OPS_SAME_STATUS(EXCLUDED);
OPS_SAME_STATUS(FORBIDDEN);

#define F_KEY(T, f) {OPC_KEY, offsetof(T, f), 0, #f}
#define F_PREFIX(T, f) {OPC_PREFIX, offsetof(T, f), 0, #f}
#define F_KEYS(T, f) {OPC_KEYS, offsetof(T, n_##f), offsetof(T, f), #f}
#define F_VALUE(T, f) {OPC_VALUE, offsetof(T, f), 0, #f}
#define F_VALUES(T, f) {OPC_VALUES, offsetof(T, n_##f), offsetof(T, f), #f}

/* Name and flags of a listed op. */
#define OPS_LISTED(c, n, f) [MUSTER__REQUEST__OP_##c].name = #n, [MUSTER__REQUEST__OP_##c].flags = (f),
/* Handler and field checks of an op. */
#define OP(c, h, ...) [MUSTER__REQUEST__OP_##c].fn = (h), [MUSTER__REQUEST__OP_##c].fields = {__VA_ARGS__}
#define NO_FIELDS {OPC_NONE, 0, 0, NULL}

static const struct op_row ops_rows[OPS_SLOTS] = {
    OPLIST(OPS_LISTED)
    OP(SET, kvops_set, F_KEY(Muster__SetReq, key), F_VALUE(Muster__SetReq, value)),
    OP(GET, kvops_get, F_KEY(Muster__GetReq, key)),
    OP(ADD, kvops_add, F_KEY(Muster__AddReq, key)),
    OP(COMPARE_SET, kvops_compare_set, F_KEY(Muster__CompareSetReq, key),
       F_VALUE(Muster__CompareSetReq, expected), F_VALUE(Muster__CompareSetReq, desired)),
    OP(DELETE, kvops_delete, F_KEY(Muster__DeleteReq, key)),
    OP(CHECK, kvops_check, F_KEYS(Muster__CheckReq, keys)),
    OP(WAIT, kvops_wait, F_KEYS(Muster__WaitReq, keys)),
    OP(NUM_KEYS, kvops_num_keys, NO_FIELDS),
    OP(MULTI_GET, kvops_multi_get, F_KEYS(Muster__MultiGetReq, keys)),
    OP(MULTI_SET, kvops_multi_set, F_KEYS(Muster__MultiSetReq, keys), F_VALUES(Muster__MultiSetReq, values)),
    OP(APPEND, kvops_append, F_KEY(Muster__AppendReq, key), F_VALUE(Muster__AppendReq, value)),
    OP(LIST, kvops_list, F_PREFIX(Muster__ListReq, prefix), F_PREFIX(Muster__ListReq, after)),
    OP(PING, kvops_ping, F_VALUE(Muster__PingReq, payload)),
    OP(BARRIER, op_sync_barrier, F_KEY(Muster__BarrierReq, name), F_PREFIX(Muster__BarrierReq, fetch)),
    OP(WATCH, watch_op_watch, F_PREFIX(Muster__WatchReq, prefix)),
    OP(UNWATCH, watch_op_unwatch, NO_FIELDS),
    OP(RDZV_JOIN, op_rdzv_join, F_PREFIX(Muster__RdzvJoinReq, node_id)),
    OP(RDZV_LEAVE, op_rdzv_leave, NO_FIELDS),
    OP(RDZV_HEARTBEAT, op_rdzv_heartbeat, NO_FIELDS),
    OP(RDZV_REPORT, op_rdzv_report, F_PREFIX(Muster__RdzvReportReq, node_id)),
    OP(QUEUE_PUSH, kvops_queue_push, F_KEY(Muster__QueuePushReq, key), F_VALUE(Muster__QueuePushReq, value)),
    OP(QUEUE_POP, kvops_queue_pop, F_KEY(Muster__QueuePopReq, key)),
    OP(QUEUE_LEN, kvops_queue_len, F_KEY(Muster__QueueLenReq, key)),
};

_Static_assert(OPS_SLOTS <= STATS_OP_SLOTS, "per-op counters need a slot per op case");

/* The row for a Request op case, or NULL. */
const struct op_row *ops_row(unsigned op_case)
{
    return (op_case < OPS_SLOTS && ops_rows[op_case].fn) ? &ops_rows[op_case] : NULL;
}

/* The name of an op case, or NULL when the table has no row for it. */
const char *ops_name(unsigned op_case)
{
    const struct op_row *r = ops_row(op_case);
    return r ? r->name : NULL;
}

/* Check one string: non-empty unless allowed, within --max-key; a wire status with msg filled. */
static int ops_check_key(struct conn *c, const char *s, int may_be_empty, const char *what, char *msg, size_t n)
{
    size_t len = s ? strlen(s) : 0;
    if (!len && !may_be_empty) {
        snprintf(msg, n, "%s is empty", what);
        stats_inc(&c->srv->stats, STAT_BAD_REQUEST);
        return MUSTER__STATUS__BAD_REQUEST;
    }
    if (len > c->srv->opt.max_key) {
        snprintf(msg, n, "%s of %zu bytes exceeds limit %llu", what, len, (unsigned long long)c->srv->opt.max_key);
        stats_inc(&c->srv->stats, STAT_LIMIT_KEY);
        return MUSTER__STATUS__LIMIT;
    }
    return MUSTER__STATUS__OK;
}

/* Check one value's size; a wire status with msg filled. */
static int ops_check_value(struct conn *c, const ProtobufCBinaryData *v, const char *what, char *msg, size_t n)
{
    if (v->len > c->srv->opt.max_value) {
        snprintf(msg, n, "%s of %zu bytes exceeds limit %llu", what, v->len, (unsigned long long)c->srv->opt.max_value);
        stats_inc(&c->srv->stats, STAT_LIMIT_VALUE);
        return MUSTER__STATUS__LIMIT;
    }
    return MUSTER__STATUS__OK;
}

/* Check a repeated field's count: 1.. (or 0.. for values) up to --max-keys-per-request. */
static int ops_check_count(struct conn *c, size_t count, int may_be_empty, const char *what, char *msg, size_t n)
{
    if (!count && !may_be_empty) {
        snprintf(msg, n, "no %s given", what);
        stats_inc(&c->srv->stats, STAT_BAD_REQUEST);
        return MUSTER__STATUS__BAD_REQUEST;
    }
    if (count > c->srv->opt.max_keys_per_request) {
        snprintf(msg, n, "%zu %s exceed limit %llu", count, what,
                 (unsigned long long)c->srv->opt.max_keys_per_request);
        stats_inc(&c->srv->stats, STAT_LIMIT_KEYS_PER_REQUEST);
        return MUSTER__STATUS__LIMIT;
    }
    return MUSTER__STATUS__OK;
}

/* Check that c may write key (a key of a mutating op): the world's keys are refused to others
 * (core/rdzv_keys.c); a wire status with msg filled, counted when refused. */
static int ops_check_writer(struct conn *c, const char *key, char *msg, size_t n)
{
    if (rdzv_keys_may_write(c->ns, c->rdzv, c->cred, key, strlen(key), msg, n) == CORE_OK)
        return MUSTER__STATUS__OK;
    stats_inc(&c->srv->stats, STAT_FORBIDDEN);
    return MUSTER__STATUS__FORBIDDEN;
}

/* Run one field check on the op's message m (of an op that writes when mutates); a wire status with msg
 * filled. */
static int ops_check_field(struct conn *c, const struct op_field *f, const char *m, int mutates, char *msg,
                           size_t n)
{
    int st = MUSTER__STATUS__OK;
    switch (f->kind) {
    case OPC_NONE:
        break;
    case OPC_KEY:
    case OPC_PREFIX:
        st = ops_check_key(c, *(char *const *)(m + f->off), f->kind == OPC_PREFIX, f->what, msg, n);
        if (st == MUSTER__STATUS__OK && mutates && f->kind == OPC_KEY)
            st = ops_check_writer(c, *(char *const *)(m + f->off), msg, n);
        break;
    case OPC_KEYS: {
        size_t count = *(const size_t *)(m + f->off);
        char *const *keys = *(char **const *)(m + f->off2);
        st = ops_check_count(c, count, 0, f->what, msg, n);
        for (size_t i = 0; st == MUSTER__STATUS__OK && i < count; i++) {
            st = ops_check_key(c, keys[i], 0, "key", msg, n);
            if (st == MUSTER__STATUS__OK && mutates)
                st = ops_check_writer(c, keys[i], msg, n);
        }
        break;
    }
    case OPC_VALUE:
        st = ops_check_value(c, (const ProtobufCBinaryData *)(m + f->off), f->what, msg, n);
        break;
    case OPC_VALUES: {
        size_t count = *(const size_t *)(m + f->off);
        const ProtobufCBinaryData *vals = *(ProtobufCBinaryData *const *)(m + f->off2);
        st = ops_check_count(c, count, 1, f->what, msg, n);
        for (size_t i = 0; st == MUSTER__STATUS__OK && i < count; i++)
            st = ops_check_value(c, &vals[i], "value", msg, n);
        break;
    }
    }
    return st;
}

/* Answer a request whose op this server does not know (or that carries none). */
static void ops_unknown(struct conn *c, const Muster__Request *req)
{
    const ProtobufCMessage *b = &req->base;
    if (req->op_case == MUSTER__REQUEST__OP__NOT_SET && b->n_unknown_fields == 0) {
        stats_inc(&c->srv->stats, STAT_BAD_REQUEST);
        conn_reply(c, req->id, MUSTER__STATUS__BAD_REQUEST, "request carries no op", NULL);
        return;
    }
    unsigned op = req->op_case ? (unsigned)req->op_case : b->unknown_fields[0].tag;
    stats_inc(&c->srv->stats, STAT_UNKNOWN_OP);
    conn_replyf(c, req->id, MUSTER__STATUS__UNKNOWN_OP, "unknown op %u", op);
}

/* The message of req's op (a case with a row), or NULL: the op's field descriptor is looked up once per op
 * case instead of on every request. */
static const ProtobufCMessage *ops_message(const Muster__Request *req)
{
    static const ProtobufCFieldDescriptor *fields[OPS_SLOTS];
    unsigned op = req->op_case;
    if (!fields[op])
        fields[op] = protobuf_c_message_descriptor_get_field(&muster__request__descriptor, op);
    return pbuf_oneof_at(&req->base, fields[op]);
}

/* Run the row-driven checks that every op shares; a wire status with msg filled. */
static int ops_check(struct conn *c, const struct op_row *r, const Muster__Request *req, char *msg, size_t n)
{
    struct server *srv = c->srv;
    if (!c->ns && !(r->flags & OPL_BEFORE_HELLO)) {
        snprintf(msg, n, "hello required before %s", r->name);
        stats_inc(&srv->stats, STAT_UNAUTHENTICATED);
        return MUSTER__STATUS__UNAUTHENTICATED;
    }
    if (conn_pending_has(c, req->id)) {
        snprintf(msg, n, "request id %llu is still pending", (unsigned long long)req->id);
        stats_inc(&srv->stats, STAT_BAD_REQUEST);
        return MUSTER__STATUS__BAD_REQUEST;
    }
    if (!(r->flags & OPL_BEFORE_HELLO) && !ha_serving(srv)) {
        /* The leader's address, for the client to follow; text with spaces when there is none. */
        const char *leader = ha_leader(srv);
        snprintf(msg, n, "%s", *leader ? leader : "no leader: etcd unreachable or without quorum");
        return MUSTER__STATUS__NOT_LEADER;
    }
    if ((r->flags & OPL_MAY_BLOCK) && srv->draining) {
        snprintf(msg, n, "server is shutting down");
        return MUSTER__STATUS__SHUTTING_DOWN;
    }
    const ProtobufCMessage *m = ops_message(req);
    if (!m) {
        snprintf(msg, n, "%s without its message", r->name);
        return MUSTER__STATUS__BAD_REQUEST;
    }
    for (size_t i = 0; i < OPS_MAX_FIELDS; i++) {
        int st = ops_check_field(c, &r->fields[i], (const char *)m, (r->flags & OPL_MUTATES) != 0, msg, n);
        if (st != MUSTER__STATUS__OK)
            return st;
    }
    return MUSTER__STATUS__OK;
}

/* Run generic checks and the handler for one request from c, taken off the wire at monotonic time t0 (ns). */
void ops_dispatch(struct conn *c, Muster__Request *req, uint64_t t0)
{
    struct stats *st = &c->srv->stats;
    stats_inc(st, STAT_REQUESTS);
    const struct op_row *r = ops_row(req->op_case);
    if (!r) {
        ops_unknown(c, req);
        return;
    }
    st->op[req->op_case]++;
    char msg[512];
    int s = ops_check(c, r, req, msg, sizeof msg);
    if (s != MUSTER__STATUS__OK) {
        conn_reply(c, req->id, s, msg, NULL);
        return;
    }
    /* The one place latency is recorded: from the frame taken to the handler's return (decoding, checks
     * and handler; not time spent parked).  t0 is the clock read that also timed the frame's arrival. */
    r->fn(c, req);
    stats_observe(st, req->op_case, clock_now_ns() - t0);
}
