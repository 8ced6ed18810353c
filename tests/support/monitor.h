/* monitor: every command clients send one redis-server while it runs,
 * seen through Redis MONITOR on a thread of its own. The tests that must
 * prove "nothing reached Redis" or "no call carried more than N items"
 * read the lines after monitor_stop. Commands run inside scripts are left
 * out: only what a client (emqd) sent is kept. */
#ifndef EMQ_TEST_MONITOR_H
#define EMQ_TEST_MONITOR_H

#include <pthread.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "redis_server.h"

struct monitor {
    const struct redis_server *rs;
    redisContext *rc;
    pthread_t thread;
    char **lines; /* "<time> [<db> <addr>] "CMD" "ARG" ...", in order */
    size_t n, cap;
};

/* Start monitoring rs: 0, or -1 if MONITOR could not start. Commands
 * sent after it returns are seen. */
int monitor_start(struct monitor *m, const struct redis_server *rs);
/* Stop (every command sent before the call is seen) and keep the lines. */
void monitor_stop(struct monitor *m);
/* Free the lines. */
void monitor_free(struct monitor *m);

#endif
