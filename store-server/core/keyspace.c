/*
 * The key-value map of one namespace.  Every write calls the namespace's
 * change hook, which wakes waiters and watchers of that key.
 *
 * Memory per key is the point of this layout.  A key is one malloc'd
 * block: an 8-byte header (key and value lengths), the key, a NUL (the key
 * is handed out as a C string), then the value.  glibc rounds a request of
 * n bytes up to a chunk of (n + 8) rounded up to 16 (at least 32), so a
 * 13-byte key with a 64-byte value asks for 8 + 14 + 64 = 86 bytes and
 * gets a 96-byte chunk.  Anything more in the header costs a whole 16
 * bytes here: a value pointer (the value in a buffer of its own) or a
 * cached hash would each make it 112, so neither is kept.  The table
 * (ktable.c) adds one 8-byte slot per key at a load between 0.4 and 0.8,
 * 10 to 20 bytes a key: about 106 to 116 bytes in all, where uthash
 * cost 184 (a 56-byte handle in the entry plus its buckets).
 *
 * The price: a value is always copied into the entry (a set cannot adopt
 * the buffer it decoded), and an entry moves when its value outgrows the
 * chunk.  Whether it still fits is asked of malloc_usable_size rather
 * than stored, and appends over-allocate by a quarter so a growing key is
 * not copied on every append.  Entry pointers are therefore valid only
 * until the next write to the keyspace.
 */
#include "keyspace.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "stats.h"

/* A value this much smaller than its chunk (and at least half of it) gives the room back. */
#define KS_SHRINK_SLACK 256

/* Start an empty keyspace with its limits, counter block and change hook. */
void ks_init(struct keyspace *ks, uint64_t max_keys, uint64_t max_bytes, uint64_t max_value, struct stats *stats,
             ks_hook_fn hook, void *hook_arg)
{
    memset(ks, 0, sizeof *ks);
    ktable_init(&ks->table);
    ks->max_keys = max_keys;
    ks->max_bytes = max_bytes;
    ks->max_value = max_value;
    ks->stats = stats;
    ks->hook = hook;
    ks->hook_arg = hook_arg;
}

/* ks_each callback of ks_fini: free one entry. */
static int ks_free_one(void *arg, const struct ks_entry *e)
{
    (void)arg;
    free((void *)(uintptr_t)e);
    return 0;
}

/* Free every entry. */
void ks_fini(struct keyspace *ks)
{
    ktable_each(&ks->table, ks_free_one, NULL);
    ktable_fini(&ks->table);
    ks->count = 0;
    ks->bytes = 0;
}

/* The entry for key, or NULL. */
const struct ks_entry *ks_get(const struct keyspace *ks, const char *key, size_t klen)
{
    uintptr_t *slot = ktable_find(&ks->table, key, klen);
    return slot ? ktable_entry(slot) : NULL;
}

/* Call fn for every entry once (no order); fn must not change the keyspace. */
int ks_each(const struct keyspace *ks, ktable_each_fn fn, void *arg)
{
    return ktable_each(&ks->table, fn, arg);
}

/* Use hash for this keyspace's table from now on; only while it is empty. */
void ks_set_hash(struct keyspace *ks, ktable_hash_fn hash)
{
    if (!ks->count)
        ks->table.hash = hash;
}

/* Whether replacing e (NULL: a new key of klen bytes) with a vlen-byte value fits the limits; a core status. */
static int ks_check(struct keyspace *ks, const struct ks_entry *e, size_t klen, size_t vlen)
{
    if (vlen > ks->max_value) {
        stats_inc(ks->stats, STAT_LIMIT_VALUE);
        return CORE_LIMIT;
    }
    if (!e && ks->count >= ks->max_keys) {
        stats_inc(ks->stats, STAT_LIMIT_KEYS_PER_NS);
        return CORE_LIMIT;
    }
    uint64_t after = ks->bytes - (e ? e->klen + e->vlen : 0) + klen + vlen;
    if (after > ks->max_bytes) {
        stats_inc(ks->stats, STAT_LIMIT_BYTES_PER_NS);
        return CORE_LIMIT;
    }
    return CORE_OK;
}

/* Bytes an entry with these lengths needs. */
static size_t ks_size(size_t klen, size_t vlen)
{
    return offsetof(struct ks_entry, key) + klen + 1 + vlen;
}

/* e with room for a value of vlen bytes (its first bytes kept), moved when it must grow or has far
 * too much room; extra is asked for on top when it moves.  NULL when out of memory (e untouched). */
static struct ks_entry *ks_resize(struct ks_entry *e, size_t vlen, size_t extra)
{
    size_t need = ks_size(e->klen, vlen), have = malloc_usable_size(e);
    if (need <= have && !(have - need >= KS_SHRINK_SLACK && have > 2 * need))
        return e;
    return realloc(e, need + extra);
}

/* A new entry for key with room for vlen value bytes (value unset), in the table; NULL when out of memory. */
static struct ks_entry *ks_create(struct keyspace *ks, const char *key, size_t klen, size_t vlen)
{
    struct ks_entry *e = malloc(ks_size(klen, vlen));
    if (!e)
        return NULL;
    e->klen = (uint32_t)klen;
    e->vlen = 0;
    memcpy(e->key, key, klen);
    e->key[klen] = 0;
    if (ktable_insert(&ks->table, e) != 0) {
        free(e);
        return NULL;
    }
    ks->count++;
    ks->bytes += klen;
    return e;
}

/* Make key's value its first off bytes followed by len bytes of src, then run the hook.  slot: the
 * key's slot from ktable_find, NULL when absent (limits already checked); extra: room to ask for on
 * top should the entry move.  A core status. */
static int ks_store(struct keyspace *ks, uintptr_t *slot, const char *key, size_t klen, size_t off,
                    const uint8_t *src, size_t len, size_t extra)
{
    struct ks_entry *e;
    if (!slot) {
        e = ks_create(ks, key, klen, off + len);
    } else if ((e = ks_resize(ktable_entry(slot), off + len, extra))) {
        ktable_update(slot, e);
    }
    if (!e)
        return CORE_INTERNAL;
    if (len)
        memcpy(ks_val(e) + off, src, len);
    ks->bytes = ks->bytes - e->vlen + off + len;
    e->vlen = (uint32_t)(off + len);
    if (ks->hook)
        ks->hook(ks->hook_arg, KS_SET, e->key, e->klen, e);
    return CORE_OK;
}

/* Store val under key; see keyspace.h for ownership. */
int ks_set(struct keyspace *ks, const char *key, size_t klen, uint8_t *val, size_t vlen, int take)
{
    /* One lookup serves both the limit check and the write. */
    uintptr_t *slot = ktable_find(&ks->table, key, klen);
    int st = ks_check(ks, slot ? ktable_entry(slot) : NULL, klen, vlen);
    if (st == CORE_OK)
        st = ks_store(ks, slot, key, klen, 0, val, vlen, 0);
    if (take)
        free(val);
    return st;
}

/* Remove key; 1 when it existed. */
int ks_delete(struct keyspace *ks, const char *key, size_t klen)
{
    uintptr_t *slot = ktable_find(&ks->table, key, klen);
    if (!slot)
        return 0;
    struct ks_entry *e = ktable_entry(slot);
    ktable_remove(&ks->table, slot);
    ks->count--;
    ks->bytes -= e->klen + e->vlen;
    if (ks->hook)
        ks->hook(ks->hook_arg, KS_DELETE, e->key, e->klen, NULL);
    free(e);
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

/* Read e's value as strict decimal int64 text into *out; 0, or -1 when it is not one. */
int ks_entry_int(const struct ks_entry *e, int64_t *out)
{
    return ks_parse_int(ks_val(e), e->vlen, out);
}

/* Add delta to the decimal int64 text at key (absent = 0); *out gets the sum.  A core status. */
int ks_add(struct keyspace *ks, const char *key, size_t klen, int64_t delta, int64_t *out)
{
    const struct ks_entry *e = ks_get(ks, key, klen);
    int64_t cur = 0, sum;
    if (e && ks_parse_int(ks_val(e), e->vlen, &cur) != 0)
        return CORE_NOT_A_NUMBER;
    if (__builtin_add_overflow(cur, delta, &sum))
        return CORE_OVERFLOW;
    char text[24];
    int n = snprintf(text, sizeof text, "%" PRId64, sum);
    int st = ks_set(ks, key, klen, (uint8_t *)text, (size_t)n, 0);
    if (st == CORE_OK)
        *out = sum;
    return st;
}

/* Append bytes to key (created when absent); *len gets the new length.  A core status. */
int ks_append(struct keyspace *ks, const char *key, size_t klen, const uint8_t *val, size_t vlen, size_t *len)
{
    uintptr_t *slot = ktable_find(&ks->table, key, klen);
    const struct ks_entry *old = slot ? ktable_entry(slot) : NULL;
    size_t have = old ? old->vlen : 0;
    int st = ks_check(ks, old, klen, have + vlen);
    if (st == CORE_OK)
        st = ks_store(ks, slot, key, klen, have, val, vlen, (have + vlen) / 4);
    if (st == CORE_OK)
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
        return CORE_OK;
    if (cur && (cur->vlen != elen || (elen && memcmp(ks_val(cur), exp, elen) != 0)))
        return CORE_OK;
    int st = ks_set(ks, key, klen, (uint8_t *)des, dlen, 0);
    if (st != CORE_OK)
        return st;
    *e = ks_get(ks, key, klen);
    *swapped = 1;
    return CORE_OK;
}

/* Number of keys. */
size_t ks_count(const struct keyspace *ks)
{
    return ks->count;
}
