/* Helpers shared by the tests of an --ha set: the etcd cluster, polling, reconnecting, writing until a status. */
#ifndef MUSTER_TEST_HHA_H
#define MUSTER_TEST_HHA_H

#include <muster/muster.h>
#include <stdint.h>

#include "harness.h"
#include "hetcd.h"

/* Start the three-member etcd cluster of an HA test (the test is skipped when etcd is not installed) and
 * write the --ha URL with prefix /muster-test into url; 0, or -1 counted as a failure. */
int hha_cluster(struct hetcd *cluster, char *url, size_t n);
/* Sleep one polling step (awaiting a condition checked by the caller, always bounded). */
void hha_step(void);
/* A new handle on d's namespace "ha" that gives up on an unanswered hello after a second. */
muster_t *hha_reconnect(const struct h_daemon *d);
/* Set key on *m until the status is want or ms pass, reconnecting to d after a lost or timed-out call;
 * the last status. */
int hha_set_until(const struct h_daemon *d, muster_t **m, const char *key, int want, int64_t ms);

#endif
