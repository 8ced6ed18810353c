/* Hostile clients over TCP: random bytes, huge lines, invalid UTF-8, deep
 * nesting, duplicate keys, wrong types, ids that try to leave the key
 * space, and 10,000 connections opened and dropped. Each bad line gets its
 * error code, the daemon keeps serving, and nothing reaches Redis: a
 * MONITOR connection sees no command but the daemon's own upkeep. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <dirent.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"
#include "monitor.h"

TestSuite(hostile, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

/* --- MONITOR: every command a client sends Redis while it runs -------- */

/* A pool connection's own setup (pool_conn.c:conn_setup): a connection
 * that came up late, or came back, loads the scripts and names itself
 * while the test runs; no request makes these. */
static bool conn_setup(const char *line)
{
    const char *cmd = strstr(line, "] \"");
    if (cmd == NULL)
        return false;
    cmd += 3;
    static const char *const setup[] = {"SCRIPT\"", "CLIENT\"", "PING\"", "SELECT\"",
                                        "AUTH\"",   "HELLO\"",  "INFO\"", "SSUBSCRIBE\""};
    for (size_t i = 0; i < sizeof(setup) / sizeof(setup[0]); i++)
        if (strncmp(cmd, setup[i], strlen(setup[i])) == 0)
            return true;
    return false;
}

/* The daemon's upkeep touches only the queue emqd_await_backend named;
 * anything else a client sent came from a request. */
static bool upkeep_only(const char *line)
{
    if (conn_setup(line))
        return true;
    if (strstr(line, "\"FCALL\"") == NULL)
        return false;
    for (const char *k = strstr(line, "emq:"); k != NULL; k = strstr(k + 4, "emq:"))
        if (strncmp(k, "emq:{emq-test-ready}:", 21) != 0)
            return false;
    return true;
}

static void watch(struct monitor *m)
{
    cr_assert_eq(monitor_start(m, &fx_redis), 0, "MONITOR refused");
}

/* Stop monitoring and assert that no request reached Redis. */
static void monitor_assert_quiet(struct monitor *m)
{
    monitor_stop(m);
    for (size_t i = 0; i < m->n; i++)
        cr_assert(upkeep_only(m->lines[i]), "a refused request reached Redis: %s", m->lines[i]);
    monitor_free(m);
}

/* --- helpers ---------------------------------------------------------- */

/* Send line; expect the error code, then prove the connection still
 * works with a ping carrying a ref. */
static void expect_code(struct tc_conn *c, const char *line, size_t len, const char *code)
{
    cr_assert_eq(tc_send(c, line, len), 0);
    cr_assert_eq(tc_send(c, "\n", 1), 0);
    json_t *r = tc_read(c, wait_deadline_ms(0));
    char *d = r != NULL ? json_dumps(r, JSON_COMPACT) : NULL;
    cr_assert(r != NULL && !tc_ok(r) && strcmp(tc_error(r), code) == 0,
              "%.80s... -> expected %s, got %.200s", line, code, d ? d : "(nothing)");
    free(d);
    json_decref(r);
    r = tc_call(c, "{\"op\":\"ping\",\"ref\":\"still\"}");
    assert_ok(r);
    cr_assert_str_eq(jstr(r, "ref"), "still");
    json_decref(r);
}

static void expect_line(struct tc_conn *c, const char *line, const char *code)
{
    expect_code(c, line, strlen(line), code);
}

/* A string of n copies of ch. */
static char *repeat(char ch, size_t n)
{
    char *s = malloc(n + 1);
    cr_assert_not_null(s);
    memset(s, ch, n);
    s[n] = '\0';
    return s;
}

static int open_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* --- tests ------------------------------------------------------------ */

/* Lines of random bytes (fixed seed) are EPROTO, or ETOOBIG past the limit. */
Test(hostile, random_bytes_are_refused)
{
    struct monitor m;
    watch(&m);
    struct tc_conn *c = fx_conn();
    srand(7);
    char line[4096];
    for (int i = 0; i < 300; i++) {
        size_t len = 1 + (size_t)(rand() % (int)sizeof(line));
        for (size_t k = 0; k < len; k++) {
            line[k] = (char)(rand() & 0xff);
            if (line[k] == '\n' || line[k] == '\r')
                line[k] = ' ';
        }
        line[0] = '#'; /* never a JSON object */
        expect_code(c, line, len, "EPROTO");
    }
    tc_close(c);
    monitor_assert_quiet(&m);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Lines over --max-line are ETOOBIG; the line after is served. */
Test(hostile, huge_lines_are_refused_and_the_next_line_works)
{
    struct monitor m;
    watch(&m);
    struct tc_conn *c = fx_conn();
    static const size_t sizes[] = {(1u << 20) + 1, 4u << 20, 16u << 20};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *big = repeat('x', sizes[i]);
        memcpy(big, "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":\"", 41);
        big[sizes[i] - 2] = '"';
        big[sizes[i] - 1] = '}';
        expect_code(c, big, sizes[i], "ETOOBIG");
        free(big);
    }
    tc_close(c);
    monitor_assert_quiet(&m);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Invalid UTF-8 anywhere, deep nesting, duplicate keys, "\u0000". */
Test(hostile, malformed_json_is_eproto)
{
    struct monitor m;
    watch(&m);
    struct tc_conn *c = fx_conn();
    static const char *const lines[] = {
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":\"\xc3\x28\"}",
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":\"\xff\xfe\"}",
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":\"\xc0\xaf\"}",         /* overlong */
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":\"\xed\xa0\x80\"}",     /* surrogate */
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":\"\xf4\x90\x80\x80\"}", /* > U+10FFFF */
        "{\"op\":\"enqueue\",\"queue\":\"h\xe9q\",\"payload\":1}",
        "{\"o\xe9p\":\"enqueue\",\"queue\":\"hq\",\"payload\":1}",
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":\"\xe2\x82\"}", /* truncated */
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":\"a\\u0000b\"}",
        "{\"op\":\"enqueue\",\"op\":\"claim\",\"queue\":\"hq\",\"payload\":1}",
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":{\"a\":1,\"a\":2}}",
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"queue\":\"hq\",\"payload\":1}",
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":1}{}",
        "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":1,}",
        "{\"op\":\"ping\",\"ref\":{\"a\":1}}",
        "{\"op\":\"ping\",\"ref\":[1]}",
        "{\"op\":1}",
        "{\"op\":null}",
        "{}",
        "null",
        "\"op\"",
        " ",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        expect_line(c, lines[i], "EPROTO");
    /* Nesting: 33 levels, then 200,000 (a parser that recursed per level
     * would run out of stack). */
    static const size_t depths[] = {33, 200000};
    for (size_t i = 0; i < 2; i++) {
        size_t d = depths[i];
        char *deep = malloc(2 * d + 64);
        cr_assert_not_null(deep);
        int n = sprintf(deep, "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":");
        memset(deep + n, '[', d - 1);
        memset(deep + n + d - 1, ']', d - 1);
        strcpy(deep + n + 2 * (d - 1), "}");
        expect_line(c, deep, "EPROTO");
        free(deep);
    }
    tc_close(c);
    monitor_assert_quiet(&m);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Wrong types and ids that try to break out of the key space: each gets
 * its code, and no key outside the queue's hash tag is ever formed. */
Test(hostile, wrong_types_and_key_breaking_ids_are_refused)
{
    struct monitor m;
    watch(&m);
    struct tc_conn *c = fx_conn();
    static const struct {
        const char *line, *code;
    } cases[] = {
        {"{\"op\":\"enqueue\",\"queue\":1,\"payload\":1}", "EARG"},
        {"{\"op\":\"enqueue\",\"queue\":[\"hq\"],\"payload\":1}", "EARG"},
        {"{\"op\":\"claim\",\"queue\":\"hq\",\"count\":\"1\"}", "EARG"},
        {"{\"op\":\"claim\",\"queue\":\"hq\",\"count\":1.5}", "EARG"},
        {"{\"op\":\"claim\",\"queue\":\"hq\",\"count\":-1}", "EARG"},
        {"{\"op\":\"claim\",\"queue\":\"hq\",\"count\":99999999999999999999}", "EPROTO"},
        {"{\"op\":\"claim\",\"queue\":\"hq\",\"flat\":1}", "EARG"},
        {"{\"op\":\"claim\",\"queue\":\"hq\",\"lease_ms\":null}", "EARG"},
        {"{\"op\":\"complete\",\"queue\":\"hq\",\"job\":\"JOBa\",\"lease\":5}", "EARG"},
        {"{\"op\":\"complete\",\"queue\":\"hq\",\"job\":[],\"lease\":\"1\"}", "EARG"},
        {"{\"op\":\"limit\",\"queue\":\"hq\",\"group\":\"TENa\",\"max\":\"2\"}", "EARG"},
        {"{\"op\":\"limit\",\"queue\":\"hq\",\"group\":\"TENa\",\"max\":-1}", "EARG"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":1,\"group\":true}", "EARG"},
        {"{\"op\":\"stream\",\"queue\":\"hq\"}", "EARG"},
        {"{\"op\":\"enqueue\",\"queue\":\"h}q\",\"payload\":1}", "EQUEUE"},
        {"{\"op\":\"enqueue\",\"queue\":\"h{q\",\"payload\":1}", "EQUEUE"},
        {"{\"op\":\"enqueue\",\"queue\":\"h:q\",\"payload\":1}", "EQUEUE"},
        {"{\"op\":\"enqueue\",\"queue\":\"h q\",\"payload\":1}", "EQUEUE"},
        {"{\"op\":\"enqueue\",\"queue\":\"\",\"payload\":1}", "EQUEUE"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq}:job:JOBx\",\"payload\":1}", "EQUEUE"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq\",\"group\":\"TENa}b\",\"payload\":1}", "EBRAND"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq\",\"group\":\"TENa:b\",\"payload\":1}", "EBRAND"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq\",\"group\":\"TEN a\",\"payload\":1}", "EBRAND"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq\",\"group\":\"TEN\",\"payload\":1}", "EBRAND"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq\",\"job\":\"JOBa}b\",\"payload\":1}", "EARG"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq\",\"job\":\"JOB:x\",\"payload\":1}", "EARG"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq\",\"job\":\"JOB x\",\"payload\":1}", "EARG"},
        {"{\"op\":\"enqueue\",\"queue\":\"hq\",\"job\":\"job1\",\"payload\":1}", "EKIND"},
        {"{\"op\":\"complete\",\"queue\":\"hq\",\"job\":\"JOB}\",\"lease\":\"1\"}", "EARG"},
        {"{\"op\":\"pause\",\"queue\":\"hq\",\"group\":\"TEN}\"}", "EBRAND"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        expect_line(c, cases[i].line, cases[i].code);

    /* 10 KB ids in every id position. */
    char *tenk = repeat('a', 10 * 1024);
    char *line = malloc(16 * 1024);
    cr_assert_not_null(line);
    snprintf(line, 16 * 1024, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"payload\":1}", tenk);
    expect_line(c, line, "EQUEUE");
    snprintf(line, 16 * 1024,
             "{\"op\":\"enqueue\",\"queue\":\"hq\",\"group\":\"TEN%s\",\"payload\":1}", tenk);
    expect_line(c, line, "EBRAND");
    snprintf(line, 16 * 1024,
             "{\"op\":\"enqueue\",\"queue\":\"hq\",\"job\":\"JOB%s\",\"payload\":1}", tenk);
    expect_line(c, line, "EARG");
    snprintf(line, 16 * 1024,
             "{\"op\":\"complete\",\"queue\":\"hq\",\"job\":\"JOBa\",\"lease\":\"%s\"}", tenk);
    expect_line(c, line, "EARG");
    snprintf(line, 16 * 1024, "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":1,\"%s\":1}", tenk);
    expect_line(c, line, "EARG");
    snprintf(line, 16 * 1024, "{\"op\":\"%s\",\"queue\":\"hq\"}", tenk);
    expect_line(c, line, "EUNKNOWN");
    free(line);
    free(tenk);
    tc_close(c);
    monitor_assert_quiet(&m);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* The detector itself: a request that does reach Redis is caught. */
Test(hostile, the_monitor_sees_a_request_that_reaches_redis)
{
    struct monitor m;
    watch(&m);
    struct tc_conn *c = fx_conn();
    json_t *r = tc_call(c, "{\"op\":\"depth\",\"queue\":\"hq\"}");
    assert_ok(r);
    json_decref(r);
    tc_close(c);
    monitor_stop(&m);
    /* The queue's registration (SADD emq:queues) may come first: it goes
     * on its own, in no order with the queue's calls. */
    bool seen = false;
    for (size_t i = 0; i < m.n; i++)
        seen = seen || (!upkeep_only(m.lines[i]) && strstr(m.lines[i], "emq:{hq}:") != NULL);
    cr_assert(seen, "the depth request was not seen in %zu commands", m.n);
    monitor_free(&m);
}

/* 10,000 connections opened and dropped (most reset, some mid-line, some
 * after a request): the daemon keeps serving and holds no fd for them. */
Test(hostile, ten_thousand_dropped_connections)
{
    struct tc_conn *keep = fx_conn(); /* a client that stays throughout */
    /* A queue in use first, so its wake subscription (the pool's pub/sub
     * connection, one more fd) is in the baseline. */
    json_t *r = tc_call(keep, "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":0}");
    assert_ok(r);
    json_decref(r);
    int fds0 = open_fds(fx_emqd.pid); /* the kept client's included */
    cr_assert_gt(fds0, 0);
    static const char partial[] = "{\"op\":\"enqueue\",\"queue\":\"hq\",\"pay";
    for (int i = 0; i < 10000; i++) {
        struct tc_conn *c = tc_connect(fx_emqd.port);
        cr_assert_not_null(c, "connection %d refused", i);
        if (i % 3 == 1)
            tc_send(c, partial, sizeof(partial) - 1);
        else if (i % 3 == 2)
            tc_send_line(c, "{\"op\":\"ping\"}");
        if (i % 10 != 0) { /* reset, leaving no TIME_WAIT behind */
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        tc_close(c);
        if (i % 1000 == 999) {
            r = tc_call(keep, "{\"op\":\"ping\",\"ref\":%d}", i);
            assert_ok(r);
            cr_assert_eq(jint(r, "ref"), i);
            json_decref(r);
        }
    }
    r = tc_call(keep, "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":1}");
    assert_ok(r);
    json_decref(r);
    /* The daemon closes what the dropped clients left as it reads their
     * ends: their fds go, down to the kept client's. */
    await(open_fds(fx_emqd.pid) <= fds0,
          "emqd to hold no fd for the dropped connections "
          "(%d, %d before)",
          open_fds(fx_emqd.pid), fds0);
    tc_close(keep);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* A request its op's own checks refuse (beyond the argument spec) never
 * reaches the backend: the queue it names is not made, so it is neither
 * registered in emq:queues nor reaped, and it shows in no metric. A valid
 * request on another queue, made just after, does show: the check can
 * see a queue being made. */
Test(hostile, requests_refused_by_their_ops_checks_make_no_queue)
{
    fx_teardown();
    const char *const extra[] = {"--max-batch", "2", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    json_t *r = tc_call(c, "{\"op\":\"enqueue_many\",\"queue\":\"nq1\",\"jobs\":[]}");
    assert_err_free(r, "EEMPTY");
    r = tc_call(c, "{\"op\":\"enqueue_many\",\"queue\":\"nq2\",\"jobs\":[{\"payload\":1},"
                   "{\"payload\":2},{\"payload\":3}]}");
    assert_err_free(r, "ELIMIT");
    r = tc_call(c, "{\"op\":\"groups\",\"queue\":\"nq3\",\"cursor\":\"x\"}");
    assert_err_free(r, "EARG");
    r = tc_call(c, "{\"op\":\"dead\",\"queue\":\"nq4\",\"action\":\"revive\"}");
    assert_err_free(r, "EARG");
    r = tc_call(c, "{\"op\":\"enqueue_many\",\"queue\":\"nq5\",\"jobs\":[{\"payload\":1}]}");
    assert_ok(r);
    json_decref(r);
    cr_assert_geq(emqd_metric(&fx_emqd, "emqd_jobs_total{queue=\"nq5\",event=\"enqueued\"}"), 1);
    const char *refused[] = {"nq1", "nq2", "nq3", "nq4"};
    for (size_t i = 0; i < 4; i++) {
        char series[128];
        snprintf(series, sizeof(series), "emqd_jobs_total{queue=\"%s\",event=\"enqueued\"}",
                 refused[i]);
        cr_assert_eq(emqd_metric(&fx_emqd, series), -1, "queue %s was made", refused[i]);
    }
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    for (size_t i = 0; i < 4; i++) {
        redisReply *x = redisCommand(rc, "SISMEMBER emq:queues %s", refused[i]);
        cr_assert(x != NULL && x->type == REDIS_REPLY_INTEGER);
        cr_assert_eq(x->integer, 0, "queue %s was registered", refused[i]);
        freeReplyObject(x);
    }
    redisFree(rc);
    tc_close(c);
}

/* Send line on c; its reply must be ok (returned, owned). */
static json_t *ok_call(struct tc_conn *c, const char *line)
{
    json_t *r = tc_call(c, "%s", line);
    assert_ok(r);
    return r;
}

/* True when emqd shows metrics for queue (it is in use there). */
static bool queue_in_metrics(const char *queue)
{
    char series[128];
    snprintf(series, sizeof(series), "emqd_jobs_total{queue=\"%s\",event=\"enqueued\"}", queue);
    return emqd_metric(&fx_emqd, series) != -1;
}

static long long registered(redisContext *rc, const char *queue)
{
    return redis_int(rc, "SISMEMBER emq:queues %s", queue);
}

/* Reads of a queue nobody has used (depth, stats, groups, job, dead list,
 * check) answer as for an empty queue and leave nothing behind: no
 * registration, no metrics, and no place under the daemon's cap of 4096
 * queues, however many names they try. A write then makes the queue. */
Test(hostile, reads_of_unknown_queues_leave_nothing_behind)
{
    struct tc_conn *c = fx_conn();
    json_t *r = tc_call(c, "{\"op\":\"depth\",\"queue\":\"ro1\"}");
    assert_ok(r);
    cr_assert_eq(jint(r, "depth"), 0);
    json_decref(r);
    json_decref(ok_call(c, "{\"op\":\"stats\",\"queue\":\"ro1\"}"));
    json_decref(ok_call(c, "{\"op\":\"groups\",\"queue\":\"ro1\"}"));
    json_decref(ok_call(c, "{\"op\":\"dead\",\"queue\":\"ro1\",\"action\":\"list\"}"));
    json_decref(ok_call(c, "{\"op\":\"check\",\"queue\":\"ro1\"}"));
    r = tc_call(c, "{\"op\":\"job\",\"queue\":\"ro1\",\"job\":\"JOBnone\"}");
    assert_err_free(r, "ENOJOB");
    cr_assert_not(queue_in_metrics("ro1"), "a read put the queue in use");

    /* 4,097 reads of as many names, pipelined: more than the cap. */
    enum { N = 4097 };
    for (int i = 0; i < N; i++) {
        char line[96];
        snprintf(line, sizeof(line), "{\"op\":\"depth\",\"queue\":\"junk%d\"}", i);
        cr_assert_eq(tc_send_line(c, line), 0);
    }
    for (int i = 0; i < N; i++) {
        r = tc_read(c, wait_deadline_ms(0));
        assert_ok(r);
        json_decref(r);
    }
    r = tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"ro1\",\"payload\":1}");
    assert_ok(r);
    json_decref(r);
    cr_assert(queue_in_metrics("ro1"), "the enqueue put the queue in use");

    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    await(registered(rc, "ro1") == 1, "the queue in use to be registered");
    cr_assert_eq(registered(rc, "junk0"), 0);
    cr_assert_eq(registered(rc, "junk4096"), 0);
    redisFree(rc);
    tc_close(c);
}
