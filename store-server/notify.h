/* Service manager notifications (systemd's sd_notify): ready, stopping, status and the watchdog. */
#ifndef MUSTERD_NOTIFY_H
#define MUSTERD_NOTIFY_H

struct server;

/* Say READY=1 (state recovered, every listener bound) and start the watchdog pings if asked for. */
void notify_ready(struct server *srv);
/* Say STOPPING=1 with the reason as status. */
void notify_stopping(const char *reason);
/* Stop the watchdog timer (at exit); safe when never started. */
void notify_fini(struct server *srv);

#endif
