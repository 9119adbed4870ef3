/*
 * Namespaces: one per job or tenant, created by the first hello that names
 * it.  Each owns a keyspace whose change hook fans out to the namespace's
 * waiters and watchers.  Tokens come from --token / --token-file; a
 * namespace without one is open, unless --closed-namespaces accepts only
 * the namespaces named there.
 *
 * Anyone may name a new namespace, so an empty one must not live for ever
 * (19,998 empty namespaces made in 5.5 s used to refuse every new job until
 * a restart): a sweep forgets a namespace that has been empty for
 * --ns-idle-timeout, and the namespaces one address created and that still
 * exist are bounded by --max-namespaces-per-source.  Empty means nothing at
 * all would be lost: no keys (so nothing durable: a namespace recovered from
 * the log with keys stays), no connections, parked requests, watches or
 * barriers (whose round numbers go on), no rendezvous state (its generation
 * counter must never go back), and no other front end attached.
 */
#include "ns.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "muster.pb-c.h"
#include "log.h"
#include "server.h"
#include "source.h"

/* The daemon's part of a namespace (the core's struct ns holds it as its owner). */
struct ns_daemon {
    int pinned;             /* a front end serves it (the TCPStore listener's): never reclaimed */
    size_t nconns;          /* connections that said hello to this namespace */
    struct source *creator; /* the address whose hello created it (source.c), or NULL */
    uint64_t idle_ms;       /* when it was created or its last connection left (monotonic) */
};

/* The daemon's part of ns. */
static struct ns_daemon *ns_daemon(const struct ns *ns)
{
    return ns->owner;
}

/* A namespace's required token. */
struct token {
    UT_hash_handle hh;
    char *ns;
    char *token;
};

/* Record that namespace ns requires token (a later pair replaces an earlier one); 0 on success. */
static int ns_token_add(struct server *srv, const char *ns, size_t nslen, const char *token)
{
    struct token *t = NULL;
    HASH_FIND(hh, srv->tokens, ns, nslen, t);
    if (!t) {
        if (!(t = calloc(1, sizeof *t)) || !(t->ns = strndup(ns, nslen))) {
            free(t);
            return -1;
        }
        HASH_ADD_KEYPTR(hh, srv->tokens, t->ns, nslen, t);
    }
    free(t->token);
    return (t->token = strdup(token)) ? 0 : -1;
}

/* Parse the lines of a token file ("NS TOKEN", '#' comments); 0, or -1 after logging why.
 *
 * Lines are read whole, however long: with a 1 KiB buffer a longer line came in as two, and its
 * second part could pass for a pair of its own ("job <1019 bytes> other x" configured "other").  A
 * NUL byte ends a C string early, so a pair holding one would be read as something it does not
 * say: such a line is malformed. */
static int ns_token_file(struct server *srv, const char *path)
{
    FILE *fp = fopen(path, "re");
    if (!fp) {
        log_msg(LOG_ERROR, "cannot read token file %s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, fp)) >= 0) {
        lineno++;
        size_t lead = strspn(line, " \t\r\n");
        if ((ssize_t)lead == len || line[lead] == '#')
            continue;
        if (memchr(line, 0, (size_t)len)) {
            log_msg(LOG_ERROR, "%s:%d: holds a NUL byte", path, lineno);
            rc = -1;
            continue;
        }
        char *save = NULL, *ns = strtok_r(line, " \t\r\n", &save);
        char *tok = strtok_r(NULL, " \t\r\n", &save);
        if (!tok || strtok_r(NULL, " \t\r\n", &save)) {
            log_msg(LOG_ERROR, "%s:%d: expected 'NAMESPACE TOKEN'", path, lineno);
            rc = -1;
        } else {
            rc = ns_token_add(srv, ns, strlen(ns), tok);
        }
    }
    free(line);
    fclose(fp);
    return rc;
}

/* Load the --token and --token-file pairs; 0, or -1 after logging why. */
int ns_tokens_load(struct server *srv)
{
    const struct strlist *l = &srv->opt.token;
    for (size_t i = 0; i < l->n; i++) {
        const char *eq = strchr(l->v[i], '=');
        if (ns_token_add(srv, l->v[i], (size_t)(eq - l->v[i]), eq + 1) != 0)
            return -1;
    }
    if (srv->opt.token_file && *srv->opt.token_file)
        return ns_token_file(srv, srv->opt.token_file);
    return 0;
}

/* Compare two strings in time that depends only on their lengths; 1 when equal. */
static int ns_ct_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t diff = la ^ lb;
    for (size_t i = 0; i < lb; i++)
        diff |= (size_t)((unsigned char)(i < la ? a[i] : 0) ^ (unsigned char)b[i]);
    return diff == 0;
}

/* Whether token opens namespace name (constant-time compare; open namespaces take any token). */
int ns_token_ok(struct server *srv, const char *name, const char *token)
{
    struct token *t = NULL;
    HASH_FIND_STR(srv->tokens, name, t);
    return !t || ns_ct_equal(token ? token : "", t->token);
}

/* Whether namespace name is named by --token or --token-file. */
int ns_configured(struct server *srv, const char *name)
{
    struct token *t = NULL;
    HASH_FIND_STR(srv->tokens, name, t);
    return t != NULL;
}

/* The namespace called name, or NULL. */
struct ns *ns_find(struct server *srv, const char *name)
{
    struct ns *ns = NULL;
    HASH_FIND_STR(srv->namespaces, name, ns);
    return ns;
}

static int ns_empty(const struct ns *ns);
static void ns_forget(struct server *srv, struct ns *ns);

/* Forget the empty namespace (created by by, or by anyone when by is NULL) empty the longest; 1 when
 * there was one.  Used at a cap instead of refusing: forgetting an empty namespace loses nothing. */
static int ns_reclaim_oldest(struct server *srv, const struct source *by)
{
    struct ns *ns, *tmp, *old = NULL;
    HASH_ITER(hh, srv->namespaces, ns, tmp) {
        if ((!by || ns_daemon(ns)->creator == by) && ns_empty(ns) &&
            (!old || ns_daemon(ns)->idle_ms < ns_daemon(old)->idle_ms))
            old = ns;
    }
    if (!old)
        return 0;
    struct log_field f = {"namespace", old->name, 0};
    log_fields(LOG_DEBUG, &f, 1, "namespace '%s' reclaimed to make room", old->name);
    ns_forget(srv, old);
    return 1;
}

/* The namespace called name, created on first use (for sa, or NULL); NULL with *status LIMIT or INTERNAL.
 * At --max-namespaces, or at sa's --max-namespaces-per-source, the oldest empty namespace (of sa's, for
 * the latter) is forgotten first, so empty ones never lock a real job out.  A namespace named by
 * --token or --token-file is never counted against the address that opens it. */
static struct ns *ns_get_for(struct server *srv, const char *name, const struct sockaddr *sa, int *status)
{
    struct ns *ns = ns_find(srv, name);
    if (ns)
        return ns;
    if (sa && ns_configured(srv, name))
        sa = NULL;
    const struct source *full = sa ? source_ns_full(srv, sa) : NULL;
    if (full)
        ns_reclaim_oldest(srv, full);
    if (srv->stats.c[STAT_NAMESPACES] >= srv->opt.max_namespaces && !ns_reclaim_oldest(srv, NULL)) {
        stats_inc(&srv->stats, STAT_LIMIT_NAMESPACES);
        *status = MUSTER__STATUS__LIMIT;
        return NULL;
    }
    struct source *creator = sa ? source_ns_take(srv, sa, status) : NULL;
    if (sa && !creator)
        return NULL;
    size_t len = strlen(name);
    struct ns_daemon *d = calloc(1, sizeof *d);
    if (!d || !(ns = calloc(1, sizeof *ns + len + 1))) {
        free(d);
        source_ns_put(srv, creator);
        *status = MUSTER__STATUS__INTERNAL;
        return NULL;
    }
    memcpy(ns->name, name, len);
    ns->owner = d;
    d->creator = creator;
    d->idle_ms = clock_now_ms();
    const struct options *o = &srv->opt;
    core_ns_init(server_core(srv), ns, o->max_keys_per_ns, o->max_bytes_per_ns, o->max_value);
    HASH_ADD(hh, srv->namespaces, name[0], len, ns);
    stats_inc(&srv->stats, STAT_NAMESPACES);
    struct log_field f = {"namespace", ns->name, 0};
    log_fields(LOG_INFO, &f, 1, "namespace '%s' created", ns->name);
    return ns;
}

/* The namespace called name, created on first use; NULL with *status LIMIT or INTERNAL. */
struct ns *ns_get(struct server *srv, const char *name, int *status)
{
    return ns_get_for(srv, name, NULL, status);
}

/* As ns_get for a hello from sa: a namespace it creates counts against sa's --max-namespaces-per-source. */
struct ns *ns_open(struct server *srv, const char *name, const struct sockaddr *sa, int *status)
{
    return ns_get_for(srv, name, sa, status);
}

/* A connection said hello to ns. */
void ns_conn_joined(struct ns *ns)
{
    ns_daemon(ns)->nconns++;
}

/* A connection left ns: its idle time starts when the last one goes. */
void ns_conn_left(struct ns *ns)
{
    struct ns_daemon *d = ns_daemon(ns);
    if (--d->nconns == 0)
        d->idle_ms = clock_now_ms();
}

/* Connections that said hello to ns and are still open. */
size_t ns_conns(const struct ns *ns)
{
    return ns_daemon(ns)->nconns;
}

/* Pin ns while a front end serves it (the TCPStore listener's namespace): a pinned namespace is never
 * reclaimed. */
void ns_pin(struct ns *ns, int on)
{
    ns_daemon(ns)->pinned = on;
}

/* Whether ns holds nothing that forgetting it would lose (see the top of this file). */
static int ns_empty(const struct ns *ns)
{
    const struct ns_daemon *d = ns_daemon(ns);
    return core_ns_empty(ns) && d->nconns == 0 && !d->pinned;
}

/* Free one namespace and everything it holds. */
static void ns_free(struct server *srv, struct ns *ns)
{
    HASH_DEL(srv->namespaces, ns);
    core_ns_fini(ns);
    source_ns_put(srv, ns_daemon(ns)->creator);
    free(ns->owner);
    free(ns);
}

/* Forget an empty namespace, counted as reclaimed. */
static void ns_forget(struct server *srv, struct ns *ns)
{
    ns_free(srv, ns);
    stats_dec(&srv->stats, STAT_NAMESPACES);
    stats_inc(&srv->stats, STAT_NS_RECLAIMED);
}

/* How often the sweep runs: a quarter of the idle timeout, between 50 ms and 10 s. */
static uint64_t ns_sweep_ms(const struct server *srv)
{
    uint64_t ms = srv->opt.ns_idle_timeout / 4;
    return ms < 50 ? 50 : ms > 10000 ? 10000 : ms;
}

/* The sweep: forget every namespace that has been empty for --ns-idle-timeout. */
static void ns_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    uint64_t now = clock_now_ms(), idle = srv->opt.ns_idle_timeout;
    size_t n = 0;
    struct ns *ns, *tmp;
    HASH_ITER(hh, srv->namespaces, ns, tmp) {
        if (!ns_empty(ns)) {
            ns_daemon(ns)->idle_ms = now; /* idle counts from when it was last seen in use */
        } else if (now - ns_daemon(ns)->idle_ms >= idle) {
            struct log_field f = {"namespace", ns->name, 0};
            log_fields(LOG_DEBUG, &f, 1, "namespace '%s' reclaimed", ns->name);
            ns_forget(srv, ns);
            n++;
        }
    }
    if (n)
        log_msg(LOG_INFO, "reclaimed %zu namespaces idle for %llu ms", n, (unsigned long long)idle);
    clock_timer_at(srv->ns_sweep, now + ns_sweep_ms(srv));
}

/* Start reclaiming idle empty namespaces (--ns-idle-timeout); 0, or -1 when the timer cannot be made. */
int ns_sweep_start(struct server *srv)
{
    if (!srv->opt.ns_idle_timeout)
        return 0;
    if (!(srv->ns_sweep = evtimer_new(srv->base, ns_sweep_cb, srv)))
        return -1;
    clock_timer_at(srv->ns_sweep, clock_now_ms() + ns_sweep_ms(srv));
    return 0;
}

/* Call fn on every namespace. */
void ns_each(struct server *srv, void (*fn)(struct ns *ns, void *arg), void *arg)
{
    struct ns *ns, *tmp;
    HASH_ITER(hh, srv->namespaces, ns, tmp)
        fn(ns, arg);
}

/* Free every namespace and the token table. */
void ns_destroy_all(struct server *srv)
{
    if (srv->ns_sweep)
        event_free(srv->ns_sweep);
    srv->ns_sweep = NULL;
    struct ns *ns, *tmp;
    HASH_ITER(hh, srv->namespaces, ns, tmp)
        ns_free(srv, ns);
    source_destroy_all(srv);
    struct token *t, *tt;
    HASH_ITER(hh, srv->tokens, t, tt) {
        HASH_DEL(srv->tokens, t);
        free(t->ns);
        free(t->token);
        free(t);
    }
}
