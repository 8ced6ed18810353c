/* check_run: see check_run.h. */
#include "check_run.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lanes.h"

/* The strings of array reply r as texts (borrowed from r) into *out,
 * allocated; false when r is not an array of strings. */
static bool texts(const redisReply *r, size_t *n, struct store_text **out)
{
    if (r->type != REDIS_REPLY_ARRAY)
        return false;
    *out = calloc(r->elements + 1, sizeof(**out));
    cr_assert_not_null(*out);
    for (size_t i = 0; i < r->elements; i++) {
        if (r->element[i]->type != REDIS_REPLY_STRING)
            return false;
        (*out)[i] = (struct store_text){r->element[i]->str, r->element[i]->len};
    }
    *n = r->elements;
    return true;
}

/* Send one step; feed its answer to w. False when it was answered an
 * error (into out). */
static bool step(redisContext *c, const struct keys *k, struct store_check_walk *w,
                 const struct store_check_call *call, struct check_result *out)
{
    const char **args = calloc(3 + call->nlist, sizeof(*args));
    char budget[24];
    cr_assert_not_null(args);
    snprintf(budget, sizeof(budget), "%u", call->budget);
    args[0] = store_check_steps[call->step];
    args[1] = call->cursor;
    args[2] = budget;
    for (size_t i = 0; i < call->nlist; i++)
        args[3 + i] = call->list[i];
    redisReply *r = lanes_callv(c, k, SCRIPT_CHECK, (int)(3 + call->nlist), args);
    free(args);
    cr_assert_not_null(r, "check %s: connection error: %s", store_check_steps[call->step],
                       c->errstr);
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(out->error, sizeof(out->error), "%s", r->str);
        freeReplyObject(r);
        return false;
    }
    struct store_check_page p = {{NULL, 0}, 0, 0, 0, NULL, NULL};
    struct store_text *names = NULL, *violations = NULL;
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
                  r->element[0]->type == REDIS_REPLY_STRING &&
                  r->element[1]->type == REDIS_REPLY_INTEGER &&
                  texts(r->element[2], &p.nnames, &names) &&
                  texts(r->element[3], &p.nviolations, &violations),
              "check %s: not {next, first, names, violations}", store_check_steps[call->step]);
    p.next = (struct store_text){r->element[0]->str, r->element[0]->len};
    p.first = r->element[1]->integer;
    p.names = names;
    p.violations = violations;
    cr_assert_eq(store_check_walk_feed(w, &p), 0);
    free(names);
    free(violations);
    freeReplyObject(r);
    return true;
}

void check_run(redisContext *c, const struct keys *k, unsigned budget, struct check_result *out)
{
    memset(out, 0, sizeof(*out));
    struct store_check_walk *w = store_check_walk_new(budget);
    cr_assert_not_null(w);
    struct store_check_call call;
    int rc;
    while ((rc = store_check_walk_next(w, &call)) == 1 && step(c, k, w, &call, out))
        ;
    cr_assert_geq(rc, 0);
    size_t n;
    const struct store_text *v;
    cr_assert_eq(store_check_walk_result(w, &n, &v), 0);
    out->v = calloc(n + 1, sizeof(*out->v));
    cr_assert_not_null(out->v);
    for (size_t i = 0; out->error[0] == '\0' && i < n; i++) {
        out->v[i] = strndup(v[i].str, v[i].len);
        cr_assert_not_null(out->v[i]);
        out->n++;
    }
    store_check_walk_free(w);
}

bool check_has(const struct check_result *res, const char *needle)
{
    for (size_t i = 0; i < res->n; i++)
        if (strstr(res->v[i], needle) != NULL)
            return true;
    return false;
}

void check_result_free(struct check_result *res)
{
    for (size_t i = 0; i < res->n; i++)
        free(res->v[i]);
    free(res->v);
    memset(res, 0, sizeof(*res));
}
