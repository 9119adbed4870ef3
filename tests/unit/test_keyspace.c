/*
 * Unit tests of the daemon's keyspace (store-server/core/keyspace.c): binary-safe
 * keys, values owned once, add/append/compare_set rules, the change hook,
 * the per-namespace limits with their counters, and the table under it
 * (store-server/core/ktable.c): growth while entries are being moved, delete
 * churn, forced collisions, and iteration that sees every key once.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ktable.h"
#include "keyspace.h"
#include "muster.pb-c.h"
#include "stats.h"

/* What the change hook saw. */
struct t_hook {
    int sets, deletes;
    char last_key[64];
};

/* Change hook: count calls and remember the key. */
static void t_hook_fn(void *arg, enum ks_change what, const char *key, size_t klen, const struct ks_entry *e)
{
    struct t_hook *h = arg;
    if (what == KS_SET) {
        h->sets++;
        if (!e)
            h->sets += 1000;
    } else {
        h->deletes++;
    }
    if (klen < sizeof h->last_key) {
        memcpy(h->last_key, key, klen);
        h->last_key[klen] = 0;
    }
}

/* Expect key to hold exactly the bytes want (NULL: absent). */
static void t_expect(const struct keyspace *ks, const char *key, size_t klen, const char *want, size_t wlen)
{
    const struct ks_entry *e = ks_get(ks, key, klen);
    if (!want) {
        CHECK(e == NULL);
        return;
    }
    CHECK(e != NULL);
    if (e) {
        CHECK_MEM(ks_val(e), e->vlen, want, wlen);
        CHECK_EQ(e->klen, klen);
        CHECK(e->key[klen] == 0);
    }
}

/* set, get, replace, delete, binary keys, empty values, and the hook. */
static void t_basics(void *unused)
{
    struct stats st = {0};
    struct t_hook h = {0};
    struct keyspace ks;
    uint8_t *owned = malloc(3);
    (void)unused;
    ks_init(&ks, 100, 1 << 20, 1024, &st, t_hook_fn, &h);
    CHECK_EQ(ks_set(&ks, "a", 1, (uint8_t *)"one", 3, 0), MUSTER__STATUS__OK);
    t_expect(&ks, "a", 1, "one", 3);
    CHECK_EQ(h.sets, 1);
    CHECK_STR(h.last_key, "a");
    CHECK_EQ(ks_set(&ks, "a", 1, (uint8_t *)"uno", 3, 0), MUSTER__STATUS__OK);
    t_expect(&ks, "a", 1, "uno", 3);
    CHECK_EQ(ks_count(&ks), 1);
    memcpy(owned, "x\0y", 3);
    CHECK_EQ(ks_set(&ks, "k\0z", 3, owned, 3, 1), MUSTER__STATUS__OK);
    t_expect(&ks, "k\0z", 3, "x\0y", 3);
    t_expect(&ks, "k", 1, NULL, 0);
    CHECK_EQ(ks_set(&ks, "empty", 5, NULL, 0, 0), MUSTER__STATUS__OK);
    t_expect(&ks, "empty", 5, "", 0);
    CHECK_EQ(ks_count(&ks), 3);
    CHECK_EQ(ks_delete(&ks, "a", 1), 1);
    CHECK_EQ(ks_delete(&ks, "a", 1), 0);
    CHECK_EQ(h.deletes, 1);
    t_expect(&ks, "a", 1, NULL, 0);
    CHECK_EQ(ks_count(&ks), 2);
    ks_fini(&ks);
}

/* add: absent counts as 0, decimal text stored, text and overflow refused. */
static void t_add(void *unused)
{
    struct stats st = {0};
    struct keyspace ks;
    int64_t out = 0;
    (void)unused;
    ks_init(&ks, 100, 1 << 20, 1024, &st, NULL, NULL);
    CHECK_EQ(ks_add(&ks, "n", 1, 7, &out), MUSTER__STATUS__OK);
    CHECK_EQ(out, 7);
    CHECK_EQ(ks_add(&ks, "n", 1, -10, &out), MUSTER__STATUS__OK);
    CHECK_EQ(out, -3);
    t_expect(&ks, "n", 1, "-3", 2);
    CHECK_EQ(ks_set(&ks, "t", 1, (uint8_t *)"12x", 3, 0), MUSTER__STATUS__OK);
    CHECK_EQ(ks_add(&ks, "t", 1, 1, &out), MUSTER__STATUS__NOT_A_NUMBER);
    t_expect(&ks, "t", 1, "12x", 3);
    CHECK_EQ(ks_set(&ks, "max", 3, (uint8_t *)"9223372036854775807", 19, 0), MUSTER__STATUS__OK);
    CHECK_EQ(ks_add(&ks, "max", 3, 1, &out), MUSTER__STATUS__OVERFLOW);
    CHECK_EQ(ks_set(&ks, "min", 3, (uint8_t *)"-9223372036854775808", 20, 0), MUSTER__STATUS__OK);
    CHECK_EQ(ks_add(&ks, "min", 3, -1, &out), MUSTER__STATUS__OVERFLOW);
    CHECK_EQ(ks_add(&ks, "min", 3, 0, &out), MUSTER__STATUS__OK);
    CHECK(out == INT64_MIN);
    ks_fini(&ks);
}

/* append creates and extends; compare_set follows TCPStore's rules. */
static void t_append_cas(void *unused)
{
    struct stats st = {0};
    struct keyspace ks;
    const struct ks_entry *e = NULL;
    size_t len = 0;
    int sw = -1;
    (void)unused;
    ks_init(&ks, 100, 1 << 20, 1024, &st, NULL, NULL);
    CHECK_EQ(ks_append(&ks, "p", 1, (uint8_t *)"ab", 2, &len), MUSTER__STATUS__OK);
    CHECK_EQ(len, 2);
    CHECK_EQ(ks_append(&ks, "p", 1, (uint8_t *)"cd", 2, &len), MUSTER__STATUS__OK);
    CHECK_EQ(len, 4);
    t_expect(&ks, "p", 1, "abcd", 4);
    CHECK_EQ(ks_compare_set(&ks, "c", 1, NULL, 0, (uint8_t *)"v1", 2, &e, &sw), MUSTER__STATUS__OK);
    CHECK_EQ(sw, 1);
    t_expect(&ks, "c", 1, "v1", 2);
    CHECK_EQ(ks_compare_set(&ks, "c", 1, (uint8_t *)"no", 2, (uint8_t *)"v2", 2, &e, &sw), MUSTER__STATUS__OK);
    CHECK_EQ(sw, 0);
    CHECK(e != NULL && e->vlen == 2 && memcmp(ks_val(e), "v1", 2) == 0);
    CHECK_EQ(ks_compare_set(&ks, "c", 1, (uint8_t *)"v1", 2, (uint8_t *)"v2", 2, &e, &sw), MUSTER__STATUS__OK);
    CHECK_EQ(sw, 1);
    t_expect(&ks, "c", 1, "v2", 2);
    e = (const struct ks_entry *)&ks;
    CHECK_EQ(ks_compare_set(&ks, "absent", 6, (uint8_t *)"x", 1, (uint8_t *)"y", 1, &e, &sw), MUSTER__STATUS__OK);
    CHECK_EQ(sw, 0);
    CHECK(e == NULL);
    t_expect(&ks, "absent", 6, NULL, 0);
    ks_fini(&ks);
}

/* Key count, byte and value limits answer LIMIT, count the trip, and leave the store unchanged. */
static void t_limits(void *unused)
{
    struct stats st = {0};
    struct keyspace ks;
    uint8_t *owned;
    char val[64];
    size_t len = 0;
    (void)unused;
    memset(val, 'v', sizeof val);
    ks_init(&ks, 3, 80, 32, &st, NULL, NULL);
    CHECK_EQ(ks_set(&ks, "a", 1, (uint8_t *)val, 10, 0), MUSTER__STATUS__OK);
    CHECK_EQ(ks_set(&ks, "b", 1, (uint8_t *)val, 10, 0), MUSTER__STATUS__OK);
    CHECK_EQ(ks_set(&ks, "c", 1, (uint8_t *)val, 10, 0), MUSTER__STATUS__OK);
    CHECK_EQ(ks_set(&ks, "d", 1, (uint8_t *)val, 1, 0), MUSTER__STATUS__LIMIT);
    CHECK_EQ(st.c[STAT_LIMIT_KEYS_PER_NS], 1);
    CHECK_EQ(ks_count(&ks), 3);
    CHECK_EQ(ks_set(&ks, "a", 1, (uint8_t *)val, 33, 0), MUSTER__STATUS__LIMIT);
    CHECK_EQ(st.c[STAT_LIMIT_VALUE], 1);
    t_expect(&ks, "a", 1, val, 10);
    /* Bytes count key + value: 3 x 11 = 33; a and b at 32 make 33 + 33 + 11 = 77 <= 80. */
    CHECK_EQ(ks_set(&ks, "a", 1, (uint8_t *)val, 32, 0), MUSTER__STATUS__OK);
    CHECK_EQ(ks_set(&ks, "b", 1, (uint8_t *)val, 32, 0), MUSTER__STATUS__OK);
    /* c at 30 would make 97 > 80. */
    CHECK_EQ(ks_set(&ks, "c", 1, (uint8_t *)val, 30, 0), MUSTER__STATUS__LIMIT);
    CHECK_EQ(st.c[STAT_LIMIT_BYTES_PER_NS], 1);
    t_expect(&ks, "c", 1, val, 10);
    CHECK_EQ(ks_append(&ks, "c", 1, (uint8_t *)val, 5, &len), MUSTER__STATUS__LIMIT);
    t_expect(&ks, "c", 1, val, 10);
    CHECK_EQ(ks_append(&ks, "c", 1, (uint8_t *)val, 3, &len), MUSTER__STATUS__OK);
    CHECK_EQ(len, 13);
    /* A refused write that was handed ownership frees it (ASan checks). */
    owned = malloc(40);
    memset(owned, 'z', 40);
    CHECK_EQ(ks_set(&ks, "e", 1, owned, 40, 1), MUSTER__STATUS__LIMIT);
    CHECK_EQ(ks_count(&ks), 3);
    ks_fini(&ks);
}

/* ------------------------------------------------- table-level checks */

/* Longest key t_key makes, with its NUL. */
#define T_KEYMAX 40

/* Key number i: variable length (3 to 28 bytes) so hashing sees whole and partial words. */
static size_t t_key(unsigned i, char *buf)
{
    return (size_t)snprintf(buf, T_KEYMAX, "k%u-%.*s", i, (int)(i % 21), "xxxxxxxxxxxxxxxxxxxxx");
}

/* Fill buf with the first len bytes of key i's value pattern (so appends just continue it). */
static void t_pattern(unsigned i, size_t from, size_t len, uint8_t *buf)
{
    for (size_t j = 0; j < len; j++)
        buf[j] = (uint8_t)(i * 7 + from + j);
}

/* The model: value length per key number, -1 for absent. */
struct t_model {
    long *len;
    unsigned n;
    unsigned *seen;
};

/* ks_each callback: count one sighting of the key's number. */
static int t_seen_fn(void *arg, const struct ks_entry *e)
{
    struct t_model *m = arg;
    unsigned i = (unsigned)strtoul(e->key + 1, NULL, 10);
    if (i < m->n)
        m->seen[i]++;
    else
        CHECK(!"key number out of range");
    return 0;
}

/* Check every modelled key's value, the count, and that iteration meets each key exactly once. */
static void t_verify(const struct keyspace *ks, struct t_model *m)
{
    char key[T_KEYMAX];
    uint8_t want[512];
    size_t present = 0, bad = 0, badseen = 0;
    memset(m->seen, 0, m->n * sizeof *m->seen);
    CHECK_EQ(ks_each(ks, t_seen_fn, m), 0);
    for (unsigned i = 0; i < m->n; i++) {
        size_t klen = t_key(i, key);
        const struct ks_entry *e = ks_get(ks, key, klen);
        if (m->len[i] < 0) {
            bad += e != NULL;
            badseen += m->seen[i] != 0;
            continue;
        }
        present++;
        badseen += m->seen[i] != 1;
        t_pattern(i, 0, (size_t)m->len[i], want);
        if (!e || e->vlen != (uint32_t)m->len[i] || memcmp(ks_val(e), want, e->vlen) != 0 || e->klen != klen)
            bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(badseen, 0);
    CHECK_EQ(ks_count(ks), present);
    CHECK_EQ(ktable_count(&ks->table), present);
}

/* Set key i of the model to a fresh value of len bytes. */
static void t_model_set(struct keyspace *ks, struct t_model *m, unsigned i, size_t len)
{
    char key[T_KEYMAX];
    uint8_t val[512];
    t_pattern(i, 0, len, val);
    CHECK_EQ(ks_set(ks, key, t_key(i, key), val, len, 0), MUSTER__STATUS__OK);
    m->len[i] = (long)len;
}

/* A model of n keys, all absent. */
static void t_model_init(struct t_model *m, unsigned n)
{
    m->n = n;
    m->len = malloc(n * sizeof *m->len);
    m->seen = calloc(n, sizeof *m->seen);
    for (unsigned i = 0; i < n; i++)
        m->len[i] = -1;
}

/* Free a model. */
static void t_model_free(struct t_model *m)
{
    free(m->len);
    free(m->seen);
}

/* Growth: 200k keys through many doublings, checked (values, count, each-once) while entries are
 * still being moved out of the old array, and the table stays within its load bounds. */
static void t_growth(void *unused)
{
    struct stats st = {0};
    struct keyspace ks;
    struct t_model m;
    int checked_mid_move = 0;
    (void)unused;
    ks_init(&ks, UINT64_MAX, UINT64_MAX, 1024, &st, NULL, NULL);
    t_model_init(&m, 200000);
    for (unsigned i = 0; i < m.n; i++) {
        t_model_set(&ks, &m, i, i % 97);
        if (ks.table.old && ks.table.cursor > 0 && checked_mid_move < 3 && i > 1000) {
            t_verify(&ks, &m);
            checked_mid_move++;
        }
    }
    CHECK(checked_mid_move > 0);
    t_verify(&ks, &m);
    /* Settled (nothing left to move), the array is between 1.25 and 2.5 slots per key. */
    for (unsigned i = 0; i < m.n && ks.table.old; i++)
        t_model_set(&ks, &m, i, i % 97);
    CHECK(ks.table.old == NULL);
    size_t slots = ktable_bytes(&ks.table) / sizeof(uintptr_t);
    CHECK(slots * 4 >= ks_count(&ks) * 5);
    CHECK(slots * 2 <= ks_count(&ks) * 5);
    ks_fini(&ks);
    t_model_free(&m);
}

/* A small deterministic generator for the churn test. */
static uint32_t t_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

/* Run ops random set/append/delete steps on a model of n keys, verifying every `every` steps. */
static void t_churn_run(struct keyspace *ks, unsigned n, unsigned ops, unsigned every)
{
    struct t_model m;
    uint64_t rs = 42;
    char key[T_KEYMAX];
    uint8_t val[512];
    size_t len = 0;
    t_model_init(&m, n);
    for (unsigned k = 0; k < ops; k++) {
        unsigned i = t_rand(&rs) % n, what = t_rand(&rs) % 10;
        size_t klen = t_key(i, key);
        if (what < 5) { /* delete-heavy: half of all steps */
            CHECK_EQ(ks_delete(ks, key, klen), m.len[i] >= 0);
            m.len[i] = -1;
        } else if (what < 8 || m.len[i] > 400) {
            t_model_set(ks, &m, i, t_rand(&rs) % 300);
        } else {
            size_t have = m.len[i] < 0 ? 0 : (size_t)m.len[i], add = t_rand(&rs) % 100;
            t_pattern(i, have, add, val);
            CHECK_EQ(ks_append(ks, key, klen, val, add, &len), MUSTER__STATUS__OK);
            CHECK_EQ(len, have + add);
            m.len[i] = (long)(have + add);
        }
        if ((k + 1) % every == 0)
            t_verify(ks, &m);
    }
    t_verify(ks, &m);
    for (unsigned i = 0; i < n; i++)
        if (m.len[i] >= 0)
            CHECK_EQ(ks_delete(ks, key, t_key(i, key)), 1);
    CHECK_EQ(ks_count(ks), 0);
    CHECK_EQ(ks->bytes, 0);
    t_model_free(&m);
}

/* Delete-heavy churn over 3000 keys: backward-shift deletion keeps every run findable. */
static void t_churn(void *unused)
{
    struct stats st = {0};
    struct keyspace ks;
    (void)unused;
    ks_init(&ks, UINT64_MAX, UINT64_MAX, 1024, &st, NULL, NULL);
    t_churn_run(&ks, 3000, 200000, 20000);
    ks_fini(&ks);
}

/* A terrible hash: two values only, one of which homes every key at the last slot (wrapping). */
static uint64_t t_bad_hash(const char *key, size_t klen, uint64_t seed)
{
    (void)seed;
    return (key[klen - 1] & 1) ? UINT64_MAX : 0;
}

/* Forced collisions: the same churn with every key in one or two probe runs, wrapping the array. */
static void t_collide(void *unused)
{
    struct stats st = {0};
    struct keyspace ks;
    (void)unused;
    ks_init(&ks, UINT64_MAX, UINT64_MAX, 1024, &st, NULL, NULL);
    ks_set_hash(&ks, t_bad_hash);
    t_churn_run(&ks, 400, 20000, 1000);
    ks_fini(&ks);
}

/* An entry moves when its value outgrows its chunk and gives room back when it shrinks a lot. */
static void t_resize(void *unused)
{
    struct stats st = {0};
    struct keyspace ks;
    static uint8_t big[4000];
    (void)unused;
    memset(big, 'b', sizeof big);
    ks_init(&ks, 10, 1 << 20, sizeof big, &st, NULL, NULL);
    CHECK_EQ(ks_set(&ks, "r", 1, (uint8_t *)"s", 1, 0), MUSTER__STATUS__OK);
    CHECK_EQ(ks_set(&ks, "r", 1, big, sizeof big, 0), MUSTER__STATUS__OK);
    t_expect(&ks, "r", 1, (const char *)big, sizeof big);
    CHECK_EQ(ks_set(&ks, "r", 1, (uint8_t *)"tiny", 4, 0), MUSTER__STATUS__OK);
    t_expect(&ks, "r", 1, "tiny", 4);
    CHECK(malloc_usable_size((void *)(uintptr_t)ks_get(&ks, "r", 1)) < 256);
    CHECK_EQ(ks.bytes, 5);
    ks_fini(&ks);
}

/* Run the keyspace tests. */
int main(void)
{
    h_init("unit-keyspace", 30);
    H_RUN(t_basics, NULL);
    H_RUN(t_add, NULL);
    H_RUN(t_append_cas, NULL);
    H_RUN(t_limits, NULL);
    H_RUN(t_growth, NULL);
    H_RUN(t_churn, NULL);
    H_RUN(t_collide, NULL);
    H_RUN(t_resize, NULL);
    return h_finish();
}
