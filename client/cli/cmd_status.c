/*
 * `muster status [JOB]`: jobs, generations and members, read from the
 * daemon's HTTP endpoint (--metrics-listen) at /v1/jobs.  The daemon
 * renders both forms - JSON for --json, an aligned table otherwise - so the
 * CLI stays a thin HTTP/1.0 client and the two views never disagree.
 * --watch redraws every --interval until interrupted (or until the global
 * --timeout, when given, has passed).  The daemon is the one the store URL
 * names (--url, $MUSTER_URL), unless --metrics-url or $MUSTER_METRICS_URL
 * says where its endpoint is.  The body is printed through cli_print_text,
 * so whatever answers cannot steer the terminal.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Where the endpoint is when neither --metrics-url, $MUSTER_METRICS_URL nor a store URL says. */
#define STATUS_DEFAULT_URL "http://127.0.0.1:29601"
/* The metrics port taken on a store URL's host. */
#define STATUS_DEFAULT_PORT 29601u
/* Per-request deadline when --timeout is not given. */
#define STATUS_TIMEOUT_MS 5000
/* Largest reply accepted (the job table of a very busy daemon fits easily). */
#define STATUS_MAX_REPLY (64u << 20)

/* Split "http://HOST:PORT[/]" into host and port; 0 on success. */
static int status_parse_url(const char *url, char *host, size_t hn, char *port, size_t pn)
{
    if (strncmp(url, "http://", 7) != 0)
        return -1;
    const char *h = url + 7, *end = h + strcspn(h, "/");
    const char *colon = NULL;
    if (*h == '[') {
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (!rb)
            return -1;
        colon = rb[1] == ':' ? rb + 1 : NULL;
        h++;
        if ((size_t)(rb - h) >= hn)
            return -1;
        snprintf(host, hn, "%.*s", (int)(rb - h), h);
    } else {
        colon = memchr(h, ':', (size_t)(end - h));
        const char *he = colon ? colon : end;
        if (he == h || (size_t)(he - h) >= hn)
            return -1;
        snprintf(host, hn, "%.*s", (int)(he - h), h);
    }
    if (!colon || colon + 1 >= end || (size_t)(end - colon - 1) >= pn)
        return -1;
    snprintf(port, pn, "%.*s", (int)(end - colon - 1), colon + 1);
    return 0;
}

/* Connect to host:port before the deadline; the socket, or -1. */
static int status_connect(const char *host, const char *port, int64_t deadline)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return -1;
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        struct pollfd p = {fd, POLLOUT, 0};
        int err = 0;
        socklen_t len = sizeof err;
        int64_t left = deadline - (int64_t)cli_now_ms();
        if ((connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) || left <= 0 ||
            poll(&p, 1, (int)left) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    return fd;
}

/* Read until EOF or the deadline into a malloc'd NUL-terminated buffer; NULL on timeout or error. */
static char *status_read_all(int fd, int64_t deadline)
{
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        struct pollfd p = {fd, POLLIN, 0};
        int64_t left = deadline - (int64_t)cli_now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            break;
        if (n + 1 >= cap) {
            char *nb = cap < STATUS_MAX_REPLY ? realloc(buf, cap * 2) : NULL;
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r == 0) {
            buf[n] = 0;
            return buf;
        }
        if (r < 0 && errno != EINTR && errno != EAGAIN)
            break;
        n += r > 0 ? (size_t)r : 0;
    }
    free(buf);
    return NULL;
}

/* Append name to path percent-encoded (everything but unreserved characters). */
static void status_encode(char *path, size_t n, const char *name)
{
    size_t used = strlen(path);
    for (const unsigned char *p = (const unsigned char *)name; *p && used + 4 < n; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~", *p))
            path[used++] = (char)*p;
        else
            used += (size_t)snprintf(path + used, n - used, "%%%02X", *p);
    }
    path[used] = 0;
}

/* Fetch one report: the HTTP status (body malloc'd in *body), or -1 with errno-style failure. */
static int status_fetch(const char *url, const char *job, int json, uint32_t timeout_ms, char **body)
{
    char host[256], port[16], path[2048] = "/v1/jobs";
    *body = NULL;
    if (status_parse_url(url, host, sizeof host, port, sizeof port) != 0)
        return -2;
    if (job) {
        strcat(path, "/");
        status_encode(path, sizeof path - 16, job);
    }
    if (!json)
        strcat(path, "?format=text");
    int64_t deadline = (int64_t)cli_now_ms() + timeout_ms;
    int fd = status_connect(host, port, deadline);
    if (fd < 0)
        return -1;
    char req[2300];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: muster/%s\r\n\r\n", path, host,
                     MUSTER_VERSION);
    char *all = write(fd, req, (size_t)n) == n ? status_read_all(fd, deadline) : NULL;
    close(fd);
    int code = -3;
    char *sep = all ? strstr(all, "\r\n\r\n") : NULL;
    if (sep && sscanf(all, "HTTP/1.%*d %d", &code) == 1)
        *body = strdup(sep + 4);
    free(all);
    return *body ? code : -3;
}

/* Fetch and print one report; a CLI exit status. */
static int status_once(struct cli *c, const char *url, const char *job, int json, int watching)
{
    char *body = NULL;
    uint32_t t = c->timeout_ms ? c->timeout_ms : STATUS_TIMEOUT_MS;
    int code = status_fetch(url, job, json, t, &body);
    int rc = CLI_OK;
    if (code == -2)
        rc = cli_error(c, CLI_USAGE, "metrics URL '%s' is not http://HOST:PORT", url);
    else if (code == -1)
        rc = cli_error(c, CLI_CONNECT,
                       "cannot connect to %s (is musterd running with --metrics-listen there? --metrics-url or "
                       "$MUSTER_METRICS_URL names its endpoint)",
                       url);
    else if (code < 0)
        rc = cli_error(c, CLI_TIMEOUT, "no complete reply from %s within %u ms", url, t);
    else if (code == 404)
        rc = cli_error(c, CLI_NO, "no job '%s'", job ? job : "");
    else if (code != 200)
        rc = cli_error(c, CLI_ERROR, "%s answered HTTP %d", url, code);
    if (rc == CLI_OK) {
        if (watching && isatty(STDOUT_FILENO))
            fputs("\033[H\033[2J", stdout);
        if (watching && !json) {
            time_t now = time(NULL);
            char when[32];
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime(&now));
            printf("%s  %s\n\n", when, url);
        }
        cli_print_text(body);
        fflush(stdout);
    }
    free(body);
    return rc;
}

/* Whether the http:// URL metrics names host (as a store URL's endpoint spells it, IPv6 unbracketed). */
static int status_same_host(const char *metrics, const char *host)
{
    char h[256], port[16];
    return status_parse_url(metrics, h, sizeof h, port, sizeof port) == 0 && strcmp(h, host) == 0;
}

/* The metrics endpoint (into buf, n bytes): --metrics-url; else $MUSTER_METRICS_URL, unless --url names
 * a daemon on another host; else the store's host (--url, else $MUSTER_URL) on port 29601; else
 * http://127.0.0.1:29601.  The store URL names the daemon, so status never reads another one. */
static const char *status_endpoint(const struct cli *c, const struct cli_args *a, char *buf, size_t n)
{
    const char *env = getenv("MUSTER_METRICS_URL"), *store = c->url ? c->url : getenv("MUSTER_URL");
    muster_url u;
    int parsed = store && *store && muster_url_parse(store, &u) == MUSTER_OK;
    if (a->opt[2])
        return a->opt[2];
    if (env && *env && (!c->url || !parsed || status_same_host(env, u.host)))
        return env;
    if (!parsed)
        return STATUS_DEFAULT_URL;
    int v6 = strchr(u.host, ':') != NULL;
    snprintf(buf, n, "http://%s%s%s:%u", v6 ? "[" : "", u.host, v6 ? "]" : "", STATUS_DEFAULT_PORT);
    return buf;
}

/* status [JOB] [--watch] [--json] [--metrics-url URL] [--interval MS]. */
int cmd_status(struct cli *c, const struct cli_args *a)
{
    char derived[300];
    const char *url = status_endpoint(c, a, derived, sizeof derived);
    const char *job = a->argc ? a->argv[0] : NULL;
    int watch = a->opt[0] != NULL, json = a->opt[1] != NULL;
    uint32_t interval = 2000;
    if (a->opt[3] && (cli_parse_u32(a->opt[3], &interval) != 0 || interval < 100))
        return cli_error(c, CLI_USAGE, "--interval must be a number of milliseconds, at least 100");
    int64_t end = c->timeout_set ? (int64_t)cli_now_ms() + c->timeout_ms : INT64_MAX;
    int rc = status_once(c, url, job, json, watch);
    /* A watch runs until interrupted, or until --timeout when one was given. */
    while (watch && rc == CLI_OK && (int64_t)cli_now_ms() + interval < end) {
        usleep((useconds_t)interval * 1000);
        rc = status_once(c, url, job, json, watch);
    }
    return rc;
}
