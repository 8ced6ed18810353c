/* The re-place walk (lib.lua: replace_begin, replace_step; lua/replace.lua):
 * a queue default ceiling or rate re-places every lane in bounded steps,
 * and the scripts that run between the steps stay right. These tests run
 * the walk in small steps (the default call's last ARGV, and replace's
 * budget) and, between steps, claim, complete and enqueue, asserting that
 * no group is ever leased over the ceiling or the rate in force, that no
 * lane is on the ring twice, and that once the walk is over the ring is
 * what the ring rule says (the invariant check, which every lane test
 * runs at its end). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "lanes_fixture.h"

TestSuite(replace, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

#define GROUPS 24

static void group_name(int i, char *out, size_t cap)
{
    snprintf(out, cap, "TENg%02d", i);
}

static void fill(int jobs_each)
{
    char g[16], job[48];
    for (int i = 0; i < GROUPS; i++) {
        group_name(i, g, sizeof(g));
        for (int k = 0; k < jobs_each; k++) {
            snprintf(job, sizeof(job), "JOB%s-%02d", g, k);
            cr_assert_eq(fx_enqueue(job, g, "{}"), 1);
        }
    }
}

static long long zcard(const char *key_fmt, const char *g)
{
    redisReply *r = redisCommand(fx_conn, key_fmt, fx_q.prefix, g);
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

static long long active_of(const char *g)
{
    return zcard("ZCARD %sg:%s:active", g);
}

/* The walk in progress (glimit's replacing field), "" when none. */
static void walk(char *out, size_t cap)
{
    redisReply *r = redisCommand(fx_conn, "HGET %s replacing", fx_q.names[KEY_GLIMIT]);
    cr_assert_not_null(r);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

/* No lane is on the live ring twice. */
static void assert_ring_unique(const char *when)
{
    redisReply *r = redisCommand(fx_conn, "LRANGE %s 0 -1", fx_q.names[KEY_RING]);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    for (size_t i = 0; i < r->elements; i++)
        for (size_t k = i + 1; k < r->elements; k++)
            cr_assert_str_neq(r->element[i]->str, r->element[k]->str, "%s: %s is on the ring twice",
                              when, r->element[i]->str);
    freeReplyObject(r);
}

/* One replace step of budget; 1 when the walk is over. */
static long long step(const char *budget)
{
    return fx_int(SCRIPT_REPLACE, budget, NULL);
}

/* Lease what a claim of n gives, complete every other one, and return how
 * many it leased; *per counts each group's leases. */
static size_t churn(size_t n, int *per)
{
    struct leased j[64];
    size_t got = fx_claim(n, 30000, j, NULL);
    for (size_t i = 0; i < got; i++) {
        int k = atoi(j[i].group + 4);
        cr_assert(k >= 0 && k < GROUPS);
        per[k]++;
        if (i % 2 == 0) {
            char st[32];
            fx_complete(j[i].job, j[i].lease, st, sizeof(st));
            cr_assert_str_eq(st, "completed");
        }
    }
    return got;
}

LANE_TEST(replace, a_lowered_default_ceiling_in_steps_never_leases_a_group_over_it)
{
    fill(6);
    struct leased j[GROUPS * 2];
    cr_assert_eq(fx_claim(GROUPS * 2, 30000, j, NULL), GROUPS * 2, "two leases of each group");
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "1", "3", NULL), 2, "a walk of several steps begun");
    char w[64];
    walk(w, sizeof(w));
    cr_assert_str_eq(w, "l:1:1:R:0", "the ring set aside as old ring 1");
    int per[GROUPS] = {0};
    int steps = 0;
    do {
        /* Between steps: each group has 2 in flight, over the new ceiling
         * of 1: nothing may be leased until two of its jobs finish. */
        churn(8, per);
        for (int i = 0; i < GROUPS; i++) {
            char g[16];
            group_name(i, g, sizeof(g));
            cr_assert_leq(active_of(g), 2, "%s over what it had", g);
            cr_assert_eq(per[i], 0, "%s was leased over the lowered ceiling", g);
        }
        assert_ring_unique("mid-walk");
        steps++;
    } while (step("3") == 0);
    cr_assert_gt(steps, 10, "the walk took %d steps", steps);
    walk(w, sizeof(w));
    cr_assert_str_eq(w, "", "over");
    /* Finish the leases: every group drops to 0 and is served again, one at a time. */
    for (int i = 0; i < GROUPS * 2; i++) {
        char st[32];
        fx_complete(j[i].job, j[i].lease, st, sizeof(st));
    }
    struct leased k[GROUPS * 2];
    cr_assert_eq(fx_claim(GROUPS * 2, 30000, k, NULL), GROUPS, "one each, the ceiling's");
}

LANE_TEST(replace, a_raised_default_ceiling_in_steps_brings_every_held_lane_back_once)
{
    fill(5);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "1", NULL), 1, "one step is enough for 24 groups");
    struct leased j[GROUPS * 2];
    cr_assert_eq(fx_claim(GROUPS * 2, 30000, j, NULL), GROUPS, "one each, then all held");
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "every lane at its ceiling");
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "3", "2", NULL), 2);
    int per[GROUPS] = {0};
    do {
        /* A lane placed by a step serves under the raised ceiling; one not
         * yet reached waits: no group goes over 3, and a complete of a
         * held lane puts it on the ring once, not again when the walk
         * comes to it. */
        churn(6, per);
        for (int i = 0; i < GROUPS; i++) {
            char g[16];
            group_name(i, g, sizeof(g));
            cr_assert_leq(active_of(g), 3, "%s over the ceiling", g);
        }
        assert_ring_unique("mid-walk");
    } while (step("2") == 0);
    assert_ring_unique("after the walk");
    fx_assert_invariants(&fx_q);
    struct leased k[GROUPS * 3];
    size_t got = fx_claim(GROUPS * 3, 30000, k, NULL);
    cr_assert_gt(got, 0, "the lanes are back");
    for (int i = 0; i < GROUPS; i++) {
        char g[16];
        group_name(i, g, sizeof(g));
        cr_assert_leq(active_of(g), 3, "%s", g);
    }
}

LANE_TEST(replace, a_default_rate_in_steps_never_leases_a_group_over_it)
{
    fill(6);
    struct leased j[GROUPS];
    cr_assert_eq(fx_claim(GROUPS, 30000, j, NULL), GROUPS, "one lease of each group first");
    /* Two per minute: each group has one lease in the window when the
     * rate comes, so it may have one more, and no other. The window only
     * counts leases made under a rate, so the first does not count: up to
     * two more per group. */
    cr_assert_eq(fx_int(SCRIPT_RATE, "", "2", "60000", "3", NULL), 2);
    int per[GROUPS] = {0};
    do {
        churn(10, per);
        for (int i = 0; i < GROUPS; i++)
            cr_assert_leq(per[i], 2, "TENg%02d leased %d times under a rate of 2", i, per[i]);
        assert_ring_unique("mid-walk");
    } while (step("3") == 0);
    for (int round = 0; round < 10; round++)
        churn(20, per);
    for (int i = 0; i < GROUPS; i++)
        cr_assert_eq(per[i], 2, "TENg%02d: its rate's two, after the walk too", i);
}

/* A default changed again while a walk is under way: the live ring is set
 * aside as one more old ring and the walk, now for both kinds, starts its
 * registry pass again; the end is the same as one change after another. */
LANE_TEST(replace, a_second_default_during_a_walk_sets_the_ring_aside_again)
{
    fill(3);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "2", "5", NULL), 2);
    cr_assert_eq(step("5"), 0);
    char w[64];
    cr_assert_eq(fx_int(SCRIPT_RATE, "", "1", "60000", "4", NULL), 2);
    walk(w, sizeof(w));
    cr_assert_str_eq(w, "lr:1:2:R:0", "two old rings, both kinds");
    int per[GROUPS] = {0};
    do {
        churn(10, per);
        assert_ring_unique("mid-walk");
        for (int i = 0; i < GROUPS; i++)
            cr_assert_leq(per[i], 1, "TENg%02d over its rate", i);
    } while (step("4") == 0);
    for (int round = 0; round < 5; round++)
        churn(30, per);
    for (int i = 0; i < GROUPS; i++)
        cr_assert_eq(per[i], 1, "TENg%02d: one lease a minute", i);
}

/* The daemon that began a walk may die before its steps run: every
 * daemon's upkeep (promote) runs steps too, and stats counts the lanes in
 * the old rings as on the ring meanwhile. */
LANE_TEST(replace, promote_finishes_a_walk_and_stats_counts_its_old_rings)
{
    fill(2);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "5", "1", NULL), 2);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_STATS, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 4);
    cr_assert_eq(r->element[4]->integer, GROUPS, "ring: live and old");
    freeReplyObject(r);
    struct check_result res;
    check_run(fx_conn, &fx_q, 100, &res);
    cr_assert_eq(res.n, 0, "mid-walk, the check reports nothing (%zu)", res.n);
    check_result_free(&res);
    char w[64];
    for (int i = 0; i < 100; i++) {
        r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "1000", NULL);
        cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
        long long next = r->element[1]->integer;
        freeReplyObject(r);
        walk(w, sizeof(w));
        if (w[0] == '\0')
            break;
        cr_assert_eq(next, 0, "a walk left: the upkeep comes straight back");
    }
    walk(w, sizeof(w));
    cr_assert_str_eq(w, "", "promote ended the walk");
    char ring[512];
    fx_ring(ring, sizeof(ring));
    cr_assert_eq(strlen(ring), (size_t)(GROUPS * 7 - 1), "every lane on the ring once: %s", ring);
    assert_ring_unique("after the walk");
}

LANE_TEST(replace, replace_refuses_a_bad_budget_and_without_a_walk_does_nothing)
{
    fill(1);
    char code[32];
    fx_error(code, sizeof(code), SCRIPT_REPLACE, "0", NULL);
    cr_assert_str_eq(code, "EARG");
    cr_assert_eq(step("10"), 1, "no walk: done at once");
    char ring[512];
    fx_ring(ring, sizeof(ring));
    cr_assert_eq(strlen(ring), (size_t)(GROUPS * 7 - 1), "the ring untouched");
}

/* While a walk for a lowered default rate is under way, a lane that a hot
 * path places (an enqueue into its empty lane) is judged by its window
 * under the new rate, not by a due time the old rate left: it is held. */
LANE_TEST(replace, a_lane_placed_during_a_rate_walk_is_judged_by_the_new_rate)
{
    fill(1);
    cr_assert_eq(fx_enqueue("JOBa-1", "TENa", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBa-2", "TENa", "{}"), 1);
    cr_assert_eq(fx_int(SCRIPT_RATE, "", "5", "60000", NULL), 1);
    struct leased j[GROUPS + 2];
    cr_assert_eq(fx_claim(GROUPS + 2, 30000, j, NULL), GROUPS + 2, "TENa's two, and one each");
    /* Lowered to two a minute: TENa has two leases in its window already. */
    cr_assert_eq(fx_int(SCRIPT_RATE, "", "2", "60000", "1", NULL), 2);
    cr_assert_eq(fx_enqueue("JOBa-3", "TENa", "{}"), 1);
    cr_assert_eq(fx_claim(GROUPS + 2, 30000, j, NULL), 0, "nothing else to serve but TENa");
    while (step("1") == 0) {
    }
    cr_assert_eq(fx_claim(GROUPS + 2, 30000, j, NULL), 0, "TENa is held after the walk too");
    redisReply *r = redisCommand(fx_conn, "ZSCORE %sthrottled TENa", fx_q.prefix);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING, "waiting in the throttled index");
    freeReplyObject(r);
}
