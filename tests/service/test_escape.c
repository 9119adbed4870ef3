/*
 * Names clients choose reach operators' terminals and scrapers: a namespace
 * and a node id holding an ESC sequence that retitles a terminal
 * ("\x1b]0;evil\x07"), a newline followed by a fake row, and a byte of
 * invalid UTF-8 must come out escaped in /v1/jobs?format=text (the table and
 * one job), the JSON of /v1/jobs and /v1/status, the label values of
 * /metrics, and `muster status` (MUSTER_TEST_CLI).  The CLI also escapes
 * control bytes of whatever answers it: a fake endpoint here sends them raw.
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <muster/rdzv.h>

#include "hclient.h"
#include "hhttp.h"
#include "raw.h"

extern char **environ;

/* The hostile parts: a terminal title sequence, a newline before a fake row, a byte that is no UTF-8. */
#define EVIL "\x1b]0;evil\x07" "a\nfake\xff"
/* EVIL as terminal text and label values show it (the label's "\n" is the exposition format's own). */
#define EVIL_TEXT "\\x1b]0;evil\\x07a\\nfake\\xff"
#define EVIL_LABEL "\\\\x1b]0;evil\\\\x07a\\nfake\\\\xff"
/* EVIL as a JSON string's source. */
#define EVIL_JSON "\\u001b]0;evil\\u0007a\\u000afake\\\\xff"

static struct h_daemon d;
static uint16_t mport;

/* Whether text holds a byte a terminal would act on or that is no UTF-8 (a newline only when lines is 0). */
static int has_raw_control(const char *text, int lines)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++)
        if ((*p < 0x20 && !(lines && *p == '\n')) || *p == 0x7f || *p == 0xff)
            return 1;
    return 0;
}

/* Whether a line of text starts with "fake" (a row the newline would have forged). */
static int has_fake_row(const char *text)
{
    return strncmp(text, "fake", 4) == 0 || strstr(text, "\nfake") != NULL;
}

/* GET path (200 expected); the body, "" when none (caller frees). */
static char *get(const char *path)
{
    char *body = NULL;
    int code = hh_get(mport, path, &body, 5000);
    CHECK_EQ(code, 200);
    return body ? body : strdup("");
}

/* Check one answer: no raw control byte or forged row, and the escaped form want present. */
static void check_body(const char *what, const char *body, int lines, const char *want)
{
    int raw = has_raw_control(body, lines), fake = has_fake_row(body), found = strstr(body, want) != NULL;
    if (raw || fake || !found)
        printf("  %s: raw control %d, fake row %d, escaped form %s:\n%s\n", what, raw, fake,
               found ? "found" : "missing", body);
    CHECK(!raw);
    CHECK(!fake);
    CHECK(found);
}

/* A namespace and a rendezvous member whose names hold EVIL; returns the member's handle. */
static muster_t *make_evil(int *rawfd)
{
    *rawfd = raw_open(d.port, "ns" EVIL);
    CHECK(*rawfd >= 0);
    CHECK_EQ(raw_set(*rawfd, 1, "k", "v", 1), 0);
    uint64_t id = 0;
    CHECK_EQ(raw_status(*rawfd, 5000, &id), MUSTER_OK);
    muster_t *m = hc_connect(&d, "job", NULL);
    muster_rdzv_opts o = {.node_id = "id" EVIL, .local_world_size = 1, .min_nodes = 1, .max_nodes = 1};
    muster_assignment *a = NULL;
    CHECK_EQ(muster_rdzv_join(m, &o, &a, 5000), MUSTER_OK);
    muster_assignment_free(a);
    return m;
}

/* Every report of the metrics listener shows the names escaped. */
static void t_reports(void *arg)
{
    (void)arg;
    char *b = get("/v1/jobs?format=text");
    check_body("job table", b, 1, "ns" EVIL_TEXT);
    free(b);
    b = get("/v1/jobs/job?format=text");
    check_body("one job's text", b, 1, "id" EVIL_TEXT);
    free(b);
    b = get("/v1/jobs");
    check_body("jobs JSON", b, 1, "\"ns" EVIL_JSON "\"");
    free(b);
    b = get("/v1/jobs/job");
    check_body("one job's JSON", b, 1, "\"id" EVIL_JSON "\"");
    free(b);
    b = get("/v1/status");
    check_body("status JSON", b, 1, "\"id" EVIL_JSON "\"");
    free(b);
    b = get("/metrics");
    check_body("metrics", b, 1, "namespace=\"ns" EVIL_LABEL "\"");
    CHECK_EQ(hh_prom_bad_lines(b), 0);
    free(b);
}

/* Run `muster status ARGS...` with its stdout in a file; returns the output (caller frees) or NULL. */
static char *run_status(const char *cli, const char *url, const char *job)
{
    char out[PATH_MAX + 16];
    snprintf(out, sizeof out, "%s/status.out", h_tmpdir());
    const char *argv[] = {cli, "status", "--metrics-url", url, job, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, cli, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    CHECK_EQ(rc, 0);
    if (rc)
        return NULL;
    h_track(pid);
    int st;
    waitpid(pid, &st, 0);
    h_untrack(pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    FILE *f = fopen(out, "r");
    char *text = calloc(1, 65536);
    if (f && text)
        text[fread(text, 1, 65535, f)] = '\0';
    if (f)
        fclose(f);
    return text;
}

/* `muster status` prints the daemon's escaped table and job. */
static void t_cli(void *arg)
{
    const char *cli = arg;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)mport);
    char *out = run_status(cli, url, NULL);
    if (out)
        check_body("muster status", out, 1, "ns" EVIL_TEXT);
    free(out);
    out = run_status(cli, url, "job");
    if (out)
        check_body("muster status job", out, 1, "id" EVIL_TEXT);
    free(out);
}

/* A fake endpoint: answer one request with control bytes in its body, then close. */
static void *fake_endpoint(void *arg)
{
    int ls = *(int *)arg;
    int fd = accept(ls, NULL, NULL);
    if (fd < 0)
        return NULL;
    char req[1024];
    (void)!read(fd, req, sizeof req);
    static const char reply[] = "HTTP/1.0 200 OK\r\n\r\nJOB\nx" EVIL "\xc2\x9b|\n";
    (void)!write(fd, reply, sizeof reply - 1);
    close(fd);
    return NULL;
}

/* Whatever answers, `muster status` prints no control byte but newlines, and no invalid UTF-8. */
static void t_cli_fake(void *arg)
{
    const char *cli = arg;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(ls, 1) == 0 &&
          getsockname(ls, (struct sockaddr *)&sa, &len) == 0);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, fake_endpoint, &ls), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
    char *out = run_status(cli, url, NULL);
    /* The fake row stays a line of its own here: the CLI keeps newlines, the daemon escapes names. */
    if (out) {
        CHECK(!has_raw_control(out, 1));
        CHECK(strstr(out, "x\\x1b]0;evil\\x07a\nfake\\xff\\xc2\\x9b|") != NULL);
        if (has_raw_control(out, 1) || !strstr(out, "x\\x1b]0;evil\\x07a\nfake\\xff\\xc2\\x9b|"))
            printf("  muster status of a fake endpoint printed:\n%s\n", out);
    }
    free(out);
    pthread_join(t, NULL);
    close(ls);
}

int main(void)
{
    h_init("escape", 60);
    char pf[PATH_MAX + 16];
    snprintf(pf, sizeof pf, "%s/mport", h_tmpdir());
    const char *extra[] = {"--metrics-listen", "127.0.0.1:0", "--metrics-port-file", pf, NULL};
    if (h_start(&d, extra) == 0 && (mport = hh_port_file(pf, 5000)) != 0) {
        int rawfd = -1;
        muster_t *m = make_evil(&rawfd);
        H_RUN(t_reports, NULL);
        const char *cli = getenv("MUSTER_TEST_CLI");
        if (cli && *cli) {
            H_RUN(t_cli, (void *)cli);
            H_RUN(t_cli_fake, (void *)cli);
        }
        muster_close(m);
        if (rawfd >= 0)
            close(rawfd);
    }
    CHECK(mport != 0);
    h_stop(&d);
    return h_finish();
}
