/* musterd's configuration: one table of options, parsed from argv and MUSTER_* environment twins. */
#ifndef MUSTERD_OPTIONS_H
#define MUSTERD_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A repeatable option's values. */
struct strlist {
    char **v;
    size_t n;
};

/* Room for per-row bookkeeping (where each value came from). */
#define OPTIONS_MAX_ROWS 80

struct options {
    struct strlist listen;
    char *port_file;
    uint64_t max_connections;
    uint64_t max_frame;
    uint64_t pre_hello_max_frame;
    uint64_t max_key;
    uint64_t max_value;
    uint64_t max_keys_per_request;
    uint64_t max_keys_per_ns;
    uint64_t max_bytes_per_ns;
    uint64_t max_namespaces;
    uint64_t max_namespaces_per_source;
    uint64_t ns_idle_timeout;
    uint64_t ns_reclaim_after;          /* --ns-reclaim-after (ms; 0 = never) */
    uint64_t max_ns_creates_per_source; /* per minute; 0 = no limit */
    int closed_namespaces;
    uint64_t max_waiters;
    uint64_t max_waiters_per_ns;
    uint64_t max_waiters_per_conn;
    uint64_t max_waiters_per_source;
    uint64_t recovery_timeout;
    uint64_t max_watches;
    uint64_t max_standbys;
    uint64_t max_watches_per_conn;
    uint64_t max_output;
    uint64_t max_buffer_memory;
    uint64_t slow_timeout;
    uint64_t linger_timeout;
    uint64_t hello_timeout;
    uint64_t idle_timeout;
    uint64_t request_timeout;
    uint64_t tcp_keepalive;
    uint64_t wait_timeout;
    uint64_t max_wait_timeout;
    uint64_t heartbeat_timeout;
    uint64_t drain_timeout;
    uint64_t emfile_retry_ms;
    int nodelay;
    struct strlist token;
    char *token_file;
    uint64_t auth_backoff;
    uint64_t auth_backoff_max;
    uint64_t max_sources;
    char *log_level;
    char *log_format;
    char *log_file;
    char *tcpstore_listen;      /* TCPStore front end (tcpstore.c); "" = off */
    char *tcpstore_port_file;
    char *tcpstore_namespace;
    uint64_t tcpstore_max_key;
    uint64_t tcpstore_max_value;
    uint64_t tcpstore_max_keys;
    uint64_t tcpstore_max_request;
    uint64_t tcpstore_validate_timeout;
    char *metrics_listen;
    char *metrics_port_file;
    uint64_t metrics_timeout;
    uint64_t metrics_max_request;
    uint64_t status_page_jobs;     /* --status-page-jobs: jobs in one page of /v1/status and /v1/jobs */
    uint64_t http_cache;           /* --http-cache, ms: how long a rendered HTTP answer is served again */
    uint64_t metrics_max_namespaces; /* --metrics-max-namespaces: namespaces with their own /metrics series */
    struct strlist http_allowed_hosts; /* --http-allowed-hosts: Host names the HTTP listener answers */
    char *data_dir;
    char *fsync;
    uint64_t compact_bytes;
    int repair_log;  /* --repair-log: start from a damaged or incomplete data directory */
    char *ha;        /* --ha etcd URL (ha.c); "" = off */
    uint64_t ha_ttl; /* --ha-ttl, ms */
    uint64_t ha_batch_bytes;    /* --ha-batch-bytes */
    uint64_t ha_snapshot_bytes; /* --ha-snapshot-bytes */
    char *ha_advertise;         /* --ha-advertise HOST:PORT; "" = the first listener */
    struct strlist tls_listen;
    char *tls_cert;
    char *tls_key;
    char *tls_ca;
    int log_level_num;                      /* parsed log_level */
    int log_format_num;                     /* parsed log_format (enum log_format) */
    unsigned char source[OPTIONS_MAX_ROWS]; /* enum opt_source per table row */
};

/* Fill o from defaults, then the environment, then argv (flags win).  Returns
 * -1 to go on running, or an exit status after printing help, the version,
 * the configuration or a usage error. */
int options_parse(struct options *o, int argc, char **argv);
/* Free what options_parse allocated; safe on a zeroed struct. */
void options_free(struct options *o);
/* Print every option with its value and where it came from (tokens masked). */
void options_print_config(const struct options *o, FILE *fp);
/* Print usage and the options table. */
void options_print_help(FILE *fp);

#endif
