/* Job (namespace) reports for the HTTP endpoint and `muster status`: JSON and a terminal table. */
#ifndef MUSTERD_JOBS_H
#define MUSTERD_JOBS_H

struct server;
struct evbuffer;
struct jobs_index;
struct jobs_page;

/* Append {"summary":..., "page":..., "jobs":[...]}: the counts by state and page pg's summaries. */
void jobs_list_json(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                    struct evbuffer *buf);
/* Append one job's summary, members and timeline as JSON; -1 when no such job. */
int jobs_one_json(struct server *srv, const char *name, struct evbuffer *buf);
/* Append page pg's jobs' detail (as jobs_one_json writes one) as the elements of a JSON array, no
 * brackets. */
void jobs_page_json(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                    struct evbuffer *buf);
/* Append page pg of the job table (name NULL) or one job's detail as terminal text; -1 when no such job. */
int jobs_text(struct server *srv, const char *name, const struct jobs_index *ix, const struct jobs_page *pg,
              struct evbuffer *buf);

#endif
