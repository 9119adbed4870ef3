/* Helpers shared by the tests of an --ha set: the etcd cluster, polling, reconnecting, writing until a status. */
#include "hha.h"

#include <stdio.h>
#include <time.h>

/* Start the three-member etcd cluster and write the --ha URL; see hha.h. */
int hha_cluster(struct hetcd *cluster, char *url, size_t n)
{
    if (!hetcd_available())
        h_skip("etcd is not installed");
    if (hetcd_start(cluster, 3) != 0) {
        CHECK(!"etcd cluster started");
        return -1;
    }
    snprintf(url, n, "etcd://%s/muster-test", cluster->endpoints);
    return 0;
}

/* Sleep one polling step (awaiting a condition checked by the caller, always bounded). */
void hha_step(void)
{
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* A new handle on d that gives up on an unanswered hello after a second: a daemon that lost etcd with
 * writes unconfirmed never answers the connections that were waiting then. */
muster_t *hha_reconnect(const struct h_daemon *d)
{
    char url[512];
    muster_opts o = {0};
    o.connect_timeout_ms = 1000;
    o.default_timeout_ms = 5000;
    o.client_name = "muster-test";
    h_url(d, "ha", NULL, url, sizeof url);
    int err;
    return muster_connect_opts(url, &o, &err);
}

/* Set key on *m until the status is want or ms pass, reconnecting after a lost or timed-out call (the
 * handle is unusable then); the last status. */
int hha_set_until(const struct h_daemon *d, muster_t **m, const char *key, int want, int64_t ms)
{
    int64_t until = h_now_ms() + ms;
    int rc;
    while ((rc = *m ? muster_set(*m, key, "v", 1, 1000) : MUSTER_ECONN) != want && h_now_ms() < until) {
        if (rc == MUSTER_ETIMEDOUT || rc == MUSTER_ECONN) {
            muster_close(*m);
            *m = hha_reconnect(d);
        }
        hha_step();
    }
    return rc;
}
