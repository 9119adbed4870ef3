/*
 * muster-rproc: real-process rendezvous through libmuster.  Forks N processes that wait
 * at a common gate; once released each one connects, passes a barrier (or a rendezvous
 * join) and ends up holding the 128-byte id that rank 0 published, the way a job's ranks
 * bootstrap NCCL.  Children write their timestamps to shared memory; the parent prints
 * one JSON object with the time from the gate to the last rank holding the id.
 */
#include <errno.h>
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

/* What one child reports. */
struct rp_slot {
    uint64_t t_conn;   /* connected (hello answered) */
    uint64_t t_done;   /* holds the id */
    int32_t err;       /* muster_err of the failing call, 0 when fine */
    int32_t step;      /* 1 connect, 2 publish, 3 barrier/join, 4 get, 5 compare */
};

struct rp_cfg {
    const char *url;
    unsigned procs;
    int join;
    unsigned timeout_ms;
    unsigned value_size;
};

/* Record a failing step and leave the child. */
static void rproc_die(struct rp_slot *s, int step, int err, muster_t *m)
{
    s->step = step;
    s->err = err ? err : -1;
    muster_close(m);
    _exit(1);
}

/* Rank 0 publishes the id. */
static void rproc_publish(muster_t *m, const struct rp_cfg *cfg, const uint8_t *id, struct rp_slot *s)
{
    int rc = muster_set(m, "id", id, cfg->value_size, cfg->timeout_ms);
    if (rc)
        rproc_die(s, 2, rc, m);
}

/* Fetch the id (waiting for it when wait != 0; with barrier != 0, as the barrier's release answer)
 * and compare it with the expected bytes. */
static void rproc_fetch(muster_t *m, const struct rp_cfg *cfg, const uint8_t *id, int wait, int barrier,
                        struct rp_slot *s)
{
    void *v = NULL;
    size_t len = 0;
    int rc = barrier ? muster_barrier_fetch(m, "go", cfg->procs, "id", &v, &len, NULL, cfg->timeout_ms)
                     : muster_get(m, "id", wait, cfg->timeout_ms, &v, &len);
    if (rc)
        rproc_die(s, barrier ? 3 : 4, rc, m);
    int same = len == cfg->value_size && memcmp(v, id, len) == 0;
    muster_free(v);
    if (!same)
        rproc_die(s, 5, 0, m);
}

/* One rank: connect, barrier or join, hold the id. */
static void rproc_child(unsigned rank, const struct rp_cfg *cfg, int gate, struct rp_slot *s)
{
    char c;
    while (read(gate, &c, 1) < 0 && errno == EINTR)
        ;
    uint8_t id[4096];
    memset(id, 'I', sizeof id);
    int rc = 0;
    muster_t *m = muster_connect(cfg->url, &rc);
    if (!m)
        rproc_die(s, 1, rc, NULL);
    s->t_conn = clock_ns();
    if (cfg->join) {
        char node[32];
        snprintf(node, sizeof node, "n%06u", rank);
        muster_rdzv_opts o = {.node_id = node, .local_world_size = 1, .min_nodes = cfg->procs, .max_nodes = cfg->procs};
        muster_assignment *a = NULL;
        rc = muster_rdzv_join(m, &o, &a, cfg->timeout_ms);
        if (rc)
            rproc_die(s, 3, rc, m);
        int first = a->rank_start == 0;
        muster_assignment_free(a);
        if (first)
            rproc_publish(m, cfg, id, s);
        else
            rproc_fetch(m, cfg, id, 1, 0, s);
    } else {
        /* Rank 0 publishes, then every rank passes the barrier and gets the id with its release. */
        if (rank == 0)
            rproc_publish(m, cfg, id, s);
        rproc_fetch(m, cfg, id, 0, 1, s);
    }
    s->t_done = clock_ns();
    muster_close(m);
    _exit(0);
}

/* Reap every child, killing those still running at the deadline; returns the count reaped. */
static unsigned rproc_reap(const pid_t *pids, unsigned n, uint64_t deadline)
{
    unsigned left = n;
    while (left) {
        pid_t p = waitpid(-1, NULL, WNOHANG);
        if (p > 0) {
            left--;
            continue;
        }
        if (p < 0 && errno == ECHILD)
            break;
        if (clock_ns() >= deadline) {
            for (unsigned i = 0; i < n; i++)
                kill(pids[i], SIGKILL);
            while (waitpid(-1, NULL, 0) > 0)
                ;
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return n - left;
}

/* Print the report. */
static void rproc_report(const struct rp_cfg *cfg, const struct rp_slot *s, uint64_t t0)
{
    static struct hist done;
    hist_reset(&done);
    uint64_t last_conn = 0, last_done = 0;
    unsigned ok = 0, first_bad = cfg->procs;
    for (unsigned i = 0; i < cfg->procs; i++) {
        if (s[i].t_conn > last_conn)
            last_conn = s[i].t_conn;
        if (s[i].t_done) {
            ok++;
            hist_add(&done, s[i].t_done - t0);
            if (s[i].t_done > last_done)
                last_done = s[i].t_done;
        } else if (first_bad == cfg->procs) {
            first_bad = i;
        }
    }
    struct json j;
    json_begin(&j, stdout);
    json_str(&j, "tool", "muster-rproc");
    json_str(&j, "op", cfg->join ? "join" : "barrier");
    json_u64(&j, "procs", cfg->procs);
    json_u64(&j, "ok", ok);
    json_u64(&j, "errors", cfg->procs - ok);
    json_bool(&j, "complete", ok == cfg->procs);
    json_dbl(&j, "total_s", ok == cfg->procs ? (double)(last_done - t0) / 1e9 : -1);
    json_dbl(&j, "connect_all_s", last_conn ? (double)(last_conn - t0) / 1e9 : -1);
    json_dbl(&j, "rank_done_p50_s", (double)hist_quantile(&done, 0.5) / 1e9);
    if (first_bad < cfg->procs) {
        json_u64(&j, "first_failed_rank", first_bad);
        json_u64(&j, "first_failed_step", (uint64_t)s[first_bad].step);
        json_str(&j, "first_failed_error", s[first_bad].err > 0 ? muster_strerror(s[first_bad].err) : "killed or no answer");
    }
    json_end(&j);
}

/* Parse "--name value" pairs; returns 0 or -1. */
static int rproc_args(int argc, char **argv, struct rp_cfg *cfg)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *v = argv[i + 1];
        if (!strcmp(argv[i], "--url"))
            cfg->url = v;
        else if (!strcmp(argv[i], "--procs"))
            cfg->procs = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(argv[i], "--op"))
            cfg->join = !strcmp(v, "join");
        else if (!strcmp(argv[i], "--timeout-ms"))
            cfg->timeout_ms = (unsigned)strtoul(v, NULL, 10);
        else if (!strcmp(argv[i], "--value-size"))
            cfg->value_size = (unsigned)strtoul(v, NULL, 10);
        else
            return -1;
    }
    return argc % 2 == 1 && cfg->url && cfg->procs && cfg->value_size <= 4096 ? 0 : -1;
}

/* Fork the ranks, open the gate, collect the times. */
int main(int argc, char **argv)
{
    struct rp_cfg cfg = {NULL, 0, 0, 60000, 128};
    if (rproc_args(argc, argv, &cfg) < 0) {
        fprintf(stderr, "usage: muster-rproc --url tcp://HOST:PORT/NS --procs N [--op barrier|join] "
                        "[--timeout-ms MS] [--value-size BYTES]\n");
        return 2;
    }
    struct rp_slot *slots = mmap(NULL, cfg.procs * sizeof *slots, PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t *pids = calloc(cfg.procs, sizeof *pids);
    int gate[2];
    if (slots == MAP_FAILED || !pids || pipe(gate) < 0)
        return 1;
    for (unsigned i = 0; i < cfg.procs; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(gate[1]);
            rproc_child(i, &cfg, gate[0], &slots[i]);
        }
        if (pids[i] < 0) {
            perror("muster-rproc: fork");
            cfg.procs = i;
            break;
        }
    }
    close(gate[0]);
    uint64_t t0 = clock_ns();
    close(gate[1]); /* every child's read returns at once */
    rproc_reap(pids, cfg.procs, t0 + (uint64_t)cfg.timeout_ms * 1000000ull + 5000000000ull);
    rproc_report(&cfg, slots, t0);
    return 0;
}
