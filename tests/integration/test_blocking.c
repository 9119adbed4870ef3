/*
 * Integration tests of blocking ops: a parked get released by another
 * client's set, server-enforced timeouts (the answer comes near the deadline
 * and the same handle keeps working), reusable barriers, barrier rounds
 * that timed-out arrivals leave, barriers that answer with a key's value,
 * waits for a key's count, and TCPStore's queues.
 */
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <muster/async.h>

#include "hclient.h"
#include "raw.h"

/* Blocking ops in this file time out after this long. */
#define T_SHORT_MS 300
/* The server answers a timed-out op no later than this after its deadline. */
#define T_SLACK_MS 1500

/* One thread's view of a blocking call. */
struct t_worker {
    const struct h_daemon *d;
    const char *key;
    pthread_t th;
    int rc;
    char value[64];
    uint64_t rounds[2];
};

/* A raw get parks (a later ping on the same connection answers first) until another client sets the key. */
static void t_get_released_raw(const struct h_daemon *d)
{
    int fd = raw_open(d->port, "blk");
    muster_t *m = hc_connect(d, "blk", NULL);
    Muster__ServerFrame *f;
    uint64_t id = 0;
    CHECK(fd >= 0);
    if (fd < 0 || !m)
        goto out;
    CHECK_EQ(raw_get(fd, 1, "blk/k1", 1, 10000), 0);
    CHECK_EQ(raw_ping(fd, 2), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 2);
    CHECK_EQ(hc_set_str(m, "blk/k1", "released"), MUSTER_OK);
    f = raw_response(fd, 5000);
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ(f->response->id, 1);
        CHECK_EQ(f->response->status, MUSTER_OK);
        CHECK_EQ(f->response->result_case, MUSTER__RESPONSE__RESULT_GET);
        if (f->response->result_case == MUSTER__RESPONSE__RESULT_GET)
            CHECK_MEM(f->response->get->value.data, f->response->get->value.len, "released", 8);
    }
    raw_free(f);
out:
    muster_close(m);
    if (fd >= 0)
        close(fd);
}

/* Thread body: a blocking get on its own handle. */
static void *t_getter(void *arg)
{
    struct t_worker *w = arg;
    int err = 0;
    muster_t *m = hc_try_connect(w->d, "blk", NULL, &err);
    void *v = NULL;
    size_t n = 0;
    w->rc = m ? muster_get(m, w->key, 1, 10000, &v, &n) : err;
    if (w->rc == MUSTER_OK)
        snprintf(w->value, sizeof w->value, "%.*s", (int)n, (char *)v);
    muster_free(v);
    muster_close(m);
    return NULL;
}

/* libmuster: a get blocked in another thread returns the value another handle sets. */
static void t_get_released_thread(const struct h_daemon *d)
{
    struct t_worker w = {.d = d, .key = "blk/k2"};
    muster_t *m = hc_connect(d, "blk", NULL);
    if (!m)
        return;
    CHECK_EQ(pthread_create(&w.th, NULL, t_getter, &w), 0);
    CHECK_EQ(hc_set_str(m, "blk/k2", "from-main"), MUSTER_OK);
    pthread_join(w.th, NULL);
    CHECK_EQ(w.rc, MUSTER_OK);
    CHECK_STR(w.value, "from-main");
    muster_close(m);
}

/* Assert a blocking call took about T_SHORT_MS and answered TIMEOUT. */
static void t_expect_timeout(int rc, int64_t t0, const char *what)
{
    int64_t dt = h_now_ms() - t0;
    CHECK_EQ(rc, MUSTER_ETIMEDOUT);
    CHECK(dt >= T_SHORT_MS - 5);
    CHECK(dt <= T_SHORT_MS + T_SLACK_MS);
    printf("  %s timed out after %lld ms\n", what, (long long)dt);
}

/* After a timeout the same handle sets and gets exact values. */
static void t_still_usable(muster_t *m, const char *key)
{
    char val[64];
    snprintf(val, sizeof val, "after-%s", key);
    CHECK_EQ(hc_set_str(m, key, val), MUSTER_OK);
    HC_EXPECT(m, key, val);
}

/* get, wait, multi_get and barrier time out on the server's clock; the handle stays usable. */
static void t_timeouts(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "blk", NULL);
    const char *keys[] = {"blk/t-absent1", "blk/t-absent2"};
    void *v = NULL, *vals[2] = {0};
    size_t n = 0, lens[2] = {0};
    int64_t t0;
    if (!m)
        return;
    t0 = h_now_ms();
    t_expect_timeout(muster_get(m, "blk/t-absent1", 1, T_SHORT_MS, &v, &n), t0, "get");
    muster_free(v);
    t_still_usable(m, "blk/t-after-get");
    t0 = h_now_ms();
    t_expect_timeout(muster_wait(m, keys, 2, T_SHORT_MS), t0, "wait");
    t_still_usable(m, "blk/t-after-wait");
    t0 = h_now_ms();
    t_expect_timeout(muster_multi_get(m, keys, 2, 1, vals, lens, T_SHORT_MS), t0, "multi_get");
    muster_free(vals[0]);
    muster_free(vals[1]);
    t_still_usable(m, "blk/t-after-multi-get");
    t0 = h_now_ms();
    t_expect_timeout(muster_barrier(m, "blk/t-bar", 2, NULL, T_SHORT_MS), t0, "barrier");
    t_still_usable(m, "blk/t-after-barrier");
    muster_close(m);
}

/* Connect to ns with client name name (the hello's client_name); NULL on failure. */
static muster_t *t_named(const struct h_daemon *d, const char *ns, const char *name)
{
    char url[256];
    int err = 0;
    snprintf(url, sizeof url, "%s/%s?name=%s", d->url, ns, name);
    return muster_connect(url, &err);
}

/* Thread body: one barrier arrival of count 3 that waits long (the others time out first). */
static void *t_long_arrival(void *arg)
{
    muster_barrier(arg, "blk/named-bar", 3, NULL, 3000);
    return NULL;
}

/* A timed-out wait names the keys still missing; a timed-out barrier says how many are missing and
 * names the clients that did arrive. */
static void t_timeout_names_missing(const struct h_daemon *d)
{
    muster_t *m = t_named(d, "blk", "rank1"), *other = t_named(d, "blk", "rank0");
    const char *keys[] = {"blk/n1", "blk/n2", "blk/n3"};
    pthread_t th;
    CHECK(m && other);
    if (!m || !other)
        goto out;
    CHECK_EQ(hc_set_str(m, "blk/n1", "x"), MUSTER_OK);
    CHECK_EQ(muster_wait(m, keys, 3, T_SHORT_MS), MUSTER_ETIMEDOUT);
    printf("  wait: %s\n", muster_last_error(m));
    CHECK(strstr(muster_last_error(m), "waiting for 3 keys: 1 of them present; missing: 'blk/n2', 'blk/n3'") != NULL);
    CHECK_EQ(pthread_create(&th, NULL, t_long_arrival, other), 0);
    usleep(100000);
    CHECK_EQ(muster_barrier(m, "blk/named-bar", 3, NULL, T_SHORT_MS), MUSTER_ETIMEDOUT);
    printf("  barrier: %s\n", muster_last_error(m));
    CHECK(strstr(muster_last_error(m), "with 2 of 3 arrivals (1 missing); arrived: 'rank0'") != NULL);
    pthread_join(th, NULL);
out:
    muster_close(m);
    muster_close(other);
}

/* Thread body: two barrier rounds on its own handle. */
static void *t_barrier_worker(void *arg)
{
    struct t_worker *w = arg;
    int err = 0;
    muster_t *m = hc_try_connect(w->d, "blk", NULL, &err);
    w->rc = m ? muster_barrier(m, w->key, 3, &w->rounds[0], 10000) : err;
    if (w->rc == MUSTER_OK)
        w->rc = muster_barrier(m, w->key, 3, &w->rounds[1], 10000);
    muster_close(m);
    return NULL;
}

/* Three arrivals release a round; the same name then runs round 2. */
static void t_barrier_reuse(const struct h_daemon *d)
{
    struct t_worker w[3];
    for (int i = 0; i < 3; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].d = d;
        w[i].key = "blk/bar";
        CHECK_EQ(pthread_create(&w[i].th, NULL, t_barrier_worker, &w[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(w[i].th, NULL);
        CHECK_EQ(w[i].rc, MUSTER_OK);
        CHECK_EQ(w[i].rounds[0], 1);
        CHECK_EQ(w[i].rounds[1], 2);
    }
}

/* Thread body: arrive at blk/fbar fetching blk/id; the worker keyed "first" writes the id before arriving. */
static void *t_fetch_worker(void *arg)
{
    struct t_worker *w = arg;
    int err = 0;
    void *val = NULL;
    size_t len = 0;
    muster_t *m = hc_try_connect(w->d, "blk", NULL, &err);
    w->rc = m ? MUSTER_OK : err;
    if (m && !strcmp(w->key, "first"))
        w->rc = muster_set(m, "blk/id", "id\0bytes", 8, 10000);
    if (w->rc == MUSTER_OK)
        w->rc = muster_barrier_fetch(m, "blk/fbar", 3, "blk/id", &val, &len, &w->rounds[0], 10000);
    if (w->rc == MUSTER_OK && len == 8)
        memcpy(w->value, val, len);
    else if (w->rc == MUSTER_OK)
        w->rc = -1000 - (int)len;
    muster_free(val);
    muster_close(m);
    return NULL;
}

/* Every arrival's release answer carries the id as written before the last arrival, NUL bytes and all. */
static void t_barrier_fetch(const struct h_daemon *d)
{
    static const char *const roles[3] = {"later", "first", "later"};
    struct t_worker w[3];
    muster_t *m = hc_connect(d, "blk", NULL);
    if (m)
        CHECK_EQ(muster_set(m, "blk/id", "stale", 5, 0), MUSTER_OK);
    for (int i = 0; i < 3; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].d = d;
        w[i].key = roles[i];
        CHECK_EQ(pthread_create(&w[i].th, NULL, t_fetch_worker, &w[i]), 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(w[i].th, NULL);
        CHECK_EQ(w[i].rc, MUSTER_OK);
        CHECK_EQ(w[i].rounds[0], 1);
        CHECK(memcmp(w[i].value, "id\0bytes", 8) == 0);
    }
    /* An absent key: the barrier is passed (round set), the fetch says not found. */
    uint64_t round = 0;
    void *val = NULL;
    if (m) {
        CHECK_EQ(muster_barrier_fetch(m, "blk/solo", 1, "blk/none", &val, NULL, &round, 0), MUSTER_ENOTFOUND);
        CHECK_EQ(round, 1);
        CHECK(val == NULL);
        CHECK_EQ(muster_barrier_fetch(m, "blk/solo", 1, NULL, NULL, NULL, &round, 0), MUSTER_OK);
        CHECK_EQ(round, 2);
        CHECK_EQ(muster_barrier_fetch(m, "blk/solo", 1, "blk/id", NULL, NULL, &round, 0), MUSTER_EINVAL);
        /* A fetch key over --max-key is refused like any key, before the arrival counts. */
        static char big[9000];
        memset(big, 'k', sizeof big - 1);
        int err = muster_barrier_fetch(m, "blk/solo", 1, big, &val, NULL, &round, 0);
        CHECK(err == MUSTER_ELIMIT || err == MUSTER_EBADREQ);
        CHECK_EQ(muster_barrier_fetch(m, "blk/solo", 1, NULL, NULL, NULL, &round, 0), MUSTER_OK);
        CHECK_EQ(round, 3);
    }
    muster_close(m);
}

/* Send a barrier arrival on a raw connection. */
static int t_raw_barrier(int fd, uint64_t id, const char *name, uint32_t count, uint32_t timeout_ms)
{
    Muster__Request r = MUSTER__REQUEST__INIT;
    Muster__BarrierReq b = MUSTER__BARRIER_REQ__INIT;
    b.name = (char *)name;
    b.count = count;
    b.timeout_ms = timeout_ms;
    r.id = id;
    r.op_case = MUSTER__REQUEST__OP_BARRIER;
    r.barrier = &b;
    return raw_send_request(fd, &r);
}

/* A count that disagrees with the open round is refused; a timed-out arrival leaves the round. */
static void t_barrier_rules(const struct h_daemon *d)
{
    int a = raw_open(d->port, "blk"), b = raw_open(d->port, "blk"), c = raw_open(d->port, "blk");
    Muster__ServerFrame *f;
    uint64_t id = 0;
    CHECK(a >= 0 && b >= 0 && c >= 0);
    if (a < 0 || b < 0 || c < 0)
        goto out;
    /* a arrives (count 2) and gives up after T_SHORT_MS: the round must forget it. */
    CHECK_EQ(t_raw_barrier(a, 1, "blk/rules", 2, T_SHORT_MS), 0);
    CHECK_EQ(raw_status(a, 5000, &id), MUSTER_ETIMEDOUT);
    CHECK_EQ(id, 1);
    /* b parks with count 2; c's count 3 disagrees. */
    CHECK_EQ(t_raw_barrier(b, 1, "blk/rules", 2, 10000), 0);
    CHECK_EQ(raw_ping(b, 2), 0);
    CHECK_EQ(raw_status(b, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 2);
    CHECK_EQ(t_raw_barrier(c, 1, "blk/rules", 3, 10000), 0);
    CHECK_EQ(raw_status(c, 5000, &id), MUSTER_EBADREQ);
    /* c's agreeing arrival is the second: both are released with arrival numbers 1 and 2. */
    CHECK_EQ(t_raw_barrier(c, 2, "blk/rules", 2, 10000), 0);
    f = raw_response(c, 5000);
    CHECK(f && (int)f->response->status == MUSTER_OK && f->response->id == 2);
    if (f && f->response->result_case == MUSTER__RESPONSE__RESULT_BARRIER)
        CHECK_EQ(f->response->barrier->arrival, 2);
    raw_free(f);
    f = raw_response(b, 5000);
    CHECK(f && (int)f->response->status == MUSTER_OK && f->response->id == 1);
    if (f && f->response->result_case == MUSTER__RESPONSE__RESULT_BARRIER)
        CHECK_EQ(f->response->barrier->arrival, 1);
    raw_free(f);
out:
    for (int i = 0, fds[3] = {a, b, c}; i < 3; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* A raw wait of n keys with at_least. */
static int t_raw_wait_count(int fd, uint64_t id, const char *const *keys, size_t n, int64_t at_least)
{
    Muster__Request r = MUSTER__REQUEST__INIT;
    Muster__WaitReq w = MUSTER__WAIT_REQ__INIT;
    w.keys = (char **)keys;
    w.n_keys = n;
    w.at_least = at_least;
    w.timeout_ms = 10000;
    r.id = id;
    r.op_case = MUSTER__REQUEST__OP_WAIT;
    r.wait = &w;
    return raw_send_request(fd, &r);
}

/* A counted wait (TCPStore's barrier parked at the server): released by the add that reaches the count,
 * not before, from any client; answered at once when the count is already there; a count that is not a
 * number never releases it (it times out naming the count); more than one key, or a negative count, is
 * refused. */
static void t_wait_count(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "blk", NULL), *other = hc_connect(d, "blk", NULL);
    int fd = raw_open(d->port, "blk");
    const char *two[] = {"blk/c1", "blk/c2"};
    uint64_t id = 0;
    int64_t v;
    CHECK(m && other && fd >= 0);
    if (!m || !other || fd < 0)
        goto out;
    CHECK_EQ(t_raw_wait_count(fd, 1, two, 1, 3), 0);
    CHECK_EQ(raw_ping(fd, 2), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 2); /* the wait is parked: the ping answers first */
    CHECK_EQ(muster_add(other, "blk/c1", 2, &v, 5000), MUSTER_OK);
    CHECK_EQ(raw_ping(fd, 3), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 3); /* 2 of 3: still parked */
    CHECK_EQ(muster_add(other, "blk/c1", 1, &v, 5000), MUSTER_OK);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 1);
    CHECK_EQ(muster_wait_count(m, "blk/c1", 3, 5000), MUSTER_OK); /* already there */
    CHECK_EQ(hc_set_str(m, "blk/c2", "many"), MUSTER_OK);
    CHECK_EQ(muster_wait_count(m, "blk/c2", 1, T_SHORT_MS), MUSTER_ETIMEDOUT);
    CHECK(strstr(muster_last_error(m), "waiting for 'blk/c2' to count 1") != NULL);
    CHECK_EQ(muster_wait_count(m, "blk/c2", 0, 5000), MUSTER_EINVAL);
    CHECK_EQ(t_raw_wait_count(fd, 4, two, 2, 1), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_EBADREQ);
    CHECK_EQ(t_raw_wait_count(fd, 5, two, 1, -1), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_EBADREQ);
out:
    if (fd >= 0)
        close(fd);
    muster_close(m);
    muster_close(other);
}

/* One async wait's outcome. */
struct t_qwait {
    int done, err;
    int64_t by_queue;
};

/* Completion of an async wait: note how it ended. */
static void t_qwait_done(muster_t *m, const muster_reply *rep, void *arg)
{
    (void)m;
    struct t_qwait *w = arg;
    w->done = 1;
    w->err = rep->err;
    w->by_queue = rep->number;
}

/* Drive m's async calls until cond() of arg holds or ms pass. */
static void t_pump(muster_t *m, int ms, int (*cond)(void *), void *arg)
{
    int64_t end = h_now_ms() + ms;
    while (!cond(arg) && h_now_ms() < end) {
        struct pollfd p = {.fd = muster_async_fd(m), .events = POLLIN};
        if (muster_async_events(m) & MUSTER_ASYNC_WRITE)
            p.events |= POLLOUT;
        int n = poll(&p, 1, 20);
        muster_async_handle(m, n > 0 ? ((p.revents & POLLIN ? MUSTER_ASYNC_READ : 0) |
                                        (p.revents & POLLOUT ? MUSTER_ASYNC_WRITE : 0))
                                     : 0);
    }
}

/* How many of three waits are done. */
static int t_ndone(const struct t_qwait *w)
{
    return w[0].done + w[1].done + w[2].done;
}

/* Whether the wait at arg is done. */
static int t_one(void *arg)
{
    return ((struct t_qwait *)arg)->done;
}

/* Never: pump for the whole time. */
static int t_never(void *arg)
{
    (void)arg;
    return 0;
}

/* Queues (TCPStore's, beside the keys): FIFO with the length before each pop, not keys; a non-empty queue
 * makes its key present to check and wait; each push releases one parked wait, the oldest, with queue set;
 * a wait that skips the values promised to others parks although the queue is not empty; queued values
 * count against the namespace's key limit. */
static void t_queues(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "blkq", NULL), *w = hc_connect(d, "blkq", NULL);
    uint64_t len = 0, before = 0, nkeys = 7;
    void *val = NULL;
    size_t vlen = 0;
    int present = 0;
    const char *q = "q/1";
    CHECK(m && w);
    if (!m || !w)
        goto out;
    CHECK_EQ(muster_queue_pop(m, q, &before, &val, &vlen, 5000), MUSTER_OK);
    CHECK(before == 0 && val == NULL);
    CHECK_EQ(muster_check(m, &q, 1, &present, 5000), MUSTER_OK);
    CHECK_EQ(present, 0);
    CHECK_EQ(muster_queue_push(m, q, "a", 1, &len, 5000), MUSTER_OK);
    CHECK_EQ(len, 1);
    CHECK_EQ(muster_queue_push(m, q, "bb", 2, &len, 5000), MUSTER_OK);
    CHECK_EQ(len, 2);
    CHECK_EQ(muster_check(m, &q, 1, &present, 5000), MUSTER_OK);
    CHECK_EQ(present, 1);
    CHECK_EQ(muster_wait(m, &q, 1, 5000), MUSTER_OK);
    CHECK_EQ(muster_num_keys(m, &nkeys, 5000), MUSTER_OK);
    CHECK_EQ(nkeys, 0); /* queues are not keys */
    CHECK_EQ(muster_queue_pop(m, q, &before, &val, &vlen, 5000), MUSTER_OK);
    CHECK(before == 2 && vlen == 1 && val && memcmp(val, "a", 1) == 0);
    muster_free(val);
    CHECK_EQ(muster_queue_len(m, q, &len, 5000), MUSTER_OK);
    CHECK_EQ(len, 1);
    CHECK_EQ(muster_queue_pop(m, q, &before, &val, &vlen, 5000), MUSTER_OK);
    CHECK(before == 1 && vlen == 2 && val && memcmp(val, "bb", 2) == 0);
    muster_free(val);
    /* Three waits parked in order; two pushes release the two oldest, one each, and say so. */
    struct t_qwait ws[3] = {{0}};
    const char *k = "q/2";
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(muster_async_wait(w, &k, 1, 10000, t_qwait_done, &ws[i]), MUSTER_OK);
        t_pump(w, 50, t_never, NULL); /* sent, and parked in order */
    }
    CHECK_EQ(t_ndone(ws), 0);
    CHECK_EQ(muster_queue_push(m, k, "x", 1, &len, 5000), MUSTER_OK);
    t_pump(w, 3000, t_one, &ws[0]);
    t_pump(w, 200, t_never, NULL);
    CHECK(ws[0].done && !ws[1].done && !ws[2].done);
    CHECK(ws[0].err == MUSTER_OK && ws[0].by_queue == 1);
    CHECK_EQ(muster_queue_push(m, k, "y", 1, &len, 5000), MUSTER_OK);
    t_pump(w, 3000, t_one, &ws[1]);
    CHECK(ws[1].done && ws[1].err == MUSTER_OK && ws[1].by_queue == 1 && !ws[2].done);
    /* Two values queued, both promised to the released waits: a wait that skips two parks; the next push
     * goes to the oldest wait (ws[2]), the one after to it. */
    struct t_qwait skip = {0};
    CHECK_EQ(muster_async_wait_skip(w, k, 2, 10000, t_qwait_done, &skip), MUSTER_OK);
    t_pump(w, 200, t_never, NULL);
    CHECK(!skip.done);
    CHECK_EQ(muster_queue_push(m, k, "z", 1, &len, 5000), MUSTER_OK);
    t_pump(w, 3000, t_one, &ws[2]);
    t_pump(w, 100, t_never, NULL);
    CHECK(ws[2].done && !skip.done);
    CHECK_EQ(muster_queue_push(m, k, "zz", 2, &len, 5000), MUSTER_OK);
    t_pump(w, 3000, t_one, &skip);
    CHECK(skip.done && skip.err == MUSTER_OK && skip.by_queue == 1);
    CHECK_EQ(muster_queue_len(m, k, &len, 5000), MUSTER_OK);
    CHECK_EQ(len, 4);
out:
    muster_close(m);
    muster_close(w);
}

/* Run the blocking-op tests against one daemon. */
int main(void)
{
    struct h_daemon d;
    h_init("blocking", 60);
    if (h_start(&d, NULL) < 0)
        return h_finish();
    H_RUN(t_get_released_raw, &d);
    H_RUN(t_get_released_thread, &d);
    H_RUN(t_timeouts, &d);
    H_RUN(t_timeout_names_missing, &d);
    H_RUN(t_barrier_reuse, &d);
    H_RUN(t_barrier_rules, &d);
    H_RUN(t_barrier_fetch, &d);
    H_RUN(t_wait_count, &d);
    H_RUN(t_queues, &d);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
