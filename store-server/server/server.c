/*
 * The shared context's few functions that layers call: the drain they may
 * ask for, the end of a drain when the last connection goes, the core's
 * limits from the options, and the atomic port file every listener writes.
 */
#include "server.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "log.h"

static int server_port_file_put(const char *path, uint16_t port);

/* Drain through the root's hook (a layer never names the layers a drain touches), then exit with status:
 * a service manager must see a daemon that stopped because it could not go on as failed. */
void server_fail(struct server *srv, int status, const char *reason)
{
    if (!srv->exit_status)
        srv->exit_status = status;
    if (srv->drain)
        srv->drain(srv, reason);
}

/* A connection's I/O was freed (conn_io.c); ends the loop once a drain has no connections left.  Every
 * connection of both front ends, admitted or being refused, has its I/O on srv->ios. */
void server_conn_gone(struct server *srv)
{
    if (srv->draining && !srv->ios)
        event_base_loopbreak(srv->base);
}

/* The state's core with its limits and counters taken from the options. */
struct core *server_core(struct server *srv)
{
    const struct options *o = &srv->opt;
    srv->core.stats = &srv->stats;
    srv->core.lim = (struct core_limits){
        .wait_timeout = o->wait_timeout,
        .max_wait_timeout = o->max_wait_timeout,
        .max_waiters = o->max_waiters,
        .max_waiters_per_ns = o->max_waiters_per_ns,
        .max_waiters_per_conn = o->max_waiters_per_conn,
        .max_waiters_per_source = o->max_waiters_per_source,
        .heartbeat_timeout = o->heartbeat_timeout,
        .recovery_timeout = o->recovery_timeout,
        .max_standbys = o->max_standbys,
        .max_watches = o->max_watches,
        .max_watches_per_conn = o->max_watches_per_conn,
    };
    return &srv->core;
}

/* Write port to path (nothing when path is NULL or empty) atomically, a temp file then a rename, so readers
 * never see half a line; 0, or EX_CANTCREAT after logging why. */
int server_write_port_file(const char *path, uint16_t port)
{
    if (!path || !*path)
        return 0;
    if (server_port_file_put(path, port) == 0)
        return 0;
    log_msg(LOG_ERROR, "cannot write port file %s: %s", path, strerror(errno));
    return EX_CANTCREAT;
}

/* Write port to path through a temp file and a rename; 0 on success. */
static int server_port_file_put(const char *path, uint16_t port)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *fp = fopen(tmp, "we");
    if (!fp)
        return -1;
    int ok = fprintf(fp, "%u\n", port) > 0;
    ok = (fclose(fp) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}
