/* batch: the settlements (completions and fails) of one loop turn, per
 * queue, sent as few script calls (lua/complete.lua takes both, in order;
 * at most STORE_PAIRS_PER_CALL completions' worth each, a fail counting
 * STORE_FAIL_WEIGHT, so one call stays short in Redis), and likewise the
 * enqueues that ask for no hand-off (lua/enqueue_many.lua; at most
 * STORE_ITEMS_PER_CALL each). A queue's batch goes out at the end of the
 * turn (engine_flush), or before any other call of the queue
 * (queue_store), so that a call made after a settlement or an enqueue
 * runs after it. A batch holds one kind at a time: adding a settlement
 * sends the enqueues gathered before it, and the other way round, so the
 * two keep their order too. Completions and fails share a batch, so a
 * worker that fails some of its jobs does not cut its completions' calls
 * short. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "queue.h"

static void flush_enqueues(struct queue *q);
static void flush_settlements(struct queue *q);

/* q is on the engine's list of queues with something to send. */
static void mark_batched(struct queue *q)
{
    if (!q->batched) {
        q->batched = true;
        q->batch_next = q->eng->batched;
        q->eng->batched = q;
    }
}

int queue_settle(struct queue *q, const struct queue_settlement *c)
{
    if (q->nenq > 0)
        flush_enqueues(q);
    if (q->nbatch == q->capbatch) {
        size_t cap = q->capbatch ? q->capbatch * 2 : 16;
        struct queue_settlement *b = realloc(q->batch, cap * sizeof(*b));
        if (b == NULL)
            return -ENOMEM;
        q->batch = b;
        q->capbatch = cap;
    }
    q->batch[q->nbatch++] = *c;
    mark_batched(q);
    return 0;
}

/* One batch call in flight: the settlements it carries. */
struct sent {
    struct queue *q;
    size_t n;
    struct queue_settlement items[];
};

/* Whether o is an answer complete.lua gives an item of c's kind: a
 * completion is completed, a fail moves its job (pending, delayed, dead),
 * and either may find no lease or no job. */
static bool fits(const struct queue_settlement *c, enum store_outcome o)
{
    if (o == STORE_ELEASE || o == STORE_ENOJOB)
        return true;
    return c->fail == NULL ? o == STORE_COMPLETED : o != STORE_COMPLETED;
}

static void settled_cb(void *priv, const struct store_status *st, size_t n,
                       const enum store_outcome *each)
{
    static const struct store_status odd = {WIRE_EINTERNAL, "unexpected backend reply"};
    struct sent *b = priv;
    (void)n; /* b->n outcomes when st->code is 0 */
    for (size_t i = 0; i < b->n; i++) {
        const struct queue_settlement *c = &b->items[i];
        enum store_outcome o = st->code == 0 ? each[i] : STORE_ENOJOB;
        const struct store_status *ist = st;
        if (st->code == 0 && !fits(c, o)) {
            log_event(LOG_ERROR, "unexpected backend reply", "call=complete item=%s outcome=%s",
                      c->fail != NULL ? "fail" : "completion", store_outcome_state(o));
            ist = &odd;
        } else if (st->code == 0 && o == STORE_COMPLETED) {
            b->q->count.completed++;
        }
        c->done(c->priv, ist, o);
    }
    free(b);
}

/* Send items[0..n) (n <= STORE_PAIRS_PER_CALL) as one call. */
static void flush_call(struct queue *q, const struct queue_settlement *items, size_t n)
{
    struct sent *b = malloc(sizeof(*b) + n * sizeof(b->items[0]));
    if (b == NULL) {
        static const struct store_status oom = {WIRE_EINTERNAL, "out of memory"};
        for (size_t i = 0; i < n; i++)
            items[i].done(items[i].priv, &oom, STORE_ENOJOB);
        return;
    }
    struct store_settlement each[STORE_PAIRS_PER_CALL];
    b->q = q;
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        b->items[i] = items[i];
        each[i] = (struct store_settlement){items[i].job, items[i].lease, items[i].fail};
    }
    if (store_settle(&q->store, q->eng->cfg->retention_ms, n, each, settled_cb, b) != 0) {
        static const struct store_status down = {WIRE_EUNAVAILABLE, "the backend is unavailable"};
        settled_cb(b, &down, 0, NULL);
    }
}

static void flush_settlements(struct queue *q)
{
    size_t n = q->nbatch, cap = q->capbatch;
    if (n == 0)
        return;
    /* The batch is ours now: a callback that runs at once (the backend
     * down) answers requests, and whatever that sets going settles into
     * a new array rather than over items not yet sent. */
    struct queue_settlement *items = q->batch;
    q->batch = NULL;
    q->nbatch = q->capbatch = 0;
    /* In calls of at most STORE_PAIRS_PER_CALL completions' worth, sent in
     * order, so each settlement still takes effect before any later call
     * of the queue. */
    size_t at = 0;
    while (at < n) {
        size_t k = 0, weight = 0;
        while (at + k < n && weight < STORE_PAIRS_PER_CALL)
            weight += items[at + k++].fail != NULL ? STORE_FAIL_WEIGHT : 1;
        flush_call(q, items + at, k);
        at += k;
    }
    if (q->batch == NULL) { /* keep the array for the next turn */
        q->batch = items;
        q->capbatch = cap;
    } else {
        free(items);
    }
}

/* --- enqueues ------------------------------------------------------------ */

int queue_enqueue(struct queue *q, const struct store_enqueue_args *a, store_enqueue_cb *done,
                  void *priv)
{
    if (q->nbatch > 0)
        flush_settlements(q);
    if (q->nenq == q->capenq) {
        size_t cap = q->capenq ? q->capenq * 2 : 16;
        struct queue_enqueue *b = realloc(q->enq, cap * sizeof(*b));
        if (b == NULL)
            return -ENOMEM;
        q->enq = b;
        q->capenq = cap;
    }
    size_t jl = strlen(a->job), gl = strlen(a->group), size = jl + gl + a->payload_len + 3;
    char *copy = malloc(size);
    if (copy == NULL)
        return -ENOMEM;
    q->eng->batched_bytes += size;
    struct queue_enqueue *e = &q->enq[q->nenq++];
    memcpy(copy, a->job, jl + 1);
    memcpy(copy + jl + 1, a->group, gl + 1);
    memcpy(copy + jl + gl + 2, a->payload, a->payload_len);
    copy[jl + gl + 2 + a->payload_len] = '\0';
    *e = (struct queue_enqueue){.a = *a, .copy = copy, .size = size, .done = done, .priv = priv};
    e->a.job = copy;
    e->a.group = copy + jl + 1;
    e->a.payload = copy + jl + gl + 2;
    e->a.handoff_ms = 0;
    q->enq_bytes += a->payload_len;
    mark_batched(q);
    /* A whole call's worth goes at once: nothing is gained by holding it
     * to the end of the turn, and the pool (and the budget's count of it)
     * sees the bytes as soon as they make a call. */
    if (q->nenq == STORE_ITEMS_PER_CALL || q->enq_bytes >= STORE_BYTES_PER_CALL)
        flush_enqueues(q);
    return 0;
}

/* One enqueue_many call in flight: the enqueues it carries. */
struct sent_enq {
    struct queue *q;
    size_t n;
    struct queue_enqueue items[];
};

static void enqueued_cb(void *priv, const struct store_status *st, size_t n,
                        const struct store_item_verdict *each)
{
    struct sent_enq *b = priv;
    for (size_t i = 0; i < b->n; i++) {
        const struct queue_enqueue *e = &b->items[i];
        const struct store_status *ist = st->code != 0 || i >= n ? st : &each[i].st;
        e->done(e->priv, ist, ist->code == 0 ? &each[i].res : NULL);
        free(e->copy);
    }
    free(b);
}

/* Send items[0..n) (n <= STORE_ITEMS_PER_CALL) as one call. */
static void flush_enqueue_call(struct queue *q, const struct queue_enqueue *items, size_t n)
{
    struct sent_enq *b = malloc(sizeof(*b) + n * sizeof(b->items[0]));
    struct store_enqueue_args args[STORE_ITEMS_PER_CALL];
    int rc = -ENOMEM;
    if (b != NULL) {
        b->q = q;
        b->n = n;
        for (size_t i = 0; i < n; i++) {
            b->items[i] = items[i];
            args[i] = items[i].a;
        }
        rc = store_enqueue_many(&q->store, args, n, enqueued_cb, b);
        if (rc == 0)
            return;
    }
    const struct store_status st =
        rc == -ENOMEM ? (struct store_status){WIRE_EINTERNAL, "out of memory"}
                      : (struct store_status){WIRE_EUNAVAILABLE, "the backend is unavailable"};
    for (size_t i = 0; i < n; i++) {
        items[i].done(items[i].priv, &st, NULL);
        free(items[i].copy);
    }
    free(b);
}

static void flush_enqueues(struct queue *q)
{
    size_t n = q->nenq, cap = q->capenq;
    if (n == 0)
        return;
    /* Ours now, as in flush_settlements: what a callback that runs at
     * once sets going gathers into a new array. */
    struct queue_enqueue *items = q->enq;
    q->enq = NULL;
    q->nenq = q->capenq = q->enq_bytes = 0;
    for (size_t i = 0; i < n; i++) /* from here the pool counts them (pool_buffered) */
        q->eng->batched_bytes -= items[i].size;
    /* In calls of at most STORE_ITEMS_PER_CALL items and about
     * STORE_BYTES_PER_CALL of payloads, sent in order. */
    size_t at = 0;
    while (at < n) {
        size_t k = 0, bytes = 0;
        while (at + k < n && k < STORE_ITEMS_PER_CALL && bytes < STORE_BYTES_PER_CALL)
            bytes += items[at + k++].a.payload_len;
        flush_enqueue_call(q, items + at, k);
        at += k;
    }
    if (q->enq == NULL) { /* keep the array for the next turn */
        q->enq = items;
        q->capenq = cap;
    } else {
        free(items);
    }
}

void queue_flush(struct queue *q)
{
    /* At most one of the two holds anything (queue_settle,
     * queue_enqueue); either order would do. */
    flush_settlements(q);
    flush_enqueues(q);
}

void engine_flush(struct engine *e)
{
    while (e->batched != NULL) {
        struct queue *q = e->batched;
        e->batched = q->batch_next;
        q->batched = false;
        q->batch_next = NULL;
        queue_flush(q);
    }
}
