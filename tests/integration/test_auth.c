/*
 * Integration tests of namespaces and tokens: namespaces do not see each
 * other's keys; a namespace with a token refuses a wrong or missing one
 * with MUSTER_EAUTH at once (no retries), and accepts the right one.  Requests
 * pipelined behind a Hello run only when the hello is accepted.
 */
#include <string.h>
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

/* Requests sent behind the Hello, before its reply, are served in order once it is accepted. */
static void t_pipelined_hello(const struct h_daemon *d)
{
    int fd = raw_connect(d->port);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_EQ(raw_send_hello(fd, "locked", "s3cret"), 0);
    CHECK_EQ(raw_set(fd, 1, "piped", "yes", 3), 0);
    CHECK_EQ(raw_get(fd, 2, "piped", 0, 0), 0);
    Muster__ServerFrame *f = raw_recv(fd, 5000, NULL);
    CHECK(f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_HELLO_REPLY);
    raw_free(f);
    uint64_t id = 0;
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 1);
    f = raw_response(fd, 5000);
    CHECK(f && f->response->id == 2 && f->response->result_case == MUSTER__RESPONSE__RESULT_GET &&
          f->response->get->value.len == 3 && memcmp(f->response->get->value.data, "yes", 3) == 0);
    raw_free(f);
    close(fd);
}

/* A refused Hello takes the requests pipelined behind it down with it: none of them runs. */
static void t_pipelined_refused(const struct h_daemon *d)
{
    int fd = raw_connect(d->port);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_EQ(raw_send_hello(fd, "locked", "wrong"), 0);
    CHECK_EQ(raw_set(fd, 1, "smuggled", "x", 1), 0);
    Muster__ServerFrame *f = raw_recv(fd, 5000, NULL);
    CHECK(f && ((f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR && f->error->status == MUSTER__STATUS__UNAUTHENTICATED) ||
                (f->frame_case == MUSTER__SERVER_FRAME__FRAME_RESPONSE && f->response->status == MUSTER__STATUS__UNAUTHENTICATED)));
    raw_free(f);
    int st = raw_status(fd, 1000, NULL);
    CHECK(st == -1 || st == MUSTER_EAUTH);
    close(fd);
    muster_t *m = hc_connect(d, "locked", "s3cret");
    if (m)
        HC_EXPECT(m, "smuggled", NULL);
    muster_close(m);
}

/* Run the namespace and token tests against one daemon. */
int main(void)
{
    /* Answers, not pacing: the backoff after wrong tokens has tests/hostile/test_auth_backoff.c. */
    static const char *const args[] = {"--token", "locked=s3cret", "--auth-backoff", "0", NULL};
    struct h_daemon d;
    h_init("auth", 60);
    if (h_start(&d, args) < 0)
        return h_finish();
    H_RUN(t_namespaces_isolated, &d);
    H_RUN(t_wrong_token, &d);
    H_RUN(t_right_token, &d);
    H_RUN(t_wrong_token_raw, &d);
    H_RUN(t_pipelined_hello, &d);
    H_RUN(t_pipelined_refused, &d);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
