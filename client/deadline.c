/* Monotonic deadlines: every wait in the library, libmuster-nccl and the CLI is bounded by one of these. */
#include "deadline.h"

#include <limits.h>
#include <time.h>

/* Monotonic time in milliseconds. */
uint64_t deadline_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Monotonic time in microseconds (round-trip measurements). */
uint64_t deadline_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The absolute deadline ms milliseconds from now. */
uint64_t deadline_after(uint64_t ms)
{
    return deadline_now() + ms;
}

/* Milliseconds left before deadline d (0 when passed), capped to int range for poll(). */
int deadline_left(uint64_t d)
{
    uint64_t now = deadline_now();
    if (now >= d)
        return 0;
    return d - now > INT_MAX ? INT_MAX : (int)(d - now);
}
