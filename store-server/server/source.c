/*
 * Source addresses.  A client can open as many connections as it likes, so
 * bounds meant for "one client" are kept per source address: the backoff
 * after failed hellos (--auth-backoff) and the count of namespaces the
 * address created that still exist (--max-namespaces-per-source), and how
 * fast it may create more (--max-namespace-creates-per-source).  An IPv6
 * address counts by its /64, since one host is commonly given a whole /64;
 * an IPv4-mapped IPv6 address counts as the IPv4 address.
 *
 * The table is bounded: entries that only remember failures are kept in
 * least-recently-failed order and the oldest is forgotten beyond
 * --max-sources (counted as sources_evicted).  An entry that owns live
 * namespaces or open connections is pinned: never forgotten (their number
 * is bounded by --max-namespaces and --max-connections), else forgetting
 * it would reset its counts.  Its connections' parked requests are counted
 * here too (--max-waiters-per-source), whatever namespaces they are in.
 */
#include "source.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <utlist.h>
#include <uthash.h>

#include "clock.h"
#include "muster.pb-c.h"
#include "server.h"

struct source {
    UT_hash_handle hh;
    uint8_t addr[16];  /* IPv4 as ::ffff:a.b.c.d, IPv6 with the low 64 bits cleared */
    size_t nns;        /* live namespaces this address created */
    size_t nconns;     /* open connections from this address (native and TCPStore) */
    size_t nwaiters;   /* their parked requests (--max-waiters-per-source) */
    uint32_t fails;    /* failed hellos in the current run of failures */
    uint64_t until_ms; /* token checks refused until this monotonic time */
    uint64_t create_us; /* --max-namespace-creates-per-source: when its bucket is full again (monotonic us) */
    struct source *prev, *next; /* the failure-only list, oldest first (while nns == 0) */
};

/* The 16-byte table key of sa. */
static void source_key(const struct sockaddr *sa, uint8_t key[16])
{
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return;
    }
    if (sa->sa_family != AF_INET6)
        return;
    const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    memcpy(key, a, memcmp(a, mapped, 12) == 0 ? 16 : 8);
}

/* Forget the oldest failure-only entry. */
static void source_evict(struct server *srv)
{
    struct source *s = srv->source_lru;
    DL_DELETE(srv->source_lru, s);
    HASH_DEL(srv->sources, s);
    srv->nsources_lru--;
    stats_inc(&srv->stats, STAT_SOURCES_EVICTED);
    free(s);
}

/* The entry of sa, or (create) a new one; NULL when absent or out of memory. */
static struct source *source_find(struct server *srv, const struct sockaddr *sa, int create)
{
    uint8_t key[16];
    struct source *s = NULL;
    source_key(sa, key);
    HASH_FIND(hh, srv->sources, key, sizeof key, s);
    if (s || !create)
        return s;
    if (srv->opt.max_sources && srv->nsources_lru >= srv->opt.max_sources && srv->source_lru)
        source_evict(srv);
    if (!(s = calloc(1, sizeof *s)))
        return NULL;
    memcpy(s->addr, key, sizeof key);
    HASH_ADD(hh, srv->sources, addr, sizeof s->addr, s);
    DL_APPEND(srv->source_lru, s);
    srv->nsources_lru++;
    return s;
}

/* Whether s owns namespaces or connections (then it is off the failure-only list). */
static int source_pinned(const struct source *s)
{
    return s->nns || s->nconns;
}

/* Drop s when it remembers nothing any more (no backoff, and a full creation bucket). */
static void source_maybe_free(struct server *srv, struct source *s)
{
    if (source_pinned(s) || s->until_ms + srv->opt.auth_backoff_max > clock_now_ms() ||
        s->create_us > clock_now_us())
        return;
    DL_DELETE(srv->source_lru, s);
    srv->nsources_lru--;
    HASH_DEL(srv->sources, s);
    free(s);
}

/* Milliseconds before a hello from sa may be checked against a token again (0: now). */
uint64_t source_hello_wait(struct server *srv, const struct sockaddr *sa)
{
    struct source *s = srv->opt.auth_backoff ? source_find(srv, sa, 0) : NULL;
    uint64_t now = clock_now_ms();
    return s && s->until_ms > now ? s->until_ms - now : 0;
}

/* The wait after the fails-th failure in a row: --auth-backoff doubled per failure before it, at most
 * --auth-backoff-max. */
static uint64_t source_delay(const struct options *o, uint32_t fails)
{
    uint64_t delay = o->auth_backoff << (fails < 32 ? fails : 32);
    return delay > o->auth_backoff_max || fails >= 32 ? o->auth_backoff_max : delay;
}

/* A hello from sa named a wrong token: start or lengthen its backoff. */
static void source_hello_failed(struct server *srv, const struct sockaddr *sa)
{
    const struct options *o = &srv->opt;
    struct source *s = o->auth_backoff ? source_find(srv, sa, 1) : NULL;
    if (!s)
        return;
    uint64_t now = clock_now_ms();
    /* An address quiet for the longest delay after its last window starts over. */
    if (now >= s->until_ms + o->auth_backoff_max)
        s->fails = 0;
    s->until_ms = now + source_delay(o, s->fails);
    s->fails++;
    if (!source_pinned(s)) { /* most recently failed goes last */
        DL_DELETE(srv->source_lru, s);
        DL_APPEND(srv->source_lru, s);
    }
}

/* A token from sa was compared (ok: it was right).  A wrong one starts or lengthens the backoff.  A
 * right one while failures are fresh spaces the next comparison by --auth-backoff: without it, the
 * hellos held for the same moment would all be compared at once, one right token letting any number
 * of guesses through behind it. */
void source_hello_checked(struct server *srv, const struct sockaddr *sa, int ok)
{
    if (!ok) {
        source_hello_failed(srv, sa);
        return;
    }
    struct source *s = srv->opt.auth_backoff ? source_find(srv, sa, 0) : NULL;
    uint64_t now = clock_now_ms();
    if (s && s->fails && now < s->until_ms + srv->opt.auth_backoff_max && s->until_ms < now + srv->opt.auth_backoff)
        s->until_ms = now + srv->opt.auth_backoff;
}

/* Count one more of what *count counts (namespaces or connections) for s, pinning it on the first. */
static void source_pin(struct server *srv, struct source *s, size_t *count)
{
    if (!source_pinned(s)) { /* off the failure-only list */
        DL_DELETE(srv->source_lru, s);
        srv->nsources_lru--;
    }
    (*count)++;
}

/* Count one less of what *count counts for s; back on the failure-only list (or freed) once unpinned. */
static void source_unpin(struct server *srv, struct source *s, size_t *count)
{
    if (--*count || source_pinned(s))
        return;
    DL_APPEND(srv->source_lru, s);
    srv->nsources_lru++;
    source_maybe_free(srv, s);
}

/* Microseconds one namespace creation costs under --max-namespace-creates-per-source (a minute's worth is
 * the burst). */
static uint64_t source_create_cost_us(const struct options *o)
{
    return 60000000 / o->max_ns_creates_per_source;
}

/* Milliseconds before sa may create one more namespace under --max-namespace-creates-per-source (0: now).
 * The bucket is a virtual time: each creation moves s->create_us (from now, when it is behind) on by one
 * cost, and a creation is allowed while that stays within a minute of now. */
uint64_t source_ns_create_wait(struct server *srv, const struct sockaddr *sa)
{
    const struct options *o = &srv->opt;
    const struct source *s = o->max_ns_creates_per_source ? source_find(srv, sa, 0) : NULL;
    if (!s)
        return 0;
    uint64_t now = clock_now_us(), from = s->create_us > now ? s->create_us : now;
    uint64_t after = from + source_create_cost_us(o);
    return after - now <= 60000000 ? 0 : (after - now - 60000000 + 999) / 1000;
}

/* Count one more namespace created by sa; the source to give back later, or NULL with *status set. */
struct source *source_ns_take(struct server *srv, const struct sockaddr *sa, int *status)
{
    struct source *s = source_find(srv, sa, 1);
    if (!s) {
        *status = MUSTER__STATUS__INTERNAL;
        return NULL;
    }
    if (s->nns >= srv->opt.max_namespaces_per_source) {
        stats_inc(&srv->stats, STAT_LIMIT_NAMESPACES_PER_SOURCE);
        *status = MUSTER__STATUS__LIMIT;
        source_maybe_free(srv, s);
        return NULL;
    }
    source_pin(srv, s, &s->nns);
    if (srv->opt.max_ns_creates_per_source) {
        uint64_t now = clock_now_us();
        s->create_us = (s->create_us > now ? s->create_us : now) + source_create_cost_us(&srv->opt);
    }
    return s;
}

/* sa's entry when it is at --max-namespaces-per-source (one more would be refused), else NULL. */
const struct source *source_ns_full(struct server *srv, const struct sockaddr *sa)
{
    const struct source *s = source_find(srv, sa, 0);
    return s && s->nns >= srv->opt.max_namespaces_per_source ? s : NULL;
}

/* A namespace that src created is gone. */
void source_ns_put(struct server *srv, struct source *src)
{
    if (src)
        source_unpin(srv, src, &src->nns);
}

/* A connection from sa opened: its address's entry, pinned until source_conn_put, or NULL when out of
 * memory (the connection then goes uncounted). */
struct source *source_conn_take(struct server *srv, const struct sockaddr *sa)
{
    struct source *s = source_find(srv, sa, 1);
    if (s)
        source_pin(srv, s, &s->nconns);
    return s;
}

/* A connection of src closed. */
void source_conn_put(struct server *srv, struct source *src)
{
    if (src)
        source_unpin(srv, src, &src->nconns);
}

/* The count of src's parked requests, for a connection's share (NULL when src is). */
size_t *source_waiters(struct source *src)
{
    return src ? &src->nwaiters : NULL;
}

/* Free the table (at exit). */
void source_destroy_all(struct server *srv)
{
    struct source *s, *tmp;
    HASH_ITER(hh, srv->sources, s, tmp) {
        HASH_DEL(srv->sources, s);
        free(s);
    }
    srv->source_lru = NULL;
    srv->nsources_lru = 0;
}
