/*
 * In-process tests of torchrun's PET_* variables under `muster run`
 * (client/launcher/run_pet.c): the mapping from variables to options as a
 * pure function, compared as text ("nnodes=1:3 rdzv-id=job7"), over a fake
 * environment and a fake command line, then the whole path through the
 * options table (run_opts.c): a command line parsed, the variables applied,
 * the resulting configuration checked.  Covers what Kubeflow's PyTorchJob
 * (elastic and not) and TrainJob set, a flag winning over its variable,
 * $MUSTER_URL winning over the variables that name torch's store, the
 * static backend's PET_MASTER_ADDR/PORT, node ranks as node ids,
 * PET_RDZV_CONF, auto/cpu/gpu, and bad values.  No process, no store.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "run.h"
#include "run_pet.h"

/* A fake environment: NULL-terminated "NAME=VALUE" strings. */
struct t_env {
    const char *const *vars;
};

/* run_pet_get_fn over a fake environment. */
static const char *t_get(void *arg, const char *name)
{
    const struct t_env *e = arg;
    size_t n = strlen(name);
    for (int i = 0; e->vars && e->vars[i]; i++)
        if (strncmp(e->vars[i], name, n) == 0 && e->vars[i][n] == '=')
            return e->vars[i] + n + 1;
    return NULL;
}

/* run_pet_given_fn over a NULL-terminated list of option names. */
static int t_given(void *arg, const char *opt)
{
    const char *const *g = arg;
    for (int i = 0; g && g[i]; i++)
        if (strcmp(g[i], opt) == 0)
            return 1;
    return 0;
}

/* The mapping's result as text: "opt=value ..." (a flag without "="), or "error: WHY". */
static char t_text[1024];

/* Map vars with the options given and the store named on the command line; returns t_text. */
static const char *t_map(const char *const *vars, const char *const *given, const char *cli_store, unsigned gpus,
                         unsigned cpus)
{
    struct t_env e = {vars};
    struct run_pet_in in = {.get = t_get, .get_arg = &e, .given = t_given, .given_arg = (void *)given,
                            .cli_store = cli_store, .gpus = gpus, .cpus = cpus,
                            .cli_backend = t_given((void *)given, "rdzv-backend") ? "c10d" : NULL};
    static struct run_pet_out out;
    if (run_pet_map(&in, &out) < 0) {
        snprintf(t_text, sizeof t_text, "error: %s", out.err);
        return t_text;
    }
    size_t len = 0;
    t_text[0] = '\0';
    for (int i = 0; i < out.n && len < sizeof t_text; i++)
        len += (size_t)snprintf(t_text + len, sizeof t_text - len, "%s%s%s%s", i ? " " : "", out.opts[i].opt,
                                out.opts[i].value ? "=" : "", out.opts[i].value ? out.opts[i].value : "");
    return t_text;
}

/* Whether text starts with prefix. */
static int t_starts(const char *text, const char *prefix)
{
    return strncmp(text, prefix, strlen(prefix)) == 0;
}

/* Map vars with nothing on the command line and 8 CPUs, no GPU. */
static const char *t_env_only(const char *const *vars)
{
    return t_map(vars, NULL, NULL, 0, 8);
}

/* What Kubeflow's PyTorchJob with an elasticPolicy sets (rdzvHost/rdzvPort naming musterd). */
static void t_pytorchjob_elastic(void *arg)
{
    (void)arg;
    const char *vars[] = {"PET_NNODES=1:3", "PET_NPROC_PER_NODE=2", "PET_RDZV_BACKEND=c10d",
                          "PET_RDZV_ENDPOINT=musterd.muster.svc:29600", "PET_RDZV_ID=job7", "PET_MAX_RESTARTS=3",
                          "PET_RDZV_CONF=join_timeout=120, last_call_timeout=2", "PET_MASTER_ADDR=job7-master-0",
                          "PET_MASTER_PORT=23456", "PYTHONUNBUFFERED=1", NULL};
    CHECK_STR(t_env_only(vars), "nnodes=1:3 max-restarts=3 rdzv-backend=c10d nproc-per-node=2 rdzv-timeout=120 "
                                "last-call=2000 rdzv-endpoint=musterd.muster.svc:29600 rdzv-id=job7");
}

/* PyTorchJob without elasticPolicy, and TrainJob's torch runtime: no backend (torchrun's static), node
 * ranks, and the master's address as the store's. */
static void t_static(void *arg)
{
    (void)arg;
    const char *pj[] = {"PET_NNODES=2", "PET_NPROC_PER_NODE=auto", "PET_NODE_RANK=1",
                        "PET_MASTER_ADDR=job7-master-0", "PET_MASTER_PORT=23456", NULL};
    CHECK_STR(t_env_only(pj), "nnodes=2 nproc-per-node=8 node-id=node-000001 rdzv-endpoint=job7-master-0:23456");
    CHECK_STR(t_map(pj, NULL, NULL, 4, 8), "nnodes=2 nproc-per-node=4 node-id=node-000001 rdzv-endpoint=job7-master-0:23456");
    /* The plain ones come first. */
    CHECK_STR(t_env_only((const char *[]){"PET_NODE_RANK=12", "PET_NNODES=16", NULL}),
              "nnodes=16 node-id=node-000012");
    /* torchrun's defaults for the half that is missing: 127.0.0.1, port 29500. */
    CHECK_STR(t_env_only((const char *[]){"PET_MASTER_ADDR=10.0.0.1", NULL}), "rdzv-endpoint=10.0.0.1:29500");
    CHECK_STR(t_env_only((const char *[]){"PET_MASTER_PORT=29400", NULL}), "rdzv-endpoint=127.0.0.1:29400");
    CHECK_STR(t_env_only((const char *[]){"PET_MASTER_ADDR=fd00::1", "PET_MASTER_PORT=7", NULL}),
              "rdzv-endpoint=[fd00::1]:7");
    CHECK_STR(t_env_only((const char *[]){"PET_MASTER_ADDR=[fd00::1]", NULL}), "rdzv-endpoint=[fd00::1]:29500");
    CHECK_STR(t_env_only((const char *[]){"PET_RDZV_BACKEND=static", "PET_MASTER_ADDR=m", NULL}),
              "rdzv-backend=static rdzv-endpoint=m:29500");
    /* Another backend does not use the master's address (torchrun's get_rdzv_endpoint)... */
    CHECK_STR(t_env_only((const char *[]){"PET_RDZV_BACKEND=c10d", "PET_MASTER_ADDR=m", NULL}), "rdzv-backend=c10d");
    const char *given_backend[] = {"rdzv-backend", NULL}; /* --rdzv-backend c10d */
    CHECK_STR(t_map((const char *[]){"PET_MASTER_ADDR=m", NULL}, given_backend, NULL, 0, 8), "");
    /* ...and an endpoint wins over it. */
    CHECK_STR(t_env_only((const char *[]){"PET_RDZV_ENDPOINT=e:1", "PET_MASTER_ADDR=m", NULL}), "rdzv-endpoint=e:1");
    CHECK(t_starts(t_env_only((const char *[]){"PET_MASTER_PORT=http", NULL}),
                   "error: bad value for $PET_MASTER_PORT"));
    CHECK(t_starts(t_env_only((const char *[]){"PET_NODE_RANK=-1", NULL}), "error: bad value for $PET_NODE_RANK"));
    CHECK(t_starts(t_env_only((const char *[]){"PET_NODE_RANK=1000000", NULL}), "error: bad value for $PET_NODE_RANK"));
}

/* A flag on the command line wins over its variable, whatever its value. */
static void t_flag_wins(void *arg)
{
    (void)arg;
    const char *vars[] = {"PET_NNODES=2", "PET_NPROC_PER_NODE=gpu", "PET_NODE_RANK=x", "PET_RDZV_ID=job7",
                          "PET_MAX_RESTARTS=x", "PET_MODULE=1", "PET_RDZV_CONF=join_timeout=9,last_call_timeout=1",
                          NULL};
    const char *given[] = {"nnodes", "nproc-per-node", "node-id", "rdzv-id", "max-restarts", "module",
                           "rdzv-timeout", NULL};
    CHECK_STR(t_map(vars, given, NULL, 0, 8), "last-call=1000");
    /* A store on the command line: the store variables are not read at all. */
    const char *store[] = {"PET_RDZV_ENDPOINT=e:1", "PET_STANDALONE=yes", "PET_MASTER_ADDR=m", NULL};
    CHECK_STR(t_map(store, NULL, "tcp://s:29600", 0, 8), "");
    CHECK_STR(t_map(store, (const char *[]){"standalone", NULL}, NULL, 0, 8), "");
}

/* $MUSTER_URL names the store over PET_STANDALONE, PET_RDZV_ENDPOINT and PET_MASTER_*; PET_RDZV_ID names
 * the namespace only when the store's URL names none. */
static void t_muster_url(void *arg)
{
    (void)arg;
    const char *vars[] = {"MUSTER_URL=tcp://musterd:29600", "PET_STANDALONE=1", "PET_RDZV_ENDPOINT=e:1",
                          "PET_MASTER_ADDR=m", "PET_RDZV_ID=job7", NULL};
    CHECK_STR(t_env_only(vars), "rdzv-id=job7");
    const char *ns[] = {"MUSTER_URL=tcp://musterd:29600/team?token=t", "PET_RDZV_ENDPOINT=e:1", "PET_RDZV_ID=job7",
                        NULL};
    CHECK_STR(t_env_only(ns), "");
    CHECK_STR(t_map((const char *[]){"PET_RDZV_ID=job7", NULL}, NULL, "tcp://h:1/?token=t", 0, 8), "rdzv-id=job7");
    CHECK_STR(t_map((const char *[]){"PET_RDZV_ID=job7", NULL}, NULL, "h:1/team", 0, 8), "");
    CHECK_STR(t_env_only((const char *[]){"PET_RDZV_ENDPOINT=h:1/team", "PET_RDZV_ID=job7", NULL}),
              "rdzv-endpoint=h:1/team");
    /* An empty variable counts as unset. */
    CHECK_STR(t_env_only((const char *[]){"MUSTER_URL=", "PET_RDZV_ENDPOINT=e:1", "PET_NNODES=", NULL}),
              "rdzv-endpoint=e:1");
}

/* check_env flags are integers (torchrun: bool(int(value))); the ones muster has no use for are ignored. */
static void t_flags_and_ignored(void *arg)
{
    (void)arg;
    CHECK_STR(t_env_only((const char *[]){"PET_MODULE=1", "PET_NO_PYTHON=0", "PET_STANDALONE=2", NULL}),
              "module standalone");
    CHECK(t_starts(t_env_only((const char *[]){"PET_STANDALONE=true", NULL}), "error: bad value for $PET_STANDALONE"));
    CHECK_STR(t_env_only((const char *[]){"PET_ROLE=trainer", "PET_START_METHOD=fork", "PET_MONITOR_INTERVAL=1",
                                          "PET_RUN_PATH=1", "PET_REDIRECTS=3", "PET_TEE=3", "PET_LOG_DIR=/logs", NULL}),
              "log-dir=/logs");
}

/* PET_NPROC_PER_NODE: a number as it is, auto (GPUs, else CPUs), gpu, cpu. */
static void t_nproc(void *arg)
{
    (void)arg;
    const char *a[] = {"PET_NPROC_PER_NODE=auto", NULL}, *g[] = {"PET_NPROC_PER_NODE=gpu", NULL},
               *c[] = {"PET_NPROC_PER_NODE=cpu", NULL}, *n[] = {"PET_NPROC_PER_NODE=3", NULL};
    CHECK_STR(t_map(a, NULL, NULL, 0, 16), "nproc-per-node=16");
    CHECK_STR(t_map(a, NULL, NULL, 2, 16), "nproc-per-node=2");
    CHECK_STR(t_map(g, NULL, NULL, 8, 16), "nproc-per-node=8");
    CHECK_STR(t_map(c, NULL, NULL, 8, 16), "nproc-per-node=16");
    CHECK_STR(t_map(n, NULL, NULL, 8, 16), "nproc-per-node=3");
    CHECK(strstr(t_map(g, NULL, NULL, 0, 16), "no GPU found") != NULL);
}

/* PET_RDZV_CONF: join_timeout (or etcd's timeout) and last_call_timeout, whole seconds; other keys ignored. */
static void t_rdzv_conf(void *arg)
{
    (void)arg;
    CHECK_STR(t_env_only((const char *[]){"PET_RDZV_CONF=timeout=30,read_timeout=60,is_host=1", NULL}),
              "rdzv-timeout=30");
    CHECK_STR(t_env_only((const char *[]){"PET_RDZV_CONF=join_timeout=5,timeout=7", NULL}), "rdzv-timeout=7");
    CHECK_STR(t_env_only((const char *[]){"PET_RDZV_CONF= last_call_timeout = 0 ,", NULL}), "last-call=0");
    CHECK(t_starts(t_env_only((const char *[]){"PET_RDZV_CONF==5", NULL}), "error: bad value for $PET_RDZV_CONF"));
    CHECK(strstr(t_env_only((const char *[]){"PET_RDZV_CONF=join_timeout=1.5", NULL}), "bad value for join_timeout") !=
          NULL);
}

/* Parse argv (NULL-terminated) into cfg, then apply vars; returns what run_pet_apply returned (-2: the
 * command line itself was refused). */
static int t_apply(struct run_cfg *cfg, const char **argv, const char *const *vars, const char *global_url)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    run_opts_defaults(cfg);
    if (run_opts_parse(argc, (char **)argv, cfg) < 0)
        return -2;
    struct t_env e = {vars};
    return run_pet_apply(cfg, global_url, t_get, &e);
}

/* The whole path: command line, then the variables, into the configuration the launcher runs with. */
static void t_apply_cfg(void *arg)
{
    (void)arg;
    struct run_cfg cfg;
    const char *elastic[] = {"PET_NNODES=1:3", "PET_NPROC_PER_NODE=4", "PET_RDZV_ENDPOINT=musterd:29600",
                             "PET_RDZV_ID=job7", "PET_MAX_RESTARTS=2", "PET_RDZV_CONF=last_call_timeout=3",
                             "PET_NODE_RANK=2", NULL};
    CHECK_EQ(t_apply(&cfg, (const char *[]){"train.py", NULL}, elastic, NULL), 0);
    CHECK_EQ(cfg.nnodes[0], 1);
    CHECK_EQ(cfg.nnodes[1], 3);
    CHECK_EQ(cfg.nproc, 4);
    CHECK_EQ(cfg.max_restarts, 2);
    CHECK_EQ(cfg.last_call_ms, 3000);
    CHECK_EQ(cfg.rdzv_timeout_ms, 600000);
    CHECK_STR(cfg.rdzv_endpoint, "musterd:29600");
    CHECK_STR(cfg.rdzv_id, "job7");
    CHECK_STR(cfg.node_id, "node-000002");
    CHECK(cfg.url == NULL && !cfg.standalone);
    CHECK_STR(cfg.argv[0], "train.py");
    /* Flags (either spelling) win, and a --url on the command line is no conflict with the endpoint's
     * variable. */
    CHECK_EQ(t_apply(&cfg, (const char *[]){"--nproc_per_node=1", "--url", "tcp://s:1/x", "--max-restarts", "0",
                                             "train.py", "--nnodes", "9", NULL},
                     elastic, NULL),
             0);
    CHECK_EQ(cfg.nproc, 1);
    CHECK_EQ(cfg.max_restarts, 0);
    CHECK_EQ(cfg.nnodes[1], 3); /* "--nnodes 9" is the program's */
    CHECK_STR(cfg.url, "tcp://s:1/x");
    CHECK(cfg.rdzv_endpoint == NULL && cfg.rdzv_id == NULL);
    /* muster's own --url (before the verb) names the store too. */
    CHECK_EQ(t_apply(&cfg, (const char *[]){"train.py", NULL}, elastic, "tcp://g:2"), 0);
    CHECK(cfg.rdzv_endpoint == NULL);
    CHECK_STR(cfg.rdzv_id, "job7");
    /* Values go through the options table's own checks. */
    CHECK_EQ(t_apply(&cfg, (const char *[]){"train.py", NULL}, (const char *[]){"PET_NNODES=3:1", NULL}, NULL), -1);
    CHECK_EQ(t_apply(&cfg, (const char *[]){"train.py", NULL}, (const char *[]){"PET_NPROC_PER_NODE=0", NULL}, NULL),
             -1);
    CHECK_EQ(t_apply(&cfg, (const char *[]){"train.py", NULL}, (const char *[]){"PET_MAX_RESTARTS=x", NULL}, NULL), -1);
    /* ...and the combined ones. */
    CHECK_EQ(t_apply(&cfg, (const char *[]){"train.py", NULL},
                     (const char *[]){"PET_STANDALONE=1", "PET_NNODES=2", NULL}, NULL),
             -1);
    CHECK_EQ(t_apply(&cfg, (const char *[]){"--no-python", "train.py", NULL}, (const char *[]){"PET_MODULE=1", NULL},
                     NULL),
             -1);
    CHECK_EQ(t_apply(&cfg, (const char *[]){"train.py", NULL}, (const char *[]){"PET_STANDALONE=1", NULL}, NULL), 0);
    CHECK(cfg.standalone);
    CHECK(run_opts_given(&cfg, "standalone") == 0);
    CHECK_EQ(t_apply(&cfg, (const char *[]){"--standalone", "-m", "pkg", NULL}, NULL, NULL), 0);
    CHECK(run_opts_given(&cfg, "standalone") && run_opts_given(&cfg, "module") && !run_opts_given(&cfg, "url"));
}

int main(void)
{
    h_init("unit-launcher-pet", 30);
    H_RUN(t_pytorchjob_elastic, NULL);
    H_RUN(t_static, NULL);
    H_RUN(t_flag_wins, NULL);
    H_RUN(t_muster_url, NULL);
    H_RUN(t_flags_and_ignored, NULL);
    H_RUN(t_nproc, NULL);
    H_RUN(t_rdzv_conf, NULL);
    H_RUN(t_apply_cfg, NULL);
    return h_finish();
}
