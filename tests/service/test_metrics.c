/*
 * The HTTP endpoint of a real musterd: health and readiness, a Prometheus
 * scrape whose every line parses and whose numbers match what the test
 * did (per-op counts, histogram totals, keys per namespace, a limit
 * rejection by reason), and the job reports (/v1/jobs, /v1/jobs/NAME, the
 * text form) through a rendezvous generation that forms and then breaks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <muster/rdzv.h>

#include "hclient.h"
#include "hhttp.h"

static struct h_daemon d;
static uint16_t mport;

/* GET path, expecting code; returns the body (caller frees; "" when none). */
static char *get(const char *path, int want)
{
    char *body = NULL;
    int code = hh_get(mport, path, &body, 5000);
    CHECK_EQ(code, want);
    if (code != want)
        printf("  GET %s -> %d\n", path, code);
    return body ? body : strdup("");
}

/* /healthz and /readyz answer 200; an unknown path 404. */
static void t_health(void *arg)
{
    (void)arg;
    char *b = get("/healthz", 200);
    CHECK_STR(b, "ok\n");
    free(b);
    b = get("/readyz", 200);
    CHECK_STR(b, "ready\n");
    free(b);
    free(get("/nope", 404));
}

/* The scrape parses and its numbers match the ops the test made. */
static void t_scrape(void *arg)
{
    (void)arg;
    muster_t *m = hc_connect(&d, "mjob", NULL);
    for (int i = 0; i < 3; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        CHECK_EQ(hc_set_str(m, k, "v"), MUSTER_OK);
    }
    HC_EXPECT(m, "k1", "v");
    static char big[9000];
    memset(big, 'x', sizeof big - 1);
    CHECK_EQ(hc_set_str(m, big, "v"), MUSTER_ELIMIT);
    char *b = get("/metrics", 200);
    CHECK_EQ(hh_prom_bad_lines(b), 0);
    CHECK(hh_sample(b, "muster_op_requests_total{op=\"set\"}") >= 3);
    double sets = hh_sample(b, "muster_op_requests_total{op=\"set\"}");
    /* The key-size refusal happens before the handler, so it has no latency sample. */
    CHECK_EQ(hh_sample(b, "muster_op_duration_seconds_count{op=\"set\"}"), sets - 1);
    CHECK_EQ(hh_sample(b, "muster_op_duration_seconds_bucket{op=\"set\",le=\"+Inf\"}"), sets - 1);
    CHECK(hh_sample(b, "muster_op_duration_seconds_bucket{op=\"set\",le=\"1e-05\"}") <=
          hh_sample(b, "muster_op_duration_seconds_bucket{op=\"set\",le=\"0.001\"}"));
    CHECK_EQ(hh_sample(b, "muster_namespace_keys{namespace=\"mjob\"}"), 3);
    CHECK_EQ(hh_sample(b, "muster_namespace_bytes{namespace=\"mjob\"}"), 3 * 3);
    CHECK_EQ(hh_sample(b, "muster_limit_rejections_total{reason=\"key\"}"), 1);
    CHECK(hh_sample(b, "muster_connections") >= 1);
    CHECK_EQ(hh_sample(b, "muster_waiters"), 0);
    CHECK_EQ(hh_sample(b, "muster_ready"), 1);
    CHECK(strstr(b, "# TYPE muster_op_duration_seconds histogram\n") != NULL);
    free(b);
    muster_close(m);
}

/* Poll /v1/jobs/rjob until its body contains want (bounded); the last body. */
static char *await_job(const char *want)
{
    char *b = NULL;
    for (int i = 0; i < 200; i++) {
        free(b);
        b = get("/v1/jobs/rjob", 200);
        if (strstr(b, want))
            break;
        usleep(10000); /* a membership change lands on the daemon's loop, observable only by asking */
    }
    return b;
}

/* A generation forms, publishes an id, and breaks: the job reports follow. */
static void t_jobs(void *arg)
{
    (void)arg;
    muster_t *m = hc_connect(&d, "rjob", NULL);
    muster_rdzv_opts o = {.node_id = "node-a", .local_world_size = 4, .min_nodes = 1, .max_nodes = 1};
    muster_assignment *a = NULL;
    CHECK_EQ(muster_rdzv_join(m, &o, &a, 5000), MUSTER_OK);
    CHECK(a && a->generation == 1);
    CHECK_EQ(hc_set_str(m, "nccl/1/world/id/0", "opaque"), MUSTER_OK);
    char *b = get("/v1/jobs", 200);
    CHECK(strstr(b, "{\"jobs\":[") == b);
    CHECK(strstr(b, "\"name\":\"rjob\"") != NULL);
    free(b);
    b = await_job("id_published");
    CHECK(strstr(b, "\"state\":\"running\"") != NULL);
    CHECK(strstr(b, "\"world_size\":4") != NULL);
    CHECK(strstr(b, "\"members\":[{\"node_id\":\"node-a\",\"node_rank\":0,\"rank_start\":0,\"local_world_size\":4,"));
    CHECK(strstr(b, "\"state\":\"running\",\"peer\":\"127.0.0.1:") != NULL);
    CHECK(strstr(b, "\"event\":\"joined\"") != NULL);
    CHECK(strstr(b, "\"event\":\"assigned\"") != NULL);
    CHECK(strstr(b, "\"detail\":\"nccl/1/world/id/0\"") != NULL);
    free(b);
    muster_assignment_free(a);
    muster_close(m);
    b = await_job("\"event\":\"failed\"");
    CHECK(strstr(b, "\"state\":\"broken\"") != NULL);
    CHECK(strstr(b, "\"failures\":1") != NULL);
    free(b);
    b = get("/metrics", 200);
    CHECK_EQ(hh_sample(b, "muster_rdzv_failures_total{namespace=\"rjob\"}"), 1);
    CHECK_EQ(hh_sample(b, "muster_rdzv_generation{namespace=\"rjob\"}"), 1);
    free(b);
    b = get("/v1/jobs/rjob?format=text", 200);
    CHECK(strstr(b, "JOB ") == b);
    CHECK(strstr(b, "node-a") != NULL);
    CHECK(strstr(b, "broken") != NULL);
    free(b);
    free(get("/v1/jobs/no-such-job", 404));
}

/* Run every case against its own daemon(s); the exit status says whether all checks passed. */
int main(void)
{
    h_init("metrics", 60);
    char pf[4200];
    snprintf(pf, sizeof pf, "%s/mport", h_tmpdir());
    const char *extra[] = {"--metrics-listen", "127.0.0.1:0", "--metrics-port-file", pf, NULL};
    if (h_start(&d, extra) == 0 && (mport = hh_port_file(pf, 5000)) != 0) {
        H_RUN(t_health, NULL);
        H_RUN(t_scrape, NULL);
        H_RUN(t_jobs, NULL);
    }
    CHECK(mport != 0);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
