/* lanes: run the embedded lane scripts from tests (see lanes.h). */
#include "lanes.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define LANES_ARGS_MAX 512

static redisReply *run(redisContext *c, const char *verb, const char *body, size_t body_len,
                       const struct keys *k, int nargs, const char *const *args)
{
    const char *argv[LANES_ARGS_MAX + KEY__COUNT + 4];
    size_t lens[LANES_ARGS_MAX + KEY__COUNT + 4];
    char nkeys[8];
    int n = 0;

    snprintf(nkeys, sizeof(nkeys), "%d", KEY__COUNT);
    argv[n] = verb, lens[n++] = strlen(verb);
    argv[n] = body, lens[n++] = body_len;
    argv[n] = nkeys, lens[n++] = strlen(nkeys);
    for (int i = 0; i < KEY__COUNT; i++)
        argv[n] = k->names[i], lens[n++] = k->lens[i];
    argv[n] = k->prefix, lens[n++] = k->prefix_len;
    for (int i = 0; i < nargs && i < LANES_ARGS_MAX; i++)
        argv[n] = args[i], lens[n++] = strlen(args[i]);
    return redisCommandArgv(c, n, argv, lens);
}

redisReply *lanes_callv(redisContext *c, const struct keys *k, enum script_id id, int nargs,
                        const char *const *args)
{
    const struct script *s = &script_table[id];
    redisReply *r = run(c, "EVALSHA", s->sha1, 40, k, nargs, args);

    if (r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOSCRIPT", 8) == 0) {
        freeReplyObject(r);
        r = run(c, "EVAL", s->source, s->length, k, nargs, args);
    }
    return r;
}

redisReply *lanes_call(redisContext *c, const struct keys *k, enum script_id id, ...)
{
    const char *args[LANES_ARGS_MAX];
    int n = 0;
    va_list ap;

    va_start(ap, id);
    for (const char *a; n < LANES_ARGS_MAX && (a = va_arg(ap, const char *)) != NULL;)
        args[n++] = a;
    va_end(ap);
    return lanes_callv(c, k, id, n, args);
}
