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
    CHECK(strstr(b, "{\"summary\":{\"jobs\":") == b);
    CHECK(strstr(b, ",\"jobs\":[") != NULL);
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
    /* The timeline ring grows with its events: a job with a handful holds far less than 64 of them. */
    CHECK(hh_sample(b, "muster_rdzv_timeline_bytes_current") > 0);
    CHECK(hh_sample(b, "muster_rdzv_timeline_bytes_current") <= 8 * 280 * 2);
    free(b);
    b = get("/v1/jobs/rjob?format=text", 200);
    CHECK(strstr(b, "JOB ") == b);
    CHECK(strstr(b, "node-a") != NULL);
    CHECK(strstr(b, "broken") != NULL);
    free(b);
    free(get("/v1/jobs/no-such-job", 404));
}

/* Start d with a metrics listener and extra flags (NULL-terminated, at most 12); 0 when it is up. */
static int start(const char *const *more)
{
    static int nth;
    char pf[4200];
    snprintf(pf, sizeof pf, "%s/mport%d", h_tmpdir(), nth++);
    const char *extra[20] = {"--metrics-listen", "127.0.0.1:0", "--metrics-port-file", pf};
    for (size_t i = 0; more && more[i] && i < 12; i++)
        extra[4 + i] = more[i];
    mport = 0;
    return h_start(&d, extra) == 0 && (mport = hh_port_file(pf, 5000)) != 0 ? 0 : -1;
}

/* One-node job ns joins generation 1 and keeps its connection (returned), or closes it (broken; NULL). */
static muster_t *one_node_job(const char *ns, int keep)
{
    muster_t *m = hc_connect(&d, ns, NULL);
    muster_rdzv_opts o = {.node_id = "solo", .local_world_size = 1, .min_nodes = 1, .max_nodes = 1};
    muster_assignment *a = NULL;
    CHECK_EQ(muster_rdzv_join(m, &o, &a, 5000), MUSTER_OK);
    muster_assignment_free(a);
    if (!keep) {
        muster_close(m);
        return NULL;
    }
    return m;
}

/* Where in b the job name first appears as "name":"NAME" (NULL: not at all). */
static const char *job_at(const char *b, const char *name)
{
    char want[96];
    snprintf(want, sizeof want, "\"name\":\"%s\"", name);
    return strstr(b, want);
}

/* Jobs come a page at a time, broken first, then running, then the rest by name, with counts of all. */
static void t_pages(void *arg)
{
    (void)arg;
    muster_t *m = hc_connect(&d, "a-none", NULL);
    CHECK_EQ(hc_set_str(m, "k", "v"), MUSTER_OK);
    muster_close(m);
    m = hc_connect(&d, "d-none", NULL);
    CHECK_EQ(hc_set_str(m, "k", "v"), MUSTER_OK);
    muster_close(m);
    muster_t *run = one_node_job("c-run", 1);
    one_node_job("b-broken", 0);
    char *b = NULL;
    for (int i = 0; i < 200 && (!b || !strstr(b, "\"broken\":1")); i++, usleep(10000)) {
        free(b);
        b = get("/v1/status", 200);
    }
    CHECK(strstr(b, "\"summary\":{\"jobs\":4,\"states\":{\"broken\":1,\"recovering\":0,\"running\":1,"
                    "\"forming\":0,\"completed\":0,\"none\":2}}") != NULL);
    CHECK(strstr(b, "\"page\":{\"offset\":0,\"limit\":2,\"total\":4,\"next_offset\":2}") != NULL);
    CHECK(job_at(b, "b-broken") && job_at(b, "c-run") && job_at(b, "b-broken") < job_at(b, "c-run"));
    CHECK(!job_at(b, "a-none") && !job_at(b, "d-none"));
    free(b);
    b = get("/v1/status?offset=2&limit=50", 200);
    CHECK(job_at(b, "a-none") && job_at(b, "d-none") && job_at(b, "a-none") < job_at(b, "d-none"));
    CHECK(!job_at(b, "b-broken") && strstr(b, "\"next_offset\":null") != NULL);
    free(b);
    b = get("/v1/jobs?limit=1", 200);
    CHECK(job_at(b, "b-broken") && !job_at(b, "c-run"));
    free(b);
    b = get("/v1/jobs?format=text", 200);
    CHECK(strstr(b, "b-broken") && strstr(b, "c-run") && strstr(b, "b-broken") < strstr(b, "c-run"));
    CHECK(strstr(b, "... 2 more of 4 jobs (?offset=2)") != NULL);
    free(b);
    /* /metrics lists --metrics-max-namespaces 1 namespace, the broken one; the rest summed. */
    b = get("/metrics", 200);
    CHECK_EQ(hh_prom_bad_lines(b), 0);
    CHECK_EQ(hh_sample(b, "muster_rdzv_failures_total{namespace=\"b-broken\"}"), 1);
    CHECK_EQ(hh_sample(b, "muster_namespace_keys{namespace=\"c-run\"}"), -1);
    CHECK_EQ(hh_sample(b, "muster_namespace_keys{namespace=\"\",other=\"true\"}"), 2 + 2);
    CHECK_EQ(hh_sample(b, "muster_rdzv_running{namespace=\"\",other=\"true\"}"), 1);
    CHECK_EQ(hh_sample(b, "muster_namespaces_unlisted"), 3);
    CHECK(hh_sample(b, "muster_http_pages_cut_total") >= 3);
    free(b);
    muster_close(run);
}

/* Within --http-cache an answer is served again as it was; the hits are counted. */
static void t_cache(void *arg)
{
    (void)arg;
    char *a = get("/v1/status", 200), *b = get("/v1/status", 200);
    CHECK_STR(a, b); /* the same time_ms too: rendered once */
    free(a);
    free(b);
    a = get("/metrics", 200);
    muster_t *m = hc_connect(&d, "cjob", NULL);
    CHECK_EQ(hc_set_str(m, "k", "v"), MUSTER_OK);
    muster_close(m);
    b = get("/metrics", 200);
    CHECK_STR(a, b);
    free(a);
    free(b);
    CHECK(h_stat(&d, "http_cache_hits") >= 2);
}

/* An answer that would take buffered bytes past --max-buffer-memory is 503, counted; small ones pass. */
static void t_budget(void *arg)
{
    (void)arg;
    free(get("/metrics", 503));
    free(get("/v1/server", 200));
    free(get("/healthz", 200));
    CHECK_EQ(h_stat(&d, "limit_http_buffer_memory"), 1);
    long long held = h_stat(&d, "http_buffer_bytes_current"); /* /v1/server's answer, kept for --http-cache */
    CHECK(held > 0 && held < 4096);
}

/* GET path with Host host; the status code. */
static int get_host(const char *path, const char *host)
{
    char *body = NULL;
    int code = hh_get_host(mport, path, host, &body, 5000);
    free(body);
    return code;
}

/* A Host that is not an IP literal, localhost, this machine or an allowed name gets 421 (DNS rebinding). */
static void t_host(void *arg)
{
    (void)arg;
    CHECK_EQ(get_host("/v1/status", "attacker.example"), 421);
    CHECK_EQ(get_host("/metrics", "attacker.example:8080"), 421);
    CHECK_EQ(get_host("/v1/status", "127.0.0.1:1234"), 200);
    CHECK_EQ(get_host("/v1/status", "[::1]:1234"), 200);
    CHECK_EQ(get_host("/v1/status", "LOCALHOST:1"), 200);
    CHECK_EQ(get_host("/v1/status", "status.example"), 200); /* --http-allowed-hosts */
    CHECK_EQ(get_host("/v1/status", NULL), 200);
    CHECK_EQ(h_stat(&d, "http_bad_host"), 2);
}

/* Run every case against its own daemon(s); the exit status says whether all checks passed. */
int main(void)
{
    h_init("metrics", 90);
    const char *fresh[] = {"--http-cache", "0", NULL};
    if (start(fresh) == 0) {
        H_RUN(t_health, NULL);
        H_RUN(t_scrape, NULL);
        H_RUN(t_jobs, NULL);
    }
    CHECK(mport != 0);
    CHECK_EQ(h_stop(&d), 0);
    const char *paged[] = {"--http-cache", "0", "--status-page-jobs", "2", "--metrics-max-namespaces", "1", NULL};
    if (start(paged) == 0)
        H_RUN(t_pages, NULL);
    CHECK_EQ(h_stop(&d), 0);
    const char *cached[] = {"--http-cache", "60s", "--http-allowed-hosts", "other.example,status.example", NULL};
    if (start(cached) == 0) {
        H_RUN(t_cache, NULL);
        H_RUN(t_host, NULL);
    }
    CHECK_EQ(h_stop(&d), 0);
    const char *tight[] = {"--max-key", "1K", "--max-value", "8K", "--max-frame", "10K", "--max-output", "10K",
                           "--max-buffer-memory", "20K", NULL};
    if (start(tight) == 0)
        H_RUN(t_budget, NULL);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
