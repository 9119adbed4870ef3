/* Leveled, timestamped logging to stderr or a file (reopened on SIGHUP). */
#ifndef MUSTERD_LOG_H
#define MUSTERD_LOG_H

/* Levels, most severe first; LOG_ALWAYS lines ignore the level filter. */
enum log_level {
    LOG_ALWAYS = -1,
    LOG_ERROR = 0,
    LOG_WARN = 1,
    LOG_INFO = 2,
    LOG_DEBUG = 3,
};

/* Send lines to path (NULL or "" = stderr) at or above level; -1 with errno on failure. */
int log_open(const char *path, int level);
/* Reopen the log file (after rotation); a no-op for stderr. */
int log_reopen(void);
/* Close the log file, falling back to stderr. */
void log_close(void);
/* Whether a line at level would be written. */
int log_enabled(int level);
/* Write one line at level. */
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parse "error", "warn", "info" or "debug"; -1 when unknown. */
int log_level_parse(const char *name);

#endif
