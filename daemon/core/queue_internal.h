/* queue_internal: what the core's files share about a queue and nothing
 * outside core/ needs. */
#ifndef EMQ_QUEUE_INTERNAL_H
#define EMQ_QUEUE_INTERNAL_H

#include <uv.h>

/* The upkeep timer's callback (upkeep.c), started by queue_start. */
void queue_upkeep_cb(uv_timer_t *t);

/* Bring the queue's store up to this code's format (lua/format.lua), one
 * bounded step, unless it is current or a step is out: the first call of
 * a queue (queue_start); while a step answers that there is more to walk,
 * the next step follows its answer; after an error, the next upkeep pass
 * sends it again. Once a step says the format is current, never again. */
void queue_format_step(struct queue *q);

#endif
