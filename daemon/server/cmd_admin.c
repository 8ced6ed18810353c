/* cmd_admin: the per-tenant levers (limit, weight, rate, pause, resume, reassign,
 * drain, reap), the reads (depth, stats, groups, job, peek, dead, check)
 * and remove. */
#include <string.h>

#include "admin.h"
#include "brand.h"
#include "cmd.h"
#include "engine.h"
#include "jobs.h"
#include "queue.h"
#include "req.h"
#include "server.h"

/* Every handler makes one typed store call (admin.h) on queue_store(r->q),
 * so that it runs after this turn's completions, in the order the
 * connection sent it; the callbacks turn the typed result into the reply. */

/* The store did not accept the call (rc != 0): nothing was sent, and no
 * callback will answer r. */
static void sent(struct req *r, int rc)
{
    if (rc != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
}

/* The call failed: answer r with its error and return true. */
static bool failed(struct req *r, const struct store_status *st)
{
    if (st->code == 0)
        return false;
    req_store_error(r, st);
    return true;
}

/* --- per-tenant levers --------------------------------------------------- */

static void done_cb(void *priv, const struct store_status *st)
{
    struct req *r = priv;
    if (!failed(r, st))
        req_ok(r, NULL);
}

static void changed_cb(void *priv, const struct store_status *st, bool changed)
{
    struct req *r = priv;
    if (!failed(r, st))
        req_ok(r, json_pack("{s:b}", "changed", changed));
}

/* limit, weight, rate and cap without a group set the queue-wide default, for
 * every group without a setting of its own (the store passes group ""). */
#define OPT_GROUP                                                                                  \
    {                                                                                              \
        "group", ARG_STRING, ARG_GROUP, 0, 0                                                       \
    }

static const struct arg_spec limit_spec[] = {
    Q,
    OPT_GROUP,
    {"max", ARG_INT_OR_NULL, ARG_REQUIRED, 0, 1000000},
    END,
};

/* A lane setting's number (limit's max, weight's weight): 0 for null,
 * which removes the setting. */
static long long setting(const struct req *r, const char *name)
{
    json_t *v = json_object_get(r->root, name);
    return json_is_integer(v) ? json_integer_value(v) : 0;
}

static void cmd_limit(struct req *r)
{
    sent(r, store_limit(queue_store(r->q), cmd_str(r, "group"), setting(r, "max"), done_cb, r));
}

static const struct arg_spec weight_spec[] = {
    Q,
    OPT_GROUP,
    {"weight", ARG_INT_OR_NULL, ARG_REQUIRED, 1, 1000},
    END,
};

static void cmd_weight(struct req *r)
{
    sent(r, store_weight(queue_store(r->q), cmd_str(r, "group"), setting(r, "weight"), done_cb, r));
}

static const struct arg_spec cap_spec[] = {
    Q,
    OPT_GROUP,
    {"max_pending", ARG_INT_OR_NULL, ARG_REQUIRED, 1, 1000000000},
    END,
};

static void cmd_cap(struct req *r)
{
    sent(r,
         store_cap(queue_store(r->q), cmd_str(r, "group"), setting(r, "max_pending"), done_cb, r));
}

static const struct arg_spec rate_spec[] = {
    Q,
    OPT_GROUP,
    {"max", ARG_INT_OR_NULL, ARG_REQUIRED, 1, 1000000},
    {"per_ms", ARG_INT, 0, 1, 86400000},
    END,
};

/* A rate needs its period; a removal (max null) takes none. */
static bool check_rate(struct req *r)
{
    bool removal = json_is_null(json_object_get(r->root, "max"));
    bool has_per = json_object_get(r->root, "per_ms") != NULL;
    if (removal == has_per) {
        req_error(r, WIRE_EARG,
                  removal ? "argument \"per_ms\" goes only with a \"max\""
                          : "missing argument \"per_ms\"");
        return false;
    }
    return true;
}

static void cmd_rate(struct req *r)
{
    sent(r, store_rate(queue_store(r->q), cmd_str(r, "group"), setting(r, "max"),
                       request_int(r->root, "per_ms", 0), done_cb, r));
}

static const struct arg_spec group_spec[] = {Q, GROUP, END};

static void cmd_pause(struct req *r)
{
    sent(r, store_pause(queue_store(r->q), cmd_str(r, "group"), changed_cb, r));
}

static void cmd_resume(struct req *r)
{
    sent(r, store_resume(queue_store(r->q), cmd_str(r, "group"), changed_cb, r));
}

static const struct arg_spec reassign_spec[] = {Q, JOB, GROUP, END};

static void reassign_cb(void *priv, const struct store_status *st, const char *from,
                        size_t from_len)
{
    struct req *r = priv;
    if (!failed(r, st))
        req_ok(r, json_pack("{s:o}", "from", from ? json_stringn(from, from_len) : json_null()));
}

static void cmd_reassign(struct req *r)
{
    sent(r,
         store_reassign(queue_store(r->q), cmd_str(r, "job"), cmd_str(r, "group"), reassign_cb, r));
}

/* Drain runs in bounded calls (so Redis never blocks long) until the lane
 * is empty. */
#define DRAIN_BATCH 1000

static void drain_cb(void *priv, const struct store_status *st, const struct store_drained *res)
{
    struct req *r = priv;
    if (failed(r, st))
        return;
    /* The first call fixes the goal: what was pending then. Jobs that
     * producers add while we drain are theirs to keep, so a busy lane
     * cannot keep the drain (and this connection's replies) going for
     * ever. */
    if (r->n == 0 && r->acc == NULL)
        r->acc = json_integer((json_int_t)(res->drained + res->left));
    r->n += res->drained;
    if (res->left > 0 && r->n < (uint64_t)json_integer_value(r->acc)) {
        sent(r, store_drain(queue_store(r->q), cmd_str(r, "group"), DRAIN_BATCH, drain_cb, r));
        return;
    }
    req_ok(r, json_pack("{s:I}", "drained", (json_int_t)r->n));
}

static void cmd_drain(struct req *r)
{
    sent(r, store_drain(queue_store(r->q), cmd_str(r, "group"), DRAIN_BATCH, drain_cb, r));
}

static const struct arg_spec opt_group_spec[] = {Q, {"group", ARG_STRING, ARG_GROUP, 0, 0}, END};

static void depth_cb(void *priv, const struct store_status *st, uint64_t n)
{
    struct req *r = priv;
    if (!failed(r, st))
        req_ok(r, json_pack("{s:I}", "depth", (json_int_t)n));
}

static void cmd_depth(struct req *r)
{
    sent(r, store_depth(queue_store(r->q), cmd_str(r, "group"), depth_cb, r));
}

static void reap_cb(void *priv, const struct store_status *st, uint64_t n, long long next_ms)
{
    struct req *r = priv;
    (void)next_ms; /* the upkeep's concern, not the reply's */
    if (failed(r, st))
        return;
    r->q->count.reaped += n;
    req_ok(r, json_pack("{s:I}", "reaped", (json_int_t)n));
}

/* A reap asked for by an operator takes up to 10,000 at once (the upkeep
 * takes 1000 per call, and runs again at once while more are due). */
static void cmd_reap(struct req *r)
{
    const char *group = request_string(r->root, "group", NULL);
    struct store_queue *sq = queue_store(r->q);
    sent(r, group != NULL ? store_reap_group(sq, group, 10000, reap_cb, r)
                          : store_reap(sq, 10000, reap_cb, r));
}

/* --- reading the queue ---------------------------------------------------- */

static const struct arg_spec queue_spec[] = {Q, END};

/* A rate as the wire shows it: {"max", "per_ms"}, or null for none. */
static json_t *rate_json(long long max, long long per_ms)
{
    if (max < 0)
        return json_null();
    return json_pack("{s:I, s:I}", "max", (json_int_t)max, "per_ms", (json_int_t)per_ms);
}

/* Where a group's setting comes from, as the wire names it (null: none). */
static json_t *from_json(enum store_from from)
{
    switch (from) {
    case STORE_FROM_GROUP:
        return json_string("group");
    case STORE_FROM_QUEUE:
        return json_string("queue");
    case STORE_FROM_NONE:
        break;
    }
    return json_null();
}

static void stats_cb(void *priv, const struct store_status *st, const struct store_stats *res)
{
    struct req *r = priv;
    if (failed(r, st))
        return;
    json_t *defaults =
        json_pack("{s:o, s:o, s:o, s:o}", "limit",
                  res->def_limit < 0 ? json_null() : json_integer(res->def_limit), "weight",
                  res->def_weight < 0 ? json_null() : json_integer(res->def_weight), "rate",
                  rate_json(res->def_rate_max, res->def_rate_per_ms), "cap",
                  res->def_cap < 0 ? json_null() : json_integer(res->def_cap));
    req_ok(r,
           json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "pending",
                     (json_int_t)res->pending, "active", (json_int_t)res->active, "delayed",
                     (json_int_t)res->delayed, "dead", (json_int_t)res->dead, "ring",
                     (json_int_t)res->ring, "groups", (json_int_t)res->groups, "paused",
                     (json_int_t)res->paused, "flat", (json_int_t)res->flat, "defaults", defaults));
}

static void cmd_stats(struct req *r)
{
    sent(r, store_stats(queue_store(r->q), stats_cb, r));
}

static const struct arg_spec groups_spec[] = {
    Q,
    {"cursor", ARG_STRING, 0, 0, 32},
    {"count", ARG_INT, 0, 1, 10000},
    END,
};

static void groups_cb(void *priv, const struct store_status *st, const struct store_groups *res)
{
    struct req *r = priv;
    if (failed(r, st))
        return;
    json_t *list = json_array();
    for (size_t i = 0; i < res->n; i++) {
        const struct store_group_row *g = &res->rows[i];
        json_array_append_new(
            list,
            json_pack(
                "{s:s, s:I, s:I, s:o, s:o, s:b, s:I, s:o, s:o, s:o, s:b, s:I, s:o, s:o}", "group",
                g->group, "depth", (json_int_t)g->depth, "active", (json_int_t)g->active, "limit",
                g->limit < 0 ? json_null() : json_integer(g->limit), "limit_from",
                from_json(g->limit_from), "paused", g->paused, "weight",
                (json_int_t)(g->weight < 0 ? 1 : g->weight), "weight_from",
                from_json(g->weight_from), "rate", rate_json(g->rate_max, g->rate_per_ms),
                "rate_from", from_json(g->rate_from), "throttled", g->throttled, "delayed",
                (json_int_t)g->delayed, "cap", g->cap < 0 ? json_null() : json_integer(g->cap),
                "cap_from", from_json(g->cap_from)));
    }
    req_ok(r, json_pack("{s:o, s:s}", "groups", list, "cursor", res->cursor));
}

static void cmd_groups(struct req *r)
{
    const char *cursor = request_string(r->root, "cursor", NULL);
    uint64_t count = (uint64_t)request_int(r->root, "count", 100);
    sent(r, store_groups(queue_store(r->q), cursor ? cursor : "0", count, groups_cb, r));
}

static const struct arg_spec job_spec[] = {Q, JOB, END};

/* A row field as the reply shows it: the payload as the JSON it is (text
 * if it does not parse), no group as null, counts and times as numbers. */
static json_t *row_value(const struct store_row_field *f)
{
    const struct store_text *v = &f->value;
    if (f->key == STORE_ROW_PAYLOAD) {
        json_t *val = json_loadb(v->str, v->len, JSON_DECODE_ANY, NULL);
        return val != NULL ? val : json_stringn(v->str, v->len);
    }
    if (f->key == STORE_ROW_GROUP && v->len == 0)
        return json_null();
    if (f->numeric)
        return json_integer((json_int_t)f->num);
    return json_stringn(v->str, v->len);
}

/* A job's row as the replies show it: "job" first, then the row as it is,
 * in its own field order, less what is not the reader's. */
static json_t *row_json(const char *job, size_t job_len, const struct store_row *res)
{
    json_t *row = json_object();
    json_object_set_new(row, "job", json_stringn(job, job_len));
    for (size_t i = 0; i < res->nfields; i++) {
        const struct store_row_field *f = &res->fields[i];
        /* The fencing token belongs to the holder alone; lease_by is the
         * daemon's own bookkeeping (store/lost.c). */
        if (f->key == STORE_ROW_LEASE || f->key == STORE_ROW_LEASE_BY)
            continue;
        json_object_set_new(row, f->name.str, row_value(f));
    }
    return row;
}

static void job_cb(void *priv, const struct store_status *st, const struct store_row *res)
{
    struct req *r = priv;
    if (failed(r, st))
        return;
    const char *job = cmd_str(r, "job");
    req_ok(r, json_pack("{s:o}", "job", row_json(job, strlen(job), res)));
}

static void cmd_job(struct req *r)
{
    sent(r, store_job_row(queue_store(r->q), cmd_str(r, "job"), job_cb, r));
}

/* peek: one page of a lane, the flat set or a state (lua/peek.lua). A
 * page's payloads stop adding jobs past this many bytes, so a page of
 * large jobs stays one modest line. */
#define PEEK_MAX_BYTES (1u << 20)

static const struct arg_spec peek_spec[] = {
    Q,
    {"group", ARG_STRING, ARG_GROUP, 0, 0},
    {"state", ARG_STRING, 0, 0, 16},
    {"cursor", ARG_STRING, 0, 0, 80},
    {"count", ARG_INT, 0, 1, 1000},
    END,
};

/* What a peek request pages through, from its state and group; false
 * when that pair names nothing (delayed and dead have no per-group index). */
static bool peek_what(const json_t *root, enum store_peek_what *what)
{
    const char *state = request_string(root, "state", NULL);
    bool group = request_string(root, "group", NULL) != NULL;
    if (state == NULL)
        state = "pending";
    if (strcmp(state, "pending") == 0)
        *what = group ? STORE_PEEK_LANE : STORE_PEEK_FLAT;
    else if (strcmp(state, "active") == 0)
        *what = STORE_PEEK_ACTIVE;
    else if (strcmp(state, "delayed") == 0 && !group)
        *what = STORE_PEEK_DELAYED;
    else if (strcmp(state, "dead") == 0 && !group)
        *what = STORE_PEEK_DEAD;
    else
        return false;
    return true;
}

static bool check_peek(struct req *r)
{
    enum store_peek_what what;
    if (!peek_what(r->root, &what)) {
        req_error(r, WIRE_EARG,
                  "argument \"state\" must be pending, active, delayed or dead (with "
                  "\"group\": pending or active)");
        return false;
    }
    /* A cursor comes from a previous page: an id for pending, a count for
     * the others; the script takes nothing else. */
    const char *cursor = cmd_str(r, "cursor");
    bool ok = what == STORE_PEEK_LANE || what == STORE_PEEK_FLAT
                  ? cursor[0] == '\0' || brand_job_valid(cursor, strlen(cursor))
                  : cursor[strspn(cursor, "0123456789")] == '\0' && strlen(cursor) < 19;
    if (!ok) {
        req_error(r, WIRE_EARG, "argument \"cursor\" must be a cursor from a previous reply");
        return false;
    }
    return true;
}

static void peek_cb(void *priv, const struct store_status *st, const struct store_peek_page *page)
{
    struct req *r = priv;
    if (failed(r, st))
        return;
    json_t *jobs = json_array();
    for (size_t i = 0; i < page->n; i++)
        json_array_append_new(
            jobs, row_json(page->jobs[i].job.str, page->jobs[i].job.len, &page->jobs[i].row));
    req_ok(r, json_pack("{s:o, s:o}", "jobs", jobs, "cursor",
                        page->cursor[0] ? json_string(page->cursor) : json_null()));
}

static void cmd_peek(struct req *r)
{
    enum store_peek_what what = STORE_PEEK_FLAT;
    peek_what(r->root, &what); /* checked by check_peek */
    sent(r, store_peek(queue_store(r->q), what, cmd_str(r, "group"), cmd_str(r, "cursor"),
                       (uint64_t)request_int(r->root, "count", 20), PEEK_MAX_BYTES, peek_cb, r));
}

/* remove: delete one pending or delayed job (lua/remove.lua). */
static void removed_cb(void *priv, const struct store_status *st, const char *state)
{
    struct req *r = priv;
    if (!failed(r, st))
        req_ok(r, json_pack("{s:s}", "state", state));
}

static void cmd_remove(struct req *r)
{
    sent(r, store_remove(queue_store(r->q), cmd_str(r, "job"), removed_cb, r));
}

static const struct arg_spec dead_spec[] = {
    Q,
    {"action", ARG_STRING, ARG_REQUIRED, 1, 8},
    {"job", ARG_STRING, ARG_JOB, 0, 0},
    {"limit", ARG_INT, 0, 1, 10000},
    END,
};

static void dead_list_cb(void *priv, const struct store_status *st, size_t n,
                         const struct store_dead_row *rows)
{
    struct req *r = priv;
    if (failed(r, st))
        return;
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        const struct store_dead_row *d = &rows[i];
        json_array_append_new(list,
                              json_pack("{s:s, s:o, s:I, s:s, s:I}", "job", d->job.str, "group",
                                        d->group.len ? json_string(d->group.str) : json_null(),
                                        "attempts", (json_int_t)d->attempts, "error", d->error.str,
                                        "died_ms", (json_int_t)d->died_ms));
    }
    req_ok(r, json_pack("{s:o}", "jobs", list));
}

static void dead_count_cb(void *priv, const struct store_status *st, uint64_t n)
{
    struct req *r = priv;
    if (!failed(r, st))
        req_ok(r, json_pack("{s:I}", "count", (json_int_t)n));
}

static bool check_dead(struct req *r)
{
    const char *action = cmd_str(r, "action");
    if (strcmp(action, "list") && strcmp(action, "retry") && strcmp(action, "purge")) {
        req_error(r, WIRE_EARG, "argument \"action\" must be list, retry or purge");
        return false;
    }
    return true;
}

static void cmd_dead(struct req *r)
{
    const char *action = cmd_str(r, "action");
    struct store_queue *sq = queue_store(r->q);
    const char *job = cmd_str(r, "job"); /* "": the oldest, up to the limit */
    uint64_t limit = (uint64_t)request_int(r->root, "limit", 100);
    if (strcmp(action, "list") == 0) {
        sent(r, store_dead_list(sq, job, limit, dead_list_cb, r));
        return;
    }
    /* retry and purge change the queue: a retried job is pending, and
     * must be reaped and woken for like any other. */
    if (engine_use(r->q->eng, r->q) != 0) {
        req_error(r, WIRE_ELIMIT, "too many queues");
        return;
    }
    if (strcmp(action, "retry") == 0)
        sent(r, store_dead_retry(sq, job, limit, dead_count_cb, r));
    else
        sent(r, store_dead_purge(sq, job, limit, dead_count_cb, r));
}

static void check_cb(void *priv, const struct store_status *st, size_t n,
                     const struct store_text *violations)
{
    struct req *r = priv;
    if (failed(r, st))
        return;
    json_t *v = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(v, json_string(violations[i].str));
    req_ok(r, json_pack("{s:o}", "violations", v));
}

/* The check runs in bounded steps (store_check), other clients' commands
 * running at Redis between them; a barrier, so that the connection's
 * later requests take effect after all of it. */
static void cmd_check(struct req *r)
{
    sent(r, store_check(queue_store(r->q), STORE_CHECK_BUDGET, check_cb, r));
}

/* The per-tenant levers and the reads. */
const struct cmd cmd_admin[] = {
    {"limit", limit_spec, cmd_limit, CMD_QUEUE | CMD_ADMIN},
    {"weight", weight_spec, cmd_weight, CMD_QUEUE | CMD_ADMIN},
    {"rate", rate_spec, cmd_rate, CMD_QUEUE | CMD_ADMIN, check_rate},
    {"cap", cap_spec, cmd_cap, CMD_QUEUE | CMD_ADMIN},
    {"pause", group_spec, cmd_pause, CMD_QUEUE | CMD_ADMIN},
    {"resume", group_spec, cmd_resume, CMD_QUEUE | CMD_ADMIN},
    {"reassign", reassign_spec, cmd_reassign, CMD_QUEUE | CMD_ADMIN},
    {"drain", opt_group_spec, cmd_drain, CMD_QUEUE | CMD_BARRIER | CMD_ADMIN},
    {"depth", opt_group_spec, cmd_depth, CMD_QUEUE | CMD_READ | CMD_PRODUCER},
    {"reap", opt_group_spec, cmd_reap, CMD_QUEUE | CMD_ADMIN},
    {"stats", queue_spec, cmd_stats, CMD_QUEUE | CMD_READ | CMD_PRODUCER},
    {"groups", groups_spec, cmd_groups, CMD_QUEUE | CMD_READ | CMD_ADMIN, cmd_check_cursor},
    {"job", job_spec, cmd_job, CMD_QUEUE | CMD_READ | CMD_ADMIN},
    {"peek", peek_spec, cmd_peek, CMD_QUEUE | CMD_READ | CMD_ADMIN, check_peek},
    {"remove", job_spec, cmd_remove, CMD_QUEUE | CMD_ADMIN},
    /* dead list reads; retry and purge put the queue in use (cmd_dead) */
    {"dead", dead_spec, cmd_dead, CMD_QUEUE | CMD_READ | CMD_ADMIN, check_dead},
    {"check", queue_spec, cmd_check, CMD_QUEUE | CMD_READ | CMD_BARRIER | CMD_ADMIN},
    {NULL, NULL, NULL, 0},
};
