/* queue: the daemon's side of one queue. It parks consumers (claims with
 * wait_ms, streams with credit) and, whenever work may be available (a
 * wake published by a lane script, a consumer arriving, credit returning,
 * the backend coming back), claims for them in one batched script call and
 * hands the jobs out round-robin. It also runs the queue's upkeep (reap
 * expired leases, promote due delayed jobs) and coalesces the completions
 * of one loop turn into one script call. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

#define PUMP_MAX   256  /* most jobs one claim call asks for */
#define UPKEEP_MAX 1000 /* most leases reaped / jobs promoted per call */

static void flush_batch(struct queue *q);

int queue_script(struct queue *q, enum script_id id, int argc, const char **argv, pool_reply_cb *cb,
                 void *priv)
{
    /* Completions gathered this turn go out at its end, as one call. A
     * call made after them (a claim that a completion's permit should
     * serve) must run after them: send them first. */
    if (id != SCRIPT_COMPLETE && q->nbatch > 0)
        flush_batch(q);
    return pool_script(q->srv->pool, &q->store.route, id, &q->store.keys, argc, argv, NULL, cb,
                       priv);
}

struct store_queue *queue_store(struct queue *q)
{
    /* As queue_script: a call made after this turn's completions (a claim
     * that a completion's permit should serve) must run after them. */
    if (q->nbatch > 0)
        flush_batch(q);
    return &q->store;
}

/* --- parking -------------------------------------------------------- */

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
    if (!w->linked)
        link_tail(q, w);
    queue_pump(q, w->flat);
}

static size_t wants(const struct waiter *w)
{
    if (w->stream)
        return w->credit > w->outstanding ? w->credit - w->outstanding : 0;
    return w->want > w->njobs ? w->want - w->njobs : 0;
}

static void timer_closed_cb(uv_handle_t *h)
{
    free(h->data);
}

void waiter_free(struct waiter *w)
{
    outbuf_deinit(&w->jobs);
    if (w->timer_on) {
        /* The timer's memory is the waiter's: free it once closed. */
        w->timer.data = w;
        uv_close((uv_handle_t *)&w->timer, timer_closed_cb);
        return;
    }
    free(w);
}

/* A parked claim that has jobs (or ran out of time) is answered. */
static void claim_answer(struct waiter *w)
{
    struct client *c = w->c;
    queue_unpark(w);
    for (struct waiter **p = &c->waiters; *p != NULL; p = &(*p)->cnext) {
        if (*p == w) {
            *p = w->cnext;
            break;
        }
    }
    struct outbuf line;
    outbuf_init(&line);
    reply_begin_ok(&line, w->req->ref);
    reply_key(&line, "jobs");
    reply_begin_array(&line);
    if (w->njobs > 0)
        reply_raw(&line, w->jobs.data, w->jobs.len);
    reply_end_array(&line);
    reply_end(&line);
    req_ok_line(w->req, &line);
    waiter_free(w);
}

void queue_stop_waiter(struct waiter *w)
{
    if (w->stream) {
        w->credit = 0;
        queue_unpark(w);
    } else {
        claim_answer(w);
    }
}

static void claim_timeout_cb(uv_timer_t *t)
{
    claim_answer(t->data);
}

int queue_wait_claim(struct queue *q, struct req *r, size_t count, uint64_t lease_ms, bool flat,
                     uint64_t wait_ms)
{
    struct waiter *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return -ENOMEM;
    w->q = q;
    w->c = r->c;
    w->req = r;
    w->flat = flat;
    w->want = count;
    w->lease_ms = lease_ms;
    outbuf_init(&w->jobs);
    uv_timer_init(q->srv->loop, &w->timer);
    w->timer.data = w;
    w->timer_on = true;
    uv_timer_start(&w->timer, claim_timeout_cb, wait_ms, 0);
    w->cnext = r->c->waiters;
    r->c->waiters = w;
    queue_park(q, w);
    return 0;
}

/* --- the pump ------------------------------------------------------- */

struct pump {
    struct queue *q;
    bool flat;
    uint64_t lease_ms;
    size_t asked;
};

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
    q->srv->count.claimed++;
    q->count.claimed++;
    hist_record(&q->latency.wait, wait_ms > 0 ? (uint64_t)wait_ms * 1000 : 0);
}

/* Hand one leased job to a waiter. The stored payload text is spliced
 * into the frame as it is (no re-parse on the hot path): a stream gets a
 * push now, a parked claim gathers the job for its reply. */
static void deliver(struct waiter *w, const struct store_job *sj, long long deadline)
{
    struct client *c = w->c;
    struct reply_job j;
    client_hold(c, w->q, sj->id, sj->id_len, sj->lease, w->lease_ms, w->stream ? w : NULL);
    queue_leased(w->q, sj->wait_ms);
    queue_job_view(w->q, sj, deadline, &j);
    if (!w->stream) {
        reply_job(&w->jobs, &j);
        w->njobs++;
        return;
    }
    struct outbuf line;
    outbuf_init(&line);
    if (reply_push_job(&line, &j) == 0)
        client_send(c, line.data, line.len);
    outbuf_deinit(&line);
}

/* Give one leased job to the first waiter of its kind that wants one,
 * which then goes to the tail: one job each per turn, so no worker is
 * favoured. With no one left who asked, the job is added to orphans to be
 * given straight back (the strings stay the reply's: handed_out sends
 * them before the reply goes). */
static void hand_out(struct queue *q, bool flat, uint64_t lease_ms, const struct store_job *sj,
                     long long deadline, struct queue_pairs *orphans)
{
    struct waiter *w = q->wait_head;
    while (w != NULL && (w->flat != flat || w->lease_ms != lease_ms || wants(w) == 0))
        w = w->qnext;
    if (w == NULL) {
        if (queue_pairs_add(orphans, sj->id, sj->lease) != 0)
            log_event(LOG_WARN, "out of memory: a job nobody took stays leased until it expires",
                      "queue=%s job=%s", q->name, sj->id);
        return;
    }
    /* A push past --max-output closes the client, which frees w and
     * releases its leases, this job's included: w must not be used. */
    struct client *c = w->c;
    client_ref(c);
    deliver(w, sj, deadline);
    bool gone = c->closing;
    client_unref(c);
    if (gone)
        return;
    /* To the tail while it wants more; a parked claim stays linked until
     * handed_out answers it; a stream out of credit waits off the list
     * until credit returns (queue_park). */
    queue_unpark(w);
    if (wants(w) > 0 || !w->stream)
        link_tail(q, w);
}

/* After hand_out: give back the orphans, make sure the new leases are
 * reaped on time if the workers let them run out, and answer the parked
 * claims that got anything. An answer may close its client (past
 * max-output), which frees that client's other waiters, so after each
 * answer start again from the head instead of trusting a saved next. */
static void handed_out(struct queue *q, size_t got, uint64_t lease_ms, struct queue_pairs *orphans)
{
    queue_release(q, orphans->n, orphans->v, "consumer gone", false);
    free(orphans->v);
    if (got > 0)
        queue_due_in(q, lease_ms);
    for (struct waiter *w = q->wait_head; w != NULL;) {
        if (!w->stream && w->njobs > 0) {
            claim_answer(w);
            w = q->wait_head;
        } else {
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
    for (size_t i = 0; i < res->n; i++)
        hand_out(q, flat, lease_ms, &res->jobs[i], res->deadline, &orphans);
    handed_out(q, res->n, lease_ms, &orphans);
    if (res->n == asked || q->again[flat]) {
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
        if (w->flat != flat || wants(w) == 0)
            continue;
        if (*lease_ms == 0)
            *lease_ms = w->lease_ms;
        if (w->lease_ms == *lease_ms)
            n += wants(w);
    }
    return n;
}

/* The lease an enqueue may ask the script to hand its job off on (see
 * lua/enqueue.lua), or 0: only when consumers of the job's kind are parked
 * here and nothing else of that kind that leases jobs is out: no claim (it
 * may be about to take the job itself), no other hand-off, no pump
 * waiting. Two leasing calls out at once may run at Redis in one order
 * (on two pool connections) and come back in the other, and a stream
 * would be pushed a lane's newer job first; one at a time, pushes follow
 * the leases. */
uint64_t queue_handoff_begin(struct queue *q, bool flat)
{
    if (q->claiming[flat] || q->handoffs[flat] > 0 || q->again[flat] || q->srv->stopping)
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
    if (q->srv->stopping || !pool_up(q->srv->pool))
        return;
    /* One lease path at a time per kind: a claim sent while a hand-off is
     * out could run first at Redis (another pool connection) and lease an
     * older job of the lane, yet come back second, so a stream would be
     * pushed the newer job first. Look again when what is out lands. */
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
    if (store_claim(queue_store(q), flat, n, lease_ms, pump_cb, p) != 0) {
        q->claiming[flat] = false;
        free(p);
    }
}

static void wake_cb(void *priv, const char *channel, const char *msg, size_t len)
{
    struct queue *q = priv;
    (void)channel;
    (void)msg;
    (void)len;
    queue_pump(q, false);
    queue_pump(q, true);
}

/* --- upkeep: reap expired leases, promote due delayed jobs ----------- */

static void upkeep_cb(uv_timer_t *t);

static void upkeep_schedule(struct queue *q)
{
    uint64_t next = q->srv->cfg->upkeep_ms;
    if (q->reap_next < next)
        next = q->reap_next;
    if (q->promote_next < next)
        next = q->promote_next;
    if (q->due_wanted != 0) { /* asked for while the pass ran */
        uint64_t now = uv_now(q->srv->loop);
        uint64_t in = q->due_wanted > now ? q->due_wanted - now : 0;
        if (in < next)
            next = in;
        q->due_wanted = 0;
    }
    uv_timer_start(&q->timer, upkeep_cb, next, 0);
}

/* When the next pass of reap or promote is due, from what it answered:
 * how many it did, and ms until the next is due (-1: none). */
static uint64_t upkeep_next(const struct queue *q, const struct store_status *st, uint64_t done,
                            long long next_ms)
{
    uint64_t dflt = q->srv->cfg->upkeep_ms;
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
    q->srv->count.promoted += n;
    q->upkeep_busy = false;
    if (q->srv->stopping)
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
    q->srv->count.reaped += n;
    q->count.reaped += n;
    if (q->srv->stopping || store_promote(queue_store(q), UPKEEP_MAX, promote_cb, q) != 0) {
        q->upkeep_busy = false;
        if (!q->srv->stopping)
            upkeep_schedule(q);
    }
}

void queue_due_in(struct queue *q, uint64_t ms)
{
    if (q->srv->stopping)
        return;
    if (q->upkeep_busy) {
        /* A pass reschedules itself from its scripts' "next due" answers,
         * but it is two calls (reap, then promote): this lease or delayed
         * job may have been made after the reap had answered. Remember
         * when it is due; upkeep_schedule honours it. */
        uint64_t at = uv_now(q->srv->loop) + ms;
        if (q->due_wanted == 0 || at < q->due_wanted)
            q->due_wanted = at;
        return;
    }
    if (!uv_is_active((uv_handle_t *)&q->timer) || uv_timer_get_due_in(&q->timer) > ms)
        uv_timer_start(&q->timer, upkeep_cb, ms, 0);
}

static void upkeep_cb(uv_timer_t *t)
{
    struct queue *q = t->data;
    if (q->upkeep_busy || q->srv->stopping)
        return;
    q->upkeep_busy = true;
    if (store_reap(queue_store(q), UPKEEP_MAX, reap_cb, q) != 0) {
        q->upkeep_busy = false;
        upkeep_schedule(q);
    }
}

/* --- completions, coalesced per loop turn ----------------------------- */

void queue_complete(struct queue *q, struct req *r)
{
    /* The job and lease are read back from the request when the batch is
     * sent (flush_batch); the request lives until complete_cb. */
    if (q->nbatch == q->capbatch) {
        size_t cap = q->capbatch ? q->capbatch * 2 : 16;
        struct req **b = realloc(q->batch, cap * sizeof(*b));
        if (b == NULL) {
            req_error(r, WIRE_EINTERNAL, "out of memory");
            return;
        }
        q->batch = b;
        q->capbatch = cap;
    }
    q->batch[q->nbatch++] = r;
    if (!q->batched) {
        q->batched = true;
        q->batch_next = q->srv->batched;
        q->srv->batched = q;
    }
}

struct batch {
    struct queue *q;
    size_t n;
    struct req *reqs[];
};

static void complete_cb(void *priv, const struct store_status *st, size_t n,
                        const enum store_outcome *each)
{
    struct batch *b = priv;
    (void)n; /* b->n outcomes when st->code is 0 */
    for (size_t i = 0; i < b->n; i++) {
        struct req *r = b->reqs[i];
        if (st->code != 0) {
            req_store_error(r, st);
            continue;
        }
        size_t jlen;
        const char *job = request_string(r->root, "job", &jlen);
        bool completed = each[i] == STORE_COMPLETED;
        /* Completed, stale or gone: either way the lease is not ours. */
        if (!r->c->closing)
            client_unhold(r->c, b->q, job, jlen, completed);
        if (completed) {
            r->c->srv->count.completed++;
            b->q->count.completed++;
            req_ok_string(r, "state", "completed");
        } else if (each[i] == STORE_ELEASE) {
            req_error(r, WIRE_ELEASE, "the lease is not current (expired and re-leased?)");
        } else {
            req_error(r, WIRE_ENOJOB, "no such job");
        }
    }
    free(b);
}

static void flush_batch(struct queue *q)
{
    size_t n = q->nbatch;
    struct batch *b = malloc(sizeof(*b) + n * sizeof(b->reqs[0]));
    struct store_pair *pairs = malloc(n * sizeof(*pairs));
    q->nbatch = 0;
    if (b == NULL || pairs == NULL) {
        for (size_t i = 0; i < n; i++)
            req_error(q->batch[i], WIRE_EINTERNAL, "out of memory");
        free(b);
        free(pairs);
        return;
    }
    b->q = q;
    b->n = n;
    for (size_t i = 0; i < n; i++) {
        b->reqs[i] = q->batch[i];
        /* The strings live in the request, which lives until complete_cb. */
        pairs[i].job = request_string(q->batch[i]->root, "job", NULL);
        pairs[i].lease = request_string(q->batch[i]->root, "lease", NULL);
    }
    if (store_complete(&q->store, q->srv->cfg->retention_ms, n, pairs, complete_cb, b) != 0) {
        struct store_status st = {WIRE_EUNAVAILABLE, "the backend is unavailable"};
        complete_cb(b, &st, 0, NULL);
    }
    free(pairs);
}

void queue_flush_all(struct server *s)
{
    while (s->batched != NULL) {
        struct queue *q = s->batched;
        s->batched = q->batch_next;
        q->batched = false;
        q->batch_next = NULL;
        if (q->nbatch > 0)
            flush_batch(q);
    }
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
                   bool delivered)
{
    if (n == 0)
        return;
    q->srv->count.released += n;
    if (store_release(queue_store(q), reason, delivered, n, pairs, release_cb,
                      (void *)(uintptr_t)n) != 0) {
        struct store_status st = {WIRE_EUNAVAILABLE, "the backend is unavailable"};
        release_cb((void *)(uintptr_t)n, &st, 0, NULL);
    }
}

/* --- lifetime ---------------------------------------------------------- */

void queue_start(struct queue *q)
{
    uv_timer_init(q->srv->loop, &q->timer);
    q->timer.data = q;
    q->reap_next = q->promote_next = 0;
    uv_timer_start(&q->timer, upkeep_cb, 0, 0);
    if (pool_subscribe(q->srv->pool, q->store.keys.names[KEY_WAKE], wake_cb, q) == 0)
        q->subscribed = true;
}

static void queue_closed_cb(uv_handle_t *h)
{
    struct queue *q = h->data;
    free(q->batch);
    free(q);
}

void queue_free(struct queue *q)
{
    uv_timer_stop(&q->timer);
    uv_close((uv_handle_t *)&q->timer, queue_closed_cb);
}
