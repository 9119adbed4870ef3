/*
 * sd_notify from a real musterd: with NOTIFY_SOCKET set, READY=1 arrives
 * only after the port file exists (every listener bound, data directory
 * recovered), and SIGTERM brings STOPPING=1 before a clean exit.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "harness.h"

/* Receive one datagram within ms into buf (NUL-terminated); its length, or -1. */
static int recv_within(int fd, char *buf, size_t n, int ms)
{
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, ms) != 1)
        return -1;
    ssize_t r = recv(fd, buf, n - 1, 0);
    if (r < 0)
        return -1;
    buf[r] = 0;
    return (int)r;
}

/* Run every case against its own daemon(s); the exit status says whether all checks passed. */
int main(void)
{
    h_init("notify", 30);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (snprintf(sa.sun_path, sizeof sa.sun_path, "%s/notify", h_tmpdir()) >= (int)sizeof sa.sun_path)
        h_skip("temporary directory path too long for a unix socket");
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    setenv("NOTIFY_SOCKET", sa.sun_path, 1);
    char data[4200];
    snprintf(data, sizeof data, "%s/data", h_tmpdir());
    const char *extra[] = {"--data-dir", data, NULL};
    struct h_daemon d;
    /* h_start returns once the port file is written; READY=1 is sent after that. */
    CHECK_EQ(h_start(&d, extra), 0);
    char msg[512];
    CHECK(recv_within(fd, msg, sizeof msg, 5000) > 0);
    CHECK(strstr(msg, "READY=1") != NULL);
    kill(d.pid, SIGTERM);
    CHECK(recv_within(fd, msg, sizeof msg, 5000) > 0);
    CHECK(strstr(msg, "STOPPING=1") != NULL);
    CHECK_EQ(h_stop(&d), 0);
    close(fd);
    return h_finish();
}
