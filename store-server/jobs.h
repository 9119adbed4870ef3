/* Job (namespace) reports for the HTTP endpoint and `muster status`: JSON and a terminal table. */
#ifndef MUSTERD_JOBS_H
#define MUSTERD_JOBS_H

struct server;
struct evbuffer;

/* Append {"jobs":[...]} summarising every namespace to buf. */
void jobs_list_json(struct server *srv, struct evbuffer *buf);
/* Append one job's summary, members and timeline as JSON; -1 when no such job. */
int jobs_one_json(struct server *srv, const char *name, struct evbuffer *buf);
/* Append every job's detail (as jobs_one_json writes one) as the elements of a JSON array, no brackets. */
void jobs_each_json(struct server *srv, struct evbuffer *buf);
/* Append the job table (name NULL) or one job's detail as terminal text; -1 when no such job. */
int jobs_text(struct server *srv, const char *name, struct evbuffer *buf);

#endif
