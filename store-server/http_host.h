/* Which Host headers the HTTP listener answers (against DNS rebinding). */
#ifndef MUSTERD_HTTP_HOST_H
#define MUSTERD_HTTP_HOST_H

struct server;

/* Whether a request with this Host header (NULL: none) may be answered: an IP literal, localhost, this
 * machine's name, the --metrics-listen host or one of --http-allowed-hosts, with any port. */
int http_host_ok(struct server *srv, const char *host);

#endif
