/*
 * The keyspace's hash table.  Open addressing with linear probing over an
 * array of entry pointers: 8 bytes per slot and nothing per entry, where a
 * chained table costs a handle in every entry (uthash's was 56 bytes) plus
 * a bucket array.  The hash is not cached anywhere: an entry's 8-byte
 * header would grow to 12 and push a 13-byte key with a 64-byte value
 * from a 96-byte malloc chunk into a 112-byte one.  Instead the 3 low bits
 * of each pointer, always zero because malloc aligns to at least 8, carry
 * 3 bits of the key's hash, so a probe dereferences only about one in
 * eight non-matching entries.
 *
 * Deletion shifts the rest of the probe run back over the hole (no
 * tombstones), rehashing each key it considers; runs are short at the
 * maximum load of 0.8.  Growth doubles the array, but does not move every
 * entry at once: at 4M keys that would stall the loop for the time it
 * takes to rehash 4M keys scattered over memory.  The old array is kept
 * and drained KTABLE_DRAIN slots per insert or remove; lookups try the new
 * array, then the old one.  In the old array a moved or removed entry
 * leaves KTABLE_DEAD rather than an empty slot, so runs stay unbroken
 * there (nothing is ever inserted into it), and the array is freed once
 * the cursor passes its end.  Draining 16 slots per write finishes the
 * old array (S slots) in S/16 writes, long before the new one (2S slots,
 * starting at 0.4 S entries) could reach its own limit; should it get
 * there anyway, the rest is drained at once first.
 */
#include "ktable.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* Marker of a moved or removed entry in the array being drained. */
#define KTABLE_DEAD ((uintptr_t)1)
/* Old slots moved per insert or remove while growing. */
#define KTABLE_DRAIN 16
/* Slots of the first array. */
#define KTABLE_MIN 16

_Static_assert(_Alignof(max_align_t) >= 8, "entry pointers need 3 free low bits");

/* Start an empty table with a random seed. */
void ktable_init(struct ktable *t)
{
    memset(t, 0, sizeof *t);
    /* The seed keeps clients from choosing keys that all collide. */
    if (getrandom(&t->seed, sizeof t->seed, GRND_NONBLOCK) != (ssize_t)sizeof t->seed)
        t->seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)t;
}

/* Free the slot arrays (not the entries). */
void ktable_fini(struct ktable *t)
{
    free(t->slot);
    free(t->old);
    t->slot = t->old = NULL;
    t->mask = t->old_mask = 0;
    t->used = t->old_used = t->cursor = 0;
}

/* Scramble the bits of x (a 64-bit finalizer: xor-shift, multiply, twice). */
static uint64_t ktable_mix(uint64_t x)
{
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    x ^= x >> 32;
    x *= 0xd6e8feb86659fd93ull;
    return x ^ (x >> 32);
}

/* The default key hash: eight bytes at a time, multiplied in, then mixed. */
uint64_t ktable_hash(const char *key, size_t klen, uint64_t seed)
{
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t h = seed ^ ((uint64_t)klen * k), w;
    for (; klen >= 8; key += 8, klen -= 8) {
        memcpy(&w, key, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    w = 0;
    memcpy(&w, key, klen);
    return ktable_mix(h ^ w);
}

/* The hash of a key with t's function and seed. */
static uint64_t ktable_hash_of(const struct ktable *t, const char *key, size_t klen)
{
    return t->hash ? t->hash(key, klen, t->seed) : ktable_hash(key, klen, t->seed);
}

/* The 3-bit tag a slot carries for hash h. */
static uintptr_t ktable_tag(uint64_t h)
{
    return (uintptr_t)(h >> 61);
}

/* The slot of arr (mask m) holding key with hash h, or NULL; skips dead slots. */
static uintptr_t *ktable_probe(uintptr_t *arr, size_t m, uint64_t h, const char *key, size_t klen)
{
    uintptr_t tag = ktable_tag(h);
    size_t i = (size_t)h & m;
    for (size_t n = 0; n <= m; n++, i = (i + 1) & m) {
        uintptr_t s = arr[i];
        if (!s)
            return NULL;
        if (s == KTABLE_DEAD || (s & 7) != tag)
            continue;
        const struct ks_entry *e = (const struct ks_entry *)(s & ~(uintptr_t)7);
        if (e->klen == klen && memcmp(e->key, key, klen) == 0)
            return &arr[i];
    }
    return NULL;
}

/* The slot holding key, or NULL; valid until the next insert or remove. */
uintptr_t *ktable_find(const struct ktable *t, const char *key, size_t klen)
{
    if (!t->slot)
        return NULL;
    uint64_t h = ktable_hash_of(t, key, klen);
    uintptr_t *s = ktable_probe(t->slot, t->mask, h, key, klen);
    if (!s && t->old)
        s = ktable_probe(t->old, t->old_mask, h, key, klen);
    return s;
}

/* Put e in the first free slot of its run in the current array (there is always one). */
static void ktable_place(struct ktable *t, const struct ks_entry *e)
{
    uint64_t h = ktable_hash_of(t, e->key, e->klen);
    size_t i = (size_t)h & t->mask;
    for (size_t n = 0; n <= t->mask && t->slot[i]; n++)
        i = (i + 1) & t->mask;
    t->slot[i] = (uintptr_t)e | ktable_tag(h);
    t->used++;
}

/* Move up to n slots of the old array into the current one; free it when done. */
static void ktable_drain(struct ktable *t, size_t n)
{
    for (; t->old && n > 0; n--) {
        uintptr_t s = t->old[t->cursor];
        if (s > KTABLE_DEAD) {
            t->old[t->cursor] = KTABLE_DEAD;
            t->old_used--;
            ktable_place(t, (const struct ks_entry *)(s & ~(uintptr_t)7));
        }
        if (++t->cursor > t->old_mask) {
            free(t->old);
            t->old = NULL;
            t->old_mask = t->old_used = t->cursor = 0;
        }
    }
}

/* Start moving to an array twice the size (the first one when empty); 0, or -1 when out of memory. */
static int ktable_grow(struct ktable *t)
{
    size_t slots = t->slot ? (t->mask + 1) * 2 : KTABLE_MIN;
    if (t->old)
        ktable_drain(t, t->old_mask + 1); /* finish the previous growth first */
    uintptr_t *arr = calloc(slots, sizeof *arr);
    if (!arr)
        return -1;
    t->old = t->slot;
    t->old_mask = t->slot ? t->mask : 0;
    t->old_used = t->used;
    t->cursor = 0;
    t->slot = arr;
    t->mask = slots - 1;
    t->used = 0;
    if (!t->old_used) { /* nothing to drain: drop the old array now */
        free(t->old);
        t->old = NULL;
        t->old_mask = 0;
    }
    return 0;
}

/* Add e, whose key is not in the table; 0, or -1 when out of memory. */
int ktable_insert(struct ktable *t, struct ks_entry *e)
{
    /* The limit counts entries still in the old array: they all land in this one. */
    if (!t->slot || (t->used + t->old_used + 1) * 5 > (t->mask + 1) * 4)
        if (ktable_grow(t) != 0)
            return -1;
    ktable_place(t, e);
    ktable_drain(t, KTABLE_DRAIN);
    return 0;
}

/* Close the hole at slot i of the current array by shifting the rest of its run back. */
static void ktable_shift(struct ktable *t, size_t i)
{
    size_t j = i;
    for (size_t n = 0; n < t->mask; n++) {
        j = (j + 1) & t->mask;
        uintptr_t s = t->slot[j];
        if (!s)
            break;
        const struct ks_entry *e = (const struct ks_entry *)(s & ~(uintptr_t)7);
        size_t home = (size_t)ktable_hash_of(t, e->key, e->klen) & t->mask;
        /* s may fill the hole unless its home lies after the hole (cyclically). */
        if (((j - home) & t->mask) >= ((j - i) & t->mask)) {
            t->slot[i] = s;
            i = j;
        }
    }
    t->slot[i] = 0;
}

/* Remove the entry at a slot from ktable_find. */
void ktable_remove(struct ktable *t, uintptr_t *slot)
{
    if (t->old && slot >= t->old && slot <= t->old + t->old_mask) {
        *slot = KTABLE_DEAD;
        t->old_used--;
    } else {
        ktable_shift(t, (size_t)(slot - t->slot));
        t->used--;
    }
    ktable_drain(t, KTABLE_DRAIN);
}

/* Entries stored. */
size_t ktable_count(const struct ktable *t)
{
    return t->used + t->old_used;
}

/* Bytes of slot arrays held now. */
size_t ktable_bytes(const struct ktable *t)
{
    size_t n = t->slot ? t->mask + 1 : 0;
    if (t->old)
        n += t->old_mask + 1;
    return n * sizeof(uintptr_t);
}

/* Call fn for each live entry of arr (mask m); the first non-zero return. */
static int ktable_each_in(const uintptr_t *arr, size_t m, ktable_each_fn fn, void *arg)
{
    for (size_t i = 0; arr && i <= m; i++) {
        if (arr[i] <= KTABLE_DEAD)
            continue;
        int rc = fn(arg, (const struct ks_entry *)(arr[i] & ~(uintptr_t)7));
        if (rc)
            return rc;
    }
    return 0;
}

/* Call fn for every entry once, in table order; fn must not change the table. */
int ktable_each(const struct ktable *t, ktable_each_fn fn, void *arg)
{
    int rc = ktable_each_in(t->slot, t->mask, fn, arg);
    return rc ? rc : ktable_each_in(t->old, t->old_mask, fn, arg);
}
