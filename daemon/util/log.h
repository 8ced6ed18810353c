/* log: one line per event to stderr, in logfmt:
 *   ts=2026-11-29T22:15:06.123Z level=info msg="backend connected" key=value ...
 * journald (or whatever reads stderr) keeps them. */
#ifndef EMQ_LOG_H
#define EMQ_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_threshold;

/* One event: msg is quoted as it is; fields (printf-style) follow it
 * verbatim, so they must already be key=value pairs (values without
 * spaces, or quoted with log_quote). Every line emqd logs goes through
 * here, so every line is logfmt with a fixed message to grep for and the
 * variable parts in fields. */
void log_event(enum log_level level, const char *msg, const char *fields, ...)
    __attribute__((format(printf, 3, 4)));

/* An event with no fields. */
void log_msg(enum log_level level, const char *msg);

/* True if events at level are written: lets a caller skip building the
 * fields of a debug line. */
static inline int log_enabled(enum log_level level)
{
    return level <= log_threshold;
}

/* s as a logfmt value: bare if it has no space, quote or '=', otherwise
 * in double quotes with \" and \\ escaped; control bytes become '?'.
 * Writes into buf (cap bytes, truncating) and returns it. */
const char *log_quote(const char *s, char *buf, unsigned cap);

#endif
