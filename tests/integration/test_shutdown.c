/*
 * Integration test of the SIGTERM drain: parked requests are answered
 * SHUTTING_DOWN, every connection is told by Event{shutdown} and closed,
 * a libmuster handle sees the event, and musterd exits 0.  The counter
 * dump at exit follows --log-level; the one SIGUSR1 asks for does not.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hclient.h"
#include "raw.h"

/* A libmuster handle blocked in get while the daemon drains. */
struct t_blocked {
    muster_t *m;
    pthread_t th;
    int rc;
};

/* Thread body: a long blocking get on an absent key. */
static void *t_block(void *arg)
{
    struct t_blocked *b = arg;
    void *v = NULL;
    size_t n = 0;
    b->rc = muster_get(b->m, "sd/never", 1, 30000, &v, &n);
    muster_free(v);
    return NULL;
}

/* Park a get on a raw connection and prove it parked (a later ping answers first). */
static int t_park(const struct h_daemon *d)
{
    int fd = raw_open(d->port, "sd");
    uint64_t id = 0;
    if (fd < 0)
        return -1;
    CHECK_EQ(raw_get(fd, 1, "sd/never", 1, 30000), 0);
    CHECK_EQ(raw_ping(fd, 2), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 2);
    return fd;
}

/* Read the rest of a drained raw connection: the parked get's answer, a shutdown event, then close. */
static void t_expect_drained(int fd)
{
    int saw_event = 0, saw_reply = 0;
    for (int i = 0; i < 8; i++) {
        Muster__ServerFrame *f = raw_recv(fd, 5000, NULL);
        if (!f)
            break;
        if (f->frame_case == MUSTER__SERVER_FRAME__FRAME_EVENT)
            saw_event |= f->event->event_case == MUSTER__EVENT__EVENT_SHUTDOWN;
        if (f->frame_case == MUSTER__SERVER_FRAME__FRAME_RESPONSE) {
            CHECK_EQ(f->response->id, 1);
            CHECK_EQ(f->response->status, MUSTER_ESHUTDOWN);
            saw_reply = 1;
        }
        raw_free(f);
    }
    CHECK(saw_reply);
    CHECK(saw_event);
    CHECK(raw_await_close(fd, 5000));
}

/* Wait (bounded) until the daemon has parked n waits in all. */
static void t_await_parked(struct h_daemon *d, long long n)
{
    long long parked = -1;
    for (int i = 0; i < 100 && parked < n; i++) {
        parked = h_stat(d, "waits_parked");
        if (parked < n)
            usleep(10000);
    }
    CHECK(parked >= n);
}

/* Drain with parked raw waits, a blocked libmuster call and an idle handle; exit 0. */
static void t_drain(struct h_daemon *d)
{
    int a = t_park(d), b = t_park(d);
    muster_t *idle = hc_connect(d, "sd", NULL);
    struct t_blocked blk = {.m = hc_connect(d, "sd", NULL), .rc = -1};
    muster_event *ev = NULL;
    long long answered;
    CHECK(a >= 0 && b >= 0);
    if (blk.m) {
        CHECK_EQ(pthread_create(&blk.th, NULL, t_block, &blk), 0);
        t_await_parked(d, 3);
    }
    CHECK_EQ(kill(d->pid, SIGTERM), 0);
    if (a >= 0)
        t_expect_drained(a);
    if (b >= 0)
        t_expect_drained(b);
    if (idle) {
        CHECK_EQ(muster_next_event(idle, &ev, 5000), MUSTER_OK);
        CHECK(ev && ev->kind == MUSTER_EVENT_SHUTDOWN);
        muster_event_free(ev);
    }
    if (blk.m) {
        pthread_join(blk.th, NULL);
        CHECK_EQ(blk.rc, MUSTER_ESHUTDOWN);
    }
    CHECK_EQ(h_stop(d), 0);
    /* The exit dump counts every parked request answered SHUTTING_DOWN. */
    answered = h_stat_logged(d, "shutdown_answered");
    CHECK(answered >= (blk.m ? 3 : 2));
    muster_close(idle);
    muster_close(blk.m);
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
}

/* An idle daemon exits 0 on SIGTERM and SIGINT. */
static void t_idle_exit(void *unused)
{
    struct h_daemon d;
    (void)unused;
    if (h_start(&d, NULL) == 0)
        CHECK_EQ(h_stop(&d), 0);
    if (h_start(&d, NULL) == 0) {
        int64_t end = h_now_ms() + 10000;
        kill(d.pid, SIGINT);
        while (h_alive(&d) && h_now_ms() < end)
            usleep(5000);
        CHECK(!h_alive(&d));
        CHECK_EQ(h_stop(&d), 0);
    }
}

/* Lines of the daemon's log (its stderr) that start a counter dump or carry a counter. */
static void t_count_stat_lines(const struct h_daemon *d, int *begins, int *stats)
{
    char line[4096];
    FILE *f = fopen(d->log, "r");
    *begins = *stats = 0;
    CHECK(f != NULL);
    if (!f)
        return;
    /* A line is "TIMESTAMP LEVEL text". */
    while (fgets(line, sizeof line, f)) {
        *begins += strstr(line, " stats begin (") != NULL;
        *stats += strstr(line, " stat ") != NULL && strchr(line, '=') != NULL;
    }
    fclose(f);
}

/* Under --log-level error, SIGTERM ends musterd without a counter dump, yet SIGUSR1 still dumps;
 * at the default (info) the exit dump is there. */
static void t_exit_dump_level(void *unused)
{
    const char *quiet[] = {"--log-level", "error", NULL};
    struct h_daemon d;
    int begins, stats;
    (void)unused;
    if (h_start(&d, quiet) == 0) {
        CHECK_EQ(h_stop(&d), 0);
        t_count_stat_lines(&d, &begins, &stats);
        CHECK_EQ(begins, 0);
        CHECK_EQ(stats, 0);
        if (begins || stats)
            h_dump_log(&d);
    }
    if (h_start(&d, quiet) == 0) {
        CHECK(h_stat(&d, "connections_accepted") >= 0); /* the SIGUSR1 dump, asked for */
        CHECK_EQ(h_stop(&d), 0);
        t_count_stat_lines(&d, &begins, &stats);
        CHECK_EQ(begins, 1);
        CHECK(stats > 50);
    }
    if (h_start(&d, NULL) == 0) {
        CHECK_EQ(h_stop(&d), 0);
        t_count_stat_lines(&d, &begins, &stats);
        CHECK_EQ(begins, 1);
        CHECK(stats > 50);
        CHECK(h_stat_logged(&d, "connections_accepted") >= 0);
    }
}

/* Run the shutdown tests. */
int main(void)
{
    struct h_daemon d;
    h_init("shutdown", 60);
    if (h_start(&d, NULL) < 0)
        return h_finish();
    H_RUN(t_drain, &d);
    H_RUN(t_idle_exit, NULL);
    H_RUN(t_exit_dump_level, NULL);
    return h_finish();
}
