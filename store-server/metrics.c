/*
 * The HTTP side door on --metrics-listen, served by libevent's evhttp on
 * the daemon's one loop (so it reads every counter without locks):
 *
 *   /metrics        Prometheus text: counters, limit rejections by reason,
 *                   per-op counts and latency histograms, connections,
 *                   waiters, keys and bytes per namespace, rendezvous state
 *   /healthz        200 while the loop runs
 *   /readyz         200 once listening and recovered, 503 while draining
 *   /v1/jobs[/NAME] job reports as JSON, or terminal text with ?format=text
 *   /, /v1/status,  the live status page and the JSON it draws from
 *   /v1/server      (status_page.c)
 *
 * It is a separate listener so operators can keep it off the data network.
 */
#include "metrics.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sysexits.h>
#include <unistd.h>

#include "escape.h"
#include "ha.h"
#include "jobs.h"
#include "listener.h"
#include "log.h"
#include "ns.h"
#include "ops.h"
#include "persist.h"
#include "rdzv.h"
#include "server.h"
#include "status_page.h"

struct metrics {
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    uint16_t port;
    double started; /* Unix time the daemon started serving metrics, for muster_start_time_seconds */
};

/* ------------------------------------------------------------ rendering */

/* Append a HELP and TYPE header for one metric family. */
static void metrics_family(struct evbuffer *b, const char *name, const char *type, const char *help)
{
    evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Whether a fixed counter is a current level rather than a running total (by name, so rows other
 * front ends add follow the same rule). */
static int metrics_is_gauge(int id)
{
    const char *name = stats_name(id);
    size_t n = strlen(name);
    return id == STAT_NAMESPACES || id == STAT_RDZV_PARKED_JOINS || id == STAT_NS_SWEEP_SLICE_US || (n > 8 && strcmp(name + n - 8, "_current") == 0);
}

/* Append every fixed counter: gauges and totals by name, limit_* as one family by reason. */
static void metrics_counters(const struct server *srv, struct evbuffer *b)
{
    const struct stats *s = &srv->stats;
    metrics_family(b, "muster_limit_rejections_total", "counter", "Requests or connections refused by a limit");
    for (int i = 0; i < STAT_COUNT; i++)
        if (strncmp(stats_name(i), "limit_", 6) == 0)
            evbuffer_add_printf(b, "muster_limit_rejections_total{reason=\"%s\"} %" PRIu64 "\n", stats_name(i) + 6,
                                s->c[i]);
    for (int i = 0; i < STAT_COUNT; i++) {
        const char *name = stats_name(i);
        if (strncmp(name, "limit_", 6) == 0)
            continue;
        char full[96];
        int gauge = metrics_is_gauge(i);
        snprintf(full, sizeof full, "muster_%s%s", name, gauge ? "" : "_total");
        metrics_family(b, full, gauge ? "gauge" : "counter", name);
        evbuffer_add_printf(b, "%s %" PRIu64 "\n", full, s->c[i]);
    }
}

/* Append per-op request counts and handler latency histograms. */
static void metrics_ops(const struct server *srv, struct evbuffer *b)
{
    const struct stats *s = &srv->stats;
    metrics_family(b, "muster_op_requests_total", "counter", "Requests received, by op");
    for (unsigned op = 0; op < STATS_OP_SLOTS; op++)
        if (ops_name(op))
            evbuffer_add_printf(b, "muster_op_requests_total{op=\"%s\"} %" PRIu64 "\n", ops_name(op), s->op[op]);
    metrics_family(b, "muster_op_duration_seconds", "histogram",
                   "Time the loop spent handling a request, by op (time parked is not included)");
    for (unsigned op = 0; op < STATS_OP_SLOTS; op++) {
        const char *name = ops_name(op);
        if (!name)
            continue;
        uint64_t cum = 0;
        for (size_t k = 0; k < STATS_LAT_BUCKETS; k++) {
            cum += s->lat[op][k];
            if (k < STATS_LAT_BUCKETS - 1)
                evbuffer_add_printf(b, "muster_op_duration_seconds_bucket{op=\"%s\",le=\"%g\"} %" PRIu64 "\n", name,
                                    (double)stats_lat_bounds_us[k] / 1e6, cum);
            else
                evbuffer_add_printf(b, "muster_op_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name,
                                    cum);
        }
        evbuffer_add_printf(b, "muster_op_duration_seconds_sum{op=\"%s\"} %.9f\n", name, (double)s->lat_sum_ns[op] / 1e9);
        evbuffer_add_printf(b, "muster_op_duration_seconds_count{op=\"%s\"} %" PRIu64 "\n", name, cum);
    }
}

/* Append the server-wide levels: admitted connections, parked requests, watches, readiness. */
static void metrics_levels(struct server *srv, struct evbuffer *b)
{
    metrics_family(b, "muster_connections", "gauge", "Admitted client connections");
    evbuffer_add_printf(b, "muster_connections %zu\n", srv->nconns);
    metrics_family(b, "muster_waiters", "gauge", "Parked requests (waits, blocking gets, barriers, joins)");
    evbuffer_add_printf(b, "muster_waiters %zu\n", srv->core.nwaiters);
    metrics_family(b, "muster_watches", "gauge", "Active watches");
    evbuffer_add_printf(b, "muster_watches %zu\n", srv->core.nwatches);
    metrics_family(b, "muster_ready", "gauge", "1 when serving (recovered, not draining)");
    evbuffer_add_printf(b, "muster_ready %d\n", !srv->draining && persist_ready(srv));
    if (srv->metrics) {
        metrics_family(b, "muster_start_time_seconds", "gauge", "Unix time the daemon started (a restart changes it)");
        evbuffer_add_printf(b, "muster_start_time_seconds %.3f\n", srv->metrics->started);
    }
    /* Only with --ha, so that a sum over instances counts leaders: 0 is an outage, 2 a split. */
    if (srv->opt.ha && *srv->opt.ha) {
        metrics_family(b, "muster_ha_leader", "gauge", "1 while this daemon is the --ha leader and serving");
        evbuffer_add_printf(b, "muster_ha_leader %d\n", ha_serving(srv));
    }
}

/* Append the bounds the levels above are kept under (a limit of 0, which means none, is left out), so that
 * a rule can compare a level with its bound. */
static void metrics_limits(const struct server *srv, struct evbuffer *b)
{
    const struct options *o = &srv->opt;
    const struct {
        const char *name;
        uint64_t value;
    } rows[] = {
        {"connections", o->max_connections},     /* muster_connections */
        {"waiters", o->max_waiters},             /* muster_waiters */
        {"watches", o->max_watches},             /* muster_watches */
        {"namespaces", o->max_namespaces},       /* muster_namespaces */
        {"buffer_memory", o->max_buffer_memory}, /* muster_buffer_bytes_current */
    };
    metrics_family(b, "muster_limit", "gauge", "A server-wide limit's bound, by limit (musterd --max-LIMIT)");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i].value)
            evbuffer_add_printf(b, "muster_limit{limit=\"%s\"} %" PRIu64 "\n", rows[i].name, rows[i].value);
}

/* One per-namespace family: its name, type, help and how to read the value. */
struct metrics_ns_row {
    const char *name, *type, *help;
    uint64_t (*value)(struct ns *ns);
};

/* Keys held by a namespace. */
static uint64_t metrics_ns_keys(struct ns *ns)
{
    return ns->ks.count;
}

/* Key plus value bytes held by a namespace. */
static uint64_t metrics_ns_bytes(struct ns *ns)
{
    return ns->ks.bytes;
}

/* Connections that said hello to a namespace. */
static uint64_t metrics_ns_conns(struct ns *ns)
{
    return ns_conns(ns);
}

/* A field of a namespace's rendezvous summary (0 when it never used rendezvous). */
#define METRICS_RDZV_FIELD(field)                        \
    static uint64_t metrics_rdzv_##field(struct ns *ns)  \
    {                                                    \
        struct rdzv_info ri;                             \
        rdzv_info(ns, &ri);                              \
        return (uint64_t)ri.field;                       \
    }
METRICS_RDZV_FIELD(generation)
METRICS_RDZV_FIELD(members)
METRICS_RDZV_FIELD(joining)
METRICS_RDZV_FIELD(world_size)
METRICS_RDZV_FIELD(running)
METRICS_RDZV_FIELD(failures)

static const struct metrics_ns_row metrics_ns_rows[] = {
    {"muster_namespace_keys", "gauge", "Keys stored in the namespace", metrics_ns_keys},
    {"muster_namespace_bytes", "gauge", "Key plus value bytes stored in the namespace", metrics_ns_bytes},
    {"muster_namespace_connections", "gauge", "Connections of the namespace", metrics_ns_conns},
    {"muster_rdzv_generation", "gauge", "Latest rendezvous generation formed", metrics_rdzv_generation},
    {"muster_rdzv_members", "gauge", "Members (nodes) of the latest generation", metrics_rdzv_members},
    {"muster_rdzv_joining", "gauge", "Nodes parked in the open round", metrics_rdzv_joining},
    {"muster_rdzv_world_size", "gauge", "World size of the latest generation", metrics_rdzv_world_size},
    {"muster_rdzv_running", "gauge", "1 while the latest generation runs", metrics_rdzv_running},
    {"muster_rdzv_failures_total", "counter", "Generations broken by a lost member", metrics_rdzv_failures},
};

/* A per-namespace walk: the buffer and the family being written. */
struct metrics_walk {
    struct evbuffer *b;
    const struct metrics_ns_row *row;
};

/* Append one namespace's sample of the current family. */
static void metrics_ns_one(struct ns *ns, void *arg)
{
    struct metrics_walk *w = arg;
    evbuffer_add_printf(w->b, "%s{namespace=\"", w->row->name);
    escape_label(w->b, ns->name);
    evbuffer_add_printf(w->b, "\"} %" PRIu64 "\n", w->row->value(ns));
}

/* Append every per-namespace family (each family's samples together, as the format asks). */
static void metrics_namespaces(struct server *srv, struct evbuffer *b)
{
    for (size_t i = 0; i < sizeof metrics_ns_rows / sizeof metrics_ns_rows[0]; i++) {
        struct metrics_walk w = {b, &metrics_ns_rows[i]};
        metrics_family(b, w.row->name, w.row->type, w.row->help);
        ns_each(srv, metrics_ns_one, &w);
    }
}

/* Append the Prometheus text exposition of every metric to buf. */
void metrics_render(struct server *srv, struct evbuffer *buf)
{
    metrics_counters(srv, buf);
    metrics_ops(srv, buf);
    metrics_levels(srv, buf);
    metrics_limits(srv, buf);
    metrics_namespaces(srv, buf);
}

/* -------------------------------------------------------------- serving */

/* Send a reply with a content type and body. */
static void metrics_send(struct evhttp_request *req, int code, const char *reason, const char *type,
                         struct evbuffer *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_send_reply(req, code, reason, body);
}

/* Send a short text reply. */
static void metrics_send_text(struct evhttp_request *req, int code, const char *reason, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    evbuffer_add_printf(b, "%s\n", text);
    metrics_send(req, code, reason, "text/plain; charset=utf-8", b);
    evbuffer_free(b);
}

/* Whether the query string asks for format=text. */
static int metrics_want_text(const struct evhttp_uri *uri)
{
    const char *q = evhttp_uri_get_query(uri);
    struct evkeyvalq params;
    if (!q || evhttp_parse_query_str(q, &params) != 0)
        return 0;
    const char *f = evhttp_find_header(&params, "format");
    int text = f && strcmp(f, "text") == 0;
    evhttp_clear_headers(&params);
    return text;
}

/* Serve /v1/jobs and /v1/jobs/NAME (name NULL for the list). */
static void metrics_jobs(struct server *srv, struct evhttp_request *req, const char *name, int text)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    int rc = 0;
    if (text)
        rc = jobs_text(srv, name, b);
    else if (name)
        rc = jobs_one_json(srv, name, b);
    else
        jobs_list_json(srv, b);
    if (rc != 0) {
        stats_inc(&srv->stats, STAT_HTTP_NOT_FOUND);
        evbuffer_free(b);
        metrics_send_text(req, 404, "Not Found", "no such job");
        return;
    }
    metrics_send(req, 200, "OK", text ? "text/plain; charset=utf-8" : "application/json", b);
    evbuffer_free(b);
}

/* Serve /metrics. */
static void metrics_prometheus(struct server *srv, struct evhttp_request *req)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, 500, "out of memory");
        return;
    }
    metrics_render(srv, b);
    metrics_send(req, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", b);
    evbuffer_free(b);
}

/* Route one request by path. */
static void metrics_route(struct server *srv, struct evhttp_request *req, const char *path, int text)
{
    if (strcmp(path, "/metrics") == 0) {
        metrics_prometheus(srv, req);
    } else if (strcmp(path, "/healthz") == 0) {
        metrics_send_text(req, 200, "OK", "ok");
    } else if (strcmp(path, "/readyz") == 0) {
        int ready = !srv->draining && persist_ready(srv);
        metrics_send_text(req, ready ? 200 : 503, ready ? "OK" : "Service Unavailable",
                          ready ? "ready" : srv->draining ? "draining" : "recovering");
    } else if (strcmp(path, "/v1/jobs") == 0 || strcmp(path, "/v1/jobs/") == 0) {
        metrics_jobs(srv, req, NULL, text);
    } else if (strncmp(path, "/v1/jobs/", 9) == 0) {
        metrics_jobs(srv, req, path + 9, text);
    } else if (status_page_route(srv, req, path)) {
        /* answered */
    } else {
        stats_inc(&srv->stats, STAT_HTTP_NOT_FOUND);
        metrics_send_text(req, 404, "Not Found",
                          "not found (try /, /metrics, /healthz, /readyz, /v1/jobs, /v1/status)");
    }
}

/* The one request callback: decode the path, then route. */
static void metrics_request_cb(struct evhttp_request *req, void *arg)
{
    struct server *srv = arg;
    stats_inc(&srv->stats, STAT_HTTP_REQUESTS);
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *raw = uri ? evhttp_uri_get_path(uri) : NULL;
    char *path = raw ? evhttp_uridecode(raw, 0, NULL) : NULL;
    if (!path) {
        metrics_send_text(req, 400, "Bad Request", "bad path");
        return;
    }
    metrics_route(srv, req, path, metrics_want_text(uri));
    free(path);
}

/* The port a bound evhttp socket got (useful with port 0). */
static uint16_t metrics_bound_port(struct evhttp_bound_socket *s)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(evhttp_bound_socket_get_fd(s), (struct sockaddr *)&ss, &len) != 0)
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Bind --metrics-listen (when set) on the server's loop and write --metrics-port-file; 0 or an exit status. */
int metrics_start(struct server *srv)
{
    const struct options *o = &srv->opt;
    if (!o->metrics_listen || !*o->metrics_listen)
        return 0;
    char host[256];
    uint16_t port;
    if (listener_parse(o->metrics_listen, host, sizeof host, &port) != 0) {
        log_msg(LOG_ERROR, "--metrics-listen: cannot parse '%s' (expected HOST:PORT)", o->metrics_listen);
        return EX_USAGE;
    }
    struct metrics *m = calloc(1, sizeof *m);
    if (!m || !(m->http = evhttp_new(srv->base))) {
        free(m);
        return EX_OSERR;
    }
    srv->metrics = m;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    m->started = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
    evhttp_set_timeout(m->http, (int)((o->metrics_timeout + 999) / 1000));
    evhttp_set_max_headers_size(m->http, (ev_ssize_t)o->metrics_max_request);
    evhttp_set_max_body_size(m->http, (ev_ssize_t)o->metrics_max_request);
    evhttp_set_allowed_methods(m->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_gencb(m->http, metrics_request_cb, srv);
    if (!(m->sock = evhttp_bind_socket_with_handle(m->http, host, port))) {
        log_msg(LOG_ERROR, "cannot listen for metrics on %s: %s", o->metrics_listen, strerror(errno));
        return EX_UNAVAILABLE;
    }
    m->port = metrics_bound_port(m->sock);
    log_msg(LOG_INFO, "metrics and health on http://%s:%u/metrics (unauthenticated)", host, m->port);
    return server_write_port_file(o->metrics_port_file, m->port);
}

/* Stop serving HTTP and free the endpoint; safe when never started. */
void metrics_stop(struct server *srv)
{
    struct metrics *m = srv->metrics;
    if (!m)
        return;
    if (m->http)
        evhttp_free(m->http);
    free(m);
    srv->metrics = NULL;
}
