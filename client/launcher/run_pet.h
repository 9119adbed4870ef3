/* torchrun's PET_* environment as `muster run`'s options (run_pet.c). */
#ifndef MUSTER_LAUNCHER_RUN_PET_H
#define MUSTER_LAUNCHER_RUN_PET_H

struct run_cfg;

/* Reads one environment variable: NULL when it is not set. */
typedef const char *run_pet_get_fn(void *arg, const char *name);
/* Whether the command line gave the option named (the table's spelling, e.g. "nproc-per-node"). */
typedef int run_pet_given_fn(void *arg, const char *opt);

/* What the mapping reads: the environment, the command line, and this node's processors. */
struct run_pet_in {
    run_pet_get_fn *get;
    void *get_arg;
    run_pet_given_fn *given;
    void *given_arg;
    const char *cli_store;   /* the store named on the command line (--url, --rdzv-endpoint, muster --url) */
    const char *cli_backend; /* --rdzv-backend's value when given */
    unsigned gpus;           /* for PET_NPROC_PER_NODE=gpu|auto */
    unsigned cpus;           /* for PET_NPROC_PER_NODE=cpu|auto */
};

/* One option taken from the environment: its name in the options table, its value (NULL for a flag that
 * is set), and the variables it came from (for messages). */
struct run_pet_opt {
    const char *opt;
    const char *value;
    const char *from;
};

#define RUN_PET_OPTS_MAX 16

/* The options the environment stands for; values that are not the variables' own text live in bufs. */
struct run_pet_out {
    struct run_pet_opt opts[RUN_PET_OPTS_MAX];
    int n;
    char bufs[6][320];
    int nbufs;
    char err[200];            /* why the mapping failed */
};

/* Map torchrun's PET_* variables to the options the command line did not give, as torchrun reads them
 * (a flag wins over its variable); returns 0, or -1 with out->err set.  Pure: no global state. */
int run_pet_map(const struct run_pet_in *in, struct run_pet_out *out);
/* run_pet_get_fn over the process environment. */
const char *run_pet_getenv(void *arg, const char *name);
/* After the command line was parsed: apply PET_* to cfg (global_url: muster --url, or NULL) and check the
 * options again; returns 0, or -1 after printing the problem. */
int run_pet_apply(struct run_cfg *cfg, const char *global_url, run_pet_get_fn *get, void *arg);

#endif
