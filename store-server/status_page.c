/*
 * The live status page.  GET / answers one self-contained HTML document
 * (its CSS and script inline, built into the binary from status_page.html
 * by scripts/embed.py); its script fetches /v1/status every 1.5 s (a page
 * of jobs at a time, following its offsets) and draws everything from
 * that JSON, so the page shows nothing the JSON does not.
 * A Content-Security-Policy lets it reach nothing but this listener.
 *
 *   /            the page
 *   /v1/status   {"time_ms", "server", "summary", "page", "jobs": [a page of jobs' detail]}
 *   /v1/server   the store's health alone
 */
#include "status_page.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <string.h>

#include "http_cache.h"
#include "server.h"

/* The page, NUL-terminated (generated from status_page.html). */
extern const char status_page_html[];
extern const size_t status_page_html_len;

/* Only inline script and style, and fetches back to this listener: nothing loads from elsewhere. */
static const char status_page_csp[] = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                      "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                                      "frame-ancestors 'none'";

/* Answer path when it is the page (/ or /index.html); 1 when answered, else 0.  Its JSON (/v1/status,
 * /v1/server) is rendered and kept by metrics.c like every other report. */
int status_page_route(struct server *srv, struct evhttp_request *req, const char *path)
{
    (void)srv;
    if (strcmp(path, "/") != 0 && strcmp(path, "/index.html") != 0)
        return 0;
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return 1;
    }
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Security-Policy", status_page_csp);
    evhttp_add_header(h, "Referrer-Policy", "no-referrer");
    evbuffer_add_reference(b, status_page_html, status_page_html_len, NULL, NULL);
    http_send(req, 200, "OK", "text/html; charset=utf-8", b);
    evbuffer_free(b);
    return 1;
}
