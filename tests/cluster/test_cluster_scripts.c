/* The lane scripts on a real Redis Cluster (issue 13): 3 masters and 3
 * replicas (tests/support/redis_cluster.h), where Redis itself refuses a
 * script that touches a key outside its slot. Every embedded script runs
 * (recipes.h), for queues on each master, on that queue's slot owner,
 * both as emqd sends it and strict (lanes.h: LANES_STRICT), and must give
 * its usual answer; a script with no recipe fails the test. A deliberate
 * stray is refused, so the harness would see one. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cluster_fixture.h"
#include "recipes.h"
#include "wait.h"

#define QUEUES_PER_MASTER 2

TestSuite(cluster, .init = cf_setup, .fini = cf_teardown, .timeout = 120);

/* Nothing left behind in the queue's indexes, and its invariants hold. */
static void expect_empty(const char *after)
{
    static const enum key_id idx[] = {KEY_PENDING, KEY_ACTIVE, KEY_DELAYED, KEY_DEAD};
    cr_assert_eq(cf_key_int("LLEN", fx_q.names[KEY_RING]), 0, "the ring after %s", after);
    for (size_t i = 0; i < sizeof(idx) / sizeof(idx[0]); i++)
        cr_assert_eq(cf_key_int("ZCARD", fx_q.names[idx[i]]), 0, "%s after %s", keys_suffix[idx[i]],
                     after);
    fx_assert_invariants(&fx_q);
}

/* Every recipe on queue p, on its slot owner, sent as mode says. */
static void run_recipes(const struct cf_queue *p, enum lanes_mode mode)
{
    unsigned long before[SCRIPT__COUNT];
    lanes_set_mode(mode);
    cf_use(p);
    for (int id = 0; id < SCRIPT__COUNT; id++)
        before[id] = lanes_calls(id);
    for (int id = 0; id < SCRIPT__COUNT; id++) {
        cluster_recipes[id]();
        expect_empty(script_table[id].name);
    }
    for (int id = 0; id < SCRIPT__COUNT; id++)
        cr_assert_gt(lanes_calls(id), before[id], "%s never ran", script_table[id].name);
}

Test(cluster, every_script_keeps_to_its_queue_slot_on_every_master)
{
    for (int id = 0; id < SCRIPT__COUNT; id++)
        cr_assert_not_null(cluster_recipes[id], "script %s has no cluster recipe",
                           script_table[id].name);
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX * QUEUES_PER_MASTER];
    cf_place_queues(q, QUEUES_PER_MASTER);
    for (int m = 0; m < cf_cluster.masters; m++) {
        run_recipes(&q[m * QUEUES_PER_MASTER], LANES_SHIPPED);
        run_recipes(&q[m * QUEUES_PER_MASTER + 1], LANES_STRICT);
    }
}

/* --- what proves the harness, and the wake ----------------------------- */

/* Run script id on fx_conn with the standard ten KEYS of fx_q but ARGV[1],
 * the prefix every per-job and per-lane key is built from, of queue other:
 * a script that strays out of its slot. Asserts that it is refused. */
static void expect_refused(enum script_id id, const char *other, const char *why, ...)
{
    struct keys mixed = fx_q, o;
    cr_assert_eq(keys_init(&o, other, strlen(other)), 0);
    memcpy(mixed.prefix, o.prefix, o.prefix_len + 1);
    mixed.prefix_len = o.prefix_len;
    va_list ap;
    va_start(ap, why);
    redisReply *r = lanes_vcall(fx_conn, &mixed, id, ap);
    va_end(ap);
    cr_assert(cf_refused(r), "%s (%s) was not refused: %s", script_table[id].name, why,
              r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "it ran");
    freeReplyObject(r);
}

Test(cluster, a_call_that_leaves_its_slot_is_refused)
{
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX * 2];
    cf_place_queues(q, 2);
    const struct cf_queue *a = &q[0], *near = &q[1], *far = &q[2];
    cr_assert_neq(redis_cluster_slot(a->name, strlen(a->name)),
                  redis_cluster_slot(near->name, strlen(near->name)));
    cf_use(a);

    /* Keys of two slots declared in one call: refused before it runs. */
    struct keys kn;
    cr_assert_eq(keys_init(&kn, near->name, strlen(near->name)), 0);
    const char *eval[] = {"EVAL", "return 1", "2", fx_q.names[KEY_RING], kn.names[KEY_RING]};
    redisReply *r = redisCommandArgv(fx_conn, 5, eval, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "CROSSSLOT", 9) == 0,
              "two declared slots: %s", r && r->str ? r->str : "it ran");
    freeReplyObject(r);

    /* Undeclared keys of another master's slot: refused, as shipped. */
    lanes_set_mode(LANES_SHIPPED);
    expect_refused(SCRIPT_ENQUEUE, far->name, "row on another master", "JOBx1", "", "{}", "0", "0",
                   NULL);
    /* Of another slot on the same master: refused for a script with a
     * shebang (pause.lua: allow-oom) as shipped, and for one without
     * (enqueue.lua) only strict; as shipped Redis would let it through. */
    expect_refused(SCRIPT_PAUSE, near->name, "lane in another slot", "TENx", NULL);
    lanes_set_mode(LANES_STRICT);
    expect_refused(SCRIPT_ENQUEUE, near->name, "row in another slot", "JOBx1", "", "{}", "0", "0",
                   NULL);
}

Test(cluster, a_wake_is_published_on_its_queue_s_shard)
{
    /* lib.lua's wake() SPUBLISHes on the queue's wake key, which carries
     * the queue's hash tag: Redis delivers it to the subscribers on the
     * slot's owner (the bus takes it to that shard's replicas only, not
     * to every node), and any other master refuses the channel. */
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    cf_use(&q[0]);
    int ms = wait_deadline_ms(0);
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    redisContext *owner = redis_cluster_connect(&cf_cluster, q[0].node);
    redisContext *other = redis_cluster_connect(&cf_cluster, q[1].node);
    cr_assert(owner != NULL && other != NULL && q[1].node != q[0].node);
    cr_assert_eq(redisSetTimeout(owner, tv), REDIS_OK);
    redisReply *r = redisCommand(owner, "SSUBSCRIBE %s", fx_q.names[KEY_WAKE]);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3, "SSUBSCRIBE failed");
    cr_assert_str_eq(r->element[0]->str, "ssubscribe");
    freeReplyObject(r);
    r = redisCommand(other, "SSUBSCRIBE %s", fx_q.names[KEY_WAKE]);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED ", 6) == 0,
              "another master took the channel: %s", r != NULL && r->str ? r->str : "?");
    freeReplyObject(r);
    redisFree(other);

    cr_assert_eq(fx_enqueue("JOBwk1", NULL, "{}"), 1); /* the flat set was empty: a wake */
    r = NULL;
    cr_assert_eq(redisGetReply(owner, (void **)&r), REDIS_OK,
                 "the owner's subscriber heard no wake");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    cr_assert_str_eq(r->element[0]->str, "smessage");
    cr_assert_str_eq(r->element[1]->str, fx_q.names[KEY_WAKE]);
    cr_assert_str_eq(r->element[2]->str, fx_q.prefix);
    freeReplyObject(r);
    redisFree(owner);
    cf_settle();
}
