/*
 * In-process tests of recovery rounds and standbys (store-server/core/
 * rdzv_recover.c) on the fake clock of tcore.c: the round closes when every
 * survivor joined, or at --recovery-timeout with the absent excluded; a
 * second failure during it; a partitioned member answered EXCLUDED; the
 * survivors' old order kept and every node told the same; standbys admitted
 * longest waiting first; over-subscription parks the extras as standbys;
 * generation numbers never reused; bad requests refused and counted; and
 * the read-only views status pages draw from (rdzv_view.c).
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "muster.pb-c.h"
#include "rdzv.h"
#include "stats.h"
#include "tcore.h"

/* How a node joins. */
enum t_how { T_PLAIN, T_RECOVER, T_STANDBY };

/* The last call of the joins t_rjoin sends: long, so a round closes at max_nodes (a case may change it). */
static uint32_t t_last_call = 60000;

/* Join as how with the member list asked for; the join's status. */
static int t_rjoin(struct t_world *w, struct t_node *o, const char *id, uint32_t min, uint32_t max, enum t_how how)
{
    struct rdzv_join_req j = {.node_id = id,
                              .local_world_size = 2,
                              .min_nodes = min,
                              .max_nodes = max,
                              .last_call_ms = t_last_call,
                              .timeout_ms = 30000,
                              .want_members = 1,
                              .recover = how == T_RECOVER,
                              .standby = how == T_STANDBY};
    char msg[256];
    int st = t_join_req(w, o, &j, msg, sizeof msg);
    if (st != MUSTER__STATUS__OK)
        snprintf(o->agreed, sizeof o->agreed, "%s", msg);
    return st;
}

/* Recover-join every node of v named in idx (n of them). */
static void t_recover_all(struct t_world *w, struct t_node *v, const int *idx, int n)
{
    for (int i = 0; i < n; i++)
        CHECK_EQ(t_rjoin(w, &v[idx[i]], "", 1, 1, T_RECOVER), MUSTER__STATUS__OK);
}

/* One lost of four: the round closes when the last survivor joins; order and old ranks kept. */
static void t_all_survivors(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[4] = {{0}};
    t_world_init(&w, 0);
    uint64_t g = t_form_members(&w, v, 4);
    t_kill(&v[2]);
    CHECK_EQ(v[0].last_event, RDZV_MEMBER_LOST);
    CHECK_EQ(v[3].event_gen, g);
    int first[] = {3, 0};
    t_recover_all(&w, v, first, 2);
    CHECK_EQ(v[0].replies, 1); /* only the first round's answer: still waiting for n1 */
    int last[] = {1};
    t_recover_all(&w, v, last, 1);
    CHECK_EQ(v[0].replies, 2);
    CHECK_EQ(v[0].status, MUSTER__STATUS__OK);
    CHECK_EQ(v[0].a.generation, g + 1);
    CHECK_EQ(v[0].a.previous_generation, g);
    CHECK_EQ(v[0].a.node_rank, 0);
    CHECK_EQ(v[1].a.node_rank, 1);
    CHECK_EQ(v[3].a.node_rank, 2);
    CHECK_EQ(v[3].a.old_node_rank, 3);
    CHECK_EQ(v[3].a.rank_start, 4);
    CHECK_EQ(v[0].a.n_excluded, 1);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 n1:1->1 n3:3->2 x n2:2:closed its connection");
    CHECK_STR(v[1].agreed, v[0].agreed);
    CHECK_STR(v[3].agreed, v[0].agreed);
    CHECK_EQ(w.last_gen, g + 1); /* logged before anyone was answered */
    CHECK_EQ(w.stats.c[STAT_RDZV_RECOVERIES], 1);
    CHECK_EQ(w.stats.c[STAT_RDZV_EXCLUDED], 1);
    t_close_all(v, 4);
    t_world_fini(&w);
}

/* A survivor that does not join is excluded at --recovery-timeout, and then answered EXCLUDED. */
static void t_deadline(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[4] = {{0}};
    t_world_init(&w, 0);
    uint64_t g = t_form_members(&w, v, 4);
    t_kill(&v[1]);
    int rec[] = {0, 2};
    t_recover_all(&w, v, rec, 2);
    t_advance(1999);
    CHECK_EQ(v[0].replies, 1);
    t_advance(1);
    CHECK_EQ(v[0].replies, 2);
    CHECK_EQ(v[2].a.node_rank, 1);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 n2:2->1 x n1:1:closed its connection x n3:3:did not join the "
                           "recovery round within --recovery-timeout");
    CHECK_STR(v[2].agreed, v[0].agreed);
    CHECK_EQ(t_rjoin(&w, &v[3], "", 1, 1, T_RECOVER), MUSTER__STATUS__EXCLUDED);
    CHECK(strstr(v[3].agreed, "replaced") != NULL);
    CHECK_EQ(w.stats.c[STAT_RDZV_BAD_RECOVER], 1);
    /* It may come back as a newcomer: it waits for the next round. */
    CHECK_EQ(t_rjoin(&w, &v[3], "n3", 2, 4, T_PLAIN), MUSTER__STATUS__OK);
    CHECK(v[3].parked != 0);
    CHECK_EQ(w.last_gen, g + 1);
    t_close_all(v, 4);
    t_world_fini(&w);
}

/* A second member lost during the round: excluded and listed in the answer (each survivor heard
 * MEMBER_LOST once, for the break), and the round closes without it. */
static void t_second_failure(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[5] = {{0}};
    t_world_init(&w, 0);
    t_form_members(&w, v, 5);
    t_kill(&v[0]);
    int rec[] = {1, 4};
    t_recover_all(&w, v, rec, 2);
    int before = v[3].events;
    t_kill(&v[2]);
    CHECK_EQ(v[3].events, before); /* MEMBER_LOST told the break; the second loss is in the answer */
    t_advance(1500);                   /* the loss extended the deadline: not closed at 2000 */
    int last[] = {3};
    t_recover_all(&w, v, last, 1);
    CHECK_EQ(v[1].status, MUSTER__STATUS__OK);
    CHECK_STR(v[1].agreed,
              "gen 2 prev 1 | n1:1->0 n3:3->1 n4:4->2 x n0:0:closed its connection x n2:2:closed its connection");
    CHECK_STR(v[3].agreed, v[1].agreed);
    CHECK_STR(v[4].agreed, v[1].agreed);
    t_close_all(v, 5);
    t_world_fini(&w);
}

/* A member whose heartbeats stopped (partitioned, its connection still open) is excluded: the others
 * recover without waiting for it, and it is answered EXCLUDED, its heartbeat STALE_GENERATION. */
static void t_partitioned(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[3] = {{0}};
    char msg[128];
    t_world_init(&w, 1000);
    uint64_t g = t_form_members(&w, v, 3);
    t_advance(600);
    CHECK_EQ(rdzv_heartbeat(v[0].node, g, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(rdzv_heartbeat(v[1].node, g, msg, sizeof msg), MUSTER__STATUS__OK);
    t_advance(400); /* n2's deadline */
    CHECK_EQ(v[0].last_event, RDZV_MEMBER_LOST);
    int rec[] = {0, 1};
    t_recover_all(&w, v, rec, 2);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 n1:1->1 x n2:2:missed its heartbeats");
    CHECK_EQ(t_rjoin(&w, &v[2], "", 1, 1, T_RECOVER), MUSTER__STATUS__EXCLUDED);
    CHECK_EQ(rdzv_heartbeat(v[2].node, g, msg, sizeof msg), MUSTER__STATUS__STALE_GENERATION);
    t_close_all(v, 3);
    t_world_fini(&w);
}

/* Standbys never close a round; a recovery admits them after the survivors, longest waiting first,
 * up to max_nodes. */
static void t_standbys(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[2] = {{0}}, s[3] = {{0}};
    t_world_init(&w, 0);
    t_last_call = 0; /* rounds close at min_nodes */
    for (int i = 0; i < 3; i++)
        s[i].session = 10 + (uint64_t)i;
    CHECK_EQ(t_rjoin(&w, &s[0], "s0", 2, 3, T_STANDBY), MUSTER__STATUS__OK);
    CHECK_EQ(s[0].replies, 0); /* one standby is not a round */
    CHECK_EQ(w.gens, 0);
    v[0].session = 1;
    v[1].session = 2;
    CHECK_EQ(t_rjoin(&w, &v[0], "n0", 2, 3, T_PLAIN), MUSTER__STATUS__OK);
    CHECK_EQ(v[0].replies, 0); /* min 2: the standby does not count */
    CHECK_EQ(t_rjoin(&w, &v[1], "n1", 2, 3, T_PLAIN), MUSTER__STATUS__OK);
    /* The round closes at min with room for one more: the standby fills it. */
    CHECK_EQ(v[0].replies, 1);
    CHECK_EQ(s[0].replies, 1);
    CHECK_EQ(s[0].a.num_nodes, 3);
    CHECK_EQ(t_rjoin(&w, &s[1], "s1", 2, 3, T_STANDBY), MUSTER__STATUS__OK);
    CHECK_EQ(t_rjoin(&w, &s[2], "s2", 2, 3, T_STANDBY), MUSTER__STATUS__OK);
    CHECK_EQ(v[0].events, 0); /* a standby is not a newcomer waiting */
    t_kill(&v[1]);
    t_kill(&s[0]);
    int rec[] = {0};
    t_recover_all(&w, v, rec, 1);
    CHECK_EQ(v[0].replies, 2);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 s1:-1->1 s2:-1->2 x n1:1:closed its connection x "
                           "s0:2:closed its connection");
    CHECK_STR(s[1].agreed, v[0].agreed);
    CHECK_EQ(s[2].a.old_node_rank, UINT32_MAX);
    CHECK_EQ(w.stats.c[STAT_RDZV_STANDBYS_ADMITTED], 3);
    t_close_all(v, 2);
    t_close_all(s, 3);
    t_world_fini(&w);
    t_last_call = 60000;
}

/* A job parks at most --max-standbys standbys: one more is refused LIMIT, named and counted, and the
 * standbys already parked keep their places. */
static void t_standby_limit(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node s[3] = {{0}};
    t_world_init(&w, 0);
    w.core.lim.max_standbys = 2;
    for (int i = 0; i < 3; i++)
        s[i].session = 30 + (uint64_t)i;
    CHECK_EQ(t_rjoin(&w, &s[0], "s0", 2, 3, T_STANDBY), MUSTER__STATUS__OK);
    CHECK_EQ(t_rjoin(&w, &s[1], "s1", 2, 3, T_STANDBY), MUSTER__STATUS__OK);
    CHECK_EQ(t_rjoin(&w, &s[2], "s2", 2, 3, T_STANDBY), MUSTER__STATUS__LIMIT);
    CHECK(strstr(s[2].agreed, "--max-standbys 2") != NULL);
    CHECK_EQ(w.stats.c[STAT_RDZV_LIMIT_STANDBYS], 1);
    CHECK_EQ(s[0].replies + s[1].replies, 0);
    t_close_all(s, 3);
    t_world_fini(&w);
}

/* Two nodes of different queues claiming one id never form one generation together: a standby named as
 * a joiner of the round ([p, q, q] before), and a newcomer named as a survivor of a recovery ([a, b, b, a]
 * before).  The first in the generation's order keeps the id; the other is answered CONFLICT, counted. */
static void t_duplicate_ids(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node p[3] = {{0}}, v3[3] = {{0}}, x[1] = {{0}};
    t_world_init(&w, 0);
    t_last_call = 0;
    for (int i = 0; i < 3; i++)
        p[i].session = 20 + (uint64_t)i;
    CHECK_EQ(t_rjoin(&w, &p[2], "q", 2, 3, T_STANDBY), MUSTER__STATUS__OK);
    CHECK_EQ(t_rjoin(&w, &p[0], "p", 2, 3, T_PLAIN), MUSTER__STATUS__OK);
    CHECK_EQ(t_rjoin(&w, &p[1], "q", 2, 3, T_PLAIN), MUSTER__STATUS__OK);
    CHECK_EQ(p[0].replies, 1);
    CHECK_EQ(p[0].a.num_nodes, 2);
    CHECK_STR(p[0].agreed, "gen 1 prev 0 | p:-1->0 q:-1->1");
    CHECK_EQ(p[2].replies, 1);
    CHECK_EQ(p[2].status, MUSTER__STATUS__CONFLICT);
    CHECK(strstr(p[2].msg, "node_id 'q' is already taken") != NULL);
    CHECK_EQ(w.stats.c[STAT_RDZV_DUPLICATE_IDS], 1);
    t_close_all(p, 3);
    t_world_fini(&w);
    /* A recovery: survivors n0 and n1, and a newcomer that calls itself n0. */
    t_world_init(&w, 0);
    t_last_call = 60000;
    t_form_members(&w, v3, 3);
    t_kill(&v3[2]);
    x[0].session = 9;
    CHECK_EQ(t_rjoin(&w, &x[0], "n0", 1, 3, T_PLAIN), MUSTER__STATUS__OK);
    int rec[] = {0, 1};
    t_recover_all(&w, v3, rec, 2);
    CHECK_STR(v3[0].agreed, "gen 2 prev 1 | n0:0->0 n1:1->1 x n2:2:closed its connection");
    CHECK_EQ(x[0].status, MUSTER__STATUS__CONFLICT);
    CHECK_EQ(w.stats.c[STAT_RDZV_DUPLICATE_IDS], 1);
    t_close_all(v3, 3);
    t_close_all(x, 1);
    t_world_fini(&w);
    t_last_call = 60000;
}

/* More joiners than max_nodes: members of the last generation go first, the extras wait as standbys
 * (the job is never closed), and a later recovery admits them. */
static void t_oversubscribed(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[4] = {{0}};
    t_world_init(&w, 0);
    t_form_members(&w, v, 2);
    v[2].session = 3;
    v[3].session = 4;
    CHECK_EQ(t_rjoin(&w, &v[2], "n2", 2, 2, T_PLAIN), MUSTER__STATUS__OK);
    CHECK_EQ(t_rjoin(&w, &v[3], "n3", 2, 2, T_PLAIN), MUSTER__STATUS__OK);
    CHECK_EQ(v[0].last_event, RDZV_NODE_WAITING);
    CHECK_EQ(t_rjoin(&w, &v[0], "n0", 2, 2, T_PLAIN), MUSTER__STATUS__OK); /* re-forms: 3 joiners, max 2 */
    CHECK_EQ(v[0].a.generation, 2);
    CHECK_EQ(v[2].a.generation, 2);
    CHECK_EQ(v[3].replies, 0); /* a standby now, still parked */
    CHECK(v[3].parked != 0);
    t_kill(&v[2]);
    int rec[] = {0};
    t_recover_all(&w, v, rec, 1);
    CHECK_EQ(v[3].a.generation, 3);
    CHECK_STR(v[3].agreed, v[0].agreed);
    CHECK_EQ(v[3].a.node_rank, 1);
    t_close_all(v, 4);
    t_world_fini(&w);
}

/* A job that dies whole while its recovery round is open (two survivors joined it, every other
 * connection then closes one by one, each in its own turn): each member hears MEMBER_LOST once, for the
 * break, so the daemon's work grows with the members, not with their square; the two that joined are
 * answered with the round, and nothing is counted failed. */
static void t_dies_whole(void *unused)
{
    (void)unused;
    enum { N = 48 }; /* a namespace parks at most half the fake world's --max-waiters (100) */
    static struct t_node v[N];
    struct t_world w;
    memset(v, 0, sizeof v);
    t_world_init(&w, 0);
    t_form_members(&w, v, N);
    t_kill(&v[7]);
    int rec[] = {0, 1};
    t_recover_all(&w, v, rec, 2);
    for (int i = 2; i < N; i++)
        if (i != 7) {
            t_kill(&v[i]);
            t_turn();
        }
    long long events = 0;
    for (int i = 0; i < N; i++)
        events += v[i].events;
    CHECK_EQ(events, N - 1);
    CHECK_EQ(v[0].status, MUSTER__STATUS__OK);
    CHECK_STR(v[0].agreed, v[1].agreed);
    CHECK_EQ(v[1].a.num_nodes, 2);
    CHECK_EQ(w.stats.c[STAT_RDZV_RECOVERY_FAILED], 0);
    t_close_all(v, N);
    t_world_fini(&w);
}

/* Generation numbers continue from a restored counter (a replayed log), and a recovery that cannot
 * reach min_nodes fails with TIMEOUT at the deadline without forming anything. */
static void t_numbers_and_min(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[3] = {{0}};
    t_world_init(&w, 0);
    rdzv_restore_generation(w.ns, 41);
    for (int i = 0; i < 3; i++) {
        char id[8];
        snprintf(id, sizeof id, "n%d", i);
        v[i].session = (uint64_t)i + 1;
        CHECK_EQ(t_rjoin(&w, &v[i], id, 3, 3, T_PLAIN), MUSTER__STATUS__OK);
    }
    uint64_t g = v[0].a.generation;
    CHECK_EQ(g, 42);
    t_kill(&v[0]);
    t_kill(&v[1]);
    int rec[] = {2};
    t_recover_all(&w, v, rec, 1); /* every survivor is in, but 1 < min_nodes 3 */
    CHECK_EQ(v[2].replies, 1);
    t_advance(2000);
    CHECK_EQ(v[2].replies, 2);
    CHECK_EQ(v[2].status, MUSTER__STATUS__TIMEOUT);
    CHECK_EQ(w.stats.c[STAT_RDZV_RECOVERY_FAILED], 1);
    CHECK_EQ(w.last_gen, 42);
    t_close_all(v, 3);
    t_world_fini(&w);
}

/* Bad requests: a recovery by a never-member, of a running generation, a report of a non-member;
 * typed errors, counted, nobody else disturbed. */
static void t_bad_input(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[2] = {{0}}, stranger = {.session = 9};
    char msg[256];
    uint64_t gen = 0;
    t_world_init(&w, 0);
    t_form_members(&w, v, 2);
    CHECK_EQ(t_rjoin(&w, &stranger, "", 1, 1, T_RECOVER), MUSTER__STATUS__NOT_MEMBER);
    CHECK_EQ(t_rjoin(&w, &v[0], "", 1, 1, T_RECOVER), MUSTER__STATUS__CONFLICT);
    CHECK(strstr(v[0].agreed, "running") != NULL);
    CHECK_EQ(w.stats.c[STAT_RDZV_BAD_RECOVER], 2);
    CHECK_EQ(rdzv_report(v[0].node, "nobody", "x", &gen, msg, sizeof msg), MUSTER__STATUS__NOT_FOUND);
    CHECK_EQ(w.stats.c[STAT_RDZV_BAD_REPORTS], 1);
    CHECK_EQ(v[1].events, 0);
    /* A report is a vote: alone (and again by the same reporter) it is held, and nobody is lost. */
    CHECK_EQ(rdzv_report(v[0].node, "n1", "allreduce timed out", &gen, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(rdzv_report(v[0].node, "n1", "allreduce timed out", &gen, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(gen, 1);
    CHECK_EQ(v[1].events, 0);
    CHECK_EQ(w.stats.c[STAT_RDZV_REPORTS_HELD], 2);
    /* The peer's own word agrees: a member that reports itself is lost at once. */
    CHECK_EQ(rdzv_report(v[1].node, "n1", "cuda error", &gen, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(v[0].last_event, RDZV_MEMBER_LOST);
    int rec[] = {0};
    t_recover_all(&w, v, rec, 1);
    CHECK_EQ(v[0].status, MUSTER__STATUS__OK);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 x n1:1:reported failed by 'n1': cuda error");
    CHECK_EQ(t_rjoin(&w, &v[1], "", 1, 1, T_RECOVER), MUSTER__STATUS__EXCLUDED);
    t_close_all(v, 2);
    stranger.gone = 1;
    if (stranger.node)
        rdzv_node_gone(stranger.node);
    t_world_fini(&w);
}

/* One member that reports every other member excludes nobody (it would be the world's rank 0 alone);
 * a second member's report excludes, naming both. */
static void t_report_votes(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[4] = {{0}};
    char msg[256];
    uint64_t gen = 0;
    t_world_init(&w, 0);
    uint64_t g = t_form_members(&w, v, 4);
    for (int i = 1; i < 4; i++) {
        char id[8];
        snprintf(id, sizeof id, "n%d", i);
        CHECK_EQ(rdzv_report(v[0].node, id, "hang", &gen, msg, sizeof msg), MUSTER__STATUS__OK);
    }
    for (int i = 0; i < 4; i++)
        CHECK_EQ(v[i].events, 0);
    CHECK_EQ(w.stats.c[STAT_RDZV_REPORTS_HELD], 3);
    CHECK_EQ(rdzv_report(v[2].node, "n3", "allreduce timed out", &gen, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(v[1].last_event, RDZV_MEMBER_LOST);
    int rec[] = {0, 1, 2};
    t_recover_all(&w, v, rec, 3);
    CHECK_EQ(v[0].a.generation, g + 1);
    CHECK_STR(v[0].agreed, "gen 2 prev 1 | n0:0->0 n1:1->1 n2:2->2 x n3:3:reported failed by 'n2' and 'n0': "
                           "allreduce timed out");
    /* The votes were about generation 1: in generation 2 one report is held again. */
    CHECK_EQ(rdzv_report(v[2].node, "n1", "hang", &gen, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(v[0].last_event, RDZV_MEMBER_LOST); /* unchanged: the event of generation 1 */
    CHECK_EQ(v[0].event_gen, g);
    t_close_all(v, 4);
    t_world_fini(&w);
}

/* With heartbeats, a report of a member that missed a beat (silent for half the timeout) agrees with
 * its own liveness and excludes it at once, before its heartbeat timeout. */
static void t_report_heartbeat(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[3] = {{0}};
    char msg[256];
    uint64_t gen = 0;
    t_world_init(&w, 3000);
    uint64_t g = t_form_members(&w, v, 3);
    t_advance(1000);
    CHECK_EQ(rdzv_heartbeat(v[0].node, g, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(rdzv_heartbeat(v[1].node, g, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(rdzv_report(v[0].node, "n1", "hang", &gen, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(v[2].events, 0); /* n1 beats: held */
    t_advance(600);           /* n2 silent 1.6 s > 1.5 s */
    CHECK_EQ(rdzv_report(v[0].node, "n2", "hang", &gen, msg, sizeof msg), MUSTER__STATUS__OK);
    CHECK_EQ(v[1].last_event, RDZV_MEMBER_LOST);
    CHECK_EQ(w.stats.c[STAT_RDZV_HEARTBEAT_TIMEOUTS], 0);
    t_close_all(v, 3);
    t_world_fini(&w);
}

/* musterd's own timings of a recovery: from the break to the formation, and forming plus answering. */
static void t_recovery_timed(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[3] = {{0}};
    t_world_init(&w, 0);
    t_form_members(&w, v, 3);
    t_kill(&v[1]);
    t_advance(30);
    int rec[] = {0, 2};
    t_recover_all(&w, v, rec, 2);
    CHECK_EQ(v[0].a.generation, 2);
    CHECK_EQ(w.stats.c[STAT_RDZV_AGREE_US], 30000);
    CHECK_EQ(w.stats.c[STAT_RDZV_ANSWER_US], 0); /* the fake clock stands still within a turn */
    t_close_all(v, 3);
    t_world_fini(&w);
}

/* Restarts: a plain round that re-forms a broken generation closes as soon as every live member is back,
 * without the last call; a newcomer among them (a replacement, a scale-up) gets the last call. */
static void t_restart_all_back(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[5] = {{0}};
    t_world_init(&w, 0);
    uint64_t g = t_form_members(&w, v, 4);
    t_last_call = 1000;
    t_kill(&v[2]);
    int back[] = {3, 0, 1};
    const char *ids[] = {"n3", "n0", "n1"};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(t_rjoin(&w, &v[back[i]], ids[i], 1, 4, T_PLAIN), MUSTER__STATUS__OK);
        CHECK_EQ(v[0].replies, i < 2 ? 1 : 2); /* closed by the third, with no time passing */
    }
    CHECK_EQ(v[0].a.generation, g + 1);
    CHECK_EQ(v[3].a.world_size, 6);
    /* n1 is lost; n0 and n3 come back with a newcomer: the last call runs. */
    t_kill(&v[1]);
    v[4].session = 5;
    CHECK_EQ(t_rjoin(&w, &v[0], "n0", 1, 4, T_PLAIN), MUSTER__STATUS__OK);
    CHECK_EQ(t_rjoin(&w, &v[4], "n9", 1, 4, T_PLAIN), MUSTER__STATUS__OK);
    CHECK_EQ(t_rjoin(&w, &v[3], "n3", 1, 4, T_PLAIN), MUSTER__STATUS__OK);
    t_advance(999);
    CHECK_EQ(v[0].replies, 2);
    t_advance(1);
    CHECK_EQ(v[0].replies, 3);
    CHECK_EQ(v[4].a.generation, g + 2);
    t_last_call = 60000;
    t_close_all(v, 5);
    t_world_fini(&w);
}

/* The other orders: survivors join again before the loss is known (the first join breaks the
 * generation), and the round closes, with no time passing, when the lost node goes; or the lost node
 * goes between two of them. */
static void t_restart_all_back_orders(void *unused)
{
    (void)unused;
    for (int order = 0; order < 2; order++) {
        struct t_world w;
        struct t_node v[3] = {{0}};
        t_world_init(&w, 0);
        uint64_t g = t_form_members(&w, v, 3);
        t_last_call = 1000;
        CHECK_EQ(t_rjoin(&w, &v[0], "n0", 1, 3, T_PLAIN), MUSTER__STATUS__OK);
        if (order == 1)
            t_kill(&v[2]);
        CHECK_EQ(t_rjoin(&w, &v[1], "n1", 1, 3, T_PLAIN), MUSTER__STATUS__OK);
        CHECK_EQ(v[0].replies, order == 1 ? 2 : 1);
        if (order == 0)
            t_kill(&v[2]);
        CHECK_EQ(v[0].replies, 2);
        CHECK_EQ(v[1].a.generation, g + 1);
        CHECK_EQ(v[1].a.world_size, 4);
        t_last_call = 60000;
        t_close_all(v, 3);
        t_world_fini(&w);
    }
}

/* A join that times out says who joined and which members of the last generation did not come back,
 * with when each was last seen. */
static void t_timeout_names_missing(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[4] = {{0}};
    t_world_init(&w, 0);
    t_form_members(&w, v, 4);
    t_kill(&v[3]);
    CHECK_EQ(t_join(&w, &v[0], "n0", 4, 4, 0), MUSTER__STATUS__OK);
    t_advance(500);
    CHECK_EQ(t_join(&w, &v[1], "n1", 4, 4, 0), MUSTER__STATUS__OK);
    t_advance(500);
    CHECK_EQ(v[0].status, MUSTER__STATUS__TIMEOUT);
    CHECK_STR(v[0].msg, "round did not close in time: 2 of min 4 nodes joined (others: n1); not back from "
                        "generation 1: n2 (last seen 1.0 s ago)");
    t_close_all(v, 4);
    t_world_fini(&w);
}

/* What a view walk saw: the nodes as "id@peer:state:age" words, and the lost members with causes. */
struct t_seen {
    char text[512];
};

/* Append one node of a view walk as "id@peer[:lost][:recovering] age". */
static void t_see_node(void *arg, const struct rdzv_node_view *v)
{
    struct t_seen *s = arg;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof s->text - n, "%s%s@%s%s%s %llu", n ? ", " : "", v->node_id, v->peer ? v->peer : "?",
             v->lost ? ":lost" : "", v->recovering ? ":recovering" : "", (unsigned long long)v->seen_age_ms);
}

/* Append one lost member as "id:rank:cause". */
static void t_see_gone(void *arg, const struct rdzv_excluded *e)
{
    struct t_seen *s = arg;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof s->text - n, "%s%s:%u:%s", n ? ", " : "", e->node_id, (unsigned)e->old_node_rank,
             e->cause);
}

/* Append one timeline event as "kind gen what[: cause]" (the kinds by number). */
static void t_see_event(void *arg, const struct rdzv_event *ev)
{
    struct t_seen *s = arg;
    size_t n = strlen(s->text);
    snprintf(s->text + n, sizeof s->text - n, "%s%d %llu %s%s%s", n ? " | " : "", (int)ev->kind,
             (unsigned long long)ev->generation, ev->what, *ev->cause ? ": " : "", ev->cause);
}

/* The read-only views a status page draws from: members with address, age and state, standbys, the
 * recovery round while open, the lost members with causes, counters, and the timeline's recovery events. */
static void t_views(void *unused)
{
    (void)unused;
    struct t_world w;
    struct t_node v[3] = {{0}}, sb = {0};
    t_world_init(&w, 0);
    uint64_t g = t_form_members(&w, v, 3);
    sb.session = 9;
    CHECK_EQ(t_rjoin(&w, &sb, "s0", 1, 3, T_STANDBY), MUSTER__STATUS__OK);
    t_advance(1500);
    struct rdzv_info ri;
    CHECK_EQ(rdzv_info(w.ns, &ri), 0);
    CHECK_EQ(ri.standbys, 1);
    CHECK_EQ(ri.formed, 1);
    CHECK_EQ(ri.recovering, 0);
    struct t_seen s = {""};
    rdzv_each_member_view(w.ns, t_see_node, &s);
    CHECK_STR(s.text, "n0@10.0.0.1:5000 1500, n1@10.0.0.2:5000 1500, n2@10.0.0.3:5000 1500");
    s.text[0] = 0;
    rdzv_each_standby(w.ns, t_see_node, &s);
    CHECK_STR(s.text, "s0@10.0.0.9:5000 1500");
    uint64_t gone_gen = 7;
    rdzv_each_gone(w.ns, &gone_gen, t_see_gone, &s);
    CHECK_EQ(gone_gen, 0);

    t_kill(&v[1]);
    int first[] = {0};
    t_recover_all(&w, v, first, 1);
    CHECK_EQ(rdzv_info(w.ns, &ri), 0);
    CHECK_EQ(ri.recovering, 1);
    CHECK_EQ(ri.recovery_joined, 1);
    CHECK(ri.recovery_deadline_ms > t_wall_ms(NULL));
    s.text[0] = 0;
    rdzv_each_member_view(w.ns, t_see_node, &s);
    CHECK_STR(s.text, "n0@10.0.0.1:5000:recovering 0, n2@10.0.0.3:5000 1500"); /* n1's record went with it */

    int last[] = {2};
    t_recover_all(&w, v, last, 1);
    CHECK_EQ(rdzv_info(w.ns, &ri), 0);
    CHECK_EQ(ri.generation, g + 1);
    CHECK_EQ(ri.recovering, 0);
    CHECK_EQ(ri.standbys, 0); /* admitted into the free place */
    CHECK_EQ(ri.formed, 2);
    CHECK_EQ(ri.recoveries, 1);
    s.text[0] = 0;
    rdzv_each_gone(w.ns, &gone_gen, t_see_gone, &s);
    CHECK_EQ(gone_gen, g);
    CHECK_STR(s.text, "n1:1:closed its connection");
    s.text[0] = 0;
    rdzv_each_event(w.ns, t_see_event, &s);
    char want[512];
    snprintf(want, sizeof want,
             "%d 1 n0 | %d 1 n1 | %d 1 n2 | %d 1  | %d 2 s0: as a standby | %d 1 n1: closed its connection | "
             "%d 2 n0: the recovery round | %d 1 n0 | %d 2 n2: the recovery round | %d 1 n1: closed its connection | "
             "%d 2 : recovery of generation 1",
             RDZV_EV_JOINED, RDZV_EV_JOINED, RDZV_EV_JOINED, RDZV_EV_ASSIGNED, RDZV_EV_JOINED, RDZV_EV_FAILED,
             RDZV_EV_JOINED, RDZV_EV_RECOVERY_OPENED, RDZV_EV_JOINED, RDZV_EV_EXCLUDED, RDZV_EV_RECOVERED);
    CHECK_STR(s.text, want);
    t_close_all(v, 3);
    t_close_all(&sb, 1);
    t_world_fini(&w);
}

/* The first and last timeline events' details, and how many there are. */
struct t_ends {
    char first[RDZV_ID_MAX + 1], last[RDZV_ID_MAX + 1];
    int n;
};

/* Note one event's detail as the first (once) and the last. */
static void t_see_end(void *arg, const struct rdzv_event *ev)
{
    struct t_ends *e = arg;
    if (e->n++ == 0)
        snprintf(e->first, sizeof e->first, "%s", ev->what);
    snprintf(e->last, sizeof e->last, "%s", ev->what);
}

/* The timeline ring is allocated at the first event, grows as it fills and keeps the last RDZV_RING. */
static void t_timeline_ring(void *unused)
{
    (void)unused;
    struct t_world w;
    t_world_init(&w, 0);
    rdzv_restore_generation(w.ns, 1); /* rendezvous state without a single event */
    CHECK_EQ(w.stats.c[STAT_RDZV_TIMELINE_BYTES], 0);
    char key[64];
    for (int i = 0; i < 100; i++) {
        int len = snprintf(key, sizeof key, "nccl/1/world/id/%d", i);
        rdzv_note_key(w.ns, key, (size_t)len);
        if (i == 0)
            CHECK(w.stats.c[STAT_RDZV_TIMELINE_BYTES] > 0 &&
                  w.stats.c[STAT_RDZV_TIMELINE_BYTES] <= 8 * sizeof(struct rdzv_event));
    }
    CHECK_EQ(w.stats.c[STAT_RDZV_TIMELINE_BYTES], RDZV_RING * sizeof(struct rdzv_event));
    struct t_ends e = {{0}, {0}, 0};
    rdzv_each_event(w.ns, t_see_end, &e);
    CHECK_EQ(e.n, RDZV_RING);
    CHECK_STR(e.first, "nccl/1/world/id/36");
    CHECK_STR(e.last, "nccl/1/world/id/99");
    t_world_fini(&w);
    CHECK_EQ(w.stats.c[STAT_RDZV_TIMELINE_BYTES], 0);
}

int main(void)
{
    h_init("recovery", 20);
    H_RUN(t_all_survivors, NULL);
    H_RUN(t_deadline, NULL);
    H_RUN(t_second_failure, NULL);
    H_RUN(t_dies_whole, NULL);
    H_RUN(t_partitioned, NULL);
    H_RUN(t_standbys, NULL);
    H_RUN(t_duplicate_ids, NULL);
    H_RUN(t_standby_limit, NULL);
    H_RUN(t_oversubscribed, NULL);
    H_RUN(t_numbers_and_min, NULL);
    H_RUN(t_bad_input, NULL);
    H_RUN(t_report_votes, NULL);
    H_RUN(t_report_heartbeat, NULL);
    H_RUN(t_restart_all_back, NULL);
    H_RUN(t_restart_all_back_orders, NULL);
    H_RUN(t_recovery_timed, NULL);
    H_RUN(t_timeout_names_missing, NULL);
    H_RUN(t_views, NULL);
    H_RUN(t_timeline_ring, NULL);
    return h_finish();
}
