/*
 * Key-value ops of the public API: each has its Request built by kvreq.c
 * (which async.c shares), runs it through call_run, and copies the answer
 * into caller-owned memory.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Copy len bytes into a new NUL-terminated buffer (NULL on allocation failure). */
static void *kv_dup(const void *p, size_t len)
{
    char *d = malloc(len + 1);
    if (d) {
        if (len)
            memcpy(d, p, len);
        d[len] = '\0';
    }
    return d;
}

/* Run k (filled when fill, a kvreq_* function's result, is MUSTER_OK) through
 * call_run and free it; *resp is NULL unless the server answered. */
static int kv_run(muster_t *m, int fill, struct kvreq *k, Muster__Response **resp)
{
    *resp = NULL;
    if (fill != MUSTER_OK)
        return fill;
    int rc = call_run(m, &k->req, resp, k->timeout_ms);
    kvreq_free(k);
    return rc;
}

/* Set key to the len bytes at value. */
int muster_set(muster_t *m, const char *key, const void *value, size_t len, uint32_t timeout_ms)
{
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_set(&k, m, key, value, len, timeout_ms), &k, &resp);
    wire_free(resp);
    return rc;
}

/* Get key, waiting for it when wait != 0. */
int muster_get(muster_t *m, const char *key, int wait, uint32_t timeout_ms, void **value, size_t *len)
{
    if (!value)
        return MUSTER_EINVAL;
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_get(&k, m, key, wait, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK) {
        *value = kv_dup(resp->get->value.data, resp->get->value.len);
        if (len)
            *len = resp->get->value.len;
        if (!*value)
            rc = error_set(m, MUSTER_ENOMEM, "out of memory copying a value");
    }
    wire_free(resp);
    return rc;
}

/* Add delta to the integer at key; *result (may be NULL) gets the new value. */
int muster_add(muster_t *m, const char *key, int64_t delta, int64_t *result, uint32_t timeout_ms)
{
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_add(&k, m, key, delta, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK && result)
        *result = resp->add->value;
    wire_free(resp);
    return rc;
}

/* TCPStore compare_set; *swapped and *value (both may be NULL) report the outcome. */
int muster_compare_set(muster_t *m, const char *key, const void *expected, size_t elen, const void *desired,
                       size_t dlen, int *swapped, void **value, size_t *vlen, uint32_t timeout_ms)
{
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_compare_set(&k, m, key, expected, elen, desired, dlen, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK) {
        if (swapped)
            *swapped = resp->compare_set->swapped;
        if (vlen)
            *vlen = resp->compare_set->value.len;
        if (value) {
            *value = kv_dup(resp->compare_set->value.data, resp->compare_set->value.len);
            if (!*value)
                rc = error_set(m, MUSTER_ENOMEM, "out of memory copying a value");
        }
    }
    wire_free(resp);
    return rc;
}

/* Delete key; *deleted (may be NULL) says whether it existed. */
int muster_delete(muster_t *m, const char *key, int *deleted, uint32_t timeout_ms)
{
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_delete(&k, m, key, timeout_ms), &k, &resp);
    int existed = rc == MUSTER_OK && resp->delete_->deleted;
    /* The proto allows either answer for an absent key: OK with
     * deleted = false, or NOT_FOUND.  Both mean "it was not there". */
    if (rc == MUSTER_ENOTFOUND)
        rc = MUSTER_OK;
    if (rc == MUSTER_OK && deleted)
        *deleted = existed;
    wire_free(resp);
    return rc;
}

/* *present = 1 when all n keys exist. */
int muster_check(muster_t *m, const char *const *keys, size_t n, int *present, uint32_t timeout_ms)
{
    if (!present)
        return MUSTER_EINVAL;
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_check(&k, m, keys, n, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK)
        *present = resp->check->all_present;
    wire_free(resp);
    return rc;
}

/* Block until all n keys exist (server-enforced deadline). */
int muster_wait(muster_t *m, const char *const *keys, size_t n, uint32_t timeout_ms)
{
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_wait(&k, m, keys, n, timeout_ms), &k, &resp);
    wire_free(resp);
    return rc;
}

/* Block until key holds a count of at least at_least (server-enforced deadline). */
int muster_wait_count(muster_t *m, const char *key, int64_t at_least, uint32_t timeout_ms)
{
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_wait_count(&k, m, key, at_least, timeout_ms), &k, &resp);
    wire_free(resp);
    return rc;
}

/* Number of keys in the namespace. */
int muster_num_keys(muster_t *m, uint64_t *count, uint32_t timeout_ms)
{
    if (!count)
        return MUSTER_EINVAL;
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_num_keys(&k, m, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK)
        *count = resp->num_keys->count;
    wire_free(resp);
    return rc;
}

/* Copy n binary values into the caller's arrays; MUSTER_ENOMEM leaves none behind. */
static int kv_copy_values(const ProtobufCBinaryData *src, size_t n, void **values, size_t *lens)
{
    for (size_t i = 0; i < n; i++) {
        values[i] = kv_dup(src[i].data, src[i].len);
        lens[i] = src[i].len;
        if (!values[i]) {
            while (i > 0)
                free(values[--i]);
            return MUSTER_ENOMEM;
        }
    }
    return MUSTER_OK;
}

/* Get n keys at once, all or nothing. */
int muster_multi_get(muster_t *m, const char *const *keys, size_t n, int wait, void **values, size_t *lens,
                     uint32_t timeout_ms)
{
    if (!values || !lens)
        return MUSTER_EINVAL;
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_multi_get(&k, m, keys, n, wait, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK && resp->multi_get->n_values != n)
        rc = error_set(m, MUSTER_EPROTO, "multi_get of %zu keys answered with %zu values", n,
                       resp->multi_get->n_values);
    if (rc == MUSTER_OK && kv_copy_values(resp->multi_get->values, n, values, lens) != MUSTER_OK)
        rc = error_set(m, MUSTER_ENOMEM, "out of memory copying values");
    wire_free(resp);
    return rc;
}

/* Set n keys at once, atomically. */
int muster_multi_set(muster_t *m, const char *const *keys, const void *const *values, const size_t *lens,
                     size_t n, uint32_t timeout_ms)
{
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_multi_set(&k, m, keys, values, lens, n, timeout_ms), &k, &resp);
    wire_free(resp);
    return rc;
}

/* Append to key (created when absent); *length (may be NULL) gets the new size. */
int muster_append(muster_t *m, const char *key, const void *value, size_t len, uint64_t *length,
                  uint32_t timeout_ms)
{
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_append(&k, m, key, value, len, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK && length)
        *length = resp->append->length;
    wire_free(resp);
    return rc;
}

/* Copy a list page's keys into a caller-owned array of strings. */
static int kv_copy_keys(const Muster__ListRes *res, char ***keys, size_t *n)
{
    char **out = calloc(res->n_keys ? res->n_keys : 1, sizeof *out);
    if (!out)
        return MUSTER_ENOMEM;
    for (size_t i = 0; i < res->n_keys; i++) {
        out[i] = kv_dup(res->keys[i], strlen(res->keys[i]));
        if (!out[i]) {
            muster_free_list((void **)out, i);
            return MUSTER_ENOMEM;
        }
    }
    *keys = out;
    *n = res->n_keys;
    return MUSTER_OK;
}

/* One page of keys with prefix after `after`. */
int muster_list(muster_t *m, const char *prefix, const char *after, uint32_t limit, char ***keys, size_t *n,
                int *more, uint32_t timeout_ms)
{
    if (!keys || !n)
        return MUSTER_EINVAL;
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_list(&k, m, prefix, after, limit, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK && kv_copy_keys(resp->list, keys, n) != MUSTER_OK)
        rc = error_set(m, MUSTER_ENOMEM, "out of memory copying keys");
    if (rc == MUSTER_OK && more)
        *more = resp->list->more;
    wire_free(resp);
    return rc;
}

/* Round trip to the server; *rtt_us (may be NULL) receives the time taken. */
int muster_ping(muster_t *m, uint64_t *rtt_us, uint32_t timeout_ms)
{
    uint64_t start = deadline_now_us();
    uint8_t stamp[8];
    memcpy(stamp, &start, sizeof stamp);
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_ping(&k, m, stamp, sizeof stamp, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK &&
        (resp->ping->payload.len != sizeof stamp || memcmp(resp->ping->payload.data, stamp, sizeof stamp)))
        rc = error_set(m, MUSTER_EPROTO, "ping answered with a different payload");
    if (rc == MUSTER_OK && rtt_us)
        *rtt_us = deadline_now_us() - start;
    wire_free(resp);
    return rc;
}

/* Wait at barrier `name` until count arrivals; *round (may be NULL) gets the round. */
int muster_barrier(muster_t *m, const char *name, uint32_t count, uint64_t *round, uint32_t timeout_ms)
{
    return muster_barrier_fetch(m, name, count, NULL, NULL, NULL, round, timeout_ms);
}

/* As muster_barrier, and *value gets key's value at release (MUSTER_ENOTFOUND when absent). */
int muster_barrier_fetch(muster_t *m, const char *name, uint32_t count, const char *key, void **value, size_t *len,
                         uint64_t *round, uint32_t timeout_ms)
{
    if (key && !value)
        return MUSTER_EINVAL;
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_barrier(&k, m, name, count, key, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK && round)
        *round = resp->barrier->round;
    if (rc == MUSTER_OK && key && !resp->barrier->found) {
        rc = error_set(m, MUSTER_ENOTFOUND, "barrier '%s' passed; key '%s' did not exist at release", name, key);
    } else if (rc == MUSTER_OK && key) {
        *value = kv_dup(resp->barrier->value.data, resp->barrier->value.len);
        if (len)
            *len = resp->barrier->value.len;
        if (!*value)
            rc = error_set(m, MUSTER_ENOMEM, "out of memory copying a value");
    }
    wire_free(resp);
    return rc;
}

/* Append the len bytes at value to key's queue; *length (may be NULL) gets its length after. */
int muster_queue_push(muster_t *m, const char *key, const void *value, size_t len, uint64_t *length,
                      uint32_t timeout_ms)
{
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_queue_push(&k, m, key, value, len, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK && length)
        *length = resp->queue_push->length;
    wire_free(resp);
    return rc;
}

/* Take the oldest value of key's queue: *before its length before the pop; *value (muster_free) and *len
 * hold the value when *before > 0, else *value is NULL. */
int muster_queue_pop(muster_t *m, const char *key, uint64_t *before, void **value, size_t *len, uint32_t timeout_ms)
{
    if (!value || !before)
        return MUSTER_EINVAL;
    struct kvreq k;
    Muster__Response *resp;
    *value = NULL;
    int rc = kv_run(m, kvreq_queue_pop(&k, m, key, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK) {
        *before = resp->queue_pop->length;
        if (*before && !(*value = kv_dup(resp->queue_pop->value.data, resp->queue_pop->value.len)))
            rc = error_set(m, MUSTER_ENOMEM, "out of memory copying a value");
        if (len)
            *len = resp->queue_pop->value.len;
    }
    wire_free(resp);
    return rc;
}

/* The length of key's queue. */
int muster_queue_len(muster_t *m, const char *key, uint64_t *length, uint32_t timeout_ms)
{
    if (!length)
        return MUSTER_EINVAL;
    struct kvreq k;
    Muster__Response *resp;
    int rc = kv_run(m, kvreq_queue_len(&k, m, key, timeout_ms), &k, &resp);
    if (rc == MUSTER_OK)
        *length = resp->queue_len->length;
    wire_free(resp);
    return rc;
}
