/* pool: N async hiredis connections on one libuv loop that run the embedded
 * lane scripts (FCALL of the library lua_scripts.h holds, loaded again
 * when Redis has lost it) and plain
 * commands, with per-request deadlines, reconnect with backoff, and one
 * subscriber connection per node for sharded pub/sub.
 *
 * Everything happens on the loop's thread and nothing blocks it: Redis is
 * reached by IP literal or unix socket only, and every deadline is a
 * uv_timer_t of the pool's own (hiredis 0.14 has no async timeouts).
 * hiredis writes with write(2): the process must ignore SIGPIPE. */
#ifndef EMQ_POOL_H
#define EMQ_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "keys.h"
#include "lua_scripts.h"

/* The expected failures a reply callback sees. POOL_EUNAVAILABLE: the
 * request was written, and its connection was lost, its deadline passed
 * or the pool closed before the answer came: what it did is unknown (it
 * may even run later, see pool_fenced). POOL_ENOTSENT: it was never
 * written (no connection was ready, or it waited on one that went), so
 * it did not run. */
enum { POOL_EUNAVAILABLE = 1, POOL_ENOTSENT = 2 };

/* A Redis Cluster node to learn the slot map from: an IP literal. */
struct pool_seed {
    const char *host;
    int port;
};

/* The most masters a pool connects to on a cluster (each gets size
 * connections). */
#define POOL_NODES_MAX 32

/* How to reach Redis and how hard to try. Zero fields take the defaults.
 * With nseeds > 0 the pool is in cluster mode: host, port and unix_path
 * are ignored, db must be 0, and the pool learns the slot map from the
 * seeds, connects size connections to every master and sends each call
 * to the owner of its slot (pool.c: cluster routing). */
struct pool_config {
    const char *host;              /* an IP literal; default "127.0.0.1" */
    int port;                      /* default 6379 */
    const char *unix_path;         /* a unix socket, used instead of host:port when non-NULL */
    const char *password;          /* AUTH on every connect when non-NULL */
    int db;                        /* SELECT on every connect when > 0 */
    int size;                      /* command connections, >= 1 */
    uint64_t timeout_ms;           /* request and connect deadline; default 2000 */
    uint64_t backoff_min_ms;       /* first reconnect delay; default 50 */
    uint64_t backoff_max_ms;       /* the delay doubles up to this; default 2000 */
    const struct pool_seed *seeds; /* cluster mode: nseeds seed nodes (copied) */
    /* > 0: the reply of a call that may write (a script not shipped as
     * no-writes, pool_command_write) is delivered only once WAIT
     * replica_acks (timeout_ms / 2), sent right after it on its
     * connection, says that many replicas have its writes; fewer:
     * POOL_EUNAVAILABLE. Reads get no WAIT. */
    int replica_acks;
    int nseeds;
};

/* The pool; opaque. */
struct pool;

/* An ordered stream of requests: every request submitted with the same
 * route runs at Redis in the order it was submitted (a queue's calls, so
 * that one client connection is an ordered session, PROTOCOL.md 2.2). The
 * pool keeps a route on one connection while any of its requests is out
 * (a connection runs its commands in the order written); only with none
 * out may it move, to its home connection (chosen by the slot of its hash
 * tag, as Redis Cluster would) or, while that one is down, another. The
 * caller owns the struct and keeps it until every request submitted with
 * it has had its callback. */
struct pool_route {
    uint16_t slot;     /* CRC16 of the hash tag, mod 16384 */
    int conn;          /* the connection it is on, or -1 */
    uint32_t inflight; /* its requests whose callback has not run yet */
    uint64_t release;  /* the pool's last release of a held connection that resent one of its
                        * requests (pool.c: conn_release) */
};

/* A route for the keys of hash tag tag (len bytes: the text between the
 * braces of "emq:{q}:"). */
void pool_route_init(struct pool_route *rt, const char *tag, size_t len);

/* The Redis Cluster key slot of a hash tag: CRC16 (XMODEM) mod 16384. */
uint16_t pool_slot(const char *tag, size_t len);

/* The Redis Cluster key slot of a whole key (len bytes), as Redis finds
 * it: the slot of its hash tag (the text between the first '{' and the
 * first '}' after it) when that is not empty, else of the whole key. */
uint16_t pool_key_slot(const char *key, size_t len);

/* Runs exactly once per accepted request, never from inside the call that
 * submitted it. status 0: reply is the Redis reply (it may be
 * REDIS_REPLY_ERROR, e.g. a script's "ELEASE ..." error), valid only during
 * the callback. status POOL_EUNAVAILABLE or POOL_ENOTSENT: reply is NULL. */
typedef void pool_reply_cb(void *priv, int status, redisReply *reply);

/* Counters for metrics and tests. */
/* Upper bounds (microseconds) of the round-trip histogram's buckets; one
 * more bucket past the last counts the rest. */
#define POOL_RTT_BUCKETS 12
extern const uint64_t pool_rtt_bounds_us[POOL_RTT_BUCKETS];

struct pool_stats {
    uint64_t requests;   /* accepted requests */
    uint64_t failures;   /* callbacks that ran with POOL_EUNAVAILABLE */
    uint64_t reconnects; /* connection attempts after each connection's first */
    uint64_t recovered;  /* connections ready again after having been ready and lost */
    uint64_t reloaded;   /* script calls resent behind FUNCTION LOAD ("Function not found") */
    uint64_t fenced;     /* lost connections fenced with CLIENT KILL (pool_fenced) */
    uint64_t moved;      /* requests resent after MOVED (cluster) */
    uint64_t asked;      /* requests resent with ASKING after ASK (cluster) */
    uint64_t tryagain;   /* requests resent after TRYAGAIN (cluster, a slot half moved) */
    uint64_t unacked;    /* writing calls failed because WAIT saw too few replicas */
    uint64_t map_loads;  /* slot maps read (CLUSTER SLOTS answered) */
    int nodes;           /* servers served by: 1, or on a cluster the masters of the slot map */
    int connected;       /* ready command connections */
    int by_eval;         /* ready command connections running the scripts' fallback (no library) */
    int size;            /* command connections configured (on a cluster: size x nodes) */
    uint64_t inflight;   /* accepted requests whose callback has not run yet */
    /* Round trips (sent to answered) of the requests that got a reply:
     * a count per bucket (not cumulative), their number and sum. */
    uint64_t rtt_buckets[POOL_RTT_BUCKETS + 1];
    uint64_t rtt_count, rtt_sum_us;
};

/* Create a pool on loop and start connecting every connection; the pool
 * is up once one of them has authenticated and loaded the scripts (see
 * pool_on_state). Returns 0, or -EINVAL (size < 1, host not an IP
 * literal, path too long) or -ENOMEM, with nothing created. */
int pool_new(uv_loop_t *loop, const struct pool_config *cfg, struct pool **out);

/* Run script id: FCALL of its function with no KEYS (on a cluster, k's
 * ten names and its guard), ARGV = k->prefix then the argc arguments
 * argv/lens (copied; the caller's buffers may go away on return). When
 * Redis answers "Function not found" (the library flushed, or Redis
 * restarted without persistence), the same call is resent behind a
 * FUNCTION LOAD, with a fresh deadline, and that reply is delivered: the
 * caller never sees the missing library. Where Redis refuses the library
 * (maxmemory, an ACL) the call goes by EVALSHA of the script's fallback
 * form instead (scripts/embed_lua.py). With a route rt (NULL:
 * none) it runs in order with the route's other requests, across that
 * resend too.
 *
 * Returns 0 when accepted (cb runs exactly once, later), or -EINVAL,
 * -ENOMEM, -ESHUTDOWN (pool closing), and then cb never runs. With no
 * ready connection the request is accepted and cb runs with
 * POOL_EUNAVAILABLE on the next loop turn. */
int pool_script(struct pool *p, struct pool_route *rt, enum script_id id, const struct keys *k,
                int argc, const char **argv, const size_t *lens, pool_reply_cb *cb, void *priv);

/* Run one plain command given as argv/lens (copied). Returns and calls
 * back as pool_script does. With a route rt it runs in order with the
 * route's other requests; with rt NULL (as for pool_script) it goes to the
 * next ready connection, round-robin, ordered with nothing; on a cluster
 * to a connection of the owner of the slot of its first key (argv[1]). */
int pool_command(struct pool *p, struct pool_route *rt, int argc, const char **argv,
                 const size_t *lens, pool_reply_cb *cb, void *priv);

/* pool_command for a command that writes (the registry's SADD): with
 * replica-acks it is followed by WAIT like a script that writes, and
 * fails POOL_EUNAVAILABLE when too few replicas confirm it. pool_command
 * is for reads and commands that replicate nothing: no WAIT. */
int pool_command_write(struct pool *p, struct pool_route *rt, int argc, const char **argv,
                       const size_t *lens, pool_reply_cb *cb, void *priv);

/* Subscribe to channel (copied; sharded pub/sub, SSUBSCRIBE: the channel
 * is in its hash tag's slot) on the subscriber connection of the node
 * serving that slot, opened on first use, and subscribe again after every
 * reconnect and wherever the slot moves.
 * on_message runs for each message; msg is valid only during the call.
 * It also runs with msg NULL each time the subscription is (re)made: what
 * was published while it was down is lost, so the caller should look.
 * Returns 0, -EEXIST (already subscribed), -EINVAL, -ENOMEM or -ESHUTDOWN. */
int pool_subscribe(struct pool *p, const char *channel,
                   void (*on_message)(void *priv, const char *channel, const char *msg, size_t len),
                   void *priv);

/* Set the one callback told of up/down changes (NULL removes it): up=true
 * when the pool gets a ready connection after having none, false when it
 * loses the last one. It runs on a loop turn of its own, never inside a
 * pool call or another callback, and only when the state differs from
 * what it was last told. */
void pool_on_state(struct pool *p, void (*cb)(void *priv, bool up), void *priv);

/* True when at least one command connection is ready. */
bool pool_up(const struct pool *p);

/* Connections lost with requests written and unanswered, so far. A
 * request whose callback saw POOL_EUNAVAILABLE may have run at Redis
 * anyway, and may even run later: a lost connection's commands can still
 * be in Redis's socket buffer (a stalled server) or in a proxy. Read this
 * in that callback and, before relying on what Redis holds now (to undo
 * what the request may have done), wait for pool_fenced of it. */
uint64_t pool_losses(const struct pool *p);

/* True once every connection lost up to loss number epoch is fenced:
 * CLIENT KILL removed that client at Redis (or Redis said it was gone, or
 * the server has restarted since), so nothing it had been sent runs after
 * now. A server that refuses CLIENT KILL (an ACL) counts as fenced, with
 * a warning in the log: then it is best effort. */
bool pool_fenced(const struct pool *p, uint64_t epoch);

/* Fill out with the pool's counters. */
void pool_stats(const struct pool *p, struct pool_stats *out);

/* Bytes the pool holds for requests not yet answered: each one's
 * formatted command, kept until its callback, and hiredis's buffers (its
 * copy of the commands the socket has not taken yet, and the replies
 * being read). For the daemon's budget of buffered bytes. */
size_t pool_buffered(const struct pool *p);

/* How long (ms) the oldest command written to Redis and not yet answered
 * has been waiting; 0 when none is. A backend that answers keeps it near
 * its round trip; a stalled one lets it grow to the deadline. */
uint64_t pool_oldest_ms(const struct pool *p);

/* Why the last connection attempt or connection failed ("" if none). */
const char *pool_last_error(const struct pool *p);

/* Where the pool connects, for log lines: "IP:PORT", "[IPV6]:PORT" or
 * "unix:PATH". */
const char *pool_where(const struct pool *p);

/* Close the pool. New requests are refused (-ESHUTDOWN) from now on; on
 * the next loop turn every pending request's callback runs with
 * POOL_EUNAVAILABLE (replies that arrive first are delivered as usual) and
 * every handle is closed; the pool is then freed and done(priv) runs, after
 * which the loop has nothing of the pool's left. done may be NULL. */
void pool_close(struct pool *p, void (*done)(void *priv), void *priv);

#endif
