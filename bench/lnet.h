/* Client-side connection engine of the load generator: thousands of non-blocking TCP
 * connections on one epoll set, per-connection read/write buffers, connect retries. */
#ifndef BENCH_LNET_H
#define BENCH_LNET_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

/* Connection flags. */
#define LC_CONNECTING 1u
#define LC_CLOSED 4u
#define LC_RETRY 8u

/* One request in flight: when it was sent, its id (native) and the reply shape. */
struct slot {
    uint64_t sent_ns;
    uint64_t id;
    uint8_t kind;
};

struct lconn {
    int fd;
    uint32_t idx;            /* position in the engine's array (simulated rank) */
    uint32_t flags;
    uint32_t tries;          /* connect attempts so far */
    int state;               /* owned by the mode */
    uint8_t *rbuf;
    uint32_t roff, rlen, rcap;
    uint8_t *wbuf;
    uint32_t woff, wlen, wcap;
    struct slot *ring;       /* requests in flight, oldest at head */
    uint32_t head, tail, ringmask;
    uint64_t next_id;
    uint64_t t_open;         /* when the connect finished */
    uint64_t t_mark;         /* free for the mode */
    uint64_t retry_at;
    uint64_t budget;         /* free for the mode */
};

struct lnet;
typedef void (*lnet_cb)(struct lnet *net, struct lconn *c);
typedef void (*lnet_fail_cb)(struct lnet *net, struct lconn *c, int err);

struct lnet {
    int epfd;
    struct sockaddr_in dst;
    unsigned nsrc;           /* source addresses 127.0.0.1 .. 127.0.0.nsrc */
    struct lconn *c;
    unsigned n;
    unsigned open;           /* connections currently open */
    unsigned retrying;       /* connections waiting for a retry */
    int nagle;               /* leave Nagle on (no TCP_NODELAY): for one-request-in-flight modes */
    void *mode;              /* the mode's state, for its callbacks */
    lnet_cb on_open;         /* connect finished */
    lnet_cb on_read;         /* new bytes in rbuf[roff..rlen) */
    lnet_fail_cb on_fail;    /* connect failed or the connection broke (errno value, 0 = peer closed) */
    uint64_t bytes_in, bytes_out, syscalls;
};

/* Set up an engine for n connections to host:port from nsrc loopback source addresses. */
int lnet_init(struct lnet *net, const char *host, unsigned port, unsigned n, unsigned nsrc, unsigned depth);
/* Close every connection and free the engine. */
void lnet_free(struct lnet *net);
/* Start a non-blocking connect for c; failures are reported through on_fail. */
void lnet_connect(struct lnet *net, struct lconn *c);
/* Try c's connect again after delay_ns. */
void lnet_retry_later(struct lnet *net, struct lconn *c, uint64_t delay_ns);
/* Close c now (with a reset, so no TIME_WAIT state is left behind). */
void lnet_close(struct lnet *net, struct lconn *c);
/* Space for len more output bytes on c; the caller fills it and the engine flushes it. */
uint8_t *lnet_reserve(struct lconn *c, size_t len);
/* Write c's pending output now. */
void lnet_flush(struct lnet *net, struct lconn *c);
/* Wait up to timeout_ms for events and dispatch them; returns the events handled or -1. */
int lnet_poll(struct lnet *net, int timeout_ms);
/* Push a slot on c's in-flight ring; returns it. */
struct slot *lnet_push(struct lconn *c);
/* Number of requests in flight on c. */
static inline uint32_t lnet_inflight(const struct lconn *c) { return c->tail - c->head; }

#endif
