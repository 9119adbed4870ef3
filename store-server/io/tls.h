/* TLS listeners (--tls-listen): OpenSSL glue loaded from musterd-tls.so on demand, optional client certificates. */
#ifndef MUSTERD_TLS_H
#define MUSTERD_TLS_H

#include <stddef.h>

#include "listener.h"

struct server;
struct bufferevent;

/* Load the certificate, key and CA and bind every --tls-listen address, whose connections go to
 * accept; 0 or an exit status. */
int tls_start(struct server *srv, listener_accept_fn accept);
/* Stop accepting on the TLS listeners (the drain). */
void tls_drain(struct server *srv);
/* Free the TLS context and listeners; safe when never started. */
void tls_fini(struct server *srv);
/* A server-side TLS bufferevent around an accepted socket (the handshake runs as it reads); NULL on failure. */
struct bufferevent *tls_bufferevent(struct server *srv, int fd);
/* A connection's bufferevent reported an error: count and log a TLS failure (a refused certificate). */
void tls_note_error(struct server *srv, struct bufferevent *bev, const char *peer);
/* Write ", TLS on ADDR,... (client certificates required|not checked)" for the startup line. */
void tls_describe(const struct server *srv, char *buf, size_t n);

#endif
