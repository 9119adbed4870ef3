/*
 * The core's hooks over libevent.  A core timer is one allocation: the
 * callback and its argument, then an event assigned in place (its size
 * comes from libevent), so a parked wait costs no more mallocs than it did
 * with evtimer_new.  defer activates the event, which runs it later in the
 * same loop turn, as the waiters' wake always did.
 */
#include "core_event.h"

#include <event2/event.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "log.h"

_Static_assert((int)CORE_LOG_ERROR == (int)LOG_ERROR && (int)CORE_LOG_WARN == (int)LOG_WARN &&
                   (int)CORE_LOG_INFO == (int)LOG_INFO && (int)CORE_LOG_DEBUG == (int)LOG_DEBUG,
               "core and log levels agree");

struct core_timer {
    core_timer_fn fn;
    void *arg;
    void *pad; /* keeps the event that follows 16-byte aligned */
    void *pad2;
};

/* The event stored right after a timer's header. */
static struct event *core_event_of(const struct core_timer *t)
{
    return (struct event *)(uintptr_t)(t + 1);
}

/* The loop's callback: run the core's. */
static void core_event_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct core_timer *t = arg;
    t->fn(t->arg);
}

/* A new disarmed timer on the loop (ctx) calling fn(arg); NULL when memory ran out. */
static struct core_timer *core_event_new(void *ctx, core_timer_fn fn, void *arg)
{
    struct core_timer *t = calloc(1, sizeof *t + event_get_struct_event_size());
    if (!t)
        return NULL;
    t->fn = fn;
    t->arg = arg;
    if (event_assign(core_event_of(t), ctx, -1, 0, core_event_cb, t) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

/* Fire ms milliseconds from now. */
static void core_event_arm(struct core_timer *t, uint64_t ms)
{
    clock_timer_in(core_event_of(t), ms);
}

/* Run the callback later in this loop turn. */
static void core_event_defer(struct core_timer *t)
{
    event_active(core_event_of(t), EV_TIMEOUT, 0);
}

/* Disarm (a no-op when not pending). */
static void core_event_disarm(struct core_timer *t)
{
    evtimer_del(core_event_of(t));
}

/* Whether the timer is armed. */
static int core_event_pending(const struct core_timer *t)
{
    return evtimer_pending(core_event_of(t), NULL);
}

/* Disarm and free. */
static void core_event_free(struct core_timer *t)
{
    event_del(core_event_of(t));
    free(t);
}

/* Wall-clock milliseconds. */
static uint64_t core_event_wall_ms(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Monotonic microseconds. */
static uint64_t core_event_mono_us(void *ctx)
{
    (void)ctx;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* One line to log.c. */
static void core_event_log(void *ctx, int level, const char *line)
{
    (void)ctx;
    log_msg(level, "%s", line);
}

/* Fill *hooks with timers on base, the wall clock and log.c. */
void core_event_hooks(struct event_base *base, struct core_hooks *hooks)
{
    *hooks = (struct core_hooks){
        .ctx = base,
        .timer_new = core_event_new,
        .timer_arm = core_event_arm,
        .defer = core_event_defer,
        .timer_disarm = core_event_disarm,
        .timer_pending = core_event_pending,
        .timer_free = core_event_free,
        .wall_ms = core_event_wall_ms,
        .mono_us = core_event_mono_us,
        .log = core_event_log,
    };
}
