/* A ceiling of 1 under contention: many claimers on separate connections
 * race for three groups; no group ever has two jobs in flight, as seen by
 * the claimers themselves. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "lanes_fixture.h"
#include "wait.h"

TestSuite(ceiling, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

#define CLAIMERS 8
#define GROUPS   3
#define PER      100

static atomic_int inflight[GROUPS];
static atomic_int peak[GROUPS];
static atomic_int done;
static atomic_int errors;

static void *claimer(void *arg)
{
    (void)arg;
    redisContext *c = redis_server_connect(&fx_redis);
    if (c == NULL) {
        atomic_fetch_add(&errors, 1);
        return NULL;
    }
    int idle = 0;
    while (atomic_load(&done) < GROUPS * PER && idle < 2000) {
        redisReply *r = lanes_call(c, &fx_q, SCRIPT_CLAIM, "1", "30000", NULL);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
            atomic_fetch_add(&errors, 1);
            freeReplyObject(r);
            break;
        }
        if (r->elements < 6) {
            freeReplyObject(r);
            idle++;
            continue;
        }
        idle = 0;
        char job[72], lease[32];
        snprintf(job, sizeof(job), "%s", r->element[1]->str);
        snprintf(lease, sizeof(lease), "%s", r->element[5]->str);
        int g = r->element[2]->str[3] - '0';
        freeReplyObject(r);

        int now = atomic_fetch_add(&inflight[g], 1) + 1;
        for (int p = atomic_load(&peak[g]); now > p;)
            if (atomic_compare_exchange_weak(&peak[g], &p, now))
                break;
        wait_sleep_ms(1); /* hold the job a moment, as a worker would */
        atomic_fetch_sub(&inflight[g], 1);

        r = lanes_call(c, &fx_q, SCRIPT_COMPLETE, "60000", job, lease, NULL);
        if (r == NULL || r->type != REDIS_REPLY_ARRAY || strcmp(r->element[0]->str, "completed"))
            atomic_fetch_add(&errors, 1);
        else
            atomic_fetch_add(&done, 1);
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

LANE_TEST(ceiling, a_ceiling_of_one_is_never_exceeded_by_concurrent_claimers)
{
    char job[32], group[16];
    for (int g = 0; g < GROUPS; g++) {
        snprintf(group, sizeof(group), "TEN%d", g);
        cr_assert_eq(fx_int(SCRIPT_LIMIT, group, "1", NULL), 1);
        for (int i = 0; i < PER; i++) {
            snprintf(job, sizeof(job), "JOB%d-%03d", g, i);
            cr_assert_eq(fx_enqueue(job, group, "{}"), 1);
        }
    }
    pthread_t t[CLAIMERS];
    for (int i = 0; i < CLAIMERS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, claimer, NULL), 0);
    for (int i = 0; i < CLAIMERS; i++)
        pthread_join(t[i], NULL);

    cr_assert_eq(atomic_load(&errors), 0);
    cr_assert_eq(atomic_load(&done), GROUPS * PER, "every job completed exactly once");
    for (int g = 0; g < GROUPS; g++)
        cr_assert_eq(atomic_load(&peak[g]), 1, "group %d peaked at %d in flight", g,
                     atomic_load(&peak[g]));
    /* gactive[G] is the size of G's lease index: none may be left. */
    redisReply *r = redisCommand(fx_conn, "KEYS %sg:*:active", fx_q.prefix);
    cr_assert_eq(r->elements, 0, "no permit is left taken");
    freeReplyObject(r);
}
