/* Leases: fencing tokens, complete / fail / extend / release, the reaper,
 * delayed jobs and retention. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes_fixture.h"
#include "wait.h"

TestSuite(lease, .init = fx_setup, .fini = fx_teardown, .timeout = 60);

static void zcard(enum key_id key, long long want, const char *what)
{
    redisReply *r = redisCommand(fx_conn, "ZCARD %s", fx_q.names[key]);
    cr_assert_eq(r->integer, want, "%s: %lld, want %lld", what, r->integer, want);
    freeReplyObject(r);
}

/* Enqueue JOB1 in TENa, lease it for 1 ms into *first, and reap it once
 * the lease has run out on the Redis clock. */
static void lease_and_reap(struct leased *first)
{
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{}"), 1);
    long long deadline;
    cr_assert_eq(fx_claim(1, 1, first, &deadline), 1);
    fx_await_past(deadline);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REAP, "100", NULL);
    cr_assert_eq(r->element[0]->integer, 1, "the expired lease is reaped");
    cr_assert_eq(r->element[1]->integer, -1, "no lease left to wait for");
    freeReplyObject(r);
}

LANE_TEST(lease, a_reaped_jobs_old_lease_token_is_refused)
{
    struct leased first, second;
    lease_and_reap(&first);
    redisReply *r;
    char state[32];
    fx_row("JOB1", "state", state, sizeof(state));
    cr_assert_str_eq(state, "pending");

    cr_assert_eq(fx_claim(1, 30000, &second, NULL), 1);
    cr_assert_str_eq(second.job, "JOB1");
    cr_assert_eq(second.attempt, 2, "the reaped attempt counts");
    cr_assert_str_neq(first.lease, second.lease);

    /* The stale worker wakes up: every move with its token is refused. */
    char st[32], code[32];
    fx_complete("JOB1", first.lease, st, sizeof(st));
    cr_assert_str_eq(st, "ELEASE");
    fx_fail("JOB1", first.lease, "boom", "0", "0", st, sizeof(st));
    cr_assert_str_eq(st, "ELEASE");
    fx_error(code, sizeof(code), SCRIPT_EXTEND, "JOB1", first.lease, "1000", NULL);
    cr_assert_str_eq(code, "ELEASE");
    r = lanes_call(fx_conn, &fx_q, SCRIPT_RELEASE, "bye", "delivered", "JOB1", first.lease, NULL);
    cr_assert_str_eq(r->element[0]->str, "ELEASE");
    freeReplyObject(r);

    /* ...and nothing changed: the current holder still holds it. */
    fx_row("JOB1", "state", state, sizeof(state));
    cr_assert_str_eq(state, "active");
    char tok[32];
    fx_row("JOB1", "lease", tok, sizeof(tok));
    cr_assert_str_eq(tok, second.lease);
    fx_complete("JOB1", second.lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed");
}

LANE_TEST(lease, complete_is_refused_for_unknown_jobs_and_idempotent_when_resent)
{
    char st[32];
    fx_complete("JOBnope", "1", st, sizeof(st));
    cr_assert_str_eq(st, "ENOJOB");
    cr_assert_eq(fx_enqueue("JOB1", NULL, "{}"), 1);
    fx_complete("JOB1", "1", st, sizeof(st));
    cr_assert_str_eq(st, "ELEASE", "a pending job has no lease to complete");
    struct leased j;
    cr_assert_eq(fx_claim_flat(1, 30000, &j), 1);
    fx_complete("JOB1", j.lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed");
    fx_complete("JOB1", j.lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed", "a re-sent completion is answered the same");
    fx_complete("JOB1", "999", st, sizeof(st));
    cr_assert_str_eq(st, "ELEASE", "another token is still refused");
    fx_fail("JOB1", j.lease, "late", "0", "0", st, sizeof(st));
    cr_assert_str_eq(st, "ELEASE", "a completed job cannot be failed");
}

/* Enqueue JOB0..JOB3 in lane TENa and lease them into j. */
static void lease_four(struct leased j[4])
{
    char job[16];
    for (int i = 0; i < 4; i++) {
        snprintf(job, sizeof(job), "JOB%d", i);
        cr_assert_eq(fx_enqueue(job, "TENa", "{}"), 1);
    }
    cr_assert_eq(fx_claim(4, 30000, j, NULL), 4);
}

LANE_TEST(lease, complete_coalesces_many_pairs_in_one_call)
{
    struct leased j[4];
    lease_four(j);
    redisReply *r =
        lanes_call(fx_conn, &fx_q, SCRIPT_COMPLETE, "60000", j[0].job, j[0].lease, j[1].job,
                   "999999", j[2].job, j[2].lease, j[3].job, j[3].lease, NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 4);
    cr_assert_str_eq(r->element[0]->str, "completed");
    cr_assert_str_eq(r->element[1]->str, "ELEASE", "one bad pair does not spoil the rest");
    cr_assert_str_eq(r->element[2]->str, "completed");
    cr_assert_str_eq(r->element[3]->str, "completed");
    freeReplyObject(r);
    redisReply *act = redisCommand(fx_conn, "ZCARD %sg:TENa:active", fx_q.prefix);
    cr_assert_eq(act->integer, 1, "gactive[TENa] is the one lease left");
    freeReplyObject(act);
}

/* Completions and fails coalesced into one call take effect one after
 * another in the order given, each answered as it would be alone: a fail
 * after its job's completion, or a completion after its job's fail, finds
 * no lease. */
LANE_TEST(lease, completions_and_fails_settle_in_one_call_in_the_order_given)
{
    struct leased j[4];
    lease_four(j);
    const char *args[] = {
        "60000",    j[0].job, j[0].lease, "fail",     j[1].job, j[1].lease, "boom", "0",
        "0",        "fail",   j[0].job,   j[0].lease, "late",   "0",        "0",    j[1].job,
        j[1].lease, "fail",   j[2].job,   j[2].lease, "poison", "0",        "1",    j[3].job,
        j[3].lease, "fail",   "JOBnone",  "1-1",      "x",      "-1",       "0",
    };
    static const char *const want[] = {"completed", "pending",   "ELEASE", "ELEASE",
                                       "dead",      "completed", "ENOJOB"};
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    redisReply *r =
        lanes_callv(fx_conn, &fx_q, SCRIPT_COMPLETE, (int)(sizeof(args) / sizeof(*args)), args);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->elements, sizeof(want) / sizeof(*want));
    for (size_t i = 0; i < r->elements; i++)
        cr_assert_str_eq(r->element[i]->str, want[i], "item %zu", i);
    freeReplyObject(r);
    cr_assert_eq(fx_script_runs(), 1, "one call settled them all");
    /* With no lane setting, the settled jobs, completed or failed, leave
     * each lease index with one ZREM for the call. */
    cr_assert_eq(fx_calls_of("zrem"), 2, "one ZREM for active, one for the lane's");
    char v[64];
    static const char *const state[] = {"completed", "pending", "dead", "completed"};
    for (int i = 0; i < 4; i++) {
        fx_row(j[i].job, "state", v, sizeof(v));
        cr_assert_str_eq(v, state[i], "%s", j[i].job);
    }
    fx_row(j[1].job, "error", v, sizeof(v));
    cr_assert_str_eq(v, "boom");
    zcard(KEY_ACTIVE, 0, "active");
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENa", NULL), 1, "JOB1 is back in its lane");
    struct leased again;
    cr_assert_eq(fx_claim(1, 30000, &again, NULL), 1);
    cr_assert_str_eq(again.job, j[1].job);
    cr_assert_eq(again.attempt, 2);
}

/* With a ceiling, each settlement gives its permit back as it runs: a
 * lane held off the ring at its ceiling returns once, and its failed job
 * with it. (The fixture checks the ring rule after the test.) */
LANE_TEST(lease, a_fail_among_completions_gives_its_permit_back)
{
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "2", NULL), 1);
    char job[16];
    for (int i = 0; i < 3; i++) {
        snprintf(job, sizeof(job), "JOB%d", i);
        cr_assert_eq(fx_enqueue(job, "TENa", "{}"), 1);
    }
    struct leased j[2];
    cr_assert_eq(fx_claim(2, 30000, j, NULL), 2);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "TENa is at its ceiling");
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_COMPLETE, "60000", "fail", j[0].job,
                               j[0].lease, "boom", "0", "0", j[1].job, j[1].lease, NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_str_eq(r->element[0]->str, "pending");
    cr_assert_str_eq(r->element[1]->str, "completed");
    freeReplyObject(r);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENa", NULL), 2);
}

/* A call with one malformed item is refused whole: the items before it do
 * not take effect either. */
LANE_TEST(lease, a_malformed_settlement_call_changes_nothing)
{
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{}"), 1);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    char code[32], v[32];
    fx_error(code, sizeof(code), SCRIPT_COMPLETE, "60000", j.job, j.lease, "fail", j.job, j.lease,
             "x", "soon", "0", NULL);
    cr_assert_str_eq(code, "EARG");
    fx_error(code, sizeof(code), SCRIPT_COMPLETE, "60000", j.job, j.lease, "fail", j.job, j.lease,
             "x", "0", NULL);
    cr_assert_str_eq(code, "EARG", "a fail item of five");
    fx_error(code, sizeof(code), SCRIPT_COMPLETE, "60000", j.job, j.lease, "fail", j.job, j.lease,
             "x", "1.5", "0", NULL);
    cr_assert_str_eq(code, "EARG", "retry_ms is whole");
    fx_row("JOB1", "state", v, sizeof(v));
    cr_assert_str_eq(v, "active", "the completion before it did not run");
    zcard(KEY_ACTIVE, 1, "active");
}

/* With no lane setting, a claim writes its leases into the lease indexes
 * with one ZADD per index (the queue-wide one and each lane's) and a
 * completion call takes its jobs out with one ZREM per index, each with
 * the deadline the per-job calls would have written; a flat claim, one
 * ZADD. The invariants the fixture checks after the test hold throughout. */
LANE_TEST(lease, a_batch_enters_and_leaves_the_lease_indexes_once_per_index)
{
    char job[16];
    const char *lanes[] = {"TENa", "TENb", "TENc"};
    for (int i = 0; i < 12; i++) {
        snprintf(job, sizeof(job), "JOB%02d", i);
        cr_assert_eq(fx_enqueue(job, lanes[i % 3], "{}"), 1);
    }
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    struct leased j[12];
    long long deadline;
    cr_assert_eq(fx_claim(12, 30000, j, &deadline), 12);
    cr_assert_eq(fx_calls_of("zadd"), 4, "one ZADD for active, one per lane");
    zcard(KEY_ACTIVE, 12, "active");
    for (int i = 0; i < 3; i++) {
        redisReply *r =
            redisCommand(fx_conn, "ZRANGE %sg:%s:active 0 -1 WITHSCORES", fx_q.prefix, lanes[i]);
        cr_assert_eq(r->elements, 8, "%s holds its 4 leases", lanes[i]);
        for (size_t e = 1; e < r->elements; e += 2)
            cr_assert_eq(atoll(r->element[e]->str), deadline, "%s", r->element[e - 1]->str);
        freeReplyObject(r);
    }
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    fx_complete_all(j, 12, "60000");
    cr_assert_eq(fx_calls_of("zrem"), 4, "one ZREM for active, one per lane");
    zcard(KEY_ACTIVE, 0, "active after the completions");
    for (int i = 0; i < 3; i++) {
        redisReply *r = redisCommand(fx_conn, "EXISTS %sg:%s:active", fx_q.prefix, lanes[i]);
        cr_assert_eq(r->integer, 0, "%s has no lease left", lanes[i]);
        freeReplyObject(r);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(job, sizeof(job), "JOBF%d", i);
        cr_assert_eq(fx_enqueue(job, NULL, "{}"), 1);
    }
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    cr_assert_eq(fx_claim_flat(3, 30000, j), 3);
    cr_assert_eq(fx_calls_of("zadd"), 1, "one ZADD for a flat claim");
    zcard(KEY_ACTIVE, 3, "active after the flat claim");
}

/* With a lane setting a completion gives each permit back on its own: a
 * lane at its ceiling re-rings as the completion that frees it runs, in
 * a call that completes several jobs. */
LANE_TEST(lease, completions_under_a_ceiling_give_each_permit_back)
{
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "1", NULL), 1);
    char job[16];
    for (int i = 0; i < 2; i++) {
        snprintf(job, sizeof(job), "JOBA%d", i);
        cr_assert_eq(fx_enqueue(job, "TENa", "{}"), 1);
        snprintf(job, sizeof(job), "JOBB%d", i);
        cr_assert_eq(fx_enqueue(job, "TENb", "{}"), 1);
    }
    struct leased j[4];
    cr_assert_eq(fx_claim(4, 30000, j, NULL), 3, "TENa's ceiling holds its second job");
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "TENa at its ceiling, TENb empty");
    fx_complete_all(j, 3, "60000");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa", "TENa's permit is back");
    cr_assert_eq(fx_claim(4, 30000, j, NULL), 1);
    cr_assert_str_eq(j[0].job, "JOBA1");
}

/* True while job's row exists. */
static bool row_exists(const char *job)
{
    redisReply *r = redisCommand(fx_conn, "EXISTS %sjob:%s", fx_q.prefix, job);
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
    bool there = r->integer == 1;
    freeReplyObject(r);
    return there;
}

/* Claim the one pending job id and complete it with a retention of
 * keep_ms. */
static void complete_with_retention(const char *id, const char *keep_ms)
{
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    cr_assert_str_eq(j.job, id);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_COMPLETE, keep_ms, id, j.lease, NULL);
    cr_assert_str_eq(r->element[0]->str, "completed");
    freeReplyObject(r);
}

/* The retention bucket (lib.lua:retire) that holds job: the done index's
 * bucket whose list has it; asserts there is exactly one. */
static long long bucket_of(const char *job)
{
    redisReply *b = redisCommand(fx_conn, "ZRANGE %sdone 0 -1", fx_q.prefix);
    cr_assert_eq(b->type, REDIS_REPLY_ARRAY);
    long long found = -1;
    for (size_t i = 0; i < b->elements; i++) {
        redisReply *p =
            redisCommand(fx_conn, "LPOS %sdone:%s %s", fx_q.prefix, b->element[i]->str, job);
        if (p->type == REDIS_REPLY_INTEGER) {
            cr_assert_eq(found, -1, "%s is in two buckets", job);
            found = atoll(b->element[i]->str);
        }
        freeReplyObject(p);
    }
    freeReplyObject(b);
    cr_assert_neq(found, -1, "%s is in no retention bucket", job);
    return found;
}

/* One promote of at most 100; returns what it promoted. */
static long long promote(void)
{
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "100", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "promote: %s", r->str ? r->str : "?");
    long long n = r->element[0]->integer;
    freeReplyObject(r);
    return n;
}

/* The field of a row view (job.lua, peek.lua) named f, and how often it
 * is there: every field appears once at most. */
static const char *view_field(const redisReply *row, const char *f, int *times)
{
    const char *v = NULL;
    *times = 0;
    for (size_t i = 0; i + 1 < row->elements; i += 2)
        if (strcmp(row->element[i]->str, f) == 0) {
            v = row->element[i + 1]->str;
            (*times)++;
        }
    return v;
}

/* A lease's deadline is kept in the lease indexes only: the row does not
 * repeat it, and the views read it from the active index while the job
 * is active, also over a stale lease_until that an older emqd left in the
 * row. Extended, the views follow; completed, they show none. */
LANE_TEST(lease, the_views_read_a_lease_deadline_from_the_active_index)
{
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{}"), 1);
    struct leased l[1];
    long long dl;
    cr_assert_eq(fx_claim(1, 60000, l, &dl), 1);
    char v[32];
    fx_row("JOB1", "lease_until", v, sizeof(v));
    cr_assert_str_eq(v, "", "the row holds no deadline");
    freeReplyObject(redisCommand(fx_conn, "HSET %sjob:JOB1 lease_until 5", fx_q.prefix));
    long long nd = fx_int(SCRIPT_EXTEND, "JOB1", l[0].lease, "120000", NULL);
    cr_assert_gt(nd, dl);
    for (int peek = 0; peek < 2; peek++) {
        redisReply *r = peek ? lanes_call(fx_conn, &fx_q, SCRIPT_PEEK, "active", "", "", "10", NULL)
                             : lanes_call(fx_conn, &fx_q, SCRIPT_JOB, "JOB1", NULL);
        cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
        const redisReply *row = peek ? r->element[2] : r;
        int times;
        const char *until = view_field(row, "lease_until", &times);
        cr_assert_eq(times, 1, "lease_until once, not the row's stale one too");
        cr_assert_eq(atoll(until), nd, "the extended deadline, from the index");
        freeReplyObject(r);
    }
    fx_complete_all(l, 1, "3600000");
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_JOB, "JOB1", NULL);
    int times;
    view_field(r, "lease_until", &times);
    cr_assert_eq(times, 0, "a completed job shows no deadline");
    freeReplyObject(r);
}

LANE_TEST(lease, completed_rows_are_kept_for_the_retention_then_retired)
{
    /* Kept for an hour: within the test the row is surely there. */
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{\"big\":1}"), 1);
    complete_with_retention("JOB1", "3600000");
    char v[32];
    fx_row("JOB1", "state", v, sizeof(v));
    cr_assert_str_eq(v, "completed");
    fx_row("JOB1", "payload", v, sizeof(v));
    cr_assert_str_eq(v, "", "the payload is freed at completion");
    /* The job op reads the freed payload and lease_until as absent, and
     * the rest of the row as it was. */
    redisReply *row = lanes_call(fx_conn, &fx_q, SCRIPT_JOB, "JOB1", NULL);
    cr_assert_eq(row->type, REDIS_REPLY_ARRAY);
    bool state = false, attempts = false;
    for (size_t i = 0; i + 1 < row->elements; i += 2) {
        const char *f = row->element[i]->str, *val = row->element[i + 1]->str;
        cr_assert(strcmp(f, "payload") != 0 && strcmp(f, "lease_until") != 0,
                  "a completed row shows no %s (\"%s\")", f, val);
        state = state || (strcmp(f, "state") == 0 && strcmp(val, "completed") == 0);
        attempts = attempts || (strcmp(f, "attempts") == 0 && strcmp(val, "1") == 0);
    }
    cr_assert(state && attempts, "state completed and attempts 1 are kept");
    freeReplyObject(row);
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{}"), 0, "a re-sent id is still a duplicate");

    /* No TTL: the row waits in the retention bucket of the second at or
     * after its completion + the retention, which the done index holds. */
    redisReply *ttl = redisCommand(fx_conn, "PTTL %sjob:JOB1", fx_q.prefix);
    cr_assert_eq(ttl->integer, -1, "a kept row has no TTL (%lld)", ttl->integer);
    freeReplyObject(ttl);
    long long t = bucket_of("JOB1");
    fx_row("JOB1", "finished_ms", v, sizeof(v));
    cr_assert(t % 1000 == 0 && t >= atoll(v) + 3600000 && t < atoll(v) + 3600000 + 1000,
              "bucket %lld is the second at or after finished_ms %s + the retention", t, v);
    cr_assert_eq(promote(), 0, "a bucket not due is left alone");
    cr_assert(row_exists("JOB1"));

    /* Kept for 1 ms: once its bucket is due, the upkeep's promote deletes
     * the row and the id is free again. */
    cr_assert_eq(fx_enqueue("JOB2", "TENa", "{}"), 1);
    complete_with_retention("JOB2", "1");
    long long t2 = bucket_of("JOB2");
    fx_await_past(t2);
    cr_assert(row_exists("JOB2"), "nothing deletes a row but retire");
    promote();
    cr_assert_not(row_exists("JOB2"), "the due bucket's row is deleted");
    cr_assert(row_exists("JOB1"), "the bucket not due is kept");
    redisReply *r = redisCommand(fx_conn, "EXISTS %sdone:%lld", fx_q.prefix, t2);
    cr_assert_eq(r->integer, 0, "the emptied bucket is gone");
    freeReplyObject(r);
    r = redisCommand(fx_conn, "ZSCORE %sdone %lld", fx_q.prefix, t2);
    cr_assert_eq(r->type, REDIS_REPLY_NIL, "and out of the index");
    freeReplyObject(r);
    cr_assert_eq(fx_enqueue("JOB2", "TENa", "{}"), 1, "after the retention the id is free");
}

LANE_TEST(lease, promote_wakes_for_the_next_bucket_and_deletes_at_most_max_rows)
{
    /* Five completed in one call share one bucket (one RPUSH). */
    struct leased j[5];
    fx_lease_n("JOBr", 5, j);
    fx_complete_all(j, 5, "60000");
    long long t = bucket_of("JOBr0");
    redisReply *r = redisCommand(fx_conn, "LLEN %sdone:%lld", fx_q.prefix, t);
    cr_assert_eq(r->integer, 5, "one bucket for the call's completions");
    freeReplyObject(r);

    /* Nothing else is due: promote sleeps until the bucket is. */
    r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "2", NULL);
    long long next = r->element[1]->integer, now = fx_now_ms();
    cr_assert(next > 0 && now + next >= t - 5 && next <= 61000,
              "next %lld ms is the bucket's due time %lld (now %lld)", next, t, now);
    freeReplyObject(r);

    /* Due: at most max rows per call, and next 0 while rows are left. */
    struct leased d[3];
    fx_lease_n("JOBs", 3, d);
    fx_complete_all(d, 3, "1");
    fx_await_past(bucket_of("JOBs0"));
    r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "2", NULL);
    cr_assert_eq(r->element[1]->integer, 0, "a due row is left: call again at once");
    freeReplyObject(r);
    int left = 0;
    for (int i = 0; i < 3; i++)
        left += row_exists(d[i].job);
    cr_assert_eq(left, 1, "two of the three due rows went");
    r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "2", NULL);
    cr_assert_gt(r->element[1]->integer, 0, "then it sleeps until the next bucket");
    freeReplyObject(r);
    for (int i = 0; i < 3; i++)
        cr_assert_not(row_exists(d[i].job), "%s went", d[i].job);
    for (int i = 0; i < 5; i++)
        cr_assert(row_exists(j[i].job), "%s is not due", j[i].job);
}

LANE_TEST(lease, fail_retries_through_delayed_then_dead_letters)
{
    cr_assert_eq(fx_enqueue_delayed("JOB1", "TENa", 0, 2), 1);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    char st[16];
    fx_fail("JOB1", j.lease, "boom", "300", "0", st, sizeof(st));
    cr_assert_str_eq(st, "delayed");
    cr_assert_eq(fx_calls_of("hmget"), 1, "the attempts read with the lease check");
    char v[64];
    fx_row("JOB1", "error", v, sizeof(v));
    cr_assert_str_eq(v, "boom");
    zcard(KEY_DELAYED, 1, "delayed");
    zcard(KEY_ACTIVE, 0, "active");
    struct leased none;
    cr_assert_eq(fx_claim(1, 30000, &none, NULL), 0, "not claimable before it is due");

    /* Due 300 ms after the fail, by Redis's clock. A promote run before
     * that finds nothing due and the next one due within the delay; one
     * run after it promotes the job. Which one this is shows in the
     * clock read just after it. */
    redisReply *due = redisCommand(fx_conn, "ZSCORE %s JOB1", fx_q.names[KEY_DELAYED]);
    long long at = atoll(due->str);
    freeReplyObject(due);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "100", NULL);
    long long after = fx_now_ms();
    if (r->element[0]->integer == 0) {
        cr_assert_geq(r->element[1]->integer, 0);
        cr_assert_leq(r->element[1]->integer, 300, "next due within the retry delay");
        freeReplyObject(r);
        fx_await_past(at);
        r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "100", NULL);
    } else {
        cr_assert_geq(after, at, "promoted before it was due");
    }
    cr_assert_eq(r->element[0]->integer, 1);
    cr_assert_eq(r->element[1]->integer, -1);
    freeReplyObject(r);

    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    cr_assert_eq(j.attempt, 2);
    fx_fail("JOB1", j.lease, "again", "40", "0", st, sizeof(st));
    cr_assert_str_eq(st, "dead", "max_attempts 2 is spent");
    zcard(KEY_DEAD, 1, "dead");
    fx_row("JOB1", "state", v, sizeof(v));
    cr_assert_str_eq(v, "dead");
}

LANE_TEST(lease, fail_with_dead_flag_or_zero_retry)
{
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOB2", "TENa", "{}"), 1);
    struct leased j[2];
    cr_assert_eq(fx_claim(2, 30000, j, NULL), 2);
    char st[16];
    fx_fail("JOB1", j[0].lease, "poison", "0", "1", st, sizeof(st));
    cr_assert_str_eq(st, "dead");
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    fx_fail("JOB2", j[1].lease, "flaky", "0", "0", st, sizeof(st));
    cr_assert_str_eq(st, "pending", "retry_ms 0 goes straight back to the lane");
    /* The lease check reads the attempts too, and the row is written once
     * (state, ready_ms and error together). */
    cr_assert_eq(fx_calls_of("hmget"), 1);
    cr_assert_eq(fx_calls_of("hset"), 1);
    char v[32];
    fx_row("JOB2", "error", v, sizeof(v));
    cr_assert_str_eq(v, "flaky");
    fx_row("JOB2", "state", v, sizeof(v));
    cr_assert_str_eq(v, "pending");
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENa", NULL), 1);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");
}

LANE_TEST(lease, default_backoff_doubles_per_attempt)
{
    cr_assert_eq(fx_enqueue("JOB1", NULL, "{}"), 1);
    struct leased j;
    cr_assert_eq(fx_claim_flat(1, 30000, &j), 1);
    /* The fail runs between these two readings of Redis's clock. */
    long long before = fx_now_ms();
    char st[16];
    fx_fail("JOB1", j.lease, "x", "-1", "0", st, sizeof(st));
    long long after = fx_now_ms();
    cr_assert_str_eq(st, "delayed");
    redisReply *r = redisCommand(fx_conn, "ZSCORE %s JOB1", fx_q.names[KEY_DELAYED]);
    long long due = atoll(r->str);
    freeReplyObject(r);
    cr_assert(due >= before + 1000 && due <= after + 1000,
              "first retry 1 s after the fail: due %lld ms after the reading before it",
              due - before);
}

LANE_TEST(lease, extend_moves_the_deadline_so_the_reaper_skips_it)
{
    cr_assert_eq(fx_enqueue("JOB1", "TENa", "{}"), 1);
    struct leased j;
    long long deadline;
    cr_assert_eq(fx_claim(1, 20, &j, &deadline), 1);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_EXTEND, "JOB1", j.lease, "60000", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER);
    cr_assert_gt(r->integer, deadline + 50000);
    long long extended = r->integer;
    freeReplyObject(r);
    fx_await_past(deadline); /* the original lease has run out */
    r = lanes_call(fx_conn, &fx_q, SCRIPT_REAP, "100", NULL);
    cr_assert_eq(r->element[0]->integer, 0, "an extended lease is not reaped");
    cr_assert_gt(r->element[1]->integer, 50000, "next expiry is the extended one");
    freeReplyObject(r);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_REAP_GROUP, "TENa", "100", NULL);
    cr_assert_eq(r->integer, 0, "the group's lease index was extended too");
    freeReplyObject(r);
    cr_assert_eq(fx_deadline("JOB1"), extended);
}

LANE_TEST(lease, release_returns_jobs_at_once_with_the_attempt_counted)
{
    cr_assert_eq(fx_enqueue_delayed("JOB1", "TENa", 0, 1), 1);
    cr_assert_eq(fx_enqueue_delayed("JOB2", "TENa", 0, 0), 1);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "2", NULL), 1);
    struct leased j[2];
    cr_assert_eq(fx_claim(2, 30000, j, NULL), 2);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "");
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_RELEASE, "connection closed", "delivered",
                               j[0].job, j[0].lease, j[1].job, j[1].lease, NULL);
    cr_assert_eq(r->elements, 2);
    cr_assert_str_eq(r->element[0]->str, "dead", "JOB1 had max_attempts 1");
    cr_assert_str_eq(r->element[1]->str, "pending");
    freeReplyObject(r);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");
    struct leased again;
    cr_assert_eq(fx_claim(1, 30000, &again, NULL), 1);
    cr_assert_str_eq(again.job, "JOB2");
    cr_assert_eq(again.attempt, 2);
    char err[64];
    fx_row("JOB1", "error", err, sizeof(err));
    cr_assert_str_eq(err, "connection closed");
}

/* Assert that job's row field is want. */
static void expect_field(const char *job, const char *field, const char *want)
{
    char v[64];
    fx_row(job, field, v, sizeof(v));
    cr_assert_str_eq(v, want, "%s's %s is \"%s\", want \"%s\"", job, field, v, want);
}

/* A worker giving a job back on purpose (the release op) returns the
 * attempt: a job allowed one attempt goes back to its lane, not dead, and
 * is served again as a first attempt; the reason is on the row. */
LANE_TEST(lease, a_returned_release_gives_the_attempt_back_and_never_dead_letters)
{
    cr_assert_eq(fx_enqueue_delayed("JOB1", "TENa", 0, 1), 1);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_RELEASE, "worker shutting down", "returned",
                               j.job, j.lease, NULL);
    cr_assert_eq(r->elements, 1);
    cr_assert_str_eq(r->element[0]->str, "pending", "not dead: the attempt came back");
    freeReplyObject(r);
    expect_field("JOB1", "attempts", "0");
    expect_field("JOB1", "error", "worker shutting down");
    struct leased again;
    cr_assert_eq(fx_claim(1, 30000, &again, NULL), 1);
    cr_assert_eq(again.attempt, 1);
    char code[32];
    fx_error(code, sizeof(code), SCRIPT_RELEASE, "why", "sideways", again.job, again.lease, NULL);
    cr_assert_str_eq(code, "EARG", "an unknown mode is refused");
}

LANE_TEST(lease, reap_dead_letters_when_attempts_are_spent)
{
    cr_assert_eq(fx_enqueue_delayed("JOB1", NULL, 0, 1), 1);
    struct leased j;
    cr_assert_eq(fx_claim_flat(1, 1, &j), 1);
    fx_await_past(fx_now_ms() + 1); /* the 1 ms lease, taken before now, has run out */
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REAP, "100", NULL);
    cr_assert_eq(r->element[0]->integer, 1);
    freeReplyObject(r);
    expect_field("JOB1", "state", "dead");
    expect_field("JOB1", "error", "lease expired");
}

LANE_TEST(lease, reap_is_bounded_per_call)
{
    char job[16];
    for (int i = 0; i < 10; i++) {
        snprintf(job, sizeof(job), "JOB%02d", i);
        cr_assert_eq(fx_enqueue(job, "TENa", "{}"), 1);
    }
    struct leased j[10];
    long long deadline;
    cr_assert_eq(fx_claim(10, 1, j, &deadline), 10);
    fx_await_past(deadline);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_REAP, "4", NULL);
    cr_assert_eq(r->element[0]->integer, 4);
    cr_assert_eq(r->element[1]->integer, 0, "more are already due");
    freeReplyObject(r);
    r = lanes_call(fx_conn, &fx_q, SCRIPT_REAP, "100", NULL);
    cr_assert_eq(r->element[0]->integer, 6);
    freeReplyObject(r);
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENa", NULL), 10);
}

LANE_TEST(lease, delayed_enqueue_waits_for_promote)
{
    cr_assert_eq(fx_enqueue_delayed("JOB1", "TENa", 30, 0), 1);
    char v[32];
    fx_row("JOB1", "state", v, sizeof(v));
    cr_assert_str_eq(v, "delayed");
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 0);
    redisReply *due = redisCommand(fx_conn, "ZSCORE %s JOB1", fx_q.names[KEY_DELAYED]);
    long long at = atoll(due->str);
    freeReplyObject(due);
    fx_await_past(at);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_PROMOTE, "10", NULL);
    cr_assert_eq(r->element[0]->integer, 1);
    freeReplyObject(r);
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    cr_assert_str_eq(j.job, "JOB1");
}

LANE_TEST(lease, bad_arguments_are_refused)
{
    char code[32];
    fx_error(code, sizeof(code), SCRIPT_CLAIM, "0", "1000", NULL);
    cr_assert_str_eq(code, "EARG");
    fx_error(code, sizeof(code), SCRIPT_CLAIM, "1", "x", NULL);
    cr_assert_str_eq(code, "EARG");
    fx_error(code, sizeof(code), SCRIPT_EXTEND, "JOB1", "1", "0", NULL);
    cr_assert_str_eq(code, "EARG");
    fx_error(code, sizeof(code), SCRIPT_COMPLETE, "1000", "fail", "JOB1", "1", "e", "-5", "0",
             NULL);
    cr_assert_str_eq(code, "EARG");
    fx_error(code, sizeof(code), SCRIPT_EXTEND, "JOBnone", "1", "10", NULL);
    cr_assert_str_eq(code, "ENOJOB");
    fx_error(code, sizeof(code), SCRIPT_COMPLETE, "1000", "JOB1", NULL);
    cr_assert_str_eq(code, "EARG");
}

/* A lease nobody received (its consumer left while the claim was in
 * flight) goes back with its attempt given back and no error recorded;
 * an unknown mode is refused. */
LANE_TEST(lease, undelivered_release_gives_the_attempt_back)
{
    cr_assert_eq(fx_enqueue_delayed("JOB1", "TENa", 0, 1), 1);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    cr_assert_eq(j.attempt, 1);
    char code[64];
    fx_error(code, sizeof(code), SCRIPT_RELEASE, "gone", "maybe", "JOB1", j.lease, NULL);
    cr_assert_str_eq(code, "EARG");
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_RELEASE, "consumer gone", "undelivered",
                               "JOB1", j.lease, NULL);
    cr_assert_eq(r->elements, 1);
    cr_assert_str_eq(r->element[0]->str, "pending", "max_attempts 1, yet not dead");
    freeReplyObject(r);
    char err[64];
    fx_row("JOB1", "error", err, sizeof(err));
    cr_assert_str_eq(err, "", "no error recorded");
    struct leased again;
    cr_assert_eq(fx_claim(1, 30000, &again, NULL), 1);
    cr_assert_eq(again.attempt, 1, "the attempt was given back");
}

/* A store that rolls back (a crash loses its last writes, the lease
 * counter among them) counts the same lease numbers again. The tokens must
 * still differ, or the worker that held the job before the crash could
 * settle the lease of the one that holds it now. Emulated: the lease
 * expires and is reaped, the counter is set back, the job is leased
 * again. */
LANE_TEST(lease, a_token_stays_unique_when_the_store_rolls_back_its_counter)
{
    struct leased first, second;
    lease_and_reap(&first);
    redisReply *r = redisCommand(fx_conn, "SET %s 0", fx_q.names[KEY_SEQ]);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS);
    freeReplyObject(r);
    cr_assert_eq(fx_claim(1, 30000, &second, NULL), 1);
    cr_assert_str_eq(second.job, "JOB1");
    cr_assert_str_neq(first.lease, second.lease, "the same lease number, another token");
    cr_assert_leq(strlen(second.lease), 23, "within the wire's bound");
    char st[32];
    fx_complete("JOB1", first.lease, st, sizeof(st));
    cr_assert_str_eq(st, "ELEASE", "the token from before the rollback is fenced");
    fx_complete("JOB1", second.lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed");
}

/* A claim stops once the payloads it leased add up to max_bytes (ARGV 5;
 * the job that crosses it is served), grouped or flat, and leaves the rest
 * as they were for the next claim. */
LANE_TEST(lease, a_claim_stops_at_its_byte_bound)
{
    char big[1100];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    char payload[1200];
    snprintf(payload, sizeof(payload), "\"%s\"", big); /* 1,101 bytes of JSON */
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof(id), "JOBg%d", i);
        cr_assert_eq(fx_enqueue(id, "TENa", payload), 1);
        snprintf(id, sizeof(id), "JOBf%d", i);
        cr_assert_eq(fx_enqueue(id, NULL, payload), 1);
    }
    for (int flat = 0; flat < 2; flat++) {
        redisReply *r = lanes_call(fx_conn, &fx_q, flat ? SCRIPT_CLAIM_FLAT : SCRIPT_CLAIM, "5",
                                   "30000", "0", "2500", NULL);
        cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
        cr_assert_eq((r->elements - 1) / 5, 3, "1101 + 1101 < 2500 <= 3 x 1101: three jobs");
        freeReplyObject(r);
        r = lanes_call(fx_conn, &fx_q, flat ? SCRIPT_CLAIM_FLAT : SCRIPT_CLAIM, "5", "30000", "0",
                       "0", NULL);
        cr_assert_eq((r->elements - 1) / 5, 2, "the other two are still there, in order");
        cr_assert_str_eq(r->element[1]->str, flat ? "JOBf3" : "JOBg3");
        freeReplyObject(r);
    }
    fx_assert_invariants(&fx_q);
}
