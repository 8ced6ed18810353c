/* The real emqd on a real Redis Cluster (issue 13): it learns the slot
 * map from one seed, serves queues on every master (each queue's keys on
 * the owner of its slot), finds the queue registry's owner, and follows a
 * queue whose slot moves to another master (ASK while it moves, MOVED
 * after) without failing a request and without reordering what one
 * client connection pipelined. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_fixture.h"
#include "emqd_proc.h"
#include "wait.h"
#include "workload.h"

static struct emqd_proc cd_emqd;

static void cd_setup(void)
{
    cf_setup();
}

static void cd_teardown(void)
{
    emqd_kill(&cd_emqd);
    emqd_log_remove(&cd_emqd);
    cf_teardown();
}

TestSuite(cluster_daemon, .init = cd_setup, .fini = cd_teardown, .timeout = 240);

/* Start emqd on the cluster with node seed as its only seed. Its backend
 * deadline is long: a call to a slot half moved is retried (TRYAGAIN)
 * until the move completes, within that deadline. */
static void cd_start(int seed)
{
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", wait_deadline_ms(0));
    const char *extra[] = {"--redis-timeout-ms", timeout, NULL};
    cf_emqd_start(&cd_emqd, seed, extra);
}

static void assert_ok(json_t *r)
{
    cr_assert_not_null(r, "no reply");
    cr_assert(tc_ok(r), "not ok: %s %s", tc_error(r), cf_jstr(r, "message"));
}

/* Send a request that must answer ok; the reply (caller frees). */
static json_t *call_ok(struct tc_conn *c, const char *line)
{
    cr_assert_eq(tc_send_line(c, line), 0);
    json_t *r = tc_read(c, wait_deadline_ms(0));
    assert_ok(r);
    return r;
}

/* Keys of queue q on node i (DBSIZE would count other queues). */
static long long node_queue_keys(int i, const char *q)
{
    redisContext *c = redis_cluster_connect(&cf_cluster, i);
    cr_assert_not_null(c);
    long long n = redis_int(c, "CLUSTER COUNTKEYSINSLOT %d", redis_cluster_slot(q, strlen(q)));
    redisFree(c);
    return n;
}

static void claim_complete(struct tc_conn *c, const char *q, const char *job);

/* Enqueue one job on q, claim it, complete it: every step ok, and the
 * claim leased that job. */
static void round_trip(struct tc_conn *c, const char *q, const char *job)
{
    char line[512];
    snprintf(line, sizeof(line),
             "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENa\",\"job\":\"%s\","
             "\"payload\":{\"n\":1}}",
             q, job);
    json_decref(call_ok(c, line));
    claim_complete(c, q, job);
}

/* Claim one job of q, which must be job, and complete it. */
static void claim_complete(struct tc_conn *c, const char *q, const char *job)
{
    char line[512];
    snprintf(line, sizeof(line), "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":1}", q);
    json_t *r = call_ok(c, line);
    json_t *jobs = json_object_get(r, "jobs");
    cr_assert_eq(json_array_size(jobs), 1, "claim on %s found no job", q);
    json_t *j = json_array_get(jobs, 0);
    cr_assert_str_eq(cf_jstr(j, "job"), job);
    snprintf(line, sizeof(line),
             "{\"op\":\"complete\",\"queue\":\"%s\",\"job\":\"%s\",\"lease\":\"%s\"}", q, job,
             cf_jstr(j, "lease"));
    json_decref(r);
    json_decref(call_ok(c, line));
}

/* The check op on q finds nothing wrong. */
static void assert_check_clean(struct tc_conn *c, const char *q)
{
    char line[128];
    snprintf(line, sizeof(line), "{\"op\":\"check\",\"queue\":\"%s\"}", q);
    json_t *r = call_ok(c, line);
    json_t *v = json_object_get(r, "violations");
    cr_assert(json_is_array(v) && json_array_size(v) == 0, "check of %s: %zu violations", q,
              json_array_size(v));
    json_decref(r);
}

Test(cluster_daemon, queues_on_every_master_are_served_from_one_seed)
{
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    /* A seed that is not the first master: the map, not the seed, says
     * where each queue goes. */
    cd_start(cf_cluster.n - 1);
    struct tc_conn *c = tc_connect(cd_emqd.port);
    cr_assert_not_null(c);
    char job[32];
    for (int m = 0; m < cf_cluster.masters; m++) {
        snprintf(job, sizeof(job), "JOBm%d", m);
        round_trip(c, q[m].name, job);
        /* The job's keys (its row, retained after completion) live on the
         * master that serves the queue's slot, and only there. */
        cr_assert_gt(node_queue_keys(q[m].node, q[m].name), 0, "queue %s has no keys on node %d",
                     q[m].name, q[m].node);
        assert_check_clean(c, q[m].name);
    }
    cr_assert_eq(emqd_metric(&cd_emqd, "emqd_pool_nodes"), cf_cluster.masters,
                 "emqd sends calls to every master");
    /* Nothing was sent to the wrong node: the map was right from the start. */
    cr_assert_eq(emqd_metric(&cd_emqd, "emqd_pool_moved_total"), 0);

    /* The registry (emq:queues) is on its own slot's owner, and lists
     * every queue. */
    int rslot = redis_cluster_slot("emq:queues", strlen("emq:queues"));
    int owner = redis_cluster_node_for_slot(&cf_cluster, rslot);
    redisContext *rc = redis_cluster_connect(&cf_cluster, owner);
    cr_assert_not_null(rc);
    for (int m = 0; m < cf_cluster.masters; m++)
        await(redis_int(rc, "SISMEMBER emq:queues %s", q[m].name) == 1,
              "queue %s in the registry on node %d", q[m].name, owner);
    redisFree(rc);
    tc_close(c);
}

Test(cluster_daemon, a_queue_whose_slot_moves_is_followed_by_ask_then_moved)
{
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    cd_start(0);
    struct tc_conn *c = tc_connect(cd_emqd.port);
    cr_assert_not_null(c);
    int slot = redis_cluster_slot(q[0].name, strlen(q[0].name)), from = q[0].node;
    int to = cf_other_master(from);
    round_trip(c, q[0].name, "JOBa1");

    /* Mid-move: the queue's keys are on to, from still owns the slot and
     * answers ASK; the daemon resends with ASKING to to, which (a script
     * of several keys, some of them not there, in a slot it imports)
     * answers TRYAGAIN until the move completes; the daemon retries. */
    cf_slot_migrate(slot, from, to);
    cr_assert_eq(node_queue_keys(from, q[0].name), 0);
    char line[256];
    snprintf(line, sizeof(line),
             "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENa\",\"job\":\"JOBa2\","
             "\"payload\":1}",
             q[0].name);
    cr_assert_eq(tc_send_line(c, line), 0);
    await(emqd_metric(&cd_emqd, "emqd_pool_asked_total") > 0, "the daemon to follow an ASK");
    await(emqd_metric(&cd_emqd, "emqd_pool_tryagain_total") > 0, "the daemon to retry on TRYAGAIN");
    cr_assert_eq(emqd_metric(&cd_emqd, "emqd_pool_moved_total"), 0);

    /* Moved: the waiting enqueue completes on to; from answers MOVED
     * once, and the map follows. */
    cf_slot_assign(slot, to);
    json_t *r = tc_read(c, wait_deadline_ms(0));
    assert_ok(r);
    json_decref(r);
    claim_complete(c, q[0].name, "JOBa2");
    round_trip(c, q[0].name, "JOBa3");
    cr_assert_gt(emqd_metric(&cd_emqd, "emqd_pool_moved_total"), 0, "no MOVED was followed");
    long long moved = emqd_metric(&cd_emqd, "emqd_pool_moved_total");
    round_trip(c, q[0].name, "JOBa4");
    cr_assert_eq(emqd_metric(&cd_emqd, "emqd_pool_moved_total"), moved,
                 "after MOVED the map sends the queue to its new owner at once");
    cr_assert_gt(node_queue_keys(to, q[0].name), 0);
    cr_assert_eq(node_queue_keys(from, q[0].name), 0);
    assert_check_clean(c, q[0].name);
    tc_close(c);
}

/* A client that pipelines, round after round, ENQ enqueues of one group
 * and a claim of them all in one write: each claim must lease exactly
 * that round's jobs in the order sent (FIFO within the group), which
 * holds only if every request took effect in the order sent. */
#define ENQ 8

struct piper {
    const char *queue;
    atomic_int rounds; /* completed and checked */
    atomic_bool stop;
    char failure[256];
};

static void *pipe_main(void *arg)
{
    struct piper *pp = arg;
    struct tc_conn *c = tc_connect(cd_emqd.port);
    if (c == NULL) {
        snprintf(pp->failure, sizeof(pp->failure), "cannot connect");
        return NULL;
    }
    static char lines[ENQ * 256 + 256];
    for (int round = 0; !atomic_load(&pp->stop) && pp->failure[0] == '\0'; round++) {
        size_t n = 0;
        for (int i = 0; i < ENQ; i++)
            n += (size_t)snprintf(lines + n, sizeof(lines) - n,
                                  "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENp\","
                                  "\"job\":\"JOBp%d-%d\",\"payload\":1}\n",
                                  pp->queue, round, i);
        n += (size_t)snprintf(
            lines + n, sizeof(lines) - n,
            "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":%d,\"lease_ms\":600000}\n", pp->queue,
            ENQ);
        if (tc_send(c, lines, n) != 0) {
            snprintf(pp->failure, sizeof(pp->failure), "round %d: send failed", round);
            break;
        }
        for (int i = 0; i <= ENQ && pp->failure[0] == '\0'; i++) {
            json_t *r = tc_read(c, wait_deadline_ms(0));
            if (r == NULL || !tc_ok(r)) {
                snprintf(pp->failure, sizeof(pp->failure), "round %d reply %d: %s %s", round, i,
                         r ? tc_error(r) : "none", r ? cf_jstr(r, "message") : "");
            } else if (i == ENQ) {
                json_t *jobs = json_object_get(r, "jobs");
                for (int k = 0; k < ENQ && pp->failure[0] == '\0'; k++) {
                    char want[32];
                    snprintf(want, sizeof(want), "JOBp%d-%d", round, k);
                    const char *got = cf_jstr(json_array_get(jobs, (size_t)k), "job");
                    if (strcmp(got, want) != 0)
                        snprintf(pp->failure, sizeof(pp->failure),
                                 "round %d: claim's job %d is '%s', want %s (of %zu)", round, k,
                                 got, want, json_array_size(jobs));
                }
            }
            json_decref(r);
        }
        if (pp->failure[0] == '\0')
            atomic_fetch_add(&pp->rounds, 1);
    }
    tc_close(c);
    return NULL;
}

Test(cluster_daemon, pipelined_requests_keep_their_order_while_the_slot_moves)
{
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    cd_start(0);
    int slot = redis_cluster_slot(q[0].name, strlen(q[0].name)), from = q[0].node;
    int to = cf_other_master(from);
    struct piper pp = {.queue = q[0].name};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, pipe_main, &pp), 0);

    /* The move happens while the client pipelines: each half waits for
     * rounds made under the previous state, so requests are in flight at
     * the daemon whichever request the move bounces. */
    await(atomic_load(&pp.rounds) >= 20 || pp.failure[0], "20 rounds before the move");
    cf_slot_migrate(slot, from, to);
    await(emqd_metric(&cd_emqd, "emqd_pool_asked_total") > 0 || pp.failure[0],
          "requests in flight to be bounced with ASK");
    cf_slot_assign(slot, to);
    int at = atomic_load(&pp.rounds);
    await(atomic_load(&pp.rounds) >= at + 20 || pp.failure[0], "20 rounds after the move");
    atomic_store(&pp.stop, true);
    pthread_join(th, NULL);
    cr_assert_str_eq(pp.failure, "", "%s", pp.failure);
    cr_assert_gt(emqd_metric(&cd_emqd, "emqd_pool_asked_total"), 0, "no ASK was followed");
    cr_assert_gt(emqd_metric(&cd_emqd, "emqd_pool_moved_total"), 0, "no MOVED was followed");
    cr_assert_eq(node_queue_keys(from, q[0].name), 0, "the queue's keys are all on the new owner");
    struct tc_conn *c = tc_connect(cd_emqd.port);
    cr_assert_not_null(c);
    assert_check_clean(c, q[0].name);
    tc_close(c);
}

/* ---- resharding under load --------------------------------------------- */

struct producer {
    struct workload *wl;
    int enqueued;
};

static void *produce_main(void *arg)
{
    struct producer *pp = arg;
    /* Ten at a time, so that enqueues are in flight throughout the move. */
    for (int from = 0; from < pp->wl->n; from += 10)
        pp->enqueued += wl_enqueue(pp->wl, cd_emqd.port, from, from + 10, NULL);
    return NULL;
}

Test(cluster_daemon, a_busy_queue_whose_slot_moves_loses_nothing)
{
    /* Its slot is moved (one MIGRATE of every key, then SETSLOT NODE)
     * while a producer enqueues and two workers claim and complete: every
     * acknowledged job is completed, nothing is left active or pending,
     * and the queue's check is clean on its new master. */
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    cd_start(0);
    int slot = redis_cluster_slot(q[0].name, strlen(q[0].name)), from = q[0].node;
    int to = cf_other_master(from);
    struct workload wl;
    wl_init(&wl, q[0].name, "rs", 600, 6, 0);
    struct wl_worker w[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(wl_worker_start(&w[i], &wl, cd_emqd.port, 10, 60000, 0), 0);
    struct producer pp = {.wl = &wl};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, produce_main, &pp), 0);
    await(atomic_load(&wl.completed_total) >= 100, "100 jobs completed before the move");
    cf_slot_migrate(slot, from, to);
    cf_slot_assign(slot, to);
    pthread_join(th, NULL);
    cr_assert_eq(pp.enqueued, wl.n, "every enqueue was acknowledged");
    cr_assert(wl_await_done(&wl, 0), "every job completed");
    for (int i = 0; i < 2; i++) {
        wl_worker_stop(&w[i]);
        cr_assert_eq(atomic_load(&w[i].errors), 0, "worker %d saw unexpected replies", i);
    }
    cr_assert_eq(node_queue_keys(from, q[0].name), 0,
                 "nothing of the queue is left on the old master");
    wl_account(&wl, cd_emqd.port);
    cr_assert_gt(emqd_metric(&cd_emqd, "emqd_pool_moved_total"), 0, "the move was followed");
    wl_deinit(&wl);
}

/* ---- emqctl and /metrics --------------------------------------------- */

/* emqctl --json (args) against the daemon: exit 0 and a JSON line, its
 * first (caller frees). */
static json_t *ctl_json(const char *args)
{
    static char out[1 << 16];
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "--addr 127.0.0.1:%d --json %s", cd_emqd.port, args);
    cr_assert_eq(emqd_run_tool("EMQCTL", cmd, out, sizeof(out)), 0, "emqctl %s:\n%s", args, out);
    json_t *r = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
    cr_assert_not_null(r, "emqctl %s:\n%s", args, out);
    return r;
}

static long long jint(const json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

Test(cluster_daemon, emqctl_and_metrics_see_the_queues_of_every_master)
{
    /* A queue on each master, with two jobs pending and one active:
     * emqctl's stats, top and queues and the daemon's /metrics each ask
     * the queue's own master, and show every queue as it is. */
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    cd_start(0);
    struct tc_conn *c = tc_connect(cd_emqd.port);
    cr_assert_not_null(c);
    for (int m = 0; m < cf_cluster.masters; m++) {
        for (int i = 0; i < 3; i++)
            json_decref(cf_ok(c,
                              "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENs%d\","
                              "\"payload\":%d}",
                              q[m].name, m, i));
        json_decref(cf_ok(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"lease_ms\":600000}", q[m].name));
    }
    json_t *all = ctl_json("queues");
    cr_assert(tc_ok(all));
    json_t *rows = json_object_get(all, "queues");
    for (int m = 0; m < cf_cluster.masters; m++) {
        char args[512], series[512], group[16];
        snprintf(group, sizeof(group), "TENs%d", m);
        snprintf(args, sizeof(args), "stats %s", q[m].name);
        json_t *r = ctl_json(args);
        cr_assert(tc_ok(r) && jint(r, "pending") == 2 && jint(r, "active") == 1 &&
                      jint(r, "groups") == 1,
                  "emqctl stats %s (node %d): pending %lld active %lld", q[m].name, q[m].node,
                  jint(r, "pending"), jint(r, "active"));
        json_decref(r);

        snprintf(args, sizeof(args), "top %s --iterations 1 --interval 100", q[m].name);
        r = ctl_json(args);
        cr_assert_eq(jint(json_object_get(r, "stats"), "pending"), 2, "emqctl top %s", q[m].name);
        json_t *g = json_array_get(json_object_get(r, "groups"), 0);
        cr_assert_eq(json_array_size(json_object_get(r, "groups")), 1);
        cr_assert_str_eq(cf_jstr(g, "group"), group);
        json_decref(r);

        bool listed = false;
        for (size_t i = 0; i < json_array_size(rows); i++) {
            json_t *row = json_array_get(rows, i);
            if (strcmp(cf_jstr(row, "queue"), q[m].name) == 0)
                listed = jint(row, "pending") == 2 && jint(row, "active") == 1;
        }
        cr_assert(listed, "emqctl queues lists %s with its counts", q[m].name);

        snprintf(series, sizeof(series), "emqd_queue_jobs{queue=\"%s\",state=\"pending\"}",
                 q[m].name);
        cr_assert_eq(emqd_metric(&cd_emqd, series), 2, "%s", series);
        snprintf(series, sizeof(series), "emqd_queue_jobs{queue=\"%s\",state=\"active\"}",
                 q[m].name);
        cr_assert_eq(emqd_metric(&cd_emqd, series), 1, "%s", series);
        snprintf(series, sizeof(series), "emqd_group_depth{queue=\"%s\",group=\"%s\"}", q[m].name,
                 group);
        cr_assert_eq(emqd_metric(&cd_emqd, series), 2, "%s", series);
    }
    json_decref(all);
    cr_assert_eq(emqd_metric(&cd_emqd, "emqd_pool_nodes"), cf_cluster.masters);
    tc_close(c);
}
