/* Internal interface of the launcher's TCPStore relay: the relay (run_relay.c) and its ops (run_relay_ops.c); the
 * wire codec is proto/tscodec.h, shared with musterd's TCPStore listener. */
#ifndef MUSTER_LAUNCHER_RUN_RELAY_H
#define MUSTER_LAUNCHER_RUN_RELAY_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <muster/async.h>
#include <muster/muster.h>

#include "tscodec.h"

/* Counters of the relay, printed when it stops (limits and refusals; what was combined). */
struct run_relay_stats {
    uint64_t accepted, requests, parked, canceled, abandoned;
    uint64_t bad_request, limit_key, limit_keys, limit_request, limit_conns, limit_output;
    uint64_t unsupported, upstream_errors, request_timeout, limit_watches;
    uint64_t watches, watch_callbacks;        /* WATCH_KEY registrations, callback frames sent */
    uint64_t upstream_ops;                    /* calls sent upstream */
    uint64_t adds_combined, gets_combined, waits_joined; /* requests that rode on another's call */
    uint64_t joined_inflight;                 /* of those, gets and waits that joined a call already sent */
};

/* Flags of the relay (lim.max_value is UINT64_MAX: a value is bounded by the request alone). */
struct run_relay_cfg {
    struct tscodec_limits lim;
    uint32_t max_conns;
    uint64_t max_output;
    uint32_t request_timeout_ms; /* --relay-request-timeout: bound on an incomplete request, 0 = none */
    uint32_t max_watches;        /* --relay-max-watches: WATCH_KEY registrations of every worker */
};

/* What a worker's connection has parked: nothing, a WAIT or a BARRIER. */
enum run_relay_park { RELAY_PARK_NONE, RELAY_PARK_WAIT, RELAY_PARK_BARRIER };

/* One reply owed to a worker, in request order: filled when its upstream answer comes. */
struct run_relay_slot {
    struct run_relay_slot *next;
    int ready;                   /* complete: may be written once every earlier slot is */
    struct tscodec_out out;      /* its bytes (none for a canceled WAIT) */
};

/* One worker's TCPStore connection. */
struct run_relay_conn {
    int fd;
    int dead;                    /* closed; freed at the end of the loop turn once no call refers to it */
    unsigned refs;               /* upstream calls in flight that will answer into it */
    enum ts_era era;
    uint8_t *in;                 /* bytes read and not yet decoded */
    size_t inlen, incap;
    struct ts_req req;           /* the request being decoded */
    struct tscodec_out out;      /* replies ready to write, in order */
    size_t outoff;
    struct run_relay_slot *head, *tail; /* replies owed, oldest first */
    size_t nslots;
    unsigned deferred;           /* requests waiting to ride on a combined call (decoding holds) */
    struct run_relay_batch *open; /* the batch gathering its last request this loop turn, or NULL */
    char *promised;              /* a queue push released its WAIT of this key and it has sent nothing since
                                  * (its pop is yet to come): malloc'd, or NULL */
    enum run_relay_park park;    /* a WAIT or BARRIER in progress: decoding holds but for CANCEL_WAIT */
    struct run_relay_slot *pslot; /* its reply */
    uint64_t pseq;               /* changes with each park, so a stale answer is known */
    char **pkeys;                /* native keys of the parked request */
    size_t npkeys;
    int64_t world;               /* BARRIER: the count that releases it */
    uint64_t wseq;               /* its last write upstream while unanswered (its run_relay.upseq), or 0 */
    uint64_t partial_ms;         /* when the request now incomplete began (monotonic ms), or 0 */
};

struct run_relay_key;
struct run_relay_batch;
struct run_relay_wkey;

/* A TCPStore relay for one generation: a thread with its own poll loop and one upstream handle, on
 * which every worker's request is sent at once (many in flight) and answered through a callback. */
struct run_relay {
    struct run_relay_cfg cfg;
    pthread_t thread;
    int inited;                  /* run_relay_start got far enough for run_relay_stop to clean up */
    int started;
    int closing;                 /* the handle is closing: callbacks only let go */
    int lfd;                     /* listening socket on 127.0.0.1 */
    int stop[2];                 /* self-pipe that ends the thread */
    unsigned port;
    char prefix[64];             /* native key prefix of this generation's torch keys */
    muster_t *up;
    int failover;
    int corked;                  /* the upstream socket held corked during this turn, or -1 */
    int dead;                    /* the upstream is gone: workers' connections are refused */
    struct run_relay_conn **conns;
    size_t nconns, capconns, nlive;
    struct run_relay_key **keys; /* combining state by native key (run_relay_comb.c) */
    size_t nbuckets;
    struct run_relay_batch **open; /* batches gathering this loop turn's requests (NULL: sent early) */
    size_t nopen, capopen;
    struct run_relay_wkey *wkeys;  /* keys the workers WATCH_KEY (run_relay_watch.c) */
    size_t nwatches;               /* their registrations */
    uint64_t dropped;              /* muster_events_dropped() when last seen */
    size_t npromised;              /* connections holding a promised queue value (conn->promised) */
    uint64_t upseq;                /* upstream calls numbered in the order they were sent (writes and combined
                                    * calls; run_relay_comb.c) */
    struct run_relay_stats st;
};

/* Connect upstream (url), listen on 127.0.0.1 port 0 and start the thread serving generation gen; 0 or -1. */
int run_relay_start(struct run_relay *r, const struct run_relay_cfg *cfg, const char *url, uint64_t gen);
/* When the request c now holds incomplete began: 0 with none held, now when one began (took: a whole
 * request was just taken).  Bytes behind a parked request are bounded by size, not time. */
uint64_t run_relay_partial_since(const struct run_relay_conn *c, int took, uint64_t now);
/* The torch key of a native key of this relay (its prefix taken off, %00 and %25 undone) into out (as long as
 * the native key); its length (run_relay_ops.c). */
size_t run_relay_torch_key(const struct run_relay *r, const char *native, char *out);
/* Serve one decoded request of c (run_relay_ops.c); c may be parked or closed by it. */
void run_relay_ops_dispatch(struct run_relay *r, struct run_relay_conn *c, const struct ts_req *q);
/* c no longer holds a value a queue push released for it (it sent its next request, or it is freed). */
void run_relay_unpromise(struct run_relay *r, struct run_relay_conn *c);
/* Drop c's parked request without an answer. */
void run_relay_ops_unpark(struct run_relay_conn *c);
/* Answer c's WAIT or BARRIER (STOP_WAITING) and end its park. */
void run_relay_ops_release(struct run_relay_conn *c);
/* Close c, with the reason on stderr (TCPStore has no error reply). */
void run_relay_close(struct run_relay *r, struct run_relay_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An upstream call failed: close c, or every connection when the handle is beyond repair. */
void run_relay_upstream_failed(struct run_relay *r, struct run_relay_conn *c, const char *op, int rc,
                               const char *detail);

/* A new reply slot at the end of c's queue; NULL (c closed) when out of memory. */
struct run_relay_slot *run_relay_slot_new(struct run_relay *r, struct run_relay_conn *c);
/* A sink appending to slot s. */
struct tscodec_sink run_relay_slot_sink(struct run_relay_slot *s);
/* Mark s complete. */
void run_relay_slot_done(struct run_relay_slot *s);
/* Move c's complete replies at the head of its queue to its output. */
void run_relay_pump(struct run_relay_conn *c);

/* The combined ops (run_relay_comb.c).  ADD of key k by c, answered into s; with s NULL, BARRIER's count
 * for c's park, released once it reaches world; 0, or -1 with c closed. */
int run_relay_comb_add(struct run_relay *r, struct run_relay_conn *c, struct run_relay_slot *s, const char *k,
                       int64_t delta, int64_t world);
/* GET of key k by c, answered into s; 0, or -1 with c closed. */
int run_relay_comb_get(struct run_relay *r, struct run_relay_conn *c, struct run_relay_slot *s, const char *k);
/* Park c's WAIT (at_least 0: until its keys c->pkeys are present) or BARRIER (until its one key counts
 * at_least) at musterd; released by the wait's answer; 0, or -1 with c closed. */
int run_relay_comb_park(struct run_relay *r, struct run_relay_conn *c, int64_t at_least);
/* c sends a write of native key k upstream now: no get or wait of k sent before it is joined any more, nor, by
 * c's later requests until its answer comes, any call sent before it; the write's number. */
uint64_t run_relay_comb_wrote(struct run_relay *r, struct run_relay_conn *c, const char *k);
/* The answer of c's write numbered seq (0: none) came. */
void run_relay_comb_write_done(struct run_relay_conn *c, uint64_t seq);
/* Send the batch holding c's last request, before c's next request goes upstream. */
void run_relay_comb_flush_conn(struct run_relay *r, struct run_relay_conn *c);
/* The loop turn ends: send every batch gathered in it. */
void run_relay_comb_flush(struct run_relay *r);
/* The workers still to pop a value a queue push released their WAIT of key for (the skip of a wait). */
uint64_t run_relay_comb_promised(const struct run_relay *r, const char *key);
/* Free the combining table (every call is done). */
void run_relay_comb_free(struct run_relay *r);

/* WATCH_KEY (run_relay_watch.c).  Register c's watch of native key k (taken); its reply
 * (KEY_CALLBACK_REGISTERED) comes once the relay holds the key's value, then a callback frame per change. */
void run_relay_watch_key(struct run_relay *r, struct run_relay_conn *c, char *k);
/* Take the events the upstream handle holds and send the callback frames they make. */
void run_relay_watch_events(struct run_relay *r);
/* Drop c's registrations (it is being freed). */
void run_relay_watch_conn_gone(struct run_relay *r, struct run_relay_conn *c);
/* Free every watched key (the handle is closed). */
void run_relay_watch_free(struct run_relay *r);

/* Stop the thread, close everything and print the counters that tripped; safe when not started. */
void run_relay_stop(struct run_relay *r);

#endif
