/* workload: a known set of jobs spread over several groups with ceilings,
 * worker threads that drain it while recording what they saw, and the
 * accounting that closes every fault scenario: every job completed, none
 * missing, nothing left active or pending, and the queue's own invariant
 * check clean. */
#ifndef EMQ_TEST_WORKLOAD_H
#define EMQ_TEST_WORKLOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define WL_GROUPS_MAX 64

struct tc_conn;

/* One job set: n jobs "JOB<tag><index>" over groups "TEN<tag>g<k>". */
struct workload {
    const char *queue;
    const char *tag; /* keeps ids of two sets in one queue apart */
    int n;
    int groups;
    int ceiling;                        /* per-group limit set before enqueueing (0: none) */
    int payload_bytes;                  /* > 0: each payload carries a string of this size */
    atomic_int *done;                   /* n counters: completes answered ok */
    char *unacked;                      /* n flags: completed in the store, but its worker never
                                         * got the answer (its daemon died with the reply owed) */
    atomic_int inflight[WL_GROUPS_MAX]; /* per group, as the workers see it */
    atomic_int max_inflight[WL_GROUPS_MAX];
    atomic_int completed_total;
};

/* One worker thread: claims (count at a time, lease_ms), optionally holds
 * each job hold_ms, completes it, until stop is set or the set is done. */
struct wl_worker {
    struct workload *wl;
    int port;
    int count;
    int lease_ms;
    int hold_ms;
    atomic_bool stop;
    atomic_int errors;      /* unexpected replies (a failed complete but ELEASE) */
    atomic_int unavailable; /* EUNAVAILABLE replies (retried) */
    atomic_int refused;     /* complete answered ELEASE (the lease had gone) */
    pthread_t thread;
    bool running;
};

/* Set up the set (calloc'd counters) without touching the daemon. */
void wl_init(struct workload *wl, const char *queue, const char *tag, int n, int groups,
             int ceiling);
void wl_deinit(struct workload *wl);

/* The id of job i and the group of job i, into buf. */
void wl_job_id(const struct workload *wl, int i, char *buf, size_t cap);
void wl_group_id(const struct workload *wl, int g, char *buf, size_t cap);
/* The index of a job id of this set, or -1. */
int wl_index(const struct workload *wl, const char *job);

/* Set the ceilings (when from is 0) and enqueue jobs [from, to) through
 * emqd on port, stopping at the first request with no reply; returns how
 * many were answered "enqueued". *dup (may be NULL) gets how many were
 * answered "duplicate"; anything else (an error) counts in neither.
 * Retries nothing. */
int wl_enqueue(struct workload *wl, int port, int from, int to, int *dup);

/* Enqueue job i alone on c: 1 enqueued, 0 duplicate, -1 error or no
 * reply (*code, may be NULL, gets the error code or ""). */
int wl_enqueue_one(struct workload *wl, struct tc_conn *c, int i, const char **code);

/* Start / stop (join) a worker thread. */
int wl_worker_start(struct wl_worker *w, struct workload *wl, int port, int count, int lease_ms,
                    int hold_ms);
void wl_worker_stop(struct wl_worker *w);

/* Wait until every job has been completed at least once; true when all
 * are, false at the deadline (wait_deadline_ms(timeout_ms): the hang
 * guard of a whole drain, scaled for slow runs). */
bool wl_await_done(struct workload *wl, int timeout_ms);

/* As wl_await_done, for scenarios where a daemon dies: a job no worker
 * saw completed counts as done once its row (asked of emqd on port) is
 * "completed" -- the complete landed and its reply died with the daemon.
 * Such jobs are flagged in unacked; returns true when all are done. */
bool wl_await_settled(struct workload *wl, int port, int timeout_ms);

/* The accounting check, as Criterion assertions: every job of the set has
 * a row in state "completed" (job op), stats show active, pending,
 * delayed and dead 0,
 * and the check op reports no violation. Asserts the workers' own records
 * too: every job completed at least once (or flagged unacked). */
void wl_account(struct workload *wl, int port);

#endif
