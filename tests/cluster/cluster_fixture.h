/* cluster_fixture: the per-test world of the cluster tests: a Redis
 * Cluster of 3 masters and 3 replicas (redis_cluster.h), queues placed on
 * each master, and the lane fixture's queue (fx_q on fx_conn) pointed at
 * one of them on its slot owner. Also small wrappers that assert replies,
 * so recipes read as the moves they make. */
#ifndef EMQ_TEST_CLUSTER_FIXTURE_H
#define EMQ_TEST_CLUSTER_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "emqd_proc.h"
#include "lanes_fixture.h"
#include "redis_cluster.h"

extern struct redis_cluster cf_cluster;

/* Start the cluster / close fx_conn and stop the cluster (a suite's .init
 * and .fini: the cluster stops also after a test that failed mid-way). */
void cf_setup(void);
void cf_teardown(void);

/* A queue and the master that serves its slot. */
struct cf_queue {
    char name[16];
    int node;
};

/* Queue names ("c0", "c1", ...) until every master serves per of them:
 * out[m * per + j] (capacity masters * per) is the j-th queue of the m-th
 * master found. The names are the same in every run. */
void cf_place_queues(struct cf_queue *out, int per);

/* Make q the queue under test: fx_q its keys, fx_conn (closed first if
 * open) a new connection to the master that serves it. */
void cf_use(const struct cf_queue *q);

/* True for the errors with which a cluster node refuses a call that
 * leaves the slot it was sent for, or reaches a slot it does not serve. */
bool cf_refused(const redisReply *r);

/* Run script id on the queue under test; the reply must not be an error
 * (a cluster refusal is named as one). Caller frees. */
redisReply *cf_call(enum script_id id, ...);

/* The same for a script whose reply must be an array of n elements. */
redisReply *cf_array(size_t n, enum script_id id, ...);

/* Element i of an array reply: an integer / a string equal to want. */
long long cf_int_at(const redisReply *r, size_t i);
void cf_expect_str_at(const redisReply *r, size_t i, const char *want);

/* A plain command on one key (e.g. "ZCARD", fx_q.names[KEY_ACTIVE]) that
 * answers an integer. */
long long cf_key_int(const char *cmd, const char *key);

/* Field of job's row is want; the row exists. */
void cf_expect_row(const char *job, const char *field, const char *want);
bool cf_row_exists(const char *job);

/* Claim one job (grouped or flat) on a lease of lease_ms; asserts there
 * was one. */
struct leased cf_claim_one(bool flat, long long lease_ms);

/* Complete a leased job; asserts "completed". */
void cf_complete(const struct leased *l);

/* Lease and complete everything serviceable, grouped and flat. */
void cf_settle(void);

/* Wait until Redis's clock is past the lease of job (its row's
 * lease_until), so that a reap finds it expired. */
void cf_await_lease_out(const char *job);

/* The first half of a slot move: from MIGRATING, to IMPORTING, and every
 * key of the slot MIGRATEd (in one MIGRATE, so no script sees the queue
 * half moved). Requests to from now answer ASK. */
void cf_slot_migrate(int slot, int from, int to);

/* The second half: every master is told the slot is to's now (the new
 * owner first, as redis-cli does); returns once the cluster agrees.
 * Requests to from answer MOVED. */
void cf_slot_assign(int slot, int to);

/* Another master than m (asserts there is one). */
int cf_other_master(int m);

/* Start emqd p on the cluster with node seed as its one seed, and extra
 * (NULL-terminated, or NULL) after --redis-cluster; asserts that it
 * started and reached the cluster. */
void cf_emqd_start(struct emqd_proc *p, int seed, const char *const *extra);

/* String field k of a reply ("" when absent). */
const char *cf_jstr(const json_t *o, const char *k);

/* Send one request (printf-style) that must answer ok; the reply (caller
 * frees). */
json_t *cf_ok(struct tc_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
