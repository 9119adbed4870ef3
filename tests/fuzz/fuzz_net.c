/*
 * The multi-connection fuzz harness (fuzz_net.h).  Clients are the far
 * ends of non-blocking socketpairs whose near ends the server takes as
 * accepted sockets from 127.0.0.1.  The server's end gets a small send
 * buffer, so a client that stops reading backs the server's output up
 * within a few kilobytes, as a slow reader over TCP would.
 */
#include "fuzz_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The server end's send buffer: small, so backpressure is reached with little data. */
#define FZ_SNDBUF 4096
/* Loop turns a send may wait for the server to read before it gives up. */
#define FZ_SEND_TURNS 16
/* Loop turns to let every connection close at the end. */
#define FZ_CLOSE_TURNS 512

/* Start a server from argv (argc entries, argv[0] a name) and clear the clients; aborts on failure. */
void fz_init(struct fz_net *f, int argc, char **argv, fz_accept_fn accept)
{
    memset(f->c, 0, sizeof f->c);
    for (int i = 0; i < FZ_CONNS; i++)
        f->c[i].fd = -1;
    f->accept = accept;
    if (daemon_init(&f->srv, argc, argv) != -1)
        abort();
}

/* Connect client i when it is closed; returns its fd (-1 when a socketpair cannot be made). */
int fz_open(struct fz_net *f, int i)
{
    struct fz_client *c = &f->c[i];
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(40000 + i))};
    int sv[2], buf = FZ_SNDBUF;
    if (c->fd >= 0)
        return c->fd;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->fd = sv[1];
    c->deaf = c->eof = c->lost = 0;
    c->nin = 0;
    c->generation++;
    f->accept(&f->srv, sv[0], (struct sockaddr *)&sa, sizeof sa);
    return c->fd;
}

/* Close client i's end (the server sees EOF); a no-op when closed. */
void fz_close(struct fz_net *f, int i)
{
    struct fz_client *c = &f->c[i];
    if (c->fd < 0)
        return;
    close(c->fd);
    c->fd = -1;
    c->nin = 0;
}

/* Shut client i's write side (the server sees EOF, replies can still arrive). */
void fz_shutdown(struct fz_net *f, int i)
{
    if (f->c[i].fd >= 0)
        shutdown(f->c[i].fd, SHUT_WR);
}

/* Read what client i has waiting and let the target consume it; returns bytes read (-1 at EOF). */
static ssize_t fz_read(struct fz_net *f, int i)
{
    struct fz_client *c = &f->c[i];
    ssize_t got = 0, r;
    if (c->fd < 0 || c->deaf || c->eof)
        return 0;
    if (!c->in && !(c->in = malloc(FZ_INBUF)))
        abort();
    for (;;) {
        if (c->nin == FZ_INBUF) {
            c->nin = 0; /* more than a frame's worth left unparsed: drop it, and say the stream is lost */
            c->lost = 1;
        }
        r = read(c->fd, c->in + c->nin, FZ_INBUF - c->nin);
        if (r <= 0)
            break;
        c->nin += (size_t)r;
        got += r;
        if (f->consume) {
            size_t used = f->consume(f, i);
            memmove(c->in, c->in + used, c->nin - used);
            c->nin -= used;
        }
    }
    if (r == 0)
        c->eof = 1;
    return r == 0 && got == 0 ? -1 : got;
}

/* Turn the loop and read every listening client until nothing moves for a few turns (or turns run out). */
void fz_pump(struct fz_net *f, int turns)
{
    int quiet = 0;
    for (int t = 0; t < turns && quiet < 3; t++) {
        ssize_t moved = 0;
        event_base_loop(f->srv.base, EVLOOP_NONBLOCK);
        for (int i = 0; i < FZ_CONNS; i++) {
            ssize_t r = fz_read(f, i);
            moved += r > 0 ? r : 0;
        }
        quiet = moved ? 0 : quiet + 1;
    }
}

/* Send len bytes as client i, turning the loop while the socket is full; returns the bytes sent (fewer when
 * it stayed full or the server closed). */
size_t fz_send(struct fz_net *f, int i, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    size_t sent = 0;
    int fd = fz_open(f, i);
    for (int t = 0; fd >= 0 && sent < len && t < FZ_SEND_TURNS;) {
        ssize_t w = send(fd, p + sent, len - sent, MSG_NOSIGNAL);
        if (w > 0) {
            sent += (size_t)w;
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            break; /* the server closed it: what is left is lost, as on a real socket */
        } else {
            fz_pump(f, 2);
            t++;
        }
    }
    return sent;
}

/* Sleep ms, then pump, so timers (deadlines, last calls) fire. */
void fz_tick(struct fz_net *f, int ms)
{
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
    fz_pump(f, 64);
}

/* Close every client and turn the loop until the server freed every connection; 0, or -1 when some remain. */
int fz_close_all(struct fz_net *f)
{
    for (int i = 0; i < FZ_CONNS; i++)
        fz_close(f, i);
    for (int t = 0; t < FZ_CLOSE_TURNS && (f->srv.conns || f->srv.ios); t++)
        event_base_loop(f->srv.base, EVLOOP_NONBLOCK);
    return f->srv.conns || f->srv.ios ? -1 : 0;
}

/* Free the server and the clients' buffers. */
void fz_fini(struct fz_net *f)
{
    for (int i = 0; i < FZ_CONNS; i++) {
        fz_close(f, i);
        free(f->c[i].in);
        f->c[i].in = NULL;
    }
    daemon_fini(&f->srv);
}
