/*
 * The etcd client for high availability.  etcd v3 is reached through its
 * JSON gateway (POST /v3/..., JSON bodies, keys and values in base64)
 * with libevent's HTTP client, so every call runs on the daemon's event
 * loop and completes through a callback: nothing here blocks.  Calls go to
 * one endpoint at a time over one kept-alive connection per endpoint, in
 * the order they are made; a call that cannot reach its endpoint (refused,
 * reset, timed out) is reported as UNREACHABLE and the next call goes to
 * the next endpoint.  Whether to retry is the caller's decision: only it
 * knows whether the call is safe to repeat.  Watches are in
 * ha_etcd_watch.c.
 */
#include "ha_etcd.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>

#include "b64.h"

/* The most endpoints one --ha URL may name. */
#define HA_ETCD_MAX_EP 16

/* One endpoint and its connection (made on first use). */
struct ha_etcd_ep {
    char host[256];
    uint16_t port;
    char name[272];
    struct evhttp_connection *conn;
};

/* One call in flight. */
struct ha_etcd_call {
    struct ha_etcd *e;
    ha_etcd_cb cb;
    void *arg;
    int ep;
    struct ha_etcd_call *prev, *next;
};

struct ha_etcd {
    struct event_base *base;
    int timeout_s;
    struct ha_etcd_ep ep[HA_ETCD_MAX_EP];
    int nep, cur;
    struct ha_etcd_call *calls;
};

/* Parse one "HOST:PORT" of len bytes into ep; 0, or -1 when malformed. */
static int ha_etcd_parse_ep(const char *s, size_t len, struct ha_etcd_ep *ep)
{
    const char *colon = memrchr(s, ':', len);
    if (!colon || colon == s || (size_t)(colon - s) >= sizeof ep->host)
        return -1;
    char *end;
    char portbuf[8];
    size_t plen = len - (size_t)(colon + 1 - s);
    if (plen == 0 || plen >= sizeof portbuf)
        return -1;
    memcpy(portbuf, colon + 1, plen);
    portbuf[plen] = '\0';
    unsigned long port = strtoul(portbuf, &end, 10);
    if (*end || port == 0 || port > 65535)
        return -1;
    memcpy(ep->host, s, (size_t)(colon - s));
    ep->host[colon - s] = '\0';
    ep->port = (uint16_t)port;
    memcpy(ep->name, s, len); /* the host is shorter than the name buffer, the port at most 5 digits */
    ep->name[len] = '\0';
    return 0;
}

/* A client for endpoints "HOST:PORT[,HOST:PORT...]" with a per-call timeout; NULL when the list is bad. */
struct ha_etcd *ha_etcd_new(struct event_base *base, const char *endpoints, int timeout_s)
{
    struct ha_etcd *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->base = base;
    e->timeout_s = timeout_s > 0 ? timeout_s : 1;
    const char *s = endpoints;
    while (s && *s) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (e->nep == HA_ETCD_MAX_EP || ha_etcd_parse_ep(s, len, &e->ep[e->nep]) != 0) {
            free(e);
            return NULL;
        }
        e->nep++;
        s = comma ? comma + 1 : NULL;
    }
    if (e->nep == 0) {
        free(e);
        return NULL;
    }
    return e;
}

/* Cancel every call (their callbacks are not run) and free; watches must be freed first. */
void ha_etcd_free(struct ha_etcd *e)
{
    if (!e)
        return;
    /* Freeing a connection drops its queued requests without running their callbacks. */
    for (int i = 0; i < e->nep; i++)
        if (e->ep[i].conn)
            evhttp_connection_free(e->ep[i].conn);
    struct ha_etcd_call *c, *tmp;
    DL_FOREACH_SAFE(e->calls, c, tmp)
    {
        DL_DELETE(e->calls, c);
        free(c);
    }
    free(e);
}

/* The endpoint calls go to now ("HOST:PORT"). */
const char *ha_etcd_endpoint(const struct ha_etcd *e)
{
    return e->ep[e->cur].name;
}

/* The event base the client runs on. */
struct event_base *ha_etcd_base(const struct ha_etcd *e)
{
    return e->base;
}

/* The current endpoint's host and port. */
const char *ha_etcd_current(const struct ha_etcd *e, uint16_t *port)
{
    *port = e->ep[e->cur].port;
    return e->ep[e->cur].host;
}

/* After a failure on endpoint ep: move to the next endpoint, unless the client has already moved on. */
void ha_etcd_avoid(struct ha_etcd *e, int ep)
{
    if (e->cur == ep)
        e->cur = (e->cur + 1) % e->nep;
}

/* The index of the current endpoint. */
int ha_etcd_index(const struct ha_etcd *e)
{
    return e->cur;
}

/* The name of err, for log lines. */
const char *ha_etcd_strerror(enum ha_etcd_err err)
{
    static const char *const names[] = {
        [HA_ETCD_OK] = "ok",
        [HA_ETCD_UNREACHABLE] = "etcd unreachable",
        [HA_ETCD_REFUSED] = "refused by etcd",
        [HA_ETCD_BADREPLY] = "malformed reply from etcd",
        [HA_ETCD_NOMEM] = "out of memory",
    };
    return (unsigned)err < sizeof names / sizeof names[0] ? names[err] : "unknown";
}

/* The connection to endpoint i, made on first use; NULL when it cannot be made. */
static struct evhttp_connection *ha_etcd_conn(struct ha_etcd *e, int i)
{
    struct ha_etcd_ep *ep = &e->ep[i];
    if (!ep->conn) {
        ep->conn = evhttp_connection_base_new(e->base, NULL, ep->host, ep->port);
        if (ep->conn)
            evhttp_connection_set_timeout(ep->conn, e->timeout_s);
    }
    return ep->conn;
}

/* Decode a reply body; NULL when it is not a JSON object. */
static json_t *ha_etcd_decode(struct evbuffer *in)
{
    size_t len = evbuffer_get_length(in);
    const char *p = (const char *)evbuffer_pullup(in, (ssize_t)len);
    if (!p)
        return NULL;
    json_error_t jerr;
    json_t *j = json_loadb(p, len, 0, &jerr);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

/* An HTTP exchange ended (req NULL when the connection failed): decode and hand over the reply. */
static void ha_etcd_done(struct evhttp_request *req, void *arg)
{
    struct ha_etcd_call *c = arg;
    struct ha_etcd *e = c->e;
    DL_DELETE(e->calls, c);
    int code = req ? evhttp_request_get_response_code(req) : 0;
    json_t *reply = code ? ha_etcd_decode(evhttp_request_get_input_buffer(req)) : NULL;
    enum ha_etcd_err err = HA_ETCD_OK;
    if (code == 0) {
        err = HA_ETCD_UNREACHABLE;
        ha_etcd_avoid(e, c->ep);
    } else if (code != 200) {
        err = HA_ETCD_REFUSED;
    } else if (!reply) {
        err = HA_ETCD_BADREPLY;
    }
    json_t *result = reply ? json_object_get(reply, "result") : NULL;
    c->cb(c->arg, err, result && json_is_object(result) ? result : reply);
    json_decref(reply);
    free(c);
}

/* POST body (stolen, even on failure) to path (e.g. "/v3/kv/range"); 0, or -1 when it cannot be sent. */
int ha_etcd_call(struct ha_etcd *e, const char *path, json_t *body, ha_etcd_cb cb, void *arg)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    struct ha_etcd_call *c = text ? calloc(1, sizeof *c) : NULL;
    struct evhttp_connection *conn = c ? ha_etcd_conn(e, e->cur) : NULL;
    struct evhttp_request *req = conn ? evhttp_request_new(ha_etcd_done, c) : NULL;
    if (!req) {
        free(text);
        free(c);
        return -1;
    }
    *c = (struct ha_etcd_call){.e = e, .cb = cb, .arg = arg, .ep = e->cur};
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Host", e->ep[e->cur].host);
    evhttp_add_header(h, "Content-Type", "application/json");
    evbuffer_add(evhttp_request_get_output_buffer(req), text, strlen(text));
    free(text);
    /* On failure libevent has already freed req. */
    if (evhttp_make_request(conn, req, EVHTTP_REQ_POST, path) != 0) {
        free(c);
        return -1;
    }
    DL_APPEND(e->calls, c);
    return 0;
}

/* Base64 of n bytes as a JSON string, or NULL when memory ran out. */
json_t *ha_etcd_b64(const void *p, size_t n)
{
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        return NULL;
    b64_encode(out, p, n);
    json_t *j = json_string(out);
    free(out);
    return j;
}

/* Decode base64 text s into a new NUL-terminated buffer (*n gets its length); NULL when malformed. */
static uint8_t *ha_etcd_unb64(const char *s, size_t *n)
{
    size_t len = strlen(s);
    if (len % 4)
        return NULL;
    uint8_t *out = malloc(len / 4 * 3 + 1);
    if (!out)
        return NULL;
    long got = b64_decode(out, s, len);
    if (got < 0) {
        free(out);
        return NULL;
    }
    out[got] = '\0';
    *n = (size_t)got;
    return out;
}

/* An int64 field of obj (etcd sends them as strings); dflt when absent or malformed. */
int64_t ha_etcd_int(const json_t *obj, const char *field, int64_t dflt)
{
    json_t *v = obj ? json_object_get(obj, field) : NULL;
    if (json_is_integer(v))
        return json_integer_value(v);
    if (!json_is_string(v))
        return dflt;
    char *end;
    long long x = strtoll(json_string_value(v), &end, 10);
    return *end ? dflt : (int64_t)x;
}

/* Decode one pair from its JSON form into kv; 0, or -1 when it is malformed or memory ran out. */
int ha_etcd_kv_decode(const json_t *j, struct ha_etcd_kv *kv)
{
    memset(kv, 0, sizeof *kv);
    const char *key = json_string_value(json_object_get(j, "key"));
    const char *val = json_string_value(json_object_get(j, "value"));
    /* An empty value is left out of the JSON form altogether. */
    kv->key = key ? (char *)ha_etcd_unb64(key, &kv->klen) : NULL;
    kv->val = ha_etcd_unb64(val ? val : "", &kv->vlen);
    if (!kv->key || !kv->val) {
        ha_etcd_kv_clear(kv);
        return -1;
    }
    kv->create_rev = ha_etcd_int(j, "create_revision", 0);
    kv->mod_rev = ha_etcd_int(j, "mod_revision", 0);
    kv->lease = ha_etcd_int(j, "lease", 0);
    return 0;
}

/* Free what ha_etcd_kv_decode allocated. */
void ha_etcd_kv_clear(struct ha_etcd_kv *kv)
{
    free(kv->key);
    free(kv->val);
    kv->key = NULL;
    kv->val = NULL;
}

/* A JSON int64 in etcd's string form. */
static json_t *ha_etcd_i64(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%lld", (long long)v);
    return json_string(buf);
}

/* The body of a put: key, value and lease (when non-zero). */
static json_t *ha_etcd_put_body(const char *key, size_t klen, const uint8_t *val, size_t vlen, int64_t lease)
{
    json_t *b = json_object();
    if (b) {
        json_object_set_new(b, "key", ha_etcd_b64(key, klen));
        json_object_set_new(b, "value", ha_etcd_b64(val, vlen));
        if (lease)
            json_object_set_new(b, "lease", ha_etcd_i64(lease));
    }
    return b;
}

/* Put key = val, attached to lease (0: none). */
int ha_etcd_put(struct ha_etcd *e, const char *key, size_t klen, const uint8_t *val, size_t vlen, int64_t lease,
                ha_etcd_cb cb, void *arg)
{
    return ha_etcd_call(e, "/v3/kv/put", ha_etcd_put_body(key, klen, val, vlen, lease), cb, arg);
}

/* The range_end that makes a range cover every key starting with key (etcd's prefix convention). */
json_t *ha_etcd_prefix_end(const char *key, size_t klen)
{
    char end[1024];
    if (klen == 0 || klen > sizeof end)
        return ha_etcd_b64("\0", 1); /* every key */
    memcpy(end, key, klen);
    size_t n = klen;
    while (n > 0 && (unsigned char)end[n - 1] == 0xff)
        n--;
    if (n == 0)
        return ha_etcd_b64("\0", 1);
    end[n - 1]++;
    return ha_etcd_b64(end, n);
}

/* Read key, or every key starting with it when prefix is set. */
int ha_etcd_range(struct ha_etcd *e, const char *key, size_t klen, int prefix, ha_etcd_cb cb, void *arg)
{
    json_t *b = json_object();
    if (b) {
        json_object_set_new(b, "key", ha_etcd_b64(key, klen));
        if (prefix)
            json_object_set_new(b, "range_end", ha_etcd_prefix_end(key, klen));
    }
    return ha_etcd_call(e, "/v3/kv/range", b, cb, arg);
}

/* Create key = val under lease only if key does not exist (compare its create revision with 0). */
int ha_etcd_create(struct ha_etcd *e, const char *key, size_t klen, const uint8_t *val, size_t vlen, int64_t lease,
                   ha_etcd_cb cb, void *arg)
{
    json_t *b = json_pack("{s:[{s:o,s:s,s:s,s:s}],s:[{s:o}],s:[{s:{s:o}}]}", "compare", "key", ha_etcd_b64(key, klen),
                          "result", "EQUAL", "target", "CREATE", "create_revision", "0", "success", "request_put",
                          ha_etcd_put_body(key, klen, val, vlen, lease), "failure", "request_range", "key",
                          ha_etcd_b64(key, klen));
    return ha_etcd_call(e, "/v3/kv/txn", b, cb, arg);
}

/* Grant a lease of ttl_s seconds; the reply's "ID" names it. */
int ha_etcd_lease_grant(struct ha_etcd *e, int ttl_s, ha_etcd_cb cb, void *arg)
{
    return ha_etcd_call(e, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t)ttl_s), cb, arg);
}

/* Renew a lease once; the reply's "TTL" is absent or 0 when the lease has already expired. */
int ha_etcd_lease_keepalive(struct ha_etcd *e, int64_t lease, ha_etcd_cb cb, void *arg)
{
    return ha_etcd_call(e, "/v3/lease/keepalive", json_pack("{s:o}", "ID", ha_etcd_i64(lease)), cb, arg);
}
