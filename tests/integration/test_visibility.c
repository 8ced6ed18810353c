/* Integration: the daemon-wide views (queues), paging over many queues
 * and 100,000 groups, and the promise that no read-only op makes a queue
 * that does not exist, through the real emqd. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"
#include "scrape.h"

TestSuite(visibility, .init = fx_setup, .fini = fx_teardown, .timeout = 300);

/* --- reads of a queue that does not exist ------------------------------- */

/* True when the daemon's /metrics shows any series of queue. */
static bool in_metrics(const char *queue)
{
    static char resp[1 << 22];
    http_get(fx_emqd.metrics_port, "/metrics", resp, sizeof(resp));
    char label[96];
    snprintf(label, sizeof(label), "queue=\"%s\"", queue);
    return strstr(scrape_body(resp), label) != NULL;
}

/* Keys of queue at Redis, and whether the registry names it. */
static long long queue_keys(redisContext *rc, const char *queue)
{
    redisReply *r = redisCommand(rc, "KEYS emq:{%s}:*", queue);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    long long n = (long long)r->elements;
    freeReplyObject(r);
    return n;
}

/* Run line (a read of queue, which nobody has used) and assert it left
 * nothing behind: not registered, no key, no /metrics series. The same
 * checks, made after a write to another queue, see that one: they can
 * see a queue being made. */
static void read_leaves_nothing(const char *queue, const char *line, const char *code)
{
    struct tc_conn *c = fx_conn();
    json_t *r = tc_call(c, "%s", line);
    if (code == NULL)
        assert_ok(r);
    else
        assert_err(r, code);
    json_decref(r);
    /* A write after it on the same connection, to a queue of its own. */
    char other[80];
    snprintf(other, sizeof(other), "%s-control", queue);
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"payload\":1}", other));
    fx_await_quiet(&fx_emqd);
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    await(redis_int(rc, "SISMEMBER emq:queues %s", other) == 1,
          "the control queue to be registered");
    cr_assert(queue_keys(rc, other) > 0);
    cr_assert(in_metrics(other), "the control queue is not in /metrics");

    cr_assert_eq(redis_int(rc, "SISMEMBER emq:queues %s", queue), 0, "%s registered it", line);
    cr_assert_eq(queue_keys(rc, queue), 0, "%s wrote keys of the queue", line);
    cr_assert_not(in_metrics(queue), "%s put the queue in /metrics", line);
    redisFree(rc);
    tc_close(c);
}

Test(visibility, stats_of_an_unknown_queue_registers_nothing)
{
    read_leaves_nothing("mial", "{\"op\":\"stats\",\"queue\":\"mial\"}", NULL);
}

Test(visibility, depth_of_an_unknown_queue_registers_nothing)
{
    read_leaves_nothing("mial", "{\"op\":\"depth\",\"queue\":\"mial\",\"group\":\"TENa\"}", NULL);
}

Test(visibility, groups_of_an_unknown_queue_registers_nothing)
{
    read_leaves_nothing("mial", "{\"op\":\"groups\",\"queue\":\"mial\",\"count\":5}", NULL);
}

Test(visibility, job_of_an_unknown_queue_registers_nothing)
{
    read_leaves_nothing("mial", "{\"op\":\"job\",\"queue\":\"mial\",\"job\":\"JOBx\"}", "ENOJOB");
}

Test(visibility, dead_list_of_an_unknown_queue_registers_nothing)
{
    read_leaves_nothing("mial", "{\"op\":\"dead\",\"queue\":\"mial\",\"action\":\"list\"}", NULL);
}

Test(visibility, check_of_an_unknown_queue_registers_nothing)
{
    read_leaves_nothing("mial", "{\"op\":\"check\",\"queue\":\"mial\"}", NULL);
}

Test(visibility, peek_of_an_unknown_queue_registers_nothing)
{
    read_leaves_nothing("mial", "{\"op\":\"peek\",\"queue\":\"mial\",\"state\":\"dead\"}", NULL);
}

/* --- queues ------------------------------------------------------------- */

/* One page of queues (cursor NULL: the first), asserting it is ok. */
static json_t *queues_page(struct tc_conn *c, const char *cursor, int count)
{
    if (cursor == NULL)
        return OK(c, "{\"op\":\"queues\",\"count\":%d}", count);
    return OK(c, "{\"op\":\"queues\",\"cursor\":\"%s\",\"count\":%d}", cursor, count);
}

/* The row of queue in a page, or NULL. */
static json_t *row_of(json_t *page, const char *queue)
{
    json_t *rows = json_object_get(page, "queues");
    for (size_t i = 0; i < json_array_size(rows); i++)
        if (strcmp(jstr(json_array_get(rows, i), "queue"), queue) == 0)
            return json_array_get(rows, i);
    return NULL;
}

enum { NQ = 300 }; /* past Redis' small-set encoding, so that SSCAN pages */

/* Every queue of NQ, paged count at a time, comes exactly once with its
 * totals as stats has them; the pages end with cursor "0". */
Test(visibility, queues_pages_over_many_queues_with_their_totals)
{
    struct tc_conn *c = fx_conn();
    /* Queue i holds i % 3 + 1 grouped pending jobs, i % 2 delayed ones
     * and one ungrouped one; a pause in every fifth. Pipelined. */
    size_t sent = 0;
    for (int i = 0; i < NQ; i++) {
        char line[256];
        for (int k = 0; k < i % 3 + 1; k++) {
            snprintf(line, sizeof(line),
                     "{\"op\":\"enqueue\",\"queue\":\"vq%03d\",\"group\":\"TENg%d\",\"payload\":1}",
                     i, k);
            cr_assert_eq(tc_send_line(c, line), 0);
            sent++;
        }
        for (int k = 0; k < i % 2; k++) {
            snprintf(line, sizeof(line),
                     "{\"op\":\"enqueue\",\"queue\":\"vq%03d\",\"delay_ms\":3600000,"
                     "\"payload\":1}",
                     i);
            cr_assert_eq(tc_send_line(c, line), 0);
            sent++;
        }
        snprintf(line, sizeof(line), "{\"op\":\"enqueue\",\"queue\":\"vq%03d\",\"payload\":1}", i);
        cr_assert_eq(tc_send_line(c, line), 0);
        sent++;
        if (i % 5 == 0) {
            snprintf(line, sizeof(line),
                     "{\"op\":\"pause\",\"queue\":\"vq%03d\",\"group\":\"TENg0\"}", i);
            cr_assert_eq(tc_send_line(c, line), 0);
            sent++;
        }
    }
    for (size_t i = 0; i < sent; i++) {
        json_t *r = tc_read(c, wait_deadline_ms(0));
        assert_ok(r);
        json_decref(r);
    }

    static int seen[NQ];
    memset(seen, 0, sizeof(seen));
    char cursor[40] = "";
    int pages = 0;
    for (;;) {
        json_t *p = queues_page(c, pages ? cursor : NULL, 7);
        pages++;
        json_t *rows = json_object_get(p, "queues");
        cr_assert(json_is_array(rows));
        for (size_t k = 0; k < json_array_size(rows); k++) {
            json_t *row = json_array_get(rows, k);
            int i = -1;
            cr_assert_eq(sscanf(jstr(row, "queue"), "vq%d", &i), 1, "unknown queue %s",
                         jstr(row, "queue"));
            cr_assert(i >= 0 && i < NQ);
            seen[i]++;
            cr_assert_eq(jint(row, "pending"), i % 3 + 2, "vq%03d pending", i);
            cr_assert_eq(jint(row, "delayed"), i % 2, "vq%03d delayed", i);
            cr_assert_eq(jint(row, "active"), 0);
            cr_assert_eq(jint(row, "dead"), 0);
            cr_assert_eq(jint(row, "groups"), i % 3 + 1, "vq%03d groups", i);
            cr_assert_eq(jint(row, "paused"), i % 5 == 0, "vq%03d paused", i);
            cr_assert_eq(json_object_size(row), 7, "a row has exactly the documented fields");
        }
        const char *next = jstr(p, "cursor");
        cr_assert(next[0] != '\0');
        bool done = strcmp(next, "0") == 0;
        snprintf(cursor, sizeof(cursor), "%s", next);
        json_decref(p);
        if (done)
            break;
        cr_assert_lt(pages, 10 * NQ, "paging never ends");
    }
    for (int i = 0; i < NQ; i++)
        cr_assert_eq(seen[i], 1, "vq%03d came %d times", i, seen[i]);
    cr_assert_gt(pages, 5, "%d queues came in %d pages of about 7", NQ, pages);
    /* The totals agree with stats' for one of them. */
    json_t *one = queues_page(c, NULL, 1000);
    cr_assert_str_eq(jstr(one, "cursor"), "0", "1000 covers %d queues in one page", NQ);
    json_t *row = row_of(one, "vq007");
    cr_assert_not_null(row);
    cr_assert_eq(jint(row, "pending"), fx_stat(c, "vq007", "pending"));
    cr_assert_eq(jint(row, "groups"), fx_stat(c, "vq007", "groups"));
    json_decref(one);
    tc_close(c);
}

/* Pipelined on one connection, queues sees every earlier request's effect
 * and none of a later one's, also for a queue the connection makes. */
Test(visibility, queues_pipelined_takes_effect_in_order)
{
    struct tc_conn *c = fx_conn();
    const char *lines[] = {
        "{\"op\":\"enqueue\",\"queue\":\"fresh\",\"payload\":1}",
        "{\"op\":\"queues\",\"count\":1000,\"ref\":1}",
        "{\"op\":\"enqueue\",\"queue\":\"fresh\",\"payload\":2}",
        "{\"op\":\"pause\",\"queue\":\"fresh\",\"group\":\"TENa\"}",
        "{\"op\":\"queues\",\"count\":1000,\"ref\":2}",
        "{\"op\":\"enqueue\",\"queue\":\"fresh\",\"payload\":3}",
    };
    /* One write, so that the daemon reads them all at once: nothing but
     * the barrier holds the later ones back. */
    char all[1024] = "";
    for (size_t i = 0; i < 6; i++)
        snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s\n", lines[i]);
    cr_assert_eq(tc_send(c, all, strlen(all)), 0);
    long long want[][2] = {{1, 0}, {2, 1}};
    for (size_t i = 0, k = 0; i < 6; i++) {
        json_t *r = tc_read(c, wait_deadline_ms(0));
        assert_ok(r);
        if (json_object_get(r, "queues") != NULL) {
            json_t *row = row_of(r, "fresh");
            cr_assert_not_null(row, "the queue made just before is listed");
            cr_assert_eq(jint(row, "pending"), want[k][0]);
            cr_assert_eq(jint(row, "paused"), want[k][1]);
            k++;
        }
        json_decref(r);
    }
    tc_close(c);
}

/* Bad arguments are refused before anything reaches Redis. */
Test(visibility, bad_queues_requests_are_refused_and_read_nothing)
{
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"vq\",\"payload\":1}"));
    fx_await_quiet(&fx_emqd);
    long long scans = fx_redis_calls("sscan");
    const char *bad[] = {
        "{\"op\":\"queues\",\"cursor\":\"x\"}",
        "{\"op\":\"queues\",\"cursor\":\"\"}",
        "{\"op\":\"queues\",\"cursor\":\"-1\"}",
        "{\"op\":\"queues\",\"cursor\":7}",
        "{\"op\":\"queues\",\"count\":0}",
        "{\"op\":\"queues\",\"count\":1001}",
        "{\"op\":\"queues\",\"count\":\"5\"}",
        "{\"op\":\"queues\",\"queue\":\"vq\"}",
        "{\"op\":\"queues\",\"cursor\":\"123456789012345678901234567890123\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_err_free(tc_call(c, "%s", bad[i]), "EARG");
    cr_assert_eq(fx_redis_calls("sscan"), scans, "a refused queues request reached Redis");
    /* The same count of SSCANs moves with a good one: the check can fail. */
    json_decref(OK(c, "{\"op\":\"queues\"}"));
    cr_assert_eq(fx_redis_calls("sscan"), scans + 1);
    tc_close(c);
}

/* --- groups over 100,000 groups ----------------------------------------- */

enum { NG = 100000, BATCH = 10000 };

/* 100,000 groups with one pending job each, made in ten pipelined
 * enqueue_many calls; paging groups 1000 at a time lists every one
 * exactly once. */
Test(visibility, groups_pages_over_100000_groups)
{
    /* One call of 10,000 jobs holds Redis for about half a second (more
     * on a loaded machine): a deadline that fits it. */
    fx_teardown();
    const char *const extra[] = {"--redis-timeout-ms", "60000", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    size_t cap = (size_t)BATCH * 64 + 256;
    char *line = malloc(cap);
    cr_assert_not_null(line);
    for (int b = 0; b < NG / BATCH; b++) {
        size_t n =
            (size_t)snprintf(line, cap, "{\"op\":\"enqueue_many\",\"queue\":\"big\",\"jobs\":[");
        for (int k = 0; k < BATCH; k++)
            n += (size_t)snprintf(line + n, cap - n, "%s{\"group\":\"TENg%06d\",\"payload\":1}",
                                  k ? "," : "", b * BATCH + k);
        snprintf(line + n, cap - n, "]}");
        cr_assert_eq(tc_send_line(c, line), 0);
        json_t *r = tc_read(c, wait_deadline_ms(60000));
        assert_ok(r);
        json_decref(r);
    }
    free(line);
    cr_assert_eq(fx_stat(c, "big", "groups"), NG);

    unsigned char *seen = calloc(NG, 1);
    char cursor[40] = "0";
    int pages = 0;
    do {
        json_t *p =
            OK(c, "{\"op\":\"groups\",\"queue\":\"big\",\"cursor\":\"%s\",\"count\":1000}", cursor);
        pages++;
        json_t *rows = json_object_get(p, "groups");
        for (size_t k = 0; k < json_array_size(rows); k++) {
            json_t *g = json_array_get(rows, k);
            int i = -1;
            cr_assert_eq(sscanf(jstr(g, "group"), "TENg%d", &i), 1);
            cr_assert(i >= 0 && i < NG);
            cr_assert_eq(seen[i], 0, "TENg%06d listed twice", i);
            seen[i] = 1;
            cr_assert_eq(jint(g, "depth"), 1);
        }
        snprintf(cursor, sizeof(cursor), "%s", jstr(p, "cursor"));
        json_decref(p);
        cr_assert_lt(pages, 10000, "paging never ends");
    } while (strcmp(cursor, "0") != 0);
    for (int i = 0; i < NG; i++)
        cr_assert_eq(seen[i], 1, "TENg%06d never listed", i);
    cr_assert_gt(pages, 50, "100,000 groups came in %d pages of about 1000", pages);
    free(seen);
    tc_close(c);
}
