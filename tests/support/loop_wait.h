/* loop_wait: run a test's own libuv loop until a condition holds, with
 * the hang guard of wait.h. Header-only (tests that drive the pool or
 * the store on a loop of their own). */
#ifndef EMQ_TEST_LOOP_WAIT_H
#define EMQ_TEST_LOOP_WAIT_H

#include <uv.h>

#include "wait.h"

static inline void loop_wait_tick_cb(uv_timer_t *t)
{
    (void)t;
}

/* Run loop until cond holds or the wait's deadline passes; tick (a timer
 * initialised on loop) ticks meanwhile to keep the loop awake. The caller
 * asserts cond. */
#define LOOP_RUN_UNTIL(loop, tick, cond)                                                           \
    do {                                                                                           \
        struct wait ru_;                                                                           \
        wait_begin(&ru_, 0);                                                                       \
        uv_timer_start((tick), loop_wait_tick_cb, 5, 5);                                           \
        while (!(cond) && !wait_expired(&ru_))                                                     \
            uv_run((loop), UV_RUN_ONCE);                                                           \
        uv_timer_stop(tick);                                                                       \
    } while (0)

#endif
