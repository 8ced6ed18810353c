/* lanes: run the embedded lane scripts over a blocking hiredis connection,
 * for tests (the daemon uses the async pool instead). */
#ifndef EMQ_TEST_LANES_H
#define EMQ_TEST_LANES_H

#include <hiredis/hiredis.h>

#include "keys.h"
#include "lua_scripts.h"

/* Run script id on queue k with the given ARGV after the prefix (NULL-
 * terminated strings). EVALSHA first; on NOSCRIPT, SCRIPT LOAD and retry
 * once. Returns the reply (caller frees) or NULL on a connection error. */
redisReply *lanes_call(redisContext *c, const struct keys *k, enum script_id id, ...);

/* The same with an argument vector (nargs strings). */
redisReply *lanes_callv(redisContext *c, const struct keys *k, enum script_id id, int nargs,
                        const char *const *args);

#endif
