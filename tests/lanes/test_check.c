/* The check's steps (lua/check.lua), one call at a time: each examines
 * no more than its budget; the ring walk resumes after the lane it read
 * last when the ring turned by up to a page in between (every claim
 * moves its head to its tail); the two confirmations report only what
 * holds at the moment they run. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lanes_fixture.h"

TestSuite(check, .init = fx_setup, .fini = fx_teardown, .timeout = 60);

/* What one step answered: its cursor, first index, names, violations. */
struct page {
    char next[256];
    long long first;
    size_t nnames, nviolations;
    char names[16][32], violations[16][128];
};

static void step(struct page *p, const char *name, const char *cursor, const char *budget, ...)
{
    const char *args[32] = {name, cursor, budget};
    int n = 3;
    va_list ap;
    va_start(ap, budget);
    for (const char *a; n < 32 && (a = va_arg(ap, const char *)) != NULL;)
        args[n++] = a;
    va_end(ap);
    redisReply *r = lanes_callv(fx_conn, &fx_q, SCRIPT_CHECK, n, args);
    cr_assert_not_null(r);
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 4, "%s: %s", name,
              r->type == REDIS_REPLY_ERROR ? r->str : "not {next, first, names, violations}");
    memset(p, 0, sizeof(*p));
    snprintf(p->next, sizeof(p->next), "%s", r->element[0]->str);
    p->first = r->element[1]->integer;
    p->nnames = r->element[2]->elements;
    p->nviolations = r->element[3]->elements;
    cr_assert_leq(p->nnames, 16);
    cr_assert_leq(p->nviolations, 16);
    for (size_t i = 0; i < p->nnames; i++)
        snprintf(p->names[i], sizeof(p->names[i]), "%s", r->element[2]->element[i]->str);
    for (size_t i = 0; i < p->nviolations; i++)
        snprintf(p->violations[i], sizeof(p->violations[i]), "%s", r->element[3]->element[i]->str);
    freeReplyObject(r);
}

/* n lanes TENl<i> with a job each, on the ring in that order. */
static void lanes(int n)
{
    for (int i = 0; i < n; i++) {
        char job[32], g[32];
        snprintf(job, sizeof(job), "JOBl%d", i);
        snprintf(g, sizeof(g), "TENl%d", i);
        cr_assert_eq(fx_enqueue(job, g, "{}"), 1);
    }
}

static void rotate(int times)
{
    for (int i = 0; i < times; i++)
        freeReplyObject(redisCommand(fx_conn, "LMOVE %s %s LEFT RIGHT", fx_q.names[KEY_RING],
                                     fx_q.names[KEY_RING]));
}

LANE_TEST(check, the_ring_walk_skips_no_lane_when_the_ring_turns_between_its_calls)
{
    lanes(12);
    int seen[12] = {0};
    struct page p;
    char cursor[256] = "";
    /* Pages of three; before each, the ring turns by 0 to 3 (a page), as
     * claims would turn it. */
    for (int page = 0; page < 24; page++) {
        rotate(page % 4);
        step(&p, "ring", cursor, "3", NULL);
        cr_assert_eq(p.nviolations, 0, "%s", p.violations[0]);
        for (size_t i = 0; i < p.nnames; i++) {
            int k;
            cr_assert_eq(sscanf(p.names[i], "TENl%d", &k), 1);
            seen[k]++;
        }
        if (p.next[0] == '\0')
            break;
        snprintf(cursor, sizeof(cursor), "%s", p.next);
    }
    cr_assert_str_eq(p.next, "", "the walk ends");
    /* Nothing is skipped; a lane the rotation brought back to the tail
     * after it was read is read again (the dups step sorts that out). */
    for (int k = 0; k < 12; k++)
        cr_assert_geq(seen[k], 1, "lane TENl%d was skipped", k);
}

LANE_TEST(check, a_lane_read_twice_is_reported_only_when_it_is_on_the_ring_twice)
{
    lanes(3);
    struct page p;
    /* Read at 0 and at 2 after the ring turned twice: one lane, moved. */
    step(&p, "dups", "", "10", "TENl0", "0", "2", NULL);
    cr_assert_eq(p.nviolations, 0, "%s", p.violations[0]);
    cr_assert_str_eq(p.next, "");
    freeReplyObject(redisCommand(fx_conn, "RPUSH %s TENl0", fx_q.names[KEY_RING]));
    step(&p, "dups", "", "10", "TENl0", "0", "3", NULL);
    cr_assert_eq(p.nviolations, 1);
    cr_assert_str_eq(p.violations[0], "ring: TENl0 is on the ring more than once");
    freeReplyObject(redisCommand(fx_conn, "LREM %s 1 TENl0", fx_q.names[KEY_RING]));
}

LANE_TEST(check, a_lane_off_the_ring_is_reported_only_while_it_is_serviceable)
{
    lanes(2);
    struct page p;
    step(&p, "off", "", "10", "TENl0", "TENl1", NULL);
    cr_assert_eq(p.nviolations, 0, "both are on the ring: %s", p.violations[0]);
    freeReplyObject(redisCommand(fx_conn, "LREM %s 0 TENl1", fx_q.names[KEY_RING]));
    step(&p, "off", "", "10", "TENl0", "TENl1", NULL);
    cr_assert_eq(p.nviolations, 1);
    cr_assert_str_eq(p.violations[0], "ring: TENl1 is serviceable but off the ring");
    /* Paused, it belongs off the ring: nothing to report. */
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENl1", NULL), 1);
    step(&p, "off", "", "10", "TENl0", "TENl1", NULL);
    cr_assert_eq(p.nviolations, 0, "%s", p.violations[0]);
}

LANE_TEST(check, a_step_examines_no_more_than_its_budget)
{
    lanes(5);
    for (int i = 0; i < 5; i++) {
        char job[32];
        snprintf(job, sizeof(job), "JOBf%d", i);
        cr_assert_eq(fx_enqueue(job, NULL, "{}"), 1);
    }
    struct page p;
    step(&p, "ring", "", "2", NULL);
    cr_assert_eq(p.nnames, 2);
    cr_assert_eq(p.first, 0);
    cr_assert_str_neq(p.next, "");
    step(&p, "ring", p.next, "2", NULL);
    cr_assert_eq(p.first, 2);
    cr_assert_eq(p.nnames, 2);
    /* The flat set a member at a time: five calls, then done. */
    char cursor[256] = "";
    int calls = 0;
    do {
        step(&p, "flat", cursor, "1", NULL);
        snprintf(cursor, sizeof(cursor), "%s", p.next);
        calls++;
    } while (cursor[0] != '\0' && calls < 100);
    cr_assert_geq(calls, 5, "five members, one item a call");
    /* A group a call: its checks alone are two items. */
    step(&p, "groups", "", "2", "TENl0", "TENl1", NULL);
    cr_assert_eq(p.nnames, 1, "TENl0 is serviceable");
    cr_assert_str_eq(p.next, "1:1:0", "TENl0's lane comes next");
}

/* Retention buckets (lib.lua:retire): one the done index does not hold
 * would never be deleted, and one must hold only completed rows. */
LANE_TEST(check, the_rows_step_names_a_retention_bucket_out_of_its_index)
{
    cr_assert_eq(fx_enqueue("JOBok", "TENa", "{}"), 1);
    cr_assert_eq(fx_enqueue("JOBpend", "TENa", "{}"), 1);
    struct leased j;
    cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    char st[32];
    fx_complete(j.job, j.lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed");
    redisReply *r = redisCommand(fx_conn, "RPUSH %sdone:1000 JOBpend", fx_q.prefix);
    freeReplyObject(r);

    bool unindexed = false, wrong = false, other = false;
    char cursor[256] = "";
    do {
        struct page p;
        step(&p, "rows", cursor, "100", NULL);
        for (size_t i = 0; i < p.nviolations; i++) {
            if (strstr(p.violations[i], "done:1000 is not in the done index"))
                unindexed = true;
            else if (strstr(p.violations[i], "done:1000 holds JOBpend"))
                wrong = true;
            else
                other = true;
        }
        snprintf(cursor, sizeof(cursor), "%s", p.next);
    } while (cursor[0] != '\0');
    cr_assert(unindexed && wrong, "both are named (unindexed %d, wrong %d)", unindexed, wrong);
    cr_assert_not(other, "and nothing else: a kept row's own bucket is in order");
    r = redisCommand(fx_conn, "DEL %sdone:1000", fx_q.prefix);
    freeReplyObject(r);
}
