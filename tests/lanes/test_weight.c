/* Weighted lanes (lua/weight.lua, the weighted claim of lua/claim.lua):
 * deficit round robin on the ring. Fixed scenarios state the service order
 * in full; a reference model of the ring (weights, ceilings, pauses, rates,
 * batch claims of any size, completions) is run against the scripts on a
 * long seeded sequence of moves and must agree on every job served and on
 * the ring after every move. The model also sets the queue-wide defaults
 * (limit, weight and rate without a group), which apply to every lane
 * without a setting of its own, and caps (own and default), which refuse
 * an enqueue into a lane that holds its cap. The model's rates are one lease a minute, so
 * that a rated lane, once leased, is held for the rest of the sequence
 * unless its rate is removed: what time does to rates is the subject of
 * tests/lanes/test_rate.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "lanes_fixture.h"

TestSuite(weight, .init = fx_setup, .fini = fx_teardown, .timeout = 300);

static void enqueue_n(const char *group, int from, int n)
{
    char job[72];
    for (int i = from; i < from + n; i++) {
        snprintf(job, sizeof(job), "JOB%s-%05d", group, i);
        cr_assert_eq(fx_enqueue(job, group, "{}"), 1);
    }
}

static void weight(const char *group, const char *w)
{
    cr_assert_eq(fx_int(SCRIPT_WEIGHT, group, w, NULL), 1);
}

/* The groups of n claimed jobs, one claim of n or n claims of one. */
static void claim_groups(size_t n, bool one_by_one, char *out, size_t cap)
{
    struct leased j[64];
    size_t got = 0, used = 0;
    cr_assert_leq(n, 64);
    if (one_by_one) {
        for (size_t i = 0; i < n; i++)
            got += fx_claim(1, 30000, &j[got], NULL);
    } else {
        got = fx_claim(n, 30000, j, NULL);
    }
    out[0] = '\0';
    for (size_t i = 0; i < got && used < cap; i++)
        used += snprintf(out + used, cap - used, "%s%s", i ? "," : "", j[i].group + 3);
}

LANE_TEST(weight, weights_1_2_5_are_served_1_2_5_jobs_per_turn)
{
    enqueue_n("TENa", 0, 20);
    enqueue_n("TENb", 0, 20);
    enqueue_n("TENc", 0, 20);
    weight("TENb", "2");
    weight("TENc", "5");
    char got[256];
    claim_groups(16, false, got, sizeof(got));
    cr_assert_str_eq(got, "a,b,b,c,c,c,c,c,a,b,b,c,c,c,c,c");
}

LANE_TEST(weight, a_turn_spans_claims_of_one_job)
{
    enqueue_n("TENa", 0, 20);
    enqueue_n("TENb", 0, 20);
    weight("TENa", "3");
    char got[256];
    claim_groups(9, true, got, sizeof(got));
    cr_assert_str_eq(got, "a,a,a,b,a,a,a,b,a", "one claim at a time keeps each turn whole");
}

LANE_TEST(weight, an_empty_or_paused_lane_gives_its_share_to_the_others)
{
    enqueue_n("TENa", 0, 3);
    enqueue_n("TENb", 0, 20);
    enqueue_n("TENc", 0, 20);
    weight("TENa", "4");
    weight("TENb", "2");
    char got[256];
    /* a has 3 jobs for a turn of 4: it empties and leaves mid-turn. */
    claim_groups(9, false, got, sizeof(got));
    cr_assert_str_eq(got, "a,a,a,b,b,c,b,b,c");
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENb", NULL), 1);
    claim_groups(3, false, got, sizeof(got));
    cr_assert_str_eq(got, "c,c,c", "with b paused, c takes every turn");
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENb", NULL), 1);
    claim_groups(4, false, got, sizeof(got));
    cr_assert_str_eq(got, "c,b,b,c", "b is back, after c, with its weight");
}

LANE_TEST(weight, pausing_the_head_mid_turn_ends_its_turn)
{
    enqueue_n("TENa", 0, 20);
    enqueue_n("TENb", 0, 20);
    weight("TENa", "5");
    char got[256];
    claim_groups(2, false, got, sizeof(got));
    cr_assert_str_eq(got, "a,a");
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENa", NULL), 1);
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENa", NULL), 1);
    claim_groups(7, false, got, sizeof(got));
    cr_assert_str_eq(got, "b,a,a,a,a,a,b", "a comes back with a whole turn, behind b");
}

LANE_TEST(weight, a_lane_paused_alone_mid_turn_comes_back_with_a_whole_turn)
{
    enqueue_n("TENa", 0, 10);
    weight("TENa", "3");
    char got[256];
    claim_groups(2, false, got, sizeof(got));
    cr_assert_str_eq(got, "a,a");
    cr_assert_eq(fx_int(SCRIPT_PAUSE, "TENa", NULL), 1);
    fx_assert_invariants(&fx_q); /* the turn went with the lane */
    cr_assert_eq(fx_int(SCRIPT_RESUME, "TENa", NULL), 1);
    enqueue_n("TENb", 0, 5);
    claim_groups(5, false, got, sizeof(got));
    cr_assert_str_eq(got, "a,a,a,b,a", "back at the head, a has a whole turn of 3");
}

LANE_TEST(weight, a_ceiling_ends_a_turn_and_the_completion_returns_the_lane)
{
    enqueue_n("TENa", 0, 20);
    enqueue_n("TENb", 0, 20);
    weight("TENa", "5");
    cr_assert_eq(fx_int(SCRIPT_LIMIT, "TENa", "2", NULL), 1);
    struct leased j[8];
    cr_assert_eq(fx_claim(4, 30000, j, NULL), 4);
    const char *want[] = {"TENa", "TENa", "TENb", "TENb"};
    for (int i = 0; i < 4; i++)
        cr_assert_str_eq(j[i].group, want[i], "position %d", i);
    char st[32], ring[64];
    fx_complete(j[0].job, j[0].lease, st, sizeof(st));
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENb,TENa");
    char got[256];
    claim_groups(3, false, got, sizeof(got));
    cr_assert_str_eq(got, "b,a,b", "a at its ceiling again after one");
}

LANE_TEST(weight, lowering_the_weight_of_the_head_mid_turn_ends_the_turn)
{
    enqueue_n("TENa", 0, 20);
    enqueue_n("TENb", 0, 20);
    weight("TENa", "5");
    char got[256], ring[64];
    claim_groups(3, false, got, sizeof(got));
    cr_assert_str_eq(got, "a,a,a");
    weight("TENa", "3");
    fx_ring(ring, sizeof(ring));
    cr_assert_str_eq(ring, "TENb,TENa", "a has had 3 of 3: its turn is over");
    weight("TENa", "0");
    claim_groups(3, false, got, sizeof(got));
    cr_assert_str_eq(got, "b,a,b", "reset: weight 1");
    redisReply *r = redisCommand(fx_conn, "HGETALL %s", fx_q.names[KEY_GLIMIT]);
    cr_assert_eq(r->elements, 0, "no setting is left behind");
    freeReplyObject(r);
}

LANE_TEST(weight, the_script_refuses_bad_weights_and_writes_nothing)
{
    enqueue_n("TENa", 0, 1);
    char code[32];
    const char *bad[] = {"-1", "1001", "1.5", "x", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fx_error(code, sizeof(code), SCRIPT_WEIGHT, "TENa", bad[i], NULL);
        cr_assert_str_eq(code, "EARG", "weight \"%s\"", bad[i]);
    }
    fx_error(code, sizeof(code), SCRIPT_WEIGHT, "bad", "2", NULL);
    cr_assert_str_eq(code, "EBRAND");
    redisReply *r = redisCommand(fx_conn, "EXISTS %s", fx_q.names[KEY_GLIMIT]);
    cr_assert_eq(r->integer, 0);
    freeReplyObject(r);
}

/* Run the check and assert it reports a violation containing needle. */
static void expect_violation(const char *needle)
{
    struct check_result res;
    check_run(fx_conn, &fx_q, 100, &res);
    cr_assert_str_eq(res.error, "");
    cr_assert(check_has(&res, needle), "the check missed \"%s\" (%zu violations)", needle, res.n);
    check_result_free(&res);
}

static void glimit_cmd(const char *cmd, const char *field, const char *value)
{
    redisReply *r =
        value ? redisCommand(fx_conn, "%s %s %s %s", cmd, fx_q.names[KEY_GLIMIT], field, value)
              : redisCommand(fx_conn, "%s %s %s", cmd, fx_q.names[KEY_GLIMIT], field);
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER);
    freeReplyObject(r);
}

Test(weight, the_check_finds_a_broken_turn_or_weight)
{
    enqueue_n("TENa", 0, 5);
    enqueue_n("TENb", 0, 5);
    weight("TENa", "3");
    char got[64];
    claim_groups(1, false, got, sizeof(got));
    fx_assert_invariants(&fx_q); /* a turn part-way through is fine */

    glimit_cmd("HSET", "turn", "TENb:1");
    expect_violation("which is not the ring head");
    glimit_cmd("HSET", "turn", "TENa:3");
    expect_violation("is not a weighted turn part-way through");
    glimit_cmd("HSET", "turn", "TENa:1");
    glimit_cmd("HSET", "w:TENa", "1001");
    expect_violation("the weight of TENa is \"1001\"");
    glimit_cmd("HSET", "w:TENa", "3");
    glimit_cmd("HDEL", "weighted", NULL);
    expect_violation("weights are set");
    glimit_cmd("HSET", "weighted", "1");
    fx_assert_invariants(&fx_q);
}

/* Claim every job of 100 one-job lanes, one claim each; the calls of
 * LINDEX and of HMGET (one per job is the lease's read of its row). */
static void drain_counting(long long *lindex, long long *hmget)
{
    freeReplyObject(redisCommand(fx_conn, "CONFIG RESETSTAT"));
    struct leased j;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(fx_claim(1, 30000, &j, NULL), 1);
    *lindex = fx_calls_of("lindex");
    *hmget = fx_calls_of("hmget");
}

LANE_TEST(weight, a_queue_without_weights_pays_nothing_for_them)
{
    char group[16];
    for (int i = 0; i < 100; i++) {
        snprintf(group, sizeof(group), "TEN%03d", i);
        enqueue_n(group, 0, 1);
    }
    long long lindex, hmget;
    drain_counting(&lindex, &hmget);
    cr_assert_eq(lindex, 0);
    cr_assert_eq(hmget, 100, "one HMGET per job: the lease's");

    for (int i = 0; i < 100; i++) {
        snprintf(group, sizeof(group), "TEN%03d", i);
        enqueue_n(group, 1, 1);
    }
    weight("TEN000", "2");
    drain_counting(&lindex, &hmget);
    cr_assert_eq(lindex, 100, "weighted: the head is read once per turn");
    cr_assert_eq(hmget, 300, "weighted: the lane's settings per job, the turn per call");
    cr_assert_eq(fx_calls_of("lpos") + fx_calls_of("lrem"), 0, "no scan of the ring");
}

/* --- the reference model ------------------------------------------------ */

#define M_LANES 5

struct m_lane {
    char name[8];
    int enq, next;             /* jobs enqueued so far; the next to serve */
    int active, limit, weight; /* its own settings; 0: none */
    int cap;                   /* its own cap (pending jobs: the model delays none); 0: none */
    bool paused;
    bool rated, held;     /* a rate of 1 a minute; held: leased under it */
    char leased[512][72]; /* its jobs in flight, oldest first, and their tokens */
    char tokens[512][32];
};

struct model {
    struct m_lane lane[M_LANES];
    int dlimit, dweight, dcap; /* the queue defaults; 0: none */
    bool drated;               /* a default rate of one lease a minute */
    int ring[M_LANES], nring;
    int used;           /* jobs the ring head has had in its turn */
    int served, turned; /* jobs served; of them, a turn's second or later */
    int throttled;      /* of them, leases that put a lane under its rate */
    int defaults;       /* default ceilings set, each re-placing every lane */
    int refused;        /* enqueues refused by a cap */
};

static int m_depth(const struct model *m, int l)
{
    return m->lane[l].enq - m->lane[l].next;
}

static int m_pos(const struct model *m, int l)
{
    for (int i = 0; i < m->nring; i++)
        if (m->ring[i] == l)
            return i;
    return -1;
}

static void m_remove_at(struct model *m, int i)
{
    if (i == 0)
        m->used = 0;
    memmove(&m->ring[i], &m->ring[i + 1], sizeof(int) * (size_t)(m->nring - i - 1));
    m->nring--;
}

/* What applies to a lane: its own setting, else the queue default. */
static int m_limit(const struct model *m, const struct m_lane *x)
{
    return x->limit ? x->limit : m->dlimit;
}

static int m_weight(const struct model *m, const struct m_lane *x)
{
    return x->weight ? x->weight : m->dweight ? m->dweight : 1;
}

static bool m_rated(const struct model *m, const struct m_lane *x)
{
    return x->rated || m->drated;
}

static bool m_serviceable(const struct model *m, int l)
{
    const struct m_lane *x = &m->lane[l];
    int lim = m_limit(m, x);
    return m_depth(m, l) > 0 && !x->paused && (lim == 0 || x->active < lim) && !x->held;
}

/* A default changed: every lane goes where the rule puts it; those that
 * stay keep their order, those that join go to the tail in name order. */
static void m_replace_all(struct model *m)
{
    int keep[M_LANES], n = 0;
    bool on[M_LANES] = {false};
    for (int i = 0; i < m->nring; i++) {
        on[m->ring[i]] = true;
        if (m_serviceable(m, m->ring[i]))
            keep[n++] = m->ring[i];
    }
    if (m->nring > 0 && (n == 0 || keep[0] != m->ring[0]))
        m->used = 0;
    for (int l = 0; l < M_LANES; l++)
        if (!on[l] && m_serviceable(m, l))
            keep[n++] = l;
    memcpy(m->ring, keep, sizeof(int) * (size_t)n);
    m->nring = n;
}

/* The ring head's turn ends if it has had its (new) weight. */
static void m_end_turn(struct model *m)
{
    if (m->nring > 0 && m->used > 0 && m->used >= m_weight(m, &m->lane[m->ring[0]])) {
        int l = m->ring[0];
        memmove(&m->ring[0], &m->ring[1], sizeof(int) * (size_t)(m->nring - 1));
        m->ring[m->nring - 1] = l;
        m->used = 0;
    }
}

static void m_reconcile(struct model *m, int l)
{
    int at = m_pos(m, l);
    if (at >= 0 && !m_serviceable(m, l))
        m_remove_at(m, at);
    else if (at < 0 && m_serviceable(m, l))
        m->ring[m->nring++] = l;
}

/* One claim of n: the jobs served, in order, as "JOB..." ids. */
static int m_claim(struct model *m, int n, char (*ids)[72])
{
    int served = 0;
    while (served < n && m->nring > 0) {
        int l = m->ring[0];
        struct m_lane *x = &m->lane[l];
        snprintf(ids[served++], 72, "JOB%s-%05d", x->name, x->next++);
        memcpy(x->leased[x->active++], ids[served - 1], 72);
        m->served++;
        if (m->used++ > 0 && m->nring > 1)
            m->turned++;
        if (m_rated(m, x)) {
            x->held = true;
            m->throttled++;
        }
        int lim = m_limit(m, x);
        if ((lim > 0 && x->active >= lim) || m_depth(m, l) == 0 || x->held) {
            m_remove_at(m, 0);
        } else if (m->used >= m_weight(m, x)) {
            memmove(&m->ring[0], &m->ring[1], sizeof(int) * (size_t)(m->nring - 1));
            m->ring[m->nring - 1] = l;
            m->used = 0;
        }
    }
    return served;
}

static void m_ring(const struct model *m, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < m->nring && used < cap; i++)
        used += snprintf(out + used, cap - used, "%s%s", i ? "," : "", m->lane[m->ring[i]].name);
}

static int lane_of(const struct model *m, const char *group)
{
    for (int l = 0; l < M_LANES; l++)
        if (strcmp(m->lane[l].name, group) == 0)
            return l;
    cr_assert_fail("no lane %s", group);
    return -1;
}

/* Complete lane l's oldest lease; the lane comes back to the ring when
 * that takes it from its ceiling to one below. */
static void m_complete_oldest(struct model *m, int l)
{
    struct m_lane *x = &m->lane[l];
    char st[32];
    fx_complete(x->leased[0], x->tokens[0], st, sizeof(st));
    cr_assert_str_eq(st, "completed");
    memmove(x->leased[0], x->leased[1], 72 * (size_t)(x->active - 1));
    memmove(x->tokens[0], x->tokens[1], 32 * (size_t)(x->active - 1));
    x->active--;
    if (m_limit(m, x) > 0 && x->active == m_limit(m, x) - 1 && !x->paused && m_depth(m, l) > 0 &&
        !x->held)
        m->ring[m->nring++] = l;
}

/* One random move, made on the store and on the model alike. */
static void step(struct model *m, unsigned *seed, int k)
{
    int l = rand_r(seed) % M_LANES, v;
    struct m_lane *x = &m->lane[l];
    char num[16], ids[16][72];
    struct leased j[16];
    switch (rand_r(seed) % 17) {
    case 0:
    case 1:
    case 2: /* enqueue a few; a lane at its cap refuses, writing nothing */
        v = 1 + rand_r(seed) % 4;
        if (x->enq + v >= 400)
            break;
        for (int i = 0; i < v; i++) {
            int cap = x->cap ? x->cap : m->dcap;
            bool refuse = cap > 0 && m_depth(m, l) >= cap;
            char job[72];
            snprintf(job, sizeof(job), "JOB%s-%05d", x->name, x->enq);
            redisReply *r =
                lanes_call(fx_conn, &fx_q, SCRIPT_ENQUEUE, job, x->name, "{}", "0", "0", NULL);
            cr_assert(r != NULL);
            cr_assert_eq(r->type == REDIS_REPLY_ARRAY, refuse, "move %d: %s %s refused", k, job,
                         refuse ? "not" : "");
            cr_assert(refuse || (r->type == REDIS_REPLY_INTEGER && r->integer == 1));
            freeReplyObject(r);
            if (refuse) {
                m->refused++;
                continue;
            }
            x->enq++;
            if (m_depth(m, l) == 1 && m_pos(m, l) < 0 && m_serviceable(m, l))
                m->ring[m->nring++] = l;
        }
        break;
    case 3:
    case 4:
    case 5: { /* a batch claim */
        v = 1 + rand_r(seed) % 8;
        int want = m_claim(m, v, ids);
        size_t got = fx_claim((size_t)v, 30000, j, NULL);
        cr_assert_eq(got, (size_t)want, "move %d: claim of %d served %zu, model %d", k, v, got,
                     want);
        for (size_t i = 0; i < got; i++) {
            cr_assert_str_eq(j[i].job, ids[i], "move %d: position %zu", k, i);
            struct m_lane *y = &m->lane[lane_of(m, j[i].group)];
            for (int a = 0; a < y->active; a++)
                if (strcmp(y->leased[a], j[i].job) == 0)
                    snprintf(y->tokens[a], 32, "%s", j[i].lease);
        }
        break;
    }
    case 6: /* complete the oldest lease of the lane */
        if (x->active > 0)
            m_complete_oldest(m, l);
        break;
    case 14: /* complete every lease of the lane, as a fast worker would */
        while (x->active > 0)
            m_complete_oldest(m, l);
        break;
    case 7: /* weight, or reset it */
        v = rand_r(seed) % 5;
        snprintf(num, sizeof(num), "%d", v);
        weight(x->name, num);
        x->weight = v;
        m_end_turn(m);
        break;
    case 8: /* ceiling, or none */
        v = rand_r(seed) % 4;
        snprintf(num, sizeof(num), "%d", v);
        cr_assert_eq(fx_int(SCRIPT_LIMIT, x->name, num, NULL), 1);
        x->limit = v;
        m_reconcile(m, l);
        break;
    case 10: /* a rate of one lease a minute, or none */
        x->rated = !x->rated;
        cr_assert_eq(fx_int(SCRIPT_RATE, x->name, x->rated ? "1" : "0", "60000", NULL), 1);
        /* Removed, the TAT goes (a default rate applies afresh); set, it
         * stays: a lane held by the default stays held. */
        if (!x->rated)
            x->held = false;
        m_reconcile(m, l);
        break;
    case 11: /* the default weight, or none */
        v = rand_r(seed) % 5;
        snprintf(num, sizeof(num), "%d", v);
        weight("", num);
        m->dweight = v;
        m_end_turn(m);
        break;
    case 12: /* the default ceiling; a set one is often removed, as a
              * default ceiling of 1 on every lane would starve the run */
        v = m->dlimit && rand_r(seed) % 2 ? 0 : rand_r(seed) % 4;
        snprintf(num, sizeof(num), "%d", v);
        cr_assert_eq(fx_int(SCRIPT_LIMIT, "", num, NULL), 1);
        m->dlimit = v;
        m_replace_all(m);
        m->defaults++;
        break;
    case 13: /* the default rate: set now and then, removed soon after */
        if (!m->drated && rand_r(seed) % 3 != 0)
            break;
        m->drated = !m->drated;
        cr_assert_eq(fx_int(SCRIPT_RATE, "", m->drated ? "1" : "0", "60000", NULL), 1);
        for (int i = 0; !m->drated && i < M_LANES; i++)
            if (!m->lane[i].rated)
                m->lane[i].held = false; /* left with no rate, the TAT goes */
        m_replace_all(m);
        break;
    case 15: /* a cap, or (as often) none: no lane moves */
        v = rand_r(seed) % 2 ? 0 : 1 + rand_r(seed) % 6;
        snprintf(num, sizeof(num), "%d", v);
        cr_assert_eq(fx_int(SCRIPT_CAP, x->name, num, NULL), 1);
        x->cap = v;
        break;
    case 16: /* the default cap: set now and then, removed soon after */
        if (!m->dcap && rand_r(seed) % 3 != 0)
            break;
        v = m->dcap ? 0 : 2 + rand_r(seed) % 5;
        snprintf(num, sizeof(num), "%d", v);
        cr_assert_eq(fx_int(SCRIPT_CAP, "", num, NULL), 1);
        m->dcap = v;
        break;
    default: /* pause or resume */
        x->paused = !x->paused;
        cr_assert_eq(fx_int(x->paused ? SCRIPT_PAUSE : SCRIPT_RESUME, x->name, NULL), 1);
        m_reconcile(m, l);
        break;
    }
    char ring[128], want[128];
    fx_ring(ring, sizeof(ring));
    m_ring(m, want, sizeof(want));
    cr_assert_str_eq(ring, want, "move %d: the ring", k);
}

static void run_model(unsigned seed, int moves)
{
    static struct model m;
    memset(&m, 0, sizeof(m));
    for (int l = 0; l < M_LANES; l++) {
        snprintf(m.lane[l].name, sizeof(m.lane[l].name), "TEN%c", 'a' + l);
    }
    for (int k = 0; k < moves; k++) {
        step(&m, &seed, k);
        if (k % 200 == 199)
            fx_assert_invariants(&fx_q);
    }
    /* The sequence must have exercised what it is for: weighted turns
     * with other lanes waiting, among many jobs served, and many default
     * ceilings (the defaults hold lanes often, so fewer jobs are served
     * per move than without them). */
    cr_assert_gt(m.served, 400, "only %d jobs served", m.served);
    cr_assert_gt(m.turned, 20, "only %d jobs in weighted turns", m.turned);
    cr_assert_gt(m.throttled, 5, "only %d leases under a rate", m.throttled);
    cr_assert_gt(m.defaults, 50, "only %d default ceilings set", m.defaults);
    cr_assert_gt(m.refused, 20, "only %d enqueues refused by a cap", m.refused);
}

LANE_TEST(weight, the_model_agrees_on_every_job_served)
{
    run_model(16, 4000);
}

LANE_TEST(weight, the_model_agrees_on_another_sequence)
{
    run_model(1601, 4000);
}
