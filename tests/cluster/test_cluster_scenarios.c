/* Scenarios of the integration suite that depend on where a queue lives,
 * run with emqd on a real Redis Cluster (issue 13), for a queue on every
 * master: wakes between two daemons (only the wake published through the
 * cluster can bring the job to the stream: neither daemon runs upkeep),
 * a group's ceiling, and reaping. The ops one by one, fairness order,
 * streams and release on disconnect run in the conformance suite on a
 * cluster (tests/conformance/run.py --cluster, in this suite too). */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cluster_fixture.h"
#include "emqd_proc.h"
#include "wait.h"

static struct emqd_proc sc_a, sc_b;

static void sc_teardown(void)
{
    emqd_kill(&sc_a);
    emqd_kill(&sc_b);
    cf_teardown();
}

TestSuite(cluster_scenarios, .init = cf_setup, .fini = sc_teardown, .timeout = 240);

static void sc_start(struct emqd_proc *p, int seed, const char *upkeep_ms)
{
    const char *extra[] = {"--upkeep-ms", upkeep_ms, NULL};
    cf_emqd_start(p, seed, extra);
}

/* Subscribers of queue q's wake channel on node i (PUBSUB SHARDNUMSUB
 * counts that node's own; wakes are sharded pub/sub). */
static long long wake_subscribers_on(int i, const char *q)
{
    if (cf_cluster.node[i].pid <= 0)
        return 0;
    redisContext *c = redis_cluster_connect(&cf_cluster, i);
    cr_assert_not_null(c);
    long long n = redis_wake_subscribers(c, q);
    redisFree(c);
    return n;
}

/* The same on the whole cluster. */
static long long wake_subscribers(const char *q)
{
    long long n = 0;
    for (int i = 0; i < cf_cluster.n; i++)
        n += wake_subscribers_on(i, q);
    return n;
}

/* Exactly `want` subscribers to q's wakes, all on node: where its slot is. */
static bool wake_subscribed_on(int node, const char *q, long long want)
{
    return wake_subscribers_on(node, q) == want && wake_subscribers(q) == want;
}

Test(cluster_scenarios, a_stream_on_one_daemon_gets_jobs_enqueued_through_another)
{
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    /* Seeded on different nodes; no upkeep pass in the test's time. */
    sc_start(&sc_a, 0, "3600000");
    struct tc_conn *a[REDIS_CLUSTER_NODES_MAX];
    for (int m = 0; m < cf_cluster.masters; m++) {
        a[m] = tc_connect(sc_a.port);
        cr_assert_not_null(a[m]);
        json_decref(
            cf_ok(a[m], "{\"op\":\"stream\",\"queue\":\"%s\",\"credit\":5%s}", q[m].name, ""));
        await(wake_subscribed_on(q[m].node, q[m].name, 1),
              "emqd A to listen for %s's wakes on its slot's owner (node %d) only", q[m].name,
              q[m].node);
    }
    await(emqd_quiet(&sc_a), "emqd A to have no backend call out");
    /* B starts once A listens (B subscribes too, to the queues the
     * registry names, so the count would not say A's was there). */
    sc_start(&sc_b, cf_cluster.n - 1, "3600000");
    struct tc_conn *b = tc_connect(sc_b.port);
    cr_assert_not_null(b);
    for (int m = 0; m < cf_cluster.masters; m++) {
        json_decref(cf_ok(b,
                          "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENw\","
                          "\"payload\":\"from-b%s\"}",
                          q[m].name, ""));
        json_t *p = tc_read(a[m], wait_deadline_ms(0));
        cr_assert_not_null(p, "no push on emqd A for a job of %s enqueued through emqd B",
                           q[m].name);
        cr_assert_str_eq(cf_jstr(p, "push"), "job");
        cr_assert_str_eq(cf_jstr(p, "payload"), "from-b");
        json_decref(p);
        tc_close(a[m]);
    }
    tc_close(b);
}

Test(cluster_scenarios, a_ceiling_holds_and_expired_leases_are_reaped_on_every_master)
{
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    sc_start(&sc_a, 0, "100");
    struct tc_conn *c = tc_connect(sc_a.port);
    cr_assert_not_null(c);
    for (int m = 0; m < cf_cluster.masters; m++) {
        const char *name = q[m].name;
        json_decref(cf_ok(c, "{\"op\":\"limit\",\"queue\":\"%s\",\"group\":\"TENc\",\"max\":1%s}",
                          name, ""));
        for (int i = 0; i < 3; i++)
            json_decref(cf_ok(c, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENc\"%s}", name,
                              ",\"payload\":1"));
        /* The ceiling: one active job of the group at a time. */
        json_t *r = cf_ok(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":3%s}", name,
                          ",\"lease_ms\":300");
        json_t *jobs = json_object_get(r, "jobs");
        cr_assert_eq(json_array_size(jobs), 1, "queue %s: the ceiling of 1 let %zu through", name,
                     json_array_size(jobs));
        char first[64];
        snprintf(first, sizeof(first), "%s", cf_jstr(json_array_get(jobs, 0), "job"));
        json_decref(r);
        /* Its lease runs out unsettled: the reaper (on the master that
         * holds the queue) gives it back, and the ceiling lets one of the
         * group's jobs through again. */
        char state[32] = "";
        struct wait w;
        wait_begin(&w, 0);
        while (strcmp(state, "pending") != 0 && wait_again(&w)) {
            r = cf_ok(c, "{\"op\":\"job\",\"queue\":\"%s\",\"job\":\"%s\"}", name, first);
            snprintf(state, sizeof(state), "%s", cf_jstr(json_object_get(r, "job"), "state"));
            json_decref(r);
        }
        cr_assert_str_eq(state, "pending", "queue %s: the expired job %s was never reaped", name,
                         first);
        r = cf_ok(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":3%s}", name,
                  ",\"lease_ms\":60000");
        cr_assert_eq(json_array_size(json_object_get(r, "jobs")), 1,
                     "queue %s: after the reap the ceiling lets exactly one through", name);
        json_decref(r);
    }
    tc_close(c);
}

/* One job enqueued through b must reach the stream on a: with no upkeep
 * in the test's time, only the wake can bring it. */
static void wake_crosses(struct tc_conn *b, struct tc_conn *a, const char *q, const char *payload)
{
    json_decref(cf_ok(b,
                      "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENw\","
                      "\"payload\":\"%s\"}",
                      q, payload));
    json_t *p = tc_read(a, wait_deadline_ms(0));
    cr_assert_not_null(p, "no push on emqd A for %s (%s) enqueued through emqd B", q, payload);
    cr_assert_str_eq(cf_jstr(p, "push"), "job");
    cr_assert_str_eq(cf_jstr(p, "payload"), payload);
    json_decref(p);
}

Test(cluster_scenarios, a_wake_crosses_daemons_after_the_queue_s_slot_moves)
{
    /* The wake channel lives in the queue's slot: once the slot has moved
     * to another master, both daemons subscribe there (the old owner
     * drops its shard channels with the slot), and a wake published by a
     * script on the new owner reaches the stream on the other daemon. */
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    const char *name = q[0].name;
    int from = q[0].node, to = cf_other_master(from);
    int slot = redis_cluster_slot(name, strlen(name));
    sc_start(&sc_a, 0, "3600000");
    struct tc_conn *a = tc_connect(sc_a.port);
    cr_assert_not_null(a);
    json_decref(cf_ok(a, "{\"op\":\"stream\",\"queue\":\"%s\",\"credit\":5}", name));
    await(wake_subscribed_on(from, name, 1), "emqd A to listen on node %d", from);
    sc_start(&sc_b, cf_cluster.n - 1, "3600000");
    struct tc_conn *b = tc_connect(sc_b.port);
    cr_assert_not_null(b);
    await(wake_subscribed_on(from, name, 2), "both daemons to listen on node %d", from);
    wake_crosses(b, a, name, "before-move");

    cf_slot_migrate(slot, from, to);
    cf_slot_assign(slot, to);
    await(wake_subscribed_on(to, name, 2), "both daemons to listen on node %d, the new owner", to);
    wake_crosses(b, a, name, "after-move");
    tc_close(a);
    tc_close(b);
}
