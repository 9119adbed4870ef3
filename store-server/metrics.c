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
#include "http_cache.h"
#include "http_host.h"
#include "jobs.h"
#include "jobs_index.h"
#include "listener.h"
#include "log.h"
#include "ns.h"
#include "ops.h"
#include "persist.h"
#include "rdzv.h"
#include "server.h"
#include "status_json.h"
#include "status_page.h"

struct metrics {
    struct evhttp *http;
    struct evhttp_bound_socket *sock;
    uint16_t port;
    double started; /* Unix time the daemon started serving metrics, for muster_start_time_seconds */
    struct http_cache *cache; /* rendered answers, kept for --http-cache */
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
    return id == STAT_NAMESPACES || id == STAT_RDZV_PARKED_JOINS || id == STAT_NS_SWEEP_SLICE_US ||
           (n > 8 && strcmp(name + n - 8, "_current") == 0) || (n > 5 && strcmp(name + n - 5, "_last") == 0);
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
    int summed; /* the unlisted namespaces' values add up to something meaningful (not a generation) */
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
    {"muster_namespace_keys", "gauge", "Keys stored in the namespace", metrics_ns_keys, 1},
    {"muster_namespace_bytes", "gauge", "Key plus value bytes stored in the namespace", metrics_ns_bytes, 1},
    {"muster_namespace_connections", "gauge", "Connections of the namespace", metrics_ns_conns, 1},
    {"muster_rdzv_generation", "gauge", "Latest rendezvous generation formed", metrics_rdzv_generation, 0},
    {"muster_rdzv_members", "gauge", "Members (nodes) of the latest generation", metrics_rdzv_members, 1},
    {"muster_rdzv_joining", "gauge", "Nodes parked in the open round", metrics_rdzv_joining, 1},
    {"muster_rdzv_world_size", "gauge", "World size of the latest generation", metrics_rdzv_world_size, 1},
    {"muster_rdzv_running", "gauge", "1 while the latest generation runs", metrics_rdzv_running, 1},
    {"muster_rdzv_failures_total", "counter", "Generations broken by a lost member", metrics_rdzv_failures, 1},
};

/* A namespace as the scrape ranks it: broken or recovering first, then the most connections, then the
 * most bytes, then by name. */
struct metrics_pick {
    struct ns *ns;
    int bad;
    size_t conns;
    uint64_t bytes;
};

/* The namespaces of one scrape. */
struct metrics_picks {
    struct metrics_pick *v;
    size_t n, cap;
};

/* Add one namespace to the scrape's list. */
static void metrics_pick_add(struct ns *ns, void *arg)
{
    struct metrics_picks *p = arg;
    enum jobs_state s = jobs_state_of(ns);
    if (p->n < p->cap)
        p->v[p->n++] = (struct metrics_pick){ns, s == JOBS_BROKEN || s == JOBS_RECOVERING, ns_conns(ns), ns->ks.bytes};
}

/* The scrape's order of namespaces. */
static int metrics_pick_cmp(const void *a, const void *b)
{
    const struct metrics_pick *x = a, *y = b;
    if (x->bad != y->bad)
        return y->bad - x->bad;
    if (x->conns != y->conns)
        return x->conns > y->conns ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return strcmp(x->ns->name, y->ns->name);
}

/* Append one family: the listed namespaces' samples, then the sum of the rest as namespace="",other="true". */
static void metrics_ns_family(struct evbuffer *b, const struct metrics_ns_row *row, const struct metrics_picks *p,
                              size_t shown)
{
    metrics_family(b, row->name, row->type, row->help);
    uint64_t rest = 0;
    for (size_t i = 0; i < p->n; i++) {
        if (i >= shown) {
            rest += row->value(p->v[i].ns);
            continue;
        }
        evbuffer_add_printf(b, "%s{namespace=\"", row->name);
        escape_label(b, p->v[i].ns->name);
        evbuffer_add_printf(b, "\"} %" PRIu64 "\n", row->value(p->v[i].ns));
    }
    if (p->n > shown && row->summed)
        evbuffer_add_printf(b, "%s{namespace=\"\",other=\"true\"} %" PRIu64 "\n", row->name, rest);
}

/* Append every per-namespace family for the first --metrics-max-namespaces namespaces in the scrape's order
 * (each family's samples together, as the format asks), the rest summed, and how many were left out. */
static void metrics_namespaces(struct server *srv, struct evbuffer *b)
{
    size_t cap = (size_t)srv->stats.c[STAT_NAMESPACES] + 1;
    struct metrics_picks p = {malloc(cap * sizeof *p.v), 0, cap};
    if (!p.v)
        return;
    ns_each(srv, metrics_pick_add, &p);
    qsort(p.v, p.n, sizeof *p.v, metrics_pick_cmp);
    size_t shown = p.n < srv->opt.metrics_max_namespaces ? p.n : (size_t)srv->opt.metrics_max_namespaces;
    for (size_t i = 0; i < sizeof metrics_ns_rows / sizeof metrics_ns_rows[0]; i++)
        metrics_ns_family(b, &metrics_ns_rows[i], &p, shown);
    metrics_family(b, "muster_namespaces_unlisted", "gauge",
                   "Namespaces without series of their own in this scrape (summed into other=\"true\"; "
                   "musterd --metrics-max-namespaces)");
    evbuffer_add_printf(b, "muster_namespaces_unlisted %zu\n", p.n - shown);
    stats_add(&srv->stats, STAT_METRICS_NS_UNLISTED, p.n - shown);
    free(p.v);
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

/* What a request asks for beyond its path: the text form, and which page of the jobs. */
struct metrics_query {
    struct server *srv;
    const char *name; /* /v1/jobs/NAME, else NULL */
    int text;
    struct jobs_page pg;
    const struct jobs_index *ix;
};

/* A number from the query string, or def when absent or not a number. */
static uint64_t metrics_query_num(const struct evkeyvalq *params, const char *key, uint64_t def)
{
    const char *v = evhttp_find_header(params, key);
    char *end;
    if (!v || *v < '0' || *v > '9')
        return def;
    unsigned long long n = strtoull(v, &end, 10);
    return *end ? def : (uint64_t)n;
}

/* Read format=text, offset= and limit= (at most --status-page-jobs, which is also the default). */
static void metrics_query_parse(struct server *srv, const struct evhttp_uri *uri, struct metrics_query *q)
{
    uint64_t most = srv->opt.status_page_jobs;
    *q = (struct metrics_query){srv, NULL, 0, {0, most}, NULL};
    const char *qs = uri ? evhttp_uri_get_query(uri) : NULL;
    struct evkeyvalq params;
    if (!qs || evhttp_parse_query_str(qs, &params) != 0)
        return;
    const char *f = evhttp_find_header(&params, "format");
    q->text = f && strcmp(f, "text") == 0;
    q->pg.offset = metrics_query_num(&params, "offset", 0);
    q->pg.limit = metrics_query_num(&params, "limit", most);
    if (q->pg.limit > most)
        q->pg.limit = most;
    evhttp_clear_headers(&params);
}

/* Render /v1/jobs or /v1/jobs/NAME, as JSON or text. */
static int metrics_render_jobs(struct server *srv, void *arg, struct evbuffer *b)
{
    const struct metrics_query *q = arg;
    if (q->text)
        return jobs_text(srv, q->name, q->ix, &q->pg, b);
    if (q->name)
        return jobs_one_json(srv, q->name, b);
    jobs_list_json(srv, q->ix, &q->pg, b);
    return 0;
}

/* Render /v1/status: the health, the counts by state and one page of jobs in detail. */
static int metrics_render_status(struct server *srv, void *arg, struct evbuffer *b)
{
    const struct metrics_query *q = arg;
    status_json_all(srv, q->ix, &q->pg, b);
    return 0;
}

/* Render /v1/server: the health alone. */
static int metrics_render_server(struct server *srv, void *arg, struct evbuffer *b)
{
    (void)arg;
    status_json_server(srv, b);
    evbuffer_add(b, "\n", 1);
    return 0;
}

/* Render /metrics. */
static int metrics_render_prom(struct server *srv, void *arg, struct evbuffer *b)
{
    (void)arg;
    metrics_render(srv, b);
    return 0;
}

/* One rendered path: exact, or a prefix whose rest names a job; its renderer, JSON type and whether it
 * lists jobs (then it reads the jobs' report order). */
struct metrics_route_row {
    const char *path;
    int prefix;
    http_render_fn fn;
    const char *type;
    int lists;
};

static const struct metrics_route_row metrics_routes[] = {
    {"/metrics", 0, metrics_render_prom, "text/plain; version=0.0.4; charset=utf-8", 0},
    {"/v1/status", 0, metrics_render_status, "application/json", 1},
    {"/v1/server", 0, metrics_render_server, "application/json", 0},
    {"/v1/jobs", 0, metrics_render_jobs, "application/json", 1},
    {"/v1/jobs/", 0, metrics_render_jobs, "application/json", 1},
    {"/v1/jobs/", 1, metrics_render_jobs, "application/json", 0},
};

/* Answer a rendered path from the cache (1), or 0 when path is none of them. */
static int metrics_rendered(struct server *srv, struct evhttp_request *req, const char *path,
                            struct metrics_query *q)
{
    for (size_t i = 0; i < sizeof metrics_routes / sizeof metrics_routes[0]; i++) {
        const struct metrics_route_row *r = &metrics_routes[i];
        size_t n = strlen(r->path);
        if (r->prefix ? strncmp(path, r->path, n) != 0 : strcmp(path, r->path) != 0)
            continue;
        q->name = r->prefix ? path + n : NULL;
        if (r->lists && !(q->ix = http_cache_index(srv, srv->metrics->cache))) {
            evhttp_send_error(req, 500, "out of memory");
            return 1;
        }
        const char *type = q->text ? "text/plain; charset=utf-8" : r->type;
        http_cache_serve(srv, srv->metrics->cache, req, evhttp_request_get_uri(req), type, r->fn, q);
        return 1;
    }
    return 0;
}

/* Route one request by path. */
static void metrics_route(struct server *srv, struct evhttp_request *req, const char *path, struct metrics_query *q)
{
    if (strcmp(path, "/healthz") == 0) {
        http_send_text(req, 200, "OK", "ok");
    } else if (strcmp(path, "/readyz") == 0) {
        int ready = !srv->draining && persist_ready(srv);
        http_send_text(req, ready ? 200 : 503, ready ? "OK" : "Service Unavailable",
                       ready ? "ready" : srv->draining ? "draining" : "recovering");
    } else if (metrics_rendered(srv, req, path, q) || status_page_route(srv, req, path)) {
        /* answered */
    } else {
        stats_inc(&srv->stats, STAT_HTTP_NOT_FOUND);
        http_send_text(req, 404, "Not Found", "not found (try /, /metrics, /healthz, /readyz, /v1/jobs, /v1/status)");
    }
}

/* The one request callback: check the Host, decode the path, then route. */
static void metrics_request_cb(struct evhttp_request *req, void *arg)
{
    struct server *srv = arg;
    stats_inc(&srv->stats, STAT_HTTP_REQUESTS);
    if (!http_host_ok(srv, evhttp_find_header(evhttp_request_get_input_headers(req), "Host"))) {
        stats_inc(&srv->stats, STAT_HTTP_BAD_HOST);
        http_send_text(req, 421, "Misdirected Request", "unknown Host (see --http-allowed-hosts)");
        return;
    }
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *raw = uri ? evhttp_uri_get_path(uri) : NULL;
    char *path = raw ? evhttp_uridecode(raw, 0, NULL) : NULL;
    if (!path) {
        http_send_text(req, 400, "Bad Request", "bad path");
        return;
    }
    struct metrics_query q;
    metrics_query_parse(srv, uri, &q);
    metrics_route(srv, req, path, &q);
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
    if (!m || !(m->http = evhttp_new(srv->base)) || !(m->cache = http_cache_new())) {
        if (m && m->http)
            evhttp_free(m->http);
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
    http_cache_free(m->cache);
    free(m);
    srv->metrics = NULL;
}
