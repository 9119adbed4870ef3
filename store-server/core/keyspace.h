/* A namespace's key-value map: binary-safe keys, values owned once, per-namespace limits, change hook. */
#ifndef MUSTERD_KEYSPACE_H
#define MUSTERD_KEYSPACE_H

#include <stddef.h>
#include <stdint.h>
#include "ktable.h"

struct stats;

/* Where e's value starts: right after the key and its NUL (the entry is declared in ktable.h). */
static inline uint8_t *ks_val(const struct ks_entry *e)
{
    return (uint8_t *)(uintptr_t)(e->key + e->klen + 1);
}

/* What happened to a key, for the change hook. */
enum ks_change { KS_SET, KS_DELETE };

/* Called after every write or delete; key is NUL-terminated; e is NULL for KS_DELETE. */
typedef void (*ks_hook_fn)(void *arg, enum ks_change what, const char *key, size_t klen, const struct ks_entry *e);

struct keyspace {
    struct ktable table;
    size_t count;
    uint64_t bytes; /* key + value bytes */
    uint64_t max_keys, max_bytes, max_value;
    struct stats *stats;
    ks_hook_fn hook;
    void *hook_arg;
};

/* Start an empty keyspace with its limits, counter block and change hook. */
void ks_init(struct keyspace *ks, uint64_t max_keys, uint64_t max_bytes, uint64_t max_value, struct stats *stats,
             ks_hook_fn hook, void *hook_arg);
/* Free every entry. */
void ks_fini(struct keyspace *ks);
/* The entry for key, or NULL; valid until the next write to the keyspace (entries move). */
const struct ks_entry *ks_get(const struct keyspace *ks, const char *key, size_t klen);
/* Store a copy of val (never bytes inside the keyspace) under key; with take, val (malloc'd) is
 * also freed, even on failure.  Returns a core status (OK or LIMIT). */
int ks_set(struct keyspace *ks, const char *key, size_t klen, uint8_t *val, size_t vlen, int take);
/* Remove key; 1 when it existed. */
int ks_delete(struct keyspace *ks, const char *key, size_t klen);
/* Add delta to the decimal int64 text at key (absent = 0); *out gets the sum.  A core status. */
int ks_add(struct keyspace *ks, const char *key, size_t klen, int64_t delta, int64_t *out);
/* Append bytes to key (created when absent); *len gets the new length.  A core status. */
int ks_append(struct keyspace *ks, const char *key, size_t klen, const uint8_t *val, size_t vlen, size_t *len);
/* TCPStore compare_set; *e gets the entry to answer from (NULL: answer `expected`); *swapped whether it wrote. */
int ks_compare_set(struct keyspace *ks, const char *key, size_t klen, const uint8_t *exp, size_t elen,
                   const uint8_t *des, size_t dlen, const struct ks_entry **e, int *swapped);
/* Read e's value as strict decimal int64 text (what add writes) into *out; 0, or -1 when it is not one. */
int ks_entry_int(const struct ks_entry *e, int64_t *out);
/* Number of keys. */
size_t ks_count(const struct keyspace *ks);
/* Call fn for every entry once (no order); fn must not change the keyspace.  The first non-zero return. */
int ks_each(const struct keyspace *ks, ktable_each_fn fn, void *arg);
/* Use hash for this keyspace's table from now on (tests force collisions); only while it is empty. */
void ks_set_hash(struct keyspace *ks, ktable_hash_fn hash);

#endif
