/* The replicated log of --ha: the leader appends its records to etcd, standbys follow and replay them. */
#ifndef MUSTERD_HA_LOG_H
#define MUSTERD_HA_LOG_H

#include <stddef.h>
#include <stdint.h>

struct server;
struct record;
struct ha_etcd;
struct ha_log;

/* What the log tells its owner (ha.c): catching up as leader is done, or an append found the leader key
 * no longer ours (deposed). */
struct ha_log_hooks {
    void (*ready)(void *arg);
    void (*deposed)(void *arg);
    void *arg;
};

/* A log under prefix ("PREFIX/", ending in a slash) whose appends are guarded by leader_key; batches of
 * at most batch_bytes of records; a snapshot once the log has grown by snap_bytes (0: never).  NULL when
 * memory ran out. */
struct ha_log *ha_log_new(struct server *srv, struct ha_etcd *etcd, const char *prefix, const char *leader_key,
                          size_t batch_bytes, uint64_t snap_bytes, const struct ha_log_hooks *hooks);
/* Stop and free (calls in flight are ignored when they end); NULL is fine. */
void ha_log_free(struct ha_log *l);
/* Become leader under lease: read the log's tail into the keyspaces, then append; hooks.ready is called
 * once the tail is applied. */
void ha_log_lead(struct ha_log *l, int64_t lease);
/* Become a standby: read the tail, then follow the log with a watch and replay what it delivers. */
void ha_log_follow(struct ha_log *l);
/* Stop leading or following; the number of records handed to ha_log_record that etcd has not
 * confirmed (their writes must never be acknowledged). */
size_t ha_log_stop(struct ha_log *l);
/* Take one record for etcd (lsn: persist.c's number for it): 1 taken, 0 not leading, -1 no memory. */
int ha_log_record(struct ha_log *l, uint64_t lsn, const struct record *r);
/* Whether records handed to ha_log_record are still waiting for etcd. */
int ha_log_pending(const struct ha_log *l);

#endif
