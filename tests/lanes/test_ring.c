/* The ring: enqueue admits onto lanes, claim serves them in rotation, the
 * per-group ceiling de-rings and re-rings, the flat set stays apart. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lanes_fixture.h"

TestSuite(ring, .init = fx_setup, .fini = fx_teardown, .timeout = 60);

static void enqueue_n(const char *group, int n)
{
    char job[72];
    for (int i = 0; i < n; i++) {
        snprintf(job, sizeof(job), "JOB%s-%05d", group, i);
        cr_assert_eq(fx_enqueue(job, group, "{\"n\":1}"), 1);
    }
}

LANE_TEST(ring, three_tenants_served_in_rotation_until_each_empties)
{
    const char *g[3] = {"TENa", "TENb", "TENc"};
    int left[3] = {1000, 10, 3}, next[3] = {0, 0, 0};
    for (int i = 0; i < 3; i++)
        enqueue_n(g[i], left[i]);

    /* Expected: A,B,C,A,B,C... each tenant one turn per cycle until it
     * empties, and each lane served oldest first. */
    int cursor = 0;
    for (int served = 0; served < 1013; served++) {
        int want = -1;
        for (int k = 0; k < 3 && want < 0; k++) {
            int t = (cursor + k) % 3;
            if (left[t] > 0)
                want = t;
        }
        cursor = (want + 1) % 3;
        struct leased job;
        cr_assert_eq(fx_claim(1, 30000, &job, NULL), 1, "claim %d served nothing", served);
        cr_assert_str_eq(job.group, g[want], "turn %d: got %s, want %s", served, job.group,
                         g[want]);
        char expect[72];
        snprintf(expect, sizeof(expect), "JOB%s-%05d", g[want], next[want]++);
        cr_assert_str_eq(job.job, expect, "lane %s not served oldest first", g[want]);
        cr_assert_str_eq(job.payload, "{\"n\":1}");
        char st[32];
        fx_complete(job.job, job.lease, st, sizeof(st));
        cr_assert_str_eq(st, "completed");
        left[want]--;
    }
    struct leased none;
    cr_assert_eq(fx_claim(1, 30000, &none, NULL), 0);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "an empty queue leaves an empty ring");
}

LANE_TEST(ring, batch_claim_takes_one_head_per_lane_per_turn_on_one_lease)
{
    enqueue_n("TENa", 4);
    enqueue_n("TENb", 1);
    enqueue_n("TENc", 2);
    struct leased j[7];
    long long deadline = 0;
    cr_assert_eq(fx_claim(7, 30000, j, &deadline), 7);
    const char *order[7] = {"TENa", "TENb", "TENc", "TENa", "TENc", "TENa", "TENa"};
    for (int i = 0; i < 7; i++) {
        cr_assert_str_eq(j[i].group, order[i], "position %d", i);
        cr_assert_eq(j[i].attempt, 1);
        cr_assert_eq(fx_deadline(j[i].job), deadline, "every job of a batch shares one deadline");
        for (int k = 0; k < i; k++)
            cr_assert_str_neq(j[i].lease, j[k].lease, "lease tokens are unique");
    }
    cr_assert_gt(deadline, 0);
    struct leased more;
    cr_assert_eq(fx_claim(3, 30000, &more, NULL), 0, "nothing left on the ring");
}

LANE_TEST(ring, ungrouped_work_is_never_served_by_the_grouped_claim)
{
    cr_assert_eq(fx_enqueue("JOBflat1", NULL, "1"), 1);
    cr_assert_eq(fx_enqueue("JOBflat2", NULL, "2"), 1);
    struct leased j[4];
    cr_assert_eq(fx_claim(4, 30000, j, NULL), 0, "grouped claim served flat work");
    cr_assert_eq(fx_enqueue("JOBgrp1", "TENa", "3"), 1);
    cr_assert_eq(fx_claim(4, 30000, j, NULL), 1);
    cr_assert_str_eq(j[0].job, "JOBgrp1");

    cr_assert_eq(fx_enqueue("JOBgrp2", "TENa", "4"), 1);
    cr_assert_eq(fx_claim_flat(4, 30000, j), 2, "flat claim takes only the flat set");
    cr_assert_str_eq(j[0].job, "JOBflat1");
    cr_assert_str_eq(j[0].group, "");
    cr_assert_str_eq(j[1].job, "JOBflat2");
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "TENa", NULL), 1, "the grouped job stays in its lane");
    cr_assert_eq(fx_int(SCRIPT_DEPTH, "", NULL), 0);
}

LANE_TEST(ring, lane_derings_at_its_ceiling_and_rerings_on_completion)
{
    enqueue_n("TENa", 5);
    enqueue_n("TENb", 5);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "2", NULL), 1);
    struct leased j[6];
    cr_assert_eq(fx_claim(6, 30000, j, NULL), 6);
    const char *order[6] = {"TENa", "TENb", "TENa", "TENb", "TENb", "TENb"};
    for (int i = 0; i < 6; i++)
        cr_assert_str_eq(j[i].group, order[i], "position %d", i);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENb", "A at its ceiling of 2 is off the ring");

    char st[32];
    fx_complete(j[0].job, j[0].lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENb,TENa", "a completion frees a permit and re-rings A");
}

LANE_TEST(ring, lowering_the_ceiling_parks_the_lane_until_it_drains)
{
    enqueue_n("TENa", 6);
    struct leased j[3];
    cr_assert_eq(fx_claim(3, 30000, j, NULL), 3);
    char ring[64], st[32];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");

    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "1", NULL), 1);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "3 in flight against a ceiling of 1: parked");
    struct leased none;
    cr_assert_eq(fx_claim(1, 30000, &none, NULL), 0);

    fx_complete(j[0].job, j[0].lease, st, sizeof(st));
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "2 in flight: still parked");
    fx_complete(j[1].job, j[1].lease, st, sizeof(st));
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "", "1 in flight: still at the ceiling");
    fx_complete(j[2].job, j[2].lease, st, sizeof(st));
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa", "drained below the ceiling: back on the ring");
}

LANE_TEST(ring, raising_the_ceiling_returns_the_lane_at_once)
{
    enqueue_n("TENa", 4);
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "1", NULL), 1);
    struct leased j[2];
    cr_assert_eq(fx_claim(2, 30000, j, NULL), 1, "a ceiling of 1 serves one");
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "");
    redisReply *r = redisCommand(fx_conn, "DEL %s", fx_q.names[KEY_WAKE]);
    freeReplyObject(r);

    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "3", NULL), 1);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");
    r = redisCommand(fx_conn, "LLEN %s", fx_q.names[KEY_WAKE]);
    cr_assert_eq(r->integer, 1, "re-ringing wakes parked consumers");
    freeReplyObject(r);
    cr_assert_eq(fx_claim(2, 30000, j, NULL), 2);

    /* Removing the ceiling (0) means no ceiling at all. */
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "0", NULL), 1);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");
    r = redisCommand(fx_conn, "HEXISTS %s TENa", fx_q.names[KEY_GLIMIT]);
    cr_assert_eq(r->integer, 0);
    freeReplyObject(r);
}

LANE_TEST(ring, enqueue_and_claim_never_scan_the_ring)
{
    /* The hot path must not use LPOS/LREM: their cost grows with the ring.
     * Redis counts commands run inside scripts, so commandstats tells. */
    char job[72], group[16];
    for (int i = 0; i < 300; i++) {
        snprintf(group, sizeof(group), "TEN%03d", i);
        snprintf(job, sizeof(job), "JOB%05d", i);
        cr_assert_eq(fx_enqueue(job, group, "{}"), 1);
    }
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TEN000", "1", NULL), 1); /* admin: may scan */
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    for (int i = 300; i < 600; i++) {
        snprintf(group, sizeof(group), "TEN%03d", i % 300);
        snprintf(job, sizeof(job), "JOB%05d", i);
        cr_assert_eq(fx_enqueue(job, group, "{}"), 1);
    }
    struct leased j[50];
    size_t total = 0;
    for (size_t got; (got = fx_claim(50, 30000, j, NULL)) > 0; total += got) {
        char st[32];
        for (size_t i = 0; i < got; i++) {
            fx_complete(j[i].job, j[i].lease, st, sizeof(st));
            cr_assert_str_eq(st, "completed");
        }
    }
    cr_assert_eq(total, 600);
    redisReply *r = redisCommand(fx_conn, "INFO commandstats");
    cr_assert_not_null(r);
    cr_assert_null(strstr(r->str, "cmdstat_lpos:"), "a hot-path script ran LPOS");
    cr_assert_null(strstr(r->str, "cmdstat_lrem:"), "a hot-path script ran LREM");
    cr_assert_not_null(strstr(r->str, "cmdstat_lmove:"), "the stats did record the claims");
    freeReplyObject(r);
}

static long long wake_tokens(void)
{
    redisReply *r = redisCommand(fx_conn, "LLEN %s", fx_q.names[KEY_WAKE]);
    long long n = r->integer;
    freeReplyObject(r);
    r = redisCommand(fx_conn, "DEL %s", fx_q.names[KEY_WAKE]);
    freeReplyObject(r);
    return n;
}

LANE_TEST(ring, only_a_lane_joining_an_empty_ring_wakes)
{
    enqueue_n("TENa", 1);
    cr_assert_eq(wake_tokens(), 1, "the first serviceable lane wakes parked consumers");
    enqueue_n("TENb", 1);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa,TENb");
    cr_assert_eq(wake_tokens(), 0, "a lane joining a non-empty ring has no one to wake");

    struct leased j[3];
    cr_assert_eq(fx_claim(3, 30000, j, NULL), 2, "a short claim empties the ring");
    enqueue_n("TENc", 1);
    cr_assert_eq(wake_tokens(), 1, "after it, the next lane wakes again");
}

/* ---- the bulk turns of a queue with no lane setting ---------------------- */

/* A claim on a queue without glimit plays its turns in bulk (claim.lua);
 * one with any lane setting takes them one LMOVE at a time. The history
 * below runs on two queues, "bulk" with no setting and "loop" with a
 * ceiling on a group that never has a job (so nothing it serves is
 * limited), and asserts after every claim that both served the same jobs
 * in the same order under the same lease numbers, and left the same ring.
 * Claims of random sizes, some cut short by max_bytes, over lanes that
 * empty, refill and complete at random. */
#define BULK_GROUPS 9
#define BULK_STEPS  400

struct history {
    struct keys q;
    char held[4096][2][72]; /* leased jobs not yet settled: id, token */
    int nheld;
};

static void ring_of(const struct keys *k, char *out, size_t cap)
{
    redisReply *r = redisCommand(fx_conn, "LRANGE %s 0 -1", k->names[KEY_RING]);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->elements && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, "%s%s", i ? "," : "", r->element[i]->str);
    freeReplyObject(r);
}

/* One claim on h; returns the reply (caller frees) and records its leases. */
static redisReply *history_claim(struct history *h, const char *n, const char *max_bytes)
{
    redisReply *r = lanes_call(fx_conn, &h->q, SCRIPT_CLAIM, n, "600000", "0", max_bytes, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY, "claim: %s",
              r != NULL && r->str != NULL ? r->str : "?");
    for (size_t e = 1; e + 4 < r->elements; e += 5) {
        cr_assert_lt(h->nheld, 4096);
        snprintf(h->held[h->nheld][0], 72, "%s", r->element[e]->str);
        snprintf(h->held[h->nheld][1], 72, "%s", r->element[e + 4]->str);
        h->nheld++;
    }
    return r;
}

/* Complete the held lease at index i (the same index on both queues). */
static void history_complete(struct history *h, int i)
{
    redisReply *r =
        lanes_call(fx_conn, &h->q, SCRIPT_COMPLETE, "0", h->held[i][0], h->held[i][1], NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    cr_assert_str_eq(r->element[0]->str, "completed", "%s", h->held[i][0]);
    freeReplyObject(r);
    memcpy(h->held[i], h->held[h->nheld - 1], sizeof(h->held[i]));
    h->nheld--;
}

Test(ring, bulk_turns_serve_what_the_lmove_loop_serves)
{
    static struct history bulk, loop;
    cr_assert_eq(keys_init(&bulk.q, "bulk", 4), 0);
    cr_assert_eq(keys_init(&loop.q, "loop", 4), 0);
    freeReplyObject(lanes_call(fx_conn, &loop.q, SCRIPT_LIMIT, "ZZZnever", "1000", NULL));
    redisReply *gl = redisCommand(fx_conn, "EXISTS %s", bulk.q.names[KEY_GLIMIT]);
    cr_assert_eq(gl->integer, 0, "bulk has no lane setting");
    freeReplyObject(gl);

    for (unsigned seed = 1; seed <= 3; seed++) {
        srand(seed);
        bulk.nheld = loop.nheld = 0;
        int next_id = 0, claims = 0, cut = 0;
        for (int step = 0; step < BULK_STEPS; step++) {
            int op = rand() % 10;
            if (op < 4) { /* a few jobs into random lanes, some payloads long */
                for (int j = 1 + rand() % 6; j > 0; j--) {
                    char id[32], g[16], payload[128];
                    snprintf(id, sizeof(id), "JOB%u_%05d", seed, next_id++);
                    snprintf(g, sizeof(g), "TEN%02d", rand() % BULK_GROUPS);
                    int pad = rand() % 3 == 0 ? 80 : 4;
                    snprintf(payload, sizeof(payload), "{\"p\":\"%.*s\"}", pad,
                             "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                             "xxxxxxxxxxxxxxxx");
                    struct history *both[] = {&bulk, &loop};
                    for (int q = 0; q < 2; q++) {
                        redisReply *r = lanes_call(fx_conn, &both[q]->q, SCRIPT_ENQUEUE, id, g,
                                                   payload, "0", "0", NULL);
                        cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
                        freeReplyObject(r);
                    }
                }
            } else if (op < 8) { /* a claim of 1..40, one in three capped at ~2 payloads */
                char n[8], mb[8];
                snprintf(n, sizeof(n), "%d", 1 + rand() % 40);
                snprintf(mb, sizeof(mb), "%d", rand() % 3 == 0 ? 1 + rand() % 150 : 0);
                redisReply *a = history_claim(&bulk, n, mb);
                redisReply *b = history_claim(&loop, n, mb);
                cr_assert_eq(a->elements, b->elements, "seed %u step %d: claim %s (max %s)", seed,
                             step, n, mb);
                size_t bytes = 0, got = (a->elements - 1) / 5;
                for (size_t e = 1; e < a->elements; e++) {
                    size_t f = (e - 1) % 5;
                    const redisReply *x = a->element[e], *y = b->element[e];
                    if (f == 3) { /* the attempt */
                        cr_assert_eq(x->integer, y->integer);
                        continue;
                    }
                    /* The token: its lease number, not its time. */
                    size_t len = f == 4 ? strcspn(x->str, "-") : strlen(x->str) + 1;
                    cr_assert(strncmp(x->str, y->str, len) == 0,
                              "seed %u step %d field %zu: %s vs %s", seed, step, e, x->str, y->str);
                    if (f == 2)
                        bytes += strlen(x->str);
                }
                claims++;
                cut += atoi(mb) > 0 && bytes >= (size_t)atoi(mb) && got < (size_t)atoi(n);
                freeReplyObject(a);
                freeReplyObject(b);
                char ra[1024], rb[1024];
                ring_of(&bulk.q, ra, sizeof(ra));
                ring_of(&loop.q, rb, sizeof(rb));
                cr_assert_str_eq(ra, rb, "seed %u step %d: the rings differ", seed, step);
            } else if (bulk.nheld > 0) { /* settle some of what is held */
                for (int j = 1 + rand() % 8; j > 0 && bulk.nheld > 0; j--) {
                    int i = rand() % bulk.nheld;
                    cr_assert_str_eq(bulk.held[i][0], loop.held[i][0]);
                    history_complete(&bulk, i);
                    history_complete(&loop, i);
                }
            }
        }
        cr_assert_gt(claims, 100, "seed %u: the history claims", seed);
        cr_assert_gt(cut, 5, "seed %u: some claims were cut short by max_bytes", seed);
        fx_assert_invariants(&bulk.q);
        fx_assert_invariants(&loop.q);
        freeReplyObject(redisCommand(fx_conn, "FLUSHALL"));
        freeReplyObject(lanes_call(fx_conn, &loop.q, SCRIPT_LIMIT, "ZZZnever", "1000", NULL));
    }
}

/* Ten busy lanes and a claim of 256 on a queue with no setting: each lane
 * is sized, read and trimmed once (ZRANGE and ZREMRANGEBYRANK, no ZPOPMIN
 * and its scores), no LMOVE, and the ring is written back once.
 * 300 jobs, 30 a lane: 25 whole rounds and six more turns, so the ring
 * after it starts with the four lanes the last round did not reach. */
LANE_TEST(ring, bulk_turns_ask_each_lane_once_per_claim)
{
    char g[8];
    for (int i = 0; i < 10; i++) {
        snprintf(g, sizeof(g), "TEN%d", i);
        enqueue_n(g, 30);
    }
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    static struct leased out[256];
    cr_assert_eq(fx_claim(256, 30000, out, NULL), 256);
    for (int t = 0; t < 256; t++) {
        snprintf(g, sizeof(g), "TEN%d", t % 10);
        cr_assert_str_eq(out[t].group, g, "turn %d", t);
        char job[72];
        snprintf(job, sizeof(job), "JOB%s-%05d", g, t / 10);
        cr_assert_str_eq(out[t].job, job, "turn %d", t);
    }
    cr_assert_eq(fx_calls_of("lmove"), 0);
    cr_assert_eq(fx_calls_of("zpopmin"), 0);
    cr_assert_eq(fx_calls_of("zrange"), 10, "one ZRANGE a lane");
    cr_assert_eq(fx_calls_of("zremrangebyrank"), 10, "one ZREMRANGEBYRANK a lane");
    cr_assert_eq(fx_calls_of("zcard"), 10, "one ZCARD a lane");
    char ring[128];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TEN6,TEN7,TEN8,TEN9,TEN0,TEN1,TEN2,TEN3,TEN4,TEN5");
}

/* An empty lane left on the ring (the ring rule broken, e.g. by a hand
 * edit) gets no turn in the bulk path: it leaves the ring and the turn
 * goes to the next lane, as the loop's RPOP heals it. */
LANE_TEST(ring, bulk_turns_drop_an_empty_lane_without_a_turn)
{
    enqueue_n("TENa", 2);
    enqueue_n("TENb", 2);
    freeReplyObject(redisCommand(fx_conn, "LPUSH %s TENzz", fx_q.names[KEY_RING]));
    struct leased out[3];
    cr_assert_eq(fx_claim(3, 30000, out, NULL), 3);
    cr_assert_str_eq(out[0].group, "TENa");
    cr_assert_str_eq(out[1].group, "TENb");
    cr_assert_str_eq(out[2].group, "TENa");
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENb", "TENzz is gone, TENa empty, TENb holds one");
}

/* A ring shorter than the claim, so its turns are played: a lane with
 * one job in the claim is popped with one ZPOPMIN (no ZRANGE and no
 * trim), one with more is read with one ZRANGE and trimmed once, and the
 * ring keeps the lanes that still hold jobs. */
LANE_TEST(ring, bulk_turns_pop_a_lane_with_one_job_in_the_claim)
{
    enqueue_n("TENa", 1);
    enqueue_n("TENb", 1);
    enqueue_n("TENc", 3);
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    struct leased out[4];
    cr_assert_eq(fx_claim(4, 30000, out, NULL), 4);
    const char *want[] = {"JOBTENa-00000", "JOBTENb-00000", "JOBTENc-00000", "JOBTENc-00001"};
    for (int i = 0; i < 4; i++)
        cr_assert_str_eq(out[i].job, want[i]);
    cr_assert_eq(fx_calls_of("zpopmin"), 2, "one ZPOPMIN for each one-job lane");
    cr_assert_eq(fx_calls_of("zrange"), 1, "one ZRANGE for TENc's two");
    cr_assert_eq(fx_calls_of("zremrangebyrank"), 1);
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENc");
    cr_assert_eq(fx_claim(3, 30000, out, NULL), 1);
    cr_assert_str_eq(out[0].job, "JOBTENc-00002");
}

/* A ring at least as long as the claim (many tenants, few jobs each):
 * each of its first lanes is popped two deep, with no ZCARD to size it
 * first, and a second job goes straight back to its lane; the lanes that
 * still hold jobs go to the tail, the others leave the ring. */
LANE_TEST(ring, a_long_ring_pops_each_lane_without_sizing_it)
{
    enqueue_n("TENa", 1);
    enqueue_n("TENb", 2);
    enqueue_n("TENc", 1);
    enqueue_n("TENd", 1);
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    struct leased out[3];
    cr_assert_eq(fx_claim(3, 30000, out, NULL), 3);
    cr_assert_str_eq(out[0].job, "JOBTENa-00000");
    cr_assert_str_eq(out[1].job, "JOBTENb-00000");
    cr_assert_str_eq(out[2].job, "JOBTENc-00000");
    cr_assert_eq(fx_calls_of("zcard"), 0, "no lane sized");
    cr_assert_eq(fx_calls_of("zpopmin"), 3, "one ZPOPMIN a lane");
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENd,TENb", "TENd not reached, TENb to the tail, TENa and TENc gone");
    cr_assert_eq(fx_claim(3, 30000, out, NULL), 2);
    cr_assert_str_eq(out[0].job, "JOBTENd-00000");
    cr_assert_str_eq(out[1].job, "JOBTENb-00001", "TENb's second job was put back");
}

/* A lane named twice among a long ring's first lanes (the ring rule
 * broken) is served twice, its jobs in order, as the LMOVE loop serves
 * it: popped again after its put-back. Both names stay while it holds
 * jobs, as the loop leaves them. */
LANE_TEST(ring, a_long_ring_serves_a_lane_named_twice_in_order)
{
    enqueue_n("TENa", 3);
    enqueue_n("TENb", 1);
    freeReplyObject(redisCommand(fx_conn, "RPUSH %s TENa", fx_q.names[KEY_RING]));
    char ring[64];
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa,TENb,TENa");
    struct leased out[3];
    cr_assert_eq(fx_claim(3, 30000, out, NULL), 3);
    cr_assert_str_eq(out[0].job, "JOBTENa-00000");
    cr_assert_str_eq(out[1].job, "JOBTENb-00000");
    cr_assert_str_eq(out[2].job, "JOBTENa-00001");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa,TENa");
    cr_assert_eq(fx_claim(1, 30000, out, NULL), 1);
    cr_assert_str_eq(out[0].job, "JOBTENa-00002");
    /* Emptied, TENa left the ring once; its second name is healed away by
     * the next claim, which finds it empty and serves nothing. */
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENa");
    cr_assert_eq(fx_claim(1, 30000, out, NULL), 0);
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "");
}

/* Lanes TENa, TENb, TENc of per jobs each, a claim of n cut short by
 * max_bytes: it leases want (in turn order), leaves the ring as ring, and
 * the next claim of n serves next. Each payload {"n":1} is 7 bytes. */
static void cut_short(int per, const char *n, const char *max_bytes, const char *const *want,
                      size_t nwant, const char *ring, const char *const *next, size_t nnext)
{
    enqueue_n("TENa", per);
    enqueue_n("TENb", per);
    enqueue_n("TENc", per);
    redisReply *r = lanes_call(fx_conn, &fx_q, SCRIPT_CLAIM, n, "30000", "0", max_bytes, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY);
    cr_assert_eq(r->elements, 1 + 5 * nwant, "%zu jobs, the last reaching %s bytes", nwant,
                 max_bytes);
    for (size_t i = 0; i < nwant; i++)
        cr_assert_str_eq(r->element[1 + 5 * i]->str, want[i]);
    freeReplyObject(r);
    char got[64];
    fx_ring(got, sizeof(got));
    cr_assert_str_eq(got, ring);
    struct leased out[16];
    cr_assert_lt(atoi(n), 16);
    cr_assert_eq(fx_claim((size_t)atoi(n), 30000, out, NULL), nnext);
    for (size_t i = 0; i < nnext; i++)
        cr_assert_str_eq(out[i].job, next[i]);
}

/* A claim cut short by max_bytes puts a popped job (a lane's one job of
 * the call) it did not lease back at its lane's head: the next claim
 * serves it, in the same order. */
LANE_TEST(ring, bulk_turns_cut_short_put_a_popped_job_back)
{
    const char *want[] = {"JOBTENa-00000"};
    const char *next[] = {"JOBTENb-00000", "JOBTENc-00000"};
    cut_short(1, "3", "5", want, 1, "TENb,TENc", next, 2);
}

/* max_bytes cuts a bulk claim short after the job that reaches it: the
 * jobs read for later turns stay at their lanes' heads, and the ring is
 * what the turns taken leave, so the next claim goes on from there. */
LANE_TEST(ring, bulk_turns_cut_short_by_max_bytes_leave_the_rest_in_place)
{
    const char *want[] = {"JOBTENa-00000", "JOBTENb-00000", "JOBTENc-00000", "JOBTENa-00001"};
    const char *next[] = {"JOBTENb-00001", "JOBTENc-00001", "JOBTENa-00002", "JOBTENb-00002",
                          "JOBTENc-00002"};
    cut_short(3, "9", "22", want, 4, "TENb,TENc,TENa", next, 5);
}
