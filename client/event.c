/*
 * The event queue: watch notifications, rendezvous membership changes and
 * shutdown notices, queued FIFO as the wire reads them (during any call)
 * and handed out, converted, by muster_next_event (watch.c).
 *
 * The queue is bounded (EVENT_QUEUE_MAX): a caller that watches a busy
 * prefix and never reads must not grow the process without limit.  When it
 * is full the oldest event is dropped and counted (muster_events_dropped),
 * since the newest state is the one a watcher acts on.
 *
 * A failover handle (see failover.c) outlives its connections, so it keeps
 * a record of its watches here, which failover.c registers again after a
 * reconnect.  The server numbers watches per connection; the caller keeps
 * the ids it was given, and events are renumbered from the server's id as
 * they are queued.  This file calls nothing above the log and error
 * helpers: the wire below it pushes into it.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* One queued event, still in wire form. */
struct event_node {
    Muster__Event *ev;
    struct event_node *next;
};

/* The record for the caller's watch id, or NULL. */
static struct watch_reg *event_watch_find(const muster_t *m, uint64_t id)
{
    for (size_t i = 0; i < m->n_watches; i++)
        if (m->watches[i].id == id)
            return &m->watches[i];
    return NULL;
}

/* Record a watch the server registered (id as the caller knows it); a muster_err. */
int event_watch_add(muster_t *m, const char *prefix, uint64_t id)
{
    if (m->n_watches == m->cap_watches) {
        size_t cap = m->cap_watches ? m->cap_watches * 2 : 4;
        struct watch_reg *w = realloc(m->watches, cap * sizeof *w);
        if (!w)
            return MUSTER_ENOMEM;
        m->watches = w;
        m->cap_watches = cap;
    }
    char *p = strdup(prefix);
    if (!p)
        return MUSTER_ENOMEM;
    m->watches[m->n_watches++] = (struct watch_reg){p, ++m->watch_seq, id};
    return MUSTER_OK;
}

/* Whether the caller's watch id is recorded on m. */
int event_watch_known(const muster_t *m, uint64_t id)
{
    return event_watch_find(m, id) != NULL;
}

/* The server's current id for the caller's watch id (itself when unknown). */
uint64_t event_watch_server_id(const muster_t *m, uint64_t id)
{
    const struct watch_reg *w = event_watch_find(m, id);
    return w ? w->server_id : id;
}

/* Forget the caller's watch id. */
void event_watch_remove(muster_t *m, uint64_t id)
{
    struct watch_reg *w = event_watch_find(m, id);
    if (!w)
        return;
    free(w->prefix);
    *w = m->watches[--m->n_watches];
}

/* Free the watch records. */
void event_watch_clear(muster_t *m)
{
    for (size_t i = 0; i < m->n_watches; i++)
        free(m->watches[i].prefix);
    free(m->watches);
    m->watches = NULL;
    m->n_watches = m->cap_watches = 0;
}

/* Give a watch event the caller's id for the server's. */
static void event_renumber(const muster_t *m, Muster__Event *ev)
{
    if (ev->event_case != MUSTER__EVENT__EVENT_WATCH)
        return;
    for (size_t i = 0; i < m->n_watches; i++)
        if (m->watches[i].server_id == ev->watch->watch_id) {
            ev->watch->watch_id = m->watches[i].id;
            return;
        }
}

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
    event_renumber(m, ev);
    /* An ended watch is not registered again after a reconnect. */
    if (ev->event_case == MUSTER__EVENT__EVENT_WATCH && ev->watch->kind == MUSTER__WATCH_EVENT__KIND__ENDED)
        event_watch_remove(m, ev->watch->watch_id);
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

/* Queue a MEMBER_LOST event for this handle's own membership (after a reconnect). */
void event_push_lost(muster_t *m, uint64_t generation, const char *node_id)
{
    Muster__Event *ev = malloc(sizeof *ev);
    Muster__MembershipEvent *me = malloc(sizeof *me);
    char *node = strdup(node_id);
    if (!ev || !me || !node) {
        free(ev);
        free(me);
        free(node);
        m->ev_dropped++;
        return;
    }
    muster__event__init(ev);
    muster__membership_event__init(me);
    me->kind = MUSTER__MEMBERSHIP_EVENT__KIND__MEMBER_LOST;
    me->generation = generation;
    me->node_id = node;
    ev->event_case = MUSTER__EVENT__EVENT_MEMBERSHIP;
    ev->membership = me;
    event_push(m, ev);
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
    e->kind = w->kind == MUSTER__WATCH_EVENT__KIND__DELETE  ? MUSTER_EVENT_DELETE
              : w->kind == MUSTER__WATCH_EVENT__KIND__ENDED ? MUSTER_EVENT_WATCH_ENDED
                                                              : MUSTER_EVENT_SET;
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

/* Hand the oldest queued event (there must be one) to the caller as *ev
 * and drop it from the queue; MUSTER_ENOMEM leaves it queued. */
int event_take(muster_t *m, muster_event **ev)
{
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

