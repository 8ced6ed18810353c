/* jobs: the typed calls of the job path (jobs.h). Each builds its
 * script's ARGV in the order the script's header states, and decodes the
 * reply once, here, into the C values its callback gets. */
#include "jobs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

/* The fields of one leased job in claim's reply (lua/claim.lua): id,
 * group, payload, attempt, token, and with waits asked for a sixth,
 * wait_ms. A hand-off (lua/enqueue.lua) has the first five. */
#define JOB_FIELDS   5
#define CLAIM_FIELDS 6

/* One leased job's fields from f[0..JOB_FIELDS) (and f[5], the wait,
 * when with_wait): false when they are not what the scripts return. */
static bool job_decode(redisReply *const *f, bool with_wait, struct store_job *j)
{
    for (int i = 0; i < JOB_FIELDS; i++)
        if ((i == 3 ? f[i]->type != REDIS_REPLY_INTEGER : f[i]->type != REDIS_REPLY_STRING))
            return false;
    long long wait = 0;
    if (with_wait && !store_int(f[5], &wait))
        return false;
    *j = (struct store_job){
        .id = f[0]->str,
        .id_len = f[0]->len,
        .group = f[1]->str,
        .group_len = f[1]->len,
        .payload = f[2]->str,
        .payload_len = f[2]->len,
        .attempt = f[3]->integer,
        .lease = f[4]->str,
        .lease_len = f[4]->len,
        .wait_ms = wait,
    };
    return f[0]->len > 0 && f[4]->len > 0;
}

/* --- enqueue --------------------------------------------------------- */

static void enqueue_decode(const struct store_call *c, const struct store_status *st,
                           const redisReply *r)
{
    store_enqueue_cb *cb = (store_enqueue_cb *)c->cb;
    struct store_status bad;
    if (st->code != 0) {
        cb(c->priv, st, NULL);
        return;
    }
    /* 1 enqueued, 0 duplicate, or {1, deadline, five job fields}: handed off. */
    struct store_enqueued res = {0};
    if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
        res.enqueued = r->integer == 1;
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 + JOB_FIELDS &&
               store_int(r->element[1], &res.deadline) &&
               job_decode(r->element + 2, false, &res.job)) {
        res.enqueued = res.handed_off = true;
    } else {
        store_unexpected(c, r, &bad);
        cb(c->priv, &bad, NULL);
        return;
    }
    cb(c->priv, &store_ok, &res);
}

int store_enqueue(struct store_queue *sq, const struct store_enqueue_args *a, store_enqueue_cb *cb,
                  void *priv)
{
    char delay[24], max[24], hand[24];
    const char *argv[] = {a->job,
                          a->group,
                          a->payload,
                          store_num(delay, a->delay_ms),
                          store_num(max, a->max_attempts),
                          store_num(hand, (long long)a->handoff_ms)};
    size_t lens[] = {strlen(a->job), strlen(a->group), a->payload_len,
                     strlen(delay),  strlen(max),      strlen(hand)};
    /* Without a hand-off the argument is left out, as the script allows. */
    return store_send(sq, SCRIPT_ENQUEUE, a->handoff_ms ? 6 : 5, argv, lens, enqueue_decode,
                      (void (*)(void))cb, priv, 0);
}

/* --- claim ------------------------------------------------------------- */

/* Up to this many jobs are decoded on the stack; a larger batch (claim
 * takes up to 1000) allocates. */
#define CLAIM_STACK 64

static void claim_decode(const struct store_call *c, const struct store_status *st,
                         const redisReply *r)
{
    store_claim_cb *cb = (store_claim_cb *)c->cb;
    struct store_status bad;
    if (st->code != 0) {
        cb(c->priv, st, NULL);
        return;
    }
    struct store_leased res = {0};
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || (r->elements - 1) % CLAIM_FIELDS != 0 ||
        (r->elements - 1) / CLAIM_FIELDS > c->n || !store_int(r->element[0], &res.deadline)) {
        store_unexpected(c, r, &bad);
        cb(c->priv, &bad, NULL);
        return;
    }
    res.n = (r->elements - 1) / CLAIM_FIELDS;
    struct store_job stack[CLAIM_STACK];
    struct store_job *jobs = res.n <= CLAIM_STACK ? stack : malloc(res.n * sizeof(*jobs));
    bool ok = jobs != NULL;
    for (size_t i = 0; ok && i < res.n; i++)
        ok = job_decode(r->element + 1 + CLAIM_FIELDS * i, true, &jobs[i]);
    if (!ok) {
        /* The jobs stay leased at Redis and come back when it expires. */
        if (jobs == NULL)
            bad = (struct store_status){WIRE_EINTERNAL, "out of memory"};
        else
            store_unexpected(c, r, &bad);
        cb(c->priv, &bad, NULL);
    } else {
        res.jobs = jobs;
        cb(c->priv, &store_ok, &res);
    }
    if (jobs != stack)
        free(jobs);
}

int store_claim(struct store_queue *sq, bool flat, size_t n, uint64_t lease_ms, size_t max_bytes,
                store_claim_cb *cb, void *priv)
{
    char ns[24], ls[24], bs[24];
    const char *argv[] = {store_num(ns, (long long)n), store_num(ls, (long long)lease_ms),
                          "1", /* with each job's wait */
                          store_num(bs, (long long)max_bytes)};
    return store_send(sq, flat ? SCRIPT_CLAIM_FLAT : SCRIPT_CLAIM, 4, argv, NULL, claim_decode,
                      (void (*)(void))cb, priv, n);
}

/* --- settling ---------------------------------------------------------- */

/* The words complete.lua and release.lua answer per pair, and fail.lua as
 * its value. */
static bool outcome_of(const redisReply *e, enum store_outcome *o)
{
    static const struct {
        const char *word;
        enum store_outcome o;
    } words[] = {
        {"completed", STORE_COMPLETED}, {"pending", STORE_PENDING}, {"delayed", STORE_DELAYED},
        {"dead", STORE_DEAD},           {"ELEASE", STORE_ELEASE},   {"ENOJOB", STORE_ENOJOB},
    };
    if (e->type != REDIS_REPLY_STRING && e->type != REDIS_REPLY_STATUS)
        return false;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (e->len == strlen(words[i].word) && memcmp(e->str, words[i].word, e->len) == 0) {
            *o = words[i].o;
            return true;
        }
    }
    return false;
}

#define OUTCOMES_STACK 64

static void outcomes_decode(const struct store_call *c, const struct store_status *st,
                            const redisReply *r)
{
    store_outcomes_cb *cb = (store_outcomes_cb *)c->cb;
    struct store_status bad;
    if (st->code != 0) {
        cb(c->priv, st, 0, NULL);
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != c->n) {
        store_unexpected(c, r, &bad);
        cb(c->priv, &bad, 0, NULL);
        return;
    }
    enum store_outcome stack[OUTCOMES_STACK];
    enum store_outcome *each = c->n <= OUTCOMES_STACK ? stack : malloc(c->n * sizeof(*each));
    bool ok = each != NULL;
    for (size_t i = 0; ok && i < c->n; i++)
        ok = outcome_of(r->element[i], &each[i]);
    if (ok) {
        cb(c->priv, &store_ok, c->n, each);
    } else {
        if (each == NULL)
            bad = (struct store_status){WIRE_EINTERNAL, "out of memory"};
        else
            store_unexpected(c, r, &bad);
        cb(c->priv, &bad, 0, NULL);
    }
    if (each != stack)
        free(each);
}

/* Send a script whose ARGV is head[0..nhead) then the n pairs. */
static int send_pairs(struct store_queue *sq, enum script_id id, size_t nhead, const char **head,
                      size_t n, const struct store_pair *pairs, store_outcomes_cb *cb, void *priv)
{
    if (n == 0 || n > ((size_t)INT32_MAX - nhead) / 2)
        return -EINVAL;
    const char **argv = malloc((nhead + 2 * n) * sizeof(*argv));
    if (argv == NULL)
        return -ENOMEM;
    memcpy(argv, head, nhead * sizeof(*argv));
    for (size_t i = 0; i < n; i++) {
        argv[nhead + 2 * i] = pairs[i].job;
        argv[nhead + 2 * i + 1] = pairs[i].lease;
    }
    /* The pool copies the arguments: argv may go now. */
    int rc = store_send(sq, id, (int)(nhead + 2 * n), argv, NULL, outcomes_decode,
                        (void (*)(void))cb, priv, n);
    free(argv);
    return rc;
}

int store_complete(struct store_queue *sq, uint64_t retention_ms, size_t n,
                   const struct store_pair *pairs, store_outcomes_cb *cb, void *priv)
{
    char keep[24];
    const char *head[] = {store_num(keep, (long long)retention_ms)};
    return send_pairs(sq, SCRIPT_COMPLETE, 1, head, n, pairs, cb, priv);
}

int store_release(struct store_queue *sq, const char *reason, bool delivered, size_t n,
                  const struct store_pair *pairs, store_outcomes_cb *cb, void *priv)
{
    const char *head[] = {reason, delivered ? "delivered" : "undelivered"};
    return send_pairs(sq, SCRIPT_RELEASE, 2, head, n, pairs, cb, priv);
}

static void fail_decode(const struct store_call *c, const struct store_status *st,
                        const redisReply *r)
{
    store_fail_cb *cb = (store_fail_cb *)c->cb;
    struct store_status bad;
    enum store_outcome o = STORE_ENOJOB;
    if (st->code != 0) {
        cb(c->priv, st, o);
        return;
    }
    if (!outcome_of(r, &o) || (o != STORE_PENDING && o != STORE_DELAYED && o != STORE_DEAD)) {
        store_unexpected(c, r, &bad);
        cb(c->priv, &bad, STORE_ENOJOB);
        return;
    }
    cb(c->priv, &store_ok, o);
}

int store_fail(struct store_queue *sq, const struct store_fail_args *a, store_fail_cb *cb,
               void *priv)
{
    char retry[24];
    const char *argv[] = {a->job, a->lease, a->error, store_num(retry, a->retry_ms),
                          a->dead ? "1" : "0"};
    return store_send(sq, SCRIPT_FAIL, 5, argv, NULL, fail_decode, (void (*)(void))cb, priv, 0);
}

static void extend_decode(const struct store_call *c, const struct store_status *st,
                          const redisReply *r)
{
    store_extend_cb *cb = (store_extend_cb *)c->cb;
    struct store_status bad;
    long long until = 0;
    if (st->code != 0) {
        cb(c->priv, st, 0);
    } else if (!store_int(r, &until)) {
        store_unexpected(c, r, &bad);
        cb(c->priv, &bad, 0);
    } else {
        cb(c->priv, &store_ok, until);
    }
}

int store_extend(struct store_queue *sq, const char *job, const char *lease, uint64_t lease_ms,
                 store_extend_cb *cb, void *priv)
{
    char ms[24];
    const char *argv[] = {job, lease, store_num(ms, (long long)lease_ms)};
    return store_send(sq, SCRIPT_EXTEND, 3, argv, NULL, extend_decode, (void (*)(void))cb, priv, 0);
}

/* --- upkeep ------------------------------------------------------------- */

/* reap and promote answer {done, ms until the next is due or -1};
 * reap_group the number reaped alone. */
static void upkeep_decode(const struct store_call *c, const struct store_status *st,
                          const redisReply *r)
{
    store_upkeep_cb *cb = (store_upkeep_cb *)c->cb;
    struct store_status bad;
    long long done = 0, next = -1;
    if (st->code != 0) {
        cb(c->priv, st, 0, -1);
        return;
    }
    bool ok = r->type == REDIS_REPLY_ARRAY ? r->elements == 2 && store_int(r->element[0], &done) &&
                                                 store_int(r->element[1], &next)
                                           : store_int(r, &done);
    if (!ok || done < 0) {
        store_unexpected(c, r, &bad);
        cb(c->priv, &bad, 0, -1);
        return;
    }
    cb(c->priv, &store_ok, (uint64_t)done, next);
}

int store_reap(struct store_queue *sq, uint64_t max, store_upkeep_cb *cb, void *priv)
{
    char m[24];
    const char *argv[] = {store_num(m, (long long)max)};
    return store_send(sq, SCRIPT_REAP, 1, argv, NULL, upkeep_decode, (void (*)(void))cb, priv, 0);
}

int store_promote(struct store_queue *sq, uint64_t max, store_upkeep_cb *cb, void *priv)
{
    char m[24];
    const char *argv[] = {store_num(m, (long long)max)};
    return store_send(sq, SCRIPT_PROMOTE, 1, argv, NULL, upkeep_decode, (void (*)(void))cb, priv,
                      0);
}

int store_reap_group(struct store_queue *sq, const char *group, uint64_t max, store_upkeep_cb *cb,
                     void *priv)
{
    char m[24];
    const char *argv[] = {group, store_num(m, (long long)max)};
    return store_send(sq, SCRIPT_REAP_GROUP, 2, argv, NULL, upkeep_decode, (void (*)(void))cb, priv,
                      0);
}
