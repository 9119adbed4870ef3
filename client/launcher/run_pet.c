/*
 * torchrun reads every option it is not given on the command line from an
 * environment variable, PET_ and the option's name in upper case
 * (torch/distributed/argparse_util.py: `env` for options with a value,
 * `check_env` for flags, read as an integer).  Job operators (Kubeflow's
 * PyTorchJob and TrainJob) configure torchrun that way, so `muster run`
 * reads the same variables: run_pet_map turns them into the options of
 * run_opts.c that the command line did not give, and run_pet_apply sets
 * them.  The store is the one exception to "variable = option": a store
 * named on the command line or by $MUSTER_URL wins over PET_STANDALONE,
 * PET_RDZV_ENDPOINT and PET_MASTER_ADDR/PORT, which operators fill in for
 * torch's own store.  docs/launcher.md lists the mapping.
 */
#include "run_pet.h"

#include "run.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* torchrun's --master_port default, used when only PET_MASTER_ADDR is set. */
#define RUN_PET_MASTER_PORT "29500"

/* A variable's value, or NULL when it is unset or empty (an empty variable counts as unset). */
static const char *run_pet_var(const struct run_pet_in *in, const char *name)
{
    const char *v = in->get(in->get_arg, name);
    return v && *v ? v : NULL;
}

/* Whether the command line gave the option. */
static int run_pet_given(const struct run_pet_in *in, const char *opt)
{
    return in->given(in->given_arg, opt);
}

/* Add one option to out; returns 0, or -1 when the table is full. */
static int run_pet_add(struct run_pet_out *out, const char *opt, const char *value, const char *from)
{
    if (out->n >= RUN_PET_OPTS_MAX) {
        snprintf(out->err, sizeof out->err, "too many options from the environment");
        return -1;
    }
    out->opts[out->n++] = (struct run_pet_opt){opt, value, from};
    return 0;
}

/* A buffer of out for a value made from the variables, or NULL when none is left. */
static char *run_pet_buf(struct run_pet_out *out)
{
    if (out->nbufs >= (int)(sizeof out->bufs / sizeof out->bufs[0]))
        return NULL;
    return out->bufs[out->nbufs++];
}

/* Parse a decimal number no larger than max, as Python's int() reads one (spaces around it allowed);
 * returns 0 or -1. */
static int run_pet_uint(const char *s, unsigned long max, unsigned long *v)
{
    while (isspace((unsigned char)*s))
        s++;
    if (*s == '+')
        s++;
    if (!isdigit((unsigned char)*s))
        return -1;
    unsigned long n = 0;
    for (; isdigit((unsigned char)*s); s++) {
        n = n * 10 + (unsigned long)(*s - '0');
        if (n > max)
            return -1;
    }
    while (isspace((unsigned char)*s))
        s++;
    *v = n;
    return *s ? -1 : 0;
}

/* A check_env flag (bool(int(value)) in torchrun): 1 set, 0 not set, -1 not a number (out->err set). */
static int run_pet_flag(const struct run_pet_in *in, const char *name, struct run_pet_out *out)
{
    const char *v = run_pet_var(in, name);
    unsigned long n;
    if (!v)
        return 0;
    if (run_pet_uint(v, 1000000, &n) < 0) {
        snprintf(out->err, sizeof out->err, "bad value for $%s: %.64s (torchrun reads it as an integer)", name, v);
        return -1;
    }
    return n != 0;
}

/* Whether a store URL or HOST:PORT names a namespace (a path after the authority, before any query). */
static int run_pet_names_ns(const char *url)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    const char *q = strchr(p, '?');
    const char *slash = strchr(p, '/');
    return slash && (!q || slash < q) && slash[1] && slash[1] != '?';
}

/* Options that are a variable's own text, when their flag was not given. */
static const struct {
    const char *var;
    const char *opt;
} run_pet_plain[] = {
    {"PET_NNODES", "nnodes"},
    {"PET_MAX_RESTARTS", "max-restarts"},
    {"PET_RDZV_BACKEND", "rdzv-backend"},
    {"PET_LOG_DIR", "log-dir"},
};

/* Flags read as torchrun's check_env reads them. */
static const struct {
    const char *var;
    const char *opt;
} run_pet_flags[] = {
    {"PET_MODULE", "module"},
    {"PET_NO_PYTHON", "no-python"},
};

/* PET_NPROC_PER_NODE: a number, or torchrun's auto (GPUs, else CPUs), gpu or cpu; returns 0 or -1. */
static int run_pet_nproc(const struct run_pet_in *in, struct run_pet_out *out)
{
    const char *v = run_pet_var(in, "PET_NPROC_PER_NODE");
    if (!v || run_pet_given(in, "nproc-per-node"))
        return 0;
    unsigned n;
    if (strcmp(v, "auto") == 0)
        n = in->gpus ? in->gpus : in->cpus;
    else if (strcmp(v, "cpu") == 0)
        n = in->cpus;
    else if (strcmp(v, "gpu") == 0)
        n = in->gpus;
    else
        return run_pet_add(out, "nproc-per-node", v, "PET_NPROC_PER_NODE");
    char *buf = run_pet_buf(out);
    if (n == 0 || !buf) {
        snprintf(out->err, sizeof out->err, "$PET_NPROC_PER_NODE=%s: no %s found on this node", v,
                 strcmp(v, "cpu") == 0 ? "CPU" : "GPU");
        return -1;
    }
    snprintf(buf, sizeof out->bufs[0], "%u", n);
    return run_pet_add(out, "nproc-per-node", buf, "PET_NPROC_PER_NODE");
}

/* PET_NODE_RANK: the node's id, "node-" and the rank in six digits, so ranks follow it (byte order of
 * ids); returns 0 or -1. */
static int run_pet_node_rank(const struct run_pet_in *in, struct run_pet_out *out)
{
    const char *v = run_pet_var(in, "PET_NODE_RANK");
    unsigned long r;
    if (!v || run_pet_given(in, "node-id"))
        return 0;
    char *buf = run_pet_buf(out);
    if (!buf || run_pet_uint(v, 999999, &r) < 0) {
        snprintf(out->err, sizeof out->err, "bad value for $PET_NODE_RANK: %.64s (0 to 999999)", v);
        return -1;
    }
    snprintf(buf, sizeof out->bufs[0], "node-%06lu", r);
    return run_pet_add(out, "node-id", buf, "PET_NODE_RANK");
}

/* One key of PET_RDZV_CONF that muster honours: join_timeout or timeout (seconds) as --rdzv-timeout,
 * last_call_timeout (seconds) as --last-call (ms); returns 0 or -1. */
static int run_pet_conf_key(const struct run_pet_in *in, struct run_pet_out *out, const char *key, size_t klen,
                            const char *val, size_t vlen)
{
    int join = (klen == 12 && strncmp(key, "join_timeout", 12) == 0) || (klen == 7 && strncmp(key, "timeout", 7) == 0);
    int last = klen == 17 && strncmp(key, "last_call_timeout", 17) == 0;
    const char *opt = join ? "rdzv-timeout" : "last-call";
    char text[24];
    unsigned long s;
    if ((!join && !last) || run_pet_given(in, opt))
        return 0;
    snprintf(text, sizeof text, "%.*s", (int)(vlen < sizeof text - 1 ? vlen : sizeof text - 1), val);
    char *buf = run_pet_buf(out);
    if (vlen >= sizeof text || run_pet_uint(text, 86400, &s) < 0 || !buf) {
        snprintf(out->err, sizeof out->err, "bad value for %.*s in $PET_RDZV_CONF: %s (whole seconds)", (int)klen,
                 key, text);
        return -1;
    }
    snprintf(buf, sizeof out->bufs[0], "%lu", join ? s : s * 1000);
    for (int i = 0; i < out->n; i++)
        if (strcmp(out->opts[i].opt, opt) == 0) { /* join_timeout and timeout: the later one */
            out->opts[i].value = buf;
            return 0;
        }
    return run_pet_add(out, opt, buf, "PET_RDZV_CONF");
}

/* PET_RDZV_CONF, torchrun's KEY=VALUE,...; keys muster has no use for are ignored as torch's own
 * rendezvous ignores keys it does not know; returns 0 or -1. */
static int run_pet_conf(const struct run_pet_in *in, struct run_pet_out *out)
{
    const char *v = run_pet_var(in, "PET_RDZV_CONF");
    if (!v)
        return 0;
    for (const char *p = v; *p;) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        const char *k = p, *ke = eq ? eq : end;
        while (k < ke && isspace((unsigned char)*k))
            k++;
        while (ke > k && isspace((unsigned char)ke[-1]))
            ke--;
        if (k == ke) {
            snprintf(out->err, sizeof out->err, "bad value for $PET_RDZV_CONF: %.64s (KEY=VALUE,...)", v);
            return -1;
        }
        if (eq) {
            const char *val = eq + 1;
            while (val < end && isspace((unsigned char)*val))
                val++;
            size_t vlen = (size_t)(end - val);
            while (vlen && isspace((unsigned char)val[vlen - 1]))
                vlen--;
            if (run_pet_conf_key(in, out, k, (size_t)(ke - k), val, vlen) < 0)
                return -1;
        }
        p = *end ? end + 1 : end;
    }
    return 0;
}

/* The store: what the command line or $MUSTER_URL names wins; else PET_STANDALONE, PET_RDZV_ENDPOINT,
 * and with the static backend (torchrun's default) PET_MASTER_ADDR:PET_MASTER_PORT.  *store gets the
 * store's text for the namespace check (NULL: none, or the private one); returns 0 or -1. */
static int run_pet_store(const struct run_pet_in *in, struct run_pet_out *out, const char **store)
{
    *store = in->cli_store ? in->cli_store : run_pet_var(in, "MUSTER_URL");
    if (*store || run_pet_given(in, "standalone"))
        return 0;
    int standalone = run_pet_flag(in, "PET_STANDALONE", out);
    if (standalone)
        return standalone < 0 ? -1 : run_pet_add(out, "standalone", NULL, "PET_STANDALONE");
    const char *ep = run_pet_var(in, "PET_RDZV_ENDPOINT");
    if (ep) {
        *store = ep;
        return run_pet_add(out, "rdzv-endpoint", ep, "PET_RDZV_ENDPOINT");
    }
    const char *backend = run_pet_given(in, "rdzv-backend") ? in->cli_backend : run_pet_var(in, "PET_RDZV_BACKEND");
    const char *addr = run_pet_var(in, "PET_MASTER_ADDR"), *port = run_pet_var(in, "PET_MASTER_PORT");
    if ((backend && strcmp(backend, "static") != 0) || (!addr && !port))
        return 0;
    if (!addr)
        addr = "127.0.0.1";
    char *buf = run_pet_buf(out);
    unsigned long p;
    if (!buf || run_pet_uint(port ? port : RUN_PET_MASTER_PORT, 65535, &p) < 0) {
        snprintf(out->err, sizeof out->err, "bad value for $PET_MASTER_PORT: %.64s", port ? port : "");
        return -1;
    }
    /* An IPv6 address goes into brackets (torchrun asks for them, but takes it without). */
    int v6 = strchr(addr, ':') && addr[0] != '[';
    snprintf(buf, sizeof out->bufs[0], "%s%.255s%s:%lu", v6 ? "[" : "", addr, v6 ? "]" : "", p);
    *store = buf;
    return run_pet_add(out, "rdzv-endpoint", buf, "PET_MASTER_ADDR:PET_MASTER_PORT");
}

/* Map torchrun's PET_* variables to the options the command line did not give, as torchrun reads them
 * (a flag wins over its variable); returns 0, or -1 with out->err set.  Pure: no global state. */
int run_pet_map(const struct run_pet_in *in, struct run_pet_out *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < sizeof run_pet_plain / sizeof run_pet_plain[0]; i++) {
        const char *v = run_pet_var(in, run_pet_plain[i].var);
        if (v && !run_pet_given(in, run_pet_plain[i].opt) &&
            run_pet_add(out, run_pet_plain[i].opt, v, run_pet_plain[i].var) < 0)
            return -1;
    }
    for (size_t i = 0; i < sizeof run_pet_flags / sizeof run_pet_flags[0]; i++) {
        if (run_pet_given(in, run_pet_flags[i].opt))
            continue;
        int on = run_pet_flag(in, run_pet_flags[i].var, out);
        if (on < 0 || (on && run_pet_add(out, run_pet_flags[i].opt, NULL, run_pet_flags[i].var) < 0))
            return -1;
    }
    const char *store;
    if (run_pet_nproc(in, out) < 0 || run_pet_node_rank(in, out) < 0 || run_pet_conf(in, out) < 0 ||
        run_pet_store(in, out, &store) < 0)
        return -1;
    /* The job id names the namespace, unless the store's URL already names one. */
    const char *id = run_pet_var(in, "PET_RDZV_ID");
    if (id && !run_pet_given(in, "rdzv-id") && !(store && run_pet_names_ns(store)))
        return run_pet_add(out, "rdzv-id", id, "PET_RDZV_ID");
    return 0;
}

/* run_pet_get_fn over the process environment. */
const char *run_pet_getenv(void *arg, const char *name)
{
    (void)arg;
    return getenv(name);
}

/* The GPUs this process sees: CUDA_VISIBLE_DEVICES's entries when it is set, else /dev/nvidiaN. */
static unsigned run_pet_gpus(run_pet_get_fn *get, void *arg)
{
    const char *v = get(arg, "CUDA_VISIBLE_DEVICES");
    unsigned n = 0;
    if (v) {
        /* torch counts the entries before the first invalid one; "-1" or "" hides every GPU. */
        for (const char *p = v; *p && *p != '-'; n++) {
            const char *c = strchr(p, ',');
            if (!c)
                return n + 1;
            p = c + 1;
        }
        return n;
    }
    DIR *d = opendir("/dev");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "nvidia", 6) == 0 && e->d_name[6] &&
            strspn(e->d_name + 6, "0123456789") == strlen(e->d_name + 6))
            n++;
    if (d)
        closedir(d);
    return n;
}

/* run_pet_given_fn over the parsed command line. */
static int run_pet_given_cfg(void *arg, const char *opt)
{
    return run_opts_given(arg, opt);
}

/* After the command line was parsed: apply PET_* to cfg (global_url: muster --url, or NULL) and check the
 * options again; returns 0, or -1 after printing the problem. */
int run_pet_apply(struct run_cfg *cfg, const char *global_url, run_pet_get_fn *get, void *arg)
{
    /* The values point into it for the launcher's life, as the command line's point into argv. */
    static struct run_pet_out out;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    struct run_pet_in in = {.get = get, .get_arg = arg, .given = run_pet_given_cfg, .given_arg = cfg,
                            .cli_store = cfg->url ? cfg->url : cfg->rdzv_endpoint ? cfg->rdzv_endpoint : global_url,
                            .cli_backend = cfg->rdzv_backend,
                            .cpus = cpus > 0 ? (unsigned)cpus : 1};
    if (get(arg, "PET_NPROC_PER_NODE"))
        in.gpus = run_pet_gpus(get, arg);
    if (run_pet_map(&in, &out) < 0) {
        fprintf(stderr, RUN_TAG "%s\n", out.err);
        return -1;
    }
    for (int i = 0; i < out.n; i++)
        if (run_opts_set(cfg, out.opts[i].opt, out.opts[i].value) < 0) {
            fprintf(stderr, RUN_TAG "bad value for $%s: %s\n", out.opts[i].from,
                    out.opts[i].value ? out.opts[i].value : "");
            return -1;
        }
    if (out.n) {
        /* One line, so a pod's log says where its settings came from. */
        fprintf(stderr, RUN_TAG "from torchrun's environment:");
        for (int i = 0; i < out.n; i++)
            fprintf(stderr, " --%s%s%s ($%s)", out.opts[i].opt, out.opts[i].value ? " " : "",
                    out.opts[i].value ? out.opts[i].value : "", out.opts[i].from);
        fputc('\n', stderr);
    }
    return run_opts_check(cfg);
}
