/* The store's health and the status (health, the jobs' counts and a page of jobs) as JSON, for
 * /v1/server and /v1/status. */
#ifndef MUSTERD_STATUS_JSON_H
#define MUSTERD_STATUS_JSON_H

struct server;
struct evbuffer;
struct jobs_index;
struct jobs_page;

/* Append the store's health as one JSON object (what /v1/server answers). */
void status_json_server(struct server *srv, struct evbuffer *b);
/* Append {"time_ms", "server", "summary", "page", "jobs":[...]}: the health, the jobs' counts by state
 * and page pg of the jobs in detail (broken and running first). */
void status_json_all(struct server *srv, const struct jobs_index *ix, const struct jobs_page *pg,
                     struct evbuffer *b);

#endif
