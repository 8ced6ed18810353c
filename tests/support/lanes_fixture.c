/* lanes_fixture: see lanes_fixture.h. */
#include "lanes_fixture.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "check_run.h"
#include "wait.h"

struct redis_server fx_redis;
redisContext *fx_conn;
struct keys fx_q;

void fx_setup(void)
{
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0, "redis-server did not start");
    fx_conn = redis_server_connect(&fx_redis);
    cr_assert_not_null(fx_conn);
    cr_assert_eq(keys_init(&fx_q, "q", 1), 0);
}

/* Run the check of queue k with steps of budget items. */
static void assert_clean(const struct keys *k, unsigned budget)
{
    struct check_result res;
    check_run(fx_conn, k, budget, &res);
    cr_assert_str_eq(res.error, "", "check failed: %s", res.error);
    for (size_t i = 0; i < res.n; i++)
        cr_log_error("invariant violated: %s", res.v[i]);
    char first[512];
    snprintf(first, sizeof(first), "%s", res.n > 0 ? res.v[0] : "");
    size_t n = res.n;
    check_result_free(&res);
    cr_assert_eq(n, 0, "%zu invariant violations in %s (steps of %u), first: %s", n, k->prefix,
                 budget, first);
}

void fx_assert_invariants(const struct keys *k)
{
    /* Steps of one item page every structure one member at a time; the
     * daemon's own size, as the check op runs it. */
    assert_clean(k, 1);
    assert_clean(k, STORE_CHECK_BUDGET);
}

void fx_teardown(void)
{
    if (fx_conn != NULL) {
        redisFree(fx_conn);
        fx_conn = NULL;
    }
    redis_server_stop(&fx_redis);
}

static redisReply *callv(enum script_id id, va_list ap)
{
    const char *args[64];
    int n = 0;
    for (const char *a; n < 64 && (a = va_arg(ap, const char *)) != NULL;)
        args[n++] = a;
    redisReply *r = lanes_callv(fx_conn, &fx_q, id, n, args);
    cr_assert_not_null(r, "connection error: %s", fx_conn->errstr);
    return r;
}

long long fx_int(enum script_id id, ...)
{
    va_list ap;
    va_start(ap, id);
    redisReply *r = callv(id, ap);
    va_end(ap);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "%s: expected an integer, got type %d (%s)",
                 script_table[id].name, r->type, r->type == REDIS_REPLY_ERROR ? r->str : "");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

void fx_error(char *code, size_t cap, enum script_id id, ...)
{
    va_list ap;
    va_start(ap, id);
    redisReply *r = callv(id, ap);
    va_end(ap);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s: expected an error", script_table[id].name);
    size_t w = strcspn(r->str, " ");
    snprintf(code, cap, "%.*s", (int)w, r->str);
    freeReplyObject(r);
}

int fx_enqueue_delayed(const char *job, const char *group, long long delay_ms,
                       long long max_attempts)
{
    char d[24], m[24];
    snprintf(d, sizeof(d), "%lld", delay_ms);
    snprintf(m, sizeof(m), "%lld", max_attempts);
    return (int)fx_int(SCRIPT_ENQUEUE, job, group ? group : "", "{}", d, m, NULL);
}

int fx_enqueue(const char *job, const char *group, const char *payload)
{
    return (int)fx_int(SCRIPT_ENQUEUE, job, group ? group : "", payload ? payload : "{}", "0", "0",
                       NULL);
}

static size_t parse_claim(redisReply *r, size_t n, struct leased *out, long long *deadline)
{
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "claim: %s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
    cr_assert_geq(r->elements, 1);
    cr_assert_eq((r->elements - 1) % 5, 0);
    if (deadline != NULL)
        *deadline = r->element[0]->integer;
    size_t got = (r->elements - 1) / 5;
    cr_assert_leq(got, n, "claim served %zu, more than the %zu asked", got, n);
    for (size_t i = 0; i < got; i++) {
        redisReply **e = r->element + 1 + 5 * i;
        snprintf(out[i].job, sizeof(out[i].job), "%s", e[0]->str);
        snprintf(out[i].group, sizeof(out[i].group), "%s", e[1]->str);
        snprintf(out[i].payload, sizeof(out[i].payload), "%s", e[2]->str);
        out[i].attempt = e[3]->integer;
        snprintf(out[i].lease, sizeof(out[i].lease), "%s", e[4]->str);
    }
    freeReplyObject(r);
    return got;
}

size_t fx_claim(size_t n, long long lease_ms, struct leased *out, long long *deadline)
{
    char ns[24], ls[24];
    snprintf(ns, sizeof(ns), "%zu", n);
    snprintf(ls, sizeof(ls), "%lld", lease_ms);
    return parse_claim(lanes_call(fx_conn, &fx_q, SCRIPT_CLAIM, ns, ls, NULL), n, out, deadline);
}

size_t fx_claim_flat(size_t n, long long lease_ms, struct leased *out)
{
    char ns[24], ls[24];
    snprintf(ns, sizeof(ns), "%zu", n);
    snprintf(ls, sizeof(ls), "%lld", lease_ms);
    return parse_claim(lanes_call(fx_conn, &fx_q, SCRIPT_CLAIM_FLAT, ns, ls, NULL), n, out, NULL);
}

/* The one status of a one-item complete.lua reply r (freed) into
 * status[cap]. */
static void one_status(redisReply *r, const char *what, char *status, size_t cap)
{
    cr_assert_not_null(r);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s: %s", what,
                 r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
    cr_assert_eq(r->elements, 1);
    snprintf(status, cap, "%s", r->element[0]->str);
    freeReplyObject(r);
}

void fx_complete(const char *job, const char *lease, char *status, size_t cap)
{
    one_status(lanes_call(fx_conn, &fx_q, SCRIPT_COMPLETE, "86400000", job, lease, NULL),
               "complete", status, cap);
}

void fx_fail(const char *job, const char *lease, const char *error, const char *retry_ms,
             const char *dead, char *status, size_t cap)
{
    one_status(lanes_call(fx_conn, &fx_q, SCRIPT_COMPLETE, "86400000", "fail", job, lease, error,
                          retry_ms, dead, NULL),
               "fail", status, cap);
}

void fx_ring(char *out, size_t cap)
{
    redisReply *r = redisCommand(fx_conn, "LRANGE %s 0 -1", fx_q.names[KEY_RING]);
    cr_assert_not_null(r);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->elements && used < cap; i++)
        used += snprintf(out + used, cap - used, "%s%s", i ? "," : "", r->element[i]->str);
    freeReplyObject(r);
}

void fx_row(const char *job, const char *field, char *out, size_t cap)
{
    redisReply *r = redisCommand(fx_conn, "HGET %sjob:%s %s", fx_q.prefix, job, field);
    cr_assert_not_null(r);
    snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject(r);
}

long long fx_deadline(const char *job)
{
    redisReply *r = redisCommand(fx_conn, "ZSCORE %s %s", fx_q.names[KEY_ACTIVE], job);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING, "%s is not in the active index", job);
    long long dl = atoll(r->str);
    freeReplyObject(r);
    return dl;
}

long long fx_now_ms(void)
{
    long long ms = redis_time_ms(fx_conn);
    cr_assert_geq(ms, 0, "TIME failed: %s", fx_conn->errstr);
    return ms;
}

void fx_await_past(long long ms)
{
    await(fx_now_ms() > ms, "Redis's clock to pass %lld", ms);
}

void fx_lease_n(const char *prefix, int n, struct leased *out)
{
    for (int i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof(id), "%s%d", prefix, i);
        cr_assert_eq(fx_enqueue(id, "TENa", "{}"), 1);
    }
    cr_assert_eq(fx_claim((size_t)n, 30000, out, NULL), (size_t)n);
}

void fx_complete_all(const struct leased *j, int n, const char *keep_ms)
{
    const char *args[1 + 2 * 16] = {keep_ms};
    cr_assert(n >= 1 && n <= 16);
    for (int i = 0; i < n; i++) {
        args[1 + 2 * i] = j[i].job;
        args[2 + 2 * i] = j[i].lease;
    }
    redisReply *r = lanes_callv(fx_conn, &fx_q, SCRIPT_COMPLETE, 1 + 2 * n, args);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == (size_t)n, "complete: %s",
              r != NULL && r->str != NULL ? r->str : "?");
    for (int i = 0; i < n; i++)
        cr_assert_str_eq(r->element[i]->str, "completed", "%s", j[i].job);
    freeReplyObject(r);
}

long long fx_script_runs(void)
{
    return redis_cmdstat(fx_conn, "fcall", "calls=") + redis_cmdstat(fx_conn, "eval", "calls=") +
           redis_cmdstat(fx_conn, "evalsha", "calls=") -
           redis_cmdstat(fx_conn, "evalsha", "failed_calls=");
}

long long fx_calls_of(const char *cmd)
{
    redisReply *r = redisCommand(fx_conn, "INFO commandstats");
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    char key[64];
    snprintf(key, sizeof(key), "cmdstat_%s:calls=", cmd);
    const char *p = strstr(r->str, key);
    long long n = p ? atoll(p + strlen(key)) : 0;
    freeReplyObject(r);
    return n;
}
