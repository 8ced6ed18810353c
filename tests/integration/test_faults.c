/* Integration: two daemons on one Redis, and a Redis that goes away. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"

static struct emqd_proc fx_second;

static void faults_teardown(void)
{
    emqd_kill(&fx_second);
    fx_teardown();
}

TestSuite(faults, .init = fx_setup, .fini = faults_teardown, .timeout = 90);

/* No periodic upkeep pass (an hour away): a parked consumer then gets
 * only what a wake brings. */
static const char *const no_upkeep[] = {"--upkeep-ms", "3600000", NULL};

/* (8) A stream on one daemon sees work enqueued through another: neither
 * runs an upkeep pass, so only the wake published through Redis can bring
 * the job to the stream. */
Test(faults, cross_instance_wake)
{
    fx_teardown();
    fx_start(no_upkeep);
    cr_assert_eq(emqd_start(&fx_second, fx_redis.port, no_upkeep), 0, "second emqd did not start");
    cr_assert_eq(emqd_await_backend(&fx_second), 0);
    struct tc_conn *a = fx_conn();
    struct tc_conn *b = tc_connect(fx_second.port);
    cr_assert_not_null(b);
    json_t *r = tc_call(a, "{\"op\":\"stream\",\"queue\":\"xi\",\"credit\":5}");
    assert_ok(r);
    json_decref(r);
    /* emqd #1 listens for the queue's wakes, and its stream is parked with
     * every claim back (one comes with the subscription too). */
    fx_await_listening(&fx_emqd, "xi", 1);
    r = tc_call(
        b, "{\"op\":\"enqueue\",\"queue\":\"xi\",\"group\":\"TENt1\",\"payload\":\"from-two\"}");
    assert_ok(r);
    json_decref(r);
    json_t *p = tc_read(a, wait_deadline_ms(0));
    cr_assert_not_null(p, "no push on emqd #1 for a job enqueued through emqd #2");
    cr_assert_str_eq(json_string_value(json_object_get(p, "push")), "job");
    cr_assert_str_eq(json_string_value(json_object_get(p, "payload")), "from-two");
    json_decref(p);
    tc_close(a);
    tc_close(b);
}

/* Enqueue on c: true if it is accepted; asserts that a refusal is
 * EUNAVAILABLE (the pool is still reconnecting) and that a reply comes. */
static bool enqueue_ok_or_unavailable(struct tc_conn *c)
{
    json_t *r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"rr\",\"payload\":3}");
    cr_assert_not_null(r, "no reply while redis comes back");
    bool ok = tc_ok(r);
    if (!ok)
        cr_assert_str_eq(tc_error(r), "EUNAVAILABLE");
    json_decref(r);
    return ok;
}

/* (11) Redis dies: requests fail fast with EUNAVAILABLE; it comes back:
 * requests succeed again. */
Test(faults, redis_restart)
{
    fx_teardown();
    const char *const extra[] = {"--redis-timeout-ms", "500", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    json_t *r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"rr\",\"payload\":1}");
    assert_ok(r);
    json_decref(r);

    /* A backend call's deadline is 500 ms; the reply is read with a much
     * longer one: EUNAVAILABLE must come rather than a hang. */
    redis_server_kill(&fx_redis);
    cr_assert_eq(tc_send_line(c, "{\"op\":\"depth\",\"ref\":1,\"queue\":\"rr\"}"), 0);
    r = tc_read(c, wait_deadline_ms(0));
    assert_err(r, "EUNAVAILABLE");
    cr_assert_eq(json_integer_value(json_object_get(r, "ref")), 1);
    json_decref(r);
    /* A second request while it is still down fails too. */
    r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"rr\",\"payload\":2}");
    assert_err(r, "EUNAVAILABLE");
    json_decref(r);

    cr_assert_eq(redis_server_restart(&fx_redis, NULL), 0, "redis did not restart");
    await(enqueue_ok_or_unavailable(c), "requests to succeed again after redis came back");
    r = tc_call(c, "{\"op\":\"ping\"}");
    assert_ok(r);
    json_decref(r);
    tc_close(c);
}

/* Enqueue JOB<i> to queue "nl" on c: true if accepted; a refusal must be
 * EUNAVAILABLE and is counted in *unavailable. */
static bool enqueue_nl(struct tc_conn *c, int i, int *unavailable)
{
    json_t *r = tc_call(c,
                        "{\"op\":\"enqueue\",\"queue\":\"nl\",\"job\":\"JOB%03d\","
                        "\"group\":\"TEN%d\",\"payload\":%d}",
                        i, i % 7, i);
    cr_assert_not_null(r, "no reply for job %d", i);
    bool ok = tc_ok(r);
    if (!ok) {
        cr_assert_str_eq(tc_error(r), "EUNAVAILABLE");
        (*unavailable)++;
    }
    json_decref(r);
    return ok;
}

/* Every enqueue answered "enqueued" survives a Redis crash (AOF, fsync
 * always) and is delivered afterwards; the ones answered EUNAVAILABLE are
 * re-sent, as a producer would, and land exactly once. */
Test(faults, no_acknowledged_job_is_lost_across_a_redis_crash)
{
    fx_teardown();
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    const char *const extra[] = {"--redis-timeout-ms", "500", NULL};
    cr_assert_eq(redis_server_start(&fx_redis, aof), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);
    struct tc_conn *c = fx_conn();
    enum { N = 300 };
    static char acked[N];
    int unavailable = 0;
    for (int i = 0; i < N; i++) {
        if (i == N / 3)
            redis_server_kill(&fx_redis);
        if (i == N / 2)
            cr_assert_eq(redis_server_restart(&fx_redis, aof), 0);
        if (i < N / 2) /* while it is down, one try: re-sent below */
            acked[i] = enqueue_nl(c, i, &unavailable);
        else /* Redis is back: the pool reconnects */
            await(acked[i] = enqueue_nl(c, i, &unavailable), "job %d accepted after the restart",
                  i);
    }
    cr_assert_gt(unavailable, 0, "the crash was never seen");
    for (int i = 0; i < N; i++) /* the producer re-sends what failed */
        if (!acked[i])
            await(enqueue_nl(c, i, &unavailable), "job %d accepted when re-sent", i);
    static char seen[N];
    int delivered = 0;
    for (int round = 0; round < 100 && delivered < N; round++) {
        json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"nl\",\"count\":100}");
        json_t *jobs = claim_jobs(r);
        for (size_t k = 0; k < json_array_size(jobs); k++) {
            json_t *j = json_array_get(jobs, k);
            int i = atoi(jstr(j, "job") + 3);
            cr_assert(!seen[i], "JOB%03d delivered twice", i);
            seen[i] = 1;
            delivered++;
            json_t *d = tc_call(c,
                                "{\"op\":\"complete\",\"queue\":\"nl\",\"job\":\"%s\","
                                "\"lease\":\"%s\"}",
                                jstr(j, "job"), jstr(j, "lease"));
            assert_ok(d);
            json_decref(d);
        }
        json_decref(r);
    }
    cr_assert_eq(delivered, N, "%d of %d jobs delivered", delivered, N);
    json_t *r = tc_call(c, "{\"op\":\"check\",\"queue\":\"nl\"}");
    assert_ok(r);
    cr_assert_eq(json_array_size(json_object_get(r, "violations")), 0);
    json_decref(r);
    tc_close(c);
}

/* The size of a sorted set, asserting Redis answered. */
static long long zcard(redisContext *rc, const char *key)
{
    return redis_int(rc, "ZCARD %s", key);
}

/* A daemon killed while its workers held leases: a fresh daemon that no
 * client has named the queue to still reaps them (emq:queues). */
Test(faults, a_fresh_daemon_reaps_leases_of_a_killed_one)
{
    struct tc_conn *c = fx_conn();
    json_t *r =
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"kd\",\"group\":\"TENa\",\"payload\":1}");
    assert_ok(r);
    json_decref(r);
    r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"kd\",\"lease_ms\":200}");
    cr_assert_eq(json_array_size(claim_jobs(r)), 1);
    json_decref(r);
    emqd_kill(&fx_emqd); /* no release: the lease must run out */
    tc_close(c);

    cr_assert_eq(emqd_start(&fx_second, fx_redis.port, NULL), 0);
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    await(zcard(rc, "emq:{kd}:active") == 0, "the expired lease to be reaped");
    redisFree(rc);
}

/* True if a file in dir holds needle (in its first MiB). */
static bool dir_has(const char *dir, const char *needle)
{
    static char text[1 << 20];
    DIR *d = opendir(dir);
    bool found = false;
    for (struct dirent *e; d != NULL && !found && (e = readdir(d)) != NULL;) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        found = memmem(text, n, needle, strlen(needle)) != NULL;
    }
    if (d != NULL)
        closedir(d);
    return found;
}

/* The embedded backend: emqd SIGKILLed leaves its redis-server running;
 * the next emqd on the same data dir stops that orphan, starts its own on
 * the same AOF, and the job enqueued before is still there. */
Test(faults, embedded_backend_survives_a_killed_emqd)
{
    char dir[] = "/tmp/emq-embedded-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    const char *const extra[] = {"--data-dir", dir, NULL};
    emqd_kill(&fx_emqd);
    cr_assert_eq(emqd_start(&fx_second, 0, extra), 0, "emqd on its embedded Redis");
    struct tc_conn *c = tc_connect(fx_second.port);
    cr_assert_not_null(c);
    json_t *r =
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"eb\",\"job\":\"JOBkept\",\"payload\":1}");
    assert_ok(r);
    json_decref(r);
    tc_close(c);
    char aof[96];
    snprintf(aof, sizeof(aof), "%s/appendonlydir", dir);
    await(dir_has(aof, "JOBkept"), "the job to reach the AOF under %s", aof);
    emqd_kill(&fx_second);

    cr_assert_eq(emqd_start(&fx_second, 0, extra), 0, "a second start on the same data dir");
    c = tc_connect(fx_second.port);
    cr_assert_not_null(c);
    r = tc_call(c, "{\"op\":\"job\",\"queue\":\"eb\",\"job\":\"JOBkept\"}");
    assert_ok(r);
    cr_assert_str_eq(jstr(json_object_get(r, "job"), "state"), "pending");
    json_decref(r);
    tc_close(c);
    cr_assert_eq(emqd_stop(&fx_second), 0, "a clean stop");
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Enqueue JOBafter to queue "sr" on p: true if it is accepted. */
static bool enqueue_after(struct tc_conn *p)
{
    json_t *r = tc_call(p, "{\"op\":\"enqueue\",\"queue\":\"sr\",\"job\":\"JOBafter\","
                           "\"group\":\"TENa\",\"payload\":1}");
    bool ok = tc_ok(r);
    json_decref(r);
    return ok;
}

/* A stream parked through a Redis restart resumes by itself: work
 * enqueued after the restart is pushed without the worker doing anything. */
Test(faults, a_parked_stream_resumes_after_redis_restarts)
{
    fx_teardown();
    const char *const extra[] = {"--redis-timeout-ms", "500", NULL};
    fx_start(extra);
    struct tc_conn *w = fx_conn();
    json_t *r = tc_call(w, "{\"op\":\"stream\",\"queue\":\"sr\",\"credit\":2}");
    assert_ok(r);
    json_decref(r);
    redis_server_kill(&fx_redis);
    await(emqd_metric(&fx_emqd, "emqd_pool_connections") == 0, "emqd to see its backend gone");
    cr_assert_eq(redis_server_restart(&fx_redis, NULL), 0);

    struct tc_conn *p = fx_conn();
    await(enqueue_after(p), "an enqueue to succeed after the restart");
    json_t *push = tc_read(w, wait_deadline_ms(0));
    cr_assert_not_null(push, "the stream did not resume");
    cr_assert_str_eq(jstr(push, "job"), "JOBafter");
    json_decref(push);
    tc_close(p);
    tc_close(w);
}

/* Enqueue job to queue "un" on c once: true when answered ok (*verdict
 * set, owned by the caller), false for EUNAVAILABLE (the backend still
 * recovering). */
static bool enqueue_un(struct tc_conn *c, const char *job, char **verdict)
{
    json_t *r =
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"un\",\"job\":\"%s\",\"payload\":1}", job);
    cr_assert_not_null(r);
    bool ok = tc_ok(r);
    if (ok)
        *verdict = strdup(jstr(r, "verdict"));
    else
        cr_assert_str_eq(tc_error(r), "EUNAVAILABLE");
    json_decref(r);
    return ok;
}

/* An enqueue answered EUNAVAILABLE had an unknown outcome. Its reply
 * names the job, minted by emqd when the producer gave none, so that the
 * producer can retry with that id: the job then exists exactly once,
 * whether or not the first try took effect (enqueue_many's item errors
 * likewise). */
Test(faults, an_unavailable_enqueue_names_its_job_so_a_retry_lands_once)
{
    fx_teardown();
    const char *const extra[] = {"--redis-timeout-ms", "300", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    fx_redis_pause_writes(true); /* the script call is held past its deadline */
    json_t *r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"un\",\"payload\":1}");
    assert_err(r, "EUNAVAILABLE");
    const char *job = jstr(r, "job");
    cr_assert(job != NULL && strncmp(job, "JOB", 3) == 0, "the minted job is named");
    char *id = strdup(job);
    json_decref(r);
    r = tc_call(c, "{\"op\":\"enqueue_many\",\"queue\":\"un\",\"jobs\":[{\"payload\":2},"
                   "{\"payload\":3}]}");
    assert_ok(r);
    json_t *res = json_object_get(r, "results");
    cr_assert_eq(json_array_size(res), 2);
    char *items[2];
    for (size_t i = 0; i < 2; i++) {
        json_t *e = json_array_get(res, i);
        cr_assert_str_eq(jstr(e, "error"), "EUNAVAILABLE");
        cr_assert(jstr(e, "job") != NULL, "item %zu names its job", i);
        items[i] = strdup(jstr(e, "job"));
    }
    json_decref(r);
    fx_redis_pause_writes(false);

    /* Retried as PROTOCOL.md says, with the ids the errors named. */
    const char *retry[] = {id, items[0], items[1]};
    for (size_t i = 0; i < 3; i++) {
        char *verdict = NULL;
        await(enqueue_un(c, retry[i], &verdict), "the retry of %s to be answered", retry[i]);
        cr_assert(strcmp(verdict, "enqueued") == 0 || strcmp(verdict, "duplicate") == 0);
        free(verdict);
    }
    cr_assert_eq(fx_stat(c, "un", "pending"), 3, "each job exists exactly once");
    free(id);
    free(items[0]);
    free(items[1]);
    tc_close(c);
}

/* Set the fixture Redis's maxmemory (0 = none). */
static void redis_maxmemory(long long bytes)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    redisReply *x = redisCommand(rc, "CONFIG SET maxmemory %lld", bytes);
    cr_assert(x != NULL && x->type == REDIS_REPLY_STATUS, "CONFIG SET maxmemory refused");
    freeReplyObject(x);
    redisFree(rc);
}

/* Redis out of memory (maxmemory reached, noeviction): what adds jobs is
 * refused with EFULL and a message of emqd's own (none of Redis's
 * internals), while everything that drains the backlog still works:
 * claim, extend, complete, fail, pause and resume. */
Test(faults, a_backend_out_of_memory_refuses_enqueues_and_lets_the_backlog_drain)
{
    fx_teardown();
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    fx_start(NULL);
    struct tc_conn *c = fx_conn();
    for (int i = 0; i < 3; i++) {
        json_t *r = tc_call(
            c, "{\"op\":\"enqueue\",\"queue\":\"om\",\"group\":\"TENa\",\"payload\":%d}", i);
        assert_ok(r);
        json_decref(r);
    }
    redis_maxmemory(1);
    json_t *r =
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"om\",\"group\":\"TENa\",\"payload\":9}");
    assert_err(r, "EFULL");
    cr_assert(jstr(r, "job")[0] != '\0', "the refused job is named, for a retry");
    cr_assert_null(json_object_get(r, "cap"), "a full store is not a full lane: no cap");
    cr_assert_null(strstr(jstr(r, "message"), "script"), "no Redis internals: %s",
                   jstr(r, "message"));
    json_decref(r);
    r = tc_call(c, "{\"op\":\"enqueue_many\",\"queue\":\"om\",\"jobs\":[{\"payload\":1}]}");
    assert_ok(r);
    cr_assert_str_eq(jstr(json_array_get(json_object_get(r, "results"), 0), "error"), "EFULL");
    json_decref(r);

    json_t *reply =
        tc_call(c, "{\"op\":\"claim\",\"queue\":\"om\",\"count\":3,\"lease_ms\":3600000}");
    json_t *claimed = claim_jobs(reply);
    cr_assert_eq(json_array_size(claimed), 3, "the backlog is claimable while Redis is full");
    for (size_t i = 0; i < 3; i++) {
        json_t *j = json_array_get(claimed, i);
        const char *id = jstr(j, "job"), *lease = jstr(j, "lease");
        json_t *x = tc_call(c,
                            "{\"op\":\"extend\",\"queue\":\"om\",\"job\":\"%s\",\"lease\":\"%s\","
                            "\"lease_ms\":3600000}",
                            id, lease);
        assert_ok(x);
        json_decref(x);
        x = i < 2
                ? tc_call(c,
                          "{\"op\":\"complete\",\"queue\":\"om\",\"job\":\"%s\",\"lease\":\"%s\"}",
                          id, lease)
                : tc_call(c,
                          "{\"op\":\"fail\",\"queue\":\"om\",\"job\":\"%s\",\"lease\":\"%s\","
                          "\"dead\":true}",
                          id, lease);
        assert_ok(x);
        json_decref(x);
    }
    json_decref(reply);
    r = tc_call(c, "{\"op\":\"pause\",\"queue\":\"om\",\"group\":\"TENa\"}");
    assert_ok(r);
    json_decref(r);
    r = tc_call(c, "{\"op\":\"resume\",\"queue\":\"om\",\"group\":\"TENa\"}");
    assert_ok(r);
    json_decref(r);
    cr_assert(emqd_log_has(&fx_emqd, "backend out of memory: refusing what adds jobs"));

    redis_maxmemory(0);
    r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"om\",\"group\":\"TENa\",\"payload\":10}");
    assert_ok(r);
    json_decref(r);
    tc_close(c);
}

/* A daemon that connects while Redis is out of memory, and Redis has
 * lost the library (here flushed; a new build's daemon meets the same,
 * its library not loaded yet): Redis refuses FUNCTION LOAD before looking
 * (the command may add memory), so the daemon comes up running the
 * scripts by EVAL (scripts/embed_lua.py, pool.c) and drains the backlog;
 * an enqueue is refused EFULL. */
Test(faults, a_daemon_started_while_redis_is_full_drains_the_backlog)
{
    struct tc_conn *c = fx_conn();
    for (int i = 0; i < 2; i++) {
        json_t *r = tc_call(
            c, "{\"op\":\"enqueue\",\"queue\":\"of\",\"group\":\"TENa\",\"payload\":%d}", i);
        assert_ok(r);
        json_decref(r);
    }
    tc_close(c);
    cr_assert_eq(emqd_stop(&fx_emqd), 0);
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    freeReplyObject(redisCommand(rc, "FUNCTION FLUSH"));
    redisFree(rc);
    redis_maxmemory(1);
    cr_assert_eq(emqd_log_to_file(&fx_second), 0);
    cr_assert_eq(emqd_start(&fx_second, fx_redis.port, NULL), 0);
    cr_assert_eq(emqd_await_backend(&fx_second), 0, "the daemon never reached Redis");
    c = tc_connect(fx_second.port);
    cr_assert_not_null(c);
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"of\",\"count\":2}");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 2, "the backlog is claimable");
    for (size_t i = 0; i < 2; i++) {
        json_t *j = json_array_get(jobs, i);
        json_t *x =
            tc_call(c, "{\"op\":\"complete\",\"queue\":\"of\",\"job\":\"%s\",\"lease\":\"%s\"}",
                    jstr(j, "job"), jstr(j, "lease"));
        assert_ok(x);
        json_decref(x);
    }
    json_decref(r);
    r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"of\",\"group\":\"TENa\",\"payload\":3}");
    assert_err(r, "EFULL");
    json_decref(r);
    cr_assert(emqd_log_has(&fx_second, "redis refused to load the lane scripts: running them by "
                                       "EVAL until it takes them"));
    cr_assert_gt(emqd_metric(&fx_second, "emqd_pool_fallback_connections"), 0,
                 "the fallback is not in /metrics");
    redis_maxmemory(0);
    tc_close(c);
}
