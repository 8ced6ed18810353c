/* Integration: leases whose reply was lost are given back (issue 19.3,
 * daemon/store/lost.c). A claim, or an enqueue handed off to a parked
 * stream, runs at Redis but its answer never reaches the daemon: a proxy
 * drops it (tests/support/proxy.h), or Redis is stalled past the
 * deadline and runs the call after the daemon gave up. The job must come
 * back with its attempt returned, so one allowed a single attempt is
 * still delivered rather than dead. */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"
#include "proxy.h"
#include "workload.h"

static struct proxy fx_proxy;
static bool fx_proxied;

static void lost_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0, "redis-server did not start");
    cr_assert_eq(proxy_start(&fx_proxy, fx_redis.port), 0, "proxy did not start");
    fx_proxied = true;
    /* No periodic upkeep pass (an hour away): nothing but the test's own
     * call runs while replies are cut, and the give-back must not wait
     * for the regular pass. */
    const char *const extra[] = {"--redis-timeout-ms", "1000", "--upkeep-ms", "3600000", NULL};
    cr_assert_eq(emqd_start(&fx_emqd, fx_proxy.port, extra), 0, "emqd did not start");
    cr_assert_eq(emqd_await_backend(&fx_emqd), 0, "emqd never reached its backend");
}

static void lost_teardown(void)
{
    if (fx_redis.pid > 0)
        kill(fx_redis.pid, SIGCONT);
    emqd_kill(&fx_emqd);
    if (fx_proxied)
        proxy_stop(&fx_proxy);
    fx_proxied = false;
    if (fx_redis.pid > 0)
        redis_server_stop(&fx_redis);
}

TestSuite(lost, .init = lost_setup, .fini = lost_teardown, .timeout = 120);

/* A field of queue's job row, read at Redis itself ("" when absent). */
static void row_field(const char *queue, const char *job, const char *field, char *out, size_t cap)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    redisReply *r = redisCommand(rc, "HGET emq:{%s}:job:%s %s", queue, job, field);
    cr_assert_not_null(r);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    redisFree(rc);
}

/* True when the row is in state with that many attempts; with leased,
 * also when a lease was taken on it (lease_by written). */
static bool row_is(const char *queue, const char *job, const char *state, const char *attempts,
                   bool leased)
{
    char st[32], att[32], by[64];
    row_field(queue, job, "state", st, sizeof(st));
    row_field(queue, job, "attempts", att, sizeof(att));
    row_field(queue, job, "lease_by", by, sizeof(by));
    return strcmp(st, state) == 0 && strcmp(att, attempts) == 0 && (!leased || by[0] != '\0');
}

static void enqueue_once(struct tc_conn *c, const char *queue, const char *job)
{
    json_t *r = tc_call(c,
                        "{\"op\":\"enqueue\",\"queue\":\"%s\",\"job\":\"%s\",\"group\":\"TENa\","
                        "\"payload\":1,\"max_attempts\":1}",
                        queue, job);
    assert_ok(r);
    json_decref(r);
}

/* Claim the job, complete it, and see the queue clean: nothing dead. */
static void deliver_and_finish(struct tc_conn *c, const char *queue, const char *job)
{
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"lease_ms\":600000}", queue);
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 1, "the job given back is not claimable");
    json_t *j = json_array_get(jobs, 0);
    cr_assert_str_eq(jstr(j, "job"), job);
    cr_assert_eq(jint(j, "attempt"), 1, "the lost lease's attempt was not returned");
    json_t *d = tc_call(c, "{\"op\":\"complete\",\"queue\":\"%s\",\"job\":\"%s\",\"lease\":\"%s\"}",
                        queue, job, jstr(j, "lease"));
    assert_ok(d);
    json_decref(d);
    json_decref(r);
    cr_assert_eq(fx_stat(c, queue, "dead"), 0);
    r = tc_call(c, "{\"op\":\"check\",\"queue\":\"%s\"}", queue);
    assert_ok(r);
    cr_assert_eq(json_array_size(json_object_get(r, "violations")), 0);
    json_decref(r);
}

static long long recovered(const char *queue)
{
    char series[128];
    snprintf(series, sizeof(series), "emqd_jobs_total{queue=\"%s\",event=\"recovered\"}", queue);
    return emqd_metric(&fx_emqd, series);
}

Test(lost, a_claim_whose_reply_is_lost_gives_its_job_back_with_the_attempt)
{
    struct tc_conn *c = fx_conn();
    enqueue_once(c, "lq", "JOBlost1");
    fx_await_quiet(&fx_emqd); /* the claim is the one call whose reply is cut */
    proxy_set_mode(&fx_proxy, PROXY_CUT);
    assert_err_free(tc_call(c, "{\"op\":\"claim\",\"queue\":\"lq\",\"lease_ms\":600000}"),
                    "EUNAVAILABLE");
    /* The claim ran: the job is leased at Redis, to nobody. */
    cr_assert(row_is("lq", "JOBlost1", "active", "1", true), "the claim never ran at Redis");
    proxy_set_mode(&fx_proxy, PROXY_PASS);
    await(row_is("lq", "JOBlost1", "pending", "0", true),
          "the lost lease to be given back, attempt returned");
    await(recovered("lq") == 1, "the recovered counter to count it");
    deliver_and_finish(c, "lq", "JOBlost1");
    tc_close(c);
}

/* A job handed off to a parked stream, by an enqueue whose reply is lost:
 * the producer hears EUNAVAILABLE (with the job's id, to retry safely),
 * and the stream still gets the job, as a first attempt. */
Test(lost, a_hand_off_whose_reply_is_lost_reaches_the_stream_after_all)
{
    struct tc_conn *w = fx_conn(), *p = fx_conn();
    json_t *r = tc_call(w, "{\"op\":\"stream\",\"queue\":\"lh\",\"credit\":1,\"lease_ms\":600000}");
    assert_ok(r);
    json_decref(r);
    fx_await_quiet(&fx_emqd);
    proxy_set_mode(&fx_proxy, PROXY_CUT);
    r = tc_call(p, "{\"op\":\"enqueue\",\"queue\":\"lh\",\"job\":\"JOBlost2\",\"group\":\"TENa\","
                   "\"payload\":1,\"max_attempts\":1}");
    assert_err(r, "EUNAVAILABLE");
    cr_assert_str_eq(jstr(r, "job"), "JOBlost2");
    json_decref(r);
    cr_assert(row_is("lh", "JOBlost2", "active", "1", true), "the job was not handed off");
    proxy_set_mode(&fx_proxy, PROXY_PASS);
    json_t *push = tc_read(w, wait_deadline_ms(0));
    cr_assert_not_null(push, "the stream never got the job");
    cr_assert_str_eq(jstr(push, "push"), "job");
    cr_assert_str_eq(jstr(push, "job"), "JOBlost2");
    cr_assert_eq(jint(push, "attempt"), 1, "the lost hand-off's attempt was not returned");
    r = tc_call(w, "{\"op\":\"complete\",\"queue\":\"lh\",\"job\":\"JOBlost2\",\"lease\":\"%s\"}",
                jstr(push, "lease"));
    assert_ok(r);
    json_decref(r);
    json_decref(push);
    cr_assert_eq(fx_stat(p, "lh", "dead"), 0);
    tc_close(w);
    tc_close(p);
}

/* Redis stalled past the deadline: the daemon fails the claim, but Redis
 * may run it when it resumes, after the daemon gave up. A lease it took
 * is given back too (the lost connection is fenced first, so recovery
 * cannot run before the stale claim). */
Test(lost, a_claim_that_runs_after_its_deadline_gives_its_job_back)
{
    /* This one needs no proxy: emqd talks to Redis itself. */
    emqd_kill(&fx_emqd);
    proxy_stop(&fx_proxy);
    fx_proxied = false;
    const char *const extra[] = {"--redis-timeout-ms", "300", "--upkeep-ms", "3600000", NULL};
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);
    cr_assert_eq(emqd_await_backend(&fx_emqd), 0);
    struct tc_conn *c = fx_conn();
    enqueue_once(c, "ls", "JOBlost3");
    cr_assert_eq(kill(fx_redis.pid, SIGSTOP), 0);
    assert_err_free(tc_call(c, "{\"op\":\"claim\",\"queue\":\"ls\",\"lease_ms\":600000}"),
                    "EUNAVAILABLE");
    cr_assert_eq(kill(fx_redis.pid, SIGCONT), 0);
    /* Once Redis resumes it serves the lost connection's buffered claim
     * and the fence's CLIENT KILL (sent on another connection while it
     * was stopped) in no set order. Either the claim ran first (lease_by
     * set): its lease is given back and counted as recovered; or the kill
     * came first and the claim never ran. After the fence nothing of the
     * lost connection can run, so from then on the job must end pending
     * with its attempt unspent, and recovered only if it was leased. */
    await(emqd_metric(&fx_emqd, "emqd_pool_fenced_total") >= 1, "the lost connection fenced");
    await(row_is("ls", "JOBlost3", "pending", "0", false) &&
              (!row_is("ls", "JOBlost3", "pending", "0", true) || recovered("ls") == 1),
          "the late claim's lease (if it ran) to be given back, attempt returned");
    cr_log_info("the stale claim %s before the fence",
                row_is("ls", "JOBlost3", "pending", "0", true) ? "ran" : "did not run");
    deliver_and_finish(c, "ls", "JOBlost3");
    tc_close(c);
}

#define LOAD_WORKERS 4

/* The fault ledger with replies cut again and again under load: every job
 * allowed a single attempt, on long leases (so none can die of a lease
 * running out within the test): whatever a cut costs, every job is
 * completed, none is dead (none went dead without a delivery), nothing is
 * left active or pending, and check is clean. */
Test(lost, replies_cut_under_load_lose_no_job_and_kill_none)
{
    emqd_kill(&fx_emqd);
    const char *const extra[] = {"--redis-timeout-ms", "1000", "--max-attempts", "1", NULL};
    cr_assert_eq(emqd_start(&fx_emqd, fx_proxy.port, extra), 0);
    cr_assert_eq(emqd_await_backend(&fx_emqd), 0);
    struct workload wl;
    wl_init(&wl, "lu", "u", 240, 6, 2);
    cr_assert_eq(wl_enqueue(&wl, fx_emqd.port, 0, wl.n, NULL), wl.n);
    static struct wl_worker workers[LOAD_WORKERS];
    for (int i = 0; i < LOAD_WORKERS; i++)
        cr_assert_eq(wl_worker_start(&workers[i], &wl, fx_emqd.port, 4, 600000, 1), 0);
    for (int round = 1; round <= 3; round++) {
        /* A cut lands amid the drain: some jobs done before each. */
        await(atomic_load(&wl.completed_total) >= round * wl.n / 5,
              "the workers to complete %d jobs (%d so far)", round * wl.n / 5,
              atomic_load(&wl.completed_total));
        /* Cut until a backend call of the daemon's has failed (a cut on
         * the pub/sub connection alone costs no call). */
        long long failed = emqd_metric(&fx_emqd, "emqd_pool_failures_total");
        proxy_set_mode(&fx_proxy, PROXY_CUT);
        await(emqd_metric(&fx_emqd, "emqd_pool_failures_total") > failed,
              "a backend call to fail in round %d", round);
        proxy_set_mode(&fx_proxy, PROXY_PASS);
    }
    cr_assert(wl_await_settled(&wl, fx_emqd.port, 60000), "the set was not drained");
    for (int i = 0; i < LOAD_WORKERS; i++)
        wl_worker_stop(&workers[i]);
    for (int i = 0; i < LOAD_WORKERS; i++)
        cr_assert_eq(atomic_load(&workers[i].errors), 0, "worker %d got unexpected replies", i);
    wl_account(&wl, fx_emqd.port);
    struct tc_conn *c = fx_conn();
    cr_assert_eq(fx_stat(c, "lu", "dead"), 0, "a job went dead without a delivery");
    cr_log_info("leases given back after lost replies: %lld", recovered("lu"));
    tc_close(c);
    wl_deinit(&wl);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}
