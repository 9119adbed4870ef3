/*
 * Counters: a fixed, named array plus one counter per op.  A dump writes
 * one "stat NAME=VALUE" line per counter between "stats begin" and "stats
 * end" lines, so a test or an operator can read them back from the log.
 * The SIGUSR1 dump is written whatever the log level (someone asked for
 * it); the exit dump is an info-level message like "exiting", so
 * --log-level warn or error leaves its hundred-odd lines out.
 */
#include "stats.h"

#include <stdio.h>

#include "log.h"

#define STATS_NAME_ROW(id, name) name,
static const char *const stats_names[STAT_COUNT] = {STATS_LIST(STATS_NAME_ROW)};
#undef STATS_NAME_ROW

const uint64_t stats_lat_bounds_us[STATS_LAT_BUCKETS - 1] = {STATS_LAT_BOUNDS_US};

/* Count one handler run of op_case that took ns nanoseconds in its latency histogram. */
void stats_observe(struct stats *s, unsigned op_case, uint64_t ns)
{
    if (op_case >= STATS_OP_SLOTS)
        return;
    uint64_t us = ns / 1000;
    size_t b = 0;
    while (b < STATS_LAT_BUCKETS - 1 && us > stats_lat_bounds_us[b])
        b++;
    s->lat[op_case][b]++;
    s->lat_sum_ns[op_case] += ns;
}

/* The public name of counter id. */
const char *stats_name(enum stat_id id)
{
    return (unsigned)id < STAT_COUNT ? stats_names[id] : "?";
}

/* Call fn for every counter (fixed ones, then "op_<name>" per op, named by op_name) with its value. */
void stats_each(const struct stats *s, stats_op_name_fn op_name, void (*fn)(void *arg, const char *name, uint64_t value),
                void *arg)
{
    for (int i = 0; i < STAT_COUNT; i++)
        fn(arg, stats_names[i], s->c[i]);
    for (int i = 0; i < STATS_OP_SLOTS; i++) {
        const char *op = op_name((unsigned)i);
        if (!op)
            continue;
        char name[64];
        snprintf(name, sizeof name, "op_%s", op);
        fn(arg, name, s->op[i]);
    }
}

/* Log one counter line at the level *arg points to. */
static void stats_log_one(void *arg, const char *name, uint64_t value)
{
    struct log_field f[] = {{"stat", name, 0}, {"value", NULL, (long long)value}};
    log_fields(*(const int *)arg, f, 2, "stat %s=%llu", name, (unsigned long long)value);
}

/* Write every counter to the log at level (LOG_ALWAYS: whatever the filter) between "stats begin"
 * and "stats end" lines. */
void stats_dump(const struct stats *s, stats_op_name_fn op_name, int level, const char *why)
{
    if (!log_enabled(level))
        return;
    log_msg(level, "stats begin (%s)", why);
    stats_each(s, op_name, stats_log_one, &level);
    log_msg(level, "stats end (%s)", why);
}
