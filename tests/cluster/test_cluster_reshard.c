/* A busy queue's slot resharded the way operators do it (issue 13):
 * `redis-cli --cluster reshard --cluster-pipeline 10` sets the slot
 * MIGRATING and IMPORTING and MIGRATEs its keys ten at a time, so for a
 * while some of the queue's keys are on each master. Producers pipeline
 * enqueue and enqueue_many and streaming workers complete what they are
 * pushed, through the move to another master and back: every job
 * acknowledged is completed exactly once, nothing is left active or
 * pending, and the queue's check is clean (docs/ARCHITECTURE.md 7.3,
 * "Resharding in batches"). */
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

/* The queue: its hash tag's slot is 0, the lowest slot of the master that
 * has it and lower than any slot of the others, so `--cluster-slots 1`
 * moves exactly this slot, there and back. */
#define RS_QUEUE "rs3787"

static struct emqd_proc rs_emqd;

static void rs_teardown(void)
{
    emqd_kill(&rs_emqd);
    emqd_log_remove(&rs_emqd);
    cf_teardown();
}

TestSuite(cluster_reshard, .init = cf_setup, .fini = rs_teardown, .timeout = 240);

/* emqd on the cluster, seeded on node 0. Its backend deadline is long: a
 * call made while the queue's slot migrates waits (TRYAGAIN) until the
 * slot has moved, within that deadline. */
static void rs_start(void)
{
    char timeout[16];
    snprintf(timeout, sizeof(timeout), "%d", wait_deadline_ms(0));
    const char *extra[] = {"--redis-timeout-ms", timeout, NULL};
    cf_emqd_start(&rs_emqd, 0, extra);
}

/* Claim one job, which must be job, on a long lease; its lease token. */
static void claim_only(struct tc_conn *c, const char *job, char lease[32])
{
    json_t *r =
        cf_ok(c, "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":1,\"lease_ms\":600000}", RS_QUEUE);
    json_t *j = json_array_get(json_object_get(r, "jobs"), 0);
    cr_assert_str_eq(cf_jstr(j, "job"), job);
    snprintf(lease, 32, "%s", cf_jstr(j, "lease"));
    json_decref(r);
}

/* ---- a queue with every one of its ten keys ------------------------------ */

/* Redis runs a script on a slot that is migrating only if every key the
 * call declares is on the node (else TRYAGAIN, or ASK); a queue that
 * lacks one of its ten keys (no paused group, say) is never run on
 * while its slot migrates. So the queue under test has them all: a
 * ceiling (glimit), a paused group with a job (paused), a delayed job, a
 * dead one, a flat one the grouped workers never take (pending) and a
 * lease held throughout (active); the load keeps ring, wake, seq and
 * groups. The lease is kept here to be settled at the end. */
struct extras {
    char held_lease[32];
};

static void extras_add(struct tc_conn *c, struct extras *x)
{
    char lease[32];
    const char *q = RS_QUEUE;
    json_decref(cf_ok(c, "{\"op\":\"limit\",\"queue\":\"%s\",\"group\":\"TENxlim\",\"max\":5}", q));
    json_decref(cf_ok(c, "{\"op\":\"pause\",\"queue\":\"%s\",\"group\":\"TENxpau\"}", q));
    json_decref(cf_ok(c,
                      "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENxpau\","
                      "\"job\":\"JOBxpaused\",\"payload\":1}",
                      q));
    json_decref(cf_ok(c,
                      "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENxdel\","
                      "\"job\":\"JOBxlater\",\"payload\":1,\"delay_ms\":3600000}",
                      q));
    json_decref(cf_ok(c,
                      "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENxdead\","
                      "\"job\":\"JOBxdead\",\"payload\":1}",
                      q));
    claim_only(c, "JOBxdead", lease);
    json_decref(cf_ok(c,
                      "{\"op\":\"fail\",\"queue\":\"%s\",\"job\":\"JOBxdead\",\"lease\":\"%s\","
                      "\"dead\":true}",
                      q, lease));
    json_decref(cf_ok(c,
                      "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENxheld\","
                      "\"job\":\"JOBxheld\",\"payload\":1}",
                      q));
    claim_only(c, "JOBxheld", x->held_lease);
    json_decref(
        cf_ok(c, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"job\":\"JOBxflat\",\"payload\":1}", q));
}

/* Settle and remove the extras, so that the accounting sees only the
 * workload. */
static void extras_remove(struct tc_conn *c, const struct extras *x)
{
    const char *q = RS_QUEUE;
    json_decref(
        cf_ok(c, "{\"op\":\"complete\",\"queue\":\"%s\",\"job\":\"JOBxheld\",\"lease\":\"%s\"}", q,
              x->held_lease));
    json_decref(cf_ok(c, "{\"op\":\"remove\",\"queue\":\"%s\",\"job\":\"JOBxpaused\"}", q));
    json_decref(cf_ok(c, "{\"op\":\"remove\",\"queue\":\"%s\",\"job\":\"JOBxlater\"}", q));
    json_decref(cf_ok(c, "{\"op\":\"remove\",\"queue\":\"%s\",\"job\":\"JOBxflat\"}", q));
    json_decref(cf_ok(
        c, "{\"op\":\"dead\",\"queue\":\"%s\",\"action\":\"purge\",\"job\":\"JOBxdead\"}", q));
}

/* How many of the queue's ten keys exist on node i. */
static int keys_present(int i)
{
    redisContext *c = redis_cluster_connect(&cf_cluster, i);
    cr_assert_not_null(c);
    int n = 0;
    for (int k = 0; k < KEY__COUNT; k++) {
        char key[64];
        snprintf(key, sizeof(key), "emq:{%s}:%s", RS_QUEUE, keys_suffix[k]);
        n += (int)redis_int(c, "EXISTS %s", key);
    }
    redisFree(c);
    return n;
}

/* ---- producers ----------------------------------------------------------- */

/* Jobs per pipelined write (enqueue lines, or items of one enqueue_many). */
#define RS_BATCH 20
/* Producers wait while this many jobs are enqueued and not completed, so
 * the backlog (and the drain at the end) stays bounded. */
#define RS_BACKLOG 1500

struct producer {
    struct workload *wl;
    atomic_int *next; /* the next job index, shared by the producers */
    bool many;        /* enqueue_many; else pipelined enqueue lines */
    atomic_bool stop;
    char failure[256];
    pthread_t thread;
};

/* Write jobs [from, to) in one write: one enqueue line each, or one
 * enqueue_many. */
static int produce_send(struct producer *pp, struct tc_conn *c, int from, int to)
{
    static _Thread_local char buf[RS_BATCH * 160 + 256];
    size_t n = 0;
    char id[32], g[32];
    if (pp->many)
        n += (size_t)snprintf(buf, sizeof(buf),
                              "{\"op\":\"enqueue_many\",\"queue\":\"%s\",\"jobs\":[", RS_QUEUE);
    for (int i = from; i < to; i++) {
        wl_job_id(pp->wl, i, id, sizeof(id));
        wl_group_id(pp->wl, i % pp->wl->groups, g, sizeof(g));
        if (pp->many)
            n += (size_t)snprintf(buf + n, sizeof(buf) - n,
                                  "%s{\"job\":\"%s\",\"group\":\"%s\",\"payload\":%d}",
                                  i > from ? "," : "", id, g, i);
        else
            n += (size_t)snprintf(buf + n, sizeof(buf) - n,
                                  "{\"op\":\"enqueue\",\"queue\":\"%s\",\"job\":\"%s\","
                                  "\"group\":\"%s\",\"payload\":%d}\n",
                                  RS_QUEUE, id, g, i);
    }
    if (pp->many)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "]}\n");
    return tc_send(c, buf, n);
}

/* One verdict (a reply, or an item of enqueue_many's results): enqueued,
 * else the failure is recorded. */
static bool produce_check(struct producer *pp, const json_t *v, int i)
{
    if (strcmp(cf_jstr(v, "verdict"), "enqueued") == 0)
        return true;
    snprintf(pp->failure, sizeof(pp->failure), "job %d (%s): %s %s", i,
             pp->many ? "enqueue_many" : "enqueue", cf_jstr(v, "error"), cf_jstr(v, "message"));
    return false;
}

static void *produce_main(void *arg)
{
    struct producer *pp = arg;
    struct workload *wl = pp->wl;
    struct tc_conn *c = tc_connect(rs_emqd.port);
    if (c == NULL) {
        snprintf(pp->failure, sizeof(pp->failure), "cannot connect");
        return NULL;
    }
    while (!atomic_load(&pp->stop) && pp->failure[0] == '\0') {
        wait_for(atomic_load(pp->next) - atomic_load(&wl->completed_total) < RS_BACKLOG ||
                 atomic_load(&pp->stop));
        int from = atomic_fetch_add(pp->next, RS_BATCH);
        int to = from + RS_BATCH > wl->n ? wl->n : from + RS_BATCH;
        if (from >= to)
            break;
        if (produce_send(pp, c, from, to) != 0) {
            snprintf(pp->failure, sizeof(pp->failure), "send failed at job %d", from);
            break;
        }
        for (int r = 0; r < (pp->many ? 1 : to - from) && pp->failure[0] == '\0'; r++) {
            json_t *v = tc_read(c, wait_deadline_ms(0));
            if (v == NULL || !tc_ok(v))
                snprintf(pp->failure, sizeof(pp->failure), "job %d: %s %s", from + r,
                         v ? tc_error(v) : "no reply", v ? cf_jstr(v, "message") : "");
            else if (!pp->many)
                produce_check(pp, v, from + r);
            for (size_t k = 0;
                 pp->many && v != NULL && k < (size_t)(to - from) && pp->failure[0] == '\0'; k++) {
                json_t *item = json_array_get(json_object_get(v, "results"), k);
                produce_check(pp, item, from + (int)k);
            }
            json_decref(v);
        }
    }
    tc_close(c);
    return NULL;
}

/* ---- streaming workers --------------------------------------------------- */

/* One worker: a stream of credit jobs; it completes each job pushed at
 * once (pipelined, with the job's index as the ref) and counts the
 * completes answered ok in the workload's done counters. */
struct streamer {
    struct workload *wl;
    int credit;
    atomic_bool stop;
    char failure[256];
    pthread_t thread;
};

/* A push: send its complete. A reply: a complete's, which must be ok. */
static void stream_line(struct streamer *sw, struct tc_conn *c, const json_t *v)
{
    struct workload *wl = sw->wl;
    if (json_object_get(v, "push") != NULL) {
        const char *job = cf_jstr(v, "job");
        int i = wl_index(wl, job);
        if (i < 0) {
            snprintf(sw->failure, sizeof(sw->failure), "pushed %s, not of the set", job);
            return;
        }
        char line[256];
        snprintf(line, sizeof(line),
                 "{\"op\":\"complete\",\"queue\":\"%s\",\"job\":\"%s\",\"lease\":\"%s\","
                 "\"ref\":%d}",
                 RS_QUEUE, job, cf_jstr(v, "lease"), i);
        if (tc_send_line(c, line) != 0)
            snprintf(sw->failure, sizeof(sw->failure), "send failed");
        return;
    }
    json_t *ref = json_object_get(v, "ref");
    if (!tc_ok(v) || !json_is_integer(ref)) {
        snprintf(sw->failure, sizeof(sw->failure), "complete of job %lld: %s %s",
                 json_is_integer(ref) ? json_integer_value(ref) : -1LL, tc_error(v),
                 cf_jstr(v, "message"));
        return;
    }
    atomic_fetch_add(&wl->done[json_integer_value(ref)], 1);
    atomic_fetch_add(&wl->completed_total, 1);
}

static void *stream_main(void *arg)
{
    struct streamer *sw = arg;
    struct tc_conn *c = tc_connect(rs_emqd.port);
    if (c == NULL) {
        snprintf(sw->failure, sizeof(sw->failure), "cannot connect");
        return NULL;
    }
    json_t *r = tc_call(c, "{\"op\":\"stream\",\"queue\":\"%s\",\"credit\":%d,\"lease_ms\":600000}",
                        RS_QUEUE, sw->credit);
    if (r == NULL || !tc_ok(r))
        snprintf(sw->failure, sizeof(sw->failure), "stream refused: %s", r ? tc_error(r) : "");
    json_decref(r);
    while (!atomic_load(&sw->stop) && sw->failure[0] == '\0') {
        /* A bounded read, so that stop is seen: while the slot migrates
         * nothing may come for a while. */
        json_t *v = tc_read(c, 100);
        if (v != NULL)
            stream_line(sw, c, v);
        json_decref(v);
    }
    tc_close(c);
    return NULL;
}

/* ---- the test ------------------------------------------------------------ */

/* Move the queue's slot from one master to another with redis-cli in
 * batches of ten keys; the move must succeed and the map say so. */
static void reshard(int from, int to)
{
    cr_assert_eq(redis_cluster_reshard(&cf_cluster, from, to, 1, 10), 0,
                 "redis-cli --cluster reshard from node %d to node %d failed", from, to);
    cr_assert_eq(redis_cluster_node_for_slot(&cf_cluster, 0), to);
}

/* The load: two producers (pipelined enqueue lines, enqueue_many) and two
 * streaming workers. */
struct load {
    struct workload wl;
    atomic_int next;
    struct producer pp[2];
    struct streamer sw[2];
};

static bool load_failed(const struct load *ld)
{
    for (int i = 0; i < 2; i++)
        if (ld->pp[i].failure[0] != '\0' || ld->sw[i].failure[0] != '\0')
            return true;
    return false;
}

/* Wait for another `more` completions (the load goes on), unless a
 * thread has failed (its failure is asserted when it is joined). */
static void await_more(struct load *ld, int more, const char *what)
{
    int at = atomic_load(&ld->wl.completed_total);
    await(atomic_load(&ld->wl.completed_total) >= at + more || load_failed(ld),
          "%d more jobs completed %s", more, what);
}

Test(cluster_reshard, a_busy_queue_resharded_in_batches_there_and_back_loses_nothing)
{
    cr_assert_eq(redis_cluster_slot(RS_QUEUE, strlen(RS_QUEUE)), 0);
    int from = redis_cluster_node_for_slot(&cf_cluster, 0), to = cf_other_master(from);
    rs_start();
    struct tc_conn *c = tc_connect(rs_emqd.port);
    cr_assert_not_null(c);
    struct extras x;
    extras_add(c, &x);

    static struct load ld;
    struct workload *wl = &ld.wl;
    wl_init(wl, RS_QUEUE, "rs", 200000, 8, 0);
    for (int i = 0; i < 2; i++) {
        ld.sw[i] = (struct streamer){.wl = wl, .credit = 6};
        cr_assert_eq(pthread_create(&ld.sw[i].thread, NULL, stream_main, &ld.sw[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        ld.pp[i] = (struct producer){.wl = wl, .next = &ld.next, .many = i == 1};
        cr_assert_eq(pthread_create(&ld.pp[i].thread, NULL, produce_main, &ld.pp[i]), 0);
    }
    await_more(&ld, 500, "before the move");
    cr_assert_eq(keys_present(from), KEY__COUNT, "the queue has all its keys");

    reshard(from, to);
    await_more(&ld, 300, "on the new master");
    reshard(to, from);
    await_more(&ld, 300, "back on the first master");

    for (int i = 0; i < 2; i++) {
        atomic_store(&ld.pp[i].stop, true);
        pthread_join(ld.pp[i].thread, NULL);
        cr_assert_str_eq(ld.pp[i].failure, "", "producer %d: %s", i, ld.pp[i].failure);
    }
    /* Every index reserved was enqueued (a producer that failed has
     * failed the test above). */
    if (atomic_load(&ld.next) < wl->n)
        wl->n = atomic_load(&ld.next);
    bool drained = wl_await_done(wl, 0);
    for (int i = 0; i < 2; i++) {
        atomic_store(&ld.sw[i].stop, true);
        pthread_join(ld.sw[i].thread, NULL);
        cr_assert_str_eq(ld.sw[i].failure, "", "worker %d: %s", i, ld.sw[i].failure);
    }
    cr_assert(drained, "every acknowledged job completed");
    /* Exactly once: no lease ends in the test's time (600 s), so a job
     * is pushed again only if the store lost its lease. */
    for (int i = 0; i < wl->n; i++)
        cr_assert_eq(atomic_load(&wl->done[i]), 1, "job %d completed %d times", i,
                     atomic_load(&wl->done[i]));
    cr_assert_eq(atomic_load(&wl->completed_total), wl->n);
    cr_log_info("%d jobs over two batched moves; %lld calls waited out a migration (TRYAGAIN)",
                wl->n, emqd_metric(&rs_emqd, "emqd_pool_tryagain_total"));
    cr_assert_gt(emqd_metric(&rs_emqd, "emqd_pool_tryagain_total"), 0,
                 "no call met the slot half moved");
    cr_assert_gt(emqd_metric(&rs_emqd, "emqd_pool_moved_total"), 0, "no move was followed");

    extras_remove(c, &x);
    tc_close(c);
    wl_account(wl, rs_emqd.port);
    redisContext *t = redis_cluster_connect(&cf_cluster, to);
    cr_assert_not_null(t);
    cr_assert_eq(redis_int(t, "CLUSTER COUNTKEYSINSLOT 0"), 0, "nothing is left on node %d", to);
    redisFree(t);
    wl_deinit(wl);
}
