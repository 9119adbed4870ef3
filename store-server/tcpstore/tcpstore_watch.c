/*
 * WATCH_KEY of the old TCPStore numbering (torch 1.x to 2.0), served as
 * torch 1.13's own server does.  Torch's watchKey() sends WATCH_KEY on a
 * second connection it opens per store (its callback socket) and blocks
 * until the byte KEY_CALLBACK_REGISTERED (3) comes back on it; from then
 * on, every change to the key sends that connection one callback frame:
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
 * The keyspace's change hook gives only the new value, so each watched key
 * keeps a copy of the value it last saw, to send as the old one.  That is
 * one copy per watched key, not per watch, and a copy of a value the
 * namespace holds, so at worst the watched keys' values twice over.
 * Watches count against --max-watches and --max-watches-per-conn, like
 * native ones; a connection over either is closed (the protocol has no
 * error reply), counted in limit_watches / limit_watches_per_conn.  Unlike
 * torch 1.13's server, which keeps a closed socket's registrations, a
 * connection's watches go when it is freed (tcpstore_watches_current).
 * A callback frame is output like any reply: held until durable with
 * --data-dir, and a watcher that stops reading is closed as a slow reader.
 */
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#include "log.h"
#include "ns.h"
#include "server.h"
#include "tcpstore_int.h"

/* Make wk's copy the value e holds now (NULL: the key is absent); 0, or -1 when out of memory. */
static int tswatch_remember(struct ts_wkey *wk, const struct ks_entry *e)
{
    free(wk->val);
    wk->val = NULL;
    wk->vlen = 0;
    wk->present = e != NULL;
    if (!e || !e->vlen)
        return 0;
    if (!(wk->val = malloc(e->vlen)))
        return -1;
    memcpy(wk->val, ks_val(e), e->vlen);
    wk->vlen = e->vlen;
    return 0;
}

/* The watched key entry of key, created (with the key's current value) when asked and absent;
 * NULL when absent or out of memory. */
static struct ts_wkey *tswatch_wkey(struct tcpstore *ts, const char *key, size_t klen, int create)
{
    struct ts_wkey *wk = NULL;
    HASH_FIND(hh, ts->wkeys, key, klen, wk);
    if (wk || !create)
        return wk;
    if (!(wk = calloc(1, sizeof *wk + klen + 1)))
        return NULL;
    memcpy(wk->key, key, klen);
    wk->klen = klen;
    if (tswatch_remember(wk, ks_get(&ts->ns->ks, key, klen)) != 0) {
        free(wk);
        return NULL;
    }
    HASH_ADD_KEYPTR(hh, ts->wkeys, wk->key, klen, wk);
    return wk;
}

/* Free a watched key entry (its watch list is empty). */
static void tswatch_wkey_free(struct tcpstore *ts, struct ts_wkey *wk)
{
    HASH_DEL(ts->wkeys, wk);
    free(wk->val);
    free(wk);
}

/* WATCH_KEY: register a watch of key for c and answer KEY_CALLBACK_REGISTERED. */
void tswatch_register(struct ts_conn *c, const char *key, size_t klen)
{
    struct tcpstore *ts = c->ts;
    struct server *srv = ts->srv;
    struct ts_watch *w = NULL;
    struct ts_wkey *wk;
    if (srv->core.nwatches >= srv->opt.max_watches) {
        tcpstore_fail(c, STAT_LIMIT_WATCHES, "watch_key: too many watches on this server (limit %llu)",
                      (unsigned long long)srv->opt.max_watches);
        return;
    }
    if (c->nwatches >= srv->opt.max_watches_per_conn) {
        tcpstore_fail(c, STAT_LIMIT_WATCHES_PER_CONN, "watch_key: too many watches on this connection (limit %llu)",
                      (unsigned long long)srv->opt.max_watches_per_conn);
        return;
    }
    if (!(w = calloc(1, sizeof *w)) || !(wk = tswatch_wkey(ts, key, klen, 1))) {
        free(w);
        tcpstore_close(c, "out of memory");
        return;
    }
    w->c = c;
    w->wk = wk;
    DL_APPEND(wk->head, w);
    w->cnext = c->watches;
    c->watches = w;
    c->nwatches++;
    srv->core.nwatches++;
    stats_inc(&srv->stats, STAT_TS_WATCHES);
    if (log_enabled(LOG_DEBUG))
        log_msg(LOG_DEBUG, "tcpstore conn %llu %s: watching '%.200s'", (unsigned long long)c->life.id, tcpstore_peer(c),
                key);
    tscodec_put_u8(&c->sink, TS_KEY_CALLBACK_REGISTERED);
}

/* Drop every watch of c (it is being freed). */
void tswatch_conn_gone(struct ts_conn *c)
{
    struct tcpstore *ts = c->ts;
    struct server *srv = ts->srv;
    while (c->watches) {
        struct ts_watch *w = c->watches;
        struct ts_wkey *wk = w->wk;
        c->watches = w->cnext;
        DL_DELETE(wk->head, w);
        if (!wk->head)
            tswatch_wkey_free(ts, wk);
        free(w);
        c->nwatches--;
        srv->core.nwatches--;
        stats_dec(&srv->stats, STAT_TS_WATCHES);
    }
}

/* The callback frame of a change to wk (e: the new entry, NULL when deleted), built by the codec's rule into
 * o (o->oom when it could not grow). */
static void tswatch_frame(const struct ts_wkey *wk, const struct ks_entry *e, struct tscodec_out *o)
{
    struct tscodec_sink sk = tscodec_out_sink(o);
    tscodec_put_watch_frame(&sk, e == NULL, wk->present, wk->key, wk->klen, wk->val, wk->vlen, e ? ks_val(e) : NULL,
                            e ? e->vlen : 0);
}

/* A key of the namespace changed (e: its new entry, NULL when deleted): send every watch of it the
 * callback frame, then remember the new value as the next change's old one. */
void tswatch_key_changed(struct tcpstore *ts, enum ks_change what, const char *key, size_t klen,
                         const struct ks_entry *e)
{
    struct ts_wkey *wk;
    struct tscodec_out f = {0};
    if (!ts->wkeys || !(wk = tswatch_wkey(ts, key, klen, 0)))
        return;
    if (what == KS_DELETE)
        e = NULL;
    tswatch_frame(wk, e, &f);
    /* A connection closed meanwhile (even by this loop, when its output cannot grow) is skipped by
     * tcpstore_put; its watches, and so this list, stay until it is freed on a later loop turn. */
    for (struct ts_watch *w = wk->head; w; w = w->next) {
        if (f.oom) {
            tcpstore_close(w->c, "out of memory");
            continue;
        }
        if (!tcpstore_live(w->c))
            continue;
        tcpstore_put(w->c, f.p, f.len);
        stats_inc(&ts->srv->stats, STAT_TS_WATCH_CALLBACKS);
    }
    free(f.p);
    /* Without a copy the next old value would be wrong: the watchers are closed instead. */
    if (tswatch_remember(wk, e) != 0)
        for (struct ts_watch *w = wk->head; w; w = w->next)
            tcpstore_close(w->c, "out of memory");
}

/* Free every watched key left (at exit, after every connection). */
void tswatch_fini(struct tcpstore *ts)
{
    struct ts_wkey *wk, *tmp;
    HASH_ITER(hh, ts->wkeys, wk, tmp) {
        tswatch_wkey_free(ts, wk);
    }
}
