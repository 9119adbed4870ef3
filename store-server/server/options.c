/*
 * The options table: every musterd flag is one row naming its long flag,
 * its MUSTER_* environment twin, type, default, field, help line and, for a
 * limit, the counter that counts its trips.  Parsing, --help and
 * --print-config are generic walks over the table.
 */
#include "options.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#include "log.h"
#include "stats.h"

enum opt_type { OPT_UINT, OPT_STR, OPT_BOOL, OPT_LIST };
enum opt_unit { UNIT_COUNT, UNIT_BYTES, UNIT_MS };
enum opt_source { SRC_DEFAULT, SRC_ENV, SRC_FLAG };

#define OPTF_SECRET 1u /* never printed */

struct opt_row {
    const char *flag;
    const char *env;
    enum opt_type type;
    enum opt_unit unit;
    const char *def;
    size_t off;
    const char *help;
    int stat; /* enum stat_id counting trips of this limit, or -1 */
    uint64_t max;
    unsigned flags;
};

#define OFF(f) offsetof(struct options, f)
#define U32 UINT32_MAX
#define NOCAP UINT64_MAX

/* The table.  Sizes take K/M/G (binary) suffixes; durations are milliseconds
 * unless suffixed s, m or h. */
static const struct opt_row opt_rows[] = {
    {"listen", "MUSTER_LISTEN", OPT_LIST, UNIT_COUNT, "0.0.0.0:29600", OFF(listen),
     "HOST:PORT to listen on (repeatable; [v6]:port; port 0 picks one); only the given addresses are bound", -1,
     0, 0},
    {"port-file", "MUSTER_PORT_FILE", OPT_STR, UNIT_COUNT, "", OFF(port_file),
     "write the first listener's port here, one line, once every listener is bound", -1, 0, 0},
    {"max-connections", "MUSTER_MAX_CONNECTIONS", OPT_UINT, UNIT_COUNT, "10000", OFF(max_connections),
     "open client connections; one more gets a LIMIT error frame and is closed", STAT_LIMIT_CONNECTIONS, NOCAP, 0},
    {"max-frame", "MUSTER_MAX_FRAME", OPT_UINT, UNIT_BYTES, "16448K", OFF(max_frame),
     "largest frame body after hello (at least max-value + max-key + 1K)", STAT_LIMIT_FRAME, U32, 0},
    {"pre-hello-max-frame", "MUSTER_PRE_HELLO_MAX_FRAME", OPT_UINT, UNIT_BYTES, "4K", OFF(pre_hello_max_frame),
     "largest frame body before hello", STAT_LIMIT_PRE_HELLO_FRAME, U32, 0},
    {"max-key", "MUSTER_MAX_KEY", OPT_UINT, UNIT_BYTES, "8K", OFF(max_key),
     "longest key (also barrier names and prefixes)", STAT_LIMIT_KEY, U32, 0},
    {"max-value", "MUSTER_MAX_VALUE", OPT_UINT, UNIT_BYTES, "8M", OFF(max_value),
     "largest value, also after append", STAT_LIMIT_VALUE, U32, 0},
    {"max-keys-per-request", "MUSTER_MAX_KEYS_PER_REQUEST", OPT_UINT, UNIT_COUNT, "128K", OFF(max_keys_per_request),
     "keys in one check/wait/multi_get/multi_set, and the largest list page", STAT_LIMIT_KEYS_PER_REQUEST, U32, 0},
    {"max-keys-per-ns", "MUSTER_MAX_KEYS_PER_NS", OPT_UINT, UNIT_COUNT, "4M", OFF(max_keys_per_ns),
     "keys (and barrier names) in one namespace", STAT_LIMIT_KEYS_PER_NS, NOCAP, 0},
    {"max-bytes-per-ns", "MUSTER_MAX_BYTES_PER_NS", OPT_UINT, UNIT_BYTES, "4G", OFF(max_bytes_per_ns),
     "key plus value bytes stored in one namespace", STAT_LIMIT_BYTES_PER_NS, NOCAP, 0},
    {"max-namespaces", "MUSTER_MAX_NAMESPACES", OPT_UINT, UNIT_COUNT, "100000", OFF(max_namespaces),
     "namespaces (jobs) this server holds", STAT_LIMIT_NAMESPACES, NOCAP, 0},
    {"max-namespaces-per-source", "MUSTER_MAX_NAMESPACES_PER_SOURCE", OPT_UINT, UNIT_COUNT, "1024",
     OFF(max_namespaces_per_source),
     "namespaces that hellos from one address (an IPv6 /64) created and that still exist; a hello that would "
     "create one more is LIMIT", STAT_LIMIT_NAMESPACES_PER_SOURCE, NOCAP, 0},
    {"ns-idle-timeout", "MUSTER_NS_IDLE_TIMEOUT", OPT_UINT, UNIT_MS, "60000", OFF(ns_idle_timeout),
     "forget a namespace that has held no keys, connections, parked requests, watches, barriers or rendezvous "
     "state for this long (0 = never)", STAT_NS_RECLAIMED, U32, 0},
    {"ns-reclaim-after", "MUSTER_NS_RECLAIM_AFTER", OPT_UINT, UNIT_MS, "24h", OFF(ns_reclaim_after),
     "drop a namespace, keys included, that no connection, parked request, watch or live rendezvous generation "
     "has used for this long (0 = never; namespaces named by --token or --token-file are kept)",
     STAT_NS_RECLAIMED_IDLE, NOCAP, 0},
    {"max-namespace-creates-per-source", "MUSTER_MAX_NAMESPACE_CREATES_PER_SOURCE", OPT_UINT, UNIT_COUNT, "600",
     OFF(max_ns_creates_per_source),
     "namespaces hellos from one address (an IPv6 /64) may create per minute, in bursts of up to that many; one "
     "more is LIMIT (0 = no limit)", STAT_LIMIT_NS_CREATES_PER_SOURCE, NOCAP, 0},
    {"closed-namespaces", "MUSTER_CLOSED_NAMESPACES", OPT_BOOL, UNIT_COUNT, "false", OFF(closed_namespaces),
     "accept hellos only to namespaces named by --token or --token-file; others are UNAUTHENTICATED",
     STAT_NS_REFUSED, 0, 0},
    {"max-waiters", "MUSTER_MAX_WAITERS", OPT_UINT, UNIT_COUNT, "1M", OFF(max_waiters),
     "parked requests (waits, blocking gets, barrier arrivals) across all connections", STAT_LIMIT_WAITERS, NOCAP,
     0},
    {"max-waiters-per-ns", "MUSTER_MAX_WAITERS_PER_NS", OPT_UINT, UNIT_COUNT, "256K", OFF(max_waiters_per_ns),
     "parked requests in one namespace, so one job cannot take --max-waiters from the others (at most half of "
     "--max-waiters whatever this says)",
     STAT_LIMIT_WAITERS_PER_NS, NOCAP, 0},
    {"max-waiters-per-conn", "MUSTER_MAX_WAITERS_PER_CONN", OPT_UINT, UNIT_COUNT, "64K", OFF(max_waiters_per_conn),
     "parked requests of one native-protocol connection (a TCPStore connection parks one at a time)",
     STAT_LIMIT_WAITERS_PER_CONN, NOCAP, 0},
    {"max-waiters-per-source", "MUSTER_MAX_WAITERS_PER_SOURCE", OPT_UINT, UNIT_COUNT, "256K",
     OFF(max_waiters_per_source),
     "parked requests of all connections from one address (an IPv6 /64 counts as one), in all its namespaces "
     "(at most half of --max-waiters whatever this says, so one client always leaves the other half)",
     STAT_LIMIT_WAITERS_PER_SOURCE, NOCAP, 0},
    {"max-watches", "MUSTER_MAX_WATCHES", OPT_UINT, UNIT_COUNT, "100000", OFF(max_watches),
     "watches across all connections", STAT_LIMIT_WATCHES, NOCAP, 0},
    {"max-watches-per-conn", "MUSTER_MAX_WATCHES_PER_CONN", OPT_UINT, UNIT_COUNT, "1024", OFF(max_watches_per_conn),
     "watches one connection may hold", STAT_LIMIT_WATCHES_PER_CONN, NOCAP, 0},
    {"max-output", "MUSTER_MAX_OUTPUT", OPT_UINT, UNIT_BYTES, "32M", OFF(max_output),
     "output buffered per connection before its requests stop being read (at least max-frame); a watch event "
     "that would pass it ends the watch instead (counted as limit_watch_output)", STAT_LIMIT_OUTPUT, NOCAP, 0},
    {"max-buffer-memory", "MUSTER_MAX_BUFFER_MEMORY", OPT_UINT, UNIT_BYTES, "1G", OFF(max_buffer_memory),
     "input and output buffered across all connections; past it the largest holders are closed (0 = no bound; "
     "else at least max-frame + max-output)", STAT_LIMIT_BUFFER_MEMORY, NOCAP, 0},
    {"slow-timeout", "MUSTER_SLOW_TIMEOUT", OPT_UINT, UNIT_MS, "30000", OFF(slow_timeout),
     "close a connection whose output stays above max-output this long", STAT_LIMIT_OUTPUT, U32, 0},
    {"linger-timeout", "MUSTER_LINGER_TIMEOUT", OPT_UINT, UNIT_MS, "1000", OFF(linger_timeout),
     "after a closing connection's last bytes, wait this long for the peer's EOF (a fifth of it while "
     "draining) so unread input does not turn the close into a reset", -1, U32, 0},
    {"hello-timeout", "MUSTER_HELLO_TIMEOUT", OPT_UINT, UNIT_MS, "10000", OFF(hello_timeout),
     "close a connection that has not completed hello within this time", STAT_HELLO_TIMEOUT, U32, 0},
    {"idle-timeout", "MUSTER_IDLE_TIMEOUT", OPT_UINT, UNIT_MS, "0", OFF(idle_timeout),
     "close a connection with no request or reply this long and nothing pending (0 = never)", STAT_IDLE_CLOSED, U32, 0},
    {"tcp-keepalive", "MUSTER_TCP_KEEPALIVE", OPT_UINT, UNIT_MS, "10000", OFF(tcp_keepalive),
     "close a connection whose peer vanished without a FIN within about this long (keepalive probes; "
     "TCP_USER_TIMEOUT of the larger of this and slow-timeout; 0 = the kernel's defaults)", -1, U32, 0},
    {"request-timeout", "MUSTER_REQUEST_TIMEOUT", OPT_UINT, UNIT_MS, "30000", OFF(request_timeout),
     "close a connection whose request (frame) stays incomplete this long after its first byte (0 = never)",
     STAT_REQUEST_TIMEOUT, U32, 0},
    {"wait-timeout", "MUSTER_WAIT_TIMEOUT", OPT_UINT, UNIT_MS, "300000", OFF(wait_timeout),
     "deadline of a blocking op sent with timeout_ms = 0", -1, U32, 0},
    {"max-wait-timeout", "MUSTER_MAX_WAIT_TIMEOUT", OPT_UINT, UNIT_MS, "86400000", OFF(max_wait_timeout),
     "longer deadlines are cut to this", -1, U32, 0},
    {"max-standbys", "MUSTER_MAX_STANDBYS", OPT_UINT, UNIT_COUNT, "256", OFF(max_standbys),
     "rendezvous standbys one job may park (a join with standby set beyond it is refused LIMIT); on an untrusted "
     "network a namespace token decides who may stand by at all", STAT_RDZV_LIMIT_STANDBYS, U32, 0},
    {"recovery-timeout", "MUSTER_RECOVERY_TIMEOUT", OPT_UINT, UNIT_MS, "10000", OFF(recovery_timeout),
     "a rendezvous recovery round closes this long after it opened even if some survivors have not joined "
     "(they are excluded); a member lost during it extends it, at most twice", STAT_RDZV_RECOVERY_FAILED, U32, 0},
    {"heartbeat-timeout", "MUSTER_HEARTBEAT_TIMEOUT", OPT_UINT, UNIT_MS, "3000", OFF(heartbeat_timeout),
     "a rendezvous member silent this long is lost (members heartbeat every third of it)", STAT_RDZV_HEARTBEAT_TIMEOUTS, U32, 0},
    {"drain-timeout", "MUSTER_DRAIN_TIMEOUT", OPT_UINT, UNIT_MS, "5000", OFF(drain_timeout),
     "on SIGTERM/SIGINT, longest wait for clients to take their last replies", -1, U32, 0},
    {"emfile-retry-ms", "MUSTER_EMFILE_RETRY_MS", OPT_UINT, UNIT_MS, "100", OFF(emfile_retry_ms),
     "pause accepting this long when out of file descriptors", STAT_ACCEPT_EMFILE, U32, 0},
    {"nodelay", "MUSTER_NODELAY", OPT_BOOL, UNIT_COUNT, "true", OFF(nodelay),
     "set TCP_NODELAY on client connections", -1, 0, 0},
    {"token", "MUSTER_TOKEN", OPT_LIST, UNIT_COUNT, "", OFF(token),
     "NS=TOKEN: namespace NS requires TOKEN (repeatable; visible in ps, prefer --token-file); namespaces without "
     "one are open", STAT_AUTH_FAILED, 0,
     OPTF_SECRET},
    {"token-file", "MUSTER_TOKEN_FILE", OPT_STR, UNIT_COUNT, "", OFF(token_file),
     "file of 'NS TOKEN' lines ('#' comments), read at start", -1, 0, 0},
    {"auth-backoff", "MUSTER_AUTH_BACKOFF", OPT_UINT, UNIT_MS, "100", OFF(auth_backoff),
     "after a wrong token, hellos from that address naming a token-protected namespace are held this long "
     "before their token is compared (LIMIT with the wait if it would outlast --hello-timeout), doubling with "
     "each further failure (0 = off)", STAT_AUTH_THROTTLED, U32, 0},
    {"auth-backoff-max", "MUSTER_AUTH_BACKOFF_MAX", OPT_UINT, UNIT_MS, "5000", OFF(auth_backoff_max),
     "longest --auth-backoff wait; an address without failures this long after its wait starts over",
     STAT_AUTH_THROTTLED, U32, 0},
    {"max-sources", "MUSTER_MAX_SOURCES", OPT_UINT, UNIT_COUNT, "64K", OFF(max_sources),
     "client addresses remembered for --auth-backoff; beyond it the longest-quiet one is forgotten",
     STAT_SOURCES_EVICTED, NOCAP, 0},
    {"log-level", "MUSTER_LOG_LEVEL", OPT_STR, UNIT_COUNT, "info", OFF(log_level),
     "error, warn, info or debug", -1, 0, 0},
    {"log-format", "MUSTER_LOG_FORMAT", OPT_STR, UNIT_COUNT, "text", OFF(log_format),
     "text, or json: one object per line with ts (RFC 3339 UTC, ms), level, msg and the line's fields", -1, 0, 0},
    {"log-file", "MUSTER_LOG_FILE", OPT_STR, UNIT_COUNT, "", OFF(log_file),
     "append the log here instead of stderr; SIGHUP reopens it", -1, 0, 0},
    {"tcpstore-listen", "MUSTER_TCPSTORE_LISTEN", OPT_STR, UNIT_COUNT, "", OFF(tcpstore_listen),
     "HOST:PORT of a listener speaking torch.distributed's TCPStore protocol (off when empty)", -1, 0, 0},
    {"tcpstore-port-file", "MUSTER_TCPSTORE_PORT_FILE", OPT_STR, UNIT_COUNT, "", OFF(tcpstore_port_file),
     "write the TCPStore listener's port here, one line, before --port-file is written", -1, 0, 0},
    {"tcpstore-namespace", "MUSTER_TCPSTORE_NAMESPACE", OPT_STR, UNIT_COUNT, "tcpstore", OFF(tcpstore_namespace),
     "namespace holding the TCPStore listener's keys (shared with native clients; no token allowed)", -1, 0, 0},
    {"tcpstore-max-key", "MUSTER_TCPSTORE_MAX_KEY", OPT_UINT, UNIT_BYTES, "8K", OFF(tcpstore_max_key),
     "longest TCPStore key; a longer one closes the connection", STAT_TS_LIMIT_KEY, U32, 0},
    {"tcpstore-max-value", "MUSTER_TCPSTORE_MAX_VALUE", OPT_UINT, UNIT_BYTES, "8M", OFF(tcpstore_max_value),
     "largest TCPStore value (--max-value also bounds what is stored)", STAT_TS_LIMIT_VALUE, U32, 0},
    {"tcpstore-max-keys-per-request", "MUSTER_TCPSTORE_MAX_KEYS_PER_REQUEST", OPT_UINT, UNIT_COUNT, "128K",
     OFF(tcpstore_max_keys), "keys in one TCPStore check/wait/multi_get/multi_set", STAT_TS_LIMIT_KEYS, U32, 0},
    {"tcpstore-max-request", "MUSTER_TCPSTORE_MAX_REQUEST", OPT_UINT, UNIT_BYTES, "64M", OFF(tcpstore_max_request),
     "bytes of one TCPStore request, and of input held unread behind a parked one (more closes it)", STAT_TS_LIMIT_REQUEST, NOCAP, 0},
    {"tcpstore-validate-timeout", "MUSTER_TCPSTORE_VALIDATE_TIMEOUT", OPT_UINT, UNIT_MS, "10000",
     OFF(tcpstore_validate_timeout),
     "close a TCPStore connection whose first request is still incomplete this long after its first byte (0 = "
     "never)", STAT_TS_VALIDATE_TIMEOUT, U32, 0},
    {"metrics-listen", "MUSTER_METRICS_LISTEN", OPT_STR, UNIT_COUNT, "", OFF(metrics_listen),
     "HOST:PORT for HTTP /metrics, /healthz, /readyz and /v1/jobs (unauthenticated; empty = off)", -1, 0, 0},
    {"metrics-port-file", "MUSTER_METRICS_PORT_FILE", OPT_STR, UNIT_COUNT, "", OFF(metrics_port_file),
     "write the metrics listener's port here once it is bound", -1, 0, 0},
    {"metrics-timeout", "MUSTER_METRICS_TIMEOUT", OPT_UINT, UNIT_MS, "10000", OFF(metrics_timeout),
     "close an HTTP connection idle this long (whole seconds; enforced by evhttp, not counted)", -1, U32, 0},
    {"metrics-max-request", "MUSTER_METRICS_MAX_REQUEST", OPT_UINT, UNIT_BYTES, "8K", OFF(metrics_max_request),
     "largest HTTP request headers or body (enforced by evhttp with a 4xx reply, not counted)", -1, U32, 0},
    {"status-page-jobs", "MUSTER_STATUS_PAGE_JOBS", OPT_UINT, UNIT_COUNT, "100", OFF(status_page_jobs),
     "jobs in one page of /v1/status and /v1/jobs (broken and running first; ?offset= and ?limit= page on); "
     "the counts by state always cover every job", STAT_HTTP_PAGES_CUT, U32, 0},
    {"http-cache", "MUSTER_HTTP_CACHE", OPT_UINT, UNIT_MS, "1000", OFF(http_cache),
     "serve a rendered HTTP answer (/metrics, /v1/...) again for this long instead of rendering it on the loop "
     "for each GET (0 = render every time)", STAT_HTTP_CACHE_HITS, U32, 0},
    {"metrics-max-namespaces", "MUSTER_METRICS_MAX_NAMESPACES", OPT_UINT, UNIT_COUNT, "100",
     OFF(metrics_max_namespaces),
     "namespaces given their own /metrics series (broken first, then the most connections and bytes); the rest "
     "are summed into namespace=\"\",other=\"true\" samples (0 = none listed)", STAT_METRICS_NS_UNLISTED, U32, 0},
    {"http-allowed-hosts", "MUSTER_HTTP_ALLOWED_HOSTS", OPT_LIST, UNIT_COUNT, "", OFF(http_allowed_hosts),
     "host names the HTTP listener answers besides IP literals, localhost, this machine's name and the "
     "--metrics-listen host (repeatable or comma-separated); another Host header gets 421 (DNS rebinding)",
     STAT_HTTP_BAD_HOST, 0, 0},
    {"data-dir", "MUSTER_DATA_DIR", OPT_STR, UNIT_COUNT, "", OFF(data_dir),
     "keep state in this directory (log + snapshot) and recover it at start; empty = memory only", -1, 0, 0},
    {"fsync", "MUSTER_FSYNC", OPT_STR, UNIT_COUNT, "always", OFF(fsync),
     "with --data-dir: always (replies wait for fsync; survives power loss), everysec (replies wait for the "
     "write and are fsynced within a second; a power loss may lose the last second) or never (the kernel decides)", -1, 0, 0},
    {"compact-bytes", "MUSTER_COMPACT_BYTES", OPT_UINT, UNIT_BYTES, "64M", OFF(compact_bytes),
     "start a new log segment and compact older ones into the snapshot once a segment reaches this size",
     STAT_PERSIST_SNAPSHOTS, NOCAP, 0},
    {"repair-log", "MUSTER_REPAIR_LOG", OPT_BOOL, UNIT_COUNT, "false", OFF(repair_log),
     "with --data-dir: start even though the directory is damaged or incomplete, cutting the log at the first "
     "damage and accepting a missing snapshot or segment (every loss is logged; cut bytes are kept in "
     "*.dropped.* files); for one deliberate start, never as a standing setting", -1, 0, 0},
#ifdef MUSTER_HAVE_HA
    {"ha", "MUSTER_HA", OPT_STR, UNIT_COUNT, "", OFF(ha),
     "etcd://HOST:PORT[,HOST:PORT...]/PREFIX: run as one of a high-availability set elected through etcd; "
     "standbys answer NOT_LEADER naming the leader (off when empty)", -1, 0, 0},
    {"ha-ttl", "MUSTER_HA_TTL", OPT_UINT, UNIT_MS, "2000", OFF(ha_ttl),
     "with --ha: the leader's lease; a standby takes over this long after the leader is lost (whole seconds, "
     "at least 1s)", -1, U32, 0},
    {"ha-batch-bytes", "MUSTER_HA_BATCH_BYTES", OPT_UINT, UNIT_BYTES, "1M", OFF(ha_batch_bytes),
     "with --ha: most bytes of log records in one etcd append (keep under etcd's --max-request-bytes, 1.5M by "
     "default)", -1, NOCAP, 0},
    {"ha-snapshot-bytes", "MUSTER_HA_SNAPSHOT_BYTES", OPT_UINT, UNIT_BYTES, "16M", OFF(ha_snapshot_bytes),
     "with --ha: once the log in etcd holds this many bytes, the leader writes a snapshot there and deletes the "
     "log before it", -1, NOCAP, 0},
    {"ha-advertise", "MUSTER_HA_ADVERTISE", OPT_STR, UNIT_COUNT, "", OFF(ha_advertise),
     "with --ha: HOST:PORT standbys name as the leader's address (empty = the first listener's, a wildcard "
     "host replaced by the hostname)", -1, 0, 0},
#endif
    {"tls-listen", "MUSTER_TLS_LISTEN", OPT_LIST, UNIT_COUNT, "", OFF(tls_listen),
     "HOST:PORT to accept TLS connections on (repeatable; needs --tls-cert and --tls-key)", -1, 0, 0},
    {"tls-cert", "MUSTER_TLS_CERT", OPT_STR, UNIT_COUNT, "", OFF(tls_cert),
     "PEM certificate chain of the TLS listeners", -1, 0, 0},
    {"tls-key", "MUSTER_TLS_KEY", OPT_STR, UNIT_COUNT, "", OFF(tls_key), "PEM private key of --tls-cert", -1, 0, 0},
    {"tls-ca", "MUSTER_TLS_CA", OPT_STR, UNIT_COUNT, "", OFF(tls_ca),
     "PEM CA bundle: TLS clients must present a certificate it signed (empty = no client certificates)",
     STAT_TLS_HANDSHAKE_FAILURES, 0, 0},
};

#define OPT_NROWS (sizeof opt_rows / sizeof opt_rows[0])
_Static_assert(OPT_NROWS <= OPTIONS_MAX_ROWS, "raise OPTIONS_MAX_ROWS");

/* A field of o, addressed by a row. */
static void *opt_field(struct options *o, const struct opt_row *r)
{
    return (char *)o + r->off;
}

/* Report a usage error on stderr and return EX_USAGE. */
static int opt_usage(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "musterd: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\nmusterd: try 'musterd --help'\n");
    return EX_USAGE;
}

/* The multiplier for a unit suffix, or 0 when the suffix is not valid for the unit. */
static uint64_t opt_suffix(enum opt_unit unit, const char *s)
{
    if (!*s)
        return 1;
    if (unit == UNIT_MS) {
        if (strcmp(s, "ms") == 0)
            return 1;
        if (strcmp(s, "s") == 0)
            return 1000;
        if (strcmp(s, "m") == 0)
            return 60000;
        if (strcmp(s, "h") == 0)
            return 3600000;
        return 0;
    }
    static const char *const units = "KMGT";
    const char *p = strchr(units, toupper((unsigned char)s[0]));
    if (!p || !*p || (s[1] && strcmp(s + 1, "i") != 0 && strcmp(s + 1, "iB") != 0 && strcmp(s + 1, "B") != 0))
        return 0;
    return 1ull << (10 * (p - units + 1));
}

/* Parse an unsigned number with an optional unit suffix; 0 on success. */
static int opt_parse_uint(const struct opt_row *r, const char *text, uint64_t *out)
{
    if (!isdigit((unsigned char)text[0]))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    uint64_t mul = opt_suffix(r->unit, end);
    if (errno || mul == 0 || (mul > 1 && v > UINT64_MAX / mul))
        return -1;
    v *= mul;
    if (r->max && v > r->max)
        return -1;
    *out = v;
    return 0;
}

/* Parse a boolean word; 0 on success. */
static int opt_parse_bool(const char *text, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(text, yes[i]) == 0)
            return *out = 1, 0;
        if (strcmp(text, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* Drop every value of a list. */
static void opt_list_clear(struct strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Append a copy of text to a list; 0 on success. */
static int opt_list_add(struct strlist *l, const char *text, size_t len)
{
    char **v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v)
        return -1;
    l->v = v;
    if (!(v[l->n] = strndup(text, len)))
        return -1;
    l->n++;
    return 0;
}

/* Append each comma-separated item of text to a list; 0 on success. */
static int opt_list_split(struct strlist *l, const char *text)
{
    while (*text) {
        size_t n = strcspn(text, ",");
        if (n && opt_list_add(l, text, n) != 0)
            return -1;
        text += n + (text[n] == ',');
    }
    return 0;
}

/* Store one value into the row's field; 0 on success, else EX_USAGE after a message. */
static int opt_set(struct options *o, const struct opt_row *r, const char *text, const char *from)
{
    void *f = opt_field(o, r);
    switch (r->type) {
    case OPT_UINT:
        if (opt_parse_uint(r, text, f) != 0)
            return opt_usage("%s: invalid value '%s'", from, text);
        return 0;
    case OPT_BOOL:
        if (opt_parse_bool(text, f) != 0)
            return opt_usage("%s: expected true or false, got '%s'", from, text);
        return 0;
    case OPT_STR: {
        char *copy = strdup(text);
        if (!copy)
            return EX_OSERR;
        free(*(char **)f);
        *(char **)f = copy;
        return 0;
    }
    case OPT_LIST:
        return opt_list_split(f, text) == 0 ? 0 : EX_OSERR;
    }
    return EX_SOFTWARE;
}

/* Apply every default; 0 on success. */
static int opt_defaults(struct options *o)
{
    for (size_t i = 0; i < OPT_NROWS; i++) {
        int rc = opt_set(o, &opt_rows[i], opt_rows[i].def, "default");
        if (rc)
            return rc;
        o->source[i] = SRC_DEFAULT;
    }
    return 0;
}

/* Apply every environment twin that is set; 0 on success. */
static int opt_env(struct options *o)
{
    for (size_t i = 0; i < OPT_NROWS; i++) {
        const struct opt_row *r = &opt_rows[i];
        const char *v = getenv(r->env);
        if (!v)
            continue;
        if (r->type == OPT_LIST)
            opt_list_clear(opt_field(o, r));
        int rc = opt_set(o, r, v, r->env);
        if (rc)
            return rc;
        o->source[i] = SRC_ENV;
    }
    return 0;
}

/* The row whose flag is the len bytes at name, or NULL. */
static const struct opt_row *opt_find(const char *name, size_t len)
{
    for (size_t i = 0; i < OPT_NROWS; i++)
        if (strlen(opt_rows[i].flag) == len && strncmp(opt_rows[i].flag, name, len) == 0)
            return &opt_rows[i];
    return NULL;
}

enum opt_action { ACT_RUN, ACT_HELP, ACT_VERSION, ACT_PRINT_CONFIG };

/* Recognise the flags that are actions rather than settings; -1 when arg is none. */
static int opt_action(const char *arg)
{
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
        return ACT_HELP;
    if (strcmp(arg, "--version") == 0)
        return ACT_VERSION;
    if (strcmp(arg, "--print-config") == 0)
        return ACT_PRINT_CONFIG;
    return -1;
}

/* Apply argv ("--flag VALUE" or "--flag=VALUE"); sets *act; 0 on success. */
static int opt_argv(struct options *o, int argc, char **argv, int *act)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        int a = opt_action(arg);
        if (a >= 0) {
            if (a > *act)
                *act = a;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0)
            return opt_usage("unexpected argument '%s'%s", arg, "");
        const char *name = arg + 2, *eq = strchr(name, '=');
        const struct opt_row *r = opt_find(name, eq ? (size_t)(eq - name) : strlen(name));
        if (!r)
            return opt_usage("unknown option '%s'%s", arg, "");
        const char *val = eq ? eq + 1 : NULL;
        if (!val && r->type == OPT_BOOL)
            val = "true";
        if (!val && (val = (i + 1 < argc ? argv[++i] : NULL)) == NULL)
            return opt_usage("option '%s' needs a value%s", arg, "");
        size_t row = (size_t)(r - opt_rows);
        if (r->type == OPT_LIST && o->source[row] != SRC_FLAG)
            opt_list_clear(opt_field(o, r)); /* flags replace env and default lists */
        int rc = opt_set(o, r, val, arg);
        if (rc)
            return rc;
        o->source[row] = SRC_FLAG;
    }
    return 0;
}

/* Format a number as decimal text. */
static const char *opt_num(uint64_t v, char *buf, size_t n)
{
    snprintf(buf, n, "%" PRIu64, v);
    return buf;
}

/* Check the relations between options; 0 or EX_USAGE after a message. */
static int opt_validate(struct options *o)
{
    char a[32], b[32];
    if ((o->log_level_num = log_level_parse(o->log_level)) < 0)
        return opt_usage("--log-level: unknown level '%s'%s", o->log_level, " (error, warn, info, debug)");
    if ((o->log_format_num = log_format_parse(o->log_format)) < 0)
        return opt_usage("--log-format: unknown format '%s'%s", o->log_format, " (text, json)");
    if (o->listen.n == 0)
        return opt_usage("--listen: no address given%s%s", "", "");
    if (o->max_frame < o->max_value + o->max_key + 1024)
        return opt_usage("--max-frame (%s) must be at least --max-value + --max-key + 1024 (%s)",
                         opt_num(o->max_frame, a, sizeof a), opt_num(o->max_value + o->max_key + 1024, b, sizeof b));
    if (o->pre_hello_max_frame < 64 || o->pre_hello_max_frame > o->max_frame)
        return opt_usage("--pre-hello-max-frame (%s) must be between 64 and --max-frame (%s)",
                         opt_num(o->pre_hello_max_frame, a, sizeof a), opt_num(o->max_frame, b, sizeof b));
    if (o->max_output < o->max_frame)
        return opt_usage("--max-output (%s) must be at least --max-frame (%s)", opt_num(o->max_output, a, sizeof a),
                         opt_num(o->max_frame, b, sizeof b));
    if (o->max_buffer_memory && o->max_buffer_memory < o->max_frame + o->max_output)
        return opt_usage("--max-buffer-memory (%s) must be 0 or at least --max-frame + --max-output (%s)",
                         opt_num(o->max_buffer_memory, a, sizeof a), opt_num(o->max_frame + o->max_output, b, sizeof b));
    if (o->max_key == 0 || o->max_keys_per_request == 0 || o->max_connections == 0)
        return opt_usage("--max-key, --max-keys-per-request and --max-connections must be positive%s%s", "", "");
    if (o->wait_timeout == 0 || o->max_wait_timeout < o->wait_timeout)
        return opt_usage("--wait-timeout (%s) must be positive and at most --max-wait-timeout (%s)",
                         opt_num(o->wait_timeout, a, sizeof a), opt_num(o->max_wait_timeout, b, sizeof b));
    if (o->tls_listen.n && (!*o->tls_cert || !*o->tls_key))
        return opt_usage("--tls-listen needs --tls-cert and --tls-key%s%s", "", "");
    if (strcmp(o->fsync, "always") != 0 && strcmp(o->fsync, "everysec") != 0 && strcmp(o->fsync, "never") != 0)
        return opt_usage("--fsync: expected always, everysec or never, got '%s'%s", o->fsync, "");
    if (o->auth_backoff_max < o->auth_backoff)
        return opt_usage("--auth-backoff-max (%s) must be at least --auth-backoff (%s)",
                         opt_num(o->auth_backoff_max, a, sizeof a), opt_num(o->auth_backoff, b, sizeof b));
    for (size_t i = 0; i < o->token.n; i++)
        if (!strchr(o->token.v[i], '='))
            return opt_usage("--token: expected NS=TOKEN%s%s", "", "");
    return 0;
}

/* Fill o from defaults, then the environment, then argv (flags win). */
int options_parse(struct options *o, int argc, char **argv)
{
    memset(o, 0, sizeof *o);
    int act = ACT_RUN;
    int rc = opt_defaults(o);
    if (!rc)
        rc = opt_env(o);
    if (!rc)
        rc = opt_argv(o, argc, argv, &act);
    if (rc)
        return rc;
    if (act == ACT_HELP) {
        options_print_help(stdout);
        return EX_OK;
    }
    if (act == ACT_VERSION) {
        printf("musterd %s\n", MUSTER_VERSION);
        return EX_OK;
    }
    if ((rc = opt_validate(o)) != 0)
        return rc;
    if (act == ACT_PRINT_CONFIG) {
        options_print_config(o, stdout);
        return EX_OK;
    }
    return -1;
}

/* Free what options_parse allocated; safe on a zeroed struct. */
void options_free(struct options *o)
{
    for (size_t i = 0; i < OPT_NROWS; i++) {
        void *f = opt_field(o, &opt_rows[i]);
        if (opt_rows[i].type == OPT_STR) {
            free(*(char **)f);
            *(char **)f = NULL;
        } else if (opt_rows[i].type == OPT_LIST) {
            opt_list_clear(f);
        }
    }
}

/* Print the value of one row (lists comma-joined, secrets masked). */
static void opt_print_value(const struct options *o, const struct opt_row *r, FILE *fp)
{
    const void *f = (const char *)o + r->off;
    switch (r->type) {
    case OPT_UINT:
        fprintf(fp, "%" PRIu64, *(const uint64_t *)f);
        break;
    case OPT_BOOL:
        fputs(*(const int *)f ? "true" : "false", fp);
        break;
    case OPT_STR:
        fputs(*(char *const *)f, fp);
        break;
    case OPT_LIST: {
        const struct strlist *l = f;
        for (size_t i = 0; i < l->n; i++) {
            const char *v = l->v[i];
            if (r->flags & OPTF_SECRET)
                fprintf(fp, "%s%.*s=***", i ? "," : "", (int)strcspn(v, "="), v);
            else
                fprintf(fp, "%s%s", i ? "," : "", v);
        }
        break;
    }
    }
}

/* Print every option with its value and where it came from (tokens masked). */
void options_print_config(const struct options *o, FILE *fp)
{
    static const char *const src[] = {"default", "env", "flag"};
    for (size_t i = 0; i < OPT_NROWS; i++) {
        fprintf(fp, "%s=", opt_rows[i].flag);
        opt_print_value(o, &opt_rows[i], fp);
        fprintf(fp, "  # %s\n", src[o->source[i]]);
    }
}

/* The placeholder shown after a flag in --help. */
static const char *opt_metavar(const struct opt_row *r)
{
    if (r->type == OPT_BOOL)
        return "[=BOOL]";
    if (r->type == OPT_UINT)
        return r->unit == UNIT_BYTES ? " BYTES" : r->unit == UNIT_MS ? " MS" : " N";
    return " VALUE";
}

/* Print usage and the options table. */
void options_print_help(FILE *fp)
{
    fprintf(fp, "usage: musterd [OPTION]...\n"
                "musterd: key-value store and rendezvous daemon for distributed GPU jobs.\n\n"
                "Every option has an environment twin; a flag wins over its twin.\n"
                "Sizes take K, M, G suffixes (powers of 1024); durations are ms unless suffixed s or m.\n\n");
    for (size_t i = 0; i < OPT_NROWS; i++) {
        const struct opt_row *r = &opt_rows[i];
        char head[64];
        snprintf(head, sizeof head, "--%s%s", r->flag, opt_metavar(r));
        fprintf(fp, "  %-30s %s (default: %s)\n", head, r->env, *r->def ? r->def : "none");
        fprintf(fp, "      %s", r->help);
        if (r->type == OPT_LIST)
            fprintf(fp, "; the environment twin takes a comma-separated list");
        if (r->stat >= 0)
            fprintf(fp, "; counted as %s", stats_name(r->stat));
        fputc('\n', fp);
    }
    fprintf(fp, "  %-30s print the effective configuration and exit\n", "--print-config");
    fprintf(fp, "  %-30s print the version and exit\n", "--version");
    fprintf(fp, "  %-30s print this help and exit\n\n", "--help");
    fprintf(fp, "Signals: SIGTERM/SIGINT drain and exit 0; SIGHUP reopens the log file; SIGUSR1 logs counters.\n"
                "Exit status: 0 ok, 64 usage, 69 cannot bind, 71 system error.\n");
}
