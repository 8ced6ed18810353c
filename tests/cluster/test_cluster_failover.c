/* The real emqd on a Redis Cluster whose master dies (issue 13): the
 * dead master's queues answer EUNAVAILABLE while queues on the other
 * masters go on; once its replica is promoted (cluster-node-timeout is
 * short in the fixture) emqd finds it and the queue works again. Under a
 * producer's load, with replica-acks = 1 no acknowledged job is lost; with
 * replica-acks = 0 what is lost is counted and reported (Redis replicates
 * asynchronously: it may be none on a quiet loopback). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_fixture.h"
#include "emqd_proc.h"
#include "wait.h"

static struct emqd_proc fo_emqd;

static void fo_teardown(void)
{
    emqd_kill(&fo_emqd);
    cf_teardown();
}

TestSuite(cluster_failover, .init = cf_setup, .fini = fo_teardown, .timeout = 240);

/* Start emqd seeded with a node other than avoid, with replica-acks. */
static void fo_start(int avoid, int acks)
{
    char ack[8];
    snprintf(ack, sizeof(ack), "%d", acks);
    const char *extra[] = {"--replica-acks", ack, NULL};
    cf_emqd_start(&fo_emqd, avoid == 0 ? 1 : 0, extra);
}

/* Enqueue job on q; the reply's error code ("" when ok). */
static char *enqueue(struct tc_conn *c, const char *q, const char *job, char err[32])
{
    json_t *r = tc_call(c,
                        "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENf\",\"job\":\"%s\","
                        "\"payload\":1}",
                        q, job);
    cr_assert_not_null(r, "no reply to an enqueue on %s", q);
    snprintf(err, 32, "%s", tc_ok(r) ? "" : tc_error(r));
    json_decref(r);
    return err;
}

/* Claim every job of q (in batches), returning how many; each claimed
 * id is looked up in ids[0..n) and found[i] set. */
static int claim_all(struct tc_conn *c, const char *q, char (*ids)[32], int n, bool *found)
{
    int total = 0;
    for (;;) {
        json_t *r = tc_call(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":500}", q);
        cr_assert(r != NULL && tc_ok(r), "claim on %s: %s", q, r ? tc_error(r) : "no reply");
        json_t *jobs = json_object_get(r, "jobs");
        size_t k = json_array_size(jobs);
        for (size_t i = 0; i < k; i++) {
            const char *id = cf_jstr(json_array_get(jobs, i), "job");
            for (int j = 0; j < n; j++)
                if (strcmp(ids[j], id) == 0)
                    found[j] = true;
        }
        json_decref(r);
        total += (int)k;
        if (k == 0)
            return total;
    }
}

/* Wait until a replica of dead master node serves slot, then start the
 * dead node again: it rejoins as the new master's replica (so that WAIT 1
 * can be answered again: the promoted master had no replica of its own). */
static void await_failover(int slot, int node)
{
    int now = -1;
    await_ms(60000, (now = redis_cluster_node_for_slot(&cf_cluster, slot)) >= 0 && now != node,
             "a replica to take over slot %d", slot);
    cr_assert_eq(redis_server_restart(&cf_cluster.node[node], NULL), 0, "restart node %d", node);
    await_ms(60000, redis_cluster_ok(&cf_cluster), "the cluster to be ok again");
}

Test(cluster_failover, a_dead_master_fails_only_its_queues_until_its_replica_takes_over)
{
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    fo_start(q[0].node, 1);
    struct tc_conn *c = tc_connect(fo_emqd.port);
    cr_assert_not_null(c);
    char err[32], job[32];
    for (int m = 0; m < cf_cluster.masters; m++) {
        snprintf(job, sizeof(job), "JOBpre%d", m);
        cr_assert_str_eq(enqueue(c, q[m].name, job, err), "", "enqueue on %s", q[m].name);
    }

    int slot = redis_cluster_slot(q[0].name, strlen(q[0].name));
    redis_cluster_kill_node(&cf_cluster, q[0].node);
    /* Its queue answers EUNAVAILABLE (the connection is lost, then no
     * connection to that master is ready), and the others go on. */
    cr_assert_str_eq(enqueue(c, q[0].name, "JOBdown", err), "EUNAVAILABLE");
    for (int m = 1; m < cf_cluster.masters; m++) {
        snprintf(job, sizeof(job), "JOBduring%d", m);
        cr_assert_str_eq(enqueue(c, q[m].name, job, err), "", "enqueue on %s while %s is down",
                         q[m].name, q[0].name);
    }
    await_failover(slot, q[0].node);
    /* emqd finds the new owner (its map is read again while a master is
     * unreachable): the same enqueue, retried, takes. */
    await_ms(60000, enqueue(c, q[0].name, "JOBdown", err)[0] == '\0',
             "queue %s to work again after the failover (last: %s)", q[0].name, err);
    /* With replica-acks = 1, the job acknowledged before the kill was on
     * the replica: the promoted master has it. */
    bool found[2] = {false, false};
    char ids[2][32] = {"JOBpre0", "JOBdown"};
    cr_assert_eq(claim_all(c, q[0].name, ids, 2, found), 2);
    cr_assert(found[0] && found[1], "the acknowledged jobs survived the failover");
    tc_close(c);
}

/* A producer that enqueues one job at a time into a queue, retrying an
 * EUNAVAILABLE with the same id (enqueue is idempotent by job id), and
 * records every id acknowledged. */
#define FO_MAX 20000

struct producer {
    const char *queue;
    atomic_int acked; /* ids[0..acked) were acknowledged */
    atomic_bool stop;
    char (*ids)[32];
    char failure[128];
};

static void *producer_main(void *arg)
{
    struct producer *pp = arg;
    struct tc_conn *c = tc_connect(fo_emqd.port);
    if (c == NULL) {
        snprintf(pp->failure, sizeof(pp->failure), "cannot connect");
        return NULL;
    }
    int i = 0;
    while (!atomic_load(&pp->stop) && i < FO_MAX) {
        snprintf(pp->ids[i], 32, "JOBf%06d", i);
        json_t *r =
            tc_call(c,
                    "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENf\",\"job\":\"%s\","
                    "\"payload\":1}",
                    pp->queue, pp->ids[i]);
        if (r == NULL) {
            snprintf(pp->failure, sizeof(pp->failure), "no reply to enqueue %d", i);
            break;
        }
        if (tc_ok(r))
            atomic_store(&pp->acked, ++i);
        else if (strcmp(tc_error(r), "EUNAVAILABLE") != 0)
            snprintf(pp->failure, sizeof(pp->failure), "enqueue %d: %s", i, tc_error(r));
        json_decref(r);
        if (pp->failure[0])
            break;
    }
    tc_close(c);
    return NULL;
}

/* Run the producer on a queue, fail its master over mid-way, let it go on
 * until 200 more are acknowledged, then count the acknowledged jobs the
 * queue no longer has. */
static int lost_in_failover(int acks)
{
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    fo_start(q[0].node, acks);
    static char ids[FO_MAX][32];
    static bool found[FO_MAX];
    memset(found, 0, sizeof(found));
    struct producer pp = {.queue = q[0].name, .ids = ids};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, producer_main, &pp), 0);
    await(atomic_load(&pp.acked) >= 300 || pp.failure[0], "300 jobs acknowledged before the kill");
    redis_cluster_kill_node(&cf_cluster, q[0].node);
    await_failover(redis_cluster_slot(q[0].name, strlen(q[0].name)), q[0].node);
    int at = atomic_load(&pp.acked);
    await_ms(60000, atomic_load(&pp.acked) >= at + 200 || pp.failure[0],
             "200 more acknowledged after the failover");
    atomic_store(&pp.stop, true);
    pthread_join(th, NULL);
    cr_assert_str_eq(pp.failure, "", "%s", pp.failure);
    int n = atomic_load(&pp.acked), lost = 0;
    struct tc_conn *c = tc_connect(fo_emqd.port);
    cr_assert_not_null(c);
    claim_all(c, q[0].name, ids, n, found);
    tc_close(c);
    for (int i = 0; i < n; i++)
        lost += !found[i];
    /* The figure the issue asks for, in the test's log. */
    cr_log_info("failover under load: replica-acks=%d acknowledged=%d lost=%d", acks, n, lost);
    return lost;
}

Test(cluster_failover, with_replica_acks_1_a_failover_loses_no_acknowledged_job)
{
    cr_assert_eq(lost_in_failover(1), 0, "acknowledged jobs lost with replica-acks = 1");
}

Test(cluster_failover, with_replica_acks_0_a_failover_is_counted)
{
    /* Nothing to assert about the count (asynchronous replication may or
     * may not lose the last writes): it is reported. The daemon carries
     * on after the failover, which lost_in_failover asserts. */
    lost_in_failover(0);
}
