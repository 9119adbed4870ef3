/*
 * WATCH_KEY through the relay, as musterd's listener serves it
 * (store-server/tcpstore/tcpstore_watch.c): torch 1.x's watchKey() sends
 * WATCH_KEY on its callback connection, waits for KEY_CALLBACK_REGISTERED,
 * and from then on gets one frame per change of the key (the codec's
 * tscodec_put_watch_frame: type, key, old value, new value), whoever
 * writes it.
 *
 * Each watched key is one native watch (of the key as a prefix; events of
 * longer keys are skipped) and a get sent right behind it on the one
 * upstream connection, so the value the get reads is the key's after the
 * watch began: events that come before the get's answer describe older
 * changes and are skipped, and that value is the old value of the first
 * frame.  A registration is answered once the value is there.  A key stays
 * watched while the relay lives (a generation; torch's callback connection
 * lives as long as its store), so a worker that watches it again costs no
 * upstream call.  When events were lost (the server ended the watch, a
 * reconnect, the handle's queue overflowed) the key is watched and read
 * again: changes in between send no frame, as none could be told.
 */
#include "run_relay.h"

#include <stdlib.h>
#include <string.h>

/* One worker's registration of a key. */
struct run_relay_wsub {
    struct run_relay_wsub *next;
    struct run_relay_conn *c;
    struct run_relay_slot *s; /* KEY_CALLBACK_REGISTERED, owed until the key's value is known; then NULL */
};

/* A watched native key: its watch, the value it holds (a frame's old value) and who watches it. */
struct run_relay_wkey {
    struct run_relay_wkey *next;
    struct run_relay *r;
    uint64_t watch_id;           /* 0 until the watch is answered */
    uint64_t seq;                /* changes with each (re)watch, so a stale answer is known */
    int ready;                   /* the value below was read after the watch began */
    int present;
    uint8_t *val;
    size_t vlen;
    struct run_relay_wsub *subs;
    char name[];                 /* the native key (the relay's prefix, then the torch key) */
};

/* One upstream call of a watched key (its watch or its get). */
struct run_relay_wcall {
    struct run_relay_wkey *w;
    uint64_t seq;
};

static void run_relay_watch_begin(struct run_relay *r, struct run_relay_wkey *w);

/* The watched key named k, or NULL. */
static struct run_relay_wkey *run_relay_watch_find(struct run_relay *r, const char *k)
{
    for (struct run_relay_wkey *w = r->wkeys; w; w = w->next)
        if (strcmp(w->name, k) == 0)
            return w;
    return NULL;
}

/* Answer every registration of w still owed (its value is known now). */
static void run_relay_watch_registered(struct run_relay_wkey *w)
{
    for (struct run_relay_wsub *s = w->subs; s; s = s->next) {
        if (!s->s)
            continue;
        struct tscodec_sink sk = run_relay_slot_sink(s->s);
        tscodec_put_u8(&sk, TS_KEY_CALLBACK_REGISTERED);
        run_relay_slot_done(s->s);
        s->s = NULL;
    }
}

/* Completion of a watched key's watch: its id. */
static void run_relay_watch_watched(muster_t *m, const muster_reply *rep, void *arg)
{
    (void)m;
    struct run_relay_wcall *k = arg;
    struct run_relay_wkey *w = k->w;
    if (w && !w->r->closing && k->seq == w->seq) {
        if (rep->err == MUSTER_OK)
            w->watch_id = (uint64_t)rep->number;
        else
            for (struct run_relay_wsub *s = w->subs; s; s = s->next)
                run_relay_upstream_failed(w->r, s->c, "watch_key", rep->err, rep->detail);
    }
    free(k);
}

/* Completion of a watched key's get: the value the next frame names as old; registrations are answered. */
static void run_relay_watch_read(muster_t *m, const muster_reply *rep, void *arg)
{
    (void)m;
    struct run_relay_wcall *k = arg;
    struct run_relay_wkey *w = k->w;
    if (w && !w->r->closing && k->seq == w->seq) {
        free(w->val);
        w->val = NULL;
        w->vlen = 0;
        w->present = rep->err == MUSTER_OK;
        if (rep->err != MUSTER_OK && rep->err != MUSTER_ENOTFOUND) {
            for (struct run_relay_wsub *s = w->subs; s; s = s->next)
                run_relay_upstream_failed(w->r, s->c, "watch_key", rep->err, rep->detail);
        } else if (rep->len && !(w->val = malloc(rep->len))) {
            for (struct run_relay_wsub *s = w->subs; s; s = s->next)
                run_relay_close(w->r, s->c, "out of memory");
        } else {
            if (rep->len)
                memcpy(w->val, rep->value, rep->len);
            w->vlen = rep->len;
            w->ready = 1;
            run_relay_watch_registered(w);
        }
    }
    free(k);
}

/* A call of w's current watch; NULL when out of memory. */
static struct run_relay_wcall *run_relay_watch_call(struct run_relay_wkey *w)
{
    struct run_relay_wcall *k = malloc(sizeof *k);
    if (k)
        *k = (struct run_relay_wcall){w, w->seq};
    return k;
}

/* Watch w's key and read its value right behind the watch (again after events were lost). */
static void run_relay_watch_begin(struct run_relay *r, struct run_relay_wkey *w)
{
    w->seq++;
    w->ready = 0;
    w->watch_id = 0;
    struct run_relay_wcall *a = run_relay_watch_call(w), *b = run_relay_watch_call(w);
    int rc = a && b ? muster_async_watch(r->up, w->name, 0, run_relay_watch_watched, a) : MUSTER_ENOMEM;
    if (rc != MUSTER_OK) {
        free(a);
        free(b);
    } else if ((rc = muster_async_get(r->up, w->name, 0, 0, run_relay_watch_read, b)) != MUSTER_OK) {
        free(b);
        w->seq++; /* the watch's answer, when it comes, finds a changed seq */
    }
    r->st.upstream_ops += 2;
    if (rc == MUSTER_OK)
        return;
    for (struct run_relay_wsub *s = w->subs; s; s = s->next)
        run_relay_upstream_failed(r, s->c, "watch_key", rc, "");
}

/* Register c's watch of native key k (taken). */
void run_relay_watch_key(struct run_relay *r, struct run_relay_conn *c, char *k)
{
    struct run_relay_wkey *w = run_relay_watch_find(r, k);
    struct run_relay_wsub *sub = NULL;
    if (r->nwatches >= r->cfg.max_watches) {
        r->st.limit_watches++;
        run_relay_close(r, c, "watch_key: %zu watches registered (--relay-max-watches)", r->nwatches);
        free(k);
        return;
    }
    if (!w && (w = calloc(1, sizeof *w + strlen(k) + 1))) {
        strcpy(w->name, k);
        w->r = r;
        w->next = r->wkeys;
        r->wkeys = w;
        run_relay_watch_begin(r, w);
    }
    free(k);
    if (!w || !(sub = calloc(1, sizeof *sub)) || !(sub->s = run_relay_slot_new(r, c))) {
        free(sub);
        run_relay_close(r, c, "out of memory");
        return;
    }
    sub->c = c;
    sub->next = w->subs;
    w->subs = sub;
    r->nwatches++;
    r->st.watches++;
    if (w->ready)
        run_relay_watch_registered(w);
}

/* Send every live registration of w the frame of a change (value NULL: deleted), then keep the new value. */
static void run_relay_watch_change(struct run_relay *r, struct run_relay_wkey *w, int deleted, const void *value,
                                   size_t len)
{
    char *tk = malloc(strlen(w->name) + 1);
    size_t tklen = tk ? run_relay_torch_key(r, w->name, tk) : 0;
    for (struct run_relay_wsub *s = w->subs; s; s = s->next) {
        if (!tk) {
            run_relay_close(r, s->c, "out of memory");
            continue;
        }
        if (s->c->dead)
            continue;
        struct run_relay_slot *slot = run_relay_slot_new(r, s->c);
        if (!slot)
            continue;
        struct tscodec_sink sk = run_relay_slot_sink(slot);
        tscodec_put_watch_frame(&sk, deleted, w->present, tk, tklen, w->val, w->vlen, value, len);
        run_relay_slot_done(slot);
        r->st.watch_callbacks++;
    }
    free(tk);
    free(w->val);
    w->val = NULL;
    w->vlen = 0;
    w->present = !deleted;
    if (!deleted && len && (w->val = malloc(len))) {
        memcpy(w->val, value, len);
        w->vlen = len;
    } else if (!deleted && len) {
        run_relay_watch_begin(r, w); /* no copy of the value: read it again */
    }
}

/* Act on one event of the upstream handle. */
static void run_relay_watch_event(struct run_relay *r, const muster_event *ev)
{
    for (struct run_relay_wkey *w = r->wkeys; w; w = w->next) {
        if (!w->watch_id || ev->watch_id != w->watch_id)
            continue;
        if (ev->kind == MUSTER_EVENT_WATCH_ENDED)
            run_relay_watch_begin(r, w);
        else if (w->ready && strcmp(ev->key, w->name) == 0 && ev->kind == MUSTER_EVENT_SET)
            run_relay_watch_change(r, w, 0, ev->value, ev->value_len);
        else if (w->ready && strcmp(ev->key, w->name) == 0 && ev->kind == MUSTER_EVENT_DELETE)
            run_relay_watch_change(r, w, 1, NULL, 0);
        return;
    }
}

/* Take the events the upstream handle holds and send the callback frames they make. */
void run_relay_watch_events(struct run_relay *r)
{
    if (!r->wkeys || r->dead)
        return;
    for (int i = 0; i < 4096; i++) {
        muster_event *ev = NULL;
        if (muster_next_event(r->up, &ev, 0) != MUSTER_OK)
            break;
        run_relay_watch_event(r, ev);
        muster_event_free(ev);
    }
    uint64_t dropped = muster_events_dropped(r->up);
    if (dropped != r->dropped) {
        r->dropped = dropped;
        for (struct run_relay_wkey *w = r->wkeys; w; w = w->next)
            run_relay_watch_begin(r, w);
    }
}

/* Drop c's registrations (it is being freed). */
void run_relay_watch_conn_gone(struct run_relay *r, struct run_relay_conn *c)
{
    for (struct run_relay_wkey *w = r->wkeys; w; w = w->next) {
        for (struct run_relay_wsub **p = &w->subs; *p;) {
            struct run_relay_wsub *s = *p;
            if (s->c != c) {
                p = &s->next;
                continue;
            }
            *p = s->next;
            free(s);
            r->nwatches--;
        }
    }
}

/* Free every watched key (the handle is closed: no call refers to one). */
void run_relay_watch_free(struct run_relay *r)
{
    while (r->wkeys) {
        struct run_relay_wkey *w = r->wkeys;
        r->wkeys = w->next;
        while (w->subs) {
            struct run_relay_wsub *s = w->subs;
            w->subs = s->next;
            free(s);
        }
        free(w->val);
        free(w);
    }
    r->nwatches = 0;
}
