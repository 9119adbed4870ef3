/*
 * Pushed events: watch notifications, rendezvous membership changes and
 * shutdown notices, queued FIFO as they are read (during any call) and
 * handed out by muster_next_event.
 *
 * The queue is bounded (EVENT_QUEUE_MAX): a caller that watches a busy
 * prefix and never reads must not grow the process without limit.  When it
 * is full the oldest event is dropped and counted (muster_events_dropped),
 * since the newest state is the one a watcher acts on.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* One queued event, still in wire form. */
struct event_node {
    Muster__Event *ev;
    struct event_node *next;
};

/* Unlink and return the oldest queued node, or NULL. */
static struct event_node *event_pop(muster_t *m)
{
    struct event_node *n = m->ev_head;
    if (!n)
        return NULL;
    m->ev_head = n->next;
    if (!m->ev_head)
        m->ev_tail = NULL;
    m->ev_count--;
    return n;
}

/* Queue a pushed event (takes ownership of ev). */
void event_push(muster_t *m, Muster__Event *ev)
{
    /* Kinds from a newer server decode as NOT_SET; nothing to report. */
    if (ev->event_case == MUSTER__EVENT__EVENT__NOT_SET) {
        muster__event__free_unpacked(ev, NULL);
        return;
    }
    if (m->ev_count >= EVENT_QUEUE_MAX) {
        struct event_node *old = event_pop(m);
        muster__event__free_unpacked(old->ev, NULL);
        free(old);
        m->ev_dropped++;
        log_emit(m, MUSTER_LOG_WARN, "event queue full: dropped the oldest event");
    }
    struct event_node *n = malloc(sizeof *n);
    if (!n) {
        muster__event__free_unpacked(ev, NULL);
        m->ev_dropped++;
        return;
    }
    n->ev = ev;
    n->next = NULL;
    if (m->ev_tail)
        m->ev_tail->next = n;
    else
        m->ev_head = n;
    m->ev_tail = n;
    m->ev_count++;
}

/* Free every queued event. */
void event_clear(muster_t *m)
{
    struct event_node *n;
    while ((n = event_pop(m)) != NULL) {
        muster__event__free_unpacked(n->ev, NULL);
        free(n);
    }
}

/* Copy len bytes into a new NUL-terminated buffer (NULL on allocation failure). */
static void *event_dup(const void *p, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        if (len)
            memcpy(d, p, len);
        d[len] = '\0';
    }
    return d;
}

/* Fill e from a watch event; 0 or -1 on allocation failure. */
static int event_from_watch(muster_event *e, const Muster__WatchEvent *w)
{
    e->kind = w->kind == MUSTER__WATCH_EVENT__KIND__DELETE ? MUSTER_EVENT_DELETE : MUSTER_EVENT_SET;
    e->watch_id = w->watch_id;
    e->key = event_dup(w->key, strlen(w->key));
    if (e->kind == MUSTER_EVENT_SET) {
        e->value = event_dup(w->value.data, w->value.len);
        e->value_len = w->value.len;
    }
    return e->key && (e->kind != MUSTER_EVENT_SET || e->value) ? 0 : -1;
}

/* Fill e from a membership event; 0 or -1 on allocation failure. */
static int event_from_membership(muster_event *e, const Muster__MembershipEvent *me)
{
    e->kind = me->kind == MUSTER__MEMBERSHIP_EVENT__KIND__NODE_WAITING ? MUSTER_EVENT_NODE_WAITING
                                                                       : MUSTER_EVENT_MEMBER_LOST;
    e->generation = me->generation;
    e->node_id = event_dup(me->node_id, strlen(me->node_id));
    return e->node_id ? 0 : -1;
}

/* Convert a wire event into a caller-owned muster_event (NULL on allocation failure). */
static muster_event *event_convert(const Muster__Event *ev)
{
    muster_event *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    int rc = -1;
    if (ev->event_case == MUSTER__EVENT__EVENT_WATCH) {
        rc = event_from_watch(e, ev->watch);
    } else if (ev->event_case == MUSTER__EVENT__EVENT_MEMBERSHIP) {
        rc = event_from_membership(e, ev->membership);
    } else {
        e->kind = MUSTER_EVENT_SHUTDOWN;
        e->reason = event_dup(ev->shutdown->reason, strlen(ev->shutdown->reason));
        rc = e->reason ? 0 : -1;
    }
    if (rc != 0) {
        muster_event_free(e);
        return NULL;
    }
    return e;
}

/* Next pushed event, waiting up to timeout_ms (0 = do not wait). */
int muster_next_event(muster_t *m, muster_event **ev, uint32_t timeout_ms)
{
    if (!m || !ev)
        return MUSTER_EINVAL;
    *ev = NULL;
    if (!m->ev_head) {
        /* A broken handle still hands out what it read before it broke
         * (a shutdown notice typically arrives just before the close). */
        int rc = call_pump(m, deadline_after(timeout_ms), timeout_ms > 0);
        if (!m->ev_head)
            return rc == MUSTER_OK ? MUSTER_ETIMEDOUT : rc;
    }
    muster_event *e = event_convert(m->ev_head->ev);
    if (!e)
        return error_set(m, MUSTER_ENOMEM, "out of memory converting an event");
    struct event_node *n = event_pop(m);
    muster__event__free_unpacked(n->ev, NULL);
    free(n);
    *ev = e;
    return MUSTER_OK;
}

/* Free an event; NULL is a no-op. */
void muster_event_free(muster_event *ev)
{
    if (!ev)
        return;
    free(ev->key);
    free(ev->value);
    free(ev->node_id);
    free(ev->reason);
    free(ev);
}

/* Events dropped because the queue was full. */
uint64_t muster_events_dropped(const muster_t *m)
{
    return m ? m->ev_dropped : 0;
}

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
    if (rc == MUSTER_OK && watch_id)
        *watch_id = resp->watch->watch_id;
    call_free(resp);
    return rc;
}

/* Stop a watch. */
int muster_unwatch(muster_t *m, uint64_t watch_id, uint32_t timeout_ms)
{
    if (!m)
        return MUSTER_EINVAL;
    Muster__UnwatchReq op = MUSTER__UNWATCH_REQ__INIT;
    op.watch_id = watch_id;
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_UNWATCH;
    req.unwatch = &op;
    Muster__Response *resp;
    int rc = call_run(m, &req, &resp, call_timeout(m, timeout_ms));
    call_free(resp);
    return rc;
}
