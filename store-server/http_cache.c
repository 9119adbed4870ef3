/*
 * Rendered HTTP answers.  A report of many jobs costs the loop real time
 * to render, and an unauthenticated client can ask for it as often as it
 * likes; so each answer is kept, by its URI, for --http-cache and sent
 * again from the one copy: every GET within that time costs a lookup.
 *
 * An answer is a shared block (io/shared_bytes.c).  The cache holds one
 * reference and each reply being sent holds one, so the bytes are never
 * copied into the connection's buffer; the block is freed when the last
 * goes.  Its bytes count in buffer_bytes_current
 * (and http_buffer_bytes_current) while it lives, against the same
 * --max-buffer-memory as the connections' buffers: a GET whose new
 * answer would pass it is answered 503 and counted, so clients that
 * never read their answers cannot hold unbounded memory.
 */
#include "http_cache.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "jobs_index.h"
#include "server.h"
#include "shared_bytes.h"

/* Distinct answers kept at once (URIs beyond it replace the oldest). */
#define HTTP_CACHE_SLOTS 32

/* One kept answer: its URI, when it was rendered, its type and bytes. */
struct http_slot {
    char *key;
    uint64_t at_ms;
    const char *type;
    struct shared_bytes *body;
};

struct http_cache {
    struct http_slot slot[HTTP_CACHE_SLOTS];
    struct jobs_index *ix;
};

/* Move what b holds into a new counted body (one reference); NULL when memory ran out. */
static struct shared_bytes *http_body_new(struct server *srv, struct evbuffer *b)
{
    size_t len = evbuffer_get_length(b);
    struct shared_bytes *body = shared_bytes_new(srv, len, STAT_HTTP_BUFFER_BYTES);
    if (body)
        evbuffer_remove(b, shared_bytes_data(body), len);
    return body;
}

/* Forget slot s (its body lives on while a reply still sends it). */
static void http_slot_clear(struct http_slot *s)
{
    if (s->body)
        shared_bytes_unref(s->body);
    free(s->key);
    *s = (struct http_slot){0};
}

/* A new, empty cache; NULL when memory ran out. */
struct http_cache *http_cache_new(void)
{
    return calloc(1, sizeof(struct http_cache));
}

/* Drop the cache's answers (those still being sent go when sent) and free it; NULL is fine. */
void http_cache_free(struct http_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < HTTP_CACHE_SLOTS; i++)
        http_slot_clear(&c->slot[i]);
    jobs_index_free(c->ix);
    free(c);
}

/* Send body (NULL: none) with code, reason, Content-Type type and the headers every answer carries. */
void http_send(struct evhttp_request *req, int code, const char *reason, const char *type, struct evbuffer *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    evhttp_send_reply(req, code, reason, body);
}

/* Send a one-line text answer. */
void http_send_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "%s\n", text);
    http_send(req, code, reason, "text/plain; charset=utf-8", b);
    evbuffer_free(b);
}

/* Send body's bytes by reference (the reply holds one reference until they are written or dropped). */
static void http_send_body(struct evhttp_request *req, const char *type, struct shared_bytes *body)
{
    struct evbuffer *b = evbuffer_new();
    if (!b || shared_bytes_send(body, b, NULL) != 0) {
        if (b)
            evbuffer_free(b);
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    http_send(req, 200, "OK", type, b);
    evbuffer_free(b);
}

/* The slot for key: its own while fresh; else cleared, stale ones are dropped, and a free or the oldest
 * slot is handed back with *fresh 0. */
static struct http_slot *http_slot_for(struct http_cache *c, const char *key, uint64_t ttl, int *fresh)
{
    uint64_t now = clock_now_ms();
    struct http_slot *pick = NULL;
    *fresh = 0;
    for (size_t i = 0; i < HTTP_CACHE_SLOTS; i++) {
        struct http_slot *s = &c->slot[i];
        if (s->key && now - s->at_ms >= ttl)
            http_slot_clear(s);
        if (s->key && strcmp(s->key, key) == 0) {
            *fresh = 1;
            return s;
        }
        if (!pick || (pick->key && (!s->key || s->at_ms < pick->at_ms)))
            pick = s;
    }
    http_slot_clear(pick);
    return pick;
}

/* Render fn's answer into a new counted body; NULL with *code 404, 503 (over the budget) or 500. */
static struct shared_bytes *http_render(struct server *srv, http_render_fn fn, void *arg, int *code)
{
    uint64_t max = srv->opt.max_buffer_memory;
    *code = 503;
    if (max && srv->stats.c[STAT_BUFFER_BYTES] >= max)
        return NULL;
    struct evbuffer *b = evbuffer_new();
    *code = 500;
    if (!b)
        return NULL;
    struct shared_bytes *body = NULL;
    if (fn(srv, arg, b) != 0)
        *code = 404;
    else if (max && srv->stats.c[STAT_BUFFER_BYTES] + evbuffer_get_length(b) > max)
        *code = 503;
    else
        body = http_body_new(srv, b);
    evbuffer_free(b);
    return body;
}

/* Answer req after a failed render: 404, 503 (counted) or 500. */
static void http_render_failed(struct server *srv, struct evhttp_request *req, int code)
{
    if (code == 404) {
        stats_inc(&srv->stats, STAT_HTTP_NOT_FOUND);
        http_send_text(req, 404, "Not Found", "no such job");
    } else if (code == 503) {
        stats_inc(&srv->stats, STAT_LIMIT_HTTP_BUFFER);
        http_send_text(req, 503, "Service Unavailable", "over --max-buffer-memory: retry later");
    } else {
        evhttp_send_error(req, 500, "out of memory");
    }
}

/* Answer req with what fn renders, from c's copy for key while it is younger than --http-cache; 404 when
 * fn says so; 503 (counted as limit_http_buffer_memory) when the answer would take the bytes buffered
 * for connections and HTTP answers past --max-buffer-memory. */
void http_cache_serve(struct server *srv, struct http_cache *c, struct evhttp_request *req, const char *key,
                      const char *type, http_render_fn fn, void *arg)
{
    uint64_t ttl = srv->opt.http_cache;
    int fresh = 0, code;
    struct http_slot *s = ttl ? http_slot_for(c, key, ttl, &fresh) : NULL;
    if (fresh) {
        stats_inc(&srv->stats, STAT_HTTP_CACHE_HITS);
        http_send_body(req, s->type, s->body);
        return;
    }
    struct shared_bytes *body = http_render(srv, fn, arg, &code);
    if (!body) {
        http_render_failed(srv, req, code);
        return;
    }
    if (s && (s->key = strdup(key))) {
        *s = (struct http_slot){s->key, clock_now_ms(), type, shared_bytes_ref(body)};
    }
    http_send_body(req, type, body);
    shared_bytes_unref(body);
}

/* The jobs' report order, taken again once it is older than --http-cache; NULL when memory ran out. */
const struct jobs_index *http_cache_index(struct server *srv, struct http_cache *c)
{
    if (c->ix && clock_now_ms() - c->ix->built_ms < srv->opt.http_cache)
        return c->ix;
    jobs_index_free(c->ix);
    c->ix = jobs_index_new(srv);
    return c->ix;
}
