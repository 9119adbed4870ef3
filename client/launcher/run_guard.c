/*
 * The launcher's guard: a small child process that outlives the launcher
 * and kills what the launcher leaves behind.  A worker dies with its
 * launcher through PR_SET_PDEATHSIG, but that reaches only the process the
 * launcher started: with `sh -c ...` or `bash train.sh` the real worker is
 * a grandchild and would keep running, holding its GPU.  Each worker runs in
 * its own process group; the launcher tells the guard each group it starts
 * and reaps over a pipe only the launcher holds, so however the launcher
 * ends (even SIGKILL) the guard reads EOF and SIGKILLs every group still
 * listed.  A process that leaves its group (setsid, setpgid) escapes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

/* The launcher's end of the guard's pipe, or -1 when there is no guard. */
static int run_guard_wfd = -1;

/* One message to the guard: a group started ('+') or reaped ('-'). */
struct run_guard_msg {
    char op;
    pid_t pgid;
};

/* The guard's loop: track the groups named on fd, and kill those left when the launcher is gone. */
static void run_guard_main(int fd)
{
    pid_t *groups = NULL;
    size_t n = 0, cap = 0;
    struct run_guard_msg m;
    ssize_t r;
    while ((r = read(fd, &m, sizeof m)) == (ssize_t)sizeof m || (r < 0 && errno == EINTR)) {
        if (r < 0)
            continue;
        if (m.op == '-') {
            for (size_t i = 0; i < n; i++)
                if (groups[i] == m.pgid)
                    groups[i] = groups[--n];
        } else if (n < cap || (groups = realloc(groups, (cap = cap ? cap * 2 : 16) * sizeof *groups))) {
            groups[n++] = m.pgid;
        }
    }
    for (size_t i = 0; i < n; i++)
        killpg(groups[i], SIGKILL);
    _exit(0);
}

/* Start the guard; 0, or -1 (the launcher then runs without one). */
int run_guard_start(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    pid_t pid = run_proc_fork();
    if (pid == 0) {
        /* A terminal's ^C or a scheduler's SIGTERM to the whole group is the launcher's to handle;
         * the guard acts only once the launcher is gone. */
        signal(SIGINT, SIG_IGN);
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        if (dup2(p[0], 3) < 0)
            _exit(1);
        closefrom(4); /* the store connection and the launcher's own pipes are not the guard's */
        run_guard_main(3);
    }
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return -1;
    }
    run_guard_wfd = p[1];
    return 0;
}

/* Tell the guard about a worker's process group: started (op '+') or reaped ('-'). */
void run_guard_note(char op, pid_t pgid)
{
    struct run_guard_msg m;
    memset(&m, 0, sizeof m);
    m.op = op;
    m.pgid = pgid;
    if (run_guard_wfd >= 0 && write(run_guard_wfd, &m, sizeof m) != (ssize_t)sizeof m) {
        /* A guard that died cannot be told; the workers still die with their launcher's signal. */
    }
}
