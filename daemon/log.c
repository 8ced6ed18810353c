/* log: see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

enum log_level log_threshold = LOG_INFO;

void log_write(enum log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char line[1024];
    va_list ap;
    if (level > log_threshold)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "emqd: %s: %s\n", names[level], line);
}
