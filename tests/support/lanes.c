/* lanes: run the embedded lane scripts from tests (see lanes.h). */
#include "lanes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LANES_ARGS_MAX 512
#define SHEBANG        "#!lua\n"

static enum lanes_mode mode = LANES_SHIPPED;
static bool guard;
static unsigned long calls[SCRIPT__COUNT];

void lanes_set_mode(enum lanes_mode m)
{
    mode = m;
}

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

/* EVAL of s's source under SHEBANG (LANES_STRICT, for a script that has
 * no shebang of its own). */
static redisReply *run_strict(redisContext *c, const struct script *s, const struct keys *k,
                              int nargs, const char *const *args)
{
    size_t head = strlen(SHEBANG);
    char *body = malloc(head + s->length);
    if (body == NULL)
        return NULL;
    memcpy(body, SHEBANG, head);
    memcpy(body + head, s->source, s->length);
    redisReply *r = run(c, "EVAL", body, head + s->length, k, nargs, args);
    free(body);
    return r;
}

redisReply *lanes_callv(redisContext *c, const struct keys *k, enum script_id id, int nargs,
                        const char *const *args)
{
    const struct script *s = &script_table[id];
    calls[id]++;
    if (mode == LANES_STRICT && strncmp(s->source, "#!", 2) != 0)
        return run_strict(c, s, k, nargs, args);
    redisReply *r = run(c, "EVALSHA", s->sha1, 40, k, nargs, args);

    if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(r);
        r = run(c, "EVAL", s->source, s->length, k, nargs, args);
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
