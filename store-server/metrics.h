/* The HTTP side door: Prometheus metrics, health and readiness, and per-job JSON on --metrics-listen. */
#ifndef MUSTERD_METRICS_H
#define MUSTERD_METRICS_H

struct server;
struct evbuffer;

/* Bind --metrics-listen (when set) on the server's loop and write --metrics-port-file; 0 or an exit status. */
int metrics_start(struct server *srv);
/* Stop serving HTTP and free the endpoint; safe when never started. */
void metrics_stop(struct server *srv);
/* Append the Prometheus text exposition of every metric to buf. */
void metrics_render(struct server *srv, struct evbuffer *buf);

#endif
