/* pool_internal: what the pool's files share (see pool.h for the API).
 * pool.c holds requests, the idle handle and close; pool_sub.c pub/sub;
 * pool_new.c construction and queries; pool_conn.c each connection's lifecycle, its
 * timer and the libuv adapter under its hiredis context; pool_cluster.c
 * the slot map and redirects; pool_ack.c replica-acks; pool_fence.c
 * fences. Only those files include this. */
#ifndef EMQ_POOL_INTERNAL_H
#define EMQ_POOL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/async.h>
#include <uv.h>

#include "map.h"
#include "pool.h"

/* Where one connection is in its lifecycle (see pool_conn.c). */
enum conn_state {
    CONN_IDLE,       /* never started (a subscriber connection before its first subscribe) */
    CONN_WAIT,       /* down; the timer starts the next attempt */
    CONN_CONNECTING, /* connect(2) in flight; the timer is the connect deadline */
    CONN_SETUP,      /* AUTH, SELECT, FUNCTION LOAD in flight; the same deadline */
    CONN_READY,      /* serving; the timer watches the oldest request */
    CONN_FAILING,    /* the timer tears it down on the next turn */
    CONN_CLOSED,     /* the pool is closing */
};

/* A list of requests (oldest first) through their prev/next. */
struct pool_req_list {
    struct pool_req *first, *last;
};

/* How many times a script call is resent for want of its script. */
#define POOL_SCRIPT_RESENDS 3

/* One accepted request, from submission to its callback. It keeps its
 * formatted command (RESP), so that it can wait on a held connection and,
 * for a script, be resent after the library is loaded again. */
struct pool_req {
    /* In one list at a time, oldest first: its connection's in-flight
     * list, that connection's redo or held list, or the fail queue. */
    struct pool_req *prev, *next;
    struct pool *pool;
    struct pool_conn *conn;   /* where it was sent or waits; NULL on the fail queue */
    struct pool_route *route; /* the ordered stream it belongs to, or NULL */
    pool_reply_cb *cb;
    void *priv;
    uint64_t deadline; /* loop time in ms */
    uint64_t sent_ns;  /* uv_hrtime() when written, for the round-trip histogram */
    uint64_t first_ms; /* loop time when first written (TRYAGAIN retries stop a timeout on) */
    int script;        /* a script id, or -1 for a plain command */
    int slot;          /* cluster: a route-less command's key slot, or -1 */
    int target;        /* cluster: after MOVED or ASK, the node to resend it to, or -1 */
    int redirects;     /* cluster: MOVED and ASK followed so far */
    bool asking;       /* cluster: answered ASK, resent with ASKING before it */
    bool pinned;       /* sent on one connection (pool_command_on): never moved */
    bool writes;       /* it may write: replica-acks follows it with WAIT */
    /* replica-acks: the WAIT written after this script call (its priv is
     * this request), and this call's reply kept until WAIT answers. A
     * WAIT whose call went another way (failed, resent) is detached: its
     * priv is NULL. ack_missing: the WAIT could not be sent. */
    struct pool_req *ack_req;
    redisReply *ack_reply;
    bool ack_missing;
    /* A script call Redis refused for want of its script: resent at
     * most POOL_SCRIPT_RESENDS times (FCALL behind FUNCTION LOAD; where
     * the library will not load, EVALSHA, behind SCRIPT LOADs after
     * NOSCRIPT). */
    uint8_t resends;
    bool reload;   /* answered "Function not found": to be resent behind a FUNCTION LOAD */
    bool noscript; /* answered NOSCRIPT (by EVALSHA): to be resent behind SCRIPT LOADs */
    size_t len;    /* bytes in cmd */
    size_t tail;   /* script call: offset in cmd of the arguments after the function name */
    char cmd[];
};

/* One connection slot: the context it holds now and its requests. */
struct pool_conn {
    struct pool *pool;
    int node; /* the index of the node it connects to in pool->nodes (0 off a cluster) */
    redisAsyncContext *ac; /* NULL when down; hiredis owns the memory */
    enum conn_state state;
    bool pubsub;               /* a node's subscriber connection (pool_sub.c) */
    bool started;              /* an attempt was made before (for the reconnect count) */
    bool was_ready;            /* it has been ready before (for the recovered count) */
    int setup_step;            /* setup replies received so far */
    int setup_count;           /* setup commands sent */
    uint64_t backoff;          /* the current backoff ceiling, ms */
    uint64_t replies;          /* replies received, to see a read make progress */
    struct pool_req_list sent; /* written, awaiting their replies */
    /* After "Function not found" (FUNCTION FLUSH, a Redis restarted
     * without persistence), the connection is held: nothing more is
     * written until every request written before has answered; then
     * redo (the refused calls, behind one FUNCTION LOAD) and then held
     * (what was submitted meanwhile) go out, each in the order it was
     * sent, so the recovery does not reorder an ordered stream
     * (pool_route). */
    bool holding;
    struct pool_req_list redo, held;
    /* The release (pool.releases) in which this connection last wrote a
     * FUNCTION LOAD ahead of a refused call: one load per connection per
     * release, however many calls it resends. */
    uint64_t loaded_in;
    /* Redis would not load the library on this connection (OOM, an ACL):
     * script calls go by EVALSHA of the fallback scripts, and a FUNCTION
     * LOAD is tried again after 1 s, then after twice as long each time
     * it is refused, up to 16 s (load_tried_ms: loop time of the last
     * one; load_refusals: refusals in a row), until one succeeds
     * (pool.c:pool_req_write). */
    bool by_eval;
    uint64_t load_tried_ms;
    unsigned load_refusals;
    /* by_eval: the fallback scripts were SCRIPT LOADed on this connection
     * and no NOSCRIPT has come back since. */
    bool scripts_cached;
    /* Cluster: a request of redo answered TRYAGAIN (its slot is half
     * moved): the release waits for the retry timer (pool_cluster.c). */
    bool retry_later;
    uv_timer_t timer;
    /* Who this connection is at Redis (CLIENT ID and the server's run_id,
     * asked in setup), so that a lost one can be fenced (pool_fence.c).
     * client_id 0: unknown (the server refused to say). */
    long long client_id;
    char run_id[41];
    int step_client_id, step_run_id; /* their setup steps, or -1 */
    bool loss_noted;                 /* its fence is recorded (once per context) */
};

/* A command connection lost while requests written on it were unanswered:
 * Redis may still run them (it had them in its socket buffer, or a proxy
 * still holds them), so until CLIENT KILL has removed that client, nobody
 * may assume what they did is all there is (pool_fenced). */
struct pool_fence {
    struct pool_fence *next;
    struct pool *pool;
    uint64_t epoch;      /* the pool's loss count once this one was counted */
    long long client_id; /* the lost connection's CLIENT ID */
    int node;            /* the node it was a client of */
    char run_id[41];     /* the Redis process it was a client of */
    bool inflight;       /* its CLIENT KILL is out */
};

/* A Redis server the pool connects to: the one server, or on a cluster
 * one node (a master of the slot map, or a seed). Its command connections
 * are conns[index * size ...] (pool_cluster.c). */
struct pool_node {
    char host[46]; /* an IP literal (INET6_ADDRSTRLEN) */
    int port;
    bool mapped; /* it owns slots in the last slot map */
};

/* One channel subscription (sharded: SSUBSCRIBE), placed on the
 * subscriber connection of its slot's owner and placed again on every
 * reconnect and map change (pool_sub.c). */
struct pool_sub {
    struct pool_sub *next;
    void (*cb)(void *priv, const char *channel, const char *msg, size_t len);
    void *priv;
    int node;       /* the node whose subscriber connection it was sent on, or -1 */
    uint16_t slot;  /* its channel's slot (the queue's) */
    bool confirmed; /* that node answered "ssubscribe" */
    size_t len;
    char channel[];
};

/* The pool: its settings, its connections, and what waits for the idle
 * handle. */
struct pool {
    uv_loop_t *loop;
    char *host, *unix_path, *password;
    int port, db, size;
    uint64_t timeout, backoff_min, backoff_max;
    int replica_acks; /* WAIT for this many replicas after each script call (0: none) */
    /* size command connections per node (nodes_cap of them), then one
     * subscriber connection per node (pool_ps); the first nnodes * size
     * command connections and nnodes subscriber ones are in use. */
    struct pool_conn *conns;
    struct pool_node *nodes; /* nnodes in use, of nodes_cap (1 off a cluster) */
    int nnodes, nodes_cap;
    /* Cluster mode (pool_cluster.c): the slot map (each slot's node index,
     * POOL_NO_NODE when unknown), the seeds it is first read from, and its
     * refresh. */
    bool cluster;
    bool map_known;          /* a slot map has been read */
    bool map_inflight;       /* a CLUSTER SLOTS is out */
    bool map_stale;          /* a MOVED or a lost node: read it again soon */
    bool map_refused_logged; /* CLUSTER SLOTS refused: said once */
    uint8_t *slot_node;
    struct pool_node *seeds;
    int nseeds, seed_next;
    uint64_t map_read_ms; /* loop time of the last map read */
    uv_timer_t map_timer;
    uv_timer_t retry_timer; /* releases the connections held for TRYAGAIN */
    uint64_t releases;      /* held connections released so far (pool_route.release) */
    int ready;              /* READY command connections */
    int cursor;             /* round-robin position */
    bool notified_up;       /* what on_state was last told */
    bool closing;
    bool closed; /* handles are being closed; free when open_handles is 0 */
    int open_handles;
    struct pool_req_list failing; /* requests to fail on the next turn */
    struct pool_sub *subs;
    struct map sub_names; /* channel -> its pool_sub */
    uv_idle_t idle;
    uv_idle_t flush;               /* writes the commands queued this turn */
    struct pool_poll *flush_first; /* contexts with commands to write */
    void (*state_cb)(void *priv, bool up);
    void *state_priv;
    void (*done)(void *priv);
    void *done_priv;
    uint64_t rng;
    uint64_t losses;           /* connections lost with requests unanswered */
    struct pool_fence *fences; /* those not fenced yet, oldest first */
    bool fence_refused_logged; /* CLIENT KILL refused: said once */
    size_t held_bytes;         /* the commands of accepted requests, kept until their callback */
    struct pool_stats stats;
    char error[128];          /* the last failure, as logged */
    char where[128];          /* the address, for log lines: IP:PORT or unix:PATH */
    uint64_t error_logged_ms; /* loop time the last failure was logged */
    uint64_t errors_unlogged; /* failures since then */
};

/* A failure that repeats is logged again this often while it lasts. */
#define POOL_LOG_EVERY_MS 10000

/* A slot no node is known to serve. */
#define POOL_NO_NODE 0xff

/* MOVED and ASK followed for one request before its error is delivered. */
#define POOL_REDIRECTS_MAX 5

/* ---- pool_cluster.c ------------------------------------------------------ */

/* Cluster mode: set up the slot map's memory, the seeds and the first
 * node (seed 0) and its refresh timer. 0 or -ENOMEM. */
int pool_cluster_init(struct pool *p, const struct pool_config *cfg);

/* Free what pool_cluster_init allocated. */
void pool_cluster_free(struct pool *p);

/* A command connection of node (its home for slot, else any ready one),
 * or while node is connecting its home, where a request waits; NULL when
 * node is unknown or every connection of it is down. */
struct pool_conn *pool_node_pick(struct pool *p, int node, uint16_t slot);

/* c (cluster mode) became ready: read the slot map if none is known. */
void pool_cluster_conn_ready(struct pool_conn *c);

/* c (cluster mode) went down: the map may have changed (a failover). */
void pool_cluster_conn_lost(struct pool_conn *c);

/* What pool_cluster_redirect made of a reply. */
enum pool_redirect {
    POOL_REDIRECT_NONE,  /* deliver the reply */
    POOL_REDIRECT_NOW,   /* resend r to r->target when its connection is released */
    POOL_REDIRECT_LATER, /* the same, after a short wait (TRYAGAIN) */
};

/* reply (an error, to r sent on a connection of node) on a cluster is
 * "MOVED slot ip:port" or "ASK slot ip:port": set r->target (adding the
 * node if new) and r->asking, and for MOVED update the map and have it
 * read again; "TRYAGAIN": r->target is node again, after a wait, until a
 * request timeout after r was first sent. NONE for any other reply, or
 * when the redirect cannot be followed (r's error is then delivered). */
enum pool_redirect pool_cluster_redirect(struct pool *p, struct pool_req *r, int node,
                                         const redisReply *reply);

/* c holds requests that answered TRYAGAIN and nothing it wrote is
 * unanswered: release it after a short wait. */
void pool_cluster_retry_soon(struct pool_conn *c);

/* Up, for on_state: a ready connection and, on a cluster, a slot map. */
bool pool_is_up(const struct pool *p);

/* ---- pool_fence.c -------------------------------------------------------- */

/* c is going down with a request written on it and unanswered (written
 * true), or maybe (its in-flight list decides): count the loss and record
 * its fence. Once per context; nothing for a connection whose CLIENT ID is
 * unknown. Call before the requests' callbacks run, so that they see the
 * loss in pool_losses. */
void pool_fence_note(struct pool_conn *c, bool written);

/* Send CLIENT KILL for every fence not yet out, on a ready connection.
 * Called when a connection becomes ready and from the idle handle after a
 * fence is noted (never from inside the lost connection's callbacks). */
void pool_fence_kick(struct pool *p);

/* Free every fence (the pool is being freed). */
void pool_fence_free_all(struct pool *p);

/* Send the plain command argv on c itself (held there if c is held);
 * counted and called back as pool_command's. 0 or -ENOMEM. */
int pool_command_on(struct pool_conn *c, int argc, const char **argv, const size_t *lens,
                    pool_reply_cb *cb, void *priv);

/* The next ready command connection, round-robin, or NULL. */
struct pool_conn *pool_pick(struct pool *p);

/* The command connections in use. */
static inline int pool_nconn(const struct pool *p)
{
    return p->nnodes * p->size;
}

/* Node's subscriber connection (initialised once the node is known). */
static inline struct pool_conn *pool_ps(const struct pool *p, int node)
{
    return &p->conns[p->nodes_cap * p->size + node];
}

/* ---- pool_ack.c ---------------------------------------------------------- */

/* Write WAIT replica_acks right after script call r on c (r->ack_req). */
void pool_ack_write(struct pool_conn *c, struct pool_req *r);

/* r's reply (not an error) on a pool with replica-acks: keep it until its
 * WAIT answers (true), or deliver it now (false); true also when r was
 * failed here (its WAIT could not be sent, or the copy failed). */
bool pool_ack_hold(struct pool_req *r, const redisReply *reply);

/* ---- pool_conn.c: the library of lane scripts (lua_scripts.h) ---------- */

/* Whether Redis error text err says the function called does not exist
 * (its library was flushed, or Redis restarted without persistence). */
bool pool_function_missing(const char *err);

/* Whether a FUNCTION LOAD reply leaves the library loaded: loaded now, or
 * already there (loaded by another connection or daemon of this build). */
bool pool_library_loaded(const redisReply *reply);

/* The callback of a FUNCTION LOAD written after setup (ahead of resent
 * calls, or to leave c->by_eval; privdata is the connection): a load sets
 * c->by_eval false, a refusal sets it (and logs, once per change). The
 * calls written behind it carry on either way: a call that finds no
 * library is held and resent, by then through the fallback. */
void pool_library_load_cb(redisAsyncContext *ac, void *rep, void *privdata);

/* Record on c the reply to a FUNCTION LOAD (setup or later): whether the
 * library is loaded, else c->by_eval. */
void pool_library_reply(struct pool_conn *c, const redisReply *reply);

/* r is to be written again ("Function not found", a redirect): the WAIT written after
 * it no longer speaks for it; the next write sends another. */
void pool_ack_detach(struct pool_req *r);

/* ---- pool.c: requests, for the other pool files -------------------------- */

/* A plain command as a request of p (not yet accepted), or NULL. */
struct pool_req *pool_req_new_command(struct pool *p, int argc, const char **argv,
                                      const size_t *lens, pool_reply_cb *cb, void *priv);

/* Count r in: accepted, in flight until pool_req_finish, its bytes held. */
void pool_req_accept(struct pool *p, const struct pool_req *r);

/* Write r on c; 0, or -1 when hiredis refused it (c is then failing). */
int pool_req_write(struct pool_conn *c, struct pool_req *r);

/* Fail r on the next turn with POOL_ENOTSENT. */
void pool_req_fail_later(struct pool *p, struct pool_req *r);

/* Deliver r's outcome (reply, or with none the failure status) and free r. */
void pool_req_finish(struct pool_req *r, redisReply *reply, int failure);

/* ---- pool_new.c ---------------------------------------------------------- */

/* Free p and everything it owns (its handles must be closed already, or
 * never have been opened). */
void pool_free(struct pool *p);

/* ---- pool_conn.c --------------------------------------------------------- */

struct pool_poll;

/* The flush idle handle's callback: write every queued context's commands
 * (see the adapter in pool_conn.c). */
void pool_flush_cb(uv_idle_t *h);

/* Initialise c (its timer, its node) as connection index i of p. */
void pool_conn_init(struct pool *p, struct pool_conn *c, int node);

/* Start one connection attempt on c; on an immediate failure c waits a
 * backoff delay and tries again. */
void pool_conn_start(struct pool_conn *c);

/* hiredis is freeing ac (a NULL reply, a failed connect, or its disconnect
 * callback): if ac is c's current context, record why and put c down to
 * retry after a backoff. Safe to call from inside a hiredis callback. */
void pool_conn_gone(struct pool_conn *c, const redisAsyncContext *ac, const char *what);

/* Tear c's context down now, failing its requests. Only from the pool's
 * own timer or idle callbacks: redisAsyncFree must not run inside hiredis. */
void pool_conn_kill(struct pool_conn *c);

/* Take c out of rotation and tear it down on the next loop turn; for use
 * inside a hiredis callback or when a send on c failed. */
void pool_conn_fail_soon(struct pool_conn *c);

/* Start the deadline watch over c's requests, one request timeout from
 * now, unless c's timer is already running. */
void pool_conn_watch(struct pool_conn *c);

/* ---- pool.c -------------------------------------------------------------- */

/* Run p's idle handle on the next loop turn (queued failures, an up/down
 * notice, the close), unless p's handles are already closing. */
void pool_kick(struct pool *p);

/* One of p's handles has closed: once the pool is closed and none is left
 * open, free the pool and run its done callback. */
void pool_maybe_done(struct pool *p);

/* ---- pool_sub.c ---------------------------------------------------------- */

/* Place every subscription on its slot owner's subscriber connection
 * (after a map change, when a subscriber connection became ready, and on
 * the map timer: a refused or dropped one is placed again). */
void pool_sub_sync(struct pool *p);

/* Subscriber connection c is down: its subscriptions are nowhere. */
void pool_sub_conn_lost(struct pool_conn *c);

/* Raw replies: read what subscriber connection c's socket has and
 * handle every reply in it (not through hiredis's callbacks, which
 * cannot take SSUBSCRIBE's pushes). */
void pool_sub_read(struct pool_conn *c);

/* Free every subscription (the pool is being freed). */
void pool_sub_free_all(struct pool *p);

/* ---- pool_conn.c: for pool_sub.c ----------------------------------------- */

/* Record and log why c failed (rate-limited, see pool_conn.c). */
void pool_set_error(const struct pool_conn *c, const char *what, const char *detail);

/* c became ready while requests waited on it: send them. */
void pool_conn_release_waiting(struct pool_conn *c);

/* c is down: the requests held on it (redo and held, never written or to
 * be written again) are failed on the next turn, and c holds no more. */
void pool_conn_fail_held(struct pool_conn *c);

#endif
