/*
 * Namespaces are not a resource one client can use up: an address that
 * names new namespaces without end holds --max-namespaces-per-source of them
 * at once, so a job from another address still gets its own; at either cap
 * the oldest empty namespace is forgotten before a creation is refused, so
 * empty ones never lock out a real job, not even one from the flooding
 * address, and a namespace with a token never counts against that address;
 * empty namespaces are forgotten after --ns-idle-timeout while those
 * holding keys or connections stay; and --closed-namespaces accepts only
 * the namespaces given tokens.  The flooding client connects from
 * 127.0.0.2, the job from 127.0.0.1.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hclient.h"
#include "raw.h"

#define T_MAX_NS 50
#define T_PER_SOURCE 20

/* Say hello to ns from src and close; the hello's answer (0 or a muster_err), -1 when none came. */
static int t_hello_from(const struct h_daemon *d, const char *src, const char *ns, const char *token)
{
    int fd = raw_connect_from(d->port, src);
    if (fd < 0)
        return -1;
    int rc = raw_hello(fd, ns, token);
    close(fd);
    return rc;
}

/* Name n new namespaces prefix/0.. from src, each kept in use by its connection until all are named
 * (fds, n of them, gets them; -1 where refused); how many hellos were accepted (the rest must be LIMIT). */
static int t_flood_held(const struct h_daemon *d, const char *src, const char *prefix, int n, int *fds)
{
    char ns[64];
    int ok = 0;
    for (int i = 0; i < n; i++) {
        snprintf(ns, sizeof ns, "%s/%d", prefix, i);
        fds[i] = raw_connect_from(d->port, src);
        int rc = fds[i] < 0 ? -1 : raw_hello(fds[i], ns, NULL);
        if (rc == 0) {
            ok++;
            continue;
        }
        if (rc != MUSTER_ELIMIT)
            CHECK_EQ(rc, MUSTER_ELIMIT);
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
    return ok;
}

/* Close the n connections of a held flood. */
static void t_release(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Name n new namespaces prefix/0.. from src, each left empty (its connection closed and gone, polling
 * connections_current back to conns) before the next; how many hellos were accepted. */
static int t_flood(struct h_daemon *d, const char *src, const char *prefix, int n, long long conns)
{
    char ns[64];
    int ok = 0;
    for (int i = 0; i < n; i++) {
        snprintf(ns, sizeof ns, "%s/%d", prefix, i);
        int rc = t_hello_from(d, src, ns, NULL);
        ok += rc == 0;
        if (rc != 0)
            CHECK_EQ(rc, MUSTER_ELIMIT);
        for (int64_t end = h_now_ms() + 3000; h_now_ms() < end && h_stat(d, "connections_current") != conns;)
            usleep(2000);
    }
    return ok;
}

/* Poll the namespaces gauge until it is want (at most 5 s); the last value read. */
static long long t_await_namespaces(struct h_daemon *d, long long want)
{
    long long n = -1;
    for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; usleep(100000))
        if ((n = h_stat(d, "namespaces")) == want)
            break;
    return n;
}

/* One address naming 200 namespaces it keeps in use gets its share; a job from another address still
 * starts. */
static void t_per_source(struct h_daemon *d)
{
    muster_t *job = NULL;
    int fds[200];
    int ok = t_flood_held(d, "127.0.0.2", "junk", 200, fds);
    printf("  127.0.0.2 named 200 new namespaces: %d accepted (max-namespaces %d)\n", ok, T_MAX_NS);
    CHECK_EQ(ok, T_PER_SOURCE);
    /* Joining a namespace that exists costs nothing. */
    CHECK_EQ(t_hello_from(d, "127.0.0.2", "junk/0", NULL), 0);
    job = hc_connect(d, "job", NULL);
    if (job) {
        CHECK_EQ(hc_set_str(job, "k", "v"), MUSTER_OK);
        HC_EXPECT(job, "k", "v");
    }
    muster_close(job);
    t_release(fds, 200);
}

/* Whether connections_current falls to 0 within 5 s. */
static int t_conns_gone(struct h_daemon *d)
{
    for (int64_t end = h_now_ms() + 5000; h_now_ms() < end; usleep(20000))
        if (h_stat(d, "connections_current") == 0)
            return 1;
    return 0;
}

/* At a cap, empty namespaces make room (oldest first) instead of refusing; a token's namespace does not
 * count against its address; namespaces in use are never taken. */
static void t_reclaim_at_cap(void *arg)
{
    (void)arg;
    static const char *const args[] = {"--max-namespaces", "25", "--max-namespaces-per-source", "10",
                                       "--ns-idle-timeout", "0", "--token", "locked=s3cret", NULL};
    struct h_daemon d;
    int fds[10];
    if (h_start(&d, args) < 0)
        return;
    /* Ten empty namespaces from .2, then its real job: the oldest empty one goes. */
    CHECK_EQ(t_flood(&d, "127.0.0.2", "empty", 10, 0), 10);
    CHECK(t_conns_gone(&d));
    CHECK_EQ(t_hello_from(&d, "127.0.0.2", "real", NULL), 0);
    CHECK_EQ(h_stat(&d, "namespaces_reclaimed"), 1);
    CHECK_EQ(h_stat(&d, "namespaces"), 10);
    CHECK_EQ(h_stat(&d, "limit_namespaces_per_source"), 0);
    /* Ten in use from .2: nothing to reclaim, so a new one is refused, but the token's namespace opens. */
    CHECK_EQ(t_flood_held(&d, "127.0.0.2", "busy", 10, fds), 10);
    CHECK_EQ(h_stat(&d, "namespaces"), 10);
    CHECK_EQ(t_hello_from(&d, "127.0.0.2", "another", NULL), MUSTER_ELIMIT);
    CHECK_EQ(h_stat(&d, "limit_namespaces_per_source"), 1);
    CHECK_EQ(t_hello_from(&d, "127.0.0.2", "locked", "s3cret"), 0);
    /* The server's cap: .3's empty namespaces take the free slots, then make room for each other. */
    CHECK_EQ(t_flood(&d, "127.0.0.3", "other", 30, 10), 30);
    CHECK_EQ(h_stat(&d, "limit_namespaces"), 0);
    CHECK(h_stat(&d, "namespaces") <= 25);
    CHECK_EQ(t_hello_from(&d, "127.0.0.1", "job", NULL), 0);
    t_release(fds, 10);
    CHECK_EQ(h_stop(&d), 0);
}

/* Empty namespaces are forgotten after the idle timeout; ones with keys or a connection are kept. */
static void t_reclaim(struct h_daemon *d)
{
    muster_t *held = hc_connect(d, "held", NULL);
    /* "job" holds a key from t_per_source; "held" has a connection and nothing else. */
    long long n = t_await_namespaces(d, 2);
    printf("  namespaces after the idle timeout: %lld\n", n);
    CHECK_EQ(n, 2);
    CHECK(h_stat(d, "namespaces_reclaimed") >= T_PER_SOURCE);
    muster_t *job = hc_connect(d, "job", NULL);
    if (job)
        HC_EXPECT(job, "k", "v");
    muster_close(job);
    if (held)
        CHECK_EQ(hc_set_str(held, "still", "here"), MUSTER_OK);
    muster_close(held);
    /* The flooding address's share came back with its namespaces. */
    CHECK_EQ(t_flood(d, "127.0.0.2", "again", T_PER_SOURCE, 0), T_PER_SOURCE);
}

/* With --closed-namespaces only the namespaces given tokens open. */
static void t_closed(void)
{
    static const char *const args[] = {"--closed-namespaces=true", "--token", "locked=s3cret", NULL};
    struct h_daemon d;
    if (h_start(&d, args) < 0)
        return;
    CHECK_EQ(t_hello_from(&d, "127.0.0.1", "locked", "s3cret"), 0);
    CHECK_EQ(t_hello_from(&d, "127.0.0.1", "anything", NULL), MUSTER_EAUTH);
    CHECK_EQ(t_hello_from(&d, "127.0.0.1", "", NULL), MUSTER_EAUTH);
    CHECK_EQ(h_stat(&d, "namespaces"), 1);
    CHECK(h_stat(&d, "namespace_refused") >= 2);
    CHECK_EQ(h_stop(&d), 0);
}

/* Run the namespace tests against a daemon with small namespace bounds. */
int main(void)
{
    static const char *const args[] = {"--max-namespaces", "50", "--max-namespaces-per-source", "20",
                                       "--ns-idle-timeout", "300", NULL};
    struct h_daemon d;
    h_init("namespaces", 60);
    if (h_start(&d, args) < 0)
        return h_finish();
    H_RUN(t_per_source, &d);
    H_RUN(t_reclaim, &d);
    CHECK(h_stat(&d, "limit_namespaces_per_source") >= 1);
    CHECK_EQ(h_stop(&d), 0);
    H_RUN(t_closed, );
    H_RUN(t_reclaim_at_cap, NULL);
    return h_finish();
}
