/*
 * Bounds under load from raw sockets: oversize keys and values answered
 * LIMIT, the connection cap refusing the extra connection only, and a client
 * that stops halfway through a frame delaying nobody else.  Trips are
 * checked in the daemon's counters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frame.h"
#include "hclient.h"
#include "raw.h"

#define T_MAX_CONN 8
#define T_MAX_KEY 64
#define T_MAX_VALUE 1024

/* Keys and values over the limits are LIMIT; at the limits they are fine. */
static void t_oversize(const struct h_daemon *d)
{
    char key[T_MAX_KEY + 2];
    static char val[T_MAX_VALUE + 1];
    int fd = raw_open(d->port, "limits");
    uint64_t id = 0;
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    memset(key, 'k', sizeof key);
    key[T_MAX_KEY] = 0;
    memset(val, 'v', sizeof val);
    CHECK_EQ(raw_set(fd, 1, key, val, T_MAX_VALUE), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    key[T_MAX_KEY] = 'k';
    key[T_MAX_KEY + 1] = 0;
    CHECK_EQ(raw_set(fd, 2, key, "v", 1), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_ELIMIT);
    CHECK_EQ(id, 2);
    CHECK_EQ(raw_set(fd, 3, "k", val, T_MAX_VALUE + 1), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_ELIMIT);
    CHECK_EQ(id, 3);
    CHECK_EQ(raw_get(fd, 4, key, 0, 0), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_ELIMIT);
    CHECK_EQ(raw_ping(fd, 5), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    close(fd);
}

/* libmuster refuses an oversize value without breaking the handle. */
static void t_oversize_client(const struct h_daemon *d)
{
    static char val[T_MAX_VALUE + 1];
    muster_t *m = hc_connect(d, "limits", NULL);
    int rc;
    if (!m)
        return;
    CHECK_EQ(muster_max_value(m), T_MAX_VALUE);
    rc = muster_set(m, "big", val, sizeof val, 0);
    CHECK(rc == MUSTER_ELIMIT || rc == MUSTER_EINVAL);
    CHECK_EQ(hc_set_str(m, "small", "ok"), MUSTER_OK);
    HC_EXPECT(m, "small", "ok");
    muster_close(m);
}

/* Open a connection with hello, retrying (bounded) while the daemon still counts closed ones. */
static int t_open_retry(const struct h_daemon *d)
{
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = raw_open(d->port, "limits");
        if (fd >= 0)
            return fd;
        usleep(10000);
    }
    return -1;
}

/* With --max-connections 8 the 9th connection gets LIMIT and a close; the 8 keep working. */
static void t_max_connections(const struct h_daemon *d)
{
    int fds[T_MAX_CONN], extra;
    Muster__ServerFrame *f;
    uint64_t id;
    for (int i = 0; i < T_MAX_CONN; i++) {
        fds[i] = t_open_retry(d);
        CHECK(fds[i] >= 0);
    }
    extra = raw_connect(d->port);
    CHECK(extra >= 0);
    if (extra >= 0) {
        f = raw_recv(extra, 5000, NULL);
        CHECK(f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR && (int)f->error->status == MUSTER_ELIMIT);
        raw_free(f);
        CHECK(raw_await_close(extra, 5000));
        close(extra);
    }
    for (int i = 0; i < T_MAX_CONN; i++) {
        if (fds[i] < 0)
            continue;
        CHECK_EQ(raw_ping(fds[i], 1), 0);
        CHECK_EQ(raw_status(fds[i], 5000, &id), MUSTER_OK);
    }
    for (int i = 0; i < T_MAX_CONN; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Once connections close, new ones are accepted again. */
static void t_connections_freed(const struct h_daemon *d)
{
    int fd = t_open_retry(d);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
}

/* A client stalled halfway through a frame does not delay 100 round trips of another client. */
static void t_half_frame(const struct h_daemon *d)
{
    Muster__ClientFrame cf = MUSTER__CLIENT_FRAME__INIT;
    Muster__Request r = MUSTER__REQUEST__INIT;
    Muster__SetReq s = MUSTER__SET_REQ__INIT;
    uint8_t buf[256];
    size_t n;
    int slow = raw_open(d->port, "limits");
    muster_t *m = hc_connect(d, "limits", NULL);
    int64_t t0, dt;
    uint64_t id = 0;
    if (slow < 0 || !m)
        goto out;
    s.key = (char *)"half";
    s.value.data = (uint8_t *)"finished-later";
    s.value.len = 14;
    r.id = 42;
    r.op_case = MUSTER__REQUEST__OP_SET;
    r.set = &s;
    cf.frame_case = MUSTER__CLIENT_FRAME__FRAME_REQUEST;
    cf.request = &r;
    n = frame_pack(&cf.base, buf);
    CHECK_EQ(raw_send(slow, buf, n / 2), 0);
    t0 = h_now_ms();
    for (int i = 0; i < 100; i++) {
        char key[32];
        snprintf(key, sizeof key, "fast/%d", i);
        if (hc_set_str(m, key, key) != MUSTER_OK) {
            CHECK(!"set failed while another client stalled");
            break;
        }
        HC_EXPECT(m, key, key);
    }
    dt = h_now_ms() - t0;
    printf("  100 set/get round trips took %lld ms beside a stalled client\n", (long long)dt);
    CHECK(dt < 5000);
    /* The stalled frame completes normally once the rest arrives. */
    CHECK_EQ(raw_send(slow, buf + n / 2, n - n / 2), 0);
    CHECK_EQ(raw_status(slow, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 42);
    HC_EXPECT(m, "half", "finished-later");
out:
    CHECK(slow >= 0);
    if (slow >= 0)
        close(slow);
    muster_close(m);
}

/* Run the limit tests against one daemon with small bounds. */
int main(void)
{
    static const char *const args[] = {"--max-connections", "8", "--max-key", "64", "--max-value", "1024", NULL};
    struct h_daemon d;
    h_init("limits", 60);
    if (h_start(&d, args) < 0)
        return h_finish();
    H_RUN(t_oversize, &d);
    H_RUN(t_oversize_client, &d);
    H_RUN(t_max_connections, &d);
    H_RUN(t_connections_freed, &d);
    H_RUN(t_half_frame, &d);
    CHECK(h_stat(&d, "limit_key") >= 2);
    CHECK(h_stat(&d, "limit_value") >= 1);
    CHECK(h_stat(&d, "limit_connections") >= 1);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
