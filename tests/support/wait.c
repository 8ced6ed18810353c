/* wait: polling with a backoff up to a generous, scaled deadline (see
 * wait.h). */
#include "wait.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>

#define PAUSE_MAX_MS 50

long long wait_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void wait_sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Valgrind runs the program with its preload libraries in LD_PRELOAD. */
static bool under_valgrind(void)
{
    const char *p = getenv("LD_PRELOAD");
    return p != NULL && (strstr(p, "vgpreload") != NULL || strstr(p, "valgrind") != NULL);
}

double wait_scale(void)
{
    const char *env = getenv("EMQ_TEST_TIME_SCALE");
    if (env != NULL) {
        double s = strtod(env, NULL);
        if (s > 0)
            return s;
    }
    double s = 1;
#if defined(__SANITIZE_ADDRESS__)
    s = 2;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    s = 2;
#endif
#endif
    if (under_valgrind())
        s = 10;
    return s;
}

int wait_deadline_ms(int base_ms)
{
    return (int)((base_ms > 0 ? base_ms : WAIT_BASE_MS) * wait_scale());
}

void wait_begin(struct wait *w, int base_ms)
{
    w->start = wait_now_ms();
    w->deadline = w->start + wait_deadline_ms(base_ms);
    w->pause_ms = 1;
}

long wait_pause(struct wait *w)
{
    long long left = w->deadline - wait_now_ms();
    if (left <= 0)
        return -1;
    long pause = w->pause_ms < left ? w->pause_ms : (long)left;
    w->pause_ms = w->pause_ms * 2 > PAUSE_MAX_MS ? PAUSE_MAX_MS : w->pause_ms * 2;
    return pause;
}

bool wait_again(struct wait *w)
{
    long pause = wait_pause(w);
    if (pause < 0)
        return false;
    wait_sleep_ms(pause);
    return true;
}

bool wait_expired(const struct wait *w)
{
    return wait_now_ms() >= w->deadline;
}

long long wait_elapsed_ms(const struct wait *w)
{
    return wait_now_ms() - w->start;
}

void wait_failed(const struct wait *w, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    cr_assert_fail("gave up after %lld ms waiting for: %s", wait_elapsed_ms(w), what);
}
