/*
 * Recovery rounds against a real musterd, with member processes killed by
 * SIGKILL: 8 members form a generation; one is killed, then two at once,
 * then one more while a recovery round is open (another survivor held
 * stopped so the round cannot close yet), with a standby waiting.  After
 * each failure every survivor must receive the same answer (a hash of the
 * generation, the member order with old ranks and the excluded list with
 * causes, computed by each process from what it received), the survivors
 * keep their relative order, the standby is admitted after them, and no
 * generation number is handed out twice.  Then random kill schedules on
 * 8..32 members (up to 100, bounded at 60 s) check the same agreement,
 * with a random half of the members arming their recovery ahead
 * (muster_rdzv_arm) and the rest joining after the loss event; and a job
 * whose members all arm recovers twice.  A member that armed counts as
 * present until its own loss is known, so members killed "at once" by
 * this test (stopped first, then killed one by one) are drawn from those
 * that did not arm: stopped armed members would be kept by the first
 * recovery and lost in the next (docs/launcher.md, "armed recovery").
 *
 * Members are processes (fork), each with its own handle; they report
 * through a pipe, never through checks.
 */
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

#define T_MAX 32

static struct h_daemon d;

/* A member process, the pipe it reports on, and what it said last. */
struct member {
    pid_t pid;
    int rfd;
    int alive;
    uint64_t gen, prev;
    unsigned old, rank, nx;
    unsigned long long hash;
};

/* FNV-1a over s, continuing from h. */
static unsigned long long t_fnv(unsigned long long h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Hash what every node of a round must agree on: generation, predecessor, members, excluded. */
static unsigned long long t_digest(const muster_assignment *a)
{
    char buf[512];
    unsigned long long h = 14695981039346656037ull;
    snprintf(buf, sizeof buf, "%" PRIu64 "/%" PRIu64 "|", a->generation, a->previous_generation);
    h = t_fnv(h, buf);
    for (size_t i = 0; i < a->n_members; i++) {
        snprintf(buf, sizeof buf, "%s:%d:%u:%u,", a->members[i].node_id, (int)a->members[i].old_node_rank,
                 a->members[i].node_rank, a->members[i].rank_start);
        h = t_fnv(h, buf);
    }
    for (size_t i = 0; i < a->n_excluded; i++) {
        snprintf(buf, sizeof buf, "x%s:%u:%s,", a->excluded[i].node_id, a->excluded[i].old_node_rank,
                 a->excluded[i].cause);
        h = t_fnv(h, buf);
    }
    return h;
}

/* In the child: write one report line "gen prev old rank nexcluded hash". */
static void t_report(int wfd, const muster_assignment *a)
{
    char line[160];
    int n = snprintf(line, sizeof line, "%" PRIu64 " %" PRIu64 " %d %u %zu %llu\n", a->generation,
                     a->previous_generation, (int)a->old_node_rank, a->node_rank, a->n_excluded, t_digest(a));
    (void)!write(wfd, line, (size_t)n);
}

/* In the child: heartbeat (armed: arm the recovery of each generation first), and on MEMBER_LOST of its
 * generation join the recovery round and report; bounded by 120 s.  Returns when it is excluded or the
 * handle fails. */
static void t_member_loop(muster_t *m, const muster_rdzv_opts *o, muster_assignment *a, int armed, int wfd)
{
    int64_t end = h_now_ms() + 120000;
    while (h_now_ms() < end) {
        if (armed && muster_rdzv_arm(m, o, 30000) != MUSTER_OK)
            return;
        muster_event *ev = NULL;
        int rc = muster_next_event(m, &ev, muster_rdzv_heartbeat_interval(m));
        int lost = rc == MUSTER_OK && ev->kind == MUSTER_EVENT_MEMBER_LOST && ev->generation == a->generation;
        muster_event_free(ev);
        if (rc != MUSTER_OK && rc != MUSTER_ETIMEDOUT)
            return;
        if (!lost) {
            muster_rdzv_heartbeat(m, a->generation, 2000);
            continue;
        }
        muster_assignment *next = NULL;
        rc = muster_rdzv_recover(m, o, &next, 30000);
        if (rc != MUSTER_OK) {
            char line[32];
            int n = snprintf(line, sizeof line, "err %d\n", rc);
            (void)!write(wfd, line, (size_t)n);
            return;
        }
        muster_assignment_free(a);
        a = next;
        t_report(wfd, a);
    }
    muster_assignment_free(a);
}

/* In the child: join (as a standby when asked) as id, report, then follow the job; never returns. */
static void t_member_child(const char *ns, const char *id, int n, int standby, int armed, int wfd)
{
    alarm(0);
    int err = 0;
    muster_t *m = hc_try_connect(&d, ns, NULL, &err);
    muster_assignment *a = NULL;
    muster_rdzv_opts o = {.node_id = id,
                          .local_world_size = 2,
                          .min_nodes = 1,
                          .max_nodes = (uint32_t)n,
                          .last_call_ms = 20000,
                          .want_members = 1,
                          .standby = standby};
    if (!m || muster_rdzv_join(m, &o, &a, 60000) != MUSTER_OK)
        _exit(2);
    t_report(wfd, a);
    t_member_loop(m, &o, a, armed, wfd);
    muster_close(m);
    _exit(0);
}

/* Start a member process (armed: it arms its recovery in each generation). */
static void t_start_as(struct member *mb, const char *ns, const char *id, int n, int standby, int armed)
{
    int p[2];
    memset(mb, 0, sizeof *mb);
    mb->pid = -1;
    mb->rfd = -1;
    if (pipe(p) < 0)
        return;
    fflush(NULL);
    mb->pid = fork();
    if (mb->pid == 0) {
        close(p[0]);
        t_member_child(ns, id, n, standby, armed, p[1]);
    }
    close(p[1]);
    h_track(mb->pid);
    mb->rfd = p[0];
    mb->alive = mb->pid > 0;
}

/* Start a member process that joins the recovery round after the loss event. */
static void t_start(struct member *mb, const char *ns, const char *id, int n, int standby)
{
    t_start_as(mb, ns, id, n, standby, 0);
}

/* Read the member's next report within ms; 0, or -1 (none, or an error line). */
static int t_read(struct member *mb, int ms)
{
    char buf[160];
    h_read_line(mb->rfd, buf, sizeof buf, ms);
    int old = 0;
    if (sscanf(buf, "%" SCNu64 " %" SCNu64 " %d %u %u %llu", &mb->gen, &mb->prev, &old, &mb->rank, &mb->nx,
               &mb->hash) != 6) {
        printf("  member %d said '%s'\n", (int)mb->pid, buf);
        return -1;
    }
    mb->old = (unsigned)old;
    return 0;
}

/* Kill a member with SIGKILL and reap it. */
static void t_kill(struct member *mb)
{
    h_kill_child(&mb->pid, &mb->rfd);
    mb->alive = 0;
}

/* Kill the members idx[0..k) "at once": all are stopped first, so none of them can join a recovery
 * round that the death of another opened. */
static void t_kill_many(struct member *v, const int *idx, int k)
{
    for (int j = 0; j < k; j++)
        kill(v[idx[j]].pid, SIGSTOP);
    for (int j = 0; j < k; j++)
        t_kill(&v[idx[j]]);
}

/* End a case: every live member stopped before any is killed, so that no survivor joins a recovery
 * round that would then fail at --recovery-timeout, while a later case runs (the check at the end
 * counts failed recoveries; a round that armed members opened ends when the last of them is lost). */
static void t_kill_all(struct member *v, int n)
{
    int idx[T_MAX + 1], k = 0;
    for (int i = 0; i < n; i++)
        if (v[i].alive)
            idx[k++] = i;
    t_kill_many(v, idx, k);
}

/* Read one report from every live member and check they agree on generation gen replacing prev with
 * nx excluded, and that the survivors kept their order; 1 when all agreed. */
static int t_agree(struct member *v, int n, uint64_t gen, uint64_t prev, unsigned nx)
{
    int ok = 1, first = -1;
    for (int i = 0; i < n; i++) {
        if (!v[i].alive)
            continue;
        unsigned old_rank = v[i].rank;
        if (t_read(&v[i], 20000) != 0) {
            ok = 0;
            continue;
        }
        ok &= v[i].gen == gen && v[i].prev == prev && v[i].nx == nx;
        ok &= prev == 0 || v[i].old == UINT32_MAX || v[i].old == old_rank;
        if (first < 0)
            first = i;
        else
            ok &= v[i].hash == v[first].hash;
    }
    /* Survivors keep their relative order: new ranks grow with old ranks. */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (v[i].alive && v[j].alive && v[i].old != UINT32_MAX && v[j].old != UINT32_MAX && v[i].old < v[j].old)
                ok &= v[i].rank < v[j].rank;
    if (!ok) {
        printf("  generation %" PRIu64 " (%u excluded expected): members disagree or the order was not kept:\n", gen, nx);
        for (int i = 0; i < n; i++)
            if (v[i].alive)
                printf("    member %d: gen %" PRIu64 " prev %" PRIu64 " old %d rank %u excluded %u hash %llx\n", i,
                       v[i].gen, v[i].prev, (int)v[i].old, v[i].rank, v[i].nx, v[i].hash);
    }
    return ok;
}

/* Kill, kill two at once, kill one during an open round; a standby is admitted; everyone agrees. */
static void t_scripted(void *unused)
{
    (void)unused;
    struct member v[9];
    char id[16];
    for (int i = 0; i < 8; i++) {
        snprintf(id, sizeof id, "m%d", i);
        t_start(&v[i], "scripted", id, 8, 0);
    }
    CHECK(t_agree(v, 8, 1, 0, 0));
    t_kill(&v[3]);
    CHECK(t_agree(v, 8, 2, 1, 1));
    int two[] = {0, 5};
    t_kill_many(v, two, 2);
    CHECK(t_agree(v, 8, 3, 2, 2));
    t_start(&v[8], "scripted", "spare", 8, 1); /* waits as a standby */
    usleep(200000);
    kill(v[7].pid, SIGSTOP); /* holds the round open: it cannot join yet */
    t_kill(&v[6]);
    usleep(300000);
    t_kill(&v[2]); /* lost while the round is open */
    usleep(200000);
    kill(v[7].pid, SIGCONT);
    v[8].rank = UINT32_MAX;
    CHECK(t_agree(v, 9, 4, 3, 2));
    CHECK_EQ(v[8].old, UINT32_MAX);
    CHECK_EQ(v[8].rank, 3); /* after the three survivors */
    CHECK_EQ(v[1].rank, 0);
    CHECK_EQ(v[7].rank, 2);
    CHECK_EQ(h_stat(&d, "rdzv_recoveries"), 3);
    CHECK_EQ(h_stat(&d, "rdzv_standbys_admitted"), 1);
    t_kill_all(v, 9);
}

/* Random kill schedules: n members (8..32), three rounds of 1..3 kills each; every round agrees and
 * the generation grows by exactly one per recovery. */
static void t_random(void *unused)
{
    (void)unused;
    srand(12345);
    int schedules = 0, agreed = 0;
    int64_t end = h_now_ms() + 60000;
    for (int s = 0; s < 100 && h_now_ms() < end; s++, schedules++) {
        struct member v[T_MAX];
        char ns[32], id[16];
        int n = 8 + rand() % (T_MAX - 8 + 1), ok = 1, live = n, armed[T_MAX];
        snprintf(ns, sizeof ns, "random%d", s);
        for (int i = 0; i < n; i++) {
            snprintf(id, sizeof id, "r%02d", i);
            armed[i] = rand() % 2;
            t_start_as(&v[i], ns, id, n, 0, armed[i]);
        }
        ok &= t_agree(v, n, 1, 0, 0);
        for (uint64_t g = 1; g <= 3 && ok && live > 3; g++) {
            int k = 1 + rand() % 3, idx[3], plain = 0;
            for (int i = 0; i < n; i++)
                plain += v[i].alive && !armed[i];
            if (plain < k)
                k = 1;
            for (int j = 0; j < k; j++) {
                int i = rand() % n;
                while (!v[i].alive || (j > 0 && i == idx[0]) || (j > 1 && i == idx[1]) || (k > 1 && armed[i]))
                    i = (i + 1) % n;
                idx[j] = i;
            }
            t_kill_many(v, idx, k);
            live -= k;
            ok &= t_agree(v, n, g + 1, g, (unsigned)k);
        }
        agreed += ok;
        t_kill_all(v, n);
    }
    printf("  %d random kill schedules on 8..%d members: %d agreed every time\n", schedules, T_MAX, agreed);
    CHECK(schedules >= 3);
    CHECK_EQ(agreed, schedules);
}

/* Every member armed: two losses, each agreed by all, every member arming again in each new generation
 * (musterd counts the armings; the fake-clock test, test_recovery_armed.c, shows the agreement falls in
 * the turn of the break). */
static void t_all_armed(void *unused)
{
    (void)unused;
    struct member v[6];
    char id[16];
    long long armed0 = h_stat(&d, "rdzv_armed_recover_joins"), bad0 = h_stat(&d, "rdzv_bad_recover_joins");
    for (int i = 0; i < 6; i++) {
        snprintf(id, sizeof id, "a%d", i);
        t_start_as(&v[i], "armed", id, 6, 0, 1);
    }
    CHECK(t_agree(v, 6, 1, 0, 0));
    int64_t until = h_now_ms() + 5000;
    while (h_stat(&d, "rdzv_armed_recover_joins") - armed0 < 6 && h_now_ms() < until)
        usleep(10000);
    CHECK_EQ(h_stat(&d, "rdzv_armed_recover_joins") - armed0, 6);
    long long recov0 = h_stat(&d, "rdzv_recoveries");
    t_kill(&v[4]);
    CHECK(t_agree(v, 6, 2, 1, 1));
    until = h_now_ms() + 5000;
    while (h_stat(&d, "rdzv_armed_recover_joins") - armed0 < 11 && h_now_ms() < until)
        usleep(10000);
    CHECK_EQ(h_stat(&d, "rdzv_armed_recover_joins") - armed0, 11);
    t_kill(&v[0]);
    CHECK(t_agree(v, 6, 3, 2, 1));
    CHECK_EQ(h_stat(&d, "rdzv_recoveries") - recov0, 2);
    CHECK_EQ(h_stat(&d, "rdzv_bad_recover_joins"), bad0);
    t_kill_all(v, 6);
}

int main(void)
{
    h_init("rdzv_recovery", 170);
    static const char *const args[] = {"--recovery-timeout", "5000", NULL};
    if (h_start(&d, args) < 0)
        return h_finish();
    H_RUN(t_scripted, NULL);
    H_RUN(t_random, NULL);
    H_RUN(t_all_armed, NULL);
    CHECK_EQ(h_stat(&d, "rdzv_recovery_failed"), 0);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
