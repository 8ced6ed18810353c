/* recipes: one recipe per lane script for the cluster tests. A recipe runs
 * its script on the queue under test (cluster_fixture.h) with arguments
 * that make it touch its per-job and per-lane keys, asserts the usual
 * answers, and leaves the queue empty (nothing pending, leased, delayed or
 * dead, the ring empty), so recipes run in any order. */
#ifndef EMQ_TEST_CLUSTER_RECIPES_H
#define EMQ_TEST_CLUSTER_RECIPES_H

#include "lua_scripts.h"

typedef void cluster_recipe(void);

/* Indexed by script id: a script without a recipe is a NULL hole, which
 * the test that runs them fails on. */
extern cluster_recipe *const cluster_recipes[SCRIPT__COUNT];

#endif
