/* pump: parking consumers, claiming for them, and handing the jobs out
 * (queue.h, waiter.h). One claim call serves every waiter of a kind on one
 * lease length; its jobs go round-robin, one per waiter per turn. */
#include <stdlib.h>

#include "engine.h"
#include "log.h"
#include "queue.h"
#include "waiter.h"

#define PUMP_MAX 256 /* most jobs one claim call asks for */

static void link_tail(struct queue *q, struct waiter *w)
{
    w->qnext = NULL;
    w->qprev = q->wait_tail;
    if (q->wait_tail != NULL)
        q->wait_tail->qnext = w;
    else
        q->wait_head = w;
    q->wait_tail = w;
    w->linked = true;
}

void queue_unpark(struct waiter *w)
{
    struct queue *q = w->q;
    if (!w->linked)
        return;
    if (w->qprev != NULL)
        w->qprev->qnext = w->qnext;
    else
        q->wait_head = w->qnext;
    if (w->qnext != NULL)
        w->qnext->qprev = w->qprev;
    else
        q->wait_tail = w->qprev;
    w->qprev = w->qnext = NULL;
    w->linked = false;
}

void queue_park(struct queue *q, struct waiter *w)
{
    /* A forgotten queue serves no one: only a stopped stream can still
     * point at it (engine_retire), and it has nothing to wait for. */
    if (q->retired)
        return;
    if (!w->linked)
        link_tail(q, w);
    queue_pump(q, w->flat);
}

struct pump {
    struct queue *q;
    bool flat;
    uint64_t lease_ms;
    size_t asked;
};

/* Give one leased job to the first waiter of its kind that has room,
 * which then goes to the tail: one job each per turn, so no worker is
 * favoured. With no one left who asked, the job is added to orphans to be
 * given straight back (the strings stay the reply's: handed_out sends
 * them before the reply goes). */
static void hand_out(struct queue *q, bool flat, uint64_t lease_ms, const struct store_job *sj,
                     long long deadline, struct queue_pairs *orphans)
{
    /* Before a waiter is chosen: it is neither given the job nor counted
     * as served (a parked claim is not answered for it). */
    if (!queue_job_sendable(sj)) {
        queue_bury_unsendable(q, sj);
        return;
    }
    struct waiter *w = q->wait_head;
    while (w != NULL && (w->flat != flat || w->lease_ms != lease_ms || w->room == 0))
        w = w->qnext;
    if (w == NULL) {
        if (queue_pairs_add(orphans, sj->id, sj->lease) != 0)
            log_event(LOG_WARN, "out of memory: a job nobody took stays leased until it expires",
                      "queue=%s job=%s", q->name, sj->id);
        return;
    }
    queue_leased(q, sj->wait_ms);
    /* Taking it may close the consumer's connection (a push past
     * max-output), which frees w and gives its leases back, this job's
     * included: w must not be used then. */
    if (!w->ops->take(w, sj, deadline))
        return;
    w->got++;
    /* To the tail while it has room; a one-shot waiter stays linked until
     * handed_out answers it; a stream out of credit waits off the list
     * until its owner parks it again. */
    queue_unpark(w);
    if (w->room > 0 || w->oneshot)
        link_tail(q, w);
}

/* After hand_out: give back the orphans, make sure the new leases are
 * reaped on time if the workers let them run out, and answer the one-shot
 * waiters that got anything. An answer may close its connection (past
 * max-output), which frees that owner's other waiters, so after each
 * answer start again from the head instead of trusting a saved next. */
static void handed_out(struct queue *q, size_t got, uint64_t lease_ms, struct queue_pairs *orphans)
{
    queue_release(q, orphans->n, orphans->v, "consumer gone", STORE_RELEASE_UNDELIVERED);
    free(orphans->v);
    if (got > 0)
        queue_due_in(q, lease_ms);
    for (struct waiter *w = q->wait_head; w != NULL;) {
        if (w->oneshot && w->got > 0) {
            queue_unpark(w);
            w->ops->filled(w);
            w = q->wait_head;
        } else {
            w->got = 0;
            w = w->qnext;
        }
    }
}

static void pump_cb(void *priv, const struct store_status *st, const struct store_leased *res)
{
    struct pump *p = priv;
    struct queue *q = p->q;
    bool flat = p->flat;
    size_t asked = p->asked;
    uint64_t lease_ms = p->lease_ms;
    free(p);
    q->claiming[flat] = false;

    if (st->code != 0) {
        if (st->code != WIRE_EUNAVAILABLE) {
            char e[600];
            log_event(LOG_ERROR, "claim failed", "queue=%s code=%s error=%s", q->name,
                      wire_error_name(st->code), log_quote(st->message, e, sizeof(e)));
        }
        /* The backend coming back pumps again (server.c), and so does
         * every upkeep pass; a pump left waiting would also keep
         * hand-offs off (queue_handoff_begin). */
        q->again[flat] = false;
        return;
    }
    struct queue_pairs orphans = {0};
    size_t bytes = 0;
    for (size_t i = 0; i < res->n; i++) {
        bytes += res->jobs[i].payload_len;
        hand_out(q, flat, lease_ms, &res->jobs[i], res->deadline, &orphans);
    }
    handed_out(q, res->n, lease_ms, &orphans);
    /* Filled, or cut short by max-claim-bytes: there may be more. */
    if (res->n == asked || bytes >= q->eng->cfg->max_claim_bytes || q->again[flat]) {
        q->again[flat] = false;
        queue_pump(q, flat);
    }
}

/* How many jobs the waiters of kind flat want (counted up to cap), on the
 * lease of the first of them (*lease_ms): one claim or hand-off serves
 * one lease length, so waiters with another wait for the next. */
static size_t wanted(const struct queue *q, bool flat, size_t cap, uint64_t *lease_ms)
{
    size_t n = 0;
    *lease_ms = 0;
    for (const struct waiter *w = q->wait_head; w != NULL && n < cap; w = w->qnext) {
        if (w->flat != flat || w->room == 0)
            continue;
        if (*lease_ms == 0)
            *lease_ms = w->lease_ms;
        if (w->lease_ms == *lease_ms)
            n += w->room;
    }
    return n;
}

/* The lease an enqueue may ask the script to hand its job off on (see
 * lua/enqueue.lua), or 0: only when consumers of the job's kind are parked
 * here and nothing else of that kind that leases jobs is out: no claim (it
 * may be about to take the job itself), no other hand-off, no pump
 * waiting. Each of those already asked for the waiters' room; one more
 * lease would find no one and be given straight back. */
uint64_t queue_handoff_begin(struct queue *q, bool flat)
{
    if (q->claiming[flat] || q->handoffs[flat] > 0 || q->again[flat] || q->eng->stopping)
        return 0;
    uint64_t lease_ms;
    if (wanted(q, flat, 1, &lease_ms) == 0)
        return 0;
    q->handoffs[flat]++;
    return lease_ms;
}

void queue_handoff_end(struct queue *q, bool flat, uint64_t lease_ms,
                       const struct store_enqueued *res)
{
    q->handoffs[flat]--;
    /* Not handed off: the job was queued as usual, and its wake pumps. */
    if (res != NULL && res->handed_off) {
        struct queue_pairs orphans = {0};
        hand_out(q, flat, lease_ms, &res->job, res->deadline, &orphans);
        handed_out(q, 1, lease_ms, &orphans);
    }
    if (q->handoffs[flat] == 0 && q->again[flat]) {
        q->again[flat] = false; /* a pump waited for the hand-offs to land */
        queue_pump(q, flat);
    }
}

void queue_pump(struct queue *q, bool flat)
{
    if (q->eng->stopping || !pool_up(q->eng->pool))
        return;
    /* One lease path at a time per kind: what is out already asked for
     * the room the waiters have, and a second call would lease jobs
     * nobody takes (given back at once, a wasted round trip each). The
     * queue's calls run, and answer, in the order made (its route), so
     * this is about waste, not order. Look again when what is out lands. */
    if (q->claiming[flat] || q->handoffs[flat] > 0) {
        q->again[flat] = true;
        return;
    }
    uint64_t lease_ms;
    size_t n = wanted(q, flat, PUMP_MAX, &lease_ms);
    if (n == 0)
        return;
    if (n > PUMP_MAX)
        n = PUMP_MAX;
    struct pump *p = malloc(sizeof(*p));
    if (p == NULL)
        return;
    *p = (struct pump){.q = q, .flat = flat, .lease_ms = lease_ms, .asked = n};
    q->claiming[flat] = true;
    q->again[flat] = false;
    if (store_claim(queue_store(q), flat, n, lease_ms, q->eng->cfg->max_claim_bytes, pump_cb, p) !=
        0) {
        q->claiming[flat] = false;
        free(p);
    }
}
