/* wait: the one way a test waits for something to happen. A test never
 * sleeps for "long enough" and then looks: it polls the observable it
 * needs (a reply, the daemon's counters, Redis's clock, a log line) with a
 * short backoff until it holds, and fails with a message naming what it
 * waited for if it still does not hold at a generous deadline. The
 * deadline is a hang guard, never a measure of speed: it is scaled for
 * slow runs (ASan, valgrind, a loaded machine), by EMQ_TEST_TIME_SCALE
 * when that is set. */
#ifndef EMQ_TEST_WAIT_H
#define EMQ_TEST_WAIT_H

#include <stdbool.h>

/* The deadline of one awaited event before scaling, in milliseconds. */
#define WAIT_BASE_MS 15000

/* Milliseconds on a monotonic clock. */
long long wait_now_ms(void);

/* Sleep ms milliseconds (the whole time, even across signals). For a test
 * whose point is that time passes, or as the pause between two polls;
 * never as a stand-in for an event. */
void wait_sleep_ms(long ms);

/* How much slower than a plain build on an idle machine this run may be:
 * EMQ_TEST_TIME_SCALE if set (a positive number), else 2 under ASan and
 * 10 under valgrind. */
double wait_scale(void);

/* base_ms (0: WAIT_BASE_MS) scaled by wait_scale(): the deadline to give
 * one awaited event, for calls that take a timeout (a read, a poll). */
int wait_deadline_ms(int base_ms);

/* One wait in progress. */
struct wait {
    long long start;
    long long deadline;
    long pause_ms;
};

/* Start a wait with the deadline wait_deadline_ms(base_ms). */
void wait_begin(struct wait *w, int base_ms);

/* The pause to spend before the next poll (1 ms, doubling up to 50 ms,
 * never past the deadline), or -1 once the deadline has passed. For
 * callers that spend the pause otherwise than sleeping (running a loop). */
long wait_pause(struct wait *w);

/* Sleep the next pause and return true, or return false (at once) once
 * the deadline has passed. */
bool wait_again(struct wait *w);

/* True once the deadline has passed. */
bool wait_expired(const struct wait *w);

/* Milliseconds since wait_begin. */
long long wait_elapsed_ms(const struct wait *w);

/* Fail the running test: the formatted text names what was awaited. */
void wait_failed(const struct wait *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True once cond holds, false if it still does not at the deadline
 * (wait_deadline_ms(base_ms)). cond is evaluated again after every pause,
 * so it may make calls (ask the daemon, read a file). */
#define wait_for_ms(base_ms, cond)                                                                 \
    ({                                                                                             \
        struct wait wf_;                                                                           \
        bool wf_ok_;                                                                               \
        wait_begin(&wf_, (base_ms));                                                               \
        while (!(wf_ok_ = (cond)) && wait_again(&wf_))                                             \
            ;                                                                                      \
        wf_ok_;                                                                                    \
    })
#define wait_for(cond) wait_for_ms(0, cond)

/* Wait until cond holds; at the deadline, fail the test with the message
 * (printf-style: what was awaited). */
#define await_ms(base_ms, cond, ...)                                                               \
    do {                                                                                           \
        struct wait aw_;                                                                           \
        wait_begin(&aw_, (base_ms));                                                               \
        while (!(cond)) {                                                                          \
            if (!wait_again(&aw_)) {                                                               \
                wait_failed(&aw_, __VA_ARGS__);                                                    \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)
#define await(cond, ...) await_ms(0, cond, __VA_ARGS__)

#endif
