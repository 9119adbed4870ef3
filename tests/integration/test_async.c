/*
 * Integration tests of the asynchronous calls (muster/async.h) against a
 * real musterd: many calls in flight on one handle through the poll()
 * adapter, answers out of submission order (a parked get completed after
 * the sets behind it), deadlines enforced by the server and by the client
 * (a stopped daemon), two threads sharing one handle (sets on one complete
 * promptly while the other is blocked in a get), cancellation by
 * muster_close, and the libevent adapter.
 */
#include <event2/event.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <muster/adapters/libevent.h>
#include <muster/adapters/poll.h>
#include <muster/async.h>

#include "hclient.h"

/* Calls submitted at once in t_many. */
#define T_MANY 2000
/* A set on a shared handle must complete within this while another thread is blocked. */
#define T_PROMPT_MS 500

/* What a test's callbacks saw. */
struct t_tally {
    int done;              /* callbacks run */
    int ok;                /* of them MUSTER_OK */
    int last_err;
    int64_t number;
    char value[64];
    int order;             /* t_out_of_order: the value of done when the get completed */
};

/* Count a completion and keep its fields. */
static void t_count(muster_t *m, const muster_reply *r, void *arg)
{
    (void)m;
    struct t_tally *t = arg;
    t->done++;
    t->ok += r->err == MUSTER_OK;
    t->last_err = r->err;
    t->number = r->number;
    if (r->value && r->len < sizeof t->value) {
        memcpy(t->value, r->value, r->len);
        t->value[r->len] = '\0';
    }
}

/* Run the poll adapter on m until *done reaches want or ms pass; 1 when reached. */
static int t_run(muster_t *m, const int *done, int want, int64_t ms)
{
    int64_t until = h_now_ms() + ms;
    while (*done < want && h_now_ms() < until)
        muster_poll_once(m, 50);
    return *done >= want;
}

/* A get's callback that records its value under the key's number. */
struct t_slot {
    int *done;
    int good;
    int index;
};

/* Check a get of "many/I" answered "vI". */
static void t_slot_cb(muster_t *m, const muster_reply *r, void *arg)
{
    (void)m;
    struct t_slot *s = arg;
    char want[32];
    int n = snprintf(want, sizeof want, "v%d", s->index);
    s->good = r->err == MUSTER_OK && r->len == (size_t)n && memcmp(r->value, want, (size_t)n) == 0;
    (*s->done)++;
}

/* T_MANY sets then T_MANY gets in flight at once on one handle, each answered with its own value. */
static void t_many(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "many", NULL);
    static struct t_slot slots[T_MANY];
    struct t_tally sets = {0};
    int got = 0;
    if (!m)
        return;
    int64_t t0 = h_now_ms();
    int submitted = 0;
    for (int i = 0; i < T_MANY; i++) {
        char key[32], val[32];
        snprintf(key, sizeof key, "many/%d", i);
        int n = snprintf(val, sizeof val, "v%d", i);
        submitted += muster_async_set(m, key, val, (size_t)n, 5000, t_count, &sets) == MUSTER_OK;
    }
    CHECK_EQ(submitted, T_MANY);
    CHECK(t_run(m, &sets.done, T_MANY, 10000));
    CHECK_EQ(sets.ok, T_MANY);
    for (int i = 0; i < T_MANY; i++) {
        char key[32];
        snprintf(key, sizeof key, "many/%d", i);
        slots[i] = (struct t_slot){&got, 0, i};
        CHECK_EQ(muster_async_get(m, key, 0, 5000, t_slot_cb, &slots[i]), MUSTER_OK);
    }
    CHECK(t_run(m, &got, T_MANY, 10000));
    int good = 0;
    for (int i = 0; i < T_MANY; i++)
        good += slots[i].good;
    CHECK_EQ(good, T_MANY);
    printf("  %d sets and %d gets in flight: %lld ms\n", T_MANY, T_MANY, (long long)(h_now_ms() - t0));
    /* The synchronous calls share the machinery and still work on the handle. */
    HC_EXPECT(m, "many/7", "v7");
    muster_close(m);
}

/* t_out_of_order's parked get, and the sets submitted behind it. */
struct t_ooo {
    struct t_tally get;
    struct t_tally sets;
};

/* Mark the get's completion with how many sets had completed before it. */
static void t_get_cb(muster_t *m, const muster_reply *r, void *arg)
{
    struct t_ooo *o = arg;
    o->get.order = o->sets.done;
    t_count(m, r, &o->get);
}

/* A blocking get parked at the server completes after the sets submitted behind it. */
static void t_out_of_order(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "ooo", NULL);
    struct t_ooo o;
    memset(&o, 0, sizeof o);
    if (!m)
        return;
    CHECK_EQ(muster_async_get(m, "ooo/k", 1, 5000, t_get_cb, &o), MUSTER_OK);
    for (int i = 0; i < 10; i++) {
        char key[16];
        snprintf(key, sizeof key, "ooo/%d", i);
        CHECK_EQ(muster_async_set(m, key, "x", 1, 5000, t_count, &o.sets), MUSTER_OK);
    }
    CHECK(t_run(m, &o.sets.done, 10, 5000));
    CHECK_EQ(o.sets.ok, 10);
    CHECK_EQ(o.get.done, 0);
    CHECK_EQ(muster_async_set(m, "ooo/k", "late", 4, 5000, t_count, &o.sets), MUSTER_OK);
    CHECK(t_run(m, &o.get.done, 1, 5000));
    CHECK_EQ(o.get.last_err, MUSTER_OK);
    CHECK_STR(o.get.value, "late");
    CHECK(o.get.order >= 10);
    muster_close(m);
}

/* The server's deadline: a parked get times out near its timeout and the handle stays usable. */
static void t_deadline_server(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "dl", NULL);
    struct t_tally t = {0}, s = {0};
    if (!m)
        return;
    int64_t t0 = h_now_ms();
    CHECK_EQ(muster_async_get(m, "dl/never", 1, 300, t_count, &t), MUSTER_OK);
    CHECK_EQ(muster_async_set(m, "dl/other", "y", 1, 300, t_count, &s), MUSTER_OK);
    CHECK(t_run(m, &t.done, 1, 5000));
    int64_t took = h_now_ms() - t0;
    CHECK_EQ(t.last_err, MUSTER_ETIMEDOUT);
    CHECK(took >= 250 && took < 1000);
    CHECK_EQ(s.done, 1);
    CHECK_EQ(s.last_err, MUSTER_OK);
    CHECK_EQ(muster_broken(m), 0);
    CHECK_EQ(hc_set_str(m, "dl/after", "ok"), MUSTER_OK);
    muster_close(m);
}

/* The client's deadline: a stopped daemon answers nothing; both calls in flight time out and the handle breaks. */
static void t_deadline_client(struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "dlc", NULL);
    struct t_tally t = {0};
    if (!m)
        return;
    kill(d->pid, SIGSTOP);
    int64_t t0 = h_now_ms();
    CHECK_EQ(muster_async_set(m, "dlc/a", "1", 1, 200, t_count, &t), MUSTER_OK);
    CHECK_EQ(muster_async_set(m, "dlc/b", "1", 1, 5000, t_count, &t), MUSTER_OK);
    CHECK(t_run(m, &t.done, 2, 5000));
    int64_t took = h_now_ms() - t0;
    kill(d->pid, SIGCONT);
    CHECK_EQ(t.ok, 0);
    CHECK_EQ(t.last_err, MUSTER_ETIMEDOUT);
    CHECK(took >= 1100 && took < 2500);   /* 200 ms plus the client's 1 s of grace */
    CHECK_EQ(muster_broken(m), MUSTER_ETIMEDOUT);
    CHECK_EQ(muster_async_set(m, "dlc/c", "1", 1, 200, t_count, &t), MUSTER_ECONN);
    muster_close(m);
}

/* Thread A of t_threads: a synchronous blocking get on the shared handle. */
struct t_blocker {
    muster_t *m;
    int rc;
    int64_t took;
    char value[16];
};

/* Block in a get until the other thread sets the key. */
static void *t_blocker_main(void *arg)
{
    struct t_blocker *b = arg;
    void *v = NULL;
    size_t len = 0;
    int64_t t0 = h_now_ms();
    b->rc = muster_get(b->m, "thr/k", 1, 10000, &v, &len);
    b->took = h_now_ms() - t0;
    if (b->rc == MUSTER_OK && len < sizeof b->value)
        memcpy(b->value, v, len + 1);
    muster_free(v);
    return NULL;
}

/* Two threads on one handle: sets on B complete promptly while A waits in a blocking get. */
static void t_threads(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "thr", NULL);
    struct t_blocker b = {0};
    if (!m)
        return;
    b.m = m;
    pthread_t th;
    pthread_create(&th, NULL, t_blocker_main, &b);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);   /* let A park its get */
    int64_t worst = 0;
    int ok = 0;
    for (int i = 0; i < 50; i++) {
        char key[16];
        snprintf(key, sizeof key, "thr/%d", i);
        int64_t t0 = h_now_ms();
        ok += hc_set_str(m, key, "b") == MUSTER_OK;
        int64_t took = h_now_ms() - t0;
        worst = took > worst ? took : worst;
    }
    CHECK_EQ(ok, 50);
    CHECK(worst < T_PROMPT_MS);
    printf("  50 sets beside a blocked get: slowest %lld ms\n", (long long)worst);
    HC_EXPECT(m, "thr/3", "b");
    CHECK_EQ(hc_set_str(m, "thr/k", "done"), MUSTER_OK);
    pthread_join(th, NULL);
    CHECK_EQ(b.rc, MUSTER_OK);
    CHECK_STR(b.value, "done");
    CHECK(b.took < 5000);
    muster_close(m);
}

/* Closing a handle runs every pending callback with MUSTER_ECANCELED. */
static void t_cancel(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "cancel", NULL);
    struct t_tally t = {0};
    if (!m)
        return;
    for (int i = 0; i < 5; i++)
        CHECK_EQ(muster_async_get(m, "cancel/never", 1, 10000, t_count, &t), MUSTER_OK);
    CHECK_EQ(muster_async_ping(m, 10000, t_count, &t), MUSTER_OK);
    muster_close(m);
    CHECK_EQ(t.done, 6);
    CHECK_EQ(t.last_err, MUSTER_ECANCELED);
    CHECK(t.ok <= 1);   /* the ping may have been answered before the close read nothing */
}

/* Stop the libevent loop once the tally reaches its count. */
struct t_evstop {
    struct t_tally t;
    int want;
    struct event_base *base;
};

/* Count, and break the loop at the last completion. */
static void t_ev_cb(muster_t *m, const muster_reply *r, void *arg)
{
    struct t_evstop *s = arg;
    t_count(m, r, &s->t);
    if (s->t.done == s->want)
        event_base_loopbreak(s->base);
}

/* The libevent adapter: a parked get, adds and a release, all on event_base_dispatch. */
static void t_libevent(const struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "lev", NULL);
    struct event_base *base = event_base_new();
    struct t_evstop s = {{0}, 12, base};
    struct t_evstop g = {{0}, 1, base};
    if (!m || !base)
        goto out;
    CHECK_EQ(muster_libevent_attach(m, base), MUSTER_OK);
    CHECK_EQ(muster_async_get(m, "lev/k", 1, 5000, t_ev_cb, &g), MUSTER_OK);
    for (int i = 0; i < 11; i++)
        CHECK_EQ(muster_async_add(m, "lev/n", 1, 5000, t_ev_cb, &s), MUSTER_OK);
    CHECK_EQ(muster_async_set(m, "lev/k", "v", 1, 5000, t_ev_cb, &s), MUSTER_OK);
    struct timeval limit = {5, 0};
    event_base_loopexit(base, &limit);
    event_base_dispatch(base);
    if (g.t.done == 0) {
        event_base_loopexit(base, &limit);
        event_base_dispatch(base);
    }
    CHECK_EQ(s.t.done, 12);
    CHECK_EQ(s.t.ok, 12);
    CHECK_EQ(g.t.done, 1);
    CHECK_STR(g.t.value, "v");
    int64_t n = 0;
    CHECK_EQ(muster_add(m, "lev/n", 0, &n, 0), MUSTER_OK);
    CHECK_EQ(n, 11);
out:
    muster_close(m);   /* frees the adapter's events: before the base */
    if (base)
        event_base_free(base);
}

int main(void)
{
    h_init("async", 80);
    struct h_daemon d;
    if (h_start(&d, NULL) != 0)
        return h_finish();
    H_RUN(t_many, &d);
    H_RUN(t_out_of_order, &d);
    H_RUN(t_deadline_server, &d);
    H_RUN(t_threads, &d);
    H_RUN(t_cancel, &d);
    H_RUN(t_libevent, &d);
    H_RUN(t_deadline_client, &d);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
