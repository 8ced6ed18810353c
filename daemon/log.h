/* log: one line per event to stderr ("emqd: LEVEL message"); journald
 * adds the time. */
#ifndef EMQ_LOG_H
#define EMQ_LOG_H

enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_threshold;

void log_write(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_write(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_write(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_write(LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_threshold >= LOG_DEBUG)                                                            \
            log_write(LOG_DEBUG, __VA_ARGS__);                                                     \
    } while (0)

#endif
