/* The store's health and the whole status (health and every job) as JSON, for /v1/server and /v1/status. */
#ifndef MUSTERD_STATUS_JSON_H
#define MUSTERD_STATUS_JSON_H

struct server;
struct evbuffer;

/* Append the store's health as one JSON object (what /v1/server answers). */
void status_json_server(struct server *srv, struct evbuffer *b);
/* Append {"time_ms":..., "server":{...}, "jobs":[...]}: the health and every job's detail. */
void status_json_all(struct server *srv, struct evbuffer *b);

#endif
