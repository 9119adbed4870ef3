/*
 * The key-value map of one namespace (uthash keyed by the raw key bytes).
 * An entry is one allocation: header, key and the value inline, sized to
 * the malloc chunk it lands in, so small values and counters cost no second
 * allocation (a key with a 64-byte value went from two chunks, 112 + 80
 * bytes, to one of 160).  A value that outgrows the inline room gets its
 * own buffer, and a set hands over the buffer it decoded instead of copying
 * it again.  The entry never moves, so pointers to it stay valid across
 * writes.  uthash's 56-byte handle is now the largest single cost per key;
 * going below it needs an open-addressing table, whose iteration would
 * replace the hh.next walks in compact.c, kvops.c and tcpstore_ops.c.
 *
 * Every write calls the namespace's change hook, which wakes waiters and
 * watchers of that key.
 */
#include "keyspace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "muster.pb-c.h"
#include "stats.h"

/* Start an empty keyspace with its limits, counter block and change hook. */
void ks_init(struct keyspace *ks, uint64_t max_keys, uint64_t max_bytes, uint64_t max_value, struct stats *stats,
             ks_hook_fn hook, void *hook_arg)
{
    memset(ks, 0, sizeof *ks);
    ks->max_keys = max_keys;
    ks->max_bytes = max_bytes;
    ks->max_value = max_value;
    ks->stats = stats;
    ks->hook = hook;
    ks->hook_arg = hook_arg;
}

/* Where e's inline value starts (after the key and its NUL). */
static uint8_t *ks_inline(struct ks_entry *e)
{
    return (uint8_t *)e->key + e->klen + 1;
}

/* Free one entry. */
static void ks_entry_free(struct ks_entry *e)
{
    if (e->val != ks_inline(e))
        free(e->val);
    free(e);
}

/* Free every entry. */
void ks_fini(struct keyspace *ks)
{
    struct ks_entry *e, *tmp;
    HASH_ITER(hh, ks->map, e, tmp) {
        HASH_DEL(ks->map, e);
        ks_entry_free(e);
    }
    ks->count = 0;
    ks->bytes = 0;
}

/* The entry for key, or NULL. */
const struct ks_entry *ks_get(const struct keyspace *ks, const char *key, size_t klen)
{
    struct ks_entry *e = NULL;
    HASH_FIND(hh, ks->map, key, klen, e);
    return e;
}

/* Whether a write of vlen bytes to key (replacing what is there) fits the namespace limits; wire status. */
int ks_fits(struct keyspace *ks, const char *key, size_t klen, size_t vlen)
{
    const struct ks_entry *e = ks_get(ks, key, klen);
    if (vlen > ks->max_value) {
        stats_inc(ks->stats, STAT_LIMIT_VALUE);
        return MUSTER__STATUS__LIMIT;
    }
    if (!e && ks->count >= ks->max_keys) {
        stats_inc(ks->stats, STAT_LIMIT_KEYS_PER_NS);
        return MUSTER__STATUS__LIMIT;
    }
    uint64_t after = ks->bytes - (e ? e->klen + e->vlen : 0) + klen + vlen;
    if (after > ks->max_bytes) {
        stats_inc(ks->stats, STAT_LIMIT_BYTES_PER_NS);
        return MUSTER__STATUS__LIMIT;
    }
    return MUSTER__STATUS__OK;
}

/* The entry for key, created empty with inline room for vlen bytes when absent (limits already
 * checked); NULL when out of memory. */
static struct ks_entry *ks_slot(struct keyspace *ks, const char *key, size_t klen, size_t vlen)
{
    struct ks_entry *e = (struct ks_entry *)ks_get(ks, key, klen);
    if (e)
        return e;
    size_t head = offsetof(struct ks_entry, key) + klen + 1;
    /* glibc hands out 16-byte-aligned chunks with 8 bytes of overhead: round up to use the slack. */
    size_t size = (head + vlen + 8 + 15) / 16 * 16 - 8;
    e = calloc(1, size);
    if (!e)
        return NULL;
    memcpy(e->key, key, klen);
    e->klen = (uint32_t)klen;
    e->cap = (uint32_t)(size - head);
    e->val = ks_inline(e);
    HASH_ADD_KEYPTR(hh, ks->map, e->key, klen, e);
    ks->count++;
    ks->bytes += klen;
    return e;
}

/* A malloc'd copy of len bytes (NULL for len 0 or when out of memory). */
static uint8_t *ks_dup(const uint8_t *p, size_t len)
{
    if (!len)
        return NULL;
    uint8_t *c = malloc(len);
    if (c)
        memcpy(c, p, len);
    return c;
}

/* Replace an entry's value with len bytes at src (owned: src itself, malloc'd, is handed over;
 * freed on failure too), keep the byte count right, and run the hook.  Wire status. */
static int ks_replace(struct keyspace *ks, struct ks_entry *e, const uint8_t *src, size_t len, uint8_t *owned)
{
    uint8_t *in = ks_inline(e), *val = in;
    if (len <= e->cap) {
        if (len)
            memcpy(in, src, len);
        free(owned);
    } else if (!(val = owned ? owned : ks_dup(src, len))) {
        return MUSTER__STATUS__INTERNAL;
    }
    if (e->val != in)
        free(e->val);
    ks->bytes = ks->bytes - e->vlen + len;
    e->val = val;
    e->vlen = (uint32_t)len;
    if (ks->hook)
        ks->hook(ks->hook_arg, KS_SET, e->key, e->klen, e);
    return MUSTER__STATUS__OK;
}

/* Store val under key; see keyspace.h for ownership. */
int ks_set(struct keyspace *ks, const char *key, size_t klen, uint8_t *val, size_t vlen, int take)
{
    int st = ks_fits(ks, key, klen, vlen);
    uint8_t *owned = take ? val : NULL;
    struct ks_entry *e = NULL;
    if (st == MUSTER__STATUS__OK && !(e = ks_slot(ks, key, klen, vlen)))
        st = MUSTER__STATUS__INTERNAL;
    if (st != MUSTER__STATUS__OK) {
        free(owned);
        return st;
    }
    return ks_replace(ks, e, val, vlen, owned);
}

/* Remove key; 1 when it existed. */
int ks_delete(struct keyspace *ks, const char *key, size_t klen)
{
    struct ks_entry *e = (struct ks_entry *)ks_get(ks, key, klen);
    if (!e)
        return 0;
    HASH_DEL(ks->map, e);
    ks->count--;
    ks->bytes -= e->klen + e->vlen;
    if (ks->hook)
        ks->hook(ks->hook_arg, KS_DELETE, e->key, e->klen, NULL);
    ks_entry_free(e);
    return 1;
}

/* Parse len bytes of strict decimal int64 text ([+-]digits); 0 on success. */
static int ks_parse_int(const uint8_t *p, size_t len, int64_t *out)
{
    char buf[24];
    if (len == 0 || len >= sizeof buf)
        return -1;
    memcpy(buf, p, len);
    buf[len] = 0;
    size_t i = (buf[0] == '-' || buf[0] == '+');
    if (i == len)
        return -1;
    for (size_t j = i; j < len; j++)
        if (buf[j] < '0' || buf[j] > '9')
            return -1;
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (errno)
        return -1;
    *out = v;
    return 0;
}

/* Add delta to the decimal int64 text at key (absent = 0); *out gets the sum.  Wire status. */
int ks_add(struct keyspace *ks, const char *key, size_t klen, int64_t delta, int64_t *out)
{
    const struct ks_entry *e = ks_get(ks, key, klen);
    int64_t cur = 0, sum;
    if (e && ks_parse_int(e->val, e->vlen, &cur) != 0)
        return MUSTER__STATUS__NOT_A_NUMBER;
    if (__builtin_add_overflow(cur, delta, &sum))
        return MUSTER__STATUS__OVERFLOW;
    char text[24];
    int n = snprintf(text, sizeof text, "%" PRId64, sum);
    int st = ks_set(ks, key, klen, (uint8_t *)text, (size_t)n, 0);
    if (st == MUSTER__STATUS__OK)
        *out = sum;
    return st;
}

/* Append bytes to key (created when absent); *len gets the new length.  Wire status. */
int ks_append(struct keyspace *ks, const char *key, size_t klen, const uint8_t *val, size_t vlen, size_t *len)
{
    const struct ks_entry *old = ks_get(ks, key, klen);
    size_t have = old ? old->vlen : 0;
    int st = ks_fits(ks, key, klen, have + vlen);
    if (st != MUSTER__STATUS__OK)
        return st;
    struct ks_entry *e = ks_slot(ks, key, klen, have + vlen);
    uint8_t *buf = (have + vlen) ? malloc(have + vlen) : NULL;
    if (!e || ((have + vlen) && !buf)) {
        free(buf);
        return MUSTER__STATUS__INTERNAL;
    }
    if (have)
        memcpy(buf, e->val, have);
    if (vlen)
        memcpy(buf + have, val, vlen);
    st = ks_replace(ks, e, buf, have + vlen, buf);
    if (st == MUSTER__STATUS__OK)
        *len = have + vlen;
    return st;
}

/* TCPStore compare_set; *e gets the entry to answer from (NULL: answer `expected`); *swapped whether it wrote. */
int ks_compare_set(struct keyspace *ks, const char *key, size_t klen, const uint8_t *exp, size_t elen,
                   const uint8_t *des, size_t dlen, const struct ks_entry **e, int *swapped)
{
    const struct ks_entry *cur = ks_get(ks, key, klen);
    *swapped = 0;
    *e = cur;
    /* Absent key with a non-empty expectation: nothing is written and the
     * answer is `expected` itself, as TCPStore does. */
    if (!cur && elen)
        return MUSTER__STATUS__OK;
    if (cur && (cur->vlen != elen || (elen && memcmp(cur->val, exp, elen) != 0)))
        return MUSTER__STATUS__OK;
    int st = ks_set(ks, key, klen, (uint8_t *)des, dlen, 0);
    if (st != MUSTER__STATUS__OK)
        return st;
    *e = ks_get(ks, key, klen);
    *swapped = 1;
    return MUSTER__STATUS__OK;
}

/* Number of keys. */
size_t ks_count(const struct keyspace *ks)
{
    return ks->count;
}
