/*
 * Listeners.  The backlog is the kernel's somaxconn so a connect storm of a
 * whole job queues in the kernel instead of being refused.  When accept()
 * runs out of file descriptors the listener is disabled and re-enabled from
 * a timer (--emfile-retry-ms): left enabled, the readable listening socket
 * would spin the loop without progress.  --nodelay is set on the listening
 * socket: Linux copies it to every accepted socket, which saves a
 * setsockopt per connection (a connect storm is mostly syscalls).
 */
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sysexits.h>

#include "clock.h"
#include "log.h"
#include "server.h"
#include "tcpka.h"

struct listener {
    struct server *srv;
    listener_accept_fn accept;
    struct evconnlistener *evl;
    struct event *retry;
    uint16_t port;
    char name[96];
};

/* The listen backlog: /proc/sys/net/core/somaxconn, else SOMAXCONN. */
static int listener_backlog(void)
{
    int n = 0;
    FILE *fp = fopen("/proc/sys/net/core/somaxconn", "re");
    if (fp) {
        if (fscanf(fp, "%d", &n) != 1)
            n = 0;
        fclose(fp);
    }
    return n > 0 ? n : SOMAXCONN;
}

/* Split "HOST:PORT" / "[V6]:PORT" into host and port; 0 on success. */
int listener_parse(const char *spec, char *host, size_t hostlen, uint16_t *port)
{
    const char *colon, *h = spec;
    size_t hl;
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (!close || close[1] != ':')
            return -1;
        h = spec + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(spec, ':');
        if (!colon || memchr(spec, ':', (size_t)(colon - spec)))
            return -1; /* an IPv6 literal needs brackets */
        hl = (size_t)(colon - spec);
    }
    if (hl == 0 || hl >= hostlen)
        return -1;
    char *end;
    errno = 0;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (!colon[1] || *end || errno || p > 65535 || colon[1] == '-' || colon[1] == '+')
        return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    *port = (uint16_t)p;
    return 0;
}

/* A new connection. */
static void listener_accept_cb(struct evconnlistener *evl, evutil_socket_t fd, struct sockaddr *sa, int salen,
                               void *arg)
{
    (void)evl;
    struct listener *l = arg;
    l->accept(l->srv, fd, sa, (socklen_t)salen);
}

/* Re-enable accepting after a pause for descriptor exhaustion. */
static void listener_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct listener *l = arg;
    if (!l->srv->draining)
        evconnlistener_enable(l->evl);
}

/* accept() failed: pause on descriptor exhaustion, count anything else. */
static void listener_error_cb(struct evconnlistener *evl, void *arg)
{
    struct listener *l = arg;
    int err = EVUTIL_SOCKET_ERROR();
    if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
        stats_inc(&l->srv->stats, STAT_ACCEPT_EMFILE);
        log_msg(LOG_WARN, "accept on %s: %s; pausing %llu ms", l->name, strerror(err),
                (unsigned long long)l->srv->opt.emfile_retry_ms);
        evconnlistener_disable(evl);
        clock_timer_in(l->retry, l->srv->opt.emfile_retry_ms);
        return;
    }
    stats_inc(&l->srv->stats, STAT_ACCEPT_ERRORS);
    log_msg(LOG_DEBUG, "accept on %s: %s", l->name, strerror(err));
}

/* Record the bound port and a printable name of the listening socket. */
static void listener_describe(struct listener *l)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char host[INET6_ADDRSTRLEN] = "?";
    getsockname(evconnlistener_get_fd(l->evl), (struct sockaddr *)&ss, &len);
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        l->port = ntohs(a->sin6_port);
        snprintf(l->name, sizeof l->name, "[%s]:%u", host, l->port);
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        l->port = ntohs(a->sin_port);
        snprintf(l->name, sizeof l->name, "%s:%u", host, l->port);
    }
}

/* Create the evconnlistener for one resolved address; 0 or a sysexits status. */
static int listener_bind(struct listener *l, const char *spec, const struct addrinfo *ai)
{
    unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE;
    /* A v6 address means only v6: bind exactly what was asked for. */
    if (ai->ai_family == AF_INET6)
        flags |= LEV_OPT_BIND_IPV6ONLY;
    errno = 0;
    l->evl = evconnlistener_new_bind(l->srv->base, listener_accept_cb, l, flags, listener_backlog(), ai->ai_addr,
                                     (int)ai->ai_addrlen);
    if (!l->evl) {
        int err = errno;
        log_msg(LOG_ERROR, "cannot listen on %s: %s", spec, err ? strerror(err) : "unknown error");
        return err == EADDRINUSE || err == EADDRNOTAVAIL || err == EACCES ? EX_UNAVAILABLE : EX_OSERR;
    }
    evconnlistener_set_error_cb(l->evl, listener_error_cb);
    int lfd = evconnlistener_get_fd(l->evl);
    if (l->srv->opt.nodelay) {
        int one = 1;
        setsockopt(lfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    /* Accepted sockets inherit these too.  The user timeout is never below --slow-timeout, which
     * alone decides when a live client that stopped reading is closed. */
    const struct options *o = &l->srv->opt;
    uint64_t user = o->slow_timeout > o->tcp_keepalive ? o->slow_timeout : o->tcp_keepalive;
    tcpka_set(lfd, (uint32_t)o->tcp_keepalive, (uint32_t)user);
    listener_describe(l);
    return 0;
}

/* Bind and listen on spec, handing accepted sockets to accept; 0, or a sysexits status. */
int listener_open_with(struct server *srv, const char *spec, listener_accept_fn accept, struct listener **out)
{
    char host[256], port[8];
    uint16_t p;
    *out = NULL;
    if (listener_parse(spec, host, sizeof host, &p) != 0) {
        log_msg(LOG_ERROR, "--listen %s: expected HOST:PORT or [IPV6]:PORT", spec);
        return EX_USAGE;
    }
    snprintf(port, sizeof port, "%u", p);
    struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        log_msg(LOG_ERROR, "--listen %s: %s", spec, gai_strerror(rc));
        return EX_NOHOST;
    }
    struct listener *l = calloc(1, sizeof *l);
    if (!l || !(l->retry = evtimer_new(srv->base, listener_retry_cb, l))) {
        free(l);
        freeaddrinfo(ai);
        return EX_OSERR;
    }
    l->srv = srv;
    l->accept = accept;
    rc = listener_bind(l, spec, ai);
    freeaddrinfo(ai);
    if (rc) {
        listener_close(l);
        return rc;
    }
    *out = l;
    return 0;
}

/* The port actually bound (useful with port 0). */
uint16_t listener_port(const struct listener *l)
{
    return l->port;
}

/* The bound address as text, e.g. "127.0.0.1:29600". */
const char *listener_name(const struct listener *l)
{
    return l->name;
}

/* Stop listening and free; NULL is a no-op. */
void listener_close(struct listener *l)
{
    if (!l)
        return;
    if (l->evl)
        evconnlistener_free(l->evl);
    if (l->retry)
        event_free(l->retry);
    free(l);
}
