/*
 * Connection I/O, shared by both front ends (native connections in conn.c,
 * TCPStore connections in tcpstore.c), which embed a struct conn_io and
 * pass in their callbacks.  Plain TCP connections skip bufferevent: a
 * persistent read event does one recv of up to CONN_IO_CHUNK bytes per
 * wakeup into a stack buffer, whole requests are handled straight from it
 * (only a partial one is copied into the input buffer), every reply is
 * appended to the output buffer, and the output goes out in one writev at
 * the end of the callback.  The write event is added only while bytes
 * remain after that write, so a request/reply costs no epoll_ctl and no
 * FIONREAD.  Output queued from elsewhere (a woken waiter, a released
 * barrier, durable log) activates the write event by hand, which batches a
 * loop turn's replies into one write per connection.
 *
 * TLS connections (native only) keep bufferevent_openssl, whose read and
 * write callbacks land in the same owner callbacks.
 *
 * While reading is off (backpressure, or input held behind a parked
 * request) the socket is still watched for the peer's close (EV_CLOSED,
 * EPOLLRDHUP), so a client that gives up is noticed at once and its
 * connection, fd and parked requests are released instead of lingering
 * until the daemon exits.  A half-close (shutdown of the client's write
 * side) counts as a close there: no request sent after it could be read.
 *
 * Every connection's buffered input and output is added up in the
 * buffer_bytes_current counter after each read and write; past
 * --max-buffer-memory the connections holding the most are closed, so many
 * clients each within their own bounds cannot together exhaust memory.
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

#include "clock.h"
#include "log.h"
#include "persist.h"
#include "server.h"
#include "shared_bytes.h"
#include "tls.h"

/* Bytes read per wakeup: well above a typical request batch, still fair to other connections. */
#define CONN_IO_CHUNK (64 * 1024)
/* Input read ahead of the frame being waited for; past it, reading waits until frames are handled. */
#define CONN_IO_READ_AHEAD (256 * 1024)

/* Input read ahead of the frame being waited for before reading waits. */
static size_t conn_io_ahead(const struct conn_io *io)
{
    return io->ahead ? io->ahead : CONN_IO_READ_AHEAD;
}

/* Close the connections holding the most buffered bytes until the total is within --max-buffer-memory. */
static void conn_io_over_budget(struct server *srv)
{
    uint64_t max = srv->opt.max_buffer_memory;
    while (max && srv->stats.c[STAT_BUFFER_BYTES] > max) {
        struct conn_io *big = NULL;
        for (struct conn_io *io = srv->ios; io; io = io->next_io)
            if (!io->dead && io->counted && (!big || io->counted > big->counted))
                big = io;
        if (!big)
            return;
        stats_inc(&srv->stats, STAT_LIMIT_BUFFER_MEMORY);
        log_msg(LOG_WARN, "closing a connection holding %zu buffered bytes: %llu in all exceeds --max-buffer-memory",
                big->counted, (unsigned long long)srv->stats.c[STAT_BUFFER_BYTES]);
        big->ops->closed(big, 0, "over the buffer memory budget");
        if (!big->dead)
            return; /* the owner kept it: do not loop */
    }
}

/* Bring io's share of the server's buffer total up to date (nothing once it is stopped); bytes its output
 * holds by reference are counted once, with their block (shared_bytes.c). */
static void conn_io_account(struct conn_io *io)
{
    size_t out = io->dead ? 0 : evbuffer_get_length(io->out);
    size_t shared = io->tally ? io->tally->bytes : 0;
    size_t now = io->dead ? 0 : evbuffer_get_length(io->in) + (out > shared ? out - shared : 0);
    if (now == io->counted)
        return;
    struct server *srv = io->srv;
    srv->stats.c[STAT_BUFFER_BYTES] += now;
    srv->stats.c[STAT_BUFFER_BYTES] -= io->counted;
    io->counted = now;
    if (now > 0 && srv->opt.max_buffer_memory && srv->stats.c[STAT_BUFFER_BYTES] > srv->opt.max_buffer_memory)
        conn_io_over_budget(srv);
}

/* Write what the output holds, then keep the write event added exactly while bytes remain. */
static void conn_io_flush(struct conn_io *io)
{
    if (io->dead)
        return;
    if (evbuffer_get_length(io->out) > 0 && evbuffer_write(io->out, io->fd) < 0 && errno != EAGAIN &&
        errno != EWOULDBLOCK && errno != EINTR) {
        io->ops->closed(io, 1, strerror(errno));
        return;
    }
    int left = evbuffer_get_length(io->out) > 0;
    /* Added on every flush that leaves bytes, not only when the flag says it is not: libevent ignores
     * event_add on an event that is active, and wev is active when output queued from elsewhere kicked
     * it (conn_io_kick) and a read callback flushes first.  That add did nothing, the kick's callback
     * then found the flag set, and the output stayed unwritten with no write event, so a peer that went
     * away was never seen either.  Adding an event that is already added costs no system call. */
    if (left)
        event_add(io->wev, NULL);
    else if (io->writing)
        event_del(io->wev);
    io->writing = left;
    io->ops->written(io);
    conn_io_account(io);
}

/* Read event of a plain connection: one recv, handle the input, write the replies, then act on EOF. */
static void conn_io_read_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn_io *io = arg;
    uint8_t buf[CONN_IO_CHUNK];
    ssize_t n = -1;
    if (io->dead)
        return;
    /* The leftovers' event (what 0) only handles what the input holds; the socket is the read event's. */
    if (what && !conn_io_full(io)) {
        n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            io->ops->closed(io, 1, strerror(errno));
            return;
        }
    }
    /* Bytes behind a partial request join it in the input buffer; otherwise the owner takes them
     * straight from buf and keeps only what it does not consume. */
    int direct = n > 0 && evbuffer_get_length(io->in) == 0;
    if (n > 0 && !direct && evbuffer_add(io->in, buf, (size_t)n) != 0) {
        io->ops->closed(io, 1, "out of memory");
        return;
    }
    io->got_input |= n > 0;
    io->busy = 1;
    io->ops->input(io, direct ? buf : NULL, direct ? (size_t)n : 0);
    io->busy = 0;
    conn_io_flush(io);
    if (n == 0 && !io->dead)
        io->ops->closed(io, 0, "peer closed");
}

/* Leftovers' event of a plain connection: handle the frames a batch left in the input. */
static void conn_io_again_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    conn_io_read_cb(fd, 0, arg);
}

/* Write event of a plain connection: the socket took more, or output was queued from elsewhere. */
static void conn_io_write_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    conn_io_flush(arg);
}

/* The peer closed (or the socket failed) while reading was off. */
static void conn_io_close_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct conn_io *io = arg;
    if (!io->dead)
        io->ops->closed(io, 0, "peer closed while its input was held");
}

/* Create the close watch on fd; 0 or -1. */
static int conn_io_open_cev(struct conn_io *io, struct server *srv, int fd)
{
    io->cev = event_new(srv->base, fd, EV_CLOSED | EV_PERSIST, conn_io_close_cb, io);
    return io->cev ? 0 : -1;
}

/* Held output became durable and was appended to the output buffer: send it. */
static void conn_io_hold_kick(struct persist_hold *h)
{
    conn_io_kick((struct conn_io *)((char *)h - offsetof(struct conn_io, hold)));
}

/* bufferevent read callback (TLS): the input buffer holds new bytes. */
static void conn_io_bev_read_cb(struct bufferevent *bev, void *arg)
{
    (void)bev;
    struct conn_io *io = arg;
    io->got_input = 1;
    io->ops->input(io, NULL, 0);
    conn_io_account(io);
}

/* bufferevent write callback (TLS): output drained below the low watermark. */
static void conn_io_bev_write_cb(struct bufferevent *bev, void *arg)
{
    (void)bev;
    struct conn_io *io = arg;
    io->ops->written(io);
    conn_io_account(io);
}

/* bufferevent event callback (TLS): EOF or a socket or TLS error. */
static void conn_io_bev_event_cb(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    struct conn_io *io = arg;
    if (what & BEV_EVENT_ERROR)
        io->ops->closed(io, 1, strerror(EVUTIL_SOCKET_ERROR()));
    else if (what & BEV_EVENT_EOF)
        io->ops->closed(io, 0, "peer closed");
}

/* Set up a TLS connection's bufferevent; 0 or -1 (fd closed). */
static int conn_io_open_tls(struct conn_io *io, struct server *srv, int fd)
{
    if (!(io->bev = tls_bufferevent(srv, fd)))
        return -1;
    if (conn_io_open_cev(io, srv, fd) != 0) {
        bufferevent_free(io->bev);
        return -1;
    }
    io->fd = -1;
    io->in = bufferevent_get_input(io->bev);
    io->out = bufferevent_get_output(io->bev);
    bufferevent_setcb(io->bev, conn_io_bev_read_cb, conn_io_bev_write_cb, conn_io_bev_event_cb, io);
    bufferevent_setwatermark(io->bev, EV_WRITE, srv->opt.max_output / 2, 0);
    bufferevent_setwatermark(io->bev, EV_READ, io->want, io->want + conn_io_ahead(io));
    return 0;
}

/* Link an opened io into the server's list; 0. */
static int conn_io_link(struct conn_io *io)
{
    io->next_io = io->srv->ios;
    if (io->next_io)
        io->next_io->prev_io = io;
    io->srv->ios = io;
    return 0;
}

/* Set up io around fd (tls: through OpenSSL) with the owner's ops; 0, or -1 with fd closed and nothing to free. */
int conn_io_open(struct conn_io *io, struct server *srv, int fd, int tls, const struct conn_io_ops *ops)
{
    io->ops = ops;
    io->srv = srv;
    if (tls)
        return conn_io_open_tls(io, srv, fd) == 0 ? conn_io_link(io) : -1;
    io->fd = fd;
    io->in = evbuffer_new();
    io->out = evbuffer_new();
    io->rev = event_new(srv->base, fd, EV_READ | EV_PERSIST, conn_io_read_cb, io);
    io->wev = event_new(srv->base, fd, EV_WRITE | EV_PERSIST, conn_io_write_cb, io);
    io->aev = event_new(srv->base, -1, 0, conn_io_again_cb, io);
    conn_io_open_cev(io, srv, fd);
    io->hold.out = io->out;
    io->hold.kick = conn_io_hold_kick;
    io->hold.fd = fd;
    if (io->in && io->out && io->rev && io->wev && io->aev && io->cev)
        return conn_io_link(io);
    conn_io_free(io);
    return -1;
}

/* When the request incomplete in an input holding held bytes began: now, partial_ms, or 0 (none);
 * last_done_ms is when the last whole request was taken. */
uint64_t conn_io_partial_since(uint64_t partial_ms, uint64_t last_done_ms, size_t held)
{
    if (!held)
        return 0;
    /* A request finished after the incomplete one began: the bytes held now start a new one. */
    if (!partial_ms || last_done_ms > partial_ms)
        return clock_now_ms();
    return partial_ms;
}

static void conn_io_free_plain(struct conn_io *io);

/* Release io and close its socket; a drain ends when the last connection's goes (server_conn_gone). */
void conn_io_free(struct conn_io *io)
{
    if (io->prev_io)
        io->prev_io->next_io = io->next_io;
    else if (io->srv && io->srv->ios == io)
        io->srv->ios = io->next_io;
    if (io->next_io)
        io->next_io->prev_io = io->prev_io;
    io->dead = 1;
    if (io->srv)
        conn_io_account(io);
    shared_tally_unref(io->tally);   /* its buffers may outlive io: they hold their own references */
    if (io->cev)
        event_free(io->cev);
    if (io->bev) {
        bufferevent_free(io->bev);
    } else {
        conn_io_free_plain(io);
    }
    if (io->srv)
        server_conn_gone(io->srv);
}

/* The tally of what io's output holds by reference, made on first use. */
struct shared_tally *conn_io_tally(struct conn_io *io)
{
    if (!io->tally)
        io->tally = shared_tally_new();
    return io->tally;
}

/* Free a plain connection's events and buffers and close its socket. */
static void conn_io_free_plain(struct conn_io *io)
{
    if (io->rev)
        event_free(io->rev);
    if (io->wev)
        event_free(io->wev);
    if (io->aev)
        event_free(io->aev);
    if (io->in)
        evbuffer_free(io->in);
    if (io->out)
        evbuffer_free(io->out);
    close(io->fd);
}

/* Start reading and writing (after accept). */
void conn_io_start(struct conn_io *io)
{
    if (io->bev)
        bufferevent_enable(io->bev, EV_READ | EV_WRITE);
    else
        event_add(io->rev, NULL);
}

/* Stop every callback of io for good (its connection is being closed). */
void conn_io_stop(struct conn_io *io)
{
    io->dead = 1;
    conn_io_account(io);
    if (io->cev)
        event_del(io->cev);
    if (io->bev) {
        bufferevent_disable(io->bev, EV_READ | EV_WRITE);
        return;
    }
    event_del(io->rev);
    event_del(io->wev);
    event_del(io->aev);
    io->writing = 0;
}

/* Turn reading from the socket on or off (backpressure). */
void conn_io_reading(struct conn_io *io, int on)
{
    if (io->dead)
        return;
    on ? event_del(io->cev) : event_add(io->cev, NULL);
    if (io->bev)
        on ? bufferevent_enable(io->bev, EV_READ) : bufferevent_disable(io->bev, EV_READ);
    else if (on)
        event_add(io->rev, NULL);
    else
        event_del(io->rev);
}

/* Output was queued: write it at the end of the read callback, or on this loop turn when outside it. */
void conn_io_kick(struct conn_io *io)
{
    /* A bufferevent schedules its own write (its callback comes only below the low watermark, so output
     * is counted here); inside the read callback the write comes at its end. */
    if (io->bev && !io->dead)
        conn_io_account(io);
    if (io->bev || io->busy || io->dead)
        return;
    event_active(io->wev, EV_WRITE, 0);
}

/* Input holds frames left over after a batch: handle them on a later turn. */
void conn_io_again(struct conn_io *io)
{
    if (io->bev)
        bufferevent_trigger(io->bev, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
    else
        event_active(io->aev, EV_TIMEOUT, 0);
}

/* The input must hold want bytes before the next frame can be handled. */
void conn_io_want(struct conn_io *io, size_t want)
{
    if (io->want == want)
        return;
    io->want = want;
    /* A bufferevent calls back only past the low watermark and stops reading at the high one. */
    if (io->bev)
        bufferevent_setwatermark(io->bev, EV_READ, want, want + conn_io_ahead(io));
}

/* Let the input grow to bytes ahead of the frame being waited for before reading waits (0: the default). */
void conn_io_read_ahead(struct conn_io *io, size_t bytes)
{
    if (io->ahead == bytes)
        return;
    io->ahead = bytes;
    if (io->bev)
        bufferevent_setwatermark(io->bev, EV_READ, io->want, io->want + conn_io_ahead(io));
}

/* Whether the input holds as much as is read ahead of the frame being waited for (reading then waits). */
int conn_io_full(const struct conn_io *io)
{
    return evbuffer_get_length(io->in) >= io->want + conn_io_ahead(io);
}

/* The connection is closing once its output is out: decide on a later turn (the output may be empty). */
void conn_io_finish(struct conn_io *io)
{
    if (!io->bev) {
        event_active(io->wev, EV_WRITE, 0);
        return;
    }
    bufferevent_setwatermark(io->bev, EV_WRITE, 0, 0);
    if (evbuffer_get_length(io->out) == 0 && !persist_holding(&io->hold))
        bufferevent_trigger(io->bev, EV_WRITE, BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/* Shut the write side of the socket. */
void conn_io_shutdown(struct conn_io *io)
{
    shutdown(io->bev ? bufferevent_getfd(io->bev) : io->fd, SHUT_WR);
}

/* Before closing a failed TLS connection: shut the write side and discard
 * the input the kernel holds.  A close with unread input sends a reset,
 * and a reset that overtakes the TLS alert destroys it at the client, which
 * then sees a lost connection (and retries) instead of a refused
 * certificate.  The client's first request follows its handshake at once,
 * so it is there to discard by the time the server refuses. */
void conn_io_discard_input(struct conn_io *io)
{
    int fd = io->bev ? bufferevent_getfd(io->bev) : io->fd;
    char buf[4096];
    if (fd < 0)
        return;
    shutdown(fd, SHUT_WR);
    for (int i = 0; i < 64 && recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0; i++)
        ;
}
