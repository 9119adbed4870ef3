/*
 * The asynchronous calls of the public API (include/muster/async.h): each
 * has its Request built by kvreq.c as kv.c does, submits it as a call in flight
 * (flight.c) with a completion that turns the answer into a muster_reply
 * for the caller's callback; the loop integration (fd, events, timeout,
 * handle, the loop's hooks); and muster_close, which cancels the calls
 * still in flight before freeing the handle.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <muster/async.h>

#include "internal.h"

/* One submitted call's callback and what its reply needs from the request. */
struct async_call {
    muster_callback cb;
    void *arg;
    size_t n;          /* multi_get: the number of keys asked */
    int fetch;         /* barrier: a fetch key was given */
    char *prefix;      /* watch on a failover handle: its prefix, recorded once it is answered */
};

/* Fill a multi_get reply's arrays (caller frees *vals and *lens); a muster_err. */
static int async_multi(const Muster__MultiGetRes *res, size_t want, muster_reply *r, const void ***vals,
                       size_t **lens)
{
    if (res->n_values != want)
        return MUSTER_EPROTO;
    *vals = calloc(want, sizeof **vals);
    *lens = calloc(want, sizeof **lens);
    if (!*vals || !*lens)
        return MUSTER_ENOMEM;
    for (size_t i = 0; i < want; i++) {
        (*vals)[i] = res->values[i].data;
        (*lens)[i] = res->values[i].len;
    }
    r->n = want;
    r->values = *vals;
    r->lens = *lens;
    return MUSTER_OK;
}

/* Read an OK answer's fields into r. */
static void async_fill(const struct async_call *c, const struct flight_result *fr, muster_reply *r)
{
    const Muster__Response *p = fr->resp;
    switch (fr->op) {
    case MUSTER__REQUEST__OP_GET:
        r->value = p->get->value.data;
        r->len = p->get->value.len;
        break;
    case MUSTER__REQUEST__OP_ADD:
        r->number = p->add->value;
        break;
    case MUSTER__REQUEST__OP_COMPARE_SET:
        r->value = p->compare_set->value.data;
        r->len = p->compare_set->value.len;
        r->number = p->compare_set->swapped;
        break;
    case MUSTER__REQUEST__OP_DELETE:
        r->number = p->delete_->deleted;
        break;
    case MUSTER__REQUEST__OP_CHECK:
        r->number = p->check->all_present;
        break;
    case MUSTER__REQUEST__OP_NUM_KEYS:
        r->number = (int64_t)p->num_keys->count;
        break;
    case MUSTER__REQUEST__OP_APPEND:
        r->number = (int64_t)p->append->length;
        break;
    case MUSTER__REQUEST__OP_WAIT:
        r->number = p->wait->queue;
        break;
    case MUSTER__REQUEST__OP_QUEUE_PUSH:
        r->number = (int64_t)p->queue_push->length;
        break;
    case MUSTER__REQUEST__OP_QUEUE_POP:
        r->number = (int64_t)p->queue_pop->length;
        r->value = p->queue_pop->value.data;
        r->len = p->queue_pop->value.len;
        break;
    case MUSTER__REQUEST__OP_QUEUE_LEN:
        r->number = (int64_t)p->queue_len->length;
        break;
    case MUSTER__REQUEST__OP_LIST:
        r->n = p->list->n_keys;
        r->keys = (const char *const *)p->list->keys;
        r->more = p->list->more;
        break;
    case MUSTER__REQUEST__OP_PING:
        r->number = (int64_t)(deadline_now_us() - fr->started_us);
        break;
    case MUSTER__REQUEST__OP_BARRIER:
        r->number = (int64_t)p->barrier->round;
        r->value = c->fetch ? p->barrier->value.data : NULL;
        r->len = c->fetch ? p->barrier->value.len : 0;
        if (c->fetch && !p->barrier->found) {
            r->err = MUSTER_ENOTFOUND;
            r->detail = "the barrier was passed; the fetch key did not exist at release";
        }
        break;
    default:
        break;
    }
}

/* A watch answered: its id (a failover handle records the watch, to register it again after a reconnect,
 * and hands out its own id, as muster_watch does). */
static int async_watched(muster_t *m, const struct async_call *c, uint64_t server_id, muster_reply *r)
{
    int rc = MUSTER_OK;
    r->number = (int64_t)server_id;
    if (!c->prefix)
        return rc;
    flight_lock(m);
    rc = event_watch_add(m, c->prefix, server_id);
    r->number = (int64_t)m->watch_seq;
    flight_unlock(m);
    return rc;
}

/* Completion of an asynchronous call: build its muster_reply and run the caller's callback. */
static void async_done(muster_t *m, struct flight_result *fr, void *arg)
{
    struct async_call *c = arg;
    muster_reply r;
    memset(&r, 0, sizeof r);
    r.err = fr->rc;
    r.detail = fr->detail;
    /* The proto allows either answer for an absent key (see muster_delete). */
    if (fr->op == MUSTER__REQUEST__OP_DELETE && fr->rc == MUSTER_ENOTFOUND)
        r.err = MUSTER_OK;
    const void **vals = NULL;
    size_t *lens = NULL;
    if (fr->rc == MUSTER_OK && fr->op == MUSTER__REQUEST__OP_MULTI_GET)
        r.err = async_multi(fr->resp->multi_get, c->n, &r, &vals, &lens);
    else if (fr->rc == MUSTER_OK && fr->op == MUSTER__REQUEST__OP_WATCH)
        r.err = async_watched(m, c, fr->resp->watch->watch_id, &r);
    else if (fr->rc == MUSTER_OK)
        async_fill(c, fr, &r);
    if (r.err != fr->rc && r.err != MUSTER_OK && r.detail == fr->detail)
        r.detail = muster_strerror(r.err);
    if (r.err == MUSTER_OK)
        r.detail = "";
    if (c->cb)
        c->cb(m, &r, c->arg);
    free(vals);
    free(lens);
    free(c->prefix);
    free(c);
}

/* Submit k (filled when fill, a kvreq_* function's result, is MUSTER_OK) with
 * cb(arg) as its callback and free it; n and fetch are what the reply needs to know. */
static int async_submit(muster_t *m, int fill, struct kvreq *k, muster_callback cb, void *arg, size_t n, int fetch)
{
    if (fill != MUSTER_OK)
        return fill;
    struct async_call *c = malloc(sizeof *c);
    int rc = MUSTER_ENOMEM;
    if (c) {
        *c = (struct async_call){cb, arg, n, fetch, NULL};
        rc = flight_submit(m, &k->req, k->timeout_ms, async_done, c);
        if (rc != MUSTER_OK)
            free(c);
    }
    kvreq_free(k);
    return rc;
}

/* Submit a set. */
int muster_async_set(muster_t *m, const char *key, const void *value, size_t len, uint32_t timeout_ms,
                     muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_set(&k, m, key, value, len, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a get, parked at the server until key exists when wait != 0. */
int muster_async_get(muster_t *m, const char *key, int wait, uint32_t timeout_ms, muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_get(&k, m, key, wait, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit an add. */
int muster_async_add(muster_t *m, const char *key, int64_t delta, uint32_t timeout_ms, muster_callback cb,
                     void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_add(&k, m, key, delta, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a compare_set. */
int muster_async_compare_set(muster_t *m, const char *key, const void *expected, size_t elen, const void *desired,
                             size_t dlen, uint32_t timeout_ms, muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_compare_set(&k, m, key, expected, elen, desired, dlen, timeout_ms), &k, cb, arg,
                        0, 0);
}

/* Submit a delete. */
int muster_async_delete(muster_t *m, const char *key, uint32_t timeout_ms, muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_delete(&k, m, key, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a check of n keys. */
int muster_async_check(muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms, muster_callback cb,
                       void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_check(&k, m, keys, n, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a wait for n keys. */
int muster_async_wait(muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms, muster_callback cb,
                      void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_wait(&k, m, keys, n, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a wait for key's count to reach at_least. */
int muster_async_wait_count(muster_t *m, const char *key, int64_t at_least, uint32_t timeout_ms, muster_callback cb,
                            void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_wait_count(&k, m, key, at_least, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a wait for key that counts its queue only with more than skip values. */
int muster_async_wait_skip(muster_t *m, const char *key, uint64_t skip, uint32_t timeout_ms, muster_callback cb,
                           void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_wait_skip(&k, m, key, skip, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a push to key's queue. */
int muster_async_queue_push(muster_t *m, const char *key, const void *value, size_t len, uint32_t timeout_ms,
                            muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_queue_push(&k, m, key, value, len, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a pop of key's queue. */
int muster_async_queue_pop(muster_t *m, const char *key, uint32_t timeout_ms, muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_queue_pop(&k, m, key, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a length of key's queue. */
int muster_async_queue_len(muster_t *m, const char *key, uint32_t timeout_ms, muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_queue_len(&k, m, key, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a watch of prefix: events arrive through muster_next_event(); the reply's number is the watch's id. */
int muster_async_watch(muster_t *m, const char *prefix, uint32_t timeout_ms, muster_callback cb, void *arg)
{
    if (!m || !prefix)
        return MUSTER_EINVAL;
    struct async_call *c = calloc(1, sizeof *c);
    if (!c || (m->url.failover && !(c->prefix = strdup(prefix)))) {
        free(c);
        return MUSTER_ENOMEM;
    }
    c->cb = cb;
    c->arg = arg;
    Muster__WatchReq op = MUSTER__WATCH_REQ__INIT;
    op.prefix = (char *)prefix;
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_WATCH;
    req.watch = &op;
    int rc = flight_submit(m, &req, call_timeout(m, timeout_ms), async_done, c);
    if (rc != MUSTER_OK) {
        free(c->prefix);
        free(c);
    }
    return rc;
}

/* Submit a num_keys. */
int muster_async_num_keys(muster_t *m, uint32_t timeout_ms, muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_num_keys(&k, m, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a multi_get of n keys. */
int muster_async_multi_get(muster_t *m, const char *const *keys, size_t n, int wait, uint32_t timeout_ms,
                           muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_multi_get(&k, m, keys, n, wait, timeout_ms), &k, cb, arg, n, 0);
}

/* Submit a multi_set of n keys. */
int muster_async_multi_set(muster_t *m, const char *const *keys, const void *const *values, const size_t *lens,
                           size_t n, uint32_t timeout_ms, muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_multi_set(&k, m, keys, values, lens, n, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit an append. */
int muster_async_append(muster_t *m, const char *key, const void *value, size_t len, uint32_t timeout_ms,
                        muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_append(&k, m, key, value, len, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a list of one page. */
int muster_async_list(muster_t *m, const char *prefix, const char *after, uint32_t limit, uint32_t timeout_ms,
                      muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_list(&k, m, prefix, after, limit, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a ping. */
int muster_async_ping(muster_t *m, uint32_t timeout_ms, muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_ping(&k, m, NULL, 0, timeout_ms), &k, cb, arg, 0, 0);
}

/* Submit a barrier arrival, optionally fetching a key at release. */
int muster_async_barrier(muster_t *m, const char *name, uint32_t count, const char *fetch_key, uint32_t timeout_ms,
                         muster_callback cb, void *arg)
{
    struct kvreq k;
    return async_submit(m, kvreq_barrier(&k, m, name, count, fetch_key, timeout_ms), &k, cb, arg, 0,
                        fetch_key != NULL);
}

/* Attach a loop's hooks to m (NULL detaches the current ones). */
int muster_async_attach(muster_t *m, const muster_loop *loop, void *arg)
{
    if (!m || (loop && !loop->update))
        return MUSTER_EINVAL;
    flight_lock(m);
    void (*old_detach)(void *) = m->loop_detach;
    void *old_arg = m->loop_arg;
    m->loop_update = loop ? loop->update : NULL;
    m->loop_detach = loop ? loop->detach : NULL;
    m->loop_arg = arg;
    /* Nothing matches this, so the next step tells the new loop everything. */
    m->loop_fd = -2;
    flight_unlock(m);
    if (old_detach)
        old_detach(old_arg);
    if (loop)
        flight_handle(m, 0);
    return MUSTER_OK;
}

/* The socket to wait on (-1 while there is none). */
int muster_async_fd(muster_t *m)
{
    if (!m)
        return -1;
    int fd, ms;
    short ev;
    flight_wants(m, &fd, &ev, &ms);
    return fd;
}

/* The MUSTER_ASYNC_* events the handle waits for now. */
int muster_async_events(muster_t *m)
{
    if (!m)
        return 0;
    int fd, ms;
    short ev;
    flight_wants(m, &fd, &ev, &ms);
    return ((ev & POLLIN) ? MUSTER_ASYNC_READ : 0) | ((ev & POLLOUT) ? MUSTER_ASYNC_WRITE : 0);
}

/* Milliseconds until muster_async_handle is due without an event. */
int muster_async_timeout(muster_t *m)
{
    if (!m)
        return -1;
    int fd, ms;
    short ev;
    flight_wants(m, &fd, &ev, &ms);
    return ms;
}

/* Do the work events allow and run the completed calls' callbacks. */
int muster_async_handle(muster_t *m, int events)
{
    if (!m)
        return MUSTER_EINVAL;
    short rev = (short)(((events & MUSTER_ASYNC_READ) ? POLLIN : 0) | ((events & MUSTER_ASYNC_WRITE) ? POLLOUT : 0));
    flight_handle(m, rev);
    flight_lock(m);
    int rc = m->broken;
    flight_unlock(m);
    return rc;
}

/* Close the connection and free the handle; NULL is a no-op.  Calls still
 * in flight complete first, with MUSTER_ECANCELED, on this thread. */
void muster_close(muster_t *m)
{
    if (!m)
        return;
    flight_cancel_all(m);
    flight_lock(m);
    void (*detach)(void *) = m->loop_detach;
    void *arg = m->loop_arg;
    m->loop_update = NULL;
    m->loop_detach = NULL;
    flight_unlock(m);
    if (detach)
        detach(arg);
    conn_free(m);
}
