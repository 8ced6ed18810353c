/* The upgrade of a store an older emqd wrote (lua/format.lua): such a
 * store has delayed grouped jobs in delayed but in no group's delayed
 * index, which check reports and the cap under-counts. Format steps walk
 * delayed in bounded steps, index what they meet and record where they
 * stopped in emq:{q}:format; the walk survives the jobs moving between
 * steps (promoted, removed, delayed anew: the member it stopped at gone).
 * A queue with nothing delayed is marked done by its first step. Every
 * test ends with the invariant check (invariant 8 both ways). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "lanes_fixture.h"

TestSuite(format, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

/* A delayed row as an emqd from before the delayed index wrote it
 * (admit_row then: the row, delayed, the group registry; no
 * g:<G>:delayed), due at due ms. group "" for a flat job. */
static void old_delayed(const char *job, const char *group, long long due)
{
    char row[128];
    snprintf(row, sizeof(row), "emq:{q}:job:%s", job);
    redisReply *r = redisCommand(fx_conn,
                                 "HSET %s state delayed group %s payload {} attempts 0 "
                                 "max_attempts 0 created_ms %lld",
                                 row, group, due - 60000);
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    cr_assert_eq(redis_int(fx_conn, "ZADD %s %lld %s", fx_q.names[KEY_DELAYED], due, job), 1);
    if (group[0] != '\0')
        redis_int(fx_conn, "SADD %s %s", fx_q.names[KEY_GROUPS], group);
}

/* One format step of at most max members: returns done, *indexed the
 * rows it indexed. */
static bool step(const char *max, long long *indexed)
{
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_FORMAT, max, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2, "format: %s",
              r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    bool done = r->element[0]->integer == 1;
    *indexed = r->element[1]->integer;
    freeReplyObject(r);
    return done;
}

/* The format marker's gdelayed field ("" when absent). */
static void marker(char *out, size_t cap)
{
    redisReply *r = redisCommand(fx_conn, "HGET emq:{q}:format gdelayed");
    cr_assert(r != NULL);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

static long long delayed_index(const char *g)
{
    return redis_int(fx_conn, "ZCARD emq:{q}:g:%s:delayed", g);
}

/* Whether g's delayed index holds job. */
static bool in_delayed_index(const char *g, const char *job)
{
    redisReply *r = redisCommand(fx_conn, "ZSCORE emq:{q}:g:%s:delayed %s", g, job);
    cr_assert(r != NULL && (r->type == REDIS_REPLY_NIL || r->type == REDIS_REPLY_STRING));
    bool in = r->type == REDIS_REPLY_STRING;
    freeReplyObject(r);
    return in;
}

/* Steps of max until one says done; returns how many steps it took (at
 * most limit) and adds what they indexed to *indexed. */
static int steps_to_done(const char *max, int limit, long long *indexed)
{
    for (int n = 1; n <= limit; n++) {
        long long k;
        bool done = step(max, &k);
        *indexed += k;
        if (done)
            return n;
    }
    cr_assert_fail("no step said done within %d steps", limit);
    return 0;
}

LANE_TEST(format, a_queue_with_nothing_delayed_is_marked_by_its_first_step)
{
    char m[64];
    long long k;
    cr_assert(step("500", &k), "nothing to walk: done at once");
    cr_assert_eq(k, 0);
    marker(m, sizeof(m));
    cr_assert_str_eq(m, "done");
    /* The code's own delayed jobs are indexed already; later steps are
     * answered from the marker alone. */
    cr_assert_eq(fx_enqueue_delayed("JOBn1", "TENa", 60000, 0), 1);
    cr_assert(step("500", &k));
    cr_assert_eq(k, 0);
    cr_assert_eq(delayed_index("TENa"), 1);
}

LANE_TEST(format, bad_step_sizes_are_refused_and_change_nothing)
{
    const char *bad[] = {"0", "-1", "1.5", "x"};
    char code[32], m[64];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fx_error(code, sizeof(code), SCRIPT_FORMAT, bad[i], NULL);
        cr_assert_str_eq(code, "EARG", "step size %s", bad[i]);
    }
    marker(m, sizeof(m));
    cr_assert_str_eq(m, "", "no marker written");
}

/* The old store check reports, and the cap under-counts, until the steps
 * are done: then each lane's delayed jobs count against its cap. */
LANE_TEST(format, an_old_store_is_indexed_in_steps_and_the_cap_counts_it)
{
    long long far = fx_now_ms() + 3600000;
    char job[32], group[16];
    /* 5 groups of 7 delayed jobs, many due at the same ms (ties are
     * walked in id order), and 4 flat ones, which have no index. */
    for (int g = 0; g < 5; g++)
        for (int i = 0; i < 7; i++) {
            snprintf(job, sizeof(job), "JOBo%d%d", g, i);
            snprintf(group, sizeof(group), "TENo%d", g);
            old_delayed(job, group, far + (i % 3));
        }
    for (int i = 0; i < 4; i++) {
        snprintf(job, sizeof(job), "JOBf%d", i);
        old_delayed(job, "", far);
    }
    struct check_result res;
    check_run(fx_conn, &fx_q, 100, &res);
    cr_assert(check_has(&res, "gdelayed: TENo3 does not hold JOBo35"), "the old store is reported");
    check_result_free(&res);
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENo0", "7", NULL), 1);
    cr_assert_eq(fx_enqueue("JOBx0", "TENo0", "{}"), 1, "the unindexed lane under-counts");

    long long indexed = 0;
    int n = steps_to_done("4", 20, &indexed);
    cr_assert_eq(indexed, 35, "every grouped delayed row, once");
    cr_assert_geq(n, 39 / 4, "steps of 4 over 39 members: %d", n);
    char m[64];
    marker(m, sizeof(m));
    cr_assert_str_eq(m, "done");
    for (int g = 0; g < 5; g++) {
        snprintf(group, sizeof(group), "TENo%d", g);
        cr_assert_eq(delayed_index(group), 7, "%s", group);
    }
    redisReply *r =
        lanes_call(fx_conn, &fx_q, SCRIPT_ENQUEUE, "JOBx1", "TENo0", "{}", "0", "0", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == -1,
              "7 delayed + 1 pending against a cap of 7: refused");
    freeReplyObject(r);
    /* Done is done: a step more walks nothing. */
    long long k;
    cr_assert(step("4", &k));
    cr_assert_eq(k, 0);
}

/* Between steps the member the walk stopped at is promoted, another is
 * removed, and new ones are delayed before and after the walk's place:
 * every old row still delayed ends indexed, the promoted one in its lane
 * and no index, and a walk resumed by another caller (a second daemon)
 * goes on from the marker. */
LANE_TEST(format, jobs_that_move_between_steps_end_where_they_should)
{
    long long now = fx_now_ms(), far = now + 3600000;
    char job[32];
    /* Twelve old rows of TENm due at one ms, in the past (promote takes
     * them when asked), and twelve due later. */
    for (int i = 0; i < 12; i++) {
        snprintf(job, sizeof(job), "JOBm%02d", i);
        old_delayed(job, "TENm", now - 1000);
        snprintf(job, sizeof(job), "JOBl%02d", i);
        old_delayed(job, i % 2 ? "TENl" : "TENk", far);
    }
    long long k, indexed = 0;
    cr_assert_not(step("5", &k));
    indexed += k;
    char m[64];
    marker(m, sizeof(m));
    cr_assert(strstr(m, ":JOBm04") != NULL, "stopped at the fifth member: %s", m);

    /* The member it stopped at, and the one after, leave delayed. */
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REMOVE, "JOBm05", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "5", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 5);
    freeReplyObject(r);
    char state[16];
    fx_row("JOBm04", "state", state, sizeof(state));
    cr_assert_str_eq(state, "pending", "promoted from under the walk's marker");
    /* New delayed jobs, before and after the walk's place: indexed by the
     * enqueue itself. */
    cr_assert_eq(fx_enqueue_delayed("JOBn1", "TENm", 1, 0), 1);
    cr_assert_eq(fx_enqueue_delayed("JOBn2", "TENm", 7200000, 0), 1);

    int n = steps_to_done("5", 20, &indexed);
    cr_assert_geq(n, 3);
    /* Of the 24 old rows, JOBm00..m04 were promoted (the first step had
     * indexed them; promote took them out again) and JOBm05 removed. */
    cr_assert_eq(indexed, 5 + 6 + 12, "every old row, indexed once: %lld", indexed);
    cr_assert_eq(delayed_index("TENm"), 6 + 2, "m06..m11 and the two new ones");
    cr_assert_eq(delayed_index("TENk"), 6);
    cr_assert_eq(delayed_index("TENl"), 6);
    cr_assert_not(in_delayed_index("TENm", "JOBm04"), "the promoted job is in no delayed index");
    cr_assert(in_delayed_index("TENm", "JOBm06"));
    cr_assert_eq(redis_int(fx_conn, "ZCARD emq:{q}:g:TENm:pending"), 5,
                 "JOBm00..04 wait in the lane");
}

/* A step that would stop in the middle of many jobs due at one ms, whose
 * member is then gone, resumes after it in id order without walking the
 * ties again from their start. */
LANE_TEST(format, a_resumed_walk_finds_its_place_among_ties)
{
    long long far = fx_now_ms() + 3600000;
    char job[32];
    for (int i = 0; i < 40; i++) {
        snprintf(job, sizeof(job), "JOBt%02d", i);
        old_delayed(job, "TENt", far);
    }
    long long k;
    cr_assert_not(step("17", &k));
    cr_assert_eq(k, 17);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REMOVE, "JOBt16", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    freeReplyObject(r);
    cr_assert_not(step("17", &k));
    cr_assert_eq(k, 17, "JOBt17..t33: the next 17, none walked twice");
    char m[64];
    marker(m, sizeof(m));
    cr_assert(strstr(m, ":JOBt33") != NULL, "%s", m);
    cr_assert(step("17", &k));
    cr_assert_eq(k, 6);
    cr_assert_eq(delayed_index("TENt"), 39);
}
