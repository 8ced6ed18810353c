/* The pool against a real redis-server: scripts and commands round trip,
 * pipelining keeps per-connection order, a flushed library is absorbed, a dead,
 * stopped or restarted backend fails requests by their deadline and comes
 * back, pub/sub resubscribes, and closing answers every request once.
 * Every test runs its own loop and ends with uv_loop_close() == 0. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "proxy.h"
#include "redis_server.h"
#include "loop_wait.h"
#include "wait.h"

/* One request's outcome, filled by reply_cb. */
struct call {
    int calls;
    int status;
    int type;
    long long integer;
    char str[64];
    uint64_t sent_ms, done_ms; /* by the loop's clock, the one deadlines run on */
    uint64_t seq;              /* the order callbacks ran in */
};

/* The world of one test: its loop, its redis-server, its pool. */
static struct {
    uv_loop_t loop;
    uv_timer_t tick;
    struct redis_server rs;
    struct pool *pool;
    int ups, downs;
    int closed;
    bool in_submit;
    int reentered;
    uint64_t seq;
} w;

/* The loop's clock: the pool stamps a request's deadline with it. */
static uint64_t loop_ms(void)
{
    return uv_now(&w.loop);
}

/* Run the loop until cond holds or the hang guard passes. */
#define RUN_UNTIL(cond) LOOP_RUN_UNTIL(&w.loop, &w.tick, cond)

/* An INFO integer of the test's redis-server, on a connection of its own
 * (the pool's loop need not run meanwhile). */
static long long redis_info(const char *section, const char *key)
{
    redisContext *rc = redis_server_connect(&w.rs);
    cr_assert_not_null(rc);
    long long v = redis_info_int(rc, section, key);
    redisFree(rc);
    return v;
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    memset(&w, 0, sizeof(w));
    cr_assert_eq(redis_server_start(&w.rs, NULL), 0, "cannot start redis-server");
    cr_assert_eq(uv_loop_init(&w.loop), 0);
    uv_timer_init(&w.loop, &w.tick);
}

static void teardown(void)
{
    if (w.rs.pid > 0)
        kill(w.rs.pid, SIGCONT);
    redis_server_stop(&w.rs);
}

TestSuite(pool, .init = setup, .fini = teardown, .timeout = 120);

static void state_cb(void *priv, bool up)
{
    (void)priv;
    if (up)
        w.ups++;
    else
        w.downs++;
}

static void reply_cb(void *priv, int status, redisReply *reply)
{
    struct call *c = priv;

    if (w.in_submit)
        w.reentered++;
    c->calls++;
    c->seq = ++w.seq;
    c->status = status;
    c->done_ms = loop_ms();
    c->type = reply != NULL ? reply->type : -1;
    if (reply != NULL && reply->type == REDIS_REPLY_INTEGER)
        c->integer = reply->integer;
    if (reply != NULL && reply->str != NULL)
        snprintf(c->str, sizeof(c->str), "%.*s", (int)reply->len, reply->str);
}

static struct pool_config config(int size, uint64_t timeout_ms)
{
    return (struct pool_config){.host = "127.0.0.1",
                                .port = w.rs.port,
                                .size = size,
                                .timeout_ms = timeout_ms,
                                .backoff_min_ms = 20,
                                .backoff_max_ms = 200};
}

/* A pool on w.loop, waited on until all its connections are ready. */
static void open_pool(const struct pool_config *cfg)
{
    cr_assert_eq(pool_new(&w.loop, cfg, &w.pool), 0);
    pool_on_state(w.pool, state_cb, NULL);
    struct pool_stats st = {0};
    RUN_UNTIL((pool_stats(w.pool, &st), st.connected == cfg->size));
    cr_assert_eq(st.connected, cfg->size, "pool never came up: %s", pool_last_error(w.pool));
    cr_assert(pool_up(w.pool));
    RUN_UNTIL(w.ups == 1);
    cr_assert_eq(w.ups, 1, "on_state(up) fires once");
}

static void done_cb(void *priv)
{
    (void)priv;
    w.closed++;
}

/* Close the pool and the loop; the loop must have nothing left. */
static void finish(void)
{
    if (w.pool != NULL && w.closed == 0)
        pool_close(w.pool, done_cb, NULL);
    RUN_UNTIL(w.closed == 1);
    cr_assert_eq(w.closed, w.pool != NULL ? 1 : 0, "done runs once");
    uv_close((uv_handle_t *)&w.tick, NULL);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&w.loop), 0, "the pool left a handle open");
}

static int command(struct call *c, const char *a0, const char *a1, const char *a2)
{
    const char *argv[3] = {a0, a1, a2};
    int argc = a2 != NULL ? 3 : a1 != NULL ? 2 : 1;

    c->sent_ms = loop_ms();
    w.in_submit = true;
    int rc = pool_command(w.pool, NULL, argc, argv, NULL, reply_cb, c);
    w.in_submit = false;
    return rc;
}

static int depth(struct call *c, const struct keys *k, const char *group)
{
    const char *argv[1] = {group};
    size_t lens[1] = {strlen(group)};

    c->sent_ms = loop_ms();
    w.in_submit = true;
    int rc = pool_script(w.pool, NULL, SCRIPT_DEPTH, k, 1, argv, lens, reply_cb, c);
    w.in_submit = false;
    return rc;
}

Test(pool, script_call_round_trip)
{
    struct pool_config cfg = config(2, 2000);
    struct keys k;
    struct call ok = {0}, bad = {0};

    open_pool(&cfg);
    cr_assert_eq(keys_init(&k, "q", 1), 0);
    cr_assert_eq(depth(&ok, &k, ""), 0);
    cr_assert_eq(depth(&bad, &k, "not a group"), 0);
    RUN_UNTIL(ok.calls && bad.calls);
    cr_assert_eq(ok.calls, 1);
    cr_assert_eq(ok.status, 0);
    cr_assert_eq(ok.type, REDIS_REPLY_INTEGER);
    cr_assert_eq(ok.integer, 0);
    cr_assert_eq(bad.status, 0, "a script's error is a reply, not an outage");
    cr_assert_eq(bad.type, REDIS_REPLY_ERROR);
    cr_assert(strncmp(bad.str, "EBRAND", 6) == 0, "got %s", bad.str);
    cr_assert_eq(w.reentered, 0);
    finish();
}

/* True once m's INFO replication shows a replica online (synced). */
static bool replica_online(redisContext *m)
{
    redisReply *r = redisCommand(m, "INFO replication");
    bool online = r != NULL && r->type == REDIS_REPLY_STRING && strstr(r->str, "state=online");
    freeReplyObject(r);
    return online;
}

/* pause.lua on group g of k: a script that writes. */
static int pause_group(struct call *c, const struct keys *k, const char *group)
{
    const char *argv[1] = {group};
    size_t lens[1] = {strlen(group)};

    c->sent_ms = loop_ms();
    return pool_script(w.pool, NULL, SCRIPT_PAUSE, k, 1, argv, lens, reply_cb, c);
}

/* replica-acks: a writing script call's reply is delivered only once WAIT
 * says that many replicas have it. A lone Redis has none: the call fails
 * POOL_EUNAVAILABLE (its WAIT timed out with 0); once a replica is
 * attached and in sync, the same call answers. */
Test(pool, replica_acks_deliver_a_reply_only_once_a_replica_has_it)
{
    struct pool_config cfg = config(1, 400);
    cfg.replica_acks = 1;
    struct keys k;
    struct call alone = {0}, synced = {0};
    struct pool_stats st;

    open_pool(&cfg);
    cr_assert_eq(keys_init(&k, "q", 1), 0);
    cr_assert_eq(pause_group(&alone, &k, "GRPa"), 0);
    RUN_UNTIL(alone.calls);
    cr_assert_eq(alone.status, POOL_EUNAVAILABLE, "no replica confirmed it");
    pool_stats(w.pool, &st);
    cr_assert_eq(st.unacked, 1);

    char port[16];
    snprintf(port, sizeof(port), "%d", w.rs.port);
    const char *extra[] = {"--replicaof", "127.0.0.1", port, NULL};
    struct redis_server replica;
    cr_assert_eq(redis_server_start(&replica, extra), 0, "cannot start the replica");
    redisContext *m = redis_server_connect(&w.rs);
    cr_assert_not_null(m);
    await(replica_online(m), "the replica to be in sync");
    redisFree(m);
    uv_update_time(&w.loop); /* the loop did not run while the test waited */
    cr_assert_eq(pause_group(&synced, &k, "GRPa"), 0);
    RUN_UNTIL(synced.calls);
    cr_assert_eq(synced.status, 0, "the replica confirmed it (status %d)", synced.status);
    cr_assert_neq(synced.type, REDIS_REPLY_ERROR, "pause answered %s", synced.str);
    pool_stats(w.pool, &st);
    cr_assert_eq(st.unacked, 1);
    finish();
    redis_server_stop(&replica);
}

/* replica-acks waits only after calls that may write. On a lone Redis
 * (no replica: every WAIT answers 0) reads (the no-writes scripts, a
 * plain pool_command) answer at once with no WAIT sent, while a plain
 * write sent with pool_command_write (the registry's SADD) is followed by
 * WAIT and fails, though the master ran it. Pipelined on one connection,
 * so the reads also show they do not wait behind the write's WAIT. */
Test(pool, replica_acks_wait_after_writes_only)
{
    struct pool_config cfg = config(1, 2000);
    cfg.replica_acks = 1;
    struct keys k;
    struct call d = {0}, st_call = {0}, sadd = {0}, card = {0};
    struct pool_stats st;
    const char *add[3] = {"SADD", "emq:test:set", "m"};

    open_pool(&cfg);
    cr_assert_eq(keys_init(&k, "q", 1), 0);
    long long before = redis_info("commandstats", "cmdstat_wait:calls=");
    cr_assert_eq(depth(&d, &k, ""), 0);
    cr_assert_eq(pool_script(w.pool, NULL, SCRIPT_STATS, &k, 0, NULL, NULL, reply_cb, &st_call), 0);
    cr_assert_eq(command(&card, "SCARD", "emq:test:set", NULL), 0);
    RUN_UNTIL(d.calls && st_call.calls && card.calls);
    cr_assert_eq(d.status, 0, "depth is a read: no WAIT to fail it (status %d)", d.status);
    cr_assert_eq(d.type, REDIS_REPLY_INTEGER);
    cr_assert_eq(st_call.status, 0, "stats is a read (status %d)", st_call.status);
    cr_assert_eq(st_call.type, REDIS_REPLY_ARRAY);
    cr_assert_eq(card.status, 0, "a plain pool_command gets no WAIT");
    cr_assert_eq(redis_info("commandstats", "cmdstat_wait:calls="), before, "no WAIT after a read");

    cr_assert_eq(pool_command_write(w.pool, NULL, 3, add, NULL, reply_cb, &sadd), 0);
    RUN_UNTIL(sadd.calls);
    cr_assert_eq(sadd.status, POOL_EUNAVAILABLE, "the SADD waited for a replica (status %d)",
                 sadd.status);
    cr_assert_eq(redis_info("commandstats", "cmdstat_wait:calls="), before + 1,
                 "one WAIT, after the SADD");
    pool_stats(w.pool, &st);
    cr_assert_eq(st.unacked, 1);
    struct call member = {0};
    cr_assert_eq(command(&member, "SISMEMBER", "emq:test:set", "m"), 0);
    RUN_UNTIL(member.calls);
    cr_assert_eq(member.integer, 1, "the master ran it; only the confirmation is missing");
    finish();
}

/* SET key to the n bytes of value through the pool, then STRLEN it:
 * asserts both answered OK and returns the length Redis holds. */
static long long set_then_strlen(const char *key, const char *value, size_t n)
{
    struct call set = {0}, len = {0};
    const char *argv[3] = {"SET", key, value};
    size_t lens[3] = {3, strlen(key), n};

    cr_assert_eq(pool_command(w.pool, NULL, 3, argv, lens, reply_cb, &set), 0);
    cr_assert_eq(command(&len, "STRLEN", key, NULL), 0);
    RUN_UNTIL(len.calls);
    cr_assert_eq(set.status, 0);
    cr_assert_str_eq(set.str, "OK");
    cr_assert_eq(len.status, 0);
    return len.integer;
}

Test(pool, plain_command_is_binary_safe)
{
    struct pool_config cfg = config(1, 2000);
    const char *argv[1] = {"PING"};
    size_t lens[1] = {4};
    struct call none = {0};

    open_pool(&cfg);
    cr_assert_eq(set_then_strlen("emq:test:bin", "a\0b", 3), 3);
    cr_assert_eq(pool_command(w.pool, NULL, 0, argv, lens, reply_cb, &none), -EINVAL);
    finish();
}

#define BURST 10000

Test(pool, pipelined_burst_answered_in_order_per_connection)
{
    static struct call calls[BURST];
    static char text[BURST][8];
    uint64_t last[4] = {0, 0, 0, 0};
    struct pool_config cfg = config(4, 5000);
    struct pool_stats st;

    open_pool(&cfg);
    for (int i = 0; i < BURST; i++) {
        snprintf(text[i], sizeof(text[i]), "%d", i);
        cr_assert_eq(command(&calls[i], "ECHO", text[i], NULL), 0);
    }
    pool_stats(w.pool, &st);
    cr_assert_eq(st.inflight, BURST);
    RUN_UNTIL((pool_stats(w.pool, &st), st.inflight == 0));
    cr_assert_eq(st.inflight, 0);

    /* Round-robin over four ready connections puts i on connection i % 4;
     * each must answer in the order sent, each reply to its own request. */
    for (int i = 0; i < BURST; i++) {
        cr_assert_eq(calls[i].calls, 1, "request %d answered %d times", i, calls[i].calls);
        cr_assert_eq(calls[i].status, 0);
        cr_assert_str_eq(calls[i].str, text[i], "request %d got another's reply", i);
        cr_assert_gt(calls[i].seq, last[i % 4], "request %d answered out of order", i);
        last[i % 4] = calls[i].seq;
    }
    cr_assert_eq(st.requests, BURST);
    cr_assert_eq(st.failures, 0);
    cr_assert_eq(w.reentered, 0);
    finish();
}

/* Commands are written from the pool's flush handle, not on EPOLLOUT; a
 * command larger than the socket buffer must still go out whole (the rest
 * waits for EPOLLOUT), and the ones queued behind it after it. */
Test(pool, a_command_larger_than_the_socket_buffer_is_written_whole)
{
    struct pool_config cfg = config(1, 10000);
    size_t n = 16u << 20;
    char *big = malloc(n);
    cr_assert_not_null(big);
    memset(big, 'x', n);

    open_pool(&cfg);
    cr_assert_eq(set_then_strlen("emq:test:big", big, n), (long long)n, "the value arrived whole");
    free(big);
    finish();
}

/* A chain: each reply sends the next command from inside its callback. */
static struct call chain[50];
static int chain_next;

static void chain_cb(void *priv, int status, redisReply *reply)
{
    reply_cb(priv, status, reply);
    if (status == 0 && chain_next < 50) {
        const char *argv[1] = {"PING"};
        struct call *c = &chain[chain_next++];
        c->sent_ms = loop_ms();
        pool_command(w.pool, NULL, 1, argv, NULL, chain_cb, c);
    }
}

Test(pool, a_command_sent_from_a_callback_goes_out_without_another_event)
{
    /* No ticking timer here: if a command queued inside a callback waited
     * for some other event to be written, the loop would sleep until the
     * pool's deadline timer (an hour) and the chain would fail, or never
     * end before the wait's own deadline. */
    struct pool_config cfg = config(1, 3600000);
    open_pool(&cfg);
    const char *argv[1] = {"PING"};
    chain_next = 1;
    cr_assert_eq(pool_command(w.pool, NULL, 1, argv, NULL, chain_cb, &chain[0]), 0);
    struct wait guard;
    wait_begin(&guard, 0);
    while (chain[49].calls == 0 && !wait_expired(&guard))
        uv_run(&w.loop, UV_RUN_ONCE);
    for (int i = 0; i < 50; i++) {
        cr_assert_eq(chain[i].calls, 1, "link %d of the chain never came back", i);
        cr_assert_eq(chain[i].status, 0, "link %d failed", i);
        cr_assert_str_eq(chain[i].str, "PONG");
    }
    finish();
}

#define FLUSH_ROUNDS 5
#define FLUSH_BATCH  1000

Test(pool, script_flush_under_load_fails_nothing)
{
    static struct call calls[FLUSH_ROUNDS][FLUSH_BATCH];
    struct call flush[FLUSH_ROUNDS] = {0};
    struct pool_config cfg = config(3, 5000);
    struct keys k;
    struct pool_stats st;

    open_pool(&cfg);
    cr_assert_eq(keys_init(&k, "q", 1), 0);
    for (int r = 0; r < FLUSH_ROUNDS; r++) {
        for (int i = 0; i < FLUSH_BATCH; i++) {
            if (i == FLUSH_BATCH / 2)
                cr_assert_eq(command(&flush[r], "FUNCTION", "FLUSH", NULL), 0);
            cr_assert_eq(depth(&calls[r][i], &k, ""), 0);
        }
        /* Let part of each round through before the next flush. */
        RUN_UNTIL((pool_stats(w.pool, &st), st.inflight < FLUSH_BATCH / 2));
    }
    RUN_UNTIL((pool_stats(w.pool, &st), st.inflight == 0));
    for (int r = 0; r < FLUSH_ROUNDS; r++) {
        cr_assert_str_eq(flush[r].str, "OK");
        for (int i = 0; i < FLUSH_BATCH; i++) {
            struct call *c = &calls[r][i];
            cr_assert_eq(c->calls, 1);
            cr_assert_eq(c->status, 0, "round %d call %d failed", r, i);
            cr_assert_eq(c->type, REDIS_REPLY_INTEGER, "round %d call %d: %s", r, i, c->str);
            cr_assert_eq(c->integer, 0);
        }
    }
    cr_assert_eq(st.failures, 0);
    cr_assert_gt(st.reloaded, 0, "the flush never left a call without its function");
    finish();
}

/* How many of the n calls have run; the quickest one's time from
 * submission to callback, by the loop's clock, into *quickest (may be
 * NULL). */
static int answered(const struct call *calls, int n, uint64_t *quickest)
{
    int done = 0;
    uint64_t lo = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        if (calls[i].calls == 0)
            continue;
        done++;
        uint64_t took = calls[i].done_ms - calls[i].sent_ms;
        lo = took < lo ? took : lo;
    }
    if (quickest != NULL)
        *quickest = lo;
    return done;
}

/* The request deadline is an hour here, far past the wait's hang guard:
 * a request that fails while the test waits failed because the pool saw
 * the backend go, not because its deadline came. */
Test(pool, killed_redis_fails_requests_then_recovers_on_restart)
{
    static struct call calls[1000];
    struct call later[10] = {0}, ping = {0}, script = {0};
    struct pool_config cfg = config(2, 3600000);
    struct keys k;
    struct pool_stats st;

    open_pool(&cfg);
    cr_assert_eq(keys_init(&k, "q", 1), 0);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(depth(&calls[i], &k, ""), 0);
    redis_server_kill(&w.rs);
    RUN_UNTIL(answered(calls, 1000, NULL) == 1000);
    cr_assert_eq(answered(calls, 1000, NULL), 1000, "requests hung on a dead backend");
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(calls[i].calls, 1);
        cr_assert_eq(calls[i].status, POOL_EUNAVAILABLE);
    }
    RUN_UNTIL(w.downs == 1);
    cr_assert_eq(w.downs, 1, "on_state(down) fires once");
    cr_assert_not(pool_up(w.pool));

    /* While down, requests fail at once (not by their deadline) and never
     * inside the call. */
    for (int i = 0; i < 10; i++)
        cr_assert_eq(command(&later[i], "PING", NULL, NULL), 0);
    cr_assert_eq(w.reentered, 0);
    RUN_UNTIL(answered(later, 10, NULL) == 10);
    cr_assert_eq(answered(later, 10, NULL), 10, "requests waited on a backend known down");
    for (int i = 0; i < 10; i++)
        cr_assert_eq(later[i].status, POOL_ENOTSENT, "never written, so known not to have run");

    /* A new redis-server on the same port: scripts reloaded, up again. */
    cr_assert_eq(redis_server_restart(&w.rs, NULL), 0);
    RUN_UNTIL(w.ups == 2);
    cr_assert_eq(w.ups, 2, "on_state(up) after the restart: %s", pool_last_error(w.pool));
    cr_assert_eq(command(&ping, "PING", NULL, NULL), 0);
    cr_assert_eq(depth(&script, &k, ""), 0);
    RUN_UNTIL(ping.calls && script.calls);
    cr_assert_eq(ping.status, 0);
    cr_assert_str_eq(ping.str, "PONG");
    cr_assert_eq(script.status, 0);
    cr_assert_eq(script.type, REDIS_REPLY_INTEGER);
    pool_stats(w.pool, &st);
    cr_assert_eq(st.reloaded, 0, "the library was not loaded again on reconnect");
    cr_assert_gt(st.reconnects, 0);
    finish();
}

/* A stopped backend answers nothing: each request fails when its 300 ms
 * deadline comes, by the loop's clock, and not before. */
Test(pool, stopped_redis_fails_requests_by_their_deadline)
{
    struct call calls[50] = {0}, later = {0}, ping = {0};
    struct pool_config cfg = config(2, 300);
    uint64_t quickest;

    open_pool(&cfg);
    cr_assert_eq(kill(w.rs.pid, SIGSTOP), 0);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(command(&calls[i], "PING", NULL, NULL), 0);
    RUN_UNTIL(answered(calls, 50, NULL) == 50);
    cr_assert_eq(answered(calls, 50, &quickest), 50, "requests hung on a stopped backend");
    cr_assert_geq(quickest, 300, "failed before the deadline (%llu ms)",
                  (unsigned long long)quickest);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(calls[i].status, POOL_EUNAVAILABLE);
    RUN_UNTIL(w.downs == 1);
    cr_assert_eq(w.downs, 1);

    /* Reconnects are accepted by the kernel but never set up: still down. */
    cr_assert_eq(command(&later, "PING", NULL, NULL), 0);
    RUN_UNTIL(later.calls);
    cr_assert_eq(later.status, POOL_ENOTSENT);

    cr_assert_eq(kill(w.rs.pid, SIGCONT), 0);
    RUN_UNTIL(w.ups == 2);
    cr_assert_eq(w.ups, 2, "never recovered: %s", pool_last_error(w.pool));
    cr_assert_eq(command(&ping, "PING", NULL, NULL), 0);
    RUN_UNTIL(ping.calls);
    cr_assert_eq(ping.status, 0);
    finish();
}

/* What the pool holds for requests not yet answered is counted: every
 * command's copy, and hiredis's, while Redis does not read; the oldest
 * call's age grows while it waits. Once Redis answers, both go back to
 * (near) nothing. */
Test(pool, buffered_bytes_and_the_oldest_call_are_counted)
{
    enum { N = 200, VALUE = 100000 };
    static struct call calls[N];
    struct pool_config cfg = config(1, 600000);
    char *value = malloc(VALUE + 1);
    cr_assert_not_null(value);
    memset(value, 'v', VALUE);
    value[VALUE] = '\0';

    open_pool(&cfg);
    cr_assert_lt(pool_buffered(w.pool), 1u << 20, "an idle pool holds little");
    cr_assert_eq(pool_oldest_ms(w.pool), 0);
    cr_assert_eq(kill(w.rs.pid, SIGSTOP), 0);
    for (int i = 0; i < N; i++)
        cr_assert_eq(command(&calls[i], "SET", "emq:test:buffered", value), 0);
    free(value);
    cr_assert_geq(pool_buffered(w.pool), (size_t)N * VALUE, "every command's copy is counted");
    RUN_UNTIL(pool_oldest_ms(w.pool) >= 20);
    cr_assert_geq(pool_oldest_ms(w.pool), 20, "the waiting call's age grows");
    cr_assert_geq(pool_buffered(w.pool), (size_t)N * VALUE);

    cr_assert_eq(kill(w.rs.pid, SIGCONT), 0);
    RUN_UNTIL(answered(calls, N, NULL) == N);
    cr_assert_eq(answered(calls, N, NULL), N);
    for (int i = 0; i < N; i++)
        cr_assert_eq(calls[i].status, 0);
    cr_assert_lt(pool_buffered(w.pool), 1u << 20, "the commands' bytes are given back");
    cr_assert_eq(pool_oldest_ms(w.pool), 0);
    finish();
}

/* True once Redis has served the BLPOP and it blocks no more: its answer
 * has been written to the pool's socket by then. */
static bool blpop_answered(void)
{
    return redis_info("commandstats", "cmdstat_blpop:calls=") == 1 &&
           redis_info("clients", "blocked_clients:") == 0;
}

Test(pool, busy_loop_does_not_fail_replies_already_received)
{
    struct call slow = {0};
    struct pool_config cfg = config(1, 300);

    open_pool(&cfg);
    /* Answered by Redis after 200 ms, inside the deadline... */
    long long submitted = wait_now_ms();
    cr_assert_eq(command(&slow, "BLPOP", "emq:test:never", "0.2"), 0);
    for (int i = 0; i < 5; i++)
        uv_run(&w.loop, UV_RUN_NOWAIT);
    /* ...but the loop is busy until the answer is in its socket and the
     * deadline has passed: the watchdog fires before the poll phase and
     * must read what arrived before calling it overdue. */
    await(blpop_answered(), "Redis to answer the BLPOP");
    long long busy = submitted + 300 + 50 - wait_now_ms();
    if (busy > 0)
        wait_sleep_ms((long)busy); /* the point: the deadline passes meanwhile */
    RUN_UNTIL(slow.calls);
    cr_assert_eq(slow.calls, 1);
    cr_assert_eq(slow.status, 0, "a reply already in the socket was failed");
    cr_assert_eq(slow.type, REDIS_REPLY_NIL);
    cr_assert_eq(w.downs, 0);
    finish();
}

/* Messages received by on_message. */
static struct {
    int count;
    int subscribed; /* on_message calls with msg NULL: (re)subscribed */
    char channel[64];
    char last[64];
} inbox;

static void message_cb(void *priv, const char *channel, const char *msg, size_t len)
{
    cr_assert_eq(priv, &inbox);
    if (msg == NULL) {
        cr_assert_eq(len, 0);
        inbox.subscribed++;
        return;
    }
    inbox.count++;
    snprintf(inbox.channel, sizeof(inbox.channel), "%s", channel);
    snprintf(inbox.last, sizeof(inbox.last), "%.*s", (int)len, msg);
}

/* Once the pool has (re)subscribed `subscribed` times in all, one SPUBLISH
 * of text on chan (what the scripts send: wakes are sharded pub/sub) must
 * arrive. */
static void publish_once_subscribed(int subscribed, const char *chan, const char *text)
{
    struct call pub = {0};
    RUN_UNTIL(inbox.subscribed >= subscribed);
    cr_assert_eq(inbox.subscribed, subscribed, "never (re)subscribed: %s", pool_last_error(w.pool));
    inbox.count = 0;
    cr_assert_eq(command(&pub, "SPUBLISH", chan, text), 0);
    RUN_UNTIL(inbox.count > 0 && pub.calls);
    cr_assert_eq(pub.status, 0);
    cr_assert_eq(pub.integer, 1, "one subscriber at Redis");
    cr_assert_eq(inbox.count, 1, "no message on %s: %s", chan, pool_last_error(w.pool));
    cr_assert_str_eq(inbox.channel, chan);
    cr_assert_str_eq(inbox.last, text);
}

Test(pool, pubsub_delivers_and_resubscribes_after_restart)
{
    struct pool_config cfg = config(1, 500);

    memset(&inbox, 0, sizeof(inbox));
    open_pool(&cfg);
    cr_assert_eq(pool_subscribe(w.pool, "emq:test:chan", message_cb, &inbox), 0);
    cr_assert_eq(pool_subscribe(w.pool, "emq:test:chan", message_cb, &inbox), -EEXIST);
    publish_once_subscribed(1, "emq:test:chan", "hello");

    redis_server_kill(&w.rs);
    RUN_UNTIL(w.downs == 1);
    cr_assert_eq(redis_server_restart(&w.rs, NULL), 0);
    RUN_UNTIL(w.ups == 2);
    cr_assert_eq(w.ups, 2);
    publish_once_subscribed(2, "emq:test:chan", "again");
    cr_assert_eq(inbox.subscribed, 2, "subscribed, then resubscribed after the restart");
    finish();
}

Test(pool, close_with_requests_pending_calls_each_back_once)
{
    struct call calls[100] = {0}, refused = {0};
    struct pool_config cfg = config(2, 3600000);

    open_pool(&cfg);
    /* BLPOP on a key nobody pushes: Redis holds every one of them (the
     * first on each connection blocks it, the rest wait behind). */
    for (int i = 0; i < 100; i++)
        cr_assert_eq(command(&calls[i], "BLPOP", "emq:test:never", "0"), 0);
    RUN_UNTIL(redis_info("clients", "blocked_clients:") == 2);
    cr_assert_eq(redis_info("clients", "blocked_clients:"), 2, "both connections blocked");
    cr_assert_eq(answered(calls, 100, NULL), 0);

    pool_close(w.pool, done_cb, NULL);
    cr_assert_eq(command(&refused, "PING", NULL, NULL), -ESHUTDOWN);
    cr_assert_eq(w.reentered, 0, "close ran a callback inside the call");
    RUN_UNTIL(w.closed);
    cr_assert_eq(w.closed, 1);
    for (int i = 0; i < 100; i++) {
        cr_assert_eq(calls[i].calls, 1, "request %d called back %d times", i, calls[i].calls);
        cr_assert_eq(calls[i].status, POOL_EUNAVAILABLE);
    }
    cr_assert_eq(refused.calls, 0);
    finish();
}

static struct call inner;
static int inner_rc;

static void close_from_callback_cb(void *priv, int status, redisReply *reply)
{
    reply_cb(priv, status, reply);
    pool_close(w.pool, done_cb, NULL);
    inner_rc = command(&inner, "PING", NULL, NULL);
}

Test(pool, close_from_inside_a_callback)
{
    struct call first = {0}, second = {0};
    struct pool_config cfg = config(1, 2000);
    const char *argv[1] = {"PING"};

    open_pool(&cfg);
    cr_assert_eq(pool_command(w.pool, NULL, 1, argv, NULL, close_from_callback_cb, &first), 0);
    cr_assert_eq(command(&second, "BLPOP", "emq:test:never", "0"), 0);
    RUN_UNTIL(w.closed);
    cr_assert_eq(w.closed, 1);
    cr_assert_eq(first.calls, 1);
    cr_assert_eq(first.status, 0);
    cr_assert_eq(inner_rc, -ESHUTDOWN);
    cr_assert_eq(second.calls, 1);
    cr_assert_eq(second.status, POOL_EUNAVAILABLE);
    finish();
}

Test(pool, no_backend_fails_promptly_and_keeps_retrying)
{
    /* An hour's deadline: whatever fails while the test waits failed at
     * once, not by its deadline. */
    struct pool_config cfg = config(2, 3600000);
    struct call c = {0};
    struct pool_stats st;

    cfg.port = test_free_port();
    cfg.host = "localhost";
    cr_assert_eq(pool_new(&w.loop, &cfg, &w.pool), -EINVAL, "a host name would block");
    cfg.host = "127.0.0.1";
    cfg.size = 0;
    cr_assert_eq(pool_new(&w.loop, &cfg, &w.pool), -EINVAL);
    cfg.size = 2;
    cr_assert_eq(pool_new(&w.loop, &cfg, &w.pool), 0);
    cr_assert_not(pool_up(w.pool));
    cr_assert_eq(command(&c, "PING", NULL, NULL), 0);
    cr_assert_eq(c.calls, 0, "failed inside the call");
    RUN_UNTIL(c.calls);
    cr_assert_eq(c.calls, 1, "a request on a pool that never came up hung");
    cr_assert_eq(c.status, POOL_ENOTSENT);

    /* A refused connect is noticed at once, not at the deadline. */
    RUN_UNTIL((pool_stats(w.pool, &st), st.reconnects >= 4));
    cr_assert_geq(st.reconnects, 4, "refused connects went unnoticed");
    cr_assert_neq(pool_last_error(w.pool)[0], '\0');
    cr_assert_eq(w.ups + w.downs, 0);
    finish();
}

Test(pool, auth_and_select)
{
    struct call set = {0};
    redisContext *rc = redis_server_connect(&w.rs);
    redisReply *r;

    cr_assert_not_null(rc);
    r = redisCommand(rc, "CONFIG SET requirepass s3cret");
    cr_assert_str_eq(r->str, "OK");
    freeReplyObject(r);

    struct pool_config cfg = config(2, 1000);
    cfg.password = "s3cret";
    cfg.db = 3;
    open_pool(&cfg);
    cr_assert_eq(command(&set, "SET", "emq:test:db", "three"), 0);
    RUN_UNTIL(set.calls);
    cr_assert_eq(set.status, 0);
    r = redisCommand(rc, "GET emq:test:db");
    cr_assert_eq(r->type, REDIS_REPLY_NIL, "written in db 0, not 3");
    freeReplyObject(r);
    r = redisCommand(rc, "SELECT 3");
    freeReplyObject(r);
    r = redisCommand(rc, "GET emq:test:db");
    cr_assert_eq(r->type, REDIS_REPLY_STRING);
    cr_assert_str_eq(r->str, "three");
    freeReplyObject(r);
    redisFree(rc);
    finish();
}

Test(pool, wrong_password_never_comes_up)
{
    redisContext *rc = redis_server_connect(&w.rs);
    redisReply *r = redisCommand(rc, "CONFIG SET requirepass s3cret");
    freeReplyObject(r);
    redisFree(rc);

    struct pool_config cfg = config(1, 1000);
    cfg.password = "wrong";
    cr_assert_eq(pool_new(&w.loop, &cfg, &w.pool), 0);
    RUN_UNTIL(strstr(pool_last_error(w.pool), "WRONGPASS") != NULL);
    cr_assert_not(pool_up(w.pool));
    cr_assert(strstr(pool_last_error(w.pool), "WRONGPASS") != NULL, "last error: %s",
              pool_last_error(w.pool));
    finish();
}

Test(pool, unix_socket)
{
    char dir[] = "/tmp/emq-pool-XXXXXX", path[64];
    struct call ping = {0};

    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/redis.sock", dir);
    redis_server_stop(&w.rs);
    const char *extra[] = {"--unixsocket", path, "--unixsocketperm", "700", NULL};
    cr_assert_eq(redis_server_start(&w.rs, extra), 0);

    struct pool_config cfg = config(1, 1000);
    cfg.unix_path = path;
    open_pool(&cfg);
    cr_assert_eq(command(&ping, "PING", NULL, NULL), 0);
    RUN_UNTIL(ping.calls);
    cr_assert_eq(ping.status, 0);
    cr_assert_str_eq(ping.str, "PONG");
    finish();
    redis_server_stop(&w.rs);
    unlink(path);
    rmdir(dir);
}

/* --- routes: one ordered stream of requests ------------------------------- */

/* The slot of a hash tag is the Redis Cluster one (the specification's
 * example: the key "123456789" is slot 0x31C3 = 12739). */
Test(pool, slot_is_the_cluster_key_slot)
{
    cr_assert_eq(pool_slot("123456789", 9), 12739);
    cr_assert_eq(pool_slot("", 0), 0);
    cr_assert_lt(pool_slot("mail", 4), 16384);
}

/* A whole key's slot is its hash tag's when it has one (the text between
 * the first '{' and the first '}' after it, if not empty), else the whole
 * key's: the cluster specification's rules and examples. */
Test(pool, key_slot_takes_the_hash_tag_as_redis_does)
{
    cr_assert_eq(pool_key_slot("123456789", 9), 0x31C3);
    cr_assert_eq(pool_key_slot("{user1000}.following", 20), pool_slot("user1000", 8));
    cr_assert_eq(pool_key_slot("{user1000}.followers", 20), pool_slot("user1000", 8));
    cr_assert_eq(pool_key_slot("foo{}{bar}", 10), pool_slot("foo{}{bar}", 10), "an empty tag");
    cr_assert_eq(pool_key_slot("foo{{bar}}zap", 13), pool_slot("{bar", 4));
    cr_assert_eq(pool_key_slot("foo{bar}{zap}", 13), pool_slot("bar", 3), "the first tag");
    cr_assert_eq(pool_key_slot("foo{bar", 7), pool_slot("foo{bar", 7), "an unclosed tag");
    cr_assert_eq(pool_key_slot("emq:{q}:ring", 12), pool_slot("q", 1), "a queue's keys");
    /* Redis's own answers (CLUSTER KEYSLOT) for two plain keys. */
    cr_assert_eq(pool_key_slot("emq:queues", 10), 8388);
    cr_assert_eq(pool_key_slot("foo", 3), 12182);
}

/* Requests of one route run in the order submitted, though the pool has
 * four connections and writes a turn's commands connection by connection:
 * 300 RPUSHes submitted in one turn land in order. */
Test(pool, a_route_keeps_its_requests_in_order)
{
    struct pool_config cfg = config(4, 5000);
    open_pool(&cfg);
    enum { N = 300 };
    static struct call calls[N];
    struct pool_route rt;
    pool_route_init(&rt, "order", 5);
    char num[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(num[i], sizeof(num[i]), "%d", i);
        const char *argv[] = {"RPUSH", "routed", num[i]};
        cr_assert_eq(pool_command(w.pool, &rt, 3, argv, NULL, reply_cb, &calls[i]), 0);
    }
    RUN_UNTIL(calls[N - 1].calls == 1);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(calls[i].status, 0, "request %d failed", i);
        cr_assert_eq(calls[i].integer, i + 1, "request %d ran as number %lld", i, calls[i].integer);
    }
    cr_assert_eq(rt.inflight, 0, "every request of the route was counted out");
    finish();
}

enum { PAIRS = 40 };

/* On one route of queue q: PAIRS pairs of an enqueue of TENa and a depth
 * of it, pipelined, with the plain command flush (two words) sent before
 * pair `at`. Every request is answered once, in the order sent, none
 * fails, and each depth saw the enqueues before it. */
static void route_pairs_across(const char *q, const char *f1, const char *f2, int at)
{
    struct keys k;
    cr_assert_eq(keys_init(&k, q, strlen(q)), 0);
    struct pool_route rt;
    pool_route_init(&rt, q, strlen(q));
    static struct call calls[2 * PAIRS + 1];
    memset(calls, 0, sizeof(calls));
    static char ids[PAIRS][24];
    int n = 0, depth_at[PAIRS];
    const char *group[] = {"TENa"}, *flush[] = {f1, f2};
    for (int i = 0; i < PAIRS; i++) {
        if (i == at)
            cr_assert_eq(pool_command(w.pool, &rt, 2, flush, NULL, reply_cb, &calls[n++]), 0);
        snprintf(ids[i], sizeof(ids[i]), "JOB%s-%03d", q, i);
        const char *enq[] = {ids[i], "TENa", "1", "0", "0"};
        cr_assert_eq(
            pool_script(w.pool, &rt, SCRIPT_ENQUEUE, &k, 5, enq, NULL, reply_cb, &calls[n++]), 0);
        depth_at[i] = n;
        cr_assert_eq(
            pool_script(w.pool, &rt, SCRIPT_DEPTH, &k, 1, group, NULL, reply_cb, &calls[n++]), 0);
    }
    RUN_UNTIL(calls[n - 1].calls == 1);
    uint64_t first = calls[0].seq;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(calls[i].calls, 1, "request %d answered once", i);
        cr_assert_eq(calls[i].status, 0, "request %d failed", i);
        cr_assert_eq(calls[i].seq, first + (uint64_t)i, "request %d answered out of order", i);
    }
    for (int i = 0; i < PAIRS; i++)
        cr_assert_eq(calls[depth_at[i]].integer, i + 1, "depth %d saw the enqueues before it", i);
}

/* A FUNCTION FLUSH in the middle of a route's stream: the script calls
 * after it answer "Function not found", are held, and are resent behind a
 * FUNCTION LOAD in the order they were sent, before anything submitted
 * after them; every request is answered once, in order, and none fails. */
Test(pool, a_route_keeps_its_order_across_a_flushed_library)
{
    struct pool_config cfg = config(2, 5000);
    open_pool(&cfg);
    route_pairs_across("rflush", "FUNCTION", "FLUSH", 0);
    struct pool_stats st;
    pool_stats(w.pool, &st);
    cr_assert_gt(st.reloaded, 0, "the flush never left a call without its function");
    finish();
}

/* A plain command (no arguments to format) on a fresh connection of the
 * test's own: its reply (caller frees). */
static redisReply *redis_say(const char *cmd)
{
    redisContext *rc = redis_server_connect(&w.rs);
    cr_assert_not_null(rc);
    redisReply *r = redisCommand(rc, cmd);
    cr_assert_not_null(r);
    redisFree(rc);
    return r;
}

/* Calls of one command so far (INFO commandstats; 0 if never run). */
static long long redis_calls_of(const char *cmd)
{
    redisContext *rc = redis_server_connect(&w.rs);
    cr_assert_not_null(rc);
    long long n = redis_cmdstat(rc, cmd, "calls=");
    redisFree(rc);
    return n;
}

/* A Redis whose ACL refuses FUNCTION LOAD: every connection comes up all
 * the same and runs the scripts by EVALSHA of their fallback form
 * (scripts/embed_lua.py), loaded with SCRIPT LOAD, and again once a
 * SCRIPT FLUSH has emptied the script cache. A route's stream across that
 * flush keeps its order: the calls refused NOSCRIPT are held and resent
 * in order, before anything submitted after them; every request is
 * answered once and none fails. No FCALL is ever sent. */
Test(pool, without_the_library_scripts_run_by_eval_in_order)
{
    freeReplyObject(redis_say("ACL SETUSER default -function|load"));
    struct pool_config cfg = config(2, 5000);
    open_pool(&cfg);
    route_pairs_across("reval", "SCRIPT", "FLUSH", PAIRS / 2);
    struct pool_stats st;
    pool_stats(w.pool, &st);
    cr_assert_gt(st.reloaded, 0, "the flush never left a call without its script");
    cr_assert_eq(st.by_eval, 2, "both connections run the fallback");
    cr_assert_gt(redis_calls_of("evalsha"), 0);
    cr_assert_gt(redis_calls_of("script|load"), SCRIPT__COUNT,
                 "the fallback scripts were not loaded again after the flush");
    cr_assert_eq(redis_calls_of("fcall"), 0, "a call went by FCALL without a library");
    freeReplyObject(redis_say("ACL SETUSER default +@all"));
    finish();
}

/* Redis at maxmemory refuses FUNCTION LOAD; with the library flushed, a
 * call finds no function, is resent behind a FUNCTION LOAD that is
 * refused, and then by EVALSHA (SCRIPT LOAD runs out of memory): it runs (depth reads; release,
 * flagged allow-oom, writes). Once Redis has room again a later FUNCTION LOAD (tried after a
 * second) takes, and calls go by FCALL again. */
Test(pool, a_full_redis_without_the_library_runs_the_scripts_by_eval)
{
    struct pool_config cfg = config(1, 5000);
    open_pool(&cfg);
    struct keys k;
    cr_assert_eq(keys_init(&k, "rfull", 5), 0);
    freeReplyObject(redis_say("FUNCTION FLUSH"));
    freeReplyObject(redis_say("CONFIG SET maxmemory 1"));
    struct call depth0 = {0}, pause = {0};
    const char *group[] = {"TENa"};
    cr_assert_eq(pool_script(w.pool, NULL, SCRIPT_DEPTH, &k, 1, group, NULL, reply_cb, &depth0), 0);
    cr_assert_eq(pool_script(w.pool, NULL, SCRIPT_PAUSE, &k, 1, group, NULL, reply_cb, &pause), 0);
    RUN_UNTIL(depth0.calls && pause.calls);
    cr_assert_eq(depth0.status, 0);
    cr_assert_eq(depth0.type, REDIS_REPLY_INTEGER, "depth: %s", depth0.str);
    cr_assert_eq(pause.type, REDIS_REPLY_INTEGER, "pause under OOM: %s", pause.str);
    cr_assert_gt(redis_calls_of("evalsha"), 0, "nothing ran by EVALSHA");
    freeReplyObject(redis_say("CONFIG SET maxmemory 0"));
    long long fcalls = redis_calls_of("fcall");
    static struct call more[4096];
    int n = 0;
    struct wait wt;
    wait_begin(&wt, 0);
    /* One call at a time, each answered before the next, until the pool
     * has tried the library again and gone back to FCALL. */
    do {
        cr_assert_eq(
            pool_script(w.pool, NULL, SCRIPT_DEPTH, &k, 1, group, NULL, reply_cb, &more[n]), 0);
        RUN_UNTIL(more[n].calls == 1);
        cr_assert_eq(more[n].type, REDIS_REPLY_INTEGER, "depth %d: %s", n, more[n].str);
        n++;
    } while (redis_calls_of("fcall") <= fcalls && n < 4096 && wait_again(&wt));
    cr_assert_gt(redis_calls_of("fcall"), fcalls, "the pool never went back to FCALL");
    finish();
}

/* A request lost on its connection may still run at Redis later: here a
 * proxy keeps the pool's INCR (as a stalled network or server would)
 * while the pool times the call out and reconnects. Once pool_fenced says
 * so, the lost connection's client is gone at Redis: the kept INCR and a
 * marker sent after it, released by the proxy, never run. Without the
 * fence the INCR would run after its caller was told it failed. */
Test(pool, a_lost_connection_is_fenced_before_pool_fenced_says_so)
{
    struct proxy px;
    struct call incr = {0}, ping = {0};
    cr_assert_eq(proxy_start(&px, w.rs.port), 0);
    struct pool_config cfg = config(1, 300);
    cfg.port = px.port;
    open_pool(&cfg);
    cr_assert_eq(pool_losses(w.pool), 0);

    proxy_set_mode(&px, PROXY_HOLD);
    cr_assert_eq(command(&incr, "INCR", "fenced-counter", NULL), 0);
    RUN_UNTIL(incr.calls == 1);
    cr_assert_eq(incr.status, POOL_EUNAVAILABLE, "the held call did not time out");
    uint64_t epoch = pool_losses(w.pool);
    cr_assert_eq(epoch, 1, "the lost connection was not counted");

    /* New connections pass: the pool comes back and fences the lost one. */
    RUN_UNTIL(pool_up(w.pool) && pool_fenced(w.pool, epoch));
    cr_assert(pool_fenced(w.pool, epoch), "never fenced: %s", pool_last_error(w.pool));
    struct pool_stats st;
    pool_stats(w.pool, &st);
    cr_assert_eq(st.fenced, 1);

    static const char marker[] = "*3\r\n$3\r\nSET\r\n$6\r\nmarker\r\n$1\r\n1\r\n";
    proxy_release(&px, marker, sizeof(marker) - 1);
    size_t closed = 0, answered = 0;
    cr_assert(
        wait_for((proxy_counts(&px, NULL, NULL, NULL, &closed, &answered), closed + answered > 0)));
    cr_assert_eq(answered, 0, "the lost client still ran what it was sent");
    cr_assert_eq(closed, 1);

    cr_assert_eq(command(&ping, "EXISTS", "fenced-counter", NULL), 0);
    RUN_UNTIL(ping.calls);
    cr_assert_eq(ping.status, 0);
    cr_assert_eq(ping.integer, 0, "the lost INCR ran after its caller was told it failed");
    finish();
    proxy_stop(&px);
}

/* A lost connection of a Redis that has restarted since needs no fence,
 * and must not get one: its client id may now be someone else's. */
Test(pool, a_loss_on_a_restarted_redis_counts_as_fenced_without_a_kill)
{
    struct call calls[4] = {0}, ping = {0};
    struct pool_config cfg = config(1, 300);
    open_pool(&cfg);
    cr_assert_eq(kill(w.rs.pid, SIGSTOP), 0);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(command(&calls[i], "PING", NULL, NULL), 0);
    RUN_UNTIL(answered(calls, 4, NULL) == 4);
    cr_assert_eq(calls[0].status, POOL_EUNAVAILABLE);
    uint64_t epoch = pool_losses(w.pool);
    cr_assert_eq(epoch, 1);
    kill(w.rs.pid, SIGCONT);
    redis_server_kill(&w.rs);
    cr_assert_eq(redis_server_restart(&w.rs, NULL), 0);
    RUN_UNTIL(pool_up(w.pool) && pool_fenced(w.pool, epoch));
    cr_assert(pool_fenced(w.pool, epoch));
    long long kills = redis_info("commandstats", "cmdstat_client|kill:calls=");
    cr_assert_eq(kills, 0, "CLIENT KILL sent to another Redis process");
    cr_assert_eq(command(&ping, "PING", NULL, NULL), 0);
    RUN_UNTIL(ping.calls);
    cr_assert_eq(ping.status, 0);
    finish();
}
