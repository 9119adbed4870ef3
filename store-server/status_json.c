/*
 * The store's health and the whole status as JSON, for /v1/server and
 * /v1/status on the metrics listener (the status page draws only from
 * /v1/status).  Health is levels against their limits: admitted
 * connections, namespaces, keys and bytes (whose limits are per namespace),
 * parked requests and watches; then persistence (--data-dir) and high
 * availability (--ha: this daemon's role and the leader it knows).
 *
 * /v1/status is {"time_ms", "server": what /v1/server answers, "summary":
 * the jobs' counts by state, "page": which of them follow, "jobs": what
 * /v1/jobs/NAME answers, for one page of jobs (jobs_index.c: broken and
 * running first)}; the job objects come from jobs.c, so there is one
 * writer of each.  No value and no token is ever written;
 * the only key names are the NCCL id keys of the jobs' timelines.
 */
#include "status_json.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "escape.h"
#include "ha.h"
#include "jobs.h"
#include "jobs_index.h"
#include "ns.h"
#include "persist.h"
#include "server.h"

/* Totals over every namespace, and the largest namespace's keys and bytes (what the per-namespace
 * limits bound). */
struct status_totals {
    uint64_t keys, bytes, max_keys, max_bytes;
};

/* Add one namespace's keys and bytes to the totals. */
static void status_json_count(struct ns *ns, void *arg)
{
    struct status_totals *t = arg;
    t->keys += ns->ks.count;
    t->bytes += ns->ks.bytes;
    if (ns->ks.count > t->max_keys)
        t->max_keys = ns->ks.count;
    if (ns->ks.bytes > t->max_bytes)
        t->max_bytes = ns->ks.bytes;
}

/* Wall-clock milliseconds now. */
static uint64_t status_json_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The serving state word: draining, recovering (the data directory is loading), standby (--ha, not
 * the leader) or serving. */
static const char *status_json_state(const struct server *srv)
{
    if (srv->draining)
        return "draining";
    if (!persist_ready(srv))
        return "recovering";
    return ha_serving(srv) ? "serving" : "standby";
}

/* Append the persistence object: whether on, the directory, fsync policy and the log's counters. */
static void status_json_persist(const struct server *srv, struct evbuffer *b)
{
    const struct options *o = &srv->opt;
    const uint64_t *c = srv->stats.c;
    int on = o->data_dir && *o->data_dir;
    evbuffer_add_printf(b, "\"persistence\":{\"enabled\":%s,\"data_dir\":", on ? "true" : "false");
    escape_json(b, on ? o->data_dir : "");
    evbuffer_add_printf(b, ",\"fsync\":");
    escape_json(b, on && o->fsync ? o->fsync : "");
    evbuffer_add_printf(b,
                        ",\"ready\":%s,\"compacting\":%s,\"records\":%" PRIu64 ",\"bytes\":%" PRIu64
                        ",\"fsyncs\":%" PRIu64 ",\"snapshots\":%" PRIu64 ",\"errors\":%" PRIu64 "}",
                        persist_ready(srv) ? "true" : "false", on && persist_compacting(srv) ? "true" : "false",
                        c[STAT_PERSIST_RECORDS], c[STAT_PERSIST_BYTES], c[STAT_PERSIST_FSYNCS],
                        c[STAT_PERSIST_SNAPSHOTS], c[STAT_PERSIST_ERRORS]);
}

/* Append the high-availability object: whether on, this daemon's role and the leader's address. */
static void status_json_ha(const struct server *srv, struct evbuffer *b)
{
    int on = srv->ha != NULL;
    evbuffer_add_printf(b, "\"ha\":{\"enabled\":%s,\"role\":\"%s\",\"leader\":", on ? "true" : "false",
                        !on ? "single" : ha_serving(srv) ? "leader" : "standby");
    escape_json(b, on ? ha_leader(srv) : "");
    evbuffer_add(b, "}", 1);
}

/* Append the store's health as one JSON object (what /v1/server answers). */
void status_json_server(struct server *srv, struct evbuffer *b)
{
    const struct options *o = &srv->opt;
    struct status_totals t = {0, 0, 0, 0};
    ns_each(srv, status_json_count, &t);
    evbuffer_add_printf(b, "{\"version\":\"%s\",\"state\":\"%s\",\"ready\":%s,", MUSTER_VERSION, status_json_state(srv),
                        !srv->draining && persist_ready(srv) ? "true" : "false");
    evbuffer_add_printf(b, "\"connections\":{\"current\":%zu,\"limit\":%" PRIu64 "},", srv->nconns,
                        o->max_connections);
    evbuffer_add_printf(b, "\"namespaces\":{\"current\":%" PRIu64 ",\"limit\":%" PRIu64 "},",
                        srv->stats.c[STAT_NAMESPACES], o->max_namespaces);
    evbuffer_add_printf(b,
                        "\"keys\":{\"current\":%" PRIu64 ",\"largest_namespace\":%" PRIu64
                        ",\"limit_per_namespace\":%" PRIu64 "},",
                        t.keys, t.max_keys, o->max_keys_per_ns);
    evbuffer_add_printf(b,
                        "\"bytes\":{\"current\":%" PRIu64 ",\"largest_namespace\":%" PRIu64
                        ",\"limit_per_namespace\":%" PRIu64 "},",
                        t.bytes, t.max_bytes, o->max_bytes_per_ns);
    evbuffer_add_printf(b, "\"buffer_memory\":{\"current\":%" PRIu64 ",\"limit\":%" PRIu64 "},",
                        srv->stats.c[STAT_BUFFER_BYTES], o->max_buffer_memory);
    evbuffer_add_printf(b,
                        "\"parked\":{\"current\":%zu,\"limit\":%" PRIu64 ",\"limit_per_namespace\":%" PRIu64 "},",
                        srv->core.nwaiters, o->max_waiters, o->max_waiters_per_ns);
    evbuffer_add_printf(b, "\"watches\":{\"current\":%zu,\"limit\":%" PRIu64 "},", srv->core.nwatches,
                        o->max_watches);
    status_json_persist(srv, b);
    evbuffer_add(b, ",", 1);
    status_json_ha(srv, b);
    evbuffer_add(b, "}", 1);
}

/* Append {"time_ms", "server", "summary", "page", "jobs":[...]}: the health, the jobs' counts by state
 * and page pg of the jobs in detail (broken and running first). */
void status_json_all(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                     struct evbuffer *b)
{
    evbuffer_add_printf(b, "{\"time_ms\":%" PRIu64 ",\"server\":", status_json_now_ms());
    status_json_server(srv, b);
    evbuffer_add(b, ",", 1);
    jobs_index_json(ix, pg, b);
    evbuffer_add_printf(b, ",\"jobs\":[");
    jobs_page_json(srv, ix, pg, b);
    evbuffer_add_printf(b, "]}\n");
}
