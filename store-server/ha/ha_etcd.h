/* etcd v3 through its JSON gateway, driven from the daemon's event loop (libevent's HTTP client, jansson). */
#ifndef MUSTERD_HA_ETCD_H
#define MUSTERD_HA_ETCD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct ha_etcd;
struct ha_etcd_watch;

/* How a call ended.  UNREACHABLE covers refused connections, resets and timeouts (the client then
 * moves on to the next endpoint); REFUSED is an answer from etcd that is an error (its message is in
 * the reply's "message" or "error"). */
enum ha_etcd_err { HA_ETCD_OK = 0, HA_ETCD_UNREACHABLE, HA_ETCD_REFUSED, HA_ETCD_BADREPLY, HA_ETCD_NOMEM };

/* A call's completion: err, and the decoded reply (borrowed for the call; NULL when there is none).
 * Replies that etcd wraps as {"result": ...} (stream methods) are unwrapped. */
typedef void (*ha_etcd_cb)(void *arg, enum ha_etcd_err err, json_t *reply);

/* One key-value pair as etcd reports it, decoded (key and value are owned, NUL-terminated). */
struct ha_etcd_kv {
    char *key;
    size_t klen;
    uint8_t *val;
    size_t vlen;
    int64_t create_rev, mod_rev, lease;
    int deleted; /* a watch's DELETE event */
};

/* A watch's delivery: one event, or (kv NULL) a stream failure with err; the watch resumes by itself
 * from the revision after the last one delivered. */
typedef void (*ha_etcd_watch_cb)(void *arg, enum ha_etcd_err err, const struct ha_etcd_kv *kv);

/* A client for endpoints "HOST:PORT[,HOST:PORT...]" with a per-call timeout; NULL when the list is bad. */
struct ha_etcd *ha_etcd_new(struct event_base *base, const char *endpoints, int timeout_s);
/* Cancel every call and watch (their callbacks are not run) and free; NULL is fine. */
void ha_etcd_free(struct ha_etcd *e);
/* The endpoint calls go to now ("HOST:PORT"). */
const char *ha_etcd_endpoint(const struct ha_etcd *e);
/* The name of err, for log lines. */
const char *ha_etcd_strerror(enum ha_etcd_err err);

/* POST body (stolen, even on failure) to path (e.g. "/v3/kv/range"); 0, or -1 when it cannot be sent. */
int ha_etcd_call(struct ha_etcd *e, const char *path, json_t *body, ha_etcd_cb cb, void *arg);
/* Put key = val, attached to lease (0: none). */
int ha_etcd_put(struct ha_etcd *e, const char *key, size_t klen, const uint8_t *val, size_t vlen, int64_t lease,
                ha_etcd_cb cb, void *arg);
/* Read key, or every key starting with it when prefix is set. */
int ha_etcd_range(struct ha_etcd *e, const char *key, size_t klen, int prefix, ha_etcd_cb cb, void *arg);
/* Create key = val under lease only if key does not exist; the reply's "succeeded" says whether it did,
 * and otherwise its first response holds the key's current pair. */
int ha_etcd_create(struct ha_etcd *e, const char *key, size_t klen, const uint8_t *val, size_t vlen, int64_t lease,
                   ha_etcd_cb cb, void *arg);
/* Grant a lease of ttl_s seconds; the reply's "ID" names it. */
int ha_etcd_lease_grant(struct ha_etcd *e, int ttl_s, ha_etcd_cb cb, void *arg);
/* Renew a lease once; the reply's "TTL" is absent or 0 when the lease has already expired. */
int ha_etcd_lease_keepalive(struct ha_etcd *e, int64_t lease, ha_etcd_cb cb, void *arg);

/* Watch key (or the prefix) from revision from_rev on; NULL when it cannot start.  from_rev 0 means
 * "after the revision etcd confirms the watch at"; a stream lost before that confirmation resumes from
 * a later one, so callers that must not miss a change pass a revision they read. */
struct ha_etcd_watch *ha_etcd_watch_new(struct ha_etcd *e, const char *key, size_t klen, int prefix, int64_t from_rev,
                                        ha_etcd_watch_cb cb, void *arg);
/* Stop a watch (its callback is not run again; not from inside that callback); NULL is fine. */
void ha_etcd_watch_free(struct ha_etcd_watch *w);

/* An int64 field of obj (etcd sends them as strings); dflt when absent or malformed. */
int64_t ha_etcd_int(const json_t *obj, const char *field, int64_t dflt);
/* Decode one pair from its JSON form into kv; 0, or -1 when it is malformed or memory ran out. */
int ha_etcd_kv_decode(const json_t *j, struct ha_etcd_kv *kv);
/* Free what ha_etcd_kv_decode allocated. */
void ha_etcd_kv_clear(struct ha_etcd_kv *kv);
/* Base64 of n bytes as a JSON string, or NULL when memory ran out. */
json_t *ha_etcd_b64(const void *p, size_t n);

/* The range_end (base64) covering every key that starts with key. */
json_t *ha_etcd_prefix_end(const char *key, size_t klen);

/* For the watch (ha_etcd_watch.c): the event base, and the timeout. */
struct event_base *ha_etcd_base(const struct ha_etcd *e);
/* After a failure on endpoint ep: move to the next endpoint, unless the client has already moved on. */
void ha_etcd_avoid(struct ha_etcd *e, int ep);
/* The index of the current endpoint. */
int ha_etcd_index(const struct ha_etcd *e);
/* The current endpoint's host and port. */
const char *ha_etcd_current(const struct ha_etcd *e, uint16_t *port);

#endif
