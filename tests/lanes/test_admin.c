/* Per-tenant levers: pause / resume, reassign, drain, reap of one group,
 * duplicate and kind verdicts, and the invariant check itself. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "check_run.h"
#include "lanes_fixture.h"

TestSuite(admin, .init = fx_setup, .fini = fx_teardown, .timeout = 60);

static void enqueue_n(const char *group, int n)
{
    char job[72];
    for (int i = 0; i < n; i++) {
        snprintf(job, sizeof(job), "JOB%s-%03d", group, i);
        cr_assert_eq(fx_enqueue(job, group, "{}"), 1);
    }
}

static long long wake_len(void)
{
    redisReply *r = redisCommand(fx_conn, "LLEN %s", fx_q.names[KEY_WAKE]);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

LANE_TEST(admin, pause_holds_one_tenant_while_others_run_and_resume_returns_it)
{
    enqueue_n("TENa", 3);
    enqueue_n("TENb", 3);
    struct leased first;
    cr_assert_eq(fx_claim(1, 30000, &first, NULL), 1);
    cr_assert_str_eq(first.group, "TENa");
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENa", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENa", NULL), 0, "pausing twice is a no-op");

    struct leased j[5];
    cr_assert_eq(fx_claim(5, 30000, j, NULL), 3, "only B's three are served");
    for (int i = 0; i < 3; i++)
        cr_assert_str_eq(j[i].group, "TENb");
    /* A's job in flight may still finish while A is paused; it must not
     * put A back on the ring. */
    char st[32], ring[64];
    fx_complete(first.job, first.lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "");
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENa", NULL), 2, "A's backlog is untouched");

    redisReply *r = redisCommand(fx_conn, "DEL %s", fx_q.names[KEY_WAKE]);
    freeReplyObject(r);
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENa", NULL), 1);
    cr_assert_eq(wake_len(), 1, "resume wakes parked consumers");
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENa", NULL), 0);
    cr_assert_eq(fx_claim(5, 30000, j, NULL), 2);
    cr_assert_str_eq(j[0].group, "TENa");
    cr_assert_str_eq(j[1].group, "TENa");
}

LANE_TEST(admin, enqueue_to_a_paused_group_does_not_ring_it)
{
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENa", NULL), 1);
    enqueue_n("TENa", 2);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "");
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENa", NULL), 1);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");
}

LANE_TEST(admin, reassign_keeps_the_mint_ordered_place)
{
    cr_assert_eq(fx_enqueue("JOB01", "TENa", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOB02", "TENb", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOB03", "TENa", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOB04", "TENb", "{}"), 1);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REASSIGN, "JOB03", "TENb", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(r->str, "TENa", "the source group comes from the row");
    freeReplyObject(r);

    r = redisCommand(fx_conn, "ZRANGE %sg:TENb:pending 0 -1", fx_q.prefix);
    cr_assert_eq(r->elements, 3);
    cr_assert_str_eq(r->element[0]->str, "JOB02");
    cr_assert_str_eq(r->element[1]->str, "JOB03");
    cr_assert_str_eq(r->element[2]->str, "JOB04");
    freeReplyObject(r);
    char g[32];
    fx_row("JOB03", "group", g, sizeof(g));
    cr_assert_str_eq(g, "TENb");

    /* Moving A's last job de-rings A. */
    r = lanes_call(fx_conn, &fx_q, SCRIPT_REASSIGN, "JOB01", "TENc", NULL);
    freeReplyObject(r);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENb,TENc");
}

LANE_TEST(admin, reassign_refuses_a_job_that_is_not_pending)
{
    cr_assert_eq(fx_enqueue("JOB01", "TENa", "{}"), 1);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    char code[32];
    fx_error(code, sizeof(code), SCRIPT_REASSIGN, "JOB01", "TENb", NULL);
    cr_assert_str_eq(code, "ESTATE");
    fx_error(code, sizeof(code), SCRIPT_REASSIGN, "JOB99", "TENb", NULL);
    cr_assert_str_eq(code, "ENOJOB");
    fx_error(code, sizeof(code), SCRIPT_REASSIGN, "JOB01", "bad}group", NULL);
    cr_assert_str_eq(code, "EBRAND");
    char g[32];
    fx_row("JOB01", "group", g, sizeof(g));
    cr_assert_str_eq(g, "TENa", "a refused move changes nothing");
}

LANE_TEST(admin, reassign_moves_ungrouped_work_into_a_lane)
{
    cr_assert_eq(fx_enqueue("JOB01", NULL, "{}"), 1);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REASSIGN, "JOB01", "TENa", NULL);
    cr_assert_str_eq(r->str, "");
    freeReplyObject(r);
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "", NULL), 0);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    cr_assert_str_eq(j.group, "TENa");
}

LANE_TEST(admin, drain_empties_one_lane_and_leaves_the_rest_alone)
{
    enqueue_n("TENa", 6);
    enqueue_n("TENb", 3);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "3", NULL), 1);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    cr_assert_str_eq(j.group, "TENa");

    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_DRAIN, "TENa", "2", NULL);
    cr_assert_eq(r->element[0]->integer, 2, "bounded per call");
    cr_assert_eq(r->element[1]->integer, 3);
    freeReplyObject(r);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_DRAIN, "TENa", "1000", NULL);
    cr_assert_eq(r->element[0]->integer, 3);
    cr_assert_eq(r->element[1]->integer, 0);
    freeReplyObject(r);

    char ring[64], v[32];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENb", "the drained lane is off the ring, B stays");
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENb", NULL), 3);
    r = redisCommand(fx_conn, "HGET %s TENa", fx_q.names[KEY_GLIMIT]);
    cr_assert_str_eq(r->str, "3", "the ceiling is kept");
    freeReplyObject(r);
    fx_row("JOBTENa-001", "state", v, sizeof(v));
    cr_assert_str_eq(v, "", "drained rows are deleted");
    fx_row(j.job, "state", v, sizeof(v));
    cr_assert_str_eq(v, "active", "in-flight work is left alone");
    fx_complete(j.job, j.lease, v, sizeof(v));
    cr_assert_str_eq(v, "completed");
}

LANE_TEST(admin, reap_of_one_group_leaves_other_groups_leases_alone)
{
    enqueue_n("TENa", 2);
    enqueue_n("TENb", 2);
    struct leased j[4];
    long long deadline;
    cr_assert_eq(fx_claim(4, 1, j, &deadline), 4);
    fx_await_past(deadline);
    cr_assert_eq(fx_int(SCRIPT_REAP_GROUP, "TENa", "100", NULL), 2);
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENa", NULL), 2, "A's jobs are back in A's lane");
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENb", NULL), 0);
    redisReply *r = redisCommand(fx_conn, "ZCARD %sg:TENb:active", fx_q.prefix);
    cr_assert_eq(r->integer, 2, "B's expired leases (and so its gactive) are untouched");
    freeReplyObject(r);
    cr_assert_eq(fx_int(SCRIPT_REAP_GROUP, "TENa", "100", NULL), 0);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_REAP, "100", NULL);
    cr_assert_eq(r->element[0]->integer, 2, "the queue-wide reap takes B's");
    freeReplyObject(r);
}

LANE_TEST(admin, duplicate_and_kind_verdicts)
{
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{\"v\":1}"), 1);
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{\"v\":2}"), 0, "a re-sent id is a duplicate");
    cr_assert_eq(fx_enqueue("JOB1", "TENb", "{\"v\":3}"), 0, "even in another group");
    char v[32];
    fx_row("JOB1", "payload", v, sizeof(v));
    cr_assert_str_eq(v, "{\"v\":1}", "a duplicate changes nothing");
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENa", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENb", NULL), 0);

    char code[32];
    fx_error(code, sizeof(code), SCRIPT_ENQUEUE, "TSK1", "TENa", "{}", "0", "0", NULL);
    cr_assert_str_eq(code, "EKIND");
    fx_error(code, sizeof(code), SCRIPT_ENQUEUE, "job1", "", "{}", "0", "0", NULL);
    cr_assert_str_eq(code, "EKIND");
    fx_error(code, sizeof(code), SCRIPT_ENQUEUE, "JOB}x", "", "{}", "0", "0", NULL);
    cr_assert_str_eq(code, "EARG");
    fx_error(code, sizeof(code), SCRIPT_ENQUEUE, "JOB2", "tenant", "{}", "0", "0", NULL);
    cr_assert_str_eq(code, "EBRAND");
    fx_error(code, sizeof(code), SCRIPT_ENQUEUE, "JOB2", "TENa", "{}", "-1", "0", NULL);
    cr_assert_str_eq(code, "EARG");
    fx_error(code, sizeof(code), SCRIPT_LIMIT, "TENa", "1.5", NULL);
    cr_assert_str_eq(code, "EARG");
    fx_error(code, sizeof(code), SCRIPT_PAUSE, "x", NULL);
    cr_assert_str_eq(code, "EBRAND");
    redisReply *r = redisCommand(fx_conn, "EXISTS %sjob:TSK1 %sjob:JOB2", fx_q.prefix, fx_q.prefix);
    cr_assert_eq(r->integer, 0, "refused enqueues write nothing");
    freeReplyObject(r);
}

LANE_TEST(admin, the_check_reports_each_kind_of_violation)
{
    /* A second queue, corrupted by hand: the check must see it (a check
     * that cannot fail proves nothing). fx_q stays clean. */
    struct keys bad;
    cr_assert_eq(keys_init(&bad, "bad", 3), 0);
#define RUN(...) freeReplyObject(redisCommand(fx_conn, __VA_ARGS__))
    RUN("RPUSH %s TENa TENa", bad.names[KEY_RING]);                 /* twice, and empty */
    RUN("ZADD %sg:TENb:pending 0 JOBghost", bad.prefix);            /* no row, off ring */
    RUN("ZADD %sg:TENc:active 1 JOBnone", bad.prefix);              /* nothing active */
    RUN("HSET %sjob:JOBlost state pending group TENd", bad.prefix); /* in no lane */
#undef RUN
    const char *expect[] = {"more than once", "on the ring but not serviceable",
                            "no job row",     "serviceable but off the ring",
                            "gactive: TENc",  "JOBlost"};
    /* Whatever the size of its steps. */
    const unsigned budgets[] = {1, 2, STORE_CHECK_BUDGET};
    for (size_t b = 0; b < sizeof(budgets) / sizeof(*budgets); b++) {
        struct check_result res;
        check_run(fx_conn, &bad, budgets[b], &res);
        cr_assert_str_eq(res.error, "", "check failed: %s", res.error);
        for (size_t e = 0; e < sizeof(expect) / sizeof(*expect); e++)
            cr_assert(check_has(&res, expect[e]), "check (steps of %u) did not report \"%s\"",
                      budgets[b], expect[e]);
        check_result_free(&res);
    }
}

/* Keys of queue q at the fixture's Redis (KEYS emq:{q}:*). */
static long long queue_keys(void)
{
    redisReply *r = redisCommand(fx_conn, "KEYS emq:{q}:*");
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    long long n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

LANE_TEST(admin, forget_refuses_a_queue_with_jobs_in_any_state_and_changes_nothing)
{
    /* One job in each state, in turn: each refuses, and leaves the job. */
    char code[32];
    cr_assert_eq(fx_enqueue("JOB01", "TENa", "{}"), 1);
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENa", NULL), 1, "a paused lane is still pending");
    long long before = queue_keys();
    fx_error(code, sizeof(code), SCRIPT_FORGET, NULL);
    cr_assert_str_eq(code, "ESTATE");
    cr_assert_eq(queue_keys(), before, "a refused forget changed nothing");
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENa", NULL), 1);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    fx_error(code, sizeof(code), SCRIPT_FORGET, NULL);
    cr_assert_str_eq(code, "ESTATE", "an active job");
    char st[16];
    fx_fail(j.job, j.lease, "x", "0", "1", st, sizeof(st));
    cr_assert_str_eq(st, "dead");
    fx_error(code, sizeof(code), SCRIPT_FORGET, NULL);
    cr_assert_str_eq(code, "ESTATE", "a dead job");
    cr_assert_eq(fx_int(SCRIPT_DEAD, "purge", "", "10", NULL), 1);
    cr_assert_eq(fx_enqueue_delayed("JOB02", NULL, 3600000, 0), 1);
    fx_error(code, sizeof(code), SCRIPT_FORGET, NULL);
    cr_assert_str_eq(code, "ESTATE", "a delayed job");
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REMOVE, "JOB02", NULL);
    freeReplyObject(r);
    cr_assert_eq(fx_enqueue("JOB03", NULL, "{}"), 1);
    fx_error(code, sizeof(code), SCRIPT_FORGET, NULL);
    cr_assert_str_eq(code, "ESTATE", "a flat pending job");
}

LANE_TEST(admin, forget_deletes_every_key_of_an_empty_queue)
{
    /* Ceilings, pauses, a group registry and the lease counter, and no job. */
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "2", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENb", NULL), 1);
    cr_assert_eq(fx_enqueue("JOB01", "TENc", "{}"), 1);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_COMPLETE, "0", j.job, j.lease, NULL);
    freeReplyObject(r);
    /* A rated group whose lane emptied while held: its rate window and its
     * entry in the throttled index are left, and go too. */
    cr_assert_eq(fx_enqueue("JOB04", "TENd", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOB05", "TENd", "{}"), 1);
    cr_assert_eq(fx_int(SCRIPT_RATE, "TENd", "1", "60000", NULL), 1);
    cr_assert_eq(fx_claim(5, 30000, &j, NULL), 1);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_COMPLETE, "0", j.job, j.lease, NULL);
    freeReplyObject(r);
    freeReplyObject(lanes_call(fx_conn, &fx_q, SCRIPT_REMOVE, "JOB05", NULL));
    r = redisCommand(fx_conn, "EXISTS %sg:TENd:window %sthrottled", fx_q.prefix, fx_q.prefix);
    cr_assert_eq(r->integer, 2, "the window and the throttled index are there");
    freeReplyObject(r);
    cr_assert(queue_keys() > 0);
    cr_assert_eq(fx_int(SCRIPT_FORGET, NULL), 1);
    cr_assert_eq(queue_keys(), 0, "every key of the queue is gone");
    /* The queue works again from nothing. */
    cr_assert_eq(fx_enqueue("JOB02", "TENa", "{}"), 1);
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    cr_assert_str_eq(j.job, "JOB02");
}

LANE_TEST(admin, forget_deletes_the_retained_rows_in_bounded_calls)
{
    /* Five completed rows kept for an hour (lib.lua:retire's buckets):
     * a forgotten queue has no upkeep to delete them, so forget does. */
    struct leased j[5];
    fx_lease_n("JOBk", 5, j);
    fx_complete_all(j, 5, "3600000");
    /* A forget refused (a job pending) deletes none of them. */
    cr_assert_eq(fx_enqueue("JOBp", "TENa", "{}"), 1);
    char code[32];
    fx_error(code, sizeof(code), SCRIPT_FORGET, "2", NULL);
    cr_assert_str_eq(code, "ESTATE");
    char v[32];
    fx_row("JOBk0", "state", v, sizeof(v));
    cr_assert_str_eq(v, "completed", "a refused forget deleted a retained row");
    freeReplyObject(lanes_call(fx_conn, &fx_q, SCRIPT_REMOVE, "JOBp", NULL));

    /* At most 2 rows a call: 0 (call again) until none is left. */
    cr_assert_eq(fx_int(SCRIPT_FORGET, "2", NULL), 0);
    cr_assert_eq(fx_int(SCRIPT_FORGET, "2", NULL), 0);
    cr_assert(queue_keys() > 0, "the queue's structures wait for the last call");
    cr_assert_eq(fx_int(SCRIPT_FORGET, "2", NULL), 1);
    cr_assert_eq(queue_keys(), 0, "every key of the queue is gone, the kept rows too");
    cr_assert_eq(fx_enqueue("JOBk0", "TENa", "{}"), 1, "the id is free again");
}
