/* Integration: what the metrics endpoint counts. The pool's reconnect
 * counter counts connections back after a loss, not the start-up connect
 * however many tries it takes; the process_* families describe the emqd
 * process as procfs sees it. Every wait below polls the endpoint (or the
 * event itself) against a generous deadline; nothing asserts how long
 * anything took. */
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

/* Scrape until series is at least min, for up to timeout_ms; its last
 * value (NAN if it never appeared). */
static double await_at_least(const char *series, double min, int timeout_ms)
{
    long long end = tc_now_ms() + timeout_ms;
    double v;
    while ((v = scrape_value(scrape(), series)) < min || isnan(v)) {
        if (tc_now_ms() > end)
            break;
        tc_sleep_ms(20); /* between polls, not a wait for the event */
    }
    return v;
}

/* --- reconnects ---------------------------------------------------------- */

Test(metrics, reconnects_count_connections_back_after_a_loss_only)
{
    start(NULL);
    char *body = scrape();
    cr_assert_eq(scrape_value(body, "emqd_pool_reconnects_total"), 0, "a fresh daemon: %s", body);
    cr_assert_eq(scrape_value(body, "emqd_pool_connections"), 4);

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
