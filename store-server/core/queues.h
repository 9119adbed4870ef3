/* TCPStore's queues, kept by the core beside a namespace's keys (queues.c). */
#ifndef MUSTERD_QUEUES_H
#define MUSTERD_QUEUES_H

#include <stddef.h>
#include <stdint.h>

struct ns;

/* Append val (taken: freed on failure too) to key's queue and release one parked wait it completes; OK with
 * *len the length after, or LIMIT (the namespace's key, byte or value limit) or INTERNAL. */
int queues_push(struct ns *ns, const char *key, size_t klen, uint8_t *val, size_t vlen, uint64_t *len);
/* Take the oldest value of key's queue: *before is the length before the pop; *val (malloc'd, the caller's)
 * and *vlen hold the value when *before > 0. */
void queues_pop(struct ns *ns, const char *key, size_t klen, uint64_t *before, uint8_t **val, size_t *vlen);
/* The length of key's queue (0 when it has none). */
uint64_t queues_len(const struct ns *ns, const char *key, size_t klen);
/* Free every queue of ns (with the namespace). */
void queues_ns_destroy(struct ns *ns);

#endif
