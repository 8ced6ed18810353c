/* emqctl_view.c: the daemon-wide views (queues) and their rows in the
 * command table. Under --json ctl_call() has already printed each reply. */
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

const struct ctl_cmd ctl_view_table[] = {
    {"queues", "", "every queue with its totals: pending, active, delayed, dead, groups",
     "Fetches the queue registry page by page and prints each page as it comes;\n"
     "--limit stops after that many queues. The registry is not sorted. Under\n"
     "--json, prints each page's reply as one line.\n",
     0, 0, CTL_F(CTL_O_LIMIT) | CTL_F(CTL_O_PAGE), false, cmd_queues},
    {0},
};
