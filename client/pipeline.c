/*
 * Pipelines: a batch of independent ops written back to back in one flush
 * and answered together, so N ops cost one round trip instead of N.  The
 * wire already allows it (requests carry ids); this file only keeps copies
 * of the ops until the run and the answers until destroy.
 *
 * On a failover handle (failover.c) a run survives a lost connection or a
 * standby: ops answered NOT_LEADER and unanswered ops that are safe to
 * repeat are sent again after the reconnect; an unanswered add is not, and
 * its result is MUSTER_ECONN.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* One queued op and, after the run, its answer. */
struct pipe_op {
    Muster__Request__OpCase op;
    char *key;
    uint8_t *value;
    size_t len;
    int64_t delta;
    uint64_t id;
    int status;
    int lost;       /* in flight on a lost connection and not safe to repeat */
    Muster__Response *resp;
};

struct muster_pipeline {
    muster_t *m;
    struct pipe_op *ops;
    size_t n;
    size_t cap;
    int ran;
    int run_rc;     /* the run's transport outcome, for ops it left unanswered */
};

/* A new empty batch on m; NULL with *err on failure. */
muster_pipeline *muster_pipeline_create(muster_t *m, int *err)
{
    int tmp;
    err = err ? err : &tmp;
    if (!m) {
        *err = MUSTER_EINVAL;
        return NULL;
    }
    muster_pipeline *p = calloc(1, sizeof *p);
    *err = p ? MUSTER_OK : MUSTER_ENOMEM;
    if (p)
        p->m = m;
    return p;
}

/* Free the batch and its results; NULL is a no-op. */
void muster_pipeline_destroy(muster_pipeline *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++) {
        free(p->ops[i].key);
        free(p->ops[i].value);
        wire_free(p->ops[i].resp);
        /* An answer that arrived after a failed run must not linger. */
        if (p->ops[i].id && !p->ops[i].resp)
            wire_forget(p->m, p->ops[i].id);
    }
    free(p->ops);
    free(p);
}

/* Append an op with copies of key and value; returns a muster_err. */
static int pipe_push(muster_pipeline *p, Muster__Request__OpCase op, const char *key, const void *value,
                     size_t len, int64_t delta)
{
    if (!p || !key || (!value && len) || p->ran)
        return MUSTER_EINVAL;
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        struct pipe_op *ops = realloc(p->ops, cap * sizeof *ops);
        if (!ops)
            return MUSTER_ENOMEM;
        p->ops = ops;
        p->cap = cap;
    }
    struct pipe_op *o = &p->ops[p->n];
    memset(o, 0, sizeof *o);
    o->op = op;
    o->key = strdup(key);
    o->value = len ? malloc(len) : NULL;
    if (!o->key || (len && !o->value)) {
        free(o->key);
        free(o->value);
        return MUSTER_ENOMEM;
    }
    if (len)
        memcpy(o->value, value, len);
    o->len = len;
    o->delta = delta;
    p->n++;
    return MUSTER_OK;
}

/* Add a set (the value is copied). */
int muster_pipeline_set(muster_pipeline *p, const char *key, const void *value, size_t len)
{
    return pipe_push(p, MUSTER__REQUEST__OP_SET, key, value, len, 0);
}

/* Add a non-blocking get. */
int muster_pipeline_get(muster_pipeline *p, const char *key)
{
    return pipe_push(p, MUSTER__REQUEST__OP_GET, key, NULL, 0, 0);
}

/* Add an add. */
int muster_pipeline_add(muster_pipeline *p, const char *key, int64_t delta)
{
    return pipe_push(p, MUSTER__REQUEST__OP_ADD, key, NULL, 0, delta);
}

/* Add a delete. */
int muster_pipeline_delete(muster_pipeline *p, const char *key)
{
    return pipe_push(p, MUSTER__REQUEST__OP_DELETE, key, NULL, 0, 0);
}

/* Number of ops added so far. */
size_t muster_pipeline_count(const muster_pipeline *p)
{
    return p ? p->n : 0;
}

/* Pack op o into the handle's output buffer, assigning its id. */
static int pipe_queue(muster_t *m, struct pipe_op *o)
{
    Muster__Request req = MUSTER__REQUEST__INIT;
    Muster__SetReq set = MUSTER__SET_REQ__INIT;
    Muster__GetReq get = MUSTER__GET_REQ__INIT;
    Muster__AddReq add = MUSTER__ADD_REQ__INIT;
    Muster__DeleteReq del = MUSTER__DELETE_REQ__INIT;
    req.op_case = o->op;
    if (o->op == MUSTER__REQUEST__OP_SET) {
        set.key = o->key;
        set.value = (ProtobufCBinaryData){o->len, o->value};
        req.set = &set;
    } else if (o->op == MUSTER__REQUEST__OP_GET) {
        get.key = o->key;
        req.get = &get;
    } else if (o->op == MUSTER__REQUEST__OP_ADD) {
        add.key = o->key;
        add.delta = o->delta;
        req.add = &add;
    } else {
        del.key = o->key;
        req.delete_ = &del;
    }
    return wire_queue(m, &req, &o->id);
}

/* Whether op o still waits for an answer it can use. */
static int pipe_pending(const struct pipe_op *o)
{
    return !o->resp && !o->lost;
}

/* Queue every pending op, send them and wait for their answers before deadline. */
static int pipe_exchange(muster_pipeline *p, uint64_t deadline)
{
    muster_t *m = p->m;
    size_t mark = m->out.len;
    int rc = MUSTER_OK;
    for (size_t i = 0; i < p->n && rc == MUSTER_OK; i++)
        if (pipe_pending(&p->ops[i]))
            rc = pipe_queue(m, &p->ops[i]);
    if (rc != MUSTER_OK) {
        /* Nothing was sent: take the queued frames back so they do not go
         * out with the next call, whose caller would not expect answers. */
        m->out.len = mark;
        for (size_t i = 0; i < p->n; i++)
            if (pipe_pending(&p->ops[i]))
                p->ops[i].id = 0;
    }
    if (rc == MUSTER_OK)
        rc = wire_flush(m, deadline);
    for (size_t i = 0; i < p->n && rc == MUSTER_OK; i++) {
        struct pipe_op *o = &p->ops[i];
        if (!pipe_pending(o))
            continue;
        rc = wire_wait(m, o->id, deadline, &o->resp);
        if (rc == MUSTER_OK)
            o->status = wire_check(m, o->resp, o->op);
    }
    return rc;
}

/* After one exchange on a failover handle: drop NOT_LEADER answers so they
 * are sent again, settle unanswered ops of a lost connection; returns how
 * many ops are still pending. */
static size_t pipe_settle(muster_pipeline *p, char *leader, size_t n)
{
    size_t pending = 0;
    int lost = failover_lost(p->m);
    for (size_t i = 0; i < p->n; i++) {
        struct pipe_op *o = &p->ops[i];
        if (o->resp && o->status == MUSTER_ENOTLEADER) {
            snprintf(leader, n, "%s", o->resp->error_message);
            wire_free(o->resp);
            o->resp = NULL;
        } else if (!o->resp && lost && !failover_idempotent(o->op)) {
            o->lost = 1;
        }
        pending += pipe_pending(o);
    }
    return pending;
}

/* Run the batch on a failover handle, reconnecting between exchanges. */
static int pipe_run_failover(muster_pipeline *p, uint64_t deadline)
{
    muster_t *m = p->m;
    int rc = MUSTER_ECONN;
    for (unsigned round = 0; round < FAILOVER_MAX_RESENDS; round++) {
        rc = failover_ready(m, deadline);
        if (rc != MUSTER_OK)
            return rc;
        rc = pipe_exchange(p, deadline);
        if (rc != MUSTER_OK && !failover_lost(m))
            return rc;
        char leader[256] = "";
        if (pipe_settle(p, leader, sizeof leader) == 0)
            return MUSTER_OK;
        if (leader[0] && !m->broken)
            failover_redirect(m, leader);
        if (deadline_left(deadline) == 0)
            return rc == MUSTER_OK ? MUSTER_ETIMEDOUT : rc;
    }
    return rc == MUSTER_OK ? MUSTER_ECONN : rc;
}

/* Send every op and wait for all answers under one deadline. */
int muster_pipeline_run(muster_pipeline *p, uint32_t timeout_ms)
{
    if (!p || p->ran)
        return MUSTER_EINVAL;
    muster_t *m = p->m;
    if (m->broken && !m->url.failover)
        return error_set(m, MUSTER_ECONN, "connection unusable after an earlier error");
    p->ran = 1;
    uint64_t deadline = deadline_after((uint64_t)call_timeout(m, timeout_ms) + CALL_GRACE_MS);
    p->run_rc = m->url.failover ? pipe_run_failover(p, deadline) : pipe_exchange(p, deadline);
    return p->run_rc;
}

/* The outcome of op i after a run, as a muster_err. */
int muster_pipeline_result(const muster_pipeline *p, size_t i, const void **value, size_t *len,
                           int64_t *number)
{
    if (!p || !p->ran || i >= p->n)
        return MUSTER_EINVAL;
    const struct pipe_op *o = &p->ops[i];
    if (o->lost)
        return MUSTER_ECONN;
    if (!o->resp)
        return p->run_rc;
    /* A delete of an absent key is not a failure (see muster_delete). */
    if (o->op == MUSTER__REQUEST__OP_DELETE && (o->status == MUSTER_OK || o->status == MUSTER_ENOTFOUND)) {
        if (number)
            *number = o->status == MUSTER_OK && o->resp->delete_->deleted;
        return MUSTER_OK;
    }
    if (o->status != MUSTER_OK)
        return o->status;
    if (o->op == MUSTER__REQUEST__OP_GET) {
        if (value)
            *value = o->resp->get->value.data;
        if (len)
            *len = o->resp->get->value.len;
    } else if (o->op == MUSTER__REQUEST__OP_ADD && number) {
        *number = o->resp->add->value;
    }
    return MUSTER_OK;
}
