/*
 * Namespaces that hold keys are not kept for ever, and one address cannot
 * create them without bound.  --ns-reclaim-after drops a namespace, keys
 * included, that no connection, parked request, watch or live rendezvous
 * generation has used for that long: an address whose namespaces each hold
 * one key gets its --max-namespaces-per-source back, while a namespace with
 * a connection or a formed generation stays.  With --data-dir the drop is
 * in the log, so a restart does not bring the namespace (nor its generation
 * counter) back.  --max-namespace-creates-per-source refuses creations
 * beyond its rate with LIMIT naming the flag, counted, while namespaces that
 * exist stay reachable.  The flooding client connects from 127.0.0.2 (and
 * 127.0.0.3), the jobs from 127.0.0.1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hclient.h"
#include "muster/rdzv.h"
#include "raw.h"

/* Open ns from src, store one key in it and close; 0, the hello's or the set's status, or -1. */
static int t_one_key(const struct h_daemon *d, const char *src, const char *ns)
{
    int fd = raw_connect_from(d->port, src);
    if (fd < 0)
        return -1;
    int rc = raw_hello(fd, ns, NULL);
    if (rc == 0)
        rc = raw_set(fd, 1, "k", "v", 1) < 0 ? -1 : raw_status(fd, 5000, NULL);
    close(fd);
    return rc;
}

/* Say hello to ns from src and close; 0 or the hello's status (-1: no answer). */
static int t_hello_from(const struct h_daemon *d, const char *src, const char *ns)
{
    int fd = raw_connect_from(d->port, src);
    if (fd < 0)
        return -1;
    int rc = raw_hello(fd, ns, NULL);
    close(fd);
    return rc;
}

/* Poll counter name until it is at least want (at most ms); the last value read. */
static long long t_await_stat(struct h_daemon *d, const char *name, long long want, int ms)
{
    long long v = -1;
    for (int64_t end = h_now_ms() + ms; h_now_ms() < end; usleep(50000))
        if ((v = h_stat(d, name)) >= want)
            break;
    return v;
}

/* Form a one-node generation in ns on m (no heartbeats are due: --heartbeat-timeout 0); its number, or 0. */
static uint64_t t_form(muster_t *m)
{
    muster_rdzv_opts o = {.node_id = "solo", .local_world_size = 1, .min_nodes = 1, .max_nodes = 1};
    muster_assignment *a = NULL;
    if (!m || muster_rdzv_join(m, &o, &a, 5000) != MUSTER_OK || !a)
        return 0;
    uint64_t gen = a->generation;
    muster_assignment_free(a);
    return gen;
}

/* Namespaces holding one key, idle past --ns-reclaim-after, are dropped and their address creates again; one
 * with a live connection, and one whose generation is formed, stay. */
static void t_reclaim_keys(void *arg)
{
    (void)arg;
    static const char *const args[] = {"--max-namespaces-per-source", "5", "--ns-reclaim-after", "400",
                                       "--heartbeat-timeout", "0", NULL};
    struct h_daemon d;
    char ns[32];
    if (h_start(&d, args) < 0)
        return;
    muster_t *live = hc_connect(&d, "live", NULL), *gen = hc_connect(&d, "gen", NULL);
    if (live)
        CHECK_EQ(hc_set_str(live, "k", "v"), MUSTER_OK);
    CHECK_EQ(t_form(gen), 1);
    for (int i = 0; i < 5; i++) {
        snprintf(ns, sizeof ns, "one-key/%d", i);
        CHECK_EQ(t_one_key(&d, "127.0.0.2", ns), 0);
    }
    /* Each holds a key, so the empty-namespace rule never frees them: the address is at its cap. */
    CHECK_EQ(t_hello_from(&d, "127.0.0.2", "sixth"), MUSTER_ELIMIT);
    long long n = t_await_stat(&d, "namespaces_reclaimed_idle", 5, 5000);
    printf("  namespaces dropped after --ns-reclaim-after: %lld\n", n);
    CHECK_EQ(n, 5);
    CHECK_EQ(h_stat(&d, "namespaces"), 2);
    CHECK_EQ(t_hello_from(&d, "127.0.0.2", "sixth"), 0);
    /* The dropped namespace is new again: its key is gone. */
    int fd = raw_connect_from(d.port, "127.0.0.2");
    CHECK_EQ(raw_hello(fd, "one-key/0", NULL), 0);
    CHECK(raw_get(fd, 2, "k", 0, 0) == 0);
    CHECK_EQ(raw_status(fd, 5000, NULL), MUSTER__STATUS__NOT_FOUND);
    close(fd);
    /* Still in use after several times --ns-reclaim-after: the connection, and the formed generation (its
     * member's connection is open); "sixth" and "one-key/0", unused, go again. */
    CHECK(t_await_stat(&d, "namespaces_reclaimed_idle", 7, 5000) >= 7);
    usleep(600000);
    CHECK_EQ(h_stat(&d, "namespaces"), 2);
    if (live)
        HC_EXPECT(live, "k", "v");
    void *v = NULL;
    size_t len = 0;
    CHECK_EQ(gen ? muster_get(gen, "muster/rdzv/1/answer", 0, 0, &v, &len) : -1, MUSTER_OK);
    free(v);
    muster_close(live);
    muster_close(gen);
    /* Its member gone, the generation is broken: nothing uses "gen" or "live" any more. */
    CHECK_EQ(t_await_stat(&d, "namespaces_reclaimed_idle", 9, 5000), 9);
    CHECK_EQ(h_stat(&d, "namespaces"), 0);
    CHECK_EQ(h_stop(&d), 0);
}

/* With --data-dir, a dropped namespace (keys and generation counter) stays gone after a restart; one kept in
 * use through the sweep comes back with its key. */
static void t_reclaim_durable(void *arg)
{
    (void)arg;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/reclaim-data", h_tmpdir());
    const char *args[] = {"--data-dir", dir, "--ns-reclaim-after", "400", "--heartbeat-timeout", "0", NULL};
    const char *again[] = {"--data-dir", dir, "--ns-reclaim-after", "0", NULL};
    struct h_daemon d;
    if (h_start(&d, args) < 0)
        return;
    muster_t *kept = hc_connect(&d, "kept", NULL), *old = hc_connect(&d, "old", NULL);
    if (kept)
        CHECK_EQ(hc_set_str(kept, "k", "kept"), MUSTER_OK);
    if (old)
        CHECK_EQ(hc_set_str(old, "k", "old"), MUSTER_OK);
    CHECK_EQ(t_form(old), 1);
    muster_close(old);
    CHECK_EQ(t_await_stat(&d, "namespaces_reclaimed_idle", 1, 5000), 1);
    CHECK_EQ(h_stat(&d, "namespaces"), 1);
    muster_close(kept);
    CHECK_EQ(h_stop(&d), 0);
    if (h_start(&d, again) < 0)
        return;
    CHECK_EQ(h_stat(&d, "namespaces"), 1); /* "kept" only: "old" and its generation stayed dropped */
    muster_t *m = hc_connect(&d, "kept", NULL);
    if (m)
        HC_EXPECT(m, "k", "kept");
    muster_close(m);
    m = hc_connect(&d, "old", NULL);
    if (m) {
        void *v = NULL;
        size_t len = 0;
        CHECK_EQ(muster_get(m, "k", 0, 0, &v, &len), MUSTER_ENOTFOUND);
        free(v);
        /* The generation counter went with it: a round here forms generation 1 again. */
        CHECK_EQ(t_form(m), 1);
    }
    muster_close(m);
    CHECK_EQ(h_stop(&d), 0);
}

/* Creations beyond --max-namespace-creates-per-source are LIMIT, counted and named; namespaces that exist stay
 * reachable, and another address is not affected. */
static void t_create_rate(void *arg)
{
    (void)arg;
    static const char *const args[] = {"--max-namespace-creates-per-source", "5", NULL};
    struct h_daemon d;
    char ns[32];
    if (h_start(&d, args) < 0)
        return;
    for (int i = 0; i < 5; i++) {
        snprintf(ns, sizeof ns, "burst/%d", i);
        CHECK_EQ(t_one_key(&d, "127.0.0.2", ns), 0);
    }
    int fd = raw_connect_from(d.port, "127.0.0.2");
    CHECK(raw_send_hello(fd, "burst/5", NULL) == 0);
    Muster__ServerFrame *f = raw_recv(fd, 5000, NULL);
    CHECK(f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR);
    if (f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR) {
        printf("  refused: %s\n", f->error->message);
        CHECK_EQ(f->error->status, MUSTER__STATUS__LIMIT);
        CHECK(strstr(f->error->message, "--max-namespace-creates-per-source") != NULL);
    }
    raw_free(f);
    close(fd);
    CHECK_EQ(h_stat(&d, "limit_namespace_creates_per_source"), 1);
    CHECK_EQ(h_stat(&d, "namespaces"), 5);
    /* Existing namespaces cost nothing to join, from the same address too. */
    fd = raw_connect_from(d.port, "127.0.0.2");
    CHECK_EQ(raw_hello(fd, "burst/0", NULL), 0);
    CHECK(raw_get(fd, 2, "k", 0, 0) == 0);
    CHECK_EQ(raw_status(fd, 5000, NULL), MUSTER__STATUS__OK);
    close(fd);
    CHECK_EQ(t_hello_from(&d, "127.0.0.3", "elsewhere"), 0);
    CHECK_EQ(h_stop(&d), 0);
}

/* Run the reclamation and creation-rate tests, each against its own daemon. */
int main(void)
{
    h_init("ns_reclaim", 60);
    H_RUN(t_reclaim_keys, NULL);
    H_RUN(t_reclaim_durable, NULL);
    H_RUN(t_create_rate, NULL);
    return h_finish();
}
