/*
 * The relay of `muster run` as an event-driven, pipelining, combining
 * TCPStore server, at the byte level (tswire.c) against a real launcher
 * and musterd: many local connections ADD one key at once and every one
 * gets a distinct count, each the count before it plus its own delta in
 * one order, the final count is the sum, and the relay reports fewer
 * upstream calls than requests; pipelined requests on one connection are
 * answered in order; every waiter on one key is released by one SET and
 * reads its value; every arrival at one BARRIER is released once the last
 * comes; waits and a barrier parked at musterd are released by a native
 * client's writes from outside the relay; blocking pops of one queue are
 * released one per push; a worker that sends garbage is
 * closed and counted while the others go on.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <muster/muster.h>

#include "../tcpstore/tswire.h"
#include "hrun.h"

/* Local connections of the combining and waiting cases. */
#define NCONN 32
/* ADDs each connection pipelines in the combining case. */
#define NADD 20

/* A worker that publishes its relay's port, the store and its generation, and stays until the test says go
 * (bounded). */
static const char relay_worker[] =
    "echo \"$MUSTER_URL $MUSTER_GENERATION\" > \"$OUT/store\"\n"
    "echo \"$MASTER_PORT\" > \"$OUT/port.tmp\" && mv \"$OUT/port.tmp\" \"$OUT/port\"\n"
    "i=0; while [ ! -e \"$OUT/go\" ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i + 1)); done\n";

/* One answered ADD: the count it got and the delta it added. */
struct add_seen {
    int64_t got, delta;
};

/* Order of add_seen by count. */
static int add_cmp(const void *a, const void *b)
{
    const struct add_seen *x = a, *y = b;
    return x->got < y->got ? -1 : x->got > y->got;
}

/* Queue an ADD of key by delta into b. */
static void add_req(struct tsw_buf *b, const char *key, int64_t delta)
{
    tsw_u8(b, TSW_ADD);
    tsw_str(b, key);
    tsw_u64(b, (uint64_t)delta);
}

/* NCONN connections each pipeline NADD ADDs of one key with distinct deltas, all sent before any reply
 * is read: the counts form one sequence (sorted, each is the one before plus its own delta), each
 * connection's counts rise in its request order, and a GET reads the sum. */
static void t_combine(uint16_t port)
{
    int fd[NCONN];
    static struct add_seen seen[NCONN * NADD];
    int64_t sum = 0;
    struct tsw_buf b = {0};
    for (int i = 0; i < NCONN; i++) {
        fd[i] = tsw_open(port);
        CHECK(fd[i] >= 0);
    }
    for (int i = 0; i < NCONN; i++) {
        for (int j = 0; j < NADD; j++) {
            int64_t d = (int64_t)(i * NADD + j + 1);
            add_req(&b, "ctr", d);
            sum += d;
        }
        if (fd[i] >= 0)
            CHECK_EQ(tsw_send(fd[i], &b), 0);
        b.n = 0;
    }
    int got = 0, ordered = 1;
    for (int i = 0; i < NCONN; i++) {
        int64_t last = 0;
        for (int j = 0; fd[i] >= 0 && j < NADD; j++) {
            int ok = 0;
            int64_t v = tsw_i64(fd[i], 10000, &ok);
            if (!ok)
                break;
            ordered &= v > last;
            last = v;
            seen[got++] = (struct add_seen){v, (int64_t)(i * NADD + j + 1)};
        }
    }
    CHECK_EQ(got, NCONN * NADD);
    CHECK(ordered);
    qsort(seen, (size_t)got, sizeof *seen, add_cmp);
    int64_t count = 0;
    int chain = 1;
    for (int k = 0; k < got; k++) {
        chain &= seen[k].got == count + seen[k].delta;
        count = seen[k].got;
    }
    CHECK(chain);
    CHECK_EQ(count, sum);
    if (fd[0] >= 0) {
        CHECK_EQ(tsw_req(fd[0], TSW_GET, "ctr", NULL), 0);
        char *v = tsw_blob(fd[0], 5000, NULL);
        char want[32];
        snprintf(want, sizeof want, "%lld", (long long)sum);
        CHECK(v && strcmp(v, want) == 0);
        free(v);
    }
    for (int i = 0; i < NCONN; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    tsw_free(&b);
}

/* NCONN / 2 connections each ADD 2^61 to one key and NCONN / 2 others ADD 0, all at once, so the adds the
 * relay would combine sum past INT64_MAX: as one by one, exactly three of the big adds succeed (2^61,
 * 2^62, 3 * 2^61), the others are refused (their connections closed, TCPStore has no error answer),
 * and every add of 0 is answered with a count of that sequence, none closed because a batch-mate
 * overflowed. */
static void t_add_overflow(uint16_t port)
{
    const int64_t big = (int64_t)1 << 61;
    int fd[NCONN], answered = 0, zeros = 0;
    int64_t seen[NCONN / 2];
    struct tsw_buf b = {0};
    for (int i = 0; i < NCONN; i++)
        fd[i] = tsw_open(port);
    for (int i = 0; i < NCONN; i++) {
        add_req(&b, "ovf", i % 2 ? 0 : big);
        if (fd[i] >= 0)
            CHECK_EQ(tsw_send(fd[i], &b), 0);
        b.n = 0;
    }
    for (int i = 0; i < NCONN; i++) {
        int ok = 0;
        int64_t v = fd[i] >= 0 ? tsw_i64(fd[i], 10000, &ok) : 0;
        if (i % 2) {
            CHECK(ok);   /* an add of 0 never fails */
            zeros += ok && (v == 0 || v == big || v == 2 * big || v == 3 * big);
        } else if (ok) {
            seen[answered++] = v;
        }
    }
    CHECK_EQ(zeros, NCONN / 2);
    CHECK_EQ(answered, 3);
    int64_t total = 0;
    for (int k = 0; k < answered; k++)
        total += seen[k] / big;   /* 1 + 2 + 3 when the three got 2^61, 2^62 and 3 * 2^61 */
    CHECK_EQ(total, 6);
    int g = tsw_open(port);
    if (g >= 0) {
        CHECK_EQ(tsw_req(g, TSW_GET, "ovf", NULL), 0);
        char *v = tsw_blob(g, 5000, NULL);
        char want[32];
        snprintf(want, sizeof want, "%lld", (long long)(3 * big));
        CHECK(v && strcmp(v, want) == 0);
        free(v);
        close(g);
    }
    for (int i = 0; i < NCONN; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    tsw_free(&b);
}

/* One connection pipelines SET, GET, ADD, CHECK, PING, GETNUMKEYS and DELETE_KEY in one write: the
 * replies come in request order. */
static void t_pipeline(uint16_t port)
{
    int fd = tsw_open(port);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_SET);
    tsw_str(&b, "p");
    tsw_str(&b, "pv");
    tsw_u8(&b, TSW_GET);
    tsw_str(&b, "p");
    add_req(&b, "pc", 7);
    tsw_u8(&b, TSW_CHECK);
    tsw_u64(&b, 2);
    tsw_str(&b, "p");
    tsw_str(&b, "absent");
    tsw_u8(&b, TSW_PING);
    tsw_u32(&b, 0x5eed);
    tsw_u8(&b, TSW_GET);
    tsw_str(&b, "absent");
    tsw_u8(&b, TSW_DELETE_KEY);
    tsw_str(&b, "p");
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    char *v = tsw_blob(fd, 5000, NULL);
    CHECK(v && strcmp(v, "pv") == 0);
    free(v);
    int ok = 0;
    CHECK_EQ(tsw_i64(fd, 5000, &ok), 7);
    CHECK_EQ(tsw_byte(fd, 5000), 1); /* NOT_READY */
    uint32_t echo = 0;
    CHECK_EQ(tsw_read(fd, &echo, 4, 5000), 0);
    CHECK_EQ(echo, 0x5eed);
    size_t len = 99;
    v = tsw_blob(fd, 5000, &len);
    CHECK(v && len == 0);
    free(v);
    CHECK_EQ(tsw_i64(fd, 5000, &ok), 1);
    close(fd);
}

/* NCONN connections WAIT on one key (half of them on it and another key that exists), one CANCEL_WAITs
 * and then pings; one SET releases every other waiter, and each then reads the value. */
static void t_waiters(uint16_t port)
{
    int fd[NCONN], setter = tsw_open(port);
    struct tsw_buf b = {0};
    CHECK(setter >= 0);
    CHECK_EQ(tsw_req(setter, TSW_SET, "there", "1", NULL), 0);
    for (int i = 0; i < NCONN; i++) {
        fd[i] = tsw_open(port);
        CHECK(fd[i] >= 0);
        tsw_u8(&b, TSW_WAIT);
        if (i % 2) {
            tsw_u64(&b, 2);
            tsw_str(&b, "there");
        } else {
            tsw_u64(&b, 1);
        }
        tsw_str(&b, "gate");
        if (fd[i] >= 0)
            CHECK_EQ(tsw_send(fd[i], &b), 0);
        b.n = 0;
    }
    for (int i = 0; i < NCONN; i++)
        CHECK(fd[i] < 0 || tsw_quiet(fd[i], i ? 5 : 300));
    if (fd[0] >= 0) {
        tsw_u8(&b, TSW_CANCEL_WAIT);
        tsw_u8(&b, TSW_PING);
        tsw_u32(&b, 3);
        CHECK_EQ(tsw_send(fd[0], &b), 0);
        CHECK_EQ(tsw_byte(fd[0], 5000), 1); /* WAIT_CANCELED, and nothing for the WAIT */
        uint32_t echo = 0;
        CHECK_EQ(tsw_read(fd[0], &echo, 4, 5000), 0);
        CHECK_EQ(echo, 3);
    }
    if (setter >= 0)
        CHECK_EQ(tsw_req(setter, TSW_SET, "gate", "open", NULL), 0);
    int released = 0;
    for (int i = 1; i < NCONN; i++)
        released += fd[i] >= 0 && tsw_byte(fd[i], 10000) == 0; /* STOP_WAITING */
    CHECK_EQ(released, NCONN - 1);
    for (int i = 0; i < NCONN; i++)
        if (fd[i] >= 0)
            CHECK_EQ(tsw_req(fd[i], TSW_GET, "gate", NULL), 0);
    int read = 0;
    for (int i = 0; i < NCONN; i++) {
        char *v = fd[i] >= 0 ? tsw_blob(fd[i], 5000, NULL) : NULL;
        read += v && strcmp(v, "open") == 0;
        free(v);
        if (fd[i] >= 0)
            close(fd[i]);
    }
    CHECK_EQ(read, NCONN);
    if (setter >= 0)
        close(setter);
    tsw_free(&b);
}

/* NCONN connections arrive at one BARRIER of world NCONN at once (their adds combined): none is released
 * before the last arrives, every one is released then, and the count reads NCONN. */
static void t_barrier(uint16_t port)
{
    int fd[NCONN];
    struct tsw_buf b = {0};
    for (int i = 0; i < NCONN; i++) {
        fd[i] = tsw_open(port);
        CHECK(fd[i] >= 0);
        if (i == NCONN - 1)
            CHECK(fd[0] < 0 || tsw_quiet(fd[0], 300)); /* NCONN - 1 arrived: nobody released */
        tsw_u8(&b, TSW_BARRIER);
        tsw_str(&b, "bar");
        tsw_u64(&b, NCONN);
        if (fd[i] >= 0)
            CHECK_EQ(tsw_send(fd[i], &b), 0);
        b.n = 0;
    }
    int released = 0;
    for (int i = 0; i < NCONN; i++)
        released += fd[i] >= 0 && tsw_byte(fd[i], 10000) == 0; /* STOP_WAITING */
    CHECK_EQ(released, NCONN);
    if (fd[0] >= 0) {
        CHECK_EQ(tsw_req(fd[0], TSW_GET, "bar", NULL), 0);
        char *v = tsw_blob(fd[0], 5000, NULL), want[16];
        snprintf(want, sizeof want, "%d", NCONN);
        CHECK(v && strcmp(v, want) == 0);
        free(v);
    }
    for (int i = 0; i < NCONN; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    tsw_free(&b);
}

/* A native client's handle on the store the worker named, with the torch key prefix of its generation in
 * prefix; NULL when it cannot connect. */
static muster_t *outside_handle(char *prefix, size_t n)
{
    char line[1200], url[1024];
    unsigned long long gen = 0;
    if (sscanf(hr_out_file("store", line, sizeof line), "%1023s %llu", url, &gen) != 2)
        return NULL;
    snprintf(prefix, n, "torch/%llu/", gen);
    return muster_connect(url, NULL);
}

/* Set key (under prefix) through m. */
static void outside_set(muster_t *m, const char *prefix, const char *key, const char *value)
{
    char k[256];
    snprintf(k, sizeof k, "%s%s", prefix, key);
    CHECK_EQ(muster_set(m, k, value, strlen(value), 5000), MUSTER_OK);
}

/* Parked requests are released by writes that never pass through the relay: a native client sets the keys
 * of single-key and two-key WAITs and adds to a BARRIER's count, one step at a time, and each request is
 * answered exactly when its condition holds. */
static void t_outside(uint16_t port)
{
    char prefix[64];
    muster_t *m = outside_handle(prefix, sizeof prefix);
    int one = tsw_open(port), two = tsw_open(port), bar = tsw_open(port);
    CHECK(m && one >= 0 && two >= 0 && bar >= 0);
    if (!m || one < 0 || two < 0 || bar < 0)
        goto out;
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_WAIT);
    tsw_u64(&b, 1);
    tsw_str(&b, "out/a");
    CHECK_EQ(tsw_send(one, &b), 0);
    b.n = 0;
    tsw_u8(&b, TSW_WAIT);
    tsw_u64(&b, 2);
    tsw_str(&b, "out/a");
    tsw_str(&b, "out/b");
    CHECK_EQ(tsw_send(two, &b), 0);
    b.n = 0;
    tsw_u8(&b, TSW_BARRIER);
    tsw_str(&b, "out/bar");
    tsw_u64(&b, 3);
    CHECK_EQ(tsw_send(bar, &b), 0);
    tsw_free(&b);
    CHECK(tsw_quiet(one, 300) && tsw_quiet(two, 5) && tsw_quiet(bar, 5));
    outside_set(m, prefix, "out/a", "1");
    CHECK_EQ(tsw_byte(one, 5000), 0); /* STOP_WAITING */
    CHECK(tsw_quiet(two, 200));       /* out/b is still missing */
    outside_set(m, prefix, "out/b", "1");
    CHECK_EQ(tsw_byte(two, 5000), 0);
    char k[128];
    int64_t v = 0;
    snprintf(k, sizeof k, "%sout/bar", prefix);
    CHECK_EQ(muster_add(m, k, 1, &v, 5000), MUSTER_OK); /* 2 of 3 */
    CHECK(tsw_quiet(bar, 200));
    CHECK_EQ(muster_add(m, k, 1, &v, 5000), MUSTER_OK); /* 3 of 3 */
    CHECK_EQ(v, 3);
    CHECK_EQ(tsw_byte(bar, 5000), 0);
out:
    muster_close(m);
    if (one >= 0)
        close(one);
    if (two >= 0)
        close(two);
    if (bar >= 0)
        close(bar);
}

/* Requests of one QUEUE_POP key: the length before, then the value when there was one. */
static char *pop_value(int fd)
{
    int ok = 0;
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_QUEUE_POP);
    tsw_str(&b, "jobs");
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    int64_t before = tsw_i64(fd, 5000, &ok);
    return ok && before > 0 ? tsw_blob(fd, 5000, NULL) : NULL;
}

/* Blocking pops through the relay (WAIT, then QUEUE_POP, as torch's queue_pop does): NQ workers wait on
 * one queue key (their waits combined upstream); each push of a native client releases exactly one of
 * them, which pops the value pushed; the others stay parked; every value goes to exactly one worker. */
#define NQ 6
static void t_queue_waiters(uint16_t port)
{
    char prefix[64], k[128];
    muster_t *m = outside_handle(prefix, sizeof prefix);
    int fd[NQ], got[NQ] = {0};
    struct tsw_buf b = {0};
    CHECK(m != NULL);
    if (!m)
        return;
    snprintf(k, sizeof k, "%sjobs", prefix);
    for (int i = 0; i < NQ; i++) {
        fd[i] = tsw_open(port);
        CHECK(fd[i] >= 0);
        tsw_u8(&b, TSW_WAIT);
        tsw_u64(&b, 1);
        tsw_str(&b, "jobs");
        if (fd[i] >= 0)
            CHECK_EQ(tsw_send(fd[i], &b), 0);
        b.n = 0;
    }
    tsw_free(&b);
    CHECK(fd[0] < 0 || tsw_quiet(fd[0], 300));
    int released_total = 0;
    for (int round = 0; round < NQ; round++) {
        char v[16];
        uint64_t len;
        snprintf(v, sizeof v, "job%d", round);
        CHECK_EQ(muster_queue_push(m, k, v, strlen(v), &len, 5000), MUSTER_OK);
        /* Exactly one waiter is released (its STOP_WAITING comes), and it pops this value. */
        int released = -1, extra = 0;
        for (int tries = 0; tries < 250 && released < 0; tries++)
            for (int i = 0; i < NQ; i++)
                if (fd[i] >= 0 && !got[i] && tsw_byte(fd[i], 1) == 0)
                    released = i;
        CHECK(released >= 0);
        if (released < 0)
            break;
        for (int i = 0; i < NQ; i++)
            if (i != released && fd[i] >= 0 && !got[i])
                extra += !tsw_quiet(fd[i], 20);
        CHECK_EQ(extra, 0);
        char *popped = pop_value(fd[released]);
        CHECK_STR(popped, v);
        free(popped);
        got[released] = 1;
        released_total++;
    }
    CHECK_EQ(released_total, NQ);
    for (int i = 0; i < NQ; i++)
        if (fd[i] >= 0)
            close(fd[i]);
    muster_close(m);
}

/* A worker sends an unknown type byte in the middle of others' traffic: it is closed, the others'
 * ADDs and a waiter are answered. */
static void t_garbage(uint16_t port)
{
    int bad = tsw_open(port), good = tsw_open(port), waiter = tsw_open(port);
    CHECK(bad >= 0 && good >= 0 && waiter >= 0);
    if (bad < 0 || good < 0 || waiter < 0)
        return;
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_WAIT);
    tsw_u64(&b, 1);
    tsw_str(&b, "late");
    CHECK_EQ(tsw_send(waiter, &b), 0);
    add_req(&b, "g", 1);
    add_req(&b, "g", 1);
    CHECK_EQ(tsw_send(good, &b), 0);
    add_req(&b, "g", 1);
    tsw_raw(&b, "\xee\xee\xee\xee", 4);
    CHECK_EQ(tsw_send(bad, &b), 0);
    tsw_free(&b);
    CHECK(tsw_closed(bad, 5000));
    int ok = 0;
    int64_t a = tsw_i64(good, 5000, &ok), c = tsw_i64(good, 5000, &ok);
    CHECK(ok && a >= 1 && c == a + 1 && c <= 3);
    CHECK_EQ(tsw_req(good, TSW_SET, "late", "x", NULL), 0);
    CHECK_EQ(tsw_byte(waiter, 5000), 0);
    close(bad);
    close(good);
    close(waiter);
}

/* The cases against one launcher's relay, then its report: a refused worker and what was combined. */
static void t_relay(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    static char buf[1 << 16];
    hr_fresh_out("relay");
    const char *w = hr_script("relay.sh", relay_worker);
    hr_launch(&l, "relay", (const char *[]){"--standalone", w, NULL});
    char pbuf[32];
    unsigned port = 0;
    CHECK(hr_await_file("port", 15000) && sscanf(hr_out_file("port", pbuf, sizeof pbuf), "%u", &port) == 1);
    if (port) {
        t_combine((uint16_t)port);
        t_add_overflow((uint16_t)port);
        t_pipeline((uint16_t)port);
        t_waiters((uint16_t)port);
        t_barrier((uint16_t)port);
        t_outside((uint16_t)port);
        t_queue_waiters((uint16_t)port);
        t_garbage((uint16_t)port);
    }
    hr_touch("go");
    CHECK_EQ(hr_finish(&l, 20000), 0);
    hr_slurp(l.err, buf, sizeof buf);
    CHECK(strstr(buf, "bad_request 1,") != NULL);
    const char *line = strstr(buf, "upstream calls ");
    unsigned long long req = 0, calls = 0, adds = 0;
    CHECK(line != NULL);
    if (line) {
        while (line > buf && line[-1] != '\n')
            line--;
        CHECK(sscanf(strstr(line, "requests "), "requests %llu, upstream calls %llu, combined: adds %llu", &req,
                     &calls, &adds) == 3);
        printf("  relay: %llu requests, %llu upstream calls, %llu adds combined\n", req, calls, adds);
    }
    CHECK(adds > 0);
    CHECK(calls < req);
    hr_show(&l, before);
}

int main(void)
{
    h_init("rdzv_run_relay", 150);
    hr_cli = getenv("MUSTER_TEST_CLI");
    if (!hr_cli || !*hr_cli)
        h_skip("MUSTER_TEST_CLI is not set");
    H_RUN(t_relay, NULL);
    return h_finish();
}
