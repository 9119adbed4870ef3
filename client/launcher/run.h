/* Internal interface of the `muster run` launcher: the verb, its options, its worker set and its private store. */
#ifndef MUSTER_LAUNCHER_RUN_H
#define MUSTER_LAUNCHER_RUN_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <muster/rdzv.h>

#include "run_policy.h"
#include "run_relay.h"

/* Launcher messages all start with this, on stderr. */
#define RUN_TAG "muster run: "

/* The parsed command line (run_opts.c). */
struct run_cfg {
    const char *url;
    int standalone;
    uint32_t nnodes[2];        /* min, max */
    uint32_t nproc;
    uint32_t max_restarts;
    const char *node_id;
    uint32_t rdzv_timeout_ms;
    uint32_t connect_timeout_ms; /* reaching the store: a down store or a wrong host fails within it */
    uint32_t last_call_ms;
    uint32_t grace_ms;
    int prefix;
    int help;
    const char *rdzv_endpoint; /* torchrun's HOST[:PORT]: the store's address */
    const char *rdzv_id;       /* torchrun's job id: the namespace */
    const char *rdzv_backend;  /* accepted for torchrun's command lines; the store is musterd */
    uint32_t relay_max_conns;
    uint32_t relay_max_key;
    uint32_t relay_max_keys;
    uint32_t relay_max_request;
    uint32_t relay_max_output;
    uint32_t relay_max_watches;
    uint32_t relay_request_timeout_ms;
    int module;                /* -m: PROG is a module run as `python3 -m PROG` */
    int no_python;             /* PROG runs as it is, even a .py file */
    const char *log_dir;       /* where the run's directory (error files) is made */
    const char *recovery;      /* --recovery: "restart" (NULL) or "in-place" */
    int standby;               /* --standby: join as a spare, start workers only once admitted */
    char **argv;               /* PROG ARGS... */
    uint64_t given;            /* bit i: row i of the options table was on the command line */
};

/* Fill cfg with the defaults of every option. */
void run_opts_defaults(struct run_cfg *cfg);
/* Parse the command line up to PROG; returns 0, or -1 after printing the problem. */
int run_opts_parse(int argc, char **argv, struct run_cfg *cfg);
/* Print the usage text built from the options table. */
void run_opts_usage(FILE *f);
/* Check the options against each other; returns 0, or -1 after printing the problem. */
int run_opts_check(const struct run_cfg *cfg);
/* Whether the command line gave the option named (as the table spells it). */
int run_opts_given(const struct run_cfg *cfg, const char *name);
/* Set an option from a value that did not come from the command line (value NULL for a flag); returns 0
 * or -1 when the option is unknown or the value bad. */
int run_opts_set(struct run_cfg *cfg, const char *name, const char *value);

/* One local worker process and the output pipes of its streams that go through the launcher. */
struct run_worker {
    pid_t pid;           /* 0 once reaped (or never started) */
    int local_rank;
    int rank;            /* global rank, for the output prefix */
    uint64_t file_gen;   /* the generation and rank its TORCHELASTIC_ERROR_FILE names: those it was started */
    int file_rank;       /* with, kept by a worker that stays in place across generations */
    int prefix;          /* its lines are prefixed with "[rank]: " */
    int status;          /* exit code in shell convention (128+signal) once reaped */
    int sig;             /* the signal that ended it, 0 when it exited */
    int fd[2];           /* read ends for stdout, stderr; -1 when closed or unused */
    char *buf[2];        /* partial output line per stream */
    size_t len[2];
};

/* The workers of one generation on this node. */
struct run_workers {
    struct run_worker *w;
    int n;
    int running;         /* started and not yet reaped */
    int prefix;          /* --prefix-output */
    int through[2];      /* stdout, stderr go through the launcher in whole lines (run_proc_through) */
    int first_failure;   /* shell-convention status of the first worker that failed, 0 if none */
    int first_signal;    /* the signal that ended that worker, 0 when it exited */
};

/* What a worker's environment says about its place in the world. */
struct run_env {
    const muster_assignment *a;
    const char *url;           /* MUSTER_URL passed on to workers */
    const char *master_addr;
    unsigned master_port;
    int restart_count;
    int max_restarts;
    const char *run_id;        /* TORCHELASTIC_RUN_ID: the job's namespace */
    const char *error_dir;     /* where TORCHELASTIC_ERROR_FILE points, or NULL */
    int in_place;              /* --recovery in-place: workers get MUSTER_WORLD_MARK in error_dir */
    const int *close_fds;      /* launcher fds the workers must not inherit */
    int n_close_fds;
};

/* A worker's environment, built before the fork: a forked child of the threaded launcher may not
 * allocate or call setenv (run_proc.c says why). */
struct run_proc_env {
    char **v;                  /* "NAME=VALUE", NULL-terminated, each owned */
    size_t n, cap;
    int failed;                /* an allocation failed: the environment is incomplete */
};

/* Put NAME=value into e, replacing NAME's entry when overwrite, else keeping it. */
void run_proc_env_put(struct run_proc_env *e, const char *name, const char *value, int overwrite);
/* Put NAME=v, v written in decimal. */
void run_proc_env_put_u(struct run_proc_env *e, const char *name, unsigned long long v);
/* fork() whose child starts with default signal handlers and an empty mask (see run_proc.c). */
pid_t run_proc_fork(void);
/* Whether a worker stream goes through the launcher in whole lines, given --prefix-output and whether
 * the launcher's own stream is a terminal. */
int run_proc_through(int prefix, int tty);
/* Start n workers of the assignment running argv; returns 0, or -1 when none could start. */
int run_proc_start(struct run_workers *ws, int n, int prefix, const struct run_env *env, char *const *argv);
/* In a new generation: start again the workers that failed (or never started), with env's ranks, and
 * give the running ones their new global rank (for the output prefix); returns how many were started. */
int run_proc_replace(struct run_workers *ws, const struct run_env *env, char *const *argv);
/* Reap every worker that has exited, calling on_exit(arg, w) for each (on_exit may be NULL); returns how
 * many were reaped now. */
int run_proc_reap(struct run_workers *ws, void (*on_exit)(void *arg, const struct run_worker *w), void *arg);
/* Send sig to the process group of every running worker. */
void run_proc_signal(struct run_workers *ws, int sig);
/* Add the open output pipes to pfd (room for 2*n entries); returns the count added. */
int run_proc_pollfds(const struct run_workers *ws, struct pollfd *pfd);
/* Pass on whatever output is ready on the polled pipes, in whole lines (prefixed by rank when asked). */
void run_proc_output(struct run_workers *ws, const struct pollfd *pfd, int npfd);
/* Flush remaining output, close the pipes and free the worker set. */
void run_proc_free(struct run_workers *ws);

/* Start the guard that kills the workers' process groups once the launcher is gone; 0 or -1. */
int run_guard_start(void);
/* Tell the guard about a worker's process group: started (op '+') or reaped ('-'). */
void run_guard_note(char op, pid_t pgid);
/* Put into a worker's environment the variables torchrun sets (rank, world and store ones are put by
 * run_proc.c). */
void run_torch_worker_env(struct run_proc_env *e, const struct run_env *env, int local_rank);
/* The error file of a worker of this generation. */
void run_torch_error_path(char *buf, size_t n, const struct run_env *env, uint64_t generation, int rank);
/* --rdzv-id names the job's namespace: put it into a URL that names none (*url may then point at buf),
 * and name the run; returns 0 or an exit status. */
int run_torch_job(const char *id, const char **url, char *buf, size_t n, muster_url *u, char *run_id, size_t idn);
/* The worker's command line: `python3 -m PROG ARGS...` with module, PROG ARGS... with no_python, else
 * `python3 PROG ARGS...` for a PROG ending in .py; returns argv or a new vector (NULL: out of memory). */
char **run_torch_argv(char **argv, int module, int no_python);
/* Whether prog names an executable file, found as execvp() finds it. */
int run_torch_found(const char *prog);
/* The name of a signal that ends processes ("SIGKILL"), or NULL. */
const char *run_torch_signame(int sig);
/* A worker's exit code as torchrun writes it: "1", or for a signal "-9 (SIGKILL)". */
void run_torch_exitcode(char *buf, size_t n, int status, int sig);
/* After a failure: show every failed worker of the generation with its error file, as torchrun does. */
void run_torch_report(const struct run_workers *ws, const struct run_env *env);
/* Make the run's directory, where the workers' error files go, in base (--log-dir; NULL: $TMPDIR); 0 or -1. */
int run_torch_error_dir(char *dir, size_t n, const char *base, const char *run_id);
/* Write local rank's world mark path in dir into buf (the file muster_world_open creates); snprintf's. */
int run_proc_mark(char *buf, size_t n, const char *dir, int local_rank);
/* Whether every running worker of ws has made its world mark in dir (followers of the world). */
int run_proc_all_marked(const struct run_workers *ws, const char *dir);
/* At the end of the run: keep a directory holding error files and name it; remove an empty one. */
void run_torch_error_keep(const char *dir);

/* A private musterd for --standalone. */
struct run_server {
    pid_t pid;
    unsigned port;
    char dir[64];              /* temporary directory holding the port file and the log */
    char port_file[96];
    char log_file[96];
};

/* Start musterd on 127.0.0.1 port 0 and learn its port; returns 0 or -1 (message printed). */
int run_standalone_start(struct run_server *s, uint32_t timeout_ms);
/* Whether the private musterd has exited on its own (reaps it if so). */
int run_standalone_died(struct run_server *s);
/* Stop the private musterd and remove its directory; safe to call twice. */
void run_standalone_stop(struct run_server *s);

/* Launcher state for one run: the command line, the store handle, this generation's workers and relay, and
 * the policy that decides (run_policy.h); the effects layer (run_effects.c) acts on it. */
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
    struct run_policy pol;
    uint64_t done_watch;       /* the watch on this generation's done key, 0 when none */
    int conn_lost;             /* the handle is unusable: reconnect before joining */
    int arm_failed;            /* the last arming's error (MUSTER_OK: armed or not tried), said once */
    int server_died;           /* the private musterd exited: no reconnect */
    struct run_relay relay;    /* this generation's TCPStore relay (run_relay.c) */
    char run_id[256];          /* TORCHELASTIC_RUN_ID */
    char error_dir[256];       /* the run's directory: the workers' TORCHELASTIC_ERROR_FILE files */
    char **argv0;              /* PROG ARGS... as given (cfg.argv may be a vector of its own) */
    const char *master_addr;   /* the workers' MASTER_ADDR:MASTER_PORT, kept for replaced workers */
    unsigned master_port;
};

/* Route SIGCHLD, SIGINT and SIGTERM to the self-pipe; returns its read end or -1. */
int run_effects_signals_init(void);
/* Let the signal handler stop the private musterd s (NULL: there is none any more). */
void run_effects_server(const struct run_server *s);
/* Join, run and re-form generations as the policy decides until it ends the run; returns the exit status. */
int run_effects_drive(struct run_ctx *c, int rfd);

#endif
