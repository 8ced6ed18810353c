/* inspect: the typed calls that look inside a queue job by job and take
 * one job out (lua/peek.lua, lua/remove.lua), for operators and the
 * dashboard. See admin.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "store_internal.h"

static const char *const peek_words[] = {
    [STORE_PEEK_LANE] = "lane",       [STORE_PEEK_FLAT] = "flat", [STORE_PEEK_ACTIVE] = "active",
    [STORE_PEEK_DELAYED] = "delayed", [STORE_PEEK_DEAD] = "dead",
};

/* A page decoded: its jobs' rows (each with its fields array) in one
 * array, freed by page_free. */
static void page_free(struct store_peek_page *page)
{
    for (size_t i = 0; i < page->n; i++)
        free((void *)page->jobs[i].row.fields);
    free((void *)page->jobs);
}

/* peek answers {next cursor, id, {row}, id, {row}, ...}. */
static int page_parse(const redisReply *r, void *out)
{
    struct store_peek_page *page = out;
    *page = (struct store_peek_page){0};
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || r->elements % 2 != 1 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return STORE_SHAPE;
    page->cursor = r->element[0]->str;
    size_t want = (r->elements - 1) / 2;
    struct store_peeked *jobs = calloc(want > 0 ? want : 1, sizeof(*jobs));
    if (jobs == NULL)
        return -ENOMEM;
    page->jobs = jobs;
    for (size_t i = 0; i < want; i++) {
        const redisReply *id = r->element[1 + 2 * i];
        if (id->type != REDIS_REPLY_STRING)
            return STORE_SHAPE;
        jobs[i].job = (struct store_text){id->str, id->len};
        int rc = store_row_parse(r->element[2 + 2 * i], &jobs[i].row);
        page->n = i + 1; /* its fields are the page's to free now */
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void peek_decode(const struct store_call *c, const struct store_status *st,
                        const redisReply *reply)
{
    struct store_status s = *st;
    struct store_peek_page page = {0};
    bool ok = store_parsed(c, &s, reply, page_parse, &page);
    ((store_peek_cb *)c->cb)(c->priv, &s, ok ? &page : NULL);
    page_free(&page);
}

int store_peek(struct store_queue *sq, enum store_peek_what what, const char *group,
               const char *cursor, uint64_t count, size_t max_bytes, store_peek_cb *cb, void *priv)
{
    char n[24], b[24];
    const char *argv[] = {peek_words[what], group, cursor, store_num(n, (long long)count),
                          store_num(b, (long long)max_bytes)};
    return store_send(sq, SCRIPT_PEEK, 5, argv, NULL, peek_decode, STORE_CB(cb), priv, 0);
}

/* remove answers the state the job was in. */
static int removed_parse(const redisReply *r, void *out)
{
    const char **state = out;
    if (r->type != REDIS_REPLY_STRING ||
        (strcmp(r->str, "pending") != 0 && strcmp(r->str, "delayed") != 0))
        return STORE_SHAPE;
    *state = r->str;
    return 0;
}

static void remove_decode(const struct store_call *c, const struct store_status *st,
                          const redisReply *reply)
{
    struct store_status s = *st;
    const char *state = NULL;
    bool ok = store_parsed(c, &s, reply, removed_parse, &state);
    ((store_removed_cb *)c->cb)(c->priv, &s, ok ? state : NULL);
}

int store_remove(struct store_queue *sq, const char *job, store_removed_cb *cb, void *priv)
{
    const char *argv[] = {job};
    return store_send(sq, SCRIPT_REMOVE, 1, argv, NULL, remove_decode, STORE_CB(cb), priv, 0);
}
