/* Leveled, timestamped logging to stderr or a file (reopened on SIGHUP), as text or one JSON object a line. */
#ifndef MUSTERD_LOG_H
#define MUSTERD_LOG_H

#include <stddef.h>

/* Levels, most severe first; LOG_ALWAYS lines ignore the level filter. */
enum log_level {
    LOG_ALWAYS = -1,
    LOG_ERROR = 0,
    LOG_WARN = 1,
    LOG_INFO = 2,
    LOG_DEBUG = 3,
};

/* How lines are written (--log-format). */
enum log_format {
    LOG_FORMAT_TEXT = 0,
    LOG_FORMAT_JSON = 1,
};

/* One structured field of a line: a key and a string value, or a number when str is NULL.  Keys must not
 * be ts, level or msg. */
struct log_field {
    const char *key;
    const char *str;
    long long num;
};

/* Send lines to path (NULL or "" = stderr) at or above level; -1 with errno on failure. */
int log_open(const char *path, int level);
/* Reopen the log file (after rotation); a no-op for stderr. */
int log_reopen(void);
/* Close the log file, falling back to stderr. */
void log_close(void);
/* Write lines as text or JSON (enum log_format) from now on. */
void log_set_format(int format);
/* Parse "text" or "json"; -1 when unknown. */
int log_format_parse(const char *name);
/* Whether a line at level would be written. */
int log_enabled(int level);
/* Write one line at level. */
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Write one line at level with n structured fields (JSON only; text lines show just the message). */
void log_fields(int level, const struct log_field *fields, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Parse "error", "warn", "info" or "debug"; -1 when unknown. */
int log_level_parse(const char *name);

#endif
