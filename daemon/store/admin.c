/* admin: the levers', reads' and registry's typed calls (admin.h). Each
 * call sends its script with the ARGV its header names; each decoder
 * checks the whole reply against what that script returns before the
 * caller's callback sees any of it, so a shape it never returns fails the
 * call (WIRE_EINTERNAL, logged) instead of reaching an element that may
 * not be there. */
#include "admin.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brand.h"
#include "log.h"
#include "store_internal.h"

/* --- decoding ------------------------------------------------------------ */

/* Element i of an array reply (the caller checked the type), typed. */
static bool elem_int(const redisReply *r, size_t i, long long *out)
{
    return i < r->elements && store_int(r->element[i], out);
}

static bool elem_count(const redisReply *r, size_t i, uint64_t *out)
{
    long long v;
    if (!elem_int(r, i, &v) || v < 0)
        return false;
    *out = (uint64_t)v;
    return true;
}

static bool text(const redisReply *r, struct store_text *out)
{
    if (r->type != REDIS_REPLY_STRING)
        return false;
    *out = (struct store_text){r->str, r->len};
    return true;
}

static bool elem_text(const redisReply *r, size_t i, struct store_text *out)
{
    return i < r->elements && text(r->element[i], out);
}

/* Parse one row of a list reply: its elements from e on into row (ctx:
 * the parser's own). 1: a row; 0: a row the caller is not given; -1: a
 * shape the script never returns. */
typedef int row_fn(const redisReply *r, size_t e, void *row, void *ctx);

/* The elements of array r from first on are rows of width each: parse
 * them into a new array (*rows, freed by the decoder; *n of them kept). */
static int rows_parse(const redisReply *r, size_t first, size_t width, size_t size, row_fn *one,
                      void *ctx, void **rows, size_t *n)
{
    *rows = NULL;
    *n = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < first || (r->elements - first) % width != 0)
        return STORE_SHAPE;
    size_t want = (r->elements - first) / width;
    char *v = calloc(want > 0 ? want : 1, size);
    if (v == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < want; i++) {
        int k = one(r, first + width * i, v + size * *n, ctx);
        if (k < 0) {
            free(v);
            *n = 0;
            return STORE_SHAPE;
        }
        *n += (size_t)k;
    }
    *rows = v;
    return 0;
}

/* --- per-tenant levers --------------------------------------------------- */

/* limit, weight, rate and cap return 1. */
static int one_parse(const redisReply *r, void *out)
{
    (void)out;
    return r->type == REDIS_REPLY_INTEGER && r->integer == 1 ? 0 : STORE_SHAPE;
}

static void done_decode(const struct store_call *c, const struct store_status *st,
                        const redisReply *reply)
{
    struct store_status s = *st;
    store_parsed(c, &s, reply, one_parse, NULL);
    ((store_done_cb *)c->cb)(c->priv, &s);
}

/* A lane setting's script (limit, weight, cap): ARGV group, number. */
static int setting_send(struct store_queue *sq, enum script_id id, const char *group, long long n,
                        store_done_cb *cb, void *priv)
{
    char num[24];
    const char *argv[] = {group, store_num(num, n)};
    return store_send(sq, id, 2, argv, NULL, done_decode, STORE_CB(cb), priv, 0);
}

/* --- a default's re-place walk ------------------------------------------ *
 * A queue default ceiling or rate re-places every lane of the queue. One
 * script for that stalled Redis for seconds with 100,000 groups, so the
 * scripts make it a walk of bounded steps (lua/lib.lua: replace_begin,
 * replace_step): the limit or rate call runs the first, and WALK_STEPS - 1
 * replace calls go right behind it on the queue's route, so every later
 * call this daemon sends for the queue (a pipelined claim of the same
 * session, say) runs after the walk and finds the lanes placed. A step
 * with nothing left to do is one HGET. A walk longer than that (over
 * WALK_STEPS * WALK_BUDGET lanes and groups) is finished by the upkeep's
 * promote, a step per pass, the passes back to back until done. The op
 * is answered when the last of its calls is, with the limit or rate
 * call's own status (the steps' errors are logged: the default is set by
 * then, and the upkeep ends the walk). */
#define WALK_STEPS  64
#define WALK_BUDGET 128

struct walk_op {
    store_done_cb *cb;
    void *priv;
    int left; /* replies still to come */
    struct store_status st;
    char msg[160];
};

static void walk_reply(struct walk_op *w)
{
    if (--w->left > 0)
        return;
    w->cb(w->priv, &w->st);
    free(w);
}

/* The limit or rate call answers 1 (the walk is over) or 2 (steps left),
 * a replace step 1 (no walk left) or 0. */
static int walk_parse(const redisReply *r, void *out)
{
    (void)out;
    return r->type == REDIS_REPLY_INTEGER && r->integer >= 0 && r->integer <= 2 ? 0 : STORE_SHAPE;
}

static void begun_decode(const struct store_call *c, const struct store_status *st,
                         const redisReply *reply)
{
    struct walk_op *w = c->priv;
    struct store_status s = *st;
    store_parsed(c, &s, reply, walk_parse, NULL);
    w->st.code = s.code;
    w->st.message = NULL;
    if (s.message != NULL) {
        snprintf(w->msg, sizeof(w->msg), "%s", s.message);
        w->st.message = w->msg;
    }
    walk_reply(w);
}

static void step_decode(const struct store_call *c, const struct store_status *st,
                        const redisReply *reply)
{
    struct store_status s = *st;
    if (!store_parsed(c, &s, reply, walk_parse, NULL))
        log_event(LOG_WARN, "a re-place step failed; the upkeep finishes the walk", "error=\"%s\"",
                  s.message != NULL ? s.message : "");
    walk_reply(c->priv);
}

/* Send the default's call (id with argv, whose last ARGV is the first
 * step's budget) and the steps behind it. */
static int walk_send(struct store_queue *sq, enum script_id id, int argc, const char **argv,
                     store_done_cb *cb, void *priv)
{
    struct walk_op *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return -ENOMEM;
    *w = (struct walk_op){.cb = cb, .priv = priv, .left = 1};
    int rc = store_send(sq, id, argc, argv, NULL, begun_decode, NULL, w, 0);
    if (rc != 0) {
        free(w);
        return rc;
    }
    char budget[24];
    const char *step[] = {store_num(budget, WALK_BUDGET)};
    for (int i = 1; i < WALK_STEPS; i++) {
        w->left++;
        if (store_send(sq, SCRIPT_REPLACE, 1, step, NULL, step_decode, NULL, w, 0) != 0) {
            w->left--; /* refused at once (out of memory, over budget): upkeep goes on */
            break;
        }
    }
    return 0;
}

int store_limit(struct store_queue *sq, const char *group, long long max, store_done_cb *cb,
                void *priv)
{
    if (group[0] != '\0')
        return setting_send(sq, SCRIPT_LIMIT, group, max, cb, priv);
    char num[24], budget[24];
    const char *argv[] = {group, store_num(num, max), store_num(budget, WALK_BUDGET)};
    return walk_send(sq, SCRIPT_LIMIT, 3, argv, cb, priv);
}

int store_cap(struct store_queue *sq, const char *group, long long max, store_done_cb *cb,
              void *priv)
{
    return setting_send(sq, SCRIPT_CAP, group, max, cb, priv);
}

int store_weight(struct store_queue *sq, const char *group, long long weight, store_done_cb *cb,
                 void *priv)
{
    return setting_send(sq, SCRIPT_WEIGHT, group, weight, cb, priv);
}

int store_rate(struct store_queue *sq, const char *group, long long max, long long per_ms,
               store_done_cb *cb, void *priv)
{
    char num[24], per[24], budget[24];
    const char *argv[] = {group, store_num(num, max), store_num(per, per_ms),
                          store_num(budget, WALK_BUDGET)};
    if (group[0] == '\0')
        return walk_send(sq, SCRIPT_RATE, 4, argv, cb, priv);
    return store_send(sq, SCRIPT_RATE, 3, argv, NULL, done_decode, STORE_CB(cb), priv, 0);
}

/* forget answers 1 once the queue's keys are gone, and 0 while rows its
 * completed jobs keep for their retention are left: it deletes those in
 * bounded calls (lua/forget.lua), so it is sent again from its own reply,
 * each call after the one before on the queue's route, until it answers 1
 * or an error. */
static int forget_parse(const redisReply *r, void *out)
{
    if (r->type != REDIS_REPLY_INTEGER || (r->integer != 0 && r->integer != 1))
        return STORE_SHAPE;
    *(bool *)out = r->integer == 1;
    return 0;
}

static void forget_decode(const struct store_call *c, const struct store_status *st,
                          const redisReply *reply)
{
    struct store_status s = *st;
    bool gone = false;
    if (store_parsed(c, &s, reply, forget_parse, &gone) && !gone) {
        if (store_forget(c->sq, (store_done_cb *)c->cb, c->priv) == 0)
            return;
        s = (struct store_status){WIRE_EUNAVAILABLE, "the backend is unavailable"};
    }
    ((store_done_cb *)c->cb)(c->priv, &s);
}

int store_forget(struct store_queue *sq, store_done_cb *cb, void *priv)
{
    return store_send(sq, SCRIPT_FORGET, 0, NULL, NULL, forget_decode, STORE_CB(cb), priv, 0);
}

/* pause and resume return 1 (it changed) or 0. */
static int changed_parse(const redisReply *r, void *out)
{
    if (r->type != REDIS_REPLY_INTEGER || (r->integer != 0 && r->integer != 1))
        return STORE_SHAPE;
    *(bool *)out = r->integer == 1;
    return 0;
}

static void changed_decode(const struct store_call *c, const struct store_status *st,
                           const redisReply *reply)
{
    struct store_status s = *st;
    bool changed = false;
    store_parsed(c, &s, reply, changed_parse, &changed);
    ((store_changed_cb *)c->cb)(c->priv, &s, changed);
}

int store_pause(struct store_queue *sq, const char *group, store_changed_cb *cb, void *priv)
{
    const char *argv[] = {group};
    return store_send(sq, SCRIPT_PAUSE, 1, argv, NULL, changed_decode, STORE_CB(cb), priv, 0);
}

int store_resume(struct store_queue *sq, const char *group, store_changed_cb *cb, void *priv)
{
    const char *argv[] = {group};
    return store_send(sq, SCRIPT_RESUME, 1, argv, NULL, changed_decode, STORE_CB(cb), priv, 0);
}

/* reassign returns the source group, '' when there was none. */
static int from_parse(const redisReply *r, void *out)
{
    return text(r, out) ? 0 : STORE_SHAPE;
}

static void reassign_decode(const struct store_call *c, const struct store_status *st,
                            const redisReply *reply)
{
    struct store_status s = *st;
    struct store_text from = {NULL, 0};
    if (!store_parsed(c, &s, reply, from_parse, &from) || from.len == 0)
        from = (struct store_text){NULL, 0};
    ((store_reassign_cb *)c->cb)(c->priv, &s, from.str, from.len);
}

int store_reassign(struct store_queue *sq, const char *job, const char *group,
                   store_reassign_cb *cb, void *priv)
{
    const char *argv[] = {job, group};
    return store_send(sq, SCRIPT_REASSIGN, 2, argv, NULL, reassign_decode, STORE_CB(cb), priv, 0);
}

/* drain returns {drained, remaining}. */
static int drained_parse(const redisReply *r, void *out)
{
    struct store_drained *d = out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !elem_count(r, 0, &d->drained) ||
        !elem_count(r, 1, &d->left))
        return STORE_SHAPE;
    return 0;
}

static void drain_decode(const struct store_call *c, const struct store_status *st,
                         const redisReply *reply)
{
    struct store_status s = *st;
    struct store_drained res;
    bool ok = store_parsed(c, &s, reply, drained_parse, &res);
    ((store_drain_cb *)c->cb)(c->priv, &s, ok ? &res : NULL);
}

int store_drain(struct store_queue *sq, const char *group, uint64_t max, store_drain_cb *cb,
                void *priv)
{
    char num[24];
    const char *argv[] = {group, store_num(num, (long long)max)};
    return store_send(sq, SCRIPT_DRAIN, 2, argv, NULL, drain_decode, STORE_CB(cb), priv, 0);
}

/* --- reads ----------------------------------------------------------------- */

/* depth, and dead's retry and purge, return a count. */
static int count_parse(const redisReply *r, void *out)
{
    if (r->type != REDIS_REPLY_INTEGER || r->integer < 0)
        return STORE_SHAPE;
    *(uint64_t *)out = (uint64_t)r->integer;
    return 0;
}

static void count_decode(const struct store_call *c, const struct store_status *st,
                         const redisReply *reply)
{
    struct store_status s = *st;
    uint64_t n = 0;
    store_parsed(c, &s, reply, count_parse, &n);
    ((store_count_cb *)c->cb)(c->priv, &s, n);
}

int store_depth(struct store_queue *sq, const char *group, store_count_cb *cb, void *priv)
{
    const char *argv[] = {group};
    return store_send(sq, SCRIPT_DEPTH, 1, argv, NULL, count_decode, STORE_CB(cb), priv, 0);
}

/* stats returns its eight totals, in the struct's order, then the five
 * numbers of the queue defaults (-1 = not set). */
static int stats_parse(const redisReply *r, void *out)
{
    struct store_stats *t = out;
    uint64_t *f[] = {&t->pending, &t->active, &t->delayed, &t->dead,
                     &t->ring,    &t->groups, &t->paused,  &t->flat};
    long long *d[] = {&t->def_limit, &t->def_weight, &t->def_rate_max, &t->def_rate_per_ms,
                      &t->def_cap};
    size_t nf = sizeof(f) / sizeof(f[0]), nd = sizeof(d) / sizeof(d[0]);
    if (r->type != REDIS_REPLY_ARRAY || r->elements != nf + nd)
        return STORE_SHAPE;
    for (size_t i = 0; i < nf; i++)
        if (!elem_count(r, i, f[i]))
            return STORE_SHAPE;
    for (size_t i = 0; i < nd; i++)
        if (!elem_int(r, nf + i, d[i]) || *d[i] < -1 || *d[i] == 0)
            return STORE_SHAPE;
    return 0;
}

static void stats_decode(const struct store_call *c, const struct store_status *st,
                         const redisReply *reply)
{
    struct store_status s = *st;
    struct store_stats res;
    bool ok = store_parsed(c, &s, reply, stats_parse, &res);
    ((store_stats_cb *)c->cb)(c->priv, &s, ok ? &res : NULL);
}

int store_stats(struct store_queue *sq, store_stats_cb *cb, void *priv)
{
    return store_send(sq, SCRIPT_STATS, 0, NULL, NULL, stats_decode, STORE_CB(cb), priv, 0);
}

/* groups returns {cursor, then per group: name, depth, active, limit (-1 =
 * none), paused (0/1), weight (-1 = none), rate max and per_ms (-1 =
 * none), throttled (0/1), and where the limit, weight and rate come from
 * (0 none, 1 the group, 2 the queue default), delayed, cap (-1 = none)
 * and where it comes from}. */
#define GROUP_FIELDS 15

/* A "from" field of a group row: 0, 1 or 2, as enum store_from. */
static bool from_of(const redisReply *r, size_t i, enum store_from *out)
{
    long long v;
    if (!elem_int(r, i, &v) || v < STORE_FROM_NONE || v > STORE_FROM_QUEUE)
        return false;
    *out = (enum store_from)v;
    return true;
}

static int group_row(const redisReply *r, size_t e, void *row, void *ctx)
{
    struct store_group_row *g = row;
    struct store_text name;
    long long paused, throttled;
    (void)ctx;
    if (!elem_text(r, e, &name) || !elem_count(r, e + 1, &g->depth) ||
        !elem_count(r, e + 2, &g->active) || !elem_int(r, e + 3, &g->limit) || g->limit < -1 ||
        !elem_int(r, e + 4, &paused) || (paused != 0 && paused != 1) ||
        !elem_int(r, e + 5, &g->weight) || g->weight < -1 || g->weight == 0 ||
        !elem_int(r, e + 6, &g->rate_max) || !elem_int(r, e + 7, &g->rate_per_ms) ||
        !elem_int(r, e + 8, &throttled) || (throttled != 0 && throttled != 1) ||
        !from_of(r, e + 9, &g->limit_from) || !from_of(r, e + 10, &g->weight_from) ||
        !from_of(r, e + 11, &g->rate_from) || !elem_count(r, e + 12, &g->delayed) ||
        !elem_int(r, e + 13, &g->cap) || g->cap < -1 || g->cap == 0 ||
        !from_of(r, e + 14, &g->cap_from))
        return -1;
    g->group = name.str;
    g->group_len = name.len;
    g->paused = paused == 1;
    g->throttled = throttled == 1;
    return 1;
}

static int groups_parse(const redisReply *r, void *out)
{
    struct store_groups *page = out;
    struct store_text cursor;
    void *rows = NULL;
    if (r->type != REDIS_REPLY_ARRAY || !elem_text(r, 0, &cursor))
        return STORE_SHAPE;
    int rc = rows_parse(r, 1, GROUP_FIELDS, sizeof(struct store_group_row), group_row, NULL, &rows,
                        &page->n);
    page->cursor = cursor.str;
    page->rows = rows;
    return rc;
}

static void groups_decode(const struct store_call *c, const struct store_status *st,
                          const redisReply *reply)
{
    struct store_status s = *st;
    struct store_groups res;
    bool ok = store_parsed(c, &s, reply, groups_parse, &res);
    ((store_groups_cb *)c->cb)(c->priv, &s, ok ? &res : NULL);
    if (ok)
        free((void *)res.rows);
}

int store_groups(struct store_queue *sq, const char *cursor, uint64_t count, store_groups_cb *cb,
                 void *priv)
{
    char num[24];
    const char *argv[] = {cursor, store_num(num, (long long)count)};
    return store_send(sq, SCRIPT_GROUPS, 2, argv, NULL, groups_decode, STORE_CB(cb), priv, 0);
}

/* job returns the row as HGETALL does: field, value, ... (none: no row).
 * Each known field lands in its typed member: a store_text, or a long
 * long when numeric. */
static const struct {
    const char *name;
    bool numeric;
    size_t at; /* offsetof(struct store_row, member) */
} row_keys[STORE_ROW_OTHER] = {
#define TEXT(k, n, m) [k] = {n, false, offsetof(struct store_row, m)}
#define NUM(k, n, m)  [k] = {n, true, offsetof(struct store_row, m)}
    TEXT(STORE_ROW_STATE, "state", state),
    TEXT(STORE_ROW_GROUP, "group", group),
    TEXT(STORE_ROW_PAYLOAD, "payload", payload),
    NUM(STORE_ROW_ATTEMPTS, "attempts", attempts),
    NUM(STORE_ROW_MAX_ATTEMPTS, "max_attempts", max_attempts),
    NUM(STORE_ROW_CREATED_MS, "created_ms", created_ms),
    NUM(STORE_ROW_READY_MS, "ready_ms", ready_ms),
    NUM(STORE_ROW_FINISHED_MS, "finished_ms", finished_ms),
    TEXT(STORE_ROW_LEASE, "lease", lease),
    NUM(STORE_ROW_LEASE_UNTIL, "lease_until", lease_until),
    TEXT(STORE_ROW_ERROR, "error", error),
    TEXT(STORE_ROW_LEASE_BY, "lease_by", lease_by),
#undef TEXT
#undef NUM
};

/* A field of the row, e its name's element: name and type it and set its
 * typed member of the row (ctx); -1 when a field the scripts write as a
 * number is not one. */
static int row_field(const redisReply *r, size_t e, void *field, void *ctx)
{
    struct store_row_field *f = field;
    if (!elem_text(r, e, &f->name) || !elem_text(r, e + 1, &f->value))
        return -1;
    f->key = STORE_ROW_OTHER;
    for (size_t k = 0; k < STORE_ROW_OTHER; k++)
        if (strlen(row_keys[k].name) == f->name.len &&
            memcmp(row_keys[k].name, f->name.str, f->name.len) == 0)
            f->key = (enum store_row_key)k;
    bool num = store_int(r->element[e + 1], &f->num);
    if (f->key == STORE_ROW_OTHER) {
        /* A field no script writes: by the row's naming, "*_ms" is a time. */
        f->numeric = num && strstr(f->name.str, "_ms") != NULL;
        return 1;
    }
    char *member = (char *)ctx + row_keys[f->key].at;
    f->numeric = row_keys[f->key].numeric; /* a payload of "5" stays text */
    if (f->numeric && !num)
        return -1;
    if (f->numeric)
        memcpy(member, &f->num, sizeof(f->num));
    else
        memcpy(member, &f->value, sizeof(f->value));
    return 1;
}

int store_row_parse(const redisReply *r, void *out)
{
    struct store_row *row = out;
    void *fields = NULL;
    *row = (struct store_row){.attempts = -1,
                              .max_attempts = -1,
                              .created_ms = -1,
                              .ready_ms = -1,
                              .finished_ms = -1,
                              .lease_until = -1};
    int rc =
        rows_parse(r, 0, 2, sizeof(struct store_row_field), row_field, row, &fields, &row->nfields);
    row->fields = fields;
    return rc;
}

static void row_decode(const struct store_call *c, const struct store_status *st,
                       const redisReply *reply)
{
    struct store_status s = *st;
    struct store_row res;
    bool ok = store_parsed(c, &s, reply, store_row_parse, &res);
    if (ok && res.nfields == 0) {
        s = (struct store_status){WIRE_ENOJOB,
                                  "no such job (never enqueued, or expired after completion)"};
        ok = false;
        free((void *)res.fields);
    }
    ((store_row_cb *)c->cb)(c->priv, &s, ok ? &res : NULL);
    if (ok)
        free((void *)res.fields);
}

int store_job_row(struct store_queue *sq, const char *job, store_row_cb *cb, void *priv)
{
    const char *argv[] = {job};
    return store_send(sq, SCRIPT_JOB, 1, argv, NULL, row_decode, STORE_CB(cb), priv, 0);
}

/* dead's list returns {id, group, attempts, error, died_ms, ...}. */
#define DEAD_FIELDS 5

struct dead_list {
    size_t n;
    struct store_dead_row *rows;
};

static int dead_row(const redisReply *r, size_t e, void *row, void *ctx)
{
    struct store_dead_row *d = row;
    (void)ctx;
    return elem_text(r, e, &d->job) && elem_text(r, e + 1, &d->group) &&
                   elem_int(r, e + 2, &d->attempts) && elem_text(r, e + 3, &d->error) &&
                   elem_int(r, e + 4, &d->died_ms)
               ? 1
               : -1;
}

static int dead_parse(const redisReply *r, void *out)
{
    struct dead_list *l = out;
    void *rows = NULL;
    int rc =
        rows_parse(r, 0, DEAD_FIELDS, sizeof(struct store_dead_row), dead_row, NULL, &rows, &l->n);
    l->rows = rows;
    return rc;
}

static void dead_decode(const struct store_call *c, const struct store_status *st,
                        const redisReply *reply)
{
    struct store_status s = *st;
    struct dead_list res = {0, NULL};
    if (!store_parsed(c, &s, reply, dead_parse, &res))
        res = (struct dead_list){0, NULL};
    ((store_dead_cb *)c->cb)(c->priv, &s, res.n, res.rows);
    free(res.rows);
}

static int dead_send(struct store_queue *sq, const char *action, const char *job, uint64_t limit,
                     store_decode_fn *decode, void (*cb)(void), void *priv)
{
    char num[24];
    const char *argv[] = {action, job, store_num(num, (long long)limit)};
    return store_send(sq, SCRIPT_DEAD, 3, argv, NULL, decode, cb, priv, 0);
}

int store_dead_list(struct store_queue *sq, const char *job, uint64_t limit, store_dead_cb *cb,
                    void *priv)
{
    return dead_send(sq, "list", job, limit, dead_decode, STORE_CB(cb), priv);
}

int store_dead_retry(struct store_queue *sq, const char *job, uint64_t limit, store_count_cb *cb,
                     void *priv)
{
    return dead_send(sq, "retry", job, limit, count_decode, STORE_CB(cb), priv);
}

int store_dead_purge(struct store_queue *sq, const char *job, uint64_t limit, store_count_cb *cb,
                     void *priv)
{
    return dead_send(sq, "purge", job, limit, count_decode, STORE_CB(cb), priv);
}

/* A check step's names and violations, and the registry's SMEMBERS,
 * are lists of strings. keep (NULL: all) picks the strings a caller is
 * given. */
struct text_list {
    size_t n;
    struct store_text *v;
    bool (*keep)(const char *s, size_t len);
};

static int text_row(const redisReply *r, size_t e, void *row, void *ctx)
{
    struct store_text *t = row;
    const struct text_list *l = ctx;
    if (!elem_text(r, e, t))
        return -1;
    return l->keep == NULL || l->keep(t->str, t->len);
}

static int texts_parse(const redisReply *r, void *out)
{
    struct text_list *l = out;
    void *v = NULL;
    int rc = rows_parse(r, 0, 1, sizeof(struct store_text), text_row, l, &v, &l->n);
    l->v = v;
    return rc;
}

/* A step returns {next cursor, first, names, violations}. */
struct check_res {
    struct store_check_page page;
    struct text_list names, violations;
};

static int check_parse(const redisReply *r, void *out)
{
    struct check_res *c = out;
    *c = (struct check_res){.page.first = 0};
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 || !elem_text(r, 0, &c->page.next) ||
        !elem_int(r, 1, &c->page.first) || c->page.first < 0)
        return STORE_SHAPE;
    int rc = texts_parse(r->element[2], &c->names);
    if (rc == 0 && (rc = texts_parse(r->element[3], &c->violations)) != 0)
        free(c->names.v);
    c->page.nnames = c->names.n;
    c->page.names = c->names.v;
    c->page.nviolations = c->violations.n;
    c->page.violations = c->violations.v;
    return rc;
}

static void check_decode(const struct store_call *c, const struct store_status *st,
                         const redisReply *reply)
{
    struct store_status s = *st;
    struct check_res res;
    bool ok = store_parsed(c, &s, reply, check_parse, &res);
    ((store_check_page_cb *)c->cb)(c->priv, &s, ok ? &res.page : NULL);
    if (ok) {
        free(res.names.v);
        free(res.violations.v);
    }
}

int store_check_step(struct store_queue *sq, const struct store_check_call *call,
                     store_check_page_cb *cb, void *priv)
{
    if ((int)call->step < 0 || call->step >= STORE_CHECK__COUNT || call->budget < 1 ||
        call->nlist > INT_MAX - 3)
        return -EINVAL;
    const char **argv = malloc((3 + call->nlist) * sizeof(*argv));
    size_t *argl = malloc((3 + call->nlist) * sizeof(*argl));
    int rc = -ENOMEM;
    if (argv != NULL && argl != NULL) {
        char num[24];
        argv[0] = store_check_steps[call->step];
        argv[1] = call->cursor;
        argv[2] = store_num(num, call->budget);
        for (size_t i = 0; i < 3; i++)
            argl[i] = strlen(argv[i]);
        for (size_t i = 0; i < call->nlist; i++)
            argv[3 + i] = call->list[i], argl[3 + i] = call->lens[i];
        rc = store_send(sq, SCRIPT_CHECK, (int)(3 + call->nlist), argv, argl, check_decode,
                        STORE_CB(cb), priv, 0);
    }
    free(argv);
    free(argl);
    return rc;
}

/* --- the queue registry: plain commands ------------------------------------ */

static void queues_decode(const struct store_call *cc, const struct store_status *st,
                          const redisReply *reply)
{
    struct store_status s = *st;
    struct text_list res = {0, NULL, brand_queue_valid};
    int rc = s.code == 0 ? texts_parse(reply, &res) : 0;
    if (rc == STORE_SHAPE) {
        store_unexpected(cc, reply, &s);
    } else if (rc != 0) {
        s = store_oom;
    }
    if (s.code != 0)
        res = (struct text_list){0, NULL, NULL};
    ((store_queues_cb *)cc->cb)(cc->priv, &s, res.n, res.v);
    free(res.v);
}

int store_queues_list(struct pool *p, store_queues_cb *cb, void *priv)
{
    const char *argv[] = {"SMEMBERS", STORE_QUEUES_KEY};
    return store_send_command(p, NULL, 2, argv, NULL, queues_decode, STORE_CB(cb), priv);
}

static void ignore_cb(void *priv, int status, redisReply *reply)
{
    (void)priv;
    (void)status;
    (void)reply;
}

/* SADD or SREM of one name, fire and forget. */
static int queues_change(struct pool *p, struct pool_route *rt, const char *verb, const char *name,
                         size_t len)
{
    if (!brand_queue_valid(name, len))
        return -EINVAL;
    const char *argv[] = {verb, STORE_QUEUES_KEY, name};
    const size_t lens[] = {4, sizeof(STORE_QUEUES_KEY) - 1, len};
    /* A write: with replica-acks it is confirmed by WAIT like a script
     * that writes, so a failover does not quietly drop a registration. */
    return pool_command_write(p, rt, 3, argv, lens, ignore_cb, NULL);
}

int store_queues_add(struct pool *p, struct pool_route *rt, const char *name, size_t len)
{
    return queues_change(p, rt, "SADD", name, len);
}

int store_queues_remove(struct pool *p, struct pool_route *rt, const char *name, size_t len)
{
    return queues_change(p, rt, "SREM", name, len);
}

/* SSCAN answers {cursor, {name, ...}}. */
struct queues_page_res {
    struct store_queues_page page;
    struct text_list names;
};

static int queues_page_parse(const redisReply *r, void *out)
{
    struct queues_page_res *res = out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING)
        return STORE_SHAPE;
    res->names = (struct text_list){0, NULL, brand_queue_valid};
    int rc = texts_parse(r->element[1], &res->names);
    res->page = (struct store_queues_page){r->element[0]->str, res->names.n, res->names.v};
    return rc;
}

static void queues_page_decode(const struct store_call *c, const struct store_status *st,
                               const redisReply *reply)
{
    struct store_status s = *st;
    struct queues_page_res res = {0};
    bool ok = store_parsed(c, &s, reply, queues_page_parse, &res);
    ((store_queues_page_cb *)c->cb)(c->priv, &s, ok ? &res.page : NULL);
    free(res.names.v);
}

int store_queues_page(struct pool *p, struct pool_route *rt, const char *cursor, uint64_t count,
                      store_queues_page_cb *cb, void *priv)
{
    char num[24];
    const char *argv[] = {"SSCAN", STORE_QUEUES_KEY, cursor, "COUNT",
                          store_num(num, (long long)count)};
    return store_send_command(p, rt, 5, argv, NULL, queues_page_decode, STORE_CB(cb), priv);
}
