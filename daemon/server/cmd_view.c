/* cmd_view: the daemon-wide views (queues: the registry with each queue's
 * totals) and the removal of a queue nobody uses any more (forget). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cmd.h"
#include "engine.h"
#include "queue.h"
#include "req.h"
#include "server.h"

/* --- queues ---------------------------------------------------------------- */

/* A page of queues runs in two steps: the registry's page (one SSCAN on
 * the registry's route), then one stats call per queue on it, each on its
 * queue's route, all out at once. The page keeps what they gather until
 * the last answers; each call's priv is its slot. */
struct queues_page;

struct queues_slot {
    struct queues_page *pg;
    size_t i;
};

struct queues_page {
    struct req *r;
    size_t left;          /* stats calls still out */
    json_t *rows;         /* one object per queue, in the registry page's order (owned) */
    char *cursor;         /* the registry's cursor for the next page (owned) */
    enum wire_error code; /* the first call that failed (0: none) */
    char message[200];
    struct queues_slot slots[];
};

static const struct arg_spec queues_spec[] = {
    {"cursor", ARG_STRING, 0, 0, 32},
    {"count", ARG_INT, 0, 1, 1000},
    END,
};

static void page_fail(struct queues_page *pg, const struct store_status *st)
{
    if (pg->code == 0) {
        pg->code = st->code;
        snprintf(pg->message, sizeof(pg->message), "%s", st->message);
    }
}

/* Answer the request once nothing of the page is out, and free it. */
static void page_done(struct queues_page *pg)
{
    if (pg->left > 0)
        return;
    struct req *r = pg->r;
    if (pg->code != 0)
        req_error(r, pg->code, "%s", pg->message);
    else
        req_ok(r, json_pack("{s:O, s:s}", "queues", pg->rows, "cursor", pg->cursor));
    json_decref(pg->rows);
    free(pg->cursor);
    free(pg);
}

static void queue_stats_cb(void *priv, const struct store_status *st, const struct store_stats *res)
{
    struct queues_slot *slot = priv;
    struct queues_page *pg = slot->pg;
    if (st->code != 0) {
        page_fail(pg, st);
    } else {
        json_t *row = json_array_get(pg->rows, slot->i);
        /* The fields mean what stats' do (5.19). */
        json_object_set_new(row, "pending", json_integer((json_int_t)res->pending));
        json_object_set_new(row, "active", json_integer((json_int_t)res->active));
        json_object_set_new(row, "delayed", json_integer((json_int_t)res->delayed));
        json_object_set_new(row, "dead", json_integer((json_int_t)res->dead));
        json_object_set_new(row, "groups", json_integer((json_int_t)res->groups));
        json_object_set_new(row, "paused", json_integer((json_int_t)res->paused));
    }
    pg->left--;
    page_done(pg);
}

/* Ask one queue's totals. A queue this daemon does not have in use (one
 * another daemon registered since this one read the registry) is looked
 * up as a read: it is freed again once answered. */
static void queues_ask(struct queues_page *pg, struct engine *eng, size_t i)
{
    json_t *row = json_array_get(pg->rows, i);
    const char *name = json_string_value(json_object_get(row, "queue"));
    struct queue *q = engine_queue(eng, name, strlen(name), false);
    struct store_status st = {WIRE_EINTERNAL, "out of memory"};
    pg->slots[i] = (struct queues_slot){pg, i};
    pg->left++;
    if (q == NULL) {
        queue_stats_cb(&pg->slots[i], &st, NULL);
        return;
    }
    if (store_stats(queue_store(q), queue_stats_cb, &pg->slots[i]) != 0) {
        st = (struct store_status){WIRE_EUNAVAILABLE, "the backend is unavailable"};
        queue_stats_cb(&pg->slots[i], &st, NULL);
    }
}

static void registry_page_cb(void *priv, const struct store_status *st,
                             const struct store_queues_page *page)
{
    struct req *r = priv;
    if (st->code != 0) {
        req_store_error(r, st);
        return;
    }
    struct queues_page *pg = calloc(1, sizeof(*pg) + page->n * sizeof(pg->slots[0]));
    json_t *rows = json_array();
    char *cursor = strdup(page->cursor);
    bool ok = pg != NULL && rows != NULL && cursor != NULL;
    for (size_t i = 0; ok && i < page->n; i++)
        ok = json_array_append_new(
                 rows, json_pack("{s:s%}", "queue", page->names[i].str, page->names[i].len)) == 0;
    if (!ok) {
        free(pg);
        json_decref(rows);
        free(cursor);
        req_error(r, WIRE_EINTERNAL, "out of memory");
        return;
    }
    *pg = (struct queues_page){.r = r, .rows = rows, .cursor = cursor};
    /* Held while the calls go out, so that one answered at once (the
     * backend down) cannot finish the page before the rest are asked. */
    pg->left = 1;
    for (size_t i = 0; i < page->n; i++)
        queues_ask(pg, &req_server(r)->eng, i);
    pg->left--;
    page_done(pg);
}

static void cmd_queues(struct req *r)
{
    struct engine *eng = &req_server(r)->eng;
    const char *cursor = request_string(r->root, "cursor", NULL);
    uint64_t count = (uint64_t)request_int(r->root, "count", 20);
    if (store_queues_page(eng->pool, &eng->registry, cursor ? cursor : "0", count, registry_page_cb,
                          r) != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
}

/* The daemon-wide views. queues is a barrier: its stats calls are made
 * only once the registry's page is back, and a later request of the
 * connection must not overtake them. */
const struct cmd cmd_view[] = {
    {"queues", queues_spec, cmd_queues, CMD_READ | CMD_BARRIER, cmd_check_cursor},
    {NULL, NULL, NULL, 0},
};
