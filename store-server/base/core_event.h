/* The core's hooks over a libevent loop: timers, deferred calls, the wall clock and the log. */
#ifndef MUSTERD_CORE_EVENT_H
#define MUSTERD_CORE_EVENT_H

#include "core.h"

struct event_base;

/* Fill *hooks with timers on base, the wall clock and log.c. */
void core_event_hooks(struct event_base *base, struct core_hooks *hooks);

#endif
