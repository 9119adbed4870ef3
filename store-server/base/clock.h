/* The daemon's one monotonic clock and the arming of libevent timers against it. */
#ifndef MUSTERD_CLOCK_H
#define MUSTERD_CLOCK_H

#include <stdint.h>

struct event;

/* Nanoseconds on the monotonic clock (CLOCK_MONOTONIC). */
uint64_t clock_now_ns(void);
/* Microseconds on the monotonic clock. */
uint64_t clock_now_us(void);
/* Milliseconds on the monotonic clock. */
uint64_t clock_now_ms(void);
/* Arm ev (a timer or an event with a timeout) to fire ms milliseconds from now. */
void clock_timer_in(struct event *ev, uint64_t ms);
/* Arm timer to fire at monotonic time at (ms), or disarm it when at is 0. */
void clock_timer_at(struct event *timer, uint64_t at);

#endif
