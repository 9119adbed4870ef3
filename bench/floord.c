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
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floorproto.h"

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
    long wn = floor_answer(floor_in, have, floor_out, sizeof floor_out, &off);
    if (wn < 0) {
        floor_close(ep, c);
        return;
    }
    c->rlen = have - off;
    if ((c->rlen && floor_keep(&c->rbuf, floor_in + off, c->rlen) < 0) || floor_write(ep, c, floor_out, (size_t)wn) < 0)
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
    if (floor_begin("muster-floord", argc, argv) != 0)
        return 2;
    int lfd = floor_listen("muster-floord", argv[2], 1);
    if (lfd < 0)
        return 1;
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
