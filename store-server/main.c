/* musterd's entry point: options, the one startup line, the loop, and the exit status. */
#include <event2/event.h>
#include <protobuf-c/protobuf-c.h>
#include <stdio.h>
#include <string.h>

#include "listener.h"
#include "log.h"
#include "notify.h"
#include "daemon.h"
#include "server.h"
#include "tls.h"

/* Log one line naming the version, libraries, listeners and main limits. */
static void main_startup_line(const struct server *srv)
{
    char addrs[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < srv->nlisteners && used < sizeof addrs; i++)
        used += (size_t)snprintf(addrs + used, sizeof addrs - used, "%s%s", i ? "," : "",
                                 listener_name(srv->listeners[i]));
    const struct options *o = &srv->opt;
    char tls[512];
    tls_describe(srv, tls, sizeof tls);
    log_msg(LOG_INFO,
            "musterd %s (libevent %s, protobuf-c %s) listening on %s (plain TCP, unauthenticated transport)%s; "
            "max-connections=%llu max-frame=%llu "
            "max-key=%llu max-value=%llu max-waiters=%llu wait-timeout=%llums tokens=%s",
            MUSTER_VERSION, event_get_version(), protobuf_c_version(), addrs, tls, (unsigned long long)o->max_connections,
            (unsigned long long)o->max_frame, (unsigned long long)o->max_key, (unsigned long long)o->max_value,
            (unsigned long long)o->max_waiters, (unsigned long long)o->wait_timeout, srv->tokens ? "yes" : "none");
}

/* Parse, start, serve, tear down; the exit status follows sysexits.h. */
int main(int argc, char **argv)
{
    struct server srv;
    int rc = daemon_init(&srv, argc, argv);
    if (rc < 0 && (rc = daemon_start(&srv)) == 0) {
        main_startup_line(&srv);
        notify_ready(&srv);
        rc = daemon_run(&srv);
    }
    notify_fini(&srv);
    daemon_fini(&srv);
    return rc;
}
