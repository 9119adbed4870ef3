/*
 * Leader election of an --ha set against a real 3-member etcd cluster:
 * one daemon leads and serves, the other answers NOT_LEADER naming it; the
 * loss of one etcd member does not interrupt the leader; when the leader is
 * SIGKILLed the standby serves within --ha-ttl + 1 s; when etcd loses
 * quorum the leader stops serving and says why.  Writes are replicated
 * through etcd, so a write may wait while etcd elects a new leader of its
 * own, and one caught by the quorum loss is never acknowledged: the client
 * gives up on it and reconnects.  Skipped without etcd.
 */
#include <muster/muster.h>
#include <muster/rdzv.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "hclient.h"
#include "hetcd.h"
#include "hha.h"

/* The lease every daemon of the set uses, ms. */
/* 4 s rather than the 2 s default: the member-loss phase kills the etcd member both daemons talk to
 * first, which may be etcd's own leader; under a sanitizer build and a loaded CI machine etcd's
 * re-election can outlast the 1.5 s a 2 s lease leaves the leader. */
#define TTL_MS 4000

static struct hetcd cluster;
static char ha_url[256];

/* Start a daemon of the set. */
static int start(struct h_daemon *d)
{
    const char *extra[] = {"--ha", ha_url, "--ha-ttl", "4000", NULL};
    return h_start(d, extra);
}

/* Every op after hello is refused by the standby m with NOT_LEADER: key-value, watch, barrier, rendezvous. */
static void standby_refuses_all(muster_t *m)
{
    const char *keys[] = {"k"};
    const void *vals[] = {"v"};
    size_t lens[] = {1};
    void *v = NULL, *vs[1] = {NULL};
    size_t len = 0, vlens[1];
    int present, swapped;
    uint64_t n, id, round;
    size_t nl;
    char **list = NULL;
    int more;
    muster_assignment *as = NULL;
    muster_rdzv_opts ro = {.node_id = "n", .local_world_size = 1, .min_nodes = 1, .max_nodes = 1};
    CHECK_EQ(muster_get(m, "k", 0, 1000, &v, &len), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_set(m, "k", "v", 1, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_add(m, "c", 1, NULL, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_delete(m, "k", NULL, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_append(m, "a", "x", 1, NULL, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_compare_set(m, "k", "", 0, "v", 1, &swapped, NULL, NULL, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_check(m, keys, 1, &present, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_wait(m, keys, 1, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_num_keys(m, &n, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_multi_get(m, keys, 1, 0, vs, vlens, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_multi_set(m, keys, vals, lens, 1, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_list(m, "", NULL, 0, &list, &nl, &more, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_watch(m, "", &id, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_barrier(m, "b", 1, &round, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_rdzv_join(m, &ro, &as, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_rdzv_heartbeat(m, 1, 1000), MUSTER_ENOTLEADER);
    CHECK_EQ(muster_rdzv_leave(m, 1000), MUSTER_ENOTLEADER);
    muster_free(v);
}

/* The whole scenario, in order: each stage depends on the one before. */
static void t_failover(void *unused)
{
    (void)unused;
    struct h_daemon a, b;
    CHECK_EQ(start(&a), 0);
    muster_t *ma = hc_connect(&a, "ha", NULL);
    if (!ma)
        return;
    CHECK_EQ(hha_set_until(&a, &ma, "k", MUSTER_OK, 5000), MUSTER_OK); /* alone, a wins */
    CHECK_EQ(start(&b), 0);
    muster_t *mb = hc_connect(&b, "ha", NULL);
    if (!mb)
        return;
    char leader_a[64];
    snprintf(leader_a, sizeof leader_a, "127.0.0.1:%u", (unsigned)a.port);
    CHECK_EQ(hha_set_until(&b, &mb, "k", MUSTER_ENOTLEADER, 5000), MUSTER_ENOTLEADER);
    int64_t until = h_now_ms() + 5000;
    while (strcmp(muster_last_error(mb), leader_a) != 0 && h_now_ms() < until) {
        hha_step();
        muster_set(mb, "k", "v", 1, 1000);
    }
    CHECK_STR(muster_last_error(mb), leader_a);
    standby_refuses_all(mb);

    /* One etcd member of three lost (the one both daemons talk to first): the leader keeps serving; a
     * write may wait for etcd's own re-election (--election-timeout 500 ms in the test cluster). */
    hetcd_kill(&cluster, 0);
    int failures = 0;
    for (int64_t end = h_now_ms() + 2 * TTL_MS; h_now_ms() < end; hha_step())
        failures += muster_set(ma, "k", "v", 1, 3000) != MUSTER_OK;
    CHECK_EQ(failures, 0);

    /* The leader is killed: the standby serves within the TTL plus one second. */
    kill(a.pid, SIGKILL);
    int64_t t0 = h_now_ms();
    h_stop(&a);
    CHECK_EQ(hha_set_until(&b, &mb, "k", MUSTER_OK, TTL_MS + 1000), MUSTER_OK);
    int64_t took = h_now_ms() - t0;
    printf("  failover took %lld ms\n", (long long)took);
    CHECK(took <= TTL_MS + 1000);

    /* etcd loses quorum: the new leader stops serving and says so. */
    hetcd_kill(&cluster, 1);
    CHECK_EQ(hha_set_until(&b, &mb, "k", MUSTER_ENOTLEADER, TTL_MS + 2000), MUSTER_ENOTLEADER);
    const char *why = mb ? muster_last_error(mb) : "";
    CHECK(strstr(why, "no leader") != NULL);
    printf("  with etcd quorum lost: %s\n", why);
    muster_close(ma);
    muster_close(mb);
    CHECK_EQ(h_stop(&b), 0); /* a clean exit: under ASan, no leak report */
}

int main(void)
{
    h_init("election", 80);
    if (hha_cluster(&cluster, ha_url, sizeof ha_url) != 0)
        return h_finish();
    H_RUN(t_failover, NULL);
    hetcd_stop(&cluster);
    return h_finish();
}
