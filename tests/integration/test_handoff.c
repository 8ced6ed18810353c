/* Integration: an enqueue that finds a consumer parked on this emqd and
 * nothing else serviceable hands its job straight to it (one Redis round
 * trip, no wake, no claim script), within the consumer's credit; a
 * consumer that leaves while the hand-off is in flight loses nothing; and
 * however jobs reach a stream (hand-off or claim), it is pushed them in
 * the order they were leased.
 *
 * Whether an enqueue may hand off depends on what the daemon has out at
 * Redis (no claim for the consumer may be in flight), so these tests wait
 * for the daemon to be quiet (emqd_quiet) before an enqueue that must be
 * handed off, and run it without timers that claim by themselves: the
 * upkeep pass and the reap of due leases are an hour away. */
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "fixture.h"

/* No periodic upkeep pass (it claims for parked consumers) and leases
 * that never come due during a test. */
#define NO_TIMERS "--upkeep-ms", "3600000", "--lease-ms", "3600000"

static void handoff_setup(void)
{
    const char *const extra[] = {NO_TIMERS, NULL};
    fx_start(extra);
}

TestSuite(handoff, .init = handoff_setup, .fini = fx_teardown, .timeout = 60);

static json_t *ok_call(struct tc_conn *c, const char *line)
{
    json_t *r = tc_call(c, "%s", line);
    assert_ok(r);
    return r;
}

static void check_clean(struct tc_conn *c)
{
    json_t *r = ok_call(c, "{\"op\":\"check\",\"queue\":\"h\"}");
    json_t *v = json_object_get(r, "violations");
    char *d = json_dumps(v, JSON_COMPACT);
    cr_assert_eq(json_array_size(v), 0, "invariants violated: %s", d);
    free(d);
    json_decref(r);
}

static void complete(struct tc_conn *c, const json_t *push)
{
    json_t *r = tc_call(c, "{\"op\":\"complete\",\"queue\":\"h\",\"job\":\"%s\",\"lease\":\"%s\"}",
                        jstr(push, "job"), jstr(push, "lease"));
    assert_ok(r);
    cr_assert_str_eq(jstr(r, "state"), "completed");
    json_decref(r);
}

Test(handoff, a_parked_stream_is_pushed_the_job_without_a_wake_or_a_claim)
{
    struct tc_conn *w = fx_conn(), *p = fx_conn();
    json_decref(ok_call(w, "{\"op\":\"stream\",\"queue\":\"h\",\"credit\":4}"));
    fx_await_quiet(&fx_emqd); /* the claim made on parking is back */
    long long pub0 = fx_redis_calls("publish"), lmove0 = fx_redis_calls("lmove");
    long long incr0 = fx_redis_calls("incr");
    for (int i = 0; i < 3; i++) {
        char line[160];
        snprintf(line, sizeof(line),
                 "{\"op\":\"enqueue\",\"queue\":\"h\",\"job\":\"JOBg%d\",\"group\":\"TENa\","
                 "\"payload\":{\"i\":%d}}",
                 i, i);
        json_t *r = ok_call(p, line);
        cr_assert_str_eq(jstr(r, "verdict"), "enqueued");
        json_decref(r);
        json_t *push = tc_read(w, wait_deadline_ms(0));
        cr_assert_not_null(push, "job %d was not pushed", i);
        cr_assert_str_eq(jstr(push, "push"), "job");
        cr_assert_str_eq(jstr(push, "group"), "TENa");
        cr_assert_eq(jint(json_object_get(push, "payload"), "i"), i, "the payload as sent");
        cr_assert_eq(jint(push, "attempt"), 1);
        complete(w, push);
        json_decref(push);
    }
    cr_assert_eq(fx_redis_calls("incr"), incr0 + 3, "each job was handed off (a lease token each)");
    cr_assert_eq(fx_redis_calls("publish"), pub0, "a hand-off wakes no one");
    cr_assert_eq(fx_redis_calls("lmove"), lmove0, "and runs no claim");
    check_clean(p);
    tc_close(w);
    tc_close(p);
}

Test(handoff, a_parked_claim_is_answered_with_a_flat_job)
{
    struct tc_conn *w = fx_conn(), *p = fx_conn();
    /* An hour's wait: only the job can answer the claim within the test. */
    const char *claim = "{\"op\":\"claim\",\"queue\":\"h\",\"flat\":true,\"wait_ms\":3600000}";
    cr_assert_eq(tc_send_line(w, claim), 0);
    fx_await_quiet(&fx_emqd); /* the claim found nothing and parked */
    json_decref(ok_call(p, "{\"op\":\"enqueue\",\"queue\":\"h\",\"job\":\"JOBf1\",\"payload\":1}"));
    json_t *r = tc_read(w, wait_deadline_ms(0));
    assert_ok(r);
    json_t *jobs = json_object_get(r, "jobs");
    cr_assert_eq(json_array_size(jobs), 1, "the parked claim is answered with the job");
    json_t *j = json_array_get(jobs, 0);
    cr_assert_str_eq(jstr(j, "job"), "JOBf1");
    complete(w, j);
    json_decref(r);
    check_clean(p);
    tc_close(w);
    tc_close(p);
}

/* Enqueue JOBc<i> (five digits, so id order is number order) of TENa, as
 * one line (no newline added). */
static void enqueue_line(char *out, size_t cap, int i)
{
    snprintf(out, cap,
             "{\"op\":\"enqueue\",\"queue\":\"h\",\"job\":\"JOBc%05d\",\"group\":\"TENa\","
             "\"payload\":{}}",
             i);
}

/* Send n request lines in one write and read their n replies, all ok. */
static void send_pipelined(struct tc_conn *c, const char *lines, size_t len, int n)
{
    cr_assert_eq(tc_send(c, lines, len), 0);
    for (int i = 0; i < n; i++) {
        json_t *r = tc_read(c, wait_deadline_ms(0));
        assert_ok(r);
        json_decref(r);
    }
}

Test(handoff, one_at_a_time_the_rest_queue_and_are_served_oldest_first)
{
    struct tc_conn *w = fx_conn(), *p = fx_conn();
    json_decref(ok_call(w, "{\"op\":\"stream\",\"queue\":\"h\",\"credit\":1}"));
    for (int i = 0; i < 4; i++) {
        char line[200];
        enqueue_line(line, sizeof(line), i);
        json_decref(ok_call(p, line));
    }
    for (int i = 0; i < 4; i++) {
        json_t *push = tc_read(w, wait_deadline_ms(0));
        cr_assert_not_null(push, "job %d never came", i);
        char want[16];
        snprintf(want, sizeof(want), "JOBc%05d", i);
        cr_assert_str_eq(jstr(push, "job"), want, "the lane is served oldest first");
        assert_nothing_pushed(w, "a second push with credit 1 outstanding");
        complete(w, push);
        json_decref(push);
    }
    check_clean(p);
    tc_close(w);
    tc_close(p);
}

Test(handoff, pipelined_enqueues_never_push_past_the_credit_or_spend_an_attempt)
{
    /* Eight enqueues in one write are all in flight at once over the pool,
     * in no fixed order at Redis; only one hand-off may be asked for
     * (credit 1), and a job leased for a stream that is full by the time
     * it lands goes back with its attempt returned. */
    struct tc_conn *w = fx_conn(), *p = fx_conn();
    json_decref(ok_call(w, "{\"op\":\"stream\",\"queue\":\"h\",\"credit\":1}"));
    char lines[2048] = "";
    for (int i = 0; i < 8; i++) {
        char one[200];
        enqueue_line(one, sizeof(one), i);
        strcat(lines, one);
        strcat(lines, "\n");
    }
    send_pipelined(p, lines, strlen(lines), 8);
    bool seen[8] = {false};
    for (int i = 0; i < 8; i++) {
        json_t *push = tc_read(w, wait_deadline_ms(0));
        cr_assert_not_null(push, "only %d of 8 jobs came", i);
        int k = atoi(jstr(push, "job") + 4);
        cr_assert(k >= 0 && k < 8 && !seen[k], "%s pushed twice", jstr(push, "job"));
        seen[k] = true;
        cr_assert_eq(jint(push, "attempt"), 1, "%s: attempt spent", jstr(push, "job"));
        assert_nothing_pushed(w, "a second push with credit 1 outstanding");
        complete(w, push);
        json_decref(push);
    }
    check_clean(p);
    tc_close(w);
    tc_close(p);
}

/* The local port of c's socket: how the daemon's log names the client. */
static int local_port(const struct tc_conn *c)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    cr_assert_eq(getsockname(c->fd, (struct sockaddr *)&sa, &len), 0);
    return ntohs(sa.sin_port);
}

/* Claim one job on c into *got (a new reference) if one is there. */
static bool claim_one(struct tc_conn *c, json_t **got)
{
    json_t *cl = ok_call(c, "{\"op\":\"claim\",\"queue\":\"h\"}");
    json_t *jobs = json_object_get(cl, "jobs");
    if (json_array_size(jobs) == 1)
        *got = json_incref(json_array_get(jobs, 0));
    json_decref(cl);
    return *got != NULL;
}

Test(handoff, a_consumer_gone_before_its_hand_off_lands_gets_the_job_back_unspent)
{
    /* A streaming worker enqueues a job itself and hangs up at once. Redis
     * holds scripts back (CLIENT PAUSE WRITE) until emqd has logged the
     * end of that connection's input, so the EOF surely lands while the
     * enqueue, asking for a hand-off to this very stream, waits at Redis:
     * the stream has stopped (its input ended; the connection closes once
     * the enqueue's reply is out), and the leased job finds no one. It
     * must go back to its lane with its attempt returned. */
    fx_teardown();
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    /* The longest backend deadline: the paused enqueue must not be failed
     * (and its lease dropped) while the test waits for the log line. */
    const char *const extra[] = {NO_TIMERS, "--log-level", "debug", "--redis-timeout-ms",
                                 "600000",  NULL};
    fx_start(extra);
    struct tc_conn *w = fx_conn();
    json_decref(ok_call(w, "{\"op\":\"stream\",\"queue\":\"h\",\"credit\":1}"));
    /* Parking claims once and finds nothing; no hand-off is asked for
     * while that claim is out (it might take the job itself). */
    fx_await_quiet(&fx_emqd);
    fx_redis_pause_writes(true);
    const char *line = "{\"op\":\"enqueue\",\"queue\":\"h\",\"job\":\"JOBgone\","
                       "\"group\":\"TENa\",\"payload\":{},\"max_attempts\":1}\n";
    char closed_line[128];
    snprintf(closed_line, sizeof(closed_line),
             "msg=\"end of input: closing once every reply is written\" client=127.0.0.1:%d",
             local_port(w));
    cr_assert_eq(tc_send(w, line, strlen(line)), 0);
    tc_close(w);
    /* The daemon read the line before the EOF behind it, so the enqueue is
     * at Redis by the time the end of input is logged. */
    bool closed = wait_for(emqd_log_has(&fx_emqd, closed_line));
    fx_redis_pause_writes(false);
    cr_assert(closed, "emqd never logged the end of the worker's input");

    struct tc_conn *c = fx_conn();
    json_t *got = NULL;
    await(claim_one(c, &got), "JOBgone to come back to its lane");
    cr_assert_eq(fx_redis_calls("incr"), 1, "the enqueue was handed off (its lease token)");
    cr_assert_str_eq(jstr(got, "job"), "JOBgone");
    cr_assert_eq(jint(got, "attempt"), 1,
                 "max_attempts 1: a lease no one received must not spend the attempt");
    complete(c, got);
    json_decref(got);
    check_clean(c);
    tc_close(c);
}

Test(handoff, one_stream_sees_a_group_in_id_order_while_jobs_come_one_by_one)
{
    /* Hand-offs and claims both lease jobs; if both were out at once they
     * could land at Redis in one order and come back in the other, and a
     * stream would see a later job of a lane first. Jobs enqueued one by
     * one (each waits for its reply) must reach a single stream in order,
     * whichever path each one takes. */
    enum { N = 300 };
    struct tc_conn *w = fx_conn(), *p = fx_conn();
    json_decref(ok_call(w, "{\"op\":\"stream\",\"queue\":\"h\",\"credit\":1000}"));
    for (int i = 0; i < N; i++) {
        char line[200];
        enqueue_line(line, sizeof(line), i);
        json_decref(ok_call(p, line));
    }
    for (int i = 0; i < N; i++) {
        json_t *push = tc_read(w, wait_deadline_ms(0));
        cr_assert_not_null(push, "job %d never came", i);
        char want[16];
        snprintf(want, sizeof(want), "JOBc%05d", i);
        cr_assert_str_eq(jstr(push, "job"), want, "push %d out of order", i);
        json_decref(push);
    }
    tc_close(w);
    check_clean(p);
    tc_close(p);
}

Test(handoff, a_stream_is_pushed_jobs_in_the_order_they_were_leased)
{
    /* Lease tokens count up per queue in the order Redis leases jobs: a
     * token is opaque to clients, but emqd's are "<number>-<time>" in
     * hex (lua/lib.lua:token), and the number counts up.
     * Enqueues pipelined over the pool run at Redis in no fixed order, and
     * some are handed off while others are queued and claimed; whatever
     * the mix, the pushes to one stream must come in token order (two
     * leasing calls out at once could come back swapped). */
    enum { N = 60 };
    struct tc_conn *w = fx_conn(), *p = fx_conn();
    json_decref(ok_call(w, "{\"op\":\"stream\",\"queue\":\"h\",\"credit\":1000}"));
    fx_await_quiet(&fx_emqd); /* the claim made on parking is back */
    char lines[N * 128] = "";
    size_t len = 0;
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(lines + len, sizeof(lines) - len,
                                "{\"op\":\"enqueue\",\"queue\":\"h\",\"group\":\"TEN%c\","
                                "\"payload\":%d}\n",
                                'a' + i % 3, i);
    send_pipelined(p, lines, len, N);
    long long last = 0;
    for (int i = 0; i < N; i++) {
        json_t *push = tc_read(w, wait_deadline_ms(0));
        cr_assert_not_null(push, "only %d of %d jobs came", i, N);
        long long tok = strtoll(jstr(push, "lease"), NULL, 16); /* the number, up to '-' */
        cr_assert_gt(tok, last, "push %d has lease %lld after %lld", i, tok, last);
        last = tok;
        json_decref(push);
    }
    tc_close(w);
    check_clean(p);
    tc_close(p);
}
