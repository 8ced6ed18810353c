/* Integration: the weight and rate ops through emqd (PROTOCOL.md 5.26,
 * 5.27, 6.12, 6.13), and the queue-wide defaults of limit, weight and rate
 * (6.14): validated before the backend, pipelined on one
 * connection in order with the claims they steer, shown by groups and the
 * metrics, obeyed by a stream; a parked claim wakes when a lane held by
 * its rate may be leased again. The real emqd against a real
 * redis-server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"

TestSuite(fair, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

/* A daemon whose regular upkeep pass comes only once a minute: a parked
 * claim served sooner was woken by the rate's due time. */
static void slow_upkeep(void)
{
    const char *const extra[] = {"--upkeep-ms", "60000", NULL};
    fx_start(extra);
}

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

/* Send lines (each ending in \n) in one write, then read n replies in
 * order into out, each asserted ok. */
static void pipeline_ok(struct tc_conn *c, const char *lines, json_t **out, int n)
{
    cr_assert_eq(tc_send(c, lines, strlen(lines)), 0);
    for (int k = 0; k < n; k++) {
        out[k] = tc_read(c, wait_deadline_ms(0));
        assert_ok(out[k]);
    }
}

static void free_all(json_t **r, int n)
{
    for (int k = 0; k < n; k++)
        json_decref(r[k]);
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
        json_t *r[6];
        pipeline_ok(c, lines, r, 6);
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
        free_all(r, 6);
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

Test(fair, bad_rates_are_refused_before_the_backend_and_write_nothing)
{
    struct tc_conn *c = fx_conn();
    enqueue_n(c, "fr", "TENa", 1);
    const char *bad[] = {
        "\"max\":0,\"per_ms\":10",     "\"max\":1000001,\"per_ms\":10",
        "\"max\":1,\"per_ms\":0",      "\"max\":1,\"per_ms\":86400001",
        "\"max\":\"1\",\"per_ms\":10", "\"max\":1",
        "\"max\":null,\"per_ms\":10",  "\"per_ms\":10",
        "\"max\":1,\"per_ms\":1.5",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_err_free(
            tc_call(c, "{\"op\":\"rate\",\"queue\":\"fr\",\"group\":\"TENa\",%s}", bad[i]), "EARG");
    assert_err_free(tc_call(c, "{\"op\":\"rate\",\"queue\":\"fr\",\"group\":\"bad\",\"max\":1,"
                               "\"per_ms\":10}"),
                    "EBRAND");
    cr_assert_eq(glimit_fields("fr"), 0, "a refused rate wrote nothing");
    json_decref(OK(c, "{\"op\":\"rate\",\"queue\":\"fr\",\"group\":\"TENa\",\"max\":1000000,"
                      "\"per_ms\":86400000}"));
    json_decref(OK(c, "{\"op\":\"rate\",\"queue\":\"fr\",\"group\":\"TENa\",\"max\":null}"));
    cr_assert_eq(glimit_fields("fr"), 0, "removed");
    assert_check_clean(c, "fr");
    tc_close(c);
}

/* rate, claim, groups, rate null, claim in one write, on fresh queues:
 * the first claim takes one job of the rated lane; the group shows its
 * rate and that it is held; without the rate it is served again. */
Test(fair, pipelined_rate_then_claim_takes_effect_in_order)
{
    struct tc_conn *c = fx_conn();
    char lines[2048], q[16], got[64];
    for (int i = 0; i < 30; i++) {
        snprintf(q, sizeof(q), "fq%d", i);
        enqueue_n(c, q, "TENa", 4);
        enqueue_n(c, q, "TENb", 2);
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"rate\",\"queue\":\"%s\",\"group\":\"TENa\",\"max\":1,"
                 "\"per_ms\":60000}\n"
                 "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":6}\n"
                 "{\"op\":\"groups\",\"queue\":\"%s\"}\n"
                 "{\"op\":\"rate\",\"queue\":\"%s\",\"group\":\"TENa\",\"max\":null}\n"
                 "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":6}\n",
                 q, q, q, q, q);
        json_t *r[5];
        pipeline_ok(c, lines, r, 5);
        groups_of(claim_jobs(r[1]), got, sizeof(got));
        cr_assert_str_eq(got, "a,b,b", "round %d: one lease of the rated lane", i);
        json_t *list = json_object_get(r[2], "groups");
        for (size_t e = 0; e < json_array_size(list); e++) {
            json_t *g = json_array_get(list, e);
            bool a = strcmp(jstr(g, "group"), "TENa") == 0;
            json_t *rt = json_object_get(g, "rate");
            cr_assert(a ? jint(rt, "max") == 1 && jint(rt, "per_ms") == 60000 : json_is_null(rt),
                      "round %d: %s's rate", i, jstr(g, "group"));
            cr_assert(json_is_boolean(json_object_get(g, "throttled")));
            cr_assert_eq(json_is_true(json_object_get(g, "throttled")), a,
                         "round %d: only TENa is held", i);
        }
        groups_of(claim_jobs(r[4]), got, sizeof(got));
        cr_assert_str_eq(got, "a,a,a", "round %d: the rate removed, TENa is served again", i);
        free_all(r, 5);
    }
    assert_check_clean(c, "fq0");
    tc_close(c);
}

/* A parked claim is answered with the rated lane's next job once its rate
 * allows it, by the due-time message, not the regular upkeep pass (a
 * minute here): the lease comes at least one period after the first. */
Test(fair, a_parked_claim_wakes_when_the_rate_allows_the_next_lease, .init = slow_upkeep)
{
    struct tc_conn *c = fx_conn();
    enqueue_n(c, "fz", "TENa", 2);
    json_decref(
        OK(c, "{\"op\":\"rate\",\"queue\":\"fz\",\"group\":\"TENa\",\"max\":1,\"per_ms\":400}"));
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"fz\",\"count\":2,\"lease_ms\":60000}");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1);
    long long first = jint(json_array_get(jobs, 0), "lease_until") - 60000;
    json_decref(r);
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"fz\",\"count\":2,\"lease_ms\":60000,"
                   "\"wait_ms\":30000}");
    jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1, "the parked claim got the second job");
    json_t *j = json_array_get(jobs, 0);
    cr_assert_str_eq(jstr(j, "job"), "JOBTENa-001");
    long long second = jint(j, "lease_until") - 60000;
    cr_assert_geq(second - first, 400, "leased %lld ms after the first", second - first);
    cr_assert_lt(second - first, 30000, "woken by the due time, not the claim's own wait");
    json_decref(r);
    assert_check_clean(c, "fz");
    tc_close(c);
}

Test(fair, the_metrics_show_each_groups_rate_and_whether_it_is_held)
{
    struct tc_conn *c = fx_conn();
    enqueue_n(c, "fn", "TENa", 7);
    json_decref(
        OK(c, "{\"op\":\"rate\",\"queue\":\"fn\",\"group\":\"TENa\",\"max\":5,\"per_ms\":60000}"));
    json_t *r = OK(c, "{\"op\":\"claim\",\"queue\":\"fn\",\"count\":10}");
    cr_assert_eq(json_array_size(claim_jobs(r)), 5, "the rate's five, and no more");
    json_decref(r);
    tc_close(c);
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_group_rate_max{queue=\"fn\",group=\"TENa\"}"), 5);
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_group_rate_period_ms{queue=\"fn\",group=\"TENa\"}"),
                 60000);
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_group_throttled{queue=\"fn\",group=\"TENa\"}"), 1);
}

/* The defaults' bad input: refused before the backend, nothing written. */
Test(fair, bad_defaults_are_refused_before_the_backend_and_write_nothing)
{
    struct tc_conn *c = fx_conn();
    enqueue_n(c, "fd", "TENa", 1);
    const char *bad[] = {
        "{\"op\":\"limit\",\"queue\":\"fd\",\"max\":-1}",
        "{\"op\":\"limit\",\"queue\":\"fd\",\"max\":\"2\"}",
        "{\"op\":\"limit\",\"queue\":\"fd\"}",
        "{\"op\":\"limit\",\"queue\":\"fd\",\"group\":\"\",\"max\":2}",
        "{\"op\":\"weight\",\"queue\":\"fd\",\"weight\":0}",
        "{\"op\":\"weight\",\"queue\":\"fd\",\"weight\":1001}",
        "{\"op\":\"rate\",\"queue\":\"fd\",\"max\":5}",
        "{\"op\":\"rate\",\"queue\":\"fd\",\"max\":null,\"per_ms\":10}",
        "{\"op\":\"rate\",\"queue\":\"fd\",\"max\":0,\"per_ms\":10}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *r = tc_call(c, "%s", bad[i]);
        cr_assert(r != NULL && json_is_false(json_object_get(r, "ok")), "accepted: %s", bad[i]);
        json_decref(r);
    }
    cr_assert_eq(glimit_fields("fd"), 0, "a refused default wrote nothing");
    assert_check_clean(c, "fd");
    tc_close(c);
}

/* limit without a group, claims, stats, groups, the group's own limit,
 * and the default removed, in one write on fresh queues: each reply sees
 * what was sent before it, and says where each setting comes from. */
Test(fair, pipelined_defaults_take_effect_in_order_and_show_their_source)
{
    struct tc_conn *c = fx_conn();
    char lines[4096], q[16], got[64];
    for (int i = 0; i < 20; i++) {
        snprintf(q, sizeof(q), "fq%d", i);
        enqueue_n(c, q, "TENa", 6);
        enqueue_n(c, q, "TENb", 6);
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"limit\",\"queue\":\"%s\",\"max\":1}\n"
                 "{\"op\":\"limit\",\"queue\":\"%s\",\"group\":\"TENb\",\"max\":2}\n"
                 "{\"op\":\"weight\",\"queue\":\"%s\",\"weight\":4}\n"
                 "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":10}\n"
                 "{\"op\":\"stats\",\"queue\":\"%s\"}\n"
                 "{\"op\":\"groups\",\"queue\":\"%s\"}\n"
                 "{\"op\":\"limit\",\"queue\":\"%s\",\"max\":null}\n"
                 "{\"op\":\"weight\",\"queue\":\"%s\",\"weight\":null}\n"
                 "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":4}\n"
                 "{\"op\":\"groups\",\"queue\":\"%s\"}\n",
                 q, q, q, q, q, q, q, q, q, q);
        json_t *r[10];
        pipeline_ok(c, lines, r, 10);
        groups_of(claim_jobs(r[3]), got, sizeof(got));
        cr_assert_str_eq(got, "a,b,b", "round %d: a by the default 1, b by its own 2", i);
        json_t *d = json_object_get(r[4], "defaults");
        cr_assert_eq(jint(d, "limit"), 1, "round %d: stats shows the default", i);
        cr_assert_eq(jint(d, "weight"), 4);
        cr_assert(json_is_null(json_object_get(d, "rate")));
        json_t *list = json_object_get(r[5], "groups");
        cr_assert_eq(json_array_size(list), 2);
        for (size_t e = 0; e < 2; e++) {
            json_t *g = json_array_get(list, e);
            bool a = strcmp(jstr(g, "group"), "TENa") == 0;
            cr_assert_eq(jint(g, "limit"), a ? 1 : 2, "round %d", i);
            cr_assert_str_eq(jstr(g, "limit_from"), a ? "queue" : "group");
            cr_assert_eq(jint(g, "weight"), 4);
            cr_assert_str_eq(jstr(g, "weight_from"), "queue");
            cr_assert(json_is_null(json_object_get(g, "rate_from")));
        }
        /* The default gone: a has no ceiling (1 active, 5 pending), b keeps
         * its own 2 (2 active): only a is served. */
        groups_of(claim_jobs(r[8]), got, sizeof(got));
        cr_assert_str_eq(got, "a,a,a,a", "round %d: the default removed", i);
        list = json_object_get(r[9], "groups");
        for (size_t e = 0; e < json_array_size(list); e++) {
            json_t *g = json_array_get(list, e);
            bool a = strcmp(jstr(g, "group"), "TENa") == 0;
            if (a) {
                cr_assert(json_is_null(json_object_get(g, "limit")));
                cr_assert(json_is_null(json_object_get(g, "limit_from")));
            } else {
                cr_assert_str_eq(jstr(g, "limit_from"), "group");
            }
            cr_assert(json_is_null(json_object_get(g, "weight_from")));
        }
        free_all(r, 10);
    }
    assert_check_clean(c, "fq0");
    tc_close(c);
}

/* A default over more lanes than one step of the re-place walk takes
 * (lua/lib.lua: replace_begin; 128 per step): the steps go right behind
 * the limit call, so a claim pipelined after it on the same connection
 * finds every lane placed: exactly one job of each of 800 groups under a
 * default ceiling of 1, then, the ceiling removed, the other one of each. */
Test(fair, a_claim_pipelined_after_a_default_over_many_groups_sees_every_lane_placed)
{
    struct tc_conn *c = fx_conn();
    enum { G = 800 };
    json_t *jobs = json_array();
    for (int i = 0; i < G; i++) {
        char g[24];
        snprintf(g, sizeof(g), "TENw%03d", i);
        for (int k = 0; k < 2; k++)
            json_array_append_new(jobs, json_pack("{s:s, s:i}", "group", g, "payload", i));
    }
    json_t *req = json_pack("{s:s, s:s, s:o}", "op", "enqueue_many", "queue", "fm", "jobs", jobs);
    char *line = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    json_decref(OK(c, "%s", line));
    free(line);
    /* Claims of at most 1000 (the bound) of which the first takes 600:
     * the second's 200 are the rest, nothing more. */
    const char *claim = "{\"op\":\"claim\",\"queue\":\"fm\",\"count\":600,\"lease_ms\":60000}\n";
    char lines[1024];
    snprintf(lines, sizeof(lines),
             "{\"op\":\"limit\",\"queue\":\"fm\",\"max\":1}\n%s%s"
             "{\"op\":\"limit\",\"queue\":\"fm\",\"max\":null}\n%s%s",
             claim, claim, claim, claim);
    json_t *r[6];
    pipeline_ok(c, lines, r, 6);
    cr_assert_eq(json_array_size(claim_jobs(r[1])) + json_array_size(claim_jobs(r[2])), G,
                 "one of each group, every lane placed");
    cr_assert_eq(json_array_size(claim_jobs(r[4])) + json_array_size(claim_jobs(r[5])), G,
                 "then the other of each");
    free_all(r, 6);
    assert_check_clean(c, "fm");
    tc_close(c);
}
