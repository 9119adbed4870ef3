/* High availability (--ha): leader election through an etcd lease; standbys refuse requests naming the leader. */
#ifndef MUSTERD_HA_H
#define MUSTERD_HA_H

#include <stddef.h>
#include <stdint.h>

struct server;

/* Parse --ha and start campaigning (after the listeners are bound); 0 or an exit status.  A no-op
 * without --ha. */
int ha_open(struct server *srv);
/* Stop campaigning and free; the lease is left to expire.  Safe when never opened. */
void ha_close(struct server *srv);
/* Whether this daemon may serve requests now (always without --ha). */
int ha_serving(const struct server *srv);
/* Whether --ha was given (before ha_open: the data directory code asks). */
int ha_configured(const struct server *srv);
/* Hand a record (enum prec_kind) to the etcd log: 1 taken (the leader), 0 not replicated here, -1 out of
 * memory.  lsn is persist.c's number for it, reported back through persist_replicated. */
int ha_record(struct server *srv, uint64_t lsn, int kind, const char *ns, const char *key, size_t klen,
              const uint8_t *val, size_t vlen, uint64_t gen);
/* Whether the leader has records etcd has not confirmed yet. */
int ha_pending(const struct server *srv);
/* The leader's HOST:PORT as last seen in etcd ("" when unknown). */
const char *ha_leader(const struct server *srv);

#endif
