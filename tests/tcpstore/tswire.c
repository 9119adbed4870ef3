/*
 * Byte-level helpers for the TCPStore listener tests: a daemon with the
 * listener on port 0 (its port read from --tcpstore-port-file), hand-built
 * requests and bounded reads of untagged replies.
 */
#include "tswire.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "raw.h"

/* Start musterd with a TCPStore listener (plus extra, NULL-terminated, may be NULL); its port or 0. */
uint16_t tsw_start(struct h_daemon *d, const char *const *extra)
{
    static int seq;
    char pf[4096];
    const char *argv[32];
    size_t n = 0;
    snprintf(pf, sizeof pf, "%s/tcpstore%d.port", h_tmpdir(), seq++);
    argv[n++] = "--tcpstore-listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--tcpstore-port-file";
    argv[n++] = pf;
    for (size_t i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    /* The daemon writes the TCPStore port file before its own, which h_start awaits. */
    if (h_start(d, argv) != 0)
        return 0;
    FILE *fp = fopen(pf, "r");
    unsigned port = 0;
    if (fp) {
        if (fscanf(fp, "%u", &port) != 1)
            port = 0;
        fclose(fp);
    }
    CHECK(port > 0 && port < 65536);
    return (uint16_t)port;
}

/* Connect to the listener; fd or -1. */
int tsw_connect(uint16_t port)
{
    return raw_connect(port);
}

/* Connect and send the VALIDATE handshake; fd or -1. */
int tsw_open(uint16_t port)
{
    static const uint8_t hs[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C};
    int fd = raw_connect(port);
    if (fd >= 0 && raw_send(fd, hs, sizeof hs) != 0) {
        close(fd);
        fd = -1;
    }
    CHECK(fd >= 0);
    return fd;
}

/* Make room for n more bytes (aborts the test program when memory runs out). */
static void tsw_grow(struct tsw_buf *b, size_t n)
{
    if (b->n + n <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        abort();
    b->p = p;
    b->cap = cap;
}

/* Append raw bytes. */
void tsw_raw(struct tsw_buf *b, const void *p, size_t n)
{
    tsw_grow(b, n);
    if (n)
        memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* Append a byte. */
void tsw_u8(struct tsw_buf *b, uint8_t v)
{
    tsw_raw(b, &v, 1);
}

/* Append a little-endian u32. */
void tsw_u32(struct tsw_buf *b, uint32_t v)
{
    uint8_t x[4];
    for (int i = 0; i < 4; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    tsw_raw(b, x, sizeof x);
}

/* Append a little-endian u64. */
void tsw_u64(struct tsw_buf *b, uint64_t v)
{
    uint8_t x[8];
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    tsw_raw(b, x, sizeof x);
}

/* Append a length-prefixed string. */
void tsw_str(struct tsw_buf *b, const char *s)
{
    size_t n = strlen(s);
    tsw_u64(b, n);
    tsw_raw(b, s, n);
}

/* Send the buffer and empty it; 0 on success. */
int tsw_send(int fd, struct tsw_buf *b)
{
    int rc = raw_send(fd, b->p, b->n);
    b->n = 0;
    return rc;
}

/* Free the buffer. */
void tsw_free(struct tsw_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Send one request: type byte then strings (NULL-terminated list); 0 on success. */
int tsw_req(int fd, int type, ...)
{
    struct tsw_buf b = {0};
    va_list ap;
    tsw_u8(&b, (uint8_t)type);
    va_start(ap, type);
    for (const char *s; (s = va_arg(ap, const char *)) != NULL;)
        tsw_str(&b, s);
    va_end(ap);
    int rc = tsw_send(fd, &b);
    tsw_free(&b);
    return rc;
}

/* Send a WAIT of one key; 0, or -1 when the peer is gone. */
int tsw_send_wait(int fd, const char *key)
{
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_WAIT);
    tsw_u64(&b, 1);
    tsw_str(&b, key);
    int rc = tsw_send(fd, &b);
    tsw_free(&b);
    return rc;
}

/* Read exactly n bytes within timeout_ms; 0 on success. */
int tsw_read(int fd, void *buf, size_t n, int timeout_ms)
{
    uint8_t *p = buf;
    int64_t end = h_now_ms() + timeout_ms;
    while (n) {
        int64_t left = end - h_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return -1;
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Read one byte reply; -1 when none came. */
int tsw_byte(int fd, int timeout_ms)
{
    uint8_t b;
    return tsw_read(fd, &b, 1, timeout_ms) == 0 ? b : -1;
}

/* Read a little-endian i64 reply; *ok says whether it came. */
int64_t tsw_i64(int fd, int timeout_ms, int *ok)
{
    uint8_t x[8];
    uint64_t v = 0;
    *ok = tsw_read(fd, x, sizeof x, timeout_ms) == 0;
    for (int i = 8; *ok && i-- > 0;)
        v = v << 8 | x[i];
    return (int64_t)v;
}

/* Read a length-prefixed value into a malloc'd NUL-terminated buffer; NULL when none came. */
char *tsw_blob(int fd, int timeout_ms, size_t *len)
{
    int ok;
    int64_t n = tsw_i64(fd, timeout_ms, &ok);
    if (!ok || n < 0 || n > (64 << 20))
        return NULL;
    char *p = malloc((size_t)n + 1);
    if (!p || tsw_read(fd, p, (size_t)n, timeout_ms) != 0) {
        free(p);
        return NULL;
    }
    p[n] = 0;
    if (len)
        *len = (size_t)n;
    return p;
}

/* 1 when nothing at all arrives within ms (and the connection is still open). */
int tsw_quiet(int fd, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, ms) == 0;
}

/* 1 when the server closes the connection within ms (any bytes before EOF are discarded). */
int tsw_closed(int fd, int ms)
{
    char buf[4096];
    int64_t end = h_now_ms() + ms;
    for (;;) {
        int64_t left = end - h_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return 0;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET))
            return 1;
        if (r < 0 && errno != EINTR)
            return 0;
    }
}
