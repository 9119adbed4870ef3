/*
 * Leveled logging for musterd: one line per message, "TIMESTAMP LEVEL text",
 * written to stderr or to --log-file.
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
} log_sink = {NULL, NULL, LOG_INFO};

static const char *const log_names[] = {"error", "warn", "info", "debug"};

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

/* Whether a line at level would be written. */
int log_enabled(int level)
{
    return level <= log_sink.level;
}

/* Write one line at level. */
void log_msg(int level, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    const char *name = level < 0 ? "info" : log_names[level > LOG_DEBUG ? LOG_DEBUG : level];
    fprintf(log_stream(), "%s.%03ldZ %s %s\n", ts, (long)(tv.tv_usec / 1000), name, line);
    fflush(log_stream());
}

/* Parse "error", "warn", "info" or "debug"; -1 when unknown. */
int log_level_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof log_names / sizeof log_names[0]); i++)
        if (strcmp(name, log_names[i]) == 0)
            return i;
    return -1;
}
