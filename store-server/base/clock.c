/*
 * The monotonic clock every deadline of the daemon is kept in (connection
 * timers, the namespace sweep, backoffs), and timer arming against it, so a
 * wall-clock step never fires or delays one.
 */
#include "clock.h"

#include <event2/event.h>
#include <sys/time.h>
#include <time.h>

/* Milliseconds on the monotonic clock. */
uint64_t clock_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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
