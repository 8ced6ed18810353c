/* spin: after the loop has had work, keep polling for more for a short
 * while (spin-us) before it sleeps.
 *
 * At light load a job wakes emqd twice (the request, then Redis's reply)
 * and every wake-up of a sleeping process costs tens of microseconds on a
 * virtual machine, where a halted vCPU must be woken by the host: four
 * process wake-ups put enqueue -> push at ~0.23 ms p50 where Redis's own
 * work is ~0.02 ms. A loop that polls for a little after each piece of work
 * finds the reply it is waiting for (a Redis round trip at light load is
 * well under 100 us) without going to sleep, and keeps its vCPU awake for
 * the processes it wakes. This is what a guest kernel's haltpoll idle
 * driver does for the whole machine (200 us by default); emqd does it only
 * while it has had work in the last spin-us, so an idle daemon uses no CPU.
 *
 * While spinning the loop does not block in epoll (a libuv idle handle
 * makes its poll timeout 0) and yields the CPU on every turn, so that a
 * process the kernel wakes onto this CPU (the worker a push was written
 * to: wake-affine scheduling) runs at once instead of after emqd's
 * timeslice. Measured in tests/bench/RESULTS.md, "Spinning before sleep".
 *
 * One loop per process (emqd's): the state is the module's own. Every
 * function runs on the loop's thread. */
#ifndef EMQ_SPIN_H
#define EMQ_SPIN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct spin_stats {
    uint64_t spins; /* spells of polling started (each after a sleep) */
    uint64_t ns;    /* time spent in them, ended ones and the current one */
};

/* Set up on loop, polling for budget_us after the last work (0 = never
 * poll: the loop sleeps as soon as it has nothing to do). The handle is
 * unreferenced: a spin never keeps the loop alive. */
void spin_init(uv_loop_t *loop, uint64_t budget_us);

/* A new budget (a reload); 0 ends a spell at the loop's next turn. */
void spin_set_budget(uint64_t budget_us);

/* The loop has just had work (bytes read from a client or from Redis,
 * commands written to Redis): poll for at least the budget from now. */
void spin_touch(void);

/* Whether a spell is on now. */
bool spin_active(void);

void spin_get_stats(struct spin_stats *out);

/* Close the handle (after the loop has stopped, before uv_loop_close). */
void spin_close(void);

#endif
