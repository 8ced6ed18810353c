/* Rates (lua/rate.lua; the claim's rate window; promote's return of throttled
 * lanes): on the real Redis clock, with short periods. A lane leased
 * under its rate leaves the ring for the throttled index, due when the
 * rate allows its next lease; promote returns it then, waking a parked
 * consumer if the ring was empty. The tests wait for the server clock to
 * pass a due time, never for a length of time. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "lanes_fixture.h"

TestSuite(rate, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

static void enqueue_n(const char *group, int n)
{
    char job[72];
    for (int i = 0; i < n; i++) {
        snprintf(job, sizeof(job), "JOB%s-%05d", group, i);
        cr_assert_eq(fx_enqueue(job, group, "{}"), 1);
    }
}

static void rate(const char *group, const char *max, const char *per)
{
    cr_assert_eq(fx_int(SCRIPT_RATE, group, max, per, NULL), 1);
}

/* g's due time in the throttled index, -1 when it is not there. */
static long long due_of(const char *g)
{
    redisReply *r = redisCommand(fx_conn, "ZSCORE %sthrottled %s", fx_q.prefix, g);
    cr_assert_not_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? (long long)strtod(r->str, NULL) : -1;
    freeReplyObject(r);
    return v;
}

/* Run promote; how many jobs and lanes it moved, and *next its "ms to the
 * next due" answer. */
static long long promote(long long *next)
{
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "1000", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    long long n = r->element[0]->integer;
    if (next != NULL)
        *next = r->element[1]->integer;
    freeReplyObject(r);
    return n;
}

static long long wake_tokens(void)
{
    redisReply *r = redisCommand(fx_conn, "LLEN %s", fx_q.names[KEY_WAKE]);
    long long n = r->integer;
    freeReplyObject(r);
    freeReplyObject(redisCommand(fx_conn, "DEL %s", fx_q.names[KEY_WAKE]));
    return n;
}

/* A rate is a window: a batch claim leases a rated lane, one job per
 * turn as any lane, until N of its leases are in the last P ms, and not
 * one more; it is held until the oldest of them are P ms old. */
LANE_TEST(rate, a_batch_claim_leases_a_rated_lane_up_to_its_rate_and_no_further)
{
    enqueue_n("TENa", 5);
    enqueue_n("TENb", 4);
    rate("TENa", "3", "30000");
    struct leased j[10];
    long long deadline;
    cr_assert_eq(fx_claim(10, 30000, j, &deadline), 7);
    const char *want[] = {"TENa", "TENb", "TENa", "TENb", "TENa", "TENb", "TENb"};
    for (int i = 0; i < 7; i++)
        cr_assert_str_eq(j[i].group, want[i], "position %d", i);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "TENa is held by its rate, TENb is empty");
    /* The leases count at their time rounded up to the window's quantum,
     * P / 1024 ms (30 here), so they leave it up to that much late. */
    long long leased_at = deadline - 30000, due = due_of("TENa");
    cr_assert(due >= leased_at + 30000 && due < leased_at + 30000 + 30,
              "due %lld ms after the leases", due - leased_at);
    long long next = 0;
    cr_assert_eq(promote(&next), 0, "nothing is due yet");
    cr_assert_gt(next, 0);
    cr_assert_leq(next, 30030, "promote's next answer counts the throttled lane");
    fx_assert_invariants(&fx_q);
}

LANE_TEST(rate, a_held_lane_returns_when_due_and_wakes_an_empty_ring)
{
    enqueue_n("TENa", 3);
    rate("TENa", "1", "150");
    struct leased j[3];
    long long deadline;
    cr_assert_eq(fx_claim(3, 30000, j, &deadline), 1);
    long long due = due_of("TENa");
    cr_assert_eq(due, deadline - 30000 + 150);
    wake_tokens();
    fx_await_past(due);
    cr_assert_eq(promote(NULL), 1, "the lane is due: promote returns it");
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");
    cr_assert_eq(wake_tokens(), 1, "it joined an empty ring: parked consumers are woken");
    cr_assert_eq(due_of("TENa"), -1);
    cr_assert_eq(fx_claim(3, 30000, j, &deadline), 1);
    cr_assert_str_eq(j[0].job, "JOBTENa-00001");
}

/* A claim finds a held lane due by itself, with no promote in between
 * (under load the upkeep's promote waits behind the queue's other calls):
 * it returns the lane to the ring and serves it, after the lanes already
 * there. Before its due time the claim leaves it held. */
LANE_TEST(rate, a_claim_returns_a_due_lane_without_waiting_for_promote)
{
    enqueue_n("TENa", 3);
    enqueue_n("TENb", 1);
    rate("TENa", "1", "150");
    struct leased j[4];
    long long deadline;
    cr_assert_eq(fx_claim(1, 30000, j, &deadline), 1);
    cr_assert_str_eq(j[0].group, "TENa");
    long long due = due_of("TENa");
    cr_assert_gt(due, 0, "TENa is held by its rate");
    enqueue_n("TENc", 1);
    if (fx_now_ms() < due) { /* still early (always, but on a very slow run) */
        cr_assert_eq(fx_claim(1, 30000, j, &deadline), 1);
        cr_assert_str_eq(j[0].group, "TENb", "a held lane is not served early");
    }
    fx_await_past(due);
    size_t n = fx_claim(4, 30000, j, &deadline);
    cr_assert_geq(n, 2);
    cr_assert_str_eq(j[n - 1].group, "TENa", "the due lane is served, after the ring's lanes");
    cr_assert_str_eq(j[n - 1].job, "JOBTENa-00001");
    cr_assert_gt(due_of("TENa"), due, "and held again, one period later");
}

/* Drive a rated lane to empty with claims and promotes: whatever the
 * batches, no window of per_ms on the server clock holds more than max of
 * its leases; the max itself may go at once. */
LANE_TEST(rate, no_window_of_per_ms_holds_more_than_max_leases)
{
    enqueue_n("TENa", 6);
    enqueue_n("TENb", 40);
    rate("TENa", "2", "100");
    long long at[6];
    int got = 0;
    while (got < 6) {
        struct leased j[8];
        long long deadline;
        size_t n = fx_claim(8, 30000, j, &deadline);
        for (size_t i = 0; i < n; i++) {
            char st[32];
            if (strcmp(j[i].group, "TENa") == 0)
                at[got++] = deadline - 30000;
            fx_complete(j[i].job, j[i].lease, st, sizeof(st));
        }
        long long due = due_of("TENa");
        if (due >= 0) {
            fx_await_past(due - 1);
            promote(NULL);
        }
    }
    cr_assert_eq(at[1], at[0], "the first claim leased the rate's max at once");
    for (int i = 2; i < 6; i++)
        cr_assert_geq(at[i] - at[i - 2], 100, "leases %d to %d within one period", i - 2, i);
    fx_assert_invariants(&fx_q);
}

/* A lane served late (under load its claim comes some ms after it may be
 * served) gets back every slot that has left its window, not one: the
 * lateness is lost once per window, not once per lease. */
LANE_TEST(rate, a_lane_served_late_gets_every_slot_that_came_free)
{
    enqueue_n("TENa", 6);
    rate("TENa", "2", "100");
    struct leased j[8];
    long long deadline;
    cr_assert_eq(fx_claim(8, 30000, j, &deadline), 2, "the rate's max at once");
    long long due = due_of("TENa");
    cr_assert_eq(due, deadline - 30000 + 100);
    fx_await_past(due + 50); /* served 50 ms late */
    cr_assert_eq(fx_claim(8, 30000, j, &deadline), 2, "both slots are free again");
    cr_assert_eq(due_of("TENa"), deadline - 30000 + 100, "held from this claim on");
    fx_assert_invariants(&fx_q);
}

/* A lease enters the window at its time rounded up to the quantum, P /
 * 1024 ms (10 ms for 10240), and the window key expires P ms after its
 * newest entry; a second lease in the same quantum shares the entry. */
LANE_TEST(rate, a_lease_counts_from_its_time_rounded_up_to_the_quantum)
{
    enqueue_n("TENa", 3);
    rate("TENa", "5", "10240");
    struct leased j[3];
    long long deadline;
    cr_assert_eq(fx_claim(2, 30000, j, &deadline), 2);
    long long at = deadline - 30000;
    redisReply *r = redisCommand(fx_conn, "LRANGE %sg:TENa:window 0 -1", fx_q.prefix);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1, "one claim, one entry");
    long long t = 0, c = 0, cum = 0;
    cr_assert_eq(sscanf(r->element[0]->str, "%lld:%lld:%lld", &t, &c, &cum), 3);
    freeReplyObject(r);
    cr_assert(t % 10 == 0 && t >= at && t < at + 10, "entry at %lld, leased at %lld", t, at);
    cr_assert(c == 2 && cum == 2, "the two leases share it");
    r = redisCommand(fx_conn, "PEXPIRETIME %sg:TENa:window", fx_q.prefix);
    cr_assert_eq(r->integer, t + 10240, "the window goes P ms after its newest entry");
    freeReplyObject(r);
    fx_assert_invariants(&fx_q);
}

/* Changing a rate re-reads the window under the new one: raised, the held
 * lane returns at once; lowered below what the window holds, it is held
 * until enough leases have left it; removed, the window goes. */
LANE_TEST(rate, changing_a_rate_re_reads_the_window)
{
    enqueue_n("TENa", 8);
    rate("TENa", "2", "60000");
    struct leased j[8];
    long long deadline;
    char ring[64];
    cr_assert_eq(fx_claim(8, 30000, j, &deadline), 2);
    long long first = deadline - 30000;
    cr_assert_gt(due_of("TENa"), first);
    rate("TENa", "4", "60000");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa", "raised: room again at once");
    cr_assert_eq(due_of("TENa"), -1);
    fx_assert_invariants(&fx_q);
    cr_assert_eq(fx_claim(8, 30000, j, &deadline), 2, "two more, up to the new max");
    rate("TENa", "1", "60000");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "lowered: four leases in the window, one allowed");
    long long due = due_of("TENa");
    cr_assert(due >= first + 60000 && due <= deadline - 30000 + 60000 + 59,
              "held until the window holds none: %lld", due - first);
    fx_assert_invariants(&fx_q);
    rate("TENa", "0", "0");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa", "removed: free at once");
    redisReply *r = redisCommand(fx_conn, "EXISTS %sg:TENa:window", fx_q.prefix);
    cr_assert_eq(r->integer, 0, "and its window is gone");
    freeReplyObject(r);
    fx_assert_invariants(&fx_q);
}

LANE_TEST(rate, an_enqueue_into_an_emptied_held_lane_waits_for_the_due_time)
{
    enqueue_n("TENa", 1);
    rate("TENa", "1", "60000");
    struct leased j[2];
    cr_assert_eq(fx_claim(2, 30000, j, NULL), 1);
    cr_assert_eq(due_of("TENa"), -1, "an empty lane waits for nothing");
    cr_assert_eq(fx_enqueue("JOBTENa-later", "TENa", "{}"), 1);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "the rate still holds it");
    cr_assert_gt(due_of("TENa"), 0, "it waits in the throttled index");
    cr_assert_eq(fx_claim(2, 30000, j, NULL), 0);
}

LANE_TEST(rate, removing_the_rate_returns_the_lane_at_once)
{
    enqueue_n("TENa", 3);
    rate("TENa", "1", "60000");
    struct leased j[3];
    cr_assert_eq(fx_claim(3, 30000, j, NULL), 1);
    cr_assert_gt(due_of("TENa"), 0);
    rate("TENa", "0", "0");
    cr_assert_eq(due_of("TENa"), -1);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");
    cr_assert_eq(fx_claim(3, 30000, j, NULL), 2);
    redisReply *r = redisCommand(fx_conn, "HGETALL %s", fx_q.names[KEY_GLIMIT]);
    cr_assert_eq(r->elements, 0, "no setting is left behind");
    freeReplyObject(r);
}

LANE_TEST(rate, a_paused_or_full_lane_that_comes_due_stays_off_until_it_can_run)
{
    enqueue_n("TENa", 4);
    rate("TENa", "1", "2000"); /* long enough that the complete comes before it */
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "1", NULL), 1);
    struct leased j[4];
    cr_assert_eq(fx_claim(4, 30000, j, NULL), 1);
    cr_assert_eq(due_of("TENa"), -1, "at its ceiling: held by that, not the rate");
    char st[32], ring[64];
    fx_complete(j[0].job, j[0].lease, st, sizeof(st));
    long long due = due_of("TENa");
    cr_assert_gt(due, 0, "a permit back, and the rate holds it");
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENa", NULL), 1);
    fx_await_past(due);
    cr_assert_eq(promote(NULL), 1);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "due, but paused");
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENa", NULL), 1);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa", "resumed, and the rate allows it");
}

/* A weighted turn of a rated lane ends early when its window fills. */
LANE_TEST(rate, a_rate_ends_a_weighted_turn_when_the_window_is_full)
{
    enqueue_n("TENa", 5);
    enqueue_n("TENb", 5);
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, "TENa", "3", NULL), 1);
    rate("TENa", "2", "60000");
    struct leased j[6];
    cr_assert_eq(fx_claim(6, 30000, j, NULL), 6);
    const char *want[] = {"TENa", "TENa", "TENb", "TENb", "TENb", "TENb"};
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(j[i].group, want[i], "position %d", i);
    fx_assert_invariants(&fx_q);
}

LANE_TEST(rate, the_script_refuses_bad_rates_and_writes_nothing)
{
    enqueue_n("TENa", 1);
    char code[32];
    const char *bad[][2] = {{"-1", "10"}, {"1000001", "10"}, {"1.5", "10"}, {"x", "10"},
                            {"1", "0"},   {"1", "86400001"}, {"1", "y"},    {"1", ""}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fx_error(code, sizeof(code), SCRIPT_RATE, "TENa", bad[i][0], bad[i][1], NULL);
        cr_assert_str_eq(code, "EARG", "rate %s per %s", bad[i][0], bad[i][1]);
    }
    fx_error(code, sizeof(code), SCRIPT_RATE, "bad", "1", "10", NULL);
    cr_assert_str_eq(code, "EBRAND");
    redisReply *r = redisCommand(fx_conn, "EXISTS %s", fx_q.names[KEY_GLIMIT]);
    cr_assert_eq(r->integer, 0);
    freeReplyObject(r);
}

Test(rate, the_check_finds_a_held_lane_without_a_due_time)
{
    enqueue_n("TENa", 3);
    rate("TENa", "1", "60000");
    struct leased j[3];
    cr_assert_eq(fx_claim(3, 30000, j, NULL), 1);
    fx_assert_invariants(&fx_q);
    freeReplyObject(redisCommand(fx_conn, "ZREM %sthrottled TENa", fx_q.prefix));
    struct check_result res;
    check_run(fx_conn, &fx_q, 100, &res);
    cr_assert(check_has(&res, "held by its rate but has no due time"), "%zu violations", res.n);
    check_result_free(&res);
    freeReplyObject(redisCommand(fx_conn, "ZADD %sthrottled 1 TENb", fx_q.prefix));
    check_run(fx_conn, &fx_q, 100, &res);
    cr_assert(check_has(&res, "TENb is held for a rate it does not have"), "%zu", res.n);
    check_result_free(&res);
}

Test(rate, the_check_finds_a_bad_or_stray_rate_window)
{
    enqueue_n("TENa", 3);
    enqueue_n("TENb", 1);
    rate("TENa", "2", "60000");
    struct leased j[3];
    cr_assert_eq(fx_claim(1, 30000, j, NULL), 1);
    fx_assert_invariants(&fx_q);
    /* TENa's window says two leases while it is on the ring. */
    redisReply *r = redisCommand(fx_conn, "LINDEX %sg:TENa:window 0", fx_q.prefix);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    char entry[64];
    snprintf(entry, sizeof(entry), "%lld:2:2", strtoll(r->str, NULL, 10));
    freeReplyObject(r);
    freeReplyObject(redisCommand(fx_conn, "LSET %sg:TENa:window 0 %s", fx_q.prefix, entry));
    freeReplyObject(redisCommand(fx_conn, "RPUSH %sg:TENb:window 1:1:1", fx_q.prefix));
    struct check_result res;
    check_run(fx_conn, &fx_q, 100, &res);
    cr_assert(check_has(&res, "TENa is serviceable with 2 leases in its window"), "%zu", res.n);
    cr_assert(check_has(&res, "TENb has a rate window but no rate"), "%zu", res.n);
    check_result_free(&res);
}
