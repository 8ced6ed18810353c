/* fixture: one redis-server and one emqd per test, torn down in .fini. */
#ifndef EMQ_TEST_INTEGRATION_FIXTURE_H
#define EMQ_TEST_INTEGRATION_FIXTURE_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "emqd_proc.h"
#include "redis_server.h"
#include "wait.h"

/* The per-test redis and daemon(s); each test process has its own copy. */
static struct redis_server fx_redis;
static struct emqd_proc fx_emqd;

/* Start redis and an emqd with extra arguments; asserts on failure. */
static inline void fx_start(const char *const *extra)
{
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0, "redis-server did not start");
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0, "emqd did not start");
    cr_assert_eq(emqd_await_backend(&fx_emqd), 0, "emqd never reached its backend");
}

static inline void fx_setup(void)
{
    fx_start(NULL);
}

static inline void fx_teardown(void)
{
    emqd_kill(&fx_emqd);
    emqd_log_remove(&fx_emqd);
    if (fx_redis.pid > 0)
        redis_server_stop(&fx_redis);
}

/* Hold back (pause) or let go every write command at the fixture's
 * Redis, script calls included (CLIENT PAUSE WRITE, on a connection of
 * its own); the pause lasts an hour unless let go. */
static inline void fx_redis_pause_writes(bool pause)
{
    redisContext *r = redis_server_connect(&fx_redis);
    cr_assert_not_null(r);
    redisReply *st =
        pause ? redisCommand(r, "CLIENT PAUSE 3600000 WRITE") : redisCommand(r, "CLIENT UNPAUSE");
    cr_assert(st != NULL && st->type == REDIS_REPLY_STATUS, "CLIENT %s refused",
              pause ? "PAUSE" : "UNPAUSE");
    freeReplyObject(st);
    redisFree(r);
}

/* Calls of one Redis command (cmdstat_<cmd>) since the fixture's Redis
 * started. */
static inline long long fx_redis_calls(const char *cmd)
{
    redisContext *r = redis_server_connect(&fx_redis);
    cr_assert_not_null(r);
    char key[64];
    snprintf(key, sizeof(key), "cmdstat_%s:calls=", cmd);
    long long n = redis_info_int(r, "commandstats", key);
    redisFree(r);
    cr_assert_geq(n, 0, "INFO commandstats failed");
    return n;
}

/* How many keys the fixture's Redis holds (DBSIZE). */
static inline long long fx_redis_dbsize(void)
{
    redisContext *r = redis_server_connect(&fx_redis);
    cr_assert_not_null(r);
    long long n = redis_int(r, "DBSIZE");
    redisFree(r);
    return n;
}

/* A new connection to the fixture's emqd; asserts on failure. */
static inline struct tc_conn *fx_conn(void)
{
    struct tc_conn *c = tc_connect(fx_emqd.port);
    cr_assert_not_null(c, "cannot connect to emqd");
    return c;
}

/* A string field ("" when absent) and an integer field of a reply. */
static inline const char *jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s != NULL ? s : "";
}

static inline long long jint(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* Assert the reply is ok, with a readable message otherwise. */
#define assert_ok(reply)                                                                           \
    do {                                                                                           \
        json_t *r_ = (reply);                                                                      \
        char *d_ = r_ ? json_dumps(r_, JSON_COMPACT) : NULL;                                       \
        cr_assert(r_ != NULL && tc_ok(r_), "expected ok, got %s", d_ ? d_ : "(no reply)");         \
        free(d_);                                                                                  \
    } while (0)

/* Call, assert ok, return the reply (caller frees). */
#define OK(c, ...)                                                                                 \
    ({                                                                                             \
        json_t *ok_ = tc_call((c), __VA_ARGS__);                                                   \
        assert_ok(ok_);                                                                            \
        ok_;                                                                                       \
    })

/* Assert the reply is the error code. */
#define assert_err(reply, code)                                                                    \
    do {                                                                                           \
        json_t *r_ = (reply);                                                                      \
        char *d_ = r_ ? json_dumps(r_, JSON_COMPACT) : NULL;                                       \
        cr_assert(r_ != NULL && !tc_ok(r_) && strcmp(tc_error(r_), (code)) == 0,                   \
                  "expected %s, got %s", (code), d_ ? d_ : "(no reply)");                          \
        free(d_);                                                                                  \
    } while (0)

/* Assert the reply is the error code, then free it (for a call made only
 * to see it refused). */
#define assert_err_free(reply, code)                                                               \
    do {                                                                                           \
        json_t *rf_ = (reply);                                                                     \
        assert_err(rf_, code);                                                                     \
        json_decref(rf_);                                                                          \
    } while (0)

/* One integer field of the queue's stats (asserting the reply is ok). */
static inline long long fx_stat(struct tc_conn *c, const char *queue, const char *field)
{
    json_t *r = tc_call(c, "{\"op\":\"stats\",\"queue\":\"%s\"}", queue);
    assert_ok(r);
    long long v = jint(r, field);
    json_decref(r);
    return v;
}

/* Wait until the daemon p has no backend call out (emqd_quiet): what a
 * client sent before is handled, and the claims made for parked consumers
 * are back, so a consumer is parked (or served) and nothing is on its way
 * to it. */
static inline void fx_await_quiet(const struct emqd_proc *p)
{
    await(emqd_quiet(p), "emqd on port %d to have no backend call out", p->port);
}

/* Subscribers of queue's wake channel at Redis (sharded pub/sub). */
static inline long long fx_wake_subscribers(const char *queue)
{
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    long long n = redis_wake_subscribers(rc, queue);
    redisFree(rc);
    return n;
}

/* Wait until p listens for queue's wakes (its subscription is live at
 * Redis, one of n subscribers in all) and is quiet again (a subscription
 * makes it look for work once): a wake published from now on reaches it. */
static inline void fx_await_listening(const struct emqd_proc *p, const char *queue, long long n)
{
    await(fx_wake_subscribers(queue) == n, "%lld subscribers to queue %s's wakes", n, queue);
    fx_await_quiet(p);
}

/* Assert that nothing is pushed to c now that the daemon is quiet: pushes
 * and replies share the connection in the order the daemon writes them,
 * so a push on its way comes before the reply to a ping sent after the
 * daemon went quiet. what names the push that must not come. */
static inline void assert_nothing_pushed(struct tc_conn *c, const char *what)
{
    fx_await_quiet(&fx_emqd);
    cr_assert_eq(tc_send_line(c, "{\"op\":\"ping\",\"ref\":\"barrier\"}"), 0);
    for (;;) {
        json_t *f = tc_read(c, wait_deadline_ms(0));
        cr_assert_not_null(f, "no reply to the barrier ping");
        bool push = json_object_get(f, "push") != NULL;
        bool barrier = json_is_string(json_object_get(f, "ref")) &&
                       strcmp(json_string_value(json_object_get(f, "ref")), "barrier") == 0;
        json_decref(f);
        cr_assert_not(push, "%s", what);
        if (barrier)
            return;
    }
}

/* Assert that the check op finds queue's store sound. */
static inline void assert_check_clean(struct tc_conn *c, const char *queue)
{
    json_t *r = tc_call(c, "{\"op\":\"check\",\"queue\":\"%s\"}", queue);
    assert_ok(r);
    json_t *v = json_object_get(r, "violations");
    char *d = json_dumps(v, JSON_COMPACT);
    cr_assert(json_is_array(v) && json_array_size(v) == 0, "invariants violated: %s", d ? d : "?");
    free(d);
    json_decref(r);
}

/* The claimed jobs of a claim reply (asserting it is ok). */
static inline json_t *claim_jobs(json_t *reply)
{
    assert_ok(reply);
    json_t *jobs = json_object_get(reply, "jobs");
    cr_assert(json_is_array(jobs), "claim reply without jobs");
    return jobs;
}

#endif
