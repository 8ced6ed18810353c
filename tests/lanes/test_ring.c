/* The ring: enqueue admits onto lanes, claim serves them in rotation, the
 * per-group ceiling de-rings and re-rings, the flat set stays apart. */
#include <criterion/criterion.h>
#include <stdio.h>
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
        char until[32];
        fx_row(j[i].job, "lease_until", until, sizeof(until));
        cr_assert_eq(atoll(until), deadline, "every job of a batch shares one deadline");
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
