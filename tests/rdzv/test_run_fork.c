/*
 * The launcher's worker start (client/launcher/run_proc.c) while other
 * threads of the process are busy, as libmuster's and the relay's are in
 * `muster run`: one thread makes store calls in a loop, another changes an
 * environment variable in a loop.  A thread that holds a lock of libc (the
 * environment's, the allocator's under ASan) at the moment of a fork leaves
 * it taken for ever in the child, so a child that allocates, calls setenv or
 * execvp before its exec can hang there.  Every worker of every round must
 * start, see its rank and exit 0 within a bound; a worker that does not is
 * killed.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hclient.h"
#include "run.h"

/* Rounds of workers started, and workers per round. */
#define FORK_ROUNDS 25
#define FORK_WORKERS 4
/* How long one round's workers get to exit. */
#define FORK_ROUND_MS 5000
/* The most the busy threads run, whatever happens to the main thread. */
#define FORK_BUSY_MS 60000

static volatile int stop_busy;
static const char *store_url;

/* Store calls in a loop (each allocates in libmuster and in libc) until told to stop. */
static void *busy_store(void *arg)
{
    (void)arg;
    muster_t *m = muster_connect(store_url, NULL);
    int64_t end = h_now_ms() + FORK_BUSY_MS;
    char val[64];
    for (unsigned i = 0; m && !stop_busy && h_now_ms() < end; i++) {
        snprintf(val, sizeof val, "%u", i);
        muster_set(m, "busy", val, strlen(val), 0);
        void *got = NULL;
        size_t len = 0;
        if (muster_get(m, "busy", 0, 0, &got, &len) == MUSTER_OK)
            muster_free(got);
    }
    muster_close(m);
    return NULL;
}

/* setenv of one variable that exists already in a loop: it holds libc's environment lock most of the
 * time, and leaves the environment array where it is (only the entry's pointer changes). */
static void *busy_env(void *arg)
{
    (void)arg;
    static char vals[2][4096];
    memset(vals[0], 'a', sizeof vals[0] - 1);
    memset(vals[1], 'a', sizeof vals[1] - 1);
    vals[1][sizeof vals[1] - 2] = 'b';
    int64_t end = h_now_ms() + FORK_BUSY_MS;
    for (unsigned i = 0; !stop_busy && h_now_ms() < end; i++)
        setenv("MUSTER_TEST_CHURN", vals[i & 1], 1);
    return NULL;
}

/* Reap the round's workers until all have exited or ms passed; returns how many exited 0. */
static int reap_round(struct run_workers *ws, int ms)
{
    int64_t end = h_now_ms() + ms;
    while (ws->running > 0 && h_now_ms() < end) {
        if (run_proc_reap(ws, NULL, NULL) == 0)
            h_nap(5);
    }
    int ok = 0;
    for (int i = 0; i < ws->n; i++)
        ok += ws->w[i].pid == 0 && ws->w[i].status == 0;
    return ok;
}

/* Start rounds of workers while both busy threads run; every worker starts with its rank and exits 0. */
static void t_fork_busy(void *arg)
{
    struct h_daemon *d = arg;
    store_url = d->url;
    setenv("MUSTER_TEST_CHURN", "x", 1);
    pthread_t store_thread, env_thread;
    CHECK_EQ(pthread_create(&store_thread, NULL, busy_store, NULL), 0);
    CHECK_EQ(pthread_create(&env_thread, NULL, busy_env, NULL), 0);
    h_nap(50);
    muster_assignment a;
    memset(&a, 0, sizeof a);
    a.generation = 1;
    a.num_nodes = 1;
    a.local_world_size = a.world_size = FORK_WORKERS;
    snprintf(a.node_id, sizeof a.node_id, "fork-test");
    struct run_env env = {.a = &a, .url = d->url, .master_addr = "127.0.0.1", .master_port = 1, .run_id = "fork"};
    /* Found through PATH, as execvp would find it: the worker checks the variables it was given. */
    char *argv[] = {"sh", "-c", "[ -n \"$RANK\" ] && [ \"$WORLD_SIZE\" = 4 ] && [ \"$MUSTER_NODE_ID\" = fork-test ]",
                    NULL};
    int started = 0;
    for (int r = 0; r < FORK_ROUNDS && h_failures() == 0; r++) {
        struct run_workers ws;
        CHECK_EQ(run_proc_start(&ws, FORK_WORKERS, 0, &env, argv), 0);
        for (int i = 0; i < ws.n; i++)
            h_track(ws.w[i].pid);
        int ok = reap_round(&ws, FORK_ROUND_MS);
        started += ok;
        for (int i = 0; i < ws.n; i++) {
            if (ws.w[i].pid > 0)
                printf("  round %d: worker %d still running after %d ms\n", r, i, FORK_ROUND_MS);
            else if (ws.w[i].status != 0)
                printf("  round %d: worker %d exited with status %d\n", r, i, ws.w[i].status);
        }
        CHECK_EQ(ok, FORK_WORKERS);
        /* A worker stuck before its exec is killed (its own process group) and reaped. */
        pid_t pids[FORK_WORKERS];
        for (int i = 0; i < ws.n; i++)
            pids[i] = ws.w[i].pid;
        run_proc_signal(&ws, SIGKILL);
        reap_round(&ws, FORK_ROUND_MS);
        for (int i = 0; i < ws.n; i++)
            if (ws.w[i].pid == 0)
                h_untrack(pids[i]);
        run_proc_free(&ws);
    }
    stop_busy = 1;
    pthread_join(store_thread, NULL);
    pthread_join(env_thread, NULL);
    printf("  %d workers started\n", started);
}

/* The worker a PATH search cannot find is reported with exit status 127, not run under another name. */
static void t_not_found(void *arg)
{
    struct h_daemon *d = arg;
    muster_assignment a;
    memset(&a, 0, sizeof a);
    a.generation = 1;
    a.num_nodes = 1;
    a.local_world_size = a.world_size = 1;
    struct run_env env = {.a = &a, .url = d->url, .master_addr = "127.0.0.1", .master_port = 1, .run_id = "fork"};
    char *argv[] = {"muster-no-such-program", NULL};
    struct run_workers ws;
    CHECK_EQ(run_proc_start(&ws, 1, 0, &env, argv), 0);
    reap_round(&ws, FORK_ROUND_MS);
    CHECK_EQ(ws.running, 0);
    CHECK_EQ(ws.w[0].status, 127);
    run_proc_signal(&ws, SIGKILL);
    run_proc_free(&ws);
}

int main(void)
{
    h_init("run_fork", 100);
    struct h_daemon d;
    if (h_start(&d, NULL) != 0)
        return h_finish();
    H_RUN(t_fork_busy, &d);
    H_RUN(t_not_found, &d);
    h_stop(&d);
    return h_finish();
}
