/*
 * libFuzzer target for the daemon's frame decoder and dispatcher.  Each
 * input is one ClientFrame body.  A fresh in-process server (no listener)
 * takes one end of a socketpair as a client connection; the other end sends
 * a valid Hello frame and then the input behind its length prefix, reads
 * whatever comes back, and closes.  Afterwards no connection, parked request
 * or watch may be left, and the server is torn down (leaks show under ASan).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"
#include "frame.h"
#include "daemon.h"
#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bodies above this are skipped: they only exercise the length limit. */
#define FUZZ_MAX_BODY (64u * 1024)
/* Loop turns allowed for one input (each turn is non-blocking). */
#define FUZZ_TURNS 256

/* Build the bytes the fake client sends: a Hello frame, then the input as one frame. */
static uint8_t *fuzz_frame_stream(const uint8_t *data, size_t size, size_t *len)
{
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    Muster__Hello h = MUSTER__HELLO__INIT;
    size_t hn;
    uint8_t *buf;
    h.protocol_version = 1;
    h.namespace_ = (char *)"fuzz";
    h.client_name = (char *)"fuzz";
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_HELLO;
    f.hello = &h;
    hn = frame_size(&f.base);
    buf = malloc(hn + FRAME_HDR + size);
    if (!buf)
        return NULL;
    frame_pack(&f.base, buf);
    frame_put_len(buf + hn, (uint32_t)size);
    if (size)
        memcpy(buf + hn + FRAME_HDR, data, size);
    *len = hn + FRAME_HDR + size;
    return buf;
}

/* Run one loop turn and discard what the server wrote; returns bytes read (-1 at EOF). */
static ssize_t fuzz_frame_turn(struct server *srv, int fd)
{
    uint8_t sink[16384];
    ssize_t got = 0, r;
    event_base_loop(srv->base, EVLOOP_NONBLOCK);
    while ((r = read(fd, sink, sizeof sink)) > 0)
        got += r;
    return r == 0 && got == 0 ? -1 : got;
}

/* Feed the stream to the server over fd, letting it answer, until it is all sent and quiet. */
static void fuzz_frame_exchange(struct server *srv, int fd, const uint8_t *buf, size_t len)
{
    size_t off = 0;
    int quiet = 0;
    for (int turn = 0; turn < FUZZ_TURNS && quiet < 3; turn++) {
        ssize_t got;
        if (off < len) {
            ssize_t w = send(fd, buf + off, len - off, MSG_NOSIGNAL);
            if (w > 0)
                off += (size_t)w;
            else if (w < 0 && errno != EAGAIN)
                break;
        }
        got = fuzz_frame_turn(srv, fd);
        if (got < 0)
            break;
        quiet = off == len && got == 0 ? quiet + 1 : 0;
    }
}

/* Start a listener-less server with small, quiet settings; 0 on success. */
static int fuzz_frame_server(struct server *srv)
{
    char *argv[] = {"musterd-fuzz", "--log-level", "error", NULL};
    return daemon_init(srv, 3, argv) == -1 ? 0 : -1;
}

/* Send one body through a fresh server and check nothing outlives the connection. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct server srv;
    uint8_t *buf;
    size_t len = 0;
    int sv[2];
    if (size > FUZZ_MAX_BODY || !(buf = fuzz_frame_stream(data, size, &len)))
        return 0;
    if (fuzz_frame_server(&srv) != 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
        abort();
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    conn_accept(&srv, sv[0], (struct sockaddr *)&sa, sizeof sa);
    fuzz_frame_exchange(&srv, sv[1], buf, len);
    close(sv[1]);
    for (int turn = 0; turn < FUZZ_TURNS && srv.conns; turn++)
        event_base_loop(srv.base, EVLOOP_NONBLOCK);
    /* Closing the client must end its connection and everything it parked or watched. */
    if (srv.conns || srv.nconns || srv.core.nwaiters || srv.core.nwatches)
        abort();
    daemon_fini(&srv);
    free(buf);
    return 0;
}
