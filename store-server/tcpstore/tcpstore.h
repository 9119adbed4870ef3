/* The TCPStore front end as the rest of the daemon sees it: start, drain, count, free. */
#ifndef MUSTERD_TCPSTORE_H
#define MUSTERD_TCPSTORE_H

#include <stddef.h>
#include <sys/socket.h>

struct server;

/* Bind --tcpstore-listen (a no-op when it is empty) and write its port file; 0 or a sysexits status. */
int tcpstore_start(struct server *srv);
/* Take over a socket accepted on the TCPStore listener (also how the fuzz targets hand it a socketpair). */
void tcpstore_accept(struct server *srv, int fd, const struct sockaddr *sa, socklen_t salen);
/* Stop accepting, flush every TCPStore connection and close it (part of the server's drain). */
void tcpstore_drain(struct server *srv);
/* Free the front end and every connection it holds (at exit); safe when it never started. */
void tcpstore_fini(struct server *srv);

#endif
