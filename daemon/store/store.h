/* store: a queue's place in Redis, and how a typed call ends.
 *
 * Every lane script has one C call (jobs.h: producing and consuming work;
 * admin.h: the levers, the reads and the queue registry). A call owns its
 * script's KEYS and ARGV (the key layout of keys.h), sends it on the
 * queue's route (so a queue's calls run at Redis in the order made:
 * pool.h), and decodes the reply into C values before its callback runs:
 * no caller sees a redisReply, builds ARGV or compares a Lua status word.
 *
 * Every call returns 0 when accepted (its callback then runs exactly once,
 * later, never from inside the call) or a negative errno (-ENOMEM, -EINVAL,
 * -ESHUTDOWN) with nothing sent and no callback. */
#ifndef EMQ_STORE_H
#define EMQ_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "keys.h"
#include "pool.h"

/* A leasing call whose reply was lost: its tag, and the pool's loss count
 * when it was lost (its leases may be undone once that loss is fenced). */
struct store_lost {
    uint64_t tag;
    uint64_t epoch;
};

/* One queue's keys and the route its calls go by, and the leases it took
 * but could not deliver (lost.c). */
struct store_queue {
    struct pool *pool;
    struct keys keys;
    struct pool_route route;
    uint64_t tag_next;       /* the next leasing call's tag (random start) */
    struct store_lost *lost; /* nlost of them, oldest first; NULL when none */
    size_t nlost, lost_cap;
    bool recovering; /* a store_recover is running */
    /* Told each time a leasing call's leases are recorded as lost (from
     * inside that call's reply handling: it may only schedule work). */
    void (*on_lost)(void *priv);
    void *on_lost_priv;
};

/* Build the keys and route of queue name (len bytes) on pool p. Returns
 * 0, or KEYS_EQUEUE when the name is not a valid queue name. */
int store_queue_init(struct store_queue *sq, struct pool *p, const char *name, size_t len);

/* Set the callback told of lost leases (NULL: none). */
void store_queue_on_lost(struct store_queue *sq, void (*cb)(void *priv), void *priv);

/* Free what sq holds (the lost tags); sq may be freed after. */
void store_queue_deinit(struct store_queue *sq);

/* How a call ended. code 0: it did what it says, and the call's result is
 * valid. Otherwise the result is NULL (or zero) and code is the lane
 * script's error (ENOJOB, ELEASE, EARG, ESTATE, ...; message is its text
 * after the code), WIRE_EUNAVAILABLE (the backend is down or did not
 * answer in time) or WIRE_EINTERNAL (Redis refused the script, or its
 * reply had an unexpected shape: logged here, with the script's name).
 * message is NUL-terminated and valid during the callback only. */
struct store_status {
    enum wire_error code;
    const char *message;
};

/* A leased job, as claim leases it and an enqueue hands it off: strings
 * borrowed from the reply (each NUL-terminated), valid during the
 * callback only. */
struct store_job {
    const char *id;
    size_t id_len;
    const char *group; /* group_len 0: an ungrouped job */
    size_t group_len;
    const char *payload; /* the stored JSON text */
    size_t payload_len;
    const char *lease; /* the fencing token */
    size_t lease_len;
    long long attempt;
    long long wait_ms; /* since it last became claimable (0 for a hand-off) */
};

/* A job id and lease token, NUL-terminated: what settling calls name. */
struct store_pair {
    const char *job;
    const char *lease;
};

/* Where a settling move left a job, or why it did not take. */
enum store_outcome {
    STORE_COMPLETED,
    STORE_PENDING,
    STORE_DELAYED,
    STORE_DEAD,
    STORE_ELEASE, /* the job is not active, or the token is stale: nothing changed */
    STORE_ENOJOB, /* no such job */
};

/* The wire's name of a job state ("completed", "pending", "delayed",
 * "dead"), for an outcome that is one; NULL for the refusals. */
const char *store_outcome_state(enum store_outcome o);

#endif
