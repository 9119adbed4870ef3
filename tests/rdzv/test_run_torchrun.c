/*
 * `muster run` as torchrun behaves, without torch: real launchers starting
 * shell-script (and one Python) workers.  Covers -m and --no-python and a
 * missing program caught before any round, whole output lines from workers
 * that write a line in pieces, error files kept in the run's directory, and
 * the relay's deadline on an incomplete TCPStore request.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../tcpstore/tswire.h"
#include "hrun.h"

/* Whether every line of text is "rankR wordI end" and there are n of them. */
static int whole_lines(const char *text, int n)
{
    int lines = 0;
    for (const char *p = text; *p; lines++) {
        const char *nl = strchr(p, '\n');
        int rank, word, used = -1;
        if (!nl || sscanf(p, "rank%d word%d end%n", &rank, &word, &used) != 2 || p + used != nl) {
            printf("  torn line: %.*s\n", nl ? (int)(nl - p) : 80, p);
            return 0;
        }
        p = nl + 1;
    }
    return lines == n;
}

/* Without --prefix-output, workers that write a line in several writes (as an unbuffered Python
 * does) still reach a non-terminal stdout and stderr in whole lines. */
static void t_whole_lines(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    static char buf[1 << 20];
    hr_fresh_out("lines");
    const char *w = hr_script("words.sh", "i=0\nwhile [ $i -lt 400 ]; do\n"
                                       "  printf 'rank%s' \"$RANK\"; printf ' word%s' $i; printf ' end\\n'\n"
                                       "  printf 'rank%s' \"$RANK\" >&2; printf ' word%s' $i >&2; printf ' end\\n' >&2\n"
                                       "  i=$((i + 1))\ndone\n");
    hr_launch(&l, "lines", (const char *[]){"--standalone", "--nproc-per-node", "4", w, NULL});
    CHECK_EQ(hr_finish(&l, 30000), 0);
    CHECK(whole_lines(hr_slurp(l.out, buf, sizeof buf), 1600));
    char *err = strstr(hr_slurp(l.err, buf, sizeof buf), "ranks 0-3 of 4\n"), *end = strstr(buf, "muster run: all");
    CHECK(err != NULL && end != NULL);
    if (err && end) {
        *end = '\0';
        CHECK(whole_lines(err + strlen("ranks 0-3 of 4\n"), 1600));
    }
    hr_show(&l, before);
}

/* A worker that publishes its relay's port and stays until the test says go (bounded). */
static const char relay_worker[] =
    "echo \"$MASTER_PORT\" > \"$OUT/port.tmp\" && mv \"$OUT/port.tmp\" \"$OUT/port\"\n"
    "i=0; while [ ! -e \"$OUT/go\" ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done\n";

/* The relay's port, published by relay_worker; 0 when it did not come. */
static uint16_t relay_port(void)
{
    char buf[32];
    unsigned port = 0;
    if (!hr_await_file("port", 15000) || sscanf(hr_out_file("port", buf, sizeof buf), "%u", &port) != 1)
        return 0;
    return (uint16_t)port;
}

/* One SET and GET on a relay connection answer as they should. */
static int relay_works(int fd, const char *value)
{
    if (tsw_req(fd, TSW_SET, "k", value, NULL) != 0 || tsw_req(fd, TSW_GET, "k", NULL) != 0)
        return 0;
    char *got = tsw_blob(fd, 5000, NULL);
    int ok = got && strcmp(got, value) == 0;
    free(got);
    return ok;
}

/* Half a TCPStore request to the relay: closed once it stayed incomplete for --relay-request-timeout
 * (set here through its environment twin), counted; a parked WAIT outlives that time, and the other
 * connections keep working. */
static void t_relay_request_timeout(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    char buf[8192];
    hr_fresh_out("relaytimeout");
    const char *w = hr_script("relay.sh", relay_worker);
    setenv("MUSTER_RELAY_REQUEST_TIMEOUT", "400", 1);
    hr_launch(&l, "relaytimeout", (const char *[]){"--standalone", w, NULL});
    unsetenv("MUSTER_RELAY_REQUEST_TIMEOUT");
    uint16_t port = relay_port();
    CHECK(port > 0);
    int half = port ? tsw_open(port) : -1, other = port ? tsw_open(port) : -1, waiter = port ? tsw_open(port) : -1;
    if (half >= 0 && other >= 0 && waiter >= 0) {
        struct tsw_buf b = {0};
        tsw_u8(&b, TSW_SET);
        tsw_u64(&b, 10);
        tsw_raw(&b, "half", 4); /* six key bytes and the value never come */
        CHECK_EQ(tsw_send(half, &b), 0);
        int64_t t0 = h_now_ms();
        tsw_u8(&b, TSW_WAIT);
        tsw_u64(&b, 1);
        tsw_str(&b, "later");
        CHECK_EQ(tsw_send(waiter, &b), 0);
        tsw_free(&b);
        CHECK(relay_works(other, "v1"));
        CHECK(tsw_closed(half, 5000));
        int64_t took = h_now_ms() - t0;
        CHECK(took >= 300);
        CHECK(took < 4000);
        CHECK(tsw_quiet(waiter, 200)); /* parked, not incomplete: still open */
        CHECK(relay_works(other, "v2"));
        CHECK_EQ(tsw_req(other, TSW_SET, "later", "now", NULL), 0);
        CHECK_EQ(tsw_byte(waiter, 5000), 0); /* STOP_WAITING */
    }
    if (half >= 0)
        close(half);
    if (other >= 0)
        close(other);
    if (waiter >= 0)
        close(waiter);
    hr_touch("go");
    CHECK_EQ(hr_finish(&l, 20000), 0);
    hr_slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "request_timeout 1,") != NULL);
    CHECK(strstr(buf, "--relay-request-timeout") != NULL);
    hr_show(&l, before);
}

/* A worker's error file stays in the run's directory under --log-dir, its path printed; a run with
 * no error file leaves no directory behind. */
static void t_error_file_kept(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    char buf[8192], logs[PATH_MAX + 16], path[PATH_MAX];
    hr_fresh_out("errfile");
    const char *w = hr_script("errfile.sh", "[ \"$RANK\" = 1 ] || exit 0\n"
                                         "printf '{\"message\": {\"message\": \"boom %s\"}}' \"$RANK\" "
                                         "> \"$TORCHELASTIC_ERROR_FILE\"\nexit 1\n");
    snprintf(logs, sizeof logs, "%s/logs", hr_out_dir);
    hr_launch(&l, "errfile", (const char *[]){"--standalone", "--nproc-per-node", "2", "--log-dir", logs, w, NULL});
    CHECK_EQ(hr_finish(&l, 20000), 1);
    hr_slurp(l.err, buf, sizeof buf);
    const char *p = strstr(buf, "error_file: ");
    CHECK(p != NULL && strncmp(p + 12, logs, strlen(logs)) == 0);
    CHECK(strstr(buf, "boom 1") != NULL);
    CHECK(strstr(buf, "error files kept in ") != NULL);
    if (p && sscanf(p + 12, "%4095s", path) == 1) {
        char text[256];
        CHECK(strstr(hr_slurp(path, text, sizeof text), "boom 1") != NULL);
    }
    hr_show(&l, before);
    snprintf(logs, sizeof logs, "%s/clean", hr_out_dir);
    hr_launch(&l, "errfile_clean", (const char *[]){"--standalone", "--log-dir", logs, "true", NULL});
    CHECK_EQ(hr_finish(&l, 20000), 0);
    CHECK(strstr(hr_slurp(l.err, buf, sizeof buf), "kept") == NULL);
    CHECK_EQ(rmdir(logs), 0); /* empty: the run's own directory is gone */
    hr_show(&l, before);
}

/* torchrun's -m and --no-python: a module runs as `python3 -m`, a .py file as it is; a program that
 * cannot run, or -m with --no-python, ends the launcher before any round. */
static void t_module_no_python(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    char buf[PATH_MAX + 64], pypath[PATH_MAX + 16];
    hr_fresh_out("module");
    snprintf(pypath, sizeof pypath, "%s/pkg", hr_out_dir);
    mkdir(pypath, 0700);
    snprintf(buf, sizeof buf, "%s/muster_test_mod.py", pypath);
    FILE *f = fopen(buf, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("import os, sys\n"
              "open(os.path.join(os.environ['OUT'], 'mod.' + os.environ['RANK']), 'w').write(' '.join(sys.argv[1:]))\n",
              f);
        fclose(f);
    }
    setenv("PYTHONPATH", pypath, 1);
    hr_launch(&l, "module", (const char *[]){"--standalone", "--nproc-per-node", "2", "-m", "muster_test_mod", "a", "b",
                                         NULL});
    unsetenv("PYTHONPATH");
    CHECK_EQ(hr_finish(&l, 20000), 0);
    CHECK_STR(hr_out_file("mod.1", buf, sizeof buf), "a b");
    hr_show(&l, before);
    /* A shell script named .py: under python3 it would not parse. */
    const char *sh = hr_script("shell.py", "echo \"$RANK\" > \"$OUT/nopy.$RANK\"\n");
    hr_launch(&l, "nopython", (const char *[]){"--standalone", "--no_python", sh, NULL});
    CHECK_EQ(hr_finish(&l, 20000), 0);
    CHECK(hr_await_file("nopy.0", 0));
    hr_show(&l, before);
    /* Port 1: a round would fail to connect (exit 4); the checks come first. */
    hr_launch(&l, "notfound", (const char *[]){"--url", "tcp://127.0.0.1:1", "muster-no-such-program", NULL});
    CHECK_EQ(hr_finish(&l, 10000), 127);
    CHECK(strstr(hr_slurp(l.err, buf, sizeof buf), "cannot run muster-no-such-program") != NULL);
    CHECK(strstr(buf, "connect") == NULL);
    hr_show(&l, before);
    hr_launch(&l, "bothpy", (const char *[]){"--url", "tcp://127.0.0.1:1", "-m", "--no-python", "x", NULL});
    CHECK_EQ(hr_finish(&l, 10000), 2);
    CHECK(strstr(hr_slurp(l.err, buf, sizeof buf), "exclude each other") != NULL);
    hr_show(&l, before);
}

int main(void)
{
    h_init("rdzv_run_torchrun", 150);
    hr_cli = getenv("MUSTER_TEST_CLI");
    if (!hr_cli || !*hr_cli)
        h_skip("MUSTER_TEST_CLI is not set");
    H_RUN(t_module_no_python, NULL);
    H_RUN(t_whole_lines, NULL);
    H_RUN(t_error_file_kept, NULL);
    H_RUN(t_relay_request_timeout, NULL);
    return h_finish();
}
