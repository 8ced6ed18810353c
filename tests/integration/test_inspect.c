/* Integration: looking inside a queue job by job (peek) and taking one
 * pending or delayed job out (remove), through the real emqd. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"

TestSuite(inspect, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

static void put(struct tc_conn *c, const char *job, const char *group, const char *extra)
{
    json_t *r = OK(
        c,
        "{\"op\":\"enqueue\",\"queue\":\"iq\",\"job\":\"%s\"%s%s%s,\"payload\":{\"j\":\"%s\"}%s}",
        job, group ? ",\"group\":\"" : "", group ? group : "", group ? "\"" : "", job,
        extra ? extra : "");
    cr_assert_str_eq(jstr(r, "verdict"), "enqueued");
    json_decref(r);
}

static void assert_clean(struct tc_conn *c)
{
    json_t *r = OK(c, "{\"op\":\"check\",\"queue\":\"iq\"}");
    cr_assert_eq(json_array_size(json_object_get(r, "violations")), 0);
    json_decref(r);
}

/* Page through what a peek request (without cursor or count) names, count
 * jobs at a time, into ids (cap of them); returns how many, asserting no
 * job comes twice and the last page ends with a null cursor. */
static size_t peek_all(struct tc_conn *c, const char *args, int count, char ids[][72], size_t cap,
                       int *pages)
{
    char cursor[96] = "";
    size_t n = 0;
    *pages = 0;
    for (;;) {
        json_t *r;
        if (cursor[0])
            r = OK(c, "{\"op\":\"peek\",\"queue\":\"iq\"%s,\"count\":%d,\"cursor\":\"%s\"}", args,
                   count, cursor);
        else
            r = OK(c, "{\"op\":\"peek\",\"queue\":\"iq\"%s,\"count\":%d}", args, count);
        (*pages)++;
        json_t *jobs = json_object_get(r, "jobs");
        cr_assert(json_is_array(jobs));
        for (size_t i = 0; i < json_array_size(jobs); i++) {
            const char *id = jstr(json_array_get(jobs, i), "job");
            for (size_t k = 0; k < n; k++)
                cr_assert_str_neq(ids[k], id, "%s on two pages", id);
            cr_assert_lt(n, cap);
            snprintf(ids[n++], 72, "%s", id);
        }
        json_t *next = json_object_get(r, "cursor");
        if (json_is_null(next)) {
            json_decref(r);
            return n;
        }
        cr_assert(json_is_string(next), "cursor is a string or null");
        snprintf(cursor, sizeof(cursor), "%s", json_string_value(next));
        json_decref(r);
        cr_assert_lt(*pages, 1000, "paging never ends");
    }
}

Test(inspect, peek_pages_a_lane_in_service_order_with_rows)
{
    struct tc_conn *c = fx_conn();
    /* 2,500 jobs in one lane, in three enqueue_many batches. */
    for (int b = 0; b < 3; b++) {
        char body[64 * 1000];
        size_t at = 0;
        for (int i = b * 1000; i < (b + 1) * 1000 && i < 2500; i++)
            at += (size_t)snprintf(body + at, sizeof(body) - at,
                                   "%s{\"job\":\"JOB%05d\",\"payload\":%d}", at ? "," : "", i, i);
        if (at == 0)
            break;
        json_decref(
            OK(c, "{\"op\":\"enqueue_many\",\"queue\":\"iq\",\"group\":\"TENa\",\"jobs\":[%s]}",
               body));
    }
    static char ids[3000][72];
    int pages;
    size_t n = peek_all(c, ",\"group\":\"TENa\"", 1000, ids, 3000, &pages);
    cr_assert_eq(n, 2500);
    cr_assert_eq(pages, 3);
    for (size_t i = 0; i < n; i++) {
        char want[32];
        snprintf(want, sizeof(want), "JOB%05zu", i);
        cr_assert_str_eq(ids[i], want, "service order is id order");
    }
    /* A row as job shows it: payload as JSON, no lease, no lease_by. */
    json_t *r = OK(c, "{\"op\":\"peek\",\"queue\":\"iq\",\"group\":\"TENa\",\"count\":1}");
    json_t *j = json_array_get(json_object_get(r, "jobs"), 0);
    cr_assert_str_eq(jstr(j, "state"), "pending");
    cr_assert_str_eq(jstr(j, "group"), "TENa");
    cr_assert_eq(json_integer_value(json_object_get(j, "payload")), 0);
    cr_assert_eq(jint(j, "attempts"), 0);
    cr_assert_str_eq(jstr(r, "cursor"), "JOB00000");
    json_decref(r);
    assert_clean(c);
    tc_close(c);
}

Test(inspect, peek_shows_the_flat_set_leases_delayed_and_dead)
{
    struct tc_conn *c = fx_conn();
    put(c, "JOBf1", NULL, NULL);
    put(c, "JOBf2", NULL, NULL);
    put(c, "JOBg1", "TENa", NULL);
    put(c, "JOBg2", "TENb", NULL);
    put(c, "JOBd1", NULL, ",\"delay_ms\":3600000");
    put(c, "JOBx1", "TENc", NULL);
    put(c, "JOBx2", "TENc", NULL);
    /* Leases of TENa, TENb, TENc (JOBx1); then JOBx1 is failed dead and
     * TENc's next job leased. */
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"iq\",\"count\":3,\"lease_ms\":600000}");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 3);
    const char *lease = NULL;
    for (size_t i = 0; i < 3; i++)
        if (strcmp(jstr(json_array_get(jobs, i), "job"), "JOBx1") == 0)
            lease = jstr(json_array_get(jobs, i), "lease");
    cr_assert_not_null(lease);
    json_decref(OK(c,
                   "{\"op\":\"fail\",\"queue\":\"iq\",\"job\":\"JOBx1\",\"lease\":\"%s\","
                   "\"error\":\"boom\",\"dead\":true}",
                   lease));
    json_decref(r);
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"iq\",\"lease_ms\":600000}");
    cr_assert_str_eq(jstr(json_array_get(claim_jobs(r), 0), "job"), "JOBx2");
    json_decref(r);

    static char ids[16][72];
    int pages;
    cr_assert_eq(peek_all(c, ",\"state\":\"active\",\"group\":\"TENc\"", 10, ids, 16, &pages), 1);
    cr_assert_str_eq(ids[0], "JOBx2");
    r = OK(c, "{\"op\":\"peek\",\"queue\":\"iq\",\"state\":\"active\",\"group\":\"TENc\"}");
    json_t *row = json_array_get(json_object_get(r, "jobs"), 0);
    cr_assert_str_eq(jstr(row, "state"), "active");
    cr_assert_null(json_object_get(row, "lease"), "peek does not show lease tokens");
    cr_assert_null(json_object_get(row, "lease_by"));
    json_decref(r);
    cr_assert_eq(peek_all(c, "", 1, ids, 16, &pages), 2, "the flat set");
    cr_assert_str_eq(ids[0], "JOBf1");
    cr_assert_str_eq(ids[1], "JOBf2");
    cr_assert_eq(pages, 2);
    cr_assert_eq(peek_all(c, ",\"state\":\"active\"", 2, ids, 16, &pages), 3);
    cr_assert_eq(pages, 2);
    cr_assert_eq(peek_all(c, ",\"state\":\"delayed\"", 10, ids, 16, &pages), 1);
    cr_assert_str_eq(ids[0], "JOBd1");
    cr_assert_eq(peek_all(c, ",\"state\":\"dead\"", 10, ids, 16, &pages), 1);
    cr_assert_str_eq(ids[0], "JOBx1");
    r = OK(c, "{\"op\":\"peek\",\"queue\":\"iq\",\"state\":\"dead\"}");
    cr_assert_str_eq(jstr(json_array_get(json_object_get(r, "jobs"), 0), "error"), "boom");
    json_decref(r);
    assert_clean(c);
    tc_close(c);
}

Test(inspect, bad_peeks_are_refused_and_change_nothing)
{
    struct tc_conn *c = fx_conn();
    put(c, "JOB1", "TENa", NULL);
    const char *bad[][2] = {
        {"{\"op\":\"peek\",\"queue\":\"iq\",\"state\":\"done\"}", "EARG"},
        {"{\"op\":\"peek\",\"queue\":\"iq\",\"state\":\"delayed\",\"group\":\"TENa\"}", "EARG"},
        {"{\"op\":\"peek\",\"queue\":\"iq\",\"state\":\"dead\",\"group\":\"TENa\"}", "EARG"},
        {"{\"op\":\"peek\",\"queue\":\"iq\",\"group\":\"TENa\",\"cursor\":\"x(\"}", "EARG"},
        {"{\"op\":\"peek\",\"queue\":\"iq\",\"state\":\"active\",\"cursor\":\"JOB1\"}", "EARG"},
        {"{\"op\":\"peek\",\"queue\":\"iq\",\"count\":0}", "EARG"},
        {"{\"op\":\"peek\",\"queue\":\"iq\",\"count\":1001}", "EARG"},
        {"{\"op\":\"peek\",\"queue\":\"iq\",\"group\":\"tena\"}", "EBRAND"},
        {"{\"op\":\"peek\",\"queue\":\"bad queue\"}", "EQUEUE"},
        {"{\"op\":\"remove\",\"queue\":\"iq\",\"job\":\"nope\"}", "EKIND"},
        {"{\"op\":\"remove\",\"queue\":\"iq\"}", "EARG"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_err_free(tc_call(c, "%s", bad[i][0]), bad[i][1]);
    /* peek on a queue nobody used registers nothing (a read). */
    json_decref(OK(c, "{\"op\":\"peek\",\"queue\":\"never\"}"));
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_eq(redis_int(rc, "SISMEMBER emq:queues never"), 0, "a peek registered the queue");
    redisFree(rc);
    cr_assert_eq(fx_stat(c, "iq", "pending"), 1);
    assert_clean(c);
    tc_close(c);
}

Test(inspect, remove_takes_out_one_pending_or_delayed_job)
{
    struct tc_conn *c = fx_conn();
    put(c, "JOBa1", "TENa", NULL);
    put(c, "JOBb1", "TENb", NULL);
    put(c, "JOBb2", "TENb", NULL);
    put(c, "JOBf1", NULL, NULL);
    put(c, "JOBd1", NULL, ",\"delay_ms\":3600000");
    json_t *r = OK(c, "{\"op\":\"remove\",\"queue\":\"iq\",\"job\":\"JOBa1\"}");
    cr_assert_str_eq(jstr(r, "state"), "pending");
    json_decref(r);
    assert_clean(c); /* TENa emptied: off the ring, check says so */
    r = OK(c, "{\"op\":\"remove\",\"queue\":\"iq\",\"job\":\"JOBb1\"}");
    json_decref(r);
    r = OK(c, "{\"op\":\"remove\",\"queue\":\"iq\",\"job\":\"JOBf1\"}");
    json_decref(r);
    r = OK(c, "{\"op\":\"remove\",\"queue\":\"iq\",\"job\":\"JOBd1\"}");
    cr_assert_str_eq(jstr(r, "state"), "delayed");
    json_decref(r);
    assert_err_free(tc_call(c, "{\"op\":\"job\",\"queue\":\"iq\",\"job\":\"JOBd1\"}"), "ENOJOB");
    assert_err_free(tc_call(c, "{\"op\":\"remove\",\"queue\":\"iq\",\"job\":\"JOBd1\"}"), "ENOJOB");
    /* What is left is served: JOBb2 only. */
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"iq\",\"count\":5}");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1);
    cr_assert_str_eq(jstr(json_array_get(jobs, 0), "job"), "JOBb2");
    /* A leased job cannot be removed. */
    assert_err_free(tc_call(c, "{\"op\":\"remove\",\"queue\":\"iq\",\"job\":\"JOBb2\"}"), "ESTATE");
    json_decref(r);
    assert_clean(c);
    tc_close(c);
}

/* Pipelined on one connection, enqueue / remove / enqueue of one id take
 * effect in the order sent: enqueued, removed pending, enqueued again. */
Test(inspect, remove_pipelined_between_enqueues_takes_effect_in_order)
{
    struct tc_conn *c = fx_conn();
    for (int round = 0; round < 100; round++) {
        char lines[512];
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"enqueue\",\"queue\":\"iq\",\"job\":\"JOBp%d\",\"group\":\"TENa\","
                 "\"payload\":1}\n"
                 "{\"op\":\"remove\",\"queue\":\"iq\",\"job\":\"JOBp%d\"}\n"
                 "{\"op\":\"enqueue\",\"queue\":\"iq\",\"job\":\"JOBp%d\",\"group\":\"TENa\","
                 "\"payload\":2}\n"
                 "{\"op\":\"peek\",\"queue\":\"iq\",\"group\":\"TENa\",\"count\":1000}\n",
                 round, round, round);
        cr_assert_eq(tc_send(c, lines, strlen(lines)), 0);
        json_t *a = tc_read(c, wait_deadline_ms(0)), *b = tc_read(c, wait_deadline_ms(0));
        json_t *d = tc_read(c, wait_deadline_ms(0)), *p = tc_read(c, wait_deadline_ms(0));
        cr_assert_str_eq(jstr(a, "verdict"), "enqueued", "round %d", round);
        cr_assert_str_eq(jstr(b, "state"), "pending", "round %d: remove ran before the enqueue",
                         round);
        cr_assert_str_eq(jstr(d, "verdict"), "enqueued", "round %d: the second enqueue ran first",
                         round);
        json_t *jobs = json_object_get(p, "jobs");
        cr_assert_eq(json_array_size(jobs), (size_t)round + 1, "round %d: the peek ran early",
                     round);
        cr_assert_eq(
            json_integer_value(json_object_get(json_array_get(jobs, (size_t)round), "payload")), 2);
        json_decref(a);
        json_decref(b);
        json_decref(d);
        json_decref(p);
    }
    assert_clean(c);
    tc_close(c);
}
