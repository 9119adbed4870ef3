/* Shared definitions of the load generator: configuration, operations, replies, and the
 * protocol-neutral functions the modes (load, storm, idle, fill) are written against. */
#ifndef BENCH_LOADGEN_H
#define BENCH_LOADGEN_H

#include <stddef.h>
#include <stdint.h>

#include "hist.h"
#include "lnet.h"
#include "tmpl.h"

enum lg_proto { PROTO_NATIVE, PROTO_TS_NEW, PROTO_TS_OLD, PROTO_TS_AUTO, PROTO_RAW };

enum lg_op { OP_SET, OP_GET, OP_ADD, OP_WAIT, OP_CHECK, OP_PING, OP_BARRIER, OP_JOIN, OP_NONE, OP_COUNT };

/* What a template is built from. */
struct opspec {
    enum lg_op op;
    const char *key;         /* key (or barrier name / node id) prefix; 8 digits follow */
    uint32_t count;          /* barrier count, join min = max nodes */
    uint32_t timeout_ms;     /* blocking ops */
    size_t value_size;       /* set */
    uint8_t value_byte;      /* set: the byte the value is filled with */
    int wait;                /* get: park until the key exists */
    const char *fetch;       /* barrier: answer with this key's value at release (verbatim) */
};

/* One reply, whatever the protocol; pointers are into the connection's read buffer. */
struct reply {
    int frame;               /* native ServerFrame case (1 hello, 2 response, 3 event, 4 error); TCPStore: 2 */
    uint64_t id;
    int status;              /* wire Status, 0 = OK */
    int result;              /* native Response result case */
    const uint8_t *val;
    size_t vlen;
    int64_t num;             /* add result, join rank_start, TCPStore numeric replies */
};

struct lg_cfg {
    const char *host;
    unsigned port;
    const char *proto_name;
    const char *mode;
    const char *op_name;
    unsigned conns;
    unsigned depth;
    unsigned sources;
    uint64_t requests;
    double duration;
    double timeout;
    double hold;
    unsigned keys;
    unsigned value_size;
    const char *key_prefix;
    const char *ns;
    unsigned stall;
    unsigned floor;          /* storm: the server is muster-floord (answers at once, canned values) */
    unsigned server_pid;
    const char *ready_file;
    unsigned burst;
    unsigned seed;
    unsigned timeout_ms;
    enum lg_proto proto;
    enum lg_op op;
};

/* Counters every mode reports. */
struct lg_stats {
    uint64_t ok;
    uint64_t errors;          /* error replies and broken requests */
    uint64_t connect_errors;  /* connects that failed for good */
    uint64_t retries;         /* connect attempts beyond the first */
    uint64_t closed;          /* connections the server closed or reset */
    uint64_t bad_replies;     /* replies that did not parse or match */
    uint64_t timeouts;        /* requests still unanswered at the end */
};

struct lg {
    struct lg_cfg cfg;
    struct lnet net;
    struct hist hist;
    struct lg_stats st;
    uint64_t t_begin, t_end;  /* the measured window */
    double srv_cpu0;          /* server CPU seconds at the window start */
    double srv_cpu;           /* server CPU seconds spent in the window */
    double self_cpu0;
    double self_cpu;
    uint32_t nonce;           /* TCPStore ping nonce */
    struct tmpl hs[2];        /* the handshake's frames, packed once (lg_handshake) */
    int nhs;                  /* how many of hs are in use; -1 before the first handshake */
};

/* Name of an op, for output. */
const char *lg_op_name(enum lg_op op);
/* Build the template for one request in the configured protocol; returns 0 or -1. */
int lg_tmpl(const struct lg *lg, const struct opspec *spec, struct tmpl *t);
/* Queue c's handshake; returns 1 when a reply is expected, 0 when c is ready at once. */
int lg_handshake(struct lg *lg, struct lconn *c);
/* Queue one request from template t on c and track it; returns 0 or -1. */
int lg_send(struct lg *lg, struct lconn *c, const struct tmpl *t, uint32_t keynum);
/* Take the next complete reply from c; 1 got one (its slot in *s), 0 need more bytes, -1 garbage. */
int lg_next_reply(struct lg *lg, struct lconn *c, struct reply *r, struct slot *s);
/* Server CPU seconds so far (utime + stime of cfg.server_pid), or 0 when unknown. */
double lg_server_cpu(const struct lg *lg);
/* This process's CPU seconds so far. */
double lg_self_cpu(void);
/* Mark the start of the measured window. */
void lg_window_begin(struct lg *lg);
/* Mark the end of the measured window. */
void lg_window_end(struct lg *lg);
/* Write the ready file (if configured) so a driving script knows the connections are up. */
void lg_ready(const struct lg *lg, const char *what);
/* Count a connection failure (err = errno value, 0 = closed by the peer). */
void lg_count_fail(struct lg *lg, struct lconn *c, int err);
/* Stop-signal flag: set by SIGINT/SIGTERM/SIGUSR1. */
int lg_stopped(void);

/* Mode entry points: each runs to completion and prints JSON on stdout; returns the exit code. */
int load_run(struct lg *lg);
int fill_run(struct lg *lg);
int storm_run(struct lg *lg);
int idle_run(struct lg *lg);

#endif
