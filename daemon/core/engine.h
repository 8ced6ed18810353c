/* engine: the queues of this daemon and what they share. It finds or
 * makes a queue by name, sends each loop turn's coalesced completions,
 * pumps every queue when the backend comes back, and stops the upkeep
 * when the daemon stops. Nothing here knows of a connection. */
#ifndef EMQ_ENGINE_H
#define EMQ_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "config.h"
#include "map.h"
#include "pool.h"

struct queue;

/* Most queues one daemon keeps (each has a timer and a subscription). */
#define ENGINE_QUEUES_MAX 4096

struct engine {
    uv_loop_t *loop;
    const struct config *cfg; /* upkeep_ms, retention_ms; may change on reload */
    struct pool *pool;
    bool stopping;         /* no more work is handed out */
    struct map queues;     /* name -> struct queue *, owned */
    struct queue *batched; /* queues with completions to send this turn */
};

void engine_init(struct engine *e, uv_loop_t *loop, const struct config *cfg);
void engine_attach_pool(struct engine *e, struct pool *p);
/* The queue named name (len bytes, a valid queue name), made (its upkeep
 * started, its name added to the registry) if new; NULL past
 * ENGINE_QUEUES_MAX or out of memory. */
struct queue *engine_queue(struct engine *e, const char *name, size_t len);
/* Send the completions gathered this loop turn, one call per queue. */
void engine_flush(struct engine *e);
/* The backend is back: look for work for every parked consumer. */
void engine_pump_all(struct engine *e);
/* Stop handing out work and stop every queue's upkeep timer. */
void engine_stop(struct engine *e);
/* Free every queue (their handles close on the next loop turn). */
void engine_deinit(struct engine *e);

#endif
