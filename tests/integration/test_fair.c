/* Integration: the weight op through emqd (PROTOCOL.md 5.26, 6.12):
 * validated before the backend, pipelined on one connection in order
 * with the claims it steers, shown by groups and the metrics, and obeyed
 * by a stream. The real emqd against a real redis-server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"

TestSuite(fair, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

static void enqueue_n(struct tc_conn *c, const char *q, const char *group, int n)
{
    for (int i = 0; i < n; i++)
        json_decref(
            OK(c,
               "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"%s\",\"job\":\"JOB%s-%03d\","
               "\"payload\":1}",
               q, group, group, i));
}

/* The groups of a claim reply's jobs, the fourth letter of each ("a,b"). */
static void groups_of(json_t *jobs, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < json_array_size(jobs) && used < cap; i++)
        used += snprintf(out + used, cap - used, "%s%c", i ? "," : "",
                         jstr(json_array_get(jobs, i), "group")[3]);
}

static long long glimit_fields(const char *queue)
{
    redisContext *r = redis_server_connect(&fx_redis);
    cr_assert_not_null(r);
    redisReply *n = redisCommand(r, "HLEN emq:{%s}:glimit", queue);
    cr_assert(n != NULL && n->type == REDIS_REPLY_INTEGER);
    long long v = n->integer;
    freeReplyObject(n);
    redisFree(r);
    return v;
}

Test(fair, bad_weights_are_refused_before_the_backend_and_write_nothing)
{
    struct tc_conn *c = fx_conn();
    enqueue_n(c, "fw", "TENa", 1);
    const char *bad[] = {"0", "1001", "-1", "\"2\"", "1.5", "true", "[]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_err_free(
            tc_call(c, "{\"op\":\"weight\",\"queue\":\"fw\",\"group\":\"TENa\",\"weight\":%s}",
                    bad[i]),
            "EARG");
    assert_err_free(tc_call(c, "{\"op\":\"weight\",\"queue\":\"fw\",\"group\":\"TENa\"}"), "EARG");
    assert_err_free(tc_call(c, "{\"op\":\"weight\",\"queue\":\"fw\",\"weight\":2}"), "EARG");
    assert_err_free(
        tc_call(c, "{\"op\":\"weight\",\"queue\":\"fw\",\"group\":\"bad\",\"weight\":2}"),
        "EBRAND");
    assert_err_free(tc_call(c, "{\"op\":\"weight\",\"queue\":\"fw\",\"group\":\"TENa\","
                               "\"weight\":2,\"extra\":1}"),
                    "EARG");
    cr_assert_eq(glimit_fields("fw"), 0, "a refused weight wrote nothing");
    json_decref(OK(c, "{\"op\":\"weight\",\"queue\":\"fw\",\"group\":\"TENa\",\"weight\":1000}"));
    json_decref(OK(c, "{\"op\":\"weight\",\"queue\":\"fw\",\"group\":\"TENa\",\"weight\":1}"));
    cr_assert_eq(glimit_fields("fw"), 2, "the bounds are accepted: w:TENa and weighted");
    assert_check_clean(c, "fw");
    tc_close(c);
}

/* weight, claim, weight null, claim, groups, all in one write, rounds of
 * them on fresh queues: each claim sees the weight sent before it. */
Test(fair, pipelined_weight_then_claim_takes_effect_in_order)
{
    struct tc_conn *c = fx_conn();
    char lines[2048], q[16], got[64];
    for (int i = 0; i < 40; i++) {
        snprintf(q, sizeof(q), "fp%d", i);
        enqueue_n(c, q, "TENa", 6);
        enqueue_n(c, q, "TENb", 6);
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"weight\",\"queue\":\"%s\",\"group\":\"TENa\",\"weight\":3}\n"
                 "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":4}\n"
                 "{\"op\":\"groups\",\"queue\":\"%s\"}\n"
                 "{\"op\":\"weight\",\"queue\":\"%s\",\"group\":\"TENa\",\"weight\":null}\n"
                 "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":4}\n"
                 "{\"op\":\"groups\",\"queue\":\"%s\"}\n",
                 q, q, q, q, q, q);
        cr_assert_eq(tc_send(c, lines, strlen(lines)), 0);
        json_t *r[6];
        for (int k = 0; k < 6; k++) {
            r[k] = tc_read(c, wait_deadline_ms(0));
            assert_ok(r[k]);
        }
        groups_of(claim_jobs(r[1]), got, sizeof(got));
        cr_assert_str_eq(got, "a,a,a,b", "round %d: weight 3, then one of b", i);
        groups_of(claim_jobs(r[4]), got, sizeof(got));
        cr_assert_str_eq(got, "a,b,a,b", "round %d: reset to 1, plain rotation", i);
        for (int k = 2; k <= 5; k += 3) {
            json_t *list = json_object_get(r[k], "groups");
            for (size_t e = 0; e < json_array_size(list); e++) {
                json_t *g = json_array_get(list, e);
                long long want = k == 2 && strcmp(jstr(g, "group"), "TENa") == 0 ? 3 : 1;
                cr_assert_eq(jint(g, "weight"), want, "round %d: %s's weight", i, jstr(g, "group"));
            }
        }
        for (int k = 0; k < 6; k++)
            json_decref(r[k]);
    }
    assert_check_clean(c, "fp0");
    tc_close(c);
}

/* A stream of credit 1 that settles each job before the next: the turns
 * of a weighted lane span the pump's claims of one job. */
Test(fair, a_stream_settling_one_at_a_time_sees_whole_weighted_turns)
{
    struct tc_conn *c = fx_conn(), *w = fx_conn();
    enqueue_n(c, "fs", "TENa", 8);
    enqueue_n(c, "fs", "TENb", 8);
    json_decref(OK(c, "{\"op\":\"weight\",\"queue\":\"fs\",\"group\":\"TENb\",\"weight\":3}"));
    json_decref(OK(w, "{\"op\":\"stream\",\"queue\":\"fs\",\"credit\":1,\"lease_ms\":60000}"));
    char got[64] = "";
    size_t used = 0;
    for (int i = 0; i < 8; i++) {
        json_t *p = tc_read(w, wait_deadline_ms(0));
        cr_assert_not_null(p, "push %d never came", i);
        cr_assert_str_eq(jstr(p, "push"), "job");
        used += snprintf(got + used, sizeof(got) - used, "%s%c", i ? "," : "", jstr(p, "group")[3]);
        json_t *r =
            tc_call(w, "{\"op\":\"complete\",\"queue\":\"fs\",\"job\":\"%s\",\"lease\":\"%s\"}",
                    jstr(p, "job"), jstr(p, "lease"));
        /* With a credit of 1 and the job unsettled, no push can come
         * before this reply. */
        cr_assert(r != NULL && json_object_get(r, "push") == NULL, "a push beyond the credit");
        assert_ok(r);
        json_decref(r);
        json_decref(p);
    }
    cr_assert_str_eq(got, "a,b,b,b,a,b,b,b");
    tc_close(w);
    assert_check_clean(c, "fs");
    tc_close(c);
}

Test(fair, the_metrics_show_each_groups_weight)
{
    struct tc_conn *c = fx_conn();
    enqueue_n(c, "fm", "TENa", 2);
    enqueue_n(c, "fm", "TENb", 1);
    json_decref(OK(c, "{\"op\":\"weight\",\"queue\":\"fm\",\"group\":\"TENa\",\"weight\":7}"));
    tc_close(c);
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_group_weight{queue=\"fm\",group=\"TENa\"}"), 7);
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_group_weight{queue=\"fm\",group=\"TENb\"}"), 1);
}
