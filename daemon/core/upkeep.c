/* upkeep: each queue's timer that reaps expired leases and promotes due
 * delayed jobs, and sleeps exactly until the next is due (the scripts say
 * when), or the regular pass (upkeep-ms), whichever comes first; and the
 * format steps that upgrade a store an older emqd wrote (format.lua). */
#include <stdlib.h>

#include "engine.h"
#include "log.h"
#include "queue.h"
#include "queue_internal.h"

#define UPKEEP_MAX 1000 /* most leases reaped / jobs promoted per call */

/* Most members of the delayed set one format step walks (lua/format.lua).
 * Each costs two Redis calls (the row's state and group, the index's
 * ZADD): on the 2-core test machine, where a redis.call in Lua costs
 * ~2 us, a step of 100 took 0.8 ms of Redis, of 1000 5.9 ms (200000
 * delayed rows in 5000 groups). */
#define FORMAT_MAX 100

/* While leases of lost replies wait for their loss to be fenced (the
 * pool reconnecting and sending CLIENT KILL), the pass comes back this
 * soon to give them back: a fault's aftermath, not a steady state. */
#define UPKEEP_LOST_MS 100

void queue_upkeep_cb(uv_timer_t *t);

/* No more passes: the daemon is stopping, or the queue was forgotten
 * (engine_retire; a pass in flight finishes without rescheduling). */
static bool upkeep_off(const struct queue *q)
{
    return q->eng->stopping || q->retired;
}

static void upkeep_schedule(struct queue *q)
{
    uint64_t next = q->eng->cfg->upkeep_ms;
    if (q->reap_next < next)
        next = q->reap_next;
    if (q->promote_next < next)
        next = q->promote_next;
    if (store_lost_pending(&q->store) && next > UPKEEP_LOST_MS)
        next = UPKEEP_LOST_MS;
    if (q->due_wanted != 0) { /* asked for while the pass ran */
        uint64_t now = uv_now(q->eng->loop);
        uint64_t in = q->due_wanted > now ? q->due_wanted - now : 0;
        if (in < next)
            next = in;
        q->due_wanted = 0;
    }
    uv_timer_start(&q->timer, queue_upkeep_cb, next, 0);
}

/* When the next pass of reap or promote is due, from what it answered:
 * how many it did, and ms until the next is due (-1: none). */
static uint64_t upkeep_next(const struct queue *q, const struct store_status *st, uint64_t done,
                            long long next_ms)
{
    uint64_t dflt = q->eng->cfg->upkeep_ms;
    if (st->code != 0)
        return dflt;
    if (done >= UPKEEP_MAX)
        return 0; /* more are due right now */
    return next_ms < 0 || (uint64_t)next_ms > dflt ? dflt : (uint64_t)next_ms;
}

static void promote_cb(void *priv, const struct store_status *st, uint64_t n, long long next_ms)
{
    struct queue *q = priv;
    q->promote_next = upkeep_next(q, st, n, next_ms);
    q->count.promoted += n;
    q->upkeep_busy = false;
    if (upkeep_off(q))
        return;
    upkeep_schedule(q);
    /* A wake can be lost (published while our subscriber was
     * reconnecting); parked consumers look again at every pass, so a lost
     * wake costs them at most one upkeep period. No-op without waiters. */
    queue_pump(q, false);
    queue_pump(q, true);
}

static void reap_cb(void *priv, const struct store_status *st, uint64_t n, long long next_ms)
{
    struct queue *q = priv;
    q->reap_next = upkeep_next(q, st, n, next_ms);
    if (n > 0)
        log_event(LOG_INFO, "reaped expired leases", "queue=%s leases=%llu", q->name,
                  (unsigned long long)n);
    q->count.reaped += n;
    if (upkeep_off(q) || store_promote(queue_store(q), UPKEEP_MAX, promote_cb, q) != 0) {
        q->upkeep_busy = false;
        if (!upkeep_off(q))
            upkeep_schedule(q);
    }
}

void queue_due_in(struct queue *q, uint64_t ms)
{
    if (upkeep_off(q))
        return;
    if (q->upkeep_busy) {
        /* A pass reschedules itself from its scripts' "next due" answers,
         * but it is two calls (reap, then promote): this lease or delayed
         * job may have been made after the reap had answered. Remember
         * when it is due; upkeep_schedule honours it. */
        uint64_t at = uv_now(q->eng->loop) + ms;
        if (q->due_wanted == 0 || at < q->due_wanted)
            q->due_wanted = at;
        return;
    }
    if (!uv_is_active((uv_handle_t *)&q->timer) || uv_timer_get_due_in(&q->timer) > ms)
        uv_timer_start(&q->timer, queue_upkeep_cb, ms, 0);
}

/* Reap, then promote (reap_cb), then pump (promote_cb). */
static void upkeep_reap(struct queue *q)
{
    if (store_reap(queue_store(q), UPKEEP_MAX, reap_cb, q) != 0) {
        q->upkeep_busy = false;
        upkeep_schedule(q);
    }
}

static void recover_cb(void *priv, const struct store_status *st, uint64_t n)
{
    struct queue *q = priv;
    if (n > 0)
        log_event(LOG_INFO, "gave back leases whose reply was lost", "queue=%s leases=%llu",
                  q->name, (unsigned long long)n);
    q->count.recovered += n;
    (void)st; /* on an error the store keeps the tags for the next pass */
    if (upkeep_off(q)) {
        q->upkeep_busy = false;
        return;
    }
    upkeep_reap(q);
}

/* A format step's answer. On an error nothing is known: the next pass
 * sends the step again (the walk goes on from the marker, in Redis). */
static void format_cb(void *priv, const struct store_status *st, bool done, uint64_t indexed)
{
    struct queue *q = priv;
    q->formatting = false;
    q->format_indexed += indexed;
    if (st->code != 0) {
        if (!q->format_warned) { /* once a queue: the passes retry it every second */
            char e[600];
            log_event(LOG_WARN, "store upgrade step failed: retried at each upkeep pass",
                      "queue=%s error=%s", q->name, log_quote(st->message, e, sizeof(e)));
            q->format_warned = true;
        }
        return;
    }
    if (!done) {
        /* More to walk: the next step now, as its own call (Redis serves
         * other calls between steps), not with the next pass. */
        queue_format_step(q);
        return;
    }
    q->formatted = true;
    if (q->format_indexed > 0)
        log_event(LOG_INFO, "upgraded the store: delayed jobs are in their group's delayed index",
                  "queue=%s jobs=%llu", q->name, (unsigned long long)q->format_indexed);
}

void queue_format_step(struct queue *q)
{
    if (q->formatted || q->formatting || upkeep_off(q))
        return;
    if (store_format(queue_store(q), FORMAT_MAX, format_cb, q) == 0)
        q->formatting = true;
}

void queue_upkeep_cb(uv_timer_t *t)
{
    struct queue *q = t->data;
    if (q->upkeep_busy || upkeep_off(q))
        return;
    queue_format_step(q); /* its own call, answered on its own: not part of the pass */
    q->upkeep_busy = true;
    /* Leases whose reply was lost go back first, before the reaper can
     * count them as expired attempts (lost.c). */
    if (store_recover_due(queue_store(q)) && store_recover(queue_store(q), recover_cb, q) == 0)
        return;
    upkeep_reap(q);
}
