/*
 * The live status page.  GET / answers one self-contained HTML document
 * (its CSS and script inline, built into the binary from status_page.html
 * by scripts/embed.py); its script fetches /v1/status every 1.5 s and draws
 * everything from that JSON, so the page shows nothing the JSON does not.
 * A Content-Security-Policy lets it reach nothing but this listener.
 *
 *   /            the page
 *   /v1/status   {"time_ms", "server", "jobs": [every job's detail]}
 *   /v1/server   the store's health alone
 */
#include "status_page.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <string.h>

#include "server.h"
#include "status_json.h"

/* The page, NUL-terminated (generated from status_page.html). */
extern const char status_page_html[];
extern const size_t status_page_html_len;

/* Only inline script and style, and fetches back to this listener: nothing loads from elsewhere. */
static const char status_page_csp[] = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                      "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                                      "frame-ancestors 'none'";

/* Send body with the content type and the headers every answer of the page carries. */
static void status_page_send(struct evhttp_request *req, const char *type, struct evbuffer *body, int html)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    if (html) {
        evhttp_add_header(h, "Content-Security-Policy", status_page_csp);
        evhttp_add_header(h, "Referrer-Policy", "no-referrer");
    }
    evhttp_send_reply(req, 200, "OK", body);
}

/* Answer path when it is the page (/) or its JSON (/v1/status, /v1/server); 1 when answered, else 0. */
int status_page_route(struct server *srv, struct evhttp_request *req, const char *path)
{
    int page = strcmp(path, "/") == 0 || strcmp(path, "/index.html") == 0;
    int all = strcmp(path, "/v1/status") == 0;
    int health = strcmp(path, "/v1/server") == 0;
    if (!page && !all && !health)
        return 0;
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return 1;
    }
    if (page) {
        evbuffer_add_reference(b, status_page_html, status_page_html_len, NULL, NULL);
        status_page_send(req, "text/html; charset=utf-8", b, 1);
    } else {
        if (all) {
            status_json_all(srv, b);
        } else {
            status_json_server(srv, b);
            evbuffer_add(b, "\n", 1);
        }
        status_page_send(req, "application/json", b, 0);
    }
    evbuffer_free(b);
    return 1;
}
