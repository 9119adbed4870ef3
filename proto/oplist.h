/*
 * THE list of native ops: one line per case of Request's op oneof
 * (proto/muster.proto), with the properties that daemon, library and docs
 * all derive from it, so that a new op cannot be left out of one of them:
 *   - musterd's op table (store-server/native/ops.c) takes each row's name and
 *     flags from here and adds only the handler and the field checks;
 *   - libmuster (client/failover.c) sends again after a lost connection
 *     exactly the ops marked OPL_RESEND;
 *   - tests/unit/test_oplist.c fails when this list and the oneof in the
 *     generated descriptor differ, or libmuster's choice differs from
 *     OPL_RESEND; tests/check_oplist.sh fails when README's op table leaves
 *     out an op, or muster.h's list of ops sent again is not the OPL_RESEND
 *     set; tests/unit/test_optable.c when a listed op has no handler.
 *
 * OPLIST(X) expands X(CASE, name, flags) for every op, in case order: CASE
 * as in MUSTER__REQUEST__OP_<CASE>, name as the proto field (and the
 * daemon's op name in logs, counters and metrics), flags the OPL_ bits.
 * Header only, with no includes: users include muster.pb-c.h themselves.
 */
#ifndef MUSTER_PROTO_OPLIST_H
#define MUSTER_PROTO_OPLIST_H

/* Writes the keyspace or rendezvous state. */
#define OPL_MUTATES 0x1u
/* May park; musterd refuses it SHUTTING_DOWN while draining. */
#define OPL_MAY_BLOCK 0x2u
/* Answered before the hello. */
#define OPL_BEFORE_HELLO 0x4u
/* Running it twice leaves what running it once does: a failover handle
 * sends it again on a new connection when the one carrying it was lost
 * (it may or may not have run).  Ops without it come back MUSTER_ECONN. */
#define OPL_RESEND 0x8u

/* Every op of the native protocol: X(CASE, name, flags). */
#define OPLIST(X)                                          \
    X(SET, set, OPL_MUTATES | OPL_RESEND)                  \
    X(GET, get, OPL_MAY_BLOCK | OPL_RESEND)                \
    X(ADD, add, OPL_MUTATES)                               \
    X(COMPARE_SET, compare_set, OPL_MUTATES)               \
    X(DELETE, delete, OPL_MUTATES | OPL_RESEND)            \
    X(CHECK, check, OPL_RESEND)                            \
    X(WAIT, wait, OPL_MAY_BLOCK | OPL_RESEND)              \
    X(NUM_KEYS, num_keys, OPL_RESEND)                      \
    X(MULTI_GET, multi_get, OPL_MAY_BLOCK | OPL_RESEND)    \
    X(MULTI_SET, multi_set, OPL_MUTATES | OPL_RESEND)      \
    X(APPEND, append, OPL_MUTATES)                         \
    X(LIST, list, OPL_RESEND)                              \
    X(PING, ping, OPL_BEFORE_HELLO | OPL_RESEND)           \
    X(BARRIER, barrier, OPL_MAY_BLOCK)                     \
    X(WATCH, watch, OPL_RESEND)                            \
    X(UNWATCH, unwatch, OPL_RESEND)                        \
    X(RDZV_JOIN, rdzv_join, OPL_MUTATES | OPL_MAY_BLOCK)   \
    X(RDZV_LEAVE, rdzv_leave, OPL_MUTATES)                 \
    X(RDZV_HEARTBEAT, rdzv_heartbeat, 0)                    \
    X(RDZV_REPORT, rdzv_report, OPL_MUTATES)              \
    X(QUEUE_PUSH, queue_push, OPL_MUTATES)                \
    X(QUEUE_POP, queue_pop, OPL_MUTATES)                  \
    X(QUEUE_LEN, queue_len, OPL_RESEND)

#endif
