/* Integration: the check op (PROTOCOL.md 5.23) runs in bounded steps, so a
 * check of a big queue never holds Redis for long: it makes many script
 * calls, other clients are served between them, and still it answers with
 * every violation, wherever in the walk it lies; the lines after it on its
 * connection take effect after all of it; under traffic it reports
 * nothing that does not hold.
 *
 * Queues are filled straight at Redis, with the enqueue script pipelined
 * on a connection of the test's own: fast, and the daemon only ever reads
 * them, so it runs no upkeep for them (and the upkeep of the queues it
 * does use is an hour away), and every script call Redis counts is the
 * test's doing. (other_clients_are_served_between_its_calls enqueues one
 * job through the daemon, and says what that adds.) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "admin.h"
#include "fixture.h"
#include "lanes.h"

static void check_setup(void)
{
    /* Writes paused at Redis hold calls for as long as a test needs. */
    const char *const extra[] = {"--upkeep-ms",        "3600000", "--lease-ms", "3600000",
                                 "--redis-timeout-ms", "600000",  NULL};
    fx_start(extra);
}

TestSuite(check, .init = check_setup, .fini = fx_teardown, .timeout = 240);

/* Run a Redis command on a connection of its own (the hand that corrupts
 * a store). */
#define REDIS(...)                                                                                 \
    do {                                                                                           \
        redisContext *rc_ = redis_server_connect(&fx_redis);                                       \
        cr_assert_not_null(rc_);                                                                   \
        redisReply *rr_ = redisCommand(rc_, __VA_ARGS__);                                          \
        cr_assert(rr_ != NULL && rr_->type != REDIS_REPLY_ERROR, "redis refused: %s",              \
                  rr_ ? rr_->str : rc_->errstr);                                                   \
        freeReplyObject(rr_);                                                                      \
        redisFree(rc_);                                                                            \
    } while (0)

/* The id of job i of group g of a fill ("JOB<g>-<i>"), and of a flat one. */
static void job_id(char *out, size_t cap, const char *g, int i)
{
    snprintf(out, cap, "JOB%s-%05d", g, i);
}

/* Enqueue jobs 0..n-1 of group g ("" = flat, ids "JOBflat-<i>") in
 * queue, pipelined at Redis. */
static void fill(const char *queue, const char *g, int n)
{
    struct keys k;
    cr_assert_eq(keys_init(&k, queue, strlen(queue)), 0);
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    const struct script *s = &script_table[SCRIPT_ENQUEUE];
    redisReply *r;
    cr_assert(lanes_load(rc), "the library did not load");
    char id[80];
    for (int i = 0; i < n; i++) {
        job_id(id, sizeof(id), g[0] ? g : "flat", i);
        const char *argv[3 + KEY__COUNT + 6];
        size_t lens[3 + KEY__COUNT + 6];
        int a = 0;
        argv[a] = "FCALL", lens[a++] = 5;
        argv[a] = s->function, lens[a++] = s->function_len;
        argv[a] = "10", lens[a++] = 2;
        for (int key = 0; key < KEY__COUNT; key++)
            argv[a] = k.names[key], lens[a++] = k.lens[key];
        const char *args[] = {k.prefix, id, g, "{}", "0", "0"};
        for (size_t j = 0; j < sizeof(args) / sizeof(*args); j++)
            argv[a] = args[j], lens[a++] = strlen(args[j]);
        cr_assert_eq(redisAppendCommandArgv(rc, a, argv, lens), REDIS_OK);
    }
    for (int i = 0; i < n; i++) {
        cr_assert_eq(redisGetReply(rc, (void **)&r), REDIS_OK);
        cr_assert(r->type == REDIS_REPLY_INTEGER && r->integer == 1, "enqueue %d refused", i);
        freeReplyObject(r);
    }
    redisFree(rc);
}

/* Groups "TENg<k>" for k in [0, groups), each with per jobs. */
static void group_name(char *out, size_t cap, int k)
{
    snprintf(out, cap, "TENg%04d", k);
}

static void fill_groups(const char *queue, int groups, int per)
{
    char g[32];
    for (int k = 0; k < groups; k++) {
        group_name(g, sizeof(g), k);
        fill(queue, g, per);
    }
}

/* The check's reply on c (asserted ok), as a new reference. */
static json_t *check(struct tc_conn *c, const char *queue)
{
    json_t *r = tc_call(c, "{\"op\":\"check\",\"queue\":\"%s\"}", queue);
    assert_ok(r);
    json_t *v = json_incref(json_object_get(r, "violations"));
    cr_assert(json_is_array(v));
    json_decref(r);
    return v;
}

static bool has(const json_t *v, const char *sentence)
{
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s) if (strcmp(json_string_value(s), sentence) == 0) return true;
    return false;
}

static bool mentions(const json_t *v, const char *needle)
{
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s) if (strstr(json_string_value(s), needle) != NULL) return true;
    return false;
}

static void assert_clean(const json_t *v)
{
    char *d = json_dumps(v, JSON_COMPACT);
    cr_assert_eq(json_array_size(v), 0, "violations: %.2000s", d);
    free(d);
}

#define ROWS 20000

Test(check, a_big_queue_is_checked_in_many_bounded_calls)
{
    struct tc_conn *c = fx_conn();
    fill_groups("big", 100, ROWS / 100 - 10);
    fill("big", "", 1000);
    long long calls0 = fx_redis_calls("fcall");
    json_t *v = check(c, "big");
    long long calls = fx_redis_calls("fcall") - calls0;
    assert_clean(v);
    json_decref(v);
    /* Each call examines at most STORE_CHECK_BUDGET items: the rows alone
     * take that many calls (and the members of the structures as many
     * again). */
    cr_assert_geq(calls, ROWS / STORE_CHECK_BUDGET, "the check of %d rows made %lld script calls",
                  ROWS, calls);
    tc_close(c);
}

/* True once the daemon has read, and sent on, every line its clients
 * sent before this call: it serves sockets in the order they became
 * readable, and writes what a turn made once per turn, so two pings
 * answered on a connection of their own mean it has turned since. */
static void daemon_turned(struct tc_conn *p)
{
    for (int i = 0; i < 2; i++) {
        json_t *r = tc_call(p, "{\"op\":\"ping\"}");
        assert_ok(r);
        json_decref(r);
    }
}

/* A depth sent while the check is under way is answered before the check
 * ends. Writes paused at Redis hold an enqueue of the same queue on the
 * queue's backend connection (a queue's calls go on one connection while
 * any is out); the check's first call goes behind it (a check only reads,
 * so a pause of writes alone would not hold it), and the depth from
 * another connection behind that. Let go, Redis runs the three in that
 * order, and the check's next call is sent only once its first has
 * answered: after the depth. (The enqueue makes "big" a queue the daemon
 * uses; its upkeep's first pass is held with it and ends with it.) */
Test(check, other_clients_are_served_between_its_calls)
{
    fill_groups("big", 10, ROWS / 10);
    struct tc_conn *a = fx_conn(), *b = fx_conn(), *c = fx_conn(), *p = fx_conn();
    fx_redis_pause_writes(true);
    cr_assert_eq(tc_send_line(c, "{\"op\":\"enqueue\",\"queue\":\"big\",\"group\":"
                                 "\"TENhold\",\"payload\":1}"),
                 0);
    daemon_turned(p);
    cr_assert_eq(tc_send_line(a, "{\"op\":\"check\",\"queue\":\"big\"}"), 0);
    daemon_turned(p);
    cr_assert_eq(tc_send_line(b, "{\"op\":\"depth\",\"queue\":\"big\",\"group\":\"TENg0003\"}"), 0);
    daemon_turned(p);
    /* Nothing of the three can have been answered (only a depth sent on
     * another connection could be: a read is not held by the pause). */
    cr_assert_null(tc_read(b, 0), "the depth did not wait behind the check's first call");
    long long calls0 = fx_redis_calls("fcall");
    fx_redis_pause_writes(false);
    json_t *r = tc_read(c, wait_deadline_ms(0));
    assert_ok(r);
    json_decref(r);
    r = tc_read(b, wait_deadline_ms(0));
    assert_ok(r);
    cr_assert_eq(jint(r, "depth"), ROWS / 10);
    json_decref(r);
    long long at_depth = fx_redis_calls("fcall");
    r = tc_read(a, wait_deadline_ms(0));
    assert_ok(r);
    assert_clean(json_object_get(r, "violations"));
    json_decref(r);
    long long at_end = fx_redis_calls("fcall");
    cr_assert_lt(at_depth, at_end,
                 "the check made no call after the depth was answered (%lld calls in all)",
                 at_end - calls0);
    tc_close(a);
    tc_close(b);
    tc_close(c);
    tc_close(p);
}

/* The lane of group k's jobs that a test corrupts; its jobs are
 * "JOBTENg<k>-<i>". */
static void jid(char *out, size_t cap, int k, int i)
{
    char g[32];
    group_name(g, sizeof(g), k);
    job_id(out, cap, g, i);
}

/* Assert that v holds the sentence before, job i of group k, after. */
static void says(const json_t *v, const char *before, int k, int i, const char *after)
{
    char id[80], s[256];
    jid(id, sizeof(id), k, i);
    snprintf(s, sizeof(s), "%s%s%s", before, id, after);
    cr_assert(has(v, s), "missing: %s", s);
}

/* 300 groups of 4 jobs and 500 flat ones: rows over many SCAN pages, the
 * ring over three pages, the flat set over five. Each corruption lies
 * past the first page of what finds it. */
Test(check, violations_anywhere_in_the_walk_are_reported)
{
    struct tc_conn *c = fx_conn();
    fill_groups("v", 300, 4);
    fill("v", "", 500);
    json_t *v = check(c, "v");
    assert_clean(v);
    json_decref(v);

    char id[80];
    const char *p = "emq:{v}:";
    jid(id, sizeof(id), 250, 2); /* a row in the wrong state */
    REDIS("HSET %sjob:%s state delayed", p, id);
    jid(id, sizeof(id), 200, 1); /* in two structures */
    REDIS("ZADD %sdelayed 5 %s", p, id);
    REDIS("RPUSH %sring TENg0001", p);  /* the head's lane again, at the tail */
    REDIS("LREM %sring 0 TENg0280", p); /* serviceable, off the ring */
    jid(id, sizeof(id), 150, 1);        /* a lease index holding a pending job */
    REDIS("ZADD %sg:TENg0150:active 1 %s", p, id);
    jid(id, sizeof(id), 120, 0);
    REDIS("HSET %sjob:%s state bogus", p, id);
    jid(id, sizeof(id), 270, 3); /* lost: in no structure */
    REDIS("ZREM %sg:TENg0270:pending %s", p, id);
    jid(id, sizeof(id), 290, 0); /* a member without a row */
    REDIS("DEL %sjob:%s", p, id);
    REDIS("HSET %sjob:JOBflat-00400 state dead", p); /* the flat set's 5th page */
    REDIS("SREM %sgroups TENg0299", p);              /* pending, unregistered */

    v = check(c, "v");
    says(v, "lane TENg0250: ", 250, 2, " is delayed, expected pending");
    says(v, "", 200, 1, " is in both delayed and lane TENg0200");
    cr_assert(has(v, "ring: TENg0001 is on the ring more than once"));
    cr_assert(has(v, "ring: TENg0280 is serviceable but off the ring"));
    says(v, "gactive: TENg0150 holds ", 150, 1, ", which is pending, not active");
    says(v, "row ", 120, 0, " has unknown state \"bogus\"");
    says(v, "row ", 270, 3, " is pending but in no structure (lost)");
    says(v, "lane TENg0290: ", 290, 0, " has no job row (lost)");
    cr_assert(has(v, "pending: JOBflat-00400 is dead, expected pending"));
    cr_assert(has(v, "groups: TENg0299 has pending jobs but is not registered"));
    /* Nothing else: each is reported once, and no lane but the two is
     * said to be off the ring or on it twice. */
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        const char *t = json_string_value(e);
        for (size_t k = 0; k < i; k++)
            cr_assert_str_neq(t, json_string_value(json_array_get(v, k)), "said twice");
        if (strstr(t, "off the ring") || strstr(t, "more than once"))
            cr_assert(strstr(t, "TENg0280") || strstr(t, "TENg0001"), "%s", t);
    }
    json_decref(v);
    tc_close(c);
}

/* An active job left out of its group's lease index is found from its
 * row; the lease index itself from its members. */
Test(check, a_lease_index_that_misses_an_active_job_is_reported)
{
    struct tc_conn *c = fx_conn();
    fill_groups("l", 3, 200);
    json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"l\",\"count\":3}");
    assert_ok(r);
    json_t *jobs = json_object_get(r, "jobs");
    cr_assert_eq(json_array_size(jobs), 3);
    const char *id = jstr(json_array_get(jobs, 1), "job"),
               *g = jstr(json_array_get(jobs, 1), "group");
    REDIS("ZREM emq:{l}:g:%s:active %s", g, id);
    json_t *v = check(c, "l");
    char s[256];
    snprintf(s, sizeof(s), "gactive: %s does not hold %s, one of its active jobs", g, id);
    cr_assert(has(v, s), "missing: %s", s);
    json_decref(v);
    json_decref(r);
    tc_close(c);
}

Test(check, a_store_broken_everywhere_is_reported_up_to_a_bound)
{
    struct tc_conn *c = fx_conn();
    fill("x", "", 1500);
    REDIS("EVAL %s 0", "for _, k in ipairs(redis.call('KEYS', 'emq:{x}:job:*')) do "
                       "redis.call('HSET', k, 'state', 'bogus') end");
    json_t *v = check(c, "x");
    cr_assert_eq(json_array_size(v), STORE_CHECK_MAX + 1);
    cr_assert(mentions(v, "has unknown state \"bogus\""));
    cr_assert_str_eq(json_string_value(json_array_get(v, STORE_CHECK_MAX)),
                     "and more: the check stopped after 1000 violations");
    json_decref(v);
    tc_close(c);
}

/* A check is a barrier: an enqueue pipelined behind it takes effect after
 * all of its calls, and a check behind the enqueue sees it. The enqueue
 * makes lane TENz<i>, on the ring with nothing pending (not serviceable),
 * non-empty: so it is pushed again (on the ring twice). The first check
 * must see the ring as it was through all of its walk (the ring is walked
 * after the rows, many calls in). */
Test(check, a_check_takes_effect_before_the_lines_after_it)
{
    struct tc_conn *c = fx_conn();
    fill_groups("o", 10, 300);
    for (int i = 0; i < 10; i++) {
        REDIS("RPUSH emq:{o}:ring TENz%d", i);
        char lines[512], s[2][128];
        snprintf(lines, sizeof(lines),
                 "{\"op\":\"check\",\"queue\":\"o\"}\n"
                 "{\"op\":\"enqueue\",\"queue\":\"o\",\"group\":\"TENz%d\",\"payload\":1}\n"
                 "{\"op\":\"check\",\"queue\":\"o\"}\n",
                 i);
        snprintf(s[0], sizeof(s[0]), "ring: TENz%d is on the ring but not serviceable", i);
        snprintf(s[1], sizeof(s[1]), "ring: TENz%d is on the ring more than once", i);
        cr_assert_eq(tc_send(c, lines, strlen(lines)), 0);
        json_t *r[3];
        for (int k = 0; k < 3; k++) {
            r[k] = tc_read(c, wait_deadline_ms(0));
            assert_ok(r[k]);
        }
        json_t *before = json_object_get(r[0], "violations"),
               *after = json_object_get(r[2], "violations");
        cr_assert(has(before, s[0]) && !has(before, s[1]), "round %d: the check saw the enqueue",
                  i);
        cr_assert(has(after, s[1]) && !has(after, s[0]), "round %d: the check missed the enqueue",
                  i);
        for (int k = 0; k < 3; k++)
            json_decref(r[k]);
    }
    tc_close(c);
}

/* Workers claim and complete while checks run: the ring rotates under
 * the walk (every claim moves its head to its tail), lanes at their
 * ceiling leave it and come back, lanes that empty leave it. No check may
 * report anything: each violation is seen within one atomic call, and the
 * store is sound. */
struct worker {
    pthread_t thread;
    int port;
    atomic_bool stop;
    atomic_int completed, errors;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    struct tc_conn *c = tc_connect(w->port);
    while (c != NULL && !atomic_load(&w->stop)) {
        json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"t\",\"count\":4}");
        if (r == NULL || !tc_ok(r)) {
            atomic_fetch_add(&w->errors, 1);
            json_decref(r);
            break;
        }
        size_t i;
        json_t *j;
        json_array_foreach(json_object_get(r, "jobs"), i, j)
        {
            json_t *d =
                tc_call(c, "{\"op\":\"complete\",\"queue\":\"t\",\"job\":\"%s\",\"lease\":\"%s\"}",
                        jstr(j, "job"), jstr(j, "lease"));
            atomic_fetch_add(d != NULL && tc_ok(d) ? &w->completed : &w->errors, 1);
            json_decref(d);
        }
        if (json_array_size(json_object_get(r, "jobs")) == 0)
            atomic_store(&w->stop, true); /* drained */
        json_decref(r);
    }
    tc_close(c);
    return NULL;
}

Test(check, a_check_under_traffic_reports_nothing_that_does_not_hold)
{
    struct tc_conn *c = fx_conn();
    char g[32];
    fill_groups("t", 300, 30);
    for (int k = 0; k < 300; k += 3) {
        group_name(g, sizeof(g), k);
        json_decref(tc_call(c, "{\"op\":\"limit\",\"queue\":\"t\",\"group\":\"%s\",\"max\":1}", g));
    }
    struct worker w[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (struct worker){.port = fx_emqd.port};
        cr_assert_eq(pthread_create(&w[i].thread, NULL, work, &w[i]), 0);
    }
    int checks = 0;
    while (checks < 3 || (!atomic_load(&w[0].stop) && !atomic_load(&w[1].stop))) {
        json_t *v = check(c, "t");
        assert_clean(v);
        json_decref(v);
        checks++;
    }
    for (int i = 0; i < 2; i++) {
        atomic_store(&w[i].stop, true);
        pthread_join(w[i].thread, NULL);
        cr_assert_eq(atomic_load(&w[i].errors), 0);
    }
    int completed = atomic_load(&w[0].completed) + atomic_load(&w[1].completed);
    cr_assert_gt(completed, 0);
    cr_log_info("%d checks while the workers completed %d jobs", checks, completed);
    json_t *v = check(c, "t");
    assert_clean(v);
    json_decref(v);
    tc_close(c);
}
