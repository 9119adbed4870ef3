/*
 * What makes `muster run` a torchrun drop-in, apart from the relay: the
 * environment torchrun gives its workers, a PROG ending in .py run under
 * python3 (torchrun runs its script under its own interpreter), -m and
 * --no-python, and torch's error files, shown in the launcher's failure
 * message the way torchrun shows them and kept in the run's directory.
 */
#include "run.h"

#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The most of an error file that is read. */
#define RUN_TORCH_ERROR_MAX 65536

/* The error file of the worker started as rank of generation. */
void run_torch_error_path(char *buf, size_t n, const struct run_env *env, uint64_t generation, int rank)
{
    snprintf(buf, n, "%s/error-g%" PRIu64 "-r%d.json", env->error_dir, generation, rank);
}

/* Put into a worker's environment the variables torchrun sets (rank, world and store ones are put by
 * run_proc.c). */
void run_torch_worker_env(struct run_proc_env *e, const struct run_env *env, int local_rank)
{
    const muster_assignment *a = env->a;
    unsigned rank = a->rank_start + (unsigned)local_rank;
    run_proc_env_put_u(e, "ROLE_RANK", rank);
    run_proc_env_put_u(e, "ROLE_WORLD_SIZE", a->world_size);
    run_proc_env_put(e, "ROLE_NAME", "default", 1);
    /* The store is this node's relay, never a TCPStore a worker hosts itself. */
    run_proc_env_put(e, "TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    /* The same on every node: generations are numbered from 1 in a namespace. */
    run_proc_env_put_u(e, "TORCHELASTIC_RESTART_COUNT", a->generation ? a->generation - 1 : 0);
    run_proc_env_put_u(e, "TORCHELASTIC_MAX_RESTARTS", (unsigned)env->max_restarts);
    run_proc_env_put(e, "TORCHELASTIC_RUN_ID", env->run_id, 1);
    if (a->local_world_size > 1)
        run_proc_env_put(e, "OMP_NUM_THREADS", "1", 0);
    if (env->error_dir && *env->error_dir) {
        char path[512];
        run_torch_error_path(path, sizeof path, env, a->generation, (int)rank);
        run_proc_env_put(e, "TORCHELASTIC_ERROR_FILE", path, 1);
    }
}

/* --rdzv-id names the job's namespace: put it into a URL that names none (*url may then point at buf),
 * and name the run; returns 0 or an exit status. */
int run_torch_job(const char *id, const char **url, char *buf, size_t n, muster_url *u, char *run_id, size_t idn)
{
    if (id && u->ns[0] && strcmp(u->ns, id) != 0) {
        fprintf(stderr, RUN_TAG "--rdzv-id %s and the URL's namespace %s differ\n", id, u->ns);
        return CLI_USAGE;
    }
    if (id && !u->ns[0]) {
        char *tmp = malloc(n);
        const char *q = strchr(*url, '?');
        size_t head = q ? (size_t)(q - *url) : strlen(*url);
        /* A URL may end in the slash of an empty path. */
        size_t h = head > 0 && (*url)[head - 1] == '/' ? head - 1 : head;
        if (!tmp || (size_t)snprintf(tmp, n, "%.*s/%s%s", (int)h, *url, id, q ? q : "") >= n) {
            fprintf(stderr, RUN_TAG "store URL too long\n");
            free(tmp);
            return CLI_USAGE;
        }
        memcpy(buf, tmp, n);
        free(tmp);
        *url = buf;
        if (muster_url_parse(*url, u) != MUSTER_OK) {
            fprintf(stderr, RUN_TAG "bad job id for a namespace: %s\n", id);
            return CLI_USAGE;
        }
    }
    snprintf(run_id, idn, "%s", u->ns[0] ? u->ns : "default");
    return 0;
}

/* The worker's command line, as torchrun builds it: `python3 -m PROG ARGS...` with -m, PROG ARGS... as
 * they are with --no-python, else `python3 PROG ARGS...` for a PROG ending in .py (any other PROG, a
 * binary or a script, runs as it is); returns argv or a new vector (NULL: out of memory). */
char **run_torch_argv(char **argv, int module, int no_python)
{
    size_t len = strlen(argv[0]);
    int py = !no_python && (module || (len >= 3 && strcmp(argv[0] + len - 3, ".py") == 0));
    if (!py)
        return argv;
    size_t n = 0;
    while (argv[n])
        n++;
    char **v = calloc(n + 3, sizeof *v);
    if (!v)
        return NULL;
    size_t k = 0;
    v[k++] = "python3";
    if (module)
        v[k++] = "-m";
    memcpy(v + k, argv, n * sizeof *v);
    return v;
}

/* Whether prog names an executable file, found as execvp() finds it (through PATH without a slash). */
int run_torch_found(const char *prog)
{
    struct stat st;
    if (strchr(prog, '/'))
        return stat(prog, &st) == 0 && S_ISREG(st.st_mode) && access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin"; /* execvp's default */
    char full[4096];
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        size_t dl = end ? (size_t)(end - p) : strlen(p);
        /* An empty entry is the current directory. */
        if ((size_t)snprintf(full, sizeof full, "%.*s%s%s", (int)dl, p, dl ? "/" : "", prog) < sizeof full &&
            stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0)
            return 1;
        if (!end)
            return 0;
        p = end;
    }
}

/* The JSON string value of the first "key": "..." in text, unescaped into out; 0 or -1. */
static int run_torch_json_str(const char *text, const char *key, char *out, size_t n)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = strstr(text, pat);
    if (!p || n == 0)
        return -1;
    p += strlen(pat);
    size_t k = 0;
    for (; *p && *p != '"' && k + 1 < n; p++) {
        char ch = *p;
        if (ch == '\\' && p[1]) {
            p++;
            ch = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'u' ? '?' : *p;
            if (*p == 'u')
                p += strspn(p + 1, "0123456789abcdefABCDEF") >= 4 ? 4 : 0;
        }
        out[k++] = ch;
    }
    out[k] = '\0';
    return 0;
}

/* The name of a signal that ends processes ("SIGKILL"), or NULL for one without a name here. */
const char *run_torch_signame(int sig)
{
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
        {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
        {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
        {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
        {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    return NULL;
}

/* A worker's exit code as torchrun writes it: "1", or for a signal "-9 (SIGKILL)". */
void run_torch_exitcode(char *buf, size_t n, int status, int sig)
{
    const char *name = sig ? run_torch_signame(sig) : NULL;
    if (!sig)
        snprintf(buf, n, "%d", status);
    else
        snprintf(buf, n, "-%d (%s)", sig, name ? name : "signal");
}

/* Show one failed worker: its exit code, and the message and traceback of its error file.  A signal
 * is no exception, so torch's @record cannot write a file for it: no hint to use it then. */
static void run_torch_report_one(const struct run_worker *w, const char *path)
{
    char code[48];
    run_torch_exitcode(code, sizeof code, w->status, w->sig);
    fprintf(stderr, RUN_TAG "rank %d (local_rank %d) failed: exitcode %s\n", w->rank, w->local_rank, code);
    FILE *f = fopen(path, "r");
    char *text = f ? calloc(1, RUN_TORCH_ERROR_MAX + 1) : NULL;
    size_t got = text ? fread(text, 1, RUN_TORCH_ERROR_MAX, f) : 0;
    if (f)
        fclose(f);
    if (!got && w->sig) {
        const char *name = run_torch_signame(w->sig);
        fprintf(stderr, RUN_TAG "  error_file: <N/A>\n" RUN_TAG "  traceback: Signal %d (%s) received\n", w->sig,
                name ? name : "unnamed");
    } else if (!got) {
        fprintf(stderr, RUN_TAG "  error_file: <N/A> (decorate main with "
                        "torch.distributed.elastic.multiprocessing.errors.record to get one)\n");
    }
    if (!got) {
        free(text);
        return;
    }
    char *msg = malloc(RUN_TORCH_ERROR_MAX);
    fprintf(stderr, RUN_TAG "  error_file: %s\n", path);
    if (msg && run_torch_json_str(text, "message", msg, RUN_TORCH_ERROR_MAX) == 0)
        fprintf(stderr, RUN_TAG "  message: %s\n", msg);
    if (msg && run_torch_json_str(text, "py_callstack", msg, RUN_TORCH_ERROR_MAX) == 0)
        fprintf(stderr, RUN_TAG "  traceback:\n%s\n", msg);
    else
        fprintf(stderr, "%s\n", text);
    free(msg);
    free(text);
}

/* After a failure: show every failed worker of the generation with its error file, as torchrun does. */
void run_torch_report(const struct run_workers *ws, const struct run_env *env)
{
    for (int i = 0; i < ws->n; i++) {
        const struct run_worker *w = &ws->w[i];
        /* Workers the launcher stopped after the first failure are not failures of their own. */
        int stopped = w->sig == SIGTERM || w->sig == SIGKILL;
        if (w->status == 0 || (stopped && w->status != ws->first_failure))
            continue;
        char path[512];
        /* A worker kept in place writes the file its environment named when it started. */
        run_torch_error_path(path, sizeof path, env, w->file_gen, w->file_rank);
        run_torch_report_one(w, path);
    }
}

/* Make the run's directory, where the workers' error files go: base/muster-run-ID-XXXXXX, base being
 * --log-dir (made when missing) or $TMPDIR; 0 or -1. */
int run_torch_error_dir(char *dir, size_t n, const char *base, const char *run_id)
{
    const char *tmp = getenv("TMPDIR");
    dir[0] = '\0';
    if (base && *base) {
        if (mkdir(base, 0755) < 0 && errno != EEXIST)
            return -1;
    } else {
        base = tmp && *tmp ? tmp : "/tmp";
    }
    char id[64];
    size_t k = 0;
    /* A namespace may hold characters a file name should not: they become '_'. */
    for (; run_id[k] && k + 1 < sizeof id; k++)
        id[k] = strchr("/\\:*?\"<>| \t\n", run_id[k]) ? '_' : run_id[k];
    id[k] = '\0';
    if ((size_t)snprintf(dir, n, "%s/muster-run-%s-XXXXXX", base, id) >= n) {
        dir[0] = '\0';
        errno = ENAMETOOLONG;
        return -1;
    }
    if (!mkdtemp(dir)) {
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

/* At the end of the run: a directory holding error files is kept (torchrun keeps them) and named; an
 * empty one is removed.  Safe on an empty name. */
static void run_torch_unmark(const char *dir);

void run_torch_error_keep(const char *dir)
{
    if (!dir || !*dir)
        return;
    run_torch_unmark(dir);
    if (rmdir(dir) < 0 && (errno == ENOTEMPTY || errno == EEXIST))
        fprintf(stderr, RUN_TAG "error files kept in %s\n", dir);
}

/* Remove the workers' world marks (run_proc_mark: ".world-<local rank>"), so only error files can keep
 * the directory. */
static void run_torch_unmark(const char *dir)
{
    char path[320];
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, ".world-", 7) == 0 && snprintf(path, sizeof path, "%s/%s", dir, e->d_name) <
                                                         (int)sizeof path)
            unlink(path);
    if (d)
        closedir(d);
}
