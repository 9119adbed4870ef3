/*
 * Integration tests of namespaces and tokens: namespaces do not see each
 * other's keys; a namespace with a token refuses a wrong or missing one
 * with MUSTER_EAUTH at once (no retries), and accepts the right one.
 */
#include <unistd.h>

#include "hclient.h"
#include "raw.h"

/* Keys, counts and values of one namespace are invisible to another. */
static void t_namespaces_isolated(const struct h_daemon *d)
{
    muster_t *a = hc_connect(d, "ns-a", NULL), *b = hc_connect(d, "ns-b", NULL);
    muster_t *def = hc_connect(d, NULL, NULL);
    uint64_t na = 0, nb = 0;
    int64_t r = 0;
    if (!a || !b || !def)
        goto out;
    CHECK_EQ(hc_set_str(a, "shared", "from-a"), MUSTER_OK);
    CHECK_EQ(hc_set_str(a, "only-a", "1"), MUSTER_OK);
    CHECK_EQ(hc_set_str(b, "shared", "from-b"), MUSTER_OK);
    HC_EXPECT(a, "shared", "from-a");
    HC_EXPECT(b, "shared", "from-b");
    HC_EXPECT(b, "only-a", NULL);
    HC_EXPECT(def, "shared", NULL);
    CHECK_EQ(muster_add(b, "ctr", 10, &r, 0), MUSTER_OK);
    CHECK_EQ(muster_add(a, "ctr", 1, &r, 0), MUSTER_OK);
    CHECK_EQ(r, 1);
    CHECK_EQ(muster_num_keys(a, &na, 0), MUSTER_OK);
    CHECK_EQ(muster_num_keys(b, &nb, 0), MUSTER_OK);
    CHECK_EQ(na, 3);
    CHECK_EQ(nb, 2);
out:
    muster_close(a);
    muster_close(b);
    muster_close(def);
}

/* A wrong or missing token fails with MUSTER_EAUTH well before the connect deadline. */
static void t_wrong_token(const struct h_daemon *d)
{
    static const char *const bad[] = {"wrong", "s3cre", "s3cret-", NULL};
    for (int i = 0; i < 4; i++) {
        int err = 0;
        int64_t t0 = h_now_ms();
        muster_t *m = hc_try_connect(d, "locked", bad[i], &err);
        CHECK(m == NULL);
        CHECK_EQ(err, MUSTER_EAUTH);
        /* Connect retries for 5 s; a refused hello must not be retried. */
        CHECK(h_now_ms() - t0 < 2000);
        muster_close(m);
    }
}

/* The right token opens the namespace; other namespaces stay open without one. */
static void t_right_token(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "locked", "s3cret"), *o = hc_connect(d, "open", NULL);
    if (m) {
        CHECK_EQ(hc_set_str(m, "k", "v"), MUSTER_OK);
        HC_EXPECT(m, "k", "v");
    }
    if (o)
        HC_EXPECT(o, "k", NULL);
    muster_close(m);
    muster_close(o);
}

/* On the wire a wrong token answers UNAUTHENTICATED and requests stay refused. */
static void t_wrong_token_raw(const struct h_daemon *d)
{
    int fd = raw_connect(d->port), rc;
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    rc = raw_hello(fd, "locked", "nope");
    CHECK_EQ(rc, MUSTER_EAUTH);
    /* The server may close here; if it keeps the connection, requests must be refused. */
    if (raw_set(fd, 1, "k", "stolen", 6) == 0) {
        int st = raw_status(fd, 2000, NULL);
        CHECK(st == -1 || st == MUSTER_EAUTH);
    }
    close(fd);
}

/* Run the namespace and token tests against one daemon. */
int main(void)
{
    static const char *const args[] = {"--token", "locked=s3cret", NULL};
    struct h_daemon d;
    h_init("auth", 60);
    if (h_start(&d, args) < 0)
        return h_finish();
    H_RUN(t_namespaces_isolated, &d);
    H_RUN(t_wrong_token, &d);
    H_RUN(t_right_token, &d);
    H_RUN(t_wrong_token_raw, &d);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
