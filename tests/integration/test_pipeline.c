/*
 * Integration tests of request ids on one raw connection: pipelined
 * requests are answered in order, a parked get is answered after a later
 * set of the same key (out of order, matched by id), and a pending id may
 * not be reused.
 */
#include <stdio.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"

/* get-wait id=1 then set id=2 of the same key: the replies come id=2, then id=1 with the value. */
static void t_out_of_order(const struct h_daemon *d)
{
    int fd = raw_open(d->port, "pipe");
    Muster__ServerFrame *f;
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_EQ(raw_get(fd, 1, "pipe/k", 1, 10000), 0);
    CHECK_EQ(raw_set(fd, 2, "pipe/k", "v2", 2), 0);
    f = raw_response(fd, 5000);
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ(f->response->id, 2);
        CHECK_EQ(f->response->status, MUSTER_OK);
    }
    raw_free(f);
    f = raw_response(fd, 5000);
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ(f->response->id, 1);
        CHECK_EQ(f->response->status, MUSTER_OK);
        CHECK(f->response->result_case == MUSTER__RESPONSE__RESULT_GET &&
              f->response->get->value.len == 2 && f->response->get->value.data[1] == '2');
    }
    raw_free(f);
    close(fd);
}

/* 200 pipelined sets then gets are answered in the order sent, with exact values. */
static void t_pipelined_in_order(const struct h_daemon *d)
{
    int fd = raw_open(d->port, "pipe"), in_order = 1, values_ok = 1;
    char key[32], val[32];
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "pipe/n%d", i);
        snprintf(val, sizeof val, "value-%d", i);
        CHECK_EQ(raw_set(fd, 100 + (uint64_t)i, key, val, (size_t)snprintf(NULL, 0, "value-%d", i)), 0);
    }
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "pipe/n%d", i);
        CHECK_EQ(raw_get(fd, 1000 + (uint64_t)i, key, 0, 0), 0);
    }
    for (int i = 0; i < 400; i++) {
        Muster__ServerFrame *f = raw_response(fd, 5000);
        uint64_t want = i < 200 ? 100 + (uint64_t)i : 1000 + (uint64_t)(i - 200);
        if (!f) {
            CHECK(!"pipelined reply missing");
            break;
        }
        in_order &= f->response->id == want && (int)f->response->status == MUSTER_OK;
        if (i >= 200) {
            int n = snprintf(val, sizeof val, "value-%d", i - 200);
            values_ok &= f->response->result_case == MUSTER__RESPONSE__RESULT_GET &&
                         f->response->get->value.len == (size_t)n;
        }
        raw_free(f);
    }
    CHECK(in_order);
    CHECK(values_ok);
    close(fd);
}

/* Reusing the id of a still-parked request is BAD_REQUEST; the parked one still completes. */
static void t_pending_id_reuse(const struct h_daemon *d)
{
    int fd = raw_open(d->port, "pipe");
    uint64_t id = 0, ids;
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_EQ(raw_get(fd, 7, "pipe/reuse", 1, 10000), 0);
    CHECK_EQ(raw_get(fd, 7, "pipe/reuse-other", 1, 10000), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_EBADREQ);
    CHECK_EQ(id, 7);
    /* The set (id 8) releases the parked get (id 7): two OK answers, in either order. */
    CHECK_EQ(raw_set(fd, 8, "pipe/reuse", "x", 1), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK(id == 7 || id == 8);
    ids = id;
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(ids + id, 15);
    close(fd);
}

/* A request before hello is UNAUTHENTICATED; ping is allowed before hello. */
static void t_before_hello(const struct h_daemon *d)
{
    int fd = raw_connect(d->port);
    uint64_t id = 0;
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_EQ(raw_ping(fd, 1), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    CHECK_EQ(id, 1);
    CHECK_EQ(raw_set(fd, 2, "k", "v", 1), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_EAUTH);
    CHECK_EQ(id, 2);
    CHECK_EQ(raw_get(fd, 3, "k", 0, 0), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_EAUTH);
    CHECK_EQ(raw_hello(fd, "pipe", NULL), 0);
    CHECK_EQ(raw_set(fd, 4, "pipe/after-hello", "v", 1), 0);
    CHECK_EQ(raw_status(fd, 5000, &id), MUSTER_OK);
    close(fd);
}

/* Run the pipelining tests against one daemon. */
int main(void)
{
    struct h_daemon d;
    h_init("pipeline", 60);
    if (h_start(&d, NULL) < 0)
        return h_finish();
    H_RUN(t_out_of_order, &d);
    H_RUN(t_pipelined_in_order, &d);
    H_RUN(t_pending_id_reuse, &d);
    H_RUN(t_before_hello, &d);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
