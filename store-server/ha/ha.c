/*
 * High availability: leader election through etcd (docs/ha.md).  Each
 * daemon of an --ha set grants itself a lease of --ha-ttl and campaigns by
 * creating PREFIX/leader = its address under that lease, only if the key
 * does not exist.  The winner serves and renews its lease; the others
 * refuse every request with NOT_LEADER naming the winner, and watch the key:
 * when it goes (the leader's lease expired) they campaign again.
 *
 * A leader that cannot renew stops serving before its lease can have
 * expired in etcd: it only counts a renewal from the moment it was sent, and
 * gives up once three quarters of the TTL have passed since the last one
 * that etcd confirmed.  So two daemons never serve at once, even when the leader is
 * cut off from etcd rather than dead.
 *
 * The log itself is ha_log.c: a new leader first applies the log's tail and
 * only then serves; a standby follows the log.  A leader that loses its
 * leadership while etcd has not confirmed some of its changes cannot take
 * them back out of its keyspaces: it never serves again (their writes are
 * not acknowledged; every request gets NOT_LEADER) and says in its log that
 * it must be restarted, which makes it a standby reading the log afresh.
 */
#include "ha.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "clock.h"
#include "ha_etcd.h"
#include "ha_log.h"
#include "log.h"
#include "persist.h"
#include "server.h"

/* Pause before trying etcd again after a failed grant or campaign. */
#define HA_RETRY_MS 200

enum ha_state { HA_GRANTING, HA_CAMPAIGNING, HA_LEADER, HA_STANDBY };

struct ha {
    struct server *srv;
    struct ha_etcd *etcd;
    struct ha_etcd_watch *watch; /* the leader key, while a standby */
    struct ha_log *log;
    struct ha_etcd *log_etcd;    /* the log's own connections: a slow append never delays a renewal */
    struct event *timer;         /* renewals (leader) or retries */
    enum ha_state state;
    char key[512];    /* PREFIX/leader */
    char self[300];   /* this daemon's address, the leader key's value when it leads */
    char leader[300]; /* the leader's address as last seen */
    uint64_t ttl_ms;
    int64_t lease;
    uint64_t renewed_ms;  /* when the last renewal etcd confirmed was sent */
    uint64_t renewing_ms; /* when the renewal in flight was sent (0: none) */
    int retries_left;     /* immediate renewal retries left this tick */
    int caught_up;        /* as leader: the log's tail is applied */
    int retired;          /* lost leadership with unconfirmed changes: never serves again */
};

static void ha_campaign(struct ha *ha);

/* How long after the send of the last confirmed renewal the leader may still serve.  etcd expires a
 * lease no earlier than TTL after a renewal it confirmed (a new etcd leader extends every lease), so
 * stopping at three quarters of it leaves a quarter for the two clocks' drift and the loop's delay;
 * renewals are sent every eighth, so one lost to an etcd leader change is not yet fatal. */
static uint64_t ha_fresh_ms(const struct ha *ha)
{
    return ha->ttl_ms * 3 / 4;
}

/* Run the timer once after ms. */
static void ha_after(struct ha *ha, uint64_t ms)
{
    clock_timer_in(ha->timer, ms);
}

/* Stop following the leader key. */
static void ha_unwatch(struct ha *ha)
{
    ha_etcd_watch_free(ha->watch);
    ha->watch = NULL;
}

/* Stop appending or following the log; retire for good when changes etcd never confirmed are in the
 * keyspaces (they would be served to clients as if they had happened). */
static void ha_stop_log(struct ha *ha)
{
    size_t lost = ha_log_stop(ha->log);
    if (!lost || ha->retired)
        return;
    ha->retired = 1;
    persist_forsake(ha->srv);
    log_msg(LOG_ERROR, "ha: leadership lost with %zu changes etcd never confirmed (their writes were not "
            "acknowledged); this daemon no longer campaigns: restart it to rejoin as a standby", lost);
}

/* Give up leadership (or a campaign) and start over with a new lease. */
static void ha_restart(struct ha *ha, const char *why)
{
    if (ha->state == HA_LEADER)
        log_msg(LOG_WARN, "ha: no longer leader: %s", why);
    ha_stop_log(ha);
    ha->caught_up = 0;
    ha->state = ha->retired ? HA_STANDBY : HA_GRANTING;
    ha->leader[0] = '\0';
    ha->lease = 0;
    ha->renewing_ms = 0;
    ha_unwatch(ha);
    if (!ha->retired)
        ha_after(ha, HA_RETRY_MS);
}

/* A watched change of the leader key: follow a new leader, or campaign when it is gone. */
static void ha_on_leader_key(void *arg, enum ha_etcd_err err, const struct ha_etcd_kv *kv)
{
    struct ha *ha = arg;
    if (err != HA_ETCD_OK || ha->state != HA_STANDBY)
        return;
    if (kv->deleted) {
        log_msg(LOG_INFO, "ha: leader %s is gone; campaigning", ha->leader[0] ? ha->leader : "(unknown)");
        ha->leader[0] = '\0';
        /* The watch is freed by the timer: not from inside its own callback. */
        ha->state = HA_GRANTING;
        ha_after(ha, 0);
        return;
    }
    snprintf(ha->leader, sizeof ha->leader, "%.*s", (int)kv->vlen, (const char *)kv->val);
}

/* Become a standby of the leader named in a failed campaign's reply, watching its key. */
static void ha_follow(struct ha *ha, json_t *reply)
{
    json_t *rr = json_object_get(json_array_get(json_object_get(reply, "responses"), 0), "response_range");
    json_t *kvj = json_array_get(json_object_get(rr, "kvs"), 0);
    struct ha_etcd_kv kv;
    if (!kvj || ha_etcd_kv_decode(kvj, &kv) != 0) {
        ha_restart(ha, "the leader key vanished while campaigning");
        return;
    }
    snprintf(ha->leader, sizeof ha->leader, "%.*s", (int)kv.vlen, (const char *)kv.val);
    /* Watch from the revision after the one read, so a deletion in between is still seen. */
    int64_t rev = ha_etcd_int(json_object_get(reply, "header"), "revision", 0) + 1;
    ha_etcd_kv_clear(&kv);
    if (ha->state != HA_STANDBY)
        log_msg(LOG_INFO, "ha: standby; leader is %s", ha->leader);
    ha->state = HA_STANDBY;
    ha->watch = ha_etcd_watch_new(ha->etcd, ha->key, strlen(ha->key), 0, rev, ha_on_leader_key, ha);
    if (!ha->watch) {
        ha_restart(ha, "cannot watch the leader key");
        return;
    }
    ha_log_follow(ha->log);
}

/* The campaign's transaction answered: lead, or follow the holder. */
static void ha_on_campaign(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha *ha = arg;
    if (err != HA_ETCD_OK) {
        ha_restart(ha, ha_etcd_strerror(err));
        return;
    }
    if (!json_is_true(json_object_get(reply, "succeeded"))) {
        ha_follow(ha, reply);
        return;
    }
    ha->state = HA_LEADER;
    ha->caught_up = 0;
    snprintf(ha->leader, sizeof ha->leader, "%s", ha->self);
    log_msg(LOG_INFO, "ha: leader (%s, lease %lld, ttl %llu ms); applying the log's tail", ha->self,
            (long long)ha->lease, (unsigned long long)ha->ttl_ms);
    ha_after(ha, ha->ttl_ms / 8);
    ha_log_lead(ha->log, ha->lease);
}

/* The log's tail is applied: the leader serves. */
static void ha_on_log_ready(void *arg)
{
    struct ha *ha = arg;
    ha->caught_up = 1;
}

/* An append found the leader key no longer ours. */
static void ha_on_log_deposed(void *arg)
{
    ha_restart(arg, "the leader key is no longer ours");
}

/* Create the leader key under our lease unless it exists. */
static void ha_campaign(struct ha *ha)
{
    ha->state = HA_CAMPAIGNING;
    ha->renewed_ms = clock_now_ms(); /* the grant was sent no earlier than this */
    if (ha_etcd_create(ha->etcd, ha->key, strlen(ha->key), (const uint8_t *)ha->self, strlen(ha->self), ha->lease,
                       ha_on_campaign, ha) != 0)
        ha_restart(ha, "cannot send the campaign");
}

/* The lease grant answered: campaign with it. */
static void ha_on_grant(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha *ha = arg;
    ha->lease = err == HA_ETCD_OK ? ha_etcd_int(reply, "ID", 0) : 0;
    if (!ha->lease) {
        log_msg(LOG_DEBUG, "ha: lease grant failed at %s: %s", ha_etcd_endpoint(ha->etcd), ha_etcd_strerror(err));
        ha_restart(ha, ha_etcd_strerror(err));
        return;
    }
    ha_campaign(ha);
}

/* A renewal answered: move the renewed mark, try the next endpoint at once, or give up when the lease is gone. */
static void ha_on_renew(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha *ha = arg;
    uint64_t sent = ha->renewing_ms;
    ha->renewing_ms = 0;
    if (ha->state != HA_LEADER)
        return;
    if (err == HA_ETCD_UNREACHABLE && ha->retries_left > 0) {
        /* A lost member: renewing is idempotent, so ask the next one now rather than a tick later. */
        ha->retries_left--;
        if (ha_etcd_lease_keepalive(ha->etcd, ha->lease, ha_on_renew, ha) == 0)
            ha->renewing_ms = clock_now_ms();
        return;
    }
    if (err != HA_ETCD_OK)
        return; /* a missed renewal is judged by the timer */
    if (ha_etcd_int(reply, "TTL", 0) <= 0) {
        ha_restart(ha, "the lease expired");
        return;
    }
    if (sent > ha->renewed_ms)
        ha->renewed_ms = sent;
}

/* The timer: grant (after a failure), or as leader check freshness and renew. */
static void ha_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct ha *ha = arg;
    if (ha->state == HA_GRANTING) {
        ha_unwatch(ha);
        ha_stop_log(ha);
        if (ha_etcd_lease_grant(ha->etcd, (int)(ha->ttl_ms / 1000), ha_on_grant, ha) != 0)
            ha_after(ha, HA_RETRY_MS);
        return;
    }
    if (ha->state != HA_LEADER)
        return;
    uint64_t now = clock_now_ms();
    if (now - ha->renewed_ms > ha_fresh_ms(ha)) {
        ha_restart(ha, "cannot renew the lease in etcd");
        return;
    }
    ha->retries_left = 2;
    if (!ha->renewing_ms && ha_etcd_lease_keepalive(ha->etcd, ha->lease, ha_on_renew, ha) == 0)
        ha->renewing_ms = now;
    ha_after(ha, ha->ttl_ms / 8);
}

/* Split "etcd://ENDPOINTS/PREFIX" into endpoints, "PREFIX/" and the leader key; 0, or -1 when malformed. */
static int ha_parse_url(const char *url, char *eps, size_t epslen, char *prefix, size_t plen, char *key,
                        size_t keylen)
{
    static const char scheme[] = "etcd://";
    if (strncmp(url, scheme, sizeof scheme - 1) != 0)
        return -1;
    url += sizeof scheme - 1;
    const char *slash = strchr(url, '/');
    if (!slash || slash == url || !slash[1] || (size_t)(slash - url) >= epslen)
        return -1;
    memcpy(eps, url, (size_t)(slash - url));
    eps[slash - url] = '\0';
    int n = snprintf(key, keylen, "%s/leader", slash + 1);
    int m = snprintf(prefix, plen, "%s/", slash + 1);
    return n > 0 && (size_t)n < keylen && m > 0 && (size_t)m < plen ? 0 : -1;
}

/* This daemon's address for others: --ha-advertise, else the first listener's with a wildcard host replaced
 * by the hostname. */
static void ha_self(struct server *srv, const char *bound, char *out, size_t n)
{
    if (srv->opt.ha_advertise && *srv->opt.ha_advertise) {
        snprintf(out, n, "%s", srv->opt.ha_advertise);
        return;
    }
    const char *name = bound ? bound : "";
    const char *colon = strrchr(name, ':');
    char host[256];
    if (colon && (strncmp(name, "0.0.0.0:", 8) == 0 || strncmp(name, "[::]:", 5) == 0) &&
        gethostname(host, sizeof host) == 0) {
        host[sizeof host - 1] = '\0';
        snprintf(out, n, "%s%s", host, colon);
        return;
    }
    snprintf(out, n, "%s", name);
}

/* The replica's take: hand a record to the etcd log: 1 taken (the leader), 0 not replicated here, -1 out of
 * memory.  lsn is persist.c's number for it, reported back through persist_replicated. */
static int ha_take(void *arg, uint64_t lsn, const struct record *r)
{
    struct ha *ha = arg;
    if (ha->state != HA_LEADER)
        return 0;
    return ha_log_record(ha->log, lsn, r);
}

/* The replica's pending: whether the leader has records etcd has not confirmed yet. */
static int ha_pending(void *arg)
{
    struct ha *ha = arg;
    return ha_log_pending(ha->log);
}

/* Parse --ha, register the etcd log as the data log's replica and campaign, advertising bound by default;
 * 0 or an exit status. */
int ha_open(struct server *srv, const char *bound)
{
    const struct options *o = &srv->opt;
    if (!o->ha || !*o->ha)
        return 0;
    char eps[1024], prefix[512];
    struct ha *ha = calloc(1, sizeof *ha);
    if (!ha)
        return EX_OSERR;
    srv->ha = ha;
    ha->srv = srv;
    ha->ttl_ms = o->ha_ttl < 1000 ? 1000 : o->ha_ttl / 1000 * 1000; /* etcd leases are whole seconds */
    if (ha_parse_url(o->ha, eps, sizeof eps, prefix, sizeof prefix, ha->key, sizeof ha->key) != 0 ||
        !(ha->etcd = ha_etcd_new(srv->base, eps, (int)(ha->ttl_ms / 2000) + 1))) {
        log_msg(LOG_ERROR, "--ha %s: expected etcd://HOST:PORT[,HOST:PORT...]/PREFIX", o->ha);
        return EX_USAGE;
    }
    struct ha_log_hooks hooks = {.ready = ha_on_log_ready, .deposed = ha_on_log_deposed, .arg = ha};
    if (!(ha->timer = event_new(srv->base, -1, 0, ha_tick, ha)) ||
        !(ha->log_etcd = ha_etcd_new(srv->base, eps, (int)(ha->ttl_ms / 2000) + 1)) ||
        !(ha->log = ha_log_new(srv, ha->log_etcd, prefix, ha->key, o->ha_batch_bytes, o->ha_snapshot_bytes,
                                  &hooks)))
        return EX_OSERR;
    ha_self(srv, bound, ha->self, sizeof ha->self);
    persist_replica(srv, &(struct persist_replica){ha_take, ha_pending, ha});
    log_msg(LOG_INFO, "ha: campaigning for %s as %s through %s", ha->key, ha->self, eps);
    ha->state = HA_GRANTING;
    ha_after(ha, 0);
    return 0;
}

/* Stop campaigning and free; the lease is left to expire.  Safe when never opened. */
void ha_close(struct server *srv)
{
    struct ha *ha = srv->ha;
    if (!ha)
        return;
    persist_replica(srv, NULL);
    ha_unwatch(ha);
    ha_log_free(ha->log);
    if (ha->timer)
        event_free(ha->timer);
    ha_etcd_free(ha->log_etcd);
    ha_etcd_free(ha->etcd);
    free(ha);
    srv->ha = NULL;
}

/* Whether this daemon may serve requests now (always without --ha). */
int ha_serving(const struct server *srv)
{
    const struct ha *ha = srv->ha;
    return !ha || (ha->state == HA_LEADER && ha->caught_up && clock_now_ms() - ha->renewed_ms <= ha_fresh_ms(ha));
}

/* The leader's HOST:PORT as last seen in etcd ("" when unknown). */
const char *ha_leader(const struct server *srv)
{
    /* A leader whose lease may be lapsing names nobody: it is not serving, and no one else is known. */
    if (!srv->ha || (srv->ha->state == HA_LEADER && !ha_serving(srv)))
        return "";
    return srv->ha->leader;
}
