/* Leases held by a connection: the daemon's own record of which jobs a
 * connection holds (it gives them back when the connection closes, and
 * counts a stream's credit by them) must follow the lease tokens exactly,
 * whatever order leases, settles and refusals come in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"
#include "monitor.h"

TestSuite(leases, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

/* Read frames on c until one that is not a push; the pushes met on the
 * way are appended to pushes (may be NULL: then none may come). */
static json_t *reply_past_pushes(struct tc_conn *c, json_t *pushes)
{
    for (;;) {
        json_t *f = tc_read(c, wait_deadline_ms(0));
        cr_assert_not_null(f, "no reply");
        if (json_object_get(f, "push") == NULL)
            return f;
        cr_assert_not_null(pushes, "an unexpected push");
        json_array_append_new(pushes, f);
    }
}

/* The next push on c (from pushes first, then the wire). */
static json_t *next_push(struct tc_conn *c, json_t *pushes)
{
    if (json_array_size(pushes) > 0) {
        json_t *p = json_incref(json_array_get(pushes, 0));
        json_array_remove(pushes, 0);
        return p;
    }
    json_t *f = tc_read(c, wait_deadline_ms(0));
    cr_assert_not_null(f, "no push came");
    cr_assert_not_null(json_object_get(f, "push"), "a reply where a push was expected");
    return f;
}

static char *enqueue(struct tc_conn *p, const char *queue, const char *group)
{
    json_t *r = tc_call(p, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"%s\",\"payload\":1}",
                        queue, group);
    assert_ok(r);
    char *id = strdup(jstr(r, "job"));
    json_decref(r);
    return id;
}

/* The state of job in queue, read on c. */
static char *state_of(struct tc_conn *c, const char *queue, const char *job)
{
    json_t *r = tc_call(c, "{\"op\":\"job\",\"queue\":\"%s\",\"job\":\"%s\"}", queue, job);
    assert_ok(r);
    char *s = strdup(jstr(json_object_get(r, "job"), "state"));
    json_decref(r);
    return s;
}

static bool job_in_state(struct tc_conn *c, const char *queue, const char *job, const char *want)
{
    char *s = state_of(c, queue, job);
    bool yes = strcmp(s, want) == 0;
    free(s);
    return yes;
}

/* A job whose lease ran out is reaped and pushed to the same stream again
 * before the daemon's sweep forgot the first lease. The connection's
 * record must then stand for the new lease alone: settling it returns the
 * stream's credit in full, so two new jobs both arrive. */
Test(leases, a_job_pushed_again_to_the_same_stream_costs_no_credit)
{
    struct tc_conn *p = fx_conn(), *w = fx_conn();
    json_t *r = tc_call(w, "{\"op\":\"stream\",\"queue\":\"ls1\",\"credit\":2,\"lease_ms\":300}");
    assert_ok(r);
    json_decref(r);
    char *a = enqueue(p, "ls1", "TENa");
    json_t *first = next_push(w, NULL);
    cr_assert_str_eq(jstr(first, "job"), a);
    /* Not settled: Redis reaps it when the 300 ms lease runs out, and the
     * stream, with room for one more, is pushed it again. */
    json_t *again = next_push(w, NULL);
    cr_assert_str_eq(jstr(again, "job"), a, "the reaped job came back to the stream");
    cr_assert_str_neq(jstr(again, "lease"), jstr(first, "lease"), "on a new lease");
    cr_assert_geq(jint(again, "attempt"), 2);
    cr_assert_eq(tc_send_line(w, "{\"op\":\"stream\",\"queue\":\"ls1\",\"credit\":2,"
                                 "\"lease_ms\":3600000}"),
                 0);
    json_t *pushes = json_array();
    r = reply_past_pushes(w, pushes);
    assert_ok(r);
    json_decref(r);
    char line[256];
    snprintf(line, sizeof(line),
             "{\"op\":\"complete\",\"queue\":\"ls1\",\"job\":\"%s\",\"lease\":\"%s\"}", a,
             jstr(again, "lease"));
    cr_assert_eq(tc_send_line(w, line), 0);
    r = reply_past_pushes(w, pushes);
    assert_ok(r);
    cr_assert_str_eq(jstr(r, "state"), "completed");
    json_decref(r);

    char *b = enqueue(p, "ls1", "TENa"), *c = enqueue(p, "ls1", "TENa");
    json_t *pb = next_push(w, pushes), *pc = next_push(w, pushes);
    cr_assert_str_eq(jstr(pb, "job"), b);
    cr_assert_str_eq(jstr(pc, "job"), c, "the stream's credit of 2 is whole again");
    json_decref(pb);
    json_decref(pc);
    json_decref(pushes);
    json_decref(first);
    json_decref(again);
    free(a);
    free(b);
    free(c);
    tc_close(p);
    tc_close(w);
}

/* A late complete with a lease that expired (the job was reaped and
 * claimed again by the same connection) is refused with ELEASE, and must
 * not make the connection forget the job's current lease: closing the
 * connection still gives the job back at once. */
Test(leases, a_late_complete_keeps_the_current_lease_held)
{
    struct tc_conn *p = fx_conn(), *w = fx_conn();
    char *a = enqueue(p, "ls2", "TENa");
    json_t *r = tc_call(w, "{\"op\":\"claim\",\"queue\":\"ls2\",\"lease_ms\":200}");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1);
    char *old = strdup(jstr(json_array_get(jobs, 0), "lease"));
    json_decref(r);
    /* The 200 ms lease runs out and the upkeep reaps it. */
    await(job_in_state(p, "ls2", a, "pending"), "the expired lease reaped");
    r = tc_call(w, "{\"op\":\"claim\",\"queue\":\"ls2\",\"lease_ms\":3600000}");
    jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1);
    cr_assert_str_eq(jstr(json_array_get(jobs, 0), "job"), a, "the same job, leased again");
    json_decref(r);
    r = tc_call(w, "{\"op\":\"complete\",\"queue\":\"ls2\",\"job\":\"%s\",\"lease\":\"%s\"}", a,
                old);
    assert_err_free(r, "ELEASE");
    tc_close(w); /* holding the job on its hour-long lease */
    await(job_in_state(p, "ls2", a, "pending"), "the job given back when the connection closed");
    free(old);
    free(a);
    tc_close(p);
}

/* An extend that Redis refuses for a reason of its own (too few replicas
 * to write to, here: NOREPLICAS) says nothing about the lease: the connection still holds it, so
 * a credit-1 stream gets no second job, and closing gives the job back. */
Test(leases, a_backend_refusal_keeps_the_lease_held)
{
    struct tc_conn *p = fx_conn(), *w = fx_conn();
    json_t *r =
        tc_call(w, "{\"op\":\"stream\",\"queue\":\"ls3\",\"credit\":1,\"lease_ms\":3600000}");
    assert_ok(r);
    json_decref(r);
    char *a = enqueue(p, "ls3", "TENa");
    json_t *push = next_push(w, NULL);
    cr_assert_str_eq(jstr(push, "job"), a);

    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    redisReply *x = redisCommand(rc, "CONFIG SET min-replicas-to-write 1");
    cr_assert(x != NULL && x->type == REDIS_REPLY_STATUS);
    freeReplyObject(x);
    r = tc_call(w,
                "{\"op\":\"extend\",\"queue\":\"ls3\",\"job\":\"%s\",\"lease\":\"%s\","
                "\"lease_ms\":3600000}",
                a, jstr(push, "lease"));
    cr_assert(!tc_ok(r), "the extend is refused while Redis lacks replicas");
    cr_assert_str_neq(tc_error(r), "ELEASE");
    cr_assert_str_neq(tc_error(r), "ENOJOB");
    json_decref(r);
    x = redisCommand(rc, "CONFIG SET min-replicas-to-write 0");
    cr_assert(x != NULL && x->type == REDIS_REPLY_STATUS);
    freeReplyObject(x);
    redisFree(rc);

    char *b = enqueue(p, "ls3", "TENa");
    assert_nothing_pushed(w, "a second job on a credit-1 stream that still holds one");
    tc_close(w);
    await(job_in_state(p, "ls3", a, "pending"),
          "the held job given back when the connection closed");
    json_decref(push);
    free(a);
    free(b);
    tc_close(p);
}

/* --- settling many at once: bounded calls ------------------------------ */

/* The most pairs one settling call carries (daemon/store/jobs.h,
 * STORE_PAIRS_PER_CALL): a script runs alone in Redis, so a bigger set
 * goes in several calls. */
#define PAIRS_PER_CALL 128
#define MANY           600

/* Enqueue MANY flat jobs into queue and lease them all on c; the leases
 * (job, lease) go into jobs, an array of [job, lease]. */
static json_t *lease_many(struct tc_conn *c, const char *queue)
{
    size_t cap = 64 + MANY * 32, used = 0;
    char *line = malloc(cap);
    used +=
        (size_t)snprintf(line, cap, "{\"op\":\"enqueue_many\",\"queue\":\"%s\",\"jobs\":[", queue);
    for (int i = 0; i < MANY; i++)
        used += (size_t)snprintf(line + used, cap - used, "%s{\"job\":\"JOBm%04d\",\"payload\":1}",
                                 i ? "," : "", i);
    snprintf(line + used, cap - used, "]}");
    cr_assert_eq(tc_send_line(c, line), 0);
    free(line);
    json_t *r = tc_read(c, wait_deadline_ms(0));
    assert_ok(r);
    json_decref(r);

    json_t *jobs = json_array();
    while (json_array_size(jobs) < MANY) {
        json_t *cl =
            OK(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"flat\":true,\"count\":1000}", queue);
        json_t *got = json_object_get(cl, "jobs");
        cr_assert_gt(json_array_size(got), 0, "the backlog ran out early");
        size_t i;
        json_t *j;
        json_array_foreach(got, i, j)
            json_array_append_new(jobs, json_pack("[s,s]", jstr(j, "job"), jstr(j, "lease")));
        json_decref(cl);
    }
    cr_assert_eq(json_array_size(jobs), MANY);
    return jobs;
}

/* Count the calls among m's lines that carry job ids and contain mark
 * (NULL: any); each call's count of ids must stay within PAIRS_PER_CALL,
 * and the counts add up to the returned total. */
static size_t ids_in_bounded_calls(const struct monitor *m, const char *mark, size_t *calls)
{
    size_t total = 0;
    *calls = 0;
    for (size_t i = 0; i < m->n; i++) {
        const char *s = m->lines[i];
        if (strstr(s, "\"FCALL\"") == NULL || (mark != NULL && strstr(s, mark) == NULL))
            continue;
        size_t ids = 0;
        for (const char *k = strstr(s, "\"JOBm"); k != NULL; k = strstr(k + 5, "\"JOBm"))
            ids++;
        if (ids == 0)
            continue;
        cr_assert_leq(ids, PAIRS_PER_CALL, "one call carried %zu jobs: %.200s", ids, s);
        total += ids;
        (*calls)++;
    }
    return total;
}

/* A connection that closes holding 600 leases has them all given back,
 * in calls of at most 128 pairs (not one script run of 600). */
Test(leases, a_big_release_on_close_goes_in_bounded_calls)
{
    struct tc_conn *w = fx_conn(), *c = fx_conn();
    json_decref(lease_many(w, "bigrel"));
    cr_assert_eq(fx_stat(c, "bigrel", "active"), MANY);
    struct monitor m;
    cr_assert_eq(monitor_start(&m, &fx_redis), 0);
    tc_close(w);
    await(fx_stat(c, "bigrel", "active") == 0 && fx_stat(c, "bigrel", "pending") == MANY,
          "the %d leases given back", MANY);
    monitor_stop(&m);
    size_t calls;
    cr_assert_eq(ids_in_bounded_calls(&m, "connection closed", &calls), MANY);
    cr_assert_geq(calls, (MANY + PAIRS_PER_CALL - 1) / PAIRS_PER_CALL);
    monitor_free(&m);
    tc_close(c);
}

/* 600 completes pipelined in one write all take effect, in calls of at
 * most 128 pairs however many one loop turn reads. */
Test(leases, pipelined_completes_go_in_bounded_calls)
{
    struct tc_conn *w = fx_conn();
    json_t *jobs = lease_many(w, "bigdone");
    size_t cap = MANY * 128, used = 0;
    char *lines = malloc(cap);
    size_t i;
    json_t *p;
    json_array_foreach(jobs, i, p) used += (size_t)snprintf(
        lines + used, cap - used,
        "{\"op\":\"complete\",\"queue\":\"bigdone\",\"job\":\"%s\","
        "\"lease\":\"%s\"}\n",
        json_string_value(json_array_get(p, 0)), json_string_value(json_array_get(p, 1)));
    struct monitor m;
    cr_assert_eq(monitor_start(&m, &fx_redis), 0);
    cr_assert_eq(tc_send(w, lines, used), 0);
    free(lines);
    for (i = 0; i < MANY; i++) {
        json_t *r = tc_read(w, wait_deadline_ms(0));
        assert_ok(r);
        cr_assert_str_eq(jstr(r, "state"), "completed");
        json_decref(r);
    }
    monitor_stop(&m);
    size_t calls;
    cr_assert_eq(ids_in_bounded_calls(&m, NULL, &calls), MANY);
    monitor_free(&m);
    cr_assert_eq(fx_stat(w, "bigdone", "active"), 0);
    json_decref(jobs);
    tc_close(w);
}

/* Overwrite job's stored payload at Redis, as a hand other than emqd's
 * might (emqd stores only compact JSON). */
static void corrupt_payload(const char *queue, const char *job, const char *payload)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    redisReply *r =
        redisCommand(rc, "HSET emq:{%s}:job:%s payload %b", queue, job, payload, strlen(payload));
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER, "HSET refused");
    freeReplyObject(r);
    redisFree(rc);
}

/* Whether queue's dead list holds job, with an error saying its payload
 * cannot be sent. */
static bool dead_unsendable(struct tc_conn *c, const char *queue, const char *job)
{
    json_t *r =
        OK(c, "{\"op\":\"dead\",\"queue\":\"%s\",\"action\":\"list\",\"limit\":100}", queue);
    json_t *jobs = json_object_get(r, "jobs"), *d;
    size_t i;
    bool found = false;
    json_array_foreach(jobs, i, d)
    {
        if (strcmp(jstr(d, "job"), job) == 0)
            found = strstr(jstr(d, "error"), "cannot be sent") != NULL;
    }
    json_decref(r);
    return found;
}

/* A job whose stored payload emqd could not have written (empty, or
 * holding a newline: a row changed straight at Redis) would break its
 * connection's framing, and given back it would be served again, to each
 * worker in turn. So it is never handed out, by a claim or a stream: it
 * goes to the dead set with its reason, the connection stays up, and the
 * jobs beside it are served. */
Test(leases, a_job_whose_stored_payload_cannot_be_sent_is_dead_lettered)
{
    struct tc_conn *p = fx_conn(), *w = fx_conn();
    char *bad1 = enqueue(p, "ls6", "TENa"), *good = enqueue(p, "ls6", "TENa"),
         *bad2 = enqueue(p, "ls6", "TENb");
    corrupt_payload("ls6", bad1, "");
    corrupt_payload("ls6", bad2, "{\"a\":\n1}");

    /* A claim of all three gets the sendable one. */
    json_t *r = tc_call(w, "{\"op\":\"claim\",\"queue\":\"ls6\",\"count\":3,\"lease_ms\":3600000}");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1, "only the sendable job is handed out");
    cr_assert_str_eq(jstr(json_array_get(jobs, 0), "job"), good);
    json_decref(r);
    await(dead_unsendable(p, "ls6", bad1) && dead_unsendable(p, "ls6", bad2),
          "both unsendable jobs dead-lettered, with their reason");

    /* A stream skips one too, and is pushed the job behind it: the
     * buried job costs it no credit. */
    char *bad3 = enqueue(p, "ls6", "TENc"), *next = enqueue(p, "ls6", "TENc");
    corrupt_payload("ls6", bad3, "");
    r = tc_call(w, "{\"op\":\"stream\",\"queue\":\"ls6\",\"credit\":1,\"lease_ms\":3600000}");
    assert_ok(r);
    json_decref(r);
    json_t *push = next_push(w, NULL);
    cr_assert_str_eq(jstr(push, "job"), next);
    json_decref(push);
    await(dead_unsendable(p, "ls6", bad3), "the streamed-past job dead-lettered");

    /* A parked claim is not answered for one: put back by `dead retry`
     * (its row still unmended) while the claim waits, it is buried
     * again, and the claim is answered with the next job it can have. */
    struct tc_conn *k = fx_conn();
    cr_assert_eq(tc_send_line(k, "{\"op\":\"claim\",\"queue\":\"ls6\",\"count\":1,"
                                 "\"wait_ms\":3600000,\"lease_ms\":3600000}"),
                 0);
    fx_await_quiet(&fx_emqd); /* parked: nothing to claim */
    r = OK(p, "{\"op\":\"dead\",\"queue\":\"ls6\",\"action\":\"retry\",\"job\":\"%s\"}", bad1);
    cr_assert_eq(jint(r, "count"), 1);
    json_decref(r);
    await(dead_unsendable(p, "ls6", bad1), "the retried job buried again");
    char *last = enqueue(p, "ls6", "TENa");
    r = tc_read(k, wait_deadline_ms(0));
    jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1);
    cr_assert_str_eq(jstr(json_array_get(jobs, 0), "job"), last);
    json_decref(r);
    tc_close(k);

    /* The worker's connection is still up and in step, and the store is
     * sound. */
    cr_assert_eq(tc_send_line(w, "{\"op\":\"ping\",\"ref\":\"after\"}"), 0);
    r = reply_past_pushes(w, NULL);
    assert_ok(r);
    cr_assert_str_eq(jstr(r, "ref"), "after");
    json_decref(r);
    cr_assert_eq(fx_stat(p, "ls6", "dead"), 3);
    free(last);
    assert_check_clean(p, "ls6");
    free(bad1), free(good), free(bad2), free(bad3), free(next);
    tc_close(p);
    tc_close(w);
}
