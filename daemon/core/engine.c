/* engine: the queue registry of this daemon and the work every queue
 * shares (engine.h). */
#include "engine.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "queue.h"
#include "waiter.h"

void engine_init(struct engine *e, uv_loop_t *loop, const struct config *cfg)
{
    memset(e, 0, sizeof(*e));
    e->loop = loop;
    e->cfg = cfg;
    map_init(&e->queues);
    pool_route_init(&e->registry, STORE_QUEUES_KEY, sizeof(STORE_QUEUES_KEY) - 1);
}

void engine_attach_pool(struct engine *e, struct pool *p)
{
    e->pool = p;
}

int engine_use(struct engine *e, struct queue *q)
{
    if (q->used)
        return 0;
    if (e->nused >= ENGINE_QUEUES_MAX)
        return -ENOSPC;
    e->nused++;
    queue_start(q);
    store_queues_add(e->pool, &e->registry, q->name, q->len);
    return 0;
}

struct queue *engine_queue(struct engine *e, const char *name, size_t len, bool use)
{
    struct queue *q = map_get(&e->queues, name, len);
    if (q == NULL) {
        if (use && e->nused >= ENGINE_QUEUES_MAX)
            return NULL;
        if ((q = queue_new(e, name, len)) == NULL)
            return NULL;
        if (map_put(&e->queues, q->name, len, q) != 0) {
            free(q); /* not started: no handle to close yet */
            return NULL;
        }
    }
    if (use && engine_use(e, q) != 0)
        return NULL;
    if (!q->used && !q->listed) {
        q->listed = true;
        q->readonly_next = e->readonly;
        e->readonly = q;
    }
    return q;
}

void engine_retire(struct engine *e, struct queue *q)
{
    assert(q->leases == 0 && q->wait_head == NULL && !q->retired);
    map_del(&e->queues, q->name, q->len);
    if (q->used) {
        e->nused--;
        uv_timer_stop(&q->timer);
        q->used = false;
    }
    q->retired = true;
    if (!q->listed) {
        q->listed = true;
        q->readonly_next = e->readonly;
        e->readonly = q;
    }
}

/* Free the queues only reads have named, and the retired ones, once
 * nothing of theirs is out (their route has no call in flight: every
 * callback has run). A retired queue is no longer in the map: a queue
 * there under its name is a new one. */
static void sweep_readonly(struct engine *e)
{
    struct queue **p = &e->readonly;
    while (*p != NULL) {
        struct queue *q = *p;
        if (q->used) { /* put in use since: it stays */
            *p = q->readonly_next;
            q->listed = false;
        } else if (q->store.route.inflight == 0 && q->nbatch == 0 && q->wait_head == NULL &&
                   q->attached == 0) {
            *p = q->readonly_next;
            if (!q->retired)
                map_del(&e->queues, q->name, q->len);
            queue_free(q);
        } else {
            p = &q->readonly_next;
        }
    }
}

void engine_pump_all(struct engine *e)
{
    size_t b;
    for (struct map_entry *m = map_first(&e->queues, &b); m; m = map_next(&e->queues, &b, m)) {
        queue_pump(m->value, false);
        queue_pump(m->value, true);
    }
}

void engine_tick(struct engine *e)
{
    engine_flush(e);
    sweep_readonly(e);
}

void engine_stop(struct engine *e)
{
    size_t b;
    e->stopping = true;
    for (struct map_entry *m = map_first(&e->queues, &b); m; m = map_next(&e->queues, &b, m))
        if (((struct queue *)m->value)->used)
            uv_timer_stop(&((struct queue *)m->value)->timer);
}

void engine_deinit(struct engine *e)
{
    size_t b;
    for (struct map_entry *m = map_first(&e->queues, &b); m; m = map_next(&e->queues, &b, m))
        queue_free(m->value);
    map_deinit(&e->queues);
    /* The retired queues not freed yet are in the map no more. */
    for (struct queue *q = e->readonly, *next; q != NULL; q = next) {
        next = q->readonly_next;
        if (q->retired)
            queue_free(q);
    }
    e->readonly = NULL;
}
