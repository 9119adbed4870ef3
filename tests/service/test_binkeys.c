/*
 * Keys are bytes end to end: a TCPStore client's keys may hold any byte,
 * NUL included, and every durable format must give them back exactly.
 * `rank\0/7` and `rank` are two keys; after a restart from the log, and
 * again from the snapshot, each still holds its own value, and a deleted
 * one stays deleted.  Native keys are strings without NUL: the daemon
 * refuses one that holds a NUL, and leaves TCPStore keys holding one out of
 * native list pages rather than send them cut.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hbkeys.h"
#include "hclient.h"
#include "hdata.h"
#include "hhttp.h"
#include "../tcpstore/tswire.h"
#include "raw.h"


static char datadir[4200];
static char tspf[4400];

/* Start on datadir with a TCPStore listener (plus extra); the TCPStore port, or 0. */
static uint16_t start(struct h_daemon *d, const char *extra)
{
    snprintf(tspf, sizeof tspf, "%s/ts.port", h_tmpdir());
    remove(tspf);
    const char *flags[] = {"--tcpstore-listen", "127.0.0.1:0", "--tcpstore-port-file", tspf, extra, NULL};
    if (hd_spawn(d, datadir, flags) != 0)
        return 0;
    return hh_port_file(tspf, 5000);
}

/* Set keys that differ only after a NUL; restart from the log, then from the snapshot: each is intact. */
static void t_nul_keys_survive(void *arg)
{
    (void)arg;
    snprintf(datadir, sizeof datadir, "%s/bin", h_tmpdir());
    struct h_daemon d;
    uint16_t port = start(&d, NULL);
    int fd = port ? tsw_open(port) : -1;
    if (fd < 0) {
        CHECK(!"daemon started");
        return;
    }
    hbk_write_all(fd);
    close(fd);
    hbk_expect_all(port);
    hd_stop(&d);
    /* From the log. */
    if (!(port = start(&d, NULL))) {
        CHECK(!"daemon restarted");
        return;
    }
    hbk_expect_all(port);
    /* The start folds the replayed log into a snapshot; the next start reads that. */
    for (int i = 0; i < 500 && !hd_log_has(&d, "snapshot written"); i++)
        usleep(10000); /* only the log says when the compaction thread is done */
    CHECK(hd_log_has(&d, "snapshot written"));
    hd_stop(&d);
    if (!(port = start(&d, NULL))) {
        CHECK(!"daemon restarted from the snapshot");
        return;
    }
    hbk_expect_all(port);
    hd_stop(&d);
}

/* A native set whose key holds a NUL is refused (not stored under the key cut at the NUL), and a native
 * list shows the plain key once. */
static void t_native_nul(void *arg)
{
    (void)arg;
    struct h_daemon d;
    uint16_t port = start(&d, NULL);
    if (!port) {
        CHECK(!"daemon started");
        return;
    }
    /* ClientFrame{request: Request{id: 5, set: SetReq{key: "rank\0/9", value: "v"}}}, by hand: the
     * protobuf-c packer would stop at the NUL. */
    static const uint8_t frame[] = {0, 0, 0, 18, 0x12, 16, 0x08, 5, 0x52, 12, 0x0a, 7, 'r', 'a', 'n', 'k', 0, '/',
                                    '9', 0x12, 1, 'v'};
    int fd = raw_open(d.port, "tcpstore");
    CHECK(fd >= 0 && raw_send(fd, frame, sizeof frame) == 0);
    uint64_t id = 0;
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER__STATUS__BAD_REQUEST);
    CHECK_EQ(id, 5);
    close(fd);
    muster_t *m = hc_connect(&d, "tcpstore", NULL);
    HC_EXPECT(m, "rank", "zero"); /* not overwritten through the cut key */
    char **keys = NULL;
    size_t n = 0;
    int more = 0;
    CHECK_EQ(m ? muster_list(m, "rank", NULL, 0, &keys, &n, &more, 0) : -1, MUSTER_OK);
    CHECK_EQ(n, 1);
    CHECK(n >= 1 && strcmp(keys[0], "rank") == 0);
    muster_free_list((void **)keys, n);
    muster_close(m);
    hd_stop(&d);
}

/* Run every case; the exit status says whether all checks passed. */
int main(void)
{
    h_init("binkeys", 120);
    H_RUN(t_nul_keys_survive, NULL);
    H_RUN(t_native_nul, NULL);
    return h_finish();
}
