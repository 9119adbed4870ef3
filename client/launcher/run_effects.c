/*
 * The launcher's effects: everything the policy (run_policy.c) decides is
 * done here, and everything that happens is turned into the policy's
 * events here.  One loop watches three things at once with poll(): the
 * store connection (membership events), a self-pipe fed by the signal
 * handler (SIGCHLD, SIGINT, SIGTERM) and the workers' output pipes
 * (run_proc_through says which streams have one).  Each turn drains what
 * the handle has queued, then gives the policy a RUN_EV_TURN with the time
 * and performs the actions it answers; actions owe answers (the join's
 * assignment, the workers started, a heartbeat's outcome), which are fed
 * back at once and decided on in the next turn.  The loop sleeps only when
 * a turn yields nothing, and never past the policy's next timed decision.
 *
 * The store calls (join, heartbeat, the done count) block on the one
 * handle; the relay is a thread of its own (run_relay.c) and the workers
 * are processes (run_proc.c).
 */
#include "run.h"

#include "cli.h"
#include "deadline.h"
#include "keys.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Events taken from the handle per wake-up. */
#define RUN_EVENT_BATCH 1024
/* The longest sleep of the loop, with no timed decision nearer. */
#define RUN_WAIT_MAX_MS 1000

/* Signal-handler state: a handler can reach nothing else.  While a join
 * blocks there are no workers to look after, so SIGINT/SIGTERM end the
 * launcher at once (taking its private musterd along) instead of waiting
 * for the join to return: the policy's JOINING state decides the same, but
 * the blocking call would hold its decision back for up to --rdzv-timeout. */
static int run_sig_wfd = -1;
static volatile sig_atomic_t run_joining;
static volatile sig_atomic_t run_server_pid;
static char run_server_files[3][96];

static int run_effects_feed(struct run_ctx *c, const struct run_ev *ev, const char *detail);

/* ------------------------------------------------------------- signals */

/* Signal handler: note the signal on the self-pipe, or end a launcher that is only joining. */
static void run_effects_on_signal(int sig)
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
int run_effects_signals_init(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        return -1;
    run_sig_wfd = p[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = run_effects_on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return p[0];
}

/* Let the signal handler stop the private musterd s (NULL: there is none any more). */
void run_effects_server(const struct run_server *s)
{
    if (!s) {
        run_server_pid = 0;
        return;
    }
    run_server_pid = s->pid;
    snprintf(run_server_files[0], sizeof run_server_files[0], "%s", s->port_file);
    snprintf(run_server_files[1], sizeof run_server_files[1], "%s", s->log_file);
    snprintf(run_server_files[2], sizeof run_server_files[2], "%s", s->dir);
}

/* ---------------------------------------------------------------- input */

/* Feed an event that carries nothing but its kind. */
static void run_effects_tell(struct run_ctx *c, enum run_ev_kind kind)
{
    struct run_ev ev = {.kind = kind};
    run_effects_feed(c, &ev, NULL);
}

/* The store has gone for this handle: it must be replaced before the next join. */
static void run_effects_conn_gone(struct run_ctx *c)
{
    c->conn_lost = 1;
    run_effects_tell(c, RUN_EV_BROKEN);
}

/* In place, before a loss or a failure is weighed: tell the policy when a running worker has not
 * opened the world (its mark is missing), so the node restarts instead of waiting on a program that
 * will never follow the new world. */
static void run_effects_staying(struct run_ctx *c)
{
    if (c->pol.cfg.in_place && *c->error_dir && !run_proc_all_marked(&c->ws, c->error_dir))
        run_effects_tell(c, RUN_EV_NOT_STAYING);
}

/* Turn one pushed event into the policy's. */
static void run_effects_on_event(struct run_ctx *c, const muster_event *e)
{
    struct run_ev ev = {.generation = e->generation};
    switch (e->kind) {
    case MUSTER_EVENT_MEMBER_LOST:
        run_effects_staying(c);
        ev.kind = RUN_EV_MEMBER_LOST;
        run_effects_feed(c, &ev, e->node_id);
        break;
    case MUSTER_EVENT_NODE_WAITING:
        ev.kind = RUN_EV_NODE_WAITING;
        run_effects_feed(c, &ev, e->node_id);
        break;
    case MUSTER_EVENT_SET:
        if (!c->done_watch || e->watch_id != c->done_watch)
            break;
        ev.kind = RUN_EV_DONE_COUNT;
        ev.count = keys_value_decimal(e->value, e->value_len);
        run_effects_feed(c, &ev, NULL);
        break;
    case MUSTER_EVENT_SHUTDOWN:
        fprintf(stderr, RUN_TAG "the store is shutting down: %s\n", e->reason ? e->reason : "");
        run_effects_conn_gone(c);
        break;
    case MUSTER_EVENT_WATCH_ENDED:
        /* The server dropped the watch (output left unread): the policy watches and reads again. */
        if (c->done_watch && e->watch_id == c->done_watch) {
            c->done_watch = 0;
            run_effects_tell(c, RUN_EV_WATCH_ENDED);
        }
        break;
    case MUSTER_EVENT_DELETE:
        break;
    }
}

/* Take every event the handle has queued or can read now. */
static void run_effects_events(struct run_ctx *c)
{
    for (int i = 0; c->m && !c->conn_lost && i < RUN_EVENT_BATCH; i++) {
        muster_event *ev = NULL;
        int rc = muster_next_event(c->m, &ev, 0);
        if (rc == MUSTER_ETIMEDOUT)
            return;
        if (rc != MUSTER_OK) {
            fprintf(stderr, RUN_TAG "store connection lost: %s\n", muster_strerror(rc));
            run_effects_conn_gone(c);
            return;
        }
        run_effects_on_event(c, ev);
        muster_event_free(ev);
    }
}

/* Note a failed store call: the generation cannot be relied on, and a dead connection must be replaced. */
static void run_effects_call_failed(struct run_ctx *c, const char *what, int rc)
{
    fprintf(stderr, RUN_TAG "%s: %s\n", what, muster_strerror(rc));
    if (rc == MUSTER_ECONN || rc == MUSTER_ETIMEDOUT || rc == MUSTER_EPROTO)
        c->conn_lost = 1;
    run_effects_tell(c, RUN_EV_BROKEN);
}

/* run_proc_reap's callback: a reaped worker is a RUN_EV_WORKER_EXIT. */
static void run_effects_on_exit(void *arg, const struct run_worker *w)
{
    struct run_ev ev = {.kind = RUN_EV_WORKER_EXIT, .local_rank = w->local_rank, .status = w->status};
    if (w->status != 0)
        run_effects_staying(arg);
    run_effects_feed(arg, &ev, NULL);
}

/* Handle what the self-pipe carries: children to reap and signals to pass on. */
static void run_effects_on_sigpipe(struct run_ctx *c, int rfd)
{
    unsigned char b[64];
    ssize_t k;
    while ((k = read(rfd, b, sizeof b)) > 0) {
        for (ssize_t i = 0; i < k; i++) {
            if (b[i] == SIGCHLD) {
                run_proc_reap(&c->ws, run_effects_on_exit, c);
                if (run_standalone_died(&c->server)) {
                    fprintf(stderr, RUN_TAG "the private musterd exited\n");
                    c->server_died = 1;
                    run_effects_conn_gone(c);
                }
            } else {
                struct run_ev ev = {.kind = RUN_EV_SIGNAL, .sig = b[i]};
                run_effects_feed(c, &ev, NULL);
            }
        }
    }
}

/* Wait up to timeout_ms for anything to happen and take it in. */
static void run_effects_pump(struct run_ctx *c, int rfd, int timeout_ms)
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
            run_effects_on_sigpipe(c, rfd);
        if (pfd[1].revents)
            run_effects_events(c);
        run_proc_output(&c->ws, pfd + 2, nout);
    }
    free(pfd);
}

/* Milliseconds until the policy's next timed decision, at most RUN_WAIT_MAX_MS. */
static int run_effects_wait_ms(const struct run_ctx *c)
{
    uint64_t at = run_policy_wake(&c->pol), now = deadline_now();
    uint64_t left = at > now ? at - now : 0;
    return (int)(left < RUN_WAIT_MAX_MS ? left : RUN_WAIT_MAX_MS);
}

/* ----------------------------------------------------------- rendezvous */

/* What libmuster says while connecting: the first failed attempt is told at once, with what is retried
 * and for how long (a down store or a wrong host must not look like a silent launcher).  One per process:
 * the handle keeps its log callback for life, so the state must outlive the connect. */
static struct run_connect_log {
    uint32_t timeout_ms;
    int told;
    char last[256];
} run_connect_log;

/* libmuster's log callback while connecting. */
static void run_effects_connect_log(void *arg, int level, const char *msg)
{
    struct run_connect_log *l = arg;
    if (level > MUSTER_LOG_INFO)
        return;
    snprintf(l->last, sizeof l->last, "%s", msg);
    if (level == MUSTER_LOG_INFO && !l->told && strstr(msg, "; retrying")) {
        l->told = 1;
        fprintf(stderr, RUN_TAG "%s for up to %u s (--connect-timeout)\n", msg, (unsigned)(l->timeout_ms / 1000));
    }
}

/* Connect (again) to the store when there is no usable handle; returns 0 or an exit status. */
static int run_effects_connect(struct run_ctx *c)
{
    if (c->m && !c->conn_lost)
        return 0;
    if (c->server_died)
        return CLI_ERROR;
    muster_close(c->m);
    c->conn_lost = 0;
    struct run_connect_log *l = &run_connect_log;
    *l = (struct run_connect_log){.timeout_ms = c->cfg.connect_timeout_ms};
    muster_opts o = {.connect_timeout_ms = c->cfg.connect_timeout_ms, .client_name = "muster run",
                     .log_fn = run_effects_connect_log, .log_arg = l};
    int err = 0;
    c->m = muster_connect_opts(c->url, &o, &err);
    if (!c->m) {
        char where[600];
        cli_url_redacted(c->url, where, sizeof where); /* the URL's token stays out of logs */
        fprintf(stderr, RUN_TAG "cannot connect to %s: %s%s%s\n", where, muster_strerror(err), *l->last ? ": " : "",
                l->last);
        return err == MUSTER_ETIMEDOUT || err == MUSTER_ECONN ? CLI_CONNECT : CLI_ERROR;
    }
    /* Workers must not inherit the launcher's membership connection. */
    fcntl(muster_fd(c->m), F_SETFD, FD_CLOEXEC);
    return 0;
}

/* Whether the job already ran to completion under this name.  A launcher
 * that arrives then (a node back after the end, or a re-run under a used
 * name) runs nothing and says so, as torchrun's closed rendezvous does;
 * without this it would form a new generation of its own. */
static int run_effects_completed_before(struct run_ctx *c)
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
static void run_effects_complete(struct run_ctx *c)
{
    char gen[24];
    int n = snprintf(gen, sizeof gen, "%" PRIu64, c->a->generation);
    muster_set(c->m, KEYS_RUN_COMPLETED, gen, (size_t)n, 0);
}

/* Say which place the assignment c->a gives this node, and fill the JOINED event ev with it. */
static void run_effects_joined(struct run_ctx *c, struct run_ev *ev)
{
    const muster_assignment *a = c->a;
    fprintf(stderr, RUN_TAG "generation %" PRIu64 ": node %s (%u of %u nodes), ranks %u-%u of %u\n", a->generation,
            a->node_id, a->node_rank, a->num_nodes, a->rank_start, a->rank_start + a->local_world_size - 1,
            a->world_size);
    ev->kind = RUN_EV_JOINED;
    ev->now = deadline_now();
    ev->generation = a->generation;
    ev->num_nodes = a->num_nodes;
    ev->every = muster_rdzv_heartbeat_interval(c->m);
}

/* Join the next round (flags: RUN_JOIN_FIRST, RUN_JOIN_STANDBY); returns 0 with c->a, RUN_EV_COMPLETED's
 * -1, or an exit status.  Workers may run during a re-join in place: then a signal waits for the answer. */
static int run_effects_rdzv(struct run_ctx *c, int flags)
{
    int first = flags & RUN_JOIN_FIRST, idle = c->ws.running == 0;
    /* No worker runs while joining: a signal ends the launcher at once, also during a reconnect
     * to a store that is gone (which may otherwise take --rdzv-timeout). */
    run_joining = idle;
    int rc = run_effects_connect(c);
    run_joining = 0;
    if (rc)
        return rc;
    if (first && run_effects_completed_before(c)) {
        if (c->u.ns[0])
            return -1;   /* a named job ran to completion: nothing to run, as torchrun's closed rendezvous */
        /* A job without a name of its own shares the default namespace with every other unnamed launch
         * on this musterd: "nothing to run" would read as success to a scheduler, so it is an error. */
        fprintf(stderr, RUN_TAG "this launch has no job name of its own (no --rdzv-id, no namespace in the store "
                                "URL) and an earlier unnamed job completed there: not run; give each job an id\n");
        return CLI_ERROR;
    }
    muster_rdzv_opts o = {
        .node_id = c->node_id,
        .local_world_size = c->cfg.nproc,
        .min_nodes = c->cfg.nnodes[0],
        .max_nodes = c->cfg.nnodes[1],
        .last_call_ms = c->cfg.last_call_ms,
        .standby = (flags & RUN_JOIN_STANDBY) != 0,
        /* No member list: musterd stores a recovery's answer once for the workers (muster/world.h). */
    };
    muster_assignment_free(c->a);
    c->a = NULL;
    run_joining = idle;
    rc = muster_rdzv_join(c->m, &o, &c->a, c->cfg.rdzv_timeout_ms);
    run_joining = 0;
    if (rc == MUSTER_OK)
        return 0;
    fprintf(stderr, RUN_TAG "rendezvous failed: %s%s%s\n", muster_strerror(rc), *muster_last_error(c->m) ? ": " : "",
            muster_last_error(c->m));
    return rc == MUSTER_ETIMEDOUT ? CLI_TIMEOUT : rc == MUSTER_ECONN ? CLI_CONNECT : CLI_ERROR;
}

/* RUN_ACT_JOIN: join, and answer JOINED, COMPLETED or JOIN_FAILED. */
static void run_effects_join(struct run_ctx *c, int flags)
{
    int rc = run_effects_rdzv(c, flags);
    struct run_ev ev = {.kind = rc == 0 ? RUN_EV_JOINED : rc < 0 ? RUN_EV_COMPLETED : RUN_EV_JOIN_FAILED,
                        .status = rc > 0 ? rc : 0};
    if (rc == 0)
        run_effects_joined(c, &ev);
    run_effects_feed(c, &ev, NULL);
}

/* RUN_ACT_RECOVER: join the broken generation's recovery round, the workers running on; answer JOINED
 * or RECOVER_FAILED.  A dead handle is no longer a member: the restart way re-forms (reconnecting). */
static void run_effects_recover(struct run_ctx *c)
{
    struct run_ev ev = {.kind = RUN_EV_RECOVER_FAILED, .status = MUSTER_ECONN};
    /* min and max are the generation's; they are given because the call checks them. */
    muster_rdzv_opts o = {.node_id = c->node_id, .local_world_size = c->cfg.nproc, .min_nodes = c->cfg.nnodes[0],
                          .max_nodes = c->cfg.nnodes[1], .last_call_ms = c->cfg.last_call_ms};
    muster_assignment *a = NULL;
    int rc = c->conn_lost ? MUSTER_ECONN : muster_rdzv_recover(c->m, &o, &a, c->cfg.rdzv_timeout_ms);
    if (rc == MUSTER_OK) {
        muster_assignment_free(c->a);
        c->a = a;
        fprintf(stderr, RUN_TAG "recovered in place from generation %" PRIu64 " (this node was %u of it)\n",
                a->previous_generation, a->old_node_rank);
        run_effects_joined(c, &ev);
    } else {
        fprintf(stderr, RUN_TAG "cannot recover in place: %s%s%s\n", muster_strerror(rc),
                !c->conn_lost && *muster_last_error(c->m) ? ": " : "", c->conn_lost ? "" : muster_last_error(c->m));
        if (rc == MUSTER_ECONN || rc == MUSTER_EPROTO)
            c->conn_lost = 1;
        ev.status = rc;
    }
    run_effects_feed(c, &ev, NULL);
}

/* RUN_ACT_ARM: in place, once every running worker follows the world, arm this node's recovery of the
 * running generation (muster_rdzv_arm: the daemon agrees on the next generation in the turn of a break,
 * and the recovery then only takes the answer); a no-op once armed.  A worker that does not follow the
 * world makes the node restart its workers at a break, so it is not armed then. */
static void run_effects_arm(struct run_ctx *c)
{
    if (c->conn_lost || !c->pol.cfg.in_place || !*c->error_dir || !run_proc_all_marked(&c->ws, c->error_dir))
        return;
    muster_rdzv_opts o = {.node_id = c->node_id, .local_world_size = c->cfg.nproc, .min_nodes = c->cfg.nnodes[0],
                          .max_nodes = c->cfg.nnodes[1], .last_call_ms = c->cfg.last_call_ms};
    int rc = muster_rdzv_arm(c->m, &o, c->cfg.rdzv_timeout_ms);
    if (rc != MUSTER_OK && c->arm_failed != rc) /* said once per cause: this runs at every heartbeat */
        fprintf(stderr, RUN_TAG "cannot arm the recovery (it will be joined after the loss): %s%s%s\n",
                muster_strerror(rc), *muster_last_error(c->m) ? ": " : "", muster_last_error(c->m));
    c->arm_failed = rc;
}

/* RUN_ACT_LEAVE: end this node's membership (finished: its workers all succeeded); a dead handle has
 * already ended it. */
static void run_effects_leave(struct run_ctx *c, int finished)
{
    if (c->conn_lost)
        return;
    int rc = finished ? muster_rdzv_finish(c->m, 0) : muster_rdzv_leave(c->m, 0);
    if (rc == MUSTER_ECONN || rc == MUSTER_ETIMEDOUT)
        c->conn_lost = 1;
}

/* RUN_ACT_HEARTBEAT: send one (none on a dead handle) and answer BEAT, then BROKEN when it failed. */
static void run_effects_heartbeat(struct run_ctx *c)
{
    uint32_t every = muster_rdzv_heartbeat_interval(c->m);
    int rc = c->conn_lost ? MUSTER_OK : muster_rdzv_heartbeat(c->m, c->pol.generation, every);
    struct run_ev ev = {.kind = RUN_EV_BEAT, .now = deadline_now(), .every = every, .stale = rc == MUSTER_ESTALE};
    run_effects_feed(c, &ev, NULL);
    if (rc != MUSTER_OK && rc != MUSTER_ESTALE)
        run_effects_call_failed(c, "heartbeat", rc);
}

/* RUN_ACT_WATCH: watch this generation's done key and add add to it; answer WATCHING and DONE_COUNT. */
static void run_effects_watch(struct run_ctx *c, int add)
{
    if (c->conn_lost) {
        run_effects_tell(c, RUN_EV_BROKEN);
        return;
    }
    char key[64];
    keys_run_done(key, sizeof key, c->a->generation);
    int rc = muster_watch(c->m, key, &c->done_watch, 0);
    if (rc == MUSTER_OK)
        run_effects_tell(c, RUN_EV_WATCHING);
    struct run_ev ev = {.kind = RUN_EV_DONE_COUNT};
    if (rc == MUSTER_OK)
        rc = muster_add(c->m, key, add, &ev.count, 0);
    if (rc == MUSTER_OK)
        run_effects_feed(c, &ev, NULL);
    else
        run_effects_call_failed(c, "finishing", rc);
}

/* RUN_ACT_UNWATCH: drop the done key's watch. */
static void run_effects_unwatch(struct run_ctx *c)
{
    if (c->done_watch && !c->conn_lost)
        muster_unwatch(c->m, c->done_watch, 0);
    c->done_watch = 0;
}

/* ------------------------------------------------------------- workers */

/* The environment of this generation's workers: MASTER_ADDR:MASTER_PORT is the node's relay. */
static struct run_env run_effects_env(const struct run_ctx *c)
{
    struct run_env env = {
        .a = c->a,
        .url = c->url,
        .master_addr = c->master_addr,
        .master_port = c->master_port,
        .restart_count = c->pol.restarts,
        .max_restarts = (int)c->cfg.max_restarts,
        .run_id = c->run_id,
        .error_dir = c->error_dir,
        .in_place = c->pol.cfg.in_place,
    };
    return env;
}

/* Start this generation's relay, then this node's workers; returns 0, or -1 when none could start. */
static int run_effects_spawn(struct run_ctx *c)
{
    struct run_relay_cfg rc = {
        /* The relay has no value flag: a value is bounded by --relay-max-request alone. */
        .lim = {.max_key = c->cfg.relay_max_key, .max_value = UINT64_MAX, .max_keys = c->cfg.relay_max_keys,
                .max_request = c->cfg.relay_max_request},
        .max_conns = c->cfg.relay_max_conns,
        .max_output = c->cfg.relay_max_output,
        .max_watches = c->cfg.relay_max_watches,
        .request_timeout_ms = c->cfg.relay_request_timeout_ms,
    };
    c->master_addr = "127.0.0.1";
    c->master_port = 0;
    if (run_relay_start(&c->relay, &rc, c->url, c->a->generation) == 0) {
        c->master_port = c->relay.port;
    } else {
        /* Native workers need no relay; torch ones then find no store, and say so. */
        run_relay_stop(&c->relay);
        fprintf(stderr, RUN_TAG "no TCPStore relay: MASTER_ADDR:MASTER_PORT is the store itself\n");
        c->master_addr = c->u.host;
        c->master_port = c->u.port;
    }
    int close_fds[1] = {muster_fd(c->m)};
    struct run_env env = run_effects_env(c);
    env.close_fds = close_fds;
    env.n_close_fds = 1;
    return run_proc_start(&c->ws, (int)c->cfg.nproc, c->cfg.prefix, &env, c->cfg.argv);
}

/* RUN_ACT_START: start the relay and the workers, and answer STARTED. */
static void run_effects_start(struct run_ctx *c)
{
    if (run_effects_spawn(c) < 0)
        fprintf(stderr, RUN_TAG "no worker could be started\n");
    struct run_ev ev = {.kind = RUN_EV_STARTED, .count = c->ws.running, .status = c->ws.first_failure};
    run_effects_feed(c, &ev, NULL);
}

/* RUN_ACT_REPLACE: in a generation recovered in place, start the local ranks that failed (the relay and
 * the others run on: a worker's environment cannot change) and answer STARTED.  Workers that died while
 * the blocking recovery or join waited are reaped first, so they are replaced now and not in a further
 * recovery. */
static void run_effects_replace(struct run_ctx *c)
{
    run_proc_reap(&c->ws, run_effects_on_exit, c);
    int close_fds[1] = {c->conn_lost ? -1 : muster_fd(c->m)};
    struct run_env env = run_effects_env(c);
    env.close_fds = close_fds;
    env.n_close_fds = 1;
    for (int i = 0; i < c->ws.n; i++)
        if (c->ws.w[i].pid > 0)
            fprintf(stderr, RUN_TAG "local rank %d (pid %ld) stays in place as rank %u\n", i, (long)c->ws.w[i].pid,
                    c->a->rank_start + (unsigned)i);
    int started = run_proc_replace(&c->ws, &env, c->cfg.argv);
    if (started > 0)
        fprintf(stderr, RUN_TAG "started %d worker(s) in place of the failed one(s)\n", started);
    struct run_ev ev = {.kind = RUN_EV_STARTED, .count = c->ws.running, .status = c->ws.first_failure};
    run_effects_feed(c, &ev, NULL);
}

/* RUN_ACT_REPORT: say which worker failed first, then every failed worker with its error file. */
static void run_effects_report(struct run_ctx *c)
{
    struct run_env env = run_effects_env(c);
    const char *sig = c->ws.first_signal ? run_torch_signame(c->ws.first_signal) : NULL;
    fprintf(stderr, RUN_TAG "a worker failed with status %d%s%s%s\n", c->ws.first_failure, sig ? " (" : "",
            sig ? sig : "", sig ? ")" : "");
    run_torch_report(&c->ws, &env);
}

/* RUN_ACT_RELEASE: pass on the workers' last output, free their table and stop the relay. */
static void run_effects_release(struct run_ctx *c)
{
    run_proc_free(&c->ws);
    run_relay_stop(&c->relay);
}

/* ------------------------------------------------------------ the loop */

/* RUN_ACT_SAY: word a note of the policy (detail: the node the event named, when one did). */
static void run_effects_say(const struct run_ctx *c, enum run_note note, const char *detail)
{
    const struct run_policy *p = &c->pol;
    const char *node = detail ? detail : "";
    switch (note) {
    case RUN_NOTE_LOST:
        fprintf(stderr, RUN_TAG "generation %" PRIu64 " broken: node %s lost\n", p->generation, node);
        break;
    case RUN_NOTE_GROW:
        fprintf(stderr, RUN_TAG "node %s waits to join; re-forming to grow the world\n", node);
        break;
    case RUN_NOTE_ENDED:
        fprintf(stderr, RUN_TAG "generation %" PRIu64 " has ended\n", p->generation);
        break;
    case RUN_NOTE_SIGNAL:
        fprintf(stderr, RUN_TAG "got signal %d; stopping workers\n", p->sig);
        break;
    case RUN_NOTE_KILL:
        fprintf(stderr, RUN_TAG "%d worker(s) still running; sending SIGKILL\n", c->ws.running);
        break;
    case RUN_NOTE_NO_RESTARTS:
        fprintf(stderr, RUN_TAG "no restarts left (--max-restarts %u); giving up\n", c->cfg.max_restarts);
        break;
    case RUN_NOTE_RESTART:
        fprintf(stderr, RUN_TAG "restart %d of %u\n", p->restarts, c->cfg.max_restarts);
        break;
    case RUN_NOTE_FINISHED:
        fprintf(stderr, RUN_TAG "all workers finished\n");
        break;
    case RUN_NOTE_RECOVER:
        fprintf(stderr, RUN_TAG "recovering in place: the workers keep running\n");
        break;
    case RUN_NOTE_REPLACE:
        fprintf(stderr, RUN_TAG "re-joining to replace the failed worker; the others keep running\n");
        break;
    case RUN_NOTE_FALLBACK:
        fprintf(stderr, RUN_TAG "no recovery in place; stopping the workers to re-form\n");
        break;
    case RUN_NOTE_STANDBY:
        fprintf(stderr, RUN_TAG "waiting as a standby until a round admits this node\n");
        break;
    case RUN_NOTE_NOT_STAYING:
        fprintf(stderr, RUN_TAG "--recovery in-place, but a worker never opened the world (muster.torch, or "
                        "muster/world.h): this node recovers by restarting its workers\n");
        break;
    }
}

/* Perform one action of the policy. */
static void run_effects_perform(struct run_ctx *c, const struct run_act *a, const char *detail)
{
    switch (a->kind) {
    case RUN_ACT_JOIN:
        run_effects_join(c, a->arg);
        break;
    case RUN_ACT_START:
        run_effects_start(c);
        break;
    case RUN_ACT_HEARTBEAT:
        run_effects_heartbeat(c);
        break;
    case RUN_ACT_WATCH:
        run_effects_watch(c, a->arg);
        break;
    case RUN_ACT_UNWATCH:
        run_effects_unwatch(c);
        break;
    case RUN_ACT_REPORT:
        run_effects_report(c);
        break;
    case RUN_ACT_LEAVE:
        run_effects_leave(c, a->arg);
        break;
    case RUN_ACT_SIGNAL:
        run_proc_signal(&c->ws, a->arg);
        break;
    case RUN_ACT_RELEASE:
        run_effects_release(c);
        break;
    case RUN_ACT_COMPLETE:
        run_effects_complete(c);
        break;
    case RUN_ACT_SAY:
        run_effects_say(c, (enum run_note)a->arg, detail);
        break;
    case RUN_ACT_EXIT:
        break; /* the loop reads the policy's state */
    case RUN_ACT_RECOVER:
        run_effects_recover(c);
        break;
    case RUN_ACT_ARM:
        run_effects_arm(c);
        break;
    case RUN_ACT_REPLACE:
        run_effects_replace(c);
        break;
    }
}

/* Give the policy one event and perform what it answers; returns how many actions there were.  An
 * answer fed back from inside an action only ever yields notes, so this recurses one level at most. */
static int run_effects_feed(struct run_ctx *c, const struct run_ev *ev, const char *detail)
{
    struct run_acts acts;
    run_policy_step(&c->pol, ev, &acts);
    for (int i = 0; i < acts.n; i++)
        run_effects_perform(c, &acts.a[i], detail);
    return acts.n;
}

/* Join, run and re-form generations as the policy decides until it ends the run; returns the exit status. */
int run_effects_drive(struct run_ctx *c, int rfd)
{
    for (;;) {
        run_effects_events(c);
        struct run_ev turn = {.kind = RUN_EV_TURN, .now = deadline_now()};
        int acted = run_effects_feed(c, &turn, NULL);
        if (c->pol.state == RUN_ST_ENDED)
            return c->pol.exit_code;
        /* Answers to what was just done are decided on at once; with nothing done, wait for news. */
        if (!acted)
            run_effects_pump(c, rfd, run_effects_wait_ms(c));
    }
}
