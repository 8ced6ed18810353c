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

/* Most queues in use one daemon keeps (each has a timer and a
 * subscription). Queues known only to reads are not counted: they live
 * only while their reads are in flight. */
#define ENGINE_QUEUES_MAX 4096

struct engine {
    uv_loop_t *loop;
    const struct config *cfg; /* upkeep_ms, retention_ms; may change on reload */
    struct pool *pool;
    bool stopping;         /* no more work is handed out */
    struct map queues;     /* name -> struct queue *, owned */
    size_t nused;          /* of them, those in use (queue.used) */
    struct queue *batched; /* queues with completions to send this turn */
    /* The bytes the enqueues gathered this turn hold (queue_enqueue's
     * copies), until sent: the budget counts them as it counts the
     * pool's bytes of a call in flight (server/budget.c). */
    size_t batched_bytes;
    struct queue *readonly; /* queues not in use, freed once their reads are done */
    /* The registry's ordered calls (admin.h): a queue put in use is added
     * before a later page or forget of it reads or removes it. */
    struct pool_route registry;
};

void engine_init(struct engine *e, uv_loop_t *loop, const struct config *cfg);
void engine_attach_pool(struct engine *e, struct pool *p);
/* The queue named name (len bytes, a valid queue name), made if new;
 * NULL past ENGINE_QUEUES_MAX or out of memory. use: the caller is about
 * to change or consume the queue, so it is put in use (engine_use). A
 * read alone does not: a queue that only reads have named is not
 * registered, reaped or subscribed to, is left out of metrics, and is
 * freed at the end of the loop turn in which its last call answered, so
 * that reads of names that do not exist leave nothing behind. */
struct queue *engine_queue(struct engine *e, const char *name, size_t len, bool use);
/* Put q in use: start its upkeep and wake subscription and add it to the
 * registry (emq:queues), once. 0, or -ENOSPC past ENGINE_QUEUES_MAX. */
int engine_use(struct engine *e, struct queue *q);
/* q was forgotten at the backend (its keys and registry entry are gone):
 * take it out of this daemon's queues and metrics, stop its upkeep, and
 * free it once nothing of it is out. A later request that names the
 * queue makes it anew. It must hold no lease and no waiter (a stopped
 * stream may still point at it: it is freed once that is gone too). */
void engine_retire(struct engine *e, struct queue *q);
/* Send the completions gathered this loop turn, one call per queue. */
void engine_flush(struct engine *e);
/* The end of a loop turn: engine_flush, then free the read-only queues
 * whose reads are all answered. */
void engine_tick(struct engine *e);
/* The backend is back: look for work for every parked consumer. */
void engine_pump_all(struct engine *e);
/* Stop handing out work and stop every queue's upkeep timer. */
void engine_stop(struct engine *e);
/* Free every queue (their handles close on the next loop turn). */
void engine_deinit(struct engine *e);

#endif
