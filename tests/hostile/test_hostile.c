/*
 * Hostile input on raw sockets: oversize and zero length prefixes, HTTP and
 * random garbage, truncated frames, an unknown op field, undecodable bodies.
 * Each gets an error frame and/or a close; the daemon stays up and keeps
 * serving a well-behaved client.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"

/* A well-behaved client still gets a set/get through. */
static void t_still_serving(const struct h_daemon *d)
{
    int fd = raw_open(d->port, "hostile");
    uint64_t id = 0;
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_EQ(raw_set(fd, 1, "alive", "yes", 3), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(raw_get(fd, 2, "alive", 0, 0), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 2);
    close(fd);
}

/* Send bytes on a fresh connection (after hello when hello != 0); return the fd. */
static int t_send_on_new(const struct h_daemon *d, int hello, const void *bytes, size_t n)
{
    int fd = hello ? raw_open(d->port, "hostile") : raw_connect(d->port);
    CHECK(fd >= 0);
    if (fd >= 0)
        raw_send(fd, bytes, n);
    return fd;
}

/* Expect one ProtocolError frame with status, then a close. */
static void t_expect_error_close(int fd, int status)
{
    enum raw_why why = RAW_OK;
    Muster__ServerFrame *f = raw_recv(fd, 5000, &why);
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ(f->frame_case, MUSTER__SERVER_FRAME__FRAME_ERROR);
        if (f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR) {
            CHECK_EQ(f->error->status, status);
            CHECK(f->error->message && *f->error->message);
        }
    } else {
        printf("  no error frame (why=%d)\n", (int)why);
    }
    raw_free(f);
    CHECK(raw_await_close(fd, 5000));
}

/* A length prefix of 0xFFFFFFFF is refused at once with LIMIT, before and after hello. */
static void t_huge_length(const struct h_daemon *d)
{
    static const uint8_t ff[4] = {0xff, 0xff, 0xff, 0xff};
    for (int hello = 0; hello < 2; hello++) {
        int fd = t_send_on_new(d, hello, ff, sizeof ff);
        if (fd >= 0) {
            t_expect_error_close(fd, MUSTER_ELIMIT);
            close(fd);
        }
    }
    t_still_serving(d);
}

/* A zero length prefix is a protocol error (BAD_REQUEST), then close. */
static void t_zero_length(const struct h_daemon *d)
{
    static const uint8_t zero[4] = {0, 0, 0, 0};
    int fd = t_send_on_new(d, 1, zero, sizeof zero);
    if (fd >= 0) {
        t_expect_error_close(fd, MUSTER_EBADREQ);
        close(fd);
    }
    t_still_serving(d);
}

/* An HTTP request reads as a huge length ("GET " = 0x47455420): LIMIT and close. */
static void t_http(const struct h_daemon *d)
{
    static const char req[] = "GET / HTTP/1.0\r\n\r\n";
    int fd = t_send_on_new(d, 0, req, sizeof req - 1);
    if (fd >= 0) {
        t_expect_error_close(fd, MUSTER_ELIMIT);
        close(fd);
    }
    t_still_serving(d);
}

/* A small frame whose body is not protobuf is BAD_REQUEST, then close. */
static void t_undecodable(const struct h_daemon *d)
{
    /* Field 1 (hello) claims 100 bytes inside a 3-byte body: unpack must fail. */
    static const uint8_t bad[] = {0, 0, 0, 3, 0x0a, 0x64, 0x01};
    int fd = t_send_on_new(d, 1, bad, sizeof bad);
    if (fd >= 0) {
        t_expect_error_close(fd, MUSTER_EBADREQ);
        close(fd);
    }
    t_still_serving(d);
}

/* Random bytes (fixed seeds) never take the daemon down. */
static void t_random(const struct h_daemon *d)
{
    uint8_t buf[512];
    for (unsigned seed = 1; seed <= 20; seed++) {
        int fd;
        srand(seed);
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = (uint8_t)(rand() >> 7);
        /* Keep some length prefixes small so bodies get decoded, not just refused. */
        if (seed % 2) {
            buf[0] = buf[1] = 0;
            buf[2] &= 1;
        }
        fd = t_send_on_new(d, seed % 3 != 0, buf, sizeof buf);
        if (fd >= 0) {
            /* Whatever it answers, a partial frame must not hang it: close our side. */
            (void)raw_await_close(fd, 300);
            close(fd);
        }
    }
    t_still_serving(d);
}

/* A frame cut short and then closed is dropped quietly. */
static void t_truncated(const struct h_daemon *d)
{
    static const uint8_t part[] = {0, 0, 0, 100, 0x12, 0x05, 0x08};
    int fd = t_send_on_new(d, 1, part, sizeof part);
    if (fd >= 0)
        close(fd);
    fd = t_send_on_new(d, 0, part, 2);
    if (fd >= 0)
        close(fd);
    t_still_serving(d);
}

/* A Request whose op is an unknown field number is answered UNKNOWN_OP with its id. */
static void t_unknown_op(const struct h_daemon *d)
{
    /* ClientFrame{ request(2): Request{ id(1) = 7, field 99 (bytes) = "" } }, hand-encoded. */
    static const uint8_t frame[] = {0, 0, 0, 7, 0x12, 0x05, 0x08, 0x07, 0x9a, 0x06, 0x00};
    int fd = t_send_on_new(d, 1, frame, sizeof frame);
    uint64_t id = 0;
    if (fd < 0)
        return;
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_EUNKNOWNOP);
    CHECK_EQ(id, 7);
    /* The connection stays usable after a typed error. */
    CHECK_EQ(raw_ping(fd, 8), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 8);
    close(fd);
}

/* A ClientFrame with no frame set, and a second hello, do not crash the daemon. */
static void t_odd_frames(const struct h_daemon *d)
{
    static const uint8_t empty_oneof[] = {0, 0, 0, 2, 0x08, 0x01};
    int fd = t_send_on_new(d, 1, empty_oneof, sizeof empty_oneof);
    if (fd >= 0) {
        (void)raw_await_close(fd, 500);
        close(fd);
    }
    /* The protocol does not define a second hello; any answer but a crash will do. */
    fd = raw_open(d->port, "hostile");
    if (fd >= 0) {
        (void)raw_hello(fd, "other", NULL);
        close(fd);
    }
    t_still_serving(d);
}

/* Run the hostile-input tests against one daemon. */
int main(void)
{
    struct h_daemon d;
    long long frames, bad;
    h_init("hostile", 60);
    if (h_start(&d, NULL) < 0)
        return h_finish();
    H_RUN(t_huge_length, &d);
    H_RUN(t_zero_length, &d);
    H_RUN(t_http, &d);
    H_RUN(t_undecodable, &d);
    H_RUN(t_random, &d);
    H_RUN(t_truncated, &d);
    H_RUN(t_unknown_op, &d);
    H_RUN(t_odd_frames, &d);
    /* Oversize: two before hello (0xFFFFFFFF, HTTP), one after. */
    frames = h_stat(&d, "limit_frame") + h_stat(&d, "limit_pre_hello_frame");
    CHECK(frames >= 3);
    /* Zero length and undecodable body at least. */
    bad = h_stat(&d, "bad_frame");
    CHECK(bad >= 2);
    CHECK(h_stat(&d, "unknown_op") >= 1);
    CHECK(h_alive(&d));
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
