/* server: the daemon's top object. One libuv loop; listeners accept
 * connections (client.h); each line becomes a request (req.h) run by its
 * command (cmd.h) against the engine's queues (core/), and replies leave
 * in request order, one write per connection per loop turn. */
#ifndef EMQ_SERVER_H
#define EMQ_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "backoff.h"
#include "budget.h"
#include "config.h"
#include "engine.h"
#include "errors.h"
#include "mint.h"
#include "pool.h"
#include "tokens.h"

struct client;
struct tls_ctx;

/* Counters the daemon keeps about its connections (metrics). */
struct server_counters {
    uint64_t connections, requests, errors;
};

/* Room for every op of the command tables (test_cmd checks the count). */
#define SERVER_OPS_MAX 48

/* Requests by op (cmd_at index; SERVER_OPS_MAX = no op: unparsable or
 * unknown) and by result (0 = ok, else the wire error code). */
struct server_results {
    uint64_t n[SERVER_OPS_MAX + 1][WIRE__END];
};

/* Requests refused EPERM, by the connection's role (0: a connection whose
 * token was revoked) and op (cmd_index), and the state of their
 * rate-limited log (perm.c). */
struct server_denied {
    uint64_t n[TOKENS_ADMIN + 1][SERVER_OPS_MAX];
    uint64_t logged_at; /* uv_now of the last line, 0: none yet */
    uint64_t unlogged;  /* refusals since that line, not logged */
};

struct server {
    uv_loop_t *loop;
    const struct config *cfg;
    uv_tcp_t tcp;
    uv_pipe_t unix_listener;
    bool tcp_open, unix_open;
    struct pool *pool;
    struct engine eng; /* the queues */
    struct client *clients;
    size_t nclients;
    size_t nunauthed;       /* of them, those that have to say hello and have not */
    struct client *dirty;   /* clients with bytes to write this turn */
    uv_check_t flush;       /* end of each loop turn: send coalesced work, write replies */
    uv_timer_t sweep;       /* forgets leases that have run out (lease_sweep) */
    uint64_t history_next;  /* uv_now() of the next queue history sample (cmd_view.c) */
    uv_idle_t resume;       /* runs client_resume_all while clients wait in resumed */
    uv_idle_t kick;         /* active while clients are dirty: poll must not block (client.c) */
    struct client *resumed; /* clients whose paused reads may resume */
    struct budget bud;      /* the bytes held for every client, against max-buffered */
    struct tls_ctx *tls;    /* new TCP connections' TLS context (client_tls.h), or NULL */
    uv_signal_t sigterm, sigint;
    bool stopping, listening;
    /* The queue registry's read failed (a backend still loading its data
     * answers LOADING): the sweep reads it again; warned, the failure of
     * this run of them is logged. */
    bool registry_unread, registry_warned;
    int exit_code;
    uv_timer_t drain_timer;
    int drain_ticks;
    void (*stop_done)(struct server *s); /* after the pool has closed */
    int (*ready)(struct server *s);      /* once listening; non-zero: it stopped emqd */
    struct mint mint;
    struct mint_rand rand;
    struct server_counters count;
    struct server_results results;
    struct tokens *tokens;  /* the tokens file's table (owned), NULL when none is set */
    struct backoff backoff; /* failed hellos per address */
    struct server_denied denied;
};

int server_init(struct server *s, uv_loop_t *loop, const struct config *cfg);
int server_listen(struct server *s);
void server_attach_pool(struct server *s, struct pool *p);
/* True if a connection must say hello with a token before other ops: the
 * token setting or a tokens file is set. */
bool server_auth_required(const struct server *s);
/* Stop accepting and handing out work, flush, close everything; the loop
 * then ends by itself, and stop_done runs. */
void server_stop(struct server *s);

#endif
