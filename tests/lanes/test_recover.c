/* Recovery of leases whose reply was lost (lua/recover.lua): a leasing
 * call (claim, claim_flat, a hand-off) tags its rows with the caller's
 * tag; recover gives back, attempt returned, exactly the active rows of
 * the tags it is given, page by page, and nothing leased since. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes_fixture.h"

TestSuite(recover, .init = fx_setup, .fini = fx_teardown, .timeout = 60);

/* claim (flat or not) n jobs on a 60 s lease with tag; returns how many. */
static size_t claim_tagged(bool flat, int n, const char *tag)
{
    char ns[16];
    snprintf(ns, sizeof(ns), "%d", n);
    redisReply *r = lanes_call(fx_conn, &fx_q, flat ? SCRIPT_CLAIM_FLAT : SCRIPT_CLAIM, ns, "60000",
                               "0", "0", tag, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY, "claim failed: %s",
              r && r->str ? r->str : "?");
    size_t got = (r->elements - 1) / 5;
    freeReplyObject(r);
    return got;
}

/* Run recover for the tags (NULL-terminated) until its cursor is back at
 * 0; returns the leases given back and the calls it took in *calls. */
static long long recover_all(int count, int *calls, const char *const *tags)
{
    char cursor[32] = "0", cs[16];
    long long given = 0;
    const char *args[64];
    int n = 0;
    snprintf(cs, sizeof(cs), "%d", count);
    args[n++] = cursor;
    args[n++] = cs;
    for (int i = 0; tags[i] != NULL; i++)
        args[n++] = tags[i];
    *calls = 0;
    do {
        redisReply *r = lanes_callv(fx_conn, &fx_q, SCRIPT_RECOVER, n, args);
        cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2,
                  "recover failed: %s", r && r->str ? r->str : "?");
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        given += r->element[1]->integer;
        freeReplyObject(r);
        (*calls)++;
        cr_assert_lt(*calls, 10000, "the scan never ends");
    } while (strcmp(cursor, "0") != 0);
    return given;
}

static void expect_row(const char *job, const char *state, const char *attempts)
{
    char v[64];
    fx_row(job, "state", v, sizeof(v));
    cr_assert_str_eq(v, state, "%s is %s, want %s", job, v, state);
    fx_row(job, "attempts", v, sizeof(v));
    cr_assert_str_eq(v, attempts, "%s has %s attempts, want %s", job, v, attempts);
}

LANE_TEST(recover, gives_back_exactly_the_lost_calls_leases_with_their_attempt)
{
    /* Two lanes, one with a ceiling of 1 (its permit must come back), and
     * flat jobs; JOB5 is allowed one attempt only. */
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENb", "1", NULL), 1);
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOB2", "TENa", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOB3", "TENb", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOB4", "TENb", "{}"), 1);
    cr_assert_eq(fx_enqueue_delayed("JOB5", NULL, 0, 1), 1);
    cr_assert_eq(fx_enqueue("JOB6", NULL, "{}"), 1);

    /* The lost call leases JOB1 and JOB3 (TENb is then at its ceiling)
     * and the flat JOB5; a call that answered leases JOB2 and JOB6. */
    cr_assert_eq(claim_tagged(false, 2, "00000000000000aa"), 2);
    cr_assert_eq(claim_tagged(true, 1, "00000000000000aa"), 1);
    cr_assert_eq(claim_tagged(false, 1, "00000000000000bb"), 1);
    cr_assert_eq(claim_tagged(true, 1, "00000000000000bb"), 1);
    expect_row("JOB5", "active", "1");
    char ring[128];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "TENa is empty and TENb at its ceiling");

    int calls;
    const char *tags[] = {"00000000000000aa", NULL};
    cr_assert_eq(recover_all(256, &calls, tags), 3);
    expect_row("JOB1", "pending", "0");
    expect_row("JOB3", "pending", "0");
    expect_row("JOB5", "pending", "0"); /* not dead: it was never delivered */
    expect_row("JOB2", "active", "1");
    expect_row("JOB6", "active", "1");
    fx_ring(ring, sizeof(ring));
    cr_assert(strstr(ring, "TENa") != NULL && strstr(ring, "TENb") != NULL,
              "both lanes serviceable again, ring %s", ring);

    /* Recovering again finds nothing: it is idempotent. */
    cr_assert_eq(recover_all(256, &calls, tags), 0);

    /* They are served again, as first attempts (JOB4 waits: TENb is at
     * its ceiling with JOB3). */
    struct leased j[4];
    cr_assert_eq(fx_claim(4, 30000, j, NULL), 2);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(j[i].attempt, 1, "%s served as attempt %lld", j[i].job, j[i].attempt);
    cr_assert_eq(fx_claim_flat(1, 30000, j), 1);
    cr_assert_str_eq(j[0].job, "JOB5");
    cr_assert_eq(j[0].attempt, 1);
}

LANE_TEST(recover, leaves_a_job_leased_again_since_by_another_call)
{
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{}"), 1);
    redisReply *r =
        lanes_call(fx_conn, &fx_q, SCRIPT_CLAIM, "1", "1", "0", "0", "00000000000000aa", NULL);
    long long deadline = r->element[0]->integer;
    freeReplyObject(r);
    fx_await_past(deadline);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_REAP, "100", NULL);
    cr_assert_eq(r->element[0]->integer, 1);
    freeReplyObject(r);
    cr_assert_eq(claim_tagged(false, 1, "00000000000000bb"), 1);
    int calls;
    const char *tags[] = {"00000000000000aa", NULL};
    cr_assert_eq(recover_all(256, &calls, tags), 0, "the second lease is not the lost call's");
    expect_row("JOB1", "active", "2");
}

LANE_TEST(recover, a_handed_off_job_is_given_back_too)
{
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_ENQUEUE, "JOB1", "TENa", "{}", "0", "1",
                               "60000", "00000000000000cc", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY, "no hand-off");
    freeReplyObject(r);
    expect_row("JOB1", "active", "1");
    int calls;
    const char *tags[] = {"00000000000000cc", NULL};
    cr_assert_eq(recover_all(256, &calls, tags), 1);
    expect_row("JOB1", "pending", "0");
}

LANE_TEST(recover, pages_through_many_leases_in_bounded_calls)
{
    /* 600 leases: the active index is a hash table then, and ZSCAN pages
     * it; every lease of the lost calls is found, none twice. */
    char job[16];
    for (int i = 0; i < 600; i++) {
        snprintf(job, sizeof(job), "JOB%04d", i);
        cr_assert_eq(fx_enqueue(job, i % 2 ? "TENa" : "TENb", "{}"), 1);
    }
    cr_assert_eq(claim_tagged(false, 300, "00000000000000aa"), 300);
    cr_assert_eq(claim_tagged(false, 200, "00000000000000bb"), 200);
    cr_assert_eq(claim_tagged(false, 100, "00000000000000cc"), 100);
    int calls;
    const char *tags[] = {"00000000000000aa", "00000000000000cc", NULL};
    cr_assert_eq(recover_all(50, &calls, tags), 400);
    cr_assert_gt(calls, 1, "one call did all the work");
    redisReply *r = redisCommand(fx_conn, "ZCARD %s", fx_q.names[KEY_ACTIVE]);
    cr_assert_eq(r->integer, 200, "the answered call's leases stay");
    freeReplyObject(r);
}
