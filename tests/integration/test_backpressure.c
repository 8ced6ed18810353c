/* Back-pressure around parked claims: a client that stops reading while it
 * has claims parked, replies piling up behind a parked claim, and parked
 * claims left behind by a client that goes away. Each test ends by
 * stopping emqd with SIGTERM and asserting a clean exit, so under ASan a
 * leak or a use-after-free fails it. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixture.h"

static void bp_setup(void)
{
    emqd_rss_shows_live_memory();
}

TestSuite(backpressure, .init = bp_setup, .fini = fx_teardown, .timeout = 120);

static json_t *call_ok(struct tc_conn *c, const char *line)
{
    json_t *r = tc_call(c, "%s", line);
    assert_ok(r);
    return r;
}

static void enqueue_big(struct tc_conn *c, const char *queue, int n, size_t bytes)
{
    char *line = malloc(bytes + 128);
    cr_assert_not_null(line);
    int o = snprintf(line, 128,
                     "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENa\","
                     "\"payload\":\"",
                     queue);
    memset(line + o, 'x', bytes);
    strcpy(line + o + bytes, "\"}");
    for (int i = 0; i < n; i++)
        json_decref(call_ok(c, line));
    free(line);
}

/* Wait until the queue has no active job (leases released). */
static void await_released(struct tc_conn *c, const char *queue)
{
    await(fx_stat(c, queue, "active") == 0, "queue %s: every lease released", queue);
}

/* Read and discard whatever fd has until EOF; false if it stays open. */
static bool read_to_eof(int fd, int timeout_ms)
{
    static char sink[1 << 16];
    long long end = wait_now_ms() + timeout_ms;
    for (;;) {
        long long left = end - wait_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return false;
        ssize_t n = read(fd, sink, sizeof(sink));
        if (n <= 0)
            return true;
    }
}

/* A worker takes one large claim and stops reading, with two more claims
 * parked. When work arrives, answering the first parked claim passes the
 * cap and closes the connection, which frees the second parked claim: the
 * daemon must not touch it afterwards. It keeps serving, and everything
 * the worker held goes back. */
Test(backpressure, parked_claims_answered_past_max_output_do_not_crash)
{
    const char *const extra[] = {"--max-output", "1048576", NULL};
    fx_start(extra);
    struct tc_conn *p = fx_conn();
    enqueue_big(p, "big", 20, 400000);

    struct tc_conn *w = fx_conn();
    int small = 4096;
    setsockopt(w->fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    cr_assert_eq(
        tc_send_line(w, "{\"op\":\"claim\",\"queue\":\"big\",\"count\":20,\"lease_ms\":3600000}"),
        0);
    await(fx_stat(p, "big", "active") == 20, "the large claim to lease all 20 jobs");
    /* Each parked claim is handled (it found nothing and parked) once the
     * daemon is quiet. */
    cr_assert_eq(tc_send_line(w, "{\"op\":\"claim\",\"queue\":\"empty\",\"wait_ms\":3600000,"
                                 "\"lease_ms\":3600000}"),
                 0);
    fx_await_quiet(&fx_emqd);
    cr_assert_eq(tc_send_line(w, "{\"op\":\"claim\",\"queue\":\"empty\",\"wait_ms\":3600000,"
                                 "\"lease_ms\":3600000}"),
                 0);
    fx_await_quiet(&fx_emqd);
    json_decref(call_ok(p, "{\"op\":\"enqueue_many\",\"queue\":\"empty\",\"group\":\"TENb\","
                           "\"jobs\":[{\"payload\":1},{\"payload\":2}]}"));

    /* The worker cannot drain its tiny receive window in reasonable time,
     * so the disconnect shows as its leases coming back: a live connection
     * would hold them for their hour's lease. */
    json_decref(call_ok(p, "{\"op\":\"ping\"}"));
    await_released(p, "big");
    await_released(p, "empty");
    cr_assert_eq(fx_stat(p, "big", "pending"), 20);
    cr_assert_eq(fx_stat(p, "empty", "pending"), 2);
    tc_close(w);
    tc_close(p);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Requests pipelined behind a parked claim are executed, but their replies
 * must wait their turn. They keep only their reply, not their request (a
 * 500 KB payload each here), and large replies queued that way count
 * against max-output. */
Test(backpressure, replies_queued_behind_a_parked_claim_are_bounded)
{
    const char *const extra[] = {"--max-output", "1048576", "--redis-timeout-ms", "20000", NULL};
    fx_start(extra);
    struct tc_conn *p = fx_conn();
    long rss0 = emqd_rss_kb(&fx_emqd);
    cr_assert_gt(rss0, 0);

    /* 150 enqueues of 500 KB behind a claim parked for an hour: 75 MB of
     * requests, a few KB of replies. */
    struct tc_conn *w = fx_conn();
    cr_assert_eq(tc_send_line(w, "{\"op\":\"claim\",\"queue\":\"none\",\"wait_ms\":3600000}"), 0);
    size_t bytes = 500000;
    char *line = malloc(bytes + 128);
    cr_assert_not_null(line);
    int o = snprintf(line, 128,
                     "{\"op\":\"enqueue\",\"queue\":\"mem\",\"group\":\"TENa\","
                     "\"payload\":\"");
    memset(line + o, 'x', bytes);
    strcpy(line + o + bytes, "\"}");
    for (int i = 0; i < 150; i++)
        cr_assert_eq(tc_send_line(w, line), 0);
    free(line);
    await(fx_stat(p, "mem", "pending") == 150, "the 150 pipelined enqueues to run");
    long grown = emqd_rss_kb(&fx_emqd) - rss0;
    cr_assert_lt(grown, 40 * 1024, "emqd grew by %ld KiB holding 150 small replies", grown);

    /* A claim reply of 2 MB queued behind the parked claim passes the
     * 1 MiB cap: the connection goes, and the jobs with it. */
    enqueue_big(p, "big", 20, 100000);
    cr_assert_eq(
        tc_send_line(w, "{\"op\":\"claim\",\"queue\":\"big\",\"count\":20,\"lease_ms\":3600000}"),
        0);
    cr_assert(read_to_eof(w->fd, wait_deadline_ms(0)),
              "queued replies past max-output kept the connection");
    await_released(p, "big");
    cr_assert_eq(fx_stat(p, "big", "pending"), 20);
    tc_close(w);
    tc_close(p);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Clients that leave with a claim parked: the claim's request is finished
 * with the connection (under ASan a leaked request or client fails the
 * clean exit), and work enqueued afterwards is not handed to them but to
 * the one claim still waiting. */
Test(backpressure, a_parked_claim_left_behind_is_freed)
{
    fx_start(NULL);
    for (int i = 0; i < 3; i++) {
        struct tc_conn *w = fx_conn();
        cr_assert_eq(tc_send_line(w, "{\"op\":\"claim\",\"queue\":\"gone\",\"wait_ms\":3600000}"),
                     0);
        fx_await_quiet(&fx_emqd); /* parked */
        tc_close(w);
        await(emqd_metric(&fx_emqd, "emqd_connections") == 0, "emqd to close departed client %d",
              i);
    }
    /* Parked after them: if their claims were still linked, they would be
     * served first. */
    struct tc_conn *live = fx_conn();
    cr_assert_eq(tc_send_line(live, "{\"op\":\"claim\",\"queue\":\"gone\",\"wait_ms\":3600000}"),
                 0);
    fx_await_quiet(&fx_emqd);
    struct tc_conn *p = fx_conn();
    json_decref(call_ok(p, "{\"op\":\"enqueue\",\"queue\":\"gone\",\"group\":\"TENa\","
                           "\"payload\":1}"));
    json_t *r = tc_read(live, wait_deadline_ms(0));
    cr_assert_not_null(r, "the waiting claim never got the job");
    cr_assert_eq(json_array_size(claim_jobs(r)), 1, "the job went to the claim still waiting");
    json_decref(r);
    cr_assert_eq(fx_stat(p, "gone", "active"), 1, "one lease: the live claim's");
    cr_assert_eq(fx_stat(p, "gone", "pending"), 0);
    tc_close(live);
    tc_close(p);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* max-claim-bytes: a claim of many large jobs gets the jobs whose
 * payloads add up to the bound (the one crossing it included) instead of
 * one huge reply; the rest wait for the next claim. A stream's refills
 * are cut the same way and pump again, so a stream still gets them all. */
Test(backpressure, a_claim_of_large_jobs_stops_at_max_claim_bytes)
{
    fx_teardown();
    const char *const extra[] = {"--max-claim-bytes", "4096", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    enqueue_big(c, "mc", 10, 2000); /* payloads of 2,002 bytes of JSON */
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"mc\",\"count\":10,\"lease_ms\":3600000}");
    cr_assert_eq(json_array_size(claim_jobs(r)), 3, "2002 + 2002 < 4096 <= 3 x 2002: three jobs");
    json_decref(r);
    struct tc_conn *w = fx_conn();
    r = tc_call(w, "{\"op\":\"stream\",\"queue\":\"mc\",\"credit\":10,\"lease_ms\":3600000}");
    assert_ok(r);
    json_decref(r);
    for (int i = 0; i < 7; i++) {
        json_t *push = tc_read(w, wait_deadline_ms(0));
        cr_assert_not_null(push, "the stream got %d of the 7 left", i);
        cr_assert_not_null(json_object_get(push, "push"));
        json_decref(push);
    }
    tc_close(w);
    tc_close(c);
}
