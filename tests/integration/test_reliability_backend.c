/* Reliability: the daemon or its Redis fails under load. Each scenario
 * enqueues a known job set over several groups with ceilings while
 * workers drain it, injects the fault, and ends with wl_account(): every
 * job completed, none missing, none active or pending, check clean. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"
#include "workload.h"

static struct emqd_proc fx_second;

static void backend_teardown(void)
{
    emqd_kill(&fx_second);
    fx_teardown();
}

TestSuite(rel_backend, .init = fx_setup, .fini = backend_teardown, .timeout = 120);

#define WORKERS 8

static struct wl_worker workers[WORKERS];

static void start_workers(struct workload *wl, int from, int to, int port, int lease_ms)
{
    for (int i = from; i < to; i++)
        cr_assert_eq(wl_worker_start(&workers[i], wl, port, 4, lease_ms, 1), 0);
}

/* Stop workers [from, to); none may have seen an unexpected reply. */
static void stop_workers(int from, int to)
{
    for (int i = from; i < to; i++)
        wl_worker_stop(&workers[i]);
    for (int i = from; i < to; i++)
        cr_assert_eq(atomic_load(&workers[i].errors), 0, "worker %d got unexpected replies", i);
}

/* Short leases for scenarios where a daemon dies with leases out; many
 * attempts, so a job caught by several faults is not dead-lettered. */
static const char *const fault_args[] = {"--max-attempts", "50", "--redis-timeout-ms", "500", NULL};

static void restart_fixture(void)
{
    fx_teardown();
    fx_start(fault_args);
}

/* emqd SIGKILLed under load and started again on its port: the killed
 * daemon's leases expire and are reaped, workers reconnect, and a
 * producer that re-sends everything gets "duplicate" for exactly what had
 * landed and "enqueued" for the rest. */
Test(rel_backend, emqd_killed_under_load_and_restarted)
{
    restart_fixture();
    struct workload wl;
    wl_init(&wl, "ek", "e", 300, 6, 2);
    start_workers(&wl, 0, WORKERS, fx_emqd.port, 500);
    int first = wl_enqueue(&wl, fx_emqd.port, 0, 150, NULL);
    cr_assert_eq(first, 150);
    /* Under load means the workers are at it: some jobs done, so others
     * are surely leased when the daemon dies. */
    await(atomic_load(&wl.completed_total) >= 10, "the workers to complete 10 jobs (%d so far)",
          atomic_load(&wl.completed_total));
    emqd_kill(&fx_emqd);
    cr_assert_eq(emqd_restart(&fx_emqd, fx_redis.port, fault_args), 0, "emqd did not restart");
    cr_assert_eq(emqd_await_backend(&fx_emqd), 0);
    int dup = 0;
    int second = wl_enqueue(&wl, fx_emqd.port, 0, wl.n, &dup);
    cr_assert_eq(dup, first, "re-sent: %d duplicates for %d landed", dup, first);
    cr_assert_eq(second, wl.n - first);
    cr_assert(wl_await_settled(&wl, fx_emqd.port, 60000),
              "jobs leased by the killed daemon were not redelivered");
    stop_workers(0, WORKERS);
    wl_account(&wl, fx_emqd.port);
    wl_deinit(&wl);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Ask p for job id's row into *r (replacing what it held): true unless
 * the answer is EUNAVAILABLE (the pool is still reconnecting). */
static bool job_row_answered(struct tc_conn *p, const char *id, json_t **r)
{
    json_decref(*r);
    *r = tc_call(p, "{\"op\":\"job\",\"queue\":\"rk\",\"job\":\"%s\"}", id);
    return *r == NULL || strcmp(tc_error(*r), "EUNAVAILABLE") != 0;
}

/* Redis SIGKILLed and restarted (AOF, fsync always) under load: emqd
 * answers EUNAVAILABLE meanwhile, recovers without a restart, and every
 * enqueue answered "enqueued" survives. The producer re-sends what failed. */
Test(rel_backend, redis_killed_and_restarted_under_load)
{
    fx_teardown();
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    cr_assert_eq(redis_server_start(&fx_redis, aof), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, fault_args), 0);
    cr_assert_eq(emqd_await_backend(&fx_emqd), 0);
    struct workload wl;
    wl_init(&wl, "rk", "r", 240, 6, 2);
    start_workers(&wl, 0, WORKERS, fx_emqd.port, 2000);
    struct tc_conn *p = fx_conn();
    cr_assert_eq(wl_enqueue(&wl, fx_emqd.port, 0, 0, NULL), 0); /* the ceilings */
    static char acked[240];
    int unavailable = 0;
    for (int i = 0; i < wl.n; i++) {
        if (i == 80)
            redis_server_kill(&fx_redis);
        if (i == 120)
            cr_assert_eq(redis_server_restart(&fx_redis, aof), 0);
        const char *code;
        int rc = wl_enqueue_one(&wl, p, i, &code);
        cr_assert(rc == 1 || strcmp(code, "EUNAVAILABLE") == 0, "job %d: %s", i, code);
        acked[i] = rc == 1;
        unavailable += rc != 1;
    }
    cr_assert_gt(unavailable, 0, "the crash was never seen");
    /* Every acknowledged job is still there; the rest are re-sent. */
    for (int i = 0; i < wl.n; i++) {
        char id[64];
        wl_job_id(&wl, i, id, sizeof(id));
        json_t *r = NULL;
        await(job_row_answered(p, id, &r), "a job op on %s answered other than EUNAVAILABLE", id);
        if (acked[i])
            assert_ok(r);
        json_decref(r);
        if (!acked[i])
            await(wl_enqueue_one(&wl, p, i, NULL) >= 0, "job %d to land when re-sent", i);
    }
    tc_close(p);
    cr_assert(wl_await_done(&wl, 60000), "the set was not drained after the restart");
    stop_workers(0, WORKERS);
    wl_account(&wl, fx_emqd.port);
    wl_deinit(&wl);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Save the fixture's Redis with 2,000 more keys, kill it, and start it
 * again on that data with a delay of 2 ms a key as it loads them
 * (Redis's key-load-delay, in microseconds): it answers at once, and
 * refuses every other call with LOADING for at least 4 s on any machine. */
static void restart_loading_slowly(void)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    cr_assert_eq(redis_int(rc, "EVAL %s 0",
                           "for i = 1, 2000 do redis.call('SET', 'filler:' .. i, i) end "
                           "return 1"),
                 1);
    redisReply *saved = redisCommand(rc, "SAVE");
    cr_assert(saved != NULL && saved->type == REDIS_REPLY_STATUS, "SAVE refused");
    freeReplyObject(saved);
    redisFree(rc);
    redis_server_kill(&fx_redis);
    static const char *const slow[] = {"--key-load-delay", "2000",
                                       "--loading-process-events-interval-bytes", "1024", NULL};
    cr_assert_eq(redis_server_restart(&fx_redis, slow), 0, "redis did not restart");
}

/* Enqueue payload (JSON text) to queue in group TENa; the new job's id
 * (free it). */
static char *enqueue_id(struct tc_conn *p, const char *queue, const char *payload)
{
    json_t *r = OK(p, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENa\",\"payload\":%s}",
                   queue, payload);
    char *id = strdup(jstr(r, "job"));
    json_decref(r);
    return id;
}

/* Until a restarted Redis has its data in memory it answers every call
 * LOADING: the call did not run, so emqd answers EUNAVAILABLE, as for a
 * backend that is down (never EINTERNAL); once loaded, the job saved
 * before is there and new work lands. */
Test(rel_backend, a_backend_loading_its_data_answers_eunavailable_until_loaded)
{
    struct tc_conn *p = fx_conn();
    char *id = enqueue_id(p, "ld", "{\"n\":7}");
    json_t *r;
    restart_loading_slowly();
    /* Each job op is refused as unavailable until the data is in; the
     * ones that reached Redis say it is loading. */
    int loading = 0;
    for (;;) {
        r = tc_call(p, "{\"op\":\"job\",\"queue\":\"ld\",\"job\":\"%s\"}", id);
        cr_assert_not_null(r, "no reply while redis loads");
        if (tc_ok(r))
            break;
        cr_assert_str_eq(tc_error(r), "EUNAVAILABLE", "%s", jstr(r, "message"));
        loading += strstr(jstr(r, "message"), "loading") != NULL;
        json_decref(r);
    }
    cr_assert_gt(loading, 0, "no call met the loading backend");
    json_t *job = json_object_get(r, "job");
    cr_assert_str_eq(jstr(job, "state"), "pending");
    cr_assert_eq(jint(json_object_get(job, "payload"), "n"), 7);
    json_decref(r);
    json_decref(OK(p, "{\"op\":\"enqueue\",\"queue\":\"ld\",\"payload\":1}"));
    free(id);
    tc_close(p);
}

/* Whether job's row in queue is in state want, read at Redis (false
 * while Redis refuses calls, and for no such row). */
static bool row_state_is(const char *queue, const char *job, const char *want)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    if (rc == NULL)
        return false;
    redisReply *r = redisCommand(rc, "HGET emq:{%s}:job:%s state", queue, job);
    bool yes = r != NULL && r->type == REDIS_REPLY_STRING && strcmp(r->str, want) == 0;
    freeReplyObject(r);
    redisFree(rc);
    return yes;
}

/* A daemon that starts while its Redis is still loading cannot read the
 * queue registry then; it reads it again until it can, so it runs the
 * upkeep of every queue, not only of those its clients name: here it
 * reaps the lease a killed daemon left in a queue nobody names to it. */
Test(rel_backend, a_daemon_started_on_a_loading_backend_learns_its_queues)
{
    struct tc_conn *p = fx_conn();
    char *id = enqueue_id(p, "ldq", "1");
    json_t *r;
    /* Leased for 4 s, and its daemon killed: nothing gives it back. */
    cr_assert_eq(json_array_size(claim_jobs(r = tc_call(p, "{\"op\":\"claim\",\"queue\":"
                                                           "\"ldq\",\"lease_ms\":4000}"))),
                 1);
    json_decref(r);
    tc_close(p);
    emqd_kill(&fx_emqd);
    cr_assert(row_state_is("ldq", id, "active"));
    restart_loading_slowly();
    cr_assert_eq(emqd_start(&fx_second, fx_redis.port, NULL), 0);
    await(row_state_is("ldq", id, "pending"), "the new daemon to reap the lease of %s", id);
    free(id);
}

struct flusher {
    int port;
    atomic_bool stop;
    atomic_int flushes;
};

static void *flush_main(void *arg)
{
    struct flusher *f = arg;
    struct redis_server rs = {.port = f->port};
    redisContext *rc = redis_server_connect(&rs);
    while (rc != NULL && !atomic_load(&f->stop)) {
        redisReply *r = redisCommand(rc, "FUNCTION FLUSH");
        if (r != NULL && r->type == REDIS_REPLY_STATUS)
            atomic_fetch_add(&f->flushes, 1);
        freeReplyObject(r);
        wait_sleep_ms(10); /* a little work runs between two flushes */
    }
    if (rc != NULL)
        redisFree(rc);
    return NULL;
}

#define FLUSH_BATCHES 12

/* FCALLs that Redis answered with an error so far (INFO commandstats). */
static long long fcall_failures(void)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    long long n = redis_cmdstat(rc, "fcall", "failed_calls=");
    redisFree(rc);
    return n;
}

/* FUNCTION FLUSH again and again under load: the pool loads the library
 * again ("Function not found", FUNCTION LOAD, retry) and no request
 * fails, not even transiently.
 * The flushes are interleaved with the work, whatever the machine's
 * speed: the producer enqueues the set in FLUSH_BATCHES batches and sends
 * each one only after one more flush has been done, while the workers
 * drain; the flusher goes on until the set is drained. */
Test(rel_backend, script_flush_under_load_fails_no_request)
{
    struct workload wl;
    wl_init(&wl, "sf", "f", 300, 6, 2);
    struct flusher f = {.port = fx_redis.port};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, flush_main, &f), 0);
    start_workers(&wl, 0, WORKERS, fx_emqd.port, 10000);
    int enqueued = 0;
    for (int b = 0; b < FLUSH_BATCHES; b++) {
        await(atomic_load(&f.flushes) > b, "flush %d (%d done)", b + 1, atomic_load(&f.flushes));
        enqueued += wl_enqueue(&wl, fx_emqd.port, wl.n * b / FLUSH_BATCHES,
                               wl.n * (b + 1) / FLUSH_BATCHES, NULL);
    }
    bool done = wl_await_done(&wl, 60000);
    atomic_store(&f.stop, true);
    pthread_join(t, NULL);
    cr_assert_eq(enqueued, wl.n, "%d of %d enqueues succeeded", enqueued, wl.n);
    cr_assert(done, "the set was not drained");
    cr_assert_geq(atomic_load(&f.flushes), FLUSH_BATCHES);
    /* The flushes reached the daemon's script calls: Redis refused some
     * ("Function not found": FCALL's failed calls), which the pool
     * absorbed. */
    cr_assert_gt(fcall_failures(), 0, "no script call ever met a flushed library");
    stop_workers(0, WORKERS);
    for (int i = 0; i < WORKERS; i++)
        cr_assert_eq(atomic_load(&workers[i].unavailable), 0, "worker %d saw EUNAVAILABLE", i);
    wl_account(&wl, fx_emqd.port);
    wl_deinit(&wl);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Two daemons on one Redis, workers on both, one daemon killed: nothing is
 * lost (its leases expire and the survivor reaps them), and the ceilings
 * hold across both, as the workers see them. */
Test(rel_backend, two_daemons_one_killed)
{
    restart_fixture();
    cr_assert_eq(emqd_start(&fx_second, fx_redis.port, fault_args), 0);
    cr_assert_eq(emqd_await_backend(&fx_second), 0);
    struct workload wl;
    wl_init(&wl, "td", "t", 300, 6, 2);
    start_workers(&wl, 0, WORKERS / 2, fx_emqd.port, 500);
    start_workers(&wl, WORKERS / 2, WORKERS, fx_second.port, 500);
    int half = wl_enqueue(&wl, fx_emqd.port, 0, wl.n / 2, NULL);
    half += wl_enqueue(&wl, fx_second.port, wl.n / 2, wl.n, NULL);
    cr_assert_eq(half, wl.n);
    await(atomic_load(&wl.completed_total) >= wl.n / 3, "a third of the set completed (%d of %d)",
          atomic_load(&wl.completed_total), wl.n);
    emqd_kill(&fx_second);
    stop_workers(WORKERS / 2, WORKERS); /* they have nowhere to reconnect */
    cr_assert(wl_await_settled(&wl, fx_emqd.port, 60000),
              "jobs leased through the killed daemon were lost");
    stop_workers(0, WORKERS / 2);
    for (int g = 0; g < wl.groups; g++) {
        int max = atomic_load(&wl.max_inflight[g]);
        cr_assert(max >= 1 && max <= 2, "group %d had %d jobs in flight at once", g, max);
    }
    wl_account(&wl, fx_emqd.port);
    wl_deinit(&wl);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Fairness across two daemons: claims taken alternately through either
 * one rotate over the groups as one daemon's would, even with one group
 * holding most of the backlog. */
Test(rel_backend, rotation_is_shared_by_two_daemons)
{
    cr_assert_eq(emqd_start(&fx_second, fx_redis.port, NULL), 0);
    cr_assert_eq(emqd_await_backend(&fx_second), 0);
    struct tc_conn *a = fx_conn();
    struct tc_conn *b = tc_connect(fx_second.port);
    cr_assert_not_null(b);
    static const struct {
        const char *group;
        int n;
    } g[] = {{"TENbig", 40}, {"TENmid", 4}, {"TENone", 3}};
    for (size_t k = 0; k < 3; k++)
        for (int i = 0; i < g[k].n; i++) {
            json_t *r = tc_call(i % 2 ? b : a,
                                "{\"op\":\"enqueue\",\"queue\":\"fr\",\"group\":\"%s\","
                                "\"payload\":%d}",
                                g[k].group, i);
            assert_ok(r);
            json_decref(r);
        }
    /* Nine claims of one, alternating daemons: three full turns. */
    const char *seen[9];
    json_t *replies[9];
    for (int i = 0; i < 9; i++) {
        replies[i] = tc_call(i % 2 ? b : a, "{\"op\":\"claim\",\"queue\":\"fr\",\"count\":1}");
        json_t *jobs = claim_jobs(replies[i]);
        cr_assert_eq(json_array_size(jobs), 1);
        seen[i] = jstr(json_array_get(jobs, 0), "group");
    }
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 3; i++)
            for (int j = i + 1; j < 3; j++)
                cr_assert_str_neq(seen[3 * t + i], seen[3 * t + j], "turn %d served %s twice", t,
                                  seen[3 * t + i]);
    for (int i = 0; i < 9; i++)
        json_decref(replies[i]);
    tc_close(a);
    tc_close(b);
    cr_assert_eq(emqd_stop(&fx_second), 0, "emqd #2 did not exit cleanly");
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}
