/*
 * Test helpers for the HTTP endpoint: one GET over a fresh socket with a
 * deadline, port files, and a strict-enough reader of the Prometheus text
 * format (each sample line is a series name, optional {labels}, a space
 * and a number).
 */
#include "hhttp.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* Read the whole reply until EOF or the deadline; the malloc'd bytes, or NULL. */
static char *hh_read_all(int fd, int64_t end, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        int64_t left = end - h_now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                break;
            buf = nb;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r <= 0) {
            buf[n] = 0;
            *len = n;
            return buf;
        }
        n += (size_t)r;
    }
    free(buf);
    return NULL;
}

/* GET path from 127.0.0.1:port within timeout_ms; the status code (body malloc'd, NUL-terminated), or -1. */
int hh_get(uint16_t port, const char *path, char **body, unsigned timeout_ms)
{
    return hh_get_host(port, path, "127.0.0.1", body, timeout_ms);
}

/* As hh_get, sending host as the Host header (NULL: none). */
int hh_get_host(uint16_t port, const char *path, const char *host, char **body, unsigned timeout_ms)
{
    *body = NULL;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n%s%s%s\r\n", path, host ? "Host: " : "", host ? host : "",
                     host ? "\r\n" : "");
    size_t len = 0;
    char *all = write(fd, req, (size_t)n) == n ? hh_read_all(fd, h_now_ms() + timeout_ms, &len) : NULL;
    close(fd);
    int code = -1;
    char *sep = all ? strstr(all, "\r\n\r\n") : NULL;
    if (!sep || sscanf(all, "HTTP/1.%*d %d", &code) != 1) {
        free(all);
        return -1;
    }
    *body = strdup(sep + 4);
    free(all);
    return code;
}

/* The port a port file holds now, or 0 (missing, empty or not a port). */
uint16_t hh_port_read(const char *path)
{
    FILE *fp = fopen(path, "r");
    unsigned port = 0;
    if (!fp)
        return 0;
    int ok = fscanf(fp, "%u", &port) == 1;
    fclose(fp);
    return ok && port > 0 && port < 65536 ? (uint16_t)port : 0;
}

/* Wait up to timeout_ms for a port file to hold a port; the port, or 0. */
uint16_t hh_port_file(const char *path, unsigned timeout_ms)
{
    int64_t end = h_now_ms() + timeout_ms;
    for (;;) {
        uint16_t port = hh_port_read(path);
        if (port)
            return port;
        if (h_now_ms() >= end)
            return 0;
        usleep(10000); /* the file appears once the daemon has bound; nothing to wait on but the file */
    }
}

/* The value of the Prometheus sample whose line starts with "series "; -1 when absent. */
double hh_sample(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return -1;
}

/* Whether one sample line is "name[{labels}] number". */
static int hh_line_ok(const char *l, size_t len)
{
    size_t i = 0;
    if (!len || !(isalpha((unsigned char)l[0]) || l[0] == '_'))
        return 0;
    while (i < len && (isalnum((unsigned char)l[i]) || l[i] == '_' || l[i] == ':'))
        i++;
    if (i < len && l[i] == '{') {
        int inq = 0;
        for (i++; i < len && (inq || l[i] != '}'); i++) {
            if (l[i] == '\\' && inq)
                i++;
            else if (l[i] == '"')
                inq = !inq;
        }
        if (i++ >= len)
            return 0;
    }
    if (i >= len || l[i] != ' ')
        return 0;
    char num[64];
    size_t k = len - i - 1;
    if (k == 0 || k >= sizeof num)
        return 0;
    memcpy(num, l + i + 1, k);
    num[k] = 0;
    char *end;
    strtod(num, &end);
    return *end == 0 || strcmp(num, "+Inf") == 0;
}

/* Check every non-comment line of a Prometheus text body is "series value"; the bad line count. */
int hh_prom_bad_lines(const char *text)
{
    int bad = 0;
    for (const char *p = text; *p;) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len && p[0] != '#' && !hh_line_ok(p, len)) {
            printf("  bad metrics line: %.*s\n", (int)len, p);
            bad++;
        }
        p += len + (e != NULL);
    }
    return bad;
}
