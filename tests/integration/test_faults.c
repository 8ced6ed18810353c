/* Integration: two daemons on one Redis, and a Redis that goes away. */
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

/* (8) A stream on one daemon sees work enqueued through another. */
Test(faults, cross_instance_wake)
{
    cr_assert_eq(emqd_start(&fx_second, fx_redis.port, NULL), 0, "second emqd did not start");
    cr_assert_eq(emqd_await_backend(&fx_second), 0);
    struct emq_conn *a = fx_conn();
    struct emq_conn *b = emq_connect(fx_second.port);
    cr_assert_not_null(b);
    json_t *r = emq_call(a, "{\"op\":\"stream\",\"queue\":\"xi\",\"credit\":5}");
    assert_ok(r);
    json_decref(r);
    emq_sleep_ms(200);
    long long t0 = emq_now_ms();
    r = emq_call(
        b, "{\"op\":\"enqueue\",\"queue\":\"xi\",\"group\":\"TENt1\",\"payload\":\"from-two\"}");
    assert_ok(r);
    json_decref(r);
    json_t *p = emq_read(a, 5000);
    long long dt = emq_now_ms() - t0;
    cr_assert_not_null(p, "no push on emqd #1 for a job enqueued through emqd #2");
    cr_assert_str_eq(json_string_value(json_object_get(p, "push")), "job");
    cr_assert_str_eq(json_string_value(json_object_get(p, "payload")), "from-two");
    cr_expect_lt(dt, 1000, "cross-instance push took %lld ms", dt);
    json_decref(p);
    emq_close(a);
    emq_close(b);
}

/* (11) Redis dies: requests fail fast with EUNAVAILABLE; it comes back:
 * requests succeed again. */
Test(faults, redis_restart)
{
    fx_teardown();
    const char *const extra[] = {"--redis-timeout-ms", "500", NULL};
    fx_start(extra);
    struct emq_conn *c = fx_conn();
    json_t *r = emq_call(c, "{\"op\":\"enqueue\",\"queue\":\"rr\",\"payload\":1}");
    assert_ok(r);
    json_decref(r);

    redis_server_kill(&fx_redis);
    long long t0 = emq_now_ms();
    cr_assert_eq(emq_send_line(c, "{\"op\":\"depth\",\"ref\":1,\"queue\":\"rr\"}"), 0);
    r = emq_read(c, 5000);
    long long dt = emq_now_ms() - t0;
    assert_err(r, "EUNAVAILABLE");
    cr_assert_eq(json_integer_value(json_object_get(r, "ref")), 1);
    cr_expect_lt(dt, 5000, "EUNAVAILABLE after %lld ms", dt);
    json_decref(r);
    /* A second request while it is still down fails too. */
    r = emq_call(c, "{\"op\":\"enqueue\",\"queue\":\"rr\",\"payload\":2}");
    assert_err(r, "EUNAVAILABLE");
    json_decref(r);

    cr_assert_eq(redis_server_restart(&fx_redis, NULL), 0, "redis did not restart");
    t0 = emq_now_ms();
    int ok = 0;
    while (!ok && emq_now_ms() - t0 < 10000) {
        r = emq_call(c, "{\"op\":\"enqueue\",\"queue\":\"rr\",\"payload\":3}");
        cr_assert_not_null(r, "no reply while redis comes back");
        ok = emq_ok(r);
        if (!ok)
            cr_assert_str_eq(emq_error(r), "EUNAVAILABLE");
        json_decref(r);
        if (!ok)
            emq_sleep_ms(100);
    }
    dt = emq_now_ms() - t0;
    cr_assert(ok, "requests still failing %lld ms after redis came back", dt);
    cr_expect_lt(dt, 5000, "recovery took %lld ms", dt);
    r = emq_call(c, "{\"op\":\"ping\"}");
    assert_ok(r);
    json_decref(r);
    emq_close(c);
}
