/*
 * Job reports.  A job is a namespace: its keyspace size, connections and,
 * when it used rendezvous, the latest generation, its members, the open
 * round's joiners, the standbys, the members lost from a generation (a
 * recovery's excluded list, with causes) and the timeline ring kept by
 * rdzv.c.  The same facts are rendered as JSON (for scripts, `muster status
 * --json` and the status page, which draws only from this JSON) and as a
 * fixed-width table (for a terminal), so the CLI needs no JSON parser of its
 * own.  Key names appear only in the timeline (NCCL id keys); values and
 * tokens never do.  Names clients chose (namespaces, node ids, causes) go
 * through escape.c, so none can steer a terminal or forge a row.
 */
#include "jobs.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "escape.h"
#include "jobs_index.h"
#include "ns.h"
#include "rdzv.h"
#include "server.h"

static const char *const jobs_event_names[] = {
    [RDZV_EV_JOINED] = "joined",
    [RDZV_EV_ASSIGNED] = "assigned",
    [RDZV_EV_ID_PUBLISHED] = "id_published",
    [RDZV_EV_FAILED] = "failed",
    [RDZV_EV_LEFT] = "left",
    [RDZV_EV_COMPLETED] = "completed",
    [RDZV_EV_LOST] = "lost",
    [RDZV_EV_RECOVERY_OPENED] = "recovery_opened",
    [RDZV_EV_EXCLUDED] = "excluded",
    [RDZV_EV_RECOVERED] = "recovered",
    [RDZV_EV_RECOVERY_FAILED] = "recovery_failed",
};

/* Append one job's summary fields (no braces) as JSON. */
static void jobs_summary_json(struct ns *ns, struct evbuffer *b)
{
    struct rdzv_info ri;
    rdzv_info(ns, &ri);
    evbuffer_add_printf(b, "\"name\":");
    escape_json(b, ns->name);
    evbuffer_add_printf(b,
                        ",\"keys\":%zu,\"bytes\":%" PRIu64 ",\"connections\":%zu,\"state\":\"%s\",\"generation\":%" PRIu64
                        ",\"num_members\":%zu,\"joining\":%zu,\"world_size\":%" PRIu32 ",\"failures\":%" PRIu64,
                        ns->ks.count, ns->ks.bytes, ns_conns(ns), jobs_state_word(jobs_state_of(ns)), ri.generation, ri.members,
                        ri.joining, ri.world_size, ri.failures);
    evbuffer_add_printf(b,
                        ",\"parked\":%zu,\"generations_formed\":%" PRIu64 ",\"recoveries\":%" PRIu64
                        ",\"restarts\":%" PRIu64 ",\"num_standbys\":%zu,\"recovering\":%s,\"recovery_joined\":%zu"
                        ",\"recovery_deadline_ms\":%" PRIu64 ",\"armed\":%zu",
                        ns->nwaiters, ri.formed, ri.recoveries, ri.formed ? ri.formed - 1 : 0, ri.standbys,
                        ri.recovering ? "true" : "false", ri.recovery_joined, ri.recovery_deadline_ms, ri.armed);
}

/* The list under construction and whether an element was written. */
struct jobs_list {
    struct evbuffer *b;
    int n;
};

/* Append one namespace to a JSON list. */
static void jobs_list_one(struct ns *ns, void *arg)
{
    struct jobs_list *l = arg;
    evbuffer_add_printf(l->b, "%s{", l->n++ ? "," : "");
    jobs_summary_json(ns, l->b);
    evbuffer_add(l->b, "}", 1);
}

/* Call fn on each job of page pg in report order, counting an answer that leaves jobs for a later page. */
static void jobs_page_each(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                           void (*fn)(struct ns *ns, void *arg), void *arg)
{
    if (jobs_index_each(srv, ix, pg, fn, arg) > 0)
        stats_inc(&srv->stats, STAT_HTTP_PAGES_CUT);
}

/* Append {"summary":..., "page":..., "jobs":[...]}: the counts by state and page pg's summaries. */
void jobs_list_json(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                    struct evbuffer *buf)
{
    struct jobs_list l = {buf, 0};
    evbuffer_add(buf, "{", 1);
    jobs_index_json(ix, pg, buf);
    evbuffer_add_printf(buf, ",\"jobs\":[");
    jobs_page_each(srv, ix, pg, jobs_list_one, &l);
    evbuffer_add_printf(buf, "]}\n");
}

/* The list under construction and the job's state (members' state words depend on it). */
struct jobs_nodes {
    struct evbuffer *b;
    int n;
    const struct rdzv_info *ri;
};

/* The state word of a node: standby, lost (its loss broke the generation), left (lost after the break: a
 * survivor that went), recovering (in the recovery round), rejoining (in the open round), or for a member
 * of the latest generation running, done (it completed) or idle (it broke, the member has not joined
 * again). */
static const char *jobs_node_state(const struct rdzv_node_view *v, const struct rdzv_info *ri)
{
    if (v->standby)
        return "standby";
    if (v->lost)
        return v->broke ? "lost" : "left";
    if (v->recovering)
        return "recovering";
    if (v->joining)
        return "rejoining";
    if (ri->running)
        return "running";
    return ri->completed ? "done" : "idle";
}

/* Append one node (a member, joiner or standby) as a JSON object. */
static void jobs_node_json(void *arg, const struct rdzv_node_view *v)
{
    struct jobs_nodes *l = arg;
    evbuffer_add_printf(l->b, "%s{\"node_id\":", l->n++ ? "," : "");
    escape_json(l->b, v->node_id);
    evbuffer_add_printf(l->b,
                        ",\"node_rank\":%" PRIu32 ",\"rank_start\":%" PRIu32 ",\"local_world_size\":%" PRIu32
                        ",\"seen_ms\":%" PRIu64 ",\"seen_age_ms\":%" PRIu64 ",\"state\":\"%s\",\"peer\":",
                        v->node_rank, v->rank_start, v->local_world_size, v->seen_ms, v->seen_age_ms,
                        jobs_node_state(v, l->ri));
    if (v->peer)
        escape_json(l->b, v->peer);
    else
        evbuffer_add_printf(l->b, "null");
    if (v->old_node_rank != UINT32_MAX)
        evbuffer_add_printf(l->b, ",\"old_node_rank\":%" PRIu32, v->old_node_rank);
    evbuffer_add(l->b, "}", 1);
}

/* Append one member lost from a generation (a recovery's excluded member) as a JSON object. */
static void jobs_gone_json(void *arg, const struct rdzv_excluded *e)
{
    struct jobs_nodes *l = arg;
    evbuffer_add_printf(l->b, "%s{\"node_id\":", l->n++ ? "," : "");
    escape_json(l->b, e->node_id);
    evbuffer_add_printf(l->b, ",\"old_node_rank\":%" PRIu32 ",\"broke_generation\":%s,\"cause\":",
                        e->old_node_rank, e->broke_generation ? "true" : "false");
    escape_json(l->b, e->cause);
    evbuffer_add(l->b, "}", 1);
}

/* Append the lost member whose loss broke the generation as "broken_by" (once: it is the first). */
static void jobs_culprit_json(void *arg, const struct rdzv_excluded *e)
{
    struct jobs_nodes *l = arg;
    if (!e->broke_generation || l->n++)
        return;
    evbuffer_add_printf(l->b, ",\"broken_by\":{\"node_id\":");
    escape_json(l->b, e->node_id);
    evbuffer_add_printf(l->b, ",\"cause\":");
    escape_json(l->b, e->cause);
    evbuffer_add(l->b, "}", 1);
}

/* Append one timeline event as a JSON object. */
static void jobs_event_json(void *arg, const struct rdzv_event *ev)
{
    struct jobs_nodes *l = arg;
    evbuffer_add_printf(l->b, "%s{\"time_ms\":%" PRIu64 ",\"generation\":%" PRIu64 ",\"event\":\"%s\",\"detail\":",
                        l->n++ ? "," : "", ev->wall_ms, ev->generation, jobs_event_names[ev->kind]);
    escape_json(l->b, ev->what);
    evbuffer_add_printf(l->b, ",\"cause\":");
    escape_json(l->b, ev->cause);
    evbuffer_add(l->b, "}", 1);
}

/* Append ns's summary, nodes, lost members and timeline as one JSON object. */
static void jobs_detail_json(struct ns *ns, struct evbuffer *buf)
{
    struct rdzv_info ri;
    rdzv_info(ns, &ri);
    struct jobs_nodes l = {buf, 0, &ri};
    evbuffer_add(buf, "{", 1);
    jobs_summary_json(ns, buf);
    evbuffer_add_printf(buf, ",\"members\":[");
    rdzv_each_member_view(ns, jobs_node_json, &l);
    l.n = 0;
    evbuffer_add_printf(buf, "],\"timeline\":[");
    rdzv_each_event(ns, jobs_event_json, &l);
    l.n = 0;
    evbuffer_add_printf(buf, "],\"joiners\":[");
    rdzv_each_joiner(ns, jobs_node_json, &l);
    l.n = 0;
    evbuffer_add_printf(buf, "],\"standbys\":[");
    rdzv_each_standby(ns, jobs_node_json, &l);
    l.n = 0;
    uint64_t gen;
    evbuffer_add_printf(buf, "],\"excluded\":{\"members\":[");
    rdzv_each_gone(ns, &gen, jobs_gone_json, &l);
    l.n = 0;
    evbuffer_add_printf(buf, "],\"generation\":%" PRIu64 "}", gen);
    rdzv_each_gone(ns, &gen, jobs_culprit_json, &l);
    if (!l.n)
        evbuffer_add_printf(buf, ",\"broken_by\":null");
    evbuffer_add(buf, "}", 1);
}

/* Append one job's summary, members and timeline as JSON; -1 when no such job. */
int jobs_one_json(struct server *srv, const char *name, struct evbuffer *buf)
{
    struct ns *ns = ns_find(srv, name);
    if (!ns)
        return -1;
    jobs_detail_json(ns, buf);
    evbuffer_add(buf, "\n", 1);
    return 0;
}

/* Append one namespace's detail to a JSON list. */
static void jobs_detail_one(struct ns *ns, void *arg)
{
    struct jobs_list *l = arg;
    if (l->n++)
        evbuffer_add(l->b, ",", 1);
    jobs_detail_json(ns, l->b);
}

/* Append page pg's jobs' detail (as jobs_one_json writes one) as the elements of a JSON array, no
 * brackets. */
void jobs_page_json(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                    struct evbuffer *buf)
{
    struct jobs_list l = {buf, 0};
    jobs_page_each(srv, ix, pg, jobs_detail_one, &l);
}

/* Append one table row for a namespace. */
static void jobs_row_text(struct ns *ns, void *arg)
{
    struct evbuffer *b = arg;
    struct rdzv_info ri;
    rdzv_info(ns, &ri);
    char name[65];
    escape_text(name, sizeof name, ns->name);
    evbuffer_add_printf(b, "%-24s %6" PRIu64 " %-8s %7zu %7zu %6" PRIu32 " %8" PRIu64 " %8zu %5zu\n", name,
                        ri.generation, jobs_state_word(jobs_state_of(ns)), ri.members, ri.joining, ri.world_size, ri.failures,
                        ns->ks.count, ns_conns(ns));
}

/* Append one member as a text row. */
static void jobs_member_text(void *arg, const char *id, uint32_t node_rank, uint32_t rank_start, uint32_t lws)
{
    char node[128];
    escape_text(node, sizeof node, id);
    evbuffer_add_printf(arg, "  %9" PRIu32 "  %-32s %6" PRIu32 "-%-6" PRIu32 " %5" PRIu32 "\n", node_rank, node,
                        rank_start, rank_start + lws - 1, lws);
}

/* Append one standby as a text row. */
static void jobs_standby_text(void *arg, const struct rdzv_node_view *v)
{
    char node[128];
    escape_text(node, sizeof node, v->node_id);
    evbuffer_add_printf(arg, "  %-32s %5" PRIu32 "  waiting %.1fs\n", node, v->local_world_size,
                        (double)v->seen_age_ms / 1000.0);
}

/* Append one member lost from a generation as a text row. */
static void jobs_gone_text(void *arg, const struct rdzv_excluded *e)
{
    char node[128], cause[256];
    escape_text(node, sizeof node, e->node_id);
    escape_text(cause, sizeof cause, e->cause);
    evbuffer_add_printf(arg, "  %9" PRIu32 "  %-32s %s%s\n", e->old_node_rank, node, cause,
                        e->broke_generation ? " (broke the generation)" : " (after the break)");
}

/* Append one timeline event as a text row with a UTC timestamp. */
static void jobs_event_text(void *arg, const struct rdzv_event *ev)
{
    time_t secs = (time_t)(ev->wall_ms / 1000);
    struct tm tm;
    char when[32];
    gmtime_r(&secs, &tm);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    char what[256], cause[256];
    escape_text(what, sizeof what, ev->what);
    escape_text(cause, sizeof cause, ev->cause);
    evbuffer_add_printf(arg, "  %s.%03uZ  gen %-5" PRIu64 " %-15s %s%s%s\n", when, (unsigned)(ev->wall_ms % 1000),
                        ev->generation, jobs_event_names[ev->kind], what, *what && *cause ? ": " : "", cause);
}

/* Append page pg of the job table as terminal text, and a line saying how to see the rest. */
static void jobs_table_text(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                            struct evbuffer *buf)
{
    uint64_t left = jobs_index_each(srv, ix, pg, jobs_row_text, buf);
    if (left > 0) {
        stats_inc(&srv->stats, STAT_HTTP_PAGES_CUT);
        evbuffer_add_printf(buf, "... %" PRIu64 " more of %zu jobs (?offset=%" PRIu64 ")\n", left, ix->n,
                            pg->offset + pg->limit);
    }
}

/* Append page pg of the job table (name NULL) or one job's detail as terminal text; -1 when no such job. */
int jobs_text(struct server *srv, const char *name, const struct jobs_index *ix, const struct jobs_page *pg,
              struct evbuffer *buf)
{
    static const char head[] = "JOB                         GEN STATE    MEMBERS JOINING  WORLD FAILURES     KEYS CONNS\n";
    if (!name) {
        evbuffer_add(buf, head, sizeof head - 1);
        jobs_table_text(srv, ix, pg, buf);
        return 0;
    }
    struct ns *ns = ns_find(srv, name);
    if (!ns)
        return -1;
    evbuffer_add(buf, head, sizeof head - 1);
    jobs_row_text(ns, buf);
    evbuffer_add_printf(buf, "\nmembers:\n  NODE_RANK  %-32s %-13s LOCAL\n", "NODE", "RANKS");
    rdzv_each_member(ns, jobs_member_text, buf);
    struct rdzv_info ri;
    rdzv_info(ns, &ri);
    if (ri.standbys) {
        evbuffer_add_printf(buf, "\nstandbys (longest waiting first):\n");
        rdzv_each_standby(ns, jobs_standby_text, buf);
    }
    uint64_t gen;
    struct evbuffer *gone = evbuffer_new();
    if (gone) {
        rdzv_each_gone(ns, &gen, jobs_gone_text, gone);
        if (gen)
            evbuffer_add_printf(buf, "\nlost from generation %" PRIu64 ":\n", gen);
        evbuffer_add_buffer(buf, gone);
        evbuffer_free(gone);
    }
    evbuffer_add_printf(buf, "\ntimeline (oldest first, UTC):\n");
    rdzv_each_event(ns, jobs_event_text, buf);
    return 0;
}
