/* Named counters of the daemon: a plain array a dump or a metrics endpoint can walk. */
#ifndef MUSTERD_STATS_H
#define MUSTERD_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Every fixed counter: enum tail and public name.  limit_* count one trip reason each. */
#define STATS_LIST(X)                                     \
    X(CONN_ACCEPTED, "connections_accepted")              \
    X(CONN_CURRENT, "connections_current")                \
    X(CONN_CLOSED, "connections_closed")                  \
    X(ACCEPT_EMFILE, "accept_emfile")                     \
    X(ACCEPT_ERRORS, "accept_errors")                     \
    X(HELLO_OK, "hello_ok")                               \
    X(HELLO_TIMEOUT, "hello_timeout")                     \
    X(HELLO_BAD, "hello_bad")                             \
    X(AUTH_FAILED, "auth_failed")                         \
    X(AUTH_THROTTLED, "auth_throttled")                   \
    X(SOURCES_EVICTED, "sources_evicted")                 \
    X(NS_REFUSED, "namespace_refused")                    \
    X(FRAMES_IN, "frames_in")                             \
    X(FRAMES_OUT, "frames_out")                           \
    X(BYTES_IN, "bytes_in")                               \
    X(BYTES_OUT, "bytes_out")                             \
    X(BAD_FRAME, "bad_frame")                             \
    X(REQUESTS, "requests")                               \
    X(RESPONSES_ERROR, "responses_error")                 \
    X(UNKNOWN_OP, "unknown_op")                           \
    X(UNAUTHENTICATED, "unauthenticated")                 \
    X(FORBIDDEN, "forbidden")                             \
    X(BAD_REQUEST, "bad_request")                         \
    X(LIMIT_CONNECTIONS, "limit_connections")             \
    X(LIMIT_FRAME, "limit_frame")                         \
    X(LIMIT_PRE_HELLO_FRAME, "limit_pre_hello_frame")     \
    X(LIMIT_KEY, "limit_key")                             \
    X(LIMIT_VALUE, "limit_value")                         \
    X(LIMIT_KEYS_PER_REQUEST, "limit_keys_per_request")   \
    X(LIMIT_KEYS_PER_NS, "limit_keys_per_ns")             \
    X(LIMIT_BYTES_PER_NS, "limit_bytes_per_ns")           \
    X(LIMIT_WAITERS, "limit_waiters")                     \
    X(LIMIT_WAITERS_PER_NS, "limit_waiters_per_ns")       \
    X(LIMIT_WAITERS_PER_CONN, "limit_waiters_per_conn")   \
    X(LIMIT_WAITERS_PER_SOURCE, "limit_waiters_per_source") \
    X(LIMIT_WATCHES, "limit_watches")                     \
    X(LIMIT_WATCHES_PER_CONN, "limit_watches_per_conn")   \
    X(LIMIT_WATCH_OUTPUT, "limit_watch_output")           \
    X(LIMIT_NAMESPACES, "limit_namespaces")               \
    X(LIMIT_NAMESPACES_PER_SOURCE, "limit_namespaces_per_source") \
    X(LIMIT_NS_CREATES_PER_SOURCE, "limit_namespace_creates_per_source") \
    X(LIMIT_RESPONSE, "limit_response")                   \
    X(LIMIT_OUTPUT, "limit_output")                       \
    X(LIMIT_BUFFER_MEMORY, "limit_buffer_memory")         \
    X(BUFFER_BYTES, "buffer_bytes_current")               \
    X(OUTPUT_PAUSED, "output_paused")                     \
    X(IDLE_CLOSED, "idle_closed")                         \
    X(REQUEST_TIMEOUT, "request_timeout")                 \
    X(WAITS_PARKED, "waits_parked")                       \
    X(WAITERS_CURRENT, "waiters_current")                 \
    X(WAITS_WOKEN, "waits_woken")                         \
    X(WAITS_CANCELED, "waits_canceled")                   \
    X(TIMEOUTS, "timeouts")                               \
    X(BARRIER_ROUNDS, "barrier_rounds")                   \
    X(WATCH_EVENTS, "watch_events")                       \
    X(EVENTS_PUSHED, "events_pushed")                     \
    X(NAMESPACES, "namespaces")                           \
    X(NS_RECLAIMED, "namespaces_reclaimed")               \
    X(NS_RECLAIMED_IDLE, "namespaces_reclaimed_idle")     \
    X(NS_SWEEP_SLICE_US, "ns_sweep_slice_max_us")         \
    X(SHUTDOWN_ANSWERED, "shutdown_answered")             \
    X(RDZV_ROUNDS, "rdzv_rounds")                         \
    X(RDZV_GENERATIONS, "rdzv_generations")               \
    X(RDZV_FAILURES, "rdzv_failures")                     \
    X(RDZV_HEARTBEAT_TIMEOUTS, "rdzv_heartbeat_timeouts") \
    X(RDZV_PARKED_JOINS, "rdzv_parked_joins")             \
    X(RDZV_RECOVERIES, "rdzv_recoveries")                 \
    X(RDZV_RECOVERY_FAILED, "rdzv_recovery_failed")       \
    X(RDZV_ARMED, "rdzv_armed_recover_joins")             \
    X(RDZV_EXCLUDED, "rdzv_excluded")                     \
    X(RDZV_BAD_RECOVER, "rdzv_bad_recover_joins")         \
    X(RDZV_REPORTS, "rdzv_reports")                       \
    X(RDZV_BAD_REPORTS, "rdzv_bad_reports")               \
    X(RDZV_REPORTS_HELD, "rdzv_reports_held")             \
    X(RDZV_AGREE_US, "rdzv_recovery_agree_us_last")       \
    X(RDZV_ANSWER_US, "rdzv_recovery_answer_us_last")     \
    X(RDZV_DUPLICATE_IDS, "rdzv_duplicate_ids")           \
    X(RDZV_LIMIT_STANDBYS, "rdzv_limit_standbys")         \
    X(RDZV_STANDBYS_ADMITTED, "rdzv_standbys_admitted")   \
    X(TS_ACCEPTED, "tcpstore_connections_accepted")       \
    X(TS_CURRENT, "tcpstore_connections_current")         \
    X(TS_VALIDATE_ERA, "tcpstore_validate_era")           \
    X(TS_LEGACY_ERA, "tcpstore_legacy_era")               \
    X(TS_REQUESTS, "tcpstore_requests")                   \
    X(TS_BAD_REQUEST, "tcpstore_bad_request")             \
    X(TS_UNSUPPORTED, "tcpstore_unsupported")             \
    X(TS_WAITS_CANCELED, "tcpstore_waits_canceled")       \
    X(TS_WAITS_ABANDONED, "tcpstore_waits_abandoned")     \
    X(TS_WATCHES, "tcpstore_watches_current")             \
    X(TS_WATCH_CALLBACKS, "tcpstore_watch_callbacks")     \
    X(TS_VALIDATE_TIMEOUT, "tcpstore_validate_timeout")   \
    X(TS_LIMIT_KEY, "limit_tcpstore_key")                 \
    X(TS_LIMIT_VALUE, "limit_tcpstore_value")             \
    X(TS_LIMIT_KEYS, "limit_tcpstore_keys_per_request")   \
    X(TS_LIMIT_REQUEST, "limit_tcpstore_request")         \
    X(TS_LIMIT_STORE, "limit_tcpstore_store")             \
    X(HTTP_REQUESTS, "http_requests")                     \
    X(HTTP_NOT_FOUND, "http_not_found")                   \
    X(HTTP_CACHE_HITS, "http_cache_hits")                 \
    X(HTTP_PAGES_CUT, "http_pages_cut")                   \
    X(HTTP_BUFFER_BYTES, "http_buffer_bytes_current")     \
    X(LIMIT_HTTP_BUFFER, "limit_http_buffer_memory")      \
    X(HTTP_BAD_HOST, "http_bad_host")                     \
    X(METRICS_NS_UNLISTED, "metrics_namespaces_unlisted") \
    X(RDZV_TIMELINE_BYTES, "rdzv_timeline_bytes_current") \
    X(PERSIST_RECORDS, "persist_records")                 \
    X(PERSIST_BYTES, "persist_bytes")                     \
    X(PERSIST_FSYNCS, "persist_fsyncs")                   \
    X(PERSIST_SNAPSHOTS, "persist_snapshots")             \
    X(PERSIST_ERRORS, "persist_errors")                   \
    X(PERSIST_HELD, "persist_held_frames")                \
    X(HA_BATCHES, "ha_log_batches")                       \
    X(HA_RECORDS, "ha_log_records")                       \
    X(HA_APPEND_US, "ha_log_append_us")                   \
    X(HA_APPEND_RETRIES, "ha_log_append_retries")         \
    X(HA_REPLAYED, "ha_log_replayed")                     \
    X(HA_SNAPSHOTS, "ha_snapshots")                       \
    X(TLS_HANDSHAKE_FAILURES, "tls_handshake_failures")

#define STATS_ENUM_ROW(id, name) STAT_##id,
enum stat_id { STATS_LIST(STATS_ENUM_ROW) STAT_COUNT };
#undef STATS_ENUM_ROW

/* Slots for per-op counters, indexed by the Request op case. */
#define STATS_OP_SLOTS 64

/* Upper bounds (microseconds) of the per-op latency buckets; one more bucket holds the rest. */
#define STATS_LAT_BOUNDS_US 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000
#define STATS_LAT_BUCKETS 14

struct stats {
    uint64_t c[STAT_COUNT];
    uint64_t op[STATS_OP_SLOTS];
    uint64_t lat[STATS_OP_SLOTS][STATS_LAT_BUCKETS]; /* time per op from its frame taken to its handler done, by bucket */
    uint64_t lat_sum_ns[STATS_OP_SLOTS];
};

/* The bucket bounds as an array of STATS_LAT_BUCKETS - 1 values. */
extern const uint64_t stats_lat_bounds_us[STATS_LAT_BUCKETS - 1];

/* Add one to counter id. */
static inline void stats_inc(struct stats *s, enum stat_id id)
{
    s->c[id]++;
}

/* Add n to counter id. */
static inline void stats_add(struct stats *s, enum stat_id id, uint64_t n)
{
    s->c[id] += n;
}

/* Take one from counter id (a gauge such as waiters_current). */
static inline void stats_dec(struct stats *s, enum stat_id id)
{
    s->c[id]--;
}

/* Count one handler run of op_case that took ns nanoseconds in its latency histogram. */
void stats_observe(struct stats *s, unsigned op_case, uint64_t ns);
/* The public name of counter id. */
const char *stats_name(enum stat_id id);
/* Call fn for every counter (fixed ones, then "op_<name>" per op) with its value. */
/* The name of op slot i, or NULL for an unused slot (the daemon's op table answers it). */
typedef const char *(*stats_op_name_fn)(unsigned i);
void stats_each(const struct stats *s, stats_op_name_fn op_name, void (*fn)(void *arg, const char *name, uint64_t value),
                void *arg);
/* Write every counter to the log at level (LOG_ALWAYS: whatever the filter) between "stats begin"
 * and "stats end" lines. */
void stats_dump(const struct stats *s, stats_op_name_fn op_name, int level, const char *why);

#endif
