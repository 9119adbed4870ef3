/*
 * The monotonic clock every deadline and duration of the daemon is kept in
 * (connection timers, the namespace sweep, backoffs, the HA lease, the log
 * writer's fsync deadline, latencies), and timer arming against it, so a
 * wall-clock step never fires or delays one.  It is CLOCK_MONOTONIC, which
 * the log writer's condition variable waits on too; any thread may read it.
 */
#include "clock.h"

#include <event2/event.h>
#include <sys/time.h>
#include <time.h>

/* Nanoseconds on the monotonic clock (CLOCK_MONOTONIC). */
uint64_t clock_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Microseconds on the monotonic clock. */
uint64_t clock_now_us(void)
{
    return clock_now_ns() / 1000u;
}

/* Milliseconds on the monotonic clock. */
uint64_t clock_now_ms(void)
{
    return clock_now_ns() / 1000000u;
}

/* Arm timer to fire at monotonic time at (ms), or disarm it when at is 0. */
void clock_timer_at(struct event *timer, uint64_t at)
{
    if (!at) {
        evtimer_del(timer);
        return;
    }
    uint64_t now = clock_now_ms();
    clock_timer_in(timer, at > now ? at - now : 0);
}

/* Arm ev (a timer or an event with a timeout) to fire ms milliseconds from now. */
void clock_timer_in(struct event *ev, uint64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    event_add(ev, &tv);
}
