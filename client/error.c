/* Error codes: messages and retryability from the shared status table, and per-handle detail. */
#include <stdio.h>

#include "internal.h"

/* A static, never-NULL description of an error code. */
const char *muster_strerror(int err)
{
    const struct status_row *row = status_find(err);
    return row ? row->message : "unknown error code";
}

/* Whether retrying the same call later may succeed. */
int muster_err_retryable(int err)
{
    const struct status_row *row = status_find(err);
    return row ? row->retryable : 0;
}

/* Format a message into the handle's last-error buffer. */
static void error_format(muster_t *m, const char *fmt, va_list ap)
{
    vsnprintf(m->last_error, sizeof m->last_error, fmt, ap);
}

/* Record a failure on m (message for muster_last_error) and return code. */
int error_set(muster_t *m, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_format(m, fmt, ap);
    va_end(ap);
    return code;
}

/* Mark m unusable with code (and a message); returns code. */
int error_break(muster_t *m, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_format(m, fmt, ap);
    va_end(ap);
    if (!m->broken)
        m->broken = code;
    log_emit(m, MUSTER_LOG_ERROR, "connection unusable: %s", m->last_error);
    return code;
}

/* Map a wire status to a muster_err (unknown statuses become MUSTER_EPROTO). */
int error_from_status(int status)
{
    /* Wire statuses are exactly the public codes 0..16 (see the proto). */
    if (status >= MUSTER_OK && status <= MUSTER_EFORBIDDEN)
        return status;
    return MUSTER_EPROTO;
}
