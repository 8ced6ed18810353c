/* emqctl_view.c: the daemon-wide views (queues, clients), forget, and
 * their rows in the command table. Under --json ctl_call() has already printed each
 * reply. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emqctl.h"
#include "emqctl_table.h"

/* The cells of one entry of a `queues` page; a queue with paused groups
 * is highlighted. */
static bool queue_cells(const json_t *q, char bufs[][32], const char **cells)
{
    static const char *const keys[] = {"pending", "active", "delayed", "dead", "groups", "paused"};
    cells[0] = json_string_value(json_object_get(q, "queue"));
    cells[0] = cells[0] != NULL ? cells[0] : "?";
    for (int i = 0; i < 6; i++)
        cells[1 + i] = fmt_num(bufs[i], json_integer_value(json_object_get(q, keys[i])));
    return json_integer_value(json_object_get(q, "paused")) > 0;
}

static int cmd_queues(struct ctl *ctl)
{
    static const struct table_col cols[] = {
        {"QUEUE", false}, {"PENDING", true}, {"ACTIVE", true}, {"DELAYED", true},
        {"DEAD", true},   {"GROUPS", true},  {"PAUSED", true},
    };
    static const struct ctl_scan scan = {"queues", "queues", cols, 7, 100, 1000, queue_cells};
    return ctl_scan(ctl, &scan, NULL);
}

/* ms as a short duration: "850ms", "12.3s", "4m05s", "3h02m". */
static const char *fmt_ms(char *buf, long long ms)
{
    if (ms < 1000)
        snprintf(buf, 32, "%lldms", ms);
    else if (ms < 60000)
        snprintf(buf, 32, "%.1fs", (double)ms / 1000);
    else if (ms < 3600000)
        snprintf(buf, 32, "%lldm%02llds", ms / 60000, ms / 1000 % 60);
    else
        snprintf(buf, 32, "%lldh%02lldm", ms / 3600000, ms / 60000 % 60);
    return buf;
}

/* A connection's streams as one cell: "mail:8/3 jobs+flat:1/0"
 * (queue, +flat for an ungrouped one, credit / outstanding); "-" without. */
static const char *stream_cell(char *buf, size_t cap, const json_t *streams)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_array_size(streams) && n + 1 < cap; i++) {
        const json_t *s = json_array_get(streams, i);
        int w = snprintf(buf + n, cap - n, "%s%s%s:%lld/%lld", i ? " " : "",
                         json_string_value(json_object_get(s, "queue")),
                         json_is_true(json_object_get(s, "flat")) ? "+flat" : "",
                         json_integer_value(json_object_get(s, "credit")),
                         json_integer_value(json_object_get(s, "outstanding")));
        n = w < 0 ? n : n + (size_t)w;
    }
    return buf[0] ? buf : "-";
}

/* The cells of one clients row; the asker's own is highlighted. */
static bool client_cells(const json_t *c, char bufs[][32], const char **cells)
{
    static char streams[512];
    const char *name = json_string_value(json_object_get(c, "name"));
    cells[0] = fmt_num(bufs[0], json_integer_value(json_object_get(c, "id")));
    cells[1] = json_string_value(json_object_get(c, "addr"));
    cells[1] = cells[1] != NULL ? cells[1] : "?";
    cells[2] = name != NULL ? name : "-";
    cells[3] = fmt_ms(bufs[1], json_integer_value(json_object_get(c, "age_ms")));
    cells[4] = fmt_ms(bufs[2], json_integer_value(json_object_get(c, "idle_ms")));
    cells[5] = fmt_num(bufs[3], json_integer_value(json_object_get(c, "leases")));
    cells[6] = stream_cell(streams, sizeof(streams), json_object_get(c, "streams"));
    return json_is_true(json_object_get(c, "self"));
}

static const struct table_col client_cols[] = {
    {"ID", true},   {"ADDR", false},  {"NAME", false},    {"AGE", true},
    {"IDLE", true}, {"LEASES", true}, {"STREAMS", false},
};

/* One connection: its row as "key value" lines, then the leases it
 * holds as a table. */
static void client_print(const struct ctl *ctl, const json_t *row)
{
    static const char *const keys[] = {"id", "addr", "name", "age", "idle", "leases", "streams"};
    char bufs[7][32];
    const char *cells[7];
    client_cells(row, bufs, cells);
    table_kv(stdout, ctl->color, keys, cells, 7);
    static const struct table_col cols[] = {
        {"QUEUE", false}, {"JOB", false}, {"GROUP", false}, {"DEADLINE", false}};
    const json_t *held = json_object_get(row, "held");
    struct table t;
    table_init(&t, cols, 4, ctl->color, stdout);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && json_array_size(held) > 0) {
            putchar('\n');
            table_header(&t);
        }
        for (size_t i = 0; i < json_array_size(held); i++) {
            const json_t *h = json_array_get(held, i);
            const char *g = json_string_value(json_object_get(h, "group"));
            const char *hc[4] = {
                json_string_value(json_object_get(h, "queue")),
                json_string_value(json_object_get(h, "job")), g ? g : "-",
                fmt_time_ms(bufs[0], json_integer_value(json_object_get(h, "deadline_ms")))};
            if (pass == 0)
                table_fit(&t, hc);
            else
                table_row(&t, hc, false);
        }
    }
}

static int cmd_clients(struct ctl *ctl)
{
    if (ctl->npos == 0) {
        static const struct ctl_scan scan = {"clients", "clients", client_cols, 7,
                                             100,       1000,      client_cells};
        return ctl_scan(ctl, &scan, NULL);
    }
    long long id;
    if (ctl_parse_int(ctl->pos[0], 1, LLONG_MAX, &id) != 0)
        return ctl_usage_error(ctl, "the connection id is a number, not \"%s\"", ctl->pos[0]);
    json_t *req = ctl_req("clients", NULL), *reply;
    json_object_set_new(req, "id", json_integer(id));
    int rc = ctl_call(ctl, req, &reply);
    json_decref(req);
    if (rc == 0 && !ctl->json)
        client_print(ctl, json_object_get(reply, "client"));
    json_decref(reply);
    return rc;
}

static int cmd_forget(struct ctl *ctl)
{
    char q[160];
    snprintf(q, sizeof(q), "Forget queue %s (it must hold no job)?", ctl->pos[0]);
    int rc = ctl_confirm(ctl, q);
    if (rc != 0)
        return rc;
    json_t *req = ctl_req("forget", ctl->pos[0]), *reply;
    rc = ctl_call(ctl, req, &reply);
    json_decref(req);
    if (rc == 0 && !ctl->json)
        printf("forgot queue %s\n", ctl->pos[0]);
    json_decref(reply);
    return rc;
}

const struct ctl_cmd ctl_view_table[] = {
    {"queues", "", "every queue with its totals: pending, active, delayed, dead, groups",
     "Fetches the queue registry page by page and prints each page as it comes;\n"
     "--limit stops after that many queues. The registry is not sorted. Under\n"
     "--json, prints each page's reply as one line.\n",
     0, 0, CTL_F(CTL_O_LIMIT) | CTL_F(CTL_O_PAGE), false, cmd_queues},
    {"clients", "[ID]", "this daemon's connections: name, age, idle, leases, streams",
     "Without ID, every connection of the daemon asked (not of other daemons on\n"
     "the same Redis), newest first, page by page; the connection emqctl itself\n"
     "uses is highlighted. With ID, that connection and the leases it holds\n"
     "(queue, job, group, deadline; never a token). STREAMS shows each stream as\n"
     "QUEUE:CREDIT/OUTSTANDING (+flat for the ungrouped kind).\n",
     0, 1, CTL_F(CTL_O_LIMIT) | CTL_F(CTL_O_PAGE), false, cmd_clients},
    {"forget", "QUEUE", "remove a queue that holds no job from the registry (asks first)",
     "Refused (ESTATE, exit 1) while the queue has jobs pending, active, delayed or\n"
     "dead, or while the daemon's workers stream from it or hold its jobs. Asks for\n"
     "confirmation on a terminal; without a terminal on stdin it refuses (exit 2)\n"
     "unless --yes is given.\n",
     1, 1, CTL_F(CTL_O_YES), false, cmd_forget},
    {0},
};
