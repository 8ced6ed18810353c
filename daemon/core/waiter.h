/* waiter: a consumer parked on a queue, as the core sees it. The core
 * knows nothing of connections: whoever parks a waiter (the server's
 * parked claims and streams) embeds one in its own struct and answers
 * through two callbacks. The core keeps the queue's list of waiters,
 * claims for them and hands each job to one of them. */
#ifndef EMQ_WAITER_H
#define EMQ_WAITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct queue;
struct waiter;

struct waiter_ops {
    /* Take one job leased for w (on w->lease_ms; the lease runs until
     * deadline, ms on the Redis clock); the job's strings are valid
     * during the call only. Update w->room. Return false when the
     * consumer went away while taking it (its connection closed): w has
     * been freed then, and its leases given back. */
    bool (*take)(struct waiter *w, const struct store_job *job, long long deadline);
    /* A one-shot waiter (a parked claim) got jobs in a round: it is
     * unlinked, and answers now. It may free w and any waiter of the same
     * owner. */
    void (*filled)(struct waiter *w);
};

struct waiter {
    struct waiter *qprev, *qnext; /* in the queue's list, when linked */
    struct queue *q;
    const struct waiter_ops *ops;
    bool flat;    /* it takes ungrouped jobs (else grouped ones) */
    bool linked;  /* on the queue's list */
    bool oneshot; /* answered after the first round that gives it a job */
    uint64_t lease_ms;
    size_t room; /* jobs it would take now; the owner keeps it current */
    size_t got;  /* jobs taken in the current round (oneshot) */
};

/* Put w at the tail of its queue's list (if not there yet) and look for
 * work for it at once. */
void queue_park(struct queue *q, struct waiter *w);
/* Take w off its queue's list (no-op when not linked). */
void queue_unpark(struct waiter *w);

#endif
