/*
 * TCPStore's queues (QUEUE_PUSH, QUEUE_POP, QUEUE_LEN), kept by the core
 * beside a namespace's keys so that every front end shares them: the
 * TCPStore listener, and native clients (the relay of `muster run`) through
 * the queue_push, queue_pop and queue_len ops.  A key may hold a value and
 * a queue, as in torch's servers; a non-empty queue makes its key present
 * to check and wait (waiters_holds), and a push releases one parked wait,
 * the oldest it completes (waiters_queue_pushed): a blocking pop is a wait
 * then a pop, so releasing every waiter would hand one value to several
 * poppers.
 *
 * Queues are counted against the namespace's key and byte limits (each
 * item as a key) but are not keys: not listed, not counted by num_keys,
 * not recorded with --data-dir and not replicated, like torch's servers,
 * which keep them in memory only.
 */
#include "queues.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "core.h"
#include "stats.h"
#include "status.h"
#include "waiters.h"

/* One queued value. */
struct queue_item {
    struct queue_item *next;
    uint8_t *data;
    size_t len;
};

/* A key's queue. */
struct queue {
    UT_hash_handle hh;
    struct queue_item *head, *tail;
    uint64_t len;
    size_t klen;
    char key[];
};

/* The queue of key, made when asked and absent; NULL when absent or out of memory. */
static struct queue *queues_find(const struct ns *ns, const char *key, size_t klen, struct ns *make)
{
    struct queue *q = NULL;
    HASH_FIND(hh, ns->queues, key, klen, q);
    if (q || !make)
        return q;
    if (!(q = calloc(1, sizeof *q + klen + 1)))
        return NULL;
    memcpy(q->key, key, klen);
    q->klen = klen;
    HASH_ADD_KEYPTR(hh, make->queues, q->key, klen, q);
    return q;
}

/* Append val to key's queue and release one parked wait it completes. */
int queues_push(struct ns *ns, const char *key, size_t klen, uint8_t *val, size_t vlen, uint64_t *len)
{
    const struct keyspace *ks = &ns->ks;
    struct queue_item *it = NULL;
    struct queue *q = NULL;
    /* Each item counts as a key of the namespace, and its bytes as a key's (counted as a key's would be). */
    enum stat_id over = vlen > ks->max_value                                        ? STAT_LIMIT_VALUE
                        : ks->count + ns->queue_items >= ks->max_keys               ? STAT_LIMIT_KEYS_PER_NS
                        : ks->bytes + ns->queue_bytes + klen + vlen > ks->max_bytes ? STAT_LIMIT_BYTES_PER_NS
                                                                                    : STAT_COUNT;
    if (over != STAT_COUNT) {
        stats_inc(ns->core->stats, over);
        free(val);
        return CORE_LIMIT;
    }
    if (!(it = calloc(1, sizeof *it)) || !(q = queues_find(ns, key, klen, ns))) {
        free(it);
        free(val);
        return CORE_INTERNAL;
    }
    it->data = val;
    it->len = vlen;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
    q->len++;
    ns->queue_items++;
    ns->queue_bytes += klen + vlen;
    *len = q->len;
    waiters_queue_pushed(ns, key, klen);
    return CORE_OK;
}

/* Take the oldest value of key's queue. */
void queues_pop(struct ns *ns, const char *key, size_t klen, uint64_t *before, uint8_t **val, size_t *vlen)
{
    struct queue *q = queues_find(ns, key, klen, NULL);
    *before = q ? q->len : 0;
    *val = NULL;
    *vlen = 0;
    if (!q)
        return;
    struct queue_item *it = q->head;
    q->head = it->next;
    if (!q->head)
        q->tail = NULL;
    q->len--;
    ns->queue_items--;
    ns->queue_bytes -= klen + it->len;
    *val = it->data;
    *vlen = it->len;
    free(it);
    if (!q->len) {
        HASH_DEL(ns->queues, q);
        free(q);
    }
}

/* The length of key's queue. */
uint64_t queues_len(const struct ns *ns, const char *key, size_t klen)
{
    const struct queue *q = queues_find(ns, key, klen, NULL);
    return q ? q->len : 0;
}

/* Free every queue of ns. */
void queues_ns_destroy(struct ns *ns)
{
    struct queue *q, *tmp;
    HASH_ITER(hh, ns->queues, q, tmp) {
        while (q->head) {
            struct queue_item *it = q->head;
            q->head = it->next;
            free(it->data);
            free(it);
        }
        HASH_DEL(ns->queues, q);
        free(q);
    }
    ns->queue_items = ns->queue_bytes = 0;
}
