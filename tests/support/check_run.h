/* check_run: the invariant check run to its end from a blocking test: the
 * daemon's walk (daemon/store/check.h) with each of its steps of
 * lua/check.lua sent through lanes.h on the test's connection, so that
 * the lane tests check the store the way the check op does, and the
 * cluster tests run every step on the queue's slot owner. */
#ifndef EMQ_TEST_CHECK_RUN_H
#define EMQ_TEST_CHECK_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "keys.h"

/* What the check answered. */
struct check_result {
    char error[128]; /* "" or the error a step was answered */
    size_t n;
    char **v; /* the violations, n of them (owned) */
};

/* Check queue k on c in steps of budget items; asserts that every step
 * was answered. */
void check_run(redisContext *c, const struct keys *k, unsigned budget, struct check_result *out);

/* True when a violation contains needle. */
bool check_has(const struct check_result *res, const char *needle);

void check_result_free(struct check_result *res);

#endif
