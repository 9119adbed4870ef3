/*
 * Connection I/O.  Plain TCP connections skip bufferevent: a persistent
 * read event does one recv of up to CONN_IO_CHUNK bytes per wakeup into a
 * stack buffer, whole frames are handled straight from it (only a partial
 * frame is copied into the input buffer), every reply is packed into the
 * output buffer, and the output goes out in one writev at the end of the
 * callback.  The write event is added only while bytes remain after that
 * write, so a request/reply costs no epoll_ctl and no FIONREAD.  Output
 * queued from elsewhere (a woken waiter, a released barrier, durable log)
 * activates the write event by hand, which batches a loop turn's replies
 * into one write per connection.
 *
 * TLS connections keep bufferevent_openssl, whose read and write callbacks
 * land in the same conn.c entry points.
 */
#include "conn_io.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "persist.h"
#include "server.h"
#include "tls.h"

/* Bytes read per wakeup: well above a typical request batch, still fair to other connections. */
#define CONN_IO_CHUNK (64 * 1024)
/* Input read ahead of the frame being waited for; past it, reading waits until frames are handled. */
#define CONN_IO_READ_AHEAD (256 * 1024)

/* Write what the output holds, then keep the write event added exactly while bytes remain. */
static void conn_io_flush(struct conn *c)
{
    if (c->state == CONN_DEAD)
        return;
    if (evbuffer_get_length(c->out) > 0 && evbuffer_write(c->out, c->fd) < 0 && errno != EAGAIN &&
        errno != EWOULDBLOCK && errno != EINTR) {
        conn_close(c, strerror(errno));
        return;
    }
    int left = evbuffer_get_length(c->out) > 0;
    if (left && !c->writing)
        event_add(c->wev, NULL);
    else if (!left && c->writing)
        event_del(c->wev);
    c->writing = left;
    conn_output_written(c);
}

/* Read event of a plain connection: one recv, handle the frames, write the replies, then act on EOF. */
static void conn_io_read_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct conn *c = arg;
    uint8_t buf[CONN_IO_CHUNK];
    ssize_t n = -1;
    if (c->state == CONN_DEAD)
        return;
    if (evbuffer_get_length(c->in) < c->want + CONN_IO_READ_AHEAD) {
        n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            conn_close(c, strerror(errno));
            return;
        }
    }
    c->busy = 1;
    conn_input(c, n > 0 ? buf : NULL, n > 0 ? (size_t)n : 0);
    c->busy = 0;
    conn_io_flush(c);
    if (n == 0)
        conn_close(c, "peer closed");
}

/* Write event of a plain connection: the socket took more, or output was queued from elsewhere. */
static void conn_io_write_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_io_flush(arg);
}

/* Held output became durable and was appended to the output buffer: send it. */
static void conn_io_hold_kick(struct persist_hold *h)
{
    conn_io_kick((struct conn *)((char *)h - offsetof(struct conn, hold)));
}

/* bufferevent read callback (TLS): the input buffer holds new bytes. */
static void conn_io_bev_read_cb(struct bufferevent *bev, void *arg)
{
    (void)bev;
    conn_input(arg, NULL, 0);
}

/* bufferevent write callback (TLS): output drained below the low watermark. */
static void conn_io_bev_write_cb(struct bufferevent *bev, void *arg)
{
    (void)bev;
    conn_output_written(arg);
}

/* bufferevent event callback (TLS): EOF or a socket or TLS error. */
static void conn_io_bev_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    if (what & BEV_EVENT_ERROR)
        tls_note_error(c->srv, bev, conn_peer(c));
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_close(c, (what & BEV_EVENT_EOF) ? "peer closed" : strerror(EVUTIL_SOCKET_ERROR()));
}

/* Set up a TLS connection's bufferevent; 0 or -1 (fd closed). */
static int conn_io_open_tls(struct conn *c, int fd)
{
    if (!(c->bev = tls_bufferevent(c->srv, fd)))
        return -1;
    c->fd = -1;
    c->in = bufferevent_get_input(c->bev);
    c->out = bufferevent_get_output(c->bev);
    bufferevent_setcb(c->bev, conn_io_bev_read_cb, conn_io_bev_write_cb, conn_io_bev_event_cb, c);
    bufferevent_setwatermark(c->bev, EV_WRITE, c->srv->opt.max_output / 2, 0);
    bufferevent_setwatermark(c->bev, EV_READ, c->want, c->want + CONN_IO_READ_AHEAD);
    return 0;
}

/* Set up c's I/O around fd (tls: through OpenSSL); 0, or -1 with fd closed and nothing left to free. */
int conn_io_open(struct conn *c, int fd, int tls)
{
    if (tls)
        return conn_io_open_tls(c, fd);
    struct event_base *base = c->srv->base;
    c->fd = fd;
    c->in = evbuffer_new();
    c->out = evbuffer_new();
    c->rev = event_new(base, fd, EV_READ | EV_PERSIST, conn_io_read_cb, c);
    c->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, conn_io_write_cb, c);
    c->hold.out = c->out;
    c->hold.kick = conn_io_hold_kick;
    if (c->in && c->out && c->rev && c->wev)
        return 0;
    conn_io_free(c);
    return -1;
}

/* Release c's I/O and close its socket. */
void conn_io_free(struct conn *c)
{
    if (c->bev) {
        bufferevent_free(c->bev);
        return;
    }
    if (c->rev)
        event_free(c->rev);
    if (c->wev)
        event_free(c->wev);
    if (c->in)
        evbuffer_free(c->in);
    if (c->out)
        evbuffer_free(c->out);
    close(c->fd);
}

/* Start reading and writing (after accept). */
void conn_io_start(struct conn *c)
{
    if (c->bev)
        bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    else
        event_add(c->rev, NULL);
}

/* Stop every callback of c for good (it is being closed). */
void conn_io_stop(struct conn *c)
{
    if (c->bev) {
        bufferevent_disable(c->bev, EV_READ | EV_WRITE);
        return;
    }
    event_del(c->rev);
    event_del(c->wev);
    c->writing = 0;
}

/* The buffer replies are packed into. */
struct evbuffer *conn_io_out(struct conn *c)
{
    return c->out;
}

/* The buffer of input received but not yet handled. */
struct evbuffer *conn_io_in(struct conn *c)
{
    return c->in;
}

/* Turn reading from the socket on or off (backpressure). */
void conn_io_reading(struct conn *c, int on)
{
    if (c->bev)
        on ? bufferevent_enable(c->bev, EV_READ) : bufferevent_disable(c->bev, EV_READ);
    else if (on)
        event_add(c->rev, NULL);
    else
        event_del(c->rev);
}

/* Output was queued outside c's own input handling: write it on this loop turn. */
void conn_io_kick(struct conn *c)
{
    /* A bufferevent schedules its own write; inside the read callback the write comes at its end. */
    if (c->bev || c->busy || c->state == CONN_DEAD)
        return;
    event_active(c->wev, EV_WRITE, 0);
}

/* Input holds frames left over after a batch: handle them on a later turn. */
void conn_io_again(struct conn *c)
{
    if (c->bev)
        bufferevent_trigger(c->bev, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
    else
        event_active(c->rev, EV_READ, 0);
}

/* The input must hold want bytes before the next frame can be handled. */
void conn_io_want(struct conn *c, size_t want)
{
    if (c->want == want)
        return;
    c->want = want;
    /* A bufferevent calls back only past the low watermark and stops reading at the high one. */
    if (c->bev)
        bufferevent_setwatermark(c->bev, EV_READ, want, want + CONN_IO_READ_AHEAD);
}

/* The connection is closing once its output is out: decide on a later turn (the output may be empty). */
void conn_io_finish(struct conn *c)
{
    if (!c->bev) {
        event_active(c->wev, EV_WRITE, 0);
        return;
    }
    bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
    if (evbuffer_get_length(c->out) == 0 && !persist_holding(&c->hold))
        bufferevent_trigger(c->bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/* Shut the write side of the socket. */
void conn_io_shutdown(struct conn *c)
{
    shutdown(c->bev ? bufferevent_getfd(c->bev) : c->fd, SHUT_WR);
}
