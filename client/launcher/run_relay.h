/* Internal interface of the launcher's TCPStore relay: the relay (run_relay.c) and its ops (run_relay_ops.c); the
 * wire codec is proto/tscodec.h, shared with musterd's TCPStore listener. */
#ifndef MUSTER_LAUNCHER_RUN_RELAY_H
#define MUSTER_LAUNCHER_RUN_RELAY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <muster/muster.h>

#include "tscodec.h"

/* Counters of the relay, printed when it stops (limits and refusals). */
struct run_relay_stats {
    uint64_t accepted, requests, parked, canceled, abandoned;
    uint64_t bad_request, limit_key, limit_keys, limit_request, limit_conns, limit_output;
    uint64_t unsupported, upstream_errors, request_timeout;
};

/* Flags of the relay (lim.max_value is UINT64_MAX: a value is bounded by the request alone). */
struct run_relay_cfg {
    struct tscodec_limits lim;
    uint32_t max_conns;
    uint64_t max_output;
    uint32_t request_timeout_ms; /* --relay-request-timeout: bound on an incomplete request, 0 = none */
};

/* What a worker's connection has parked: nothing, a WAIT or a BARRIER. */
enum run_relay_park { RELAY_PARK_NONE, RELAY_PARK_WAIT, RELAY_PARK_BARRIER };

/* One worker's TCPStore connection. */
struct run_relay_conn {
    int fd;
    int dead;                    /* closed; freed at the end of the loop turn */
    enum ts_era era;
    uint8_t *in;                 /* bytes read and not yet decoded */
    size_t inlen, incap;
    struct ts_req req;           /* the request being decoded */
    struct tscodec_out out;      /* replies not yet written */
    struct tscodec_sink sink;    /* appends to out */
    size_t outoff;
    enum run_relay_park park;
    char **pkeys;                /* native keys of the parked request */
    size_t npkeys;
    int64_t world;               /* BARRIER: the count that releases it */
    uint64_t partial_ms;         /* when the request now incomplete began (monotonic ms), or 0 */
};

/* A TCPStore relay for one generation: a thread with its own poll loop and one upstream handle. */
struct run_relay {
    struct run_relay_cfg cfg;
    pthread_t thread;
    int inited;                  /* run_relay_start got far enough for run_relay_stop to clean up */
    int started;
    int lfd;                     /* listening socket on 127.0.0.1 */
    int stop[2];                 /* self-pipe that ends the thread */
    unsigned port;
    char prefix[64];             /* native key prefix of this generation's torch keys */
    muster_t *up;
    int failover;
    uint64_t watch_id;
    uint64_t dropped;            /* muster_events_dropped() when last seen */
    int dead;                    /* the upstream is gone: workers' connections are refused */
    struct run_relay_conn **conns;
    size_t nconns, capconns;
    struct run_relay_stats st;
};

/* Connect upstream (url), watch prefix gen, listen on 127.0.0.1 port 0 and start the thread; 0 or -1. */
int run_relay_start(struct run_relay *r, const struct run_relay_cfg *cfg, const char *url, uint64_t gen);
/* When the request c now holds incomplete began: 0 with none held, now when one began (took: a whole
 * request was just taken).  Bytes behind a parked request are bounded by size, not time. */
uint64_t run_relay_partial_since(const struct run_relay_conn *c, int took, uint64_t now);
/* Serve one decoded request of c (run_relay_ops.c); c may be parked or closed by it. */
void run_relay_ops_dispatch(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q);
/* Look again at c's parked request after a change to key (NULL: any key); answers it when it is done. */
void run_relay_ops_recheck(struct run_relay *r, struct run_relay_conn *c, const char *key, const void *value,
                           size_t vlen);
/* Drop c's parked request without an answer. */
void run_relay_ops_unpark(struct run_relay_conn *c);
/* Close c, with the reason on stderr (TCPStore has no error reply). */
void run_relay_close(struct run_relay *r, struct run_relay_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An upstream call failed: close c, or every connection when the handle is beyond repair. */
void run_relay_upstream_failed(struct run_relay *r, struct run_relay_conn *c, const char *op, int rc);

/* Stop the thread, close everything and print the counters that tripped; safe when not started. */
void run_relay_stop(struct run_relay *r);

#endif
