/*
 * muster-recovery: how long a job takes to go on after one member dies.  N members, each
 * with its own connection (one process each up to --procs processes, then threads: a thread
 * per member, as rendezvous calls are synchronous), form a generation; a standby joins and
 * waits; the member at rank N/2, alone in its process, is killed with SIGKILL.  Each survivor
 * waits for MEMBER_LOST, then either joins the recovery round (--mode recover:
 * muster_rdzv_recover) or joins the next round the old way (--mode rejoin: muster_rdzv_join);
 * with --mode armed each member arms its recovery once its generation formed
 * (muster_rdzv_arm), so the recover call after MEMBER_LOST only takes the armed call's answer.
 * Children write their timestamps and answers to shared memory; the parent checks that every
 * survivor and the standby hold the same answer (one generation, ranks 0..N-1, the survivors in
 * their old order, then the standby) and prints one JSON object: detection (kill to
 * MEMBER_LOST at the survivors), agreement (first recover/join call to the last survivor
 * answered), and the standby's admission (kill to its answer).
 *
 * With --kill all the whole job dies instead: every member process and the standby are killed
 * with SIGKILL at once, as when a job is cancelled or its nodes lose power together, while a
 * probe on its own connection pings musterd every millisecond for --probe-ms.  It prints the
 * longest and the 99th-percentile ping after the kill: how long every other job on the daemon
 * waited while it took the dead job apart; with --server-pid, also the CPU time musterd spent
 * meanwhile (from /proc, so on the same machine only).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <muster/muster.h>
#include <muster/rdzv.h>

#include "clock.h"
#include "hist.h"
#include "json.h"

/* What one member reports (written by its thread, read by the parent). */
struct rc_slot {
    uint64_t t_joined; /* first generation's answer */
    uint64_t t_lost;   /* MEMBER_LOST seen */
    uint64_t t_call;   /* recover (or join) sent; the standby: its join sent */
    uint64_t t_done;   /* answered */
    uint64_t gen1, gen, prev;
    uint32_t rank1, rank, old_rank, nx, num_nodes;
    int32_t err, step; /* the failing call's muster_err and step (1 connect, 2 join, 3 event, 4 recover) */
};

/* What the parent and the children share. */
struct rc_shared {
    uint64_t t_kill; /* when the parent killed the victim */
    struct rc_slot slot[];
};

struct rc_cfg {
    const char *url;
    unsigned members, procs, timeout_ms;
    int rejoin, armed;
    int kill_all;       /* --kill all: the whole job dies; a probe times the daemon meanwhile */
    unsigned probe_ms;  /* how long the probe pings after the kill */
    long server_pid;    /* --server-pid: musterd's, to read its CPU time from /proc (0: not read) */
    int stop_r, stop_w; /* a pipe the parent closes when every figure is in: members may close then */
};

/* One member thread's arguments. */
struct rc_member {
    const struct rc_cfg *cfg;
    struct rc_shared *sh;
    unsigned idx;   /* members[0..N) by node id; N is the standby */
    pthread_t tid;
};

/* Milliseconds between two clock_ns() readings. */
static double recovery_ms(uint64_t from, uint64_t to)
{
    return to >= from ? (double)(to - from) / 1e6 : -1;
}

/* Sleep ms milliseconds. */
static void recovery_nap(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Record a failing step in the member's slot. */
static void recovery_fail(struct rc_slot *s, int step, int err)
{
    s->step = step;
    __atomic_store_n(&s->err, err ? err : -1, __ATOMIC_RELEASE);
}

/* Copy an assignment's place into the slot and mark it answered at t. */
static void recovery_answer(struct rc_slot *s, const muster_assignment *a, uint64_t t)
{
    s->gen = a->generation;
    s->prev = a->previous_generation;
    s->rank = a->node_rank;
    s->old_rank = a->old_node_rank;
    s->nx = (uint32_t)a->n_excluded;
    s->num_nodes = a->num_nodes;
    __atomic_store_n(&s->t_done, t, __ATOMIC_RELEASE);
}

/* Wait for MEMBER_LOST of generation gen, heartbeating meanwhile; 0, or -1 at the deadline or on error. */
static int recovery_wait_lost(muster_t *m, uint64_t gen, uint64_t deadline, struct rc_slot *s)
{
    while (clock_ns() < deadline) {
        muster_event *ev = NULL;
        int rc = muster_next_event(m, &ev, muster_rdzv_heartbeat_interval(m));
        if (rc == MUSTER_OK) {
            int lost = ev->kind == MUSTER_EVENT_MEMBER_LOST && ev->generation == gen;
            muster_event_free(ev);
            if (lost) {
                s->t_lost = clock_ns();
                return 0;
            }
        } else if (rc == MUSTER_ETIMEDOUT && !muster_broken(m)) {
            muster_rdzv_heartbeat(m, gen, 1000);
        } else {
            recovery_fail(s, 3, rc);
            return -1;
        }
    }
    recovery_fail(s, 3, MUSTER_ETIMEDOUT);
    return -1;
}

/* One member (or the standby): connect, join, wait for the loss, recover or re-join, then hold the
 * connection until the parent is done. */
static void *recovery_member(void *arg)
{
    struct rc_member *mb = arg;
    const struct rc_cfg *cfg = mb->cfg;
    struct rc_slot *s = &mb->sh->slot[mb->idx];
    uint64_t deadline = clock_ns() + (uint64_t)cfg->timeout_ms * 1000000ull;
    int standby = mb->idx == cfg->members, rc = 0;
    char node[32];
    snprintf(node, sizeof node, standby ? "z-standby" : "n%06u", mb->idx);
    muster_t *m = muster_connect(cfg->url, &rc);
    if (!m) {
        recovery_fail(s, 1, rc);
        return NULL;
    }
    muster_rdzv_opts o = {.node_id = node, .local_world_size = 1, .min_nodes = cfg->members - 1,
                          .max_nodes = cfg->members, .last_call_ms = 600000, .standby = standby};
    muster_assignment *a = NULL;
    if (standby)
        s->t_call = clock_ns();
    if ((rc = muster_rdzv_join(m, &o, &a, cfg->timeout_ms)) != MUSTER_OK) {
        recovery_fail(s, 2, rc);
        muster_close(m);
        return NULL;
    }
    if (standby) {
        recovery_answer(s, a, clock_ns());
    } else {
        s->gen1 = a->generation;
        s->rank1 = a->node_rank;
        __atomic_store_n(&s->t_joined, clock_ns(), __ATOMIC_RELEASE);
        uint64_t gen1 = a->generation;
        muster_assignment_free(a);
        a = NULL;
        if (cfg->armed && (rc = muster_rdzv_arm(m, &o, cfg->timeout_ms)) != MUSTER_OK)
            recovery_fail(s, 4, rc);
        else if (recovery_wait_lost(m, gen1, deadline, s) == 0) {
            o.last_call_ms = 0; /* a re-join closes as soon as every survivor is in, like a recovery */
            s->t_call = clock_ns();
            rc = cfg->rejoin ? muster_rdzv_join(m, &o, &a, cfg->timeout_ms)
                             : muster_rdzv_recover(m, &o, &a, cfg->timeout_ms);
            if (rc == MUSTER_OK)
                recovery_answer(s, a, clock_ns());
            else
                recovery_fail(s, 4, rc);
        }
    }
    muster_assignment_free(a);
    /* Blocked, not polling: thousands of members must not take the CPU from those still waiting. */
    char c;
    while (read(cfg->stop_r, &c, 1) < 0 && errno == EINTR)
        ;
    muster_close(m);
    return NULL;
}

/* A child process: run members [from, to) as threads (member k is slot k, or k + 1 from skip on, so
 * the other processes' slots leave out the victim's) and exit when they are done. */
static void recovery_child(const struct rc_cfg *cfg, struct rc_shared *sh, unsigned from, unsigned to, unsigned skip)
{
    close(cfg->stop_w);
    struct rc_member *mb = calloc(to - from, sizeof *mb);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    unsigned started = 0;
    for (unsigned k = from; mb && k < to; k++, started++) {
        unsigned idx = k + (k >= skip);
        mb[k - from] = (struct rc_member){cfg, sh, idx, 0};
        if (pthread_create(&mb[k - from].tid, &attr, recovery_member, &mb[k - from]) != 0) {
            recovery_fail(&sh->slot[idx], 1, MUSTER_ENOMEM);
            break;
        }
    }
    for (unsigned i = 0; i < started; i++)
        pthread_join(mb[i].tid, NULL);
    _exit(0);
}

/* Fork a child running members [from, to) (see recovery_child); its pid, or -1. */
static pid_t recovery_fork(const struct rc_cfg *cfg, struct rc_shared *sh, unsigned from, unsigned to, unsigned skip)
{
    fflush(NULL);
    pid_t p = fork();
    if (p == 0)
        recovery_child(cfg, sh, from, to, skip);
    return p;
}

/* Wait (bounded by deadline) until every slot in [from, to) but skip has failed or, with done, been
 * answered, else joined its first generation; 1 when they all have. */
static int recovery_until(struct rc_shared *sh, unsigned from, unsigned to, unsigned skip, int done,
                          uint64_t deadline)
{
    while (clock_ns() < deadline) {
        unsigned n = 0;
        for (unsigned i = from; i < to; i++) {
            const struct rc_slot *s = &sh->slot[i];
            n += i == skip || __atomic_load_n(&s->err, __ATOMIC_ACQUIRE) != 0 ||
                 __atomic_load_n(done ? &s->t_done : &s->t_joined, __ATOMIC_ACQUIRE) != 0;
        }
        if (n == to - from)
            return 1;
        recovery_nap(1);
    }
    return 0;
}

/* Whether every survivor and the standby hold the same answer with the order kept. */
static int recovery_agreed(const struct rc_cfg *cfg, const struct rc_shared *sh, unsigned victim)
{
    const struct rc_slot *v = sh->slot;
    unsigned n = cfg->members;
    uint64_t gen = v[victim == 0 ? 1 : 0].gen1 + 1, prev = cfg->rejoin ? 0 : gen - 1;
    for (unsigned i = 0; i <= n; i++) {
        if (i == victim)
            continue;
        const struct rc_slot *s = &v[i];
        /* survivors keep their order; the standby comes last */
        uint32_t want = i == n ? n - 1 : s->rank1 - (s->rank1 > v[victim].rank1);
        if (s->err || !s->t_done || s->gen != gen || s->prev != prev || s->rank != want || s->num_nodes != n)
            return 0;
        if (!cfg->rejoin && (s->nx != 1 || s->old_rank != (i == n ? UINT32_MAX : s->rank1)))
            return 0;
    }
    return 1;
}

/* Print the figures of one run. */
static void recovery_report(const struct rc_cfg *cfg, const struct rc_shared *sh, unsigned victim, uint64_t t_kill,
                            int complete)
{
    static struct hist detect, answer;
    hist_reset(&detect);
    hist_reset(&answer);
    const struct rc_slot *v = sh->slot;
    unsigned n = cfg->members, answered = 0, bad = n + 1;
    uint64_t lost_first = UINT64_MAX, lost_last = 0, call_first = UINT64_MAX, call_last = 0, done_last = 0;
    for (unsigned i = 0; i < n; i++) {
        if (i == victim)
            continue;
        const struct rc_slot *s = &v[i];
        if (s->err && bad > n)
            bad = i;
        if (!s->t_done)
            continue;
        answered++;
        hist_add(&detect, s->t_lost - t_kill);
        lost_first = s->t_lost < lost_first ? s->t_lost : lost_first;
        lost_last = s->t_lost > lost_last ? s->t_lost : lost_last;
        call_first = s->t_call < call_first ? s->t_call : call_first;
        call_last = s->t_call > call_last ? s->t_call : call_last;
        done_last = s->t_done > done_last ? s->t_done : done_last;
    }
    for (unsigned i = 0; i < n; i++)
        if (i != victim && v[i].t_done)
            hist_add(&answer, v[i].t_done - call_first);
    if (v[n].err && bad > n)
        bad = n;
    int all = complete && answered == n - 1 && v[n].t_done;
    struct json j;
    json_begin(&j, stdout);
    json_str(&j, "tool", "muster-recovery");
    json_str(&j, "mode", cfg->rejoin ? "rejoin" : cfg->armed ? "armed" : "recover");
    json_u64(&j, "members", n);
    json_u64(&j, "procs", cfg->procs);
    json_u64(&j, "answered", answered);
    json_bool(&j, "complete", all);
    json_bool(&j, "agreed", all && recovery_agreed(cfg, sh, victim));
    json_dbl(&j, "detect_first_ms", all ? recovery_ms(t_kill, lost_first) : -1);
    json_dbl(&j, "detect_p50_ms", all ? (double)hist_quantile(&detect, 0.5) / 1e6 : -1);
    json_dbl(&j, "detect_last_ms", all ? recovery_ms(t_kill, lost_last) : -1);
    json_dbl(&j, "agree_ms", all ? recovery_ms(call_first, done_last) : -1);
    json_dbl(&j, "agree_p50_ms", all ? (double)hist_quantile(&answer, 0.5) / 1e6 : -1);
    json_dbl(&j, "after_detect_ms", all ? recovery_ms(lost_last, done_last) : -1);
    json_dbl(&j, "calls_spread_ms", all ? recovery_ms(call_first, call_last) : -1);
    json_dbl(&j, "after_last_call_ms", all ? recovery_ms(call_last, done_last) : -1);
    json_dbl(&j, "standby_ms", all ? recovery_ms(t_kill, v[n].t_done) : -1);
    json_dbl(&j, "total_ms", all ? recovery_ms(t_kill, done_last > v[n].t_done ? done_last : v[n].t_done) : -1);
    if (bad <= n) {
        json_u64(&j, "first_failed_member", bad);
        json_u64(&j, "first_failed_step", (uint64_t)v[bad].step);
        json_str(&j, "first_failed_error", v[bad].err > 0 ? muster_strerror(v[bad].err) : "no answer");
    }
    json_end(&j);
}

/* The probe of --kill all: its URL, when it stops, and what it measured after the kill. */
struct rc_probe {
    const char *url;
    uint64_t t_kill; /* set by the parent (atomically) when it kills the job; 0 before */
    uint64_t until;
    struct hist after;
    unsigned failed;
};

/* Ping musterd every millisecond on the probe's own connection until its end, timing those sent after the
 * kill. */
static void *recovery_probe(void *arg)
{
    struct rc_probe *pr = arg;
    int err = 0;
    muster_t *m = muster_connect(pr->url, &err);
    hist_reset(&pr->after);
    while (m && clock_ns() < pr->until) {
        uint64_t t0 = clock_ns();
        int rc = muster_ping(m, NULL, 30000);
        uint64_t dt = clock_ns() - t0, killed = __atomic_load_n(&pr->t_kill, __ATOMIC_ACQUIRE);
        if (killed && t0 >= killed) {
            hist_add(&pr->after, dt);
            pr->failed += rc != MUSTER_OK;
        }
        recovery_nap(1);
    }
    pr->failed += !m;
    muster_close(m);
    return NULL;
}

/* CPU time (user and system) of process pid so far, in ms, from /proc; -1 when it cannot be read. */
static double recovery_cpu_ms(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = pid > 0 ? fopen(path, "r") : NULL;
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces; the fields follow it */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

/* --kill all: start the probe, kill every process of the job at once, and print what the probe saw. */
static void recovery_kill_all(const struct rc_cfg *cfg, const pid_t *pids, unsigned np)
{
    static struct rc_probe pr;
    pthread_t tid;
    pr = (struct rc_probe){.url = cfg->url, .until = clock_ns() + (uint64_t)(cfg->probe_ms + 200) * 1000000ull};
    int probing = pthread_create(&tid, NULL, recovery_probe, &pr) == 0;
    recovery_nap(200); /* the probe is connected and pinging */
    double cpu0 = recovery_cpu_ms(cfg->server_pid);
    __atomic_store_n(&pr.t_kill, clock_ns(), __ATOMIC_RELEASE);
    for (unsigned i = 0; i < np; i++)
        kill(pids[i], SIGKILL);
    if (probing)
        pthread_join(tid, NULL);
    double cpu1 = recovery_cpu_ms(cfg->server_pid);
    struct json j;
    json_begin(&j, stdout);
    json_str(&j, "tool", "muster-recovery");
    json_str(&j, "mode", cfg->rejoin ? "rejoin" : cfg->armed ? "armed" : "recover");
    json_str(&j, "kill", "all");
    json_u64(&j, "members", cfg->members);
    json_bool(&j, "complete", probing && pr.after.count > 0 && pr.failed == 0);
    json_u64(&j, "probes", pr.after.count);
    json_u64(&j, "probes_failed", pr.failed);
    json_dbl(&j, "stall_max_ms", (double)pr.after.max_ns / 1e6);
    json_dbl(&j, "stall_p99_ms", pr.after.count ? (double)hist_quantile(&pr.after, 0.99) / 1e6 : -1);
    json_dbl(&j, "ping_p50_ms", pr.after.count ? (double)hist_quantile(&pr.after, 0.5) / 1e6 : -1);
    json_dbl(&j, "server_cpu_ms", cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1);
    json_end(&j);
}

/* Parse "--name value" pairs; 0, or -1. */
static int recovery_args(int argc, char **argv, struct rc_cfg *cfg)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *v = argv[i + 1];
        if (!strcmp(argv[i], "--url"))
            cfg->url = v;
        else if (!strcmp(argv[i], "--members"))
            cfg->members = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(argv[i], "--procs"))
            cfg->procs = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(argv[i], "--mode") && (!strcmp(v, "recover") || !strcmp(v, "rejoin") || !strcmp(v, "armed")))
            cfg->rejoin = !strcmp(v, "rejoin"), cfg->armed = !strcmp(v, "armed");
        else if (!strcmp(argv[i], "--timeout-ms"))
            cfg->timeout_ms = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(argv[i], "--kill") && (!strcmp(v, "one") || !strcmp(v, "all")))
            cfg->kill_all = !strcmp(v, "all");
        else if (!strcmp(argv[i], "--probe-ms"))
            cfg->probe_ms = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(argv[i], "--server-pid"))
            cfg->server_pid = strtol(v, NULL, 10);
        else
            return -1;
    }
    return argc % 2 == 1 && cfg->url && cfg->members >= 3 && cfg->members <= 100000 && cfg->procs >= 1 ? 0 : -1;
}

/* Fork the members (the victim alone in its process), then the standby; kill the victim; collect. */
int main(int argc, char **argv)
{
    struct rc_cfg cfg = {.members = 0, .procs = 64, .timeout_ms = 60000, .probe_ms = 3000, .stop_r = -1, .stop_w = -1};
    if (recovery_args(argc, argv, &cfg) < 0) {
        fprintf(stderr, "usage: muster-recovery --url tcp://HOST:PORT/NS --members N (>= 3) [--procs P] "
                        "[--mode recover|rejoin|armed] [--timeout-ms MS] [--kill one|all] [--probe-ms MS] [--server-pid PID]\n");
        return 2;
    }
    unsigned n = cfg.members, victim = n / 2, others = n - 1;
    if (cfg.procs > others)
        cfg.procs = others;
    size_t bytes = sizeof(struct rc_shared) + (n + 1) * sizeof(struct rc_slot);
    struct rc_shared *sh = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t *pids = calloc(cfg.procs + 2, sizeof *pids);
    int stop[2];
    if (sh == MAP_FAILED || !pids || pipe(stop) < 0)
        return 1;
    cfg.stop_r = stop[0];
    cfg.stop_w = stop[1];
    unsigned np = 0;
    pid_t vpid = pids[np++] = recovery_fork(&cfg, sh, victim, victim + 1, UINT32_MAX);
    /* the others, spread evenly over the processes */
    for (unsigned p = 0, from = 0; p < cfg.procs; p++) {
        unsigned to = from + others / cfg.procs + (p < others % cfg.procs);
        pids[np++] = recovery_fork(&cfg, sh, from, to, victim);
        from = to;
    }
    uint64_t deadline = clock_ns() + (uint64_t)cfg.timeout_ms * 1000000ull;
    int complete = recovery_until(sh, 0, n, UINT32_MAX, 0, deadline);
    uint64_t t_kill = 0;
    if (complete) {
        pids[np++] = recovery_fork(&cfg, sh, n, n + 1, UINT32_MAX);
        while (!__atomic_load_n(&sh->slot[n].t_call, __ATOMIC_ACQUIRE) && clock_ns() < deadline)
            recovery_nap(1);
        recovery_nap(300); /* its join is parked as a standby by now */
    }
    if (complete && cfg.kill_all) {
        recovery_kill_all(&cfg, pids, np);
    } else if (complete) {
        t_kill = sh->t_kill = clock_ns();
        kill(vpid, SIGKILL);
        complete = recovery_until(sh, 0, n + 1, victim, 1, deadline + 5000000000ull);
    }
    if (!cfg.kill_all || !complete)
        recovery_report(&cfg, sh, victim, t_kill, complete);
    close(cfg.stop_w); /* every member's read returns */
    uint64_t reap_end = clock_ns() + 10000000000ull;
    for (unsigned left = np; left > 0 && clock_ns() < reap_end;) {
        pid_t p = waitpid(-1, NULL, WNOHANG);
        if (p > 0)
            left--;
        else if (p < 0 && errno == ECHILD)
            break;
        else
            recovery_nap(5);
    }
    for (unsigned i = 0; i < np; i++)
        if (pids[i] > 0)
            kill(pids[i], SIGKILL);
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    return 0;
}
