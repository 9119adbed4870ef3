/*
 * Rendezvous liveness against a real musterd with a short heartbeat timeout:
 * a member process killed with SIGKILL is reported to the survivor at once
 * (the delay is measured and printed), and a member process stopped with
 * SIGSTOP is caught by the heartbeat timeout, after which its own heartbeat
 * answers STALE_GENERATION.  Members are separate processes (fork), each
 * with its own handle; they report through a pipe, never through checks.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <muster/rdzv.h>

#include "hclient.h"

#define HEARTBEAT_TIMEOUT_MS 500

static struct h_daemon d;

/* A member process and the pipe it reports on. */
struct member {
    pid_t pid;
    int rfd;
};

/* In the child: heartbeat every interval until the generation breaks, then report the code. */
static void member_heartbeat_loop(muster_t *m, const muster_assignment *a, int wfd)
{
    uint32_t every = muster_rdzv_heartbeat_interval(m);
    /* Bounded: a member outliving its test is killed by this limit at the latest. */
    for (int i = 0; i < 60000 / (int)(every ? every : 1); i++) {
        int rc = muster_rdzv_heartbeat(m, a->generation, 2000);
        if (rc != MUSTER_OK) {
            char line[32];
            int n = snprintf(line, sizeof line, "hb %d\n", rc);
            (void)!write(wfd, line, (size_t)n);
            return;
        }
        struct timespec ts = {0, (long)every * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* In the child: join ns as node id, report "joined GEN", then heartbeat; never returns. */
static void member_child(const char *ns, const char *id, int wfd)
{
    alarm(0);
    int err = 0;
    muster_t *m = hc_try_connect(&d, ns, NULL, &err);
    muster_assignment *a = NULL;
    muster_rdzv_opts o = {.node_id = id, .local_world_size = 1, .min_nodes = 2, .max_nodes = 2};
    if (!m || muster_rdzv_join(m, &o, &a, 10000) != MUSTER_OK)
        _exit(2);
    char line[64];
    int n = snprintf(line, sizeof line, "joined %" PRIu64 "\n", a->generation);
    (void)!write(wfd, line, (size_t)n);
    member_heartbeat_loop(m, a, wfd);
    muster_assignment_free(a);
    muster_close(m);
    _exit(0);
}

/* Start a member process joining ns as id. */
static void member_start(struct member *mb, const char *ns, const char *id)
{
    int p[2];
    mb->pid = -1;
    mb->rfd = -1;
    if (pipe(p) < 0) {
        CHECK(!"pipe");
        return;
    }
    fflush(NULL);
    mb->pid = fork();
    if (mb->pid == 0) {
        close(p[0]);
        member_child(ns, id, p[1]);
    }
    close(p[1]);
    h_track(mb->pid);
    mb->rfd = p[0];
    CHECK(mb->pid > 0);
}

/* Read one line the member wrote, waiting up to ms; returns length or -1. */
static int member_line(struct member *mb, char *buf, size_t n, int ms)
{
    return h_read_line(mb->rfd, buf, n, ms);
}

/* Kill (if still running) and reap the member. */
static void member_end(struct member *mb)
{
    h_kill_child(&mb->pid, &mb->rfd);
}

/* Wait for a MEMBER_LOST about gen, heartbeating meanwhile; returns ms waited or -1. */
static int64_t await_lost(muster_t *m, uint64_t gen, int64_t t0, int ms, char *node, size_t n)
{
    int64_t end = t0 + ms;
    while (h_now_ms() < end) {
        muster_event *ev = NULL;
        uint32_t slice = muster_rdzv_heartbeat_interval(m);
        if (muster_next_event(m, &ev, slice) == MUSTER_OK) {
            int hit = ev->kind == MUSTER_EVENT_MEMBER_LOST && ev->generation == gen;
            if (hit)
                snprintf(node, n, "%s", ev->node_id ? ev->node_id : "");
            muster_event_free(ev);
            if (hit)
                return h_now_ms() - t0;
            continue;
        }
        /* Keep this member alive while waiting for the other to be found out. */
        int rc = muster_rdzv_heartbeat(m, gen, 0);
        if (rc != MUSTER_OK && rc != MUSTER_ESTALE)
            return -1;
    }
    return -1;
}

/* Join ns as "a" next to a member process "b"; returns the survivor's handle and assignment. */
static muster_t *pair_up(const char *ns, struct member *mb, muster_assignment **a)
{
    char line[64];
    member_start(mb, ns, "b");
    muster_t *m = hc_connect(&d, ns, NULL);
    muster_rdzv_opts o = {.node_id = "a", .local_world_size = 1, .min_nodes = 2, .max_nodes = 2};
    *a = NULL;
    if (!m)
        return NULL;
    CHECK_EQ(muster_rdzv_join(m, &o, a, 10000), MUSTER_OK);
    CHECK(member_line(mb, line, sizeof line, 5000) > 0);
    CHECK(strncmp(line, "joined ", 7) == 0);
    if (*a)
        CHECK(strtoull(line + 7, NULL, 10) == (*a)->generation);
    return m;
}

/* A member process killed with SIGKILL: the survivor gets MEMBER_LOST almost at once. */
static void t_sigkill(void *arg)
{
    (void)arg;
    struct member mb;
    muster_assignment *a;
    char node[128] = "";
    muster_t *m = pair_up("kill", &mb, &a);
    if (!m || !a) {
        member_end(&mb);
        muster_close(m);
        return;
    }
    int64_t t0 = h_now_ms();
    kill(mb.pid, SIGKILL);
    int64_t delay = await_lost(m, a->generation, t0, 5000, node, sizeof node);
    printf("member SIGKILL -> MEMBER_LOST delay: %" PRId64 " ms (target <= 200 ms)\n", delay);
    CHECK(delay >= 0);
    CHECK(delay < 2000);
    CHECK_STR(node, "b");
    CHECK_EQ(muster_rdzv_heartbeat(m, a->generation, 0), MUSTER_ESTALE);
    member_end(&mb);
    muster_assignment_free(a);
    muster_close(m);
}

/* A member process stopped with SIGSTOP: the heartbeat timeout finds it, and after SIGCONT
 * its own heartbeat answers STALE_GENERATION. */
static void t_sigstop(void *arg)
{
    (void)arg;
    struct member mb;
    muster_assignment *a;
    char node[128] = "", line[64];
    long long before = h_stat(&d, "rdzv_heartbeat_timeouts");
    muster_t *m = pair_up("stop", &mb, &a);
    if (!m || !a) {
        member_end(&mb);
        muster_close(m);
        return;
    }
    CHECK_EQ(muster_rdzv_heartbeat_interval(m), HEARTBEAT_TIMEOUT_MS / 3);
    int64_t t0 = h_now_ms();
    kill(mb.pid, SIGSTOP);
    int64_t delay = await_lost(m, a->generation, t0, 5000, node, sizeof node);
    printf("member SIGSTOP -> MEMBER_LOST delay: %" PRId64 " ms (heartbeat timeout %d ms)\n", delay,
           HEARTBEAT_TIMEOUT_MS);
    CHECK(delay >= HEARTBEAT_TIMEOUT_MS / 3);
    CHECK(delay < 3000);
    CHECK_STR(node, "b");
    CHECK(h_stat(&d, "rdzv_heartbeat_timeouts") == before + 1);
    kill(mb.pid, SIGCONT);
    CHECK(member_line(&mb, line, sizeof line, 5000) > 0);
    CHECK_STR(line, "hb 10\n");  /* MUSTER_ESTALE */
    member_end(&mb);
    muster_assignment_free(a);
    muster_close(m);
}

int main(void)
{
    char hb[32];
    snprintf(hb, sizeof hb, "%d", HEARTBEAT_TIMEOUT_MS);
    const char *extra[] = {"--heartbeat-timeout", hb, NULL};
    h_init("rdzv_liveness", 60);
    if (h_start(&d, extra) < 0)
        return h_finish();
    H_RUN(t_sigkill, NULL);
    H_RUN(t_sigstop, NULL);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
