/*
 * `muster run`'s command line: one table of options (name, kind of value,
 * where it goes, usage text), their defaults, the environment twins of the
 * limits and timeouts that have one, and the parser.  Every option accepts
 * '_' for '-', because torchrun spells --nproc_per_node, and torchrun's -m
 * is the one short option; parsing stops at the first word that is not an
 * option (PROG) or after "--".
 */
#include "run.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How an option's value is read. */
enum run_optkind { RUN_OPT_FLAG, RUN_OPT_STR, RUN_OPT_UINT, RUN_OPT_BYTES, RUN_OPT_SECONDS, RUN_OPT_MS, RUN_OPT_NNODES };

/* One row of the options table. */
struct run_opt {
    const char *name;
    enum run_optkind kind;
    size_t off;
    const char *arg;
    const char *help;
};

/* Where an option's value goes in struct run_cfg. */
#define RUN_OFF(f) offsetof(struct run_cfg, f)

/* The options, in the order the usage text lists them. */
static const struct run_opt run_opts_table[] = {
    {"url", RUN_OPT_STR, RUN_OFF(url), "URL", "store URL (default: muster --url, $MUSTER_URL)"},
    {"standalone", RUN_OPT_FLAG, RUN_OFF(standalone), NULL, "start a private musterd for a one-node job"},
    {"nnodes", RUN_OPT_NNODES, RUN_OFF(nnodes), "MIN[:MAX]", "nodes in the job (default 1)"},
    {"nproc-per-node", RUN_OPT_UINT, RUN_OFF(nproc), "N", "workers on this node (default 1)"},
    {"max-restarts", RUN_OPT_UINT, RUN_OFF(max_restarts), "K", "re-form at most K times after failures (default 0)"},
    {"node-id", RUN_OPT_STR, RUN_OFF(node_id), "ID", "this node's id; ranks follow id order (default HOST-PID)"},
    {"rdzv-timeout", RUN_OPT_SECONDS, RUN_OFF(rdzv_timeout_ms), "S", "wait at most S seconds for a round (default 600)"},
    {"connect-timeout", RUN_OPT_SECONDS, RUN_OFF(connect_timeout_ms), "S",
     "give up reaching the store after S seconds, naming host, port and why (default 60)"},
    {"last-call", RUN_OPT_MS, RUN_OFF(last_call_ms), "MS", "after MIN nodes, wait MS for more (default 1000)"},
    {"grace", RUN_OPT_SECONDS, RUN_OFF(grace_ms), "S", "SIGTERM to SIGKILL delay when stopping workers (default 5)"},
    {"prefix-output", RUN_OPT_FLAG, RUN_OFF(prefix), NULL, "prefix worker output lines with [rank]: "},
    {"rdzv-endpoint", RUN_OPT_STR, RUN_OFF(rdzv_endpoint), "HOST[:PORT]", "the store's address (torchrun's name; as --url)"},
    {"rdzv-id", RUN_OPT_STR, RUN_OFF(rdzv_id), "JOB", "the job: its namespace and TORCHELASTIC_RUN_ID"},
    {"rdzv-backend", RUN_OPT_STR, RUN_OFF(rdzv_backend), "NAME", "accepted for torchrun's command lines; ignored"},
    {"relay-max-conns", RUN_OPT_UINT, RUN_OFF(relay_max_conns), "N", "workers' store connections (default 4096)"},
    {"relay-max-key", RUN_OPT_BYTES, RUN_OFF(relay_max_key), "BYTES", "key size in a torch request (default 8192)"},
    {"relay-max-keys", RUN_OPT_UINT, RUN_OFF(relay_max_keys), "N", "keys in one torch request (default 131072)"},
    {"relay-max-request", RUN_OPT_BYTES, RUN_OFF(relay_max_request), "BYTES", "one torch request (default 64 MiB)"},
    {"relay-max-output", RUN_OPT_BYTES, RUN_OFF(relay_max_output), "BYTES", "replies a worker leaves unread (default 64 MiB)"},
    {"relay-max-watches", RUN_OPT_UINT, RUN_OFF(relay_max_watches), "N",
     "WATCH_KEY registrations of the workers, all together (default 4096)"},
    {"relay-request-timeout", RUN_OPT_MS, RUN_OFF(relay_request_timeout_ms), "MS",
     "close a worker's store connection whose request stays incomplete MS (default 30000, 0: never)"},
    {"module", RUN_OPT_FLAG, RUN_OFF(module), NULL, "also -m: PROG is a module, run as `python3 -m PROG`"},
    {"no-python", RUN_OPT_FLAG, RUN_OFF(no_python), NULL, "run PROG as it is, even one ending in .py"},
    {"recovery", RUN_OPT_STR, RUN_OFF(recovery), "MODE",
     "after a lost node or failed worker: restart (stop every worker; default) or in-place (survivors run on)"},
    {"standby", RUN_OPT_FLAG, RUN_OFF(standby), NULL, "wait as a spare; start workers once a recovery admits this node"},
    {"log-dir", RUN_OPT_STR, RUN_OFF(log_dir), "DIR", "make the run's directory (error files) in DIR (default $TMPDIR)"},
    {"help", RUN_OPT_FLAG, RUN_OFF(help), NULL, "show this help"},
};

#define RUN_OPTS_N (sizeof run_opts_table / sizeof run_opts_table[0])

_Static_assert(RUN_OPTS_N <= 64, "struct run_cfg's given has a bit per option");

/* The environment twins of the options that have one; a flag wins over its twin. */
static const struct {
    const char *name;
    const char *env;
} run_opts_envs[] = {
    {"relay-request-timeout", "MUSTER_RELAY_REQUEST_TIMEOUT"},
    {"connect-timeout", "MUSTER_CONNECT_TIMEOUT"},
};

#define RUN_OPTS_ENVS_N (sizeof run_opts_envs / sizeof run_opts_envs[0])

/* The environment twin of an option, or NULL. */
static const char *run_opts_env_of(const char *name)
{
    for (size_t i = 0; i < RUN_OPTS_ENVS_N; i++)
        if (strcmp(run_opts_envs[i].name, name) == 0)
            return run_opts_envs[i].env;
    return NULL;
}

/* Print the usage text built from the options table. */
void run_opts_usage(FILE *f)
{
    fprintf(f, "usage: muster run [OPTIONS] PROG [ARGS...]\n"
               "Start workers on this node and keep them in a rendezvous world.\n\n");
    for (size_t i = 0; i < RUN_OPTS_N; i++) {
        char left[48];
        snprintf(left, sizeof left, "--%s%s%s", run_opts_table[i].name, run_opts_table[i].arg ? " " : "",
                 run_opts_table[i].arg ? run_opts_table[i].arg : "");
        const char *env = run_opts_env_of(run_opts_table[i].name);
        fprintf(f, "  %-26s %s\n", left, run_opts_table[i].help);
        if (env)
            fprintf(f, "  %-26s (environment: $%s; the flag wins)\n", "", env);
    }
}

/* Parse a decimal number no larger than max; returns 0 or -1. */
static int run_opts_u32(const char *s, uint32_t max, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-' || v > max)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Parse one option value into the configuration; returns 0 or -1. */
static int run_opts_value(const struct run_opt *o, const char *v, struct run_cfg *cfg)
{
    char *field = (char *)cfg + o->off;
    char *end;
    double secs;
    switch (o->kind) {
    case RUN_OPT_FLAG:
        *(int *)(void *)field = 1;
        return 0;
    case RUN_OPT_STR:
        *(const char **)(void *)field = v;
        return 0;
    case RUN_OPT_UINT:
        return run_opts_u32(v, 1000000, (uint32_t *)(void *)field);
    case RUN_OPT_MS:
        return run_opts_u32(v, 86400000, (uint32_t *)(void *)field);
    case RUN_OPT_BYTES:
        return run_opts_u32(v, UINT32_MAX, (uint32_t *)(void *)field);
    case RUN_OPT_SECONDS:
        secs = strtod(v, &end);
        if (end == v || *end || !(secs >= 0 && secs <= 86400.0))
            return -1;
        *(uint32_t *)(void *)field = (uint32_t)(secs * 1000.0 + 0.5);
        return 0;
    case RUN_OPT_NNODES: {
        uint32_t *nn = (uint32_t *)(void *)field;
        char lo[24];
        const char *colon = strchr(v, ':');
        size_t ll = colon ? (size_t)(colon - v) : strlen(v);
        if (ll >= sizeof lo)
            return -1;
        memcpy(lo, v, ll);
        lo[ll] = '\0';
        if (run_opts_u32(lo, 1000000, &nn[0]) < 0 || run_opts_u32(colon ? colon + 1 : lo, 1000000, &nn[1]) < 0)
            return -1;
        return (nn[0] >= 1 && nn[1] >= nn[0]) ? 0 : -1;
    }
    }
    return -1;
}

/* Whether the option name matches the table's, reading '_' as '-' (torchrun spells --nproc_per_node). */
static int run_opts_is(const char *table, const char *arg, size_t len)
{
    if (strlen(table) != len)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (table[i] != (arg[i] == '_' ? '-' : arg[i]))
            return 0;
    return 1;
}

/* Find the row for "--name" or "--name=value"; *val gets the inline value or NULL. */
static const struct run_opt *run_opts_find(const char *arg, const char **val)
{
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    *val = eq ? eq + 1 : NULL;
    for (size_t i = 0; i < RUN_OPTS_N; i++)
        if (run_opts_is(run_opts_table[i].name, arg, len))
            return &run_opts_table[i];
    return NULL;
}

/* Apply the environment twins that are set; returns 0, or -1 after printing the problem. */
static int run_opts_env(struct run_cfg *cfg)
{
    for (size_t i = 0; i < RUN_OPTS_ENVS_N; i++) {
        const char *v = getenv(run_opts_envs[i].env), *inl;
        const struct run_opt *o = run_opts_find(run_opts_envs[i].name, &inl);
        if (!v || !*v || !o)
            continue;
        if (run_opts_value(o, v, cfg) < 0) {
            fprintf(stderr, RUN_TAG "bad value for $%s: %s\n", run_opts_envs[i].env, v);
            return -1;
        }
    }
    return 0;
}

/* The one short option, torchrun's -m, read as its long name. */
static const char *run_opts_long(const char *arg)
{
    return strcmp(arg, "-m") == 0 ? "--module" : arg;
}

/* Parse the command line up to PROG; returns 0, or -1 after printing the problem. */
int run_opts_parse(int argc, char **argv, struct run_cfg *cfg)
{
    if (run_opts_env(cfg) < 0)
        return -1;
    int i = 0;
    while (i < argc && strncmp(run_opts_long(argv[i]), "--", 2) == 0) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        const char *val;
        const struct run_opt *o = run_opts_find(run_opts_long(argv[i]) + 2, &val);
        if (!o) {
            fprintf(stderr, RUN_TAG "unknown option %s\n", argv[i]);
            return -1;
        }
        if (o->kind != RUN_OPT_FLAG && !val) {
            if (i + 1 >= argc) {
                fprintf(stderr, RUN_TAG "--%s needs a value\n", o->name);
                return -1;
            }
            val = argv[++i];
        }
        if ((o->kind == RUN_OPT_FLAG && val) || run_opts_value(o, val, cfg) < 0) {
            fprintf(stderr, RUN_TAG "bad value for --%s: %s\n", o->name, val ? val : "");
            return -1;
        }
        cfg->given |= (uint64_t)1 << (o - run_opts_table);
        i++;
    }
    cfg->argv = argv + i;
    if (cfg->help)
        return 0;
    if (i >= argc) {
        fprintf(stderr, RUN_TAG "no program to run\n");
        return -1;
    }
    return run_opts_check(cfg);
}

/* Check the options against each other; returns 0, or -1 after printing the problem. */
int run_opts_check(const struct run_cfg *cfg)
{
    if ((cfg->standalone && (cfg->url || cfg->rdzv_endpoint)) || (cfg->url && cfg->rdzv_endpoint)) {
        fprintf(stderr, RUN_TAG "--url, --rdzv-endpoint and --standalone exclude each other\n");
        return -1;
    }
    if (cfg->standalone && cfg->nnodes[1] > 1) {
        fprintf(stderr, RUN_TAG "--standalone is for a one-node job (--nnodes 1)\n");
        return -1;
    }
    if (cfg->nproc < 1) {
        fprintf(stderr, RUN_TAG "--nproc-per-node must be at least 1\n");
        return -1;
    }
    if (cfg->recovery && strcmp(cfg->recovery, "restart") != 0 && strcmp(cfg->recovery, "in-place") != 0) {
        fprintf(stderr, RUN_TAG "--recovery is restart or in-place, not %s\n", cfg->recovery);
        return -1;
    }
    if (cfg->standby && cfg->standalone) {
        fprintf(stderr, RUN_TAG "--standby joins a job of several nodes; --standalone is a one-node job\n");
        return -1;
    }
    if (cfg->module && cfg->no_python) {
        fprintf(stderr, RUN_TAG "-m/--module and --no-python exclude each other\n");
        return -1;
    }
    return 0;
}

/* Whether the command line gave the option named (as the table spells it). */
int run_opts_given(const struct run_cfg *cfg, const char *name)
{
    const char *inl;
    const struct run_opt *o = run_opts_find(name, &inl);
    return o && (cfg->given >> (o - run_opts_table) & 1u);
}

/* Set an option from a value that did not come from the command line (value NULL for a flag); returns 0
 * or -1 when the option is unknown or the value bad. */
int run_opts_set(struct run_cfg *cfg, const char *name, const char *value)
{
    const char *inl;
    const struct run_opt *o = run_opts_find(name, &inl);
    if (!o || (o->kind == RUN_OPT_FLAG) != (value == NULL))
        return -1;
    return run_opts_value(o, value, cfg);
}

/* Fill cfg with the defaults of every option. */
void run_opts_defaults(struct run_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->nnodes[0] = cfg->nnodes[1] = 1;
    cfg->nproc = 1;
    cfg->rdzv_timeout_ms = 600000;
    cfg->connect_timeout_ms = 60000;
    cfg->last_call_ms = 1000;
    cfg->grace_ms = 5000;
    cfg->relay_max_conns = 4096;
    cfg->relay_max_key = 8192;
    cfg->relay_max_keys = 131072;
    cfg->relay_max_request = 64u << 20;
    cfg->relay_max_output = 64u << 20;
    cfg->relay_max_watches = 4096;
    cfg->relay_request_timeout_ms = 30000; /* musterd's --request-timeout */
}
