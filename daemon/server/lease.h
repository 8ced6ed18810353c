/* lease: the jobs leased to one connection, so that they can be given
 * back the moment it closes, and a stream's credit returns when one is
 * settled. Keyed by "queue job". */
#ifndef EMQ_LEASE_H
#define EMQ_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brand.h"
#include "store.h"

struct client;
struct consumer;
struct queue;

struct lease {
    struct queue *q;
    struct consumer *stream; /* the stream it was pushed on, or NULL */
    char lease[24];
    char group[BRAND_ID_MAX + 1]; /* the job's group, "" when ungrouped (for clients) */
    long long until;              /* lease_until, ms on the Redis clock (for clients) */
    uint64_t expires;             /* uv_now() after which Redis may reap it */
    uint64_t since_ns;            /* uv_hrtime() when it was handed out */
    char key[BRAND_QUEUE_MAX + BRAND_ID_MAX + 2]; /* "queue job" */
    size_t klen;
};

/* Remember that job sj of q is leased to c (its token, its group) until
 * until (the Redis clock) for lease_ms, pushed on stream (or NULL). One
 * entry per job: a job leased to c again (its old lease expired) replaces
 * the old lease, whose stream stops counting it. 0, or -ENOMEM: nothing
 * is remembered, and the caller must not hand the job out. */
int lease_hold(struct client *c, struct queue *q, const struct store_job *sj, long long until,
               uint64_t lease_ms, struct consumer *stream);
/* An extend of lease token succeeded: it lives lease_ms from now, until
 * until on the Redis clock. */
void lease_extend(struct client *c, struct queue *q, const char *job, size_t jlen,
                  const char *token, uint64_t lease_ms, long long until);
/* The job's lease token is settled, or no longer ours: forget it,
 * returning a stream's credit. Only the lease named goes: a table entry
 * for a newer lease of the job stays (token NULL: whichever it holds).
 * settled: the holder completed or failed it, so the time it was held
 * goes into the queue's run histogram. */
void lease_unhold(struct client *c, struct queue *q, const char *job, size_t jlen,
                  const char *token, bool settled);
/* Forget leases whose time has run out (now: uv_now). */
void lease_sweep(struct client *c, uint64_t now);
/* The connection closed: give back every job leased to it, one release
 * call per queue, and empty the table. */
void lease_release_all(struct client *c);

#endif
