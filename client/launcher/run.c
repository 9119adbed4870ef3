/*
 * `muster run`: a launcher in the manner of torchrun.  It joins the job's
 * rendezvous, starts --nproc-per-node workers with the environment of their
 * rank, restarts them within --max-restarts, re-forms the world when a node
 * waits to join, and finishes once every node's workers have exited 0.
 * With --recovery in-place the workers of surviving nodes run on into the
 * next generation instead, and --standby waits as a spare.
 *
 * The launcher is three parts (docs/launcher.md, "How it is built"): this
 * file, which parses the command line (run_opts.c), names the node, finds
 * the program and the store (the private one of --standalone included);
 * the policy (run_policy.c), a state machine without I/O that decides what
 * happens next; and the effects (run_effects.c), which do what it decides:
 * the rendezvous calls, the workers (run_proc.c), the relay (run_relay.c),
 * signals and messages.
 */
#include "run.h"

#include "cli.h"
#include "launcher.h"
#include "run_pet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long the private musterd gets to start listening. */
#define RUN_SERVER_START_MS 10000
/* How long killed workers get to be reaped before the launcher gives up on them. */
#define RUN_KILL_WAIT_MS 10000

/* Pick the store URL and parse it; returns 0 or an exit status. */
static int run_setup_url(struct run_ctx *c, const char *global_url)
{
    if (c->cfg.standalone) {
        if (run_standalone_start(&c->server, RUN_SERVER_START_MS) < 0)
            return CLI_ERROR;
        run_effects_server(&c->server);
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

/* Exit status of a command line whose program cannot run (the shell's "command not found"). */
#define RUN_NOT_FOUND 127

/* Parse the command line (then torchrun's PET_* variables, for what it did not give; url is muster's
 * --url), name the node and build the workers' command line; returns -1 to go on, else an exit status.
 * Whether the program exists is checked here, before any round starts: a missing one would otherwise
 * cost every node a round and a failed generation. */
static int run_prepare(struct run_ctx *c, int argc, char **argv, const char *url)
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
    if (run_pet_apply(&c->cfg, url, run_pet_getenv, NULL) < 0)
        return CLI_USAGE;
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
    int status = run_prepare(&c, argc, argv, url);
    if (status >= 0) {
        if (c.argv0 && c.cfg.argv != c.argv0)
            free(c.cfg.argv);
        return status;
    }
    struct run_policy_cfg pc = {.max_restarts = c.cfg.max_restarts, .max_nodes = c.cfg.nnodes[1],
                                .grace_ms = c.cfg.grace_ms, .kill_wait_ms = RUN_KILL_WAIT_MS,
                                .in_place = c.cfg.recovery && strcmp(c.cfg.recovery, "in-place") == 0,
                                .standby = c.cfg.standby};
    run_policy_init(&c.pol, &pc);
    int rfd = run_effects_signals_init();
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
        status = run_effects_drive(&c, rfd);
    run_relay_stop(&c.relay);
    run_torch_error_keep(c.error_dir);
    if (c.cfg.argv != c.argv0)
        free(c.cfg.argv);
    muster_close(c.m);
    muster_assignment_free(c.a);
    run_effects_server(NULL);
    run_standalone_stop(&c.server);
    close(rfd);
    return status;
}
