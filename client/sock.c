/* Sockets: resolve, non-blocking connect under a deadline, and bounded poll. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"

/* The longest one connect attempt may take; the caller retries under its overall deadline. */
#define SOCK_ATTEMPT_MS 2000u

/* poll() fd for events until deadline; returns revents, 0 on timeout, -1 on error. */
int sock_wait(int fd, short events, uint64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, deadline_left(deadline));
        if (n > 0)
            return p.revents;
        if (n == 0)
            return 0;
        if (errno != EINTR)
            return -1;
    }
}

/* Finish a non-blocking connect on fd before deadline; 0 or an errno value. */
static int sock_finish(int fd, uint64_t deadline)
{
    int rev = sock_wait(fd, POLLOUT, deadline);
    if (rev == 0)
        return ETIMEDOUT;
    if (rev < 0)
        return errno;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        return errno;
    return soerr;
}

/* Try one resolved address before deadline; returns the fd or -1 with *err set. */
static int sock_try(const struct addrinfo *ai, uint64_t deadline, int *err)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    if (rc == EINPROGRESS || rc == EINTR)
        rc = sock_finish(fd, deadline);
    if (rc != 0) {
        close(fd);
        *err = rc;
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Resolve host:port and connect to the first address that answers, before
 * deadline; returns the non-blocking fd, or -1 with the reason in why, or -2
 * when the host name does not exist (no retry will make it resolve). */
int sock_connect(const char *host, uint16_t port, uint64_t deadline, char *why, size_t whylen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char service[8];
    snprintf(service, sizeof service, "%u", (unsigned)port);
    /* getaddrinfo has no timeout of its own; the resolver's configured
     * timeouts bound it, and the deadline applies to everything after. */
    int gai = getaddrinfo(host, service, &hints, &res);
    if (gai != 0) {
        snprintf(why, whylen, "cannot resolve the host name: %s", gai_strerror(gai));
        /* A name the resolver says does not exist fails at once; a resolver that could not answer
         * (EAI_AGAIN, a network error) is tried again. */
        return gai == EAI_NONAME || gai == EAI_FAIL ? -2 : -1;
    }
    size_t left = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next)
        left++;
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next, left--) {
        /* Share the time among the remaining addresses so a black-holed
         * first address cannot eat the whole deadline, and cap one attempt:
         * a SYN lost to a cut link is resent on the kernel's backoff (1 s,
         * 3 s, 7 s, ...), so a fresh attempt after a heal connects sooner
         * than the old one's next retransmission would. */
        uint64_t share = (uint64_t)deadline_left(deadline) / left;
        share = share < SOCK_ATTEMPT_MS ? share : SOCK_ATTEMPT_MS;
        fd = sock_try(ai, deadline_after(share), &err);
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(why, whylen, "%s", strerror(err));
    return fd;
}
