/*
 * Log replication of an --ha set against a real 3-member etcd cluster.
 * Thousands of writes (set, add, append, delete mixed) are acknowledged by
 * the leader; it is SIGKILLed; the standby serves within --ha-ttl + 1 s and
 * every acknowledged write reads back there with its value, and rendezvous
 * generations keep rising across the failover, also when it comes while a
 * recovery round is open (that round hands out no number, and the next
 * one is newer than every number before).  A fresh daemon started
 * after the log was snapshotted in etcd catches up and, after a second
 * failover, serves the same data.  Finally etcd loses quorum and writes are
 * refused with NOT_LEADER rather than acknowledged.  Skipped without etcd.
 */
#include <muster/muster.h>
#include <muster/rdzv.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "hclient.h"
#include "hetcd.h"
#include "hha.h"

/* The lease every daemon of the set uses, ms. */
#define TTL_MS 2000
/* Keys set and deleted, counters added to, keys appended to. */
#define NK 400
#define NC 40
#define NA 20
/* Ops per pipelined round. */
#define ROUND 100

static struct hetcd cluster;
static char ha_url[256];

/* What the daemons must hold: every acknowledged write applied in order. */
static struct {
    char kval[NK][24];
    int kset[NK];
    long long cval[NC];
    char aval[NA][512];
    uint64_t writes;
} model;

/* Start a daemon of the set (snapshots small enough that the test's writes make some), advertising its
 * first listener, or advertise when not NULL. */
static int start(struct h_daemon *d, const char *advertise)
{
    const char *extra[] = {"--ha", ha_url, "--ha-ttl", "2000", "--ha-snapshot-bytes", "32K", NULL, NULL, NULL};
    if (advertise) {
        extra[6] = "--ha-advertise";
        extra[7] = advertise;
    }
    return h_start(d, extra);
}

/* One pipelined round of sets, adds and deletes, applied to the model once acknowledged. */
static void write_round(muster_t *m, int r)
{
    int err;
    muster_pipeline *p = muster_pipeline_create(m, &err);
    if (!p) {
        CHECK(!"pipeline created");
        return;
    }
    char key[16], val[24];
    int kind[ROUND], idx[ROUND];
    for (int i = 0; i < ROUND; i++) {
        int n = r * ROUND + i;
        kind[i] = n % 7 == 3 ? 2 : n % 3 == 1 ? 1 : 0; /* 2 delete, 1 add, 0 set */
        idx[i] = kind[i] == 1 ? n % NC : (n * 13) % NK;
        snprintf(key, sizeof key, kind[i] == 1 ? "c%02d" : "k%03d", idx[i]);
        snprintf(val, sizeof val, "v%d", n);
        if (kind[i] == 0)
            muster_pipeline_set(p, key, val, strlen(val));
        else if (kind[i] == 1)
            muster_pipeline_add(p, key, n);
        else
            muster_pipeline_delete(p, key);
    }
    CHECK_EQ(muster_pipeline_run(p, 10000), MUSTER_OK);
    for (int i = 0; i < ROUND; i++) {
        int n = r * ROUND + i;
        if (muster_pipeline_result(p, (size_t)i, NULL, NULL, NULL) != MUSTER_OK) {
            CHECK(!"every write of the round acknowledged");
            break;
        }
        model.writes++;
        if (kind[i] == 0) {
            snprintf(model.kval[idx[i]], sizeof model.kval[0], "v%d", n);
            model.kset[idx[i]] = 1;
        } else if (kind[i] == 1) {
            model.cval[idx[i]] += n;
        } else {
            model.kset[idx[i]] = 0;
        }
    }
    muster_pipeline_destroy(p);
}

/* A few appends, one call each. */
static void append_round(muster_t *m, int r)
{
    for (int i = 0; i < 4; i++) {
        int a = (r * 4 + i) % NA;
        char piece[16];
        snprintf(piece, sizeof piece, "x%d,", r * 4 + i);
        char key[16];
        snprintf(key, sizeof key, "a%02d", a);
        if (muster_append(m, key, piece, strlen(piece), NULL, 5000) != MUSTER_OK) {
            CHECK(!"append acknowledged");
            return;
        }
        model.writes++;
        strncat(model.aval[a], piece, sizeof model.aval[0] - strlen(model.aval[a]) - 1);
    }
}

/* Rounds from..to-1 of writes through m. */
static void write_rounds(muster_t *m, int from, int to)
{
    for (int r = from; r < to; r++) {
        write_round(m, r);
        append_round(m, r);
    }
}

/* Check one key's value on m against want (NULL: absent); whether it matched. */
static int expect(muster_t *m, const char *key, const char *want)
{
    void *v = NULL;
    size_t len = 0;
    int rc = muster_get(m, key, 0, 5000, &v, &len);
    int ok = want ? rc == MUSTER_OK && len == strlen(want) && memcmp(v, want, len) == 0 : rc == MUSTER_ENOTFOUND;
    if (!ok)
        printf("  %s: got rc %d '%.*s', want %s\n", key, rc, rc == MUSTER_OK ? (int)len : 0,
               rc == MUSTER_OK ? (const char *)v : "", want ? want : "(absent)");
    muster_free(v);
    return ok;
}

/* Every acknowledged write reads back on m. */
static void verify(muster_t *m)
{
    int bad = 0;
    char key[16], num[32];
    for (int i = 0; i < NK && bad < 5; i++) {
        snprintf(key, sizeof key, "k%03d", i);
        bad += !expect(m, key, model.kset[i] ? model.kval[i] : NULL);
    }
    for (int i = 0; i < NC && bad < 5; i++) {
        snprintf(key, sizeof key, "c%02d", i);
        snprintf(num, sizeof num, "%lld", model.cval[i]);
        bad += !expect(m, key, model.cval[i] ? num : NULL);
    }
    for (int i = 0; i < NA && bad < 5; i++) {
        snprintf(key, sizeof key, "a%02d", i);
        bad += !expect(m, key, model.aval[i][0] ? model.aval[i] : NULL);
    }
    CHECK_EQ(bad, 0);
}

/* A one-node rendezvous round on m; its generation (0 on failure). */
static uint64_t rendezvous(muster_t *m)
{
    muster_rdzv_opts o = {.node_id = "n1", .local_world_size = 1, .min_nodes = 1, .max_nodes = 1};
    muster_assignment *a = NULL;
    int rc = muster_rdzv_join(m, &o, &a, 10000);
    CHECK_EQ(rc, MUSTER_OK);
    uint64_t gen = rc == MUSTER_OK ? a->generation : 0;
    muster_assignment_free(a);
    if (rc == MUSTER_OK)
        CHECK_EQ(muster_rdzv_leave(m, 5000), MUSTER_OK);
    return gen;
}

/* A member's join or recovery, run on a thread of its own (both block until the round closes). */
struct member_call {
    muster_t *m;
    muster_rdzv_opts o;
    int recover;
    int rc;
    uint64_t gen;
    pthread_t th;
};

/* Thread body: the member's call; its status and generation. */
static void *member_call_run(void *arg)
{
    struct member_call *c = arg;
    muster_assignment *a = NULL;
    c->rc = c->recover ? muster_rdzv_recover(c->m, &c->o, &a, 20000) : muster_rdzv_join(c->m, &c->o, &a, 20000);
    c->gen = c->rc == MUSTER_OK ? a->generation : 0;
    muster_assignment_free(a);
    return NULL;
}

/* Start member c (handle on d, node id) joining a round of three, or recovering. */
static void member_call_start(struct member_call *c, const struct h_daemon *d, const char *id, int recover)
{
    if (!c->m)
        c->m = hc_connect(d, "ha", NULL);
    c->o = (muster_rdzv_opts){.node_id = id, .local_world_size = 1, .min_nodes = 1, .max_nodes = 3,
                              .last_call_ms = 10000};
    c->recover = recover;
    c->rc = -1;
    if (!c->m || pthread_create(&c->th, NULL, member_call_run, c) != 0)
        c->m = NULL;
}

/* Wait for member c's call; its status. */
static int member_call_end(struct member_call *c)
{
    if (c->m)
        pthread_join(c->th, NULL);
    return c->rc;
}

/* On the leader d: three members form a generation, one closes, one survivor opens a recovery round that
 * waits for the other (the round is left open); the generation formed, 0 on failure.  v keeps the
 * handles (the recovering one's call is still running). */
static uint64_t recovery_left_open(const struct h_daemon *d, struct member_call *v)
{
    const char *ids[] = {"r0", "r1", "r2"};
    for (int i = 0; i < 3; i++)
        member_call_start(&v[i], d, ids[i], 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(member_call_end(&v[i]), MUSTER_OK);
    uint64_t gen = v[0].gen;
    CHECK(gen > 0 && v[1].gen == gen && v[2].gen == gen);
    muster_close(v[2].m);
    v[2].m = NULL;
    usleep(300000); /* the daemon sees r2's connection close and breaks the generation */
    member_call_start(&v[0], d, "r0", 1); /* parks: r1 has not joined, so the round stays open */
    return gen;
}

/* Kill the leader old, and time until next serves through *m; checks it is within TTL + 1 s. */
static void fail_over(struct h_daemon *old, const struct h_daemon *next, muster_t **m)
{
    kill(old->pid, SIGKILL);
    int64_t t0 = h_now_ms();
    h_stop(old);
    CHECK_EQ(hha_set_until(next, m, "probe", MUSTER_OK, TTL_MS + 1000), MUSTER_OK);
    int64_t took = h_now_ms() - t0;
    printf("  failover took %lld ms\n", (long long)took);
    CHECK(took <= TTL_MS + 1000);
}

/* Wait (bounded) until d counts replayed records; its count. */
static long long await_replayed(struct h_daemon *d)
{
    long long n = 0;
    for (int64_t until = h_now_ms() + 10000; n <= 0 && h_now_ms() < until; hha_step())
        n = h_stat(d, "ha_log_replayed");
    return n;
}

/* The whole scenario, in order: each stage depends on the one before. */
static void t_replicate(void *unused)
{
    (void)unused;
    struct h_daemon a, b, c;
    CHECK_EQ(start(&a, "leader-a.invalid:29600"), 0);
    muster_t *ma = hc_connect(&a, "ha", NULL);
    CHECK_EQ(hha_set_until(&a, &ma, "probe", MUSTER_OK, 5000), MUSTER_OK); /* alone, a leads */
    CHECK_EQ(start(&b, NULL), 0);
    muster_t *mb = hc_connect(&b, "ha", NULL);
    CHECK_EQ(hha_set_until(&b, &mb, "probe", MUSTER_ENOTLEADER, 5000), MUSTER_ENOTLEADER);
    /* The standby names the leader by its --ha-advertise address once it has seen the leader key. */
    for (int64_t until = h_now_ms() + 5000; mb && strcmp(muster_last_error(mb), "leader-a.invalid:29600") != 0 &&
                                            h_now_ms() < until;
         hha_step())
        muster_set(mb, "probe", "p", 1, 1000);
    CHECK_STR(mb ? muster_last_error(mb) : "", "leader-a.invalid:29600");
    if (!ma || !mb)
        return;
    uint64_t g1 = rendezvous(ma), g2 = rendezvous(ma);
    CHECK(g2 > g1);
    write_rounds(ma, 0, 15);
    printf("  %llu writes acknowledged by the first leader\n", (unsigned long long)model.writes);
    CHECK(await_replayed(&b) > 0); /* the standby follows the log */
    CHECK(h_stat(&a, "ha_log_batches") > 0);

    struct member_call mid[3] = {{0}};
    uint64_t gr = recovery_left_open(&a, mid);
    CHECK(gr > g2);
    usleep(300000);
    fail_over(&a, &b, &mb);
    /* The open round died with the leader: the survivor's recovery fails (its connection is gone). */
    int rc = member_call_end(&mid[0]);
    CHECK(rc == MUSTER_ECONN || rc == MUSTER_EEXCLUDED || rc == MUSTER_ETIMEDOUT);
    printf("  recovery open at the failover: %s\n", muster_strerror(rc));
    muster_close(mid[0].m);
    muster_close(mid[1].m);
    muster_close(ma);
    verify(mb);
    uint64_t g3 = rendezvous(mb);
    CHECK(g3 > gr);
    printf("  generations %llu, %llu, %llu (left recovering) before the failover, %llu after\n",
           (unsigned long long)g1, (unsigned long long)g2, (unsigned long long)gr, (unsigned long long)g3);
    write_rounds(mb, 15, 30);
    CHECK(h_stat(&b, "ha_snapshots") > 0);

    /* A fresh daemon joins after the log was snapshotted: it loads the snapshot and the log after it. */
    CHECK_EQ(start(&c, NULL), 0);
    muster_t *mc = hc_connect(&c, "ha", NULL);
    CHECK_EQ(hha_set_until(&c, &mc, "probe", MUSTER_ENOTLEADER, 5000), MUSTER_ENOTLEADER);
    CHECK(await_replayed(&c) > 0);
    fail_over(&b, &c, &mc);
    muster_close(mb);
    verify(mc);
    CHECK(rendezvous(mc) > g3);

    /* etcd loses quorum: writes are refused with NOT_LEADER, never acknowledged. */
    hetcd_kill(&cluster, 0);
    hetcd_kill(&cluster, 1);
    CHECK_EQ(hha_set_until(&c, &mc, "probe", MUSTER_ENOTLEADER, TTL_MS + 3000), MUSTER_ENOTLEADER);
    const char *why = mc ? muster_last_error(mc) : "";
    CHECK(strstr(why, "no leader") != NULL);
    printf("  with etcd quorum lost: %s\n", why);
    muster_close(mc);
    CHECK_EQ(h_stop(&c), 0);
}

int main(void)
{
    h_init("replicate", 150);
    if (hha_cluster(&cluster, ha_url, sizeof ha_url) != 0)
        return h_finish();
    H_RUN(t_replicate, NULL);
    hetcd_stop(&cluster);
    return h_finish();
}
