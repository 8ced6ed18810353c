/* admin: the typed calls of the per-tenant levers (lua/limit.lua,
 * weight.lua, rate.lua, pause.lua, resume.lua, reassign.lua, drain.lua), the reads (depth.lua,
 * stats.lua, groups.lua, job.lua, dead.lua; the steps of check.lua, which
 * check.c runs) and the queue registry (two plain commands on
 * STORE_QUEUES_KEY). See store.h for what every call and callback
 * promises; strings in a result are borrowed from the reply and valid
 * during the callback only. */
#ifndef EMQ_STORE_ADMIN_H
#define EMQ_STORE_ADMIN_H

#include "store.h"

/* A piece of reply text (NUL-terminated too). */
struct store_text {
    const char *str;
    size_t len;
};

/* --- per-tenant levers ------------------------------------------------ */

/* The call did what it says; it has nothing to report. */
typedef void store_done_cb(void *priv, const struct store_status *st);

/* Set group's ceiling to max in-flight jobs (0: remove it); the lane goes
 * on or off the ring to match. */
int store_limit(struct store_queue *sq, const char *group, long long max, store_done_cb *cb,
                void *priv);

/* Set group's weight to weight (1..1000; 0: remove it, so the queue
 * default or else 1 applies), its jobs per ring turn (lua/weight.lua).
 * store_limit, store_weight and store_rate with group "" set the queue-wide
 * default instead, for every group without its own. */
int store_weight(struct store_queue *sq, const char *group, long long weight, store_done_cb *cb,
                 void *priv);

/* Set group's cap to max pending + delayed jobs (lua/cap.lua; 0: remove
 * it; group "": the queue default): an enqueue into a lane that holds
 * its cap is refused (store_enqueued.cap). */
int store_cap(struct store_queue *sq, const char *group, long long max, store_done_cb *cb,
              void *priv);

/* Set group's rate to at most max leases per per_ms ms (lua/rate.lua;
 * max 0: remove it, per_ms ignored). */
int store_rate(struct store_queue *sq, const char *group, long long max, long long per_ms,
               store_done_cb *cb, void *priv);

/* changed: the group was not paused before (pause) or was (resume); false
 * when the call found it already so. */
typedef void store_changed_cb(void *priv, const struct store_status *st, bool changed);

int store_pause(struct store_queue *sq, const char *group, store_changed_cb *cb, void *priv);
int store_resume(struct store_queue *sq, const char *group, store_changed_cb *cb, void *priv);

/* from: the group the pending job was in (NULL, from_len 0: it was
 * ungrouped); equal to the destination when nothing had to move. Fails
 * with WIRE_ENOJOB, or WIRE_ESTATE when the job is not pending. */
typedef void store_reassign_cb(void *priv, const struct store_status *st, const char *from,
                               size_t from_len);

int store_reassign(struct store_queue *sq, const char *job, const char *group,
                   store_reassign_cb *cb, void *priv);

/* One bounded drain call: how many pending jobs it deleted, and how many
 * the lane still holds (call again while left > 0; producers may be
 * adding to it meanwhile). */
struct store_drained {
    uint64_t drained, left;
};

typedef void store_drain_cb(void *priv, const struct store_status *st,
                            const struct store_drained *res);

/* Delete up to max (>= 1) of group's pending jobs and take its lane off
 * the ring: bounded, so that Redis never blocks long on a deep lane. */
int store_drain(struct store_queue *sq, const char *group, uint64_t max, store_drain_cb *cb,
                void *priv);

/* --- reads ------------------------------------------------------------- */

/* A number of jobs: a lane's depth, or the dead jobs retried or purged. */
typedef void store_count_cb(void *priv, const struct store_status *st, uint64_t n);

/* The pending count of group's lane, or of the flat set (group ""). */
int store_depth(struct store_queue *sq, const char *group, store_count_cb *cb, void *priv);

/* Queue-wide totals. pending counts every lane and the flat set, flat the
 * flat set alone; ring: lanes serviceable now; groups: the registry's
 * size (a superset of the groups with work); paused: paused groups. */
struct store_stats {
    uint64_t pending, active, delayed, dead, ring, groups, paused, flat;
    /* The queue-wide defaults for groups without their own (-1 = none). */
    long long def_limit, def_weight, def_rate_max, def_rate_per_ms, def_cap;
};

typedef void store_stats_cb(void *priv, const struct store_status *st,
                            const struct store_stats *res);

/* O(groups) at Redis: admin and metrics use. */
int store_stats(struct store_queue *sq, store_stats_cb *cb, void *priv);

/* Where a group's applying setting comes from. */
enum store_from {
    STORE_FROM_NONE,  /* neither: no ceiling, weight 1, no rate, no cap */
    STORE_FROM_GROUP, /* the group's own */
    STORE_FROM_QUEUE, /* the queue-wide default */
};

/* One group of a page, with its numbers: the settings that apply to it
 * (its own, else the queue's default) and where each comes from. */
struct store_group_row {
    const char *group;
    size_t group_len;
    uint64_t depth;                  /* pending in its lane */
    uint64_t active;                 /* in flight: what its ceiling counts */
    uint64_t delayed;                /* delayed: with depth, what its cap counts */
    long long limit;                 /* its ceiling, -1 = none */
    long long weight;                /* its weight, -1 = none set (it is served as 1) */
    long long rate_max, rate_per_ms; /* its rate, -1 = none */
    bool paused;
    bool throttled; /* off the ring until its rate allows a lease */
    long long cap;  /* its cap, -1 = none */
    enum store_from limit_from, weight_from, rate_from, cap_from;
};

/* A page of the group registry. Groups idle in every way are left out
 * (and dropped from the registry as the page passes them), so a page may
 * hold fewer rows than asked, or none, before the end. */
struct store_groups {
    const char *cursor; /* for the next page; "0": this was the last */
    size_t n;
    const struct store_group_row *rows;
};

typedef void store_groups_cb(void *priv, const struct store_status *st,
                             const struct store_groups *res);

/* The page after cursor ("0" to start; else one a page returned: the
 * caller checks it is digits) of about count (>= 1) groups. */
int store_groups(struct store_queue *sq, const char *cursor, uint64_t count, store_groups_cb *cb,
                 void *priv);

/* The fields a job's row may hold (lua/lib.lua and the scripts that write
 * it); STORE_ROW_OTHER: one no script writes (by hand, or from a later
 * version), kept so a reader can still show it. */
enum store_row_key {
    STORE_ROW_STATE,
    STORE_ROW_GROUP,
    STORE_ROW_PAYLOAD,
    STORE_ROW_ATTEMPTS,
    STORE_ROW_MAX_ATTEMPTS,
    STORE_ROW_CREATED_MS,
    STORE_ROW_READY_MS,
    STORE_ROW_FINISHED_MS,
    STORE_ROW_LEASE,
    STORE_ROW_LEASE_UNTIL,
    STORE_ROW_ERROR,
    STORE_ROW_LEASE_BY,
    STORE_ROW_OTHER,
};

/* One field of a row as stored. numeric: the value is a count or a time in
 * ms (attempts, max_attempts, lease_until, every "*_ms"), and num holds it;
 * a known numeric field that is not a number fails the call as an
 * unexpected reply, an unknown one stays text. */
struct store_row_field {
    enum store_row_key key;
    struct store_text name, value;
    bool numeric;
    long long num;
};

/* A job's row. The typed fields are what the scripts write: text NULL
 * (len 0) and numbers -1 where the row has no such field (a row holds only what
 * its history wrote: no lease unless active, no error unless it failed).
 * fields lists every field, known or not, in the row's own order, for a
 * reader that shows the row as it is. lease is the holder's fencing token:
 * not for anyone else's eyes. */
struct store_row {
    struct store_text state;   /* pending, active, delayed, dead, completed */
    struct store_text group;   /* "" = ungrouped */
    struct store_text payload; /* the JSON text; dropped once completed */
    struct store_text error;   /* the last failure's reason */
    struct store_text lease;
    struct store_text lease_by;       /* the daemon's tag of the call that leased it (lost.c) */
    long long attempts, max_attempts; /* max_attempts 0 = unlimited */
    long long created_ms, ready_ms, finished_ms, lease_until; /* Redis clock */
    size_t nfields;
    const struct store_row_field *fields;
};

/* Fails with WIRE_ENOJOB when there is no row (never enqueued, or expired
 * after completion). */
typedef void store_row_cb(void *priv, const struct store_status *st, const struct store_row *row);

int store_job_row(struct store_queue *sq, const char *job, store_row_cb *cb, void *priv);

/* --- peek and remove (inspect.c) ---------------------------------------- */

/* What peek pages through (lua/peek.lua). */
enum store_peek_what {
    STORE_PEEK_LANE,    /* a group's pending jobs (group required) */
    STORE_PEEK_FLAT,    /* the ungrouped pending jobs */
    STORE_PEEK_ACTIVE,  /* leases: the queue's, or one group's */
    STORE_PEEK_DELAYED, /* delayed jobs, soonest due first */
    STORE_PEEK_DEAD,    /* dead jobs, oldest first */
};

/* One job of a page: its id and its row. */
struct store_peeked {
    struct store_text job;
    struct store_row row;
};

/* A page: the jobs in service order; cursor "" when nothing follows. */
struct store_peek_page {
    const char *cursor;
    size_t n;
    const struct store_peeked *jobs;
};

typedef void store_peek_cb(void *priv, const struct store_status *st,
                           const struct store_peek_page *page);

/* The page after cursor ("" to start) of at most count (1..1000) jobs of
 * what (group: "" or the group, as lua/peek.lua takes them), stopping once
 * the payloads add up to max_bytes (0: no bound; at least one job). */
int store_peek(struct store_queue *sq, enum store_peek_what what, const char *group,
               const char *cursor, uint64_t count, size_t max_bytes, store_peek_cb *cb, void *priv);

/* Delete one pending or delayed job; state is the state it was in
 * ("pending" or "delayed"). Fails ENOJOB, or ESTATE for a job in another
 * state. */
typedef void store_removed_cb(void *priv, const struct store_status *st, const char *state);

int store_remove(struct store_queue *sq, const char *job, store_removed_cb *cb, void *priv);

/* Delete the queue's keys (lua/forget.lua) when it holds no job: nothing
 * pending, active, delayed or dead; else it fails with WIRE_ESTATE and
 * changes nothing. O(groups) at Redis. */
int store_forget(struct store_queue *sq, store_done_cb *cb, void *priv);

/* One dead job, oldest first. */
struct store_dead_row {
    struct store_text job;
    struct store_text group; /* "" = ungrouped */
    long long attempts;
    struct store_text error;
    long long died_ms; /* Redis clock */
};

typedef void store_dead_cb(void *priv, const struct store_status *st, size_t n,
                           const struct store_dead_row *rows);

/* The dead job job, or (job "") the oldest limit (>= 1) of them. With a
 * job named, these three calls fail with WIRE_ENOJOB when it is not dead. */
int store_dead_list(struct store_queue *sq, const char *job, uint64_t limit, store_dead_cb *cb,
                    void *priv);
/* Back to their lanes with their attempts reset; n: how many moved. */
int store_dead_retry(struct store_queue *sq, const char *job, uint64_t limit, store_count_cb *cb,
                     void *priv);
/* Deleted, rows and all; n: how many. */
int store_dead_purge(struct store_queue *sq, const char *job, uint64_t limit, store_count_cb *cb,
                     void *priv);

/* The store invariants (docs/ARCHITECTURE.md section 4) that do not hold,
 * each a sentence, each once; n 0: all hold. After STORE_CHECK_MAX of
 * them the check stops, and one more sentence says so. */
typedef void store_check_cb(void *priv, const struct store_status *st, size_t n,
                            const struct store_text *violations);

/* The items one step of the check op examines at most (a member of a
 * structure or a ring lane counts as one, a job row or a group's own
 * checks as two): about a millisecond of Redis' time. */
#define STORE_CHECK_BUDGET 100
/* The violations a check lists before it stops. */
#define STORE_CHECK_MAX 1000

/* Check the queue in bounded steps (lua/check.lua, daemon/store/check.c)
 * of about budget (>= 1) items each, so Redis serves other clients
 * between them: admin and test use. The steps go one after another on the
 * queue's route, and cb runs once, after the last. */
int store_check(struct store_queue *sq, unsigned budget, store_check_cb *cb, void *priv);

/* --- the queue registry ------------------------------------------------ */

/* The set of queue names every daemon has used (outside any {q} slot: a
 * plain key, so these are plain commands on no route). */
#define STORE_QUEUES_KEY "emq:queues"

/* names: the registry's valid queue names (anything else in the set,
 * which any client of the Redis may write, is passed over). */
typedef void store_queues_cb(void *priv, const struct store_status *st, size_t n,
                             const struct store_text *names);

int store_queues_list(struct pool *p, store_queues_cb *cb, void *priv);

/* The registry's calls that a connection orders (the add of a queue it
 * puts in use, the page it reads next, a forget) go by one route rt, so
 * that they run at Redis in the order the daemon makes them: rt NULL for
 * none. */

/* Add a queue name, fire and forget: nobody waits on it, and an add that
 * is lost leaves the name to the next daemon that takes the queue up (or
 * this one, restarted). With replica-acks it is a write WAIT confirms
 * (pool_command_write); one that too few replicas confirm is counted in
 * the pool's unacked, not retried. 0, or -EINVAL (not a valid queue
 * name) or the pool's refusals (pool_command). */
int store_queues_add(struct pool *p, struct pool_route *rt, const char *name, size_t len);

/* Remove a queue name (a forgotten queue), fire and forget as the add. */
int store_queues_remove(struct pool *p, struct pool_route *rt, const char *name, size_t len);

/* A page of the registry (SSCAN): its valid names (others are passed
 * over, so a page may hold none before the end), and the cursor for the
 * next page ("0": this was the last). */
struct store_queues_page {
    const char *cursor;
    size_t n;
    const struct store_text *names;
};

typedef void store_queues_page_cb(void *priv, const struct store_status *st,
                                  const struct store_queues_page *page);

/* The page after cursor ("0" to start; else one a page returned: the
 * caller checks it is digits) of about count (>= 1) names. */
int store_queues_page(struct pool *p, struct pool_route *rt, const char *cursor, uint64_t count,
                      store_queues_page_cb *cb, void *priv);

#endif
