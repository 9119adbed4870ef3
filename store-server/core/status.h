/* The statuses the state answers with.  They are the wire's Status numbers (proto/muster.proto), so a
 * front end passes them on unchanged; native/ops.c checks at compile time that every one agrees.  The
 * core keeps its own names so that it needs no generated wire header. */
#ifndef MUSTERD_CORE_STATUS_H
#define MUSTERD_CORE_STATUS_H

enum core_status {
    CORE_OK = 0,
    CORE_NOT_FOUND = 1,
    CORE_TIMEOUT = 2,
    CORE_BAD_REQUEST = 3,
    CORE_LIMIT = 6,
    CORE_SHUTTING_DOWN = 7,
    CORE_NOT_A_NUMBER = 8,
    CORE_OVERFLOW = 9,
    CORE_STALE_GENERATION = 10,
    CORE_NOT_MEMBER = 11,
    CORE_CONFLICT = 12,
    CORE_INTERNAL = 13,
    CORE_EXCLUDED = 15,
    CORE_FORBIDDEN = 16,
};

#endif
