/*
 * The composition root: the daemon's life from options to exit.  It makes
 * the shared context (server/), gives the state's core (core/) its hooks
 * over this loop (core_event.c) and its limits, opens the data directory,
 * the listeners of both front ends, TLS, HA and metrics, handles signals,
 * and drains on SIGTERM/SIGINT or when a layer fails (server_fail, which
 * also sets the exit status).  It is the only code that names every layer;
 * no layer includes it.
 */
#include "daemon.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "barrier.h"
#include "clock.h"
#include "conn.h"
#include "core_event.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "ns.h"
#include "server.h"
#include "ops.h"
#include "ha.h"
#include "persist.h"
#include "rdzv.h"
#include "tcpstore.h"
#include "tls.h"
#include "waiters.h"

static const int daemon_signums[SERVER_NSIGNALS] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};

static void daemon_drain(struct server *srv, const char *reason);

/* Parse options and set up logging, the loop and tokens; -1 to go on, else an exit status. */
int daemon_init(struct server *srv, int argc, char **argv)
{
    memset(srv, 0, sizeof *srv);
    int rc = options_parse(&srv->opt, argc, argv);
    if (rc >= 0)
        return rc;
    log_set_format(srv->opt.log_format_num);
    if (log_open(srv->opt.log_file, srv->opt.log_level_num) != 0) {
        fprintf(stderr, "musterd: cannot open log file %s: %s\n", srv->opt.log_file, strerror(errno));
        return EX_CANTCREAT;
    }
    /* A peer that vanished must cost an EPIPE on write, not the process. */
    signal(SIGPIPE, SIG_IGN);
    if (!(srv->base = event_base_new())) {
        log_msg(LOG_ERROR, "cannot create the event loop");
        return EX_OSERR;
    }
    struct core_hooks hooks;
    core_event_hooks(srv->base, &hooks);
    core_init(&srv->core, &hooks, NULL, &srv->stats);
    server_core(srv);
    srv->drain = daemon_drain;
    srv->serving = ha_serving;
    if (ns_tokens_load(srv) != 0)
        return EX_CONFIG;
    return -1;
}

/* Signal callback: drain, reopen the log, or dump counters. */
static void daemon_signal_cb(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct server *srv = arg;
    if (sig == SIGHUP) {
        if (log_reopen() != 0)
            log_msg(LOG_ERROR, "cannot reopen log file: %s", strerror(errno));
        log_msg(LOG_INFO, "log reopened");
    } else if (sig == SIGUSR1) {
        stats_dump(&srv->stats, ops_name, LOG_ALWAYS, "signal"); /* asked for: written at any --log-level */
    } else if (srv->draining) {
        log_msg(LOG_WARN, "second %s: exiting without waiting for clients", strsignal((int)sig));
        event_base_loopbreak(srv->base);
    } else {
        daemon_drain(srv, sig == SIGINT ? "interrupted" : "terminated");
    }
}

/* Install the loop's signal events; 0 on success. */
static int daemon_signals(struct server *srv)
{
    for (int i = 0; i < SERVER_NSIGNALS; i++) {
        srv->signals[i] = evsignal_new(srv->base, daemon_signums[i], daemon_signal_cb, srv);
        if (!srv->signals[i] || evsignal_add(srv->signals[i], NULL) != 0)
            return -1;
    }
    return 0;
}

/* Bind every listener, write the port file and install signal handlers; 0 or an exit status. */
int daemon_start(struct server *srv)
{
    const struct strlist *l = &srv->opt.listen;
    int prc = persist_open(srv); /* recovery comes before any listener opens */
    if (prc)
        return prc;
    if (!(srv->listeners = calloc(l->n, sizeof *srv->listeners)))
        return EX_OSERR;
    for (size_t i = 0; i < l->n; i++) {
        int rc = listener_open_with(srv, l->v[i], conn_accept, &srv->listeners[i]);
        if (rc)
            return rc;
        srv->nlisteners++;
    }
    int rc = tcpstore_start(srv); /* bound before the port file says the daemon is up */
    if (!rc)
        rc = tls_start(srv, conn_accept_tls);
    if (!rc)
        rc = ha_open(srv, srv->nlisteners ? listener_name(srv->listeners[0]) : NULL); /* the address it advertises */
    if (rc)
        return rc;
    if (ns_sweep_start(srv) != 0) {
        log_msg(LOG_ERROR, "cannot start the namespace sweep");
        return EX_OSERR;
    }
    if (daemon_signals(srv) != 0) {
        log_msg(LOG_ERROR, "cannot install signal handlers");
        return EX_OSERR;
    }
    rc = server_write_port_file(srv->opt.port_file, listener_port(srv->listeners[0]));
    return rc ? rc : metrics_start(srv);
}

/* Run the loop until drained; returns the exit status. */
int daemon_run(struct server *srv)
{
    if (event_base_dispatch(srv->base) < 0) {
        log_msg(LOG_ERROR, "event loop failed");
        return EX_SOFTWARE;
    }
    log_msg(srv->exit_status ? LOG_ERROR : LOG_INFO, "exiting%s", srv->exit_status ? " after a failure" : "");
    stats_dump(&srv->stats, ops_name, LOG_INFO, "exit"); /* follows --log-level, as "exiting" does */
    return srv->exit_status ? srv->exit_status : EX_OK;
}

/* Fail every parked request of one namespace with SHUTTING_DOWN. */
static void daemon_drain_ns(struct ns *ns, void *arg)
{
    (void)arg;
    waiters_fail_all(ns, MUSTER__STATUS__SHUTTING_DOWN);
    barrier_fail_all(ns, MUSTER__STATUS__SHUTTING_DOWN);
    rdzv_shutdown(ns);
}

/* The drain deadline: stop waiting for slow clients. */
static void daemon_drain_timeout_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    log_msg(LOG_WARN, "drain timeout: closing %zu remaining connections", srv->nconns + srv->nrefusing);
    event_base_loopbreak(srv->base);
}

/* Start draining: stop accepting, fail parked requests SHUTTING_DOWN, tell and flush every client. */
static void daemon_drain(struct server *srv, const char *reason)
{
    if (srv->draining)
        return;
    srv->draining = 1;
    notify_stopping(reason);
    log_msg(LOG_INFO, "draining (%s): %zu connections, %zu parked requests", reason, srv->nconns, srv->core.nwaiters);
    for (size_t i = 0; i < srv->nlisteners; i++) {
        listener_close(srv->listeners[i]);
        srv->listeners[i] = NULL;
    }
    srv->nlisteners = 0;
    ns_each(srv, daemon_drain_ns, NULL);
    tcpstore_drain(srv);
    tls_drain(srv);
    Muster__ShutdownEvent se = MUSTER__SHUTDOWN_EVENT__INIT;
    se.reason = (char *)reason;
    Muster__Event ev = MUSTER__EVENT__INIT;
    ev.event_case = MUSTER__EVENT__EVENT_SHUTDOWN;
    ev.shutdown = &se;
    for (struct conn *c = srv->conns; c; c = c->next) {
        if (c->ns && conn_live(c))
            conn_push_event(c, &ev);
        conn_finish(c);
    }
    srv->drain_timer = evtimer_new(srv->base, daemon_drain_timeout_cb, srv);
    if (srv->drain_timer)
        clock_timer_in(srv->drain_timer, srv->opt.drain_timeout);
    server_conn_gone(srv);
}

/* Free everything daemon_init and daemon_start made (safe after a partial init). */
void daemon_fini(struct server *srv)
{
    conn_free_all(srv);
    metrics_stop(srv);
    tls_fini(srv);
    ha_close(srv);
    persist_close(srv);
    for (size_t i = 0; i < srv->nlisteners; i++)
        listener_close(srv->listeners[i]);
    free(srv->listeners);
    tcpstore_fini(srv); /* its parked waits belong to a namespace */
    ns_destroy_all(srv);
    core_fini(&srv->core);
    for (int i = 0; i < SERVER_NSIGNALS; i++)
        if (srv->signals[i])
            event_free(srv->signals[i]);
    if (srv->drain_timer)
        event_free(srv->drain_timer);
    if (srv->base)
        event_base_free(srv->base);
    options_free(&srv->opt);
    log_close();
}
