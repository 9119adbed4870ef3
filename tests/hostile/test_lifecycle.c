/*
 * Connection deadlines on raw native sockets: a frame that stays
 * incomplete is closed after --request-timeout with a TIMEOUT error frame
 * (a trickle of bytes does not keep it alive), counted, while a client
 * that sends whole frames slowly is left alone; and --max-buffer-memory
 * bounds what all connections buffer together, closing the largest
 * holders; both ends of a connection probe an idle peer (keepalive) on the
 * heartbeat's time scale; and --idle-timeout closes a silent connection
 * with a TIMEOUT error frame, counted, but not one with a parked request or
 * a watch, and counts a parked request's idle time from its answer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"

#define REQ_MS 600

/* Whether buffer_bytes_current falls to 0 within 3 s (every connection closed). */
static int stat_zero(struct h_daemon *d)
{
    for (int64_t end = h_now_ms() + 3000; h_now_ms() < end; h_nap(20))
        if (h_stat(d, "buffer_bytes_current") == 0)
            return 1;
    return 0;
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
        h_nap(REQ_MS / 8);
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
        h_nap(REQ_MS + 200);
    }
    CHECK_EQ(raw_ping(fd, 9), 0);
    CHECK_EQ(raw_status(fd, 3000, &id), MUSTER_OK);
    close(fd);
}

/* Connections each within --max-frame, stalled short of their frames' ends, hold more than
 * --max-buffer-memory together: the largest holders are closed, counted, the total falls back
 * within the budget, and a new client is served. */
static void t_buffer_budget(void *arg)
{
    (void)arg;
    enum { CONNS = 4, BODY = 3 << 20 };
    struct h_daemon d;
    const char *extra[] = {"--max-value", "3500K", "--max-frame", "4M", "--max-output", "4M",
                           "--max-buffer-memory", "10M", NULL};
    if (h_start(&d, extra) != 0) {
        CHECK(!"daemon started");
        return;
    }
    uint8_t *body = calloc(1, BODY);
    int fds[CONNS];
    for (int i = 0; i < CONNS; i++) {
        fds[i] = raw_open(d.port, "budget");
        CHECK(fds[i] >= 0);
        const uint8_t hdr[4] = {0, 0x38, 0, 0}; /* 3.5 MiB announced, 3 MiB sent */
        raw_send(fds[i], hdr, sizeof hdr);
        raw_send(fds[i], body, BODY); /* may fail once the server closes this one */
    }
    free(body);
    for (int64_t end = h_now_ms() + 3000; h_stat(&d, "limit_buffer_memory") < 1 && h_now_ms() < end;)
        h_nap(20);
    CHECK(h_stat(&d, "limit_buffer_memory") >= 1);
    CHECK(h_stat(&d, "buffer_bytes_current") <= (10 << 20));
    int closed = 0;
    for (int i = 0; i < CONNS; i++)
        closed += raw_await_close(fds[i], 200);
    CHECK(closed >= 1 && closed < CONNS);
    int fresh = raw_open(d.port, "budget");
    uint64_t id = 0;
    CHECK_EQ(raw_ping(fresh, 1), 0);
    CHECK_EQ(raw_status(fresh, 3000, &id), MUSTER_OK);
    close(fresh);
    for (int i = 0; i < CONNS; i++)
        close(fds[i]);
    CHECK_EQ(stat_zero(&d), 1);
    CHECK_EQ(h_stop(&d), 0);
}

/* The keepalive timer state ("tr" field) and its remaining time in 1/100 s of the socket in
 * /proc/net/tcp whose local (want_local) or remote port is port; -1 when none is found. */
static int tcp_timer(uint16_t port, int want_local, long *when)
{
    FILE *fp = fopen("/proc/net/tcp", "r");
    char line[512];
    int tr = -1;
    while (fp && tr < 0 && fgets(line, sizeof line, fp)) {
        unsigned lport, rport, st, t;
        unsigned long w;
        if (sscanf(line, " %*d: %*x:%x %*x:%x %x %*x:%*x %x:%lx", &lport, &rport, &st, &t, &w) != 5)
            continue;
        if (st == 1 && (want_local ? lport : rport) == port) { /* 1: ESTABLISHED */
            tr = (int)t;
            *when = (long)w;
        }
    }
    if (fp)
        fclose(fp);
    return tr;
}

/* With --tcp-keepalive, the daemon's accepted socket and libmuster's socket both run the keepalive
 * timer (first probe after half of it), where the kernel's default runs none. */
static void t_keepalive(void *arg)
{
    (void)arg;
    struct h_daemon d;
    const char *extra[] = {"--tcp-keepalive", "4000", "--heartbeat-timeout", "4000", NULL};
    if (h_start(&d, extra) != 0) {
        CHECK(!"daemon started");
        return;
    }
    int err = 0;
    muster_t *m = muster_connect(d.url, &err);
    CHECK(m != NULL);
    CHECK_EQ(muster_ping(m, NULL, 3000), MUSTER_OK);
    h_nap(100); /* acknowledged and idle */
    long when = -1;
    CHECK_EQ(tcp_timer(d.port, 1, &when), 2); /* 2: keepalive */
    CHECK(when >= 0 && when <= 200);
    when = -1;
    CHECK_EQ(tcp_timer(d.port, 0, &when), 2);
    CHECK(when >= 0 && when <= 200);
    muster_close(m);
    CHECK_EQ(h_stop(&d), 0);
}

#define IDLE_MS 600

/* Whether fd gets nothing and stays open for ms. */
static int raw_quiet(int fd, int ms)
{
    enum raw_why why = RAW_OK;
    Muster__ServerFrame *f = raw_recv(fd, ms, &why);
    raw_free(f);
    return !f && why == RAW_TIMEOUT;
}

/* Whether fd is sent a TIMEOUT error frame naming idleness, then closed, within ms. */
static int raw_idle_closed(int fd, int ms)
{
    Muster__ServerFrame *f = raw_recv(fd, ms, NULL);
    int ok = f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR && f->error->status == MUSTER__STATUS__TIMEOUT &&
             strstr(f->error->message, "idle") != NULL;
    raw_free(f);
    return ok && raw_await_close(fd, ms);
}

/* --idle-timeout on native connections: one silent after its requests is closed with TIMEOUT and
 * counted; one watching a prefix or with a parked get is not idle, and the parked one's idle time
 * starts at its answer, not at the last time the timer found it waiting. */
static void t_idle(void *arg)
{
    (void)arg;
    struct h_daemon d;
    const char *extra[] = {"--idle-timeout", "600", NULL};
    if (h_start(&d, extra) != 0)
        return;
    int idle = raw_open(d.port, "idle"), watcher = raw_open(d.port, "idle"), parked = raw_open(d.port, "idle");
    CHECK(idle >= 0 && watcher >= 0 && parked >= 0);
    CHECK_EQ(raw_ping(idle, 1), 0);
    CHECK_EQ(raw_status(idle, 3000, NULL), MUSTER_OK);
    Muster__Request r = MUSTER__REQUEST__INIT;
    Muster__WatchReq w = MUSTER__WATCH_REQ__INIT;
    w.prefix = "/idle/";
    r.id = 1;
    r.op_case = MUSTER__REQUEST__OP_WATCH;
    r.watch = &w;
    CHECK_EQ(raw_send_request(watcher, &r), 0);
    CHECK_EQ(raw_status(watcher, 3000, NULL), MUSTER_OK);
    CHECK_EQ(raw_get(parked, 1, "/later", 1, 30000), 0);
    int64_t t0 = h_now_ms();
    CHECK(raw_idle_closed(idle, 3 * IDLE_MS));
    CHECK(h_now_ms() - t0 >= IDLE_MS - 50);
    CHECK_EQ(h_stat(&d, "idle_closed"), 1);
    CHECK(raw_quiet(parked, IDLE_MS * 5 / 3 - (int)(h_now_ms() - t0))); /* past the first idle deadline */
    int setter = raw_open(d.port, "idle");
    CHECK_EQ(raw_set(setter, 1, "/later", "x", 1), 0);
    CHECK_EQ(raw_status(setter, 3000, NULL), MUSTER_OK);
    CHECK_EQ(raw_status(parked, 3000, NULL), MUSTER_OK);
    int64_t answered = h_now_ms();
    CHECK(raw_quiet(parked, IDLE_MS / 2)); /* its idle time began at the answer */
    CHECK(raw_idle_closed(parked, 3 * IDLE_MS));
    CHECK(h_now_ms() - answered >= IDLE_MS - 50);
    CHECK(raw_quiet(watcher, 10)); /* silent the whole time, still open */
    CHECK_EQ(raw_ping(watcher, 2), 0);
    CHECK_EQ(raw_status(watcher, 3000, NULL), MUSTER_OK);
    close(idle);
    close(watcher);
    close(parked);
    close(setter);
    CHECK_EQ(h_stop(&d), 0);
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
    H_RUN(t_buffer_budget, NULL);
    H_RUN(t_keepalive, NULL);
    H_RUN(t_idle, NULL);
    return h_finish();
}
