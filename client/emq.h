/* emq.h: libemq, a small blocking C client for emqd's wire protocol v1
 * (proto/PROTOCOL.md).
 *
 * One `struct emq` is one connection. It is not thread-safe: use one per
 * thread. There is no global state. Every call that talks to the server
 * blocks until its reply arrives or the connection's timeout passes.
 *
 * Errors: functions return EMQ_OK (0) or an `enum emq_code`. Codes below
 * EMQ_ECLIENT are the server's wire error codes (section 3 of the protocol);
 * the others are raised by the library itself. After any failure,
 * emq_errmsg() gives a human-readable message (the server's `message` for
 * server errors). A connection that answered EMQ_EIO or EMQ_ETIMEOUT is
 * broken: close it and connect again.
 *
 * JSON values cross the API as jansson `json_t *`; who owns a reference is
 * stated on each function.
 */
#ifndef EMQ_H
#define EMQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes. The server's codes keep their wire names (EMQ_ELEASE is
 * "ELEASE"); see emq_code_name() and emq_code_from_name(). */
enum emq_code {
    EMQ_OK = 0,
/* Server error codes (protocol section 3), EMQ_EPROTO ... EMQ_ENOTFOUND,
 * from the one table (emq_errors.def, installed beside this file). */
#define EMQ_ERROR(name, summary, class) EMQ_E##name,
#include "emq_errors.def"
#undef EMQ_ERROR
    /* Library codes. */
    EMQ_ECLIENT = 100,     /* not a code: the first library code */
    EMQ_EIO = EMQ_ECLIENT, /* cannot connect, or the connection broke */
    EMQ_ETIMEOUT,          /* no reply within the timeout; connection unusable */
    EMQ_EBADREPLY,         /* the server sent a line the library cannot read */
    EMQ_EUSAGE,            /* a bad argument to a libemq function */
    EMQ_ENOMEM,            /* out of memory */
    EMQ_EINTR,             /* emq_interrupt() was called */
    EMQ_ESERVER,           /* a server error code this library does not know */
};

/* The wire name of a code ("ELEASE", "EIO", ...); "OK" for EMQ_OK. */
const char *emq_code_name(int code);

/* The code for a wire name; EMQ_ESERVER if unknown. */
int emq_code_from_name(const char *name);

/* How to reach the server. Zero-initialise and set what you need. */
struct emq_options {
    const char *host;      /* TCP host (IPv4/IPv6 literal or name); default "127.0.0.1" */
    int port;              /* TCP port; default 7711 */
    const char *unix_path; /* if set, connect to this unix socket instead of TCP */
    const char *token;     /* sent in hello when set */
    const char *name;      /* client name sent in hello (informational) */
    int timeout_ms;        /* connect and per-reply timeout; default 10000, <0: none */
    /* TLS (TCP only; "tls://HOST:PORT" in emq_parse_addr sets tls). The
     * server's certificate is verified against tls_ca (default: the
     * system's CAs) and must name tls_server_name (default: host, an IP
     * literal matching the certificate's IP addresses). */
    bool tls;                    /* speak TLS */
    const char *tls_ca;          /* PEM file of CAs to verify the server with */
    const char *tls_cert;        /* PEM client certificate, for mutual TLS */
    const char *tls_key;         /* its private key (default: in tls_cert's file) */
    const char *tls_server_name; /* SNI and the name to verify */
    bool tls_no_verify;          /* accept any server certificate (testing only) */
    char host_buf[256];          /* storage emq_parse_addr uses for the host it parses */
};

/* One connection. Opaque. */
struct emq;

/* Connect and say hello (protocol 1, token and name from opts). On success
 * *out is a new connection (free with emq_close). On failure *out is still
 * set when a connection object could be made, so emq_errmsg(*out) explains
 * the failure; emq_close() it all the same. */
int emq_connect(struct emq **out, const struct emq_options *opts);

/* Parse "HOST:PORT", "[V6]:PORT", "PORT", "tls://HOST:PORT" (which also
 * sets opts->tls; any other form leaves it as it was), or "unix:PATH" / a
 * path starting with '/' into opts: sets host (copied into opts->host_buf, so opts must
 * outlive its use) and port, or unix_path (pointing into addr); "PORT"
 * alone keeps opts->host. Other fields are untouched. EMQ_EUSAGE if
 * malformed (a bare IPv6 literal needs brackets). */
int emq_parse_addr(struct emq_options *opts, const char *addr);

/* The server opts points at, as emq_parse_addr reads it, with the defaults
 * filled in: "HOST:PORT", "[V6]:PORT" (after "tls://" with opts->tls), or the unix socket's path
 * (written "unix:PATH" when it does not start with '/'). For messages such as "connected to
 * 127.0.0.1:7711". Written into buf (truncated to size, NUL terminated when size > 0), which is
 * returned. */
const char *emq_format_addr(const struct emq_options *opts, char *buf, size_t size);

/* Say quit, close and free. Safe with NULL. On a working connection it
 * waits (at most 2 s, ignoring interrupts) for quit's reply, so every
 * request sent has been read by the server. Leases the connection holds
 * are released by the server (protocol 6.4). */
void emq_close(struct emq *c);

/* The message for the last failure on c ("" if none). Valid until the next
 * call on c. */
const char *emq_errmsg(const struct emq *c);

/* The last failure's code on c (EMQ_OK if the last call succeeded). */
int emq_errcode(const struct emq *c);

/* Make the current or next blocking call on c return EMQ_EINTR at once.
 * Async-signal-safe (one write(2) to a pipe): meant for SIGTERM/SIGINT
 * handlers, or another thread. The call that returns EMQ_EINTR consumes
 * the interrupt; later calls work normally. A request line is always
 * written whole, so the connection stays usable; but a request already
 * sent is abandoned, not cancelled: the server still executes it (a
 * `complete` may have completed) and the library skips its reply when it
 * comes. emq_interrupted() stays true once emq_interrupt was called. */
void emq_interrupt(struct emq *c);
bool emq_interrupted(const struct emq *c);

/* Send one request object (borrowed; "ref" is managed by the library and
 * must not be set) and wait for its reply. On EMQ_OK or a server error,
 * *reply (if not NULL) receives the whole reply object, a new reference the
 * caller must json_decref. Pushes that arrive meanwhile are queued for
 * emq_next_push / emq_stream_run. This is the escape hatch every typed call
 * below is built on. */
int emq_request(struct emq *c, json_t *request, json_t **reply);

/* Take the oldest push received on c (pushes that arrived during other
 * calls first, in arrival order), waiting up to timeout_ms (<0: forever)
 * for one. *push is a new reference the caller must json_decref, or NULL
 * when none came in time (then the result is EMQ_OK: waiting for a push
 * owes the server nothing, so a timeout does not break the connection). */
int emq_next_push(struct emq *c, json_t **push, int timeout_ms);

/* ---- Typed calls, one per op of protocol section 5 ---------------------
 *
 * All are blocking and return EMQ_OK or a code, as emq_request. Strings
 * are borrowed. Output parameters hold results only on EMQ_OK. Arguments
 * are checked by the server (a bad queue name is EMQ_EQUEUE, and so on);
 * the library only refuses NULL where a value is required (EMQ_EUSAGE). */

/* Room for any id the protocol allows (job and group ids are at most 67
 * bytes), with its NUL. */
#define EMQ_ID_SIZE 68

/* A job's state, as the protocol names it ("pending", ...). */
enum emq_state {
    EMQ_STATE_UNKNOWN = 0, /* a name this library does not know */
    EMQ_STATE_PENDING,
    EMQ_STATE_ACTIVE,
    EMQ_STATE_DELAYED,
    EMQ_STATE_DEAD,
    EMQ_STATE_COMPLETED,
};

/* The wire name of a state ("pending", ...; "unknown"). */
const char *emq_state_name(enum emq_state state);

/* The state for a wire name; EMQ_STATE_UNKNOWN if none. */
enum emq_state emq_state_from_name(const char *name);

/* A leased job (protocol 6.7), from emq_claim, emq_next_job or
 * emq_stream_run. Every pointer is owned by the struct; free the whole
 * with emq_job_free. The settle calls read only queue, job and lease, so
 * a caller that keeps just those may fill a zeroed struct on the stack. */
struct emq_job {
    char *queue;
    char *job;
    char *group;           /* NULL for an ungrouped (flat) job */
    char *lease;           /* the fencing token: send it back exactly */
    int attempt;           /* leases so far, this one included (1 on first delivery) */
    long long lease_until; /* deadline, ms on the backend's clock (advisory) */
    json_t *payload;       /* the payload (one reference owned by the job) */
    char *payload_text;    /* the payload as compact JSON text */
    /* CLOCK_MONOTONIC ms when the library read the job: a worker's own
     * lease timer starts here (lease_until is on the backend's clock). */
    long long received_ms;
};

/* Free a job from this library and everything it owns. Safe with NULL. */
void emq_job_free(struct emq_job *job);

/* Free an array of n jobs from emq_claim (the jobs and the array). */
void emq_jobs_free(struct emq_job **jobs, size_t n);

/* enqueue / enqueue_many item options. Zero-initialise: every field then
 * takes the daemon's default. */
struct emq_enqueue_opts {
    const char *job;    /* the job id (idempotency key); NULL: the daemon mints one */
    const char *group;  /* the group id; NULL: ungrouped (enqueue_many: the batch group) */
    long long delay_ms; /* > 0: the job starts delayed */
    int max_attempts;   /* 0: daemon default; > 0: that many; EMQ_ATTEMPTS_UNLIMITED */
};
#define EMQ_ATTEMPTS_UNLIMITED (-1)

/* The outcome of one admitted job. */
struct emq_enqueued {
    char job[EMQ_ID_SIZE]; /* the id, minted or given */
    bool duplicate;        /* true: a row with this id existed; nothing changed */
};

/* Admit one job to queue. payload is borrowed (any JSON value; not NULL).
 * opts may be NULL. out may be NULL. */
int emq_enqueue(struct emq *c, const char *queue, json_t *payload,
                const struct emq_enqueue_opts *opts, struct emq_enqueued *out);

/* One item of an enqueue_many batch: a payload (borrowed) and its options. */
struct emq_item {
    json_t *payload;
    struct emq_enqueue_opts opts;
};

/* One item's verdict in an enqueue_many reply. */
struct emq_item_result {
    int code; /* EMQ_OK, or the item's own error (EMQ_EKIND, EMQ_ETOOBIG, ...) */
    struct emq_enqueued enqueued; /* when code is EMQ_OK */
    char message[256];            /* when code is not EMQ_OK: the server's message (truncated) */
};

/* Admit n items to queue in one request (protocol 5.5: not a transaction;
 * every item gets its own verdict). group (may be NULL) is the default for
 * items without one. results (n entries, may be NULL) receives the
 * verdicts in input order. EMQ_OK even when some or all items failed. */
int emq_enqueue_many(struct emq *c, const char *queue, const char *group,
                     const struct emq_item *items, size_t n, struct emq_item_result *results);

/* claim options. Zero-initialise: count 1, the daemon's lease, no wait,
 * grouped work. */
struct emq_claim_opts {
    int count;    /* 0: 1 */
    int lease_ms; /* 0: the daemon's --lease-ms */
    int wait_ms;  /* > 0: park up to this long for work (extends the timeout) */
    bool flat;    /* true: ungrouped work only; false: grouped work only */
};

/* Lease up to opts->count jobs of queue. On EMQ_OK, *jobs is a new array of
 * *n jobs (possibly 0, then *jobs is NULL) to free with emq_jobs_free. */
int emq_claim(struct emq *c, const char *queue, const struct emq_claim_opts *opts,
              struct emq_job ***jobs, size_t *n);

/* Open (or re-credit) the stream of queue: the server pushes leased jobs,
 * never more than credit unsettled (0 stops pushes). lease_ms 0: the
 * daemon's default. flat as for claim. Receive the jobs with emq_next_job
 * or emq_stream_run; settle each with complete / fail / release. */
int emq_stream(struct emq *c, const char *queue, int credit, int lease_ms, bool flat);

/* The next pushed job, waiting up to timeout_ms (<0: forever). On EMQ_OK
 * *job is a new job (the caller frees it with emq_job_free) or NULL when
 * none came in time. Push kinds other than "job" are skipped. */
int emq_next_job(struct emq *c, struct emq_job **job, int timeout_ms);

/* Called by emq_stream_run for each pushed job. The job is borrowed: it is
 * freed when the callback returns (copy what must outlive it). Return 0
 * to go on, anything else to make emq_stream_run return that value. */
typedef int (*emq_job_cb)(struct emq *c, struct emq_job *job, void *arg);

/* Deliver pushed jobs to cb, in arrival order, until cb returns non-zero
 * (that value is returned) or a call fails (EMQ_EIO when the connection
 * drops, EMQ_EINTR after emq_interrupt). The callback may make any call on
 * c (complete, extend, ...); jobs pushed meanwhile wait their turn. */
int emq_stream_run(struct emq *c, emq_job_cb cb, void *arg);

/* Settle a lease as done (protocol 5.8). Reads job->queue, job, lease. */
int emq_complete(struct emq *c, const struct emq_job *job);

/* fail options. Zero-initialise: no error text, the daemon's backoff. */
struct emq_fail_opts {
    const char *error;  /* recorded on the row; NULL: "" */
    long long retry_ms; /* 0: backoff (6.2); > 0: retry after this; EMQ_RETRY_NOW */
    bool dead;          /* dead-letter now */
};
#define EMQ_RETRY_NOW (-1)

/* Settle a lease as failed (protocol 5.9). opts may be NULL. *state (may
 * be NULL) receives the job's new state: delayed, pending or dead. */
int emq_fail(struct emq *c, const struct emq_job *job, const struct emq_fail_opts *opts,
             enum emq_state *state);

/* Give a lease back unfinished (protocol 5.10), its attempt returned, so
 * a job given back (a worker stopping) is never dead-lettered by it.
 * error may be NULL (the daemon's default text). *state (may be NULL):
 * pending. */
int emq_release(struct emq *c, const struct emq_job *job, const char *error, enum emq_state *state);

/* Heartbeat a lease: its deadline becomes now + lease_ms (protocol 5.11).
 * On EMQ_OK job->lease_until is updated. */
int emq_extend(struct emq *c, struct emq_job *job, int lease_ms);

/* Set one group's concurrency ceiling; max 0 removes it (protocol 5.12).
 * emq_limit, emq_weight and emq_rate with group NULL set the queue-wide
 * default instead, for every group without its own (protocol 6.14). */
int emq_limit(struct emq *c, const char *queue, const char *group, int max);

/* Set one group's weight, its jobs per turn of the ring, 1..1000; weight
 * 0 removes it: the queue default, else 1, applies (protocol 5.26, 6.12). */
int emq_weight(struct emq *c, const char *queue, const char *group, int weight);

/* Set one group's rate: at most max leases per per_ms ms (max 1..1000000,
 * per_ms 1..86400000); max 0 removes it (protocol 5.27, 6.13). */
int emq_rate(struct emq *c, const char *queue, const char *group, int max, long long per_ms);

/* Set one group's cap: at most max_pending pending + delayed jobs in its
 * lane (1..1000000000); 0 removes it; group NULL sets the queue default
 * (protocol 5.32, 6.15). An enqueue into a full lane then fails with
 * EMQ_EFULL, whose message names the group and the cap. */
int emq_cap(struct emq *c, const char *queue, const char *group, long long max_pending);

/* Pause / resume one group (5.13, 5.14). *changed (may be NULL): whether
 * the group's paused flag changed. */
int emq_pause(struct emq *c, const char *queue, const char *group, bool *changed);
int emq_resume(struct emq *c, const char *queue, const char *group, bool *changed);

/* Move a pending job to group's lane (5.15). from (may be NULL, else
 * EMQ_ID_SIZE bytes) receives the source group, "" when it was ungrouped. */
int emq_reassign(struct emq *c, const char *queue, const char *job, const char *group, char *from);

/* Delete a group's pending backlog, or with group NULL the flat one
 * (5.16); *drained (may be NULL): how many. */
int emq_drain(struct emq *c, const char *queue, const char *group, long long *drained);

/* Pending jobs in group's lane, or with group NULL the flat set (5.17). */
int emq_depth(struct emq *c, const char *queue, const char *group, long long *depth);

/* Recover expired leases now, of group or (NULL) queue-wide (5.18). */
int emq_reap(struct emq *c, const char *queue, const char *group, long long *reaped);

/* Queue-wide counts (5.19). */
struct emq_stats {
    long long pending, active, delayed, dead;
    long long ring;   /* lanes serviceable now */
    long long groups; /* registered groups */
    long long paused; /* paused groups */
    long long flat;   /* pending in the flat set */
    /* The queue-wide defaults (6.14); 0: none. */
    long long def_limit, def_weight, def_rate_max, def_rate_per_ms;
    long long def_cap; /* the default cap (6.15); 0: none */
};
int emq_stats(struct emq *c, const char *queue, struct emq_stats *stats);

/* Where a group's applying setting comes from (5.20). */
enum emq_from {
    EMQ_FROM_NONE,  /* neither: no ceiling, weight 1, no rate, no cap */
    EMQ_FROM_GROUP, /* the group's own */
    EMQ_FROM_QUEUE, /* the queue-wide default */
};

/* One entry of a groups page (5.20): the settings that apply to the group
 * (its own, else the queue default) and where each comes from. */
struct emq_group_info {
    char group[EMQ_ID_SIZE];
    long long depth, active;
    long long limit;                 /* 0: no ceiling */
    long long weight;                /* jobs per turn (1 from a daemon without weights) */
    long long rate_max, rate_per_ms; /* its rate; 0 when it has none */
    bool paused;
    bool throttled; /* off the ring until its rate allows a lease */
    enum emq_from limit_from, weight_from, rate_from;
    long long delayed;      /* delayed jobs: with depth, what the cap counts */
    long long cap;          /* the cap that applies (6.15); 0: none */
    enum emq_from cap_from; /* where it comes from */
};

/* One page of the group registry (5.20). cursor NULL or "0" starts; count
 * 0 is the daemon's default page size. On EMQ_OK *groups is a new array of
 * *n entries (free() it; NULL when 0) and next (33 bytes) the cursor to
 * pass back, "0" when done. */
int emq_groups(struct emq *c, const char *queue, const char *cursor, int count,
               struct emq_group_info **groups, size_t *n, char next[33]);

/* One job's row (5.21): *row is a new reference to the reply's "job"
 * object (fields job, state, group, payload, attempts, max_attempts,
 * created_ms, lease_until, error, finished_ms as present). */
int emq_job_row(struct emq *c, const char *queue, const char *job, json_t **row);

/* The state of a job's row, a shortcut over emq_job_row. */
int emq_job_state(struct emq *c, const char *queue, const char *job, enum emq_state *state);

/* The dead set (5.22). list: *jobs is a new reference to the array of
 * {"job","group","attempts","error","died_ms"}, oldest death first, at
 * most limit (0: the daemon's default). retry / purge: job NULL takes the
 * oldest limit dead jobs, else that one job; *count (may be NULL) is how
 * many were moved. */
int emq_dead_list(struct emq *c, const char *queue, int limit, json_t **jobs);
int emq_dead_retry(struct emq *c, const char *queue, const char *job, int limit, long long *count);
int emq_dead_purge(struct emq *c, const char *queue, const char *job, int limit, long long *count);

/* Which page emq_peek reads (5.24); all zero: the first page of the
 * flat backlog, 20 jobs. state: "pending" (NULL), "active", "delayed" or
 * "dead"; group: a lane (pending) or a group's leases (active); cursor:
 * the previous page's next. */
struct emq_peek_opts {
    const char *group;
    const char *state;
    const char *cursor;
    int count; /* 1..1000; 0: the daemon's default */
};

/* Room for a page's cursor, with its NUL. */
#define EMQ_CURSOR_MAX 96

/* One page of jobs in service order, with their rows (5.24): *jobs is a
 * new reference to the array of rows (as emq_job_row's); next receives
 * the cursor of the next page, "" when no job follows. opts may be NULL. */
int emq_peek(struct emq *c, const char *queue, const struct emq_peek_opts *opts, json_t **jobs,
             char next[EMQ_CURSOR_MAX]);

/* Delete one pending or delayed job (5.25); *was (may be NULL) receives
 * the state it was in. EMQ_ESTATE for a job in another state. */
int emq_remove(struct emq *c, const char *queue, const char *job, enum emq_state *was);

/* Verify the queue's store invariants (5.23): *violations is a new
 * reference to an array of sentences, empty when all hold. */
int emq_check(struct emq *c, const char *queue, json_t **violations);

/* One page of the queue registry with each queue's totals (5.28). cursor
 * NULL or "0" starts; count 0 is the daemon's default page size. On
 * EMQ_OK *queues is a new reference to the array of
 * {"queue","pending","active","delayed","dead","groups","paused"} and
 * next (33 bytes) the cursor to pass back, "0" when done. */
int emq_queues(struct emq *c, const char *cursor, int count, json_t **queues, char next[33]);

/* One page of the daemon's connections, newest first (5.29): as
 * emq_queues, *clients the array of rows ({"id","addr","name","age_ms",
 * "idle_ms","self","authed","streams","parked","leases"}). */
int emq_clients(struct emq *c, const char *cursor, int count, json_t **clients, char next[33]);

/* One connection by id (5.29): *client is a new reference to its row
 * plus "held", the leases it holds (no tokens). EMQ_ENOTFOUND when the
 * daemon has no open connection of that id. */
int emq_client(struct emq *c, long long id, json_t **client);

/* Remove a queue that holds no job from the registry, the store and the
 * daemon (5.30). EMQ_ESTATE while it has jobs, or while the daemon's
 * connections use it. */
int emq_forget(struct emq *c, const char *queue);

/* Round trip to the server (5.2). */
int emq_ping(struct emq *c);

#ifdef __cplusplus
}
#endif

#endif
