/* Queue-wide defaults (limit, weight and rate with group ""; lib.lua's d:
 * fields): they apply to every group without a setting of its own, the
 * group's own wins, and removing either falls back to the other. A default
 * ceiling re-places every lane at once (replace_all): raised, the lanes it
 * held come back; lowered, the active jobs finish and the lane gets no new
 * lease until it is under the ceiling. The reference model of
 * tests/lanes/test_weight.c mixes the defaults into its random moves. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "lanes_fixture.h"

TestSuite(defaults, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

static void enqueue_n(const char *group, int n)
{
    char job[72];
    for (int i = 0; i < n; i++) {
        snprintf(job, sizeof(job), "JOB%s-%03d", group, i);
        cr_assert_eq(fx_enqueue(job, group, "{}"), 1);
    }
}

/* The groups (without their "TEN") of one claim of up to n jobs. */
static size_t claim_groups(size_t n, char *out, size_t cap, struct leased *j)
{
    size_t got = fx_claim(n, 30000, j, NULL), used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < got && used < cap; i++)
        used += snprintf(out + used, cap - used, "%s%s", i ? "," : "", j[i].group + 3);
    return got;
}

LANE_TEST(defaults, a_default_ceiling_applies_where_the_group_has_none)
{
    enqueue_n("TENa", 4);
    enqueue_n("TENb", 4);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "1", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENb", "2", NULL), 1);
    struct leased j[16];
    char got[128], ring[64];
    cr_assert_eq(claim_groups(16, got, sizeof(got), j), 3);
    cr_assert_str_eq(got, "a,b,b", "a by the default (1), b by its own (2)");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "");
    fx_assert_invariants(&fx_q);

    /* Removing b's own ceiling: the default (1) applies, b has 2 active. */
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENb", "0", NULL), 1);
    cr_assert_eq(claim_groups(16, got, sizeof(got), j), 0);
    /* Raising the default puts both back at once, in name order. */
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "3", NULL), 1);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa,TENb");
    cr_assert_eq(claim_groups(16, got, sizeof(got), j), 3);
    cr_assert_str_eq(got, "a,b,a");
    fx_assert_invariants(&fx_q);

    /* Removing the default: no ceiling at all. */
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "0", NULL), 1);
    cr_assert_eq(claim_groups(16, got, sizeof(got), j), 2);
    cr_assert_str_eq(got, "a,b");
    fx_assert_invariants(&fx_q);
}

LANE_TEST(defaults, a_lowered_default_ceiling_lets_active_jobs_finish_and_leases_none)
{
    enqueue_n("TENa", 6);
    enqueue_n("TENb", 6);
    struct leased j[16];
    char got[128], ring[64], st[32];
    cr_assert_eq(claim_groups(6, got, sizeof(got), j), 6);
    cr_assert_str_eq(got, "a,b,a,b,a,b");
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "2", NULL), 1);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "3 active each, over the new default of 2");
    fx_assert_invariants(&fx_q);
    /* The leases already held finish as usual. */
    fx_complete(j[0].job, j[0].lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed");
    cr_assert_eq(claim_groups(16, got, sizeof(got), j + 8), 0, "a is at 2 of 2: no lease");
    fx_complete(j[2].job, j[2].lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa", "a under the ceiling again");
    cr_assert_eq(claim_groups(16, got, sizeof(got), j + 8), 1);
    cr_assert_str_eq(got, "a");
    fx_assert_invariants(&fx_q);
}

LANE_TEST(defaults, a_default_weight_serves_groups_without_their_own)
{
    enqueue_n("TENa", 10);
    enqueue_n("TENb", 10);
    enqueue_n("TENc", 10);
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, "", "3", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, "TENb", "1", NULL), 1);
    struct leased j[16];
    char got[128];
    cr_assert_eq(claim_groups(14, got, sizeof(got), j), 14);
    cr_assert_str_eq(got, "a,a,a,b,c,c,c,a,a,a,b,c,c,c");
    fx_assert_invariants(&fx_q);
    /* Removing the default: weight 1 for a and c, b's own 1. */
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, "", "0", NULL), 1);
    cr_assert_eq(claim_groups(3, got, sizeof(got), j), 3);
    cr_assert_str_eq(got, "a,b,c");
    fx_assert_invariants(&fx_q);
}

LANE_TEST(defaults, a_default_rate_holds_groups_without_their_own)
{
    enqueue_n("TENa", 3);
    enqueue_n("TENb", 3);
    enqueue_n("TENc", 3);
    cr_assert_eq(fx_int(SCRIPT_RATE, "", "1", "60000", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_RATE, "TENb", "1", "60000", NULL), 1);
    struct leased j[16];
    char got[128], ring[64];
    cr_assert_eq(claim_groups(16, got, sizeof(got), j), 3);
    cr_assert_str_eq(got, "a,b,c", "each held for a minute after one lease");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "");
    fx_assert_invariants(&fx_q);
    /* Removing the default releases a and c at once (their TATs go with
     * it); b is held by its own rate. */
    cr_assert_eq(fx_int(SCRIPT_RATE, "", "0", NULL), 1);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa,TENc");
    cr_assert_eq(claim_groups(16, got, sizeof(got), j), 4);
    cr_assert_str_eq(got, "a,c,a,c");
    fx_assert_invariants(&fx_q);
}

/* The groups page: each group's applying settings and their source. */
LANE_TEST(defaults, groups_shows_what_applies_and_where_it_comes_from)
{
    enqueue_n("TENa", 1);
    enqueue_n("TENb", 1);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "4", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENb", "2", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, "TENa", "5", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_RATE, "", "10", "1000", NULL), 1);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_GROUPS, "0", "100", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1 + 2 * 15);
    int seen = 0;
    for (size_t i = 1; i < r->elements; i += 15) {
        long long f[15];
        for (int k = 1; k < 15; k++)
            f[k] = r->element[i + k]->integer;
        /* limit, weight, rate max, rate per_ms; the three sources. */
        if (strcmp(r->element[i]->str, "TENa") == 0) {
            cr_assert(f[3] == 4 && f[9] == 2, "a's limit is the queue's 4");
            cr_assert(f[5] == 5 && f[10] == 1, "a's weight is its own 5");
            seen++;
        } else {
            cr_assert(f[3] == 2 && f[9] == 1, "b's limit is its own 2");
            cr_assert(f[5] == -1 && f[10] == 0, "b has no weight");
            seen++;
        }
        cr_assert(f[6] == 10 && f[7] == 1000 && f[11] == 2, "the queue's rate");
        cr_assert(f[12] == 0 && f[13] == -1 && f[14] == 0, "nothing delayed, no cap");
    }
    cr_assert_eq(seen, 2);
    freeReplyObject(r);
    fx_assert_invariants(&fx_q);
}

/* Bad defaults written behind the scripts' back are found. */
Test(defaults, the_check_finds_a_bad_default)
{
    enqueue_n("TENa", 1);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "2", NULL), 1);
    fx_assert_invariants(&fx_q);
    const char *bad[][3] = {{"d:limit", "0", "the default ceiling is \"0\""},
                            {"d:weight", "1001", "the default weight is \"1001\""},
                            {"d:rate", "x", "the default rate is \"x\""}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        redisReply *r =
            redisCommand(fx_conn, "HSET %s %s %s", fx_q.names[KEY_GLIMIT], bad[i][0], bad[i][1]);
        freeReplyObject(r);
        struct check_result res;
        check_run(fx_conn, &fx_q, 100, &res);
        cr_assert_str_eq(res.error, "");
        cr_assert(check_has(&res, bad[i][2]), "the check missed \"%s\"", bad[i][2]);
        check_result_free(&res);
        r = redisCommand(fx_conn, "HDEL %s %s", fx_q.names[KEY_GLIMIT], bad[i][0]);
        freeReplyObject(r);
    }
}
