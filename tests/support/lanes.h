/* lanes: run the embedded lane scripts over a blocking hiredis connection,
 * for tests (the daemon uses the async pool instead). */
#ifndef EMQ_TEST_LANES_H
#define EMQ_TEST_LANES_H

#include <stdarg.h>
#include <stdbool.h>

#include <hiredis/hiredis.h>

#include "keys.h"
#include "lua_scripts.h"

/* Run script id on queue k with the given ARGV after the prefix (NULL-
 * terminated strings). EVALSHA first; on NOSCRIPT, SCRIPT LOAD and retry
 * once. Returns the reply (caller frees) or NULL on a connection error. */
redisReply *lanes_call(redisContext *c, const struct keys *k, enum script_id id, ...);

/* The same with the arguments in a va_list (for wrappers). */
redisReply *lanes_vcall(redisContext *c, const struct keys *k, enum script_id id, va_list ap);

/* The same with an argument vector (nargs strings). */
redisReply *lanes_callv(redisContext *c, const struct keys *k, enum script_id id, int nargs,
                        const char *const *args);

/* How lanes_call sends a script. LANES_SHIPPED: as emqd does (EVALSHA of
 * the embedded source, loaded on NOSCRIPT). LANES_STRICT: EVAL of the
 * source under a "#!lua" shebang when it has none. On a Redis Cluster node
 * a script without a shebang may touch an undeclared key of another slot
 * that the node also serves (Redis lets such scripts through, for
 * compatibility); under a shebang Redis refuses every key outside the one
 * slot of its KEYS, so a test running strict sees any cross-slot key. The
 * mode lasts until changed (per test process). */
enum lanes_mode { LANES_SHIPPED, LANES_STRICT };
void lanes_set_mode(enum lanes_mode mode);

/* Whether lanes_call declares the queue's guard key after its ten, as
 * emqd does on a Redis Cluster (keys.h). Off until set (per process). */
void lanes_set_guard(bool on);

/* How many calls of script id this process has sent through lanes, so a
 * test can show that it ran every script. */
unsigned long lanes_calls(enum script_id id);

#endif
