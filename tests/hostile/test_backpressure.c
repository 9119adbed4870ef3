/*
 * Backpressure over a real socket: a batch whose replies pass --max-output
 * pauses reading, and the connection must come back from the pause hearing
 * its client again, whatever order the pause, the batch's leftover frames
 * and the flush that drains the output take inside one read callback.  A
 * connection that stays deaf serves no further request and never sees its
 * client's close, so with the default --idle-timeout 0 it is held forever.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"

/* Connections tried per --max-output value. */
#define T_CONNS 10
/* Frames in the batch that trips the pause: a whole batch of the daemon's (CONN_BATCH). */
#define T_PINGS 62
#define T_GETS 2

/* Whether connections_current falls to want within 5 s. */
static int conns_fall_to(struct h_daemon *d, long long want)
{
    for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; h_nap(20))
        if (h_stat(d, "connections_current") == want)
            return 1;
    return 0;
}

/* Send the batch as one segment (corked): T_PINGS pings, then T_GETS gets of key; 0 or -1. */
static int t_send_batch(int fd, const char *key)
{
    int on = 1, off = 0, rc = 0;
    setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on);
    for (int i = 0; i < T_PINGS && rc == 0; i++)
        rc = raw_ping(fd, (uint64_t)i + 1);
    for (int i = 0; i < T_GETS && rc == 0; i++)
        rc = raw_get(fd, (uint64_t)(T_PINGS + i + 1), key, 0, 0);
    setsockopt(fd, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
    return rc;
}

/* One connection: the batch's replies all arrive, then a later ping is still answered. */
static int t_one(uint16_t port, const char *key)
{
    int fd = raw_open(port, "bp");
    if (fd < 0)
        return -1;
    int answered = 0, ok = t_send_batch(fd, key) == 0;
    for (int i = 0; ok && i < T_PINGS + T_GETS; i++, answered++)
        ok = raw_status(fd, 5000, NULL) == MUSTER_OK;
    ok = ok && raw_ping(fd, 1000) == 0 && raw_status(fd, 3000, NULL) == MUSTER_OK;
    if (!ok)
        fprintf(stderr, "  connection deaf after %d of %d replies\n", answered, T_PINGS + T_GETS);
    close(fd);
    return ok ? 0 : -1;
}

/* At --max-output max: every connection that tripped the pause hears its client again, and each
 * close is seen (no connection is left open once every client closed). */
static void t_paused_and_back(size_t max)
{
    char out[32], frame[32], value[32];
    snprintf(out, sizeof out, "%zu", max);
    snprintf(frame, sizeof frame, "%zu", max);
    snprintf(value, sizeof value, "%zu", max / 2);
    const char *extra[] = {"--max-output", out, "--max-frame", frame, "--max-value", value, NULL};
    struct h_daemon d;
    if (h_start(&d, extra) != 0)
        return;
    int fd = raw_open(d.port, "bp");
    size_t len = max / 2 - 64;
    char *v = malloc(len);
    CHECK(fd >= 0 && v != NULL);
    if (fd >= 0 && v) {
        memset(v, 'v', len);
        CHECK_EQ(raw_set(fd, 1, "big", v, len), 0);
        CHECK_EQ(raw_status(fd, 5000, NULL), MUSTER_OK);
    }
    free(v);
    if (fd >= 0)
        close(fd);
    int deaf = 0;
    for (int i = 0; i < T_CONNS; i++)
        deaf += t_one(d.port, "big") != 0;
    if (deaf)
        fprintf(stderr, "  --max-output %zu: %d of %d connections deaf\n", max, deaf, T_CONNS);
    CHECK_EQ(deaf, 0);
    CHECK(h_stat(&d, "output_paused") >= 1); /* the case under test happened */
    CHECK(conns_fall_to(&d, 0));
    CHECK_EQ(h_stop(&d), 0);
}

/* --max-output 64K. */
static void t_64k(void *arg)
{
    (void)arg;
    t_paused_and_back(64 * 1024);
}

/* --max-output 1M. */
static void t_1m(void *arg)
{
    (void)arg;
    t_paused_and_back(1024 * 1024);
}

/* --max-output 4M. */
static void t_4m(void *arg)
{
    (void)arg;
    t_paused_and_back(4 * 1024 * 1024);
}

int main(void)
{
    h_init("backpressure", 80);
    H_RUN(t_64k, NULL);
    H_RUN(t_1m, NULL);
    H_RUN(t_4m, NULL);
    return h_finish();
}
