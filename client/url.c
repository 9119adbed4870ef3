/*
 * Store URL parsing: tcp://HOST[:PORT][/NAMESPACE][?token=T&timeout=MS&name=N]
 * (tls:// the same, plus tls=0|1, ca=, cert=, key=) and env://[?...].  A pure function of its input (the environment is read
 * only for NULL/"" and env://), so it is easy to unit-test and fuzz.
 *
 * Strict on purpose: a misspelt store address should fail loudly at start-up
 * rather than hang a job on a wrong host.  Unknown or repeated query
 * parameters, fragments, empty ports, ports outside 1..65535, unterminated
 * brackets, characters outside a hostname, and fields too long for
 * muster_url are all MUSTER_EURL.  token and name are percent-decoded ('+'
 * stays a plus: this is not form encoding); %00 is refused.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

#define URL_TCP "tcp://"
#define URL_TLS "tls://"
#define URL_ENV "env://"
#define URL_DEFAULT "tcp://127.0.0.1:29600"

/* A span of the input text. */
struct span {
    const char *p;
    size_t n;
};

/* Whether c may appear in a registered host name or IPv4 literal. */
static int url_host_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

/* Whether c may appear in a namespace (a job name: no escapes needed). */
static int url_ns_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '.' || c == '_';
}

/* Value of one hex digit, or -1. */
static int url_hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Percent-decode s into dst (cap bytes incl. NUL); 0 on success. */
static int url_decode(struct span s, char *dst, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < s.n; i++) {
        int c = (unsigned char)s.p[i];
        if (c == '%') {
            if (i + 2 >= s.n)
                return -1;
            int hi = url_hex(s.p[i + 1]), lo = url_hex(s.p[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = hi * 16 + lo;
            i += 2;
            if (c == 0)
                return -1;
        } else if (c < 0x21 || c == 0x7f) {
            return -1;
        }
        if (o + 1 >= cap)
            return -1;
        dst[o++] = (char)c;
    }
    dst[o] = '\0';
    return 0;
}

/* Parse decimal digits of s into *out, refusing empty, signs, and values above max. */
static int url_number(struct span s, unsigned long max, unsigned long *out)
{
    unsigned long v = 0;
    if (s.n == 0 || s.n > 10)
        return -1;
    for (size_t i = 0; i < s.n; i++) {
        if (s.p[i] < '0' || s.p[i] > '9')
            return -1;
        v = v * 10 + (unsigned long)(s.p[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

/* Parse a port (1..65535) into *port. */
static int url_port(struct span s, uint16_t *port)
{
    unsigned long v;
    if (url_number(s, 65535, &v) != 0 || v == 0)
        return -1;
    *port = (uint16_t)v;
    return 0;
}

/* Copy a span into a fixed field, refusing overflow. */
static int url_copy(struct span s, char *dst, size_t cap)
{
    if (s.n >= cap)
        return -1;
    memcpy(dst, s.p, s.n);
    dst[s.n] = '\0';
    return 0;
}

/* Check and store a host: an IPv6 literal (already unbracketed) when v6, else a name or IPv4. */
static int url_set_host(struct span h, int v6, muster_url *u)
{
    if (h.n == 0 || url_copy(h, u->host, sizeof u->host) != 0)
        return -1;
    if (v6) {
        struct in6_addr a;
        return inet_pton(AF_INET6, u->host, &a) == 1 ? 0 : -1;
    }
    for (size_t i = 0; i < h.n; i++)
        if (!url_host_char(h.p[i]))
            return -1;
    return 0;
}

/* Apply ?tls=1 or ?tls=0 (tls:// already set it); 0 on success. */
static int url_tls_flag(struct span v, muster_url *u)
{
    if (v.n != 1 || (v.p[0] != '0' && v.p[0] != '1'))
        return -1;
    u->tls = v.p[0] == '1';
    return 0;
}

/* Apply one key=value query parameter; seen tracks repeats. */
static int url_param(struct span kv, unsigned *seen, muster_url *u)
{
    const char *eq = memchr(kv.p, '=', kv.n);
    if (!eq)
        return -1;
    struct span k = {kv.p, (size_t)(eq - kv.p)};
    struct span v = {eq + 1, kv.n - k.n - 1};
    static const char *const names[] = {"token", "timeout", "name", "tls", "ca", "cert", "key"};
    for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (k.n != strlen(names[i]) || memcmp(k.p, names[i], k.n) != 0)
            continue;
        if (*seen & (1u << i))
            return -1;
        *seen |= 1u << i;
        if (i == 0)
            return url_decode(v, u->token, sizeof u->token);
        if (i == 2)
            return url_decode(v, u->name, sizeof u->name);
        if (i == 3)
            return url_tls_flag(v, u);
        if (i >= 4) {
            char *dst = i == 4 ? u->tls_ca : i == 5 ? u->tls_cert : u->tls_key;
            return url_decode(v, dst, sizeof u->tls_ca);
        }
        unsigned long ms;
        if (url_number(v, UINT32_MAX, &ms) != 0 || ms == 0)
            return -1;
        u->timeout_ms = (uint32_t)ms;
        return 0;
    }
    return -1;
}

/* Parse a query string (after '?') of '&'-separated parameters. */
static int url_query(struct span q, muster_url *u)
{
    unsigned seen = 0;
    const char *p = q.p, *end = q.p + q.n;
    if (q.n == 0)
        return -1;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if (url_param((struct span){p, (size_t)(stop - p)}, &seen, u) != 0)
            return -1;
        p = amp ? amp + 1 : end;
        if (amp && p == end)
            return -1;
    }
    return 0;
}

/* Split "rest?query" at the '?' into path and query spans (query.p NULL when absent). */
static void url_split_query(const char *rest, struct span *path, struct span *query)
{
    const char *q = strchr(rest, '?');
    path->p = rest;
    path->n = q ? (size_t)(q - rest) : strlen(rest);
    query->p = q ? q + 1 : NULL;
    query->n = q ? strlen(q + 1) : 0;
}

/* Parse the authority "HOST[:PORT]" or "[V6][:PORT]". */
static int url_authority(struct span a, muster_url *u)
{
    struct span host = a, port = {NULL, 0};
    int v6 = 0, has_port = 0;
    if (a.n > 0 && a.p[0] == '[') {
        const char *close = memchr(a.p, ']', a.n);
        if (!close)
            return -1;
        host = (struct span){a.p + 1, (size_t)(close - a.p - 1)};
        size_t used = (size_t)(close - a.p) + 1;
        if (used < a.n) {
            if (a.p[used] != ':')
                return -1;
            port = (struct span){a.p + used + 1, a.n - used - 1};
            has_port = 1;
        }
        v6 = 1;
    } else {
        const char *colon = memchr(a.p, ':', a.n);
        if (colon) {
            host.n = (size_t)(colon - a.p);
            port = (struct span){colon + 1, a.n - host.n - 1};
            has_port = 1;
        }
    }
    if (url_set_host(host, v6, u) != 0)
        return -1;
    u->port = MUSTER_DEFAULT_PORT;
    return has_port ? url_port(port, &u->port) : 0;
}

/* Parse the part after "tcp://". */
static int url_parse_tcp(const char *rest, muster_url *u)
{
    struct span path, query;
    url_split_query(rest, &path, &query);
    const char *slash = memchr(path.p, '/', path.n);
    struct span auth = {path.p, slash ? (size_t)(slash - path.p) : path.n};
    if (url_authority(auth, u) != 0)
        return -1;
    if (slash) {
        struct span ns = {slash + 1, path.n - auth.n - 1};
        for (size_t i = 0; i < ns.n; i++)
            if (!url_ns_char(ns.p[i]))
                return -1;
        if (url_copy(ns, u->ns, sizeof u->ns) != 0)
            return -1;
    }
    return query.p ? url_query(query, u) : 0;
}

/* Parse the part after "env://": MASTER_ADDR, MASTER_PORT, MUSTER_NAMESPACE, then the query. */
static int url_parse_env(const char *rest, muster_url *u)
{
    struct span path, query;
    url_split_query(rest, &path, &query);
    if (path.n != 0)
        return -1;
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    const char *ns = getenv("MUSTER_NAMESPACE");
    if (!addr || !*addr)
        return -1;
    struct span a = {addr, strlen(addr)};
    /* MASTER_ADDR holds a bare address, so an IPv6 literal comes unbracketed. */
    int v6 = memchr(addr, ':', a.n) != NULL;
    if (a.n > 2 && addr[0] == '[' && addr[a.n - 1] == ']')
        a = (struct span){addr + 1, a.n - 2}, v6 = 1;
    if (url_set_host(a, v6, u) != 0)
        return -1;
    u->port = MUSTER_DEFAULT_PORT;
    if (port && *port && url_port((struct span){port, strlen(port)}, &u->port) != 0)
        return -1;
    if (ns) {
        for (const char *c = ns; *c; c++)
            if (!url_ns_char(*c))
                return -1;
        if (url_copy((struct span){ns, strlen(ns)}, u->ns, sizeof u->ns) != 0)
            return -1;
    }
    return query.p ? url_query(query, u) : 0;
}

/* Parse text into *out; MUSTER_EURL with no change to *out on error. */
int muster_url_parse(const char *text, muster_url *out)
{
    if (!out)
        return MUSTER_EINVAL;
    if (!text || !*text) {
        text = getenv("MUSTER_URL");
        if (!text || !*text)
            text = URL_DEFAULT;
    }
    muster_url u;
    memset(&u, 0, sizeof u);
    int rc = -1;
    if (strncasecmp(text, URL_TCP, strlen(URL_TCP)) == 0) {
        rc = url_parse_tcp(text + strlen(URL_TCP), &u);
    } else if (strncasecmp(text, URL_TLS, strlen(URL_TLS)) == 0) {
        u.tls = 1; /* before the query, so ?tls=0 can still turn it off */
        rc = url_parse_tcp(text + strlen(URL_TLS), &u);
    }
    else if (strncasecmp(text, URL_ENV, strlen(URL_ENV)) == 0)
        rc = url_parse_env(text + strlen(URL_ENV), &u);
    if (rc != 0 || strchr(text, '#'))
        return MUSTER_EURL;
    *out = u;
    return MUSTER_OK;
}
