/*
 * WATCH_KEY of the old TCPStore numbering (torch 1.x to 2.0), served as
 * torch 1.13's own server does.  Torch's watchKey() sends WATCH_KEY on a
 * second connection it opens per store (its callback socket) and blocks
 * until the byte KEY_CALLBACK_REGISTERED (3) comes back on it; from then
 * on, every change to the key sends that connection one callback frame
 * (tscodec_put_watch_frame, shared with the relay of `muster run`):
 *
 *     type (1 byte) | u64 len | key | u64 len | old value | u64 len | new value
 *
 * with type KEY_UPDATED (0), KEY_CREATED (1, old value empty) or
 * KEY_DELETED (2, new value empty).  Every write counts, from a TCPStore
 * client or a native one: set, add, a compare_set that swapped, append
 * (reported as an update with both values whole; torch 2.0's own server
 * sends KEY_APPENDED with only the appended bytes), delete of a key that
 * existed.  As in torch, registering the same key twice sends each
 * callback twice.  A frame is queued when the write happens, so on a
 * connection that both watches a key and adds to it, the frame precedes
 * the add's reply (torch's server answers first; its callback connection
 * never writes, so no torch client sees the difference).
 *
 * Each registration is a core watch (core/watch.c) whose prefix is the key
 * and whose owner is the connection: the core's fan-out reaches it like a
 * native watch, counts it against --max-watches and --max-watches-per-conn
 * (a connection over either is closed: the protocol has no error reply;
 * the core counts limit_watches / limit_watches_per_conn), and a
 * connection's watches go when it is freed.  This file only skips changes
 * of longer keys (a prefix watch of `k` also sees `k2`) and keeps, per
 * watched key, a copy of the value it last held, to send as the old one:
 * one copy per watched key, not per watch, made on the first registration
 * and updated at the first frame of each change.  A callback frame is
 * output like any reply: held until durable with --data-dir, and a watcher
 * that stops reading is closed as a slow reader.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "muster.pb-c.h"
#include "ns.h"
#include "server.h"
#include "tcpstore_int.h"
#include "watch.h"

/* Make wk's copy the value e holds now (NULL: the key is absent); 0, or -1 when out of memory. */
static int tswatch_remember(struct ts_wkey *wk, const void *val, size_t vlen, int present)
{
    free(wk->val);
    wk->val = NULL;
    wk->vlen = 0;
    wk->present = present;
    if (!vlen)
        return 0;
    if (!(wk->val = malloc(vlen)))
        return -1;
    memcpy(wk->val, val, vlen);
    wk->vlen = vlen;
    return 0;
}

/* The watched key entry of key, or NULL. */
static struct ts_wkey *tswatch_wkey(struct tcpstore *ts, const char *key, size_t klen)
{
    struct ts_wkey *wk = NULL;
    HASH_FIND(hh, ts->wkeys, key, klen, wk);
    return wk;
}

/* Take a reference to key's entry, made (with the key's current value) when absent; NULL when out of
 * memory. */
static struct ts_wkey *tswatch_wkey_take(struct tcpstore *ts, const char *key, size_t klen)
{
    struct ts_wkey *wk = tswatch_wkey(ts, key, klen);
    if (!wk && (wk = calloc(1, sizeof *wk + klen + 1))) {
        const struct ks_entry *e = ks_get(&ts->ns->ks, key, klen);
        memcpy(wk->key, key, klen);
        wk->klen = klen;
        if (tswatch_remember(wk, e ? ks_val(e) : NULL, e ? e->vlen : 0, e != NULL) != 0) {
            free(wk);
            return NULL;
        }
        HASH_ADD_KEYPTR(hh, ts->wkeys, wk->key, klen, wk);
    }
    if (wk)
        wk->refs++;
    return wk;
}

/* Let go of a reference to wk, freeing it with the last one. */
static void tswatch_wkey_put(struct tcpstore *ts, struct ts_wkey *wk)
{
    if (--wk->refs)
        return;
    HASH_DEL(ts->wkeys, wk);
    free(wk->val);
    free(wk);
}

/* A change under a registration's key (the core's fan-out): send c the frame of a change to exactly its key.
 * The first registration a change reaches builds the frame and moves the key's copy on (ch->memo). */
static int tswatch_notify(void *owner, const struct watch *w, struct watch_change *ch)
{
    struct ts_conn *c = owner;
    struct tcpstore *ts = c->ts;
    struct ts_wkey *wk;
    if (ch->klen != w->plen || !(wk = tswatch_wkey(ts, ch->key, ch->klen)))
        return 0; /* a longer key under the same prefix */
    int deleted = ch->what == KS_DELETE;
    if (!ch->memo) {
        ch->memo = 1;
        ts->frame.len = 0;
        ts->frame.oom = 0;
        struct tscodec_sink sk = tscodec_out_sink(&ts->frame);
        tscodec_put_watch_frame(&sk, deleted, wk->present, wk->key, wk->klen, wk->val, wk->vlen, ch->val, ch->vlen);
        /* Without a copy the next old value would be wrong: that frame's watchers are closed instead. */
        if (tswatch_remember(wk, deleted ? NULL : ch->val, deleted ? 0 : ch->vlen, !deleted) != 0)
            ts->frame.oom = 1;
    }
    /* A connection closed meanwhile is skipped by tcpstore_put; its watches go when it is freed. */
    if (ts->frame.oom) {
        tcpstore_close(c, "out of memory");
    } else if (tcpstore_live(c)) {
        tcpstore_put(c, ts->frame.p, ts->frame.len);
        stats_inc(&ts->srv->stats, STAT_TS_WATCH_CALLBACKS);
    }
    return 0;
}

/* The listener's answers to the core's watch fan-out. */
static const struct watch_owner_ops tswatch_ops = {tswatch_notify};

/* WATCH_KEY: register a watch of key for c and answer KEY_CALLBACK_REGISTERED. */
void tswatch_register(struct ts_conn *c, const char *key, size_t klen)
{
    struct tcpstore *ts = c->ts;
    struct server *srv = ts->srv;
    struct ts_wkey *wk = tswatch_wkey_take(ts, key, klen);
    int st = MUSTER__STATUS__INTERNAL;
    if (!wk || !watch_add(ts->ns, key, klen, &tswatch_ops, c, &c->nwatches, &st)) {
        if (wk)
            tswatch_wkey_put(ts, wk);
        if (st != MUSTER__STATUS__LIMIT) {
            tcpstore_close(c, "out of memory");
            return;
        }
        /* The core counted it (limit_watches or limit_watches_per_conn). */
        log_msg(LOG_INFO, "tcpstore conn %llu %s: closing: watch_key: too many watches (--max-watches %llu, "
                          "--max-watches-per-conn %llu)",
                (unsigned long long)c->life.id, tcpstore_peer(c), (unsigned long long)srv->opt.max_watches,
                (unsigned long long)srv->opt.max_watches_per_conn);
        tcpstore_close(c, "too many watches");
        return;
    }
    stats_inc(&srv->stats, STAT_TS_WATCHES);
    if (log_enabled(LOG_DEBUG))
        log_msg(LOG_DEBUG, "tcpstore conn %llu %s: watching '%.200s'", (unsigned long long)c->life.id, tcpstore_peer(c),
                key);
    tscodec_put_u8(&c->sink, TS_KEY_CALLBACK_REGISTERED);
}

/* Drop every watch of c (it is being freed), with its references to the watched keys. */
void tswatch_conn_gone(struct ts_conn *c)
{
    struct tcpstore *ts = c->ts;
    if (!c->nwatches)
        return;
    for (struct watch *w = ts->ns->watches; w; w = w->next) {
        struct ts_wkey *wk;
        if (w->owner == c && (wk = tswatch_wkey(ts, w->prefix, w->plen))) {
            tswatch_wkey_put(ts, wk);
            stats_dec(&ts->srv->stats, STAT_TS_WATCHES);
        }
    }
    watch_del_owner(ts->ns, c);
}

/* Free every watched key left and the frame buffer (at exit, after every connection). */
void tswatch_fini(struct tcpstore *ts)
{
    struct ts_wkey *wk, *tmp;
    HASH_ITER(hh, ts->wkeys, wk, tmp) {
        HASH_DEL(ts->wkeys, wk);
        free(wk->val);
        free(wk);
    }
    free(ts->frame.p);
    ts->frame = (struct tscodec_out){0};
}
