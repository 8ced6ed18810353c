/* server: the daemon's shared state and its parts' internal interfaces.
 * One libuv loop; listeners accept clients; each client's requests run as
 * pool calls and reply in request order; queues park consumers and push
 * work to them as it appears. */
#ifndef EMQ_SERVER_H
#define EMQ_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "errors.h"
#include "frame.h"
#include "hist.h"
#include "map.h"
#include "mint.h"
#include "pool.h"
#include "reply.h"
#include "request.h"
#include "store.h"

struct client;
struct queue;
struct req;
struct supervise;

/* Counters the daemon keeps about itself (stats, metrics, logs). */
struct server_counters {
    uint64_t connections, requests, errors;
    uint64_t enqueued, claimed, completed, failed, released, reaped, promoted;
};

/* Room for every op of the command tables (test_cmd checks the count). */
#define SERVER_OPS_MAX 48

/* Requests by op (cmd_at index; SERVER_OPS_MAX = no op: unparsable or
 * unknown) and by result (0 = ok, else the wire error code). */
struct server_results {
    uint64_t n[SERVER_OPS_MAX + 1][WIRE__END];
};

/* Jobs of one queue, counted as this daemon saw them move. */
struct queue_counters {
    uint64_t enqueued, claimed, completed, failed, dead, reaped;
};

/* How long the jobs of one queue took, as this daemon saw them: wait, from
 * becoming claimable to each lease it handed out (the lease script's
 * wait_ms, on the Redis clock), and run, from handing a lease out to its
 * holder settling it (complete or fail on the connection it went to, on
 * this daemon's monotonic clock). */
struct queue_latency {
    struct hist wait, run;
};

/* The daemon. */
struct server {
    uv_loop_t *loop;
    const struct config *cfg;
    uv_tcp_t tcp;
    uv_pipe_t unix_listener;
    bool tcp_open, unix_open;
    struct pool *pool;
    struct supervise *sup;
    struct map queues; /* name -> struct queue *, owned */
    struct client *clients;
    size_t nclients;
    struct client *dirty;   /* clients with bytes to write this turn */
    struct queue *batched;  /* queues with completions to send this turn */
    uv_check_t flush;       /* end of each loop turn: send coalesced work, write replies */
    uv_timer_t sweep;       /* forgets leases that have run out (client_sweep) */
    uv_idle_t resume;       /* runs client_resume_all while clients wait in resumed */
    struct client *resumed; /* clients whose paused reads may resume */
    uv_signal_t sigterm, sigint;
    bool stopping, listening;
    int exit_code;
    uv_timer_t drain_timer;
    int drain_ticks;
    void (*stop_done)(struct server *s); /* after the pool has closed */
    int (*ready)(struct server *s);      /* once listening; non-zero: it stopped emqd */
    struct mint mint;
    struct mint_rand rand;
    struct server_counters count;
    struct server_results results;
};

int server_init(struct server *s, uv_loop_t *loop, const struct config *cfg);
int server_listen(struct server *s);
void server_attach_pool(struct server *s, struct pool *p);
/* Stop accepting and handing out work, flush, close everything; the loop
 * then ends by itself. */
void server_stop(struct server *s);
void server_deinit(struct server *s);
/* Look up (or create) the daemon's state for a valid queue name. */
struct queue *server_queue(struct server *s, const char *name, size_t len);

/* One request, from its line to its reply. Replies leave in the order the
 * requests arrived; a request that finishes early waits for those before. */
struct req {
    struct req *next;
    struct client *c;
    json_t *root; /* the parsed request (owned) */
    json_t *ref;  /* borrowed from root */
    const struct cmd *cmd;
    struct queue *q; /* the "queue" argument's queue, if any */
    bool done;
    unsigned char err; /* the wire error it was answered with, 0 = ok */
    char *reply;       /* encoded reply line, when done out of order */
    size_t reply_len;
    int outstanding;     /* pool calls still to answer (enqueue_many, drain) */
    json_t *acc;         /* what a multi-call request gathers (owned) */
    uint64_t n;          /* a counter a multi-call request keeps */
    struct waiter *park; /* a stream to park once this reply is out */
};

/* A command: its name, argument spec, and handler. */
struct cmd {
    const char *name;
    const struct arg_spec *spec;
    void (*run)(struct req *r);
    unsigned flags;
};
enum {
    CMD_NOAUTH = 1u << 0, /* allowed before hello when a token is set */
    CMD_QUEUE = 1u << 1,  /* has a required "queue" argument */
    CMD_WORK = 1u << 2,   /* hands out work: refused once the daemon is stopping */
    /* runs in several backend calls: the connection's later lines wait
     * for its reply, so that they take effect after all of it */
    CMD_BARRIER = 1u << 3,
};

/* The command named name (len bytes), or NULL. */
const struct cmd *cmd_lookup(const char *name, size_t len);
/* The i-th command over all tables, or NULL past the last (for tests). */
const struct cmd *cmd_at(size_t i);

/* Finish a request (exactly once): ok with fields (stolen; may be NULL),
 * or an error. Safe after the client has gone (the reply is dropped). */
void req_ok(struct req *r, json_t *fields);
/* req_ok with one string field, written straight into the reply line (no
 * jansson object: complete's {"state":"completed"} is on the hot path). */
void req_ok_string(struct req *r, const char *key, const char *value);
void req_error(struct req *r, enum wire_error code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Finish from a pool reply that was an error or unavailable. */
void req_backend_error(struct req *r, int status, const redisReply *reply);
/* Finish with the error a store call ended with (st->code != 0). */
void req_store_error(struct req *r, const struct store_status *st);
/* Finish with a reply line already encoded (taken over from line). */
void req_ok_line(struct req *r, struct outbuf *line);
struct server *req_server(const struct req *r);

/* A connection. */
struct client {
    struct client *prev, *next;
    struct client *dirty_next;
    struct server *srv;
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    uint64_t id;
    char addr[64];
    struct frame frame;
    struct outbuf out;  /* bytes waiting for the next write */
    struct outbuf wbuf; /* bytes being written */
    uv_write_t write_req;
    bool writing, dirty, closing, quit, authed, reading, unix_socket, resume_queued;
    bool eof;        /* the peer sent its last byte (it may still read) */
    bool lines_left; /* complete lines read but not run yet (reads paused) */
    /* A request that runs in several backend calls (drain): the lines after
     * it wait until it is answered, so they see all of its effects. */
    struct req *barrier;
    struct client *resume_next; /* in the server's resumed list */
    int refs;                   /* requests and writes that still point here */
    struct req *head, *tail;
    size_t inflight;        /* requests not yet answered */
    size_t queued_bytes;    /* replies done but waiting behind an earlier one */
    struct map held;        /* "queue job" -> struct lease, jobs leased to us */
    struct waiter *waiters; /* this client's parked claims and streams */
    int auth_failures;
    uint64_t last_active;
};

int client_accept(struct server *s, uv_stream_t *listener);
/* Queue bytes for the client (written at the end of this loop turn). */
void client_send(struct client *c, const char *data, size_t len);
void client_close(struct client *c, const char *why);
/* Stop reading, answer parked claims, close once every reply is written. */
void client_shutdown(struct client *c);
void client_ref(struct client *c);
void client_unref(struct client *c);
/* Resume reading the clients whose requests in flight fell below the
 * limit, running the lines they had sent already. */
void client_resume_all(struct server *s);
void server_resume_cb(uv_idle_t *h);
/* Close the client if it has been idle past the idle timeout (now: uv_now). */
void client_idle_check(struct client *c, uint64_t now);
/* Write every dirty client's buffer (called from the flush handle). */
void client_flush_all(struct server *s);

/* A job leased to a client, so it can be released when the client goes. */
struct lease {
    struct queue *q;
    struct waiter *stream; /* the stream it was pushed on, or NULL */
    char lease[24];
    uint64_t expires;                             /* uv_now() after which Redis may reap it */
    uint64_t since_ns;                            /* uv_hrtime() when it was handed out */
    char key[BRAND_QUEUE_MAX + BRAND_ID_MAX + 2]; /* "queue job" */
    size_t klen;
};
void client_hold(struct client *c, struct queue *q, const char *job, size_t jlen, const char *lease,
                 uint64_t lease_ms, struct waiter *stream);
/* An extend succeeded: the lease lives lease_ms from now. */
void client_extend(struct client *c, struct queue *q, const char *job, size_t jlen,
                   uint64_t lease_ms);
/* Forget leases whose time has run out (now: uv_now). */
void client_sweep(struct client *c, uint64_t now);
/* The job is settled (or its lease is no longer ours): forget it, returning
 * a stream's credit. settled: the holder completed or failed it, so the
 * time it was held goes into the queue's run histogram. */
void client_unhold(struct client *c, struct queue *q, const char *job, size_t jlen, bool settled);

/* A consumer parked on a queue: a claim with wait_ms, or a stream. */
struct waiter {
    struct waiter *qprev, *qnext; /* in the queue's waiting list, when linked */
    struct waiter *cnext;         /* in the client's list */
    struct queue *q;
    struct client *c;
    bool flat, linked, stream;
    uint64_t lease_ms;
    /* claim */
    struct req *req;
    struct outbuf jobs; /* leased jobs gathered so far, encoded, comma-joined */
    size_t njobs, want;
    uv_timer_t timer;
    bool timer_on;
    /* stream */
    size_t credit, outstanding;
};

/* The daemon's state for one queue. */
struct queue {
    struct server *srv;
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
    /* completions gathered this loop turn, sent as one script call */
    struct req **batch;
    size_t nbatch, capbatch;
    struct queue *batch_next;
    bool batched;
    struct queue_counters count;
    struct queue_latency latency;
};

void queue_free(struct queue *q);
/* Start the queue's upkeep timer, subscribe to its wakes. */
void queue_start(struct queue *q);
/* Park / unpark a consumer; parking pumps at once. */
void queue_park(struct queue *q, struct waiter *w);
void queue_unpark(struct waiter *w);
/* Work may be available: claim for the parked consumers. */
void queue_pump(struct queue *q, bool flat);
/* An enqueue of a job of kind flat that is due now may ask the script to
 * lease it straight to a consumer parked here: queue_handoff_begin gives
 * the lease to ask for (0 = don't ask); every call that returned non-zero
 * is matched by one queue_handoff_end with the script's reply (NULL when
 * the call failed), which delivers the job if it was handed off. */
uint64_t queue_handoff_begin(struct queue *q, bool flat);
void queue_handoff_end(struct queue *q, bool flat, uint64_t lease_ms, redisReply *reply);
/* Park a claim that found nothing until work comes or wait_ms passes. */
int queue_wait_claim(struct queue *q, struct req *r, size_t count, uint64_t lease_ms, bool flat,
                     uint64_t wait_ms);
/* A job of this queue becomes due (delayed, or a lease runs out) in ms:
 * run the upkeep then at the latest, not only at its next regular pass. */
void queue_due_in(struct queue *q, uint64_t ms);
/* Add a completion (the request's job and lease) to this turn's batch. */
void queue_complete(struct queue *q, struct req *r);
void queue_flush_all(struct server *s);
/* Give leases back at once (a client closed): pairs is an array of strings
 * job, lease, ... (stolen). delivered false: the jobs never reached anyone
 * (their consumer went away while the claim was in flight), so their
 * attempt is given back and no error recorded. */
void queue_release(struct queue *q, json_t *pairs, const char *reason, bool delivered);

/* Fields per job of the claim replies emqd asks for: id, group, payload,
 * attempt, token, and wait_ms (lua/claim.lua with ARGV[4] '1'). A hand-off
 * (lua/enqueue.lua) answers the first five only; its job waited 0 ms. */
#define QUEUE_JOB_FIELDS 6

/* The leased-job view of a claim reply's first five fields (strings
 * borrowed from the reply), for the encoders in reply.h. */
void queue_job_view(const struct queue *q, redisReply **f, long long deadline, struct reply_job *j);
/* One job was leased to a consumer of this daemon: count it as claimed
 * and record its wait (wait_ms, from the lease script). */
void queue_leased(struct queue *q, long long wait_ms);
/* Append a claim reply's (job, lease) to release pairs (made if NULL). */
json_t *queue_pair_add(json_t *pairs, redisReply **f);

/* The queue's store, for a typed call (jobs.h, admin.h): the completions
 * gathered this turn are sent first, so the call runs after them. */
struct store_queue *queue_store(struct queue *q);
/* Run a lane script for a queue; argv are NUL-terminated strings. */
int queue_script(struct queue *q, enum script_id id, int argc, const char **argv, pool_reply_cb *cb,
                 void *priv);

void waiter_free(struct waiter *w);
/* The daemon is stopping: answer a parked claim now (with what it has),
 * or stop a stream. */
void queue_stop_waiter(struct waiter *w);

#endif
