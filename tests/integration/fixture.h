/* fixture: one redis-server and one emqd per test, torn down in .fini. */
#ifndef EMQ_TEST_INTEGRATION_FIXTURE_H
#define EMQ_TEST_INTEGRATION_FIXTURE_H

#include <criterion/criterion.h>

#include "emqd_proc.h"
#include "redis_server.h"

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
    if (fx_redis.pid > 0)
        redis_server_stop(&fx_redis);
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

/* The claimed jobs of a claim reply (asserting it is ok). */
static inline json_t *claim_jobs(json_t *reply)
{
    assert_ok(reply);
    json_t *jobs = json_object_get(reply, "jobs");
    cr_assert(json_is_array(jobs), "claim reply without jobs");
    return jobs;
}

#endif
