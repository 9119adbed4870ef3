/*
 * muster-floord: the capacity floor.  A single-threaded epoll server that does nothing but
 * what any such server must: one read per readable connection and one write of the
 * replies.  It answers the native protocol just well enough for muster-loadgen: a Hello
 * gets a canned HelloReply, every Request gets Response{id, get{64-byte value}} (the same
 * bytes musterd sends for a get).  Its requests per CPU-second under the load generator
 * bound what musterd can reach on this machine.
 *
 *   muster-floord --port-file PATH     (listens on 127.0.0.1, port chosen by the kernel)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* Per-connection buffers: far above a closed-loop batch, small enough for 16k connections. */
#define FLOOR_BUF 16384
#define FLOOR_VALUE 64

struct floor_conn {
    int fd;
    uint32_t rlen;
    uint32_t wlen;
    uint32_t woff;
    int want_out;
    uint8_t rbuf[FLOOR_BUF];
    uint8_t wbuf[FLOOR_BUF];
};

static volatile sig_atomic_t floor_stop;

/* Stop on SIGTERM/SIGINT. */
static void floor_on_signal(int sig)
{
    (void)sig;
    floor_stop = 1;
}

/* Append a varint; returns the new end. */
static uint8_t *floor_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Read a varint at p (bounded by end) into *v; returns the byte after it or NULL. */
static const uint8_t *floor_get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned s = 0; p < end && s < 64; s += 7) {
        uint8_t b = *p++;
        x |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *v = x;
            return p;
        }
    }
    return NULL;
}

/* The request id of a ClientFrame body (field 2 -> Request field 1), or 0. */
static uint64_t floor_request_id(const uint8_t *p, const uint8_t *end)
{
    uint64_t len, id = 0;
    if (p >= end || *p != 0x12 || !(p = floor_get_varint(p + 1, end, &len)) || p >= end || *p != 0x08)
        return 0;
    floor_get_varint(p + 1, end, &id);
    return id;
}

/* Append one reply frame for a request frame body; returns bytes written or 0 when out of room. */
static size_t floor_reply(uint8_t *out, size_t room, const uint8_t *body, uint32_t blen)
{
    uint8_t msg[160], *m = msg;
    if (blen && body[0] == 0x0a) {
        /* HelloReply{protocol_version = 1} inside ServerFrame field 1 */
        static const uint8_t hello[] = {0x0a, 0x02, 0x10, 0x01};
        memcpy(m, hello, sizeof hello);
        m += sizeof hello;
    } else {
        uint8_t res[128], *r = res;
        *r++ = 0x08;
        r = floor_varint(r, floor_request_id(body, body + blen));
        *r++ = 0x5a; /* Response.get (field 11, length-delimited) */
        *r++ = FLOOR_VALUE + 2;
        *r++ = 0x0a; /* GetRes.value */
        *r++ = FLOOR_VALUE;
        memset(r, 'v', FLOOR_VALUE);
        r += FLOOR_VALUE;
        *m++ = 0x12; /* ServerFrame.response */
        m = floor_varint(m, (uint64_t)(r - res));
        memcpy(m, res, (size_t)(r - res));
        m += r - res;
    }
    size_t n = (size_t)(m - msg);
    if (4 + n > room)
        return 0;
    out[0] = out[1] = 0;
    out[2] = (uint8_t)(n >> 8);
    out[3] = (uint8_t)n;
    memcpy(out + 4, msg, n);
    return 4 + n;
}

/* Drop a connection. */
static void floor_close(int ep, struct floor_conn *c)
{
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c);
}

/* Write pending replies; watch for writability only while some remain.  Returns -1 on error. */
static int floor_flush(int ep, struct floor_conn *c)
{
    if (c->woff < c->wlen) {
        ssize_t w = write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
        if (w < 0 && errno != EAGAIN)
            return -1;
        if (w > 0)
            c->woff += (uint32_t)w;
    }
    int pending = c->woff < c->wlen;
    if (!pending)
        c->woff = c->wlen = 0;
    if (pending != c->want_out) {
        struct epoll_event ev = {.events = EPOLLIN | (pending ? EPOLLOUT : 0u), .data.ptr = c};
        epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
        c->want_out = pending;
    }
    return 0;
}

/* One read, every complete frame answered, one write. */
static void floor_readable(int ep, struct floor_conn *c)
{
    ssize_t r = read(c->fd, c->rbuf + c->rlen, FLOOR_BUF - c->rlen);
    if (r <= 0) {
        if (r < 0 && errno == EAGAIN)
            return;
        floor_close(ep, c);
        return;
    }
    c->rlen += (uint32_t)r;
    uint32_t off = 0;
    while (c->rlen - off >= 4) {
        uint32_t len = (uint32_t)c->rbuf[off] << 24 | (uint32_t)c->rbuf[off + 1] << 16 |
                       (uint32_t)c->rbuf[off + 2] << 8 | c->rbuf[off + 3];
        if (len > FLOOR_BUF - 4) {
            floor_close(ep, c);
            return;
        }
        if (c->rlen - off < 4 + len)
            break;
        size_t n = floor_reply(c->wbuf + c->wlen, FLOOR_BUF - c->wlen, c->rbuf + off + 4, len);
        if (!n)
            break; /* output full: leave the rest for the next round */
        c->wlen += (uint32_t)n;
        off += 4 + len;
    }
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
    if (floor_flush(ep, c) < 0)
        floor_close(ep, c);
}

/* Accept every pending connection. */
static void floor_accept(int ep, int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        /* TCP_NODELAY comes from the listener; malloc, not calloc: only the header needs zeroes. */
        struct floor_conn *c = malloc(sizeof *c);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (!c || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        c->fd = fd;
        c->rlen = c->wlen = c->woff = 0;
        c->want_out = 0;
    }
}

/* Listen on 127.0.0.1 (port from the kernel), write the port file, serve until a signal. */
int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--port-file")) {
        fprintf(stderr, "usage: muster-floord --port-file PATH\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = floor_on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    int one = 1;
    if (lfd >= 0)
        setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 65535) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) < 0) {
        perror("muster-floord: listen");
        return 1;
    }
    FILE *f = fopen(argv[2], "w");
    if (!f)
        return 1;
    fprintf(f, "%u\n", ntohs(a.sin_port));
    fclose(f);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    struct epoll_event evs[512];
    while (!floor_stop) {
        int k = epoll_wait(ep, evs, 512, 200);
        for (int i = 0; i < k; i++) {
            struct floor_conn *c = evs[i].data.ptr;
            if (!c)
                floor_accept(ep, lfd);
            else if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                floor_readable(ep, c);
            else if (floor_flush(ep, c) < 0)
                floor_close(ep, c);
        }
    }
    return 0;
}
