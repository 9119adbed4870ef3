/*
 * Store URL parsing: tcp://HOST[:PORT][,HOST[:PORT]...][/NAMESPACE][?token=T&timeout=MS&name=N&failover=0|1
 * &generation=G]
 * (tls:// the same, plus tls=0|1, ca=, cert=, key=) and env://[?...].  A pure function of its input (the environment is read
 * only for NULL/"" and env://), so it is easy to unit-test and fuzz.
 * Several endpoints name the members of a high-availability set; the
 * handle tries them in turn (conn.c), so the first one is just a start.
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
#include <stdio.h>
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
static int url_set_host(struct span h, int v6, muster_endpoint *e)
{
    if (h.n == 0 || url_copy(h, e->host, sizeof e->host) != 0)
        return -1;
    if (v6) {
        struct in6_addr a;
        return inet_pton(AF_INET6, e->host, &a) == 1 ? 0 : -1;
    }
    for (size_t i = 0; i < h.n; i++)
        if (!url_host_char(h.p[i]))
            return -1;
    return 0;
}

/* Apply a 0|1 flag such as ?tls= (tls:// already set it) or ?failover=; 0 on success. */
static int url_tls_flag(struct span v, int *flag)
{
    if (v.n != 1 || (v.p[0] != '0' && v.p[0] != '1'))
        return -1;
    *flag = v.p[0] == '1';
    return 0;
}

/* The query parameters a URL may give, in the order of their bits in url_param's seen. */
static const char *const url_params[] = {"token", "timeout", "name", "tls", "ca", "cert", "key", "failover",
                                         "generation"};

/* Say in why (n bytes) what is wrong with a query parameter: its name (never its value, which may be a
 * token) and the problem; returns -1. */
static int url_bad_param(struct span k, const char *problem, char *why, size_t n)
{
    snprintf(why, n, "query parameter '%.*s' %s", (int)(k.n > 40 ? 40 : k.n), k.p, problem);
    return -1;
}

/* Store one known parameter's value (i: its index in url_params); 0 or -1 after saying why. */
static int url_param_value(unsigned i, struct span k, struct span v, muster_url *u, char *why, size_t n)
{
    unsigned long ms;
    char *dst = i == 0 ? u->token : i == 2 ? u->name : i == 4 ? u->tls_ca : i == 5 ? u->tls_cert : u->tls_key;
    size_t cap = i == 0 ? sizeof u->token : i == 2 ? sizeof u->name : sizeof u->tls_ca;
    switch (i) {
    case 1:
        if (url_number(v, UINT32_MAX, &ms) != 0 || ms == 0)
            return url_bad_param(k, "must be a number of milliseconds, 1..4294967295", why, n);
        u->timeout_ms = (uint32_t)ms;
        return 0;
    case 8:
        if (url_number(v, UINT32_MAX, &ms) != 0 || ms == 0)
            return url_bad_param(k, "must be a generation number, 1..4294967295", why, n);
        u->generation = ms;
        return 0;
    case 3:
    case 7:
        if (url_tls_flag(v, i == 3 ? &u->tls : &u->failover) != 0)
            return url_bad_param(k, "must be 0 or 1", why, n);
        return 0;
    default:
        if (url_decode(v, dst, cap) != 0)
            return url_bad_param(k, "is too long, holds %00 or a bad %-escape", why, n);
        return 0;
    }
}

/* Apply one key=value query parameter; seen tracks repeats.  0 or -1 after saying why. */
static int url_param(struct span kv, unsigned *seen, muster_url *u, char *why, size_t n)
{
    const char *eq = memchr(kv.p, '=', kv.n);
    if (!eq) {
        /* Not echoed: a bare value may be a token given without its name. */
        snprintf(why, n, "a query parameter has no '=': want NAME=VALUE with NAME one of token, timeout, name, "
                         "tls, ca, cert, key, failover, generation");
        return -1;
    }
    struct span k = {kv.p, (size_t)(eq - kv.p)};
    struct span v = {eq + 1, kv.n - k.n - 1};
    for (unsigned i = 0; i < sizeof url_params / sizeof url_params[0]; i++) {
        if (k.n != strlen(url_params[i]) || memcmp(k.p, url_params[i], k.n) != 0)
            continue;
        if (*seen & (1u << i))
            return url_bad_param(k, "is given twice", why, n);
        *seen |= 1u << i;
        return url_param_value(i, k, v, u, why, n);
    }
    return url_bad_param(k, "is unknown: want token, timeout, name, tls, ca, cert, key, failover or generation", why,
                         n);
}

/* Parse a query string (after '?') of '&'-separated parameters; 0 or -1 after saying why. */
static int url_query(struct span q, muster_url *u, char *why, size_t n)
{
    unsigned seen = 0;
    const char *p = q.p, *end = q.p + q.n;
    if (q.n == 0) {
        snprintf(why, n, "nothing follows the '?'");
        return -1;
    }
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *stop = amp ? amp : end;
        if (url_param((struct span){p, (size_t)(stop - p)}, &seen, u, why, n) != 0)
            return -1;
        p = amp ? amp + 1 : end;
        if (amp && p == end) {
            snprintf(why, n, "the query ends in '&'");
            return -1;
        }
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

/* Parse one endpoint "HOST[:PORT]" or "[V6][:PORT]", defport when the port is absent. */
static int url_endpoint(struct span a, uint16_t defport, muster_endpoint *e)
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
    if (url_set_host(host, v6, e) != 0)
        return -1;
    e->port = defport;
    return has_port ? url_port(port, &e->port) : 0;
}

/* Say which endpoint (1-based, and its text) is malformed. */
static int url_bad_endpoint(struct span a, size_t i, char *why, size_t n)
{
    snprintf(why, n, "endpoint %zu '%.*s' is malformed: want HOST[:PORT] or [IPV6][:PORT], port 1..65535", i + 1,
             (int)(a.n > 200 ? 200 : a.n), a.p);
    return -1;
}

/* Add one endpoint parsed by url_endpoint to u, refusing more than the limit. */
static int url_add_endpoint(struct span a, uint16_t defport, muster_url *u, char *why, size_t n)
{
    if (u->n_endpoints == MUSTER_URL_MAX_ENDPOINTS) {
        snprintf(why, n, "more than %d endpoints", MUSTER_URL_MAX_ENDPOINTS);
        return -1;
    }
    if (url_endpoint(a, defport, &u->endpoints[u->n_endpoints]) != 0)
        return url_bad_endpoint(a, u->n_endpoints, why, n);
    u->n_endpoints++;
    return 0;
}

/* Parse the comma-separated endpoint list "A[,B...]" into u. */
static int url_authorities(struct span list, muster_url *u, char *why, size_t n)
{
    const char *p = list.p, *end = list.p + list.n;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        if (url_add_endpoint((struct span){p, (size_t)(stop - p)}, MUSTER_DEFAULT_PORT, u, why, n) != 0)
            return -1;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

/* Take a namespace (a job name): letters, digits, '-', '.' and '_'; 0 or -1 after saying why. */
static int url_namespace(struct span ns, muster_url *u, char *why, size_t n)
{
    for (size_t i = 0; i < ns.n; i++) {
        if (!url_ns_char(ns.p[i])) {
            snprintf(why, n, "the namespace may hold only letters, digits, '-', '.' and '_'%s",
                     ns.p[i] == '/' ? " (one path segment)" : "");
            return -1;
        }
    }
    if (url_copy(ns, u->ns, sizeof u->ns) != 0) {
        snprintf(why, n, "the namespace is longer than %zu bytes", sizeof u->ns - 1);
        return -1;
    }
    return 0;
}

/* Parse the part after "tcp://". */
static int url_parse_tcp(const char *rest, muster_url *u, char *why, size_t n)
{
    struct span path, query;
    url_split_query(rest, &path, &query);
    const char *slash = memchr(path.p, '/', path.n);
    struct span auth = {path.p, slash ? (size_t)(slash - path.p) : path.n};
    if (url_authorities(auth, u, why, n) != 0)
        return -1;
    if (slash && url_namespace((struct span){slash + 1, path.n - auth.n - 1}, u, why, n) != 0)
        return -1;
    return query.p ? url_query(query, u, why, n) : 0;
}

/* Count the colons in a span. */
static size_t url_colons(struct span a)
{
    size_t k = 0;
    for (size_t i = 0; i < a.n; i++)
        k += a.p[i] == ':';
    return k;
}

/* Add one MASTER_ADDR element: a bare IPv6 literal (two colons or more) takes
 * defport; otherwise it is parsed like a URL endpoint, HOST[:PORT] or [V6][:PORT]. */
static int url_env_endpoint(struct span a, uint16_t defport, muster_url *u, char *why, size_t n)
{
    if (a.n == 0 || a.p[0] == '[' || url_colons(a) < 2)
        return url_add_endpoint(a, defport, u, why, n);
    if (u->n_endpoints == MUSTER_URL_MAX_ENDPOINTS)
        return url_add_endpoint(a, defport, u, why, n);
    muster_endpoint *e = &u->endpoints[u->n_endpoints];
    if (url_set_host(a, 1, e) != 0)
        return url_bad_endpoint(a, u->n_endpoints, why, n);
    e->port = defport;
    u->n_endpoints++;
    return 0;
}

/* Parse the part after "env://": MASTER_ADDR (one address or a comma-separated
 * list), MASTER_PORT, MUSTER_NAMESPACE, then the query. */
static int url_parse_env(const char *rest, muster_url *u, char *why, size_t n)
{
    struct span path, query;
    url_split_query(rest, &path, &query);
    if (path.n != 0)
        return -1;
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    const char *ns = getenv("MUSTER_NAMESPACE");
    if (!addr || !*addr) {
        snprintf(why, n, "env:// needs MASTER_ADDR");
        return -1;
    }
    uint16_t defport = MUSTER_DEFAULT_PORT;
    if (port && *port && url_port((struct span){port, strlen(port)}, &defport) != 0) {
        snprintf(why, n, "MASTER_PORT '%.16s' is not a port 1..65535", port);
        return -1;
    }
    for (const char *p = addr;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (url_env_endpoint((struct span){p, len}, defport, u, why, n) != 0)
            return -1;
        if (!comma)
            break;
        p = comma + 1;
    }
    if (ns && url_namespace((struct span){ns, strlen(ns)}, u, why, n) != 0)
        return -1;
    return query.p ? url_query(query, u, why, n) : 0;
}

/* Parse a NUL-terminated "HOST:PORT" or "[V6]:PORT" (a leader's address) into *e; 0 or -1. */
int url_parse_endpoint(const char *text, muster_endpoint *e)
{
    muster_endpoint tmp;
    if (url_endpoint((struct span){text, strlen(text)}, MUSTER_DEFAULT_PORT, &tmp) != 0)
        return -1;
    *e = tmp;
    return 0;
}

/* Copy the first endpoint into host/port and settle the failover default. */
static void url_finish(muster_url *u)
{
    memcpy(u->host, u->endpoints[0].host, sizeof u->host);
    u->port = u->endpoints[0].port;
    if (u->failover < 0)
        u->failover = u->n_endpoints > 1;
}

/* Parse text into *out; MUSTER_EURL with no change to *out on error. */
int muster_url_parse(const char *text, muster_url *out)
{
    return muster_url_parse_detail(text, out, NULL, 0);
}

/* As muster_url_parse, also saying in why (n bytes) what is wrong. */
int muster_url_parse_detail(const char *text, muster_url *out, char *why, size_t n)
{
    char scratch[8];
    if (!why || n == 0)
        why = scratch, n = sizeof scratch;
    why[0] = '\0';
    if (!out)
        return MUSTER_EINVAL;
    if (!text || !*text) {
        text = getenv("MUSTER_URL");
        if (!text || !*text)
            text = URL_DEFAULT;
    }
    /* Large (the endpoint table), so off the stack of small threads. */
    muster_url *u = calloc(1, sizeof *u);
    if (!u)
        return MUSTER_ENOMEM;
    u->failover = -1;
    int rc = -1;
    if (strchr(text, '#')) {
        /* Said first: a '#' in a namespace or a parameter would otherwise be blamed on that part. */
        snprintf(why, n, "a store URL has no fragment ('#')");
    } else if (strncasecmp(text, URL_TCP, strlen(URL_TCP)) == 0) {
        rc = url_parse_tcp(text + strlen(URL_TCP), u, why, n);
    } else if (strncasecmp(text, URL_TLS, strlen(URL_TLS)) == 0) {
        u->tls = 1; /* before the query, so ?tls=0 can still turn it off */
        rc = url_parse_tcp(text + strlen(URL_TLS), u, why, n);
    } else if (strncasecmp(text, URL_ENV, strlen(URL_ENV)) == 0) {
        rc = url_parse_env(text + strlen(URL_ENV), u, why, n);
    }
    if (rc != 0 && !why[0])
        snprintf(why, n, "want tcp://HOST[:PORT][,HOST[:PORT]...][/NAMESPACE][?PARAMS], tls://... or env://");
    if (rc == 0) {
        url_finish(u);
        *out = *u;
    }
    free(u);
    return rc == 0 ? MUSTER_OK : MUSTER_EURL;
}
