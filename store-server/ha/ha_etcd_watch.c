/*
 * etcd watches through the JSON gateway.  POST /v3/watch answers with a
 * response that never ends: a chunked HTTP body carrying one JSON object
 * per watch message.  libevent's chunked-body callback hands over each
 * piece as it arrives, on the loop, so the loop never waits for a stream:
 * the pieces are collected and every complete JSON object in them is
 * decoded and its events delivered at once.  A stream that ends (etcd
 * member lost, connection reset, or idle past the timeout) is opened again
 * from the revision after the last event delivered, on the next endpoint
 * when it failed, so the caller sees each change exactly once and in
 * order.  A watch asked to start "from now" (revision 0) learns which
 * revision "now" was from etcd's confirmation, so a stream opened again
 * before any event arrived does not start from a later "now" and skip the
 * changes made in between.
 */
#include "ha_etcd.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>

/* A stream silent this long is opened again (etcd sends nothing while nothing changes). */
#define HA_WATCH_IDLE_S 30
/* Pause before opening a stream again after it failed. */
#define HA_WATCH_RETRY_MS 200

struct ha_etcd_watch {
    struct ha_etcd *e;
    char *key;
    size_t klen;
    int prefix;
    int64_t next_rev;
    ha_etcd_watch_cb cb;
    void *arg;
    struct evhttp_connection *conn;
    int ep;                 /* the endpoint the stream was opened on */
    enum evhttp_request_error why; /* how the stream's request failed (set before its callback) */
    struct evbuffer *acc;   /* received stream bytes not yet decoded */
    struct event *restart;  /* opens the stream again, outside libevent's HTTP callbacks */
    int created;            /* etcd confirmed the current stream */
    int failed;             /* the current stream broke (report it, move endpoints) */
};

static int ha_etcd_watch_open(struct ha_etcd_watch *w);

/* Deliver one event of a watch message. */
static int ha_etcd_watch_event(struct ha_etcd_watch *w, const json_t *ev)
{
    struct ha_etcd_kv kv;
    if (ha_etcd_kv_decode(json_object_get(ev, "kv"), &kv) != 0)
        return -1;
    const char *type = json_string_value(json_object_get(ev, "type"));
    /* PUT is the enum's zero value, which the gateway leaves out. */
    kv.deleted = type && strcmp(type, "DELETE") == 0;
    if (kv.mod_rev >= w->next_rev)
        w->next_rev = kv.mod_rev + 1;
    w->cb(w->arg, HA_ETCD_OK, &kv);
    ha_etcd_kv_clear(&kv);
    return 0;
}

/* Handle one decoded watch message; 0, or -1 when the stream must be opened again. */
static int ha_etcd_watch_message(struct ha_etcd_watch *w, const json_t *msg)
{
    const json_t *r = json_object_get(msg, "result");
    if (!json_is_object(r) || json_is_true(json_object_get(r, "canceled")))
        return -1; /* an error, or the revision was compacted away */
    if (json_is_true(json_object_get(r, "created"))) {
        w->created = 1;
        /* Started "from now": every later event is above the revision this confirmation carries. */
        if (w->next_rev <= 0)
            w->next_rev = ha_etcd_int(json_object_get(r, "header"), "revision", 0) + 1;
    }
    const json_t *events = json_object_get(r, "events");
    size_t i;
    const json_t *ev;
    json_array_foreach(events, i, ev)
    {
        if (ha_etcd_watch_event(w, ev) != 0)
            return -1;
    }
    return 0;
}

/* Decode every complete message collected so far; 0, or -1 on a malformed or refusing one. */
static int ha_etcd_watch_drain(struct ha_etcd_watch *w)
{
    for (;;) {
        size_t len = evbuffer_get_length(w->acc);
        const char *p = (const char *)evbuffer_pullup(w->acc, (ssize_t)len);
        size_t skip = 0;
        while (skip < len && strchr(" \t\r\n", p[skip]))
            skip++;
        evbuffer_drain(w->acc, skip);
        if (skip == len)
            return 0;
        json_error_t jerr;
        json_t *msg = json_loadb(p + skip, len - skip, JSON_DISABLE_EOF_CHECK, &jerr);
        if (!msg)
            return json_error_code(&jerr) == json_error_premature_end_of_input ? 0 : -1;
        /* With the EOF check off, position is the number of bytes the object took. */
        evbuffer_drain(w->acc, (size_t)jerr.position);
        int rc = ha_etcd_watch_message(w, msg);
        json_decref(msg);
        if (rc != 0)
            return -1;
    }
}

/* Schedule the stream to be opened again (after a pause when it failed). */
static void ha_etcd_watch_again(struct ha_etcd_watch *w, int failed)
{
    w->failed |= failed;
    struct timeval tv = {0, failed ? HA_WATCH_RETRY_MS * 1000 : 0};
    event_add(w->restart, &tv);
}

/* A piece of the stream arrived: decode what is complete. */
static void ha_etcd_watch_chunk(struct evhttp_request *req, void *arg)
{
    struct ha_etcd_watch *w = arg;
    evbuffer_add_buffer(w->acc, evhttp_request_get_input_buffer(req));
    if (ha_etcd_watch_drain(w) != 0) {
        evbuffer_drain(w->acc, evbuffer_get_length(w->acc));
        ha_etcd_watch_again(w, 1);
    }
}

/* Remember how the stream's request failed (libevent runs this just before the done callback). */
static void ha_etcd_watch_error(enum evhttp_request_error why, void *arg)
{
    struct ha_etcd_watch *w = arg;
    w->why = why;
}

/* The stream ended (req NULL when its connection failed or timed out). */
static void ha_etcd_watch_done(struct evhttp_request *req, void *arg)
{
    struct ha_etcd_watch *w = arg;
    int code = req ? evhttp_request_get_response_code(req) : 0;
    if (event_pending(w->restart, EV_TIMEOUT, NULL))
        return;
    /* Only an established stream that went idle is renewed quietly on the same member.  A member that
     * died closes the stream (EOF), which libevent reports like a timeout, with no request: treating
     * that as idle would reopen on the dead member first and lose a pause before moving on. */
    int idle = w->created && code == 0 && w->why == EVREQ_HTTP_TIMEOUT;
    ha_etcd_watch_again(w, !idle && code != 200);
}

/* Open the stream again: report a failure first, and move to the next endpoint after one. */
static void ha_etcd_watch_restart(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ha_etcd_watch *w = arg;
    if (w->conn)
        evhttp_connection_free(w->conn);
    w->conn = NULL;
    evbuffer_drain(w->acc, evbuffer_get_length(w->acc));
    if (w->failed) {
        /* Move the client off the failed member unless a failed call already did: the endpoint is
         * shared, and stepping again would skip a live member or come back to the dead one. */
        ha_etcd_avoid(w->e, w->ep);
        w->cb(w->arg, HA_ETCD_UNREACHABLE, NULL);
    }
    w->failed = 0;
    if (ha_etcd_watch_open(w) != 0)
        ha_etcd_watch_again(w, 1);
}

/* The watch's create request, from the next revision on. */
static json_t *ha_etcd_watch_body(const struct ha_etcd_watch *w)
{
    char rev[24];
    snprintf(rev, sizeof rev, "%lld", (long long)w->next_rev);
    json_t *c = json_pack("{s:o,s:s}", "key", ha_etcd_b64(w->key, w->klen), "start_revision", rev);
    if (c && w->prefix)
        json_object_set_new(c, "range_end", ha_etcd_prefix_end(w->key, w->klen));
    return c ? json_pack("{s:o}", "create_request", c) : NULL;
}

/* Open the stream on the current endpoint; 0, or -1 when it cannot be sent. */
static int ha_etcd_watch_open(struct ha_etcd_watch *w)
{
    uint16_t port;
    const char *host = ha_etcd_current(w->e, &port);
    w->ep = ha_etcd_index(w->e);
    w->why = (enum evhttp_request_error)-1;
    json_t *body = ha_etcd_watch_body(w);
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    w->created = 0;
    w->conn = text ? evhttp_connection_base_new(ha_etcd_base(w->e), NULL, host, port) : NULL;
    struct evhttp_request *req = w->conn ? evhttp_request_new(ha_etcd_watch_done, w) : NULL;
    if (!req) {
        free(text);
        return -1;
    }
    evhttp_connection_set_timeout(w->conn, HA_WATCH_IDLE_S);
    evhttp_request_set_chunked_cb(req, ha_etcd_watch_chunk);
    evhttp_request_set_error_cb(req, ha_etcd_watch_error);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Host", host);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evbuffer_add(evhttp_request_get_output_buffer(req), text, strlen(text));
    free(text);
    return evhttp_make_request(w->conn, req, EVHTTP_REQ_POST, "/v3/watch");
}

/* Watch key (or the prefix) from revision from_rev on; NULL when it cannot start. */
struct ha_etcd_watch *ha_etcd_watch_new(struct ha_etcd *e, const char *key, size_t klen, int prefix, int64_t from_rev,
                                        ha_etcd_watch_cb cb, void *arg)
{
    struct ha_etcd_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    *w = (struct ha_etcd_watch){.e = e, .klen = klen, .prefix = prefix, .next_rev = from_rev, .cb = cb, .arg = arg};
    w->key = malloc(klen + 1);
    w->acc = evbuffer_new();
    w->restart = event_new(ha_etcd_base(e), -1, 0, ha_etcd_watch_restart, w);
    if (!w->key || !w->acc || !w->restart) {
        ha_etcd_watch_free(w);
        return NULL;
    }
    memcpy(w->key, key, klen);
    w->key[klen] = '\0';
    if (ha_etcd_watch_open(w) != 0)
        ha_etcd_watch_again(w, 1);
    return w;
}

/* Stop a watch (its callback is not run again); NULL is fine. */
void ha_etcd_watch_free(struct ha_etcd_watch *w)
{
    if (!w)
        return;
    if (w->conn)
        evhttp_connection_free(w->conn);
    if (w->restart)
        event_free(w->restart);
    if (w->acc)
        evbuffer_free(w->acc);
    free(w->key);
    free(w);
}
