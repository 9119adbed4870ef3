/* Namespaces (jobs): tokens, creation, the idle sweep (empty ones, and long unused ones with their keys);
 * each holds the core's state plus watches. */
#ifndef MUSTERD_NS_H
#define MUSTERD_NS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core.h"

struct server;

/* struct ns itself is the core's (core.h); the daemon's part (connections, creator, idle time, an
 * attached front end) is ns.c's, behind ns->owner. */

/* The longest namespace name. */
#define NS_NAME_MAX 255

/* Load the --token and --token-file pairs; 0, or -1 after logging why. */
int ns_tokens_load(struct server *srv);
/* Whether token opens namespace name (constant-time compare; open namespaces take any token). */
int ns_token_ok(struct server *srv, const char *name, const char *token);
/* Whether namespace name is named by --token or --token-file. */
int ns_configured(struct server *srv, const char *name);
/* The namespace called name, created on first use; NULL with *status LIMIT or INTERNAL. */
struct ns *ns_get(struct server *srv, const char *name, int *status);
/* As ns_get for a hello from sa: a namespace it creates counts against sa's --max-namespaces-per-source and
 * --max-namespace-creates-per-source; a refusal's words, naming the limit, go to why (len bytes). */
struct ns *ns_open(struct server *srv, const char *name, const struct sockaddr *sa, int *status, char *why,
                   size_t len);
/* Drop ns, keys and generation counter included, as a DROP record emitted with the core's current origin; 0,
 * or -1 with nothing done while a connection, front end, parked request, watch or rendezvous uses it.  why
 * (NULL for a replayed or replicated drop, not counted) is logged and counted as namespaces_reclaimed_idle. */
int ns_drop(struct server *srv, struct ns *ns, const char *why);
/* A connection said hello to ns: it is in use. */
void ns_conn_joined(struct ns *ns);
/* A connection left ns: its idle time starts when the last one goes. */
void ns_conn_left(struct ns *ns);
/* Connections that said hello to ns and are still open. */
size_t ns_conns(const struct ns *ns);
/* Pin ns while a front end serves it (the TCPStore listener's namespace): a pinned namespace is never
 * reclaimed. */
void ns_pin(struct ns *ns, int on);
/* Start reclaiming idle namespaces (--ns-idle-timeout, --ns-reclaim-after); 0, or -1 when the timer cannot be
 * made. */
int ns_sweep_start(struct server *srv);
/* The namespace called name, or NULL. */
struct ns *ns_find(struct server *srv, const char *name);
/* Call fn on every namespace. */
void ns_each(struct server *srv, void (*fn)(struct ns *ns, void *arg), void *arg);
/* Free every namespace and the token table. */
void ns_destroy_all(struct server *srv);

#endif
