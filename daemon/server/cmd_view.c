/* cmd_view: the daemon-wide views: queues (the registry with each
 * queue's totals) and clients (this daemon's connections); and forget,
 * which takes an unused queue out of the registry. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "client.h"
#include "cmd.h"
#include "consumer.h"
#include "engine.h"
#include "lease.h"
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

/* --- forget -------------------------------------------------------------- */

static const struct arg_spec forget_spec[] = {Q, END};

/* Whether this daemon's connections use q: they hold its leases, have
 * claims parked on it, or stream from it (a stream stopped with credit 0
 * and nothing outstanding does not count: it waits for nothing). */
static bool forget_in_use(const struct server *s, const struct queue *q)
{
    if (q->leases > 0 || q->wait_head != NULL)
        return true;
    for (const struct client *c = s->clients; c != NULL; c = c->next)
        for (const struct consumer *k = c->consumers; k != NULL; k = k->cnext)
            if (k->w.q == q && (!k->stream || k->credit > 0 || k->outstanding > 0))
                return true;
    return false;
}

static bool forget_refused(struct req *r)
{
    if (!forget_in_use(req_server(r), r->q))
        return false;
    req_error(r, WIRE_ESTATE,
              "connections of this daemon stream from the queue, wait on it or hold its leases");
    return true;
}

static void forget_cb(void *priv, const struct store_status *st)
{
    struct req *r = priv;
    if (st->code != 0) {
        req_store_error(r, st);
        return;
    }
    struct queue *q = r->q;
    struct engine *eng = &req_server(r)->eng;
    /* A request of another connection (other than a read) that named the
     * queue while the script ran is ordered after it, and made the queue
     * anew (an enqueue) or uses it: then the queue stays, registered and
     * in use.
     * Otherwise it leaves the registry, this daemon and its metrics. */
    if (q->nreq == r->n && !forget_in_use(req_server(r), q)) {
        store_queues_remove(eng->pool, &eng->registry, q->name, q->len);
        engine_retire(eng, q);
    }
    req_ok(r, NULL);
}

static void cmd_forget(struct req *r)
{
    if (forget_refused(r))
        return;
    r->n = r->q->nreq; /* forget, a CMD_READ, counts none itself */
    if (store_forget(queue_store(r->q), forget_cb, r) != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
}

/* --- clients ----------------------------------------------------------- */

/* A page of clients stops adding rows past this many bytes of rows (at
 * least one row), and a row lists at most this many streams and (with
 * id) held leases, so that one reply stays a modest line whatever the
 * number of connections, streams or leases. */
#define CLIENTS_PAGE_BYTES (256u << 10)
#define CLIENTS_ROW_MAX    1000

static const struct arg_spec clients_spec[] = {
    {"id", ARG_INT, 0, 1, ARG_INT_MAX},
    {"cursor", ARG_STRING, 0, 0, 32},
    {"count", ARG_INT, 0, 1, 1000},
    END,
};

static bool check_clients(struct req *r)
{
    if (json_object_get(r->root, "id") != NULL &&
        (json_object_get(r->root, "cursor") != NULL || json_object_get(r->root, "count") != NULL)) {
        req_error(r, WIRE_EARG, "argument \"id\" names one connection: no cursor or count");
        return false;
    }
    return cmd_check_cursor(r);
}

/* What c streams from, at most CLIENTS_ROW_MAX of them. group is always
 * null in protocol version 1 (a stream takes a whole queue's work of its
 * kind); flat says which kind. */
static json_t *client_streams(const struct client *c, size_t *parked)
{
    json_t *list = json_array();
    *parked = 0;
    for (const struct consumer *k = c->consumers; k != NULL; k = k->cnext) {
        if (!k->stream) {
            (*parked)++;
            continue;
        }
        /* credit 0 stopped it; it stays only while jobs it pushed are out */
        if ((k->credit > 0 || k->outstanding > 0) && json_array_size(list) < CLIENTS_ROW_MAX)
            json_array_append_new(list, json_pack("{s:s, s:n, s:b, s:I, s:I}", "queue",
                                                  k->w.q->name, "group", "flat", k->w.flat,
                                                  "credit", (json_int_t)k->credit, "outstanding",
                                                  (json_int_t)k->outstanding));
    }
    return list;
}

/* One connection as clients shows it (r: the request, to mark its own). */
static json_t *client_row(const struct req *r, const struct client *c)
{
    uint64_t now = uv_now(c->srv->loop);
    size_t parked;
    json_t *streams = client_streams(c, &parked);
    return json_pack("{s:I, s:s, s:o, s:I, s:I, s:b, s:b, s:o, s:I, s:I}", "id", (json_int_t)c->id,
                     "addr", c->addr, "name", c->named ? json_string(c->name) : json_null(),
                     "age_ms", (json_int_t)(now - c->opened), "idle_ms",
                     (json_int_t)(now - c->last_active), "self", c == r->c, "authed", c->authed,
                     "streams", streams, "parked", (json_int_t)parked, "leases",
                     (json_int_t)c->held.count);
}

static int lease_by_until(const void *a, const void *b)
{
    const struct lease *x = *(const struct lease *const *)a, *y = *(const struct lease *const *)b;
    return (x->until > y->until) - (x->until < y->until);
}

/* The leases c holds, soonest deadline first, at most CLIENTS_ROW_MAX;
 * never their tokens (they are the holder's alone). */
static json_t *client_held(const struct client *c)
{
    json_t *list = json_array();
    struct lease **v = malloc((c->held.count ? c->held.count : 1) * sizeof(*v));
    if (v == NULL) {
        json_decref(list);
        return NULL;
    }
    size_t n = 0, b;
    for (struct map_entry *e = map_first(&c->held, &b); e; e = map_next(&c->held, &b, e))
        v[n++] = e->value;
    qsort(v, n, sizeof(*v), lease_by_until);
    for (size_t i = 0; i < n && i < CLIENTS_ROW_MAX; i++) {
        const struct lease *l = v[i];
        json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:I}", "queue", l->q->name, "job",
                                              strchr(l->key, ' ') + 1, "group",
                                              l->group[0] ? json_string(l->group) : json_null(),
                                              "deadline_ms", (json_int_t)l->until));
    }
    free(v);
    return list;
}

/* The connections that count: not those on their way out. */
static bool client_listed(const struct client *c)
{
    return !c->closing;
}

static void clients_one(struct req *r, uint64_t id)
{
    for (struct client *c = req_server(r)->clients; c != NULL; c = c->next) {
        if (c->id != id || !client_listed(c))
            continue;
        json_t *row = client_row(r, c), *held = client_held(c);
        if (row == NULL || held == NULL) {
            json_decref(row);
            json_decref(held);
            req_error(r, WIRE_EINTERNAL, "out of memory");
            return;
        }
        json_object_set_new(row, "held", held);
        req_ok(r, json_pack("{s:o}", "client", row));
        return;
    }
    req_error(r, WIRE_ENOTFOUND, "no connection %llu on this daemon", (unsigned long long)id);
}

/* A page of connections, newest first (the server's list is kept so):
 * those with an id below cursor ("0": from the newest). */
static void cmd_clients(struct req *r)
{
    json_t *id = json_object_get(r->root, "id");
    if (id != NULL) {
        clients_one(r, (uint64_t)json_integer_value(id));
        return;
    }
    const char *cursor = request_string(r->root, "cursor", NULL);
    unsigned long long below = cursor != NULL ? strtoull(cursor, NULL, 10) : 0;
    size_t count = (size_t)request_int(r->root, "count", 100), bytes = 0;
    json_t *rows = json_array();
    uint64_t last = 0;
    bool more = false;
    for (struct client *c = req_server(r)->clients; c != NULL; c = c->next) {
        if (!client_listed(c) || (below != 0 && c->id >= below))
            continue;
        if (json_array_size(rows) >= count || bytes >= CLIENTS_PAGE_BYTES) {
            more = true;
            break;
        }
        json_t *row = client_row(r, c);
        if (row == NULL || json_array_append_new(rows, row) != 0) {
            json_decref(rows);
            req_error(r, WIRE_EINTERNAL, "out of memory");
            return;
        }
        bytes += json_dumpb(row, NULL, 0, JSON_COMPACT); /* its size in the reply */
        last = c->id;
    }
    char next[24];
    snprintf(next, sizeof(next), "%llu", more ? (unsigned long long)last : 0ULL);
    req_ok(r, json_pack("{s:o, s:s}", "clients", rows, "cursor", next));
}

/* The daemon-wide views. queues is a barrier: its stats calls are made
 * only once the registry's page is back, and a later request of the
 * connection must not overtake them. */
const struct cmd cmd_view[] = {
    {"queues", queues_spec, cmd_queues, CMD_READ | CMD_BARRIER | CMD_ADMIN, cmd_check_cursor},
    {"clients", clients_spec, cmd_clients, CMD_ADMIN, check_clients},
    /* CMD_READ: looking the queue up does not put it in use (which would
     * register it) before the forget has looked at it */
    {"forget", forget_spec, cmd_forget, CMD_QUEUE | CMD_READ | CMD_BARRIER | CMD_ADMIN},
    {NULL, NULL, NULL, 0},
};
