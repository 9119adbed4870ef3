/*
 * The client side's one monotonic clock and the deadlines kept in it.  libc
 * only, so the same object serves libmuster, libmuster-nccl and the CLI
 * (client/meson.build links it into each, hidden; it is not part of the
 * public API).
 */
#ifndef MUSTER_CLIENT_DEADLINE_H
#define MUSTER_CLIENT_DEADLINE_H

#include <stdint.h>

/* Monotonic time in milliseconds. */
uint64_t deadline_now(void);
/* Monotonic time in microseconds (round-trip measurements). */
uint64_t deadline_now_us(void);
/* The absolute deadline ms milliseconds from now. */
uint64_t deadline_after(uint64_t ms);
/* Milliseconds left before deadline d (0 when passed), capped to int range for poll(). */
int deadline_left(uint64_t d);

#endif
