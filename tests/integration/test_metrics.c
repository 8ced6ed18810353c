/* Integration: what the metrics endpoint counts. The pool's reconnect
 * counter counts connections back after a loss, not the start-up connect
 * however many tries it takes; the process_* families describe the emqd
 * process as procfs sees it; the job wait and run histograms count every
 * lease handed out and every settle by a lease's holder, per queue, and
 * the wait runs from when the job became claimable. The tests wait for
 * events by polling the endpoint (or the event itself) against generous
 * deadlines; nothing asserts how long anything took (the wait sums are
 * checked against the Redis-clock times the daemon itself reports). */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "fixture.h"
#include "scrape.h"

TestSuite(metrics, .fini = fx_teardown, .timeout = 120);

/* The metrics port of the test's emqd, and the last scrape. */
static int mport;
static char resp[1 << 20];

/* The arguments that turn the endpoint on, then extra (NULL-terminated,
 * may be NULL), into argv (room for 16). */
static const char *const *metrics_args(const char **argv, const char *const *extra)
{
    static char addr[64];
    int n = 0;
    mport = test_free_port();
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", mport);
    argv[n++] = "--metrics";
    argv[n++] = addr;
    for (; extra != NULL && *extra != NULL && n < 15; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    return argv;
}

/* Start redis and an emqd serving metrics (see metrics_args). */
static void start(const char *const *extra)
{
    const char *argv[16];
    fx_start(metrics_args(argv, extra));
}

/* One scrape: its body (in resp, valid until the next). */
static char *scrape(void)
{
    http_get(mport, "/metrics", resp, sizeof(resp));
    cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "scrape: %.200s", resp);
    return scrape_body(resp);
}

/* Milliseconds on a monotonic clock. */
static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Scrape until series is at least min, for up to timeout_ms (a hang
 * guard, not a measure); its last value (NAN if it never appeared). */
static double await_at_least(const char *series, double min, int timeout_ms)
{
    long long end = mono_ms() + timeout_ms;
    double v;
    while ((v = scrape_value(scrape(), series)) < min || isnan(v)) {
        if (mono_ms() > end)
            break;
        poll(NULL, 0, 20); /* the pause between two polls, not a wait for the event */
    }
    return v;
}

/* --- reconnects ---------------------------------------------------------- */

Test(metrics, reconnects_count_connections_back_after_a_loss_only)
{
    start(NULL);
    cr_assert_eq(await_at_least("emqd_pool_connections", 4, 30000), 4);
    char *body = scrape();
    cr_assert_eq(scrape_value(body, "emqd_pool_reconnects_total"), 0, "a fresh daemon: %s", body);

    /* Redis drops every ordinary client: the pool's four (this one is
     * spared: CLIENT KILL skips its caller). */
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    redisReply *r = redisCommand(rc, "CLIENT KILL TYPE normal");
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER, "CLIENT KILL failed");
    cr_assert_geq(r->integer, 4, "the pool's connections were killed");
    freeReplyObject(r);
    redisFree(rc);

    double back = await_at_least("emqd_pool_reconnects_total", 4, 30000);
    cr_assert_geq(back, 4, "each of the four connections is counted back once");
    cr_assert_eq(await_at_least("emqd_pool_connections", 4, 30000), 4);
    struct tc_conn *c = fx_conn();
    json_t *ok = tc_call(c, "{\"op\":\"depth\",\"queue\":\"rc\"}");
    assert_ok(ok);
    json_decref(ok);
    tc_close(c);
}

/* Connections Redis has accepted since it started. */
static long long redis_connections(redisContext *rc)
{
    redisReply *r = redisCommand(rc, "INFO stats");
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING, "INFO failed");
    const char *p = strstr(r->str, "total_connections_received:");
    cr_assert_not_null(p);
    long long n = atoll(p + strlen("total_connections_received:"));
    freeReplyObject(r);
    return n;
}

/* A start-up whose first connects fail (Redis answers nothing yet, as
 * while it loads) is not a reconnect: the counter stays 0 once the pool
 * is up. Redis is paused before emqd starts, longer than emqd's setup
 * deadline, so every first attempt times out and is retried. */
Test(metrics, a_start_up_that_retries_is_not_a_reconnect)
{
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    long long before = redis_connections(rc);
    redisReply *r = redisCommand(rc, "CLIENT PAUSE 2000 ALL");
    cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "CLIENT PAUSE failed");
    freeReplyObject(r);

    const char *argv[16];
    const char *const extra[] = {"--redis-timeout-ms", "300", NULL};
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, metrics_args(argv, extra)), 0);
    cr_assert_eq(emqd_await_backend(&fx_emqd), 0);
    /* The pool's four, the pub/sub one, and at least one retry. */
    long long made = redis_connections(rc) - before;
    redisFree(rc);
    cr_assert_gt(made, 5, "the first connects were not retried (%lld connections)", made);
    /* Up once one connection is; the others may still be backing off. */
    cr_assert_eq(await_at_least("emqd_pool_connections", 4, 30000), 4);
    char *body = scrape();
    cr_assert_eq(scrape_value(body, "emqd_pool_reconnects_total"), 0, "%s", body);
}

/* --- process_* ------------------------------------------------------------ */

/* The soft limit of open files of a process, from /proc/PID/limits. */
static long long nofile_limit(pid_t pid)
{
    char path[64], line[256];
    long long soft = -1;
    snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "Max open files", 14) == 0)
            soft = atoll(line + 14);
    fclose(f);
    return soft;
}

/* The wall clock, in seconds since the epoch (as process_start_time_seconds). */
static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(metrics, process_families_describe_the_emqd_process)
{
    double before = wall_s();
    start(NULL);
    double after = wall_s();
    char *body = scrape();
    static const char *const names[] = {"process_cpu_seconds_total",
                                        "process_resident_memory_bytes",
                                        "process_virtual_memory_bytes",
                                        "process_open_fds",
                                        "process_max_fds",
                                        "process_start_time_seconds"};
    for (size_t i = 0; i < sizeof(names) / sizeof(*names); i++)
        cr_assert(!isnan(scrape_value(body, names[i])), "no %s in:\n%s", names[i], body);

    double start_s = scrape_value(body, "process_start_time_seconds");
    cr_assert(start_s >= before - 1 && start_s <= after + 1,
              "started at %.2f, between %.2f and %.2f", start_s, before, after);
    cr_assert_eq(scrape_value(body, "process_max_fds"), (double)nofile_limit(fx_emqd.pid));
    double rss = scrape_value(body, "process_resident_memory_bytes");
    double vm_rss = (double)emqd_rss_kb(&fx_emqd) * 1024;
    cr_assert(rss > vm_rss / 2 && rss < vm_rss * 2, "resident %.0f, VmRSS %.0f", rss, vm_rss);
    cr_assert_geq(scrape_value(body, "process_virtual_memory_bytes"), rss);
    double cpu = scrape_value(body, "process_cpu_seconds_total");
    cr_assert_geq(cpu, 0);

    /* Ten more client connections are ten more descriptors. */
    double fds = scrape_value(body, "process_open_fds");
    cr_assert_gt(fds, 0);
    struct tc_conn *c[10];
    for (int i = 0; i < 10; i++) {
        c[i] = fx_conn();
        json_t *ok = tc_call(c[i], "{\"op\":\"ping\"}"); /* accepted by now */
        assert_ok(ok);
        json_decref(ok);
    }
    body = scrape();
    cr_assert_geq(scrape_value(body, "process_open_fds"), fds + 10, "%s", body);
    cr_assert_geq(scrape_value(body, "process_cpu_seconds_total"), cpu, "a counter");
    for (int i = 0; i < 10; i++)
        tc_close(c[i]);
}

/* --- job latency histograms ---------------------------------------------- */

/* The histogram name of queue: its buckets, read in order, are cumulative
 * and end at +Inf with the count, which must be want. Its sum, in seconds. */
static double hist_check(const char *body, const char *name, const char *queue, double want)
{
    char prefix[128], series[128];
    snprintf(prefix, sizeof(prefix), "%s_bucket{queue=\"%s\",le=\"", name, queue);
    double last = 0;
    int buckets = 0;
    bool inf = false;
    for (const char *p = strstr(body, prefix); p != NULL; p = strstr(p + 1, prefix)) {
        const char *v = strstr(p, "} ");
        cr_assert_not_null(v);
        double n = strtod(v + 2, NULL);
        cr_assert_geq(n, last, "%s{queue=%s}: buckets are cumulative", name, queue);
        last = n;
        buckets++;
        inf = strncmp(p + strlen(prefix), "+Inf\"", 5) == 0;
    }
    cr_assert_gt(buckets, 1, "no buckets of %s for %s in:\n%s", name, queue, body);
    cr_assert(inf, "%s{queue=%s}: the last bucket is +Inf", name, queue);
    snprintf(series, sizeof(series), "%s_count{queue=\"%s\"}", name, queue);
    double count = scrape_value(body, series);
    cr_assert_eq(count, last, "%s: +Inf is the count", series);
    cr_assert_eq(count, want, "%s is %.0f, not %.0f", series, count, want);
    snprintf(series, sizeof(series), "%s_sum{queue=\"%s\"}", name, queue);
    double sum = scrape_value(body, series);
    cr_assert(!isnan(sum) && sum >= 0, "%s", series);
    return sum;
}

/* Enqueue job into queue (extra: more arguments, each after a comma). */
static void enqueue(struct tc_conn *c, const char *queue, const char *job, const char *extra)
{
    json_t *r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"job\":\"%s\",\"payload\":1%s}",
                        queue, job, extra);
    assert_ok(r);
    cr_assert_str_eq(jstr(r, "verdict"), "enqueued");
    json_decref(r);
}

/* Claim up to count jobs on a lease of 60000 ms (extra: more arguments);
 * the reply's jobs array, which lives as long as *reply (the caller's). */
static json_t *claim(struct tc_conn *c, const char *queue, int count, const char *extra,
                     json_t **reply)
{
    *reply = tc_call(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":%d,\"lease_ms\":60000%s}",
                     queue, count, extra);
    return claim_jobs(*reply);
}

/* Settle a job with op (complete, fail, release; extra: more arguments),
 * asserting the job's new state is want. */
static void settle(struct tc_conn *c, const char *op, const char *queue, const json_t *job,
                   const char *extra, const char *want)
{
    json_t *r = tc_call(c, "{\"op\":\"%s\",\"queue\":\"%s\",\"job\":\"%s\",\"lease\":\"%s\"%s}", op,
                        queue, jstr(job, "job"), jstr(job, "lease"), extra);
    assert_ok(r);
    cr_assert_str_eq(jstr(r, "state"), want, "%s: %s", op, jstr(job, "job"));
    json_decref(r);
}

/* On a streaming connection, pushes may come before a reply: send one
 * request (printf-style) and return its reply, keeping the pushes read on
 * the way in pushes (an array). */
static json_t *stream_call(struct tc_conn *c, json_t *pushes, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static json_t *stream_call(struct tc_conn *c, json_t *pushes, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    cr_assert_eq(tc_send_line(c, line), 0);
    for (;;) {
        json_t *r = tc_read(c, 10000);
        cr_assert_not_null(r, "no reply to %s", line);
        if (json_object_get(r, "push") == NULL)
            return r;
        json_array_append_new(pushes, r);
    }
}

/* The next push on a streaming connection: one kept by stream_call, or
 * the next line read (10 s at most). */
static json_t *next_push(struct tc_conn *c, json_t *pushes)
{
    json_t *push = json_incref(json_array_get(pushes, 0));
    if (push != NULL)
        json_array_remove(pushes, 0);
    else
        push = tc_read(c, 10000);
    cr_assert(push != NULL && json_object_get(push, "push") != NULL, "no push");
    return push;
}

/* One integer field of a job's row (the job op). */
static long long row_field(struct tc_conn *c, const char *queue, const char *job, const char *k)
{
    json_t *r = tc_call(c, "{\"op\":\"job\",\"queue\":\"%s\",\"job\":\"%s\"}", queue, job);
    assert_ok(r);
    json_t *v = json_object_get(json_object_get(r, "job"), k);
    cr_assert(json_is_integer(v), "%s has no %s", job, k);
    long long n = json_integer_value(v);
    json_decref(r);
    return n;
}

/* Claim one job of queue hq on claimer and settle it on settler (see
 * settle). */
static void claim_settle(struct tc_conn *claimer, struct tc_conn *settler, const char *op,
                         const char *extra, const char *want)
{
    json_t *r, *jobs = claim(claimer, "hq", 1, "", &r);
    cr_assert_eq(json_array_size(jobs), 1, "nothing to claim");
    settle(settler, op, "hq", json_array_get(jobs, 0), extra, want);
    json_decref(r);
}

/* Every lease the daemon hands out (claim replies, parked claims, stream
 * pushes) is one wait; every complete or fail by the lease's holder is one
 * run; a release, or a complete sent on another connection, is not. */
Test(metrics, job_histograms_count_every_lease_and_settle)
{
    start(NULL);
    struct tc_conn *p = fx_conn(), *w = fx_conn(), *c = fx_conn(), *other = fx_conn();
    char id[32];

    /* 12 flat jobs pushed to a stream (hand-offs or claims, as it falls). */
    json_t *r = tc_call(w, "{\"op\":\"stream\",\"queue\":\"hq\",\"credit\":4,\"flat\":true,"
                           "\"lease_ms\":60000}");
    assert_ok(r);
    json_decref(r);
    for (int i = 0; i < 12; i++) {
        snprintf(id, sizeof(id), "JOBflat%02d", i);
        enqueue(p, "hq", id, "");
    }
    json_t *pushes = json_array();
    for (int i = 0; i < 12; i++) {
        json_t *push = next_push(w, pushes);
        r = stream_call(w, pushes,
                        "{\"op\":\"complete\",\"queue\":\"hq\",\"job\":\"%s\",\"lease\":\"%s\"}",
                        jstr(push, "job"), jstr(push, "lease"));
        assert_ok(r);
        json_decref(r);
        json_decref(push);
    }
    cr_assert_eq(json_array_size(pushes), 0, "12 jobs, 12 pushes");
    json_decref(pushes);

    /* 12 grouped jobs claimed four at a time. */
    for (int i = 0; i < 12; i++) {
        snprintf(id, sizeof(id), "JOBgrp%02d", i);
        enqueue(p, "hq", id, i % 2 ? ",\"group\":\"TENa\"" : ",\"group\":\"TENb\"");
    }
    for (int got = 0; got < 12;) {
        json_t *jobs = claim(c, "hq", 4, "", &r);
        cr_assert_gt(json_array_size(jobs), 0, "claimed %d of 12", got);
        for (size_t i = 0; i < json_array_size(jobs); i++, got++)
            settle(c, "complete", "hq", json_array_get(jobs, i), "", "completed");
        json_decref(r);
    }

    /* Failed and leased again: two leases, two settles. Released, then
     * leased again: two leases, one settle. Completed by a connection that
     * does not hold it: one lease, no settle by the holder. */
    enqueue(p, "hq", "JOBfail", ",\"group\":\"TENc\"");
    claim_settle(c, c, "fail", ",\"retry_ms\":0", "pending");
    claim_settle(c, c, "complete", "", "completed");
    enqueue(p, "hq", "JOBrelease", ",\"group\":\"TENc\"");
    claim_settle(c, c, "release", "", "pending");
    claim_settle(c, c, "complete", "", "completed");
    enqueue(p, "hq", "JOBother", ",\"group\":\"TENc\"");
    claim_settle(c, other, "complete", "", "completed");

    char *body = scrape();
    hist_check(body, "emqd_job_wait_seconds", "hq", 12 + 12 + 2 + 2 + 1);
    hist_check(body, "emqd_job_run_seconds", "hq", 12 + 12 + 2 + 1);
    cr_assert_eq(scrape_value(body, "emqd_jobs_total{queue=\"hq\",event=\"claimed\"}"), 29,
                 "a wait per lease counted as claimed");
    scrape_promtool(body);
    tc_close(p);
    tc_close(w);
    tc_close(c);
    tc_close(other);
}

/* A job's wait runs from when it became claimable: its enqueue, the time
 * it was due when delayed, the moment a fail with retry_ms 0 put it back.
 * The lease's own time is its lease_until less the lease asked for (both
 * on the Redis clock), so the histogram's sum is known to the ms. */
Test(metrics, job_wait_is_measured_from_when_the_job_became_claimable)
{
    start(NULL);
    struct tc_conn *c = fx_conn();
    json_t *r;

    enqueue(c, "wq", "JOBw1", ",\"group\":\"TENa\"");
    long long created = row_field(c, "wq", "JOBw1", "created_ms");
    json_t *jobs = claim(c, "wq", 1, "", &r);
    long long wait1 = jint(json_array_get(jobs, 0), "lease_until") - 60000 - created;
    settle(c, "fail", "wq", json_array_get(jobs, 0), ",\"retry_ms\":0", "pending");
    json_decref(r);
    long long ready = row_field(c, "wq", "JOBw1", "ready_ms");
    cr_assert_geq(ready, created + wait1, "put back after its lease began");
    jobs = claim(c, "wq", 1, "", &r);
    long long wait2 = jint(json_array_get(jobs, 0), "lease_until") - 60000 - ready;
    settle(c, "complete", "wq", json_array_get(jobs, 0), "", "completed");
    json_decref(r);

    /* Delayed: claimable from its due time, not from its enqueue. The
     * claim parks until the job is promoted. */
    enqueue(c, "wq", "JOBw2", ",\"group\":\"TENa\",\"delay_ms\":300");
    jobs = claim(c, "wq", 1, ",\"wait_ms\":30000", &r);
    cr_assert_eq(json_array_size(jobs), 1, "the delayed job came due");
    created = row_field(c, "wq", "JOBw2", "created_ms");
    ready = row_field(c, "wq", "JOBw2", "ready_ms");
    cr_assert_eq(ready, created + 300, "claimable when it was due");
    long long wait3 = jint(json_array_get(jobs, 0), "lease_until") - 60000 - ready;
    json_decref(r);

    double sum = hist_check(scrape(), "emqd_job_wait_seconds", "wq", 3);
    cr_assert_geq(wait1, 0);
    cr_assert_geq(wait2, 0);
    cr_assert_geq(wait3, 0);
    cr_assert_float_eq(sum, (double)(wait1 + wait2 + wait3) / 1000, 1e-9,
                       "waits %lld + %lld + %lld ms", wait1, wait2, wait3);
    tc_close(c);
}

/* A job handed to a parked stream as it is enqueued (or claimed for it
 * right after) waited from its enqueue to that lease, as any other. */
Test(metrics, a_pushed_job_waits_from_its_enqueue)
{
    start(NULL);
    struct tc_conn *p = fx_conn(), *w = fx_conn();
    json_t *r = tc_call(w, "{\"op\":\"stream\",\"queue\":\"ho\",\"credit\":1,\"lease_ms\":60000}");
    assert_ok(r);
    json_decref(r);
    enqueue(p, "ho", "JOBh1", ",\"group\":\"TENa\"");
    json_t *push = tc_read(w, 10000);
    cr_assert_not_null(push, "no push");
    long long wait = jint(push, "lease_until") - 60000 - row_field(p, "ho", "JOBh1", "created_ms");
    settle(w, "complete", "ho", push, "", "completed");
    json_decref(push);
    char *body = scrape();
    double sum = hist_check(body, "emqd_job_wait_seconds", "ho", 1);
    cr_assert_float_eq(sum, (double)wait / 1000, 1e-9, "waited %lld ms", wait);
    hist_check(body, "emqd_job_run_seconds", "ho", 1);
    tc_close(p);
    tc_close(w);
}

/* --- the budget, and a stalled backend ------------------------------------ */

/* At rest the budget's families are there, and valid: little held, the
 * limit as configured, nothing paused or shed. */
Test(metrics, the_budget_of_buffered_bytes_is_exposed)
{
    const char *const extra[] = {"--max-buffered", "8388608", NULL};
    start(extra);
    char *body = scrape();
    cr_assert_eq(scrape_value(body, "emqd_buffered_limit_bytes"), 8388608.0);
    double held = scrape_value(body, "emqd_buffered_bytes");
    cr_assert(held >= 0 && held < 1 << 20, "an idle daemon holds %.0f bytes", held);
    cr_assert_eq(scrape_value(body, "emqd_reads_paused"), 0.0);
    cr_assert_eq(scrape_value(body, "emqd_reads_paused_total"), 0.0);
    cr_assert_eq(scrape_value(body, "emqd_buffered_pauses_total"), 0.0);
    cr_assert_eq(scrape_value(body, "emqd_buffered_shed_total{what=\"line\"}"), 0.0);
    cr_assert_eq(scrape_value(body, "emqd_buffered_shed_total{what=\"connection\"}"), 0.0);
    scrape_promtool(body);
}

/* With Redis stopped, a scrape still answers (its queue gauges left out
 * and counted as backend errors), and so does the next one, at once,
 * without asking the stalled backend again. After Redis goes on, the
 * gauges are back. */
Test(metrics, a_scrape_answers_while_redis_is_stopped)
{
    const char *const extra[] = {"--redis-timeout-ms", "600000", NULL};
    start(extra);
    struct tc_conn *c = fx_conn();
    json_t *r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"still\",\"payload\":1}");
    assert_ok(r);
    json_decref(r);
    cr_assert_eq(kill(fx_redis.pid, SIGSTOP), 0);
    for (int i = 0; i < 2; i++) {
        char *body = scrape();
        cr_assert(isnan(scrape_value(body, "emqd_queue_jobs{queue=\"still\",state=\"pending\"}")),
                  "a gauge read from a stopped Redis");
        cr_assert_geq(scrape_value(body, "emqd_scrape_backend_errors"), 2);
        cr_assert_geq(scrape_value(body, "emqd_pool_inflight"), 2, "the calls held by Redis");
        cr_assert(!isnan(scrape_value(body, "emqd_buffered_bytes")));
        scrape_promtool(body);
    }
    cr_assert_eq(kill(fx_redis.pid, SIGCONT), 0);
    await(scrape_value(scrape(), "emqd_queue_jobs{queue=\"still\",state=\"pending\"}") == 1,
          "the queue's gauges to come back with Redis");
    tc_close(c);
}

/* spin-us (util/spin.h): requests start spells of polling before sleep,
 * counted in /metrics; with spin-us 0 the loop never polls. */
static void some_work(const char *queue)
{
    struct tc_conn *c = fx_conn();
    /* Pipelined in one write: an ordered session's work through Redis. */
    char lines[512];
    int n = snprintf(lines, sizeof(lines),
                     "{\"op\":\"enqueue\",\"queue\":\"%s\",\"payload\":1}\n"
                     "{\"op\":\"enqueue\",\"queue\":\"%s\",\"payload\":2}\n"
                     "{\"op\":\"depth\",\"queue\":\"%s\"}\n",
                     queue, queue, queue);
    cr_assert_eq(tc_send(c, lines, (size_t)n), 0);
    for (int i = 0; i < 2; i++) {
        json_t *r = tc_read(c, wait_deadline_ms(0));
        cr_assert(tc_ok(r), "enqueue %d answered", i);
        json_decref(r);
    }
    json_t *d = tc_read(c, wait_deadline_ms(0));
    cr_assert(tc_ok(d), "depth answered");
    cr_assert_eq(json_integer_value(json_object_get(d, "depth")), 2, "both enqueued first");
    json_decref(d);
    tc_close(c);
}

Test(metrics, spells_of_polling_before_sleep_are_counted)
{
    start(NULL);
    some_work("spin");
    char *body = scrape();
    cr_assert_geq(scrape_value(body, "emqd_loop_spins_total"), 1.0, "%s", body);
    cr_assert_gt(scrape_value(body, "emqd_loop_spin_seconds_total"), 0.0);
    scrape_promtool(body);
}

Test(metrics, spin_us_0_never_polls)
{
    const char *const extra[] = {"--spin-us", "0", NULL};
    start(extra);
    some_work("spin");
    char *body = scrape();
    cr_assert_eq(scrape_value(body, "emqd_loop_spins_total"), 0.0, "%s", body);
    cr_assert_eq(scrape_value(body, "emqd_loop_spin_seconds_total"), 0.0);
}

/* spin-us reloads live: after a SIGHUP to 0, work starts no spell. */
Test(metrics, spin_us_reloads_live)
{
    char path[32];
    emqd_write_temp(path, "spin-us = 100\n");
    const char *const extra[] = {"--config", path, NULL};
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    start(extra);
    some_work("spin");
    cr_assert_geq(scrape_value(scrape(), "emqd_loop_spins_total"), 1.0);

    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "spin-us = 0\n");
    fclose(f);
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    /* Each key's line comes before the summary, and its effect with it. */
    await(emqd_log_has(&fx_emqd, "msg=reloaded changed=1"), "the reload to be logged");
    cr_assert(emqd_log_has(&fx_emqd, "key=spin-us value=0"));
    double spins = scrape_value(scrape(), "emqd_loop_spins_total");
    some_work("spin2");
    cr_assert_eq(scrape_value(scrape(), "emqd_loop_spins_total"), spins,
                 "no spell after the reload to 0");
    unlink(path);
}
