/*
 * Watches, the native front end's part.  The registry (each namespace's
 * prefixes, the --max-watches and --max-watches-per-conn counts, matching a
 * changed key) is core/watch.c; here a match becomes an Event{watch} pushed
 * to the watching connection.
 *
 * Events count against the connection's --max-output like replies do.  A
 * watcher that stops reading would otherwise grow the daemon by every
 * matching value (300 sets of 1 MiB took it from 3 to 319 MiB), and since a
 * push cannot be refused the way a request can be left unread, a watch whose
 * next event would pass the limit is ended instead: the event is dropped and
 * a small WatchEvent{ENDED} tells the client which watch lost events.
 */
#include "op_watch.h"

#include <string.h>

#include "conn.h"
#include "ns.h"
#include "server.h"
#include "watch.h"

static int watch_conn_notify(void *owner, const struct watch *w, struct watch_change *ch);

/* A connection as a watch's owner. */
static const struct watch_owner_ops watch_conn_ops = {.notify = watch_conn_notify};

/* watch: start pushing events for keys with the prefix (an op table row). */
void watch_op_watch(struct conn *c, Muster__Request *req)
{
    struct server *srv = c->srv;
    const char *prefix = req->watch->prefix;
    int status;
    struct watch *w = watch_add(c->ns, prefix, strlen(prefix), &watch_conn_ops, c, &c->nwatches, &status);
    if (!w) {
        if (status != MUSTER__STATUS__LIMIT)
            conn_reply(c, req->id, MUSTER__STATUS__INTERNAL, "out of memory", NULL);
        else if (watch_full(c->ns->core, &c->nwatches) == STAT_LIMIT_WATCHES)
            conn_reply(c, req->id, MUSTER__STATUS__LIMIT, "too many watches on this server", NULL);
        else
            conn_replyf(c, req->id, MUSTER__STATUS__LIMIT, "too many watches on this connection (limit %llu)",
                        (unsigned long long)srv->opt.max_watches_per_conn);
        return;
    }
    Muster__WatchRes r = MUSTER__WATCH_RES__INIT;
    r.watch_id = w->id;
    conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
}

/* unwatch: stop one of this connection's watches (an op table row). */
void watch_op_unwatch(struct conn *c, Muster__Request *req)
{
    uint64_t id = req->unwatch->watch_id;
    if (watch_del_id(c->ns, c, id)) {
        Muster__UnwatchRes r = MUSTER__UNWATCH_RES__INIT;
        conn_reply(c, req->id, MUSTER__STATUS__OK, NULL, &r.base);
        return;
    }
    conn_replyf(c, req->id, MUSTER__STATUS__NOT_FOUND, "no watch %llu on this connection", (unsigned long long)id);
}

/* A match of one of c's watches: push its Event{watch}, or, when the event would pass --max-output, push
 * WatchEvent{ENDED} instead and end the watch. */
static int watch_conn_notify(void *owner, const struct watch *w, struct watch_change *ch)
{
    struct conn *c = owner;
    /* A key with a NUL (set through the TCPStore listener) cannot be sent as a native string. */
    if (!conn_live(c) || memchr(ch->key, 0, ch->klen))
        return 0;
    struct server *srv = c->srv;
    Muster__WatchEvent we = MUSTER__WATCH_EVENT__INIT;
    we.kind = ch->what == KS_SET ? MUSTER__WATCH_EVENT__KIND__SET : MUSTER__WATCH_EVENT__KIND__DELETE;
    we.key = (char *)ch->key; /* keyspace keys are NUL-terminated */
    if (ch->val) {
        we.value.data = (uint8_t *)ch->val;
        we.value.len = ch->vlen;
    }
    Muster__Event ev = MUSTER__EVENT__INIT;
    ev.event_case = MUSTER__EVENT__EVENT_WATCH;
    ev.watch = &we;
    /* The frame's size with the largest watch id (ids only shorten it), once per change: every watcher
     * of the change is sent the same event but for its id. */
    if (!ch->memo) {
        we.watch_id = UINT64_MAX;
        ch->memo = FRAME_HDR + 8 + protobuf_c_message_get_packed_size(&ev.base);
    }
    if (conn_output_len(c) + ch->memo > srv->opt.max_output) {
        Muster__WatchEvent end = MUSTER__WATCH_EVENT__INIT;
        end.kind = MUSTER__WATCH_EVENT__KIND__ENDED;
        end.watch_id = w->id;
        end.key = (char *)w->prefix;
        ev.watch = &end;
        stats_inc(&srv->stats, STAT_LIMIT_WATCH_OUTPUT);
        conn_push_event(c, &ev);
        return 1;
    }
    we.watch_id = w->id;
    conn_push_event(c, &ev);
    stats_inc(&srv->stats, STAT_WATCH_EVENTS);
    return 0;
}

/* Drop every watch of a closing connection. */
void watch_conn_closed(struct conn *c)
{
    if (!c->ns || !c->nwatches)
        return;
    watch_del_owner(c->ns, c);
}
