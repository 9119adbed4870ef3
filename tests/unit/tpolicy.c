/*
 * Feeding the launcher's policy by hand on a fake clock, for the policy
 * tests (test_launcher_policy.c, test_launcher_inplace.c): events in, the
 * actions they yield rendered as text ("report, leave 0, signal 15").
 */
#include "tpolicy.h"

#include <stdio.h>
#include <string.h>

/* The fake clock: monotonic ms, moved only by the tests. */
uint64_t t_now;

/* The last actions rendered as text. */
static char t_text[512];

/* The name of an action kind as the tests spell it. */
static const char *t_act_name(enum run_act_kind k)
{
    static const char *const names[] = {"join",     "start", "heartbeat", "watch",   "unwatch", "report",
                                        "leave",    "signal", "release",  "complete", "say",    "exit",
                                        "recover",  "replace", "arm"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

/* The name of a note as the tests spell it. */
static const char *t_note_name(int n)
{
    static const char *const names[] = {"lost",    "grow",    "ended",    "signal", "kill", "no-restarts", "restart",
                                        "finished", "recover", "replace", "fallback", "standby", "not-staying"};
    return n >= 0 && (unsigned)n < sizeof names / sizeof names[0] ? names[n] : "?";
}

/* Render actions as "kind arg, kind, ..." (args only for the kinds that have one). */
static const char *t_render(const struct run_acts *acts)
{
    size_t w = 0;
    t_text[0] = '\0';
    for (int i = 0; i < acts->n; i++) {
        const struct run_act *a = &acts->a[i];
        w += (size_t)snprintf(t_text + w, sizeof t_text - w, "%s%s", i ? ", " : "", t_act_name(a->kind));
        if (a->kind == RUN_ACT_SAY)
            w += (size_t)snprintf(t_text + w, sizeof t_text - w, " %s", t_note_name(a->arg));
        else if (a->kind == RUN_ACT_JOIN || a->kind == RUN_ACT_WATCH || a->kind == RUN_ACT_LEAVE ||
                 a->kind == RUN_ACT_SIGNAL || a->kind == RUN_ACT_EXIT)
            w += (size_t)snprintf(t_text + w, sizeof t_text - w, " %d", a->arg);
    }
    return t_text;
}

/* Feed one event; returns its actions as text. */
const char *t_feed(struct run_policy *p, struct run_ev ev)
{
    struct run_acts acts;
    ev.now = ev.now ? ev.now : t_now;
    run_policy_step(p, &ev, &acts);
    return t_render(&acts);
}

/* End a loop turn at the fake clock's time; returns the decisions as text. */
const char *t_turn(struct run_policy *p)
{
    return t_feed(p, (struct run_ev){.kind = RUN_EV_TURN});
}

/* Feed an event that carries only its kind. */
const char *t_tell(struct run_policy *p, enum run_ev_kind kind)
{
    return t_feed(p, (struct run_ev){.kind = kind});
}

/* A worker's exit with status. */
const char *t_exit(struct run_policy *p, int local_rank, int status)
{
    return t_feed(p, (struct run_ev){.kind = RUN_EV_WORKER_EXIT, .local_rank = local_rank, .status = status});
}

/* A signal reaching the launcher. */
const char *t_signal(struct run_policy *p, int sig)
{
    return t_feed(p, (struct run_ev){.kind = RUN_EV_SIGNAL, .sig = sig});
}

/* A fresh policy at time 0. */
void t_init(struct run_policy *p, uint32_t max_restarts, uint32_t max_nodes)
{
    t_init_mode(p, max_restarts, max_nodes, 0, 0);
}

/* A fresh policy at time 0 with --recovery in-place (in_place) and --standby. */
void t_init_mode(struct run_policy *p, uint32_t max_restarts, uint32_t max_nodes, int in_place, int standby)
{
    struct run_policy_cfg cfg = {.max_restarts = max_restarts, .max_nodes = max_nodes, .grace_ms = T_GRACE,
                                 .kill_wait_ms = T_KILL_WAIT, .in_place = in_place, .standby = standby};
    t_now = 0;
    run_policy_init(p, &cfg);
}

/* Answer the pending join with generation gen of nodes nodes, and the start with nproc workers running. */
void t_form(struct run_policy *p, uint64_t gen, uint32_t nodes, int nproc)
{
    CHECK_EQ(p->state, RUN_ST_JOINING);
    t_feed(p, (struct run_ev){.kind = RUN_EV_JOINED, .generation = gen, .num_nodes = nodes, .every = T_EVERY});
    CHECK_STR(t_turn(p), "start");
    CHECK_EQ(p->state, RUN_ST_STARTING);
    t_feed(p, (struct run_ev){.kind = RUN_EV_STARTED, .count = nproc});
    CHECK_STR(t_turn(p), "");
    CHECK_EQ(p->state, RUN_ST_RUNNING);
    CHECK_EQ(p->running, nproc);
}

/* From a fresh policy: the first join, answered, and nproc workers running. */
void t_running(struct run_policy *p, uint64_t gen, uint32_t nodes, int nproc)
{
    CHECK_STR(t_turn(p), "join 1");
    t_form(p, gen, nodes, nproc);
}

