/* Listening sockets: one per --listen, with accept-storm and fd-exhaustion handling. */
#ifndef MUSTERD_LISTENER_H
#define MUSTERD_LISTENER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct server;
struct listener;

/* What a listener hands each accepted socket to (conn_accept for native clients). */
typedef void (*listener_accept_fn)(struct server *srv, int fd, const struct sockaddr *sa, socklen_t salen);

/* The same, handing accepted sockets to accept (a second kind of front end). */
int listener_open_with(struct server *srv, const char *spec, listener_accept_fn accept, struct listener **out);
/* The port actually bound (useful with port 0). */
uint16_t listener_port(const struct listener *l);
/* The bound address as text, e.g. "127.0.0.1:29600". */
const char *listener_name(const struct listener *l);
/* Stop listening and free; NULL is a no-op. */
void listener_close(struct listener *l);
/* Split "HOST:PORT" / "[V6]:PORT" into host and port; 0 on success. */
int listener_parse(const char *spec, char *host, size_t hostlen, uint16_t *port);

#endif
