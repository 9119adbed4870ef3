/* Diagnostics: formatted lines handed to the application's log callback; never printed. */
#include <stdio.h>

#include "internal.h"

/* Send a formatted diagnostic to the handle's log callback, if any. */
void log_emit(const muster_t *m, int level, const char *fmt, ...)
{
    if (!m || !m->log_fn)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    m->log_fn(m->log_arg, level, line);
}
