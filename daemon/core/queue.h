/* queue: the daemon's side of one queue. It parks consumers (waiter.h)
 * and, whenever work may be available (a wake published by a lane script,
 * a consumer arriving, room returning, the backend coming back), claims
 * for them in one batched script call and hands the jobs out round-robin
 * (pump.c). It runs the queue's upkeep (upkeep.c: reap expired leases,
 * promote due delayed jobs) and coalesces the settlements (completions
 * and fails) of one loop turn into one script call, and its enqueues into
 * enqueue_many calls (batch.c). Every backend call of the queue goes
 * through queue_store, in the order it is made. */
#ifndef EMQ_QUEUE_H
#define EMQ_QUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "brand.h"
#include "hist.h"
#include "jobs.h"
#include "reply.h"
#include "store.h"

struct engine;
struct waiter;

/* Jobs of one queue, counted as this daemon saw them move. */
struct queue_counters {
    uint64_t enqueued, claimed, completed, failed, dead, reaped, released, promoted;
    uint64_t recovered; /* leases of lost replies given back (store/lost.c) */
    uint64_t refused;   /* enqueues refused by their lane's cap (lua/cap.lua) */
};

/* The queue's counters as they were every QUEUE_HISTORY_MS, the last
 * QUEUE_HISTORY_SLOTS samples (the throughput op, server/cmd_throughput.c: the
 * dashboard's throughput over the last five minutes, across reloads of
 * the page). v[i]: enqueued, completed, failed, dead. */
#define QUEUE_HISTORY_SLOTS 31
#define QUEUE_HISTORY_MS    10000
struct queue_history {
    uint64_t v[QUEUE_HISTORY_SLOTS][4];
    unsigned next, n; /* the slot the next sample goes to; samples held */
};

/* How long the jobs of one queue took, as this daemon saw them: wait, from
 * becoming claimable to each lease it handed out (the lease script's
 * wait_ms, on the Redis clock), and run, from handing a lease out to its
 * holder settling it (complete or fail on the connection it went to, on
 * this daemon's monotonic clock). */
struct queue_latency {
    struct hist wait, run;
};

/* One settlement (a completion, or with fail a failed attempt) waiting
 * for this turn's batch call. */
typedef void queue_settled_fn(void *priv, const struct store_status *st, enum store_outcome o);
struct queue_settlement {
    const char *job, *lease;            /* the caller's, kept until done runs */
    const struct store_fail_args *fail; /* likewise; NULL: a completion */
    queue_settled_fn *done;
    void *priv;
};

/* One enqueue waiting for this turn's batch call: its arguments, copied
 * (one block holds the strings), and who to tell. */
struct queue_enqueue {
    struct store_enqueue_args a;
    char *copy;
    size_t size; /* copy's bytes, counted in engine.batched_bytes until sent */
    store_enqueue_cb *done;
    void *priv;
};

struct queue {
    struct engine *eng;
    char name[BRAND_QUEUE_MAX + 1];
    size_t len;
    /* Its keys, and the route every backend call of it goes by, so they
     * run at Redis in the order the daemon makes them (store.h). */
    struct store_queue store;
    struct waiter *wait_head, *wait_tail;
    bool claiming[2], again[2]; /* [flat] */
    size_t handoffs[2];         /* [flat]: enqueues out asking for a hand-off (0 or 1) */
    bool subscribed;
    uv_timer_t timer; /* reap + promote */
    bool upkeep_busy;
    uint64_t reap_next, promote_next;
    uint64_t due_wanted; /* loop time a lease or job made during a pass is due; 0 = none */
    /* The store's format (upkeep.c:queue_format_step): formatted once a
     * step said it is current, after which none is sent again; formatting
     * while a step is out; format_indexed, the delayed rows this daemon's
     * steps put in their group's delayed index; format_warned once a
     * failed step was logged. */
    bool formatted, formatting, format_warned;
    uint64_t format_indexed;
    /* settlements (completions and fails) gathered this loop turn, sent
     * as one script call */
    struct queue_settlement *batch;
    size_t nbatch, capbatch;
    /* enqueues gathered this loop turn (never at the same time as
     * settlements: adding either kind sends the other first) */
    struct queue_enqueue *enq;
    size_t nenq, capenq, enq_bytes; /* enq_bytes: their payloads */
    struct queue *batch_next;
    bool batched;
    struct queue_counters count;
    struct queue_latency latency;
    struct queue_history history;
    bool used;                   /* in use: started and registered (engine_use) */
    bool started;                /* its timer was initialised (queue_start): closed when freed */
    bool listed;                 /* on the engine's readonly list */
    bool retired;                /* forgotten (engine_retire): out of the map, freed when idle */
    struct queue *readonly_next; /* in that list */
    /* The server's consumers and leases that point at this queue (a
     * retired queue is freed only once there is none), and of them the
     * leases. */
    size_t attached, leases;
    /* Requests other than reads that have named it so far (req.c), so
     * that a forget can tell whether another request used the queue
     * while it ran. */
    uint64_t nreq;
};

/* Made and freed by the engine. */
struct queue *queue_new(struct engine *e, const char *name, size_t len);
void queue_free(struct queue *q);
/* Start the queue's upkeep timer, subscribe to its wakes (engine_use);
 * its first call is a format step (queue_format_step). */
void queue_start(struct queue *q);

/* The queue's store, for a typed call (jobs.h, admin.h). The settlements
 * or enqueues gathered this turn are sent first, so that the call runs
 * after them: a claim a completion's permit should serve sees it done. */
struct store_queue *queue_store(struct queue *q);

/* Work may be available: claim for the parked consumers of kind flat. */
void queue_pump(struct queue *q, bool flat);

/* An enqueue of a job of kind flat that is due now may ask the script to
 * lease it straight to a consumer parked here: queue_handoff_begin gives
 * the lease to ask for (0 = don't ask); every call that returned non-zero
 * is matched by one queue_handoff_end with the enqueue's result (NULL when
 * the call failed), which delivers the job if it was handed off. */
uint64_t queue_handoff_begin(struct queue *q, bool flat);
void queue_handoff_end(struct queue *q, bool flat, uint64_t lease_ms,
                       const struct store_enqueued *res);

/* A job of this queue becomes due (delayed, or a lease runs out) in ms:
 * run the upkeep then at the latest, not only at its next regular pass. */
void queue_due_in(struct queue *q, uint64_t ms);

/* Add a settlement (a completion or a fail) to this turn's batch (sent at
 * the end of the turn, or before the queue's next call; its items take
 * effect in the order added). c is copied; its strings and fail must live
 * until c->done runs, exactly once. 0, or -ENOMEM (done will not run). */
int queue_settle(struct queue *q, const struct queue_settlement *c);
/* Add an enqueue without a hand-off to this turn's batch: the enqueues a
 * turn reads for the queue go to Redis as enqueue_many calls (at most
 * STORE_ITEMS_PER_CALL items each, in order), at the end of the turn or
 * before the queue's next call, as settlements do. a's strings are
 * copied. done runs exactly once, with a 1-item verdict as store_enqueue
 * gives it. 0, or -ENOMEM (done will not run). */
int queue_enqueue(struct queue *q, const struct store_enqueue_args *a, store_enqueue_cb *done,
                  void *priv);
/* Send this turn's batch (settlements or enqueues) now (engine_flush,
 * queue_store). */
void queue_flush(struct queue *q);

/* Give n leases back at once (a connection closed, or their consumer
 * went away while the claim was in flight; the strings are copied), with
 * the attempt as mode says (store_release_mode). */
void queue_release(struct queue *q, size_t n, const struct store_pair *pairs, const char *reason,
                   enum store_release_mode mode);

/* A growing list of (job, lease) pairs; free(v) when done. */
struct queue_pairs {
    struct store_pair *v;
    size_t n, cap;
};
/* Add one (the strings are not copied). 0 or -ENOMEM. */
int queue_pairs_add(struct queue_pairs *ps, const char *job, const char *lease);

/* The leased-job view of a store job (strings borrowed), for the
 * encoders in reply.h. */
void queue_job_view(const struct queue *q, const struct store_job *sj, long long deadline,
                    struct reply_job *j);
/* Whether sj's stored payload can go out spliced into a frame (reply.h:
 * not empty, no newline). emqd stores only compact JSON, so a payload
 * that cannot was written past it, straight at Redis. */
bool queue_job_sendable(const struct store_job *sj);
/* Dead-letter a leased job that cannot be sent (queue_job_sendable),
 * instead of handing it out: sending it would break its connection's
 * framing, and giving it back would serve it again, to every worker in
 * turn, for ever. Its error on the row says why; `dead` lists it. */
void queue_bury_unsendable(struct queue *q, const struct store_job *sj);
/* One job was leased to a consumer of this daemon: count it as claimed
 * and record its wait. */
void queue_leased(struct queue *q, long long wait_ms);

#endif
