/* Helpers shared by the CLI's verbs: connecting, error reporting, exit statuses, number and file I/O. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "deadline.h"
#include "utf8.h"

/* Largest value file read, so `-f /dev/zero` ends with an error, not an OOM. */
#define CLI_MAX_FILE (1u << 30)

/* Log callback: keep the last error line, and print everything when verbose. */
static void cli_log(void *arg, int level, const char *msg)
{
    struct cli *c = arg;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (level <= MUSTER_LOG_ERROR)
        snprintf(c->last_log, sizeof c->last_log, "%s", msg);
    if (c->verbose)
        fprintf(stderr, "muster: %s: %s\n", level >= 0 && level <= 3 ? names[level] : "log", msg);
}

/* Describe a store URL without its token: "HOST:PORT[/NAMESPACE]", or for text that does not parse,
 * the text before its query (where a token would be). */
void cli_url_redacted(const char *url, char *out, size_t n)
{
    muster_url u;
    if (!url || muster_url_parse(url, &u) != MUSTER_OK) {
        const char *text = url ? url : "$MUSTER_URL";
        snprintf(out, n, "%.*s", (int)strcspn(text, "?"), text);
        return;
    }
    int v6 = strchr(u.host, ':') != NULL;
    int w = snprintf(out, n, "%s%s%s:%u", v6 ? "[" : "", u.host, v6 ? "]" : "", (unsigned)u.port);
    if (u.ns[0] && w > 0 && (size_t)w < n)
        snprintf(out + w, n - (size_t)w, "/%.*s", (int)(n - (size_t)w - 2), u.ns);
}

/* Connect on first use; CLI_OK with *m, or an exit status after printing why. */
int cli_connect(struct cli *c, muster_t **m)
{
    if (!c->m) {
        muster_opts o;
        memset(&o, 0, sizeof o);
        o.connect_timeout_ms = c->timeout_ms;
        o.default_timeout_ms = c->timeout_ms;
        o.client_name = "muster-cli";
        o.log_fn = cli_log;
        o.log_arg = c;
        int err = MUSTER_OK;
        c->m = muster_connect_opts(c->url, &o, &err);
        if (!c->m) {
            char where[300];
            cli_url_redacted(c->url, where, sizeof where);
            if (err == MUSTER_EURL && c->last_log[0])
                fprintf(stderr, "muster: %s\n", c->last_log); /* names the bad part, never the query */
            else if (err == MUSTER_EURL)
                fprintf(stderr, "muster: bad store URL %s\n", where);
            else
                fprintf(stderr, "muster: cannot connect to %s: %s\n", where,
                        c->last_log[0] ? c->last_log : muster_strerror(err));
            return err == MUSTER_EURL ? CLI_USAGE : err == MUSTER_ECONN ? CLI_CONNECT : cli_exit_code(err);
        }
    }
    *m = c->m;
    return CLI_OK;
}

/* The exit status for a library error code. */
int cli_exit_code(int err)
{
    switch (err) {
    case MUSTER_OK:
        return CLI_OK;
    case MUSTER_ENOTFOUND:
        return CLI_NO;
    case MUSTER_ETIMEDOUT:
        return CLI_TIMEOUT;
    case MUSTER_ECONN:
        return CLI_CONNECT;
    case MUSTER_EINVAL:
    case MUSTER_EURL:
        return CLI_USAGE;
    default:
        return CLI_ERROR;
    }
}

/* Print "muster: VERB: message" and return status. */
int cli_error(struct cli *c, int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "muster: %s: ", c->verb ? c->verb->name : "error");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return status;
}

/* Print "muster: VERB: reason" for err on c's handle and return its exit status. */
int cli_fail(struct cli *c, int err)
{
    const char *base = muster_strerror(err);
    const char *detail = muster_last_error(c->m);
    if (detail[0] && strcmp(detail, base) != 0)
        return cli_error(c, cli_exit_code(err), "%s (%s)", base, detail);
    return cli_error(c, cli_exit_code(err), "%s", base);
}

/* Milliseconds on the library's monotonic clock (deadlines of waits, heartbeats, grace periods). */
uint64_t cli_now_ms(void)
{
    return deadline_now();
}

/* Parse a decimal uint32 (strict: digits only, in range) into *out; 0 on success. */
int cli_parse_u32(const char *s, uint32_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Parse a decimal int64 (optional sign) into *out; 0 on success. */
int cli_parse_i64(const char *s, int64_t *out)
{
    if (!s)
        return -1;
    const char *d = (*s == '-' || *s == '+') ? s + 1 : s;
    if (!isdigit((unsigned char)*d))
        return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* Read all of path ("-" = stdin) into a malloc'd buffer; 0 on success. */
int cli_read_file(const char *path, void **data, size_t *len)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? 0 : -1;
    while (rc == 0) {
        if (n == cap) {
            char *nb = cap >= CLI_MAX_FILE ? NULL : realloc(buf, cap * 2);
            if (!nb) {
                rc = -1;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            rc = ferror(f) ? -1 : 1;
    }
    if (f != stdin)
        fclose(f);
    if (rc < 0) {
        free(buf);
        return -1;
    }
    *data = buf;
    *len = n;
    return 0;
}

/* Write len bytes to path ("-" or NULL = stdout); 0 on success. */
int cli_write_file(const char *path, const void *data, size_t len)
{
    int to_stdout = !path || strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "wb");
    if (!f)
        return -1;
    int rc = len && fwrite(data, 1, len, f) != len ? -1 : 0;
    if (to_stdout)
        rc |= fflush(f) != 0 ? -1 : 0;
    else
        rc |= fclose(f) != 0 ? -1 : 0;
    return rc;
}

/* Print len bytes to stdout with non-printable bytes as \xNN escapes. */
void cli_print_escaped(const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\\')
            fputs("\\\\", stdout);
        else if (isprint(p[i]))
            putchar(p[i]);
        else
            printf("\\x%02x", p[i]);
    }
}

/* The length (1..4) of the valid UTF-8 character at p that is no control character (C0, DEL, C1), or 0. */
static size_t cli_utf8_printable(const unsigned char *p)
{
    unsigned cp = 0;
    size_t k = utf8_decode(p, &cp);
    return k && !utf8_control(cp) ? k : 0;
}

/* Print text for a terminal: lines and tabs kept, valid printable UTF-8 as it is, every other byte
 * (ESC, BEL, a carriage return, C1 controls, invalid UTF-8) as \xNN. */
void cli_print_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t k = cli_utf8_printable(p);
        if (k > 0)
            fwrite(p, 1, k, stdout);
        else if (*p == '\n' || *p == '\t')
            putchar(*p);
        else
            printf("\\x%02x", *p);
        p += k ? k : 1;
    }
}
