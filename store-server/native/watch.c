/*
 * Watches.  Each namespace keeps a list of (connection, prefix) watches;
 * every keyspace change walks it and pushes Event{watch} to the matches.
 * The walk is linear in the namespace's watches, which are few (a launcher
 * or a dashboard each), and bounded in total by --max-watches and per
 * connection by --max-watches-per-conn.
 *
 * Events count against the connection's --max-output like replies do.  A
 * watcher that stops reading would otherwise grow the daemon by every
 * matching value (300 sets of 1 MiB took it from 3 to 319 MiB), and since a
 * push cannot be refused the way a request can be left unread, a watch whose
 * next event would pass the limit is ended instead: the event is dropped and
 * a small WatchEvent{ENDED} tells the client which watch lost events.
 */
#include "watch.h"

#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "ns.h"
#include "server.h"

/* Unlink w from its namespace list and free it. */
static void watch_free(struct ns *ns, struct watch *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        ns->watches = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->conn->nwatches--;
    ns->srv->nwatches--;
    free(w);
}

/* watch: start pushing events for keys with the prefix (an op table row). */
void watch_op_watch(struct conn *c, Muster__Request *req)
{
    struct server *srv = c->srv;
    const char *prefix = req->watch->prefix;
    if (srv->nwatches >= srv->opt.max_watches) {
        stats_inc(&srv->stats, STAT_LIMIT_WATCHES);
        conn_reply(c, req->id, MUSTER__STATUS__LIMIT, "too many watches on this server", NULL);
        return;
    }
    if (c->nwatches >= srv->opt.max_watches_per_conn) {
        stats_inc(&srv->stats, STAT_LIMIT_WATCHES_PER_CONN);
        conn_replyf(c, req->id, MUSTER__STATUS__LIMIT, "too many watches on this connection (limit %llu)",
                    (unsigned long long)srv->opt.max_watches_per_conn);
        return;
    }
    size_t plen = strlen(prefix);
    struct watch *w = calloc(1, sizeof *w + plen + 1);
    if (!w) {
        conn_reply(c, req->id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
        return;
    }
    memcpy(w->prefix, prefix, plen);
    w->plen = plen;
    w->id = ++srv->next_watch;
    w->conn = c;
    w->next = c->ns->watches;
    if (w->next)
        w->next->prev = w;
    c->ns->watches = w;
    c->nwatches++;
    srv->nwatches++;
    Muster__WatchRes r = MUSTER__WATCH_RES__INIT;
    r.watch_id = w->id;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* unwatch: stop one of this connection's watches (an op table row). */
void watch_op_unwatch(struct conn *c, Muster__Request *req)
{
    uint64_t id = req->unwatch->watch_id;
    for (struct watch *w = c->ns->watches; w; w = w->next) {
        if (w->id == id && w->conn == c) {
            watch_free(c->ns, w);
            Muster__UnwatchRes r = MUSTER__UNWATCH_RES__INIT;
            conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
            return;
        }
    }
    conn_replyf(c, req->id, MUSTER__STATUS__NOT_FOUND, "no watch %llu on this connection", (unsigned long long)id);
}

/* End watch w because its event would pass --max-output: tell its client, then free it. */
static void watch_end(struct ns *ns, struct watch *w)
{
    Muster__WatchEvent we = MUSTER__WATCH_EVENT__INIT;
    we.kind = MUSTER__WATCH_EVENT__KIND__ENDED;
    we.watch_id = w->id;
    we.key = w->prefix;
    Muster__Event ev = MUSTER__EVENT__INIT;
    ev.event_case = MUSTER__EVENT__EVENT_WATCH;
    ev.watch = &we;
    stats_inc(&ns->srv->stats, STAT_LIMIT_WATCH_OUTPUT);
    conn_push_event(w->conn, &ev);
    watch_free(ns, w);
}

/* Tell every matching watch of ns about a change (the keyspace hook calls this). */
void watch_notify(struct ns *ns, enum ks_change what, const char *key, size_t klen, const struct ks_entry *e)
{
    /* A key with a NUL (set through the TCPStore listener) cannot be sent as a native string. */
    if (!ns->watches || memchr(key, 0, klen))
        return;
    Muster__WatchEvent we = MUSTER__WATCH_EVENT__INIT;
    we.kind = what == KS_SET ? MUSTER__WATCH_EVENT__KIND__SET : MUSTER__WATCH_EVENT__KIND__DELETE;
    we.key = (char *)key; /* keyspace keys are NUL-terminated */
    if (e) {
        we.value.data = ks_val(e);
        we.value.len = e->vlen;
    }
    Muster__Event ev = MUSTER__EVENT__INIT;
    ev.event_case = MUSTER__EVENT__EVENT_WATCH;
    ev.watch = &we;
    /* The frame's size with the largest watch id; ids only shorten it. */
    we.watch_id = UINT64_MAX;
    size_t frame = FRAME_HDR + 8 + protobuf_c_message_get_packed_size(&ev.base);
    for (struct watch *w = ns->watches, *next; w; w = next) {
        next = w->next;
        if (klen < w->plen || memcmp(key, w->prefix, w->plen) != 0 || !conn_live(w->conn))
            continue;
        if (conn_output_len(w->conn) + frame > ns->srv->opt.max_output) {
            watch_end(ns, w);
            continue;
        }
        we.watch_id = w->id;
        conn_push_event(w->conn, &ev);
        stats_inc(&ns->srv->stats, STAT_WATCH_EVENTS);
    }
}

/* Drop every watch of a closing connection. */
void watch_conn_closed(struct conn *c)
{
    if (!c->ns || !c->nwatches)
        return;
    for (struct watch *w = c->ns->watches, *next; w; w = next) {
        next = w->next;
        if (w->conn == c)
            watch_free(c->ns, w);
    }
}

/* Free every watch of ns (at exit). */
void watch_ns_destroy(struct ns *ns)
{
    while (ns->watches) {
        struct watch *w = ns->watches;
        ns->watches = w->next;
        ns->srv->nwatches--;
        free(w);
    }
}
