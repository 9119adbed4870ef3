/*
 * Service manager notifications.  Under systemd with Type=notify, musterd
 * says READY=1 only once recovery is done and every listener is bound, so
 * units ordered after it find a serving store; STOPPING=1 when a drain
 * starts; and with WatchdogSec= a timer on the event loop pings at half the
 * interval, so a wedged loop (not just a dead process) gets restarted.
 * Built without libsystemd these are no-ops and only Type=simple units work.
 */
#include "notify.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "server.h"

#ifdef MUSTER_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

/* The watchdog event (one per process: the service manager watches the process). */
static struct event *notify_watchdog;

/* Ping the watchdog from the loop: proof that the loop still turns. */
static void notify_watchdog_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    sd_notify(0, "WATCHDOG=1");
}

/* Start pinging at half the interval systemd asked for (WATCHDOG_USEC), if it asked. */
static void notify_watchdog_start(struct server *srv)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
        return;
    usec /= 2;
    struct timeval tv = {(time_t)(usec / 1000000), (suseconds_t)(usec % 1000000)};
    notify_watchdog = event_new(srv->base, -1, EV_PERSIST, notify_watchdog_cb, NULL);
    if (notify_watchdog && event_add(notify_watchdog, &tv) == 0)
        log_msg(LOG_INFO, "watchdog: pinging every %llu ms", (unsigned long long)(usec / 1000));
}

/* Say READY=1 (state recovered, every listener bound) and start the watchdog pings if asked for. */
void notify_ready(struct server *srv)
{
    if (!getenv("NOTIFY_SOCKET"))
        return;
    sd_notifyf(0, "READY=1\nSTATUS=serving\nMAINPID=%ld", (long)getpid());
    notify_watchdog_start(srv);
}

/* Say STOPPING=1 with the reason as status. */
void notify_stopping(const char *reason)
{
    sd_notifyf(0, "STOPPING=1\nSTATUS=draining (%s)", reason);
}

/* Stop the watchdog timer (at exit); safe when never started. */
void notify_fini(struct server *srv)
{
    (void)srv;
    if (notify_watchdog)
        event_free(notify_watchdog);
    notify_watchdog = NULL;
}

#else

/* Say READY=1: nothing to tell without libsystemd. */
void notify_ready(struct server *srv)
{
    (void)srv;
}

/* Say STOPPING=1: nothing to tell without libsystemd. */
void notify_stopping(const char *reason)
{
    (void)reason;
}

/* Stop the watchdog timer: there is none without libsystemd. */
void notify_fini(struct server *srv)
{
    (void)srv;
}

#endif
