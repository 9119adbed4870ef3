/* The keyspace's hash table: open addressing over an array of tagged entry pointers. */
#ifndef MUSTERD_KTABLE_H
#define MUSTERD_KTABLE_H

#include <stddef.h>
#include <stdint.h>

/* One stored key: a single allocation holding this header, the key (also NUL-terminated)
 * and then the value; see keyspace.c for why there is nothing else in it. */
struct ks_entry {
    uint32_t klen;
    uint32_t vlen;
    char key[];
};

/* A key hash with a per-table seed (tests substitute a bad one to force collisions). */
typedef uint64_t (*ktable_hash_fn)(const char *key, size_t klen, uint64_t seed);

/* Called for every entry by ktable_each; a non-zero return stops the walk and is returned. */
typedef int (*ktable_each_fn)(void *arg, const struct ks_entry *e);

/* The table.  While it grows, entries still in `old` move to `slot` a few per write. */
struct ktable {
    uintptr_t *slot; /* tagged entry pointers, 0 = empty */
    size_t mask;     /* slots - 1 (slot is NULL while nothing was ever stored) */
    size_t used;     /* entries in slot */
    uintptr_t *old;  /* the table being drained, or NULL */
    size_t old_mask;
    size_t old_used; /* entries still in old */
    size_t cursor;   /* old slots below this were moved */
    uint64_t seed;
    ktable_hash_fn hash; /* NULL: ktable_hash */
};

/* Start an empty table with a random seed. */
void ktable_init(struct ktable *t);
/* Free the slot arrays (not the entries). */
void ktable_fini(struct ktable *t);
/* The default key hash. */
uint64_t ktable_hash(const char *key, size_t klen, uint64_t seed);
/* The slot holding key, or NULL; valid until the next insert or remove. */
uintptr_t *ktable_find(const struct ktable *t, const char *key, size_t klen);
/* The entry a slot from ktable_find holds. */
static inline struct ks_entry *ktable_entry(const uintptr_t *slot)
{
    return (struct ks_entry *)(*slot & ~(uintptr_t)7);
}
/* Point a slot from ktable_find at e, the same key moved by realloc. */
static inline void ktable_update(uintptr_t *slot, const struct ks_entry *e)
{
    *slot = (uintptr_t)e | (*slot & 7);
}
/* Add e, whose key is not in the table; 0, or -1 when out of memory. */
int ktable_insert(struct ktable *t, struct ks_entry *e);
/* Remove the entry at a slot from ktable_find. */
void ktable_remove(struct ktable *t, uintptr_t *slot);
/* Entries stored. */
size_t ktable_count(const struct ktable *t);
/* Bytes of slot arrays held now. */
size_t ktable_bytes(const struct ktable *t);
/* Call fn for every entry once, in table order; fn must not change the table. */
int ktable_each(const struct ktable *t, ktable_each_fn fn, void *arg);

#endif
