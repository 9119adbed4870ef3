/*
 * Leader election of an --ha set against a real 3-member etcd cluster:
 * one daemon leads and serves, the other answers NOT_LEADER naming it; the
 * loss of one etcd member does not interrupt the leader; when the leader is
 * SIGKILLed the standby serves within --ha-ttl + 1 s; when etcd loses
 * quorum the leader stops serving and says why.  Skipped without etcd.
 */
#include <muster/muster.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "hclient.h"
#include "hetcd.h"

/* The lease every daemon of the set uses, ms. */
#define TTL_MS 2000

static struct hetcd cluster;
static char ha_url[256];

/* Sleep one polling step (awaiting a condition checked by the caller, always bounded). */
static void step(void)
{
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Set a key on m until the status is want or ms pass; the last status. */
static int set_until(muster_t *m, int want, int64_t ms)
{
    int64_t until = h_now_ms() + ms;
    int rc;
    while ((rc = muster_set(m, "k", "v", 1, 1000)) != want && h_now_ms() < until)
        step();
    return rc;
}

/* Start a daemon of the set. */
static int start(struct h_daemon *d)
{
    const char *extra[] = {"--ha", ha_url, "--ha-ttl", "2000", NULL};
    return h_start(d, extra);
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
    CHECK_EQ(set_until(ma, MUSTER_OK, 5000), MUSTER_OK); /* alone, a wins */
    CHECK_EQ(start(&b), 0);
    muster_t *mb = hc_connect(&b, "ha", NULL);
    if (!mb)
        return;
    char leader_a[64];
    snprintf(leader_a, sizeof leader_a, "127.0.0.1:%u", (unsigned)a.port);
    CHECK_EQ(set_until(mb, MUSTER_ENOTLEADER, 5000), MUSTER_ENOTLEADER);
    int64_t until = h_now_ms() + 5000;
    while (strcmp(muster_last_error(mb), leader_a) != 0 && h_now_ms() < until) {
        step();
        muster_set(mb, "k", "v", 1, 1000);
    }
    CHECK_STR(muster_last_error(mb), leader_a);

    /* One etcd member of three lost (the one both daemons talk to first): the leader keeps serving. */
    hetcd_kill(&cluster, 0);
    int failures = 0;
    for (int64_t end = h_now_ms() + 2 * TTL_MS; h_now_ms() < end; step())
        failures += muster_set(ma, "k", "v", 1, 1000) != MUSTER_OK;
    CHECK_EQ(failures, 0);

    /* The leader is killed: the standby serves within the TTL plus one second. */
    kill(a.pid, SIGKILL);
    int64_t t0 = h_now_ms();
    h_stop(&a);
    CHECK_EQ(set_until(mb, MUSTER_OK, TTL_MS + 1000), MUSTER_OK);
    int64_t took = h_now_ms() - t0;
    printf("  failover took %lld ms\n", (long long)took);
    CHECK(took <= TTL_MS + 1000);

    /* etcd loses quorum: the new leader stops serving and says so. */
    hetcd_kill(&cluster, 1);
    CHECK_EQ(set_until(mb, MUSTER_ENOTLEADER, TTL_MS + 2000), MUSTER_ENOTLEADER);
    const char *why = muster_last_error(mb);
    CHECK(strstr(why, "no leader") != NULL);
    printf("  with etcd quorum lost: %s\n", why);
    muster_close(ma);
    muster_close(mb);
    CHECK_EQ(h_stop(&b), 0); /* a clean exit: under ASan, no leak report */
}

int main(void)
{
    h_init("election", 80);
    if (!hetcd_available())
        h_skip("etcd is not installed");
    if (hetcd_start(&cluster, 3) != 0) {
        CHECK(!"etcd cluster started");
        return h_finish();
    }
    snprintf(ha_url, sizeof ha_url, "etcd://%s/muster-test", cluster.endpoints);
    H_RUN(t_failover, NULL);
    hetcd_stop(&cluster);
    return h_finish();
}
