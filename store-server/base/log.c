/*
 * Leveled logging for musterd: one line per message, written to stderr or
 * to --log-file, either as text ("TIMESTAMP LEVEL text") or, with
 * --log-format json, as one JSON object per line:
 *
 *   {"ts":"2024-05-01T12:00:00.123Z","level":"info","msg":"...",FIELDS}
 *
 * where FIELDS are the structured fields a log_fields call passes (text
 * lines leave them out: their message already says the same).
 *
 * The sink is a file-scope singleton: like stderr itself it is a property of
 * the process, and threading a context through every log call would clutter
 * each subsystem for no gain.  Only the event-loop thread logs.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static struct {
    FILE *fp;     /* NULL means stderr */
    char *path;
    int level;
    int format;   /* enum log_format */
} log_sink = {NULL, NULL, LOG_INFO, LOG_FORMAT_TEXT};

static const char *const log_names[] = {"error", "warn", "info", "debug"};
static const char *const log_format_names[] = {"text", "json"};

/* A JSON line being built in a fixed buffer: strings that do not fit are cut short (still closed), fields
 * that do not fit are left out whole, and the closing brace and newline always fit. */
struct log_json {
    char buf[16384];
    size_t len;
    int cut; /* something did not fit */
};

#define LOG_JSON_CAP (sizeof ((struct log_json *)0)->buf - 2) /* room kept for "}\n" */

/* The stream lines go to right now. */
static FILE *log_stream(void)
{
    return log_sink.fp ? log_sink.fp : stderr;
}

/* Send lines to path (NULL or "" = stderr) at or above level; -1 with errno on failure. */
int log_open(const char *path, int level)
{
    log_close();
    log_sink.level = level;
    if (!path || !*path)
        return 0;
    log_sink.path = strdup(path);
    if (!log_sink.path)
        return -1;
    return log_reopen();
}

/* Reopen the log file (after rotation); a no-op for stderr. */
int log_reopen(void)
{
    if (!log_sink.path)
        return 0;
    FILE *fp = fopen(log_sink.path, "ae");
    if (!fp)
        return -1;
    if (log_sink.fp)
        fclose(log_sink.fp);
    /* Line buffering keeps each message whole for readers tailing the file. */
    setvbuf(fp, NULL, _IOLBF, 0);
    log_sink.fp = fp;
    return 0;
}

/* Close the log file, falling back to stderr. */
void log_close(void)
{
    if (log_sink.fp)
        fclose(log_sink.fp);
    log_sink.fp = NULL;
    free(log_sink.path);
    log_sink.path = NULL;
}

/* Write lines as text or JSON (enum log_format) from now on. */
void log_set_format(int format)
{
    log_sink.format = format == LOG_FORMAT_JSON ? LOG_FORMAT_JSON : LOG_FORMAT_TEXT;
}

/* Parse "text" or "json"; -1 when unknown. */
int log_format_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof log_format_names / sizeof log_format_names[0]); i++)
        if (strcmp(name, log_format_names[i]) == 0)
            return i;
    return -1;
}

/* Whether a line at level would be written. */
int log_enabled(int level)
{
    return level <= log_sink.level;
}

/* Append n raw bytes when they fit; 0, or -1 (and cut set) when they do not. */
static int log_json_raw(struct log_json *j, const char *s, size_t n)
{
    if (j->len + n > LOG_JSON_CAP) {
        j->cut = 1;
        return -1;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    return 0;
}

/* The length of the well-formed UTF-8 sequence at s (at most n bytes), or 0 when there is none: overlong
 * forms, surrogates and code points past U+10FFFF are not well formed. */
static size_t log_utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned min;
    unsigned cp;
    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xE0) == 0xC0)
        len = 2, min = 0x80, cp = s[0] & 0x1F;
    else if ((s[0] & 0xF0) == 0xE0)
        len = 3, min = 0x800, cp = s[0] & 0x0F;
    else if ((s[0] & 0xF8) == 0xF0)
        len = 4, min = 0x10000, cp = s[0] & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* Append n bytes of a string's body when they fit with its closing quote after them; 0 or -1 (cut set). */
static int log_json_unit(struct log_json *j, const char *s, size_t n)
{
    if (j->len + n + 1 > LOG_JSON_CAP) {
        j->cut = 1;
        return -1;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    return 0;
}

/* Append s as a quoted JSON string: quote, backslash and control bytes escaped, well-formed UTF-8 kept, and
 * each byte that is not part of well-formed UTF-8 written as the text \xHH (JSON cannot carry a raw byte,
 * and U+FFFD would make different names look the same).  Cut short, it still ends in its quote. */
static void log_json_str(struct log_json *j, const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str);
    if (log_json_unit(j, "\"", 1) != 0)
        return;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t len = log_utf8_len(s + i, n - i);
        char esc[8];
        int rc;
        if (c == '"' || c == '\\') {
            esc[0] = '\\', esc[1] = (char)c;
            rc = log_json_unit(j, esc, 2);
        } else if (c == '\n') {
            rc = log_json_unit(j, "\\n", 2);
        } else if (c == '\r') {
            rc = log_json_unit(j, "\\r", 2);
        } else if (c == '\t') {
            rc = log_json_unit(j, "\\t", 2);
        } else if (c < 0x20 || c == 0x7F) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            rc = log_json_unit(j, esc, 6);
        } else if (len == 0) {
            snprintf(esc, sizeof esc, "\\\\x%02x", c);
            rc = log_json_unit(j, esc, 5);
            len = 1;
        } else {
            rc = log_json_unit(j, (const char *)s + i, len);
        }
        if (rc != 0)
            break; /* out of room: the string ends here */
        i += len;
    }
    j->buf[j->len++] = '"'; /* log_json_unit left room for it */
}

/* Append ,"key": and the field's value (a string, or else the number); a field that does not fit whole is
 * left out. */
static void log_json_field(struct log_json *j, const struct log_field *f)
{
    size_t start = j->len;
    j->cut = 0;
    log_json_raw(j, ",", 1);
    log_json_str(j, f->key);
    log_json_raw(j, ":", 1);
    if (f->str) {
        log_json_str(j, f->str);
    } else {
        char num[32];
        int k = snprintf(num, sizeof num, "%lld", f->num);
        log_json_raw(j, num, (size_t)k);
    }
    if (j->cut)
        j->len = start;
}

/* Write one line: text, or a JSON object with the fields after ts, level and msg. */
static void log_write(int level, const struct log_field *fields, size_t nfields, const char *msg)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[40];
    size_t k = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + k, sizeof ts - k, ".%03ldZ", (long)(tv.tv_usec / 1000));
    const char *name = level < 0 ? "info" : log_names[level > LOG_DEBUG ? LOG_DEBUG : level];
    if (log_sink.format != LOG_FORMAT_JSON) {
        fprintf(log_stream(), "%s %s %s\n", ts, name, msg);
        fflush(log_stream());
        return;
    }
    static _Thread_local struct log_json j; /* 16K: kept off the stack */
    j.len = 0;
    j.cut = 0;
    log_json_raw(&j, "{\"ts\":\"", 7);
    log_json_raw(&j, ts, strlen(ts));
    log_json_raw(&j, "\",\"level\":\"", 11);
    log_json_raw(&j, name, strlen(name));
    log_json_raw(&j, "\",\"msg\":", 8);
    log_json_str(&j, msg);
    for (size_t i = 0; i < nfields; i++)
        log_json_field(&j, &fields[i]);
    j.buf[j.len++] = '}';
    j.buf[j.len++] = '\n';
    /* One write per line, so a reader never sees half an object. */
    fwrite(j.buf, 1, j.len, log_stream());
    fflush(log_stream());
}

/* Format the message and write one line at level with n structured fields. */
__attribute__((format(printf, 4, 0))) static void log_vwrite(int level, const struct log_field *fields, size_t n,
                                                              const char *fmt, va_list ap)
{
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    log_write(level, fields, n, line);
}

/* Write one line at level. */
void log_msg(int level, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, NULL, 0, fmt, ap);
    va_end(ap);
}

/* Write one line at level with n structured fields (JSON only; text lines show just the message). */
void log_fields(int level, const struct log_field *fields, size_t n, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, fields, n, fmt, ap);
    va_end(ap);
}

/* Parse "error", "warn", "info" or "debug"; -1 when unknown. */
int log_level_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof log_names / sizeof log_names[0]); i++)
        if (strcmp(name, log_names[i]) == 0)
            return i;
    return -1;
}
