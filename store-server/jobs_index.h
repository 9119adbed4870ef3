/* The order every report lists jobs in (broken and running first, by name within a state), the counts
 * by state, and the page of it an HTTP answer shows. */
#ifndef MUSTERD_JOBS_INDEX_H
#define MUSTERD_JOBS_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct server;
struct ns;
struct evbuffer;

/* A job's state, in the order reports list them: what needs a look first. */
enum jobs_state {
    JOBS_BROKEN,
    JOBS_RECOVERING,
    JOBS_RUNNING,
    JOBS_FORMING,
    JOBS_COMPLETED,
    JOBS_NONE, /* never used rendezvous */
    JOBS_NSTATES
};

/* Every job's name in report order and the counts by state, taken at one moment.  Names are copies, so
 * the index stays valid when a namespace is reclaimed (a page then skips it). */
struct jobs_index {
    size_t n;
    char **names;
    uint64_t by_state[JOBS_NSTATES];
    uint64_t built_ms; /* the daemon's monotonic clock when it was taken */
};

/* A page of the index: the first job and how many. */
struct jobs_page {
    uint64_t offset, limit;
};

/* The state of ns. */
enum jobs_state jobs_state_of(struct ns *ns);
/* The word of a state in every report (broken, recovering, running, forming, completed, none). */
const char *jobs_state_word(enum jobs_state s);
/* Take the index of every job now; NULL when memory ran out. */
struct jobs_index *jobs_index_new(struct server *srv);
/* Free an index; NULL is fine. */
void jobs_index_free(struct jobs_index *ix);
/* Append "summary":{"jobs":N,"states":{...}},"page":{...} (no braces around them) for page pg. */
void jobs_index_json(const struct jobs_index *ix, const struct jobs_page *pg, struct evbuffer *b);
/* Call fn on each job of page pg that still exists, in report order; how many the page cut off after it. */
uint64_t jobs_index_each(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                         void (*fn)(struct ns *ns, void *arg), void *arg);

#endif
