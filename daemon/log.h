/* log: one line per event to stderr, in logfmt:
 *   ts=2026-11-29T22:15:06.123Z level=info msg="backend connected" key=value ...
 * journald (or whatever reads stderr) keeps them. log_write's text is the
 * message; log_event adds key=value fields after it. */
#ifndef EMQ_LOG_H
#define EMQ_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_threshold;

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* msg is quoted as it is; fields (printf-style) follow it verbatim, so
 * they must already be key=value pairs (values without spaces, or quoted
 * with log_quote). */
void log_event(enum log_level level, const char *msg, const char *fields, ...)
    __attribute__((format(printf, 3, 4)));

/* s as a logfmt value: bare if it has no space, quote or '=', otherwise
 * in double quotes with \" and \\ escaped; control bytes become '?'.
 * Writes into buf (cap bytes, truncating) and returns it. */
const char *log_quote(const char *s, char *buf, unsigned cap);

#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_write(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_write(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_threshold >= LOG_DEBUG)                                                            \
            log_write(LOG_DEBUG, __VA_ARGS__);                                                     \
    } while (0)

#endif
