/* The daemon's one context, which every layer reads: event loop, options, counters, the core, namespaces,
 * connections and each layer's own part (opaque here); the root (daemon.c) fills it. */
#ifndef MUSTERD_SERVER_H
#define MUSTERD_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "options.h"
#include "records.h"
#include "stats.h"

struct event_base;
struct event;
struct listener;
struct ns;
struct conn;
struct token;
struct waiter;

#define SERVER_NSIGNALS 4

struct server {
    struct event_base *base;
    struct options opt;
    struct stats stats;
    struct listener **listeners;
    size_t nlisteners;
    struct ns *namespaces; /* by name (ns.c) */
    struct token *tokens;  /* by namespace name (ns.c) */
    struct source *sources;    /* by client address (source.c) */
    struct source *source_lru; /* entries that remember only failures, oldest first */
    size_t nsources_lru;
    struct event *ns_sweep;    /* reclaims idle namespaces (ns.c) */
    struct ns *ns_sweep_next;  /* where the sweep's pass goes on (NULL: at its end) */
    int ns_sweep_mid;          /* a pass is under way */
    size_t ns_swept_empty, ns_swept_idle; /* what the pass under way forgot (empty) and dropped (unused) */
    struct conn *conns;    /* every connection, admitted or being refused */
    struct conn_io *ios;   /* every open connection's I/O, both front ends (conn_io.c) */
    size_t nconns;         /* admitted connections (the --max-connections count) */
    size_t nrefusing;      /* connections being sent a refusal */
    uint64_t next_session;
    int draining;
    int exit_status; /* sysexits.h status the daemon exits with; EX_OK unless a layer failed */
    struct event *signals[SERVER_NSIGNALS];
    struct event *drain_timer;
    struct metrics *metrics; /* the HTTP endpoint (metrics.c), NULL when off */
    struct persist *persist; /* the data directory (persist.c), NULL when memory only */
    struct tls *tls;         /* the TLS listeners (tls.c), NULL when none */
    struct tcpstore *tcpstore; /* the TCPStore listener (tcpstore.c), NULL when off */
    struct ha *ha;             /* high availability (ha.c), NULL when off */
    struct records records;    /* the live state as records (records.c) */
    struct core core;          /* the state's hooks, limits, parked-request budget and record sink (core/) */
    /* Start draining (daemon.c): what server_fail calls, so a layer can stop the daemon without naming
     * the layers a drain touches. */
    void (*drain)(struct server *srv, const char *reason);
    /* Whether this daemon serves requests now (daemon.c: not while an --ha standby; NULL: always), so layers
     * below --ha can leave to the leader what only it decides (dropping an unused namespace). */
    int (*serving)(const struct server *srv);
};

/* A layer cannot go on (the data directory failed): drain (stop accepting, fail parked requests
 * SHUTTING_DOWN, tell and flush every client) and exit with status (sysexits.h) once they are gone. */
void server_fail(struct server *srv, int status, const char *reason);
/* A connection's I/O was freed (conn_io.c); ends the loop once a drain has no connections left. */
void server_conn_gone(struct server *srv);
/* The state's core with its limits and counters taken from the options (tests make a server without
 * daemon_init; the hooks are filled by daemon_init). */
struct core *server_core(struct server *srv);
/* Write port to path (nothing when path is NULL or empty) atomically, a temp file then a rename, so readers
 * never see half a line; 0, or EX_CANTCREAT after logging why. */
int server_write_port_file(const char *path, uint16_t port);

#endif
