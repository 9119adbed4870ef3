/*
 * muster-floord: the capacity floor.  A single-threaded epoll server that does nothing but
 * what any such server must: one read per readable connection and one write of the
 * replies.  It answers the native protocol just well enough for muster-loadgen: a Hello
 * gets a canned HelloReply, every Request gets Response{id, get{64-byte value}} (the same
 * bytes musterd sends for a get).  Its requests per CPU-second under the load generator
 * bound what musterd can reach on this machine, and so does its time for a storm (the
 * load generator's --floor 1: the same exchanges, a barrier answered at once).  Like
 * musterd it reads into one shared buffer and keeps per-connection buffers only for a
 * half-received frame or unsent output.
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

/* Bytes read per wakeup, and the most one connection may have unsent or half received. */
#define FLOOR_BUF 16384
#define FLOOR_VALUE 64

/* A connection holds buffers only while a frame is half received or output is unsent, so
 * 16k idle ranks cost a few dozen bytes each, as they do in musterd. */
struct floor_conn {
    int fd;
    uint32_t rlen;   /* bytes of a partial frame kept in rbuf */
    uint32_t wlen;   /* unsent output kept in wbuf, from woff */
    uint32_t woff;
    int want_out;
    uint8_t *rbuf;
    uint8_t *wbuf;
};

/* One wakeup's input and output, shared by every connection (single-threaded). */
static uint8_t floor_in[2 * FLOOR_BUF];
static uint8_t floor_out[FLOOR_BUF];

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
    free(c->rbuf);
    free(c->wbuf);
    free(c);
}

/* Keep n bytes at p in *buf (allocated on first use); 0, or -1 when memory ran out. */
static int floor_keep(uint8_t **buf, const uint8_t *p, size_t n)
{
    if (!*buf && !(*buf = malloc(FLOOR_BUF)))
        return -1;
    memmove(*buf, p, n);
    return 0;
}

/* Watch for writability exactly while output is unsent. */
static void floor_want_out(int ep, struct floor_conn *c)
{
    int pending = c->wlen > 0;
    if (pending == c->want_out)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (pending ? EPOLLOUT : 0u), .data.ptr = c};
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = pending;
}

/* Write n bytes at p after whatever is unsent, keeping what the socket does not take; -1 on error. */
static int floor_write(int ep, struct floor_conn *c, const uint8_t *p, size_t n)
{
    if (c->wlen) {
        if (c->woff + c->wlen + n > FLOOR_BUF)
            return -1; /* the client does not read its replies: not a floor case */
        memcpy(c->wbuf + c->woff + c->wlen, p, n);
        c->wlen += (uint32_t)n;
        p = c->wbuf + c->woff;
        n = c->wlen;
    }
    ssize_t w = n ? write(c->fd, p, n) : 0;
    if (w < 0 && errno != EAGAIN)
        return -1;
    size_t left = n - (size_t)(w > 0 ? w : 0);
    if (left && floor_keep(&c->wbuf, p + (n - left), left) < 0)
        return -1;
    c->woff = 0;
    c->wlen = (uint32_t)left;
    floor_want_out(ep, c);
    return 0;
}

/* One read, every complete frame answered, one write. */
static void floor_readable(int ep, struct floor_conn *c)
{
    uint32_t have = c->rlen;
    if (have)
        memcpy(floor_in, c->rbuf, have);
    ssize_t r = read(c->fd, floor_in + have, FLOOR_BUF);
    if (r <= 0) {
        if (r < 0 && errno == EAGAIN)
            return;
        floor_close(ep, c);
        return;
    }
    have += (uint32_t)r;
    uint32_t off = 0;
    size_t wn = 0;
    while (have - off >= 4) {
        uint32_t len = (uint32_t)floor_in[off] << 24 | (uint32_t)floor_in[off + 1] << 16 |
                       (uint32_t)floor_in[off + 2] << 8 | floor_in[off + 3];
        if (len > FLOOR_BUF - 4) {
            floor_close(ep, c);
            return;
        }
        if (have - off < 4 + len)
            break;
        size_t n = floor_reply(floor_out + wn, sizeof floor_out - wn, floor_in + off + 4, len);
        if (!n)
            break; /* output full: the rest waits for the next read */
        wn += n;
        off += 4 + len;
    }
    c->rlen = have - off;
    if ((c->rlen && floor_keep(&c->rbuf, floor_in + off, c->rlen) < 0) || floor_write(ep, c, floor_out, wn) < 0)
        floor_close(ep, c);
}

/* Accept every pending connection. */
static void floor_accept(int ep, int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        /* TCP_NODELAY comes from the listener. */
        struct floor_conn *c = malloc(sizeof *c);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (!c || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            continue;
        }
        *c = (struct floor_conn){.fd = fd};
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
            else if (floor_write(ep, c, NULL, 0) < 0)
                floor_close(ep, c);
        }
    }
    return 0;
}
