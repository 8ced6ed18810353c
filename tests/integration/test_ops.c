/* Integration: every per-tenant lever and read op over TCP, settling ops,
 * authentication, and the protocol's edges (quit, hostile JSON, push
 * order). The real emqd against a real redis-server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"

TestSuite(ops, .init = fx_setup, .fini = fx_teardown, .timeout = 60);

static void enqueue(struct tc_conn *c, const char *queue, const char *job, const char *group)
{
    json_t *r = OK(c,
                   "{\"op\":\"enqueue\",\"queue\":\"%s\",\"job\":\"%s\",\"group\":\"%s\","
                   "\"payload\":{\"j\":\"%s\"}}",
                   queue, job, group, job);
    cr_assert_str_eq(jstr(r, "verdict"), "enqueued");
    json_decref(r);
}

static long long depth(struct tc_conn *c, const char *group)
{
    json_t *r = OK(c, "{\"op\":\"depth\",\"queue\":\"o\",\"group\":\"%s\"}", group);
    long long d = jint(r, "depth");
    json_decref(r);
    return d;
}

Test(ops, limit_pause_resume_steer_the_rotation)
{
    struct tc_conn *c = fx_conn();
    for (int i = 0; i < 4; i++) {
        char a[16], b[16];
        snprintf(a, sizeof(a), "JOBa%d", i);
        snprintf(b, sizeof(b), "JOBb%d", i);
        enqueue(c, "o", a, "TENa");
        enqueue(c, "o", b, "TENb");
    }
    json_decref(OK(c, "{\"op\":\"limit\",\"queue\":\"o\",\"group\":\"TENa\",\"max\":1}"));
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\",\"count\":10}");
    json_t *jobs = claim_jobs(r);
    size_t na = 0;
    for (size_t i = 0; i < json_array_size(jobs); i++)
        na += strcmp(jstr(json_array_get(jobs, i), "group"), "TENa") == 0;
    cr_assert_eq(na, 1, "a ceiling of 1 lets one of A's jobs out, got %zu", na);
    cr_assert_eq(json_array_size(jobs), 5);
    json_decref(r);

    json_t *p = OK(c, "{\"op\":\"pause\",\"queue\":\"o\",\"group\":\"TENa\"}");
    cr_assert(json_is_true(json_object_get(p, "changed")));
    json_decref(p);
    json_decref(OK(c, "{\"op\":\"limit\",\"queue\":\"o\",\"group\":\"TENa\",\"max\":null}"));
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\",\"count\":10}");
    cr_assert_eq(json_array_size(claim_jobs(r)), 0, "A is paused, B is empty");
    json_decref(r);
    p = OK(c, "{\"op\":\"resume\",\"queue\":\"o\",\"group\":\"TENa\"}");
    cr_assert(json_is_true(json_object_get(p, "changed")));
    json_decref(p);
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\",\"count\":10}");
    cr_assert_eq(json_array_size(claim_jobs(r)), 3, "resumed, no ceiling: A's other three");
    json_decref(r);

    json_t *g = OK(c, "{\"op\":\"groups\",\"queue\":\"o\",\"count\":10}");
    json_t *list = json_object_get(g, "groups");
    cr_assert_eq(json_array_size(list), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(list, i);
        cr_assert_eq(jint(e, "depth"), 0);
        cr_assert_eq(jint(e, "active"), 4);
        cr_assert(json_is_null(json_object_get(e, "limit")));
        cr_assert(json_is_false(json_object_get(e, "paused")));
    }
    cr_assert_str_eq(jstr(g, "cursor"), "0");
    json_decref(g);
    assert_err_free(tc_call(c, "{\"op\":\"groups\",\"queue\":\"o\",\"cursor\":\"x\"}"), "EARG");
    json_t *st = OK(c, "{\"op\":\"stats\",\"queue\":\"o\"}");
    cr_assert_eq(jint(st, "active"), 8);
    cr_assert_eq(jint(st, "pending"), 0);
    cr_assert_eq(jint(st, "groups"), 2);
    json_decref(st);
    assert_check_clean(c, "o");
    tc_close(c);
}

Test(ops, reassign_drain_and_depth)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "o", "JOB1", "TENa");
    enqueue(c, "o", "JOB2", "TENa");
    enqueue(c, "o", "JOB3", "TENb");
    json_t *r = OK(c, "{\"op\":\"reassign\",\"queue\":\"o\",\"job\":\"JOB2\",\"group\":\"TENb\"}");
    cr_assert_str_eq(jstr(r, "from"), "TENa");
    json_decref(r);
    cr_assert_eq(depth(c, "TENa"), 1);
    cr_assert_eq(depth(c, "TENb"), 2);
    assert_err_free(
        tc_call(c, "{\"op\":\"reassign\",\"queue\":\"o\",\"job\":\"JOB9\",\"group\":\"TENb\"}"),
        "ENOJOB");
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\",\"count\":1}");
    const char *held = jstr(json_array_get(claim_jobs(r), 0), "job");
    json_t *again =
        tc_call(c, "{\"op\":\"reassign\",\"queue\":\"o\",\"job\":\"%s\",\"group\":\"TENc\"}", held);
    assert_err(again, "ESTATE");
    json_decref(again);
    json_decref(r);

    r = OK(c, "{\"op\":\"drain\",\"queue\":\"o\",\"group\":\"TENb\"}");
    cr_assert_eq(jint(r, "drained"), 2);
    json_decref(r);
    cr_assert_eq(depth(c, "TENb"), 0);
    r = OK(c, "{\"op\":\"depth\",\"queue\":\"o\"}");
    cr_assert_eq(jint(r, "depth"), 0, "no group: the flat set");
    json_decref(r);
    assert_check_clean(c, "o");
    tc_close(c);
}

/* drain without a group empties the flat backlog only: grouped lanes,
 * a delayed flat job and a leased one stay; a bad group changes nothing. */
Test(ops, drain_without_a_group_empties_the_flat_backlog)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "o", "JOBg1", "TENa");
    for (int i = 0; i < 3; i++)
        json_decref(
            OK(c, "{\"op\":\"enqueue\",\"queue\":\"o\",\"job\":\"JOBf%d\",\"payload\":%d}", i, i));
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"o\",\"job\":\"JOBlater\",\"payload\":1,"
                      "\"delay_ms\":3600000}"));
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\",\"flat\":true}");
    cr_assert_eq(json_array_size(claim_jobs(r)), 1);
    json_decref(r);
    assert_err_free(tc_call(c, "{\"op\":\"drain\",\"queue\":\"o\",\"group\":\"tena\"}"), "EBRAND");
    r = OK(c, "{\"op\":\"depth\",\"queue\":\"o\"}");
    cr_assert_eq(jint(r, "depth"), 2, "the bad drain changed nothing");
    json_decref(r);
    r = OK(c, "{\"op\":\"drain\",\"queue\":\"o\"}");
    cr_assert_eq(jint(r, "drained"), 2);
    json_decref(r);
    r = OK(c, "{\"op\":\"depth\",\"queue\":\"o\"}");
    cr_assert_eq(jint(r, "depth"), 0);
    json_decref(r);
    cr_assert_eq(depth(c, "TENa"), 1, "a grouped lane is not touched");
    cr_assert_eq(fx_stat(c, "o", "delayed"), 1);
    cr_assert_eq(fx_stat(c, "o", "active"), 1);
    assert_err_free(tc_call(c, "{\"op\":\"job\",\"queue\":\"o\",\"job\":\"JOBf2\"}"), "ENOJOB");
    assert_check_clean(c, "o");
    tc_close(c);
}

Test(ops, fail_extend_job_and_dead_letters)
{
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"o\",\"job\":\"JOBx\",\"group\":\"TENa\","
                      "\"payload\":7,\"max_attempts\":2}"));
    /* A minute's lease, then an hour's: the reaper cannot take the job
     * between the claim and the extend, and the new deadline is far past
     * the old one. */
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\",\"lease_ms\":60000}");
    json_t *j = json_array_get(claim_jobs(r), 0);
    char lease[32];
    snprintf(lease, sizeof(lease), "%s", jstr(j, "lease"));
    long long until = jint(j, "lease_until");
    json_decref(r);

    r = OK(c,
           "{\"op\":\"extend\",\"queue\":\"o\",\"job\":\"JOBx\",\"lease\":\"%s\","
           "\"lease_ms\":3600000}",
           lease);
    cr_assert_gt(jint(r, "lease_until"), until + 3000000);
    json_decref(r);
    r = OK(c, "{\"op\":\"job\",\"queue\":\"o\",\"job\":\"JOBx\"}");
    json_t *row = json_object_get(r, "job");
    cr_assert_str_eq(jstr(row, "state"), "active");
    cr_assert_str_eq(jstr(row, "group"), "TENa");
    cr_assert_eq(jint(row, "payload"), 7);
    cr_assert_null(json_object_get(row, "lease"), "the fencing token is not shown");
    json_decref(r);

    r = OK(c,
           "{\"op\":\"fail\",\"queue\":\"o\",\"job\":\"JOBx\",\"lease\":\"%s\","
           "\"error\":\"boom\",\"retry_ms\":0}",
           lease);
    cr_assert_str_eq(jstr(r, "state"), "pending");
    json_decref(r);
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\"}");
    j = json_array_get(claim_jobs(r), 0);
    cr_assert_eq(jint(j, "attempt"), 2);
    snprintf(lease, sizeof(lease), "%s", jstr(j, "lease"));
    json_decref(r);
    r = OK(c, "{\"op\":\"fail\",\"queue\":\"o\",\"job\":\"JOBx\",\"lease\":\"%s\",\"error\":\"x\"}",
           lease);
    cr_assert_str_eq(jstr(r, "state"), "dead", "max_attempts 2 spent");
    json_decref(r);

    r = OK(c, "{\"op\":\"dead\",\"queue\":\"o\",\"action\":\"list\"}");
    json_t *dead = json_object_get(r, "jobs");
    cr_assert_eq(json_array_size(dead), 1);
    cr_assert_str_eq(jstr(json_array_get(dead, 0), "job"), "JOBx");
    cr_assert_str_eq(jstr(json_array_get(dead, 0), "error"), "x");
    json_decref(r);
    r = OK(c, "{\"op\":\"dead\",\"queue\":\"o\",\"action\":\"retry\",\"job\":\"JOBx\"}");
    cr_assert_eq(jint(r, "count"), 1);
    json_decref(r);
    cr_assert_eq(depth(c, "TENa"), 1, "a retried dead job is back in its lane");
    assert_err_free(tc_call(c, "{\"op\":\"dead\",\"queue\":\"o\",\"action\":\"nuke\"}"), "EARG");
    assert_check_clean(c, "o");
    tc_close(c);
}

/* job shows a row as it is stored: in its own field order, fields no
 * script writes too ("*_ms" as numbers), never the lease; a row whose
 * counts are not numbers is refused (EINTERNAL), not shown as 0. */
Test(ops, job_shows_the_row_as_stored_and_refuses_a_corrupt_one)
{
    struct tc_conn *c = fx_conn();
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    freeReplyObject(redisCommand(rc,
                                 "HSET emq:{o}:job:JOBh state active payload notjson "
                                 "note_ms 12 lease 9 x 7 group %s",
                                 ""));
    json_t *r = OK(c, "{\"op\":\"job\",\"queue\":\"o\",\"job\":\"JOBh\"}");
    char *d = json_dumps(json_object_get(r, "job"), JSON_COMPACT);
    /* attempts: a row without the field shows 0 (enqueue writes none
     * before a first lease; lib.lua:row_view). */
    cr_assert_str_eq(d, "{\"job\":\"JOBh\",\"state\":\"active\",\"payload\":\"notjson\","
                        "\"note_ms\":12,\"x\":\"7\",\"group\":null,\"attempts\":0}");
    free(d);
    json_decref(r);
    freeReplyObject(redisCommand(rc, "HSET emq:{o}:job:JOBh attempts many"));
    assert_err_free(tc_call(c, "{\"op\":\"job\",\"queue\":\"o\",\"job\":\"JOBh\"}"), "EINTERNAL");
    redisFree(rc);
    tc_close(c);
}

Test(ops, complete_resent_after_success_is_answered_the_same)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "o", "JOB1", "TENa");
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\"}");
    json_t *j = json_array_get(claim_jobs(r), 0);
    for (int i = 0; i < 2; i++) {
        json_t *d = OK(c, "{\"op\":\"complete\",\"queue\":\"o\",\"job\":\"JOB1\",\"lease\":\"%s\"}",
                       jstr(j, "lease"));
        cr_assert_str_eq(jstr(d, "state"), "completed");
        json_decref(d);
    }
    json_decref(r);
    tc_close(c);
}

Test(ops, a_push_never_precedes_the_stream_reply)
{
    struct tc_conn *c = fx_conn(), *p = fx_conn();
    enqueue(c, "o", "JOB1", "TENa");
    /* A claim parked on an empty queue holds the line (its wait is an
     * hour); the stream behind it is handled meanwhile, and must not push
     * before its own reply is out. */
    const char *two = "{\"op\":\"claim\",\"ref\":1,\"queue\":\"empty\",\"wait_ms\":3600000}\n"
                      "{\"op\":\"stream\",\"ref\":2,\"queue\":\"o\",\"credit\":1}\n";
    cr_assert_eq(tc_send(c, two, strlen(two)), 0);
    fx_await_quiet(&fx_emqd); /* both handled: the claim parked, the stream's reply waits */
    /* Work for the parked claim lets the line go. */
    enqueue(p, "empty", "JOBfree", "TENa");
    json_t *first = tc_read(c, wait_deadline_ms(0));
    json_t *second = tc_read(c, wait_deadline_ms(0));
    json_t *third = tc_read(c, wait_deadline_ms(0));
    cr_assert(first && second && third, "three frames expected");
    cr_assert_eq(jint(first, "ref"), 1);
    cr_assert_str_eq(jstr(json_array_get(claim_jobs(first), 0), "job"), "JOBfree");
    cr_assert_eq(jint(second, "ref"), 2);
    cr_assert_str_eq(jstr(third, "push"), "job");
    cr_assert_str_eq(jstr(third, "job"), "JOB1");
    json_decref(first);
    json_decref(second);
    json_decref(third);
    tc_close(c);
    tc_close(p);
}

Test(ops, a_stream_gets_its_credit_back_when_a_lease_runs_out)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "o", "JOB1", "TENa");
    json_decref(OK(c, "{\"op\":\"stream\",\"queue\":\"o\",\"credit\":1,\"lease_ms\":300}"));
    json_t *p = tc_read(c, wait_deadline_ms(0));
    cr_assert_not_null(p);
    cr_assert_eq(jint(p, "attempt"), 1);
    json_decref(p);
    /* The worker sits on it; the lease runs out, the reaper re-queues the
     * job, and the stream, its credit returned, is pushed it again. */
    p = tc_read(c, wait_deadline_ms(0));
    cr_assert_not_null(p, "the stream stalled on a lease that ran out");
    cr_assert_str_eq(jstr(p, "job"), "JOB1");
    cr_assert_eq(jint(p, "attempt"), 2);
    json_decref(p);
    tc_close(c);
}

Test(ops, quit_runs_nothing_after_it)
{
    struct tc_conn *c = fx_conn();
    const char *lines = "{\"op\":\"quit\"}\n"
                        "{\"op\":\"enqueue\",\"queue\":\"o\",\"job\":\"JOBlate\",\"payload\":1}\n";
    cr_assert_eq(tc_send(c, lines, strlen(lines)), 0);
    json_t *r = tc_read(c, wait_deadline_ms(0));
    assert_ok(r);
    json_decref(r);
    cr_assert(tc_read_eof(c, wait_deadline_ms(0)), "the connection closes after quit");
    tc_close(c);
    c = fx_conn();
    assert_err_free(tc_call(c, "{\"op\":\"job\",\"queue\":\"o\",\"job\":\"JOBlate\"}"), "ENOJOB");
    tc_close(c);
}

Test(ops, hostile_json_is_refused_and_writes_nothing)
{
    struct tc_conn *c = fx_conn();
    char deep[400];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof(deep), "{\"op\":\"enqueue\",\"queue\":\"o\",\"payload\":");
    for (int i = 0; i < 100; i++)
        deep[n++] = '[';
    for (int i = 0; i < 100; i++)
        deep[n++] = ']';
    deep[n++] = '}';
    deep[n] = '\0';
    assert_err_free(tc_call(c, "%s", deep), "EPROTO");
    assert_err_free(
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"o\",\"queue\":\"p\",\"payload\":1}"), "EPROTO");
    assert_err_free(tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"o\",\"payload\":\"\xc3\x28\"}"),
                    "EPROTO");
    assert_err_free(tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"o}x\",\"payload\":1}"), "EQUEUE");
    assert_err_free(tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"o\",\"group\":\"TEN a:b\","
                               "\"payload\":1}"),
                    "EBRAND");
    json_t *st = OK(c, "{\"op\":\"stats\",\"queue\":\"o\"}");
    cr_assert_eq(jint(st, "pending"), 0);
    cr_assert_eq(jint(st, "delayed"), 0);
    json_decref(st);
    json_decref(OK(c, "{\"op\":\"ping\"}"));
    tc_close(c);
}

Test(ops, token_gates_every_op_and_repeated_failures_disconnect)
{
    fx_teardown();
    const char *const extra[] = {"--token", "s3cret", NULL};
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"ping\"}"));
    assert_err_free(tc_call(c, "{\"op\":\"depth\",\"queue\":\"o\"}"), "EAUTH");
    assert_err_free(tc_call(c, "{\"op\":\"nosuchop\"}"), "EAUTH");
    assert_err_free(tc_call(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"wrong\"}"), "EAUTH");
    json_decref(OK(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"s3cret\"}"));
    json_decref(OK(c, "{\"op\":\"depth\",\"queue\":\"o\"}"));
    assert_err_free(tc_call(c, "{\"op\":\"nosuchop\"}"), "EUNKNOWN");
    tc_close(c);

    c = fx_conn();
    for (int i = 0; i < 3; i++)
        assert_err_free(tc_call(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"x%d\"}", i),
                        "EAUTH");
    cr_assert(tc_read_eof(c, wait_deadline_ms(0)), "three failed hellos close the connection");
    tc_close(c);
}

Test(ops, enqueue_many_answers_each_item_in_input_order)
{
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"o\",\"job\":\"JOBdup\",\"payload\":0}"));
    json_t *r = OK(c, "{\"op\":\"enqueue_many\",\"queue\":\"o\",\"group\":\"TENa\",\"jobs\":["
                      "{\"payload\":1},"
                      "{\"payload\":2,\"job\":\"JOBdup\"},"
                      "{\"payload\":3,\"job\":\"bad\"},"
                      "{\"payload\":4,\"group\":\"TENb\",\"job\":\"JOBb\"},"
                      "{\"job\":\"JOBnopayload\"},"
                      "{\"payload\":6,\"extra\":1}]}");
    json_t *res = json_object_get(r, "results");
    cr_assert_eq(json_array_size(res), 6);
    cr_assert_str_eq(jstr(json_array_get(res, 0), "verdict"), "enqueued");
    cr_assert(strncmp(jstr(json_array_get(res, 0), "job"), "JOB", 3) == 0, "a minted id");
    cr_assert_str_eq(jstr(json_array_get(res, 1), "verdict"), "duplicate");
    cr_assert_str_eq(jstr(json_array_get(res, 2), "error"), "EKIND");
    cr_assert_str_eq(jstr(json_array_get(res, 3), "verdict"), "enqueued");
    cr_assert_str_eq(jstr(json_array_get(res, 4), "error"), "EARG");
    cr_assert_str_eq(jstr(json_array_get(res, 5), "error"), "EARG");
    json_decref(r);
    cr_assert_eq(depth(c, "TENa"), 1, "the batch default group");
    cr_assert_eq(depth(c, "TENb"), 1, "an item's own group wins");
    assert_check_clean(c, "o");
    tc_close(c);
}

Test(ops, enqueue_many_over_the_batch_limit_is_refused_whole)
{
    fx_teardown();
    const char *const extra[] = {"--max-batch", "2", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    assert_err_free(tc_call(c, "{\"op\":\"enqueue_many\",\"queue\":\"o\",\"jobs\":"
                               "[{\"payload\":1},{\"payload\":2},{\"payload\":3}]}"),
                    "ELIMIT");
    json_t *st = OK(c, "{\"op\":\"stats\",\"queue\":\"o\"}");
    cr_assert_eq(jint(st, "pending"), 0, "nothing of a refused batch lands");
    json_decref(st);
    tc_close(c);
}

Test(ops, release_and_reap_give_jobs_back)
{
    struct tc_conn *c = fx_conn();
    enqueue(c, "o", "JOB1", "TENa");
    enqueue(c, "o", "JOB2", "TENb");
    /* JOB1 on an hour's lease, so the release below surely finds it
     * held; JOB2 (the next group in the rotation) on 100 ms, to run out. */
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\",\"lease_ms\":3600000}");
    json_t *a = json_array_get(claim_jobs(r), 0);
    cr_assert_str_eq(jstr(a, "job"), "JOB1");
    json_t *rb = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\",\"lease_ms\":100}");
    json_t *b = json_array_get(claim_jobs(rb), 0);
    cr_assert_str_eq(jstr(b, "job"), "JOB2");
    long long b_until = jint(b, "lease_until");
    json_decref(rb);
    json_t *rel = OK(c,
                     "{\"op\":\"release\",\"queue\":\"o\",\"job\":\"%s\",\"lease\":\"%s\","
                     "\"error\":\"shutting down\"}",
                     jstr(a, "job"), jstr(a, "lease"));
    cr_assert_str_eq(jstr(rel, "state"), "pending");
    json_decref(rel);
    json_t *row = OK(c, "{\"op\":\"job\",\"queue\":\"o\",\"job\":\"%s\"}", jstr(a, "job"));
    cr_assert_str_eq(jstr(json_object_get(row, "job"), "error"), "shutting down");
    json_decref(row);
    json_decref(r);

    /* The other lease must run out: by Redis's clock, which the scripts
     * judge leases by. */
    await(redis_server_time_ms(&fx_redis) > b_until,
          "the 100 ms lease to run out by Redis's clock");
    json_t *rp = OK(c, "{\"op\":\"reap\",\"queue\":\"o\",\"group\":\"TENb\"}");
    /* The daemon's own reaper may have been first: 0 or 1, never more. */
    cr_assert_leq(jint(rp, "reaped"), 1);
    json_decref(rp);
    cr_assert_eq(depth(c, "TENa") + depth(c, "TENb"), 2, "both jobs are pending again");
    assert_check_clean(c, "o");
    tc_close(c);
}

/* With no upkeep pass (an hour away), only the daemon's timer for the
 * job's due time can promote it and hand it to the parked claim, whose
 * wait is an hour too. */
Test(ops, a_delayed_job_is_promoted_by_the_daemon)
{
    fx_teardown();
    const char *const extra[] = {"--upkeep-ms", "3600000", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    /* Name the queue and let its first upkeep pass end: a due time set
     * while a pass runs is left to that pass, which may have read the
     * delayed set before it, and so to the next pass, an hour away here. */
    json_decref(OK(c, "{\"op\":\"depth\",\"queue\":\"o\"}"));
    fx_await_quiet(&fx_emqd);
    long long before = redis_server_time_ms(&fx_redis);
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"o\",\"job\":\"JOBlater\",\"group\":\"TENa\","
                      "\"payload\":1,\"delay_ms\":500}"));
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"o\"}");
    json_t *jobs = claim_jobs(r);
    if (json_array_size(jobs) == 0) {
        /* Not claimable yet: a claim parked for it gets it once due. */
        json_decref(r);
        cr_assert_eq(tc_send_line(c, "{\"op\":\"claim\",\"queue\":\"o\",\"wait_ms\":3600000}"), 0);
        r = tc_read(c, wait_deadline_ms(0));
        cr_assert_not_null(r, "the delayed job was never promoted");
        jobs = claim_jobs(r);
    } else {
        /* This machine took longer than the delay to claim: a claim does
         * not promote, so the daemon's timer did, and not early. */
        cr_assert_geq(redis_server_time_ms(&fx_redis), before + 500, "claimed before it was due");
    }
    cr_assert_eq(json_array_size(jobs), 1, "promoted and handed to the claim");
    cr_assert_str_eq(jstr(json_array_get(jobs, 0), "job"), "JOBlater");
    json_decref(r);
    tc_close(c);
}

Test(ops, stream_credit_zero_stops_and_raising_it_resumes)
{
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"stream\",\"queue\":\"o\",\"credit\":0}"));
    enqueue(c, "o", "JOB1", "TENa");
    assert_nothing_pushed(c, "credit 0: nothing is pushed");
    json_decref(OK(c, "{\"op\":\"stream\",\"queue\":\"o\",\"credit\":1}"));
    json_t *p = tc_read(c, wait_deadline_ms(0));
    cr_assert_not_null(p, "credit raised: the job comes");
    cr_assert_str_eq(jstr(p, "job"), "JOB1");
    json_t *d = OK(c, "{\"op\":\"complete\",\"queue\":\"o\",\"job\":\"JOB1\",\"lease\":\"%s\"}",
                   jstr(p, "lease"));
    json_decref(d);
    json_decref(p);
    json_decref(OK(c, "{\"op\":\"stream\",\"queue\":\"o\",\"credit\":0}"));
    enqueue(c, "o", "JOB2", "TENa");
    assert_nothing_pushed(c, "stopped again: nothing is pushed");
    cr_assert_eq(depth(c, "TENa"), 1, "the job waits in its lane");
    tc_close(c);
}
