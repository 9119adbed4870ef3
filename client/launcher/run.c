/*
 * `muster run`: a launcher in the manner of torchrun.  It joins the job's
 * rendezvous (one store handle, heartbeated from this loop), starts
 * --nproc-per-node workers with the environment of their rank, and watches
 * three things at once with poll(): the store connection (membership
 * events), a self-pipe fed by the signal handler (SIGCHLD, SIGINT, SIGTERM)
 * and the workers' output pipes (run_proc_through says which streams have
 * one).  Its options are parsed by run_opts.c.
 *
 * Restart policy: a failed worker or a lost member (the generation broke)
 * stops the local workers (SIGTERM, SIGKILL after --grace), re-joins and
 * starts them again in the next generation, at most --max-restarts times.
 * Both count as restarts on every node, so all nodes of a job agree on how
 * many failures they have survived.  A node waiting to join while the world
 * is below its maximum size re-forms the world too, but a scale-up does not
 * use up a restart.
 *
 * Finishing: when every local worker has exited 0 the node adds itself to
 * the generation's key muster/run/<generation>/done and leaves only once all
 * nodes have done so, because a leave breaks the generation and would make a
 * slower peer restart workers that were about to succeed.
 */
#include "run.h"

#include "cli.h"
#include "deadline.h"
#include "keys.h"
#include "launcher.h"
#include "run_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long the private musterd gets to start listening. */
#define RUN_SERVER_START_MS 10000
/* How long killed workers get to be reaped before the launcher gives up on them. */
#define RUN_KILL_WAIT_MS 10000
/* Events taken from the handle per wake-up. */
#define RUN_EVENT_BATCH 1024

/* What one generation of local workers came to. */
enum run_outcome { RUN_DONE, RUN_FAILED, RUN_LOST, RUN_GROW, RUN_SIGNAL };

/* Launcher state for one run. */
struct run_ctx {
    struct run_cfg cfg;
    const char *url;
    char url_buf[600];
    char node_id[128];
    muster_url u;
    struct run_server server;
    muster_t *m;
    muster_assignment *a;
    struct run_workers ws;
    int restarts;              /* restarts used */
    int member;                /* holds a membership that needs heartbeats */
    uint64_t next_hb;          /* monotonic ms of the next heartbeat */
    uint64_t done_watch;
    int64_t done_count;
    int sig;                   /* last SIGINT/SIGTERM received */
    int sig_count;
    int lost;                  /* the generation broke or the store went away */
    int conn_lost;             /* the handle is unusable: reconnect before joining */
    int grow;                  /* a node waits to join and the world may grow */
    int server_died;
    struct run_relay relay;    /* this generation's TCPStore relay (run_relay.c) */
    char run_id[256];          /* TORCHELASTIC_RUN_ID */
    char error_dir[256];       /* the run's directory: the workers' TORCHELASTIC_ERROR_FILE files */
    char **argv0;              /* PROG ARGS... as given (cfg.argv may be a vector of its own) */
};

/* Signal-handler state: a handler can reach nothing else.  While a join
 * blocks there are no workers to look after, so SIGINT/SIGTERM end the
 * launcher at once (taking its private musterd along) instead of waiting
 * for the join to return. */
static int run_sig_wfd = -1;
static volatile sig_atomic_t run_joining;
static volatile sig_atomic_t run_server_pid;
static char run_server_files[3][96];

/* ------------------------------------------------------------- signals */

/* Signal handler: note the signal on the self-pipe, or end a launcher that is only joining. */
static void run_on_signal(int sig)
{
    int saved = errno;
    if (run_joining && sig != SIGCHLD) {
        if (run_server_pid > 0)
            kill((pid_t)run_server_pid, SIGTERM);
        if (run_server_files[0][0])
            unlink(run_server_files[0]);
        if (run_server_files[1][0])
            unlink(run_server_files[1]);
        if (run_server_files[2][0])
            rmdir(run_server_files[2]);
        _exit(128 + sig);
    }
    unsigned char b = (unsigned char)sig;
    if (write(run_sig_wfd, &b, 1) < 0) {
        /* A full pipe already holds a wake-up; nothing is lost. */
    }
    errno = saved;
}

/* Route SIGCHLD, SIGINT and SIGTERM to the self-pipe; returns its read end or -1. */
static int run_signals_init(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    run_sig_wfd = p[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = run_on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return p[0];
}

/* ---------------------------------------------------------- event pump */

/* The int64 held as decimal text in a value (not NUL-terminated); 0 when it is not one. */
static int64_t run_decimal(const void *value, size_t len)
{
    char buf[24];
    if (!value || len == 0 || len >= sizeof buf)
        return 0;
    memcpy(buf, value, len);
    buf[len] = '\0';
    return strtoll(buf, NULL, 10);
}

/* Act on one pushed event. */
static void run_on_event(struct run_ctx *c, const muster_event *ev)
{
    uint64_t gen = c->a ? c->a->generation : 0;
    switch (ev->kind) {
    case MUSTER_EVENT_MEMBER_LOST:
        /* Once every node has finished, the others' leaves are the expected end, not a loss. */
        if (c->done_watch && c->done_count >= (int64_t)c->a->num_nodes)
            break;
        if (ev->generation == gen && !c->lost) {
            fprintf(stderr, RUN_TAG "generation %" PRIu64 " broken: node %s lost\n", gen, ev->node_id);
            c->lost = 1;
        }
        break;
    case MUSTER_EVENT_NODE_WAITING:
        if (ev->generation == gen && c->a->num_nodes < c->cfg.nnodes[1] && !c->grow) {
            fprintf(stderr, RUN_TAG "node %s waits to join; re-forming to grow the world\n", ev->node_id);
            c->grow = 1;
        }
        break;
    case MUSTER_EVENT_SET:
        if (c->done_watch && ev->watch_id == c->done_watch)
            c->done_count = run_decimal(ev->value, ev->value_len);
        break;
    case MUSTER_EVENT_SHUTDOWN:
        fprintf(stderr, RUN_TAG "the store is shutting down: %s\n", ev->reason ? ev->reason : "");
        c->lost = c->conn_lost = 1;
        break;
    case MUSTER_EVENT_WATCH_ENDED:
        /* The server dropped the watch (output left unread): run_finish watches and reads again. */
        if (c->done_watch && ev->watch_id == c->done_watch)
            c->done_watch = 0;
        break;
    case MUSTER_EVENT_DELETE:
        break;
    }
}

/* Take every event the handle has queued or can read now. */
static void run_events(struct run_ctx *c)
{
    for (int i = 0; c->m && !c->conn_lost && i < RUN_EVENT_BATCH; i++) {
        muster_event *ev = NULL;
        int rc = muster_next_event(c->m, &ev, 0);
        if (rc == MUSTER_ETIMEDOUT)
            return;
        if (rc != MUSTER_OK) {
            fprintf(stderr, RUN_TAG "store connection lost: %s\n", muster_strerror(rc));
            c->lost = c->conn_lost = 1;
            return;
        }
        run_on_event(c, ev);
        muster_event_free(ev);
    }
}

/* Note a failed store call: a dead connection must be replaced before the next join. */
static void run_call_failed(struct run_ctx *c, const char *what, int rc)
{
    fprintf(stderr, RUN_TAG "%s: %s\n", what, muster_strerror(rc));
    if (rc == MUSTER_ECONN || rc == MUSTER_ETIMEDOUT || rc == MUSTER_EPROTO)
        c->conn_lost = 1;
    c->lost = 1;
}

/* Send a heartbeat when one is due. */
static void run_heartbeat(struct run_ctx *c)
{
    if (!c->member || c->conn_lost || deadline_now() < c->next_hb)
        return;
    uint32_t every = muster_rdzv_heartbeat_interval(c->m);
    int rc = muster_rdzv_heartbeat(c->m, c->a->generation, every);
    if (rc == MUSTER_ESTALE && !c->lost) {
        fprintf(stderr, RUN_TAG "generation %" PRIu64 " has ended\n", c->a->generation);
        c->lost = 1;
    } else if (rc != MUSTER_OK && rc != MUSTER_ESTALE) {
        run_call_failed(c, "heartbeat", rc);
    }
    c->next_hb = deadline_now() + every;
    run_events(c);
}

/* Handle what the self-pipe carries: children to reap and signals to note. */
static void run_on_sigpipe(struct run_ctx *c, int rfd)
{
    unsigned char b[64];
    ssize_t k;
    while ((k = read(rfd, b, sizeof b)) > 0) {
        for (ssize_t i = 0; i < k; i++) {
            if (b[i] == SIGCHLD) {
                run_proc_reap(&c->ws);
                if (run_standalone_died(&c->server)) {
                    fprintf(stderr, RUN_TAG "the private musterd exited\n");
                    c->server_died = c->lost = c->conn_lost = 1;
                }
            } else {
                c->sig = b[i];
                c->sig_count++;
            }
        }
    }
}

/* Wait up to timeout_ms for anything to happen and handle it. */
static void run_pump(struct run_ctx *c, int rfd, int timeout_ms)
{
    int n = c->ws.n * 2 + 2;
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    if (!pfd)
        return;
    pfd[0].fd = rfd;
    pfd[0].events = POLLIN;
    pfd[1].fd = (c->m && !c->conn_lost) ? muster_fd(c->m) : -1;
    pfd[1].events = POLLIN;
    int nout = run_proc_pollfds(&c->ws, pfd + 2);
    if (poll(pfd, (nfds_t)(2 + nout), timeout_ms < 0 ? 0 : timeout_ms) > 0) {
        if (pfd[0].revents)
            run_on_sigpipe(c, rfd);
        if (pfd[1].revents)
            run_events(c);
        run_proc_output(&c->ws, pfd + 2, nout);
    }
    free(pfd);
}

/* Milliseconds until the next heartbeat is due, capped at cap. */
static int run_wait_ms(const struct run_ctx *c, uint64_t cap)
{
    if (!c->member || c->conn_lost)
        return (int)cap;
    uint64_t now = deadline_now();
    uint64_t left = c->next_hb > now ? c->next_hb - now : 0;
    return (int)(left < cap ? left : cap);
}

/* ---------------------------------------------------------- rendezvous */

/* Connect (again) to the store when there is no usable handle; returns 0 or an exit status. */
static int run_connect(struct run_ctx *c)
{
    if (c->m && !c->conn_lost)
        return 0;
    if (c->server_died)
        return CLI_ERROR;
    muster_close(c->m);
    c->conn_lost = 0;
    muster_opts o = {.connect_timeout_ms = c->cfg.rdzv_timeout_ms, .client_name = "muster run"};
    int err = 0;
    c->m = muster_connect_opts(c->url, &o, &err);
    if (!c->m) {
        char where[600];
        cli_url_redacted(c->url, where, sizeof where); /* the URL's token stays out of logs */
        fprintf(stderr, RUN_TAG "cannot connect to %s: %s\n", where, muster_strerror(err));
        return err == MUSTER_ETIMEDOUT || err == MUSTER_ECONN ? CLI_CONNECT : CLI_ERROR;
    }
    /* Workers must not inherit the launcher's membership connection. */
    fcntl(muster_fd(c->m), F_SETFD, FD_CLOEXEC);
    return 0;
}

/* run_join's answer when the job already completed under this name: exit 0, running nothing. */
#define RUN_COMPLETED_BEFORE (-1)

/* Whether the job already ran to completion under this name.  A launcher
 * that arrives then (a node back after the end, or a re-run under a used
 * name) runs nothing and says so, as torchrun's closed rendezvous does;
 * without this it would form a new generation of its own. */
static int run_completed_before(struct run_ctx *c)
{
    void *v = NULL;
    size_t n = 0;
    if (muster_get(c->m, KEYS_RUN_COMPLETED, 0, 0, &v, &n) != MUSTER_OK)
        return 0;
    fprintf(stderr,
            RUN_TAG "this job already completed (generation %.*s); nothing to run: give a new --rdzv-id, "
                    "or delete the key %s to run it again under this name\n",
            (int)n, (const char *)v, KEYS_RUN_COMPLETED);
    muster_free(v);
    return 1;
}

/* Record that the job completed (every node's workers finished); a failure only costs the late-comer check. */
static void run_mark_completed(struct run_ctx *c)
{
    char gen[24];
    int n = snprintf(gen, sizeof gen, "%" PRIu64, c->a->generation);
    muster_set(c->m, KEYS_RUN_COMPLETED, gen, (size_t)n, 0);
}

/* Join the next round (first: the launcher's first); 0, RUN_COMPLETED_BEFORE or an exit status. */
static int run_join(struct run_ctx *c, int first)
{
    /* No worker runs while joining: a signal ends the launcher at once, also during a reconnect
     * to a store that is gone (which may otherwise take --rdzv-timeout). */
    run_joining = 1;
    int rc = run_connect(c);
    run_joining = 0;
    if (rc)
        return rc;
    if (first && run_completed_before(c))
        return RUN_COMPLETED_BEFORE;
    muster_rdzv_opts o = {
        .node_id = c->node_id,
        .local_world_size = c->cfg.nproc,
        .min_nodes = c->cfg.nnodes[0],
        .max_nodes = c->cfg.nnodes[1],
        .last_call_ms = c->cfg.last_call_ms,
    };
    muster_assignment_free(c->a);
    c->a = NULL;
    run_joining = 1;
    rc = muster_rdzv_join(c->m, &o, &c->a, c->cfg.rdzv_timeout_ms);
    run_joining = 0;
    if (rc != MUSTER_OK) {
        fprintf(stderr, RUN_TAG "rendezvous failed: %s%s%s\n", muster_strerror(rc),
                *muster_last_error(c->m) ? ": " : "", muster_last_error(c->m));
        return rc == MUSTER_ETIMEDOUT ? CLI_TIMEOUT : rc == MUSTER_ECONN ? CLI_CONNECT : CLI_ERROR;
    }
    c->member = 1;
    c->lost = c->grow = 0;
    c->next_hb = deadline_now() + muster_rdzv_heartbeat_interval(c->m);
    fprintf(stderr, RUN_TAG "generation %" PRIu64 ": node %s (%u of %u nodes), ranks %u-%u of %u\n",
            c->a->generation, c->a->node_id, c->a->node_rank, c->a->num_nodes, c->a->rank_start,
            c->a->rank_start + c->a->local_world_size - 1, c->a->world_size);
    return 0;
}

/* End this node's membership (finished: its workers all succeeded); a dead handle has already ended it. */
static void run_leave(struct run_ctx *c, int finished)
{
    if (!c->member)
        return;
    c->member = 0;
    if (c->conn_lost)
        return;
    int rc = finished ? muster_rdzv_finish(c->m, 0) : muster_rdzv_leave(c->m, 0);
    if (rc == MUSTER_ECONN || rc == MUSTER_ETIMEDOUT)
        c->conn_lost = 1;
}

/* ------------------------------------------------------------- workers */

/* The environment of this generation's workers: MASTER_ADDR:MASTER_PORT is the node's relay. */
static struct run_env run_worker_env(const struct run_ctx *c)
{
    struct run_env env = {
        .a = c->a,
        .url = c->url,
        .master_addr = "127.0.0.1",
        .master_port = c->relay.port,
        .restart_count = c->restarts,
        .max_restarts = (int)c->cfg.max_restarts,
        .run_id = c->run_id,
        .error_dir = c->error_dir,
    };
    return env;
}

/* Start this generation's relay, then this node's workers; returns 0, or -1 when none could start. */
static int run_start_workers(struct run_ctx *c)
{
    struct run_relay_cfg rc = {
        /* The relay has no value flag: a value is bounded by --relay-max-request alone. */
        .lim = {.max_key = c->cfg.relay_max_key, .max_value = UINT64_MAX, .max_keys = c->cfg.relay_max_keys,
                .max_request = c->cfg.relay_max_request},
        .max_conns = c->cfg.relay_max_conns,
        .max_output = c->cfg.relay_max_output,
        .request_timeout_ms = c->cfg.relay_request_timeout_ms,
    };
    int relay = run_relay_start(&c->relay, &rc, c->url, c->a->generation) == 0;
    if (!relay) {
        /* Native workers need no relay; torch ones then find no store, and say so. */
        run_relay_stop(&c->relay);
        fprintf(stderr, RUN_TAG "no TCPStore relay: MASTER_ADDR:MASTER_PORT is the store itself\n");
    }
    int close_fds[1] = {muster_fd(c->m)};
    struct run_env env = run_worker_env(c);
    if (!relay) {
        env.master_addr = c->u.host;
        env.master_port = c->u.port;
    }
    env.close_fds = close_fds;
    env.n_close_fds = 1;
    return run_proc_start(&c->ws, (int)c->cfg.nproc, c->cfg.prefix, &env, c->cfg.argv);
}

/* Watch the workers and the world until something needs a decision. */
static enum run_outcome run_supervise(struct run_ctx *c, int rfd)
{
    for (;;) {
        run_events(c);
        if (c->sig)
            return RUN_SIGNAL;
        if (c->ws.first_failure)
            return RUN_FAILED;
        /* Growing before lost: the members' re-joins that grow the world break the generation, so a
         * launcher that reads NODE_WAITING and MEMBER_LOST together must not count a restart. */
        if (c->grow)
            return RUN_GROW;
        if (c->lost)
            return RUN_LOST;
        if (c->ws.running == 0)
            return RUN_DONE;
        run_heartbeat(c);
        if (c->lost || c->grow)
            continue; /* the heartbeat's answer decided: act now, not after the next wait */
        run_pump(c, rfd, run_wait_ms(c, 1000));
    }
}

/* After local success, wait until every node of the generation has finished too. */
static enum run_outcome run_finish(struct run_ctx *c, int rfd)
{
    if (c->a->num_nodes <= 1)
        return RUN_DONE;
    char key[64];
    keys_run_done(key, sizeof key, c->a->generation);
    int rc = muster_watch(c->m, key, &c->done_watch, 0);
    if (rc == MUSTER_OK)
        rc = muster_add(c->m, key, 1, &c->done_count, 0);
    if (rc != MUSTER_OK) {
        run_call_failed(c, "finishing", rc);
        return RUN_LOST;
    }
    enum run_outcome out;
    for (;;) {
        run_events(c);
        if (!c->done_watch && !c->conn_lost) {
            rc = muster_watch(c->m, key, &c->done_watch, 0);
            if (rc == MUSTER_OK)
                rc = muster_add(c->m, key, 0, &c->done_count, 0);
            if (rc != MUSTER_OK) {
                run_call_failed(c, "finishing", rc);
                return RUN_LOST;
            }
        }
        if (c->sig) {
            out = RUN_SIGNAL;
            break;
        }
        if (c->done_count >= (int64_t)c->a->num_nodes) {
            out = RUN_DONE;
            break;
        }
        if (c->lost) {
            out = RUN_LOST;
            break;
        }
        run_heartbeat(c);
        run_pump(c, rfd, run_wait_ms(c, 1000));
    }
    if (!c->conn_lost)
        muster_unwatch(c->m, c->done_watch, 0);
    c->done_watch = 0;
    return out;
}

/* Stop the local workers: sig to their groups, SIGKILL after the grace period or a second signal. */
static void run_stop(struct run_ctx *c, int rfd, int sig)
{
    int sigs_before = c->sig_count;
    run_proc_signal(&c->ws, sig);
    uint64_t deadline = deadline_now() + c->cfg.grace_ms;
    while (c->ws.running > 0 && c->sig_count == sigs_before) {
        uint64_t now = deadline_now();
        if (now >= deadline)
            break;
        run_heartbeat(c);
        run_pump(c, rfd, run_wait_ms(c, deadline - now));
    }
    if (c->ws.running == 0)
        return;
    fprintf(stderr, RUN_TAG "%d worker(s) still running; sending SIGKILL\n", c->ws.running);
    run_proc_signal(&c->ws, SIGKILL);
    deadline = deadline_now() + RUN_KILL_WAIT_MS;
    while (c->ws.running > 0 && deadline_now() < deadline)
        run_pump(c, rfd, 100);
}

/* ---------------------------------------------------------------- main */

/* Pick the store URL and parse it; returns 0 or an exit status. */
static int run_setup_url(struct run_ctx *c, const char *global_url)
{
    if (c->cfg.standalone) {
        if (run_standalone_start(&c->server, RUN_SERVER_START_MS) < 0)
            return CLI_ERROR;
        run_server_pid = c->server.pid;
        snprintf(run_server_files[0], sizeof run_server_files[0], "%s", c->server.port_file);
        snprintf(run_server_files[1], sizeof run_server_files[1], "%s", c->server.log_file);
        snprintf(run_server_files[2], sizeof run_server_files[2], "%s", c->server.dir);
        snprintf(c->url_buf, sizeof c->url_buf, "tcp://127.0.0.1:%u", c->server.port);
        c->url = c->url_buf;
    } else if (c->cfg.rdzv_endpoint) {
        const char *e = c->cfg.rdzv_endpoint;
        snprintf(c->url_buf, sizeof c->url_buf, "%s%s", strstr(e, "://") ? "" : "tcp://", e);
        c->url = c->url_buf;
    } else {
        c->url = c->cfg.url ? c->cfg.url : global_url ? global_url : getenv("MUSTER_URL");
        if (!c->url || !*c->url)
            c->url = "tcp://127.0.0.1:29600";
    }
    char why[300];
    if (muster_url_parse_detail(c->url, &c->u, why, sizeof why) != MUSTER_OK) {
        char where[600];
        cli_url_redacted(c->url, where, sizeof where); /* the URL's token stays out of logs */
        fprintf(stderr, RUN_TAG "bad store URL %s: %s\n", where, why);
        return CLI_USAGE;
    }
    return run_torch_job(c->cfg.rdzv_id, &c->url, c->url_buf, sizeof c->url_buf, &c->u, c->run_id, sizeof c->run_id);
}

/* Decide what a failed, broken or growing generation leads to; returns -1 to go on, else an exit status. */
static int run_restart(struct run_ctx *c, int rfd, enum run_outcome out)
{
    int status = c->ws.first_failure;
    if (out == RUN_FAILED) {
        struct run_env env = run_worker_env(c);
        const char *sig = c->ws.first_signal ? run_torch_signame(c->ws.first_signal) : NULL;
        fprintf(stderr, RUN_TAG "a worker failed with status %d%s%s%s\n", status, sig ? " (" : "", sig ? sig : "",
                sig ? ")" : "");
        run_torch_report(&c->ws, &env);
    }
    /* On a failure, leave first: the other nodes learn of it now, not after our grace period.
     * To grow, stay a member (heartbeating) until the re-join: a join from a member breaks its
     * generation and enters the next round in one step, so the round cannot close without us. */
    if (out != RUN_GROW)
        run_leave(c, 0);
    run_stop(c, rfd, SIGTERM);
    run_proc_free(&c->ws);
    run_relay_stop(&c->relay);
    if (c->sig)
        return 128 + c->sig;
    if (out != RUN_GROW) {
        if ((uint32_t)c->restarts >= c->cfg.max_restarts) {
            fprintf(stderr, RUN_TAG "no restarts left (--max-restarts %u); giving up\n", c->cfg.max_restarts);
            return status ? status : 1;
        }
        c->restarts++;
        fprintf(stderr, RUN_TAG "restart %d of %u\n", c->restarts, c->cfg.max_restarts);
    }
    return -1;
}

/* Join, run and re-form generations until the job ends; returns the exit status. */
static int run_loop(struct run_ctx *c, int rfd)
{
    for (int first = 1;; first = 0) {
        int rc = run_join(c, first);
        if (rc == RUN_COMPLETED_BEFORE)
            return 0;
        if (rc)
            return rc;
        if (run_start_workers(c) < 0)
            fprintf(stderr, RUN_TAG "no worker could be started\n");
        enum run_outcome out = run_supervise(c, rfd);
        if (out == RUN_DONE)
            out = run_finish(c, rfd);
        if (out == RUN_DONE) {
            run_mark_completed(c);
            run_leave(c, 1);
            run_proc_free(&c->ws);
            run_relay_stop(&c->relay);
            fprintf(stderr, RUN_TAG "all workers finished\n");
            return 0;
        }
        if (out == RUN_SIGNAL) {
            int sig = c->sig;
            fprintf(stderr, RUN_TAG "got signal %d; stopping workers\n", sig);
            run_stop(c, rfd, sig);
            run_leave(c, 0);
            int status = c->ws.first_failure;
            run_proc_free(&c->ws);
            run_relay_stop(&c->relay);
            return status ? status : 128 + sig;
        }
        rc = run_restart(c, rfd, out);
        if (rc >= 0)
            return rc;
    }
}

/* Exit status of a command line whose program cannot run (the shell's "command not found"). */
#define RUN_NOT_FOUND 127

/* Parse the command line, name the node and build the workers' command line; returns -1 to go on,
 * else an exit status.  Whether the program exists is checked here, before any round starts: a
 * missing one would otherwise cost every node a round and a failed generation. */
static int run_prepare(struct run_ctx *c, int argc, char **argv)
{
    run_opts_defaults(&c->cfg);
    if (run_opts_parse(argc, argv, &c->cfg) < 0) {
        run_opts_usage(stderr);
        return CLI_USAGE;
    }
    if (c->cfg.help) {
        run_opts_usage(stdout);
        return CLI_OK;
    }
    if (c->cfg.node_id) {
        snprintf(c->node_id, sizeof c->node_id, "%s", c->cfg.node_id);
    } else {
        char host[64] = "node";
        gethostname(host, sizeof host - 1);
        snprintf(c->node_id, sizeof c->node_id, "%s-%ld", host, (long)getpid());
    }
    c->argv0 = c->cfg.argv;
    if (!(c->cfg.argv = run_torch_argv(c->argv0, c->cfg.module, c->cfg.no_python))) {
        c->cfg.argv = c->argv0;
        fprintf(stderr, RUN_TAG "out of memory\n");
        return CLI_ERROR;
    }
    if (!run_torch_found(c->cfg.argv[0])) {
        fprintf(stderr, RUN_TAG "cannot run %s: no such executable%s\n", c->cfg.argv[0],
                strchr(c->cfg.argv[0], '/') ? "" : " in PATH");
        return RUN_NOT_FOUND;
    }
    return -1;
}

/* Make the run's directory for the workers' error files; returns 0 or an exit status.  Without one
 * the workers run with no error file, unless --log-dir asked for it. */
static int run_make_dir(struct run_ctx *c)
{
    if (run_torch_error_dir(c->error_dir, sizeof c->error_dir, c->cfg.log_dir, c->run_id) == 0)
        return 0;
    fprintf(stderr, RUN_TAG "cannot make the run's directory for error files in %s: %s\n",
            c->cfg.log_dir ? c->cfg.log_dir : "$TMPDIR", strerror(errno));
    return c->cfg.log_dir ? CLI_ERROR : 0;
}

/* Parse the launcher's command line and run the job; returns the process exit status. */
int run_main(int argc, char **argv, const char *url)
{
    struct run_ctx c;
    memset(&c, 0, sizeof c);
    int status = run_prepare(&c, argc, argv);
    if (status >= 0) {
        if (c.argv0 && c.cfg.argv != c.argv0)
            free(c.cfg.argv);
        return status;
    }
    int rfd = run_signals_init();
    if (rfd < 0) {
        fprintf(stderr, RUN_TAG "cannot create the signal pipe: %s\n", strerror(errno));
        return CLI_ERROR;
    }
    if (run_guard_start() < 0)
        fprintf(stderr, RUN_TAG "no guard process (%s): a worker's children may outlive a killed launcher\n",
                strerror(errno));
    status = run_setup_url(&c, url);
    if (status == 0)
        status = run_make_dir(&c);
    if (status == 0)
        status = run_loop(&c, rfd);
    run_relay_stop(&c.relay);
    run_torch_error_keep(c.error_dir);
    if (c.cfg.argv != c.argv0)
        free(c.cfg.argv);
    muster_close(c.m);
    muster_assignment_free(c.a);
    run_server_pid = 0;
    run_standalone_stop(&c.server);
    close(rfd);
    return status;
}
