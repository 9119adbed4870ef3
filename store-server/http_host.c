/*
 * The Host check of the HTTP listener.  Its answers are unauthenticated
 * and a browser on the operator's machine can reach it, so a web page
 * could point a name it controls at the listener's address (DNS
 * rebinding) and read the status through the browser, which sends that
 * name as Host.  A request is answered only when its Host is an IP
 * literal, localhost, this machine's name, the --metrics-listen host or a
 * name given with --http-allowed-hosts; any other gets 421 and counts in
 * http_bad_host.  A request with no Host (HTTP/1.0 tools) is answered: a
 * browser always sends one.
 */
#include "http_host.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "listener.h"
#include "server.h"

/* Copy host's name without its port into out (n bytes), lower case and without a final dot; 1 when it is
 * a bracketed or bare IPv6 literal (then out is not filled). */
static int http_host_name(const char *host, char *out, size_t n)
{
    const char *colon = strchr(host, ':');
    if (*host == '[' || (colon && strchr(colon + 1, ':')))
        return 1;
    size_t len = colon ? (size_t)(colon - host) : strlen(host);
    if (len >= n)
        len = n - 1;
    for (size_t i = 0; i < len; i++)
        out[i] = (char)tolower((unsigned char)host[i]);
    while (len > 0 && out[len - 1] == '.')
        len--;
    out[len] = 0;
    return 0;
}

/* Whether name is this machine's name, in full or up to its first dot. */
static int http_host_is_self(const char *name)
{
    char self[256];
    if (gethostname(self, sizeof self) != 0)
        return 0;
    self[sizeof self - 1] = 0;
    size_t short_len = strcspn(self, ".");
    return strcasecmp(name, self) == 0 || (strlen(name) == short_len && strncasecmp(name, self, short_len) == 0);
}

/* Whether name is the --metrics-listen host or one of --http-allowed-hosts. */
static int http_host_is_configured(const struct options *o, const char *name)
{
    char listen[256];
    uint16_t port;
    if (o->metrics_listen && listener_parse(o->metrics_listen, listen, sizeof listen, &port) == 0 &&
        strcasecmp(name, listen) == 0)
        return 1;
    for (size_t i = 0; i < o->http_allowed_hosts.n; i++)
        if (strcasecmp(name, o->http_allowed_hosts.v[i]) == 0)
            return 1;
    return 0;
}

/* Whether a request with this Host header (NULL: none) may be answered: an IP literal, localhost, this
 * machine's name, the --metrics-listen host or one of --http-allowed-hosts, with any port. */
int http_host_ok(struct server *srv, const char *host)
{
    char name[256];
    struct in_addr a;
    if (!host || !*host || http_host_name(host, name, sizeof name))
        return 1;
    size_t len = strlen(name);
    if (inet_pton(AF_INET, name, &a) == 1 || strcmp(name, "localhost") == 0 ||
        (len > 10 && strcmp(name + len - 10, ".localhost") == 0))
        return 1;
    return http_host_is_self(name) || http_host_is_configured(&srv->opt, name);
}
