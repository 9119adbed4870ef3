/*
 * Parked requests are shared out: one connection cannot take more than
 * --max-waiters-per-conn of them, one namespace more than
 * --max-waiters-per-ns, nor one address, over all its connections and
 * namespaces, more than --max-waiters-per-source; the last two are at most
 * half of --max-waiters whatever they say.  So a client parking blocking
 * gets without end does not make every other job's waits fail with LIMIT.
 * The hog connects from 127.0.0.2, others from 127.0.0.3.
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

/* Connect from src and say hello to ns; the fd or -1. */
static int t_open_from(const struct h_daemon *d, const char *src, const char *ns)
{
    int fd = raw_connect_from(d->port, src);
    if (fd >= 0 && raw_hello(fd, ns, NULL) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* A blocking get from a fresh connection from 127.0.0.3 in ns parks (and times out) rather than
 * failing with LIMIT. */
static void t_can_park(const struct h_daemon *d, const char *ns)
{
    int fd = t_open_from(d, "127.0.0.3", ns);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_EQ(raw_get(fd, 1, "never", 1, 300), 0);
    CHECK_EQ(raw_status(fd, 3000, NULL), MUSTER_ETIMEDOUT);
    close(fd);
}

/* One connection parking the whole --max-waiters gets its share only; other namespaces still park. */
static void t_per_conn(const struct h_daemon *d)
{
    int a = t_open_from(d, "127.0.0.2", "hog"), b = t_open_from(d, "127.0.0.3", "hog");
    int c = t_open_from(d, "127.0.0.4", "hog");
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

/* One address with 4 namespaces x 2 connections parks what it can: half of --max-waiters, whatever
 * --max-waiters-per-source says; another address's job still parks, as many as are left. */
static void t_per_source(void *arg)
{
    (void)arg;
    static const char *const args[] = {"--max-waiters", "400", "--max-waiters-per-conn", "1000", NULL};
    struct h_daemon d;
    int fds[8], parked = 0;
    char ns[16];
    if (h_start(&d, args) < 0)
        return;
    for (int i = 0; i < 8; i++) {
        snprintf(ns, sizeof ns, "hog%d", i / 2);
        fds[i] = t_open_from(&d, "127.0.0.2", ns);
        CHECK(fds[i] >= 0);
        if (fds[i] >= 0)
            parked += 100 - t_park(fds[i], 1, 100);
    }
    printf("  one address, 4 namespaces x 2 connections, asked for 800 parked gets: %d parked\n", parked);
    CHECK_EQ(parked, 200);
    CHECK(h_stat(&d, "limit_waiters_per_source") >= 1);
    CHECK_EQ(h_stat(&d, "limit_waiters"), 0);
    int other = t_open_from(&d, "127.0.0.3", "job");
    CHECK(other >= 0);
    if (other >= 0)
        CHECK_EQ(t_park(other, 1, 150), 0);
    CHECK_EQ(h_stat(&d, "waiters_current"), 350);
    for (int i = 0; i < 8; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (other >= 0)
        close(other);
    CHECK_EQ(h_stop(&d), 0);
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
    H_RUN(t_per_source, NULL);
    return h_finish();
}
