/* jobs: the typed calls that produce and consume work (lua/enqueue.lua,
 * claim.lua, claim_flat.lua, complete.lua (completions and fails), release.lua,
 * extend.lua) and the upkeep (reap.lua, promote.lua). See store.h for
 * what every call and callback promises. */
#ifndef EMQ_STORE_JOBS_H
#define EMQ_STORE_JOBS_H

#include "store.h"

/* --- enqueue --------------------------------------------------------- */

struct store_enqueue_args {
    const char *job;     /* a JOB id */
    const char *group;   /* "" = ungrouped */
    const char *payload; /* JSON text, payload_len bytes, NUL-terminated */
    size_t payload_len;
    long long delay_ms;     /* 0 = due now */
    long long max_attempts; /* 0 = unlimited */
    /* > 0: a consumer of the job's kind is parked on this daemon, and the
     * script may lease the job to it at once, on this lease (see
     * lua/enqueue.lua). */
    uint64_t handoff_ms;
};

/* Where a refusing cap comes from (lua/lib.lua cap_refuses). */
enum store_cap_from {
    STORE_CAP_GROUP, /* the group's own cap */
    STORE_CAP_QUEUE, /* the queue-wide default */
};

struct store_enqueued {
    bool enqueued; /* false: a duplicate id, or refused (cap > 0); nothing changed */
    /* > 0: refused, nothing written: the job's lane holds this cap of
     * pending and delayed jobs (lua/cap.lua), which comes from cap_from. */
    long long cap;
    enum store_cap_from cap_from;
    bool handed_off;    /* enqueued and leased at once: job and deadline are set */
    long long deadline; /* the lease's deadline, ms on the Redis clock */
    struct store_job job;
};

typedef void store_enqueue_cb(void *priv, const struct store_status *st,
                              const struct store_enqueued *res);

int store_enqueue(struct store_queue *sq, const struct store_enqueue_args *a, store_enqueue_cb *cb,
                  void *priv);

/* The most items, and about the most payload bytes, one enqueue_many
 * call carries. A script runs alone in Redis, and every queue waits
 * behind it: 64 items of 1 KiB took it 1.0 ms a call (INFO commandstats,
 * 10 groups) and 1.5 ms when each item opened a new lane, so 32 keep a
 * call under a millisecond while sharing its fixed cost (the FCALL,
 * begin(), TIME: as much as a few items) over many jobs. A call is
 * cut early once its payloads reach STORE_BYTES_PER_CALL, so large
 * payloads do not make a long call either. Callers split larger batches,
 * in order (server/cmd_jobs.c). */
#define STORE_ITEMS_PER_CALL 32
#define STORE_BYTES_PER_CALL (256 * 1024)

/* One item's verdict: st.code 0 and res as store_enqueue's (enqueued,
 * a duplicate, or refused by its lane's cap; never handed off), or the
 * item's own error in st. */
struct store_item_verdict {
    struct store_status st;
    struct store_enqueued res;
};

/* n verdicts, in the order the items were given; with st->code set (the
 * call itself failed: every item alike), each is NULL. */
typedef void store_enqueue_many_cb(void *priv, const struct store_status *st, size_t n,
                                   const struct store_item_verdict *each);

/* Admit items[0..n) (1 <= n <= STORE_ITEMS_PER_CALL, no hand-off) in one
 * call (lua/enqueue_many.lua): each exactly as store_enqueue would. */
int store_enqueue_many(struct store_queue *sq, const struct store_enqueue_args *items, size_t n,
                       store_enqueue_many_cb *cb, void *priv);

/* --- claim ------------------------------------------------------------- */

struct store_leased {
    long long deadline; /* shared by the batch, ms on the Redis clock */
    size_t n;
    const struct store_job *jobs; /* in the order served, with wait_ms */
};

typedef void store_claim_cb(void *priv, const struct store_status *st,
                            const struct store_leased *res);

/* Lease up to n jobs (1..) on lease_ms, from the ring (flat false) or the
 * flat set, stopping once their payloads add up to max_bytes (0: no
 * bound; at least one job, so a reply is at most max_bytes plus one
 * payload). */
int store_claim(struct store_queue *sq, bool flat, size_t n, uint64_t lease_ms, size_t max_bytes,
                store_claim_cb *cb, void *priv);

/* --- settling ---------------------------------------------------------- */

/* The most pairs one settling call should carry. A script runs alone in
 * Redis, so one call of thousands of pairs (a connection closing with
 * every lease of a big worker, a busy turn's completions) would stall
 * every queue behind it: settling a pair costs Redis a few microseconds,
 * so 128 keep one call near a millisecond while still sharing a call's
 * fixed cost over many jobs. Callers split larger sets (core/batch.c,
 * core/queue.c). */
#define STORE_PAIRS_PER_CALL 128

/* One outcome per pair (or item), in order (n of them). */
typedef void store_outcomes_cb(void *priv, const struct store_status *st, size_t n,
                               const enum store_outcome *each);

/* How a leased job failed. */
struct store_fail_args {
    const char *error;  /* recorded on the row; "" for none */
    long long retry_ms; /* -1: the default backoff; 0: back to its lane now */
    bool dead;          /* dead-letter it now */
};

/* One settlement: a completion, or with fail a failed attempt. */
struct store_settlement {
    const char *job, *lease;
    const struct store_fail_args *fail; /* NULL: completed */
};

/* A fail costs Redis about four completions (the lease check reads more,
 * and the job moves to a lane, the delayed or the dead set): it counts
 * that much against STORE_PAIRS_PER_CALL. */
#define STORE_FAIL_WEIGHT 4

/* Settle n leased jobs in one call, in order (lua/complete.lua): a
 * completion's outcome is STORE_COMPLETED, a fail's its job's new state
 * (STORE_PENDING, _DELAYED or _DEAD), either's STORE_ELEASE or
 * STORE_ENOJOB. Completed rows are kept retention_ms. */
int store_settle(struct store_queue *sq, uint64_t retention_ms, size_t n,
                 const struct store_settlement *items, store_outcomes_cb *cb, void *priv);

/* What a release does with the attempt (lua/release.lua's modes). */
enum store_release_mode {
    /* The holder went away (its connection closed): the attempt counts,
     * reason is recorded, and a job whose attempts are spent goes dead. */
    STORE_RELEASE_COUNTED,
    /* The holder gave it back on purpose (the release op: a worker
     * stopping): the attempt is returned, reason recorded; never dead. */
    STORE_RELEASE_RETURNED,
    /* Nobody saw the job (its consumer was gone before the lease reached
     * it): the attempt is returned and nothing recorded. */
    STORE_RELEASE_UNDELIVERED,
};

/* Give n leases back at once (STORE_PENDING, _DEAD, _ELEASE or _ENOJOB
 * each), recording reason as mode says. */
int store_release(struct store_queue *sq, const char *reason, enum store_release_mode mode,
                  size_t n, const struct store_pair *pairs, store_outcomes_cb *cb, void *priv);

/* The lease now runs until lease_until (ms on the Redis clock). */
typedef void store_extend_cb(void *priv, const struct store_status *st, long long lease_until);

int store_extend(struct store_queue *sq, const char *job, const char *lease, uint64_t lease_ms,
                 store_extend_cb *cb, void *priv);

/* --- upkeep ------------------------------------------------------------- */

/* done: leases reaped or jobs promoted; next_ms: until the next one is
 * due (-1: none is). */
typedef void store_upkeep_cb(void *priv, const struct store_status *st, uint64_t done,
                             long long next_ms);

/* Reap up to max expired leases queue-wide. */
int store_reap(struct store_queue *sq, uint64_t max, store_upkeep_cb *cb, void *priv);
/* Promote up to max due delayed jobs. */
int store_promote(struct store_queue *sq, uint64_t max, store_upkeep_cb *cb, void *priv);
/* Reap up to max of one group's expired leases (next_ms is -1). */
int store_reap_group(struct store_queue *sq, const char *group, uint64_t max, store_upkeep_cb *cb,
                     void *priv);

/* One step of bringing the queue's store up to this code's format
 * (format.lua): done when the format is current (nothing more to do, now
 * or after any later start); indexed, the delayed rows it put in their
 * group's delayed index this step. */
typedef void store_format_cb(void *priv, const struct store_status *st, bool done,
                             uint64_t indexed);

/* Walk up to max members of the delayed set. */
int store_format(struct store_queue *sq, uint64_t max, store_format_cb *cb, void *priv);

/* --- leases whose reply was lost (lost.c) ------------------------------ */

/* True when leasing calls of sq lost their reply and are not recovered
 * yet (store_queue_on_lost tells of each). */
bool store_lost_pending(const struct store_queue *sq);

/* True when leasing calls of sq lost their reply and the pool has fenced
 * those losses (pool_fenced), so that store_recover may run now. */
bool store_recover_due(const struct store_queue *sq);

/* given_back: leases of lost calls given back, attempt returned. */
typedef void store_recover_cb(void *priv, const struct store_status *st, uint64_t given_back);

/* Give back every lease the lost calls of sq took that nobody has
 * settled or taken since: to its lane (or the flat set), its attempt
 * returned, as if never leased. Several calls of bounded work (a ZSCAN
 * page of the queue's leases each); on an error the tags are kept for
 * the next try. -EAGAIN when not due (store_recover_due). */
int store_recover(struct store_queue *sq, store_recover_cb *cb, void *priv);

#endif
