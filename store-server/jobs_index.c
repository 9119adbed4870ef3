/*
 * The order of the job reports.  With many jobs, a report that lists
 * every one of them costs the loop O(jobs) per GET and buries the job that
 * broke among thousands that run; so reports show one page of jobs (at
 * most --status-page-jobs), the broken, recovering and running ones
 * first, by name within a state, and the counts by state of all of them.
 * The index is taken once and kept by the HTTP side for --http-cache, so
 * paging through it costs O(page) per GET.
 */
#include "jobs_index.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ns.h"
#include "rdzv.h"
#include "server.h"

static const char *const jobs_state_words[JOBS_NSTATES] = {
    [JOBS_BROKEN] = "broken",       [JOBS_RECOVERING] = "recovering", [JOBS_RUNNING] = "running",
    [JOBS_FORMING] = "forming",     [JOBS_COMPLETED] = "completed",   [JOBS_NONE] = "none",
};

/* The state of ns. */
enum jobs_state jobs_state_of(struct ns *ns)
{
    struct rdzv_info ri;
    if (rdzv_info(ns, &ri) != 0)
        return JOBS_NONE;
    if (ri.running)
        return JOBS_RUNNING;
    if (ri.completed)
        return JOBS_COMPLETED;
    if (ri.recovering)
        return JOBS_RECOVERING;
    return ri.generation ? JOBS_BROKEN : JOBS_FORMING;
}

/* The word of a state in every report (broken, recovering, running, forming, completed, none). */
const char *jobs_state_word(enum jobs_state s)
{
    return jobs_state_words[s];
}

/* One job while the index is sorted. */
struct jobs_entry {
    enum jobs_state state;
    const char *name;
};

/* The entries under construction. */
struct jobs_fill {
    struct jobs_entry *v;
    size_t n, cap;
    struct jobs_index *ix;
};

/* Add one namespace to the entries and the counts. */
static void jobs_index_add(struct ns *ns, void *arg)
{
    struct jobs_fill *f = arg;
    enum jobs_state s = jobs_state_of(ns);
    f->ix->by_state[s]++;
    if (f->n < f->cap)
        f->v[f->n++] = (struct jobs_entry){s, ns->name};
}

/* Report order: state first, then name. */
static int jobs_entry_cmp(const void *a, const void *b)
{
    const struct jobs_entry *x = a, *y = b;
    if (x->state != y->state)
        return x->state < y->state ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Copy the sorted entries' names into ix; 0, or -1 when memory ran out. */
static int jobs_index_names(struct jobs_index *ix, const struct jobs_entry *v, size_t n)
{
    ix->names = calloc(n ? n : 1, sizeof *ix->names);
    if (!ix->names)
        return -1;
    for (size_t i = 0; i < n; i++, ix->n++)
        if (!(ix->names[i] = strdup(v[i].name)))
            return -1;
    return 0;
}

/* Take the index of every job now; NULL when memory ran out. */
struct jobs_index *jobs_index_new(struct server *srv)
{
    struct jobs_index *ix = calloc(1, sizeof *ix);
    size_t cap = (size_t)srv->stats.c[STAT_NAMESPACES] + 1;
    struct jobs_fill f = {malloc(cap * sizeof *f.v), 0, cap, ix};
    if (!ix || !f.v) {
        free(f.v);
        free(ix);
        return NULL;
    }
    ns_each(srv, jobs_index_add, &f);
    qsort(f.v, f.n, sizeof *f.v, jobs_entry_cmp);
    int rc = jobs_index_names(ix, f.v, f.n);
    free(f.v);
    if (rc != 0) {
        jobs_index_free(ix);
        return NULL;
    }
    ix->built_ms = clock_now_ms();
    return ix;
}

/* Free an index; NULL is fine. */
void jobs_index_free(struct jobs_index *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->n; i++)
        free(ix->names[i]);
    free(ix->names);
    free(ix);
}

/* Append "summary":{"jobs":N,"states":{...}},"page":{...} (no braces around them) for page pg. */
void jobs_index_json(const struct jobs_index *ix, const struct jobs_page *pg, struct evbuffer *b)
{
    evbuffer_add_printf(b, "\"summary\":{\"jobs\":%zu,\"states\":{", ix->n);
    for (int s = 0; s < JOBS_NSTATES; s++)
        evbuffer_add_printf(b, "%s\"%s\":%" PRIu64, s ? "," : "", jobs_state_words[s], ix->by_state[s]);
    uint64_t end = pg->offset + pg->limit < ix->n ? pg->offset + pg->limit : ix->n;
    evbuffer_add_printf(b, "}},\"page\":{\"offset\":%" PRIu64 ",\"limit\":%" PRIu64 ",\"total\":%zu,\"next_offset\":",
                        pg->offset, pg->limit, ix->n);
    if (end < ix->n)
        evbuffer_add_printf(b, "%" PRIu64 "}", end);
    else
        evbuffer_add_printf(b, "null}");
}

/* Call fn on each job of page pg that still exists, in report order; how many the page cut off after it. */
uint64_t jobs_index_each(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                         void (*fn)(struct ns *ns, void *arg), void *arg)
{
    uint64_t i = pg->offset;
    for (; i < ix->n && i - pg->offset < pg->limit; i++) {
        struct ns *ns = ns_find(srv, ix->names[i]);
        if (ns)
            fn(ns, arg);
    }
    return i < ix->n ? ix->n - i : 0;
}
