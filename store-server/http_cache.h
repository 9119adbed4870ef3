/* The HTTP side's answers: sending with the common headers, and rendered answers kept for --http-cache
 * and counted against --max-buffer-memory while any copy of them waits to be sent. */
#ifndef MUSTERD_HTTP_CACHE_H
#define MUSTERD_HTTP_CACHE_H

struct server;
struct evbuffer;
struct evhttp_request;
struct http_cache;
struct jobs_index;

/* Render one answer into b; 0, or -1 when what it names does not exist (404). */
typedef int (*http_render_fn)(struct server *srv, void *arg, struct evbuffer *b);

/* A new, empty cache; NULL when memory ran out. */
struct http_cache *http_cache_new(void);
/* Drop the cache's answers (those still being sent go when sent) and free it; NULL is fine. */
void http_cache_free(struct http_cache *c);
/* Send body (NULL: none) with code, reason, Content-Type type and the headers every answer carries. */
void http_send(struct evhttp_request *req, int code, const char *reason, const char *type, struct evbuffer *body);
/* Send a one-line text answer. */
void http_send_text(struct evhttp_request *req, int code, const char *reason, const char *text);
/* Answer req with what fn renders, from c's copy for key while it is younger than --http-cache; 404 when
 * fn says so; 503 (counted as limit_http_buffer_memory) when the answer would take the bytes buffered
 * for connections and HTTP answers past --max-buffer-memory. */
void http_cache_serve(struct server *srv, struct http_cache *c, struct evhttp_request *req, const char *key,
                      const char *type, http_render_fn fn, void *arg);
/* The jobs' report order, taken again once it is older than --http-cache; NULL when memory ran out. */
const struct jobs_index *http_cache_index(struct server *srv, struct http_cache *c);

#endif
