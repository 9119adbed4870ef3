/* The floor servers' share of the native protocol; see floorproto.h. */
#include "floorproto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
size_t floor_reply(uint8_t *out, size_t room, const uint8_t *body, uint32_t blen)
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

/* Answer the whole frames of in; see floorproto.h. */
long floor_answer(const uint8_t *in, uint32_t have, uint8_t *out, size_t room, uint32_t *used)
{
    uint32_t off = 0;
    size_t wn = 0;
    while (have - off >= 4) {
        uint32_t len = (uint32_t)in[off] << 24 | (uint32_t)in[off + 1] << 16 | (uint32_t)in[off + 2] << 8 | in[off + 3];
        if (len > FLOOR_BUF - 4)
            return -1;
        if (have - off < 4 + len)
            break;
        size_t n = floor_reply(out + wn, room - wn, in + off + 4, len);
        if (!n)
            break; /* output full: the rest waits for the next read */
        wn += n;
        off += 4 + len;
    }
    *used = off;
    return (long)wn;
}

volatile sig_atomic_t floor_stop;

/* Stop on SIGTERM/SIGINT. */
static void floor_on_signal(int sig)
{
    (void)sig;
    floor_stop = 1;
}

/* Check the command line and set the signals up; see floorproto.h. */
int floor_begin(const char *prog, int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--port-file")) {
        fprintf(stderr, "usage: %s --port-file PATH\n", prog);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = floor_on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return 0;
}

/* Listen on 127.0.0.1 and write the port file; see floorproto.h. */
int floor_listen(const char *prog, const char *path, int nb)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nb ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    int one = 1;
    if (lfd >= 0) /* accepted connections inherit it */
        setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 65535) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &alen) < 0) {
        fprintf(stderr, "%s: listen: %m\n", prog);
        return -1;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        close(lfd);
        return -1;
    }
    fprintf(f, "%u\n", ntohs(a.sin_port));
    fclose(f);
    return lfd;
}
