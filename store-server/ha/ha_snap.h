/* Snapshots of the replicated state in etcd (--ha), so the log there can be cut short. */
#ifndef MUSTERD_HA_SNAP_H
#define MUSTERD_HA_SNAP_H

#include <stddef.h>
#include <stdint.h>

struct server;
struct ha_etcd;
struct ha_snap;

/* A snapshot has been loaded (rev: the log revision it stands for) or could not be (rev < 0). */
typedef void (*ha_snap_loaded_fn)(void *arg, int64_t rev);

/* Snapshots under prefix ("PREFIX/"), written only while leader_key holds the writer's lease; NULL when
 * memory ran out. */
struct ha_snap *ha_snap_new(struct server *srv, struct ha_etcd *etcd, const char *prefix, const char *leader_key);
/* Stop (answers to calls in flight are ignored) and free; NULL is fine. */
void ha_snap_free(struct ha_snap *s);
/* Abandon a snapshot being written or loaded. */
void ha_snap_cancel(struct ha_snap *s);
/* Whether a snapshot is being written. */
int ha_snap_busy(const struct ha_snap *s);
/* Write the live state as the snapshot of log revision rev under lease, then point PREFIX/snap/current at
 * it and delete the log entries it covers. */
void ha_snap_write(struct ha_snap *s, int64_t lease, int64_t rev);
/* Read PREFIX/snap/current at revision pin (0: now; *pin_out gets the revision read at).  When it names a
 * snapshot newer than applied, load it into the keyspaces (replacing them when applied > 0) and call done
 * with its revision; otherwise call done with applied.  done gets -1 on failure. */
void ha_snap_load(struct ha_snap *s, int64_t applied, ha_snap_loaded_fn done, void *arg, int64_t *pin_out);

/* Apply every framed record of n bytes at p (a log batch or a snapshot) to the live state; the count. */
uint64_t ha_snap_apply(struct server *srv, const uint8_t *p, size_t n);

#endif
