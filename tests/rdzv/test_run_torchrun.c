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
    snprintf(buf, sizeof buf, "%s/go", hr_out_dir);
    FILE *go = fopen(buf, "w");
    CHECK(go != NULL);
    if (go)
        fclose(go);
    CHECK_EQ(hr_finish(&l, 20000), 0);
    hr_slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "request_timeout 1,") != NULL);
    CHECK(strstr(buf, "--relay-request-timeout") != NULL);
    hr_show(&l, before);
}


int main(void)
{
    h_init("rdzv_run_torchrun", 150);
    hr_cli = getenv("MUSTER_TEST_CLI");
    if (!hr_cli || !*hr_cli)
        h_skip("MUSTER_TEST_CLI is not set");
    H_RUN(t_relay_request_timeout, NULL);
    return h_finish();
}
