/*
 * What makes `muster run` a torchrun drop-in, apart from the relay: the
 * environment torchrun gives its workers, a PROG ending in .py run under
 * python3 (torchrun runs its script under its own interpreter), and
 * torch's error files, shown in the launcher's failure message the way
 * torchrun shows them.
 */
#include "run.h"

#include <dirent.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The most of an error file that is read. */
#define RUN_TORCH_ERROR_MAX 65536

/* Put one environment variable formatted from an unsigned number. */
static void run_torch_setenv_u(const char *name, unsigned long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", v);
    setenv(name, buf, 1);
}

/* The error file of a worker of this generation. */
void run_torch_error_path(char *buf, size_t n, const struct run_env *env, int rank)
{
    snprintf(buf, n, "%s/error-g%" PRIu64 "-r%d.json", env->error_dir, env->a->generation, rank);
}

/* In the forked child: the variables torchrun sets (rank, world and store ones are set by run_proc.c). */
void run_torch_child_env(const struct run_env *env, int local_rank)
{
    const muster_assignment *a = env->a;
    unsigned rank = a->rank_start + (unsigned)local_rank;
    run_torch_setenv_u("ROLE_RANK", rank);
    run_torch_setenv_u("ROLE_WORLD_SIZE", a->world_size);
    setenv("ROLE_NAME", "default", 1);
    /* The store is this node's relay, never a TCPStore a worker hosts itself. */
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    /* The same on every node: generations are numbered from 1 in a namespace. */
    run_torch_setenv_u("TORCHELASTIC_RESTART_COUNT", a->generation ? a->generation - 1 : 0);
    run_torch_setenv_u("TORCHELASTIC_MAX_RESTARTS", (unsigned)env->max_restarts);
    setenv("TORCHELASTIC_RUN_ID", env->run_id, 1);
    if (a->local_world_size > 1)
        setenv("OMP_NUM_THREADS", "1", 0);
    if (env->error_dir && *env->error_dir) {
        char path[512];
        run_torch_error_path(path, sizeof path, env, (int)rank);
        setenv("TORCHELASTIC_ERROR_FILE", path, 1);
    }
}

/* --rdzv-id names the job's namespace: put it into a URL that names none (*url may then point at buf),
 * and name the run; returns 0 or an exit status. */
int run_torch_job(const char *id, const char **url, char *buf, size_t n, muster_url *u, char *run_id, size_t idn)
{
    if (id && u->ns[0] && strcmp(u->ns, id) != 0) {
        fprintf(stderr, RUN_TAG "--rdzv-id %s and the URL's namespace %s differ\n", id, u->ns);
        return 2;
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
            return 2;
        }
        memcpy(buf, tmp, n);
        free(tmp);
        *url = buf;
        if (muster_url_parse(*url, u) != MUSTER_OK) {
            fprintf(stderr, RUN_TAG "bad job id for a namespace: %s\n", id);
            return 2;
        }
    }
    snprintf(run_id, idn, "%s", u->ns[0] ? u->ns : "default");
    return 0;
}

/* A PROG ending in .py runs as `python3 PROG ARGS...`; returns argv or a new vector (NULL: out of memory). */
char **run_torch_argv(char **argv)
{
    size_t len = strlen(argv[0]);
    if (len < 3 || strcmp(argv[0] + len - 3, ".py") != 0)
        return argv;
    size_t n = 0;
    while (argv[n])
        n++;
    char **v = calloc(n + 2, sizeof *v);
    if (!v)
        return NULL;
    v[0] = "python3";
    memcpy(v + 1, argv, n * sizeof *v);
    return v;
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

/* Show one failed worker: its exit status, and the message and traceback of its error file. */
static void run_torch_report_one(const struct run_worker *w, const char *path)
{
    fprintf(stderr, RUN_TAG "rank %d (local_rank %d) failed: exitcode %d\n", w->rank, w->local_rank, w->status);
    FILE *f = fopen(path, "r");
    char *text = f ? calloc(1, RUN_TORCH_ERROR_MAX + 1) : NULL;
    size_t got = text ? fread(text, 1, RUN_TORCH_ERROR_MAX, f) : 0;
    if (f)
        fclose(f);
    if (!got) {
        fprintf(stderr, RUN_TAG "  error_file: <N/A> (decorate main with "
                        "torch.distributed.elastic.multiprocessing.errors.record to get one)\n");
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
        int stopped = w->status == 128 + SIGTERM || w->status == 128 + SIGKILL;
        if (w->status == 0 || (stopped && w->status != ws->first_failure))
            continue;
        char path[512];
        run_torch_error_path(path, sizeof path, env, w->rank);
        run_torch_report_one(w, path);
    }
}

/* Make the directory of the workers' error files; 0 or -1. */
int run_torch_error_dir(char *dir, size_t n)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, n, "%s/muster-run-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

/* Remove the error files and their directory; safe on an empty name. */
void run_torch_error_cleanup(const char *dir)
{
    if (!dir || !*dir)
        return;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "error-", 6) != 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}
