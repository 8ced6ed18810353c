/* Integration: the cap op through emqd (PROTOCOL.md 5.32, 6.15): bad caps
 * are refused before the backend and write nothing; a cap pipelined with
 * enqueues on one connection takes effect in order; a full lane refuses
 * enqueue with EFULL naming the group and the cap, and enqueue_many item by
 * item while the rest of the batch is admitted; a cap lowered below a lane
 * removes nothing; groups, stats and the metrics show it. The real emqd
 * against a real redis-server. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"

TestSuite(cap, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

/* The row of group g in a groups reply (asserting it is there). */
static json_t *group_row(json_t *reply, const char *g)
{
    json_t *list = json_object_get(reply, "groups");
    for (size_t i = 0; i < json_array_size(list); i++)
        if (strcmp(jstr(json_array_get(list, i), "group"), g) == 0)
            return json_array_get(list, i);
    cr_assert_fail("groups does not list %s", g);
    return NULL;
}

/* A refusal by a lane's cap: EFULL with the job, the group, the cap and
 * where it comes from. */
static void assert_full(json_t *r, const char *group, long long cap, const char *from)
{
    char *d = json_dumps(r, JSON_COMPACT);
    cr_assert_str_eq(jstr(r, "error"), "EFULL", "%s", d);
    cr_assert_str_eq(jstr(r, "group"), group, "%s", d);
    cr_assert_eq(jint(r, "cap"), cap, "%s", d);
    cr_assert_str_eq(jstr(r, "cap_from"), from, "%s", d);
    cr_assert(strncmp(jstr(r, "job"), "JOB", 3) == 0, "the job is named, for a retry: %s", d);
    free(d);
}

Test(cap, bad_caps_are_refused_before_the_backend_and_write_nothing)
{
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"cb\",\"group\":\"TENa\",\"payload\":1}"));
    long long keys = fx_redis_dbsize();
    const char *bad[] = {"0", "-1", "\"2\"", "1.5", "true", "[]", "1000000001"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_err_free(
            tc_call(c, "{\"op\":\"cap\",\"queue\":\"cb\",\"group\":\"TENa\",\"max_pending\":%s}",
                    bad[i]),
            "EARG");
    assert_err_free(tc_call(c, "{\"op\":\"cap\",\"queue\":\"cb\",\"group\":\"TENa\"}"), "EARG");
    assert_err_free(tc_call(c, "{\"op\":\"cap\",\"queue\":\"cb\",\"max_pending\":0}"), "EARG");
    assert_err_free(
        tc_call(c, "{\"op\":\"cap\",\"queue\":\"cb\",\"group\":\"bad\",\"max_pending\":2}"),
        "EBRAND");
    assert_err_free(tc_call(c, "{\"op\":\"cap\",\"queue\":\"cb\",\"group\":\"TENa\","
                               "\"max_pending\":2,\"extra\":1}"),
                    "EARG");
    cr_assert_eq(fx_redis_dbsize(), keys, "a refused cap wrote nothing");
    json_decref(
        OK(c, "{\"op\":\"cap\",\"queue\":\"cb\",\"group\":\"TENa\",\"max_pending\":1000000000}"));
    json_decref(OK(c, "{\"op\":\"cap\",\"queue\":\"cb\",\"group\":\"TENa\",\"max_pending\":null}"));
    assert_check_clean(c, "cb");
    tc_close(c);
}

/* Append one formatted line to buf (of cap bytes, NUL-terminated). */
static void __attribute__((format(printf, 3, 4))) add(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
    cr_assert(n > 0 && (size_t)n < cap - used, "the pipeline fits its buffer");
}

static void add_enqueue(char *buf, size_t cap, const char *q, const char *g, const char *job)
{
    add(buf, cap,
        "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"%s\",\"job\":\"%s\",\"payload\":1}\n", q,
        g, job);
}

/* cap, three enqueues, cap null, an enqueue, a default cap, two enqueues of
 * another group and one more of the first, in one write, on fresh queues:
 * each enqueue sees the cap sent before it. */
Test(cap, pipelined_cap_then_enqueues_take_effect_in_order)
{
    struct tc_conn *c = fx_conn();
    char lines[4096], q[16];
    for (int i = 0; i < 20; i++) {
        snprintf(q, sizeof(q), "cp%d", i);
        lines[0] = '\0';
        add(lines, sizeof(lines),
            "{\"op\":\"cap\",\"queue\":\"%s\",\"group\":\"TENa\",\"max_pending\":2}\n", q);
        add_enqueue(lines, sizeof(lines), q, "TENa", "JOBa1");
        add_enqueue(lines, sizeof(lines), q, "TENa", "JOBa2");
        add_enqueue(lines, sizeof(lines), q, "TENa", "JOBa3");
        add(lines, sizeof(lines),
            "{\"op\":\"cap\",\"queue\":\"%s\",\"group\":\"TENa\",\"max_pending\":null}\n", q);
        add_enqueue(lines, sizeof(lines), q, "TENa", "JOBa3");
        add(lines, sizeof(lines), "{\"op\":\"cap\",\"queue\":\"%s\",\"max_pending\":1}\n", q);
        add_enqueue(lines, sizeof(lines), q, "TENb", "JOBb1");
        add_enqueue(lines, sizeof(lines), q, "TENb", "JOBb2");
        add_enqueue(lines, sizeof(lines), q, "TENa", "JOBa4");
        cr_assert_eq(tc_send(c, lines, strlen(lines)), 0);
        json_t *r[10];
        for (int k = 0; k < 10; k++)
            cr_assert_not_null(r[k] = tc_read(c, wait_deadline_ms(0)));
        const bool ok[10] = {true, true, true, false, true, true, true, true, false, false};
        for (int k = 0; k < 10; k++)
            cr_assert_eq(tc_ok(r[k]), ok[k], "round %d, reply %d", i, k);
        assert_full(r[3], "TENa", 2, "group");
        cr_assert_str_eq(jstr(r[5], "verdict"), "enqueued", "no cap once it is removed");
        assert_full(r[8], "TENb", 1, "queue");
        assert_full(r[9], "TENa", 1, "queue");
        for (int k = 0; k < 10; k++)
            json_decref(r[k]);
        cr_assert_eq(fx_stat(c, q, "pending"), 4, "a1, a2, a3, b1");
        assert_check_clean(c, q);
    }
    tc_close(c);
}

Test(cap, enqueue_many_admits_the_rest_of_a_batch)
{
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"cap\",\"queue\":\"cm\",\"group\":\"TENa\",\"max_pending\":2}"));
    long long before = emqd_metric(&fx_emqd, "emqd_refused_total{queue=\"cm\",reason=\"cap\"}");
    json_t *r = OK(c, "{\"op\":\"enqueue_many\",\"queue\":\"cm\",\"group\":\"TENa\",\"jobs\":["
                      "{\"payload\":1},{\"payload\":2,\"delay_ms\":60000},{\"payload\":3},"
                      "{\"payload\":4,\"group\":\"TENb\"},{\"job\":\"JOBx\",\"payload\":5}]}");
    json_t *res = json_object_get(r, "results");
    cr_assert_eq(json_array_size(res), 5);
    cr_assert_str_eq(jstr(json_array_get(res, 0), "verdict"), "enqueued");
    cr_assert_str_eq(jstr(json_array_get(res, 1), "verdict"), "enqueued", "delayed counts too");
    assert_full(json_array_get(res, 2), "TENa", 2, "group");
    cr_assert_str_eq(jstr(json_array_get(res, 3), "verdict"), "enqueued", "another lane");
    assert_full(json_array_get(res, 4), "TENa", 2, "group");
    cr_assert_str_eq(jstr(json_array_get(res, 4), "job"), "JOBx");
    json_decref(r);
    /* Nothing was written for the refused items. */
    json_t *job = tc_call(c, "{\"op\":\"job\",\"queue\":\"cm\",\"job\":\"JOBx\"}");
    assert_err(job, "ENOJOB");
    json_decref(job);
    json_t *g = OK(c, "{\"op\":\"groups\",\"queue\":\"cm\"}");
    json_t *a = group_row(g, "TENa");
    cr_assert(jint(a, "depth") == 1 && jint(a, "delayed") == 1 && jint(a, "cap") == 2);
    cr_assert_str_eq(jstr(a, "cap_from"), "group");
    cr_assert(json_is_null(json_object_get(group_row(g, "TENb"), "cap")));
    json_decref(g);
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_refused_total{queue=\"cm\",reason=\"cap\"}"),
                 before + 2);
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_group_cap{queue=\"cm\",group=\"TENa\"}"), 2);
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_group_delayed{queue=\"cm\",group=\"TENa\"}"), 1);
    assert_check_clean(c, "cm");
    tc_close(c);
}

/* Lowered below what the lane holds, a cap removes nothing: new enqueues
 * are refused until consumers bring the lane under it. */
Test(cap, a_cap_lowered_below_the_lane_refuses_until_it_drains)
{
    struct tc_conn *c = fx_conn();
    for (int i = 0; i < 5; i++)
        json_decref(OK(c,
                       "{\"op\":\"enqueue\",\"queue\":\"cl\",\"group\":\"TENa\",\"job\":\"JOB%d\","
                       "\"payload\":1}",
                       i));
    json_decref(OK(c, "{\"op\":\"cap\",\"queue\":\"cl\",\"max_pending\":2}"));
    json_t *s = OK(c, "{\"op\":\"stats\",\"queue\":\"cl\"}");
    cr_assert_eq(jint(json_object_get(s, "defaults"), "cap"), 2);
    json_decref(s);
    cr_assert_eq(fx_stat(c, "cl", "pending"), 5, "nothing removed");
    for (int left = 5; left >= 2; left--) {
        json_t *r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"cl\",\"group\":\"TENa\","
                               "\"payload\":1}");
        assert_full(r, "TENa", 2, "queue");
        json_decref(r);
        json_t *cl = OK(c, "{\"op\":\"claim\",\"queue\":\"cl\",\"count\":1,\"lease_ms\":60000}");
        cr_assert_eq(json_array_size(claim_jobs(cl)), 1);
        json_decref(cl);
    }
    cr_assert_eq(fx_stat(c, "cl", "pending"), 1);
    json_t *r = OK(c, "{\"op\":\"enqueue\",\"queue\":\"cl\",\"group\":\"TENa\",\"payload\":1}");
    cr_assert_str_eq(jstr(r, "verdict"), "enqueued", "under the cap again");
    json_decref(r);
    assert_check_clean(c, "cl");
    tc_close(c);
}
