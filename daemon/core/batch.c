/* batch: the completions of one loop turn, per queue, sent as few script
 * calls (lua/complete.lua takes pairs; at most STORE_PAIRS_PER_CALL each,
 * so one call stays short in Redis). A queue's batch goes out at the end
 * of the turn (engine_flush), or before any other call of the queue
 * (queue_store), so that a call made after a completion runs after it. */
#include <errno.h>
#include <stdlib.h>

#include "engine.h"
#include "queue.h"

int queue_complete(struct queue *q, const struct queue_completion *c)
{
    if (q->nbatch == q->capbatch) {
        size_t cap = q->capbatch ? q->capbatch * 2 : 16;
        struct queue_completion *b = realloc(q->batch, cap * sizeof(*b));
        if (b == NULL)
            return -ENOMEM;
        q->batch = b;
        q->capbatch = cap;
    }
    q->batch[q->nbatch++] = *c;
    if (!q->batched) {
        q->batched = true;
        q->batch_next = q->eng->batched;
        q->eng->batched = q;
    }
    return 0;
}

/* One batch call in flight: the completions it carries. */
struct sent {
    struct queue *q;
    size_t n;
    struct queue_completion items[];
};

static void complete_cb(void *priv, const struct store_status *st, size_t n,
                        const enum store_outcome *each)
{
    struct sent *b = priv;
    (void)n; /* b->n outcomes when st->code is 0 */
    for (size_t i = 0; i < b->n; i++) {
        const struct queue_completion *c = &b->items[i];
        enum store_outcome o = st->code == 0 ? each[i] : STORE_ENOJOB;
        if (st->code == 0 && o == STORE_COMPLETED)
            b->q->count.completed++;
        c->done(c->priv, st, o);
    }
    free(b);
}

/* Send items[0..n) (n <= STORE_PAIRS_PER_CALL) as one call. */
static void flush_call(struct queue *q, const struct queue_completion *items, size_t n)
{
    struct sent *b = malloc(sizeof(*b) + n * sizeof(b->items[0]));
    if (b == NULL) {
        static const struct store_status oom = {WIRE_EINTERNAL, "out of memory"};
        for (size_t i = 0; i < n; i++)
            items[i].done(items[i].priv, &oom, STORE_ENOJOB);
        return;
    }
    struct store_pair pairs[STORE_PAIRS_PER_CALL];
    b->q = q;
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        b->items[i] = items[i];
        pairs[i] = (struct store_pair){items[i].job, items[i].lease};
    }
    if (store_complete(&q->store, q->eng->cfg->retention_ms, n, pairs, complete_cb, b) != 0) {
        static const struct store_status down = {WIRE_EUNAVAILABLE, "the backend is unavailable"};
        complete_cb(b, &down, 0, NULL);
    }
}

void queue_flush(struct queue *q)
{
    size_t n = q->nbatch, cap = q->capbatch;
    if (n == 0)
        return;
    /* The batch is ours now: a callback that runs at once (the backend
     * down) answers requests, and whatever that sets going completes
     * into a new array rather than over items not yet sent. */
    struct queue_completion *items = q->batch;
    q->batch = NULL;
    q->nbatch = q->capbatch = 0;
    /* In calls of at most STORE_PAIRS_PER_CALL, sent in order, so each
     * completion still takes effect before any later call of the queue. */
    for (size_t at = 0; at < n; at += STORE_PAIRS_PER_CALL)
        flush_call(q, items + at, n - at < STORE_PAIRS_PER_CALL ? n - at : STORE_PAIRS_PER_CALL);
    if (q->batch == NULL) { /* keep the array for the next turn */
        q->batch = items;
        q->capbatch = cap;
    } else {
        free(items);
    }
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
