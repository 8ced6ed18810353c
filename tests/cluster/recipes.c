/* recipes: see recipes.h. Job ids and groups are named for the recipe
 * (JOBcl1, TENcla: claim), so a failure names the recipe it came from. */
#include "recipes.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_fixture.h"

static void r_check(void)
{
    cr_assert_eq(fx_enqueue("JOBck1", "TENck", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBck2", "TENck", "{}"), 1);
    struct leased l = cf_claim_one(false, 60000);
    fx_assert_invariants(&fx_q); /* check.lua: a lane, a lease, no violation */
    cf_complete(&l);
    cf_settle();
}

static void r_claim(void)
{
    cr_assert_eq(fx_enqueue("JOBcl1", "TENcla", "{\"n\":1}"), 1);
    cr_assert_eq(fx_enqueue("JOBcl2", "TENcla", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBcl3", "TENclb", "{}"), 1);
    struct leased l[4];
    long long dl, now = fx_now_ms();
    cr_assert_eq(fx_claim(4, 60000, l, &dl), 3);
    cr_assert_geq(dl, now + 60000);
    /* One lane head per turn: TENcla, TENclb, TENcla. */
    const char *order[][2] = {{"JOBcl1", "TENcla"}, {"JOBcl3", "TENclb"}, {"JOBcl2", "TENcla"}};
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(l[i].job, order[i][0]);
        cr_assert_str_eq(l[i].group, order[i][1]);
        cr_assert_eq(l[i].attempt, 1);
        cf_expect_row(l[i].job, "state", "active");
        cf_expect_row(l[i].job, "lease", l[i].lease);
    }
    cr_assert_str_eq(l[0].payload, "{\"n\":1}");
    for (int i = 0; i < 3; i++)
        cf_complete(&l[i]);
}

static void r_claim_flat(void)
{
    cr_assert_eq(fx_enqueue("JOBcf1", NULL, "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBcf2", NULL, "{}"), 1);
    struct leased l[4];
    cr_assert_eq(fx_claim_flat(4, 60000, l), 2);
    cr_assert_str_eq(l[0].job, "JOBcf1");
    cr_assert_str_eq(l[1].job, "JOBcf2");
    cr_assert_str_eq(l[0].group, "");
    cf_complete(&l[0]);
    cf_complete(&l[1]);
}

/* Fail l (a 'fail' item of complete.lua, alone in its call) with error
 * why; its status must be state. */
static void expect_fail(const struct leased *l, const char *why, const char *retry,
                        const char *dead, const char *state)
{
    redisReply *r =
        cf_array(1, SCRIPT_COMPLETE, "86400000", "fail", l->job, l->lease, why, retry, dead, NULL);
    cf_expect_str_at(r, 0, state);
    freeReplyObject(r);
}

static void r_fail(void);

static void r_complete(void)
{
    cr_assert_eq(fx_enqueue("JOBco1", "TENco", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBco2", NULL, "{}"), 1);
    struct leased g = cf_claim_one(false, 60000), f = cf_claim_one(true, 60000);
    char st[32];
    cf_complete(&g);
    cf_complete(&g); /* a re-sent completion answers the same */
    cf_expect_row("JOBco1", "state", "completed");
    fx_complete("JOBco1", "0-0", st, sizeof(st));
    cr_assert_str_eq(st, "ELEASE");
    fx_complete("JOBnone", "0-0", st, sizeof(st));
    cr_assert_str_eq(st, "ENOJOB");
    redisReply *r = cf_array(1, SCRIPT_COMPLETE, "0", f.job, f.lease, NULL);
    cf_expect_str_at(r, 0, "completed");
    freeReplyObject(r);
    cr_assert(!cf_row_exists("JOBco2"), "retention 0 deletes the row");
    r_fail();
}

static void r_dead(void)
{
    cr_assert_eq(fx_enqueue_delayed("JOBdd1", "TENdd", 0, 1), 1);
    struct leased l = cf_claim_one(false, 60000);
    expect_fail(&l, "boom", "0", "0", "dead"); /* one attempt allowed */
    redisReply *r = cf_array(5, SCRIPT_DEAD, "list", "", "10", NULL);
    cf_expect_str_at(r, 0, "JOBdd1");
    cf_expect_str_at(r, 1, "TENdd");
    cr_assert_eq(cf_int_at(r, 2), 1);
    cf_expect_str_at(r, 3, "boom");
    cr_assert_gt(cf_int_at(r, 4), 0);
    freeReplyObject(r);
    cr_assert_eq(fx_int(SCRIPT_DEAD, "retry", "JOBdd1", "10", NULL), 1);
    cf_expect_row("JOBdd1", "state", "pending");
    l = cf_claim_one(false, 60000);
    expect_fail(&l, "again", "0", "1", "dead");
    cr_assert_eq(fx_int(SCRIPT_DEAD, "purge", "", "10", NULL), 1);
    cr_assert(!cf_row_exists("JOBdd1"), "purge deletes the row");
}

static void r_depth(void)
{
    cr_assert_eq(fx_enqueue("JOBde1", "TENde", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBde2", "TENde", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBde3", NULL, "{}"), 1);
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENde", NULL), 2);
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "", NULL), 1);
    cf_settle();
}

static void r_drain(void)
{
    cr_assert_eq(fx_enqueue("JOBdr1", "TENdr", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBdr2", "TENdr", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBdr3", "TENdr", "{}"), 1);
    redisReply *r = cf_array(2, SCRIPT_DRAIN, "TENdr", "2", NULL);
    cr_assert_eq(cf_int_at(r, 0), 2);
    cr_assert_eq(cf_int_at(r, 1), 1);
    freeReplyObject(r);
    r = cf_array(2, SCRIPT_DRAIN, "TENdr", "2", NULL);
    cr_assert_eq(cf_int_at(r, 0), 1);
    cr_assert_eq(cf_int_at(r, 1), 0);
    freeReplyObject(r);
    cr_assert(!cf_row_exists("JOBdr1") && !cf_row_exists("JOBdr3"), "drained rows are deleted");
}

static void r_enqueue(void)
{
    /* A hand-off (nothing else serviceable): enqueued and leased at once. */
    redisReply *r = cf_array(7, SCRIPT_ENQUEUE, "JOBen1", "TENen", "{\"h\":1}", "0", "0", "60000",
                             "tagEN", NULL);
    cr_assert_eq(cf_int_at(r, 0), 1);
    cf_expect_str_at(r, 2, "JOBen1");
    cf_expect_str_at(r, 3, "TENen");
    cf_expect_str_at(r, 4, "{\"h\":1}");
    struct leased h = {.job = "JOBen1"};
    snprintf(h.lease, sizeof(h.lease), "%s", r->element[6]->str);
    freeReplyObject(r);
    cf_expect_row("JOBen1", "lease_by", "tagEN");
    cr_assert_eq(fx_enqueue("JOBen2", "TENen", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBen2", "TENen", "{}"), 0, "a duplicate changes nothing");
    cr_assert_eq(fx_enqueue("JOBen3", NULL, "{}"), 1);
    cf_expect_row("JOBen2", "state", "pending");
    cf_expect_row("JOBen3", "group", "");
    cf_complete(&h);
    cf_settle();
}

static void r_enqueue_many(void)
{
    /* A grouped, a flat and a delayed item, a duplicate, and an item the
     * script refuses on its own: one verdict each, in order. */
    redisReply *r = cf_array(5, SCRIPT_ENQUEUE_MANY, "JOBem1", "TENem", "{}", "0", "0", "JOBem2",
                             "", "{}", "0", "0", "JOBem3", "TENem", "{}", "60000", "0", "JOBem1",
                             "TENem", "{}", "0", "0", "NOTem", "TENem", "{}", "0", "0", NULL);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(cf_int_at(r, i), 1);
    cr_assert_eq(cf_int_at(r, 3), 0, "a duplicate changes nothing");
    cr_assert_eq(r->element[4]->type, REDIS_REPLY_ERROR);
    cr_assert(strncmp(r->element[4]->str, "EKIND", 5) == 0, "%s", r->element[4]->str);
    freeReplyObject(r);
    cf_expect_row("JOBem1", "state", "pending");
    cf_expect_row("JOBem2", "group", "");
    cf_expect_row("JOBem3", "state", "delayed");
    cr_assert(!cf_row_exists("NOTem"));
    freeReplyObject(cf_call(SCRIPT_REMOVE, "JOBem3", NULL));
    cf_settle();
}

static void r_extend(void)
{
    cr_assert_eq(fx_enqueue("JOBex1", "TENex", "{}"), 1);
    struct leased l[1];
    long long dl;
    cr_assert_eq(fx_claim(1, 60000, l, &dl), 1);
    long long nd = fx_int(SCRIPT_EXTEND, l[0].job, l[0].lease, "120000", NULL);
    cr_assert_gt(nd, dl);
    cr_assert_eq(fx_deadline("JOBex1"), nd);
    redisReply *r = redisCommand(fx_conn, "ZSCORE %sg:TENex:active JOBex1", fx_q.prefix);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING && atoll(r->str) == nd);
    freeReplyObject(r);
    cf_complete(&l[0]);
}

/* complete.lua's fail items (section 5 of ARCHITECTURE: fails settle in
 * the completions' call). */
static void r_fail(void)
{
    cr_assert_eq(fx_enqueue("JOBfa1", "TENfa", "{}"), 1);
    struct leased l = cf_claim_one(false, 60000);
    expect_fail(&l, "boom", "0", "0", "pending");
    cf_expect_row("JOBfa1", "error", "boom");
    l = cf_claim_one(false, 60000);
    cr_assert_eq(l.attempt, 2);
    expect_fail(&l, "boom", "1", "0", "delayed");
    redisReply *r = redisCommand(fx_conn, "ZSCORE %s JOBfa1", fx_q.names[KEY_DELAYED]);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    fx_await_past(atoll(r->str));
    freeReplyObject(r);
    r = cf_array(2, SCRIPT_PROMOTE, "10", NULL);
    cr_assert_eq(cf_int_at(r, 0), 1);
    freeReplyObject(r);
    l = cf_claim_one(false, 60000);
    expect_fail(&l, "boom", "0", "1", "dead");
    cr_assert_eq(fx_int(SCRIPT_DEAD, "purge", "JOBfa1", "1", NULL), 1);
}

/* One page after another of groups.lua; the numbers of group g into
 * out[5] (depth, active, limit, paused, weight); false if g is not
 * listed. */
static bool group_numbers(const char *g, long long out[5])
{
    char cursor[32] = "0";
    bool found = false;
    do {
        redisReply *r = cf_call(SCRIPT_GROUPS, cursor, "100", NULL);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        cr_assert_eq((r->elements - 1) % 15, 0);
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        for (size_t i = 1; i < r->elements; i += 15) {
            if (strcmp(r->element[i]->str, g) != 0)
                continue;
            found = true;
            for (int j = 0; j < 5; j++)
                out[j] = cf_int_at(r, i + 1 + j);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return found;
}

static void r_groups(void)
{
    cr_assert_eq(fx_enqueue("JOBgr1", "TENgr", "{}"), 1);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENgr", "5", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, "TENgr", "7", NULL), 1);
    long long n[5];
    cr_assert(group_numbers("TENgr", n), "groups does not list TENgr");
    cr_assert(n[0] == 1 && n[1] == 0 && n[2] == 5 && n[3] == 0 && n[4] == 7,
              "TENgr: depth %lld active %lld limit %lld paused %lld weight %lld", n[0], n[1], n[2],
              n[3], n[4]);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENgr", "0", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, "TENgr", "0", NULL), 1);
    cf_settle();
}

static void r_job(void)
{
    cr_assert_eq(fx_enqueue("JOBjo1", "TENjo", "{\"x\":1}"), 1);
    redisReply *r = cf_call(SCRIPT_JOB, "JOBjo1", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    int seen = 0;
    for (size_t i = 0; i + 1 < r->elements; i += 2) {
        const char *f = r->element[i]->str, *v = r->element[i + 1]->str;
        if ((strcmp(f, "state") == 0 && strcmp(v, "pending") == 0) ||
            (strcmp(f, "group") == 0 && strcmp(v, "TENjo") == 0) ||
            (strcmp(f, "payload") == 0 && strcmp(v, "{\"x\":1}") == 0))
            seen++;
    }
    freeReplyObject(r);
    cr_assert_eq(seen, 3, "job's row lacks its state, group or payload");
    freeReplyObject(cf_array(0, SCRIPT_JOB, "JOBnone", NULL));
    cf_settle();
}

static void r_peek(void)
{
    cr_assert_eq(fx_enqueue("JOBpk1", "TENpk", "{\"p\":1}"), 1);
    cr_assert_eq(fx_enqueue("JOBpk2", "TENpk", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBpk3", NULL, "{}"), 1);
    /* The lane, one job a page: the first page's cursor is its last id. */
    redisReply *r = cf_array(3, SCRIPT_PEEK, "lane", "TENpk", "", "1", "0", NULL);
    cf_expect_str_at(r, 0, "JOBpk1");
    cf_expect_str_at(r, 1, "JOBpk1");
    cr_assert_eq(r->element[2]->type, REDIS_REPLY_ARRAY, "a row");
    freeReplyObject(r);
    r = cf_array(3, SCRIPT_PEEK, "lane", "TENpk", "JOBpk1", "1", "0", NULL);
    cf_expect_str_at(r, 0, "");
    cf_expect_str_at(r, 1, "JOBpk2");
    freeReplyObject(r);
    freeReplyObject(cf_array(3, SCRIPT_PEEK, "flat", "", "", "10", "0", NULL));
    struct leased l = cf_claim_one(false, 60000);
    r = cf_array(3, SCRIPT_PEEK, "active", "TENpk", "", "10", "0", NULL);
    cf_expect_str_at(r, 1, l.job);
    freeReplyObject(r);
    freeReplyObject(cf_array(3, SCRIPT_PEEK, "active", "", "", "10", "0", NULL));
    freeReplyObject(cf_array(1, SCRIPT_PEEK, "delayed", "", "", "10", "0", NULL));
    freeReplyObject(cf_array(1, SCRIPT_PEEK, "dead", "", "", "10", "0", NULL));
    cf_complete(&l);
    cf_settle();
}

static void r_remove(void)
{
    cr_assert_eq(fx_enqueue("JOBrm1", "TENrm", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBrm2", NULL, "{}"), 1);
    cr_assert_eq(fx_enqueue_delayed("JOBrm3", NULL, 3600000, 0), 1);
    const char *jobs[] = {"JOBrm1", "JOBrm2", "JOBrm3"};
    const char *was[] = {"pending", "pending", "delayed"};
    for (int i = 0; i < 3; i++) {
        redisReply *r = cf_call(SCRIPT_REMOVE, jobs[i], NULL);
        cr_assert_str_eq(r->str, was[i], "%s", jobs[i]);
        freeReplyObject(r);
        cr_assert_not(cf_row_exists(jobs[i]));
    }
    cf_settle();
}

/* format: a delayed job taken out of its group's index (as a store an
 * older emqd wrote holds it) is put back by the walk, which touches the
 * marker, the row and the index, all keys built from the prefix. */
static void r_format(void)
{
    cr_assert_eq(fx_enqueue_delayed("JOBfm1", "TENfm", 3600000, 0), 1);
    char key[128];
    snprintf(key, sizeof(key), "%sg:TENfm:delayed", fx_q.prefix);
    cr_assert_eq(cf_key_int("DEL", key), 1);
    char marker[128];
    snprintf(marker, sizeof(marker), "%sformat", fx_q.prefix);
    cf_key_int("DEL", marker); /* a walk from the start, whatever ran before */
    redisReply *r = cf_array(2, SCRIPT_FORMAT, "100", NULL);
    cr_assert_eq(cf_int_at(r, 0), 1, "done in one step");
    cr_assert_eq(cf_int_at(r, 1), 1, "JOBfm1 indexed");
    freeReplyObject(r);
    cr_assert_eq(cf_key_int("ZCARD", key), 1);
    r = cf_call(SCRIPT_REMOVE, "JOBfm1", NULL);
    freeReplyObject(r);
    cf_settle();
}

static void r_forget(void)
{
    cr_assert_eq(fx_enqueue("JOBfg1", "TENfg", "{}"), 1);
    char code[32];
    fx_error(code, sizeof(code), SCRIPT_FORGET, NULL);
    cr_assert_str_eq(code, "ESTATE", "a queue with a pending job");
    cr_assert(cf_row_exists("JOBfg1"), "a refused forget keeps the job");
    redisReply *r = cf_call(SCRIPT_REMOVE, "JOBfg1", NULL);
    freeReplyObject(r);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENfg", "3", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_FORGET, NULL), 1);
    cr_assert_eq(cf_key_int("EXISTS", fx_q.names[KEY_GLIMIT]), 0, "the ceilings went with it");
    cr_assert_eq(cf_key_int("EXISTS", fx_q.names[KEY_GROUPS]), 0, "the group registry too");
}

static void r_limit(void)
{
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENli", "1", NULL), 1);
    cr_assert_eq(fx_enqueue("JOBli1", "TENli", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBli2", "TENli", "{}"), 1);
    struct leased a = cf_claim_one(false, 60000), l[2];
    cr_assert_eq(fx_claim(2, 60000, l, NULL), 0, "TENli is at its ceiling of 1");
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENli", "0", NULL), 1);
    struct leased b = cf_claim_one(false, 60000);
    cr_assert_str_eq(b.job, "JOBli2");
    cf_complete(&a);
    cf_complete(&b);
}

static void r_weight(void)
{
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, "TENwa", "2", NULL), 1);
    cr_assert_eq(fx_enqueue("JOBwe1", "TENwa", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBwe2", "TENwa", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBwe3", "TENwb", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBwe4", "TENwa", "{}"), 1);
    /* One at a time, so the turn of TENwa (weight 2) spans claims. */
    const char *order[] = {"JOBwe1", "JOBwe2", "JOBwe3", "JOBwe4"};
    struct leased l[4];
    for (int i = 0; i < 4; i++) {
        l[i] = cf_claim_one(false, 60000);
        cr_assert_str_eq(l[i].job, order[i], "claim %d", i);
    }
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, "TENwa", "0", NULL), 1);
    for (int i = 0; i < 4; i++)
        cf_complete(&l[i]);
    cf_settle();
}

static void r_rate(void)
{
    /* One lease per 50 ms: the second job waits in the throttled index
     * until promote returns the lane. */
    cr_assert_eq(fx_int(SCRIPT_RATE, "TENrl", "1", "50", NULL), 1);
    cr_assert_eq(fx_enqueue("JOBrl1", "TENrl", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBrl2", "TENrl", "{}"), 1);
    struct leased a = cf_claim_one(false, 60000), l[2];
    cr_assert_str_eq(a.job, "JOBrl1");
    cr_assert_eq(fx_claim(2, 60000, l, NULL), 0, "TENrl is held by its rate");
    long long now = fx_now_ms();
    fx_await_past(now + 50);
    redisReply *r = cf_call(SCRIPT_PROMOTE, "10", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    freeReplyObject(r);
    struct leased b = cf_claim_one(false, 60000);
    cr_assert_str_eq(b.job, "JOBrl2");
    cr_assert_eq(fx_int(SCRIPT_RATE, "TENrl", "0", "0", NULL), 1);
    cf_complete(&a);
    cf_complete(&b);
    cf_settle();
}

static void r_cap(void)
{
    /* A cap of 1: the second job, delayed or not, is refused and written
     * nowhere; the lane's delayed index is in the queue's slot. */
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENcp", "1", NULL), 1);
    cr_assert_eq(fx_enqueue_delayed("JOBcp1", "TENcp", 60000, 0), 1);
    redisReply *r = cf_call(SCRIPT_ENQUEUE, "JOBcp2", "TENcp", "{}", "0", "0", NULL);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3 && r->element[0]->integer == -1 &&
                  r->element[1]->integer == 1,
              "refused by the cap of 1");
    freeReplyObject(r);
    cr_assert(!cf_row_exists("JOBcp2"), "a refusal writes no row");
    r = cf_call(SCRIPT_REMOVE, "JOBcp1", NULL);
    freeReplyObject(r);
    cr_assert_eq(fx_int(SCRIPT_CAP, "TENcp", "0", NULL), 1);
    cf_settle();
}

static void r_pause(void)
{
    cr_assert_eq(fx_enqueue("JOBpa1", "TENpa", "{}"), 1);
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENpa", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENpa", NULL), 0);
    struct leased l[1];
    cr_assert_eq(fx_claim(1, 60000, l, NULL), 0, "TENpa is paused");
    cr_assert_eq(cf_key_int("LLEN", fx_q.names[KEY_RING]), 0);
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENpa", NULL), 1);
    cf_settle();
}

static void r_promote(void)
{
    cr_assert_eq(fx_enqueue_delayed("JOBpr1", "TENpr", 1, 0), 1);
    cr_assert_eq(fx_enqueue_delayed("JOBpr2", NULL, 1, 0), 1);
    cf_expect_row("JOBpr1", "state", "delayed");
    redisReply *r = redisCommand(fx_conn, "ZRANGE %s -1 -1 WITHSCORES", fx_q.names[KEY_DELAYED]);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    fx_await_past(atoll(r->element[1]->str));
    freeReplyObject(r);
    r = cf_array(2, SCRIPT_PROMOTE, "10", NULL);
    cr_assert_eq(cf_int_at(r, 0), 2);
    /* Nothing is delayed any more: promote sleeps until the next retention
     * bucket of the jobs earlier recipes completed, if any. */
    char done[128];
    snprintf(done, sizeof(done), "%sdone", fx_q.prefix);
    if (cf_key_int("ZCARD", done) == 0)
        cr_assert_eq(cf_int_at(r, 1), -1, "nothing is delayed any more");
    else
        cr_assert_gt(cf_int_at(r, 1), 0, "nothing is due but a retention bucket");
    freeReplyObject(r);
    cf_expect_row("JOBpr1", "state", "pending");
    struct leased g = cf_claim_one(false, 60000), f = cf_claim_one(true, 60000);
    cr_assert_str_eq(g.job, "JOBpr1");
    cr_assert_str_eq(f.job, "JOBpr2");
    cf_complete(&g);
    cf_complete(&f);
}

static void r_reap(void)
{
    cr_assert_eq(fx_enqueue("JOBrp1", NULL, "{}"), 1);
    cf_claim_one(true, 1);
    cf_await_lease_out("JOBrp1");
    redisReply *r = cf_array(2, SCRIPT_REAP, "10", NULL);
    cr_assert_eq(cf_int_at(r, 0), 1);
    cr_assert_eq(cf_int_at(r, 1), -1, "no lease is held any more");
    freeReplyObject(r);
    cf_expect_row("JOBrp1", "state", "pending");
    cf_expect_row("JOBrp1", "error", "lease expired");
    cf_settle();
}

static void r_reap_group(void)
{
    cr_assert_eq(fx_enqueue("JOBrg1", "TENrg", "{}"), 1);
    cf_claim_one(false, 1);
    cf_await_lease_out("JOBrg1");
    cr_assert_eq(fx_int(SCRIPT_REAP_GROUP, "TENrg", "10", NULL), 1);
    cf_expect_row("JOBrg1", "state", "pending");
    cf_settle();
}

static void r_reassign(void)
{
    cr_assert_eq(fx_enqueue("JOBra1", "TENra", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBra2", NULL, "{}"), 1);
    redisReply *r = cf_call(SCRIPT_REASSIGN, "JOBra1", "TENrb", NULL);
    cr_assert_str_eq(r->str, "TENra");
    freeReplyObject(r);
    r = cf_call(SCRIPT_REASSIGN, "JOBra2", "TENrb", NULL);
    cr_assert_str_eq(r->str, "", "JOBra2 was ungrouped");
    freeReplyObject(r);
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENra", NULL), 0);
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENrb", NULL), 2);
    struct leased l[2];
    cr_assert_eq(fx_claim(2, 60000, l, NULL), 2);
    cr_assert(strcmp(l[0].group, "TENrb") == 0 && strcmp(l[1].group, "TENrb") == 0);
    cf_complete(&l[0]);
    cf_complete(&l[1]);
}

static void r_recover(void)
{
    static const char tag[] = "00000000000000aa";
    cr_assert_eq(fx_enqueue("JOBrc1", "TENrc", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBrc2", NULL, "{}"), 1);
    freeReplyObject(cf_array(6, SCRIPT_CLAIM, "1", "60000", "0", "0", tag, NULL));
    freeReplyObject(cf_array(6, SCRIPT_CLAIM_FLAT, "1", "60000", "0", "0", tag, NULL));
    char cursor[32] = "0";
    long long given = 0;
    do {
        redisReply *r = cf_array(2, SCRIPT_RECOVER, cursor, "100", tag, NULL);
        snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
        given += cf_int_at(r, 1);
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    cr_assert_eq(given, 2);
    cf_expect_row("JOBrc1", "state", "pending");
    cf_expect_row("JOBrc2", "attempts", "0");
    cf_settle();
}

static void expect_release(const char *mode, const struct leased *a, const struct leased *b)
{
    redisReply *r =
        cf_array(2, SCRIPT_RELEASE, "bye", mode, a->job, a->lease, b->job, b->lease, NULL);
    cf_expect_str_at(r, 0, "pending");
    cf_expect_str_at(r, 1, "pending");
    freeReplyObject(r);
}

static void r_release(void)
{
    cr_assert_eq(fx_enqueue("JOBre1", "TENre", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBre2", NULL, "{}"), 1);
    /* delivered keeps the first claim's attempt; returned and undelivered
     * give back the attempt of the claim before them: 1 every time. */
    static const char *const modes[] = {"delivered", "returned", "undelivered"};
    for (int i = 0; i < 3; i++) {
        struct leased g = cf_claim_one(false, 60000), f = cf_claim_one(true, 60000);
        expect_release(modes[i], &g, &f);
        cf_expect_row("JOBre1", "attempts", "1");
        cf_expect_row("JOBre2", "attempts", "1");
    }
    cf_expect_row("JOBre1", "error", "bye");
    cf_settle();
}

static void r_resume(void)
{
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENrs", NULL), 1);
    cr_assert_eq(fx_enqueue("JOBrs1", "TENrs", "{}"), 1);
    struct leased l[1];
    cr_assert_eq(fx_claim(1, 60000, l, NULL), 0, "TENrs is paused");
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENrs", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENrs", NULL), 0);
    struct leased a = cf_claim_one(false, 60000);
    cr_assert_str_eq(a.job, "JOBrs1");
    cf_complete(&a);
}

static void r_stats(void)
{
    cr_assert_eq(fx_enqueue("JOBst1", "TENst", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBst2", NULL, "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBst3", "TENst", "{}"), 1);
    struct leased f = cf_claim_one(true, 60000);
    redisReply *r = cf_array(13, SCRIPT_STATS, NULL);
    /* pending, active, delayed, dead, ring, groups, paused, flat */
    long long want[8] = {2, 1, 0, 0, 1, -1, 0, 0};
    for (int i = 0; i < 8; i++)
        if (want[i] >= 0)
            cr_assert_eq(cf_int_at(r, i), want[i], "stats[%d] is %lld, want %lld", i,
                         cf_int_at(r, i), want[i]);
    cr_assert_geq(cf_int_at(r, 5), 1, "TENst is registered");
    freeReplyObject(r);
    cf_complete(&f);
    cf_settle();
}

/* A default ceiling's walk in steps of one lane: the ring set aside as an
 * old ring (RENAME, in the queue's slot), then replace's steps. */
static void r_replace(void)
{
    cr_assert_eq(fx_enqueue("JOBwk1", "TENwka", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBwk2", "TENwkb", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBwk3", "TENwka", "{}"), 1);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "1", "1", NULL), 2, "a walk with steps left");
    int steps = 0;
    while (fx_int(SCRIPT_REPLACE, "1", NULL) == 0)
        cr_assert_lt(++steps, 100, "the walk ends");
    struct leased l[3];
    cr_assert_eq(fx_claim(3, 60000, l, NULL), 2, "one of each group under the ceiling of 1");
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "", "0", NULL), 1);
    cf_complete(&l[0]);
    cf_complete(&l[1]);
    struct leased c = cf_claim_one(false, 60000);
    cr_assert_str_eq(c.job, "JOBwk3");
    cf_complete(&c);
}

cluster_recipe *const cluster_recipes[SCRIPT__COUNT] = {
    [SCRIPT_CAP] = r_cap, /* bounded lanes */
    [SCRIPT_CHECK] = r_check,
    [SCRIPT_CLAIM] = r_claim,
    [SCRIPT_CLAIM_FLAT] = r_claim_flat,
    [SCRIPT_COMPLETE] = r_complete,
    [SCRIPT_DEAD] = r_dead,
    [SCRIPT_DEPTH] = r_depth,
    [SCRIPT_DRAIN] = r_drain,
    [SCRIPT_ENQUEUE] = r_enqueue,
    [SCRIPT_ENQUEUE_MANY] = r_enqueue_many,
    [SCRIPT_EXTEND] = r_extend,
    [SCRIPT_FORGET] = r_forget,
    [SCRIPT_FORMAT] = r_format,
    [SCRIPT_GROUPS] = r_groups,
    [SCRIPT_JOB] = r_job,
    [SCRIPT_LIMIT] = r_limit,
    [SCRIPT_PAUSE] = r_pause,
    [SCRIPT_PEEK] = r_peek,
    [SCRIPT_PROMOTE] = r_promote,
    [SCRIPT_REAP] = r_reap,
    [SCRIPT_REAP_GROUP] = r_reap_group,
    [SCRIPT_REASSIGN] = r_reassign,
    [SCRIPT_RATE] = r_rate,
    [SCRIPT_RECOVER] = r_recover,
    [SCRIPT_RELEASE] = r_release,
    [SCRIPT_REMOVE] = r_remove,
    [SCRIPT_REPLACE] = r_replace,
    [SCRIPT_RESUME] = r_resume,
    [SCRIPT_STATS] = r_stats,
    [SCRIPT_WEIGHT] = r_weight,
};
