/*
 * Worker processes of `muster run`: start them with the environment of their
 * rank, reap them, signal their process groups, and pass their output on in
 * whole lines, with a "[rank]: " prefix when asked.
 *
 * Each worker runs in a process group of its own, so a stop reaches whatever
 * the worker started (a shell script's children included), and a terminal's
 * Ctrl-C reaches the launcher, which decides what the workers get.  Workers
 * also ask the kernel for SIGKILL when the launcher dies, so a killed
 * launcher never leaves a half world running.
 *
 * The launcher has threads (libmuster's, the relay's), so a worker's child
 * makes only async-signal-safe calls between fork and exec: its environment,
 * the places PATH offers for the program and the pipe that reports a failed
 * exec are all made before the fork.
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* A worker output line longer than this is passed on in pieces. */
#define RUN_LINE_MAX 16384
/* Bytes read from one pipe per wake-up, so one chatty worker cannot starve the loop. */
#define RUN_READ_BUDGET 65536

/* Write all of buf to fd, giving up silently when the reader has gone. */
static void run_proc_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t k = write(fd, buf, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        buf += k;
        len -= (size_t)k;
    }
}

/* Whether a worker's stream goes through the launcher (a pipe it reads) rather than straight to the
 * launcher's own stream: always with --prefix-output, else unless that stream is a terminal.  Two
 * workers writing to one stream tear each other's lines wherever a line takes more than one write
 * (an unbuffered worker, PYTHONUNBUFFERED=1, writes a print's words and its newline apart; a
 * block-buffered one writes at buffer boundaries); the launcher hands lines on whole.  A terminal is
 * left to the workers: Python line-buffers a terminal (one write per line) but block-buffers a pipe,
 * which would hold their output back, and progress bars and colours need one; --prefix-output
 * gives whole lines there too. */
int run_proc_through(int prefix, int tty)
{
    return prefix || !tty;
}

/* Pass one line of worker output on to the launcher's stdout or stderr, with the rank prefix when
 * asked; nl: end it with a newline. */
static void run_proc_emit(const struct run_worker *w, int stream, const char *line, size_t len, int nl)
{
    char head[32];
    int hl = w->prefix ? snprintf(head, sizeof head, "[%d]: ", w->rank) : 0;
    char *out = malloc((size_t)hl + len + 1);
    if (!out)
        return;
    memcpy(out, head, (size_t)hl);
    memcpy(out + hl, line, len);
    out[(size_t)hl + len] = '\n';
    /* One write per line keeps lines of different workers from interleaving. */
    run_proc_write_all(stream == 0 ? STDOUT_FILENO : STDERR_FILENO, out, (size_t)hl + len + (nl ? 1 : 0));
    free(out);
}

/* Emit every complete line held for a stream; with force, the partial tail too.  A tail (a line
 * longer than RUN_LINE_MAX, or the last one without a newline) gets a newline only when prefixed,
 * so the next prefix starts a line; unprefixed output is handed on byte for byte. */
static void run_proc_flush_lines(struct run_worker *w, int s, int force)
{
    char *b = w->buf[s];
    size_t start = 0;
    for (size_t i = 0; i < w->len[s]; i++) {
        if (b[i] == '\n') {
            run_proc_emit(w, s, b + start, i - start, 1);
            start = i + 1;
        }
    }
    size_t rest = w->len[s] - start;
    if (rest > 0 && (force || rest == RUN_LINE_MAX)) {
        run_proc_emit(w, s, b + start, rest, w->prefix);
        start = w->len[s];
        rest = 0;
    }
    memmove(b, b + start, rest);
    w->len[s] = rest;
}

/* Close one output stream of a worker after passing on what it still holds. */
static void run_proc_close_stream(struct run_worker *w, int s)
{
    if (w->fd[s] < 0)
        return;
    run_proc_flush_lines(w, s, 1);
    close(w->fd[s]);
    w->fd[s] = -1;
}

/* Read what one pipe has now, within the per-wake-up budget; closes it at end of file. */
static void run_proc_drain(struct run_worker *w, int s)
{
    size_t budget = RUN_READ_BUDGET;
    while (w->fd[s] >= 0 && budget > 0) {
        size_t room = RUN_LINE_MAX - w->len[s];
        ssize_t k = read(w->fd[s], w->buf[s] + w->len[s], room);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (k <= 0) {
            run_proc_close_stream(w, s);
            return;
        }
        w->len[s] += (size_t)k;
        budget -= (size_t)k < budget ? (size_t)k : budget;
        run_proc_flush_lines(w, s, 0);
    }
}

/* Everything a worker's child needs, built before the fork (the child may not allocate). */
struct run_proc_plan {
    struct run_proc_env env; /* the worker's environment, for execve */
    char **paths;            /* where to try the program, in PATH order (one place when it holds a slash) */
    size_t npaths;
    char **shv;              /* /bin/sh FILE ARGS...: execvp()'s fallback for a file without #! */
    char *const *argv;
    int report;              /* the write end of the pipe that carries a failed exec's errno */
};

/* Append an owned "NAME=VALUE" string to the environment being built (freed on failure). */
static void run_proc_env_add(struct run_proc_env *e, char *s)
{
    if (s && e->n + 1 >= e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        char **v = realloc(e->v, cap * sizeof *v);
        if (!v) {
            free(s);
            s = NULL;
        } else {
            e->v = v;
            e->cap = cap;
        }
    }
    if (!s) {
        e->failed = 1;
        return;
    }
    e->v[e->n++] = s;
    e->v[e->n] = NULL;
}

/* Put NAME=value into the environment being built, replacing NAME's entry when overwrite, else
 * keeping it; an allocation that fails marks the environment failed. */
void run_proc_env_put(struct run_proc_env *e, const char *name, const char *value, int overwrite)
{
    size_t nl = strlen(name), i = 0;
    while (i < e->n && !(strncmp(e->v[i], name, nl) == 0 && e->v[i][nl] == '='))
        i++;
    if (i < e->n && !overwrite)
        return;
    char *s = malloc(nl + strlen(value) + 2);
    if (s)
        sprintf(s, "%s=%s", name, value);
    if (i == e->n) {
        run_proc_env_add(e, s);
    } else if (!s) {
        e->failed = 1;
    } else {
        free(e->v[i]);
        e->v[i] = s;
    }
}

/* Put NAME=v, v written in decimal. */
void run_proc_env_put_u(struct run_proc_env *e, const char *name, unsigned long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", v);
    run_proc_env_put(e, name, buf, 1);
}

/* Free an environment built by run_proc_env_put. */
static void run_proc_env_free(struct run_proc_env *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    memset(e, 0, sizeof *e);
}

/* Build a worker's environment: the launcher's own, with its place in the world put in. */
static void run_proc_env_build(struct run_proc_env *e, const struct run_env *env, int local_rank)
{
    const muster_assignment *a = env->a;
    for (char **p = environ; *p; p++)
        run_proc_env_add(e, strdup(*p));
    run_proc_env_put_u(e, "RANK", (unsigned long long)a->rank_start + (unsigned)local_rank);
    run_proc_env_put_u(e, "LOCAL_RANK", (unsigned)local_rank);
    run_proc_env_put_u(e, "WORLD_SIZE", a->world_size);
    run_proc_env_put_u(e, "LOCAL_WORLD_SIZE", a->local_world_size);
    run_proc_env_put_u(e, "GROUP_RANK", a->node_rank);
    run_proc_env_put_u(e, "NODE_RANK", a->node_rank);
    run_proc_env_put_u(e, "GROUP_WORLD_SIZE", a->num_nodes);
    run_proc_env_put_u(e, "MUSTER_GENERATION", a->generation);
    run_proc_env_put_u(e, "MUSTER_RESTART_COUNT", (unsigned)env->restart_count);
    run_proc_env_put_u(e, "MUSTER_MAX_RESTARTS", (unsigned)env->max_restarts);
    run_proc_env_put(e, "MUSTER_NODE_ID", a->node_id, 1);
    run_proc_env_put(e, "MUSTER_CREDENTIAL", a->credential, 1);
    run_proc_env_put(e, "MUSTER_URL", env->url, 1);
    run_proc_env_put(e, "MASTER_ADDR", env->master_addr, 1);
    run_proc_env_put_u(e, "MASTER_PORT", env->master_port);
    if (env->in_place && env->error_dir && *env->error_dir) {
        char mark[320];
        run_proc_mark(mark, sizeof mark, env->error_dir, local_rank);
        run_proc_env_put(e, "MUSTER_WORLD_MARK", mark, 1);
    }
    run_torch_worker_env(e, env, local_rank);
}

/* Write local rank's world mark path in dir. */
int run_proc_mark(char *buf, size_t n, const char *dir, int local_rank)
{
    return snprintf(buf, n, "%s/.world-%d", dir, local_rank);
}

/* Whether every running worker has made its world mark. */
int run_proc_all_marked(const struct run_workers *ws, const char *dir)
{
    char mark[320];
    for (int i = 0; i < ws->n; i++) {
        if (ws->w[i].pid <= 0)
            continue;
        run_proc_mark(mark, sizeof mark, dir, ws->w[i].local_rank);
        if (access(mark, F_OK) != 0)
            return 0;
    }
    return 1;
}

/* Fill the places to try the program, as execvp() searches them: argv[0] itself when it holds a
 * slash, else each entry of PATH (default /bin:/usr/bin; an empty entry is the current directory);
 * 0 or -1 (out of memory). */
static int run_proc_paths(struct run_proc_plan *p, const char *prog)
{
    const char *path = strchr(prog, '/') ? NULL : getenv("PATH");
    if (!strchr(prog, '/') && !path)
        path = "/bin:/usr/bin";
    size_t n = 1;
    for (const char *c = path; c && *c; c++)
        n += *c == ':';
    if (!(p->paths = calloc(n, sizeof *p->paths)))
        return -1;
    if (!path)
        return (p->paths[p->npaths++] = strdup(prog)) ? 0 : -1;
    for (const char *c = path;; c++) {
        const char *end = strchr(c, ':');
        size_t dl = end ? (size_t)(end - c) : strlen(c);
        char *full = malloc(dl + strlen(prog) + 2);
        if (!full)
            return -1;
        sprintf(full, "%.*s%s%s", (int)dl, c, dl ? "/" : "", prog);
        p->paths[p->npaths++] = full;
        if (!end)
            return 0;
        c = end;
    }
}

/* The command line of execvp()'s fallback for a file the kernel will not run (no #! line): /bin/sh
 * FILE ARGS..., FILE filled in by the child; 0 or -1 (out of memory). */
static int run_proc_shell_argv(struct run_proc_plan *p, char *const *argv)
{
    size_t n = 0;
    while (argv[n])
        n++;
    if (!(p->shv = calloc(n + 2, sizeof *p->shv)))
        return -1;
    p->shv[0] = "/bin/sh";
    for (size_t i = 1; i < n; i++)
        p->shv[i + 1] = argv[i];
    return 0;
}

/* Free what run_proc_plan_build made. */
static void run_proc_plan_free(struct run_proc_plan *p)
{
    run_proc_env_free(&p->env);
    for (size_t i = 0; i < p->npaths; i++)
        free(p->paths[i]);
    free(p->paths);
    free(p->shv);
    memset(p, 0, sizeof *p);
}

/* Build everything a worker's child needs before the fork; 0 or -1 (out of memory). */
static int run_proc_plan_build(struct run_proc_plan *p, const struct run_env *env, int local_rank, char *const *argv)
{
    memset(p, 0, sizeof *p);
    p->argv = argv;
    run_proc_env_build(&p->env, env, local_rank);
    if (p->env.failed || !p->env.v || run_proc_paths(p, argv[0]) < 0 || run_proc_shell_argv(p, argv) < 0) {
        run_proc_plan_free(p);
        return -1;
    }
    return 0;
}

/* Fork with the launcher's signal handlers out of the child's way: returns as fork() does.
 * Signals are blocked across the fork, and the child resets the handlers before unblocking, so a
 * signal that reaches a child before its exec takes the default action instead of running the
 * launcher's handler (which would write into the launcher's self-pipe).  The child's part uses only
 * async-signal-safe calls. */
pid_t run_proc_fork(void)
{
    static const int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGPIPE};
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&block, sigs[i]);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t pid = fork();
    if (pid == 0) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaction(sigs[i], &dfl, NULL);
        sigemptyset(&old);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return pid;
}

/* In the forked child: run the program from each of its places in turn, as execvp() would (a place
 * that is missing, or not executable, passes to the next; a file without #! runs under /bin/sh);
 * returns only when none ran, with errno saying why.  Async-signal-safe. */
static void run_proc_exec(struct run_proc_plan *p)
{
    int why = ENOENT;
    for (size_t i = 0; i < p->npaths; i++) {
        execve(p->paths[i], p->argv, p->env.v);
        if (errno == ENOEXEC) {
            p->shv[1] = p->paths[i];
            execve(p->shv[0], p->shv, p->env.v);
            why = errno;
            break;
        }
        if (errno == EACCES) {
            why = EACCES;
        } else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV && errno != ETIMEDOUT) {
            why = errno;
            break;
        }
    }
    errno = why;
}

/* In the forked child: detach, wire up output and exec; never returns.  Between fork and exec the
 * child of a threaded launcher (libmuster's threads, the relay's) may only make async-signal-safe
 * calls: a lock another thread held at the fork (the allocator's, stdio's, the environment's) stays
 * taken in the child for ever.  So everything it needs was built before the fork, and a failed exec
 * is reported through a pipe, for the launcher to word. */
static void run_proc_child(struct run_proc_plan *p, const struct run_env *env, int out, int err, pid_t parent)
{
    setpgid(0, 0);
    /* Die with the launcher; the check closes the race with a launcher that died before prctl. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(126);
    for (int i = 0; i < env->n_close_fds; i++)
        if (env->close_fds[i] >= 0)
            close(env->close_fds[i]);
    if (out >= 0 && dup2(out, STDOUT_FILENO) < 0)
        _exit(126);
    if (err >= 0 && dup2(err, STDERR_FILENO) < 0)
        _exit(126);
    run_proc_exec(p);
    int why = errno;
    if (write(p->report, &why, sizeof why) != (ssize_t)sizeof why) {
        /* The launcher learns of the failure from the exit status alone. */
    }
    _exit(127);
}

/* After the fork: wait for the child's exec (the report pipe closes) or the errno of its failure,
 * and say why the program did not run. */
static void run_proc_report(int fd, const char *prog)
{
    int why;
    ssize_t k;
    while ((k = read(fd, &why, sizeof why)) < 0 && errno == EINTR) {
    }
    if (k == (ssize_t)sizeof why)
        fprintf(stderr, RUN_TAG "cannot run %s: %s\n", prog, strerror(why));
}

/* Open the output pipes of a worker's streams that go through the launcher (read ends non-blocking,
 * all close-on-exec). */
static int run_proc_pipes(const struct run_workers *ws, struct run_worker *w, int wr[2])
{
    for (int s = 0; s < 2; s++) {
        if (!ws->through[s])
            continue;
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
            return -1;
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        w->fd[s] = p[0];
        wr[s] = p[1];
        w->buf[s] = malloc(RUN_LINE_MAX);
        if (!w->buf[s])
            return -1;
    }
    return 0;
}

/* Build the worker's plan and its report pipe (close-on-exec, so a successful exec closes it); 0 or -1. */
static int run_proc_prepare(struct run_proc_plan *p, int report[2], const struct run_env *env, int local_rank,
                            char *const *argv)
{
    if (run_proc_plan_build(p, env, local_rank, argv) < 0) {
        fprintf(stderr, RUN_TAG "out of memory starting a worker\n");
        return -1;
    }
    if (pipe2(report, O_CLOEXEC) < 0) {
        fprintf(stderr, RUN_TAG "cannot create a pipe: %s\n", strerror(errno));
        run_proc_plan_free(p);
        return -1;
    }
    p->report = report[1];
    return 0;
}

/* Fork and exec one worker; returns 0, or -1 when the fork failed. */
static int run_proc_spawn(struct run_workers *ws, struct run_worker *w, const struct run_env *env,
                          char *const *argv)
{
    int wr[2] = {-1, -1}, report[2];
    struct run_proc_plan plan;
    w->prefix = ws->prefix;
    if (run_proc_pipes(ws, w, wr) < 0) {
        fprintf(stderr, RUN_TAG "cannot create output pipes: %s\n", strerror(errno));
        return -1;
    }
    if (run_proc_prepare(&plan, report, env, w->local_rank, argv) < 0) {
        for (int s = 0; s < 2; s++)
            if (wr[s] >= 0)
                close(wr[s]);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = run_proc_fork();
    int fork_errno = errno;
    if (pid == 0)
        run_proc_child(&plan, env, wr[0], wr[1], parent);
    close(report[1]);
    for (int s = 0; s < 2; s++)
        if (wr[s] >= 0)
            close(wr[s]);
    if (pid > 0) {
        /* Also set the group here, so a signal sent right after fork reaches it. */
        setpgid(pid, pid);
        run_guard_note('+', pid);
        run_proc_report(report[0], argv[0]);
    }
    close(report[0]);
    run_proc_plan_free(&plan);
    if (pid < 0) {
        fprintf(stderr, RUN_TAG "fork: %s\n", strerror(fork_errno));
        return -1;
    }
    w->pid = pid;
    ws->running++;
    return 0;
}

/* Start n workers of the assignment running argv; returns 0, or -1 when none could start. */
int run_proc_start(struct run_workers *ws, int n, int prefix, const struct run_env *env, char *const *argv)
{
    memset(ws, 0, sizeof *ws);
    ws->w = calloc((size_t)n, sizeof *ws->w);
    if (!ws->w)
        return -1;
    ws->n = n;
    ws->prefix = prefix;
    for (int s = 0; s < 2; s++)
        ws->through[s] = run_proc_through(prefix, isatty(s == 0 ? STDOUT_FILENO : STDERR_FILENO));
    for (int i = 0; i < n; i++) {
        struct run_worker *w = &ws->w[i];
        w->local_rank = i;
        w->rank = (int)env->a->rank_start + i;
        w->fd[0] = w->fd[1] = -1;
        w->file_gen = env->a->generation;
        w->file_rank = w->rank;
        if (run_proc_spawn(ws, w, env, argv) < 0) {
            /* A partial node is no use to the world: report it as a failed worker. */
            w->status = 127;
            if (!ws->first_failure)
                ws->first_failure = 127;
        }
    }
    return ws->running > 0 ? 0 : -1;
}

/* Close what a reaped worker left of its output streams, so it can be started again. */
static void run_proc_forget(struct run_worker *w)
{
    for (int s = 0; s < 2; s++) {
        run_proc_drain(w, s); /* the worker is gone: what its pipe holds is read without waiting */
        run_proc_close_stream(w, s);
        free(w->buf[s]);
        w->buf[s] = NULL;
        w->len[s] = 0;
    }
    w->status = 0;
    w->sig = 0;
}

/* In a new generation: start again the workers that failed (or never started), with env's ranks, and
 * give the running ones their new global rank (for the output prefix); returns how many were started.
 * A worker that exited 0 has done its part and stays gone. */
int run_proc_replace(struct run_workers *ws, const struct run_env *env, char *const *argv)
{
    int started = 0;
    ws->first_failure = ws->first_signal = 0;
    for (int i = 0; i < ws->n; i++) {
        struct run_worker *w = &ws->w[i];
        w->rank = (int)env->a->rank_start + i;
        if (w->pid > 0 || w->status == 0)
            continue;
        run_proc_forget(w);
        w->file_gen = env->a->generation;
        w->file_rank = w->rank;
        if (run_proc_spawn(ws, w, env, argv) == 0) {
            started++;
        } else {
            w->status = 127;
            if (!ws->first_failure)
                ws->first_failure = 127;
        }
    }
    return started;
}

/* Convert a wait status into the shell's exit-code convention. */
static int run_proc_code(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return 1;
}

/* Reap every worker that has exited, calling on_exit(arg, w) for each (on_exit may be NULL); returns how
 * many were reaped now. */
int run_proc_reap(struct run_workers *ws, void (*on_exit)(void *arg, const struct run_worker *w), void *arg)
{
    int reaped = 0;
    for (int i = 0; i < ws->n; i++) {
        struct run_worker *w = &ws->w[i];
        int st;
        if (w->pid <= 0 || waitpid(w->pid, &st, WNOHANG) != w->pid)
            continue;
        run_guard_note('-', w->pid);
        w->pid = 0;
        w->status = run_proc_code(st);
        w->sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
        ws->running--;
        reaped++;
        if (w->status != 0 && !ws->first_failure) {
            ws->first_failure = w->status;
            ws->first_signal = w->sig;
        }
        if (on_exit)
            on_exit(arg, w);
    }
    return reaped;
}

/* Send sig to the process group of every running worker. */
void run_proc_signal(struct run_workers *ws, int sig)
{
    for (int i = 0; i < ws->n; i++)
        if (ws->w[i].pid > 0 && killpg(ws->w[i].pid, sig) < 0)
            kill(ws->w[i].pid, sig);
}

/* Add the open output pipes to pfd (room for 2*n entries); returns the count added. */
int run_proc_pollfds(const struct run_workers *ws, struct pollfd *pfd)
{
    int k = 0;
    for (int i = 0; i < ws->n; i++) {
        for (int s = 0; s < 2; s++) {
            if (ws->w[i].fd[s] < 0)
                continue;
            pfd[k].fd = ws->w[i].fd[s];
            pfd[k].events = POLLIN;
            pfd[k].revents = 0;
            k++;
        }
    }
    return k;
}

/* Pass on whatever output is ready on the polled pipes, in whole lines (prefixed by rank when asked). */
void run_proc_output(struct run_workers *ws, const struct pollfd *pfd, int npfd)
{
    /* pfd lists the open pipes in worker order, as run_proc_pollfds filled it. */
    int k = 0;
    for (int i = 0; i < ws->n && k < npfd; i++) {
        for (int s = 0; s < 2 && k < npfd; s++) {
            struct run_worker *w = &ws->w[i];
            if (w->fd[s] < 0 || pfd[k].fd != w->fd[s])
                continue;
            if (pfd[k].revents)
                run_proc_drain(w, s);
            k++;
        }
    }
}

/* Flush remaining output, close the pipes and free the worker set. */
void run_proc_free(struct run_workers *ws)
{
    if (!ws->w)
        return;
    for (int i = 0; i < ws->n; i++) {
        for (int s = 0; s < 2; s++) {
            /* The worker is gone, so what is left in the pipe can be read without waiting. */
            run_proc_drain(&ws->w[i], s);
            run_proc_close_stream(&ws->w[i], s);
            free(ws->w[i].buf[s]);
        }
    }
    free(ws->w);
    memset(ws, 0, sizeof *ws);
}
