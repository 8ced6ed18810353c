/* emq_admin: libemq's per-group levers and inspection calls: limit,
 * weight, rate, pause, resume, reassign, drain, depth, reap, stats, groups,
 * job, dead, check, ping (see emq.h). */
#include "emq_int.h"

#include <stdlib.h>
#include <string.h>

/* A request {"op":op,"queue":queue} plus "group" when group is set. */
static json_t *group_req(const char *op, const char *queue, const char *group)
{
    json_t *req = json_pack("{s:s, s:s}", "op", op, "queue", queue);
    if (req != NULL && group != NULL && json_object_set_new(req, "group", json_string(group))) {
        json_decref(req);
        return NULL;
    }
    return req;
}

/* Call req and read the integer field key into *out (may be NULL). */
static int call_int(struct emq *c, json_t *req, const char *key, long long *out)
{
    json_t *reply;
    int rc = emq_call(c, req, &reply, 0);
    const json_t *v = json_object_get(reply, key);
    if (rc == EMQ_OK && !json_is_integer(v))
        rc = emq_seterr(c, EMQ_EBADREPLY, "reply without integer \"%s\"", key);
    if (rc == EMQ_OK && out != NULL)
        *out = json_integer_value(v);
    json_decref(reply);
    return rc;
}

/* Call req and take a new reference to the reply's field key, which must
 * be of JSON type `type`. */
static int call_take(struct emq *c, json_t *req, const char *key, json_type type, json_t **out)
{
    json_t *reply;
    int rc = emq_call(c, req, &reply, 0);
    json_t *v = json_object_get(reply, key);
    if (rc == EMQ_OK && (v == NULL || json_typeof(v) != type))
        rc = emq_seterr(c, EMQ_EBADREPLY, "reply without \"%s\"", key);
    if (rc == EMQ_OK)
        *out = json_incref(v);
    json_decref(reply);
    return rc;
}

/* A group setting (limit, weight): arg = n, or null for n 0. group NULL
 * sets the queue-wide default (the request without "group"). */
static int set_group(struct emq *c, const char *op, const char *arg, const char *queue,
                     const char *group, int n)
{
    json_t *req = group_req(op, queue, group);
    if (req != NULL)
        json_object_set_new(req, arg, n == 0 ? json_null() : json_integer(n));
    return emq_call(c, req, NULL, 0);
}

int emq_limit(struct emq *c, const char *queue, const char *group, int max)
{
    return set_group(c, "limit", "max", queue, group, max);
}

int emq_weight(struct emq *c, const char *queue, const char *group, int weight)
{
    return set_group(c, "weight", "weight", queue, group, weight);
}

int emq_cap(struct emq *c, const char *queue, const char *group, long long max_pending)
{
    json_t *req = group_req("cap", queue, group);
    if (req != NULL)
        json_object_set_new(req, "max_pending",
                            max_pending == 0 ? json_null() : json_integer(max_pending));
    return emq_call(c, req, NULL, 0);
}

int emq_rate(struct emq *c, const char *queue, const char *group, int max, long long per_ms)
{
    json_t *req = group_req("rate", queue, group);
    if (req != NULL) {
        json_object_set_new(req, "max", max == 0 ? json_null() : json_integer(max));
        if (max != 0)
            json_object_set_new(req, "per_ms", json_integer(per_ms));
    }
    return emq_call(c, req, NULL, 0);
}

/* pause / resume: the "changed" flag. */
static int toggle(struct emq *c, const char *op, const char *queue, const char *group,
                  bool *changed)
{
    json_t *reply;
    int rc = emq_call(c, group != NULL ? group_req(op, queue, group) : NULL, &reply, 0);
    const json_t *v = json_object_get(reply, "changed");
    if (rc == EMQ_OK && !json_is_boolean(v))
        rc = emq_seterr(c, EMQ_EBADREPLY, "%s reply without changed", op);
    if (rc == EMQ_OK && changed != NULL)
        *changed = json_is_true(v);
    json_decref(reply);
    return rc;
}

int emq_pause(struct emq *c, const char *queue, const char *group, bool *changed)
{
    return toggle(c, "pause", queue, group, changed);
}

int emq_resume(struct emq *c, const char *queue, const char *group, bool *changed)
{
    return toggle(c, "resume", queue, group, changed);
}

int emq_reassign(struct emq *c, const char *queue, const char *job, const char *group, char *from)
{
    json_t *req = job != NULL ? json_pack("{s:s, s:s, s:s, s:s}", "op", "reassign", "queue", queue,
                                          "job", job, "group", group)
                              : NULL;
    json_t *reply;
    int rc = emq_call(c, req, &reply, 0);
    const json_t *v = json_object_get(reply, "from");
    const char *s = json_string_value(v);
    if (rc == EMQ_OK && !json_is_null(v) && (s == NULL || strlen(s) >= EMQ_ID_SIZE))
        rc = emq_seterr(c, EMQ_EBADREPLY, "reassign reply without from");
    if (rc == EMQ_OK && from != NULL)
        strcpy(from, s != NULL ? s : "");
    json_decref(reply);
    return rc;
}

int emq_drain(struct emq *c, const char *queue, const char *group, long long *drained)
{
    return call_int(c, group_req("drain", queue, group), "drained", drained);
}

int emq_depth(struct emq *c, const char *queue, const char *group, long long *depth)
{
    return call_int(c, group_req("depth", queue, group), "depth", depth);
}

int emq_reap(struct emq *c, const char *queue, const char *group, long long *reaped)
{
    return call_int(c, group_req("reap", queue, group), "reaped", reaped);
}

int emq_stats(struct emq *c, const char *queue, struct emq_stats *stats)
{
    /* The reply's fields and where they go, in one table. */
    static const struct {
        const char *key;
        size_t off;
    } fields[] = {
        {"pending", offsetof(struct emq_stats, pending)},
        {"active", offsetof(struct emq_stats, active)},
        {"delayed", offsetof(struct emq_stats, delayed)},
        {"dead", offsetof(struct emq_stats, dead)},
        {"ring", offsetof(struct emq_stats, ring)},
        {"groups", offsetof(struct emq_stats, groups)},
        {"paused", offsetof(struct emq_stats, paused)},
        {"flat", offsetof(struct emq_stats, flat)},
    };
    json_t *reply;
    struct emq_stats s;
    int rc = emq_call(c, stats != NULL ? group_req("stats", queue, NULL) : NULL, &reply, 0);
    for (size_t i = 0; rc == EMQ_OK && i < sizeof(fields) / sizeof(fields[0]); i++) {
        const json_t *v = json_object_get(reply, fields[i].key);
        if (!json_is_integer(v))
            rc = emq_seterr(c, EMQ_EBADREPLY, "stats reply without %s", fields[i].key);
        *(long long *)((char *)&s + fields[i].off) = json_integer_value(v);
    }
    /* The defaults (0: none); a daemon from before them sends none. */
    const json_t *d = json_object_get(reply, "defaults");
    const json_t *rate = json_object_get(d, "rate");
    s.def_limit = json_integer_value(json_object_get(d, "limit"));
    s.def_weight = json_integer_value(json_object_get(d, "weight"));
    s.def_rate_max = json_integer_value(json_object_get(rate, "max"));
    s.def_rate_per_ms = json_integer_value(json_object_get(rate, "per_ms"));
    s.def_cap = json_integer_value(json_object_get(d, "cap"));
    if (rc == EMQ_OK)
        *stats = s;
    json_decref(reply);
    return rc;
}

/* Where a setting comes from, from its "_from" field (absent or null:
 * none). */
static enum emq_from from_of(const json_t *o, const char *key)
{
    const char *f = json_string_value(json_object_get(o, key));
    if (f != NULL && strcmp(f, "group") == 0)
        return EMQ_FROM_GROUP;
    if (f != NULL && strcmp(f, "queue") == 0)
        return EMQ_FROM_QUEUE;
    return EMQ_FROM_NONE;
}

/* Read one groups entry. */
static bool read_group(const json_t *o, struct emq_group_info *g)
{
    const char *name = json_string_value(json_object_get(o, "group"));
    const json_t *limit = json_object_get(o, "limit"), *weight = json_object_get(o, "weight");
    if (name == NULL || strlen(name) >= EMQ_ID_SIZE ||
        !(weight == NULL || json_is_integer(weight)) ||
        !json_is_integer(json_object_get(o, "depth")) ||
        !json_is_integer(json_object_get(o, "active")) ||
        !(json_is_null(limit) || json_is_integer(limit)) ||
        !json_is_boolean(json_object_get(o, "paused")))
        return false;
    strcpy(g->group, name);
    g->depth = json_integer_value(json_object_get(o, "depth"));
    g->active = json_integer_value(json_object_get(o, "active"));
    g->limit = json_integer_value(limit); /* 0 for null */
    g->weight = weight != NULL ? json_integer_value(weight) : 1;
    const json_t *rate = json_object_get(o, "rate");
    g->rate_max = json_integer_value(json_object_get(rate, "max"));
    g->rate_per_ms = json_integer_value(json_object_get(rate, "per_ms"));
    g->throttled = json_is_true(json_object_get(o, "throttled"));
    g->paused = json_is_true(json_object_get(o, "paused"));
    g->limit_from = from_of(o, "limit_from");
    g->weight_from = from_of(o, "weight_from");
    g->rate_from = from_of(o, "rate_from");
    g->delayed = json_integer_value(json_object_get(o, "delayed"));
    g->cap = json_integer_value(json_object_get(o, "cap")); /* 0 for null or absent */
    g->cap_from = from_of(o, "cap_from");
    return true;
}

int emq_groups(struct emq *c, const char *queue, const char *cursor, int count,
               struct emq_group_info **groups, size_t *n, char next[33])
{
    json_t *req =
        groups != NULL && n != NULL && next != NULL ? group_req("groups", queue, NULL) : NULL;
    json_t *reply = NULL, *arr = NULL;
    char cur[33];
    int rc = emq_scan_page(c, req, cursor, count, "groups", &reply, &arr, cur);
    size_t count_out = rc == EMQ_OK ? json_array_size(arr) : 0;
    struct emq_group_info *v = NULL;
    if (count_out > 0 && (v = calloc(count_out, sizeof(*v))) == NULL)
        rc = emq_seterr(c, EMQ_ENOMEM, "out of memory reading groups");
    for (size_t i = 0; rc == EMQ_OK && i < count_out; i++)
        if (!read_group(json_array_get(arr, i), &v[i]))
            rc = emq_seterr(c, EMQ_EBADREPLY, "malformed groups entry");
    if (rc == EMQ_OK) {
        strcpy(next, cur);
        *groups = v;
        *n = count_out;
    } else {
        free(v);
    }
    json_decref(reply);
    return rc;
}

int emq_job_row(struct emq *c, const char *queue, const char *job, json_t **row)
{
    json_t *req = job != NULL && row != NULL
                      ? json_pack("{s:s, s:s, s:s}", "op", "job", "queue", queue, "job", job)
                      : NULL;
    return call_take(c, req, "job", JSON_OBJECT, row);
}

int emq_job_state(struct emq *c, const char *queue, const char *job, enum emq_state *state)
{
    json_t *row;
    int rc = emq_job_row(c, queue, job, &row);
    if (rc != EMQ_OK)
        return rc;
    const char *s = json_string_value(json_object_get(row, "state"));
    if (s == NULL)
        rc = emq_seterr(c, EMQ_EBADREPLY, "job row without state");
    else if (state != NULL)
        *state = emq_state_from_name(s);
    json_decref(row);
    return rc;
}

/* A dead request for action, with job and limit when given. */
static json_t *dead_req(const char *action, const char *queue, const char *job, int limit)
{
    json_t *req = json_pack("{s:s, s:s, s:s}", "op", "dead", "queue", queue, "action", action);
    if (req != NULL && job != NULL)
        json_object_set_new(req, "job", json_string(job));
    if (req != NULL && limit != 0)
        json_object_set_new(req, "limit", json_integer(limit));
    return req;
}

int emq_dead_list(struct emq *c, const char *queue, int limit, json_t **jobs)
{
    json_t *req = jobs != NULL ? dead_req("list", queue, NULL, limit) : NULL;
    return call_take(c, req, "jobs", JSON_ARRAY, jobs);
}

int emq_dead_retry(struct emq *c, const char *queue, const char *job, int limit, long long *count)
{
    return call_int(c, dead_req("retry", queue, job, limit), "count", count);
}

int emq_dead_purge(struct emq *c, const char *queue, const char *job, int limit, long long *count)
{
    return call_int(c, dead_req("purge", queue, job, limit), "count", count);
}

int emq_peek(struct emq *c, const char *queue, const struct emq_peek_opts *opts, json_t **jobs,
             char next[EMQ_CURSOR_MAX])
{
    const struct emq_peek_opts none = {0};
    if (opts == NULL)
        opts = &none;
    json_t *req = jobs != NULL && next != NULL ? group_req("peek", queue, opts->group) : NULL;
    if (req != NULL && opts->state != NULL)
        json_object_set_new(req, "state", json_string(opts->state));
    if (req != NULL && opts->cursor != NULL && opts->cursor[0] != '\0')
        json_object_set_new(req, "cursor", json_string(opts->cursor));
    if (req != NULL && opts->count != 0)
        json_object_set_new(req, "count", json_integer(opts->count));
    json_t *reply;
    int rc = emq_call(c, req, &reply, 0);
    json_t *arr = json_object_get(reply, "jobs"), *cur = json_object_get(reply, "cursor");
    if (rc == EMQ_OK && (!json_is_array(arr) ||
                         !(json_is_null(cur) || (json_is_string(cur) &&
                                                 strlen(json_string_value(cur)) < EMQ_CURSOR_MAX))))
        rc = emq_seterr(c, EMQ_EBADREPLY, "peek reply without jobs and cursor");
    if (rc == EMQ_OK) {
        snprintf(next, EMQ_CURSOR_MAX, "%s", json_is_string(cur) ? json_string_value(cur) : "");
        *jobs = json_incref(arr);
    }
    json_decref(reply);
    return rc;
}

int emq_remove(struct emq *c, const char *queue, const char *job, enum emq_state *was)
{
    json_t *req = job != NULL
                      ? json_pack("{s:s, s:s, s:s}", "op", "remove", "queue", queue, "job", job)
                      : NULL;
    json_t *reply;
    int rc = emq_call(c, req, &reply, 0);
    const char *s = json_string_value(json_object_get(reply, "state"));
    if (rc == EMQ_OK && s == NULL)
        rc = emq_seterr(c, EMQ_EBADREPLY, "remove reply without state");
    if (rc == EMQ_OK && was != NULL)
        *was = emq_state_from_name(s);
    json_decref(reply);
    return rc;
}

int emq_check(struct emq *c, const char *queue, json_t **violations)
{
    json_t *req = violations != NULL ? group_req("check", queue, NULL) : NULL;
    return call_take(c, req, "violations", JSON_ARRAY, violations);
}

int emq_ping(struct emq *c)
{
    return emq_call(c, json_pack("{s:s}", "op", "ping"), NULL, 0);
}
