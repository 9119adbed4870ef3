/*
 * Unit tests of libmuster calls that need no server: error strings, the
 * retryable split, NULL-safe destructors, and connect failures.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <muster/muster.h>

#include "frame.h"
#include "harness.h"

/* muster_strerror gives every table code its table message, and never NULL. */
static void t_strerror(void *unused)
{
    size_t n;
    const struct status_row *t = status_table(&n);
    static const int unknown[] = {-1, 14, 99, 107, 9999, -2147483647 - 1};
    (void)unused;
    for (size_t i = 0; i < n; i++) {
        const char *s = muster_strerror(t[i].code);
        CHECK(s != NULL && strlen(s) > 4);
        CHECK_STR(s, t[i].message);
    }
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        const char *s = muster_strerror(unknown[i]);
        CHECK(s != NULL && *s);
    }
}

/* muster_err_retryable follows the table and the header's list. */
static void t_retryable(void *unused)
{
    size_t n;
    const struct status_row *t = status_table(&n);
    (void)unused;
    for (size_t i = 0; i < n; i++)
        CHECK_EQ(!!muster_err_retryable(t[i].code), !!t[i].retryable);
    CHECK(muster_err_retryable(MUSTER_ETIMEDOUT));
    CHECK(muster_err_retryable(MUSTER_ECONN));
    CHECK(!muster_err_retryable(MUSTER_EAUTH));
    CHECK(!muster_err_retryable(9999));
}

/* Destructors accept NULL. */
static void t_null_destroy(void *unused)
{
    (void)unused;
    muster_close(NULL);
    muster_free(NULL);
    muster_free_list(NULL, 0);
    muster_event_free(NULL);
    CHECK(1);
}

/* A malformed URL fails fast with MUSTER_EURL. */
static void t_connect_bad_url(void *unused)
{
    int err = 0;
    muster_t *m = muster_connect("bogus://x", &err);
    (void)unused;
    CHECK(m == NULL);
    CHECK_EQ(err, MUSTER_EURL);
    muster_close(m);
}

/* Bind a local port without listening on it, so connects to it are refused; returns the fd. */
static int t_refusing_port(uint16_t *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

/* Nothing listening: MUSTER_ECONN once the connect deadline passes, not much later. */
static void t_connect_refused(void *unused)
{
    muster_opts o = {0};
    char url[64];
    uint16_t port = 0;
    int err = 0, fd = t_refusing_port(&port);
    int64_t t0 = h_now_ms(), dt;
    muster_t *m;
    (void)unused;
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    o.connect_timeout_ms = 400;
    snprintf(url, sizeof url, "tcp://127.0.0.1:%u", port);
    m = muster_connect_opts(url, &o, &err);
    dt = h_now_ms() - t0;
    CHECK(m == NULL);
    CHECK_EQ(err, MUSTER_ECONN);
    CHECK(dt < 400 + 2500);
    muster_close(m);
    close(fd);
}

/* Run the library tests that need no server. */
int main(void)
{
    h_init("unit-api", 30);
    H_RUN(t_strerror, NULL);
    H_RUN(t_retryable, NULL);
    H_RUN(t_null_destroy, NULL);
    H_RUN(t_connect_bad_url, NULL);
    H_RUN(t_connect_refused, NULL);
    return h_finish();
}
