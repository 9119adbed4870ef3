/* Internal interface of the launcher's TCPStore relay: the codec (run_tscodec.c) and the relay (run_relay.c). */
#ifndef MUSTER_CLI_RUN_RELAY_H
#define MUSTER_CLI_RUN_RELAY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <muster/muster.h>

/* The VALIDATE handshake's magic; on the wire (little-endian) CE F7 85 3C. */
#define TSC_MAGIC 0x3C85F7CEu
/* Bytes that identify the VALIDATE era: the type byte 0 and the magic. */
#define TSC_HANDSHAKE_LEN 5
/* Fields of the longest grammar (compare_set: key, expected, desired). */
#define TSC_MAX_FIELDS 3

/* Operations, numbered as torch 2.x's VALIDATE-era type bytes (the older numbering is mapped). */
enum tsc_op {
    TSC_VALIDATE,
    TSC_SET,
    TSC_COMPARE_SET,
    TSC_GET,
    TSC_ADD,
    TSC_CHECK,
    TSC_WAIT,
    TSC_GETNUMKEYS,
    TSC_DELETE_KEY,
    TSC_APPEND,
    TSC_MULTI_GET,
    TSC_MULTI_SET,
    TSC_CANCEL_WAIT,
    TSC_PING,
    TSC_QUEUE_PUSH,
    TSC_QUEUE_POP,
    TSC_QUEUE_LEN,
    TSC_LIST_KEYS,
    TSC_BARRIER,
    TSC_WATCH_KEY, /* old numbering only */
    TSC_NOPS
};

/* Which numbering a connection speaks, known from its first bytes. */
enum tsc_era { TSC_ERA_UNKNOWN, TSC_ERA_VALIDATE, TSC_ERA_LEGACY };

/* The one-byte answers (CheckResponseType, WaitResponseType). */
enum { TSC_READY = 0, TSC_NOT_READY = 1, TSC_STOP_WAITING = 0, TSC_WAIT_CANCELED = 1 };

/* Why a request was refused: each is a counter of the relay. */
enum tsc_err { TSC_OK, TSC_ERR_BAD, TSC_ERR_KEY, TSC_ERR_KEYS, TSC_ERR_REQUEST };

/* A string of a request: it points into the connection's input buffer. */
struct tsc_str {
    const uint8_t *p;
    size_t len;
};

/* The relay's limits on one request (flags of `muster run`). */
struct tsc_limits {
    uint64_t max_key;
    uint64_t max_keys;
    uint64_t max_request;
};

/* One decoded request; its strings stay valid until its bytes are consumed. */
struct tsc_req {
    int op;                       /* enum tsc_op */
    uint8_t code;                 /* the type byte as sent */
    uint32_t u32;
    int64_t i64;
    struct tsc_str b[TSC_MAX_FIELDS]; /* the single KEY / VALUE fields, in order */
    unsigned nb;
    size_t n;                     /* list length (KEYS) or pairs (PAIRS) */
    struct tsc_str *list;         /* n keys, or 2n strings key, value, key, value... */
};

/* The numbering c speaks, from its first bytes; TSC_ERA_UNKNOWN while too few have arrived. */
enum tsc_era run_tscodec_detect(const uint8_t *p, size_t n);
/* The op's name, for messages. */
const char *run_tscodec_name(int op);
/* Decode one request from p[0..n): 1 with *used, 0 when *want bytes must be there first, or -1 with
 * an enum tsc_err in *err and the reason in why. */
int run_tscodec_parse(enum tsc_era era, const struct tsc_limits *lim, const uint8_t *p, size_t n,
                      struct tsc_req *r, size_t *used, size_t *want, int *err, char *why, size_t whylen);
/* Free what a decoded request allocated. */
void run_tscodec_free(struct tsc_req *r);

/* An output buffer of replies. */
struct tsc_out {
    uint8_t *p;
    size_t len, cap;
    int oom;
};

/* Append raw bytes. */
void run_tscodec_put(struct tsc_out *o, const void *p, size_t n);
/* Append one byte. */
void run_tscodec_put_u8(struct tsc_out *o, uint8_t v);
/* Append a little-endian 64-bit integer. */
void run_tscodec_put_i64(struct tsc_out *o, int64_t v);
/* Append a u64 length and the bytes. */
void run_tscodec_put_blob(struct tsc_out *o, const void *p, size_t n);

/* Counters of the relay, printed when it stops (limits and refusals). */
struct run_relay_stats {
    uint64_t accepted, requests, parked, canceled, abandoned;
    uint64_t bad_request, limit_key, limit_keys, limit_request, limit_conns, limit_output;
    uint64_t unsupported, upstream_errors;
};

/* Flags of the relay. */
struct run_relay_cfg {
    struct tsc_limits lim;
    uint32_t max_conns;
    uint64_t max_output;
};

/* What a worker's connection has parked: nothing, a WAIT or a BARRIER. */
enum run_relay_park { RELAY_PARK_NONE, RELAY_PARK_WAIT, RELAY_PARK_BARRIER };

/* One worker's TCPStore connection. */
struct run_relay_conn {
    int fd;
    int dead;                    /* closed; freed at the end of the loop turn */
    enum tsc_era era;
    uint8_t *in;                 /* bytes read and not yet decoded */
    size_t inlen, incap;
    size_t want;                 /* bytes in must hold before decoding again */
    struct tsc_out out;          /* replies not yet written */
    size_t outoff;
    enum run_relay_park park;
    char **pkeys;                /* native keys of the parked request */
    size_t npkeys;
    int64_t world;               /* BARRIER: the count that releases it */
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
/* Serve one decoded request of c (run_relay_ops.c); c may be parked or closed by it. */
void run_relay_ops_dispatch(struct run_relay *r, struct run_relay_conn *c, const struct tsc_req *q);
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
