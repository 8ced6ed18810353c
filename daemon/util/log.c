/* log: see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum log_level log_threshold = LOG_INFO;

const char *log_quote(const char *s, char *buf, unsigned cap)
{
    unsigned o = 0;
    int quote = s[0] == '\0' || strpbrk(s, " \"=\\\t") != NULL;
    if (cap < 4)
        return "";
    if (quote)
        buf[o++] = '"';
    for (; *s != '\0' && o + 3 < cap; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            buf[o++] = '\\';
        buf[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    if (quote)
        buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

static void emit(enum log_level level, const char *msg, const char *fields)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    char ts[40], q[1200];
    struct timespec now;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    /* One fprintf per line: stderr is unbuffered, and one write keeps a
     * line whole. */
    fprintf(stderr, "ts=%s.%03ldZ level=%s msg=%s%s%s\n", ts, now.tv_nsec / 1000000, names[level],
            log_quote(msg, q, sizeof(q)), fields[0] ? " " : "", fields);
}

void log_event(enum log_level level, const char *msg, const char *fields, ...)
{
    char text[1024];
    va_list ap;
    if (level > log_threshold)
        return;
    va_start(ap, fields);
    vsnprintf(text, sizeof(text), fields, ap);
    va_end(ap);
    emit(level, msg, text);
}

void log_msg(enum log_level level, const char *msg)
{
    if (level <= log_threshold)
        emit(level, msg, "");
}
