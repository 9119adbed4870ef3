/*
 * The replicated log of --ha (docs/ha.md).  The leader's records - the same
 * framed records as --data-dir (precord.c) - are appended to etcd in
 * batches, one key PREFIX/log/<lease>.<seq> per batch, each with a
 * transaction that first compares the leader key's lease with ours, so an
 * append by a deposed leader fails instead of forking the log.  etcd's
 * revision of the append is the log position.  One append is in flight at a
 * time; what arrives meanwhile forms the next batch.  persist.c holds every
 * reply until etcd confirmed the records it depends on.
 *
 * Standbys read the log's tail (a range over the prefix sorted by
 * revision, in pages, pinned to one revision) and then follow it with a
 * watch from the revision after it, replaying each batch into their
 * keyspaces.  A standby that wins the election reads the tail again before
 * it serves.  Records are resulting state, so replaying a batch twice (an
 * append retried after its answer was lost) changes nothing.  Reading the
 * tail starts with the snapshot (ha_snap.c) when one newer than what is
 * applied exists, and every read of it is pinned to one etcd revision; the
 * leader writes a snapshot once the log has grown past --ha-snapshot-bytes.
 */
#include "ha_log.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ha_etcd.h"
#include "ha_snap.h"
#include "log.h"
#include "persist.h"
#include "precord.h"
#include "server.h"

/* Pause before retrying an append or a tail read that failed. */
#define HA_LOG_RETRY_MS 100
/* Batches per tail-read page at first (halved when etcd refuses a page as too large). */
#define HA_LOG_PAGE 64

/* One record waiting for its batch. */
struct ha_log_rec {
    uint64_t lsn;
    size_t bytes;
};

struct ha_log {
    struct server *srv;
    struct ha_etcd *etcd;
    struct ha_log_hooks hooks;
    char prefix[520];     /* PREFIX/log/ */
    char leader_key[520]; /* PREFIX/leader */
    size_t batch_max;
    uint64_t snap_bytes, log_bytes; /* snapshot once the log since the last one reaches snap_bytes */
    struct ha_snap *snap;
    unsigned epoch;       /* bumped by stop: answers to older calls are ignored */
    int64_t applied;      /* the last revision applied here */
    /* Leader. */
    int leading, appending;
    int64_t lease;
    uint64_t seq;
    struct evbuffer *pending;   /* records not yet in a batch */
    struct ha_log_rec *recs;    /* their lsns and sizes, from head on */
    size_t head, nrecs, cap;
    struct evbuffer *batch;     /* the batch in flight (kept for retries) */
    uint64_t batch_lsn, batch_t0;
    size_t batch_n;
    unsigned batch_epoch;
    char batch_key[560];
    struct event *flush_ev;
    /* Tail read and watch. */
    int catching;      /* a tail read is running */
    int then_lead;     /* after it: append (else watch) */
    int64_t pin;       /* the revision the tail read is pinned to (0: not yet known) */
    int64_t page;      /* batches per page */
    unsigned range_epoch;
    struct event *range_ev;
    struct ha_etcd_watch *watch;
};

static void ha_log_send(struct ha_log *l);
static void ha_log_read_page(struct ha_log *l);

/* Run ev after ms. */
static void ha_log_after(struct event *ev, unsigned ms)
{
    clock_timer_in(ev, ms);
}

/* --------------------------------------------------------------- replay */

/* Apply one log pair if it is newer than what is applied. */
static void ha_log_apply_kv(struct ha_log *l, const struct ha_etcd_kv *kv)
{
    if (kv->deleted || kv->mod_rev <= l->applied)
        return;
    ha_snap_apply(l->srv, kv->val, kv->vlen);
    l->applied = kv->mod_rev;
    l->log_bytes += kv->vlen;
}

/* A watched change under the log prefix: replay it (a stream failure resumes by itself). */
static void ha_log_on_watch(void *arg, enum ha_etcd_err err, const struct ha_etcd_kv *kv)
{
    struct ha_log *l = arg;
    if (err == HA_ETCD_OK && kv)
        ha_log_apply_kv(l, kv);
}

/* ------------------------------------------------------------- tail read */

/* The tail is applied: start appending (leader) or watching (standby). */
static void ha_log_caught_up(struct ha_log *l)
{
    l->catching = 0;
    if (l->then_lead) {
        l->leading = 1;
        log_msg(LOG_INFO, "ha: log applied up to revision %" PRId64 "; serving", l->applied);
        l->hooks.ready(l->hooks.arg);
        ha_log_send(l);
        return;
    }
    l->watch = ha_etcd_watch_new(l->etcd, l->prefix, strlen(l->prefix), 1, l->applied + 1, ha_log_on_watch, l);
    if (!l->watch) {
        l->catching = 1; /* try again from what is applied */
        ha_log_after(l->range_ev, HA_LOG_RETRY_MS);
    }
}

/* The snapshot step of the tail read ended: read the log after what is applied, or start over. */
static void ha_log_on_snap(void *arg, int64_t rev)
{
    struct ha_log *l = arg;
    if (rev < 0) {
        ha_log_after(l->range_ev, HA_LOG_RETRY_MS);
        return;
    }
    if (rev > l->applied) {
        l->applied = rev;
        l->log_bytes = 0;
    }
    ha_log_read_page(l);
}

/* A page of the tail answered: apply it, then read the next or finish. */
static void ha_log_on_page(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha_log *l = arg;
    if (l->range_epoch != l->epoch || !l->catching)
        return;
    if (err != HA_ETCD_OK) {
        if (err == HA_ETCD_REFUSED && l->page > 1)
            l->page /= 2; /* perhaps the page was over a message size limit */
        log_msg(LOG_DEBUG, "ha: reading the log: %s", ha_etcd_strerror(err));
        ha_log_after(l->range_ev, HA_LOG_RETRY_MS);
        return;
    }
    if (!l->pin)
        l->pin = ha_etcd_int(json_object_get(reply, "header"), "revision", 0);
    size_t i;
    json_t *j;
    json_array_foreach(json_object_get(reply, "kvs"), i, j)
    {
        struct ha_etcd_kv kv;
        if (ha_etcd_kv_decode(j, &kv) != 0)
            continue;
        ha_log_apply_kv(l, &kv);
        ha_etcd_kv_clear(&kv);
    }
    if (json_is_true(json_object_get(reply, "more"))) {
        ha_log_read_page(l);
        return;
    }
    if (l->pin > l->applied)
        l->applied = l->pin;
    ha_log_caught_up(l);
}

/* A JSON int64 in etcd's string form. */
static json_t *ha_log_i64(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return json_string(buf);
}

/* Ask for the next page of the tail: batches after applied, oldest first, at the pinned revision. */
static void ha_log_read_page(struct ha_log *l)
{
    size_t plen = strlen(l->prefix);
    json_t *b = json_pack("{s:o,s:o,s:o,s:s,s:s,s:o}", "key", ha_etcd_b64(l->prefix, plen), "range_end",
                          ha_etcd_prefix_end(l->prefix, plen), "limit", ha_log_i64(l->page), "sort_order", "ASCEND",
                          "sort_target", "MOD", "min_mod_revision", ha_log_i64(l->applied + 1));
    if (b && l->pin)
        json_object_set_new(b, "revision", ha_log_i64(l->pin));
    l->range_epoch = l->epoch;
    if (ha_etcd_call(l->etcd, "/v3/kv/range", b, ha_log_on_page, l) != 0)
        ha_log_after(l->range_ev, HA_LOG_RETRY_MS);
}

/* (Re)start the tail read: the snapshot when a newer one exists, then the log after what is applied. */
static void ha_log_read_tail(struct ha_log *l)
{
    l->pin = 0;
    ha_snap_load(l->snap, l->applied, ha_log_on_snap, l, &l->pin);
}

/* The retry timer of the tail read: start over from what is applied. */
static void ha_log_range_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ha_log *l = arg;
    if (l->catching)
        ha_log_read_tail(l);
}

/* Start reading the tail from the revision after the last applied. */
static void ha_log_catch_up(struct ha_log *l, int then_lead)
{
    ha_etcd_watch_free(l->watch);
    l->watch = NULL;
    l->catching = 1;
    l->then_lead = then_lead;
    l->page = HA_LOG_PAGE;
    ha_log_read_tail(l);
}

/* ---------------------------------------------------------------- appends */

/* Move the oldest pending records, up to the batch limit (at least one), into the batch. */
static void ha_log_fill(struct ha_log *l)
{
    size_t bytes = 0, n = 0;
    while (l->head + n < l->nrecs && (n == 0 || bytes + l->recs[l->head + n].bytes <= l->batch_max))
        bytes += l->recs[l->head + n++].bytes;
    evbuffer_remove_buffer(l->pending, l->batch, bytes);
    l->batch_lsn = l->recs[l->head + n - 1].lsn;
    l->batch_n = n;
    l->head += n;
    if (l->head == l->nrecs)
        l->head = l->nrecs = 0;
    snprintf(l->batch_key, sizeof l->batch_key, "%s%016" PRIx64 ".%016" PRIx64, l->prefix, (uint64_t)l->lease,
             ++l->seq);
}

/* The append transaction of the batch: put it only while the leader key holds our lease. */
static json_t *ha_log_txn(struct ha_log *l)
{
    size_t len = evbuffer_get_length(l->batch);
    const void *p = evbuffer_pullup(l->batch, (ssize_t)len);
    json_t *put = json_pack("{s:o,s:o}", "key", ha_etcd_b64(l->batch_key, strlen(l->batch_key)), "value",
                            ha_etcd_b64(p, len));
    return json_pack("{s:[{s:o,s:s,s:s,s:o}],s:[{s:o}]}", "compare", "key",
                     ha_etcd_b64(l->leader_key, strlen(l->leader_key)), "target", "LEASE", "result", "EQUAL",
                     "lease", ha_log_i64(l->lease), "success", "request_put", put);
}

/* The append answered: release the replies it covers and send the next batch, retry, or report deposal. */
static void ha_log_on_append(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha_log *l = arg;
    if (l->batch_epoch != l->epoch || !l->leading)
        return;
    if (err != HA_ETCD_OK) {
        /* The answer may be lost after etcd applied it: sending the same batch again is harmless. */
        log_msg(LOG_DEBUG, "ha: log append: %s; sending it again", ha_etcd_strerror(err));
        stats_inc(&l->srv->stats, STAT_HA_APPEND_RETRIES);
        ha_log_after(l->flush_ev, HA_LOG_RETRY_MS);
        return;
    }
    if (!json_is_true(json_object_get(reply, "succeeded"))) {
        log_msg(LOG_WARN, "ha: log append refused: the leader key is no longer ours");
        l->hooks.deposed(l->hooks.arg);
        return;
    }
    l->appending = 0;
    l->applied = ha_etcd_int(json_object_get(reply, "header"), "revision", l->applied);
    stats_inc(&l->srv->stats, STAT_HA_BATCHES);
    stats_add(&l->srv->stats, STAT_HA_RECORDS, l->batch_n);
    stats_add(&l->srv->stats, STAT_HA_APPEND_US, clock_now_us() - l->batch_t0);
    l->log_bytes += evbuffer_get_length(l->batch);
    evbuffer_drain(l->batch, evbuffer_get_length(l->batch));
    l->batch_n = 0;
    persist_replicated(l->srv, l->batch_lsn);
    if (l->snap_bytes && l->log_bytes >= l->snap_bytes && !ha_snap_busy(l->snap)) {
        l->log_bytes = 0;
        ha_snap_write(l->snap, l->lease, l->applied);
    }
    ha_log_send(l);
}

/* Send the batch in flight (again), or form one from pending records when none is. */
static void ha_log_send(struct ha_log *l)
{
    if (!l->leading)
        return;
    if (!l->appending) {
        if (l->head == l->nrecs)
            return;
        ha_log_fill(l);
        l->appending = 1;
        l->batch_t0 = clock_now_us();
    }
    l->batch_epoch = l->epoch;
    json_t *txn = ha_log_txn(l);
    if (!txn || ha_etcd_call(l->etcd, "/v3/kv/txn", txn, ha_log_on_append, l) != 0)
        ha_log_after(l->flush_ev, HA_LOG_RETRY_MS);
}

/* The flush event: runs once per loop turn that produced records, and for retries. */
static void ha_log_flush_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ha_log_send(arg);
}

/* Take one record for etcd: 1 taken, 0 not leading, -1 no memory. */
int ha_log_record(struct ha_log *l, uint64_t lsn, const struct record *r)
{
    if (!l || !l->lease)
        return 0;
    if (l->nrecs == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct ha_log_rec *r = realloc(l->recs, cap * sizeof *r);
        if (!r)
            return -1;
        l->recs = r;
        l->cap = cap;
    }
    size_t before = evbuffer_get_length(l->pending);
    if (prec_put_record(l->pending, lsn, r) != 0)
        return -1;
    l->recs[l->nrecs++] = (struct ha_log_rec){.lsn = lsn, .bytes = evbuffer_get_length(l->pending) - before};
    /* Later in this loop turn, so everything this turn produces goes in one batch. */
    if (l->leading && !l->appending && !event_pending(l->flush_ev, EV_TIMEOUT, NULL))
        event_active(l->flush_ev, EV_TIMEOUT, 1);
    return 1;
}

/* ------------------------------------------------------------------ owner */

/* A log under prefix guarded by leader_key; NULL when memory ran out. */
struct ha_log *ha_log_new(struct server *srv, struct ha_etcd *etcd, const char *prefix, const char *leader_key,
                          size_t batch_bytes, uint64_t snap_bytes, const struct ha_log_hooks *hooks)
{
    struct ha_log *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    *l = (struct ha_log){.srv = srv, .etcd = etcd, .hooks = *hooks, .batch_max = batch_bytes ? batch_bytes : 1,
                         .snap_bytes = snap_bytes};
    snprintf(l->prefix, sizeof l->prefix, "%slog/", prefix);
    snprintf(l->leader_key, sizeof l->leader_key, "%s", leader_key);
    l->pending = evbuffer_new();
    l->batch = evbuffer_new();
    l->flush_ev = evtimer_new(srv->base, ha_log_flush_cb, l);
    l->range_ev = evtimer_new(srv->base, ha_log_range_cb, l);
    l->snap = ha_snap_new(srv, etcd, prefix, leader_key);
    if (!l->pending || !l->batch || !l->flush_ev || !l->range_ev || !l->snap) {
        ha_log_free(l);
        return NULL;
    }
    return l;
}

/* Stop and free; NULL is fine. */
void ha_log_free(struct ha_log *l)
{
    if (!l)
        return;
    ha_etcd_watch_free(l->watch);
    ha_snap_free(l->snap);
    if (l->flush_ev)
        event_free(l->flush_ev);
    if (l->range_ev)
        event_free(l->range_ev);
    if (l->pending)
        evbuffer_free(l->pending);
    if (l->batch)
        evbuffer_free(l->batch);
    free(l->recs);
    free(l);
}

/* Become leader under lease: read the tail, then append. */
void ha_log_lead(struct ha_log *l, int64_t lease)
{
    ha_log_stop(l);
    l->lease = lease;
    ha_log_catch_up(l, 1);
}

/* Become a standby: read the tail, then follow the log. */
void ha_log_follow(struct ha_log *l)
{
    ha_log_stop(l);
    ha_log_catch_up(l, 0);
}

/* Stop leading or following; the number of records etcd has not confirmed. */
size_t ha_log_stop(struct ha_log *l)
{
    size_t lost = l->batch_n + (l->nrecs - l->head);
    l->epoch++;
    l->leading = l->appending = l->catching = 0;
    l->lease = 0;
    ha_etcd_watch_free(l->watch);
    l->watch = NULL;
    event_del(l->flush_ev);
    event_del(l->range_ev);
    ha_snap_cancel(l->snap);
    evbuffer_drain(l->pending, evbuffer_get_length(l->pending));
    evbuffer_drain(l->batch, evbuffer_get_length(l->batch));
    l->head = l->nrecs = l->batch_n = 0;
    return lost;
}

/* Whether records handed to ha_log_record are still waiting for etcd. */
int ha_log_pending(const struct ha_log *l)
{
    return l && (l->batch_n || l->head < l->nrecs);
}
