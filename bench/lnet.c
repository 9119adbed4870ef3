/* Client-side connection engine of the load generator: thousands of non-blocking TCP
 * connections on one epoll set, per-connection read/write buffers, connect retries. */
#include "lnet.h"

#include "clock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define LNET_RBUF 2048
#define LNET_WBUF 512
#define LNET_EVENTS 1024

/* Smallest power of two not below v. */
static uint32_t lnet_pow2(uint32_t v)
{
    uint32_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

/* Allocate c's buffers unless it has them, and reset their state. */
static int lnet_buffers(struct lconn *c)
{
    if (!c->rbuf) {
        c->rbuf = malloc(LNET_RBUF);
        c->rcap = LNET_RBUF;
    }
    if (!c->wbuf) {
        c->wbuf = malloc(LNET_WBUF);
        c->wcap = LNET_WBUF;
    }
    c->roff = c->rlen = c->woff = c->wlen = 0;
    c->head = c->tail = 0;
    return c->rbuf && c->wbuf ? 0 : -1;
}

/* Set up an engine for n connections to host:port from nsrc loopback source addresses. */
int lnet_init(struct lnet *net, const char *host, unsigned port, unsigned n, unsigned nsrc, unsigned depth)
{
    memset(net, 0, sizeof *net);
    net->dst.sin_family = AF_INET;
    net->dst.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &net->dst.sin_addr) != 1)
        return -1;
    net->nsrc = nsrc;
    net->n = n;
    net->epfd = epoll_create1(EPOLL_CLOEXEC);
    net->c = calloc(n ? n : 1, sizeof *net->c);
    if (net->epfd < 0 || !net->c)
        return -1;
    uint32_t ring = lnet_pow2(depth + 8);
    for (unsigned i = 0; i < n; i++) {
        struct lconn *c = &net->c[i];
        c->fd = -1;
        c->idx = i;
        c->flags = LC_CLOSED;
        c->ring = calloc(ring, sizeof *c->ring);
        if (!c->ring || lnet_buffers(c) < 0)
            return -1;
        c->ringmask = ring - 1;
        /* Touch the buffers now: faulting in ~40 MB for 16k connections inside a timed storm
         * was a tenth of the generator's CPU while it raced the server through the connects. */
        memset(c->rbuf, 0, c->rcap);
        memset(c->wbuf, 0, c->wcap);
    }
    return 0;
}

/* Close every connection and free the engine. */
void lnet_free(struct lnet *net)
{
    for (unsigned i = 0; net->c && i < net->n; i++) {
        lnet_close(net, &net->c[i]);
        free(net->c[i].ring);
    }
    free(net->c);
    if (net->epfd >= 0)
        close(net->epfd);
    net->c = NULL;
    net->epfd = -1;
}

/* Report a failure of c to the mode, after closing it. */
static void lnet_fail(struct lnet *net, struct lconn *c, int err)
{
    lnet_close(net, c);
    if (net->on_fail)
        net->on_fail(net, c, err);
}

/* Bind c's socket to its loopback source address so that more than one
 * ephemeral port range is available (the port is still chosen at connect). */
static int lnet_bind_source(const struct lnet *net, int fd, unsigned idx)
{
    if (net->nsrc <= 1)
        return 0;
    int one = 1;
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    struct sockaddr_in src = {.sin_family = AF_INET};
    src.sin_addr.s_addr = htonl(0x7f000001u + idx % net->nsrc);
    return bind(fd, (struct sockaddr *)&src, sizeof src);
}


/* Start a non-blocking connect for c; failures are reported through on_fail. */
void lnet_connect(struct lnet *net, struct lconn *c)
{
    if (lnet_buffers(c) < 0) {
        net->on_fail(net, c, ENOMEM);
        return;
    }
    c->tries++;
    c->flags = LC_CONNECTING;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        int e = errno;
        c->flags = LC_CLOSED;
        net->on_fail(net, c, e);
        return;
    }
    int one = 1;
    if (!net->nagle)
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    net->open++;
    if (lnet_bind_source(net, c->fd, c->idx) < 0 ||
        (connect(c->fd, (struct sockaddr *)&net->dst, sizeof net->dst) < 0 && errno != EINPROGRESS)) {
        lnet_fail(net, c, errno);
        return;
    }
    /* Edge-triggered, registered once: no epoll_ctl per write, and a short read means the
     * socket was drained, so no read is wasted on EAGAIN. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
    if (epoll_ctl(net->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
        lnet_fail(net, c, errno);
}

/* Try c's connect again after delay_ns. */
void lnet_retry_later(struct lnet *net, struct lconn *c, uint64_t delay_ns)
{
    if (c->flags & LC_RETRY)
        return;
    c->flags |= LC_RETRY;
    c->retry_at = clock_ns() + delay_ns;
    net->retrying++;
}

/* Close c now (with a reset, so no TIME_WAIT state is left behind). */
void lnet_close(struct lnet *net, struct lconn *c)
{
    if (c->fd >= 0) {
        /* A reset on close leaves no TIME_WAIT entry: repeated storms would otherwise run out of
         * ports.  Set here rather than at connect so the storm's connect path costs one syscall less. */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        close(c->fd);
        c->fd = -1;
        net->open--;
    }
    c->flags = (c->flags & LC_RETRY) | LC_CLOSED;
}

/* Space for len more output bytes on c; the caller fills it and the engine flushes it. */
uint8_t *lnet_reserve(struct lconn *c, size_t len)
{
    if (c->woff && c->woff == c->wlen)
        c->woff = c->wlen = 0;
    if (c->wlen + len > c->wcap) {
        size_t cap = c->wcap;
        while (c->wlen + len > cap)
            cap *= 2;
        uint8_t *b = realloc(c->wbuf, cap);
        if (!b)
            return NULL;
        c->wbuf = b;
        c->wcap = (uint32_t)cap;
    }
    uint8_t *p = c->wbuf + c->wlen;
    c->wlen += (uint32_t)len;
    return p;
}

/* Write c's pending output now. */
void lnet_flush(struct lnet *net, struct lconn *c)
{
    if (c->fd < 0 || (c->flags & LC_CONNECTING) || c->woff == c->wlen)
        return;
    ssize_t w = write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
    net->syscalls++;
    if (w < 0 && errno != EAGAIN) {
        lnet_fail(net, c, errno);
        return;
    }
    if (w > 0) {
        c->woff += (uint32_t)w;
        net->bytes_out += (uint64_t)w;
    }
    if (c->woff == c->wlen)
        c->woff = c->wlen = 0;
}

static void lnet_readable(struct lnet *net, struct lconn *c);

/* Finish a pending connect: check its result (only an error event needs asking) and
 * hand the connection to the mode. */
static void lnet_connected(struct lnet *net, struct lconn *c, uint32_t ev)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (ev & (EPOLLERR | EPOLLHUP)) {
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        net->syscalls++;
    }
    if (err || (ev & (EPOLLERR | EPOLLHUP))) {
        lnet_fail(net, c, err ? err : ECONNREFUSED);
        return;
    }
    c->flags &= ~LC_CONNECTING;
    c->t_open = clock_ns();
    net->on_open(net, c);
    if (c->flags & LC_CLOSED)
        return;
    /* Edge-triggered: bytes that came with the connect event will not be announced again. */
    if (ev & EPOLLIN)
        lnet_readable(net, c);
    else
        lnet_flush(net, c);
}

/* Make room for more input: compact, or grow when a frame needs more than the buffer. */
static int lnet_room(struct lconn *c)
{
    if (c->roff && c->roff == c->rlen)
        c->roff = c->rlen = 0;
    if (c->rlen < c->rcap)
        return 0;
    if (c->roff) {
        memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
        c->rlen -= c->roff;
        c->roff = 0;
        return 0;
    }
    uint8_t *b = realloc(c->rbuf, (size_t)c->rcap * 2);
    if (!b)
        return -1;
    c->rbuf = b;
    c->rcap *= 2;
    return 0;
}

/* Read what is waiting on c and hand it to the mode; read again only while reads fill
 * the buffer (the set is edge-triggered). */
static void lnet_readable(struct lnet *net, struct lconn *c)
{
    for (;;) {
        if (lnet_room(c) < 0) {
            lnet_fail(net, c, ENOMEM);
            return;
        }
        size_t space = c->rcap - c->rlen;
        ssize_t r = read(c->fd, c->rbuf + c->rlen, space);
        net->syscalls++;
        if (r <= 0) {
            if (r < 0 && errno == EAGAIN)
                break;
            lnet_fail(net, c, r == 0 ? 0 : errno);
            return;
        }
        net->bytes_in += (uint64_t)r;
        c->rlen += (uint32_t)r;
        net->on_read(net, c);
        if ((c->flags & LC_CLOSED) || (size_t)r < space)
            break;
    }
    if (!(c->flags & LC_CLOSED))
        lnet_flush(net, c);
}

/* Start the connects whose retry time has come. */
static void lnet_run_retries(struct lnet *net)
{
    uint64_t now = clock_ns();
    for (unsigned i = 0; i < net->n && net->retrying; i++) {
        struct lconn *c = &net->c[i];
        if ((c->flags & LC_RETRY) && c->retry_at <= now) {
            c->flags &= ~LC_RETRY;
            net->retrying--;
            lnet_connect(net, c);
        }
    }
}

/* Dispatch one epoll event. */
static void lnet_event(struct lnet *net, struct lconn *c, uint32_t ev)
{
    if (c->fd < 0)
        return;
    if (c->flags & LC_CONNECTING) {
        if (ev & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            lnet_connected(net, c, ev);
        return;
    }
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
        lnet_readable(net, c);
    if (c->fd >= 0 && (ev & EPOLLOUT))
        lnet_flush(net, c);
}

/* Wait up to timeout_ms for events and dispatch them; returns the events handled or -1. */
int lnet_poll(struct lnet *net, int timeout_ms)
{
    struct epoll_event evs[LNET_EVENTS];
    if (net->retrying && timeout_ms > 1)
        timeout_ms = 1;
    int k = epoll_wait(net->epfd, evs, LNET_EVENTS, timeout_ms);
    if (k < 0)
        return errno == EINTR ? 0 : -1;
    for (int i = 0; i < k; i++)
        lnet_event(net, evs[i].data.ptr, evs[i].events);
    if (net->retrying)
        lnet_run_retries(net);
    return k;
}

/* Push a slot on c's in-flight ring; returns it. */
struct slot *lnet_push(struct lconn *c)
{
    struct slot *s = &c->ring[c->tail & c->ringmask];
    c->tail++;
    return s;
}
