/*
 * Raw-socket wire helpers for tests: hand-built frames in, decoded
 * ServerFrames out, every read bounded by a timeout.
 */
#include "raw.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"

/* Frames bigger than this from the server are treated as garbage. */
#define RAW_MAX_FRAME (64u << 20)

/* Monotonic milliseconds. */
static int64_t raw_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Connect to 127.0.0.1:port; returns the fd or -1. */
int raw_connect(uint16_t port)
{
    return raw_connect_from(port, NULL);
}

/* Connect to 127.0.0.1:port from source address src (another 127.x address; NULL: any); fd or -1. */
int raw_connect_from(uint16_t port, const char *src)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)}, me = {.sin_family = AF_INET};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((src && (inet_pton(AF_INET, src, &me.sin_addr) != 1 || bind(fd, (struct sockaddr *)&me, sizeof me) != 0)) ||
        connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Write all n bytes; 0 on success, -1 when the peer is gone. */
int raw_send(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Frame and send one ClientFrame. */
int raw_send_frame(int fd, const Muster__ClientFrame *f)
{
    size_t n = frame_size(&f->base);
    uint8_t *buf = malloc(n);
    int rc;
    if (!buf)
        return -1;
    frame_pack(&f->base, buf);
    rc = raw_send(fd, buf, n);
    free(buf);
    return rc;
}

/* Wrap a Request in a ClientFrame and send it. */
int raw_send_request(int fd, Muster__Request *r)
{
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_REQUEST;
    f.request = r;
    return raw_send_frame(fd, &f);
}

/* Send Hello without reading the answer; 0, or -1 when the peer is gone. */
int raw_send_hello(int fd, const char *ns, const char *token)
{
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    Muster__Hello h = MUSTER__HELLO__INIT;
    h.protocol_version = 1;
    h.namespace_ = (char *)(ns ? ns : "");
    h.token = (char *)(token ? token : "");
    h.client_name = (char *)"raw-test";
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_HELLO;
    f.hello = &h;
    return raw_send_frame(fd, &f);
}

/* Send Hello and read the answer: 0 on HelloReply, else the error status, or -1 on timeout/close. */
int raw_hello(int fd, const char *ns, const char *token)
{
    Muster__ServerFrame *sf;
    int rc = -1;
    if (raw_send_hello(fd, ns, token) < 0)
        return -1;
    sf = raw_recv(fd, 5000, NULL);
    if (sf && sf->frame_case == MUSTER__SERVER_FRAME__FRAME_HELLO_REPLY)
        rc = 0;
    else if (sf && sf->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR)
        rc = sf->error->status;
    else if (sf && sf->frame_case == MUSTER__SERVER_FRAME__FRAME_RESPONSE)
        rc = sf->response->status;
    raw_free(sf);
    return rc;
}

/* Connect and complete a hello in namespace ns; returns the fd or -1. */
int raw_open(uint16_t port, const char *ns)
{
    int fd = raw_connect(port);
    if (fd >= 0 && raw_hello(fd, ns, NULL) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read exactly n bytes before the deadline; RAW_OK or why not. */
static enum raw_why raw_read_full(int fd, uint8_t *buf, size_t n, int64_t deadline)
{
    while (n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - raw_now_ms();
        ssize_t r;
        if (left <= 0)
            return RAW_TIMEOUT;
        if (poll(&p, 1, (int)left) == 0)
            return RAW_TIMEOUT;
        r = recv(fd, buf, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return RAW_EOF;
        buf += r;
        n -= (size_t)r;
    }
    return RAW_OK;
}

/* Read one ServerFrame within timeout_ms; NULL with *why set otherwise (why may be NULL). */
Muster__ServerFrame *raw_recv(int fd, int timeout_ms, enum raw_why *why)
{
    int64_t deadline = raw_now_ms() + timeout_ms;
    uint8_t hdr[FRAME_HDR], *body;
    Muster__ServerFrame *f = NULL;
    enum raw_why w = raw_read_full(fd, hdr, sizeof hdr, deadline);
    uint32_t len = frame_len(hdr);
    if (w == RAW_OK && len > RAW_MAX_FRAME)
        w = RAW_BADFRAME;
    if (w == RAW_OK) {
        body = malloc(len ? len : 1);
        w = body ? raw_read_full(fd, body, len, deadline) : RAW_BADFRAME;
        if (w == RAW_OK && !(f = muster__server_frame__unpack(NULL, len, body)))
            w = RAW_BADFRAME;
        free(body);
    }
    if (why)
        *why = w;
    return f;
}

/* Read frames until the peer closes; 1 when it closed within timeout_ms, else 0. */
int raw_await_close(int fd, int timeout_ms)
{
    int64_t deadline = raw_now_ms() + timeout_ms;
    uint8_t buf[4096];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = deadline - raw_now_ms();
        ssize_t r;
        if (left <= 0 || poll(&p, 1, (int)left) == 0)
            return 0;
        r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
            return 1;
    }
}

/* Free a frame from raw_recv(); NULL is fine. */
void raw_free(Muster__ServerFrame *f)
{
    if (f)
        muster__server_frame__free_unpacked(f, NULL);
}

/* Send set key=value with request id. */
int raw_set(int fd, uint64_t id, const char *key, const void *value, size_t len)
{
    Muster__Request r = MUSTER__REQUEST__INIT;
    Muster__SetReq s = MUSTER__SET_REQ__INIT;
    s.key = (char *)key;
    s.value.data = (uint8_t *)value;
    s.value.len = len;
    r.id = id;
    r.op_case = MUSTER__REQUEST__OP_SET;
    r.set = &s;
    return raw_send_request(fd, &r);
}

/* Send get key (wait, timeout_ms) with request id. */
int raw_get(int fd, uint64_t id, const char *key, int wait, uint32_t timeout_ms)
{
    Muster__Request r = MUSTER__REQUEST__INIT;
    Muster__GetReq g = MUSTER__GET_REQ__INIT;
    g.key = (char *)key;
    g.wait = wait != 0;
    g.timeout_ms = timeout_ms;
    r.id = id;
    r.op_case = MUSTER__REQUEST__OP_GET;
    r.get = &g;
    return raw_send_request(fd, &r);
}

/* Send ping with request id. */
int raw_ping(int fd, uint64_t id)
{
    Muster__Request r = MUSTER__REQUEST__INIT;
    Muster__PingReq p = MUSTER__PING_REQ__INIT;
    r.id = id;
    r.op_case = MUSTER__REQUEST__OP_PING;
    r.ping = &p;
    return raw_send_request(fd, &r);
}

/* Read frames until a Response arrives (events are skipped); NULL on timeout/close. */
Muster__ServerFrame *raw_response(int fd, int timeout_ms)
{
    int64_t deadline = raw_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - raw_now_ms();
        Muster__ServerFrame *f = raw_recv(fd, left > 0 ? (int)left : 0, NULL);
        if (!f || f->frame_case == MUSTER__SERVER_FRAME__FRAME_RESPONSE)
            return f;
        raw_free(f);
    }
}

/* Read one Response and return its status; -1 when none came. *id (may be NULL) gets its id. */
int raw_status(int fd, int timeout_ms, uint64_t *id)
{
    Muster__ServerFrame *f = raw_response(fd, timeout_ms);
    int st = f ? (int)f->response->status : -1;
    if (id)
        *id = f ? f->response->id : 0;
    raw_free(f);
    return st;
}
