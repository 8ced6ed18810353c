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

/* --- clients ------------------------------------------------------------ */

/* The row of connection id in a clients page, or NULL. */
static json_t *client_of(json_t *page, long long id)
{
    json_t *rows = json_object_get(page, "clients");
    for (size_t i = 0; i < json_array_size(rows); i++)
        if (jint(json_array_get(rows, i), "id") == id)
            return json_array_get(rows, i);
    return NULL;
}

/* The id of c's own connection: the row clients marks self. */
static long long own_id(struct tc_conn *c)
{
    json_t *p = OK(c, "{\"op\":\"clients\",\"count\":1000}");
    json_t *rows = json_object_get(p, "clients");
    long long id = -1;
    int selves = 0;
    for (size_t i = 0; i < json_array_size(rows); i++)
        if (json_is_true(json_object_get(json_array_get(rows, i), "self"))) {
            id = jint(json_array_get(rows, i), "id");
            selves++;
        }
    cr_assert_eq(selves, 1, "exactly one row is the asker's own");
    json_decref(p);
    return id;
}

/* A worker's connection as another sees it: its name from hello, its
 * stream with credit and what is out on it, its leases; with its id, the
 * leases it holds (job, group, deadline) and never their tokens. */
Test(visibility, clients_shows_names_streams_and_leases_never_tokens)
{
    struct tc_conn *w = fx_conn(), *a = fx_conn();
    json_decref(OK(w, "{\"op\":\"hello\",\"protocol\":1,\"name\":\"worker-1\"}"));
    long long wid = own_id(w), aid = own_id(a);
    cr_assert_neq(wid, aid);
    for (int i = 0; i < 3; i++)
        json_decref(OK(a,
                       "{\"op\":\"enqueue\",\"queue\":\"cq\",\"job\":\"JOBc%d\",\"group\":"
                       "\"TENg%d\",\"payload\":%d}",
                       i, i, i));
    cr_assert_eq(tc_send_line(w, "{\"op\":\"stream\",\"queue\":\"cq\",\"credit\":2}"), 0);
    char lease[2][32], job[2][80];
    long long until[2];
    for (int got = 0, replies = 0; got < 2 || replies < 1;) {
        json_t *m = tc_read(w, wait_deadline_ms(0));
        cr_assert_not_null(m, "the stream's reply and two pushes");
        if (json_object_get(m, "push") != NULL) {
            snprintf(lease[got], sizeof(lease[got]), "%s", jstr(m, "lease"));
            snprintf(job[got], sizeof(job[got]), "%s", jstr(m, "job"));
            until[got++] = jint(m, "lease_until");
        } else {
            assert_ok(m);
            replies++;
        }
        json_decref(m);
    }

    json_t *p = OK(a, "{\"op\":\"clients\"}");
    json_t *row = client_of(p, wid), *me = client_of(p, aid);
    cr_assert_not_null(row);
    cr_assert_not_null(me);
    cr_assert_str_eq(jstr(row, "name"), "worker-1");
    cr_assert(json_is_null(json_object_get(me, "name")), "no hello: no name");
    cr_assert(json_is_false(json_object_get(row, "self")));
    cr_assert(json_is_true(json_object_get(me, "self")));
    cr_assert_eq(jint(row, "leases"), 2);
    cr_assert_eq(jint(me, "leases"), 0);
    cr_assert(strncmp(jstr(row, "addr"), "127.0.0.1:", 10) == 0, "addr %s", jstr(row, "addr"));
    cr_assert_geq(jint(row, "age_ms"), jint(row, "idle_ms"));
    json_t *streams = json_object_get(row, "streams");
    cr_assert_eq(json_array_size(streams), 1);
    json_t *s = json_array_get(streams, 0);
    cr_assert_str_eq(jstr(s, "queue"), "cq");
    cr_assert(json_is_null(json_object_get(s, "group")));
    cr_assert(json_is_false(json_object_get(s, "flat")));
    cr_assert_eq(jint(s, "credit"), 2);
    cr_assert_eq(jint(s, "outstanding"), 2);
    cr_assert_str_eq(jstr(p, "cursor"), "0");
    json_decref(p);

    p = OK(a, "{\"op\":\"clients\",\"id\":%lld}", wid);
    json_t *one = json_object_get(p, "client");
    cr_assert_eq(jint(one, "id"), wid);
    json_t *held = json_object_get(one, "held");
    cr_assert_eq(json_array_size(held), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *h = json_array_get(held, i);
        int k = strcmp(jstr(h, "job"), job[0]) == 0 ? 0 : 1;
        cr_assert_str_eq(jstr(h, "job"), job[k]);
        cr_assert_str_eq(jstr(h, "queue"), "cq");
        char g[16];
        snprintf(g, sizeof(g), "TENg%c", job[k][4]);
        cr_assert_str_eq(jstr(h, "group"), g);
        cr_assert_eq(jint(h, "deadline_ms"), until[k]);
        cr_assert_null(json_object_get(h, "lease"));
    }
    char *text = json_dumps(p, JSON_COMPACT);
    cr_assert_null(strstr(text, "\"lease\""), "a lease token in %s", text);
    free(text);
    json_decref(p);

    /* One settled: one lease and one out on the stream fewer. */
    char line[256];
    snprintf(line, sizeof(line),
             "{\"op\":\"complete\",\"queue\":\"cq\",\"job\":\"%s\",\"lease\":\"%s\"}", job[0],
             lease[0]);
    cr_assert_eq(tc_send_line(w, line), 0);
    json_t *m;
    /* The credit it returns may push the third job: skip pushes. */
    while ((m = tc_read(w, wait_deadline_ms(0))) != NULL && json_object_get(m, "push") != NULL)
        json_decref(m);
    assert_ok(m);
    json_decref(m);
    p = OK(a, "{\"op\":\"clients\",\"id\":%lld}", wid);
    one = json_object_get(p, "client");
    held = json_object_get(one, "held");
    for (size_t i = 0; i < json_array_size(held); i++)
        cr_assert_str_neq(jstr(json_array_get(held, i), "job"), job[0], "a settled job is held");
    json_decref(p);

    assert_err_free(tc_call(a, "{\"op\":\"clients\",\"id\":%lld}", wid + aid + 100), "ENOTFOUND");
    tc_close(w);
    tc_close(a);
}

/* Bad arguments are refused (clients reads no backend, so nothing else
 * could change). */
Test(visibility, bad_clients_requests_are_refused)
{
    struct tc_conn *c = fx_conn();
    const char *bad[] = {
        "{\"op\":\"clients\",\"id\":0}",
        "{\"op\":\"clients\",\"id\":\"1\"}",
        "{\"op\":\"clients\",\"id\":-3}",
        "{\"op\":\"clients\",\"id\":1,\"cursor\":\"0\"}",
        "{\"op\":\"clients\",\"id\":1,\"count\":5}",
        "{\"op\":\"clients\",\"cursor\":\"x\"}",
        "{\"op\":\"clients\",\"cursor\":\"\"}",
        "{\"op\":\"clients\",\"count\":0}",
        "{\"op\":\"clients\",\"count\":1001}",
        "{\"op\":\"clients\",\"queue\":\"q\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_err_free(tc_call(c, "%s", bad[i]), "EARG");
    tc_close(c);
}

/* Pipelined on one connection, clients sees what the requests before it
 * did to the connection and nothing of those after it. */
Test(visibility, clients_pipelined_takes_effect_in_order)
{
    struct tc_conn *c = fx_conn();
    const char all[] = "{\"op\":\"hello\",\"protocol\":1,\"name\":\"first\"}\n"
                       "{\"op\":\"stream\",\"queue\":\"pq\",\"credit\":3}\n"
                       "{\"op\":\"clients\",\"ref\":1}\n"
                       "{\"op\":\"hello\",\"protocol\":1,\"name\":\"second\"}\n"
                       "{\"op\":\"stream\",\"queue\":\"pq\",\"credit\":0}\n"
                       "{\"op\":\"clients\",\"ref\":2}\n";
    cr_assert_eq(tc_send(c, all, sizeof(all) - 1), 0);
    const char *names[] = {"first", "second"};
    for (int i = 0, k = 0; i < 6; i++) {
        json_t *r = tc_read(c, wait_deadline_ms(0));
        assert_ok(r);
        json_t *rows = json_object_get(r, "clients");
        for (size_t j = 0; j < json_array_size(rows); j++) {
            json_t *row = json_array_get(rows, j);
            if (!json_is_true(json_object_get(row, "self")))
                continue;
            cr_assert_str_eq(jstr(row, "name"), names[k]);
            json_t *s = json_object_get(row, "streams");
            if (k == 0) {
                cr_assert_eq(json_array_size(s), 1);
                cr_assert_eq(jint(json_array_get(s, 0), "credit"), 3);
            } else {
                cr_assert_eq(json_array_size(s), 0, "credit 0 stopped the stream");
            }
            k++;
        }
        json_decref(r);
    }
    tc_close(c);
}

/* Raw connections that say hello with a long name and read nothing. */
static int raw_hello(int port, int i)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char line[256];
    int n = snprintf(line, sizeof(line),
                     "{\"op\":\"hello\",\"protocol\":1,\"name\":\"w%04d-%0122d\"}\n", i, 0);
    cr_assert_eq(write(fd, line, (size_t)n), n);
    return fd;
}

/* How many of the daemon's connections have a name, over every page. */
static int named_clients(struct tc_conn *c)
{
    int named = 0;
    char cursor[40] = "0";
    do {
        json_t *p = OK(c, "{\"op\":\"clients\",\"cursor\":\"%s\",\"count\":1000}", cursor);
        json_t *rows = json_object_get(p, "clients");
        for (size_t i = 0; i < json_array_size(rows); i++)
            named += json_is_string(json_object_get(json_array_get(rows, i), "name"));
        snprintf(cursor, sizeof(cursor), "%s", jstr(p, "cursor"));
        json_decref(p);
    } while (strcmp(cursor, "0") != 0);
    return named;
}

enum { NC = 1200 }; /* rows of ~260 bytes: more than one page's 256 KiB */

/* Paging clients over NC named connections, newest first: every one comes
 * exactly once, and a page stays near 256 KiB however many it may hold. */
Test(visibility, clients_pages_over_many_connections_and_bounds_a_page)
{
    static int fds[NC];
    for (int i = 0; i < NC; i++)
        fds[i] = raw_hello(fx_emqd.port, i);
    struct tc_conn *c = fx_conn();
    await(named_clients(c) == NC, "the %d hellos to have run", NC);

    static char seen[NC];
    memset(seen, 0, sizeof(seen));
    char cursor[40] = "0";
    long long prev = -1;
    int pages = 0, rows_total = 0;
    size_t biggest = 0, biggest_rows = 0;
    do {
        json_t *p = OK(c, "{\"op\":\"clients\",\"cursor\":\"%s\",\"count\":1000}", cursor);
        pages++;
        char *text = json_dumps(p, JSON_COMPACT);
        json_t *rows = json_object_get(p, "clients");
        if (strlen(text) > biggest) {
            biggest = strlen(text);
            biggest_rows = json_array_size(rows);
        }
        free(text);
        for (size_t i = 0; i < json_array_size(rows); i++) {
            json_t *row = json_array_get(rows, i);
            long long id = jint(row, "id");
            cr_assert(prev < 0 || id < prev, "newest first: %lld after %lld", id, prev);
            prev = id;
            rows_total++;
            int k = -1;
            if (sscanf(jstr(row, "name"), "w%d-", &k) == 1) {
                cr_assert(k >= 0 && k < NC);
                cr_assert_eq(seen[k], 0, "w%04d twice", k);
                seen[k] = 1;
            }
        }
        snprintf(cursor, sizeof(cursor), "%s", jstr(p, "cursor"));
        json_decref(p);
        cr_assert_lt(pages, 100);
    } while (strcmp(cursor, "0") != 0);
    for (int i = 0; i < NC; i++)
        cr_assert_eq(seen[i], 1, "w%04d never listed", i);
    cr_assert_eq(rows_total, NC + 1, "the %d and the asker", NC);
    cr_assert_geq(pages, 2, "%d rows of ~260 bytes in one page", NC);
    cr_assert_lt(biggest, (256u << 10) + 1024, "a page of %zu rows is %zu bytes", biggest_rows,
                 biggest);
    for (int i = 0; i < NC; i++)
        close(fds[i]);
    tc_close(c);
}

/* --- forget -------------------------------------------------------------- */

/* Keys of queue other than job rows, and whether the registry names it. */
static long long structure_keys(redisContext *rc, const char *queue)
{
    redisReply *r = redisCommand(rc, "KEYS emq:{%s}:*", queue);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    long long n = 0;
    for (size_t i = 0; i < r->elements; i++)
        n += strstr(r->element[i]->str, "}:job:") == NULL;
    freeReplyObject(r);
    return n;
}

static long long registered(redisContext *rc, const char *queue)
{
    return redis_int(rc, "SISMEMBER emq:queues %s", queue);
}

/* An empty queue leaves the registry, its keys (the completed rows its
 * retention keeps too: no upkeep would delete them), this daemon and
 * /metrics; a later enqueue makes it anew. */
Test(visibility, forget_removes_an_empty_queue_everywhere)
{
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"fg\",\"job\":\"JOBf1\",\"group\":\"TENa\","
                      "\"payload\":1}"));
    json_decref(OK(c, "{\"op\":\"limit\",\"queue\":\"fg\",\"group\":\"TENb\",\"max\":2}"));
    json_t *cl = OK(c, "{\"op\":\"claim\",\"queue\":\"fg\"}");
    json_decref(OK(c, "{\"op\":\"complete\",\"queue\":\"fg\",\"job\":\"JOBf1\",\"lease\":\"%s\"}",
                   jstr(json_array_get(json_object_get(cl, "jobs"), 0), "lease")));
    json_decref(cl);
    redisContext *rc = redis_server_connect(&fx_redis);
    await(registered(rc, "fg") == 1, "fg to be registered");
    cr_assert(in_metrics("fg"));
    cr_assert_gt(structure_keys(rc, "fg"), 0);

    json_t *r = OK(c, "{\"op\":\"forget\",\"queue\":\"fg\"}");
    cr_assert_eq(json_object_size(r), 1, "{\"ok\":true}");
    json_decref(r);
    fx_await_quiet(&fx_emqd);
    cr_assert_eq(registered(rc, "fg"), 0, "still registered");
    cr_assert_eq(structure_keys(rc, "fg"), 0, "keys left");
    cr_assert_eq(redis_int(rc, "EXISTS emq:{fg}:job:JOBf1"), 0, "the completed row went too");
    cr_assert_not(in_metrics("fg"), "still in /metrics");
    json_t *page = queues_page(c, NULL, 1000);
    cr_assert_null(row_of(page, "fg"), "still listed by queues");
    json_decref(page);
    /* The queue comes back with the next write, as any new queue. */
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"fg\",\"payload\":2}"));
    await(registered(rc, "fg") == 1, "fg to be registered again");
    cr_assert(in_metrics("fg"));
    cr_assert_eq(fx_stat(c, "fg", "pending"), 1);
    /* Forgetting a queue nobody has is ok, and makes nothing. */
    json_decref(OK(c, "{\"op\":\"forget\",\"queue\":\"nosuch\"}"));
    fx_await_quiet(&fx_emqd);
    cr_assert_eq(registered(rc, "nosuch"), 0);
    cr_assert_not(in_metrics("nosuch"));
    redisFree(rc);
    tc_close(c);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly");
}

/* More completed rows kept than one forget call deletes (10,000,
 * lua/forget.lua): the daemon calls again from the reply until all are
 * gone, and answers once. */
Test(visibility, forget_deletes_more_retained_rows_than_one_call_does, .timeout = 240)
{
    enum { N = 10050, PER = 1000 };
    struct tc_conn *c = fx_conn();
    static char line[PER * 48 + 128];
    for (int done = 0; done < N;) {
        int n = N - done < PER ? N - done : PER;
        size_t len = (size_t)snprintf(line, sizeof(line),
                                      "{\"op\":\"enqueue_many\",\"queue\":\"fb\",\"jobs\":[");
        for (int i = 0; i < n; i++)
            len +=
                (size_t)snprintf(line + len, sizeof(line) - len,
                                 "%s{\"job\":\"JOBb%05d\",\"payload\":1}", i ? "," : "", done + i);
        snprintf(line + len, sizeof(line) - len, "]}");
        json_decref(OK(c, "%s", line));
        done += n;
    }
    int completed = 0;
    while (completed < N) {
        json_t *cl = OK(c, "{\"op\":\"claim\",\"queue\":\"fb\",\"flat\":true,\"count\":%d}", PER);
        json_t *jobs = json_object_get(cl, "jobs");
        size_t n = json_array_size(jobs);
        cr_assert_gt(n, 0, "claim found none with %d of %d completed", completed, N);
        /* Pipelined: every completion sent, then every reply read. */
        for (size_t i = 0; i < n; i++) {
            json_t *j = json_array_get(jobs, i);
            snprintf(line, sizeof(line),
                     "{\"op\":\"complete\",\"queue\":\"fb\",\"job\":\"%s\",\"lease\":\"%s\"}",
                     jstr(j, "job"), jstr(j, "lease"));
            cr_assert_eq(tc_send_line(c, line), 0);
        }
        for (size_t i = 0; i < n; i++) {
            json_t *r = tc_read(c, wait_deadline_ms(0));
            assert_ok(r);
            json_decref(r);
        }
        completed += (int)n;
        json_decref(cl);
    }
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_eq(redis_int(rc, "EXISTS emq:{fb}:job:JOBb00000"), 1, "kept for the retention");
    json_t *r = OK(c, "{\"op\":\"forget\",\"queue\":\"fb\"}");
    cr_assert_eq(json_object_size(r), 1, "{\"ok\":true}");
    json_decref(r);
    cr_assert_eq(queue_keys(rc, "fb"), 0, "every key went, all %d kept rows too", N);
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"fb\",\"job\":\"JOBb00000\",\"payload\":1}"));
    cr_assert_eq(fx_stat(c, "fb", "pending"), 1, "the id is free again");
    redisFree(rc);
    tc_close(c);
}

/* A snapshot of what a refused forget must not change: the registry and
 * every key of the queue. */
static char *snapshot(redisContext *rc, const char *queue)
{
    redisReply *r = redisCommand(rc, "EVAL %s 0 %s",
                                 "local out = redis.call('SMEMBERS', 'emq:queues') "
                                 "table.sort(out) "
                                 "local keys = redis.call('KEYS', 'emq:{' .. ARGV[1] .. '}:*') "
                                 "table.sort(keys) "
                                 "for _, k in ipairs(keys) do out[#out + 1] = k .. '=' .. "
                                 "redis.sha1hex(redis.call('DUMP', k)) end "
                                 "return table.concat(out, ' ')",
                                 queue);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING, "snapshot: %s", r ? r->str : "");
    char *s = strdup(r->str);
    freeReplyObject(r);
    return s;
}

/* With a job pending, active, delayed or dead, forget is ESTATE and
 * changes nothing; so are malformed forgets. */
Test(visibility, forget_refuses_a_queue_with_jobs_and_bad_input_changing_nothing)
{
    struct tc_conn *c = fx_conn();
    redisContext *rc = redis_server_connect(&fx_redis);
    const char *states[] = {"pending", "active", "delayed", "dead"};
    for (int i = 0; i < 4; i++) {
        char q[16];
        snprintf(q, sizeof(q), "fr%d", i);
        json_decref(OK(c,
                       "{\"op\":\"enqueue\",\"queue\":\"%s\",\"payload\":1,\"max_attempts\":1%s}",
                       q, i == 2 ? ",\"delay_ms\":3600000" : ""));
        if (i == 1 || i == 3) {
            json_t *cl = OK(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"flat\":true}", q);
            json_t *j = json_array_get(json_object_get(cl, "jobs"), 0);
            if (i == 3)
                json_decref(OK(c,
                               "{\"op\":\"fail\",\"queue\":\"%s\",\"job\":\"%s\",\"lease\":\"%s\"}",
                               q, jstr(j, "job"), jstr(j, "lease")));
            json_decref(cl);
        }
        cr_assert_eq(fx_stat(c, q, states[i]), 1);
        struct tc_conn *other = fx_conn();
        fx_await_quiet(&fx_emqd);
        char *before = snapshot(rc, q);
        json_t *r = tc_call(other, "{\"op\":\"forget\",\"queue\":\"%s\"}", q);
        assert_err(r, "ESTATE");
        /* An active job's lease is this daemon's: that refuses first. */
        if (i != 1)
            cr_assert(strstr(jstr(r, "message"), states[i]) != NULL, "%s", jstr(r, "message"));
        json_decref(r);
        char *after = snapshot(rc, q);
        cr_assert_str_eq(before, after, "a refused forget of a %s job changed the store",
                         states[i]);
        free(before);
        free(after);
        cr_assert(in_metrics(q));
        tc_close(other);
    }
    char *before = snapshot(rc, "fr0");
    const char *bad[][2] = {
        {"{\"op\":\"forget\"}", "EARG"},
        {"{\"op\":\"forget\",\"queue\":\"fr0\",\"group\":\"TENa\"}", "EARG"},
        {"{\"op\":\"forget\",\"queue\":\"fr 0\"}", "EQUEUE"},
        {"{\"op\":\"forget\",\"queue\":7}", "EARG"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_err_free(tc_call(c, "%s", bad[i][0]), bad[i][1]);
    char *after = snapshot(rc, "fr0");
    cr_assert_str_eq(before, after);
    free(before);
    free(after);
    redisFree(rc);
    tc_close(c);
}

/* Whether the daemon still has connection id open (asked on c). */
static bool client_open(struct tc_conn *c, long long id)
{
    json_t *r = tc_call(c, "{\"op\":\"clients\",\"id\":%lld}", id);
    bool open = r != NULL && tc_ok(r);
    json_decref(r);
    return open;
}

/* A queue this daemon's connections stream from, are parked on or hold
 * leases of is refused (ESTATE): forgetting it would strand them. Once
 * they are gone, it is forgotten. */
Test(visibility, forget_refuses_a_queue_with_consumers_of_this_daemon)
{
    /* No upkeep pass within the test's deadlines: a push can come only
     * from a wake. */
    fx_teardown();
    const char *const extra[] = {"--upkeep-ms", "3600000", NULL};
    fx_start(extra);
    struct tc_conn *s = fx_conn(), *p = fx_conn(), *a = fx_conn();
    json_decref(OK(s, "{\"op\":\"stream\",\"queue\":\"fc\",\"credit\":5}"));
    assert_err_free(tc_call(a, "{\"op\":\"forget\",\"queue\":\"fc\"}"), "ESTATE");
    json_decref(OK(s, "{\"op\":\"stream\",\"queue\":\"fc\",\"credit\":0}"));
    long long pid = own_id(p);
    cr_assert_eq(tc_send_line(p, "{\"op\":\"claim\",\"queue\":\"fc\",\"wait_ms\":3600000}"), 0);
    fx_await_quiet(&fx_emqd); /* the claim found nothing and parked */
    assert_err_free(tc_call(a, "{\"op\":\"forget\",\"queue\":\"fc\"}"), "ESTATE");
    tc_close(p);
    /* The parked claim ends with its connection. */
    await(!client_open(a, pid), "the parked connection to be gone");
    json_decref(OK(s, "{\"op\":\"enqueue\",\"queue\":\"fc\",\"payload\":1}"));
    json_t *cl = OK(s, "{\"op\":\"claim\",\"queue\":\"fc\",\"flat\":true}");
    json_t *j = json_array_get(json_object_get(cl, "jobs"), 0);
    /* The lease is this daemon's (and the job active at Redis). */
    assert_err_free(tc_call(a, "{\"op\":\"forget\",\"queue\":\"fc\"}"), "ESTATE");
    json_decref(OK(s, "{\"op\":\"complete\",\"queue\":\"fc\",\"job\":\"%s\",\"lease\":\"%s\"}",
                   jstr(j, "job"), jstr(j, "lease")));
    json_decref(cl);
    /* s's stream, stopped with credit 0 and nothing out, waits for
     * nothing: it does not hold the queue. */
    json_decref(OK(a, "{\"op\":\"forget\",\"queue\":\"fc\"}"));
    fx_await_quiet(&fx_emqd);
    cr_assert_not(in_metrics("fc"));

    /* The queue made anew serves a stream as any queue: the wakes of a
     * job enqueued through another daemon reach it (the channel stays
     * subscribed across the forget, and names the queue, not the struct). */
    json_decref(OK(s, "{\"op\":\"stream\",\"queue\":\"fc\",\"credit\":1}"));
    fx_await_quiet(&fx_emqd); /* parked */
    struct emqd_proc d2;
    cr_assert_eq(emqd_start(&d2, fx_redis.port, NULL), 0);
    cr_assert_eq(emqd_await_backend(&d2), 0);
    struct tc_conn *o = tc_connect(d2.port);
    cr_assert_not_null(o);
    json_decref(OK(o, "{\"op\":\"enqueue\",\"queue\":\"fc\",\"group\":\"TENw\",\"payload\":7}"));
    tc_close(o);
    json_t *push = tc_read(s, wait_deadline_ms(0));
    cr_assert_not_null(push, "no push from the queue made anew");
    cr_assert_str_eq(jstr(push, "push"), "job");
    cr_assert_eq(jint(push, "payload"), 7);
    json_decref(push);
    emqd_kill(&d2);
    tc_close(s);
    tc_close(a);
    /* The forgotten queue's struct is freed (under ASan a leak fails). */
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly");
}

/* Pipelined on one connection: forget then enqueue makes the queue anew
 * (the enqueue is ordered after the forget), and queues then lists it;
 * enqueue then forget refuses. */
Test(visibility, forget_pipelined_takes_effect_in_order)
{
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"fp\",\"job\":\"JOBp0\",\"payload\":0}"));
    json_decref(OK(c, "{\"op\":\"remove\",\"queue\":\"fp\",\"job\":\"JOBp0\"}"));
    const char all[] = "{\"op\":\"forget\",\"queue\":\"fp\",\"ref\":1}\n"
                       "{\"op\":\"enqueue\",\"queue\":\"fp\",\"payload\":1,\"ref\":2}\n"
                       "{\"op\":\"queues\",\"count\":1000,\"ref\":3}\n"
                       "{\"op\":\"forget\",\"queue\":\"fp\",\"ref\":4}\n"
                       "{\"op\":\"stats\",\"queue\":\"fp\",\"ref\":5}\n";
    cr_assert_eq(tc_send(c, all, sizeof(all) - 1), 0);
    for (int i = 1; i <= 5; i++) {
        json_t *r = tc_read(c, wait_deadline_ms(0));
        cr_assert_not_null(r);
        cr_assert_eq(jint(r, "ref"), i);
        if (i == 4) {
            assert_err(r, "ESTATE");
        } else {
            assert_ok(r);
        }
        if (i == 3) {
            json_t *row = row_of(r, "fp");
            cr_assert_not_null(row, "the queue made anew is listed");
            cr_assert_eq(jint(row, "pending"), 1);
        }
        if (i == 5)
            cr_assert_eq(jint(r, "pending"), 1);
        json_decref(r);
    }
    redisContext *rc = redis_server_connect(&fx_redis);
    await(registered(rc, "fp") == 1, "the queue made anew to be registered");
    redisFree(rc);
    cr_assert(in_metrics("fp"));
    tc_close(c);
}

/* Two pings answered on p, a connection of its own: the daemon's loop has
 * turned since the lines sent before were read (it serves sockets in the
 * order they became readable), so they have been dispatched. */
static void loop_turned(struct tc_conn *p)
{
    for (int i = 0; i < 2; i++)
        json_decref(OK(p, "{\"op\":\"ping\"}"));
}

/* An enqueue of another connection that names the queue while the forget
 * is at Redis runs after it there, and makes the queue anew: the daemon
 * keeps it registered and in use rather than stranding the job. Redis'
 * writes are held so that both are out at once. */
Test(visibility, forget_racing_an_enqueue_of_another_connection_keeps_the_queue)
{
    /* No upkeep pass to be held with them and blur the count of calls out. */
    fx_teardown();
    const char *const extra[] = {"--upkeep-ms", "3600000", NULL};
    fx_start(extra);
    struct tc_conn *a = fx_conn(), *b = fx_conn(), *p = fx_conn();
    json_decref(OK(a, "{\"op\":\"enqueue\",\"queue\":\"fz\",\"job\":\"JOBz0\",\"payload\":0}"));
    json_decref(OK(a, "{\"op\":\"remove\",\"queue\":\"fz\",\"job\":\"JOBz0\"}"));
    redisContext *rc = redis_server_connect(&fx_redis);
    await(registered(rc, "fz") == 1, "fz to be registered");
    fx_await_quiet(&fx_emqd);
    fx_redis_pause_writes(true); /* a script call is a write: held */
    cr_assert_eq(tc_send_line(a, "{\"op\":\"forget\",\"queue\":\"fz\"}"), 0);
    loop_turned(p);
    cr_assert_eq(tc_send_line(b, "{\"op\":\"enqueue\",\"queue\":\"fz\",\"delay_ms\":3600000,"
                                 "\"payload\":1}"),
                 0);
    loop_turned(p);
    fx_redis_pause_writes(false);
    json_t *r = tc_read(a, wait_deadline_ms(0));
    assert_ok(r);
    json_decref(r);
    r = tc_read(b, wait_deadline_ms(0));
    assert_ok(r);
    json_decref(r);
    fx_await_quiet(&fx_emqd);
    cr_assert_eq(registered(rc, "fz"), 1, "the queue the enqueue made was unregistered");
    cr_assert(in_metrics("fz"), "the queue the enqueue made left the daemon");
    cr_assert_eq(fx_stat(a, "fz", "delayed"), 1);
    redisFree(rc);
    tc_close(a);
    tc_close(b);
    tc_close(p);
}
