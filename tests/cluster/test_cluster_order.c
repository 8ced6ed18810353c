/* The pool on a real Redis Cluster keeps a route in order while its calls
 * are bounced (docs/ARCHITECTURE.md 7.3, "Why the order of a route
 * survives a bounce"): a call submitted while an earlier one of its route
 * waits out TRYAGAIN is held behind it, and the calls of a route bounced
 * two ways at once (TRYAGAIN and ASK) are resent together, behind the
 * first, and a route stays on the connection its bounced call is held
 * on while the map sends its slot elsewhere. Each test bounces calls
 * Redis would otherwise run at once, so that a call overtaking another
 * shows in what they did. Every test runs
 * its own loop and ends with uv_loop_close() == 0. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cluster_fixture.h"
#include "loop_wait.h"
#include "pool.h"
#include "wait.h"

/* The queue whose slot the tests migrate, and its keys. */
#define TAG     "ho"
#define K_GUARD "emq:{" TAG "}:guard" /* never written, as keys.h's guard */
#define K_LOG   "emq:{" TAG "}:log"
#define K_A     "emq:{" TAG "}:a"
#define K_O     "emq:{" TAG "}:o"
#define K_N     "emq:{" TAG "}:n"

/* One request's outcome. */
struct call {
    int calls;
    int status;
    int type;
    long long integer;
    char str[128];
};

static struct {
    uv_loop_t loop;
    uv_timer_t tick;
    struct pool *pool;
    int closed;
    int from, to, slot; /* the queue's master, another, its slot */
} w;

#define RUN_UNTIL(cond) LOOP_RUN_UNTIL(&w.loop, &w.tick, cond)

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    memset(&w, 0, sizeof(w));
    cf_setup();
    cr_assert_eq(uv_loop_init(&w.loop), 0);
    uv_timer_init(&w.loop, &w.tick);
}

TestSuite(cluster_order, .init = setup, .fini = cf_teardown, .timeout = 120);

static void reply_cb(void *priv, int status, redisReply *reply)
{
    struct call *c = priv;
    c->calls++;
    c->status = status;
    c->type = reply != NULL ? reply->type : -1;
    if (reply != NULL && reply->type == REDIS_REPLY_INTEGER)
        c->integer = reply->integer;
    if (reply != NULL && reply->str != NULL)
        snprintf(c->str, sizeof(c->str), "%.*s", (int)reply->len, reply->str);
}

static struct pool_stats stats(void)
{
    struct pool_stats st;
    pool_stats(w.pool, &st);
    return st;
}

/* A cluster pool on w.loop seeded with node 0 (size connections to each
 * master), once it is up; the queue's slot, its master and another
 * master. */
static void open_pool(int size)
{
    struct pool_seed seed = {.host = "127.0.0.1", .port = cf_cluster.node[0].port};
    struct pool_config cfg = {.size = size,
                              .timeout_ms = (uint64_t)wait_deadline_ms(0),
                              .backoff_min_ms = 20,
                              .backoff_max_ms = 200,
                              .seeds = &seed,
                              .nseeds = 1};
    cr_assert_eq(pool_new(&w.loop, &cfg, &w.pool), 0);
    RUN_UNTIL(pool_up(w.pool));
    cr_assert(pool_up(w.pool), "the pool never came up: %s", pool_last_error(w.pool));
    w.slot = redis_cluster_slot(TAG, strlen(TAG));
    w.from = redis_cluster_node_for_slot(&cf_cluster, w.slot);
    w.to = cf_other_master(w.from);
}

static void done_cb(void *priv)
{
    (void)priv;
    w.closed++;
}

static void finish(void)
{
    pool_close(w.pool, done_cb, NULL);
    RUN_UNTIL(w.closed == 1);
    cr_assert_eq(w.closed, 1);
    uv_close((uv_handle_t *)&w.tick, NULL);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&w.loop), 0, "the pool left a handle open");
}

/* A blocking command on node i that must not fail. */
static void node_cmd(int i, const char *fmt, ...)
{
    redisContext *c = redis_cluster_connect(&cf_cluster, i);
    cr_assert_not_null(c);
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert(r != NULL && r->type != REDIS_REPLY_ERROR, "%s on node %d: %s", fmt, i,
              r != NULL && r->str != NULL ? r->str : "no reply");
    freeReplyObject(r);
    redisFree(c);
}

/* The first half of a move: the slot MIGRATING on from, IMPORTING on to;
 * no key moved yet. */
static void migration_open(void)
{
    char from_id[48], to_id[48];
    cr_assert_eq(redis_cluster_node_id(&cf_cluster, w.from, from_id), 0);
    cr_assert_eq(redis_cluster_node_id(&cf_cluster, w.to, to_id), 0);
    node_cmd(w.to, "CLUSTER SETSLOT %d IMPORTING %s", w.slot, from_id);
    node_cmd(w.from, "CLUSTER SETSLOT %d MIGRATING %s", w.slot, to_id);
}

/* A plain command on the route (argc strings). */
static void submit(struct pool_route *rt, struct call *c, int argc, const char **argv)
{
    cr_assert_eq(pool_command(w.pool, rt, argc, argv, NULL, reply_cb, c), 0);
}

Test(cluster_order, a_call_submitted_while_its_route_waits_out_tryagain_runs_after_it)
{
    /* r1, a script declaring the log and the guard, answers TRYAGAIN
     * while the slot migrates (the log is there, the guard never is) and
     * is retried; r2, a plain RPUSH of the log, submitted on the route
     * meanwhile, would run at once on the old owner (its one key is
     * there). Held behind r1, it runs after r1 once the migration is
     * called off. */
    open_pool(2);
    node_cmd(w.from, "RPUSH %s 0", K_LOG);
    migration_open();
    struct pool_route rt;
    pool_route_init(&rt, TAG, strlen(TAG));
    struct call r1 = {0}, r2 = {0};
    const char *a1[] = {"EVAL", "return redis.call('RPUSH', KEYS[1], ARGV[1])", "2", K_LOG, K_GUARD,
                        "1"};
    submit(&rt, &r1, 6, a1);
    RUN_UNTIL(stats().tryagain >= 1);
    cr_assert_geq(stats().tryagain, 1, "r1 was never bounced: %s", r1.str);
    const char *a2[] = {"RPUSH", K_LOG, "2"};
    submit(&rt, &r2, 3, a2);
    /* r1 is resent, and bounced, twice more while r2 waits behind it. */
    uint64_t at = stats().tryagain;
    RUN_UNTIL(stats().tryagain >= at + 2);
    cr_assert_geq(stats().tryagain, at + 2);
    cr_assert_eq(r1.calls, 0);

    node_cmd(w.to, "CLUSTER SETSLOT %d STABLE", w.slot);
    node_cmd(w.from, "CLUSTER SETSLOT %d STABLE", w.slot);
    RUN_UNTIL(r1.calls == 1 && r2.calls == 1);
    cr_assert(r1.calls == 1 && r1.status == 0 && r1.type == REDIS_REPLY_INTEGER, "r1: %s", r1.str);
    cr_assert(r2.calls == 1 && r2.status == 0 && r2.type == REDIS_REPLY_INTEGER, "r2: %s", r2.str);
    cr_assert_eq(r1.integer, 2, "r1 ran second (%lld): r2 overtook it", r1.integer);
    cr_assert_eq(r2.integer, 3);
    cr_assert_eq(rt.inflight, 0);
    finish();
}

Test(cluster_order, calls_of_a_route_bounced_two_ways_are_resent_together)
{
    /* a stays on the old owner, o and n have gone ahead to the new one
     * (as a batch of redis-cli's leaves them). r1 declares a and the
     * guard: TRYAGAIN, the old owner again. r2, written right after it,
     * declares o and n: ASK, and on the new owner (importing, both keys
     * there) it would run. Both increment n. Resent each to its own node,
     * r2 would run while r1 waits; resent together behind r1, r2 is
     * bounced (ASK) until r1 has run, once the slot is assigned. */
    open_pool(2);
    node_cmd(w.from, "SET %s 1", K_A);
    node_cmd(w.from, "SET %s 1", K_O);
    node_cmd(w.from, "SET %s 0", K_N);
    migration_open();
    char port[16];
    snprintf(port, sizeof(port), "%d", cf_cluster.node[w.to].port);
    node_cmd(w.from, "MIGRATE 127.0.0.1 %s %s 0 10000 KEYS %s %s", port, "", K_O, K_N);
    struct pool_route rt;
    pool_route_init(&rt, TAG, strlen(TAG));
    struct call r1 = {0}, r2 = {0};
    const char *a1[] = {"EVAL", "return redis.call('INCR', ARGV[1])", "2", K_A, K_GUARD, K_N};
    const char *a2[] = {"EVAL", "return redis.call('INCR', KEYS[2])", "2", K_O, K_N};
    submit(&rt, &r1, 6, a1);
    submit(&rt, &r2, 5, a2);
    RUN_UNTIL(stats().tryagain >= 1 && stats().asked >= 1);
    cr_assert(stats().tryagain >= 1 && stats().asked >= 1, "r1 TRYAGAIN (%s), r2 ASK (%s)", r1.str,
              r2.str);
    /* Resent, and bounced, a few times more. */
    uint64_t at = stats().tryagain;
    RUN_UNTIL(stats().tryagain >= at + 3);
    cr_assert_geq(stats().tryagain, at + 3);

    node_cmd(w.from, "MIGRATE 127.0.0.1 %s %s 0 10000 KEYS %s", port, "", K_A);
    cf_slot_assign(w.slot, w.to);
    RUN_UNTIL(r1.calls == 1 && r2.calls == 1);
    cr_assert(r1.calls == 1 && r1.status == 0 && r1.type == REDIS_REPLY_INTEGER, "r1: %s", r1.str);
    cr_assert(r2.calls == 1 && r2.status == 0 && r2.type == REDIS_REPLY_INTEGER, "r2: %s", r2.str);
    cr_assert_eq(r1.integer, 1, "r1 ran second (%lld): r2 overtook it", r1.integer);
    cr_assert_eq(r2.integer, 2);
    cr_assert_eq(rt.inflight, 0);
    finish();
}

/* A hash tag ("<prefix><k>") whose slot is served by master node. */
static void tag_on(int node, const char *prefix, char *out, size_t cap)
{
    for (int k = 0; k < 10000; k++) {
        snprintf(out, cap, "%s%d", prefix, k);
        if (redis_cluster_node_for_slot(&cf_cluster, redis_cluster_slot(out, strlen(out))) == node)
            return;
    }
    cr_assert_fail("no tag on node %d", node);
}

Test(cluster_order, a_route_stays_behind_its_bounced_call_when_the_map_moves_its_slot)
{
    /* The queue's slot has moved to another master behind the pool's
     * back. r1 is answered MOVED (the map now says the new owner) while a
     * call of another route written after it on the same connection
     * blocks (BLPOP), so the connection is held with r1 waiting. r2, of
     * r1's route, submitted now must wait there too rather than go to the
     * new owner at once; a probe written to the new owner after r2 shows
     * whether r2 went ahead. */
    open_pool(1);
    node_cmd(w.from, "SET %s 0", K_N);
    cf_slot_migrate(w.slot, w.from, w.to);
    cf_slot_assign(w.slot, w.to);
    char tag_b[16], tag_d[16], key_b[40], key_d[40];
    tag_on(w.from, "hb", tag_b, sizeof(tag_b));
    tag_on(w.to, "hd", tag_d, sizeof(tag_d));
    snprintf(key_b, sizeof(key_b), "{%s}block", tag_b);
    snprintf(key_d, sizeof(key_d), "{%s}probe", tag_d);
    struct pool_route rt, rb, rd;
    pool_route_init(&rt, TAG, strlen(TAG));
    pool_route_init(&rb, tag_b, strlen(tag_b));
    pool_route_init(&rd, tag_d, strlen(tag_d));
    struct call r1 = {0}, r2 = {0}, block = {0}, probe = {0};
    const char *incr[] = {"EVAL", "return redis.call('INCR', KEYS[1])", "1", K_N};
    const char *blpop[] = {"BLPOP", key_b, "0"};
    const char *get[] = {"GET", key_d};
    submit(&rt, &r1, 4, incr);
    submit(&rb, &block, 3, blpop);
    RUN_UNTIL(stats().moved >= 1);
    cr_assert_geq(stats().moved, 1, "r1 was not answered MOVED: %s", r1.str);

    submit(&rt, &r2, 4, incr);
    submit(&rd, &probe, 2, get);
    RUN_UNTIL(probe.calls == 1);
    cr_assert_eq(probe.calls, 1, "the probe on the new owner: %s", probe.str);
    node_cmd(w.from, "LPUSH %s go", key_b);
    RUN_UNTIL(r1.calls == 1 && r2.calls == 1 && block.calls == 1);
    cr_assert(block.calls == 1 && block.status == 0, "BLPOP: %s", block.str);
    cr_assert(r1.calls == 1 && r1.status == 0 && r1.type == REDIS_REPLY_INTEGER, "r1: %s", r1.str);
    cr_assert(r2.calls == 1 && r2.status == 0 && r2.type == REDIS_REPLY_INTEGER, "r2: %s", r2.str);
    cr_assert_eq(r1.integer, 1, "r1 ran second (%lld): r2 overtook it", r1.integer);
    cr_assert_eq(r2.integer, 2);
    finish();
}
