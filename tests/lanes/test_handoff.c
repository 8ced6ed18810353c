/* Hand-off: an enqueue that says a consumer is parked (ARGV 7 = a lease)
 * leases its job at once, but only when a claim would have served that job
 * next anyway; otherwise the job is queued exactly as without it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes_fixture.h"

TestSuite(handoff, .init = fx_setup, .fini = fx_teardown, .timeout = 60);

/* enqueue with a hand-off lease of 30 s; returns the raw reply. */
static redisReply *enqueue_hand(const char *job, const char *group, const char *delay)
{
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_ENQUEUE, job, group, "{\"n\":1}", delay, "0",
                               "30000", NULL);
    cr_assert_not_null(r);
    cr_assert_neq(r->type, REDIS_REPLY_ERROR, "enqueue: %s", r->str);
    return r;
}

/* The enqueue was handed off: {1, deadline, id, group, payload, attempt,
 * lease}; the lease token goes to lease. */
static void assert_handed(redisReply *r, const char *job, const char *group, char *lease,
                          size_t cap)
{
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "the job was not handed off");
    cr_assert_eq(r->elements, 7);
    cr_assert_eq(r->element[0]->integer, 1, "a hand-off is also an admission");
    cr_assert_gt(r->element[1]->integer, 0, "a lease deadline");
    cr_assert_str_eq(r->element[2]->str, job);
    cr_assert_str_eq(r->element[3]->str, group);
    cr_assert_str_eq(r->element[4]->str, "{\"n\":1}");
    cr_assert_eq(r->element[5]->integer, 1, "the first attempt");
    snprintf(lease, cap, "%s", r->element[6]->str);
    freeReplyObject(r);
}

static void assert_queued(redisReply *r, const char *why)
{
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "%s: handed off", why);
    cr_assert_eq(r->integer, 1, "%s", why);
    freeReplyObject(r);
}

static long long publishes(void)
{
    redisReply *r = redisCommand(fx_conn, "INFO commandstats");
    const char *p = strstr(r->str, "cmdstat_publish:calls=");
    long long n = p ? atoll(p + strlen("cmdstat_publish:calls=")) : 0;
    freeReplyObject(r);
    return n;
}

LANE_TEST(handoff, a_job_due_now_on_an_empty_ring_is_leased_at_once_without_a_wake)
{
    char lease[32], st[32], state[32];
    assert_handed(enqueue_hand("JOBh1", "TENa", "0"), "JOBh1", "TENa", lease, sizeof(lease));
    cr_assert_eq(publishes(), 0, "nothing is left to claim, so no one is woken");
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "the job never went through the lane or the ring");
    fx_row("JOBh1", "state", state, sizeof(state));
    cr_assert_str_eq(state, "active");
    redisReply *r = redisCommand(fx_conn, "ZCARD %sg:TENa:active", fx_q.prefix);
    cr_assert_eq(r->integer, 1, "the group's lease index holds it");
    freeReplyObject(r);
    r = redisCommand(fx_conn, "SISMEMBER %s TENa", fx_q.names[KEY_GROUPS]);
    cr_assert_eq(r->integer, 1, "the group is registered, as a claimed one would be");
    freeReplyObject(r);
    fx_assert_invariants(&fx_q);
    fx_complete("JOBh1", lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed", "the hand-off lease is a real lease");
}

LANE_TEST(handoff, a_flat_job_is_handed_off_when_the_flat_set_is_empty)
{
    /* The script does not know how many jobs the parked consumers want:
     * the daemon asks for a hand-off only while one wants more. */
    char lease[32];
    assert_handed(enqueue_hand("JOBf1", "", "0"), "JOBf1", "", lease, sizeof(lease));
    assert_handed(enqueue_hand("JOBf2", "", "0"), "JOBf2", "", lease, sizeof(lease));
    assert_queued(lanes_call(fx_conn, &fx_q, SCRIPT_ENQUEUE, "JOBf3", "", "{}", "0", "0", NULL),
                  "without ARGV 7 nothing is handed off");
    struct leased j[2];
    cr_assert_eq(fx_claim_flat(2, 30000, j), 1);
    cr_assert_str_eq(j[0].job, "JOBf3");
}

LANE_TEST(handoff, queued_when_a_claim_would_serve_something_else_first)
{
    /* Another lane is serviceable: the ring's order must decide. */
    cr_assert_eq(fx_enqueue("JOBa1", "TENa", NULL), 1);
    assert_queued(enqueue_hand("JOBb1", "TENb", "0"), "the ring is not empty");
    /* The flat set has an older job. */
    cr_assert_eq(fx_enqueue("JOBf1", NULL, NULL), 1);
    assert_queued(enqueue_hand("JOBf2", "", "0"), "the flat set is not empty");
    struct leased j[4];
    cr_assert_eq(fx_claim(4, 30000, j, NULL), 2);
    cr_assert_str_eq(j[0].job, "JOBa1", "the older lane still goes first");
    cr_assert_eq(fx_claim_flat(4, 30000, j), 2);
    cr_assert_str_eq(j[0].job, "JOBf1");
}

LANE_TEST(handoff, queued_when_its_group_may_not_run_it_now)
{
    /* Paused. */
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENp", NULL), 1);
    assert_queued(enqueue_hand("JOBp1", "TENp", "0"), "the group is paused");
    /* At its ceiling: one in flight of 1. */
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENc", "1", NULL), 1);
    char lease[32];
    assert_handed(enqueue_hand("JOBc1", "TENc", "0"), "JOBc1", "TENc", lease, sizeof(lease));
    assert_queued(enqueue_hand("JOBc2", "TENc", "0"), "the group is at its ceiling");
    /* Delayed. */
    assert_queued(enqueue_hand("JOBd1", "TENd", "5000"), "the job is not due yet");
    char state[32];
    fx_row("JOBd1", "state", state, sizeof(state));
    cr_assert_str_eq(state, "delayed");
    char st[32];
    fx_complete("JOBc1", lease, st, sizeof(st));
    struct leased j[2];
    cr_assert_eq(fx_claim(2, 30000, j, NULL), 1, "TENc re-rings; TENp stays paused");
    cr_assert_str_eq(j[0].job, "JOBc2", "the lane keeps its order");
}

/* The hand-off asks whether its group is paused and what its settings
 * are: one EXISTS of glimit and paused answers both when neither exists
 * (or both do); when one does, one more says which (lib.lua: memos). Each
 * answer must be the right one: a group under a ceiling but not paused is
 * handed off, then held at its ceiling. */
LANE_TEST(handoff, one_exists_reads_whether_glimit_and_paused_exist)
{
    char lease[32];
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    assert_handed(enqueue_hand("JOBm1", "TENa", "0"), "JOBm1", "TENa", lease, sizeof(lease));
    cr_assert_eq(fx_calls_of("exists"), 1, "neither exists: one EXISTS of both");

    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENc", "1", NULL), 1);
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    assert_handed(enqueue_hand("JOBm2", "TENc", "0"), "JOBm2", "TENc", lease, sizeof(lease));
    cr_assert_eq(fx_calls_of("exists"), 2, "one of the two exists: one more EXISTS says which");
    assert_queued(enqueue_hand("JOBm3", "TENc", "0"), "the group is at its ceiling");

    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENp", NULL), 1);
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    assert_queued(enqueue_hand("JOBm4", "TENp", "0"), "the group is paused");
    cr_assert_eq(fx_calls_of("exists"), 1, "both exist: one EXISTS of both");
}

static long long seq_now(void)
{
    redisReply *r = redisCommand(fx_conn, "GET %s", fx_q.names[KEY_SEQ]);
    cr_assert_not_null(r);
    long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    freeReplyObject(r);
    return v;
}

/* Nor does either draw a lease number: the token is drawn only once the
 * job is known to be new and valid, so the lease counter is as it was. */
LANE_TEST(handoff, a_duplicate_is_a_duplicate_and_a_bad_lease_changes_nothing)
{
    char lease[32];
    assert_handed(enqueue_hand("JOBx1", "TENa", "0"), "JOBx1", "TENa", lease, sizeof(lease));
    long long seq = seq_now();
    redisReply *r = enqueue_hand("JOBx1", "TENa", "0");
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    cr_assert_eq(r->integer, 0, "a re-sent id is a duplicate, not a second lease");
    freeReplyObject(r);
    char code[16];
    fx_error(code, sizeof(code), SCRIPT_ENQUEUE, "JOBx2", "TENa", "{}", "0", "0", "-5", NULL);
    cr_assert_str_eq(code, "EARG");
    fx_error(code, sizeof(code), SCRIPT_ENQUEUE, "JOBx2", "bad", "{}", "0", "0", "30000", NULL);
    cr_assert_str_eq(code, "EBRAND");
    cr_assert_eq(seq_now(), seq, "no lease number drawn");
    r = redisCommand(fx_conn, "EXISTS %sjob:JOBx2", fx_q.prefix);
    cr_assert_eq(r->integer, 0, "a refused enqueue writes nothing");
    freeReplyObject(r);
}

/* A job handed off is written once, already leased: one HSETNX (the
 * duplicate check) and one HSET, no read back of the row it has just
 * written (its payload included). The row is the one a claim would leave:
 * active, first attempt, the lease's token, deadline and tag. */
LANE_TEST(handoff, a_handed_off_job_is_written_once_already_leased)
{
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_ENQUEUE, "JOBw1", "TENa", "{\"n\":1}", "0",
                               "4", "30000", "tag-7", NULL);
    cr_assert_not_null(r);
    long long deadline = r->type == REDIS_REPLY_ARRAY ? r->element[1]->integer : 0;
    char lease[32];
    assert_handed(r, "JOBw1", "TENa", lease, sizeof(lease));
    cr_assert_eq(fx_calls_of("hmget"), 0, "no read back of the row");
    cr_assert_eq(fx_calls_of("hsetnx"), 1);
    cr_assert_eq(fx_calls_of("hset"), 1, "the row written once");
    const char *field[] = {"state",        "attempts", "lease",  "lease_by",
                           "max_attempts", "group",    "payload"};
    const char *want[] = {"active", "1", lease, "tag-7", "4", "TENa", "{\"n\":1}"};
    for (size_t i = 0; i < 7; i++) {
        char v[64];
        fx_row("JOBw1", field[i], v, sizeof(v));
        cr_assert_str_eq(v, want[i], "field %s", field[i]);
    }
    char v[32];
    fx_row("JOBw1", "lease_until", v, sizeof(v));
    cr_assert_str_eq(v, "", "the row does not repeat the deadline");
    cr_assert_eq(fx_deadline("JOBw1"), deadline, "in the lease index at its deadline");
    fx_assert_invariants(&fx_q);
    char st[32];
    fx_complete("JOBw1", lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed", "its lease is a real lease");
}
