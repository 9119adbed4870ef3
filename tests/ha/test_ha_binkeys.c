/*
 * Keys are bytes in the HA formats too: TCPStore keys that differ only after
 * a NUL byte, written to the leader of an --ha set, read back intact on the
 * standby that took over (the replicated log), and on a fresh daemon that
 * joined after the log was snapshotted in etcd (the snapshot) once that one
 * took over in turn.  Skipped without etcd.
 */
#include <muster/muster.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../service/hbkeys.h"
#include "../service/hhttp.h"
#include "../tcpstore/tswire.h"
#include "harness.h"
#include "hclient.h"
#include "hetcd.h"
#include "hha.h"

/* The lease every daemon of the set uses, ms. */
#define TTL_MS 2000
/* How long a takeover may take: the lease, then the election. */
#define TAKEOVER_MS (TTL_MS + 8000)

static struct hetcd cluster;
static char ha_url[256];

/* Start a daemon of the set with a TCPStore listener (small snapshots); its TCPStore port, or 0. */
static uint16_t start(struct h_daemon *d, const char *name)
{
    char pf[4400];
    snprintf(pf, sizeof pf, "%s/%s.tsport", h_tmpdir(), name);
    remove(pf);
    const char *extra[] = {"--ha", ha_url, "--ha-ttl", "2000", "--ha-snapshot-bytes", "4K",
                           "--tcpstore-listen", "127.0.0.1:0", "--tcpstore-port-file", pf, NULL};
    if (h_start(d, extra) != 0)
        return 0;
    return hh_port_file(pf, 5000);
}

/* Wait until d leads (a native set succeeds there); whether it does. */
static int await_leader(const struct h_daemon *d)
{
    muster_t *m = hha_reconnect(d);
    int rc = hha_set_until(d, &m, "leading", MUSTER_OK, TAKEOVER_MS);
    muster_close(m);
    return rc == MUSTER_OK;
}

/* Write enough through d that the leader snapshots its log in etcd. */
static void fill(const struct h_daemon *d)
{
    muster_t *m = hha_reconnect(d);
    static char val[1024];
    memset(val, 'x', sizeof val - 1);
    for (int i = 0; m && i < 64; i++) {
        char key[32];
        snprintf(key, sizeof key, "fill/%d", i);
        CHECK_EQ(muster_set(m, key, val, sizeof val - 1, 5000), MUSTER_OK);
    }
    muster_close(m);
}

/* SIGKILL d and reap it. */
static void kill_daemon(struct h_daemon *d)
{
    kill(d->pid, SIGKILL);
    h_stop(d);
}

/* Leader, standby, fresh joiner: the NUL keys survive both takeovers. */
static void t_ha_nul_keys(void *unused)
{
    (void)unused;
    struct h_daemon a, b, c;
    uint16_t pa = start(&a, "a");
    CHECK(pa != 0 && await_leader(&a));
    uint16_t pb = start(&b, "b");
    CHECK(pb != 0);
    int fd = pa ? tsw_open(pa) : -1;
    CHECK(fd >= 0);
    if (fd >= 0) {
        hbk_write_all(fd);
        close(fd);
    }
    kill_daemon(&a);
    CHECK(await_leader(&b));                      /* the standby replayed the log */
    hbk_expect_all(pb);
    fill(&b);
    CHECK(h_stat(&b, "ha_snapshots") > 0);
    uint16_t pc = start(&c, "c");                 /* loads the snapshot, then the log after it */
    CHECK(pc != 0);
    kill_daemon(&b);
    CHECK(await_leader(&c));
    hbk_expect_all(pc);
    h_stop(&c);
}

/* Run the case against a fresh etcd cluster. */
int main(void)
{
    h_init("ha_binkeys", 120);
    if (hha_cluster(&cluster, ha_url, sizeof ha_url) != 0)
        return h_finish();
    H_RUN(t_ha_nul_keys, NULL);
    hetcd_stop(&cluster);
    return h_finish();
}
