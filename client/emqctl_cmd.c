/* emqctl_cmd.c: the commands that are one request (or a run of pages) and
 * a printout: the per-tenant levers and the read ops, and their rows in
 * the command table. Under --json ctl_call() has already printed each
 * reply, so the handlers print human output only when !ctl->json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emqctl.h"
#include "emqctl_table.h"

#define QUEUE(ctl) ((ctl)->pos[0])

/* Send req (consumed) and keep the reply in *reply; 0 or the exit code. */
static int cmd_send(struct ctl *ctl, json_t *req, json_t **reply)
{
    int rc = ctl_call(ctl, req, reply);
    json_decref(req);
    return rc;
}

static long long cmd_int(const json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

/* Send req (consumed) and print "<verb> N <noun>" from the reply's field. */
static int cmd_count(struct ctl *ctl, json_t *req, const char *field, const char *verb,
                     const char *noun)
{
    json_t *reply;
    int rc = cmd_send(ctl, req, &reply);
    if (rc == 0 && !ctl->json) {
        char n[32];
        long long v = cmd_int(reply, field);
        printf("%s %s %s%s\n", verb, fmt_num(n, v), noun, v == 1 ? "" : "s");
    }
    json_decref(reply);
    return rc;
}

static int cmd_ping(struct ctl *ctl)
{
    json_t *reply;
    int rc = cmd_send(ctl, ctl_req("ping", NULL), &reply);
    if (rc == 0 && !ctl->json)
        puts("pong");
    json_decref(reply);
    return rc;
}

static int cmd_stats(struct ctl *ctl)
{
    static const char *const keys[] = {"pending", "active", "delayed", "dead",
                                       "flat",    "groups", "ring",    "paused"};
    enum { N = sizeof(keys) / sizeof(keys[0]) };
    json_t *reply;
    int rc = cmd_send(ctl, ctl_req("stats", QUEUE(ctl)), &reply);
    if (rc == 0 && !ctl->json) {
        char buf[N][32];
        const char *vals[N];
        for (int i = 0; i < N; i++)
            vals[i] = fmt_num(buf[i], cmd_int(reply, keys[i]));
        table_kv(stdout, ctl->color, keys, vals, N);
    }
    json_decref(reply);
    return rc;
}

/* A group's rate as a cell (32 bytes): "5/1000ms", "5/1000ms held"
 * while it is off the ring for it, "-" without one. */
static const char *cmd_rate_cell(const json_t *g, char buf[32])
{
    const json_t *rate = json_object_get(g, "rate");
    if (!json_is_object(rate))
        return "-";
    snprintf(buf, 32, "%lld/%lldms%s", (long long)cmd_int(rate, "max"),
             (long long)cmd_int(rate, "per_ms"),
             json_is_true(json_object_get(g, "throttled")) ? " held" : "");
    return buf;
}

/* A value that comes from the queue default is marked "(q)": cell *cell,
 * rewritten into buf (32 bytes) when it is the group's key field's
 * "queue". Shared by groups and top. */
void cmd_mark_default(const json_t *g, const char *key, char *buf, const char **cell)
{
    const char *f = json_string_value(json_object_get(g, key));
    if (f == NULL || strcmp(f, "queue") != 0)
        return;
    if (buf != *cell)
        snprintf(buf, 32, "%s", *cell);
    snprintf(buf + strlen(buf), 32 - strlen(buf), " (q)");
    *cell = buf;
}

/* The cells of one group entry of a `groups` page (bufs: 32 bytes each);
 * true when the row is highlighted (paused). A daemon from before weights
 * sends none: every group has 1. */
static bool cmd_group_cells(const json_t *g, char bufs[][32], const char **cells)
{
    const json_t *weight = json_object_get(g, "weight");
    const json_t *limit = json_object_get(g, "limit");
    cells[0] = json_string_value(json_object_get(g, "group"));
    cells[0] = cells[0] != NULL ? cells[0] : "?";
    cells[1] = fmt_num(bufs[0], cmd_int(g, "depth"));
    cells[2] = fmt_num(bufs[1], cmd_int(g, "active"));
    cells[3] = json_is_integer(limit) ? fmt_num(bufs[2], json_integer_value(limit)) : "-";
    cells[4] = fmt_num(bufs[3], json_is_integer(weight) ? json_integer_value(weight) : 1);
    cells[5] = cmd_rate_cell(g, bufs[4]);
    const json_t *cap = json_object_get(g, "cap");
    cells[6] = json_is_integer(cap) ? fmt_num(bufs[5], json_integer_value(cap)) : "-";
    const char *from[] = {"limit_from", "weight_from", "rate_from", "cap_from"};
    for (int i = 0; i < 4; i++)
        cmd_mark_default(g, from[i], bufs[2 + i], &cells[3 + i]);
    cells[7] = json_is_true(json_object_get(g, "paused")) ? "yes" : "no";
    return json_is_true(json_object_get(g, "paused"));
}

/* Print one page's rows (at most *left; counts them down). */
static void ctl_scan_page(struct table *t, const struct ctl_scan *scan, const json_t *list,
                          bool *header, long long *left)
{
    char bufs[TABLE_MAX_COLS][32];
    const char *cells[TABLE_MAX_COLS];
    size_t n = json_array_size(list);
    if ((long long)n > *left)
        n = (size_t)*left;
    for (size_t i = 0; i < n; i++) {
        scan->cells(json_array_get(list, i), bufs, cells);
        table_fit(t, cells);
    }
    if (!*header) {
        table_header(t);
        *header = true;
    }
    for (size_t i = 0; i < n; i++) {
        bool hl = scan->cells(json_array_get(list, i), bufs, cells);
        table_row(t, cells, hl);
    }
    *left -= (long long)n;
    fflush(stdout);
}

int ctl_scan(struct ctl *ctl, const struct ctl_scan *scan, const char *queue)
{
    long long left = ctl->opt[CTL_O_LIMIT] ? ctl->num[CTL_O_LIMIT] : -1;
    long long page = ctl->opt[CTL_O_PAGE] ? ctl->num[CTL_O_PAGE] : scan->page;
    page = page < scan->page_max ? page : scan->page_max;
    left = left < 0 ? (long long)(~0ULL >> 1) : left;
    struct table t;
    table_init(&t, scan->cols, scan->ncols, ctl->color, stdout);
    bool header = false, rows = false;
    char cursor[40] = "0";
    int rc = 0;
    do {
        json_t *req = ctl_req(scan->op, queue), *reply;
        json_object_set_new(req, "cursor", json_string(cursor));
        json_object_set_new(req, "count", json_integer(page < left ? page : left));
        rc = cmd_send(ctl, req, &reply);
        if (rc != 0)
            break;
        const json_t *list = json_object_get(reply, scan->key);
        rows = rows || json_array_size(list) > 0;
        if (!ctl->json)
            ctl_scan_page(&t, scan, list, &header, &left);
        else
            left -= (long long)json_array_size(list);
        const char *next = json_string_value(json_object_get(reply, "cursor"));
        snprintf(cursor, sizeof(cursor), "%s", next != NULL ? next : "0");
        json_decref(reply);
    } while (strcmp(cursor, "0") != 0 && left > 0);
    if (rc == 0 && !ctl->json && !rows)
        printf("(no %s)\n", scan->key);
    return rc;
}

static int cmd_groups(struct ctl *ctl)
{
    static const struct table_col cols[] = {
        {"GROUP", false}, {"DEPTH", true}, {"ACTIVE", true}, {"LIMIT", true},
        {"WEIGHT", true}, {"RATE", true},  {"CAP", true},    {"PAUSED", false},
    };
    static const struct ctl_scan scan = {"groups", "groups", cols, 8, 100, 10000, cmd_group_cells};
    return ctl_scan(ctl, &scan, QUEUE(ctl));
}

static int cmd_depth(struct ctl *ctl)
{
    json_t *req = ctl_req("depth", QUEUE(ctl)), *reply;
    if (ctl->npos > 1)
        json_object_set_new(req, "group", json_string(ctl->pos[1]));
    int rc = cmd_send(ctl, req, &reply);
    if (rc == 0 && !ctl->json) {
        char n[32];
        puts(fmt_num(n, cmd_int(reply, "depth")));
    }
    json_decref(reply);
    return rc;
}

/* limit, weight, rate and cap take QUEUE [GROUP] VALUE: without GROUP they set
 * the queue-wide default (a group id never looks like a value). The group
 * to name in the request (NULL: the default), and who the output is about. */
static const char *setting_group(const struct ctl *ctl)
{
    return ctl->npos == 3 ? ctl->pos[1] : NULL;
}

static const char *setting_who(const struct ctl *ctl)
{
    return ctl->npos == 3 ? ctl->pos[1] : "queue default";
}

/* The request of a setting, with its group when there is one. */
static json_t *setting_req(const struct ctl *ctl, const char *op)
{
    json_t *req = ctl_req(op, QUEUE(ctl));
    if (setting_group(ctl) != NULL)
        json_object_set_new(req, "group", json_string(setting_group(ctl)));
    return req;
}

/* limit, weight and cap: [GROUP] N|none; none (or 0) removes the setting. */
static int cmd_setting(struct ctl *ctl, const char *op, const char *arg, long long lo, long long hi,
                       const char *none_text)
{
    long long n = 0;
    const char *value = ctl->pos[ctl->npos - 1];
    bool none = strcmp(value, "none") == 0;
    if (!none && (ctl_parse_int(value, lo, hi, &n) != 0))
        return ctl_usage_error(ctl, "the %s must be %lld..%lld or none, not \"%s\"", op, lo, hi,
                               value);
    json_t *req = setting_req(ctl, op), *reply;
    json_object_set_new(req, arg, none || n == 0 ? json_null() : json_integer(n));
    int rc = cmd_send(ctl, req, &reply);
    if (rc == 0 && !ctl->json) {
        char buf[32];
        if (none || n == 0)
            printf("%s: %s\n", setting_who(ctl), none_text);
        else
            printf("%s: %s %s\n", setting_who(ctl), op, fmt_num(buf, n));
    }
    json_decref(reply);
    return rc;
}

static int cmd_limit(struct ctl *ctl)
{
    return cmd_setting(ctl, "limit", "max", 0, 1000000, "no limit");
}

static int cmd_cap(struct ctl *ctl)
{
    return cmd_setting(ctl, "cap", "max_pending", 0, 1000000000,
                       setting_group(ctl) ? "no cap of its own" : "no default cap");
}

static int cmd_weight(struct ctl *ctl)
{
    return cmd_setting(ctl, "weight", "weight", 0, 1000,
                       setting_group(ctl) ? "no weight of its own" : "no default weight");
}

/* rate [GROUP] N/PER_MS|none: at most N leases per PER_MS ms. */
static int cmd_rate(struct ctl *ctl)
{
    long long max = 0, per = 0;
    const char *value = ctl->pos[ctl->npos - 1];
    bool none = strcmp(value, "none") == 0;
    if (!none) {
        char buf[64];
        const char *slash = strchr(value, '/');
        size_t len = slash ? (size_t)(slash - value) : 0;
        if (len > 0 && len < sizeof(buf))
            memcpy(buf, value, len);
        buf[len < sizeof(buf) ? len : 0] = '\0';
        if (len == 0 || len >= sizeof(buf) || ctl_parse_int(buf, 1, 1000000, &max) != 0 ||
            ctl_parse_int(slash + 1, 1, 86400000, &per) != 0)
            return ctl_usage_error(ctl,
                                   "the rate must be N/PER_MS (1..1000000 per 1..86400000 ms) "
                                   "or none, not \"%s\"",
                                   value);
    }
    json_t *req = setting_req(ctl, "rate"), *reply;
    json_object_set_new(req, "max", none ? json_null() : json_integer(max));
    if (!none)
        json_object_set_new(req, "per_ms", json_integer(per));
    int rc = cmd_send(ctl, req, &reply);
    if (rc == 0 && !ctl->json) {
        if (none)
            printf("%s: no rate\n", setting_who(ctl));
        else
            printf("%s: rate %lld per %lld ms\n", setting_who(ctl), max, per);
    }
    json_decref(reply);
    return rc;
}

/* pause and resume: the same request, told apart by the op. */
static int cmd_toggle(struct ctl *ctl, const char *op, const char *done, const char *already)
{
    json_t *req = ctl_req(op, QUEUE(ctl)), *reply;
    json_object_set_new(req, "group", json_string(ctl->pos[1]));
    int rc = cmd_send(ctl, req, &reply);
    if (rc == 0 && !ctl->json)
        printf("%s %s\n", ctl->pos[1],
               json_is_true(json_object_get(reply, "changed")) ? done : already);
    json_decref(reply);
    return rc;
}

static int cmd_pause(struct ctl *ctl)
{
    return cmd_toggle(ctl, "pause", "paused", "was already paused");
}

static int cmd_resume(struct ctl *ctl)
{
    return cmd_toggle(ctl, "resume", "resumed", "was not paused");
}

static int cmd_reassign(struct ctl *ctl)
{
    json_t *req = ctl_req("reassign", QUEUE(ctl)), *reply;
    json_object_set_new(req, "job", json_string(ctl->pos[1]));
    json_object_set_new(req, "group", json_string(ctl->pos[2]));
    int rc = cmd_send(ctl, req, &reply);
    if (rc == 0 && !ctl->json) {
        const char *from = json_string_value(json_object_get(reply, "from"));
        if (from != NULL && strcmp(from, ctl->pos[2]) == 0)
            printf("%s is already in %s\n", ctl->pos[1], from);
        else
            printf("%s moved from %s to %s\n", ctl->pos[1], from ? from : "the flat set",
                   ctl->pos[2]);
    }
    json_decref(reply);
    return rc;
}

static int cmd_drain(struct ctl *ctl)
{
    char q[256];
    const char *group = ctl->npos > 1 ? ctl->pos[1] : NULL;
    if (group != NULL)
        snprintf(q, sizeof(q), "Delete every pending job of group %s in queue %s?", group,
                 QUEUE(ctl));
    else
        snprintf(q, sizeof(q), "Delete every pending ungrouped job of queue %s?", QUEUE(ctl));
    int rc = ctl_confirm(ctl, q);
    if (rc != 0)
        return rc;
    json_t *req = ctl_req("drain", QUEUE(ctl));
    if (group != NULL)
        json_object_set_new(req, "group", json_string(group));
    return cmd_count(ctl, req, "drained", "drained", "job");
}

static int cmd_reap(struct ctl *ctl)
{
    json_t *req = ctl_req("reap", QUEUE(ctl));
    if (ctl->npos > 1)
        json_object_set_new(req, "group", json_string(ctl->pos[1]));
    return cmd_count(ctl, req, "reaped", "reaped", "expired lease");
}

/* One field of a job row as text; buf holds 64 bytes. NULL when absent. */
static const char *cmd_job_field(const json_t *row, const char *key, char *buf, char **dump)
{
    const json_t *v = json_object_get(row, key);
    if (v == NULL)
        return NULL;
    if (strcmp(key, "payload") == 0)
        return *dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (json_is_null(v))
        return strcmp(key, "group") == 0 ? "(ungrouped)" : "-";
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v) && strstr(key, "_ms") != NULL)
        return fmt_time_ms(buf, json_integer_value(v));
    if (json_is_integer(v))
        return fmt_num(buf, json_integer_value(v));
    return *dump = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

static void cmd_job_print(const struct ctl *ctl, const json_t *row)
{
    static const char *const order[] = {"job",          "state",      "group",       "attempts",
                                        "max_attempts", "created_ms", "lease_until", "finished_ms",
                                        "error",        "payload"};
    enum { N = sizeof(order) / sizeof(order[0]) };
    char bufs[N][64];
    char *dumps[N] = {0};
    const char *keys[N], *vals[N];
    int n = 0;
    for (int i = 0; i < N; i++) {
        const char *v = cmd_job_field(row, order[i], bufs[i], &dumps[i]);
        if (v == NULL)
            continue;
        keys[n] = order[i];
        vals[n++] = v;
    }
    table_kv(stdout, ctl->color, keys, vals, n);
    for (int i = 0; i < N; i++)
        free(dumps[i]);
}

static int cmd_job(struct ctl *ctl)
{
    json_t *req = ctl_req("job", QUEUE(ctl)), *reply;
    json_object_set_new(req, "job", json_string(ctl->pos[1]));
    int rc = cmd_send(ctl, req, &reply);
    if (rc == 0 && !ctl->json)
        cmd_job_print(ctl, json_object_get(reply, "job"));
    json_decref(reply);
    return rc;
}

static const struct table_col peek_cols[] = {
    {"JOB", false},     {"GROUP", false}, {"STATE", false},
    {"ATTEMPTS", true}, {"SINCE", false}, {"PAYLOAD", false},
};

/* One peeked row's cells: SINCE is when it was created, or for a lease
 * until when it runs, for a delayed job when it is due (ready_ms). */
static void cmd_peek_cells(const json_t *j, char bufs[3][48], const char *cells[6])
{
    const char *s = json_string_value(json_object_get(j, "job"));
    cells[0] = s ? s : "?";
    s = json_string_value(json_object_get(j, "group"));
    cells[1] = s ? s : "-";
    s = json_string_value(json_object_get(j, "state"));
    cells[2] = s ? s : "?";
    cells[3] = fmt_num(bufs[0], cmd_int(j, "attempts"));
    const char *when = json_object_get(j, "lease_until") ? "lease_until" : "created_ms";
    cells[4] = fmt_time_ms(bufs[1], cmd_int(j, when));
    char *p = json_dumps(json_object_get(j, "payload"), JSON_COMPACT | JSON_ENCODE_ANY);
    snprintf(bufs[2], 48, "%.40s%s", p ? p : "", p && strlen(p) > 40 ? "..." : "");
    free(p);
    cells[5] = bufs[2];
}

/* The most jobs one peek asks for: the daemon's bound on its count
 * (PROTOCOL.md, peek). A larger --page-size is a transport detail, so it
 * is cut to this, as the scans cut theirs (ctl_scan). */
#define PEEK_PAGE_MAX 1000

static int cmd_peek(struct ctl *ctl)
{
    long long left = ctl->opt[CTL_O_LIMIT] ? ctl->num[CTL_O_LIMIT] : 20;
    long long page = ctl->opt[CTL_O_PAGE] ? ctl->num[CTL_O_PAGE] : 100;
    page = page < PEEK_PAGE_MAX ? page : PEEK_PAGE_MAX;
    struct table t;
    table_init(&t, peek_cols, 6, ctl->color, stdout);
    char cursor[EMQ_CURSOR_MAX] = "", bufs[3][48];
    const char *cells[6];
    bool header = false;
    int rc = 0;
    do {
        json_t *req = ctl_req("peek", QUEUE(ctl)), *reply;
        if (ctl->npos > 1)
            json_object_set_new(req, "group", json_string(ctl->pos[1]));
        if (ctl->opt[CTL_O_STATE] != NULL)
            json_object_set_new(req, "state", json_string(ctl->opt[CTL_O_STATE]));
        if (cursor[0] != '\0')
            json_object_set_new(req, "cursor", json_string(cursor));
        json_object_set_new(req, "count", json_integer(page < left ? page : left));
        rc = cmd_send(ctl, req, &reply);
        if (rc != 0)
            break;
        const json_t *jobs = json_object_get(reply, "jobs");
        size_t n = json_array_size(jobs);
        for (size_t i = 0; !ctl->json && i < n; i++) {
            cmd_peek_cells(json_array_get(jobs, i), bufs, cells);
            table_fit(&t, cells);
        }
        if (!ctl->json && !header && n > 0) {
            table_header(&t);
            header = true;
        }
        for (size_t i = 0; !ctl->json && i < n; i++) {
            cmd_peek_cells(json_array_get(jobs, i), bufs, cells);
            table_row(&t, cells, false);
        }
        left -= (long long)n;
        const char *next = json_string_value(json_object_get(reply, "cursor"));
        snprintf(cursor, sizeof(cursor), "%s", next != NULL ? next : "");
        json_decref(reply);
    } while (cursor[0] != '\0' && left > 0);
    if (rc == 0 && !ctl->json && !header)
        puts("(no jobs)");
    return rc;
}

static int cmd_remove(struct ctl *ctl)
{
    char q[192];
    snprintf(q, sizeof(q), "Delete job %s of queue %s?", ctl->pos[1], QUEUE(ctl));
    int rc = ctl_confirm(ctl, q);
    if (rc != 0)
        return rc;
    json_t *req = ctl_req("remove", QUEUE(ctl)), *reply;
    json_object_set_new(req, "job", json_string(ctl->pos[1]));
    rc = cmd_send(ctl, req, &reply);
    if (rc == 0 && !ctl->json) {
        const char *was = json_string_value(json_object_get(reply, "state"));
        printf("removed %s (was %s)\n", ctl->pos[1], was ? was : "?");
    }
    json_decref(reply);
    return rc;
}

static const struct table_col dead_cols[] = {
    {"JOB", false}, {"GROUP", false}, {"ATTEMPTS", true}, {"DIED", false}, {"ERROR", false},
};

static void cmd_dead_cells(const json_t *j, char bufs[2][32], const char *cells[5])
{
    const char *s = json_string_value(json_object_get(j, "job"));
    cells[0] = s ? s : "?";
    s = json_string_value(json_object_get(j, "group"));
    cells[1] = s ? s : "-";
    cells[2] = fmt_num(bufs[0], cmd_int(j, "attempts"));
    cells[3] = fmt_time_ms(bufs[1], cmd_int(j, "died_ms"));
    s = json_string_value(json_object_get(j, "error"));
    cells[4] = s ? s : "";
}

static void cmd_dead_list(const struct ctl *ctl, const json_t *jobs)
{
    struct table t;
    char bufs[2][32];
    const char *cells[5];
    table_init(&t, dead_cols, 5, ctl->color, stdout);
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        cmd_dead_cells(json_array_get(jobs, i), bufs, cells);
        table_fit(&t, cells);
    }
    table_header(&t);
    for (size_t i = 0; i < json_array_size(jobs); i++) {
        cmd_dead_cells(json_array_get(jobs, i), bufs, cells);
        table_row(&t, cells, false);
    }
    if (json_array_size(jobs) == 0)
        puts("(no dead jobs)");
}

static int cmd_dead(struct ctl *ctl)
{
    const char *action = ctl->pos[1];
    bool list = strcmp(action, "list") == 0, purge = strcmp(action, "purge") == 0;
    if (!list && !purge && strcmp(action, "retry") != 0)
        return ctl_usage_error(ctl, "the action is list, retry or purge, not \"%s\"", action);
    if (ctl->opt[CTL_O_LIMIT] != NULL && ctl->num[CTL_O_LIMIT] > 10000)
        return ctl_usage_error(ctl, "--limit is at most 10000 here");
    if (purge && ctl->npos < 3) {
        char q[160];
        snprintf(q, sizeof(q), "Delete the oldest dead jobs of queue %s for good?", QUEUE(ctl));
        int rc = ctl_confirm(ctl, q);
        if (rc != 0)
            return rc;
    }
    json_t *req = ctl_req("dead", QUEUE(ctl)), *reply;
    json_object_set_new(req, "action", json_string(action));
    if (ctl->npos > 2)
        json_object_set_new(req, "job", json_string(ctl->pos[2]));
    if (ctl->opt[CTL_O_LIMIT] != NULL)
        json_object_set_new(req, "limit", json_integer(ctl->num[CTL_O_LIMIT]));
    if (!list)
        return cmd_count(ctl, req, "count", purge ? "purged" : "retried", "job");
    int rc = cmd_send(ctl, req, &reply);
    if (rc == 0 && !ctl->json)
        cmd_dead_list(ctl, json_object_get(reply, "jobs"));
    json_decref(reply);
    return rc;
}

static int cmd_check(struct ctl *ctl)
{
    json_t *reply;
    int rc = cmd_send(ctl, ctl_req("check", QUEUE(ctl)), &reply);
    if (rc != 0)
        return rc;
    const json_t *v = json_object_get(reply, "violations");
    if (!ctl->json && json_array_size(v) == 0)
        printf("ok: queue %s holds every invariant\n", QUEUE(ctl));
    for (size_t i = 0; !ctl->json && i < json_array_size(v); i++)
        printf("violation: %s\n", json_string_value(json_array_get(v, i)));
    /* Violations are a finding a script must not miss: exit 1. */
    rc = json_array_size(v) == 0 ? 0 : CTL_EXIT_FAIL;
    json_decref(reply);
    return rc;
}

/* The defaults' note, shared by limit, weight, rate and cap. */
#define SETTING_HELP                                                                               \
    "Without GROUP, sets the queue-wide default, which applies to every group\n"                   \
    "without a setting of its own; a group's own wins. groups marks a value\n"                     \
    "that comes from the default with \"(q)\".\n"

const struct ctl_cmd ctl_cmd_table[] = {
    {"ping", "", "check that emqd answers (prints pong)", NULL, 0, 0, 0, false, cmd_ping},
    {"stats", "QUEUE", "queue-wide totals: pending, active, delayed, dead, groups...", NULL, 1, 1,
     0, false, cmd_stats},
    {"groups", "QUEUE", "the groups table: depth, active, limit, weight, rate, cap, paused",
     "Fetches the group registry page by page and prints each page as it comes.\n"
     "Under --json, prints each page's reply as one line.\n",
     1, 1, CTL_F(CTL_O_LIMIT) | CTL_F(CTL_O_PAGE), false, cmd_groups},
    {"depth", "QUEUE [GROUP]", "pending jobs of a group (without GROUP: the ungrouped set)", NULL,
     1, 2, 0, false, cmd_depth},
    {"limit", "QUEUE [GROUP] N|none",
     "set a group's concurrency ceiling, or without GROUP the queue default (none removes it)",
     SETTING_HELP, 2, 3, 0, false, cmd_limit},
    {"weight", "QUEUE [GROUP] N|none",
     "set a group's weight, its jobs per turn, 1..1000, or the queue default (none removes it)",
     SETTING_HELP, 2, 3, 0, false, cmd_weight},
    {"rate", "QUEUE [GROUP] N/PER_MS|none",
     "hold a group to at most N leases per PER_MS ms, or set the queue default (none removes it)",
     SETTING_HELP, 2, 3, 0, false, cmd_rate},
    {"cap", "QUEUE [GROUP] N|none",
     "bound a group's lane to N pending + delayed jobs (enqueues beyond are refused EFULL), or "
     "set the queue default (none removes it)",
     SETTING_HELP, 2, 3, 0, false, cmd_cap},
    {"pause", "QUEUE GROUP", "stop serving a group (its jobs stay)", NULL, 2, 2, 0, false,
     cmd_pause},
    {"resume", "QUEUE GROUP", "serve a paused group again", NULL, 2, 2, 0, false, cmd_resume},
    {"reassign", "QUEUE JOB GROUP", "move a pending job to another group", NULL, 3, 3, 0, false,
     cmd_reassign},
    {"drain", "QUEUE [GROUP]", "delete a group's pending jobs, or the ungrouped ones (asks first)",
     "Without GROUP it deletes the queue's pending ungrouped (flat) jobs. Asks for\n"
     "confirmation on a terminal; without a terminal on stdin it refuses (exit 2)\n"
     "unless --yes is given.\n",
     1, 2, CTL_F(CTL_O_YES), true, cmd_drain},
    {"reap", "QUEUE [GROUP]", "recover expired leases now (queue-wide or one group)", NULL, 1, 2, 0,
     true, cmd_reap},
    {"job", "QUEUE JOB", "show one job's row", NULL, 2, 2, 0, false, cmd_job},
    {"peek", "QUEUE [GROUP]", "list jobs in service order: a lane, the ungrouped ones, or a state",
     "Without GROUP, the ungrouped pending jobs; --state active, delayed or dead\n"
     "lists those instead (active also with GROUP: that group's leases). Shows the\n"
     "first --limit jobs (default 20), --page-size per request.\n",
     1, 2, CTL_F(CTL_O_STATE) | CTL_F(CTL_O_LIMIT) | CTL_F(CTL_O_PAGE), false, cmd_peek},
    {"remove", "QUEUE JOB", "delete one pending or delayed job (asks first)",
     "Asks for confirmation on a terminal; without a terminal on stdin it refuses\n"
     "(exit 2) unless --yes is given.\n",
     2, 2, CTL_F(CTL_O_YES), false, cmd_remove},
    {"dead", "QUEUE list|retry|purge [JOB]", "list, retry or purge dead-lettered jobs",
     "Without JOB, acts on the oldest --limit dead jobs (default 100). purge without\n"
     "JOB asks for confirmation like drain.\n",
     2, 3, CTL_F(CTL_O_LIMIT) | CTL_F(CTL_O_YES), false, cmd_dead},
    {"check", "QUEUE", "verify the store invariants (exit 1 on violations)", NULL, 1, 1, 0, true,
     cmd_check},
    {0},
};
