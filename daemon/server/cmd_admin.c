/* cmd_admin: the per-tenant levers (limit, pause, resume, reassign,
 * drain, reap) and the reads (depth, stats, groups, job, dead, check). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "queue.h"
#include "req.h"
#include "server.h"

/* Temporary: the old untyped path, until the admin calls are typed. */
static void req_backend_error(struct req *r, int status, const redisReply *reply)
{
    if (status != 0 || reply == NULL) {
        req_error(r, WIRE_EUNAVAILABLE,
                  "the backend is not connected or did not answer in time; retry");
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        size_t w = strcspn(reply->str, " ");
        req_error(r, wire_error_lookup(reply->str, w), "%s",
                  reply->str[w] ? reply->str + w + 1 : reply->str);
        return;
    }
    req_error(r, WIRE_EINTERNAL, "unexpected backend reply");
}
static bool cmd_failed(struct req *r, int status, redisReply *reply)
{
    if (status != 0 || reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        req_backend_error(r, status, reply);
        return true;
    }
    return false;
}
static void cmd_num(char *buf, size_t cap, long long v)
{
    snprintf(buf, cap, "%lld", v);
}
static void cmd_script(struct req *r, enum script_id id, int argc, const char **argv,
                       pool_reply_cb *cb)
{
    struct store_queue *sq = queue_store(r->q);
    if (pool_script(sq->pool, &sq->route, id, &sq->keys, argc, argv, NULL, cb, r) != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
}

/* --- per-tenant levers --------------------------------------------------- */

static void empty_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (!cmd_failed(r, status, reply))
        req_ok(r, NULL);
}

static void changed_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (!cmd_failed(r, status, reply))
        req_ok(r, json_pack("{s:b}", "changed", reply->integer == 1));
}

static const struct arg_spec limit_spec[] = {
    Q,
    GROUP,
    {"max", ARG_INT_OR_NULL, ARG_REQUIRED, 0, 1000000},
    END,
};

static void cmd_limit(struct req *r)
{
    char max[24];
    json_t *m = json_object_get(r->root, "max");
    cmd_num(max, sizeof(max), json_is_integer(m) ? json_integer_value(m) : 0);
    const char *argv[] = {cmd_str(r, "group"), max};
    cmd_script(r, SCRIPT_LIMIT, 2, argv, empty_cb);
}

static const struct arg_spec group_spec[] = {Q, GROUP, END};

static void cmd_pause(struct req *r)
{
    const char *argv[] = {cmd_str(r, "group")};
    cmd_script(r, SCRIPT_PAUSE, 1, argv, changed_cb);
}

static void cmd_resume(struct req *r)
{
    const char *argv[] = {cmd_str(r, "group")};
    cmd_script(r, SCRIPT_RESUME, 1, argv, changed_cb);
}

static const struct arg_spec reassign_spec[] = {Q, JOB, GROUP, END};

static void reassign_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (cmd_failed(r, status, reply))
        return;
    req_ok(r, json_pack("{s:o}", "from",
                        reply->len ? json_stringn(reply->str, reply->len) : json_null()));
}

static void cmd_reassign(struct req *r)
{
    const char *argv[] = {cmd_str(r, "job"), cmd_str(r, "group")};
    cmd_script(r, SCRIPT_REASSIGN, 2, argv, reassign_cb);
}

/* Drain runs in bounded script calls (so Redis never blocks long) until
 * the lane is empty. */
static void drain_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (cmd_failed(r, status, reply))
        return;
    uint64_t drained = (uint64_t)reply->element[0]->integer;
    uint64_t left = (uint64_t)reply->element[1]->integer;
    /* The first call fixes the goal: what was pending then. Jobs that
     * producers add while we drain are theirs to keep, so a busy lane
     * cannot keep the drain (and this connection's replies) going for
     * ever. */
    if (r->n == 0 && r->acc == NULL)
        r->acc = json_integer((json_int_t)(drained + left));
    r->n += drained;
    if (left > 0 && r->n < (uint64_t)json_integer_value(r->acc)) {
        const char *argv[] = {cmd_str(r, "group"), "1000"};
        cmd_script(r, SCRIPT_DRAIN, 2, argv, drain_cb);
        return;
    }
    req_ok(r, json_pack("{s:I}", "drained", (json_int_t)r->n));
}

static void cmd_drain(struct req *r)
{
    const char *argv[] = {cmd_str(r, "group"), "1000"};
    cmd_script(r, SCRIPT_DRAIN, 2, argv, drain_cb);
}

static const struct arg_spec opt_group_spec[] = {Q, {"group", ARG_STRING, ARG_GROUP, 0, 0}, END};

static void depth_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (!cmd_failed(r, status, reply))
        req_ok(r, json_pack("{s:I}", "depth", (json_int_t)reply->integer));
}

static void cmd_depth(struct req *r)
{
    const char *argv[] = {cmd_str(r, "group")};
    cmd_script(r, SCRIPT_DEPTH, 1, argv, depth_cb);
}

static void reap_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (cmd_failed(r, status, reply))
        return;
    long long n = reply->type == REDIS_REPLY_ARRAY ? reply->element[0]->integer : reply->integer;
    r->q->count.reaped += (uint64_t)n;
    req_ok(r, json_pack("{s:I}", "reaped", (json_int_t)n));
}

static void cmd_reap(struct req *r)
{
    const char *group = request_string(r->root, "group", NULL);
    if (group != NULL) {
        const char *argv[] = {group, "10000"};
        cmd_script(r, SCRIPT_REAP_GROUP, 2, argv, reap_cb);
    } else {
        const char *argv[] = {"10000"};
        cmd_script(r, SCRIPT_REAP, 1, argv, reap_cb);
    }
}

/* --- reading the queue ---------------------------------------------------- */

static const struct arg_spec queue_spec[] = {Q, END};

static void stats_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (cmd_failed(r, status, reply))
        return;
    static const char *const names[] = {"pending", "active", "delayed", "dead",
                                        "ring",    "groups", "paused",  "flat"};
    json_t *o = json_object();
    for (size_t i = 0; i < reply->elements && i < 8; i++)
        json_object_set_new(o, names[i], json_integer(reply->element[i]->integer));
    req_ok(r, o);
}

static void cmd_stats(struct req *r)
{
    cmd_script(r, SCRIPT_STATS, 0, NULL, stats_cb);
}

static const struct arg_spec groups_spec[] = {
    Q,
    {"cursor", ARG_STRING, 0, 0, 32},
    {"count", ARG_INT, 0, 1, 10000},
    END,
};

static void groups_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (cmd_failed(r, status, reply))
        return;
    json_t *list = json_array();
    for (size_t i = 1; i + 4 < reply->elements; i += 5) {
        redisReply **f = reply->element + i;
        json_array_append_new(
            list, json_pack("{s:s, s:I, s:I, s:o, s:b}", "group", f[0]->str, "depth",
                            (json_int_t)f[1]->integer, "active", (json_int_t)f[2]->integer, "limit",
                            f[3]->integer < 0 ? json_null() : json_integer(f[3]->integer), "paused",
                            f[4]->integer == 1));
    }
    req_ok(r, json_pack("{s:o, s:s}", "groups", list, "cursor", reply->element[0]->str));
}

static void cmd_groups(struct req *r)
{
    char count[24];
    const char *cursor = request_string(r->root, "cursor", NULL);
    if (cursor != NULL && (cursor[0] == '\0' || cursor[strspn(cursor, "0123456789")] != '\0')) {
        req_error(r, WIRE_EARG, "argument \"cursor\" must be a cursor from a previous reply");
        return;
    }
    cmd_num(count, sizeof(count), request_int(r->root, "count", 100));
    const char *argv[] = {cursor ? cursor : "0", count};
    cmd_script(r, SCRIPT_GROUPS, 2, argv, groups_cb);
}

static const struct arg_spec job_spec[] = {Q, JOB, END};

static void job_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (cmd_failed(r, status, reply))
        return;
    if (reply->elements == 0) {
        req_error(r, WIRE_ENOJOB, "no such job (never enqueued, or expired after completion)");
        return;
    }
    json_t *row = json_object();
    json_object_set_new(row, "job", json_string(cmd_str(r, "job")));
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const char *k = reply->element[i]->str;
        redisReply *v = reply->element[i + 1];
        json_t *val;
        if (strcmp(k, "lease") == 0)
            continue; /* the fencing token belongs to the holder alone */
        if (strcmp(k, "payload") == 0) {
            val = json_loadb(v->str, v->len, JSON_DECODE_ANY, NULL);
            if (val == NULL)
                val = json_stringn(v->str, v->len);
        } else if (strcmp(k, "group") == 0 && v->len == 0) {
            val = json_null();
        } else if (strcmp(k, "attempts") == 0 || strcmp(k, "max_attempts") == 0 ||
                   strstr(k, "_ms") != NULL || strcmp(k, "lease_until") == 0) {
            val = json_integer(strtoll(v->str, NULL, 10));
        } else {
            val = json_stringn(v->str, v->len);
        }
        json_object_set_new(row, k, val);
    }
    req_ok(r, json_pack("{s:o}", "job", row));
}

static void cmd_job(struct req *r)
{
    const char *argv[] = {cmd_str(r, "job")};
    cmd_script(r, SCRIPT_JOB, 1, argv, job_cb);
}

static const struct arg_spec dead_spec[] = {
    Q,
    {"action", ARG_STRING, ARG_REQUIRED, 1, 8},
    {"job", ARG_STRING, ARG_JOB, 0, 0},
    {"limit", ARG_INT, 0, 1, 10000},
    END,
};

static void dead_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (cmd_failed(r, status, reply))
        return;
    if (reply->type == REDIS_REPLY_INTEGER) {
        req_ok(r, json_pack("{s:I}", "count", (json_int_t)reply->integer));
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; i + 4 < reply->elements; i += 5) {
        redisReply **f = reply->element + i;
        json_array_append_new(list,
                              json_pack("{s:s, s:o, s:I, s:s, s:I}", "job", f[0]->str, "group",
                                        f[1]->len ? json_string(f[1]->str) : json_null(),
                                        "attempts", (json_int_t)f[2]->integer, "error", f[3]->str,
                                        "died_ms", (json_int_t)f[4]->integer));
    }
    req_ok(r, json_pack("{s:o}", "jobs", list));
}

static void cmd_dead(struct req *r)
{
    const char *action = cmd_str(r, "action");
    if (strcmp(action, "list") && strcmp(action, "retry") && strcmp(action, "purge")) {
        req_error(r, WIRE_EARG, "argument \"action\" must be list, retry or purge");
        return;
    }
    char limit[24];
    cmd_num(limit, sizeof(limit), request_int(r->root, "limit", 100));
    const char *argv[] = {action, cmd_str(r, "job"), limit};
    cmd_script(r, SCRIPT_DEAD, 3, argv, dead_cb);
}

static void check_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (cmd_failed(r, status, reply))
        return;
    json_t *v = json_array();
    for (size_t i = 0; i < reply->elements; i++)
        json_array_append_new(v, json_string(reply->element[i]->str));
    req_ok(r, json_pack("{s:o}", "violations", v));
}

static void cmd_check(struct req *r)
{
    cmd_script(r, SCRIPT_CHECK, 0, NULL, check_cb);
}

/* The per-tenant levers and the reads. */
const struct cmd cmd_admin[] = {
    {"limit", limit_spec, cmd_limit, CMD_QUEUE},
    {"pause", group_spec, cmd_pause, CMD_QUEUE},
    {"resume", group_spec, cmd_resume, CMD_QUEUE},
    {"reassign", reassign_spec, cmd_reassign, CMD_QUEUE},
    {"drain", group_spec, cmd_drain, CMD_QUEUE | CMD_BARRIER},
    {"depth", opt_group_spec, cmd_depth, CMD_QUEUE},
    {"reap", opt_group_spec, cmd_reap, CMD_QUEUE},
    {"stats", queue_spec, cmd_stats, CMD_QUEUE},
    {"groups", groups_spec, cmd_groups, CMD_QUEUE},
    {"job", job_spec, cmd_job, CMD_QUEUE},
    {"dead", dead_spec, cmd_dead, CMD_QUEUE},
    {"check", queue_spec, cmd_check, CMD_QUEUE},
    {NULL, NULL, NULL, 0},
};
