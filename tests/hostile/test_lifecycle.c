/*
 * Connection deadlines on raw native sockets: a frame that stays
 * incomplete is closed after --request-timeout with a TIMEOUT error frame
 * (a trickle of bytes does not keep it alive), counted, while a client
 * that sends whole frames slowly is left alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"

#define REQ_MS 600

/* Sleep ms milliseconds. */
static void nap(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* A frame announced at 100 bytes and trickled a byte at a time is closed with TIMEOUT after
 * --request-timeout, counted; the trickle does not reset the deadline. */
static void t_trickled_frame(struct h_daemon *d)
{
    long long before = h_stat(d, "request_timeout");
    int fd = raw_open(d->port, "lifecycle");
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    const uint8_t hdr[4] = {0, 0, 0, 100};
    CHECK_EQ(raw_send(fd, hdr, sizeof hdr), 0);
    int64_t t0 = h_now_ms();
    enum raw_why why = RAW_OK;
    Muster__ServerFrame *f = NULL;
    for (int i = 0; i < 40 && h_now_ms() - t0 < 4 * REQ_MS; i++) {
        uint8_t b = 0;
        if (raw_send(fd, &b, 1) != 0)
            break;
        nap(REQ_MS / 8);
        if (h_stat(d, "request_timeout") > before)
            break;
    }
    f = raw_recv(fd, 3000, &why);
    CHECK(f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR);
    if (f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR) {
        CHECK_EQ(f->error->status, MUSTER__STATUS__TIMEOUT);
        CHECK(strstr(f->error->message, "incomplete") != NULL);
    }
    raw_free(f);
    CHECK(raw_await_close(fd, 3000));
    CHECK(h_now_ms() - t0 < 3 * REQ_MS);
    CHECK_EQ(h_stat(d, "request_timeout"), before + 1);
    close(fd);
}

/* Whole frames sent further apart than --request-timeout keep the connection open. */
static void t_slow_whole_frames(struct h_daemon *d)
{
    int fd = raw_open(d->port, "lifecycle");
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    uint64_t id = 0;
    for (uint64_t i = 1; i <= 3; i++) {
        CHECK_EQ(raw_ping(fd, i), 0);
        CHECK_EQ(raw_status(fd, 3000, &id), MUSTER_OK);
        CHECK_EQ(id, i);
        nap(REQ_MS + 200);
    }
    CHECK_EQ(raw_ping(fd, 9), 0);
    CHECK_EQ(raw_status(fd, 3000, &id), MUSTER_OK);
    close(fd);
}

int main(void)
{
    h_init("lifecycle", 60);
    struct h_daemon d;
    char ms[16];
    snprintf(ms, sizeof ms, "%d", REQ_MS);
    const char *extra[] = {"--request-timeout", ms, NULL};
    if (h_start(&d, extra) != 0)
        return h_finish();
    H_RUN(t_trickled_frame, &d);
    H_RUN(t_slow_whole_frames, &d);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
