/* Handlers of the key-value ops of the native protocol (rows of the op table in ops.c). */
#ifndef MUSTERD_KVOPS_H
#define MUSTERD_KVOPS_H

#include "muster.pb-c.h"

struct conn;

/* set: store the value (its decoded buffer is handed to the keyspace, not copied). */
void kvops_set(struct conn *c, Muster__Request *req);
/* get: answer the value, NOT_FOUND, or park until set when wait is true. */
void kvops_get(struct conn *c, Muster__Request *req);
/* add: int64 kept as decimal text. */
void kvops_add(struct conn *c, Muster__Request *req);
/* compare_set with TCPStore's rules. */
void kvops_compare_set(struct conn *c, Muster__Request *req);
/* delete: deleted says whether the key existed. */
void kvops_delete(struct conn *c, Muster__Request *req);
/* check: whether every key exists. */
void kvops_check(struct conn *c, Muster__Request *req);
/* wait: park until every key exists. */
void kvops_wait(struct conn *c, Muster__Request *req);
/* num_keys: keys in the namespace. */
void kvops_num_keys(struct conn *c, Muster__Request *req);
/* multi_get: all values or NOT_FOUND; with wait, park until all exist. */
void kvops_multi_get(struct conn *c, Muster__Request *req);
/* multi_set: all keys or none (limits are checked before any write). */
void kvops_multi_set(struct conn *c, Muster__Request *req);
/* append: create or extend. */
void kvops_append(struct conn *c, Muster__Request *req);
/* list: one page of keys with a prefix, in byte order. */
void kvops_list(struct conn *c, Muster__Request *req);
/* ping: echo the payload (allowed before hello). */
void kvops_ping(struct conn *c, Muster__Request *req);
/* queue_push: append to the key's queue, releasing one parked wait. */
void kvops_queue_push(struct conn *c, Muster__Request *req);
/* queue_pop: the length before the pop, and the oldest value. */
void kvops_queue_pop(struct conn *c, Muster__Request *req);
/* queue_len: the queue's length. */
void kvops_queue_len(struct conn *c, Muster__Request *req);

#endif
