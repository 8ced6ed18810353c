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
 * terminated strings), as emqd sends it: FCALL of its function; on
 * "Function not found", FUNCTION LOAD of the library and once again.
 * With EMQ_LANES_EVAL=1 in the environment, as emqd's fallback does:
 * EVALSHA of the script's own EVAL form, EVAL on NOSCRIPT.
 * Returns the reply (caller frees) or NULL on a connection error. */
redisReply *lanes_call(redisContext *c, const struct keys *k, enum script_id id, ...);

/* The same with the arguments in a va_list (for wrappers). */
redisReply *lanes_vcall(redisContext *c, const struct keys *k, enum script_id id, va_list ap);

/* The same with an argument vector (nargs strings). */
redisReply *lanes_callv(redisContext *c, const struct keys *k, enum script_id id, int nargs,
                        const char *const *args);

/* Load the library of lane scripts on c (FUNCTION LOAD; a library of
 * this build already there is left as it is). Returns whether it is
 * loaded now. */
bool lanes_load(redisContext *c);

/* Whether lanes_call declares the queue's guard key after its ten, as
 * emqd does on a Redis Cluster (keys.h). Off until set (per process). */
void lanes_set_guard(bool on);

/* How many calls of script id this process has sent through lanes, so a
 * test can show that it ran every script. */
unsigned long lanes_calls(enum script_id id);

#endif
