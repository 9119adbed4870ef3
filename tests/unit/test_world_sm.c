/*
 * The worker's side of a world change (client/world_sm.c) on a fake clock,
 * in every order of the events seen on a GPU: the worker's collective
 * failing before or after the store announces g+1, two generations forming
 * during one rebuild, a second loss during the NCCL rebuild, a standby
 * admitted while survivors shrink, the answer read before the generation
 * key; and the refusals (excluded, restarted, timed out, malformed).
 *
 * A tiny store stands in for musterd: t_form formats the answer of each
 * generation as musterd would (proto/answer.c); t_serve answers the
 * machine's reads from it at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "world_sm.h"

/* The answers of generations 1..T_GENS, as musterd stored them (NULL: not formed). */
#define T_GENS 8
static char *t_store[T_GENS + 1];
static size_t t_len[T_GENS + 1];
static uint64_t t_now;

/* Forget every stored answer. */
static void t_reset(void)
{
    for (int g = 0; g <= T_GENS; g++) {
        free(t_store[g]);
        t_store[g] = NULL;
    }
    t_now = 0;
}

/* Store generation gen's answer: members "id:old" (old -1: new) of one rank each, excluded "id:old". */
static void t_form(uint64_t gen, uint64_t prev, const char *const *members, size_t nm, const char *const *excl,
                   size_t nx)
{
    struct answer_member mv[8];
    struct answer_excluded xv[8];
    char ids[16][32];
    for (size_t i = 0; i < nm; i++) {
        int old;
        sscanf(members[i], "%31[^:]:%d", ids[i], &old);
        mv[i] = (struct answer_member){ids[i], (uint32_t)i, (uint32_t)i, 1, old < 0 ? ANSWER_NO_RANK : (uint32_t)old};
    }
    for (size_t i = 0; i < nx; i++) {
        int old;
        sscanf(excl[i], "%31[^:]:%d", ids[8 + i], &old);
        xv[i] = (struct answer_excluded){ids[8 + i], (uint32_t)old, "closed its connection"};
    }
    free(t_store[gen]);
    CHECK_EQ(answer_format(gen, prev, (uint32_t)nm, (uint32_t)nm, mv, prev ? nm : 0, xv, nx, &t_store[gen],
                           &t_len[gen]), 0);
}

/* Answer the machine's read from the store, as the driver does (an absent answer: NULL). */
static void t_serve(struct wsm *s)
{
    while (s->act == WSM_READ) {
        uint64_t g = s->reading;
        wsm_answer(s, t_now, g, g <= T_GENS ? t_store[g] : NULL, g <= T_GENS ? t_len[g] : 0);
    }
}

/* Generation 1 of four nodes n0..n3 (plain), started as n<me>; the first change taken and built. */
static void t_start(struct wsm *s, int me)
{
    char id[8];
    static const char *const four[] = {"n0:-1", "n1:-1", "n2:-1", "n3:-1"};
    t_reset();
    t_form(1, 0, four, 4, NULL, 0);
    snprintf(id, sizeof id, "n%d", me);
    wsm_fini(s);   /* a machine reused by the case: what its last change held */
    wsm_init(s, id, 0, 1, me, 4);
    wsm_begin(s, t_now, 1000);
    t_serve(s);
    CHECK_EQ(s->act, WSM_DONE);
    CHECK_EQ(s->status, MUSTER_OK);
    CHECK_EQ(s->change.plan, MUSTER_WORLD_INIT);
    CHECK_EQ(s->change.rank, me);
    CHECK_EQ(s->change.world_size, 4);
    CHECK_EQ(s->change.previous_generation, 0);
    wsm_ready(s);
}

/* Generation 2: n1 lost, survivors n0, n2, n3 in order. */
static void t_lose_n1(void)
{
    static const char *const m[] = {"n0:0", "n2:2", "n3:3"};
    static const char *const x[] = {"n1:1"};
    t_form(2, 1, m, 3, x, 1);
}

/* The collective fails before the store announces generation 2: the call waits, then reads it. */
static void t_fail_then_announce(void *unused)
{
    struct wsm s = {0};
    (void)unused;
    t_start(&s, 2);
    wsm_begin(&s, t_now = 10, 5000);
    CHECK_EQ(s.act, WSM_WAIT);
    wsm_tick(&s, t_now = 400);
    CHECK_EQ(s.act, WSM_WAIT);
    t_lose_n1();
    wsm_generation(&s, t_now = 450, 2);
    CHECK_EQ(s.act, WSM_READ);
    CHECK_EQ(s.reading, 2);
    t_serve(&s);
    CHECK_EQ(s.status, MUSTER_OK);
    CHECK_EQ(s.change.generation, 2);
    CHECK_EQ(s.change.plan, MUSTER_WORLD_SHRINK);
    CHECK_EQ(s.change.rank, 1);
    CHECK_EQ(s.change.world_size, 3);
    CHECK_EQ(s.change.carried, 1);
    CHECK_EQ(s.change.previous_rank, 2);
    CHECK_EQ(s.change.previous_world_size, 4);
    CHECK_EQ(s.change.skipped, 0);
    CHECK_EQ(s.change.n_excluded, 1);
    CHECK_STR(s.change.excluded[0].node_id, "n1");
    CHECK_STR(s.change.excluded[0].cause, "closed its connection");
    CHECK_EQ(s.change.assignment->n_members, 3);
    wsm_fini(&s);
}

/* The store announces generation 2 first (a watch event while the worker computes): the call reads it
 * at once, without waiting. */
static void t_announce_then_fail(void *unused)
{
    struct wsm s = {0};
    (void)unused;
    t_start(&s, 3);
    t_lose_n1();
    wsm_generation(&s, t_now = 5, 2);   /* no call in progress: only remembered */
    CHECK_EQ(s.act, WSM_DONE);
    wsm_begin(&s, t_now = 9, 5000);
    CHECK_EQ(s.act, WSM_READ);
    t_serve(&s);
    CHECK_EQ(s.status, MUSTER_OK);
    CHECK_EQ(s.change.rank, 2);
    CHECK_EQ(s.change.carried, 1);
    wsm_fini(&s);
}

/* Generations 2 and 3 form while the worker is busy: it answers 3, skipping 2, and holds nothing of
 * 2's world, so it is not carried (its communicator is of generation 1). */
static void t_two_generations_while_busy(void *unused)
{
    struct wsm s = {0};
    static const char *const m3[] = {"n0:0", "n3:2"};
    static const char *const x3[] = {"n2:1"};
    (void)unused;
    t_start(&s, 0);
    t_lose_n1();
    t_form(3, 2, m3, 2, x3, 1);
    wsm_generation(&s, t_now = 1, 2);
    wsm_generation(&s, t_now = 2, 3);
    wsm_begin(&s, t_now = 3, 5000);
    CHECK_EQ(s.reading, 3);
    t_serve(&s);
    CHECK_EQ(s.status, MUSTER_OK);
    CHECK_EQ(s.change.generation, 3);
    CHECK_EQ(s.change.skipped, 1);
    CHECK_EQ(s.change.carried, 0);
    CHECK_EQ(s.change.previous_rank, -1);
    CHECK_EQ(s.change.rank, 0);
    CHECK_EQ(s.change.world_size, 2);
    wsm_fini(&s);
}

/* Generation 3 forms while generation 2's answer is being read: the answer of 2 is dropped for 3's. */
static void t_newer_while_reading(void *unused)
{
    struct wsm s = {0};
    static const char *const m3[] = {"n0:0", "n2:1"};
    static const char *const x3[] = {"n3:2"};
    (void)unused;
    t_start(&s, 2);
    t_lose_n1();
    t_form(3, 2, m3, 2, x3, 1);
    wsm_begin(&s, t_now = 1, 5000);
    wsm_generation(&s, t_now = 2, 2);
    CHECK_EQ(s.reading, 2);
    wsm_generation(&s, t_now = 3, 3);   /* the watch event comes before the read's reply */
    wsm_answer(&s, t_now = 4, 2, t_store[2], t_len[2]);
    CHECK_EQ(s.act, WSM_READ);
    CHECK_EQ(s.reading, 3);
    t_serve(&s);
    CHECK_EQ(s.change.generation, 3);
    CHECK_EQ(s.change.rank, 1);
    CHECK_EQ(s.change.carried, 0);
    wsm_fini(&s);
}

/* A second loss during the NCCL rebuild: generation 2's change was never confirmed ready (the rebuild
 * was cancelled), so generation 3 finds the worker holding nothing: not carried, it votes unhealthy. */
static void t_second_loss_during_rebuild(void *unused)
{
    struct wsm s = {0};
    static const char *const m3[] = {"n0:0", "n2:1"};
    static const char *const x3[] = {"n3:2"};
    (void)unused;
    t_start(&s, 0);
    t_lose_n1();
    wsm_begin(&s, t_now = 1, 5000);
    wsm_generation(&s, t_now, 2);
    t_serve(&s);
    CHECK_EQ(s.change.carried, 1);
    t_form(3, 2, m3, 2, x3, 1);          /* n3 dies while the survivors shrink */
    wsm_generation(&s, t_now = 2, 3);
    wsm_begin(&s, t_now = 3, 5000);     /* no wsm_ready: the rebuild failed */
    t_serve(&s);
    CHECK_EQ(s.status, MUSTER_OK);
    CHECK_EQ(s.change.generation, 3);
    CHECK_EQ(s.change.skipped, 0);
    CHECK_EQ(s.change.carried, 0);
    CHECK_EQ(s.change.plan, MUSTER_WORLD_SHRINK);
    /* Had it built generation 2, it would carry it into 3. */
    t_start(&s, 0);
    t_lose_n1();
    wsm_begin(&s, t_now = 1, 5000);
    wsm_generation(&s, t_now, 2);
    t_serve(&s);
    wsm_ready(&s);
    t_form(3, 2, m3, 2, x3, 1);
    wsm_begin(&s, t_now = 2, 5000);
    wsm_generation(&s, t_now = 3, 3);
    t_serve(&s);
    CHECK_EQ(s.change.carried, 1);
    CHECK_EQ(s.change.previous_rank, 0);
    CHECK_EQ(s.change.previous_world_size, 3);
    wsm_fini(&s);
}

/* A standby admitted while survivors shrink: it starts into generation 2 and learns it is new; every
 * survivor reads the same plan (grow), so all of them re-build the same way. */
static void t_standby_admitted(void *unused)
{
    struct wsm s = {0}, sb = {0};
    static const char *const m[] = {"n0:0", "n2:2", "n3:3", "spare:-1"};
    static const char *const x[] = {"n1:1"};
    (void)unused;
    t_start(&s, 3);
    t_form(2, 1, m, 4, x, 1);
    wsm_init(&sb, "spare", 0, 2, 3, 4);
    wsm_begin(&sb, t_now = 1, 5000);
    t_serve(&sb);
    CHECK_EQ(sb.status, MUSTER_OK);
    CHECK_EQ(sb.change.plan, MUSTER_WORLD_GROW);
    CHECK_EQ(sb.change.carried, 0);
    CHECK_EQ(sb.change.old_node_rank, UINT32_MAX);
    CHECK_EQ(sb.change.rank, 3);
    CHECK_EQ(sb.change.previous_generation, 1);
    wsm_begin(&s, t_now = 2, 5000);
    wsm_generation(&s, t_now, 2);
    t_serve(&s);
    CHECK_EQ(s.change.plan, MUSTER_WORLD_GROW);
    CHECK_EQ(s.change.carried, 1);
    CHECK_EQ(s.change.rank, 2);
    wsm_fini(&s);
    wsm_fini(&sb);
}

/* The answer arrives before the generation key (a read raced the watch event): it is taken as the
 * generation, and the late key changes nothing. */
static void t_answer_before_key(void *unused)
{
    struct wsm s = {0};
    (void)unused;
    t_start(&s, 2);
    t_lose_n1();
    wsm_begin(&s, t_now = 1, 5000);
    CHECK_EQ(s.act, WSM_WAIT);
    wsm_answer(&s, t_now = 2, 2, t_store[2], t_len[2]);
    CHECK_EQ(s.act, WSM_DONE);
    CHECK_EQ(s.status, MUSTER_OK);
    CHECK_EQ(s.change.generation, 2);
    wsm_generation(&s, t_now = 3, 2);
    CHECK_EQ(s.act, WSM_DONE);
    CHECK_EQ(s.latest, 2);
    wsm_fini(&s);
}

/* Every order of: the worker's call (its collective failed), generation 2's key, generation 3's key
 * (a second loss), and the confirmation of a change.  Whatever the order, the worker ends at the
 * newest generation formed when its read is answered, carried exactly when it built the one replaced. */
static void t_every_order(void *unused)
{
    static const char *const m3[] = {"n0:0", "n2:1"};
    static const char *const x3[] = {"n3:2"};
    static const int perms[24][4] = {
        {0, 1, 2, 3}, {0, 1, 3, 2}, {0, 2, 1, 3}, {0, 2, 3, 1}, {0, 3, 1, 2}, {0, 3, 2, 1},
        {1, 0, 2, 3}, {1, 0, 3, 2}, {1, 2, 0, 3}, {1, 2, 3, 0}, {1, 3, 0, 2}, {1, 3, 2, 0},
        {2, 0, 1, 3}, {2, 0, 3, 1}, {2, 1, 0, 3}, {2, 1, 3, 0}, {2, 3, 0, 1}, {2, 3, 1, 0},
        {3, 0, 1, 2}, {3, 0, 2, 1}, {3, 1, 0, 2}, {3, 1, 2, 0}, {3, 2, 0, 1}, {3, 2, 1, 0}};
    (void)unused;
    for (int p = 0; p < 24; p++) {
        struct wsm s = {0};
        int seen3 = 0;
        t_start(&s, 0);
        t_lose_n1();
        t_form(3, 2, m3, 2, x3, 1);
        for (int k = 0; k < 4; k++) {
            switch (perms[p][k]) {
            case 0:
                wsm_begin(&s, ++t_now, 5000);
                break;
            case 1:
                wsm_generation(&s, ++t_now, 2);
                break;
            case 2:
                wsm_generation(&s, ++t_now, 3);
                seen3 = 1;
                break;
            case 3:
                wsm_ready(&s);   /* confirms whatever change the worker holds by now */
                break;
            }
            t_serve(&s);
            if (s.act == WSM_DONE && s.status == MUSTER_OK && s.change.generation == 2 && !seen3)
                continue;        /* took generation 2; generation 3 comes after */
        }
        /* Drive to the end: ask until the newest generation is answered. */
        for (int round = 0; round < 3 && s.answered < 3; round++) {
            wsm_begin(&s, ++t_now, 5000);
            t_serve(&s);
            if (s.act == WSM_WAIT)
                break;
        }
        CHECK_EQ(s.act, WSM_DONE);
        CHECK_EQ(s.status, MUSTER_OK);
        CHECK_EQ(s.answered, 3);
        CHECK_EQ(s.change.rank, 0);
        CHECK_EQ(s.change.world_size, 2);
        /* Carried only when generation 2 was answered and confirmed before 3 was read. */
        CHECK_EQ(s.change.carried, s.held == 2);
        wsm_fini(&s);
    }
}

/* Refusals: an excluded node hears the cause; a plain round (a restart) is stale; a deadline ends a
 * wait; an answer that is absent or malformed names the generation. */
static void t_refusals(void *unused)
{
    struct wsm s = {0};
    static const char *const plain[] = {"n0:-1", "n2:-1", "n3:-1"};
    (void)unused;
    t_start(&s, 1);
    t_lose_n1();
    wsm_begin(&s, t_now = 1, 5000);
    wsm_generation(&s, t_now, 2);
    t_serve(&s);
    CHECK_EQ(s.status, MUSTER_EEXCLUDED);
    CHECK(strstr(s.why, "closed its connection") != NULL);
    t_start(&s, 2);
    t_form(2, 0, plain, 3, NULL, 0);
    wsm_begin(&s, t_now = 1, 5000);
    wsm_generation(&s, t_now, 2);
    t_serve(&s);
    CHECK_EQ(s.status, MUSTER_ESTALE);
    CHECK(strstr(s.why, "plain round") != NULL);
    t_start(&s, 2);
    wsm_begin(&s, t_now = 100, 250);
    wsm_tick(&s, t_now = 349);
    CHECK_EQ(s.act, WSM_WAIT);
    wsm_tick(&s, t_now = 350);
    CHECK_EQ(s.act, WSM_DONE);
    CHECK_EQ(s.status, MUSTER_ETIMEDOUT);
    CHECK(strstr(s.why, "250 ms") != NULL);
    t_start(&s, 2);
    wsm_begin(&s, t_now = 1, 5000);
    wsm_generation(&s, t_now, 2);   /* formed, but its answer is missing */
    t_serve(&s);
    CHECK_EQ(s.status, MUSTER_EPROTO);
    CHECK(strstr(s.why, "generation 2 has no answer") != NULL);
    t_start(&s, 2);
    t_store[2] = strdup("muster-answer 2\ngarbage\n");
    t_len[2] = strlen(t_store[2]);
    wsm_begin(&s, t_now = 1, 5000);
    wsm_generation(&s, t_now, 2);
    t_serve(&s);
    CHECK_EQ(s.status, MUSTER_EPROTO);
    CHECK(strstr(s.why, "malformed") != NULL);
    wsm_fini(&s);
    t_reset();
}

int main(void)
{
    h_init("world_sm", 30);
    H_RUN(t_fail_then_announce, NULL);
    H_RUN(t_announce_then_fail, NULL);
    H_RUN(t_two_generations_while_busy, NULL);
    H_RUN(t_newer_while_reading, NULL);
    H_RUN(t_second_loss_during_rebuild, NULL);
    H_RUN(t_standby_admitted, NULL);
    H_RUN(t_answer_before_key, NULL);
    H_RUN(t_every_order, NULL);
    H_RUN(t_refusals, NULL);
    t_reset();
    return h_finish();
}
