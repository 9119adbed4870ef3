/*
 * libFuzzer target for the TCPStore front end with several connections:
 * an input is a script of steps, each acting on one of four TCPStore
 * connections of a fresh in-process server (fuzz_net.c) - any request of
 * either numbering with keys, values, lists and counts drawn from small
 * tables (so WAITs meet SETs, BARRIERs fill, queues are pushed and popped
 * under parked WAITs, CANCEL_WAIT races its wait), raw bytes, close,
 * half-close, stop reading, or a few milliseconds for deadlines.
 *
 * A connection speaks the VALIDATE-era numbering when the step that opens
 * it is VALIDATE, else the older one (the script's op is then sent under
 * its old type byte where it has one).  At the end every client closes,
 * and then no connection, parked WAIT or BARRIER, or queue waiter may be
 * left, by the front end's books and by the server's.
 *
 * Steps are encoded as fuzz_script.h says.
 */
#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_net.h"
#include "fuzz_script.h"
#include "ns.h"
#include "server.h"
#include "tcpstore.h"
#include "tcpstore_int.h"

_Static_assert(TA_CLOSE == TS_BARRIER + 1, "the connection-level actions follow the ops");

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Steps run per input; the rest is ignored. */
#define TF_MAX_STEPS 192
/* Milliseconds one input may sleep in all. */
#define TF_SLEEP_BUDGET 8

/* The daemon's settings: low bounds and short deadlines; the listener binds a free loopback port. */
static char *tf_argv[] = {"musterd-fuzz", "--log-level", "error", "--tcpstore-listen", "127.0.0.1:0",
                          "--tcpstore-max-key", "256", "--tcpstore-max-value", "4K",
                          "--tcpstore-max-keys-per-request", "8", "--tcpstore-max-request", "8K",
                          "--max-value", "4K", "--max-key", "256", "--max-frame", "8K", "--max-output", "8K",
                          "--slow-timeout", "10", "--request-timeout", "6", "--tcpstore-validate-timeout", "6",
                          "--max-waiters-per-conn", "2", "--max-keys-per-ns", "64", NULL};

struct tf_state {
    struct fz_net net;
    int era[FZ_CONNS];     /* the numbering each client speaks */
    int opened[FZ_CONNS];  /* fz_client generation the era belongs to */
    int batch;
    int slept;
};

/* A growing request. */
struct tf_buf {
    uint8_t p[16384];
    size_t n;
};

/* Append n bytes (silently cut when the request would not fit: it is then malformed, which is fine). */
static void tf_raw(struct tf_buf *b, const void *p, size_t n)
{
    if (n > sizeof b->p - b->n)
        n = sizeof b->p - b->n;
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* Append a little-endian integer of n bytes. */
static void tf_le(struct tf_buf *b, uint64_t v, size_t n)
{
    uint8_t le[8];
    for (size_t i = 0; i < n; i++)
        le[i] = (uint8_t)(v >> (8 * i));
    tf_raw(b, le, n);
}

/* Append a length-prefixed string. */
static void tf_str(struct tf_buf *b, const void *p, size_t n)
{
    tf_le(b, n, 8);
    tf_raw(b, p, n);
}

/* Append key i: ordinary ones, a queue, a barrier, empty, one with a NUL, one over --tcpstore-max-key. */
static void tf_key(struct tf_buf *b, unsigned i)
{
    static char longkey[300];
    static const char *const keys[] = {"a", "b", "c", "q", "bar", "", "n\0ul", longkey};
    static const size_t lens[] = {1, 1, 1, 1, 3, 0, 4, sizeof longkey};
    if (!longkey[0])
        memset(longkey, 'k', sizeof longkey);
    tf_str(b, keys[i & 7], lens[i & 7]);
}

/* Append value i: numbers, text, empty, binary, exactly --tcpstore-max-value, one byte over. */
static void tf_val(struct tf_buf *b, unsigned i)
{
    static uint8_t big[4097];
    static const char *const small[] = {"1", "-7", "x", "", "9223372036854775807", "a\0b"};
    static const size_t lens[] = {1, 2, 1, 0, 19, 3};
    i &= 7;
    if (!big[0])
        memset(big, 'v', sizeof big);
    if (i < 6)
        tf_str(b, small[i], lens[i]);
    else
        tf_str(b, big, i == 6 ? 4096 : 4097);
}

/* The older numbering's type byte for op, or the VALIDATE-era byte where it has none. */
static uint8_t tf_legacy_code(int op)
{
    static const signed char map[TS_NOPS] = {
        [TS_SET] = 0, [TS_COMPARE_SET] = 1, [TS_GET] = 2, [TS_ADD] = 3, [TS_CHECK] = 4, [TS_WAIT] = 5,
        [TS_GETNUMKEYS] = 6, [TS_DELETE_KEY] = 8, [TS_APPEND] = 9, [TS_MULTI_GET] = 10, [TS_MULTI_SET] = 11,
        [TS_CANCEL_WAIT] = 12,
    };
    return op == TS_SET || map[op] ? (uint8_t)map[op] : (uint8_t)op;
}

/* Build request op (arguments k, x, v) for a client speaking era into b. */
static void tf_build(struct tf_buf *b, int op, int era, unsigned k, unsigned x, unsigned v)
{
    uint8_t code = era == TS_ERA_VALIDATE ? (uint8_t)op : tf_legacy_code(op);
    unsigned n = 0;
    tf_raw(b, &code, 1);
    switch (op) {
    case TS_VALIDATE:
        tf_le(b, x & 1 ? 0x12345678u : TS_MAGIC, 4);
        break;
    case TS_PING:
        tf_le(b, x, 4);
        break;
    case TS_SET:
    case TS_APPEND:
    case TS_QUEUE_PUSH:
        tf_key(b, k);
        tf_val(b, v);
        break;
    case TS_COMPARE_SET:
        tf_key(b, k);
        tf_val(b, x);
        tf_val(b, v);
        break;
    case TS_GET:
    case TS_DELETE_KEY:
    case TS_QUEUE_POP:
    case TS_QUEUE_LEN:
        tf_key(b, k);
        break;
    case TS_ADD:
        tf_key(b, k);
        tf_le(b, x & 0x80 ? (uint64_t)INT64_MAX : (uint64_t)(int64_t)(int8_t)v, 8);
        break;
    case TS_BARRIER:
        tf_key(b, k);
        tf_le(b, (uint64_t)(int64_t)(int8_t)x, 8);
        break;
    case TS_CHECK:
    case TS_WAIT:
    case TS_MULTI_GET:
    case TS_MULTI_SET:
        for (unsigned bit = 0; bit < 8; bit++)
            n += (k >> bit) & 1;
        tf_le(b, n, 8);
        for (unsigned bit = 0; bit < 8; bit++) {
            if (!((k >> bit) & 1))
                continue;
            tf_key(b, bit);
            if (op == TS_MULTI_SET)
                tf_val(b, v + bit);
        }
        break;
    default: /* GETNUMKEYS, CANCEL_WAIT, LIST_KEYS: no fields */
        break;
    }
}

/* Send request op as client i, opening it first (its numbering is fixed by what opens it). */
static void tf_request(struct tf_state *s, int i, int op, unsigned k, unsigned x, unsigned v)
{
    static struct tf_buf b;
    fz_open(&s->net, i);
    if (s->opened[i] != s->net.c[i].generation) {
        s->opened[i] = s->net.c[i].generation;
        s->era[i] = op == TS_VALIDATE ? TS_ERA_VALIDATE : TS_ERA_LEGACY;
    }
    b.n = 0;
    tf_build(&b, op, s->era[i], k, x, v);
    fz_send(&s->net, i, b.p, b.n);
}

/* Run one step at data (size bytes left); returns the bytes it took. */
static size_t tf_step(struct tf_state *s, const uint8_t *data, size_t size)
{
    int i = data[0] & 3;
    int a = (data[0] >> 2) % TA_NACTIONS;
    unsigned k = size > 1 ? data[1] : 0, x = size > 2 ? data[2] : 0, v = size > 3 ? data[3] : 0;
    size_t used = size < 4 ? size : 4;
    switch (a) {
    case TA_CLOSE:
        fz_close(&s->net, i);
        break;
    case TA_HALF_CLOSE:
        fz_shutdown(&s->net, i);
        break;
    case TA_DEAF:
        s->net.c[i].deaf = !s->net.c[i].deaf;
        break;
    case TA_TICK:
        if (s->slept + 1 + (int)(x & 3) <= TF_SLEEP_BUDGET) {
            s->slept += 1 + (int)(x & 3);
            fz_tick(&s->net, 1 + (int)(x & 3));
        }
        break;
    case TA_RAW: {
        size_t n = k & 31;
        if (n > size - used)
            n = size - used;
        fz_send(&s->net, i, data + used, n);
        used += n;
        break;
    }
    case TA_BATCH:
        s->batch = !s->batch;
        break;
    default:
        tf_request(s, i, a, k, x, v);
        break;
    }
    if (!s->batch)
        fz_pump(&s->net, 16);
    return used;
}

/* Forget every reply byte (TCPStore replies carry no ids to check). */
static size_t tf_consume(struct fz_net *net, int i)
{
    return net->c[i].nin;
}

/* Abort unless the front end holds no connection or parked request (WAIT, queue WAIT or BARRIER: all core
 * waiters, linked to the keys they miss). */
static void tf_check(struct server *srv)
{
    struct tcpstore *ts = srv->tcpstore;
    if (srv->nconns || srv->core.nwaiters || ts->nconns || ts->conns || srv->stats.c[STAT_TS_CURRENT])
        abort();
    if (ts->ns->nwaiters || ts->ns->waiters || ts->ns->wkeys)
        abort();
}

/* Run the script on a fresh server, close every client, and check that nothing is left. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct tf_state s;
    memset(&s, 0, sizeof s);
    s.net.consume = tf_consume;
    s.net.arg = &s;
    fz_init(&s.net, (int)(sizeof tf_argv / sizeof tf_argv[0]) - 1, tf_argv, tcpstore_accept);
    if (tcpstore_start(&s.net.srv) != 0)
        abort();
    for (int steps = 0; size && steps < TF_MAX_STEPS; steps++) {
        size_t used = tf_step(&s, data, size);
        data += used;
        size -= used;
    }
    fz_pump(&s.net, 64);
    if (fz_close_all(&s.net) != 0)
        abort();
    tf_check(&s.net.srv);
    fz_fini(&s.net);
    return 0;
}
