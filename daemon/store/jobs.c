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

/* {-1, cap, "group"|"queue"}: refused by the lane's cap. */
static bool refused_parse(const redisReply *r, struct store_enqueued *res)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[0]->integer != -1 ||
        !store_int(r->element[1], &res->cap) || res->cap < 1 ||
        r->element[2]->type != REDIS_REPLY_STRING)
        return false;
    if (strcmp(r->element[2]->str, "group") == 0)
        res->cap_from = STORE_CAP_GROUP;
    else if (strcmp(r->element[2]->str, "queue") == 0)
        res->cap_from = STORE_CAP_QUEUE;
    else
        return false;
    return true;
}

/* 1 enqueued, 0 duplicate, {-1, cap, from}: refused, or {1, deadline, five
 * job fields}: handed off. */
static int enqueued_parse(const redisReply *r, void *out)
{
    struct store_enqueued *res = out;
    *res = (struct store_enqueued){0};
    if (r->type == REDIS_REPLY_INTEGER && (r->integer == 0 || r->integer == 1)) {
        res->enqueued = r->integer == 1;
        return 0;
    }
    if (refused_parse(r, res))
        return 0;
    res->cap = 0;
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 + JOB_FIELDS &&
        store_int(r->element[1], &res->deadline) && job_decode(r->element + 2, false, &res->job)) {
        res->enqueued = res->handed_off = true;
        return 0;
    }
    return STORE_SHAPE;
}

static void enqueue_decode(const struct store_call *c, const struct store_status *st,
                           const redisReply *r)
{
    struct store_status s = *st;
    struct store_enqueued res;
    bool ok = store_parsed(c, &s, r, enqueued_parse, &res);
    ((store_enqueue_cb *)c->cb)(c->priv, &s, ok ? &res : NULL);
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
    /* Without a hand-off the argument is left out, as the script allows;
     * with one, the call may lease, and is tagged (lost.c). */
    if (a->handoff_ms == 0)
        return store_send(sq, SCRIPT_ENQUEUE, 5, argv, lens, enqueue_decode, STORE_CB(cb), priv, 0);
    return store_send_leasing(sq, SCRIPT_ENQUEUE, 6, argv, lens, enqueue_decode, STORE_CB(cb), priv,
                              0);
}

/* --- enqueue_many ------------------------------------------------------ */

/* A verdicts reply decoded: one per item sent. The messages of refused
 * items point into the reply, which outlives the callback. */
struct verdicts {
    size_t n;
    struct store_item_verdict each[STORE_ITEMS_PER_CALL];
};

static int verdicts_parse(const redisReply *r, void *out)
{
    struct verdicts *v = out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != v->n)
        return STORE_SHAPE;
    for (size_t i = 0; i < v->n; i++) {
        const redisReply *e = r->element[i];
        struct store_item_verdict *o = &v->each[i];
        *o = (struct store_item_verdict){.st = store_ok};
        if (e->type == REDIS_REPLY_INTEGER && (e->integer == 0 || e->integer == 1)) {
            o->res.enqueued = e->integer == 1;
        } else if (e->type == REDIS_REPLY_ARRAY) {
            if (!refused_parse(e, &o->res))
                return STORE_SHAPE;
        } else if (e->type == REDIS_REPLY_ERROR) {
            /* The item's own "ECODE message", as a whole call's (store.c). */
            size_t w = strcspn(e->str, " ");
            o->st.code = wire_error_lookup(e->str, w);
            o->st.message = e->str[w] ? e->str + w + 1 : e->str;
            if (o->st.code == WIRE_EINTERNAL)
                return STORE_SHAPE; /* not a code the script returns: logged as unexpected */
        } else {
            return STORE_SHAPE;
        }
    }
    return 0;
}

static void verdicts_decode(const struct store_call *c, const struct store_status *st,
                            const redisReply *r)
{
    struct store_status s = *st;
    struct verdicts v = {.n = c->n};
    bool ok = store_parsed(c, &s, r, verdicts_parse, &v);
    ((store_enqueue_many_cb *)c->cb)(c->priv, &s, ok ? v.n : 0, ok ? v.each : NULL);
}

int store_enqueue_many(struct store_queue *sq, const struct store_enqueue_args *items, size_t n,
                       store_enqueue_many_cb *cb, void *priv)
{
    enum { PER = 5 };
    if (n == 0 || n > STORE_ITEMS_PER_CALL)
        return -EINVAL;
    const char *argv[PER * STORE_ITEMS_PER_CALL];
    size_t lens[PER * STORE_ITEMS_PER_CALL];
    char nums[2 * STORE_ITEMS_PER_CALL][24];
    for (size_t i = 0; i < n; i++) {
        const struct store_enqueue_args *a = &items[i];
        const char **v = argv + PER * i;
        size_t *l = lens + PER * i;
        v[0] = a->job;
        v[1] = a->group;
        v[2] = a->payload;
        v[3] = store_num(nums[2 * i], a->delay_ms);
        v[4] = store_num(nums[2 * i + 1], a->max_attempts);
        for (int k = 0; k < PER; k++)
            l[k] = k == 2 ? a->payload_len : strlen(v[k]);
    }
    /* The pool copies the arguments: they may go when this returns. */
    return store_send(sq, SCRIPT_ENQUEUE_MANY, (int)(PER * n), argv, lens, verdicts_decode,
                      STORE_CB(cb), priv, n);
}

/* --- claim ------------------------------------------------------------- */

/* Up to this many jobs are decoded on the stack; a larger batch (claim
 * takes up to 1000) allocates. */
#define CLAIM_STACK 64

/* A claim reply decoded: res, its jobs in stack or heap (freed by the
 * decoder); max, the most jobs the call asked for. */
struct claimed {
    struct store_leased res;
    struct store_job stack[CLAIM_STACK], *heap;
    size_t max;
};

static int claimed_parse(const redisReply *r, void *out)
{
    struct claimed *o = out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 || (r->elements - 1) % CLAIM_FIELDS != 0 ||
        (r->elements - 1) / CLAIM_FIELDS > o->max || !store_int(r->element[0], &o->res.deadline))
        return STORE_SHAPE;
    size_t n = (r->elements - 1) / CLAIM_FIELDS;
    struct store_job *jobs = o->stack;
    if (n > CLAIM_STACK && (jobs = o->heap = malloc(n * sizeof(*jobs))) == NULL)
        return -ENOMEM; /* the jobs stay leased at Redis: given back as lost (lost.c) */
    for (size_t i = 0; i < n; i++)
        if (!job_decode(r->element + 1 + CLAIM_FIELDS * i, true, &jobs[i]))
            return STORE_SHAPE;
    o->res.n = n;
    o->res.jobs = jobs;
    return 0;
}

static void claim_decode(const struct store_call *c, const struct store_status *st,
                         const redisReply *r)
{
    struct store_status s = *st;
    struct claimed o = {.max = c->n};
    bool ok = store_parsed(c, &s, r, claimed_parse, &o);
    ((store_claim_cb *)c->cb)(c->priv, &s, ok ? &o.res : NULL);
    free(o.heap);
}

int store_claim(struct store_queue *sq, bool flat, size_t n, uint64_t lease_ms, size_t max_bytes,
                store_claim_cb *cb, void *priv)
{
    char ns[24], ls[24], bs[24];
    const char *argv[] = {store_num(ns, (long long)n), store_num(ls, (long long)lease_ms),
                          "1", /* with each job's wait */
                          store_num(bs, (long long)max_bytes)};
    return store_send_leasing(sq, flat ? SCRIPT_CLAIM_FLAT : SCRIPT_CLAIM, 4, argv, NULL,
                              claim_decode, STORE_CB(cb), priv, n);
}

/* --- settling ---------------------------------------------------------- */

/* The words complete.lua and release.lua answer per item. */
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

/* A settling reply decoded: one outcome per pair sent (n), in stack or
 * heap (freed by the decoder). */
struct outcomes {
    size_t n;
    enum store_outcome stack[OUTCOMES_STACK], *heap, *each;
};

static int outcomes_parse(const redisReply *r, void *out)
{
    struct outcomes *o = out;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != o->n)
        return STORE_SHAPE;
    o->each = o->stack;
    if (o->n > OUTCOMES_STACK && (o->each = o->heap = malloc(o->n * sizeof(*o->each))) == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < o->n; i++)
        if (!outcome_of(r->element[i], &o->each[i]))
            return STORE_SHAPE;
    return 0;
}

static void outcomes_decode(const struct store_call *c, const struct store_status *st,
                            const redisReply *r)
{
    struct store_status s = *st;
    struct outcomes o = {.n = c->n};
    bool ok = store_parsed(c, &s, r, outcomes_parse, &o);
    ((store_outcomes_cb *)c->cb)(c->priv, &s, ok ? o.n : 0, ok ? o.each : NULL);
    free(o.heap);
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
    int rc = store_send(sq, id, (int)(nhead + 2 * n), argv, NULL, outcomes_decode, STORE_CB(cb),
                        priv, n);
    free(argv);
    return rc;
}

int store_settle(struct store_queue *sq, uint64_t retention_ms, size_t n,
                 const struct store_settlement *items, store_outcomes_cb *cb, void *priv)
{
    /* A completion is two arguments, a fail six: "fail", then five. */
    if (n == 0 || n > ((size_t)INT32_MAX - 1) / 6)
        return -EINVAL;
    size_t nfail = 0;
    for (size_t i = 0; i < n; i++)
        nfail += items[i].fail != NULL;
    const char **argv = malloc((1 + 2 * n + 4 * nfail) * sizeof(*argv));
    /* Each fail's retry_ms as text; argv points into it. A call of
     * completions alone (the common one) allocates none. */
    char(*nums)[24] = nfail > 0 ? malloc(nfail * sizeof(*nums)) : NULL;
    int rc = -ENOMEM;
    if (argv != NULL && (nfail == 0 || nums != NULL)) {
        char keep[24];
        size_t a = 0, k = 0;
        argv[a++] = store_num(keep, (long long)retention_ms);
        for (size_t i = 0; i < n; i++) {
            const struct store_settlement *it = &items[i];
            if (it->fail != NULL)
                argv[a++] = "fail";
            argv[a++] = it->job;
            argv[a++] = it->lease;
            if (it->fail != NULL) {
                argv[a++] = it->fail->error;
                argv[a++] = store_num(nums[k++], it->fail->retry_ms);
                argv[a++] = it->fail->dead ? "1" : "0";
            }
        }
        /* The pool copies the arguments: they may go now. */
        rc = store_send(sq, SCRIPT_COMPLETE, (int)a, argv, NULL, outcomes_decode, STORE_CB(cb),
                        priv, n);
    }
    free(argv);
    free(nums);
    return rc;
}

int store_release(struct store_queue *sq, const char *reason, enum store_release_mode mode,
                  size_t n, const struct store_pair *pairs, store_outcomes_cb *cb, void *priv)
{
    static const char *const words[] = {
        [STORE_RELEASE_COUNTED] = "delivered",
        [STORE_RELEASE_RETURNED] = "returned",
        [STORE_RELEASE_UNDELIVERED] = "undelivered",
    };
    const char *head[] = {reason, words[mode]};
    return send_pairs(sq, SCRIPT_RELEASE, 2, head, n, pairs, cb, priv);
}

/* extend answers the new deadline. */
static int until_parse(const redisReply *r, void *out)
{
    return store_int(r, out) ? 0 : STORE_SHAPE;
}

static void extend_decode(const struct store_call *c, const struct store_status *st,
                          const redisReply *r)
{
    struct store_status s = *st;
    long long until = 0;
    if (!store_parsed(c, &s, r, until_parse, &until))
        until = 0;
    ((store_extend_cb *)c->cb)(c->priv, &s, until);
}

int store_extend(struct store_queue *sq, const char *job, const char *lease, uint64_t lease_ms,
                 store_extend_cb *cb, void *priv)
{
    char ms[24];
    const char *argv[] = {job, lease, store_num(ms, (long long)lease_ms)};
    return store_send(sq, SCRIPT_EXTEND, 3, argv, NULL, extend_decode, STORE_CB(cb), priv, 0);
}

/* --- upkeep ------------------------------------------------------------- */

/* reap and promote answer {done, ms until the next is due or -1};
 * reap_group the number reaped alone. */
struct upkept {
    long long done, next;
};

static int upkept_parse(const redisReply *r, void *out)
{
    struct upkept *u = out;
    bool ok = r->type == REDIS_REPLY_ARRAY
                  ? r->elements == 2 && store_int(r->element[0], &u->done) &&
                        store_int(r->element[1], &u->next)
                  : store_int(r, &u->done);
    return ok && u->done >= 0 ? 0 : STORE_SHAPE;
}

static void upkeep_decode(const struct store_call *c, const struct store_status *st,
                          const redisReply *r)
{
    struct store_status s = *st;
    struct upkept u = {0, -1};
    if (!store_parsed(c, &s, r, upkept_parse, &u))
        u = (struct upkept){0, -1};
    ((store_upkeep_cb *)c->cb)(c->priv, &s, (uint64_t)u.done, u.next);
}

int store_reap(struct store_queue *sq, uint64_t max, store_upkeep_cb *cb, void *priv)
{
    char m[24];
    const char *argv[] = {store_num(m, (long long)max)};
    return store_send(sq, SCRIPT_REAP, 1, argv, NULL, upkeep_decode, STORE_CB(cb), priv, 0);
}

int store_promote(struct store_queue *sq, uint64_t max, store_upkeep_cb *cb, void *priv)
{
    char m[24];
    const char *argv[] = {store_num(m, (long long)max)};
    return store_send(sq, SCRIPT_PROMOTE, 1, argv, NULL, upkeep_decode, STORE_CB(cb), priv, 0);
}

int store_reap_group(struct store_queue *sq, const char *group, uint64_t max, store_upkeep_cb *cb,
                     void *priv)
{
    char m[24];
    const char *argv[] = {group, store_num(m, (long long)max)};
    return store_send(sq, SCRIPT_REAP_GROUP, 2, argv, NULL, upkeep_decode, STORE_CB(cb), priv, 0);
}

/* format answers {done (0 or 1), indexed}. */
struct formatted {
    long long done, indexed;
};

static int format_parse(const redisReply *r, void *out)
{
    struct formatted *f = out;
    bool ok = r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
              store_int(r->element[0], &f->done) && store_int(r->element[1], &f->indexed);
    return ok && (f->done == 0 || f->done == 1) && f->indexed >= 0 ? 0 : STORE_SHAPE;
}

static void format_decode(const struct store_call *c, const struct store_status *st,
                          const redisReply *r)
{
    struct store_status s = *st;
    struct formatted f = {0, 0};
    if (!store_parsed(c, &s, r, format_parse, &f))
        f = (struct formatted){0, 0};
    ((store_format_cb *)c->cb)(c->priv, &s, f.done == 1, (uint64_t)f.indexed);
}

int store_format(struct store_queue *sq, uint64_t max, store_format_cb *cb, void *priv)
{
    char m[24];
    const char *argv[] = {store_num(m, (long long)max)};
    return store_send(sq, SCRIPT_FORMAT, 1, argv, NULL, format_decode, STORE_CB(cb), priv, 0);
}
