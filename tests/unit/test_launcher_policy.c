/*
 * In-process tests of the launcher's policy (client/launcher/run_policy.c):
 * every state's transitions, restart counting, a failure during a restart,
 * signals while joining, running, finishing and stopping, the grace period
 * and the kill wait, heartbeats, and the exit status chosen at each end.
 * The policy is fed events by hand on a fake clock and its actions are
 * compared as text ("report, leave 0, signal 15"), so every case runs in
 * microseconds: no store, no process, no sleep.  This program links the
 * policy alone; tpolicy.c feeds it, and test_launcher_inplace.c covers
 * --recovery in-place and --standby.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tpolicy.h"

/* ------------------------------------------------------------- joining */

/* The first turn asks for the first join; nothing more happens until it is answered. */
static void t_first_join(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 0, 1);
    CHECK_EQ(p.state, RUN_ST_START);
    CHECK_STR(t_turn(&p), "join 1");
    CHECK_EQ(p.state, RUN_ST_JOINING);
    t_now = 60000;
    CHECK_STR(t_turn(&p), "");
    CHECK_EQ(run_policy_wake(&p), UINT64_MAX);
    t_form(&p, 1, 1, 2);
    CHECK_EQ(p.member, 1);
    CHECK_EQ(p.generation, 1);
    CHECK_EQ(p.restarts, 0);
}

/* A failed join ends with the join's status; a completed job ends with 0, running nothing. */
static void t_join_ends(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 1);
    t_turn(&p);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_JOIN_FAILED, .status = 3});
    CHECK_STR(t_turn(&p), "exit 3");
    CHECK_EQ(p.state, RUN_ST_ENDED);
    CHECK_EQ(p.exit_code, 3);
    CHECK_STR(t_turn(&p), "");
    t_init(&p, 3, 1);
    t_turn(&p);
    t_tell(&p, RUN_EV_COMPLETED);
    CHECK_STR(t_turn(&p), "exit 0");
    CHECK_EQ(p.exit_code, 0);
}

/* SIGTERM while the join has not been answered ends the launcher at once with 128+15: no worker runs. */
static void t_sigterm_joining(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 1);
    t_turn(&p);
    CHECK_STR(t_signal(&p, SIGTERM), "");
    CHECK_STR(t_turn(&p), "exit 143");
    CHECK_EQ(p.exit_code, 128 + SIGTERM);
    /* The answer, when it came first, wins: the workers start and the signal stops them next turn. */
    t_init(&p, 3, 1);
    t_turn(&p);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_JOINED, .generation = 1, .num_nodes = 1, .every = T_EVERY});
    t_signal(&p, SIGTERM);
    CHECK_STR(t_turn(&p), "start");
    t_feed(&p, (struct run_ev){.kind = RUN_EV_STARTED, .count = 1});
    CHECK_STR(t_turn(&p), "say signal, signal 15");
}

/* ----------------------------------------------------------- finishing */

/* Alone, the run ends with 0 as soon as every worker exited 0. */
static void t_finish_alone(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 1);
    t_running(&p, 1, 1, 2);
    CHECK_STR(t_exit(&p, 0, 0), "");
    CHECK_STR(t_turn(&p), "");
    CHECK_STR(t_exit(&p, 1, 0), "");
    CHECK_STR(t_turn(&p), "complete, leave 1, release, say finished, exit 0");
    CHECK_EQ(p.state, RUN_ST_ENDED);
    CHECK_EQ(p.exit_code, 0);
    CHECK_EQ(p.member, 0);
}

/* With peers, the node counts itself done and ends only once the count reaches the generation's nodes. */
static void t_finish_waits(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 2);
    t_running(&p, 4, 2, 1);
    t_exit(&p, 0, 0);
    CHECK_STR(t_turn(&p), "watch 1");
    CHECK_EQ(p.state, RUN_ST_FINISHING);
    t_tell(&p, RUN_EV_WATCHING);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_DONE_COUNT, .count = 1});
    CHECK_STR(t_turn(&p), "");
    /* The server dropped the watch: watch again and read the count (adding nothing). */
    t_tell(&p, RUN_EV_WATCH_ENDED);
    CHECK_STR(t_turn(&p), "watch 0");
    t_tell(&p, RUN_EV_WATCHING);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_DONE_COUNT, .count = 2});
    /* Once every node is done, a peer's leave is the expected end, not a loss. */
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 4}), "");
    CHECK_STR(t_turn(&p), "unwatch, complete, leave 1, release, say finished, exit 0");
    CHECK_EQ(p.exit_code, 0);
}

/* A member lost before every node is done breaks the generation: a restart, as in RUNNING. */
static void t_finish_lost(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 2);
    t_running(&p, 4, 2, 1);
    t_exit(&p, 0, 0);
    t_turn(&p);
    t_tell(&p, RUN_EV_WATCHING);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_DONE_COUNT, .count = 1});
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 4}), "say lost");
    CHECK_STR(t_turn(&p), "unwatch, signal 15");
    CHECK_EQ(p.state, RUN_ST_STOPPING);
    CHECK_STR(t_turn(&p), "release, say restart, join 0");
    CHECK_EQ(p.restarts, 1);
    /* A watch that could not be made breaks it the same way. */
    t_form(&p, 5, 2, 1);
    t_exit(&p, 0, 0);
    CHECK_STR(t_turn(&p), "watch 1");
    t_tell(&p, RUN_EV_BROKEN);
    CHECK_STR(t_turn(&p), "signal 15");
}

/* A signal while finishing stops (nothing runs any more) and ends with 128+signal. */
static void t_finish_signal(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 2);
    t_running(&p, 1, 2, 1);
    t_exit(&p, 0, 0);
    t_turn(&p);
    t_tell(&p, RUN_EV_WATCHING);
    t_signal(&p, SIGINT);
    CHECK_STR(t_turn(&p), "unwatch, say signal, signal 2");
    CHECK_STR(t_turn(&p), "leave 0, release, exit 130");
}

/* ------------------------------------------------------------- restarts */

/* A failed worker: report, leave, SIGTERM; once all are reaped a restart is counted and the node re-joins. */
static void t_failure_restarts(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 1);
    t_running(&p, 1, 1, 2);
    t_exit(&p, 1, 3);
    CHECK_STR(t_turn(&p), "report, leave 0, signal 15");
    CHECK_EQ(p.state, RUN_ST_STOPPING);
    CHECK_EQ(p.cause, RUN_CAUSE_FAILED);
    CHECK_EQ(p.member, 0);
    /* No heartbeat once left, however long the stop takes. */
    t_now = 3000;
    CHECK_STR(t_turn(&p), "");
    t_exit(&p, 0, 128 + SIGTERM);
    CHECK_STR(t_turn(&p), "release, say restart, join 0");
    CHECK_EQ(p.restarts, 1);
    CHECK_EQ(p.state, RUN_ST_JOINING);
    t_form(&p, 2, 1, 2);
    CHECK_EQ(p.failure, 0);
}

/* Every failure uses a restart; past --max-restarts the run ends with the status of the failure that
 * began the last stop, not of the workers the stop ended. */
static void t_restart_counting(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 2, 1);
    t_running(&p, 1, 1, 2);
    for (int round = 0; round < 2; round++) {
        t_exit(&p, 0, 7);
        CHECK_STR(t_turn(&p), "report, leave 0, signal 15");
        t_exit(&p, 1, 128 + SIGTERM);
        CHECK_STR(t_turn(&p), "release, say restart, join 0");
        CHECK_EQ(p.restarts, round + 1);
        t_form(&p, (uint64_t)round + 2, 1, 2);
    }
    t_exit(&p, 0, 7);
    t_turn(&p);
    t_exit(&p, 1, 128 + SIGTERM);
    CHECK_STR(t_turn(&p), "release, say no-restarts, exit 7");
    CHECK_EQ(p.exit_code, 7);
    CHECK_EQ(p.restarts, 2);
    /* With --max-restarts 0 a lost member ends the run at once, with 1 (no worker failed). */
    t_init(&p, 0, 2);
    t_running(&p, 1, 2, 1);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1});
    CHECK_STR(t_turn(&p), "signal 15");
    t_exit(&p, 0, 128 + SIGTERM);
    CHECK_STR(t_turn(&p), "release, say no-restarts, leave 0, exit 1");
}

/* A failure during a restart: news of the old generation is ignored, a worker that cannot start in the
 * new one is a failure of its own (a second restart), and a failed re-join ends the run. */
static void t_failure_during_restart(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 2);
    t_running(&p, 1, 2, 2);
    t_exit(&p, 0, 1);
    CHECK_STR(t_turn(&p), "report, leave 0, signal 15");
    /* While stopping: the other worker fails too, and the peer's leave arrives; one restart all the same. */
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1}), "say lost");
    t_exit(&p, 1, 2);
    CHECK_STR(t_turn(&p), "release, say restart, join 0");
    CHECK_EQ(p.restarts, 1);
    /* While re-joining: a late event of generation 1 means nothing to generation 2. */
    t_feed(&p, (struct run_ev){.kind = RUN_EV_JOINED, .generation = 2, .num_nodes = 2, .every = T_EVERY});
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1}), "");
    CHECK_STR(t_turn(&p), "start");
    /* One of two workers could not start (127): the node is no use, a failure like any other. */
    t_feed(&p, (struct run_ev){.kind = RUN_EV_STARTED, .count = 1, .status = 127});
    CHECK_STR(t_turn(&p), "report, leave 0, signal 15");
    t_exit(&p, 0, 128 + SIGTERM);
    CHECK_STR(t_turn(&p), "release, say restart, join 0");
    CHECK_EQ(p.restarts, 2);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_JOIN_FAILED, .status = 4});
    CHECK_STR(t_turn(&p), "exit 4");
}

/* A lost member, a dead store or a stale heartbeat break the generation: leave, stop, restart. */
static void t_lost_restarts(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 2);
    t_running(&p, 1, 2, 1);
    /* Another generation's loss is not this one's. */
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 7}), "");
    CHECK_STR(t_turn(&p), "");
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1}), "say lost");
    /* Said once per generation. */
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1}), "");
    CHECK_STR(t_turn(&p), "signal 15");
    CHECK_EQ(p.cause, RUN_CAUSE_LOST);
    t_exit(&p, 0, 128 + SIGTERM);
    CHECK_STR(t_turn(&p), "release, say restart, join 0");
    t_form(&p, 2, 2, 1);
    CHECK_EQ(p.lost, 0);
    t_tell(&p, RUN_EV_BROKEN);
    CHECK_STR(t_turn(&p), "signal 15");
}

/* A node waiting to join grows a world below its maximum: stop without leaving, re-join, no restart used. */
static void t_grow(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 0, 3);
    t_running(&p, 1, 2, 1);
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_NODE_WAITING, .generation = 1}), "say grow");
    CHECK_STR(t_turn(&p), "signal 15");
    CHECK_EQ(p.cause, RUN_CAUSE_GROW);
    CHECK_EQ(p.member, 1);
    /* Still a member: it heartbeats while its workers stop. */
    t_now = T_EVERY;
    CHECK_STR(t_turn(&p), "heartbeat");
    t_exit(&p, 0, 128 + SIGTERM);
    CHECK_STR(t_turn(&p), "release, join 0");
    CHECK_EQ(p.restarts, 0);
    /* At its maximum the world does not grow. */
    t_form(&p, 2, 3, 1);
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_NODE_WAITING, .generation = 2}), "");
    CHECK_STR(t_turn(&p), "");
}

/* Growing before lost: the re-joins that grow the world also break it; read in one turn, no restart. */
static void t_grow_before_lost(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 0, 3);
    t_running(&p, 1, 2, 1);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1});
    t_feed(&p, (struct run_ev){.kind = RUN_EV_NODE_WAITING, .generation = 1});
    CHECK_STR(t_turn(&p), "signal 15");
    t_exit(&p, 0, 0);
    CHECK_STR(t_turn(&p), "release, join 0");
}

/* ------------------------------------------------------ signals, grace */

/* A signal while running: passed on to the workers, then leave and end with 128+signal. */
static void t_signal_running(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 1);
    t_running(&p, 1, 1, 2);
    t_signal(&p, SIGTERM);
    CHECK_STR(t_turn(&p), "say signal, signal 15");
    CHECK_EQ(p.cause, RUN_CAUSE_SIGNAL);
    /* The membership holds until the workers are gone. */
    CHECK_EQ(p.member, 1);
    t_exit(&p, 0, 0);
    t_exit(&p, 1, 0);
    CHECK_STR(t_turn(&p), "leave 0, release, exit 143");
    /* A worker that failed says more than the signal. */
    t_init(&p, 3, 1);
    t_running(&p, 1, 1, 2);
    t_signal(&p, SIGINT);
    t_exit(&p, 0, 9);
    CHECK_STR(t_turn(&p), "say signal, signal 2");
    t_exit(&p, 1, 128 + SIGINT);
    CHECK_STR(t_turn(&p), "leave 0, release, exit 9");
}

/* Workers still running when the grace period ends get SIGKILL; the kill wait then gives up on them. */
static void t_grace_expiry(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 1);
    t_running(&p, 1, 1, 2);
    t_exit(&p, 0, 1);
    t_now = 100;
    CHECK_STR(t_turn(&p), "report, leave 0, signal 15");
    CHECK_EQ(run_policy_wake(&p), 100 + T_GRACE);
    t_now = 100 + T_GRACE - 1;
    CHECK_STR(t_turn(&p), "");
    t_now = 100 + T_GRACE;
    CHECK_STR(t_turn(&p), "say kill, signal 9");
    CHECK_EQ(p.state, RUN_ST_KILLING);
    CHECK_EQ(run_policy_wake(&p), 100 + T_GRACE + T_KILL_WAIT);
    t_now += T_KILL_WAIT - 1;
    CHECK_STR(t_turn(&p), "");
    /* A worker that will not die is given up on: the restart goes on without it. */
    t_now += 1;
    CHECK_STR(t_turn(&p), "release, say restart, join 0");
    /* Reaped ones need no wait. */
    t_form(&p, 2, 1, 1);
    t_signal(&p, SIGTERM);
    t_turn(&p);
    t_now += T_GRACE;
    CHECK_STR(t_turn(&p), "say kill, signal 9");
    t_exit(&p, 0, 128 + SIGKILL);
    CHECK_STR(t_turn(&p), "leave 0, release, exit 137");
}

/* A second signal while stopping kills at once; a signal during a restart's stop ends the run. */
static void t_second_signal(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 1);
    t_running(&p, 1, 1, 1);
    t_signal(&p, SIGTERM);
    t_turn(&p);
    CHECK_STR(t_turn(&p), "");
    t_signal(&p, SIGTERM);
    CHECK_STR(t_turn(&p), "say kill, signal 9");
    t_exit(&p, 0, 128 + SIGKILL);
    CHECK_STR(t_turn(&p), "leave 0, release, exit 137");
    /* During a restart's stop: SIGKILL now, and the launcher ends with 128+signal instead of re-joining. */
    t_init(&p, 3, 1);
    t_running(&p, 1, 1, 2);
    t_exit(&p, 0, 1);
    t_turn(&p);
    t_signal(&p, SIGINT);
    CHECK_STR(t_turn(&p), "say kill, signal 9");
    t_exit(&p, 1, 128 + SIGKILL);
    CHECK_STR(t_turn(&p), "release, exit 130");
    CHECK_EQ(p.restarts, 0);
}

/* ------------------------------------------------------------ heartbeats */

/* Heartbeats come every interval while a member runs; a stale answer breaks the generation once. */
static void t_heartbeats(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init(&p, 3, 1);
    t_running(&p, 1, 1, 1);
    CHECK_EQ(run_policy_wake(&p), T_EVERY);
    t_now = T_EVERY - 1;
    CHECK_STR(t_turn(&p), "");
    t_now = T_EVERY;
    CHECK_STR(t_turn(&p), "heartbeat");
    /* Asked once until answered or due again. */
    CHECK_STR(t_turn(&p), "");
    t_now = T_EVERY + 20;
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_BEAT, .every = 2 * T_EVERY}), "");
    CHECK_EQ(run_policy_wake(&p), T_EVERY + 20 + 2 * T_EVERY);
    t_now = 4000;
    CHECK_STR(t_turn(&p), "heartbeat");
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_BEAT, .every = T_EVERY, .stale = 1}), "say ended");
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_BEAT, .every = T_EVERY, .stale = 1}), "");
    CHECK_STR(t_turn(&p), "signal 15");
    /* Left: no heartbeat and no wake-up for one while the stop waits only for its grace period. */
    CHECK_EQ(run_policy_wake(&p), 4000 + T_GRACE);
}

/* The states' names, and no timed decision where none is due. */
static void t_names_and_wake(void *arg)
{
    (void)arg;
    CHECK_STR(run_policy_state_name(RUN_ST_START), "start");
    CHECK_STR(run_policy_state_name(RUN_ST_KILLING), "killing");
    CHECK_STR(run_policy_state_name(RUN_ST_ENDED), "ended");
    CHECK_STR(run_policy_state_name((enum run_state)99), "?");
    struct run_policy p;
    t_init(&p, 3, 1);
    CHECK_EQ(run_policy_wake(&p), UINT64_MAX);
    t_running(&p, 1, 1, 1);
    t_exit(&p, 0, 0);
    t_turn(&p);
    CHECK_EQ(p.state, RUN_ST_ENDED);
    CHECK_EQ(run_policy_wake(&p), UINT64_MAX);
}

/* Run the launcher policy tests. */
int main(void)
{
    h_init("unit-launcher-policy", 30);
    int64_t t0 = h_now_ms();
    H_RUN(t_first_join, NULL);
    H_RUN(t_join_ends, NULL);
    H_RUN(t_sigterm_joining, NULL);
    H_RUN(t_finish_alone, NULL);
    H_RUN(t_finish_waits, NULL);
    H_RUN(t_finish_lost, NULL);
    H_RUN(t_finish_signal, NULL);
    H_RUN(t_failure_restarts, NULL);
    H_RUN(t_restart_counting, NULL);
    H_RUN(t_failure_during_restart, NULL);
    H_RUN(t_lost_restarts, NULL);
    H_RUN(t_grow, NULL);
    H_RUN(t_grow_before_lost, NULL);
    H_RUN(t_signal_running, NULL);
    H_RUN(t_grace_expiry, NULL);
    H_RUN(t_second_signal, NULL);
    H_RUN(t_heartbeats, NULL);
    H_RUN(t_names_and_wake, NULL);
    /* Fake time: the whole program runs in far less than the deadlines it exercises. */
    CHECK(h_now_ms() - t0 < 1000);
    return h_finish();
}
