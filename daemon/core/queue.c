/* queue: one queue's lifetime, its store, and the pieces the pump, the
 * batch and the server share (queue.h). */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "queue.h"
#include "queue_internal.h"
#include "waiter.h"

struct queue *queue_new(struct engine *e, const char *name, size_t len)
{
    struct queue *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return NULL;
    q->eng = e;
    memcpy(q->name, name, len);
    q->len = len;
    if (store_queue_init(&q->store, e->pool, q->name, len) != 0) {
        free(q);
        return NULL;
    }
    return q;
}

struct store_queue *queue_store(struct queue *q)
{
    queue_flush(q);
    return &q->store;
}

void queue_job_view(const struct queue *q, const struct store_job *sj, long long deadline,
                    struct reply_job *j)
{
    *j = (struct reply_job){
        .queue = q->name,
        .queue_len = q->len,
        .id = sj->id,
        .id_len = sj->id_len,
        .group = sj->group_len ? sj->group : NULL,
        .group_len = sj->group_len,
        .lease = sj->lease,
        .lease_len = sj->lease_len,
        .attempt = sj->attempt,
        .deadline = deadline,
        .payload = sj->payload,
        .payload_len = sj->payload_len,
    };
}

bool queue_job_sendable(const struct store_job *sj)
{
    return sj->payload_len > 0 && memchr(sj->payload, '\n', sj->payload_len) == NULL;
}

/* A job on its way to the dead set: the settlement's strings, kept until
 * its outcome is known. */
struct buried {
    struct queue *q;
    struct store_fail_args fail;
    char *job, *lease;
    char strings[];
};

static const char unsendable[] = "stored payload cannot be sent: empty or holds a newline";

static void buried_cb(void *priv, const struct store_status *st, enum store_outcome o)
{
    struct buried *b = priv;
    if (st->code != 0) {
        /* The lease runs out and the job is served again, and buried then. */
        log_event(LOG_WARN, "a job that cannot be sent was not dead-lettered",
                  "queue=%s job=%s error=%s", b->q->name, b->job, st->message);
    } else if (o == STORE_DEAD) {
        b->q->count.failed++;
        b->q->count.dead++;
        log_event(LOG_WARN, "dead-lettered a job whose stored payload cannot be sent",
                  "queue=%s job=%s", b->q->name, b->job);
    }
    free(b);
}

void queue_bury_unsendable(struct queue *q, const struct store_job *sj)
{
    size_t jl = sj->id_len, ll = sj->lease_len;
    struct buried *b = malloc(sizeof(*b) + jl + ll + 2);
    if (b != NULL) {
        *b = (struct buried){.q = q, .fail = {.error = unsendable, .retry_ms = -1, .dead = true}};
        b->job = memcpy(b->strings, sj->id, jl + 1);
        b->lease = memcpy(b->strings + jl + 1, sj->lease, ll + 1);
        struct queue_settlement c = {
            .job = b->job, .lease = b->lease, .fail = &b->fail, .done = buried_cb, .priv = b};
        if (queue_settle(q, &c) == 0)
            return;
        free(b);
    }
    /* Out of memory: give it back with the attempt counted, so its
     * attempts run out and it goes dead that way. */
    struct store_pair back = {sj->id, sj->lease};
    queue_release(q, 1, &back, unsendable, STORE_RELEASE_COUNTED);
}

int queue_pairs_add(struct queue_pairs *ps, const char *job, const char *lease)
{
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 8;
        struct store_pair *v = realloc(ps->v, cap * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        ps->v = v;
        ps->cap = cap;
    }
    ps->v[ps->n++] = (struct store_pair){job, lease};
    return 0;
}

void queue_leased(struct queue *q, long long wait_ms)
{
    q->count.claimed++;
    hist_record(&q->latency.wait, wait_ms > 0 ? (uint64_t)wait_ms * 1000 : 0);
}

/* A message on the wake channel of the queue named in the channel
 * ("emq:{q}:wake"): work may be there (the prefix; NULL on a
 * resubscribe), or "due:<ms>", a lane held by its rate that may be leased
 * again in ms (lua/lib.lua:throttle): the upkeep pass runs then and its
 * promote returns the lane to the ring (with a wake, if the ring was
 * empty). The subscription names the engine, not the queue, so that it
 * outlives a forgotten queue's struct (the pool keeps a channel
 * subscribed once made) and serves the queue made anew under the same
 * name. */
static void wake_cb(void *priv, const char *channel, const char *msg, size_t len)
{
    struct engine *e = priv;
    const char *open = strchr(channel, '{'), *close = open ? strchr(open, '}') : NULL;
    struct queue *q = close ? map_get(&e->queues, open + 1, (size_t)(close - open - 1)) : NULL;
    if (q == NULL || !q->used)
        return;
    if (msg != NULL && len > 4 && len < 24 && memcmp(msg, "due:", 4) == 0) {
        char digits[24];
        memcpy(digits, msg + 4, len - 4);
        digits[len - 4] = '\0';
        char *end;
        unsigned long long ms = strtoull(digits, &end, 10);
        if (*end == '\0' && end != digits) {
            queue_due_in(q, (uint64_t)ms);
            return;
        }
    }
    queue_pump(q, false);
    queue_pump(q, true);
}

/* --- release ----------------------------------------------------------- */

static void release_cb(void *priv, const struct store_status *st, size_t n,
                       const enum store_outcome *each)
{
    size_t sent = (size_t)(uintptr_t)priv;
    (void)n;
    (void)each; /* a lease that is stale or gone is not ours to give back */
    if (st->code != 0) {
        char e[600];
        log_event(LOG_WARN, "release failed: the leases come back when they expire",
                  "leases=%zu error=%s", sent, log_quote(st->message, e, sizeof(e)));
    }
}

void queue_release(struct queue *q, size_t n, const struct store_pair *pairs, const char *reason,
                   enum store_release_mode mode)
{
    if (n == 0)
        return;
    q->count.released += n;
    /* In calls of at most STORE_PAIRS_PER_CALL, sent in order. */
    for (size_t at = 0; at < n; at += STORE_PAIRS_PER_CALL) {
        size_t k = n - at < STORE_PAIRS_PER_CALL ? n - at : STORE_PAIRS_PER_CALL;
        void *priv = (void *)(uintptr_t)k;
        if (store_release(queue_store(q), reason, mode, k, pairs + at, release_cb, priv) != 0) {
            struct store_status st = {WIRE_EUNAVAILABLE, "the backend is unavailable"};
            release_cb(priv, &st, 0, NULL);
        }
    }
}

/* --- lifetime ---------------------------------------------------------- */

/* A leasing call of q lost its reply: an upkeep pass gives its leases
 * back as soon as the pool has fenced the loss (upkeep.c). */
static void lost_cb(void *priv)
{
    queue_due_in(priv, 0);
}

void queue_start(struct queue *q)
{
    q->used = q->started = true;
    uv_timer_init(q->eng->loop, &q->timer);
    q->timer.data = q;
    store_queue_on_lost(&q->store, lost_cb, q);
    q->reap_next = q->promote_next = 0;
    /* Before any other call of the queue (its calls run in the order
     * made): on a queue that is new, or current already, this one step
     * says so, and a queue's first write finds its format marked. */
    queue_format_step(q);
    uv_timer_start(&q->timer, queue_upkeep_cb, 0, 0);
    /* -EEXIST for a queue made anew after a forget: its channel is
     * subscribed already, and wake_cb finds this struct by name. */
    int rc = pool_subscribe(q->eng->pool, q->store.keys.names[KEY_WAKE], wake_cb, q->eng);
    q->subscribed = rc == 0 || rc == -EEXIST;
}

static void queue_closed_cb(uv_handle_t *h)
{
    struct queue *q = h->data;
    store_queue_deinit(&q->store);
    free(q->batch);
    free(q->enq);
    free(q);
}

void queue_free(struct queue *q)
{
    assert(q->attached == 0);
    if (!q->started) { /* never started: no timer to close */
        store_queue_deinit(&q->store);
        free(q->batch);
        free(q->enq);
        free(q);
        return;
    }
    uv_timer_stop(&q->timer);
    uv_close((uv_handle_t *)&q->timer, queue_closed_cb);
}
