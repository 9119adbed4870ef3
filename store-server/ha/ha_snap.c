/*
 * Snapshots of the replicated state in etcd (--ha, docs/ha.md).  Once the
 * log under PREFIX/log/ has grown past --ha-snapshot-bytes, the leader
 * writes its whole state - the same framed records as --data-dir - in
 * chunks of at most 1 MiB under PREFIX/snap/<rev>/<n>, where rev is the
 * last log revision the state includes; then, in one transaction, points
 * PREFIX/snap/current at it ("<rev> <chunks>") and deletes older
 * snapshots; then deletes the log entries up to rev.  Every write but the
 * last step compares the leader key's lease, so a deposed leader cannot
 * replace the snapshot.
 *
 * The state may already hold changes whose log append is still in flight:
 * they are appended after rev, and replaying them again over the snapshot
 * changes nothing, because records carry resulting state.
 *
 * A daemon that reads the log (ha_log.c) first reads PREFIX/snap/current;
 * when it names a snapshot newer than what the daemon has applied, the
 * chunks are read at the same etcd revision, the keyspaces are emptied
 * (when they held anything) and the snapshot is applied.
 */
#include "ha_snap.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha_etcd.h"
#include "log.h"
#include "precord.h"
#include "records.h"
#include "server.h"

/* The most bytes of one snapshot chunk (etcd refuses requests over 1.5 MiB by default). */
#define HA_SNAP_CHUNK (1024 * 1024)
/* Log keys deleted per transaction (etcd allows 128 operations in one by default). */
#define HA_SNAP_TRIM 100

enum ha_snap_mode { HA_SNAP_IDLE, HA_SNAP_WRITING, HA_SNAP_LOADING };

struct ha_snap {
    struct server *srv;
    struct ha_etcd *etcd;
    char prefix[520];     /* PREFIX/snap/ */
    char log_prefix[520]; /* PREFIX/log/ */
    char leader_key[520];
    enum ha_snap_mode mode;
    unsigned epoch, call_epoch;
    struct evbuffer *buf; /* the snapshot being written or read */
    int64_t lease, rev, applied, pin;
    size_t chunk, nchunks;
    ha_snap_loaded_fn done;
    void *done_arg;
    int64_t *pin_out;
};

/* A JSON int64 in etcd's string form. */
static json_t *ha_snap_i64(int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRId64, v);
    return json_string(buf);
}

/* Base64 of a NUL-terminated key. */
static json_t *ha_snap_key(const char *k)
{
    return ha_etcd_b64(k, strlen(k));
}

/* Send body to path with cb, remembering the epoch its answer belongs to; 0, or -1 when it cannot be sent. */
static int ha_snap_call(struct ha_snap *s, const char *path, json_t *body, ha_etcd_cb cb)
{
    s->call_epoch = s->epoch;
    return ha_etcd_call(s->etcd, path, body, cb, s);
}

/* Whether an answer belongs to the current work and says success. */
static int ha_snap_answer_ok(struct ha_snap *s, enum ha_etcd_err err)
{
    return s->call_epoch == s->epoch && s->mode != HA_SNAP_IDLE && err == HA_ETCD_OK;
}

/* Give up the work in progress (it is tried again at the next occasion). */
static void ha_snap_abandon(struct ha_snap *s, const char *why)
{
    log_msg(LOG_WARN, "ha: snapshot %s: %s", s->mode == HA_SNAP_WRITING ? "write" : "load", why);
    enum ha_snap_mode mode = s->mode;
    s->mode = HA_SNAP_IDLE;
    evbuffer_drain(s->buf, evbuffer_get_length(s->buf));
    if (mode == HA_SNAP_LOADING)
        s->done(s->done_arg, -1);
}

/* ------------------------------------------------------------------- write */

/* records_dump callback: one record of the live state into the snapshot being written. */
static int ha_snap_put(void *arg, const struct record *r)
{
    struct ha_snap *s = arg;
    return prec_put_record(s->buf, 0, r);
}

/* The compare every snapshot write makes: the leader key still holds our lease. */
static json_t *ha_snap_guard(const struct ha_snap *s)
{
    return json_pack("[{s:o,s:s,s:s,s:o}]", "key", ha_snap_key(s->leader_key), "target", "LEASE", "result",
                     "EQUAL", "lease", ha_snap_i64(s->lease));
}

static void ha_snap_write_chunk(struct ha_snap *s);
static void ha_snap_trim(struct ha_snap *s);

/* The log entries up to rev were deleted (a page of them): go on, or finish. */
static void ha_snap_on_trimmed(void *arg, enum ha_etcd_err err, json_t *reply)
{
    (void)reply;
    struct ha_snap *s = arg;
    if (!ha_snap_answer_ok(s, err)) {
        if (s->call_epoch == s->epoch && s->mode == HA_SNAP_WRITING)
            ha_snap_abandon(s, "cannot delete the log it covers");
        return;
    }
    ha_snap_trim(s);
}

/* A page of log keys up to rev: delete them in one transaction, or finish when there are none. */
static void ha_snap_on_trim_page(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha_snap *s = arg;
    if (!ha_snap_answer_ok(s, err)) {
        if (s->call_epoch == s->epoch && s->mode == HA_SNAP_WRITING)
            ha_snap_abandon(s, "cannot list the log it covers");
        return;
    }
    json_t *kvs = json_object_get(reply, "kvs");
    if (json_array_size(kvs) == 0) {
        s->mode = HA_SNAP_IDLE;
        stats_inc(&s->srv->stats, STAT_HA_SNAPSHOTS);
        log_msg(LOG_INFO, "ha: snapshot of revision %" PRId64 " written (%zu chunks); the log before it deleted",
                s->rev, s->nchunks);
        return;
    }
    json_t *ops = json_array();
    size_t i;
    json_t *kv;
    json_array_foreach(kvs, i, kv)
    {
        json_t *k = json_object_get(kv, "key");
        json_array_append_new(ops, json_pack("{s:{s:O}}", "request_delete_range", "key", k));
    }
    if (ha_snap_call(s, "/v3/kv/txn", json_pack("{s:o}", "success", ops), ha_snap_on_trimmed) != 0)
        ha_snap_abandon(s, "cannot send a log deletion");
}

/* Ask for the next page of log keys up to rev (keys only). */
static void ha_snap_trim(struct ha_snap *s)
{
    size_t n = strlen(s->log_prefix);
    json_t *b = json_pack("{s:o,s:o,s:b,s:o,s:o}", "key", ha_etcd_b64(s->log_prefix, n), "range_end",
                          ha_etcd_prefix_end(s->log_prefix, n), "keys_only", 1, "max_mod_revision",
                          ha_snap_i64(s->rev), "limit", ha_snap_i64(HA_SNAP_TRIM));
    if (ha_snap_call(s, "/v3/kv/range", b, ha_snap_on_trim_page) != 0)
        ha_snap_abandon(s, "cannot list the log");
}

/* A guarded write answered: go on with next, or give up (not leader any more, or etcd trouble). */
static int ha_snap_written(struct ha_snap *s, enum ha_etcd_err err, json_t *reply)
{
    if (!ha_snap_answer_ok(s, err)) {
        if (s->call_epoch == s->epoch && s->mode == HA_SNAP_WRITING)
            ha_snap_abandon(s, ha_etcd_strerror(err));
        return 0;
    }
    if (!json_is_true(json_object_get(reply, "succeeded"))) {
        ha_snap_abandon(s, "the leader key is no longer ours");
        return 0;
    }
    return 1;
}

/* The pointer moved: delete the log the snapshot covers. */
static void ha_snap_on_current(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha_snap *s = arg;
    if (ha_snap_written(s, err, reply))
        ha_snap_trim(s);
}

/* Point PREFIX/snap/current at the snapshot and delete older snapshots, in one transaction. */
static void ha_snap_write_current(struct ha_snap *s)
{
    char key[600], val[64], mine[600];
    snprintf(key, sizeof key, "%scurrent", s->prefix);
    snprintf(val, sizeof val, "%" PRId64 " %zu", s->rev, s->nchunks);
    snprintf(mine, sizeof mine, "%s%016" PRIx64 "/", s->prefix, (uint64_t)s->rev);
    /* Snapshot directories sort by revision, and all before "current": [prefix, mine) is the older ones. */
    json_t *ops = json_pack("[{s:{s:o,s:o}},{s:{s:o,s:o}}]", "request_put", "key", ha_snap_key(key), "value",
                            ha_etcd_b64(val, strlen(val)), "request_delete_range", "key", ha_snap_key(s->prefix),
                            "range_end", ha_snap_key(mine));
    json_t *b = json_pack("{s:o,s:o}", "compare", ha_snap_guard(s), "success", ops);
    if (ha_snap_call(s, "/v3/kv/txn", b, ha_snap_on_current) != 0)
        ha_snap_abandon(s, "cannot send the pointer");
}

/* A chunk was written: the next one, or the pointer. */
static void ha_snap_on_chunk(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha_snap *s = arg;
    if (!ha_snap_written(s, err, reply))
        return;
    evbuffer_drain(s->buf, HA_SNAP_CHUNK);
    if (++s->chunk < s->nchunks)
        ha_snap_write_chunk(s);
    else
        ha_snap_write_current(s);
}

/* Write chunk s->chunk (the front of the buffer). */
static void ha_snap_write_chunk(struct ha_snap *s)
{
    char key[600];
    snprintf(key, sizeof key, "%s%016" PRIx64 "/%08zx", s->prefix, (uint64_t)s->rev, s->chunk);
    size_t len = evbuffer_get_length(s->buf);
    if (len > HA_SNAP_CHUNK)
        len = HA_SNAP_CHUNK;
    const void *p = evbuffer_pullup(s->buf, (ssize_t)len);
    json_t *put = json_pack("[{s:{s:o,s:o}}]", "request_put", "key", ha_snap_key(key), "value",
                            ha_etcd_b64(p ? p : "", len));
    json_t *b = json_pack("{s:o,s:o}", "compare", ha_snap_guard(s), "success", put);
    if (ha_snap_call(s, "/v3/kv/txn", b, ha_snap_on_chunk) != 0)
        ha_snap_abandon(s, "cannot send a chunk");
}

/* Write the live state as the snapshot of log revision rev under lease. */
void ha_snap_write(struct ha_snap *s, int64_t lease, int64_t rev)
{
    if (s->mode != HA_SNAP_IDLE)
        return;
    s->mode = HA_SNAP_WRITING;
    s->lease = lease;
    s->rev = rev;
    if (records_dump(records_live(s->srv), ha_snap_put, s) != 0) {
        ha_snap_abandon(s, "out of memory");
        return;
    }
    size_t len = evbuffer_get_length(s->buf);
    s->nchunks = len ? (len + HA_SNAP_CHUNK - 1) / HA_SNAP_CHUNK : 1;
    s->chunk = 0;
    ha_snap_write_chunk(s);
}

/* -------------------------------------------------------------------- load */

/* Apply every record of n bytes at p to the live state; the number applied. */
uint64_t ha_snap_apply(struct server *srv, const uint8_t *p, size_t n)
{
    uint64_t count = 0;
    for (size_t at = 0;;) {
        struct prec r;
        enum prec_read st = prec_next(p, n, &at, &r);
        if (st == PREC_EOF)
            break;
        if (st != PREC_OK) {
            /* Written whole by transactions: not a torn write but damage. */
            log_msg(LOG_ERROR, "ha: undecodable record in etcd; the rest of its value is skipped");
            break;
        }
        /* Logged to the data directory, if any, but never sent back to etcd. */
        struct record rec;
        if (prec_record(&r, &rec) && records_apply(records_live(srv), &rec, RECORD_REPLICA) != 0)
            log_msg(LOG_WARN, "ha: a replicated change of namespace '%s' was refused here (limits?)", r.ns);
        prec_free(&r);
        count++;
    }
    stats_add(&srv->stats, STAT_HA_REPLAYED, count);
    return count;
}

/* Every chunk is read: replace the state with the snapshot and report. */
static void ha_snap_install(struct ha_snap *s)
{
    /* A daemon that applied some log already may hold keys the snapshot's state has deleted. */
    if (s->applied > 0)
        records_clear(records_live(s->srv), RECORD_REPLICA);
    size_t len = evbuffer_get_length(s->buf);
    uint64_t n = ha_snap_apply(s->srv, evbuffer_pullup(s->buf, (ssize_t)len), len);
    evbuffer_drain(s->buf, len);
    s->mode = HA_SNAP_IDLE;
    log_msg(LOG_INFO, "ha: loaded the snapshot of revision %" PRId64 " (%" PRIu64 " records)", s->rev, n);
    s->done(s->done_arg, s->rev);
}

static void ha_snap_read_chunks(struct ha_snap *s, const char *from, size_t flen);

/* A page of chunks arrived: collect them in order, then read on or install. */
static void ha_snap_on_chunks(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha_snap *s = arg;
    if (!ha_snap_answer_ok(s, err)) {
        if (s->call_epoch == s->epoch && s->mode == HA_SNAP_LOADING)
            ha_snap_abandon(s, ha_etcd_strerror(err));
        return;
    }
    size_t i;
    json_t *j;
    struct ha_etcd_kv kv = {0};
    json_array_foreach(json_object_get(reply, "kvs"), i, j)
    {
        ha_etcd_kv_clear(&kv);
        if (ha_etcd_kv_decode(j, &kv) != 0 || evbuffer_add(s->buf, kv.val, kv.vlen) != 0) {
            ha_snap_abandon(s, "malformed chunk");
            return;
        }
        s->chunk++;
    }
    if (json_is_true(json_object_get(reply, "more")) && kv.key) {
        /* The next page starts just after the last key read. */
        char from[640];
        size_t flen = kv.klen < sizeof from - 1 ? kv.klen : sizeof from - 2;
        memcpy(from, kv.key, flen);
        from[flen] = '\0';
        ha_etcd_kv_clear(&kv);
        ha_snap_read_chunks(s, from, flen + 1);
        return;
    }
    ha_etcd_kv_clear(&kv);
    if (s->chunk != s->nchunks) {
        ha_snap_abandon(s, "chunks missing");
        return;
    }
    ha_snap_install(s);
}

/* Ask for chunks of the snapshot from key from on, two at a time, at the pinned revision. */
static void ha_snap_read_chunks(struct ha_snap *s, const char *from, size_t flen)
{
    char dir[600];
    snprintf(dir, sizeof dir, "%s%016" PRIx64 "/", s->prefix, (uint64_t)s->rev);
    json_t *b = json_pack("{s:o,s:o,s:s,s:o}", "key", ha_etcd_b64(from, flen), "range_end",
                          ha_etcd_prefix_end(dir, strlen(dir)), "limit", "2", "revision", ha_snap_i64(s->pin));
    if (ha_snap_call(s, "/v3/kv/range", b, ha_snap_on_chunks) != 0)
        ha_snap_abandon(s, "cannot send a read");
}

/* PREFIX/snap/current answered: load the snapshot it names when it is newer than what is applied. */
static void ha_snap_on_pointer(void *arg, enum ha_etcd_err err, json_t *reply)
{
    struct ha_snap *s = arg;
    if (!ha_snap_answer_ok(s, err)) {
        if (s->call_epoch == s->epoch && s->mode == HA_SNAP_LOADING)
            ha_snap_abandon(s, ha_etcd_strerror(err));
        return;
    }
    s->pin = ha_etcd_int(json_object_get(reply, "header"), "revision", 0);
    *s->pin_out = s->pin;
    struct ha_etcd_kv kv;
    json_t *j = json_array_get(json_object_get(reply, "kvs"), 0);
    long long rev = 0;
    size_t n = 0;
    if (j && ha_etcd_kv_decode(j, &kv) == 0) {
        if (sscanf((const char *)kv.val, "%lld %zu", &rev, &n) != 2)
            rev = 0;
        ha_etcd_kv_clear(&kv);
    }
    if (rev <= s->applied) {
        s->mode = HA_SNAP_IDLE;
        s->done(s->done_arg, s->applied);
        return;
    }
    s->rev = rev;
    s->nchunks = n;
    s->chunk = 0;
    char dir[600];
    snprintf(dir, sizeof dir, "%s%016" PRIx64 "/", s->prefix, (uint64_t)s->rev);
    ha_snap_read_chunks(s, dir, strlen(dir));
}

/* Read PREFIX/snap/current and load the snapshot it names when it is newer than applied. */
void ha_snap_load(struct ha_snap *s, int64_t applied, ha_snap_loaded_fn done, void *arg, int64_t *pin_out)
{
    ha_snap_cancel(s);
    s->mode = HA_SNAP_LOADING;
    s->applied = applied;
    s->done = done;
    s->done_arg = arg;
    s->pin_out = pin_out;
    char key[600];
    snprintf(key, sizeof key, "%scurrent", s->prefix);
    if (ha_snap_call(s, "/v3/kv/range", json_pack("{s:o}", "key", ha_snap_key(key)), ha_snap_on_pointer) != 0)
        ha_snap_abandon(s, "cannot send a read");
}

/* ------------------------------------------------------------------- owner */

/* Snapshots under prefix, written only while leader_key holds the writer's lease. */
struct ha_snap *ha_snap_new(struct server *srv, struct ha_etcd *etcd, const char *prefix, const char *leader_key)
{
    struct ha_snap *s = calloc(1, sizeof *s);
    if (!s || !(s->buf = evbuffer_new())) {
        free(s);
        return NULL;
    }
    s->srv = srv;
    s->etcd = etcd;
    snprintf(s->prefix, sizeof s->prefix, "%ssnap/", prefix);
    snprintf(s->log_prefix, sizeof s->log_prefix, "%slog/", prefix);
    snprintf(s->leader_key, sizeof s->leader_key, "%s", leader_key);
    return s;
}

/* Stop and free; NULL is fine. */
void ha_snap_free(struct ha_snap *s)
{
    if (!s)
        return;
    evbuffer_free(s->buf);
    free(s);
}

/* Abandon a snapshot being written or loaded (its callback is not run). */
void ha_snap_cancel(struct ha_snap *s)
{
    s->epoch++;
    s->mode = HA_SNAP_IDLE;
    evbuffer_drain(s->buf, evbuffer_get_length(s->buf));
}

/* Whether a snapshot is being written. */
int ha_snap_busy(const struct ha_snap *s)
{
    return s->mode == HA_SNAP_WRITING;
}
