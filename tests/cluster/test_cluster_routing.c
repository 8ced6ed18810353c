/* What serves what on a real Redis Cluster (issue 13): the queue
 * registry, a plain key outside every queue's slot, is served by its own
 * slot owner, which the daemon's slot function finds as Redis does; and a
 * master's slots move to its replica when it dies (the fixture's failover
 * helpers, for the failover tests to come). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "cluster_fixture.h"
#include "wait.h"

TestSuite(cluster, .init = cf_setup, .fini = cf_teardown, .timeout = 120);

static long long keyslot(redisContext *c, const char *key)
{
    return redis_int(c, "CLUSTER KEYSLOT %s", key);
}

Test(cluster, the_queue_registry_is_served_by_its_own_slot_owner)
{
    /* The daemon's slot function agrees with Redis, for a queue's keys
     * (their hash tag) and for the registry (a plain key: its own slot). */
    redisContext *c = redis_cluster_connect(&cf_cluster, 0);
    struct keys k;
    cr_assert_eq(keys_init(&k, "c7", 2), 0);
    cr_assert_eq(keyslot(c, k.names[KEY_RING]), redis_cluster_slot("c7", 2));
    int slot = redis_cluster_slot(STORE_QUEUES_KEY, strlen(STORE_QUEUES_KEY));
    cr_assert_eq(keyslot(c, STORE_QUEUES_KEY), slot);
    redisFree(c);

    /* SADD and SMEMBERS as daemon/store/admin.c sends them, on the owner;
     * every other node sends the caller there. */
    int owner = redis_cluster_node_for_slot(&cf_cluster, slot);
    cr_assert_geq(owner, 0);
    char moved[64];
    snprintf(moved, sizeof(moved), "MOVED %d 127.0.0.1:%d", slot, cf_cluster.node[owner].port);
    for (int i = 0; i < cf_cluster.n; i++) {
        const char *add[] = {"SADD", STORE_QUEUES_KEY, "c7", "c8"};
        const char *list[] = {"SMEMBERS", STORE_QUEUES_KEY};
        c = redis_cluster_connect(&cf_cluster, i);
        cr_assert_not_null(c);
        redisReply *a = redisCommandArgv(c, 4, add, NULL);
        redisReply *m = redisCommandArgv(c, 2, list, NULL);
        cr_assert(a != NULL && m != NULL);
        if (i == owner) {
            cr_assert(a->type == REDIS_REPLY_INTEGER && a->integer == 2, "SADD: %s",
                      a->type == REDIS_REPLY_ERROR ? a->str : "not 2");
            cr_assert(m->type == REDIS_REPLY_ARRAY && m->elements == 2, "SMEMBERS: %s",
                      m->type == REDIS_REPLY_ERROR ? m->str : "not 2 names");
        } else {
            cr_assert(a->type == REDIS_REPLY_ERROR && strcmp(a->str, moved) == 0,
                      "node %d answers SADD with %s, want %s", i, a->str ? a->str : "?", moved);
            cr_assert(m->type == REDIS_REPLY_ERROR && strcmp(m->str, moved) == 0);
        }
        freeReplyObject(a);
        freeReplyObject(m);
        redisFree(c);
    }
}

Test(cluster, a_killed_master_fails_over_to_its_replica)
{
    /* The fixture's failover helpers, for the failover tests to come: a
     * job enqueued on a master (and replicated: WAIT) is claimed from its
     * replica once that has taken over the slot. */
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    int slot = redis_cluster_slot(q[0].name, strlen(q[0].name)), was = q[0].node, now = -1;
    cf_use(&q[0]);
    cr_assert_eq(fx_enqueue("JOBfo1", "TENfo", "{}"), 1);
    redisReply *r = redisCommand(fx_conn, "WAIT 1 %d", wait_deadline_ms(0));
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1, "not replicated");
    freeReplyObject(r);
    redisFree(fx_conn);
    fx_conn = NULL;

    redis_cluster_kill_node(&cf_cluster, was);
    cr_assert_eq(cf_cluster.node[was].pid, 0);
    await_ms(30000,
             (now = redis_cluster_node_for_slot(&cf_cluster, slot)) >= 0 &&
                 redis_cluster_ok(&cf_cluster),
             "a replica to take over slot %d", slot);
    cr_assert_neq(now, was);
    q[0].node = now;
    cf_use(&q[0]);
    struct leased l = cf_claim_one(false, 60000);
    cr_assert_str_eq(l.job, "JOBfo1");
    cf_complete(&l);
}
