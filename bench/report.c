/* JSON report pieces shared by the load generator's modes. */
#include "report.h"

/* Protocol name as reported. */
const char *report_proto(const struct lg *lg)
{
    switch (lg->cfg.proto) {
    case PROTO_NATIVE: return "native";
    case PROTO_TS_NEW: return "tcpstore-new";
    case PROTO_TS_OLD: return "tcpstore-old";
    case PROTO_RAW: return "raw";
    default: return "?";
    }
}

/* Open the report and write the configuration every mode shares. */
void report_head(struct json *j, const struct lg *lg)
{
    json_begin(j, stdout);
    json_str(j, "tool", "muster-loadgen");
    json_str(j, "mode", lg->cfg.mode);
    json_str(j, "proto", report_proto(lg));
    json_str(j, "op", lg_op_name(lg->cfg.op));
    json_u64(j, "conns", lg->cfg.conns);
    json_u64(j, "depth", lg->cfg.depth);
    json_u64(j, "value_size", lg->cfg.value_size);
}

/* Write a latency object named key from h (microseconds). */
void report_latency(struct json *j, const char *key, const struct hist *h)
{
    json_obj(j, key);
    json_u64(j, "count", h->count);
    json_dbl(j, "mean", hist_mean(h) / 1e3);
    json_dbl(j, "min", h->count ? (double)h->min_ns / 1e3 : 0);
    json_dbl(j, "p50", (double)hist_quantile(h, 0.50) / 1e3);
    json_dbl(j, "p90", (double)hist_quantile(h, 0.90) / 1e3);
    json_dbl(j, "p99", (double)hist_quantile(h, 0.99) / 1e3);
    json_dbl(j, "p999", (double)hist_quantile(h, 0.999) / 1e3);
    json_dbl(j, "max", (double)h->max_ns / 1e3);
    json_end(j);
}

/* Write the error counters and the CPU figures of the measured window. */
void report_stats(struct json *j, const struct lg *lg, uint64_t ops)
{
    double secs = lg->t_end > lg->t_begin ? (double)(lg->t_end - lg->t_begin) / 1e9 : 0;
    json_dbl(j, "seconds", secs);
    json_u64(j, "ok", lg->st.ok);
    json_u64(j, "errors", lg->st.errors + lg->st.bad_replies + lg->st.timeouts + lg->st.connect_errors +
                               lg->st.closed);
    json_obj(j, "error_detail");
    json_u64(j, "error_replies", lg->st.errors);
    json_u64(j, "bad_replies", lg->st.bad_replies);
    json_u64(j, "unanswered", lg->st.timeouts);
    json_u64(j, "connect_failed", lg->st.connect_errors);
    json_u64(j, "closed_by_server", lg->st.closed);
    json_u64(j, "connect_retries", lg->st.retries);
    json_end(j);
    json_dbl(j, "ops_per_s", secs > 0 ? (double)ops / secs : 0);
    json_dbl(j, "loadgen_cpu_s", lg->self_cpu);
    if (lg->cfg.server_pid) {
        json_dbl(j, "server_cpu_s", lg->srv_cpu);
        json_dbl(j, "server_cpu_util", secs > 0 ? lg->srv_cpu / secs : 0);
        json_dbl(j, "ops_per_server_cpu_s", lg->srv_cpu > 0 ? (double)ops / lg->srv_cpu : 0);
    }
    json_u64(j, "syscalls", lg->net.syscalls);
}
