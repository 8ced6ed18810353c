/* lanes: run the embedded lane scripts from tests (see lanes.h). */
#include "lanes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LANES_ARGS_MAX 512

static bool guard;
static unsigned long calls[SCRIPT__COUNT];

void lanes_set_guard(bool on)
{
    guard = on;
}

unsigned long lanes_calls(enum script_id id)
{
    return calls[id];
}

static redisReply *run(redisContext *c, const char *verb, const char *body, size_t body_len,
                       const struct keys *k, int nargs, const char *const *args)
{
    const char *argv[LANES_ARGS_MAX + KEY__COUNT + 5];
    size_t lens[LANES_ARGS_MAX + KEY__COUNT + 5];
    char nkeys[8];
    int n = 0;

    /* As emqd sends it (pool.c:pool_script): the scripts build every key
     * from the prefix; on a cluster (guard) the ten fixed keys and the
     * guard are declared, for Redis's checks while a slot migrates. */
    snprintf(nkeys, sizeof(nkeys), "%d", guard ? KEY__COUNT + 1 : 0);
    argv[n] = verb, lens[n++] = strlen(verb);
    argv[n] = body, lens[n++] = body_len;
    argv[n] = nkeys, lens[n++] = strlen(nkeys);
    for (int i = 0; guard && i < KEY__COUNT; i++)
        argv[n] = k->names[i], lens[n++] = k->lens[i];
    if (guard)
        argv[n] = k->guard, lens[n++] = k->guard_len;
    argv[n] = k->prefix, lens[n++] = k->prefix_len;
    for (int i = 0; i < nargs && i < LANES_ARGS_MAX; i++)
        argv[n] = args[i], lens[n++] = strlen(args[i]);
    return redisCommandArgv(c, n, argv, lens);
}

bool lanes_load(redisContext *c)
{
    const char *argv[3] = {"FUNCTION", "LOAD", lua_library};
    size_t lens[3] = {8, 4, lua_library_len};
    redisReply *r = redisCommandArgv(c, 3, argv, lens);
    bool ok =
        r != NULL && ((r->type == REDIS_REPLY_STRING && strcmp(r->str, lua_library_name) == 0) ||
                      (r->type == REDIS_REPLY_ERROR && strstr(r->str, lua_library_name) != NULL &&
                       strstr(r->str, "already exists") != NULL));
    freeReplyObject(r);
    return ok;
}

/* EMQ_LANES_EVAL=1 in the environment: every call as emqd makes it where
 * Redis will not load the library (pool.c): EVALSHA of the script's
 * fallback form, EVAL with its source on NOSCRIPT. */
static bool by_eval(void)
{
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("EMQ_LANES_EVAL");
        on = e != NULL && strcmp(e, "1") == 0;
    }
    return on;
}

redisReply *lanes_callv(redisContext *c, const struct keys *k, enum script_id id, int nargs,
                        const char *const *args)
{
    const struct script *s = &script_table[id];
    calls[id]++;
    if (by_eval()) {
        redisReply *r = run(c, "EVALSHA", s->sha1, 40, k, nargs, args);
        if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
            freeReplyObject(r);
            r = run(c, "EVAL", s->source, s->length, k, nargs, args);
        }
        return r;
    }
    redisReply *r = run(c, "FCALL", s->function, s->function_len, k, nargs, args);

    if (r != NULL && r->type == REDIS_REPLY_ERROR &&
        strncmp(r->str, "ERR Function not found", 22) == 0) {
        freeReplyObject(r);
        if (!lanes_load(c))
            return NULL;
        r = run(c, "FCALL", s->function, s->function_len, k, nargs, args);
    }
    return r;
}

redisReply *lanes_vcall(redisContext *c, const struct keys *k, enum script_id id, va_list ap)
{
    const char *args[LANES_ARGS_MAX];
    int n = 0;

    for (const char *a; n < LANES_ARGS_MAX && (a = va_arg(ap, const char *)) != NULL;)
        args[n++] = a;
    return lanes_callv(c, k, id, n, args);
}

redisReply *lanes_call(redisContext *c, const struct keys *k, enum script_id id, ...)
{
    va_list ap;

    va_start(ap, id);
    redisReply *r = lanes_vcall(c, k, id, ap);
    va_end(ap);
    return r;
}
