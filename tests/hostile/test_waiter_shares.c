/*
 * Parked requests are shared out: one connection cannot take more than
 * --max-waiters-per-conn of them, nor one namespace more than
 * --max-waiters-per-ns, so a client parking blocking gets without end does
 * not make every other job's waits fail with LIMIT.
 */
#include <stdio.h>
#include <unistd.h>

#include "hclient.h"
#include "raw.h"

#define T_GLOBAL 64
#define T_PER_NS 32
#define T_PER_CONN 16

/* Send n blocking gets of absent keys on fd (ids from first); how many were answered LIMIT at once. */
static int t_park(int fd, uint64_t first, int n)
{
    char key[32];
    int limited = 0;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "absent/%llu", (unsigned long long)(first + (uint64_t)i));
        CHECK_EQ(raw_get(fd, first + (uint64_t)i, key, 1, 60000), 0);
    }
    /* The parked ones stay silent; the refused ones answer at once. */
    while (raw_status(fd, 500, NULL) == MUSTER_ELIMIT)
        limited++;
    return limited;
}

/* A blocking get from a fresh handle in ns parks (and times out) rather than failing with LIMIT. */
static void t_can_park(const struct h_daemon *d, const char *ns)
{
    muster_t *m = hc_connect(d, ns, NULL);
    void *v = NULL;
    size_t len = 0;
    if (m)
        CHECK_EQ(muster_get(m, "never", 1, 300, &v, &len), MUSTER_ETIMEDOUT);
    muster_free(v);
    muster_close(m);
}

/* One connection parking the whole --max-waiters gets its share only; other namespaces still park. */
static void t_per_conn(const struct h_daemon *d)
{
    int a = raw_open(d->port, "hog"), b = raw_open(d->port, "hog"), c = raw_open(d->port, "hog");
    CHECK(a >= 0 && b >= 0 && c >= 0);
    if (a < 0 || b < 0 || c < 0)
        goto out;
    int limited = t_park(a, 1, T_GLOBAL);
    printf("  one connection asked for %d parked gets: %d refused with LIMIT\n", T_GLOBAL, limited);
    CHECK_EQ(limited, T_GLOBAL - T_PER_CONN);
    t_can_park(d, "other");
    /* A second connection of the namespace fills its share; a third finds the namespace's used up. */
    CHECK_EQ(t_park(b, 1, T_PER_CONN), 0);
    CHECK_EQ(t_park(c, 1, 4), 4);
    t_can_park(d, "other");
    /* Closing a connection gives its share back. */
    close(a);
    a = -1;
    usleep(100000);
    CHECK_EQ(t_park(c, 100, 4), 0);
out:
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
    if (c >= 0)
        close(c);
}

/* Run the shares test against a daemon with small waiter bounds. */
int main(void)
{
    static const char *const args[] = {"--max-waiters", "64", "--max-waiters-per-ns", "32", "--max-waiters-per-conn",
                                       "16", NULL};
    struct h_daemon d;
    h_init("waiter_shares", 60);
    if (h_start(&d, args) < 0)
        return h_finish();
    H_RUN(t_per_conn, &d);
    CHECK(h_stat(&d, "limit_waiters_per_conn") >= 1);
    CHECK(h_stat(&d, "limit_waiters_per_ns") >= 1);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
