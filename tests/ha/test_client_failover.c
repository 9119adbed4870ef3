/*
 * libmuster failover against a real --ha set (3-member etcd cluster, two
 * daemons): a URL listing every endpoint (standby first) reaches the
 * leader, as does the CLI; when the leader is SIGKILLed, a client looping
 * on set/get goes on by itself on the new leader, an add in flight is
 * reported retryable and not repeated, and a wait parked on the old leader
 * is re-issued and completes when its key is set on the new one, and a
 * watch is registered again under the id the caller holds.  The same with
 * asynchronous calls in flight on one handle: a parked get and a set are
 * sent again, an add comes back MUSTER_ECONN, undecided.  Skipped without
 * etcd.
 */
#include <muster/adapters/poll.h>
#include <muster/async.h>
#include <muster/muster.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "hclient.h"
#include "hetcd.h"
#include "hha.h"

/* The lease every daemon of the set uses, ms. */
#define TTL_MS 2000
/* The library's backoff cap (client/conn.c): the most a reconnect may sleep. */
#define BACKOFF_CAP_MS 2000
/* Per-call timeout of the failover handles: long enough to ride out a failover. */
#define CALL_MS 15000

static struct hetcd cluster;
static char ha_url[256];
static struct h_daemon da, db;
static char both_url[256];   /* standby first, then the leader */

/* Sleep one polling step (awaiting a condition checked by the caller, always bounded). */
static void step(void)
{
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

/* Start a daemon of the set. */
static int start(struct h_daemon *d)
{
    const char *extra[] = {"--ha", ha_url, "--ha-ttl", "2000", NULL};
    return h_start(d, extra);
}

/* Set a key on m until the status is want or ms pass; the last status. */
static int set_until(muster_t *m, int want, int64_t ms)
{
    int64_t until = h_now_ms() + ms;
    int rc;
    while ((rc = muster_set(m, "probe", "v", 1, 1000)) != want && h_now_ms() < until)
        step();
    return rc;
}

/* A failover handle on the URL listing both daemons; NULL counts as a failure. */
static muster_t *connect_both(void)
{
    int err = 0;
    muster_t *m = muster_connect(both_url, &err);
    CHECK_EQ(err, MUSTER_OK);
    return m;
}

/* Whether the leader's listening port has a connection holding unread bytes
 * (/proc/net/tcp): a request sent to a stopped daemon is there. */
static int unread_at(uint16_t port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    char line[512];
    int found = 0;
    if (!f)
        return 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned lport, st, txq, rxq;
        if (sscanf(line, " %*d: %*8x:%x %*8x:%*x %x %x:%x", &lport, &st, &txq, &rxq) == 4)
            found = lport == port && st == 1 /* ESTABLISHED */ && rxq > 0;
    }
    fclose(f);
    return found;
}

/* The set/get loop that runs across the kill. */
struct looper {
    muster_t *m;
    volatile int stop;
    int iterations;
    int failures;
    int first_fail_rc;
    int unreplicated;                /* gets that found nothing: a set acknowledged by the dead leader */
    volatile int64_t last_ok_ms;     /* when the latest op succeeded */
    int64_t first_ok_after_ms;       /* first success completed after kill_ms */
    volatile int64_t kill_ms;
};

/* Set then read back a fresh value, over and over, until told to stop. */
static void *loop_main(void *arg)
{
    struct looper *l = arg;
    for (int i = 0; !l->stop && i < 1000000; i++) {
        char key[32], val[32];
        snprintf(key, sizeof key, "loop/%d", i);
        snprintf(val, sizeof val, "v%d", i);
        int rc = muster_set(l->m, key, val, strlen(val), CALL_MS);
        void *got = NULL;
        size_t len = 0;
        if (rc == MUSTER_OK)
            rc = muster_get(l->m, key, 0, CALL_MS, &got, &len);
        if (rc == MUSTER_OK && (len != strlen(val) || memcmp(got, val, len) != 0))
            rc = -1;
        muster_free(got);
        /* Set on the old leader, read on the new one: needs replication (see the end of t_kill_leader). */
        if (rc == MUSTER_ENOTFOUND) {
            l->unreplicated++;
            rc = MUSTER_OK;
        }
        if (rc != MUSTER_OK && l->failures++ == 0)
            l->first_fail_rc = rc;
        if (rc == MUSTER_OK) {
            int64_t now = h_now_ms();
            if (l->kill_ms && !l->first_ok_after_ms)
                l->first_ok_after_ms = now;
            l->last_ok_ms = now;
        }
        l->iterations++;
    }
    return NULL;
}

/* A blocking get parked across the kill. */
struct waiter {
    muster_t *m;
    int rc;
    char value[32];
};

/* Wait for key "late" and keep what it holds. */
static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    void *got = NULL;
    size_t len = 0;
    w->rc = muster_get(w->m, "late", 1, 20000, &got, &len);
    if (w->rc == MUSTER_OK)
        snprintf(w->value, sizeof w->value, "%.*s", (int)len, (const char *)got);
    muster_free(got);
    return NULL;
}

/* An add sent while the leader is stopped, so it is in flight when it dies. */
struct adder {
    muster_t *m;
    volatile int started;
    int rc;
    int64_t result;
};

/* Add 1 to "ctr" once. */
static void *add_main(void *arg)
{
    struct adder *a = arg;
    a->started = 1;
    a->rc = muster_add(a->m, "ctr", 1, &a->result, CALL_MS);
    return NULL;
}

/* One asynchronous call's outcome (t_kill_leader's handle x). */
struct outcome {
    int done;
    int err;
    char value[32];
};

/* Keep an asynchronous call's outcome. */
static void outcome_cb(muster_t *m, const muster_reply *r, void *arg)
{
    struct outcome *o = arg;
    (void)m;
    o->done = 1;
    o->err = r->err;
    if (r->value)
        snprintf(o->value, sizeof o->value, "%.*s", (int)r->len, (const char *)r->value);
}

/* Drive m through the poll adapter until o is done or ms pass; 1 when done. */
static int drive_until(muster_t *m, const struct outcome *o, int64_t ms)
{
    int64_t until = h_now_ms() + ms;
    while (!o->done && h_now_ms() < until)
        muster_poll_once(m, 50);
    return o->done;
}

/* Run the CLI's get on URL; 0 when it printed want. */
static int cli_get(const char *url, const char *key, const char *want)
{
    const char *cli = getenv("MUSTER_TEST_CLI");
    char cmd[1024], out[128] = "";
    if (!cli)
        return -1;
    snprintf(cmd, sizeof cmd, "'%s' --url '%s' --timeout 5000 get %s", cli, url, key);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    if (st != 0 || strcmp(out, want) != 0)
        printf("  cli: status %d, printed '%s'\n", st, out);
    return st == 0 && strcmp(out, want) == 0 ? 0 : -1;
}

/* Standby first in the URL, or only the standby: the handle still reaches the leader. */
static void t_find_leader(void *unused)
{
    (void)unused;
    muster_t *direct = hc_connect(&da, "ha", NULL);
    muster_t *m = connect_both();
    if (!direct || !m)
        goto out;
    CHECK_EQ(hc_set_str(m, "found", "leader"), MUSTER_OK);
    HC_EXPECT(direct, "found", "leader"); /* the write went to a, the leader */
    CHECK_EQ(muster_set(m, "found2", "x", 1, 0), MUSTER_OK);
    muster_close(m);

    /* A URL naming only the standby: the redirect leads to an address it does not list. */
    char only_b[128];
    snprintf(only_b, sizeof only_b, "tcp://127.0.0.1:%u/ha?failover=1", (unsigned)db.port);
    int err = 0;
    m = muster_connect(only_b, &err);
    CHECK_EQ(err, MUSTER_OK);
    if (m)
        CHECK_EQ(hc_set_str(m, "found3", "via-redirect"), MUSTER_OK);
    HC_EXPECT(direct, "found3", "via-redirect");

    /* The CLI takes the same URL. */
    CHECK_EQ(cli_get(both_url, "found", "leader"), 0);
out:
    muster_close(m);
    muster_close(direct);
}

/* Wait (bounded) until the leader has parked a wait. */
static int await_parked(struct h_daemon *d)
{
    for (int64_t until = h_now_ms() + 5000; h_now_ms() < until; step())
        if (h_stat(d, "waits_parked") >= 1)
            return 1;
    return 0;
}

/* The leader dies under a looping client, a parked wait and an add in flight. */
static void t_kill_leader(void *unused)
{
    (void)unused;
    struct looper l = {0};
    struct waiter w = {0};
    struct adder a = {0};
    struct outcome xget = {0}, xset = {0}, xadd = {0};
    uint64_t wid = 0;
    muster_t *pre = connect_both();
    muster_t *watcher = connect_both();
    muster_t *x = connect_both();
    l.m = connect_both();
    w.m = connect_both();
    a.m = connect_both();
    if (!pre || !l.m || !w.m || !a.m || !watcher || !x)
        goto out;
    CHECK_EQ(muster_watch(watcher, "w/", &wid, 0), MUSTER_OK);
    CHECK_EQ(muster_async_get(x, "late", 1, 20000, outcome_cb, &xget), MUSTER_OK);
    CHECK_EQ(hc_set_str(pre, "acked", "before"), MUSTER_OK);
    pthread_t lt, wt, at;
    pthread_create(&lt, NULL, loop_main, &l);
    pthread_create(&wt, NULL, wait_main, &w);
    CHECK(await_parked(&da));
    for (int64_t until = h_now_ms() + 5000; l.iterations < 20 && h_now_ms() < until;)
        step();
    CHECK(l.iterations >= 20);

    /* Stop the leader, send the add into it, then kill it with the add unread. */
    kill(da.pid, SIGSTOP);
    CHECK_EQ(muster_async_set(x, "xset", "1", 1, CALL_MS, outcome_cb, &xset), MUSTER_OK);
    CHECK_EQ(muster_async_add(x, "xctr", 1, CALL_MS, outcome_cb, &xadd), MUSTER_OK);
    pthread_create(&at, NULL, add_main, &a);
    int64_t until = h_now_ms() + 2000;
    while (!(a.started && unread_at(da.port)) && h_now_ms() < until)
        step();
    CHECK(unread_at(da.port));
    l.kill_ms = h_now_ms();
    kill(da.pid, SIGKILL);
    h_stop(&da);

    /* The add: reported retryable, not repeated on the new leader. */
    pthread_join(at, NULL);
    CHECK_EQ(a.rc, MUSTER_ECONN);
    CHECK(muster_err_retryable(a.rc));
    printf("  add in flight: %s (%s)\n", muster_strerror(a.rc), muster_last_error(a.m));

    /* The loop goes on by itself. */
    until = h_now_ms() + TTL_MS + 1000 + BACKOFF_CAP_MS + 3000;
    while (!l.first_ok_after_ms && h_now_ms() < until)
        step();
    int64_t took = l.first_ok_after_ms ? l.first_ok_after_ms - l.kill_ms : -1;
    printf("  loop resumed %lld ms after the kill\n", (long long)took);
    CHECK(took >= 0 && took <= TTL_MS + 1000 + BACKOFF_CAP_MS);
    void *v = NULL;
    size_t len = 0;
    CHECK_EQ(muster_get(a.m, "ctr", 0, CALL_MS, &v, &len), MUSTER_ENOTFOUND);
    muster_free(v);
    int64_t n = 0;
    CHECK_EQ(muster_add(a.m, "ctr", 1, &n, CALL_MS), MUSTER_OK); /* the caller's own retry */
    CHECK_EQ(n, 1);

    /* The asynchronous handle: its set is sent again, its add reported undecided and not repeated. */
    CHECK(drive_until(x, &xset, TTL_MS + 1000 + BACKOFF_CAP_MS + 3000));
    CHECK(drive_until(x, &xadd, 2000));
    CHECK_EQ(xset.err, MUSTER_OK);
    CHECK_EQ(xadd.err, MUSTER_ECONN);
    HC_EXPECT(pre, "xset", "1");
    HC_EXPECT(pre, "xctr", NULL);
    CHECK_EQ(xget.done, 0);

    /* The parked waits (sync and async) were re-issued on the new leader and complete when the key is set there. */
    CHECK_EQ(hc_set_str(pre, "late", "here"), MUSTER_OK);
    pthread_join(wt, NULL);
    CHECK_EQ(w.rc, MUSTER_OK);
    CHECK_STR(w.value, "here");
    CHECK(drive_until(x, &xget, 5000));
    CHECK_EQ(xget.err, MUSTER_OK);
    CHECK_STR(xget.value, "here");

    /* The watch follows the handle to the new leader, under the same id. */
    muster_event *ev = NULL;
    /* Waiting for events reconnects the idle handle and watches again; nothing came yet. */
    CHECK_EQ(muster_next_event(watcher, &ev, 1000), MUSTER_ETIMEDOUT);
    CHECK_EQ(hc_set_str(pre, "w/x", "after"), MUSTER_OK);
    CHECK_EQ(muster_next_event(watcher, &ev, 5000), MUSTER_OK);
    if (ev) {
        CHECK_EQ(ev->kind, MUSTER_EVENT_SET);
        CHECK_EQ(ev->watch_id, wid);
        CHECK_STR(ev->key, "w/x");
    }
    muster_event_free(ev);
    CHECK(muster_events_dropped(watcher) >= 1); /* it was told it may have missed changes */
    CHECK_EQ(muster_unwatch(watcher, wid, 0), MUSTER_OK);

    /* A pipeline on a handle idle across the failover: sets, gets and an add, all answered. */
    muster_pipeline *p = muster_pipeline_create(w.m, NULL);
    muster_pipeline_set(p, "pipe/a", "1", 1);
    muster_pipeline_get(p, "pipe/a");
    muster_pipeline_add(p, "pipe/n", 5);
    CHECK_EQ(muster_pipeline_run(p, 0), MUSTER_OK);
    const void *pv = NULL;
    size_t plen = 0;
    int64_t pn = 0;
    CHECK_EQ(muster_pipeline_result(p, 1, &pv, &plen, NULL), MUSTER_OK);
    CHECK_MEM(pv, plen, "1", 1);
    CHECK_EQ(muster_pipeline_result(p, 2, NULL, NULL, &pn), MUSTER_OK);
    CHECK_EQ(pn, 5);
    muster_pipeline_destroy(p);

    int64_t before = l.iterations;
    until = h_now_ms() + 5000;
    while (l.iterations < before + 20 && h_now_ms() < until)
        step();
    l.stop = 1;
    pthread_join(lt, NULL);
    CHECK_EQ(l.failures, 0);
    if (l.failures)
        printf("  loop: %d failures, first %s\n", l.failures, muster_strerror(l.first_fail_rc));

    /* NEEDS REPLICATION: the only assertions that depend on the log being
     * replicated through etcd (the new leader replays it): an acknowledged
     * pre-failover write is readable after, and the loop's read-back of a
     * set the old leader acknowledged just before dying finds it.  Until
     * replication lands the new leader starts empty; enable with
     * MUSTER_TEST_HA_REPLICATED=1. */
    const char *rep = getenv("MUSTER_TEST_HA_REPLICATED");
    printf("  loop: %d read-backs found nothing (a set acknowledged by the old leader)\n", l.unreplicated);
    if (rep && strcmp(rep, "1") == 0) {
        HC_EXPECT(pre, "acked", "before");
        CHECK_EQ(l.unreplicated, 0);
    }
out:
    muster_close(x);
    muster_close(watcher);
    muster_close(pre);
    muster_close(l.m);
    muster_close(w.m);
    muster_close(a.m);
}

int main(void)
{
    h_init("client-failover", 100);
    if (hha_cluster(&cluster, ha_url, sizeof ha_url) != 0)
        return h_finish();
    CHECK_EQ(start(&da), 0);
    muster_t *ma = hc_connect(&da, "ha", NULL);
    CHECK_EQ(set_until(ma, MUSTER_OK, 5000), MUSTER_OK); /* alone, a wins */
    CHECK_EQ(start(&db), 0);
    muster_t *mb = hc_connect(&db, "ha", NULL);
    CHECK_EQ(set_until(mb, MUSTER_ENOTLEADER, 5000), MUSTER_ENOTLEADER);
    muster_close(ma);
    muster_close(mb);
    snprintf(both_url, sizeof both_url, "tcp://127.0.0.1:%u,127.0.0.1:%u/ha", (unsigned)db.port,
             (unsigned)da.port);
    if (h_failures() == 0) {
        H_RUN(t_find_leader, NULL);
        H_RUN(t_kill_leader, NULL);
    }
    CHECK_EQ(h_stop(&db), 0);
    hetcd_stop(&cluster);
    return h_finish();
}
