/*
 * The status page (/ of --metrics-listen) and the JSON it draws from, against a real musterd with a
 * running rendezvous job: three members n0..n2 and a standby s0, each a child process on its own
 * libmuster handle that heartbeats and, when its generation breaks, joins the recovery round.
 *
 *   test-status-page json   /v1/status, /v1/server, /v1/jobs and /v1/jobs/NAME parse and hold every
 *                           key the page reads; after n1 is SIGKILLed, the next generation (n0, n2
 *                           and the standby, old ranks kept) and n1 excluded with its cause; no
 *                           answer, nor the page, nor /metrics holds the token, the value or the
 *                           key's name.
 *   test-status-page page   the same job in headless Chromium (--dump-dom after its script ran, and
 *                           a screenshot): the members and the standby, then the break, the recovery
 *                           and generation 2.  Screenshots go to $MUSTER_TEST_OUT_DIR (default
 *                           ./status-page-out); their paths are printed.  Exits 77 when no Chromium
 *                           starts ($MUSTER_TEST_CHROMIUM names one, else chromium on $PATH).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hhttp.h"
#include "muster/muster.h"
#include "muster/rdzv.h"

#define T_TOKEN "TOKEN-b83f1e55a0"
#define T_VALUE "VALUE-7c41e2d9f3"
#define T_KEY "page-test-key-5d1a"

static struct h_daemon t_d;
static uint16_t t_mport;
static pid_t t_pids[4]; /* n0, n1, n2, s0 */

/* A member (or standby) until killed: join, heartbeat, and on a break join the recovery round; n0 arms its
 * recovery in each generation (the page shows it). */
static void t_node_main(const char *url, const char *id, int standby)
{
    int arms = strcmp(id, "n0") == 0;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int err = 0;
    muster_t *m = muster_connect(url, &err);
    if (!m)
        _exit(2);
    muster_rdzv_opts o = {.node_id = id, .local_world_size = 2, .min_nodes = 3, .max_nodes = 3, .standby = standby};
    muster_assignment *a = NULL;
    if (muster_rdzv_join(m, &o, &a, 60000) != MUSTER_OK)
        _exit(3);
    if (arms && muster_rdzv_arm(m, &o, 60000) != MUSTER_OK)
        _exit(6);
    uint32_t every = muster_rdzv_heartbeat_interval(m);
    every = every && every < 200 ? every : 200;
    for (;;) {
        usleep(every * 1000);
        int rc = muster_rdzv_heartbeat(m, a->generation, 5000);
        if (rc == MUSTER_OK)
            continue;
        if (rc != MUSTER_ESTALE)
            _exit(4);
        muster_assignment_free(a);
        a = NULL;
        if (muster_rdzv_recover(m, &o, &a, 60000) != MUSTER_OK)
            _exit(5);
        if (arms && muster_rdzv_arm(m, &o, 60000) != MUSTER_OK)
            _exit(6);
    }
}

/* Start node id (a standby when standby) as a child process. */
static pid_t t_node(const char *id, int standby)
{
    char url[160];
    snprintf(url, sizeof url, "%s/job?token=%s", t_d.url, T_TOKEN);
    pid_t pid = fork();
    if (pid == 0)
        t_node_main(url, id, standby);
    return pid;
}

/* GET path from the metrics listener; the body (caller frees), NULL unless 200. */
static char *t_get(const char *path)
{
    char *body = NULL;
    int code = hh_get(t_mport, path, &body, 5000);
    if (code != 200) {
        free(body);
        return NULL;
    }
    return body;
}

/* GET path and parse it as JSON; NULL when that failed. */
static json_t *t_json(const char *path)
{
    char *body = t_get(path);
    if (!body)
        return NULL;
    json_error_t e;
    json_t *j = json_loads(body, 0, &e);
    if (!j)
        fprintf(stderr, "%s: bad JSON: %s (line %d)\n", path, e.text, e.line);
    free(body);
    return j;
}

/* The value at a dotted path of objects ("server.ha.role"), or NULL. */
static json_t *t_at(json_t *j, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); j && k; k = strtok_r(NULL, ".", &save))
        j = json_object_get(j, k);
    return j;
}

/* Check every dotted path of a NULL-terminated list is present in j. */
static void t_keys(json_t *j, const char *where, const char *const *paths)
{
    for (; *paths; paths++)
        if (!t_at(j, *paths)) {
            fprintf(stderr, "%s lacks %s\n", where, *paths);
            CHECK(!"a key is missing");
        }
}

/* Whether the page's own source (/v1/status?offset=0, cached by its URI for --http-cache) shows job "job" at
 * generation gen, within 20 s: what the page renders may be up to that cache's age behind /v1/jobs/job. */
static int t_page_sees_gen(int gen)
{
    for (int64_t end = h_now_ms() + 20000; h_now_ms() < end; h_nap(50)) {
        json_t *j = t_json("/v1/status?offset=0");
        json_t *jobs = j ? t_at(j, "jobs") : NULL;
        int seen = 0;
        for (size_t i = 0; jobs && i < json_array_size(jobs); i++) {
            json_t *e = json_array_get(jobs, i);
            const char *name = json_string_value(t_at(e, "name"));
            seen |= name && strcmp(name, "job") == 0 && json_integer_value(t_at(e, "generation")) == gen;
        }
        json_decref(j);
        if (seen)
            return 1;
    }
    return 0;
}

/* Job "job" of /v1/jobs/job, once it runs generation gen with n members (up to 20 s); NULL if never. */
static json_t *t_await_gen(int gen, int n)
{
    for (int64_t end = h_now_ms() + 20000; h_now_ms() < end; h_nap(50)) {
        json_t *j = t_json("/v1/jobs/job");
        if (j && json_integer_value(t_at(j, "generation")) == gen &&
            strcmp(json_string_value(t_at(j, "state")) ? json_string_value(t_at(j, "state")) : "", "running") == 0 &&
            (int)json_array_size(t_at(j, "members")) == n)
            return j;
        json_decref(j);
    }
    return NULL;
}

/* Check no answer of the listener holds the token, the value or the key's name. */
static void t_no_leaks(void)
{
    static const char *const paths[] = {"/", "/v1/status", "/v1/server", "/v1/jobs", "/v1/jobs/job",
                                        "/v1/jobs?format=text", "/v1/jobs/job?format=text", "/metrics", NULL};
    for (const char *const *p = paths; *p; p++) {
        char *b = t_get(*p);
        CHECK(b != NULL);
        if (!b)
            continue;
        if (strstr(b, T_TOKEN) || strstr(b, T_VALUE) || strstr(b, T_KEY))
            fprintf(stderr, "%s leaks the token, the value or the key's name\n", *p);
        CHECK(!strstr(b, T_TOKEN) && !strstr(b, T_VALUE) && !strstr(b, T_KEY));
        free(b);
    }
}

/* Start musterd, set the key, form generation 1 of n0..n2 and park the standby s0; 0 when all is up. */
static int t_setup(void)
{
    char mport[PATH_MAX], tok[128];
    snprintf(mport, sizeof mport, "%s/mport", h_tmpdir());
    snprintf(tok, sizeof tok, "job=%s", T_TOKEN);
    const char *extra[] = {"--metrics-listen", "127.0.0.1:0", "--metrics-port-file", mport, "--token", tok,
                           "--recovery-timeout", "10s", NULL};
    if (h_start(&t_d, extra) != 0 || !(t_mport = hh_port_file(mport, 10000)))
        return -1;
    char url[160];
    snprintf(url, sizeof url, "%s/job?token=%s", t_d.url, T_TOKEN);
    int err = 0;
    muster_t *m = muster_connect(url, &err);
    CHECK(m != NULL);
    CHECK_EQ(muster_set(m, T_KEY, T_VALUE, strlen(T_VALUE), 5000), MUSTER_OK);
    muster_close(m);
    for (int i = 0; i < 3; i++) {
        char id[8];
        snprintf(id, sizeof id, "n%d", i);
        t_pids[i] = t_node(id, 0);
    }
    json_t *j = t_await_gen(1, 3);
    CHECK(j != NULL);
    json_decref(j);
    t_pids[3] = t_node("s0", 1);
    for (int64_t end = h_now_ms() + 10000; h_now_ms() < end; h_nap(50)) {
        j = t_json("/v1/jobs/job");
        int parked = json_integer_value(t_at(j, "num_standbys")) == 1;
        json_decref(j);
        if (parked)
            return 0;
    }
    CHECK(!"the standby was never parked");
    return -1;
}


/* SIGKILL node i (0..3) and reap it. */
static void t_kill(int i)
{
    kill(t_pids[i], SIGKILL);
    waitpid(t_pids[i], NULL, 0);
    t_pids[i] = 0;
}

/* Job "job" once its excluded list of generation gen holds n members (up to 20 s); NULL if never. */
static json_t *t_await_excluded(int gen, size_t n)
{
    for (int64_t end = h_now_ms() + 20000; h_now_ms() < end; h_nap(50)) {
        json_t *j = t_json("/v1/jobs/job");
        if (j && json_integer_value(t_at(j, "excluded.generation")) == gen &&
            json_array_size(t_at(j, "excluded.members")) == n)
            return j;
        json_decref(j);
    }
    return NULL;
}

/* Generation 2 breaks by n0's loss, then n2 and s0 go too: only n0 is named as what broke it. */
static void t_culprit(void)
{
    t_kill(0);
    json_t *j = t_await_excluded(2, 1);
    CHECK(j != NULL);
    CHECK_STR(json_string_value(t_at(j, "broken_by.node_id")), "n0");
    json_decref(j);
    t_kill(2);
    t_kill(3);
    j = t_await_excluded(2, 3);
    CHECK(j != NULL);
    CHECK_EQ(json_integer_value(t_at(j, "excluded.generation")), 2);
    CHECK_STR(json_string_value(t_at(j, "broken_by.node_id")), "n0");
    CHECK_STR(json_string_value(t_at(j, "broken_by.cause")), "closed its connection");
    json_t *x;
    size_t i;
    int culprits = 0, after = 0;
    json_array_foreach(t_at(j, "excluded.members"), i, x) {
        int broke = json_is_true(t_at(x, "broke_generation"));
        CHECK(json_is_boolean(t_at(x, "broke_generation")));
        CHECK_EQ(broke, strcmp(json_string_value(t_at(x, "node_id")), "n0") == 0);
        culprits += broke;
        after += !broke;
    }
    CHECK_EQ(culprits, 1);
    CHECK_EQ(after, 2);
    json_decref(j);
    char *text = t_get("/v1/jobs/job?format=text");
    CHECK(text && strstr(text, "n0") && strstr(text, "(broke the generation)") && strstr(text, "(after the break)"));
    free(text);
}

/* Stop the nodes still running. */
static void t_teardown(void)
{
    for (int i = 0; i < 4; i++)
        if (t_pids[i] > 0) {
            kill(t_pids[i], SIGKILL);
            waitpid(t_pids[i], NULL, 0);
        }
}

/* The JSON of /v1/: every key the page reads, the recovery's outcome, and nothing secret. */
static void t_json_case(void *unused)
{
    (void)unused;
    static const char *const server[] = {
        "version", "state", "ready", "connections.current", "connections.limit", "namespaces.current",
        "namespaces.limit", "keys.current", "keys.largest_namespace", "keys.limit_per_namespace", "bytes.current",
        "bytes.largest_namespace", "bytes.limit_per_namespace", "buffer_memory.current", "buffer_memory.limit",
        "parked.current", "parked.limit", "parked.limit_per_namespace", "watches.current", "watches.limit",
        "persistence.enabled", "persistence.ready", "persistence.fsync", "persistence.records", "persistence.errors",
        "persistence.compacting", "ha.enabled", "ha.role", "ha.leader", NULL};
    static const char *const job[] = {
        "name", "state", "generation", "num_members", "joining", "world_size", "failures", "keys", "bytes",
        "connections", "parked", "generations_formed", "recoveries", "restarts", "num_standbys", "recovering",
        "recovery_joined", "recovery_deadline_ms", "armed", "members", "joiners", "standbys", "timeline",
        "excluded.generation", "excluded.members", NULL};
    static const char *const node[] = {"node_id", "node_rank", "rank_start", "local_world_size", "seen_ms",
                                       "seen_age_ms", "state", "peer", NULL};
    json_t *all = t_json("/v1/status");
    CHECK(all != NULL);
    CHECK(json_is_integer(t_at(all, "time_ms")));
    t_keys(t_at(all, "server"), "/v1/status server", server);
    json_t *health = t_json("/v1/server");
    t_keys(health, "/v1/server", server);
    CHECK_STR(json_string_value(t_at(health, "state")), "serving");
    CHECK_STR(json_string_value(t_at(health, "ha.role")), "single");
    CHECK(json_integer_value(t_at(health, "keys.current")) >= 2); /* ours and muster/rdzv/generation */
    CHECK(json_integer_value(t_at(health, "connections.current")) >= 4);
    /* The per-job limits are compared with the largest job, not with the store's total. */
    json_t *only = t_json("/v1/jobs/job");
    CHECK_EQ(json_integer_value(t_at(health, "keys.largest_namespace")), json_integer_value(t_at(only, "keys")));
    CHECK_EQ(json_integer_value(t_at(health, "bytes.largest_namespace")), json_integer_value(t_at(only, "bytes")));
    CHECK_EQ(json_integer_value(t_at(health, "buffer_memory.limit")), 1 << 30);
    json_decref(only);
    json_decref(health);
    json_t *jobs = t_at(all, "jobs");
    CHECK_EQ(json_array_size(jobs), 1);
    json_t *j = json_array_get(jobs, 0);
    t_keys(j, "/v1/status job", job);
    CHECK_STR(json_string_value(t_at(j, "state")), "running");
    CHECK_EQ(json_array_size(t_at(j, "members")), 3);
    t_keys(json_array_get(t_at(j, "members"), 0), "a member", node);
    CHECK_EQ(json_integer_value(t_at(j, "world_size")), 6);
    CHECK_EQ(json_array_size(t_at(j, "standbys")), 1);
    t_keys(json_array_get(t_at(j, "standbys"), 0), "a standby", node);
    CHECK_STR(json_string_value(t_at(json_array_get(t_at(j, "standbys"), 0), "node_id")), "s0");
    const char *peer = json_string_value(t_at(json_array_get(t_at(j, "members"), 0), "peer"));
    CHECK(peer && strncmp(peer, "127.0.0.1:", 10) == 0);
    json_t *list = t_json("/v1/jobs");
    CHECK_EQ(json_integer_value(t_at(json_array_get(t_at(list, "jobs"), 0), "num_standbys")), 1);
    json_decref(list);
    json_decref(all);
    t_no_leaks();

    t_kill(1);
    j = t_await_gen(2, 3);
    CHECK(j != NULL);
    CHECK_EQ(json_integer_value(t_at(j, "recoveries")), 1);
    CHECK_EQ(json_integer_value(t_at(j, "restarts")), 1);
    CHECK_EQ(json_integer_value(t_at(j, "failures")), 1);
    CHECK_EQ(json_integer_value(t_at(j, "num_standbys")), 0);
    json_t *mem = t_at(j, "members");
    const char *want[] = {"n0", "n2", "s0"};
    for (size_t i = 0; i < 3; i++)
        CHECK_STR(json_string_value(t_at(json_array_get(mem, i), "node_id")), want[i]);
    CHECK_EQ(json_integer_value(t_at(json_array_get(mem, 1), "old_node_rank")), 2);
    CHECK_EQ(json_integer_value(t_at(j, "excluded.generation")), 1);
    json_t *x = json_array_get(t_at(j, "excluded.members"), 0);
    CHECK_STR(json_string_value(t_at(x, "node_id")), "n1");
    CHECK_STR(json_string_value(t_at(x, "cause")), "closed its connection");
    int seen_failed = 0, seen_opened = 0, seen_excluded = 0, seen_recovered = 0;
    json_t *ev;
    size_t i;
    json_array_foreach(t_at(j, "timeline"), i, ev) {
        const char *k = json_string_value(t_at(ev, "event"));
        seen_failed |= strcmp(k, "failed") == 0 && strcmp(json_string_value(t_at(ev, "detail")), "n1") == 0;
        seen_opened |= strcmp(k, "recovery_opened") == 0;
        seen_excluded |= strcmp(k, "excluded") == 0 && strcmp(json_string_value(t_at(ev, "detail")), "n1") == 0;
        seen_recovered |= strcmp(k, "recovered") == 0 && json_integer_value(t_at(ev, "generation")) == 2;
    }
    CHECK(seen_failed && seen_opened && seen_excluded && seen_recovered);
    CHECK(json_is_true(t_at(x, "broke_generation"))); /* n1's loss broke generation 1 */
    CHECK_STR(json_string_value(t_at(j, "broken_by.node_id")), "n1");
    json_decref(j);
    t_no_leaks();
    t_culprit();
}

/* The Chromium to use: $MUSTER_TEST_CHROMIUM, or chromium found on $PATH; NULL when none. */
static const char *t_chromium_path(void)
{
    const char *env = getenv("MUSTER_TEST_CHROMIUM");
    if (env && *env)
        return env;
    static char found[PATH_MAX];
    const char *path = getenv("PATH");
    static const char *const names[] = {"chromium", "chromium-browser", "google-chrome", NULL};
    for (const char *const *n = names; *n; n++)
        for (const char *p = path; p && *p;) {
            size_t len = strcspn(p, ":");
            snprintf(found, sizeof found, "%.*s/%s", (int)len, p, *n);
            if (access(found, X_OK) == 0)
                return found;
            p += len + (p[len] == ':');
        }
    return NULL;
}

/* Load url in headless Chromium, after its scripts ran for 4 s of virtual time: the DOM (caller
 * frees; NULL when it failed or took over 60 s) and, when shot is set, a screenshot there. */
static char *t_chromium(const char *chrome, const char *url, const char *shot)
{
    char dom[PATH_MAX], err[PATH_MAX], profile[PATH_MAX], shot_arg[PATH_MAX + 16];
    snprintf(dom, sizeof dom, "%s/dom.html", h_tmpdir());
    snprintf(err, sizeof err, "%s/chromium.log", h_tmpdir());
    snprintf(profile, sizeof profile, "--user-data-dir=%s/chromium-profile", h_tmpdir());
    snprintf(shot_arg, sizeof shot_arg, "--screenshot=%s", shot ? shot : "");
    pid_t pid = fork();
    if (pid == 0) {
        int out = open(dom, O_WRONLY | O_CREAT | O_TRUNC, 0600), log = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(out, 1);
        dup2(log, 2);
        execl(chrome, chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--no-first-run", "--hide-scrollbars", profile, "--window-size=1280,1700", "--virtual-time-budget=4000",
              "--dump-dom", shot ? shot_arg : "--mute-audio", url, (char *)NULL);
        _exit(127);
    }
    int status = -1;
    for (int64_t end = h_now_ms() + 60000; waitpid(pid, &status, WNOHANG) == 0; h_nap(50))
        if (h_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return NULL;
        }
    FILE *f = fopen(dom, "r");
    if (!f || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (f)
            fclose(f);
        return NULL;
    }
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return n ? strdup(buf) : NULL;
}

/* Whether the DOM holds the text what (an element's attributes as the page writes them, or words). */
static int t_dom_has(const char *dom, const char *what)
{
    return dom && strstr(dom, what) != NULL;
}

/* The page in headless Chromium: the members and standby, then the break and generation 2. */
static void t_page_case(const char *chrome)
{
    const char *dir = getenv("MUSTER_TEST_OUT_DIR");
    dir = dir && *dir ? dir : "status-page-out";
    mkdir(dir, 0755);
    char url[64], shot1[PATH_MAX], shot2[PATH_MAX];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", (unsigned)t_mport);
    snprintf(shot1, sizeof shot1, "%s/status-page-generation-1.png", dir);
    snprintf(shot2, sizeof shot2, "%s/status-page-generation-2.png", dir);

    char *dom = t_chromium(chrome, url, shot1);
    CHECK(dom != NULL);
    CHECK(t_dom_has(dom, "data-job=\"job\" data-state=\"running\" data-generation=\"1\""));
    CHECK(t_dom_has(dom, "data-node=\"n0\" data-state=\"running\""));
    CHECK(t_dom_has(dom, "data-node=\"n1\" data-state=\"running\""));
    CHECK(t_dom_has(dom, "data-node=\"n2\" data-state=\"running\""));
    CHECK(t_dom_has(dom, "<tr data-node=\"s0\""));                   /* the standby's row */
    CHECK(t_dom_has(dom, "data-armed=\"1\""));                      /* n0 armed its recovery */
    CHECK(t_dom_has(dom, "127.0.0.1:"));                              /* members' addresses */
    CHECK(t_dom_has(dom, "data-gauge=\"connections\""));              /* the store's health */
    CHECK(t_dom_has(dom, "data-gauge=\"keys, largest job (limit per job)\""));
    CHECK(!t_dom_has(dom, "data-gauge=\"keys (limit per job)\""));
    CHECK(t_dom_has(dom, "data-summary=\"1\""));                    /* the counts by state and the pager */
    CHECK(t_dom_has(dom, "data-page=\"0-1\""));
    CHECK(t_dom_has(dom, "data-pager=\"next\" disabled"));
    CHECK(!t_dom_has(dom, T_TOKEN) && !t_dom_has(dom, T_VALUE) && !t_dom_has(dom, T_KEY));
    free(dom);

    t_kill(1);
    json_t *j = t_await_gen(2, 3);
    CHECK(j != NULL);
    json_decref(j);
    CHECK(t_page_sees_gen(2));
    dom = t_chromium(chrome, url, shot2);
    CHECK(dom != NULL);
    CHECK(t_dom_has(dom, "data-job=\"job\" data-state=\"running\" data-generation=\"2\""));
    CHECK(t_dom_has(dom, "data-node=\"s0\" data-state=\"running\"")); /* the standby is a member now */
    CHECK(!t_dom_has(dom, "data-node=\"n1\""));
    CHECK(t_dom_has(dom, "data-excluded=\"n1\""));
    CHECK(t_dom_has(dom, "closed its connection"));
    CHECK(t_dom_has(dom, "data-event=\"failed\""));
    CHECK(t_dom_has(dom, "data-event=\"recovery_opened\""));
    CHECK(t_dom_has(dom, "data-event=\"excluded\""));
    CHECK(t_dom_has(dom, "data-event=\"recovered\""));
    CHECK(!t_dom_has(dom, T_TOKEN) && !t_dom_has(dom, T_VALUE) && !t_dom_has(dom, T_KEY));
    free(dom);
    struct stat st;
    CHECK(stat(shot1, &st) == 0 && st.st_size > 1000);
    CHECK(stat(shot2, &st) == 0 && st.st_size > 1000);
    printf("screenshot: %s\nscreenshot: %s\n", shot1, shot2);
}

/* Run the JSON case, or the page case when Chromium starts (else skip). */
int main(int argc, char **argv)
{
    int page = argc > 1 && strcmp(argv[1], "page") == 0;
    h_init(page ? "status-page" : "status-json", 150);
    const char *chrome = NULL;
    if (page) {
        chrome = t_chromium_path();
        if (!chrome)
            h_skip("no Chromium: install Debian's chromium (scripts/deps.sh --test) or set MUSTER_TEST_CHROMIUM");
        char *probe = t_chromium(chrome, "data:text/html,<p>up</p>", NULL);
        if (!probe || !strstr(probe, "<p>up</p>")) {
            fprintf(stderr, "%s --headless did not start; its log:\n", chrome);
            char log[PATH_MAX];
            snprintf(log, sizeof log, "cat %s/chromium.log >&2", h_tmpdir());
            if (system(log) != 0)
                fprintf(stderr, "(no log)\n");
            h_skip("Chromium cannot start headless here");
        }
        free(probe);
    }
    if (t_setup() == 0) {
        if (page)
            H_RUN(t_page_case, chrome);
        else
            H_RUN(t_json_case, NULL);
    }
    t_teardown();
    return h_finish();
}
