/* Per-source-address state: failed-hello backoff, the namespaces an address created and how fast it creates
 * them, its connections' parked requests. */
#ifndef MUSTERD_SOURCE_H
#define MUSTERD_SOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct server;
struct source;

/* Milliseconds before a hello from sa may be checked against a token again (0: now). */
uint64_t source_hello_wait(struct server *srv, const struct sockaddr *sa);
/* A token from sa was compared (ok: it was right): a wrong one starts or lengthens the backoff, a right
 * one while failures are fresh spaces the next comparison by --auth-backoff. */
void source_hello_checked(struct server *srv, const struct sockaddr *sa, int ok);
/* Milliseconds before sa may create one more namespace under --max-namespace-creates-per-source (0: now;
 * a minute's worth in a burst, then one per 60 s / N). */
uint64_t source_ns_create_wait(struct server *srv, const struct sockaddr *sa);
/* Count one more namespace created by sa (a token of its creation bucket); the source to give back later, or NULL with *status LIMIT
 * (counted) or INTERNAL. */
struct source *source_ns_take(struct server *srv, const struct sockaddr *sa, int *status);
/* sa's entry when it is at --max-namespaces-per-source (one more would be refused), else NULL. */
const struct source *source_ns_full(struct server *srv, const struct sockaddr *sa);
/* A namespace that src created is gone. */
void source_ns_put(struct server *srv, struct source *src);
/* A connection from sa opened: its address's entry, pinned until source_conn_put, or NULL when out of
 * memory (the connection then goes uncounted). */
struct source *source_conn_take(struct server *srv, const struct sockaddr *sa);
/* A connection of src closed. */
void source_conn_put(struct server *srv, struct source *src);
/* The count of src's parked requests, for a connection's share (NULL when src is). */
size_t *source_waiters(struct source *src);
/* Free the table (at exit). */
void source_destroy_all(struct server *srv);

#endif
