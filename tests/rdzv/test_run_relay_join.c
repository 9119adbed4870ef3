/*
 * The relay of `muster run` joining a call already in flight: a node's
 * workers asking one key in different loop turns share one upstream call,
 * counted by musterd itself (its op_get and op_wait counters).  musterd is
 * held stopped (SIGSTOP) while the requests come, so the first call is
 * still in flight when the others arrive; then every worker gets the right
 * answer, a worker that closes its connection leaves the others' answers
 * alone, an error of the shared call closes every worker that joined it,
 * a worker's read sent after its own write of the key never joins a call
 * sent before that write, and adds of 0 read the count of an add in
 * flight.
 */
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <muster/muster.h>

#include "../tcpstore/tswire.h"
#include "hrun.h"

/* Workers asking one key, each in a loop turn of its own. */
#define NJOIN 6
/* Pause between two workers' requests: the relay takes each in a turn of its own. */
#define TURN_MS 40
/* musterd's key limit here, below the relay's (8192), so a long key fails upstream. */
#define MAX_KEY "200"

/* The musterd of this test. */
static struct h_daemon d;

/* A worker that publishes its relay's port and generation, and stays until the test says go (bounded). */
static const char join_worker[] =
    "echo \"$MUSTER_GENERATION\" > \"$OUT/gen\"\n"
    "echo \"$MASTER_PORT\" > \"$OUT/port.tmp\" && mv \"$OUT/port.tmp\" \"$OUT/port\"\n"
    "i=0; while [ ! -e \"$OUT/go\" ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i + 1)); done\n";

/* Open n connections to the relay at port. */
static void open_all(int *fd, int n, uint16_t port)
{
    for (int i = 0; i < n; i++) {
        fd[i] = tsw_open(port);
        CHECK(fd[i] >= 0);
    }
}

/* Close the n connections still open. */
static void close_all(int *fd, int n)
{
    for (int i = 0; i < n; i++)
        if (fd[i] >= 0)
            close(fd[i]);
}

/* Send a GET of key on each of the n connections, one loop turn apart. */
static void send_gets(int *fd, int n, const char *key)
{
    for (int i = 0; i < n; i++) {
        if (fd[i] >= 0)
            CHECK_EQ(tsw_req(fd[i], TSW_GET, key, NULL), 0);
        h_nap(TURN_MS);
    }
}

/* The value fd's GET answered is want. */
static int got_value(int fd, const char *want)
{
    char *v = fd >= 0 ? tsw_blob(fd, 5000, NULL) : NULL;
    int ok = v && strcmp(v, want) == 0;
    free(v);
    return ok;
}

/* Set key to value through the relay (SET has no reply: a GET after it on the same connection confirms it). */
static void relay_set(uint16_t port, const char *key, const char *value)
{
    int fd = tsw_open(port);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_EQ(tsw_req(fd, TSW_SET, key, value, NULL), 0);
    CHECK_EQ(tsw_req(fd, TSW_GET, key, NULL), 0);
    CHECK(got_value(fd, value));
    close(fd);
}

/* GETs of one key from NJOIN workers, one loop turn apart while musterd is stopped: one upstream get, and
 * every worker reads the value. */
static void t_get_join(uint16_t port)
{
    int fd[NJOIN];
    relay_set(port, "gj", "v1");
    open_all(fd, NJOIN, port);
    long long before = h_stat(&d, "op_get");
    kill(d.pid, SIGSTOP);
    send_gets(fd, NJOIN, "gj");
    kill(d.pid, SIGCONT);
    int read = 0;
    for (int i = 0; i < NJOIN; i++)
        read += got_value(fd[i], "v1");
    CHECK_EQ(read, NJOIN);
    CHECK_EQ(h_stat(&d, "op_get") - before, 1);
    close_all(fd, NJOIN);
}

/* WAITs of one key from NJOIN workers, the first parked at musterd before the others come one loop turn
 * apart; one worker closes its connection meanwhile: one upstream wait, and one SET releases every other. */
static void t_wait_join(uint16_t port)
{
    int fd[NJOIN];
    open_all(fd, NJOIN, port);
    long long before = h_stat(&d, "op_wait");
    if (fd[0] >= 0)
        CHECK_EQ(tsw_send_wait(fd[0], "wj"), 0);
    for (int64_t end = h_now_ms() + 5000; h_stat(&d, "op_wait") == before && h_now_ms() < end;)
        h_nap(10);
    for (int i = 1; i < NJOIN; i++) {
        if (fd[i] >= 0)
            CHECK_EQ(tsw_send_wait(fd[i], "wj"), 0);
        h_nap(TURN_MS);
    }
    CHECK(fd[0] < 0 || tsw_quiet(fd[0], 100));
    if (fd[2] >= 0)
        close(fd[2]); /* a worker gone: the others still wait on the one call */
    fd[2] = -1;
    h_nap(TURN_MS);
    relay_set(port, "wj", "open");
    int released = 0;
    for (int i = 0; i < NJOIN; i++)
        released += fd[i] >= 0 && tsw_byte(fd[i], 5000) == 0; /* STOP_WAITING */
    CHECK_EQ(released, NJOIN - 1);
    CHECK_EQ(h_stat(&d, "op_wait") - before, 1);
    close_all(fd, NJOIN);
}

/* The worker whose GET went upstream first closes its connection before the answer: the workers that joined
 * that call still read the value. */
static void t_first_gone(uint16_t port)
{
    int fd[3];
    relay_set(port, "fg", "v2");
    open_all(fd, 3, port);
    long long before = h_stat(&d, "op_get");
    kill(d.pid, SIGSTOP);
    send_gets(fd, 3, "fg");
    if (fd[0] >= 0)
        close(fd[0]);
    fd[0] = -1;
    h_nap(TURN_MS);
    kill(d.pid, SIGCONT);
    CHECK(got_value(fd[1], "v2"));
    CHECK(got_value(fd[2], "v2"));
    CHECK_EQ(h_stat(&d, "op_get") - before, 1);
    close_all(fd, 3);
}

/* GETs of a key longer than musterd's --max-key (within the relay's): the one call fails, and every worker
 * that joined it is closed, as one whose own call failed would be; another worker is unaffected. */
static void t_error_join(uint16_t port)
{
    int fd[3], other = tsw_open(port);
    char key[300];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    open_all(fd, 3, port);
    long long before = h_stat(&d, "op_get");
    kill(d.pid, SIGSTOP);
    send_gets(fd, 3, key);
    kill(d.pid, SIGCONT);
    for (int i = 0; i < 3; i++)
        CHECK(fd[i] < 0 || tsw_closed(fd[i], 5000));
    CHECK_EQ(h_stat(&d, "op_get") - before, 1);
    CHECK(other >= 0);
    if (other >= 0) {
        CHECK_EQ(tsw_req(other, TSW_GET, "gj", NULL), 0);
        CHECK(got_value(other, "v1"));
        close(other);
    }
    close_all(fd, 3);
}

/* A worker that writes a key and then reads it, while another worker's GET of the key is in flight: its read
 * does not join that call (sent before its write), so it reads its own value. */
static void t_own_write(uint16_t port)
{
    int a = tsw_open(port), b = tsw_open(port);
    CHECK(a >= 0 && b >= 0);
    if (a < 0 || b < 0)
        goto out;
    relay_set(port, "ow", "old");
    long long before = h_stat(&d, "op_get");
    kill(d.pid, SIGSTOP);
    CHECK_EQ(tsw_req(a, TSW_GET, "ow", NULL), 0);
    h_nap(TURN_MS);
    CHECK_EQ(tsw_req(b, TSW_SET, "ow", "new", NULL), 0);
    CHECK_EQ(tsw_req(b, TSW_GET, "ow", NULL), 0);
    h_nap(TURN_MS);
    kill(d.pid, SIGCONT);
    CHECK(got_value(a, "old"));
    CHECK(got_value(b, "new"));
    CHECK_EQ(h_stat(&d, "op_get") - before, 2);
out:
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
}

/* Send an ADD of key by delta on fd. */
static void send_add(int fd, const char *key, int64_t delta)
{
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_ADD);
    tsw_str(&b, key);
    tsw_u64(&b, (uint64_t)delta);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
}

/* An ADD of 5 in flight, then ADDs of 0 (torch's barrier reading its count) from other workers one loop turn
 * apart: they join it and read the count after it, in one upstream add. */
static void t_add0_join(uint16_t port)
{
    int fd[NJOIN];
    open_all(fd, NJOIN, port);
    long long before = h_stat(&d, "op_add");
    kill(d.pid, SIGSTOP);
    for (int i = 0; i < NJOIN; i++) {
        if (fd[i] >= 0)
            send_add(fd[i], "a0", i ? 0 : 5);
        h_nap(TURN_MS);
    }
    kill(d.pid, SIGCONT);
    int five = 0, ok = 0;
    for (int i = 0; i < NJOIN; i++)
        five += fd[i] >= 0 && tsw_i64(fd[i], 5000, &ok) == 5 && ok;
    CHECK_EQ(five, NJOIN);
    CHECK_EQ(h_stat(&d, "op_add") - before, 1);
    close_all(fd, NJOIN);
}

/* The cases against one launcher's relay in front of this test's musterd. */
static void t_join(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    static char buf[PATH_MAX + 8];
    char url[128];
    hr_fresh_out("join");
    const char *extra[] = {"--max-key", MAX_KEY, NULL};
    if (h_start(&d, extra) < 0)
        return;
    h_url(&d, "join", NULL, url, sizeof url);
    const char *w = hr_script("join.sh", join_worker);
    const char *args[] = {"--url", url, "--nproc-per-node", "1", "--rdzv-timeout", "60", "--grace", "1", w, NULL};
    hr_launch(&l, "join", args);
    unsigned port = 0;
    CHECK(hr_await_file("port", 15000) && sscanf(hr_out_file("port", buf, sizeof buf), "%u", &port) == 1);
    if (port) {
        t_get_join((uint16_t)port);
        t_wait_join((uint16_t)port);
        t_first_gone((uint16_t)port);
        t_error_join((uint16_t)port);
        t_own_write((uint16_t)port);
        t_add0_join((uint16_t)port);
    }
    hr_touch("go");
    CHECK_EQ(hr_finish(&l, 20000), 0);
    hr_show(&l, before);
    if (h_failures() > before)
        h_dump_log(&d);
    h_stop(&d);
}

int main(void)
{
    h_init("rdzv_run_relay_join", 110);
    hr_cli = getenv("MUSTER_TEST_CLI");
    if (!hr_cli || !*hr_cli)
        h_skip("MUSTER_TEST_CLI is not set");
    H_RUN(t_join, NULL);
    return h_finish();
}
