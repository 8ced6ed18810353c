/* queue_internal: what the core's files share about a queue and nothing
 * outside core/ needs. */
#ifndef EMQ_QUEUE_INTERNAL_H
#define EMQ_QUEUE_INTERNAL_H

#include <uv.h>

/* The upkeep timer's callback (upkeep.c), started by queue_start. */
void queue_upkeep_cb(uv_timer_t *t);

#endif
