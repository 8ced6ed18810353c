/* Integration: the real emqd against a real redis-server, over TCP. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"
#include "monitor.h"

TestSuite(daemon, .init = fx_setup, .fini = fx_teardown, .timeout = 60);

/* (1) Payloads of every JSON type survive enqueue -> claim -> complete. */
Test(daemon, round_trip_preserves_payload)
{
    struct tc_conn *c = fx_conn();
    static const char *const payloads[] = {
        "{\"a\":1,\"b\":[true,null,\"x\"],\"c\":{\"d\":\"\\u00e9\\\"\"}}",
        "[1,2.5,\"three\",{\"four\":4}]",
        "\"just a string\"",
        "42",
    };
    for (size_t i = 0; i < 4; i++) {
        json_t *r = tc_call(
            c,
            "{\"op\":\"enqueue\",\"ref\":%zu,\"queue\":\"rt\",\"group\":\"TENt1\",\"payload\":%s}",
            i, payloads[i]);
        assert_ok(r);
        cr_assert_eq(jint(r, "ref"), (long long)i);
        cr_assert_str_eq(jstr(r, "verdict"), "enqueued");
        cr_assert(strncmp(jstr(r, "job"), "JOB", 3) == 0, "minted id %s", jstr(r, "job"));
        json_decref(r);
    }
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"rt\",\"count\":10}");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 4);
    for (size_t i = 0; i < 4; i++) {
        json_t *j = json_array_get(jobs, i);
        json_t *want = json_loads(payloads[i], JSON_DECODE_ANY, NULL);
        cr_assert_not_null(want);
        char *got = json_dumps(json_object_get(j, "payload"), JSON_COMPACT | JSON_ENCODE_ANY);
        cr_assert(json_equal(json_object_get(j, "payload"), want), "payload %zu came back as %s", i,
                  got ? got : "(none)");
        free(got);
        json_decref(want);
        cr_assert_str_eq(jstr(j, "queue"), "rt");
        cr_assert_eq(jint(j, "attempt"), 1);
        cr_assert(jint(j, "lease_until") > 0);
        json_t *done =
            tc_call(c, "{\"op\":\"complete\",\"queue\":\"rt\",\"job\":\"%s\",\"lease\":\"%s\"}",
                    jstr(j, "job"), jstr(j, "lease"));
        assert_ok(done);
        json_decref(done);
    }
    json_decref(r);
    r = tc_call(c, "{\"op\":\"depth\",\"queue\":\"rt\",\"group\":\"TENt1\"}");
    assert_ok(r);
    cr_assert_eq(jint(r, "depth"), 0);
    json_decref(r);
    tc_close(c);
}

Test(daemon, duplicate_verdict)
{
    struct tc_conn *c = fx_conn();
    json_t *r =
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"d\",\"job\":\"JOBdup1\",\"payload\":1}");
    assert_ok(r);
    cr_assert_str_eq(jstr(r, "job"), "JOBdup1");
    cr_assert_str_eq(jstr(r, "verdict"), "enqueued");
    json_decref(r);
    r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"d\",\"job\":\"JOBdup1\",\"payload\":2}");
    assert_ok(r);
    cr_assert_str_neq(jstr(r, "verdict"), "enqueued");
    cr_assert_str_eq(jstr(r, "verdict"), "duplicate");
    json_decref(r);
    r = tc_call(c, "{\"op\":\"depth\",\"queue\":\"d\"}");
    assert_ok(r);
    cr_assert_eq(jint(r, "depth"), 1);
    json_decref(r);
    tc_close(c);
}

/* (2) Refused requests get their code, the connection survives, and
 * nothing reaches Redis. */
Test(daemon, error_codes_write_nothing)
{
    fx_teardown();
    const char *const extra[] = {"--max-line", "1024", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();

    json_t *r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"e\",\"job\":\"JOBseed\","
                           "\"group\":\"TENacme\",\"payload\":{}}");
    assert_ok(r);
    json_decref(r);
    json_t *before = tc_call(c, "{\"op\":\"stats\",\"queue\":\"e\"}");
    assert_ok(before);

    static const struct {
        const char *line, *code;
    } cases[] = {
        {"this is not json", "EPROTO"},
        {"{\"op\":\"enqueue\",\"queue\":\"e\",", "EPROTO"},
        {"[1,2,3]", "EPROTO"},
        {"{\"op\":\"frobnicate\",\"queue\":\"e\"}", "EUNKNOWN"},
        {"{\"op\":\"enqueue\",\"queue\":\"e\",\"payload\":1,\"bogus\":true}", "EARG"},
        {"{\"op\":\"claim\",\"queue\":\"e\",\"count\":\"three\"}", "EARG"},
        {"{\"op\":\"claim\",\"queue\":\"e\",\"count\":0}", "EARG"},
        {"{\"op\":\"enqueue\",\"queue\":\"e\"}", "EARG"},
        {"{\"op\":\"enqueue\",\"queue\":\"e\",\"payload\":1,\"group\":\"acme\"}", "EBRAND"},
        {"{\"op\":\"enqueue\",\"queue\":\"e\",\"payload\":1,\"group\":\"TENa b\"}", "EBRAND"},
        {"{\"op\":\"enqueue\",\"queue\":\"e\",\"payload\":1,\"job\":\"TENacme\"}", "EKIND"},
        {"{\"op\":\"enqueue\",\"queue\":\"a}b\",\"payload\":1}", "EQUEUE"},
        {"{\"op\":\"enqueue_many\",\"queue\":\"e\",\"jobs\":[]}", "EEMPTY"},
        {"{\"op\":\"complete\",\"queue\":\"e\",\"job\":\"JOBseed\",\"lease\":\"nope\"}", "ELEASE"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(tc_send_line(c, cases[i].line), 0);
        r = tc_read(c, wait_deadline_ms(0));
        char *d = r ? json_dumps(r, JSON_COMPACT) : NULL;
        cr_expect(r != NULL && !tc_ok(r) && strcmp(tc_error(r), cases[i].code) == 0,
                  "%s -> expected %s, got %s", cases[i].line, cases[i].code, d ? d : "(none)");
        free(d);
        json_decref(r);
        r = tc_call(c, "{\"op\":\"ping\",\"ref\":\"after\"}");
        assert_ok(r);
        cr_assert_str_eq(jstr(r, "ref"), "after");
        json_decref(r);
    }

    /* A line over --max-line, then the next line works. */
    char big[4096];
    int n = snprintf(big, sizeof(big), "{\"op\":\"enqueue\",\"queue\":\"e\",\"payload\":\"");
    memset(big + n, 'x', 2000);
    snprintf(big + n + 2000, sizeof(big) - (size_t)n - 2000, "\"}");
    cr_assert_eq(tc_send_line(c, big), 0);
    r = tc_read(c, wait_deadline_ms(0));
    assert_err(r, "ETOOBIG");
    json_decref(r);
    r = tc_call(c, "{\"op\":\"ping\",\"ref\":7}");
    assert_ok(r);
    cr_assert_eq(jint(r, "ref"), 7);
    json_decref(r);

    json_t *after = tc_call(c, "{\"op\":\"stats\",\"queue\":\"e\"}");
    assert_ok(after);
    char *b = json_dumps(before, JSON_COMPACT | JSON_SORT_KEYS);
    char *a = json_dumps(after, JSON_COMPACT | JSON_SORT_KEYS);
    cr_expect_str_eq(a, b, "stats changed by refused requests");
    free(a);
    free(b);
    r = tc_call(c, "{\"op\":\"check\",\"queue\":\"e\"}");
    assert_ok(r);
    cr_assert_eq(json_array_size(json_object_get(r, "violations")), 0);
    json_decref(r);
    json_decref(before);
    json_decref(after);
    tc_close(c);
}

/* (3) 200 pipelined requests in one write come back in order. */
Test(daemon, pipelining_keeps_order)
{
    struct tc_conn *c = fx_conn();
    size_t cap = 200 * 128, len = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    for (int i = 0; i < 200; i++) {
        if (i % 3 == 0)
            len += (size_t)snprintf(buf + len, cap - len, "{\"op\":\"ping\",\"ref\":%d}\n", i);
        else if (i % 3 == 1)
            len += (size_t)snprintf(buf + len, cap - len,
                                    "{\"op\":\"enqueue\",\"ref\":%d,\"queue\":\"p\","
                                    "\"payload\":1}\n",
                                    i);
        else
            len += (size_t)snprintf(buf + len, cap - len,
                                    "{\"op\":\"depth\",\"ref\":%d,\"queue\":\"p\"}\n", i);
    }
    cr_assert_eq(tc_send(c, buf, len), 0);
    free(buf);
    for (int i = 0; i < 200; i++) {
        json_t *r = tc_read(c, wait_deadline_ms(0));
        assert_ok(r);
        cr_assert_eq(jint(r, "ref"), i, "reply %d carries ref %lld", i, jint(r, "ref"));
        json_decref(r);
    }
    tc_close(c);
}

/* (4) One big claim rotates over the groups. */
Test(daemon, fairness_rotation)
{
    struct tc_conn *c = fx_conn();
    static const struct {
        const char *group;
        int n;
    } g[] = {{"TENaaa", 30}, {"TENbbb", 5}, {"TENccc", 2}};
    for (size_t k = 0; k < 3; k++)
        for (int i = 0; i < g[k].n; i++) {
            json_t *r = tc_call(c,
                                "{\"op\":\"enqueue\",\"queue\":\"f\",\"group\":\"%s\","
                                "\"payload\":%d}",
                                g[k].group, i);
            assert_ok(r);
            json_decref(r);
        }
    /* The expected order: round robin over the groups still holding work. */
    const char *want[37];
    int left[3] = {30, 5, 2}, n = 0;
    while (n < 37)
        for (int k = 0; k < 3; k++)
            if (left[k]-- > 0)
                want[n++] = g[k].group;
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"f\",\"count\":37}");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 37);
    int next[3] = {0, 0, 0};
    for (size_t i = 0; i < 37; i++) {
        json_t *j = json_array_get(jobs, i);
        cr_expect_str_eq(jstr(j, "group"), want[i], "position %zu", i);
        for (int k = 0; k < 3; k++)
            if (strcmp(jstr(j, "group"), g[k].group) == 0)
                cr_expect_eq(json_integer_value(json_object_get(j, "payload")), next[k]++,
                             "group %s out of FIFO order", g[k].group);
    }
    json_decref(r);
    tc_close(c);
}

static const char *push_job(const json_t *p)
{
    return json_object_get(p, "job") ? jstr(p, "job") : jstr(p, "id");
}

/* (5) A stream never holds more than its credit. */
Test(daemon, stream_credit_never_exceeded)
{
    struct tc_conn *c = fx_conn();
    for (int i = 0; i < 20; i++) {
        json_t *r = tc_call(
            c, "{\"op\":\"enqueue\",\"queue\":\"s\",\"group\":\"TENt1\",\"payload\":%d}", i);
        assert_ok(r);
        json_decref(r);
    }
    json_t *r = tc_call(c, "{\"op\":\"stream\",\"queue\":\"s\",\"credit\":3}");
    assert_ok(r);
    json_decref(r);
    json_t *pushes[4] = {NULL};
    for (int i = 0; i < 3; i++) {
        pushes[i] = tc_read(c, wait_deadline_ms(0));
        cr_assert_not_null(pushes[i], "push %d never came", i);
        cr_assert_str_eq(jstr(pushes[i], "push"), "job");
        cr_assert(*push_job(pushes[i]) != '\0', "push without a job id");
        cr_assert(*jstr(pushes[i], "lease") != '\0', "push without a lease");
    }
    assert_nothing_pushed(c, "a 4th push arrived with credit 3");

    char line[512];
    snprintf(line, sizeof(line),
             "{\"op\":\"complete\",\"ref\":\"c1\",\"queue\":\"s\",\"job\":\"%s\",\"lease\":\"%s\"}",
             push_job(pushes[0]), jstr(pushes[0], "lease"));
    cr_assert_eq(tc_send_line(c, line), 0);
    /* The completion's reply and the one push its credit buys, in either
     * order; then nothing more. */
    int replies = 0, more = 0;
    while (replies == 0 || more == 0) {
        json_t *f = tc_read(c, wait_deadline_ms(0));
        cr_assert_not_null(f, "after the completion: %d replies, %d pushes", replies, more);
        if (json_object_get(f, "push") != NULL) {
            cr_assert_eq(more, 0, "a second push after one completion");
            pushes[3] = f;
            more++;
            continue;
        }
        cr_assert_str_eq(jstr(f, "ref"), "c1");
        assert_ok(f);
        json_decref(f);
        replies++;
    }
    assert_nothing_pushed(c, "a second push after one completion");
    for (int i = 0; i < 4; i++)
        json_decref(pushes[i]);
    tc_close(c);
}

/* Claim up to two jobs of queue "r" on c, waiting up to wait_ms; each
 * must be on its second attempt (it came back). How many came. */
static size_t claim_came_back(struct tc_conn *c, int wait_ms)
{
    json_t *r =
        tc_call(c, "{\"op\":\"claim\",\"queue\":\"r\",\"count\":2,\"wait_ms\":%d}", wait_ms);
    json_t *jobs = claim_jobs(r);
    size_t n = json_array_size(jobs);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(jint(json_array_get(jobs, i), "attempt"), 2);
    json_decref(r);
    return n;
}

/* (6) Leases of a connection that goes away go back to the queue. */
Test(daemon, release_on_disconnect)
{
    struct tc_conn *a = fx_conn();
    for (int i = 0; i < 2; i++) {
        json_t *r = tc_call(
            a, "{\"op\":\"enqueue\",\"queue\":\"r\",\"group\":\"TENt1\",\"payload\":%d}", i);
        assert_ok(r);
        json_decref(r);
    }
    /* Leases of an hour: only the release on disconnect can give the jobs
     * back while the test waits. */
    json_t *r = tc_call(a, "{\"op\":\"claim\",\"queue\":\"r\",\"count\":2,\"lease_ms\":3600000}");
    cr_assert_eq(json_array_size(claim_jobs(r)), 2);
    json_decref(r);
    tc_close(a);

    struct tc_conn *b = fx_conn();
    size_t got = 0;
    await((got += claim_came_back(b, 100)) >= 2,
          "both leases to come back after the disconnect (%zu so far)", got);
    cr_assert_eq(got, 2, "each job came back once");
    tc_close(b);
}

/* Restart the fixture without the periodic upkeep pass (an hour away):
 * what a parked consumer then gets, a wake or a timer of its own brought. */
static void start_without_upkeep_pass(void)
{
    fx_teardown();
    const char *const extra[] = {"--upkeep-ms", "3600000", NULL};
    fx_start(extra);
}

/* (7) A parked claim wakes when another connection enqueues: with no
 * upkeep pass to find the job and a wait of an hour, only the enqueue's
 * wake can answer the claim while the test waits. */
Test(daemon, parked_claim_wakes_on_enqueue)
{
    start_without_upkeep_pass();
    struct tc_conn *a = fx_conn(), *b = fx_conn();
    cr_assert_eq(tc_send_line(a, "{\"op\":\"claim\",\"queue\":\"w\",\"wait_ms\":3600000}"), 0);
    /* The claim found nothing and parked, and the daemon hears the
     * queue's wakes. */
    fx_await_listening(&fx_emqd, "w", 1);
    json_t *r =
        tc_call(b, "{\"op\":\"enqueue\",\"queue\":\"w\",\"group\":\"TENt1\",\"payload\":\"wake\"}");
    assert_ok(r);
    json_decref(r);
    r = tc_read(a, wait_deadline_ms(0));
    cr_assert_not_null(r, "the parked claim never woke");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1);
    cr_assert_str_eq(jstr(json_array_get(jobs, 0), "payload"), "wake");
    json_decref(r);
    tc_close(a);
    tc_close(b);
}

/* (9) Expired leases come back without anyone calling reap: with no
 * upkeep pass, the daemon's own timer for the lease's deadline reaps it,
 * and the woken parked claim gets the job again. */
Test(daemon, reaper_requeues_expired_lease)
{
    start_without_upkeep_pass();
    struct tc_conn *c = fx_conn();
    json_t *r =
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"x\",\"group\":\"TENt1\",\"payload\":1}");
    assert_ok(r);
    json_decref(r);
    /* The queue's first upkeep pass (run when the enqueue named it) is
     * over before the claim: a lease taken while a pass runs is left to
     * that pass, which may have read the leases before it, and so to the
     * next pass, an hour away here. */
    fx_await_quiet(&fx_emqd);
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"x\",\"lease_ms\":200}");
    cr_assert_eq(json_array_size(claim_jobs(r)), 1);
    json_decref(r);
    cr_assert_eq(tc_send_line(c, "{\"op\":\"claim\",\"queue\":\"x\",\"wait_ms\":3600000}"), 0);
    r = tc_read(c, wait_deadline_ms(0));
    cr_assert_not_null(r, "the expired job never came back");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1);
    cr_assert_eq(jint(json_array_get(jobs, 0), "attempt"), 2, "the reaped attempt counts");
    json_decref(r);
    tc_close(c);
}

/* (10) SIGTERM is a clean exit. */
Test(daemon, sigterm_exits_zero)
{
    struct tc_conn *c = fx_conn();
    json_t *r = tc_call(c, "{\"op\":\"ping\"}");
    assert_ok(r);
    json_decref(r);
    cr_assert_eq(emqd_stop(&fx_emqd), 0);
    cr_assert(tc_read_eof(c, wait_deadline_ms(0)), "connection still open after SIGTERM");
    tc_close(c);
}

/* A client that pipelines its lines and half-closes (shutdown(SHUT_WR),
 * as nc -N does) still reads every reply it is owed, in order, then the
 * end of the stream; and a claim parked when the input ends is answered
 * rather than left waiting. */
Test(daemon, a_half_closed_client_gets_every_reply)
{
    enum { N = 100 };
    struct tc_conn *c = fx_conn();
    static char lines[N * 160];
    size_t o = 0;
    for (int i = 0; i < N; i++)
        o += (size_t)snprintf(
            lines + o, sizeof(lines) - o,
            i % 2 ? "{\"op\":\"depth\",\"queue\":\"hc\",\"group\":\"TENa\",\"ref\":%d}\n"
                  : "{\"op\":\"enqueue\",\"queue\":\"hc\",\"group\":\"TENa\","
                    "\"payload\":%d,\"ref\":%d}\n",
            i, i);
    o += (size_t)snprintf(lines + o, sizeof(lines) - o,
                          "{\"op\":\"claim\",\"queue\":\"empty\",\"wait_ms\":600000,\"ref\":%d}\n",
                          N);
    cr_assert_eq(tc_send(c, lines, o), 0);
    cr_assert_eq(shutdown(c->fd, SHUT_WR), 0);
    for (int i = 0; i <= N; i++) {
        json_t *r = tc_read(c, wait_deadline_ms(0));
        assert_ok(r);
        cr_assert_eq(jint(r, "ref"), i, "reply %d in order", i);
        if (i % 2 == 1 && i < N) /* one connection is an ordered session */
            cr_assert_eq(jint(r, "depth"), (i + 1) / 2, "depth after %d enqueues", (i + 1) / 2);
        json_decref(r);
    }
    cr_assert(tc_read_eof(c, wait_deadline_ms(0)), "emqd closes once every reply is written");
    tc_close(c);
    c = fx_conn();
    cr_assert_eq(fx_stat(c, "hc", "pending"), N / 2, "every enqueue took effect");
    tc_close(c);
}

/* A lease made while an upkeep pass is between its two calls (reap, then
 * promote) is still reaped at its deadline, although the reap answered
 * before the lease existed: the pass's reschedule honours the due time
 * asked for meanwhile. Upkeep runs hourly here, so only that due time can
 * reap the lease. Redis holds every write back while a new queue's first
 * pass sends its reap; the claim sent after it lands between the pass's
 * two calls. */
Test(daemon, a_lease_made_during_an_upkeep_pass_is_reaped_at_its_deadline)
{
    fx_teardown();
    const char *const extra[] = {"--upkeep-ms", "3600000", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn(), *p = fx_conn();
    fx_redis_pause_writes(true);
    /* The enqueue makes the queue, whose first pass starts on the loop's
     * next turn. Two pings answered on another connection after it mean
     * the loop has turned since the enqueue was read (it serves sockets
     * in the order they became readable): the pass has sent its reap. */
    cr_assert_eq(tc_send_line(c, "{\"op\":\"enqueue\",\"queue\":\"ur\",\"group\":\"TENa\","
                                 "\"payload\":1}"),
                 0);
    for (int i = 0; i < 2; i++) {
        json_t *r = tc_call(p, "{\"op\":\"ping\"}");
        assert_ok(r);
        json_decref(r);
    }
    cr_assert_eq(
        tc_send_line(c, "{\"op\":\"claim\",\"queue\":\"ur\",\"count\":1,\"lease_ms\":300}"), 0);
    json_t *r = tc_call(p, "{\"op\":\"ping\"}"); /* the claim was read and sent */
    assert_ok(r);
    json_decref(r);
    fx_redis_pause_writes(false);
    r = tc_read(c, wait_deadline_ms(0));
    assert_ok(r);
    json_decref(r);
    json_t *cl = tc_read(c, wait_deadline_ms(0));
    cr_assert_eq(json_array_size(claim_jobs(cl)), 1, "the claim leased the job");
    json_decref(cl);
    await(fx_stat(p, "ur", "pending") == 1, "the expired lease to be reaped by its own due time");
    tc_close(c);
    tc_close(p);
}

/* Off a cluster a script call declares no key (the scripts build every key
 * from the prefix, ARGV[1]; a declared key costs Redis about 1,300
 * instructions a call): every FCALL emqd sends for an enqueue, a claim
 * and a completion is "FCALL <function> 0 <prefix> ...". */
Test(daemon, script_calls_declare_no_key_off_a_cluster)
{
    struct tc_conn *c = fx_conn();
    struct monitor m;
    cr_assert_eq(monitor_start(&m, &fx_redis), 0);
    json_t *r =
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"nk\",\"group\":\"TENa\",\"payload\":1}");
    assert_ok(r);
    json_decref(r);
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"nk\",\"count\":1}");
    assert_ok(r);
    json_t *j = json_array_get(claim_jobs(r), 0);
    cr_assert_not_null(j);
    json_t *done =
        tc_call(c, "{\"op\":\"complete\",\"queue\":\"nk\",\"job\":\"%s\",\"lease\":\"%s\"}",
                jstr(j, "job"), jstr(j, "lease"));
    assert_ok(done);
    json_decref(done);
    json_decref(r);
    monitor_stop(&m);
    int calls = 0;
    for (size_t i = 0; i < m.n; i++) {
        const char *at = strstr(m.lines[i], "\"FCALL\" \"");
        if (at == NULL)
            continue;
        calls++;
        const char *rest = strchr(at + strlen("\"FCALL\" \""), '"'); /* past the name */
        cr_assert_not_null(rest, "%.200s", m.lines[i]);
        cr_assert(strncmp(rest, "\" \"0\" \"emq:{", 12) == 0, "a call declared keys: %.200s",
                  m.lines[i]);
    }
    cr_assert_geq(calls, 3, "enqueue, claim and complete are script calls (%d seen)", calls);
    monitor_free(&m);
    tc_close(c);
}
