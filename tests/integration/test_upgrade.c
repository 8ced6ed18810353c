/* Integration: a daemon upgraded in place over a store an older emqd wrote
 * (lua/format.lua, docs/ARCHITECTURE.md section 3, "Upgrading a store").
 * The old store is written by hand, as the old code wrote it: job rows,
 * the delayed set and the group registry, the queue in emq:queues, and no
 * per-group delayed index. The real emqd, started on it, indexes it by
 * itself in bounded steps; once the format marker says done, check is
 * clean and a cap counts the lanes' delayed jobs. Also: a walk left
 * half-way by a daemon killed mid-way resumes, with the jobs it stopped
 * at promoted meanwhile; two daemons started at once share one walk; a
 * new queue is marked by its first call; a step Redis refuses is retried.
 * The real emqd against a real redis-server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"

/* Redis only: each test writes its old store before it starts emqd. */
static void redis_only(void)
{
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0, "redis-server did not start");
}

TestSuite(upgrade, .init = redis_only, .fini = fx_teardown, .timeout = 120);

/* Start p, its log to a file (the same one across restarts). */
static void start_emqd(struct emqd_proc *p)
{
    if (p->log[0] == '\0')
        cr_assert_eq(emqd_log_to_file(p), 0);
    cr_assert_eq(emqd_start(p, fx_redis.port, NULL), 0, "emqd did not start");
    cr_assert_eq(emqd_await_backend(p), 0, "emqd never reached its backend");
}

/* Write the delayed rows of an old store into queue, in one pipeline:
 * jobs JOB<tag><n> for n < count, of group TEN<tag><n % groups> (0
 * groups: flat), due at due + n % spread ms. */
static void old_delayed(redisContext *rc, const char *queue, const char *tag, int count, int groups,
                        long long due, int spread)
{
    for (int n = 0; n < count; n++) {
        char g[32] = "";
        if (groups > 0)
            snprintf(g, sizeof(g), "TEN%s%d", tag, n % groups);
        redisAppendCommand(rc,
                           "HSET emq:{%s}:job:JOB%s%05d state delayed group %s payload {} "
                           "attempts 0 max_attempts 0 created_ms %lld",
                           queue, tag, n, g, due - 60000);
        redisAppendCommand(rc, "ZADD emq:{%s}:delayed %lld JOB%s%05d", queue, due + n % spread, tag,
                           n);
        if (groups > 0)
            redisAppendCommand(rc, "SADD emq:{%s}:groups %s", queue, g);
        else
            redisAppendCommand(rc, "PING");
    }
    redisAppendCommand(rc, "SADD emq:queues %s", queue);
    for (int i = 0; i < 3 * count + 1; i++) {
        redisReply *r = NULL;
        cr_assert_eq(redisGetReply(rc, (void **)&r), REDIS_OK);
        cr_assert(r->type != REDIS_REPLY_ERROR, "%s", r->str);
        freeReplyObject(r);
    }
}

/* The gdelayed field of queue's format marker ("" when absent) into out. */
static const char *marker(redisContext *rc, const char *queue, char *out, size_t cap)
{
    redisReply *r = redisCommand(rc, "HGET emq:{%s}:format gdelayed", queue);
    cr_assert_not_null(r);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
    return out;
}

static bool upgraded(redisContext *rc, const char *queue)
{
    char m[128];
    return strcmp(marker(rc, queue, m, sizeof(m)), "done") == 0;
}

/* How many jobs p's log says it indexed ("upgraded the store" ... jobs=N;
 * 0 when it logged none). */
static long long logged_jobs(const struct emqd_proc *p)
{
    FILE *f = fopen(p->log, "r");
    cr_assert_not_null(f);
    char line[1024];
    long long n = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        const char *j = strstr(line, "jobs=");
        if (strstr(line, "upgraded the store") != NULL && j != NULL)
            n += atoll(j + 5);
    }
    fclose(f);
    return n;
}

/* ZCARD of group g's delayed index (what "delayed") or lane ("pending"). */
static long long zcard(redisContext *rc, const char *queue, const char *g, const char *what)
{
    return redis_int(rc, "ZCARD emq:{%s}:g:%s:%s", queue, g, what);
}

/* The groups op's delayed count of group g of queue. */
static long long group_delayed(struct tc_conn *c, const char *queue, const char *g)
{
    json_t *r = OK(c, "{\"op\":\"groups\",\"queue\":\"%s\",\"count\":1000}", queue);
    json_t *list = json_object_get(r, "groups");
    long long d = -1;
    for (size_t i = 0; i < json_array_size(list); i++)
        if (strcmp(jstr(json_array_get(list, i), "group"), g) == 0)
            d = jint(json_array_get(list, i), "delayed");
    json_decref(r);
    return d;
}

Test(upgrade, an_old_store_is_indexed_by_the_daemon_and_the_cap_counts_it)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    long long far = redis_time_ms(rc) + 3600000;
    old_delayed(rc, "up", "a", 15, 3, far, 4); /* TENa0..2, 5 each */
    old_delayed(rc, "up", "f", 3, 0, far, 1);  /* flat: no index */
    cr_assert_eq(zcard(rc, "up", "TENa0", "delayed"), 0, "an old store");

    start_emqd(&fx_emqd);
    await(upgraded(rc, "up"), "queue up's format marker to say done");
    struct tc_conn *c = fx_conn();
    assert_check_clean(c, "up");
    for (int g = 0; g < 3; g++) {
        char name[16];
        snprintf(name, sizeof(name), "TENa%d", g);
        cr_assert_eq(zcard(rc, "up", name, "delayed"), 5, "%s", name);
        cr_assert_eq(group_delayed(c, "up", name), 5, "groups shows %s's delayed jobs", name);
    }
    cr_assert_eq(logged_jobs(&fx_emqd), 15, "the daemon logs what it indexed");
    /* A lane of 5 delayed jobs is full at a cap of 5, and has room at 6. */
    json_decref(OK(c, "{\"op\":\"cap\",\"queue\":\"up\",\"group\":\"TENa1\",\"max_pending\":5}"));
    json_t *r =
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"up\",\"group\":\"TENa1\",\"payload\":1}");
    assert_err(r, "EFULL");
    cr_assert_eq(jint(r, "cap"), 5);
    json_decref(r);
    json_decref(OK(c, "{\"op\":\"cap\",\"queue\":\"up\",\"group\":\"TENa1\",\"max_pending\":6}"));
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"up\",\"group\":\"TENa1\",\"payload\":1}"));
    assert_err_free(
        tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"up\",\"group\":\"TENa1\",\"payload\":2}"),
        "EFULL");
    /* Restarted, the daemon finds the marker and walks nothing again. */
    cr_assert_eq(emqd_stop(&fx_emqd), 0);
    start_emqd(&fx_emqd);
    assert_check_clean(c = (tc_close(c), fx_conn()), "up");
    fx_await_quiet(&fx_emqd);
    cr_assert_eq(logged_jobs(&fx_emqd), 15, "nothing indexed twice across the restart");
    tc_close(c);
    redisFree(rc);
}

/* Many groups and more delayed jobs than one step walks, and a walk left
 * half-way, as by a daemon killed mid-way: its first 120 members indexed
 * and the marker at the 120th. The first 300 are due already, so the new
 * daemon's promote takes them (the marker's member with them) while the
 * walk goes on: each ends in its lane and in no delayed index, and every
 * job still delayed in its group's index. */
Test(upgrade, a_walk_left_half_way_resumes_while_due_jobs_are_promoted)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    long long now = redis_time_ms(rc);
    old_delayed(rc, "mw", "d", 300, 40, now - 60000, 300); /* due: one per ms */
    old_delayed(rc, "mw", "l", 500, 50, now + 3600000, 7);
    redisReply *first =
        redisCommand(rc, "ZRANGE emq:{mw}:delayed 0 119 WITHSCORES"); /* JOBd00000..119 */
    cr_assert(first != NULL && first->elements == 240);
    for (size_t i = 0; i < first->elements; i += 2) {
        int n = atoi(first->element[i]->str + 4);
        redis_int(rc, "ZADD emq:{mw}:g:TENd%d:delayed %s %s", n % 40, first->element[i + 1]->str,
                  first->element[i]->str);
    }
    redis_int(rc, "HSET emq:{mw}:format gdelayed %s:%s", first->element[239]->str,
              first->element[238]->str);
    freeReplyObject(first);

    start_emqd(&fx_emqd);
    await(upgraded(rc, "mw"), "queue mw's format marker to say done");
    struct tc_conn *c = fx_conn();
    await(fx_stat(c, "mw", "delayed") == 500, "the 300 due jobs to be promoted");
    assert_check_clean(c, "mw");
    long long pending = 0, indexed = 0;
    for (int g = 0; g < 40; g++) {
        char name[16];
        snprintf(name, sizeof(name), "TENd%d", g);
        cr_assert_eq(zcard(rc, "mw", name, "delayed"), 0, "%s: all promoted", name);
        pending += zcard(rc, "mw", name, "pending");
    }
    for (int g = 0; g < 50; g++) {
        char name[16];
        snprintf(name, sizeof(name), "TENl%d", g);
        indexed += zcard(rc, "mw", name, "delayed");
    }
    cr_assert_eq(pending, 300, "every due job in its lane");
    cr_assert_eq(indexed, 500, "every job still delayed in its group's index");
    long long logged = logged_jobs(&fx_emqd);
    cr_assert(logged >= 500 && logged <= 680,
              "the 500 later ones and at most the 180 due ones "
              "not indexed before: %lld",
              logged);
    tc_close(c);
    redisFree(rc);
}

/* Two daemons started on one old store at once share the walk through
 * its marker: every job is indexed once, by one of them. */
Test(upgrade, two_daemons_share_one_walk)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    old_delayed(rc, "tw", "t", 1000, 50, redis_time_ms(rc) + 3600000, 13);
    struct emqd_proc other = {0};
    start_emqd(&fx_emqd);
    start_emqd(&other);
    await(upgraded(rc, "tw"), "queue tw's format marker to say done");
    struct tc_conn *c = fx_conn();
    assert_check_clean(c, "tw");
    long long indexed = 0;
    for (int g = 0; g < 50; g++) {
        char name[16];
        snprintf(name, sizeof(name), "TENt%d", g);
        indexed += zcard(rc, "tw", name, "delayed");
    }
    cr_assert_eq(indexed, 1000);
    fx_await_quiet(&fx_emqd);
    fx_await_quiet(&other);
    cr_assert_eq(logged_jobs(&fx_emqd) + logged_jobs(&other), 1000, "each job indexed once");
    tc_close(c);
    emqd_kill(&other);
    emqd_log_remove(&other);
    redisFree(rc);
}

/* A queue made by this code is marked by its daemon's first call of it,
 * before its first write: nothing is left to walk later. */
Test(upgrade, a_new_queue_is_marked_before_its_first_write)
{
    start_emqd(&fx_emqd);
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"nq\",\"group\":\"TENn\",\"payload\":1,"
                      "\"delay_ms\":3600000}"));
    cr_assert(upgraded(rc, "nq"), "marked when the enqueue is answered");
    cr_assert_eq(zcard(rc, "nq", "TENn", "delayed"), 1);
    assert_check_clean(c, "nq");
    fx_await_quiet(&fx_emqd);
    cr_assert_eq(logged_jobs(&fx_emqd), 0, "nothing was walked into an index");
    tc_close(c);
    redisFree(rc);
}

/* A step Redis refuses (out of memory: the step adds an entry per job and
 * has no allow-oom flag) is logged once and sent again by the upkeep
 * passes: once Redis has room, the walk goes on and finishes. */
Test(upgrade, a_refused_step_is_retried_until_redis_has_room)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    old_delayed(rc, "om", "o", 30, 3, redis_time_ms(rc) + 3600000, 1);
    redisReply *r = redisCommand(rc, "CONFIG SET maxmemory 1");
    cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    start_emqd(&fx_emqd);
    await(emqd_log_has(&fx_emqd, "store upgrade step failed"), "the refused step to be logged");
    cr_assert_not(upgraded(rc, "om"));
    cr_assert_eq(zcard(rc, "om", "TENo0", "delayed"), 0, "nothing written");
    r = redisCommand(rc, "CONFIG SET maxmemory 0");
    cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    await(upgraded(rc, "om"), "queue om's format marker to say done");
    struct tc_conn *c = fx_conn();
    assert_check_clean(c, "om");
    cr_assert_eq(emqd_log_count(&fx_emqd, "store upgrade step failed"), 1, "logged once");
    tc_close(c);
    redisFree(rc);
}
