/*
 * The state core's fake world for in-process tests: a fake loop whose timers
 * fire only when a test advances time (t_advance) and whose deferred calls run
 * when it says a turn ends (t_turn), a namespace on a core with those hooks
 * (struct t_world), and fake rendezvous owners (struct t_node) that record
 * what they were told.  Shared by test_core.c and test_recovery.c.
 */
#ifndef MUSTER_TEST_TCORE_H
#define MUSTER_TEST_TCORE_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"
#include "rdzv.h"
#include "stats.h"

/* A core and one namespace, with the records it emitted. */
struct t_world {
    struct core core;
    struct stats stats;
    struct ns *ns;
    int gens, sets;
    uint64_t last_gen;
};

/* A fake connection owning a rendezvous node: what it was told. */
struct t_node {
    struct rdzv_node *node;
    uint64_t session;
    struct core_share share;
    uint64_t parked;  /* the parked join id, 0 = none */
    int replies, status, events, last_event;
    uint64_t event_gen;
    struct rdzv_assignment a;
    char id[RDZV_ID_MAX + 1];
    int gone;         /* not live */
    char agreed[1024]; /* what the last assignment says that every node of its round must agree on */
    char msg[1536];    /* the last error answer's words */
};

/* The fake owners' callbacks. */
extern const struct rdzv_owner_ops t_ops;

/* A new disarmed timer. */
struct core_timer *t_timer_new(void *ctx, core_timer_fn fn, void *arg);
/* Fire ms from now on the fake clock. */
void t_timer_arm(struct core_timer *t, uint64_t ms);
/* Run at the end of this turn. */
void t_timer_defer(struct core_timer *t);
/* Disarm. */
void t_timer_disarm(struct core_timer *t);
/* Whether armed. */
int t_timer_pending(const struct core_timer *t);
/* Unlink and free. */
void t_timer_free(struct core_timer *t);
/* The fake wall clock follows the fake monotonic one. */
uint64_t t_wall_ms(void *ctx);
/* The fake monotonic clock in microseconds. */
uint64_t t_mono_us(void *ctx);
/* Count a log line. */
void t_log(void *ctx, int level, const char *line);
/* End the loop turn: run deferred calls (the callback frees or re-arms, as with the real loop). */
void t_turn(void);
/* Advance the fake clock by ms, firing due timers in time order, each in its own turn. */
void t_advance(uint64_t ms);
/* The sink: count records. */
void t_sink(void *arg, const struct record *r, enum record_origin from);
/* Start a world with the given heartbeat timeout. */
void t_world_init(struct t_world *w, uint64_t heartbeat_ms);
/* Free the world; nothing may be left parked or armed. */
void t_world_fini(struct t_world *w);
/* Park: remember the id. */
int t_park(void *owner, uint64_t id, struct rdzv_node *n);
/* Unpark: forget it. */
void t_unpark(void *owner, uint64_t id);
/* A join's answer. */
void t_reply(void *owner, uint64_t id, int status, const char *msg, const struct rdzv_assignment *a);
/* A membership event. */
void t_event(void *owner, int kind, uint64_t gen, const char *node_id);
/* Whether the fake connection is open. */
int t_live(void *owner);
/* A made-up address for the fake connection, from its session id (valid until the next call). */
const char *t_peer(void *owner);
/* Join with id, the round's min/max and last call; the join's status. */
int t_join(struct t_world *w, struct t_node *o, const char *id, uint32_t min, uint32_t max, uint32_t last_call);
/* Send join j as o's (the next request id); the join's status, with msg filled when refused. */
int t_join_req(struct t_world *w, struct t_node *o, const struct rdzv_join_req *j, char *msg, size_t len);
/* Form a generation of n nodes (min = max = n, ids n0, n1, ...); its number. */
uint64_t t_form(struct t_world *w, struct t_node *nodes, int n);
/* Node o's connection closes. */
void t_kill(struct t_node *o);
/* Every open connection of v[0..n) closes (nothing left parked at the end of a case). */
void t_close_all(struct t_node *v, int n);
/* Form a generation of n nodes n0..n(n-1) that a recovery can shrink (min 1, max n, two local ranks each,
 * the member list asked for, a long last call: it closes at n); its number. */
uint64_t t_form_members(struct t_world *w, struct t_node *v, int n);
/* The value of key in w's namespace as a string ("" when absent). */
const char *t_value(struct t_world *w, const char *key);

#endif
