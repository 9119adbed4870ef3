/*
 * In-process tests of the launcher's policy with --recovery in-place and
 * --standby (client/launcher/run_policy.c): a lost member makes the node
 * join the recovery round while its workers run on, a failed local worker
 * makes it join again and replace only that worker, both in one turn
 * recover, a recovery that fails falls back to stopping the workers (one
 * restart counted), a failed re-join ends the launcher once its workers
 * are stopped, signals while recovering, a finished node recovering with
 * nothing to run, no re-forming to grow, restarts used up, and a standby's
 * first join.  On a fake clock (tpolicy.c), linked with the policy alone.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tpolicy.h"

/* The next generation, as a recovery or a join answers it. */
static void t_joined(struct run_policy *p, uint64_t gen, uint32_t nodes)
{
    t_feed(p, (struct run_ev){.kind = RUN_EV_JOINED, .generation = gen, .num_nodes = nodes, .every = T_EVERY});
}

/* A lost member: the node recovers, its workers are not signalled; the new generation publishes the
 * place and replaces nothing that did not fail; one restart counted. */
static void t_lost_recovers(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 2, 4, 1, 0);
    t_running(&p, 1, 4, 2);
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1}), "say lost");
    CHECK_STR(t_turn(&p), "say recover, recover");
    CHECK_EQ(p.state, RUN_ST_RECOVERING);
    CHECK_EQ(p.member, 1);
    CHECK_EQ(p.running, 2);
    /* No heartbeat while the recovery is asked: the generation broke. */
    t_now = 10 * T_EVERY;
    CHECK_EQ(run_policy_wake(&p), UINT64_MAX);
    CHECK_STR(t_turn(&p), "");
    t_joined(&p, 2, 3);
    CHECK_STR(t_turn(&p), "say restart, replace");
    CHECK_EQ(p.state, RUN_ST_STARTING);
    CHECK_EQ(p.restarts, 1);
    CHECK_EQ(p.generation, 2);
    CHECK_EQ(p.num_nodes, 3);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_STARTED, .count = 2});
    CHECK_STR(t_turn(&p), "");
    CHECK_EQ(p.state, RUN_ST_RUNNING);
    CHECK_EQ(run_policy_wake(&p), t_now + T_EVERY);
    /* A late loss of generation 1 is nothing to generation 2; a stale heartbeat is a loss. */
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1}), "");
    t_feed(&p, (struct run_ev){.kind = RUN_EV_BEAT, .every = T_EVERY, .stale = 1});
    CHECK_STR(t_turn(&p), "say recover, recover");
}

/* In place, each heartbeat also arms the recovery (the effects make it a no-op once armed); without the
 * mode, or once a worker does not follow the world, only the heartbeat goes. */
static void t_arms_at_beats(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 2, 4, 1, 0);
    t_running(&p, 1, 4, 2);
    t_now += T_EVERY;
    CHECK_STR(t_turn(&p), "heartbeat, arm");
    CHECK_STR(t_turn(&p), ""); /* not due again yet */
    t_feed(&p, (struct run_ev){.kind = RUN_EV_NOT_STAYING});
    t_now += T_EVERY;
    CHECK_STR(t_turn(&p), "heartbeat");
    struct run_policy r;
    t_init_mode(&r, 2, 4, 0, 0);
    t_running(&r, 1, 4, 2);
    t_now += T_EVERY;
    CHECK_STR(t_turn(&r), "heartbeat");
}

/* In place, but a worker never opened the world (a plain script): the node says so once and recovers
 * as without the mode, stopping its workers to re-form, from then on. */
static void t_not_staying_restarts(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 2, 4, 1, 0);
    t_running(&p, 1, 4, 2);
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_NOT_STAYING}), "say not-staying");
    CHECK_EQ(p.cfg.in_place, 0);
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_NOT_STAYING}), "");   /* once */
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1}), "say lost");
    const char *turn = t_turn(&p);
    CHECK(strstr(turn, "recover") == NULL);
    CHECK(strstr(turn, "signal") != NULL);
    CHECK(p.state != RUN_ST_RECOVERING);
}

/* A local worker that failed: report it, join again (the others run on) and replace it. */
static void t_failed_rejoins(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 2, 4, 1, 0);
    t_running(&p, 1, 3, 2);
    CHECK_STR(t_exit(&p, 1, 128 + SIGKILL), "");
    CHECK_STR(t_turn(&p), "report, say replace, join 0");
    CHECK_EQ(p.state, RUN_ST_REJOINING);
    CHECK_EQ(p.running, 1);
    CHECK_EQ(p.member, 1);
    t_joined(&p, 2, 3);
    CHECK_STR(t_turn(&p), "say restart, replace");
    t_feed(&p, (struct run_ev){.kind = RUN_EV_STARTED, .count = 2});
    CHECK_STR(t_turn(&p), "");
    CHECK_EQ(p.state, RUN_ST_RUNNING);
    CHECK_EQ(p.failure, 0);
    CHECK_EQ(p.restarts, 1);
}

/* A peer lost and a local worker failed in one turn: this node is a survivor, so it recovers (the
 * recovery then replaces the worker) instead of coming back as a newcomer. */
static void t_lost_outranks_failed(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 2, 4, 1, 0);
    t_running(&p, 1, 3, 1);
    t_exit(&p, 0, 1);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1});
    CHECK_STR(t_turn(&p), "say recover, recover");
    t_joined(&p, 2, 2);
    CHECK_STR(t_turn(&p), "say restart, replace");
}

/* A recovery that fails (excluded, too few nodes): stop the workers and re-form the restart way, with
 * one restart counted for the whole. */
static void t_recover_fails(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 2, 4, 1, 0);
    t_running(&p, 1, 3, 1);
    t_tell(&p, RUN_EV_BROKEN);
    CHECK_STR(t_turn(&p), "say recover, recover");
    t_feed(&p, (struct run_ev){.kind = RUN_EV_RECOVER_FAILED, .status = 15});
    CHECK_STR(t_turn(&p), "say fallback, signal 15");
    CHECK_EQ(p.state, RUN_ST_STOPPING);
    CHECK_EQ(p.cause, RUN_CAUSE_LOST);
    t_exit(&p, 0, 128 + SIGTERM);
    CHECK_STR(t_turn(&p), "release, say restart, join 0");
    CHECK_EQ(p.restarts, 1);
    t_form(&p, 3, 3, 1);
    CHECK_EQ(p.state, RUN_ST_RUNNING);
}

/* A re-join that fails while workers run: they are stopped, then the launcher ends with its status. */
static void t_rejoin_fails(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 2, 4, 1, 0);
    t_running(&p, 1, 3, 2);
    t_exit(&p, 0, 3);
    t_turn(&p);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_JOIN_FAILED, .status = 3});
    CHECK_STR(t_turn(&p), "leave 0, signal 15");
    CHECK_EQ(p.cause, RUN_CAUSE_END);
    t_now = T_GRACE;
    CHECK_STR(t_turn(&p), "say kill, signal 9");
    t_exit(&p, 1, 128 + SIGKILL);
    CHECK_STR(t_turn(&p), "release, exit 3");
    CHECK_EQ(p.exit_code, 3);
    CHECK_EQ(p.restarts, 0);
}

/* A signal that came while the recovery blocked stops the workers, whatever the answer was. */
static void t_signal_recovering(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 2, 4, 1, 0);
    t_running(&p, 1, 3, 1);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1});
    t_turn(&p);
    t_joined(&p, 2, 2);
    t_signal(&p, SIGTERM);
    CHECK_STR(t_turn(&p), "say signal, signal 15");
    CHECK_EQ(p.cause, RUN_CAUSE_SIGNAL);
    t_exit(&p, 0, 128 + SIGTERM);
    CHECK_STR(t_turn(&p), "leave 0, release, exit 143");
    CHECK_EQ(p.restarts, 0);
}

/* A node whose workers are done recovers with none running and counts itself done in the new
 * generation. */
static void t_finishing_recovers(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 2, 4, 1, 0);
    t_running(&p, 1, 3, 1);
    t_exit(&p, 0, 0);
    CHECK_STR(t_turn(&p), "watch 1");
    t_tell(&p, RUN_EV_WATCHING);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_DONE_COUNT, .count = 1});
    t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1});
    CHECK_STR(t_turn(&p), "unwatch, say recover, recover");
    t_joined(&p, 2, 2);
    CHECK_STR(t_turn(&p), "say restart, replace");
    t_feed(&p, (struct run_ev){.kind = RUN_EV_STARTED, .count = 0});
    CHECK_STR(t_turn(&p), "watch 1");
    CHECK_EQ(p.state, RUN_ST_FINISHING);
}

/* In place a waiting node does not re-form the world (it comes in at the next recovery); with no
 * restart left a loss stops the workers as without the mode. */
static void t_no_grow_and_used_up(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 1, 4, 1, 0);
    t_running(&p, 1, 2, 1);
    CHECK_STR(t_feed(&p, (struct run_ev){.kind = RUN_EV_NODE_WAITING, .generation = 1}), "");
    CHECK_STR(t_turn(&p), "");
    t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 1});
    t_turn(&p);
    t_joined(&p, 2, 2);
    t_turn(&p);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_STARTED, .count = 1});
    t_turn(&p);
    CHECK_EQ(p.restarts, 1);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_MEMBER_LOST, .generation = 2});
    CHECK_STR(t_turn(&p), "signal 15");
    t_exit(&p, 0, 128 + SIGTERM);
    CHECK_STR(t_turn(&p), "release, say no-restarts, leave 0, exit 1");
}

/* --standby: the first join waits as a spare; admitted, it starts like any join (placing first in
 * place); a failed wait ends the launcher. */
static void t_standby(void *arg)
{
    (void)arg;
    struct run_policy p;
    t_init_mode(&p, 1, 3, 1, 1);
    CHECK_STR(t_turn(&p), "say standby, join 3");
    CHECK_EQ(p.state, RUN_ST_STANDBY);
    t_now = 600000;
    CHECK_STR(t_turn(&p), "");
    t_joined(&p, 5, 3);
    CHECK_STR(t_turn(&p), "start");
    t_init_mode(&p, 1, 3, 0, 1);
    CHECK_STR(t_turn(&p), "say standby, join 3");
    t_joined(&p, 5, 3);
    CHECK_STR(t_turn(&p), "start");
    t_init_mode(&p, 1, 3, 0, 1);
    t_turn(&p);
    t_feed(&p, (struct run_ev){.kind = RUN_EV_JOIN_FAILED, .status = 3});
    CHECK_STR(t_turn(&p), "exit 3");
    t_init_mode(&p, 1, 3, 0, 1);
    t_turn(&p);
    t_signal(&p, SIGINT);
    CHECK_STR(t_turn(&p), "exit 130");
    CHECK_STR(run_policy_state_name(RUN_ST_STANDBY), "standby");
    CHECK_STR(run_policy_state_name(RUN_ST_RECOVERING), "recovering");
    CHECK_STR(run_policy_state_name(RUN_ST_REJOINING), "rejoining");
}

/* Run the in-place launcher policy tests. */
int main(void)
{
    h_init("unit-launcher-inplace", 30);
    H_RUN(t_lost_recovers, NULL);
    H_RUN(t_not_staying_restarts, NULL);
    H_RUN(t_arms_at_beats, NULL);
    H_RUN(t_failed_rejoins, NULL);
    H_RUN(t_lost_outranks_failed, NULL);
    H_RUN(t_recover_fails, NULL);
    H_RUN(t_rejoin_fails, NULL);
    H_RUN(t_signal_recovering, NULL);
    H_RUN(t_finishing_recovers, NULL);
    H_RUN(t_no_grow_and_used_up, NULL);
    H_RUN(t_standby, NULL);
    return h_finish();
}
