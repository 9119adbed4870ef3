/*
 * The worker's side of a world change, as a pure state machine: no
 * sockets, timers, store or NCCL.  The driver (world.c) feeds it what it
 * saw, each with the time (milliseconds on any monotonic clock):
 *
 *   wsm_begin      a muster_world_next call starts (its deadline)
 *   wsm_generation the generation key's value (a watch event or a read)
 *   wsm_answer     the text of a generation's answer key (NULL: absent; the driver
 *                  re-reads the generation key first, so an answer deleted because
 *                  newer generations formed leads to the newest)
 *   wsm_tick       time passed
 *   wsm_ready      the worker built the last change's world
 *
 * and after each asks wsm_action what to do: wait for the generation key
 * to pass a number until a time, read one generation's answer, or stop
 * with a change or a failure.  The test (tests/unit/test_world_sm.c)
 * drives it on a fake clock in every order of these events.
 */
#ifndef MUSTER_WORLD_SM_H
#define MUSTER_WORLD_SM_H

#include <stdint.h>

#include <muster/world.h>

#include "answer.h"

/* What the driver does next. */
enum wsm_act {
    WSM_IDLE = 0, /* no call in progress */
    WSM_WAIT,     /* wait until the generation key exceeds wsm.answered, or until wsm.deadline */
    WSM_READ,     /* read the answer of generation wsm.reading */
    WSM_DONE,     /* the call ends: wsm.status (MUSTER_OK: wsm.change), wsm.why on failure */
};

/* The machine.  Fields are read by the driver and the test, written only by wsm_* calls. */
struct wsm {
    char node_id[128];
    int local_rank;
    uint64_t start;        /* the generation this process was started into */
    int start_rank, start_world; /* its rank and world there (a plain round's answer lists no members) */
    uint64_t latest;       /* the highest generation seen (key or answer) */
    uint64_t answered;     /* the generation of the last change given (0: none yet) */
    uint64_t held;         /* the generation whose world this process holds (0: nothing) */
    int held_rank, held_world;
    int unconfirmed;       /* a change was given and not confirmed ready */
    uint64_t reading;      /* WSM_READ: the generation whose answer is wanted */
    uint64_t deadline;     /* of the call in progress */
    uint32_t timeout_ms;
    enum wsm_act act;
    int status;            /* WSM_DONE */
    char why[256];
    /* The change given last, and what it points into. */
    muster_world_change change;
    muster_assignment asg;
    struct answer parsed;
};

/* Start a machine for node_id's local rank, started into generation start (> 0) as rank of world. */
void wsm_init(struct wsm *s, const char *node_id, int local_rank, uint64_t start, int rank, int world);
/* Free what the last change holds. */
void wsm_fini(struct wsm *s);
/* A muster_world_next call starts at now with timeout_ms. */
void wsm_begin(struct wsm *s, uint64_t now, uint32_t timeout_ms);
/* The generation key read gen (at now). */
void wsm_generation(struct wsm *s, uint64_t now, uint64_t gen);
/* The answer key of gen held text (len bytes; NULL: it is absent), at now. */
void wsm_answer(struct wsm *s, uint64_t now, uint64_t gen, const char *text, size_t len);
/* Time passed to now. */
void wsm_tick(struct wsm *s, uint64_t now);
/* The worker built the last change's world. */
void wsm_ready(struct wsm *s);

#endif
