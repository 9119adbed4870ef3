/*
 * Helpers of the launcher policy tests: a fake clock, events fed by hand
 * and the actions they yield rendered as text (tpolicy.c).
 */
#ifndef MUSTER_TEST_TPOLICY_H
#define MUSTER_TEST_TPOLICY_H

#include <stdint.h>

#include "harness.h"
#include "run_policy.h"

/* The grace period and kill wait of every case. */
#define T_GRACE 5000
#define T_KILL_WAIT 10000
/* The heartbeat interval the fake joins answer with. */
#define T_EVERY 1000

/* The fake clock: monotonic ms, moved only by the tests. */
extern uint64_t t_now;

/* Feed one event (at the fake clock's time unless it has one); returns its actions as text. */
const char *t_feed(struct run_policy *p, struct run_ev ev);
/* End a loop turn at the fake clock's time; returns the decisions as text. */
const char *t_turn(struct run_policy *p);
/* Feed an event that carries only its kind. */
const char *t_tell(struct run_policy *p, enum run_ev_kind kind);
/* A worker's exit with status. */
const char *t_exit(struct run_policy *p, int local_rank, int status);
/* A signal reaching the launcher. */
const char *t_signal(struct run_policy *p, int sig);
/* A fresh policy at time 0. */
void t_init(struct run_policy *p, uint32_t max_restarts, uint32_t max_nodes);
/* A fresh policy at time 0 with --recovery in-place (in_place) and --standby. */
void t_init_mode(struct run_policy *p, uint32_t max_restarts, uint32_t max_nodes, int in_place, int standby);
/* Answer the pending join with generation gen of nodes nodes, and the start with nproc workers running. */
void t_form(struct run_policy *p, uint64_t gen, uint32_t nodes, int nproc);
/* From a fresh policy: the first join, answered, and nproc workers running. */
void t_running(struct run_policy *p, uint64_t gen, uint32_t nodes, int nproc);

#endif
