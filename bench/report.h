/* JSON report pieces shared by the load generator's modes. */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include "json.h"
#include "loadgen.h"

/* Open the report and write the configuration every mode shares. */
void report_head(struct json *j, const struct lg *lg);
/* Write a latency object named key from h (microseconds). */
void report_latency(struct json *j, const char *key, const struct hist *h);
/* Write the error counters and the CPU figures of the measured window. */
void report_stats(struct json *j, const struct lg *lg, uint64_t ops);
/* Protocol name as reported. */
const char *report_proto(const struct lg *lg);

#endif
