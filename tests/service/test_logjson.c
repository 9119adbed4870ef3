/*
 * --log-format json against a real musterd: every line its log holds after
 * start-up, namespaces created (one named with a quote, a backslash, a
 * newline, control bytes, a byte that is not UTF-8 and a well-formed
 * multi-byte character), connections refused, a counter dump (SIGUSR1) and
 * the drain at SIGTERM parses with jansson as one object with ts (RFC 3339
 * UTC with milliseconds), level and msg, and the structured fields carry
 * the exact names.  A bad --log-format is a usage error (64).
 */
#include <jansson.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"

/* A namespace name no text log could hold on one line. */
static const char weird_ns[] = "we\"ird\\ns\nline2\x01\x1f\t\x7f\xff\xc3\xa9-end";
/* What its namespace field must read after JSON decoding: the lone 0xff byte as the text \xff. */
static const char weird_ns_decoded[] = "we\"ird\\ns\nline2\x01\x1f\t\x7f\\xff\xc3\xa9-end";

/* Read a whole file into a NUL-terminated buffer (NULL when unreadable). */
static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, fp)) > 0) {
        len += n;
        if (cap - len < 2)
            buf = realloc(buf, cap *= 2);
    }
    fclose(fp);
    if (buf)
        buf[len] = 0;
    return buf;
}

/* Checks over every line: counts of what was found. */
struct seen {
    int lines, bad, created, weird, closing, stats, exiting;
};

/* Check one line: an object with the stable keys; note the lines the test made happen. */
static void check_line(const char *line, struct seen *s, const regex_t *ts_re)
{
    json_error_t err;
    json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &err);
    s->lines++;
    if (!o || !json_is_object(o)) {
        printf("  not a JSON object (%s): %s\n", o ? "not an object" : err.text, line);
        s->bad++;
        json_decref(o);
        return;
    }
    const char *ts = json_string_value(json_object_get(o, "ts"));
    const char *level = json_string_value(json_object_get(o, "level"));
    const char *msg = json_string_value(json_object_get(o, "msg"));
    int level_ok = level && (!strcmp(level, "error") || !strcmp(level, "warn") || !strcmp(level, "info") ||
                             !strcmp(level, "debug"));
    if (!ts || regexec(ts_re, ts, 0, NULL, 0) != 0 || !level_ok || !msg) {
        printf("  missing or bad ts, level or msg: %s\n", line);
        s->bad++;
    }
    const char *ns = json_string_value(json_object_get(o, "namespace"));
    if (msg && strncmp(msg, "namespace '", 11) == 0 && strstr(msg, "' created")) {
        s->created++;
        if (ns && strcmp(ns, weird_ns_decoded) == 0 && strstr(msg, weird_ns_decoded))
            s->weird++;
    }
    json_t *conn = json_object_get(o, "conn");
    if (msg && strstr(msg, ": closing: ") && json_is_integer(conn) &&
        json_string_value(json_object_get(o, "peer")) && json_string_value(json_object_get(o, "error")))
        s->closing++;
    if (json_string_value(json_object_get(o, "stat")) && json_is_integer(json_object_get(o, "value")))
        s->stats++;
    if (msg && strstr(msg, "exiting"))
        s->exiting++;
    json_decref(o);
}

/* A daemon logging JSON at debug: every kind of line parses and carries its fields. */
static void t_lines(void *arg)
{
    (void)arg;
    struct h_daemon d;
    const char *extra[] = {"--log-format", "json", "--log-level", "debug", "--max-namespaces", "3", NULL};
    if (h_start(&d, extra) != 0) {
        CHECK(!"daemon started");
        return;
    }
    int a = raw_open(d.port, weird_ns);
    int b = raw_open(d.port, "plain");
    CHECK(a >= 0 && b >= 0);
    CHECK_EQ(raw_set(a, 1, "k\"\n\x02", "v", 1), 0);
    CHECK_EQ(raw_status(a, 5000, NULL), MUSTER__STATUS__OK);
    /* A fourth namespace is refused: a "closing" line naming the connection. */
    int c = raw_open(d.port, "third");
    int fd = raw_connect(d.port);
    CHECK(c >= 0 && fd >= 0);
    CHECK(raw_hello(fd, "fourth\x03", NULL) > 0);
    CHECK(h_stat(&d, "namespaces") >= 3);
    close(fd);
    close(c);
    close(b);
    close(a);
    CHECK_EQ(h_stop(&d), 0);

    char *log = slurp(d.log);
    CHECK(log != NULL);
    regex_t ts_re;
    regcomp(&ts_re, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$", REG_EXTENDED | REG_NOSUB);
    struct seen s = {0};
    for (char *line = log, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        CHECK(nl != NULL); /* every line ends in a newline */
        if (!nl)
            break;
        *nl = 0;
        check_line(line, &s, &ts_re);
    }
    regfree(&ts_re);
    printf("  %d lines: %d bad, %d created (%d weird), %d closing, %d stat, %d exiting\n", s.lines, s.bad,
           s.created, s.weird, s.closing, s.stats, s.exiting);
    CHECK(s.lines > 20);
    CHECK_EQ(s.bad, 0);
    CHECK_EQ(s.created, 3);
    CHECK_EQ(s.weird, 1);
    CHECK(s.closing >= 1);
    CHECK(s.stats > 50);
    CHECK(s.exiting >= 1);
    if (h_failures())
        h_dump_log(&d);
    free(log);
}

/* --log-format xml and MUSTER_LOG_FORMAT=xml are usage errors (64). */
static void t_bad_format(void *arg)
{
    (void)arg;
    const char *musterd = getenv("MUSTER_TEST_MUSTERD");
    for (int env = 0; env < 2; env++) {
        pid_t pid = fork();
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            dup2(null, 2);
            if (env) {
                setenv("MUSTER_LOG_FORMAT", "xml", 1);
                execl(musterd, musterd, "--listen", "127.0.0.1:0", (char *)NULL);
            }
            execl(musterd, musterd, "--log-format", "xml", "--listen", "127.0.0.1:0", (char *)NULL);
            _exit(127);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 64);
    }
}

int main(void)
{
    h_init("logjson", 60);
    H_RUN(t_lines, NULL);
    H_RUN(t_bad_format, NULL);
    return h_finish();
}
