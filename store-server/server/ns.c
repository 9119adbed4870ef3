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
 *
 * That leaves namespaces holding a key: 1,024 of them locked their address
 * out for good, and 99 addresses filled --max-namespaces for everyone, also
 * across a restart with --data-dir.  So a second, longer rule drops a
 * namespace, keys, queues, barriers and generation counter included, once
 * nothing has used it for --ns-reclaim-after (24 h): no connection is in it
 * (requests come only over a connection that said hello to it, so "used"
 * is its creation, a hello, or its last connection leaving), and it has no
 * parked request, no watch and no rendezvous in use (no node, no running
 * generation, no open recovery round: its job ended or never formed).  A
 * namespace named by --token or --token-file is the operator's and is kept.
 * The drop is a DROP record (record.h), so --data-dir and --ha forget it
 * too; an --ha standby leaves dropping to the leader.  A name dropped and
 * used again starts over, its generations from 1.  And an address creates
 * at most --max-namespace-creates-per-source a minute (source.c).
 *
 * The sweep looks at up to NS_SWEEP_SLICE namespaces per loop turn, for
 * about NS_SWEEP_SLICE_US at most, resuming where it stopped, so a pass
 * over 100,000 never holds the loop for long; the longest slice is the
 * ns_sweep_slice_max_us counter.
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
#include "rdzv.h"
#include "record.h"
#include "server.h"
#include "source.h"

/* The daemon's part of a namespace (the core's struct ns holds it as its owner). */
struct ns_daemon {
    int pinned;             /* a front end serves it (the TCPStore listener's): never reclaimed */
    size_t nconns;          /* connections that said hello to this namespace */
    struct source *creator; /* the address whose hello created it (source.c), or NULL */
    uint64_t idle_ms;       /* when it was created or its last connection left (monotonic) */
    uint64_t used_ms;       /* when it was created, said hello to or left by its last connection (monotonic) */
};

/* Namespaces one turn of the sweep looks at, at most; and the time after which it stops early (checked
 * every NS_SWEEP_CHECK namespaces: dropping one costs microseconds, more with many keys or --data-dir). */
#define NS_SWEEP_SLICE 1024
#define NS_SWEEP_SLICE_US 1000
#define NS_SWEEP_CHECK 64
/* Namespaces dropped in one pass of the sweep that get a line of their own at info level. */
#define NS_DROP_LOG_LINES 100

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

/* The namespace called name, created on first use (for sa, or NULL); NULL with *status LIMIT or INTERNAL
 * and why (when not NULL, len bytes) naming the limit.  An address creating faster than
 * --max-namespace-creates-per-source is refused first.  At --max-namespaces, or at sa's
 * --max-namespaces-per-source, the oldest empty namespace (of sa's, for the latter) is forgotten first, so
 * empty ones never lock a real job out.  A namespace named by --token or --token-file is never counted
 * against the address that opens it. */
static struct ns *ns_get_for(struct server *srv, const char *name, const struct sockaddr *sa, int *status,
                             char *why, size_t len)
{
    const struct options *o = &srv->opt;
    struct ns *ns = ns_find(srv, name);
    if (ns)
        return ns;
    if (sa && ns_configured(srv, name))
        sa = NULL;
    uint64_t wait = sa ? source_ns_create_wait(srv, sa) : 0;
    if (wait) {
        stats_inc(&srv->stats, STAT_LIMIT_NS_CREATES_PER_SOURCE);
        *status = MUSTER__STATUS__LIMIT;
        if (why)
            snprintf(why, len, "this address creates namespaces faster than --max-namespace-creates-per-source "
                     "(%llu a minute): retry in %llu ms", (unsigned long long)o->max_ns_creates_per_source,
                     (unsigned long long)wait);
        return NULL;
    }
    const struct source *full = sa ? source_ns_full(srv, sa) : NULL;
    if (full)
        ns_reclaim_oldest(srv, full);
    if (srv->stats.c[STAT_NAMESPACES] >= o->max_namespaces && !ns_reclaim_oldest(srv, NULL)) {
        stats_inc(&srv->stats, STAT_LIMIT_NAMESPACES);
        *status = MUSTER__STATUS__LIMIT;
        if (why)
            snprintf(why, len, "the server holds --max-namespaces (%llu), none of them empty",
                     (unsigned long long)o->max_namespaces);
        return NULL;
    }
    struct source *creator = sa ? source_ns_take(srv, sa, status) : NULL;
    if (sa && !creator) {
        if (why && *status == MUSTER__STATUS__LIMIT)
            snprintf(why, len,
                     "this address created --max-namespaces-per-source (%llu) that still exist, none of them empty",
                     (unsigned long long)o->max_namespaces_per_source);
        return NULL;
    }
    size_t nlen = strlen(name);
    struct ns_daemon *d = calloc(1, sizeof *d);
    if (!d || !(ns = calloc(1, sizeof *ns + nlen + 1))) {
        free(d);
        source_ns_put(srv, creator);
        *status = MUSTER__STATUS__INTERNAL;
        return NULL;
    }
    memcpy(ns->name, name, nlen);
    ns->owner = d;
    d->creator = creator;
    d->idle_ms = d->used_ms = clock_now_ms();
    core_ns_init(server_core(srv), ns, o->max_keys_per_ns, o->max_bytes_per_ns, o->max_value);
    HASH_ADD(hh, srv->namespaces, name[0], nlen, ns);
    stats_inc(&srv->stats, STAT_NAMESPACES);
    struct log_field f = {"namespace", ns->name, 0};
    log_fields(LOG_INFO, &f, 1, "namespace '%s' created", ns->name);
    return ns;
}

/* The namespace called name, created on first use; NULL with *status LIMIT or INTERNAL. */
struct ns *ns_get(struct server *srv, const char *name, int *status)
{
    return ns_get_for(srv, name, NULL, status, NULL, 0);
}

/* As ns_get for a hello from sa: a namespace it creates counts against sa's --max-namespaces-per-source and
 * --max-namespace-creates-per-source; a refusal's words go to why (len bytes). */
struct ns *ns_open(struct server *srv, const char *name, const struct sockaddr *sa, int *status, char *why,
                   size_t len)
{
    if (len)
        why[0] = 0;
    return ns_get_for(srv, name, sa, status, why, len);
}

/* A connection said hello to ns: it is in use. */
void ns_conn_joined(struct ns *ns)
{
    struct ns_daemon *d = ns_daemon(ns);
    d->nconns++;
    d->used_ms = clock_now_ms();
}

/* A connection left ns: its idle time starts when the last one goes. */
void ns_conn_left(struct ns *ns)
{
    struct ns_daemon *d = ns_daemon(ns);
    if (--d->nconns == 0)
        d->idle_ms = d->used_ms = clock_now_ms();
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

/* Whether something uses ns now (the long rule's test, see the top of this file): a connection, a front end,
 * a parked request, a watch or its rendezvous. */
static int ns_in_use(const struct ns *ns)
{
    const struct ns_daemon *d = ns_daemon(ns);
    return d->nconns || d->pinned || ns->nwaiters || ns->waiters || ns->wkeys || ns->watches || rdzv_in_use(ns);
}

/* Free one namespace and everything it holds (a sweep resuming at it resumes at the next one). */
static void ns_free(struct server *srv, struct ns *ns)
{
    if (srv->ns_sweep_next == ns)
        srv->ns_sweep_next = ns->hh.next;
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

/* Drop ns, keys, queues, barriers and generation counter, as a DROP record the core emits with its current
 * origin; 0, or -1 with nothing done while it is in use.  why (NULL for a replayed or replicated drop, which
 * is not counted) is logged, on its own line for the first NS_DROP_LOG_LINES of a pass. */
int ns_drop(struct server *srv, struct ns *ns, const char *why)
{
    if (ns_in_use(ns))
        return -1;
    struct record r = {.kind = RECORD_DROP, .ns = ns->name};
    core_emit(&srv->core, &r);
    if (why) {
        struct log_field f = {"namespace", ns->name, 0};
        log_fields(srv->ns_swept_idle < NS_DROP_LOG_LINES ? LOG_INFO : LOG_DEBUG, &f, 1,
                   "namespace '%s' dropped with its %llu keys: %s", ns->name, (unsigned long long)ns->ks.count, why);
        stats_inc(&srv->stats, STAT_NS_RECLAIMED_IDLE);
    }
    ns_free(srv, ns);
    stats_dec(&srv->stats, STAT_NAMESPACES);
    return 0;
}

/* How often a sweep pass starts: a quarter of the shorter rule's time, between 50 ms and 10 s. */
static uint64_t ns_sweep_ms(const struct server *srv)
{
    const struct options *o = &srv->opt;
    uint64_t t = o->ns_idle_timeout && (!o->ns_reclaim_after || o->ns_idle_timeout < o->ns_reclaim_after)
                     ? o->ns_idle_timeout
                     : o->ns_reclaim_after;
    uint64_t ms = t / 4;
    return ms < 50 ? 50 : ms > 10000 ? 10000 : ms;
}

/* Apply both rules to one namespace at now (serving: this daemon may drop; an --ha standby may not). */
static void ns_sweep_one(struct server *srv, struct ns *ns, uint64_t now, int serving)
{
    const struct options *o = &srv->opt;
    struct ns_daemon *d = ns_daemon(ns);
    if (!ns_empty(ns)) {
        d->idle_ms = now; /* idle counts from when it was last seen in use */
    } else if (o->ns_idle_timeout && now - d->idle_ms >= o->ns_idle_timeout) {
        struct log_field f = {"namespace", ns->name, 0};
        log_fields(LOG_DEBUG, &f, 1, "namespace '%s' reclaimed", ns->name);
        ns_forget(srv, ns);
        srv->ns_swept_empty++;
        return;
    }
    if (!o->ns_reclaim_after)
        return;
    if (!serving || ns_in_use(ns)) { /* a standby's clock starts when it takes over */
        d->used_ms = now;
        return;
    }
    if (now - d->used_ms < o->ns_reclaim_after || ns_configured(srv, ns->name))
        return;
    char why[96];
    snprintf(why, sizeof why, "unused for %llu ms (--ns-reclaim-after)", (unsigned long long)(now - d->used_ms));
    if (ns_drop(srv, ns, why) == 0)
        srv->ns_swept_idle++;
}

/* The sweep: one slice of a pass over the namespaces, then the next slice at once or the next pass later. */
static void ns_sweep_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct server *srv = arg;
    uint64_t t0 = clock_now_us(), now = t0 / 1000;
    int serving = !srv->serving || srv->serving(srv);
    if (!srv->ns_sweep_mid) {
        srv->ns_sweep_next = srv->namespaces;
        srv->ns_sweep_mid = 1;
        srv->ns_swept_empty = srv->ns_swept_idle = 0;
    }
    for (size_t n = 0; n < NS_SWEEP_SLICE && srv->ns_sweep_next; n++) {
        struct ns *ns = srv->ns_sweep_next;
        srv->ns_sweep_next = ns->hh.next;
        ns_sweep_one(srv, ns, now, serving);
        if (n % NS_SWEEP_CHECK == NS_SWEEP_CHECK - 1 && clock_now_us() - t0 >= NS_SWEEP_SLICE_US)
            break;
    }
    uint64_t took = clock_now_us() - t0;
    if (took > srv->stats.c[STAT_NS_SWEEP_SLICE_US])
        srv->stats.c[STAT_NS_SWEEP_SLICE_US] = took;
    if (srv->ns_sweep_next) { /* the rest of the pass next turn, after what is ready now */
        clock_timer_at(srv->ns_sweep, now);
        return;
    }
    srv->ns_sweep_mid = 0;
    if (srv->ns_swept_empty)
        log_msg(LOG_INFO, "reclaimed %zu namespaces empty for %llu ms", srv->ns_swept_empty,
                (unsigned long long)srv->opt.ns_idle_timeout);
    if (srv->ns_swept_idle)
        log_msg(LOG_INFO, "dropped %zu namespaces unused for %llu ms (--ns-reclaim-after)", srv->ns_swept_idle,
                (unsigned long long)srv->opt.ns_reclaim_after);
    clock_timer_at(srv->ns_sweep, now + ns_sweep_ms(srv));
}

/* Start reclaiming idle namespaces (--ns-idle-timeout, --ns-reclaim-after); 0, or -1 when the timer cannot be
 * made. */
int ns_sweep_start(struct server *srv)
{
    if (!srv->opt.ns_idle_timeout && !srv->opt.ns_reclaim_after)
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
