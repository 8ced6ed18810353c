/* cmd_throughput: what the daemon itself saw, for the dashboard and for
 * operators: throughput (the jobs each queue saw move, and how many per ten
 * seconds over the last five minutes). Answered from memory: no backend
 * call, so polling it costs Redis nothing. */
#include <string.h>

#include "cmd.h"
#include "engine.h"
#include "queue.h"
#include "req.h"
#include "server.h"

/* The four counters a history sample holds, in its order. */
static void counters(const struct queue *q, uint64_t v[4])
{
    v[0] = q->count.enqueued;
    v[1] = q->count.completed;
    v[2] = q->count.failed;
    v[3] = q->count.dead;
}

void cmd_throughput_sample(struct server *s)
{
    size_t b;
    for (struct map_entry *e = map_first(&s->eng.queues, &b); e != NULL;
         e = map_next(&s->eng.queues, &b, e)) {
        struct queue *q = e->value;
        struct queue_history *h = &q->history;
        if (!q->used)
            continue;
        counters(q, h->v[h->next]);
        h->next = (h->next + 1) % QUEUE_HISTORY_SLOTS;
        if (h->n < QUEUE_HISTORY_SLOTS)
            h->n++;
    }
}

/* One queue's entry of the throughput reply. */
static json_t *throughput_of(const struct queue *q)
{
    static const char *const names[] = {"enqueued", "completed", "failed", "dead"};
    const struct queue_history *h = &q->history;
    uint64_t now[4];
    json_t *o = json_object(), *hist = json_object();
    if (o == NULL || hist == NULL) {
        json_decref(o);
        json_decref(hist);
        return NULL;
    }
    counters(q, now);
    json_object_set_new(o, "queue", json_stringn(q->name, q->len));
    for (size_t k = 0; k < 4; k++) {
        json_t *a = json_array();
        /* Oldest first: the differences between consecutive samples. */
        for (unsigned i = 1; a != NULL && i < h->n; i++) {
            unsigned cur = (h->next + QUEUE_HISTORY_SLOTS - h->n + i) % QUEUE_HISTORY_SLOTS;
            unsigned prev = (cur + QUEUE_HISTORY_SLOTS - 1) % QUEUE_HISTORY_SLOTS;
            json_array_append_new(a, json_integer((json_int_t)(h->v[cur][k] - h->v[prev][k])));
        }
        json_object_set_new(o, names[k], json_integer((json_int_t)now[k]));
        json_object_set_new(hist, names[k], a != NULL ? a : json_array());
    }
    json_object_set_new(o, "history", hist);
    return o;
}

static void run_throughput(struct req *r)
{
    struct server *s = req_server(r);
    size_t qlen = 0;
    const char *qname = request_string(r->root, "queue", &qlen);
    json_t *list = json_array();
    if (list == NULL) {
        req_error(r, WIRE_EINTERNAL, "out of memory");
        return;
    }
    if (qname != NULL) {
        struct queue *q = map_get(&s->eng.queues, qname, qlen);
        if (q != NULL && q->used)
            json_array_append_new(list, throughput_of(q));
    } else {
        size_t b;
        for (struct map_entry *e = map_first(&s->eng.queues, &b); e != NULL;
             e = map_next(&s->eng.queues, &b, e))
            if (((struct queue *)e->value)->used)
                json_array_append_new(list, throughput_of(e->value));
    }
    req_ok(r, json_pack("{s:I, s:o}", "interval_ms", (json_int_t)QUEUE_HISTORY_MS, "queues", list));
}

static const struct arg_spec throughput_spec[] = {
    {"queue", ARG_STRING, ARG_QUEUE, 0, 0},
    END,
};

/* What the daemon saw: read-only, answered from memory. */
const struct cmd cmd_throughput[] = {
    {"throughput", throughput_spec, run_throughput, CMD_ADMIN},
    {NULL, NULL, NULL, 0},
};
