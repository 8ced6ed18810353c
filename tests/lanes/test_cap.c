/* Bounded lanes (lua/cap.lua, lib.lua cap_refuses): an enqueue into a lane
 * that holds its cap of pending + delayed jobs is refused and writes
 * nothing; a duplicate id is not refused; the count follows every move
 * into and out of the delayed set (g:<G>:delayed); moves of jobs already
 * admitted (retry, promotion, release, dead retry, reassign) are never
 * refused; a cap lowered below what a lane holds removes nothing. Every
 * test ends with the invariant check, which holds the delayed index to
 * the rows (invariant 8). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "lanes_fixture.h"

TestSuite(cap, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

/* One enqueue's reply: 1 enqueued, 0 duplicate, or the refusal's cap
 * (negated) with *from set to where it comes from. */
static long long enq(const char *job, const char *group, long long delay_ms, char *from, size_t cap)
{
    char delay[24];
    snprintf(delay, sizeof(delay), "%lld", delay_ms);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_ENQUEUE, job, group, "{}", delay, "0", NULL);
    cr_assert(r != NULL);
    long long v;
    if (r->type == REDIS_REPLY_INTEGER) {
        v = r->integer;
    } else {
        cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3, "enqueue: %s",
                  r->type == REDIS_REPLY_ERROR ? r->str : "not a refusal");
        cr_assert_eq(r->element[0]->integer, -1);
        v = -r->element[1]->integer;
        if (from != NULL)
            snprintf(from, cap, "%s", r->element[2]->str);
    }
    freeReplyObject(r);
    return v;
}

static long long dbsize(void)
{
    return redis_int(fx_conn, "DBSIZE");
}

/* What the cap counts of group g: its lane and its delayed index. */
static long long held(const char *g)
{
    char key[128];
    snprintf(key, sizeof(key), "emq:{q}:g:%s:pending", g);
    long long n = redis_int(fx_conn, "ZCARD %s", key);
    snprintf(key, sizeof(key), "emq:{q}:g:%s:delayed", g);
    return n + redis_int(fx_conn, "ZCARD %s", key);
}

LANE_TEST(cap, a_full_lane_refuses_and_writes_nothing)
{
    char from[16];
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENa", "2", NULL), 1);
    cr_assert_eq(enq("JOBa1", "TENa", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBa2", "TENa", 0, NULL, 0), 1);
    long long keys = dbsize();
    redisReply *seq = redisCommand(fx_conn, "GET %s", fx_q.names[KEY_SEQ]);
    cr_assert(seq != NULL);
    int seq_type = seq->type;
    freeReplyObject(seq);
    cr_assert_eq(enq("JOBa3", "TENa", 0, from, sizeof(from)), -2, "the third is refused");
    cr_assert_str_eq(from, "group");
    cr_assert_eq(enq("JOBa4", "TENa", 5000, NULL, 0), -2, "a delayed one too");
    cr_assert_eq(dbsize(), keys, "a refusal writes no key");
    cr_assert_eq(redis_int(fx_conn, "EXISTS %s", "emq:{q}:job:JOBa3"), 0, "no row, no id reserved");
    seq = redisCommand(fx_conn, "GET %s", fx_q.names[KEY_SEQ]);
    cr_assert(seq != NULL && seq->type == seq_type, "no lease counter touched");
    freeReplyObject(seq);
    /* An id already admitted is a duplicate, not a refusal. */
    cr_assert_eq(enq("JOBa1", "TENa", 0, NULL, 0), 0);
    /* Other lanes and flat jobs have no cap. */
    cr_assert_eq(enq("JOBb1", "TENb", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBb2", "TENb", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBb3", "TENb", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBf1", "", 0, NULL, 0), 1);
    /* A claim frees a place: the cap counts what waits, not what runs. */
    struct leased j[1];
    cr_assert_eq(fx_claim(1, 30000, j, NULL), 1);
    cr_assert_str_eq(j[0].group, "TENa", "a joined the ring first");
    cr_assert_eq(enq("JOBa3", "TENa", 0, NULL, 0), 1, "admitted once a job left the lane");
    cr_assert_eq(enq("JOBa5", "TENa", 0, NULL, 0), -2);
    cr_assert_eq(held("TENa"), 2);
}

LANE_TEST(cap, delayed_jobs_count_through_every_move_in_and_out)
{
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENa", "3", NULL), 1);
    cr_assert_eq(enq("JOBd1", "TENa", 60000, NULL, 0), 1);
    cr_assert_eq(enq("JOBd2", "TENa", 60000, NULL, 0), 1);
    cr_assert_eq(enq("JOBp1", "TENa", 0, NULL, 0), 1);
    cr_assert_eq(held("TENa"), 3);
    cr_assert_eq(enq("JOBx", "TENa", 0, NULL, 0), -3, "two delayed and one pending fill it");
    fx_assert_invariants(&fx_q);

    /* remove of a delayed job frees its place. */
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REMOVE, "JOBd2", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, "delayed") == 0);
    freeReplyObject(r);
    cr_assert_eq(held("TENa"), 2);
    fx_assert_invariants(&fx_q);

    /* promote moves a job from delayed to pending: the count stays. */
    long long now = fx_now_ms();
    cr_assert_eq(enq("JOBd3", "TENa", 1, NULL, 0), 1);
    fx_await_past(now + 5);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "100", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->element[0]->integer == 1);
    freeReplyObject(r);
    char state[32];
    fx_row("JOBd3", "state", state, sizeof(state));
    cr_assert_str_eq(state, "pending");
    cr_assert_eq(held("TENa"), 3);
    cr_assert_eq(enq("JOBx", "TENa", 0, NULL, 0), -3);
    fx_assert_invariants(&fx_q);

    /* A failed job retried with backoff goes back into delayed: counted,
     * and never refused, even into a full lane. */
    struct leased j[2];
    cr_assert_eq(fx_claim(1, 30000, j, NULL), 1);
    cr_assert_eq(held("TENa"), 2);
    cr_assert_eq(enq("JOBq1", "TENa", 0, NULL, 0), 1, "the claim freed a place");
    char st[16];
    fx_fail(j[0].job, j[0].lease, "boom", "60000", "0", st, sizeof(st));
    cr_assert_str_eq(st, "delayed");
    cr_assert_eq(held("TENa"), 4, "over its cap of 3: a retry is never refused");
    cr_assert_eq(enq("JOBx", "TENa", 0, NULL, 0), -3);
    fx_assert_invariants(&fx_q);

    /* drain empties the lane (delayed jobs stay): places free again. */
    r = lanes_call(fx_conn, &fx_q, SCRIPT_DRAIN, "TENa", "1000", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    cr_assert_eq(held("TENa"), 2, "two delayed: JOBd1 and the retried job");
    cr_assert_eq(enq("JOBx", "TENa", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBy", "TENa", 0, NULL, 0), -3);
}

LANE_TEST(cap, moves_of_admitted_jobs_are_never_refused)
{
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENa", "1", NULL), 1);
    cr_assert_eq(enq("JOBa1", "TENa", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBb1", "TENb", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBb2", "TENb", 0, NULL, 0), 1);
    /* reassign is an admin move: it goes into a full lane. */
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REASSIGN, "JOBb1", "TENa", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, "TENb") == 0,
              "reassign: %s", r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "?");
    freeReplyObject(r);
    cr_assert_eq(held("TENa"), 2);
    fx_assert_invariants(&fx_q);

    /* release and a fail with retry 0 put their jobs back in a full lane. */
    struct leased j[4];
    size_t got = fx_claim(4, 30000, j, NULL);
    cr_assert_eq(got, 3);
    cr_assert_eq(held("TENa"), 0);
    cr_assert_eq(enq("JOBa2", "TENa", 0, NULL, 0), 1);
    for (size_t i = 0; i < got; i++) {
        if (strcmp(j[i].group, "TENa") != 0)
            continue;
        if (strcmp(j[i].job, "JOBa1") == 0) {
            r = lanes_call(fx_conn, &fx_q, SCRIPT_RELEASE, "back", "returned", j[i].job, j[i].lease,
                           NULL);
            cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY, "release: %s",
                      r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "?");
            freeReplyObject(r);
        } else {
            char st[16];
            fx_fail(j[i].job, j[i].lease, "x", "0", "1", st, sizeof(st));
            cr_assert_str_eq(st, "dead");
        }
    }
    cr_assert_eq(held("TENa"), 2, "JOBa2 and the released JOBa1");
    /* dead retry puts the dead job back, over the cap. */
    cr_assert_eq(fx_int(SCRIPT_DEAD, "retry", "", "10", NULL), 1);
    cr_assert_eq(held("TENa"), 3);
    cr_assert_eq(enq("JOBa3", "TENa", 0, NULL, 0), -1);
}

/* The cap is judged before a hand-off: an empty lane holding its cap in
 * delayed jobs refuses a job even with a consumer waiting for it. */
LANE_TEST(cap, a_hand_off_is_refused_by_a_full_lane_too)
{
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENh", "1", NULL), 1);
    cr_assert_eq(enq("JOBd1", "TENh", 60000, NULL, 0), 1);
    redisReply *r =
        lanes_call(fx_conn, &fx_q, SCRIPT_ENQUEUE, "JOBh1", "TENh", "{}", "0", "0", "30000", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3 &&
                  r->element[0]->integer == -1,
              "refused, not handed off");
    freeReplyObject(r);
    cr_assert_eq(redis_int(fx_conn, "ZCARD %s", fx_q.names[KEY_ACTIVE]), 0, "nothing leased");
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENh", "2", NULL), 1);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_ENQUEUE, "JOBh1", "TENh", "{}", "0", "0", "30000", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 7 &&
                  r->element[0]->integer == 1,
              "under its cap, handed off");
    freeReplyObject(r);
    cr_assert_eq(held("TENh"), 1, "the delayed job; the handed-off one is active");
}

LANE_TEST(cap, a_default_cap_applies_where_the_group_has_none)
{
    char from[16];
    cr_assert_eq(fx_int(SCRIPT_CAP, "", "1", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENb", "2", NULL), 1);
    cr_assert_eq(enq("JOBa1", "TENa", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBa2", "TENa", 0, from, sizeof(from)), -1);
    cr_assert_str_eq(from, "queue");
    cr_assert_eq(enq("JOBb1", "TENb", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBb2", "TENb", 60000, NULL, 0), 1);
    cr_assert_eq(enq("JOBb3", "TENb", 0, from, sizeof(from)), -2);
    cr_assert_str_eq(from, "group");

    /* groups shows the cap, where it comes from, and the delayed count. */
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_GROUPS, "0", "100", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1 + 2 * 15);
    for (size_t i = 1; i < r->elements; i += 15) {
        bool a = strcmp(r->element[i]->str, "TENa") == 0;
        cr_assert_eq(r->element[i + 12]->integer, a ? 0 : 1, "delayed");
        cr_assert_eq(r->element[i + 13]->integer, a ? 1 : 2, "cap");
        cr_assert_eq(r->element[i + 14]->integer, a ? 2 : 1, "cap_from");
    }
    freeReplyObject(r);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_STATS, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 13);
    cr_assert_eq(r->element[12]->integer, 1, "the default cap");
    freeReplyObject(r);

    /* Removing b's own: the default (1) applies to it too. */
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENb", "0", NULL), 1);
    cr_assert_eq(enq("JOBb3", "TENb", 0, from, sizeof(from)), -1);
    cr_assert_str_eq(from, "queue");
    /* Removing the default: no cap anywhere. */
    cr_assert_eq(fx_int(SCRIPT_CAP, "", "0", NULL), 1);
    cr_assert_eq(enq("JOBa2", "TENa", 0, NULL, 0), 1);
    cr_assert_eq(enq("JOBb3", "TENb", 0, NULL, 0), 1);
}

LANE_TEST(cap, a_cap_lowered_below_the_lane_removes_nothing)
{
    char job[32];
    for (int i = 0; i < 5; i++) {
        snprintf(job, sizeof(job), "JOBa%d", i);
        cr_assert_eq(enq(job, "TENa", 0, NULL, 0), 1);
    }
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENa", "2", NULL), 1);
    cr_assert_eq(held("TENa"), 5, "nothing removed");
    cr_assert_eq(enq("JOBn", "TENa", 0, NULL, 0), -2);
    struct leased j[8];
    for (int left = 5; left > 2; left--) {
        cr_assert_eq(enq("JOBn", "TENa", 0, NULL, 0), -2, "refused at %d", left);
        cr_assert_eq(fx_claim(1, 30000, j, NULL), 1);
    }
    cr_assert_eq(held("TENa"), 2);
    cr_assert_eq(enq("JOBn", "TENa", 0, NULL, 0), -2, "2 of 2 is full");
    cr_assert_eq(fx_claim(1, 30000, j, NULL), 1);
    cr_assert_eq(enq("JOBn", "TENa", 0, NULL, 0), 1, "under the cap again");
}

LANE_TEST(cap, bad_arguments_change_nothing)
{
    cr_assert_eq(enq("JOBa1", "TENa", 0, NULL, 0), 1);
    long long keys = dbsize();
    char code[16];
    const char *bad[][2] = {
        {"TENa", "-1"}, {"TENa", "1.5"}, {"TENa", "x"}, {"TENa", "1000000001"}, {"", "-3"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fx_error(code, sizeof(code), SCRIPT_CAP, bad[i][0], bad[i][1], NULL);
        cr_assert_str_eq(code, "EARG", "cap %s %s", bad[i][0], bad[i][1]);
    }
    fx_error(code, sizeof(code), SCRIPT_CAP, "bad}group", "2", NULL);
    cr_assert_str_eq(code, "EBRAND");
    cr_assert_eq(dbsize(), keys);
    cr_assert_eq(redis_int(fx_conn, "EXISTS %s", fx_q.names[KEY_GLIMIT]), 0, "no setting written");
}

/* The check holds the delayed index to the rows, both ways, and each cap
 * to a positive integer. */
Test(cap, the_check_finds_a_wrong_count_or_a_bad_cap)
{
    cr_assert_eq(enq("JOBd1", "TENa", 60000, NULL, 0), 1);
    cr_assert_eq(enq("JOBd2", "TENa", 60000, NULL, 0), 1);
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENa", "3", NULL), 1);
    fx_assert_invariants(&fx_q);
    const char *corrupt[][3] = {
        {"ZREM emq:{q}:g:TENa:delayed JOBd1", "ZADD emq:{q}:g:TENa:delayed 1 JOBd1",
         "gdelayed: TENa does not hold JOBd1"},
        {"ZADD emq:{q}:g:TENa:delayed 1 JOBzz", "ZREM emq:{q}:g:TENa:delayed JOBzz",
         "gdelayed: TENa holds JOBzz, which has no job row"},
        {"ZADD emq:{q}:g:TENb:delayed 1 JOBd2", "DEL emq:{q}:g:TENb:delayed",
         "gdelayed: TENb holds JOBd2, which belongs to group TENa"},
        {"HSET emq:{q}:glimit c:TENa 0", "HSET emq:{q}:glimit c:TENa 3",
         "the cap of TENa is \"0\""},
        {"HSET emq:{q}:glimit d:cap x", "HDEL emq:{q}:glimit d:cap", "the default cap is \"x\""},
    };
    for (size_t i = 0; i < sizeof(corrupt) / sizeof(corrupt[0]); i++) {
        freeReplyObject(redisCommand(fx_conn, corrupt[i][0]));
        struct check_result res;
        check_run(fx_conn, &fx_q, 100, &res);
        cr_assert_str_eq(res.error, "");
        cr_assert(check_has(&res, corrupt[i][2]), "the check missed \"%s\"", corrupt[i][2]);
        check_result_free(&res);
        freeReplyObject(redisCommand(fx_conn, corrupt[i][1]));
    }
    fx_assert_invariants(&fx_q);
}
