/* One connection is an ordered session (PROTOCOL.md 2.2): requests a
 * client pipelines on one connection that name the same queue take
 * effect in the order sent, not only their replies. Each test sends a
 * pair (or a few) of lines in one write, hundreds of rounds, and checks
 * that the later request saw every effect of the earlier ones. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "monitor.h"

TestSuite(order, .init = fx_setup, .fini = fx_teardown, .timeout = 240);

#define ROUNDS 200

/* Send lines (each ending in \n) in one write, then read n replies, in
 * order, into out (each asserted to be a reply). */
static void pipeline(struct tc_conn *c, const char *lines, json_t **out, int n)
{
    cr_assert_eq(tc_send(c, lines, strlen(lines)), 0);
    for (int i = 0; i < n; i++) {
        out[i] = tc_read(c, wait_deadline_ms(0));
        cr_assert_not_null(out[i], "reply %d of %d never came", i + 1, n);
    }
}

static void free_all(json_t **r, int n)
{
    for (int i = 0; i < n; i++)
        json_decref(r[i]);
}

/* Send one request and wait for its reply, asserting it is ok. */
#define CALL_OK(c, ...)                                                                            \
    ({                                                                                             \
        json_t *ok_ = tc_call((c), __VA_ARGS__);                                                   \
        assert_ok(ok_);                                                                            \
        ok_;                                                                                       \
    })

/* The one job a claim reply holds (asserted), as a new reference. */
static json_t *only_job(json_t *reply)
{
    json_t *jobs = claim_jobs(reply);
    cr_assert_eq(json_array_size(jobs), 1, "expected one job, got %zu", json_array_size(jobs));
    return json_incref(json_array_get(jobs, 0));
}

/* Enqueue one job (waiting for it) and claim it; the claimed job. */
static json_t *enqueue_and_claim(struct tc_conn *c, const char *q, const char *g, const char *id)
{
    json_decref(CALL_OK(
        c, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"%s\",\"job\":\"%s\",\"payload\":1}", q,
        g, id));
    json_t *r = CALL_OK(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":1}", q);
    json_t *job = only_job(r);
    json_decref(r);
    cr_assert_str_eq(jstr(job, "job"), id);
    return job;
}

Test(order, enqueue_then_claim_leases_that_job)
{
    struct tc_conn *c = fx_conn();
    char lines[512], id[32];
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r[2];
        snprintf(id, sizeof(id), "JOBec-%05d", i);
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"enqueue\",\"queue\":\"oec\",\"group\":\"TENa\",\"job\":\"%s\","
                 "\"payload\":1}\n"
                 "{\"op\":\"claim\",\"queue\":\"oec\",\"count\":1}\n",
                 id);
        pipeline(c, lines, r, 2);
        assert_ok(r[0]);
        json_t *job = only_job(r[1]);
        cr_assert_str_eq(jstr(job, "job"), id, "round %d: the claim saw the enqueue", i);
        json_decref(job);
        free_all(r, 2);
    }
    tc_close(c);
}

Test(order, enqueue_then_reassign_finds_the_job)
{
    struct tc_conn *c = fx_conn();
    char lines[512];
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r[2];
        snprintf(
            lines, sizeof(lines),
            "{\"op\":\"enqueue\",\"queue\":\"ora\",\"group\":\"TENa\",\"job\":\"JOBra-%05d\","
            "\"payload\":1}\n"
            "{\"op\":\"reassign\",\"queue\":\"ora\",\"job\":\"JOBra-%05d\",\"group\":\"TENb\"}\n",
            i, i);
        pipeline(c, lines, r, 2);
        assert_ok(r[0]);
        assert_ok(r[1]);
        free_all(r, 2);
    }
    cr_assert_eq(fx_stat(c, "ora", "pending"), ROUNDS);
    tc_close(c);
}

Test(order, enqueue_then_job_reads_the_row)
{
    struct tc_conn *c = fx_conn();
    char lines[512];
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r[2];
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"enqueue\",\"queue\":\"ojb\",\"group\":\"TENa\",\"job\":\"JOBjb-%05d\","
                 "\"payload\":1}\n"
                 "{\"op\":\"job\",\"queue\":\"ojb\",\"job\":\"JOBjb-%05d\"}\n",
                 i, i);
        pipeline(c, lines, r, 2);
        assert_ok(r[0]);
        assert_ok(r[1]);
        cr_assert_str_eq(jstr(json_object_get(r[1], "job"), "state"), "pending", "round %d", i);
        free_all(r, 2);
    }
    tc_close(c);
}

/* Two pending jobs; limit 1 then claim 2: the ceiling holds. */
Test(order, limit_then_claim_respects_the_new_ceiling)
{
    struct tc_conn *c = fx_conn();
    char lines[512], q[16];
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r[2];
        snprintf(q, sizeof(q), "oli%d", i % 8);
        /* A fresh group per round: nothing of an earlier round counts. */
        for (int k = 0; k < 2; k++)
            json_decref(CALL_OK(
                c, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TEN%d\",\"payload\":%d}", q, i,
                k));
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"limit\",\"queue\":\"%s\",\"group\":\"TEN%d\",\"max\":1}\n"
                 "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":2}\n",
                 q, i, q);
        pipeline(c, lines, r, 2);
        assert_ok(r[0]);
        json_t *jobs = claim_jobs(r[1]);
        cr_assert_eq(json_array_size(jobs), 1, "round %d: %zu jobs leased past a ceiling of 1", i,
                     json_array_size(jobs));
        free_all(r, 2);
    }
    tc_close(c);
}

Test(order, pause_then_claim_gets_nothing)
{
    struct tc_conn *c = fx_conn();
    char lines[512];
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r[2];
        json_decref(CALL_OK(
            c, "{\"op\":\"enqueue\",\"queue\":\"opa\",\"group\":\"TEN%d\",\"payload\":1}", i));
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"pause\",\"queue\":\"opa\",\"group\":\"TEN%d\"}\n"
                 "{\"op\":\"claim\",\"queue\":\"opa\",\"count\":1}\n",
                 i);
        pipeline(c, lines, r, 2);
        assert_ok(r[0]);
        cr_assert_eq(json_array_size(claim_jobs(r[1])), 0, "round %d: a paused lane served", i);
        free_all(r, 2);
    }
    tc_close(c);
}

Test(order, resume_then_claim_gets_the_job)
{
    struct tc_conn *c = fx_conn();
    char lines[512];
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r[2];
        json_decref(CALL_OK(c, "{\"op\":\"pause\",\"queue\":\"ore\",\"group\":\"TEN%d\"}", i));
        json_decref(CALL_OK(c,
                            "{\"op\":\"enqueue\",\"queue\":\"ore\",\"group\":\"TEN%d\",\"job\":"
                            "\"JOBre-%05d\",\"payload\":1}",
                            i, i));
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"resume\",\"queue\":\"ore\",\"group\":\"TEN%d\"}\n"
                 "{\"op\":\"claim\",\"queue\":\"ore\",\"count\":1}\n",
                 i);
        pipeline(c, lines, r, 2);
        assert_ok(r[0]);
        json_t *job = only_job(r[1]);
        char id[32];
        snprintf(id, sizeof(id), "JOBre-%05d", i);
        cr_assert_str_eq(jstr(job, "job"), id, "round %d: the resumed lane served its job", i);
        json_decref(job);
        free_all(r, 2);
    }
    tc_close(c);
}

Test(order, complete_then_job_sees_it_completed)
{
    struct tc_conn *c = fx_conn();
    char lines[512], id[32];
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r[2];
        snprintf(id, sizeof(id), "JOBcj-%05d", i);
        json_t *job = enqueue_and_claim(c, "ocj", "TENa", id);
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"complete\",\"queue\":\"ocj\",\"job\":\"%s\",\"lease\":\"%s\"}\n"
                 "{\"op\":\"job\",\"queue\":\"ocj\",\"job\":\"%s\"}\n",
                 id, jstr(job, "lease"), id);
        json_decref(job);
        pipeline(c, lines, r, 2);
        assert_ok(r[0]);
        assert_ok(r[1]);
        cr_assert_str_eq(jstr(json_object_get(r[1], "job"), "state"), "completed", "round %d", i);
        free_all(r, 2);
    }
    tc_close(c);
}

/* A ceiling of 1 with two jobs: settling the first one (complete, fail or
 * release) and claiming in one write must lease again at once. */
static void settle_then_claim(const char *settle)
{
    struct tc_conn *c = fx_conn();
    char lines[1024], q[32];
    snprintf(q, sizeof(q), "o%.8s", settle);
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r[2];
        json_decref(
            CALL_OK(c, "{\"op\":\"limit\",\"queue\":\"%s\",\"group\":\"TEN%d\",\"max\":1}", q, i));
        /* The lane under test: TEN<i> with a ceiling of 1, two jobs, one
         * held. Earlier rounds' lanes are empty or at their ceiling. */
        json_decref(CALL_OK(c,
                            "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TEN%d\",\"job\":"
                            "\"JOBa-%05d\",\"payload\":1}",
                            q, i, i));
        json_decref(CALL_OK(c,
                            "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TEN%d\",\"job\":"
                            "\"JOBb-%05d\",\"payload\":1}",
                            q, i, i));
        json_t *cl = CALL_OK(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":1}", q);
        json_t *job = only_job(cl);
        json_decref(cl);
        const char *extra = strcmp(settle, "fail") == 0 ? ",\"retry_ms\":3600000" : "";
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"%s\",\"queue\":\"%s\",\"job\":\"%s\",\"lease\":\"%s\"%s}\n"
                 "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":1}\n",
                 settle, q, jstr(job, "job"), jstr(job, "lease"), extra, q);
        pipeline(c, lines, r, 2);
        assert_ok(r[0]);
        json_t *next = only_job(r[1]);
        cr_assert_str_eq(jstr(next, "group"), jstr(job, "group"),
                         "round %d: the freed permit served the lane", i);
        json_decref(next);
        json_decref(job);
        free_all(r, 2);
    }
    tc_close(c);
}

Test(order, complete_then_claim_under_a_ceiling_of_one)
{
    settle_then_claim("complete");
}

Test(order, fail_then_claim_under_a_ceiling_of_one)
{
    settle_then_claim("fail");
}

Test(order, release_then_claim_under_a_ceiling_of_one)
{
    settle_then_claim("release");
}

/* enqueue_many admits its items in input order: a repeated id is
 * enqueued the first time and a duplicate after. */
Test(order, enqueue_many_admits_items_in_input_order)
{
    struct tc_conn *c = fx_conn();
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r =
            CALL_OK(c,
                    "{\"op\":\"enqueue_many\",\"queue\":\"oem\",\"group\":\"TENa\",\"jobs\":["
                    "{\"job\":\"JOBm-%05d\",\"payload\":1},{\"payload\":2},"
                    "{\"job\":\"JOBm-%05d\",\"payload\":3},{\"job\":\"JOBm-%05d\",\"payload\":4}]}",
                    i, i, i);
        json_t *res = json_object_get(r, "results");
        cr_assert_str_eq(jstr(json_array_get(res, 0), "verdict"), "enqueued", "round %d", i);
        cr_assert_str_eq(jstr(json_array_get(res, 1), "verdict"), "enqueued", "round %d", i);
        cr_assert_str_eq(jstr(json_array_get(res, 2), "verdict"), "duplicate", "round %d", i);
        cr_assert_str_eq(jstr(json_array_get(res, 3), "verdict"), "duplicate", "round %d", i);
        json_decref(r);
    }
    tc_close(c);
}

/* A batch larger than one script call (32 items, STORE_ITEMS_PER_CALL)
 * goes as several calls, in order, each of at most 32 items: an id
 * repeated across a call boundary is a duplicate the second time, an
 * item refused by the checks in the middle shifts nothing, and a claim
 * pipelined after the batch is served its first item. */
#define BIG            300
#define ITEMS_PER_CALL 32

/* The id number item i carries: items 70 and 130 repeat an id of the
 * call before (item 10) and of their own call (item 129). */
static int big_id(int i)
{
    return i == 70 ? 10 : i == 130 ? 129 : i;
}

/* The enqueue calls MONITOR saw (m) that carry ids "<mark>NNNNN": their
 * ids must come in the order want(0), want(1), ... want(n - 1), leaving
 * out index skip (-1: none), at most per_call to a call. Returns how many
 * calls carried them. */
static int calls_in_order(const struct monitor *m, const char *mark, int (*want)(int), int n,
                          int skip, int per_call)
{
    char quoted[16];
    snprintf(quoted, sizeof(quoted), "\"%s", mark);
    size_t len = strlen(quoted);
    int at = 0, calls = 0;
    for (size_t i = 0; i < m->n; i++) {
        if (strstr(m->lines[i], "\"FCALL\"") == NULL || strstr(m->lines[i], quoted) == NULL)
            continue;
        int items = 0;
        for (const char *k = strstr(m->lines[i], quoted); k; k = strstr(k + len, quoted)) {
            if (at == skip)
                at++;
            cr_assert_lt(at, n, "more items sent than made");
            cr_assert_eq(atoi(k + len), want(at), "call %d: item %d out of order", calls, at);
            at++;
            items++;
        }
        cr_assert_leq(items, per_call, "one call carried %d items", items);
        calls++;
    }
    cr_assert_eq(at, n, "every item in a call");
    return calls;
}

static int same_id(int i)
{
    return i;
}

Test(order, a_batch_of_many_calls_keeps_input_order)
{
    struct tc_conn *c = fx_conn();
    size_t cap = BIG * 64 + 256, used = 0;
    char *line = malloc(cap);
    used += (size_t)snprintf(line + used, cap - used,
                             "{\"op\":\"enqueue_many\",\"queue\":\"obig\",\"group\":\"TENa\","
                             "\"jobs\":[");
    for (int i = 0; i < BIG; i++) {
        const char *sep = i ? "," : "";
        if (i == 100) /* refused by the checks: no call carries it */
            used +=
                (size_t)snprintf(line + used, cap - used, "%s{\"job\":\"bad\",\"payload\":1}", sep);
        else
            used += (size_t)snprintf(line + used, cap - used,
                                     "%s{\"job\":\"JOBm%05d\",\"payload\":%d}", sep, big_id(i), i);
    }
    used += (size_t)snprintf(line + used, cap - used,
                             "]}\n{\"op\":\"claim\",\"queue\":\"obig\",\"count\":1}\n");
    cr_assert_lt(used, cap);
    struct monitor m;
    cr_assert_eq(monitor_start(&m, &fx_redis), 0);
    json_t *r[2];
    pipeline(c, line, r, 2);
    monitor_stop(&m);
    free(line);
    assert_ok(r[0]);
    json_t *res = json_object_get(r[0], "results");
    cr_assert_eq(json_array_size(res), BIG);
    for (int i = 0; i < BIG; i++) {
        json_t *v = json_array_get(res, (size_t)i);
        if (i == 100)
            cr_assert_str_eq(jstr(v, "error"), "EKIND", "item %d", i);
        else
            cr_assert_str_eq(jstr(v, "verdict"), big_id(i) != i ? "duplicate" : "enqueued",
                             "item %d", i);
    }
    assert_ok(r[1]);
    json_t *job = only_job(r[1]);
    cr_assert_str_eq(jstr(job, "job"), "JOBm00000", "the claim ran after the whole batch");
    json_decref(job);
    free_all(r, 2);

    /* The calls: each at most 32 items, together every checked item once,
     * in input order. */
    int calls = calls_in_order(&m, "JOBm", big_id, BIG, 100, ITEMS_PER_CALL);
    cr_assert_eq(calls, (BIG - 1 + ITEMS_PER_CALL - 1) / ITEMS_PER_CALL);
    monitor_free(&m);
    tc_close(c);
}

/* Large payloads cut a call early (about 256 KiB of payloads a call,
 * STORE_BYTES_PER_CALL): eight items of 100 KiB go as calls of at most
 * three, in order. */
Test(order, large_payloads_cut_a_batch_into_short_calls)
{
    enum { ITEMS = 8, PAYLOAD = 100 * 1024 };
    struct tc_conn *c = fx_conn();
    size_t cap = ITEMS * (PAYLOAD + 64) + 256, used = 0;
    char *line = malloc(cap);
    char *pad = malloc(PAYLOAD + 1);
    memset(pad, 'x', PAYLOAD);
    pad[PAYLOAD] = '\0';
    used += (size_t)snprintf(line + used, cap - used,
                             "{\"op\":\"enqueue_many\",\"queue\":\"olarge\",\"jobs\":[");
    for (int i = 0; i < ITEMS; i++)
        used += (size_t)snprintf(line + used, cap - used,
                                 "%s{\"job\":\"JOBl%d\",\"payload\":\"%s\"}", i ? "," : "", i, pad);
    used += (size_t)snprintf(line + used, cap - used, "]}\n");
    free(pad);
    struct monitor m;
    cr_assert_eq(monitor_start(&m, &fx_redis), 0);
    json_t *r[1];
    pipeline(c, line, r, 1);
    monitor_stop(&m);
    free(line);
    assert_ok(r[0]);
    json_t *res = json_object_get(r[0], "results");
    for (size_t i = 0; i < ITEMS; i++)
        cr_assert_str_eq(jstr(json_array_get(res, i), "verdict"), "enqueued", "item %zu", i);
    free_all(r, 1);
    int calls = calls_in_order(&m, "JOBl", same_id, ITEMS, -1, 3);
    cr_assert_geq(calls, 3);
    monitor_free(&m);
    tc_close(c);
}

/* Single enqueues pipelined on one connection (no consumer parked, so no
 * hand-off) share enqueue_many calls of at most 32 items, in the order
 * sent: a repeated id is a duplicate the second time, a delayed one is
 * delayed, and a claim sent after them is served the first. */
#define SINGLES 200

Test(order, pipelined_single_enqueues_share_calls_in_order)
{
    struct tc_conn *c = fx_conn();
    size_t cap = SINGLES * 128 + 128, used = 0;
    char *lines = malloc(cap);
    for (int i = 0; i < SINGLES; i++)
        used += (size_t)snprintf(lines + used, cap - used,
                                 "{\"op\":\"enqueue\",\"queue\":\"osingle\",\"group\":\"TENa\","
                                 "\"job\":\"JOBs%05d\",\"payload\":%d%s}\n",
                                 big_id(i), i, i == 120 ? ",\"delay_ms\":600000" : "");
    used += (size_t)snprintf(lines + used, cap - used,
                             "{\"op\":\"claim\",\"queue\":\"osingle\",\"count\":1}\n");
    struct monitor m;
    cr_assert_eq(monitor_start(&m, &fx_redis), 0);
    json_t *r[SINGLES + 1];
    pipeline(c, lines, r, SINGLES + 1);
    monitor_stop(&m);
    free(lines);
    for (int i = 0; i < SINGLES; i++) {
        assert_ok(r[i]);
        cr_assert_str_eq(jstr(r[i], "verdict"), big_id(i) != i ? "duplicate" : "enqueued",
                         "enqueue %d", i);
    }
    json_t *job = only_job(r[SINGLES]);
    cr_assert_str_eq(jstr(job, "job"), "JOBs00000");
    json_decref(job);
    free_all(r, SINGLES + 1);
    cr_assert_eq(fx_stat(c, "osingle", "delayed"), 1);

    int calls = calls_in_order(&m, "JOBs", big_id, SINGLES, -1, ITEMS_PER_CALL);
    /* One write of 200 lines is read in a few turns at most: calls are
     * shared (each enqueue its own FCALL would be 200). */
    cr_assert_leq(calls, SINGLES / 2, "%d calls for %d enqueues", calls, SINGLES);
    monitor_free(&m);
    tc_close(c);
}

/* Completions and enqueues gathered in one turn keep their order to each
 * other. With retention 0 a completed job's row goes at once, so an
 * enqueue of its id after the completion is a new job, and one before it
 * (the job still active) a duplicate. */
static void start_no_retention(void)
{
    const char *const extra[] = {"--retention-ms", "0", NULL};
    fx_start(extra);
}

Test(order, completions_and_enqueues_of_one_turn_keep_their_order, .init = start_no_retention)
{
    struct tc_conn *c = fx_conn();
    for (int round = 0; round < ROUNDS / 4; round++) {
        char a[32], b[32];
        snprintf(a, sizeof(a), "JOBca%04d", round);
        snprintf(b, sizeof(b), "JOBcb%04d", round);
        json_t *ja = enqueue_and_claim(c, "ocmix", "TENa", a);
        json_t *jb = enqueue_and_claim(c, "ocmix", "TENa", b);
        char lines[1024];
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"complete\",\"queue\":\"ocmix\",\"job\":\"%s\",\"lease\":\"%s\"}\n"
                 "{\"op\":\"enqueue\",\"queue\":\"ocmix\",\"group\":\"TENa\",\"job\":\"%s\","
                 "\"payload\":1}\n"
                 "{\"op\":\"enqueue\",\"queue\":\"ocmix\",\"group\":\"TENa\",\"job\":\"%s\","
                 "\"payload\":1}\n"
                 "{\"op\":\"complete\",\"queue\":\"ocmix\",\"job\":\"%s\",\"lease\":\"%s\"}\n",
                 a, jstr(ja, "lease"), a, b, b, jstr(jb, "lease"));
        json_t *r[4];
        pipeline(c, lines, r, 4);
        for (int i = 0; i < 4; i++)
            assert_ok(r[i]);
        cr_assert_str_eq(jstr(r[0], "state"), "completed", "round %d", round);
        cr_assert_str_eq(jstr(r[1], "verdict"), "enqueued", "round %d: after its completion",
                         round);
        cr_assert_str_eq(jstr(r[2], "verdict"), "duplicate", "round %d: before its completion",
                         round);
        cr_assert_str_eq(jstr(r[3], "state"), "completed", "round %d", round);
        free_all(r, 4);
        json_decref(ja);
        json_decref(jb);
        /* The re-enqueued a is pending: take it out for the next round. */
        json_t *again = CALL_OK(c, "{\"op\":\"claim\",\"queue\":\"ocmix\",\"count\":1}");
        json_t *j = only_job(again);
        cr_assert_str_eq(jstr(j, "job"), a);
        json_t *done = CALL_OK(c,
                               "{\"op\":\"complete\",\"queue\":\"ocmix\",\"job\":\"%s\","
                               "\"lease\":\"%s\"}",
                               a, jstr(j, "lease"));
        json_decref(done);
        json_decref(j);
        json_decref(again);
    }
    tc_close(c);
}

/* drain runs in several calls (1,000 jobs each): the lines after it take
 * effect after all of them, so an enqueue sent after a drain is kept and
 * a depth sent after it sees the lane empty. */
Test(order, drain_takes_effect_before_the_lines_after_it)
{
    struct tc_conn *c = fx_conn();
    static char lines[200000];
    for (int i = 0; i < 5; i++) {
        /* 2,500 pending jobs in lane TEN<i>: three drain calls. */
        for (int b = 0; b < 5; b++) {
            size_t o = (size_t)snprintf(lines, sizeof(lines),
                                        "{\"op\":\"enqueue_many\",\"queue\":\"odr\","
                                        "\"group\":\"TEN%d\",\"jobs\":[",
                                        i);
            for (int k = 0; k < 500; k++)
                o += (size_t)snprintf(lines + o, sizeof(lines) - o, "%s{\"payload\":%d}",
                                      k ? "," : "", k);
            snprintf(lines + o, sizeof(lines) - o, "]}");
            json_decref(CALL_OK(c, "%s", lines));
        }
        json_t *r[4];
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"drain\",\"queue\":\"odr\",\"group\":\"TEN%d\"}\n"
                 "{\"op\":\"depth\",\"queue\":\"odr\",\"group\":\"TEN%d\"}\n"
                 "{\"op\":\"enqueue\",\"queue\":\"odr\",\"group\":\"TEN%d\",\"payload\":1}\n"
                 "{\"op\":\"depth\",\"queue\":\"odr\",\"group\":\"TEN%d\"}\n",
                 i, i, i, i);
        pipeline(c, lines, r, 4);
        for (int k = 0; k < 4; k++)
            assert_ok(r[k]);
        cr_assert_eq(jint(r[0], "drained"), 2500, "round %d", i);
        cr_assert_eq(jint(r[1], "depth"), 0, "round %d: the depth ran before the drain ended", i);
        cr_assert_eq(jint(r[3], "depth"), 1, "round %d: the drain took a later enqueue", i);
        free_all(r, 4);
    }
    tc_close(c);
}

/* Completions that arrive together are coalesced into one script call at
 * the end of the loop turn; a claim in the same read still runs after
 * them. Two connections complete ten jobs each of a lane whose ceiling
 * is twenty, in one write each; the claim behind the first connection's
 * completions finds at least its ten permits free. */
Test(order, coalesced_completions_run_before_a_later_claim)
{
    struct tc_conn *a = fx_conn(), *b = fx_conn();
    static char lines[16384];
    for (int i = 0; i < 50; i++) {
        json_decref(
            CALL_OK(a, "{\"op\":\"limit\",\"queue\":\"oco\",\"group\":\"TEN%d\",\"max\":20}", i));
        for (int k = 0; k < 30; k++)
            json_decref(CALL_OK(
                a, "{\"op\":\"enqueue\",\"queue\":\"oco\",\"group\":\"TEN%d\",\"payload\":%d}", i,
                k));
        json_t *held[2];
        held[0] = CALL_OK(a, "{\"op\":\"claim\",\"queue\":\"oco\",\"count\":10}");
        held[1] = CALL_OK(b, "{\"op\":\"claim\",\"queue\":\"oco\",\"count\":10}");
        for (int side = 0; side < 2; side++) {
            json_t *jobs = claim_jobs(held[side]);
            cr_assert_eq(json_array_size(jobs), 10, "round %d: setup", i);
            size_t o = 0;
            for (size_t k = 0; k < 10; k++) {
                json_t *j = json_array_get(jobs, k);
                o += (size_t)snprintf(lines + o, sizeof(lines) - o,
                                      "{\"op\":\"complete\",\"queue\":\"oco\",\"job\":\"%s\","
                                      "\"lease\":\"%s\"}\n",
                                      jstr(j, "job"), jstr(j, "lease"));
            }
            if (side == 0)
                snprintf(lines + o, sizeof(lines) - o,
                         "{\"op\":\"claim\",\"queue\":\"oco\",\"count\":10}\n");
            cr_assert_eq(tc_send(side == 0 ? a : b, lines, strlen(lines)), 0);
        }
        json_t *r[11];
        for (int side = 1; side >= 0; side--) {
            struct tc_conn *c = side == 0 ? a : b;
            int n = side == 0 ? 11 : 10;
            for (int k = 0; k < n; k++) {
                r[k] = tc_read(c, wait_deadline_ms(0));
                assert_ok(r[k]);
            }
            if (side == 0) {
                cr_assert_eq(json_array_size(claim_jobs(r[10])), 10,
                             "round %d: the claim ran before the completions sent with it", i);
                json_t *jobs = claim_jobs(r[10]);
                for (size_t k = 0; k < 10; k++) {
                    json_t *j = json_array_get(jobs, k);
                    json_decref(CALL_OK(
                        a,
                        "{\"op\":\"complete\",\"queue\":\"oco\",\"job\":\"%s\",\"lease\":\"%s\"}",
                        jstr(j, "job"), jstr(j, "lease")));
                }
            }
            free_all(r, n);
        }
        json_decref(held[0]);
        json_decref(held[1]);
    }
    tc_close(a);
    tc_close(b);
}

/* Fails join the completions' batch: pipelined on one connection,
 * completions and fails take effect in the order sent, whichever kind
 * comes first (a fail after its job's completion, or a completion after
 * its job's fail, finds no lease), a depth and a claim sent behind them
 * see all of them, and the twelve settle in fewer script calls than one
 * each (a fail used to be a call of its own, which also sent the
 * completions gathered before it). */
Test(order, completions_and_fails_pipelined_take_effect_in_order)
{
    struct tc_conn *c = fx_conn();
    static char lines[16384];
    for (int round = 0; round < 20; round++) {
        for (int k = 0; k < 10; k++)
            json_decref(CALL_OK(
                c, "{\"op\":\"enqueue\",\"queue\":\"ocf\",\"group\":\"TENcf\",\"payload\":%d}", k));
        json_t *held = CALL_OK(c, "{\"op\":\"claim\",\"queue\":\"ocf\",\"count\":10}");
        json_t *jobs = claim_jobs(held);
        cr_assert_eq(json_array_size(jobs), 10, "round %d: setup", round);
        size_t o = 0;
        /* Even jobs completed, odd ones failed back to their lane; then the
         * first job failed and the second completed, both too late. */
        for (size_t k = 0; k < 12; k++) {
            json_t *j = json_array_get(jobs, k < 10 ? k : k - 10);
            bool fail = (k < 10 && k % 2 == 1) || k == 10;
            if (fail)
                o += (size_t)snprintf(lines + o, sizeof(lines) - o,
                                      "{\"op\":\"fail\",\"queue\":\"ocf\",\"job\":\"%s\","
                                      "\"lease\":\"%s\",\"error\":\"e%zu\",\"retry_ms\":0}\n",
                                      jstr(j, "job"), jstr(j, "lease"), k);
            else
                o += (size_t)snprintf(lines + o, sizeof(lines) - o,
                                      "{\"op\":\"complete\",\"queue\":\"ocf\",\"job\":\"%s\","
                                      "\"lease\":\"%s\"}\n",
                                      jstr(j, "job"), jstr(j, "lease"));
        }
        snprintf(lines + o, sizeof(lines) - o,
                 "{\"op\":\"depth\",\"queue\":\"ocf\",\"group\":\"TENcf\"}\n"
                 "{\"op\":\"claim\",\"queue\":\"ocf\",\"count\":10}\n");
        long long calls0 = fx_redis_calls("fcall");
        json_t *r[14];
        pipeline(c, lines, r, 14);
        /* The twelve settlements, the depth and the claim. */
        long long calls = fx_redis_calls("fcall") - calls0;
        for (int k = 0; k < 10; k++) {
            assert_ok(r[k]);
            cr_assert_str_eq(jstr(r[k], "state"), k % 2 ? "pending" : "completed", "round %d: %d",
                             round, k);
        }
        cr_assert_str_eq(jstr(r[10], "error"), "ELEASE", "round %d: a completed job failed", round);
        cr_assert_str_eq(jstr(r[11], "error"), "ELEASE", "round %d: a failed job completed", round);
        assert_ok(r[12]);
        cr_assert_eq(jint(r[12], "depth"), 5, "round %d: the depth ran before the fails", round);
        assert_ok(r[13]);
        json_t *again = claim_jobs(r[13]);
        cr_assert_eq(json_array_size(again), 5, "round %d", round);
        for (size_t k = 0; k < 5; k++) {
            json_t *j = json_array_get(again, k);
            cr_assert_eq(jint(j, "attempt"), 2);
            json_decref(CALL_OK(
                c, "{\"op\":\"complete\",\"queue\":\"ocf\",\"job\":\"%s\",\"lease\":\"%s\"}",
                jstr(j, "job"), jstr(j, "lease")));
        }
        cr_assert_lt(calls, 12, "round %d: %lld script calls for 14 requests", round, calls);
        free_all(r, 14);
        json_decref(held);
    }
    tc_close(c);
}

/* With a stream parked on the queue, an enqueue may hand its job straight
 * to the stream (PROTOCOL.md 6.7). A job read and a claim pipelined after
 * the enqueue still see it: the row exists, and the job went to exactly
 * one of the claim or the stream. */
Test(order, enqueue_then_job_and_claim_with_a_hand_off_possible)
{
    struct tc_conn *c = fx_conn(), *s = fx_conn();
    json_decref(CALL_OK(s, "{\"op\":\"stream\",\"queue\":\"oho\",\"credit\":1}"));
    char lines[1024], id[32];
    int pushed = 0, claimed = 0;
    for (int i = 0; i < ROUNDS; i++) {
        json_t *r[3];
        snprintf(id, sizeof(id), "JOBho-%05d", i);
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"enqueue\",\"queue\":\"oho\",\"group\":\"TENa\",\"job\":\"%s\","
                 "\"payload\":1}\n"
                 "{\"op\":\"job\",\"queue\":\"oho\",\"job\":\"%s\"}\n"
                 "{\"op\":\"claim\",\"queue\":\"oho\",\"count\":1}\n",
                 id, id);
        pipeline(c, lines, r, 3);
        assert_ok(r[0]);
        assert_ok(r[1]);
        const char *state = jstr(json_object_get(r[1], "job"), "state");
        cr_assert(strcmp(state, "pending") == 0 || strcmp(state, "active") == 0,
                  "round %d: the job read saw state '%s'", i, state);
        json_t *jobs = claim_jobs(r[2]);
        json_t *got;
        struct tc_conn *holder;
        if (json_array_size(jobs) == 1) {
            got = json_incref(json_array_get(jobs, 0));
            holder = c;
            claimed++;
        } else {
            /* Not claimed: the stream has it (or gets it: the wake). */
            got = tc_read(s, wait_deadline_ms(0));
            cr_assert_not_null(got, "round %d: the job went to nobody", i);
            holder = s;
            pushed++;
        }
        cr_assert_str_eq(jstr(got, "job"), id, "round %d", i);
        json_decref(CALL_OK(
            holder, "{\"op\":\"complete\",\"queue\":\"oho\",\"job\":\"%s\",\"lease\":\"%s\"}", id,
            jstr(got, "lease")));
        json_decref(got);
        free_all(r, 3);
    }
    cr_log_info("claimed %d, pushed to the stream %d", claimed, pushed);
    tc_close(s);
    tc_close(c);
}
