/*
 * Unit tests of the daemon's keyspace (store-server/keyspace.c): binary-safe
 * keys, values owned once, add/append/compare_set rules, the change hook,
 * and the per-namespace limits with their counters.
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
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
        CHECK_MEM(e->val, e->vlen, want, wlen);
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
    CHECK(e != NULL && e->vlen == 2 && memcmp(e->val, "v1", 2) == 0);
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

/* Run the keyspace tests. */
int main(void)
{
    h_init("unit-keyspace", 30);
    H_RUN(t_basics, NULL);
    H_RUN(t_add, NULL);
    H_RUN(t_append_cas, NULL);
    H_RUN(t_limits, NULL);
    return h_finish();
}
