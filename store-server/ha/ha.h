/* High availability (--ha): leader election through an etcd lease; standbys refuse requests naming the leader. */
#ifndef MUSTERD_HA_H
#define MUSTERD_HA_H

#include <stddef.h>
#include <stdint.h>

struct server;

/* Parse --ha, register the etcd log as the data log's replica (persist_replica) and start campaigning (after
 * the listeners are bound), advertising --ha-advertise or else bound, the first listener's address; 0 or an
 * exit status.  A no-op without --ha. */
int ha_open(struct server *srv, const char *bound);
/* Stop campaigning and free; the lease is left to expire.  Safe when never opened. */
void ha_close(struct server *srv);
/* Whether this daemon may serve requests now (always without --ha). */
int ha_serving(const struct server *srv);
/* The leader's HOST:PORT as last seen in etcd ("" when unknown). */
const char *ha_leader(const struct server *srv);

#endif
