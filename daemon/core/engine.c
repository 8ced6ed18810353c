/* engine: the queue registry of this daemon and the work every queue
 * shares (engine.h). */
#include "engine.h"

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
}

void engine_attach_pool(struct engine *e, struct pool *p)
{
    e->pool = p;
}

struct queue *engine_queue(struct engine *e, const char *name, size_t len)
{
    struct queue *q = map_get(&e->queues, name, len);
    if (q != NULL)
        return q;
    if (e->queues.count >= ENGINE_QUEUES_MAX)
        return NULL;
    q = queue_new(e, name, len);
    if (q == NULL)
        return NULL;
    if (map_put(&e->queues, q->name, len, q) != 0) {
        free(q); /* not started: no handle to close yet */
        return NULL;
    }
    queue_start(q);
    store_queues_add(e->pool, q->name, len);
    return q;
}

void engine_pump_all(struct engine *e)
{
    size_t b;
    for (struct map_entry *m = map_first(&e->queues, &b); m; m = map_next(&e->queues, &b, m)) {
        queue_pump(m->value, false);
        queue_pump(m->value, true);
    }
}

void engine_stop(struct engine *e)
{
    size_t b;
    e->stopping = true;
    for (struct map_entry *m = map_first(&e->queues, &b); m; m = map_next(&e->queues, &b, m))
        uv_timer_stop(&((struct queue *)m->value)->timer);
}

void engine_deinit(struct engine *e)
{
    size_t b;
    for (struct map_entry *m = map_first(&e->queues, &b); m; m = map_next(&e->queues, &b, m))
        queue_free(m->value);
    map_deinit(&e->queues);
}
