/*
 * Pipelines: a batch of independent ops written back to back in one flush
 * and answered together, so N ops cost one round trip instead of N.  The
 * wire already allows it (requests carry ids): each op is a call in flight
 * (flight.c) and the run waits for all of them; this file only keeps
 * copies of the ops until the run and the answers until destroy.
 *
 * On a failover handle (failover.c) a run survives a lost connection or a
 * standby: ops answered NOT_LEADER and unanswered ops that are safe to
 * repeat are sent again after the reconnect; an unanswered add is not, and
 * its result is MUSTER_ECONN.
 */
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
    int status;     /* the answer's status */
    int rc;         /* the transport's error when unanswered */
    int lost;       /* in flight on a lost connection and not safe to repeat */
    int *pending;   /* the batch's count of ops not yet completed */
    Muster__Response *resp;
};

struct muster_pipeline {
    muster_t *m;
    struct pipe_op *ops;
    size_t n;
    size_t cap;
    int ran;
    int pending;    /* ops in flight (under the handle's lock) */
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

/* Completion of one op: keep its answer, or why it has none. */
static void pipe_done(muster_t *m, struct flight_result *r, void *arg)
{
    struct pipe_op *o = arg;
    if (r->answered) {
        o->resp = r->resp;
        r->resp = NULL;
        o->status = r->rc;
    } else if (r->undecided) {
        o->lost = 1;
    } else {
        o->rc = r->rc;
    }
    flight_signal(m, o->pending);
}

/* Submit op o as a call in flight under the run's timeout; a muster_err. */
static int pipe_submit(muster_t *m, struct pipe_op *o, uint32_t timeout_ms)
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
    return flight_submit(m, &req, timeout_ms, pipe_done, o);
}

/* Whether every op of the batch in arg completed (under the lock). */
static int pipe_ready(muster_t *m, void *arg)
{
    (void)m;
    return ((muster_pipeline *)arg)->pending == 0;
}

/* Send every op and wait for all answers under one deadline.  Each op is a
 * call in flight (flight.c), so a failover handle sends again what is safe
 * to, and an unanswered add comes back lost (MUSTER_ECONN). */
int muster_pipeline_run(muster_pipeline *p, uint32_t timeout_ms)
{
    if (!p || p->ran)
        return MUSTER_EINVAL;
    muster_t *m = p->m;
    p->ran = 1;
    uint32_t t = call_timeout(m, timeout_ms);
    int rc = MUSTER_OK;
    for (size_t i = 0; i < p->n && rc == MUSTER_OK; i++) {
        p->ops[i].pending = &p->pending;
        flight_lock(m);
        p->pending++;
        flight_unlock(m);
        rc = pipe_submit(m, &p->ops[i], t);
        if (rc != MUSTER_OK)
            flight_signal(m, &p->pending);
    }
    flight_wait(m, pipe_ready, p, 0);
    /* The run fails with the first transport error among the ops (a refused submit included). */
    for (size_t i = 0; i < p->n && rc == MUSTER_OK; i++)
        rc = p->ops[i].rc;
    p->run_rc = rc;
    return rc;
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
        return o->rc ? o->rc : p->run_rc;
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
