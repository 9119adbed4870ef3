/*
 * In-process tests of armed recovery (store-server/core/rdzv_recover.c) on
 * the fake clock of tcore.c: members that send their recover join while the
 * generation runs are answered in the turn of the break, with the same
 * generation, order and excluded list as a recovery joined after the loss
 * event; every mix of armed and late survivors, in every order, agrees; an
 * armed join has no deadline until the break; a member lost while armed, one
 * that finishes and one that joins the plain round are each answered; and
 * arming is refused where a recover would be.  The round closes at the end
 * of the loop turn of the break, so members lost in that turn are excluded
 * by one recovery.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "muster.pb-c.h"
#include "rdzv.h"
#include "stats.h"
#include "tcore.h"

/* How a node joins. */
enum t_how { T_PLAIN, T_RECOVER, T_ARMED };

/* Join as how (max for plain joins), with the member list asked for; the join's status. */
static int ta_join(struct t_world *w, struct t_node *o, const char *id, uint32_t max, enum t_how how)
{
    struct rdzv_join_req j = {.node_id = id,
                              .local_world_size = 2,
                              .min_nodes = 1,
                              .max_nodes = max,
                              .last_call_ms = 60000,
                              .timeout_ms = 5000,
                              .want_members = 1,
                              .recover = how != T_PLAIN,
                              .armed = how == T_ARMED};
    char msg[256];
    int st = t_join_req(w, o, &j, msg, sizeof msg);
    if (st != MUSTER__STATUS__OK)
        snprintf(o->msg, sizeof o->msg, "%s", msg);
    return st;
}



/* Every survivor armed: the break answers them all at once, after their loss event, as a recovery joined
 * after the event would (the same words as test_recovery.c's t_all_survivors). */
static void t_all_armed(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[4] = {{0}};
    t_world_init(&w, 0);
    uint64_t g = t_form_members(&w, v, 4);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(ta_join(&w, &v[i], "", 1, T_ARMED), MUSTER__STATUS__OK);
    CHECK_EQ(w.stats.c[STAT_RDZV_ARMED], 4);
    struct rdzv_info ri;
    CHECK_EQ(rdzv_info(w.ns, &ri), 0);
    CHECK_EQ(ri.armed, 4);
    CHECK_EQ(ri.recovery_joined, 0);
    CHECK_EQ(ri.recovering, 0);
    CHECK_EQ(v[0].replies, 1); /* only the first round's answer */
    t_advance(60000);          /* no deadline while the generation runs */
    CHECK_EQ(v[0].replies, 1);
    t_kill(&v[2]);
    CHECK_EQ(v[0].replies, 1); /* at the end of the turn, */
    CHECK_EQ(v[0].events, 0);  /* the loss event too, so that both leave in one write */
    t_turn();
    for (int i = 0; i < 4; i++) {
        if (i == 2)
            continue;
        CHECK_EQ(v[i].events, 1);
        CHECK_EQ(v[i].last_event, RDZV_MEMBER_LOST);
        CHECK_EQ(v[i].replies, 2);
        CHECK_EQ(v[i].status, MUSTER__STATUS__OK);
        CHECK_STR(v[i].agreed, "gen 2 prev 1 | n0:0->0 n1:1->1 n3:3->2 x n2:2:closed its connection");
    }
    CHECK_EQ(v[3].a.old_node_rank, 3);
    CHECK_EQ(w.last_gen, g + 1);
    CHECK_EQ(w.stats.c[STAT_RDZV_RECOVERIES], 1);
    CHECK_EQ(w.stats.c[STAT_RDZV_AGREE_US], 0); /* agreed in the turn of the break */
    t_close_all(v, 4);
    t_world_fini(&w);
}

/* Every mix of armed and late survivors, the late ones in every order: all agree on one answer, given
 * when the last survivor is in, and never before. */
static void t_every_mix(void *unused)
{
    (void)unused;
    static const int orders[6][3] = {{0, 1, 3}, {0, 3, 1}, {1, 0, 3}, {1, 3, 0}, {3, 0, 1}, {3, 1, 0}};
    for (int mask = 0; mask < 8; mask++) {
        for (int o = 0; o < 6; o++) {
            struct t_world w;
            struct t_node v[4] = {{0}};
            t_world_init(&w, 0);
            t_form_members(&w, v, 4);
            int late = 0;
            for (int k = 0; k < 3; k++)
                if (mask & (1 << k))
                    CHECK_EQ(ta_join(&w, &v[orders[0][k]], "", 1, T_ARMED), MUSTER__STATUS__OK);
                else
                    late++;
            t_kill(&v[2]);
            t_turn();
            int seen = 0;
            for (int k = 0; k < 3; k++) {
                int i = orders[o][k];
                if (mask & (1 << (i == 3 ? 2 : i)))
                    continue;
                CHECK_EQ(v[0].replies + v[1].replies + v[3].replies, 3); /* not closed before the last */
                CHECK_EQ(ta_join(&w, &v[i], "", 1, T_RECOVER), MUSTER__STATUS__OK);
                seen++;
            }
            CHECK_EQ(seen, late);
            CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 n1:1->1 n3:3->2 x n2:2:closed its connection");
            CHECK_STR(v[1].agreed, v[0].agreed);
            CHECK_STR(v[3].agreed, v[0].agreed);
            CHECK_EQ(w.stats.c[STAT_RDZV_RECOVERIES], 1);
            t_close_all(v, 4);
            t_world_fini(&w);
        }
    }
}

/* An armed member that did not arm every peer: the absent survivor is excluded at --recovery-timeout,
 * counted from the break, and the armed ones are answered then. */
static void t_armed_deadline(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[3] = {{0}};
    t_world_init(&w, 0);
    t_form_members(&w, v, 3);
    CHECK_EQ(ta_join(&w, &v[0], "", 1, T_ARMED), MUSTER__STATUS__OK);
    t_advance(10000);
    t_kill(&v[1]);
    t_advance(1999);
    CHECK_EQ(v[0].replies, 1);
    t_advance(1);
    CHECK_EQ(v[0].replies, 2);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 x n1:1:closed its connection x n2:2:did not join the recovery "
                           "round within --recovery-timeout");
    t_close_all(v, 3);
    t_world_fini(&w);
}

/* A member lost by its silence while armed (its connection open) is answered EXCLUDED at the break; the
 * others go on. */
static void t_armed_silent(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[3] = {{0}};
    char msg[256];
    t_world_init(&w, 3000);
    uint64_t g = t_form_members(&w, v, 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(ta_join(&w, &v[i], "", 1, T_ARMED), MUSTER__STATUS__OK);
    for (int k = 0; k < 2; k++) {
        t_advance(1000);
        CHECK_EQ(rdzv_heartbeat(v[0].node, g, msg, sizeof msg), MUSTER__STATUS__OK);
        CHECK_EQ(rdzv_heartbeat(v[2].node, g, msg, sizeof msg), MUSTER__STATUS__OK);
    }
    CHECK_EQ(v[1].replies, 1);
    t_advance(1000); /* n1 silent for the whole 3 s */
    CHECK_EQ(v[1].replies, 2);
    CHECK_EQ(v[1].status, MUSTER__STATUS__EXCLUDED);
    CHECK(strstr(v[1].msg, "missed its heartbeats") != NULL);
    CHECK_EQ(v[0].replies, 2);
    CHECK_EQ(v[0].status, MUSTER__STATUS__OK);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 n2:2->1 x n1:1:missed its heartbeats");
    CHECK_STR(v[2].agreed, v[0].agreed);
    t_close_all(v, 3);
    t_world_fini(&w);
}

/* A member that finishes while armed is answered NOT_MEMBER; one that joins the plain round is answered
 * CONFLICT and becomes a newcomer of the recovery its join's break starts, after the survivors. */
static void t_armed_leaves(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[4] = {{0}};
    t_world_init(&w, 0);
    t_form_members(&w, v, 4);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(ta_join(&w, &v[i], "", 1, T_ARMED), MUSTER__STATUS__OK);
    rdzv_leave(v[3].node, 1);
    v[3].node = NULL;
    CHECK_EQ(v[3].replies, 2);
    CHECK_EQ(v[3].status, MUSTER__STATUS__NOT_MEMBER);
    CHECK_EQ(v[0].replies, 1); /* a finish breaks nothing */
    CHECK_EQ(ta_join(&w, &v[0], "n0", 4, T_PLAIN), MUSTER__STATUS__OK);
    t_turn();
    CHECK_EQ(v[0].replies, 3);
    CHECK_EQ(v[0].status, MUSTER__STATUS__OK);
    CHECK_STR(v[1].agreed, "gen 2 prev 1 | n1:1->0 n2:2->1 n0:-1->2 x n0:0:joined again");
    CHECK_STR(v[0].agreed, v[1].agreed);
    CHECK_STR(v[2].agreed, v[1].agreed);
    CHECK_EQ(w.stats.c[STAT_RDZV_RECOVERIES], 1);
    t_close_all(v, 3);
    t_world_fini(&w);
}

/* Arming is refused where a recover would be, and after the break it is a plain recover. */
static void t_armed_refused(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[3] = {{0}};
    struct t_node out = {.session = 99};
    t_world_init(&w, 0);
    t_form_members(&w, v, 3);
    CHECK_EQ(ta_join(&w, &out, "", 1, T_ARMED), MUSTER__STATUS__NOT_MEMBER);
    CHECK_EQ(ta_join(&w, &v[0], "", 1, T_RECOVER), MUSTER__STATUS__CONFLICT);
    CHECK(strstr(v[0].msg, "arm the recovery") != NULL);
    CHECK_EQ(ta_join(&w, &v[0], "", 1, T_ARMED), MUSTER__STATUS__OK);
    CHECK_EQ(ta_join(&w, &v[0], "", 1, T_ARMED), MUSTER__STATUS__BAD_REQUEST); /* one pending join */
    t_kill(&v[2]);
    t_turn();
    CHECK_EQ(v[0].replies, 1);
    CHECK_EQ(ta_join(&w, &v[1], "", 1, T_ARMED), MUSTER__STATUS__OK); /* broken: a recover */
    CHECK_EQ(v[1].replies, 2);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 n1:1->1 x n2:2:closed its connection");
    CHECK_STR(v[1].agreed, v[0].agreed);
    CHECK_EQ(w.stats.c[STAT_RDZV_BAD_RECOVER], 2);
    t_close_all(v, 3);
    t_close_all(&out, 1);
    t_world_fini(&w);
}

/* Members lost in the turn of the break (they died together) are excluded by one recovery; one lost in a
 * later turn breaks the generation that recovery formed. */
static void t_lost_together(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[5] = {{0}};
    t_world_init(&w, 0);
    t_form_members(&w, v, 5);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(ta_join(&w, &v[i], "", 1, T_ARMED), MUSTER__STATUS__OK);
    t_kill(&v[1]);
    t_kill(&v[3]);
    t_turn();
    CHECK_EQ(v[0].replies, 2);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 n2:2->1 n4:4->2 x n1:1:closed its connection x n3:3:closed its "
                           "connection");
    CHECK_STR(v[4].agreed, v[0].agreed);
    CHECK_EQ(w.stats.c[STAT_RDZV_RECOVERIES], 1);
    t_kill(&v[4]); /* nobody armed generation 2 yet: the survivors recover after the event */
    CHECK_EQ(v[0].last_event, RDZV_MEMBER_LOST);
    CHECK_EQ(ta_join(&w, &v[0], "", 1, T_ARMED), MUSTER__STATUS__OK);
    CHECK_EQ(ta_join(&w, &v[2], "", 1, T_RECOVER), MUSTER__STATUS__OK);
    CHECK_STR(v[2].agreed, "gen 3 prev 2 | n0:0->0 n2:1->1 x n4:2:closed its connection");
    CHECK_STR(v[0].agreed, v[2].agreed);
    t_close_all(v, 5);
    t_world_fini(&w);
}

/* Every member lost, in one turn or one by one while the round waits for a late survivor: the job died
 * whole, so its round ends then and there (no failure at the deadline, as when nobody had armed), and a
 * newcomer forms the next generation the plain way. */
static void t_all_lost(void *unused)
{
    (void)unused;
    for (int together = 0; together < 2; together++) {
        struct t_world w;
        struct t_node v[4] = {{0}};
        t_world_init(&w, 0);
        uint64_t g = t_form_members(&w, v, 3);
        CHECK_EQ(ta_join(&w, &v[0], "", 1, T_ARMED), MUSTER__STATUS__OK);
        if (together)
            CHECK_EQ(ta_join(&w, &v[1], "", 1, T_ARMED), MUSTER__STATUS__OK);
        struct rdzv_info ri;
        t_kill(&v[2]);
        if (!together) { /* the round is open and waits for n1, which did not arm */
            t_turn();
            CHECK_EQ(rdzv_info(w.ns, &ri), 0);
            CHECK_EQ(ri.recovering, 1);
        }
        t_kill(&v[0]);
        t_kill(&v[1]);
        t_turn();
        CHECK_EQ(rdzv_info(w.ns, &ri), 0);
        CHECK_EQ(ri.recovering, 0);
        t_advance(60000);
        CHECK_EQ(w.stats.c[STAT_RDZV_RECOVERY_FAILED], 0);
        CHECK_EQ(w.stats.c[STAT_RDZV_RECOVERIES], 0);
        CHECK_EQ(ta_join(&w, &v[3], "n3", 1, T_PLAIN), MUSTER__STATUS__OK);
        CHECK_EQ(v[3].status, MUSTER__STATUS__OK);
        CHECK_EQ(v[3].a.generation, g + 1);
        t_close_all(v, 4);
        t_world_fini(&w);
    }
}

/* A member told of the break that joins the round within the break's turn (its report and its recover join
 * sent together) is not told again at the end of the turn: MEMBER_LOST comes once per generation. */
static void t_told_once(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[3] = {{0}};
    t_world_init(&w, 0);
    t_form_members(&w, v, 3);
    CHECK_EQ(ta_join(&w, &v[0], "", 1, T_ARMED), MUSTER__STATUS__OK);
    t_kill(&v[2]);
    CHECK_EQ(v[1].events, 1); /* told at the break */
    CHECK_EQ(v[0].events, 0); /* armed: told at the end of the turn */
    CHECK_EQ(ta_join(&w, &v[1], "", 1, T_RECOVER), MUSTER__STATUS__OK);
    t_turn();
    CHECK_EQ(v[0].events, 1);
    CHECK_EQ(v[1].events, 1);
    CHECK_EQ(v[0].replies, 2);
    CHECK_STR(v[1].agreed, "gen 2 prev 1 | n0:0->0 n1:1->1 x n2:2:closed its connection");
    CHECK_STR(v[0].agreed, v[1].agreed);
    t_close_all(v, 3);
    t_world_fini(&w);
}

int main(void)
{
    h_init("recovery_armed", 20);
    H_RUN(t_all_armed, NULL);
    H_RUN(t_every_mix, NULL);
    H_RUN(t_armed_deadline, NULL);
    H_RUN(t_armed_silent, NULL);
    H_RUN(t_armed_leaves, NULL);
    H_RUN(t_armed_refused, NULL);
    H_RUN(t_lost_together, NULL);
    H_RUN(t_all_lost, NULL);
    H_RUN(t_told_once, NULL);
    return h_finish();
}
