/* pool_conn: one connection of the pool, from connect to teardown, and the
 * libuv adapter under its hiredis context (see pool_internal.h).
 *
 * Each connection walks IDLE -> CONNECTING -> SETUP -> READY and, when it
 * fails, back through WAIT (a backoff delay) to CONNECTING. One uv_timer_t
 * per connection serves whichever deadline its state needs: the connect
 * and setup deadline, the watchdog over the oldest request, the backoff
 * delay, or a deferred teardown.
 *
 * hiredis frees a context by itself after a connect failure or an error
 * (running every pending callback with a NULL reply first); the pool only
 * ever frees one with redisAsyncFree from its own timer or idle callback,
 * never from inside a hiredis callback. */
#include "pool_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "spin.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* The libuv side of one hiredis context (our own adapter, see poll_cb). */
struct pool_poll {
    uv_poll_t handle;
    redisAsyncContext *ac; /* NULL once hiredis cleaned up */
    struct pool *pool;
    int events;
    bool flush_queued;            /* on pool->flush_first's list */
    bool flushing;                /* inside redisAsyncHandleWrite from the flush */
    bool raw;                     /* a ready subscriber's: replies read by pool_sub_read */
    struct pool_poll *flush_next; /* that list */
};

static void conn_timer_cb(uv_timer_t *t);
static void conn_setup(struct pool_conn *c);
static void conn_down(struct pool_conn *c);

/* Remember why a connection failed, and log it with the address: a new
 * reason at once, the same reason again only every POOL_LOG_EVERY_MS
 * while it lasts (with the attempts since), so a Redis that stays away is
 * visible in the log without a line per retry. A Redis still loading its
 * dataset after a restart is expected: info, not warn. */
void pool_set_error(const struct pool_conn *c, const char *what, const char *detail)
{
    struct pool *p = c->pool;
    char node[64];
    const char *where = p->where;
    if (p->cluster) { /* which node, not the seed */
        snprintf(node, sizeof(node), "%s:%d", p->nodes[c->node].host, p->nodes[c->node].port);
        where = node;
    }
    char msg[sizeof(p->error)], q[300];
    uint64_t now = uv_now(p->loop);
    bool same = false;

    snprintf(msg, sizeof(msg), "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
    same = strcmp(msg, p->error) == 0;
    p->errors_unlogged++;
    if (!same || now - p->error_logged_ms >= POOL_LOG_EVERY_MS) {
        bool loading = detail != NULL && strncmp(detail, "LOADING", 7) == 0;
        log_event(loading ? LOG_INFO : LOG_WARN,
                  loading ? "redis is loading its dataset; waiting"
                  : same  ? "redis still unreachable; retrying"
                          : "redis connection failed; retrying with backoff",
                  "redis=%s error=%s attempts=%llu", where, log_quote(msg, q, sizeof(q)),
                  (unsigned long long)p->errors_unlogged);
        p->error_logged_ms = now;
        p->errors_unlogged = 0;
    }
    memcpy(p->error, msg, sizeof(msg));
}

/* ---- libuv adapter ------------------------------------------------------
 * hiredis 0.14's adapters/libuv.h drops a poll error (status < 0) on the
 * floor, and libuv reports a refused connect or a reset as exactly that, so
 * the context would never learn of it. This adapter hands errors to hiredis
 * as the events it was waiting for, so its read or write sees the error.
 *
 * It also does not wait for EPOLLOUT to send commands. hiredis asks for a
 * write after every command; the stock way (poll for writable, write, stop
 * polling) costs a loop turn and, since uv_poll_start re-registers the fd,
 * two epoll_ctl calls each time the event set changes, per command at light
 * load. Here a connected context's commands are written by the pool's flush
 * idle handle on the next loop turn, all that one turn queued in one write;
 * only a connect in progress or a socket that is full waits for EPOLLOUT.
 * An unchanged event set is not re-registered. */

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct pool_poll *pp = h->data;

    if (status < 0) {
        /* libuv has stopped the handle: forget the set, so the next add
         * registers it again (poll_update skips an unchanged set). */
        events = pp->events;
        pp->events = 0;
    }
    if (pp->ac != NULL && (events & UV_READABLE)) {
        spin_touch(); /* a reply: more of them, or the writes it brings (util/spin.h) */
        if (!pp->raw)
            redisAsyncHandleRead(pp->ac);
        else if (pp->ac->data != NULL) /* never hiredis's read: it would assert */
            pool_sub_read(pp->ac->data);
    }
    if (pp->ac != NULL && (events & UV_WRITABLE))
        redisAsyncHandleWrite(pp->ac);
}

static void poll_update(struct pool_poll *pp, int add, int del)
{
    int events = (pp->events | add) & ~del;
    if (events == pp->events)
        return;
    pp->events = events;
    if (pp->events != 0)
        uv_poll_start(&pp->handle, pp->events, poll_cb);
    else
        uv_poll_stop(&pp->handle);
}

static void poll_add_read(void *data)
{
    poll_update(data, UV_READABLE, 0);
}

static void poll_del_read(void *data)
{
    poll_update(data, 0, UV_READABLE);
}

static void poll_add_write(void *data)
{
    struct pool_poll *pp = data;
    struct pool *p = pp->pool;

    if (pp->ac == NULL || !(pp->ac->c.flags & REDIS_CONNECTED) || pp->flushing) {
        poll_update(pp, UV_WRITABLE, 0); /* connecting, or the socket is full */
        return;
    }
    if (pp->flush_queued)
        return;
    pp->flush_queued = true;
    pp->flush_next = p->flush_first;
    p->flush_first = pp;
    if (!p->closed)
        uv_idle_start(&p->flush, pool_flush_cb);
}

static void flush_unlink(struct pool_poll *pp)
{
    if (!pp->flush_queued)
        return;
    for (struct pool_poll **l = &pp->pool->flush_first; *l != NULL; l = &(*l)->flush_next) {
        if (*l == pp) {
            *l = pp->flush_next;
            break;
        }
    }
    pp->flush_queued = false;
}

void pool_flush_cb(uv_idle_t *h)
{
    struct pool *p = h->data;

    /* One at a time from the head: a write that fails tears its context
     * down, and that unlinks it (poll_cleanup) while we are here. */
    while (p->flush_first != NULL) {
        struct pool_poll *pp = p->flush_first;
        p->flush_first = pp->flush_next;
        pp->flush_queued = false;
        pp->flushing = true;
        redisAsyncHandleWrite(pp->ac);
        pp->flushing = false; /* pp itself is freed only in poll_close_cb */
    }
    /* Redis answers these within a round trip: wait for it awake. */
    spin_touch();
    uv_idle_stop(h);
}

static void poll_del_write(void *data)
{
    poll_update(data, 0, UV_WRITABLE);
}

static void poll_close_cb(uv_handle_t *h)
{
    struct pool_poll *pp = h->data;
    struct pool *p = pp->pool;

    free(pp);
    p->open_handles--;
    pool_maybe_done(p);
}

/* hiredis is freeing the context: the poll handle goes with it. */
static void poll_cleanup(void *data)
{
    struct pool_poll *pp = data;

    pp->ac = NULL;
    flush_unlink(pp);
    if (!uv_is_closing((uv_handle_t *)&pp->handle))
        uv_close((uv_handle_t *)&pp->handle, poll_close_cb);
}

static int poll_attach(struct pool *p, redisAsyncContext *ac)
{
    struct pool_poll *pp = calloc(1, sizeof(*pp));
    int err;

    if (pp == NULL)
        return -ENOMEM;
    err = uv_poll_init(p->loop, &pp->handle, ac->c.fd);
    if (err < 0) {
        free(pp);
        return err;
    }
    p->open_handles++;
    pp->handle.data = pp;
    pp->ac = ac;
    pp->pool = p;
    ac->ev.data = pp;
    ac->ev.addRead = poll_add_read;
    ac->ev.delRead = poll_del_read;
    ac->ev.addWrite = poll_add_write;
    ac->ev.delWrite = poll_del_write;
    ac->ev.cleanup = poll_cleanup;
    return 0;
}

/* ---- connection lifecycle ---------------------------------------------- */

/* Move c to state s, keeping the ready count; an up/down change is told
 * to the caller from the idle handle, never from inside this stack. */
static void conn_set_state(struct pool_conn *c, enum conn_state s)
{
    struct pool *p = c->pool;
    bool was = c->state == CONN_READY, is = s == CONN_READY;

    c->state = s;
    if (c->pubsub || was == is)
        return;
    p->ready += is ? 1 : -1;
    if (pool_is_up(p) != p->notified_up)
        pool_kick(p);
}

/* A delay in [backoff/2, backoff] (equal jitter), and the next ceiling. */
static uint64_t conn_next_delay(struct pool_conn *c)
{
    struct pool *p = c->pool;
    uint64_t b = c->backoff, half = b / 2;

    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 7;
    p->rng ^= p->rng << 17;
    c->backoff = b * 2 > p->backoff_max ? p->backoff_max : b * 2;
    return half + p->rng % (b - half + 1);
}

/* Keepalive on TCP connections, so a silently vanished peer is noticed
 * even on the pub/sub connection, which has no request deadlines. */
static void conn_keepalive(int fd)
{
    int on = 1, idle = 15, intvl = 5, cnt = 3;

    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

static void conn_connect_cb(const redisAsyncContext *ac, int status);
static void conn_disconnect_cb(const redisAsyncContext *ac, int status);

void pool_conn_init(struct pool *p, struct pool_conn *c, int node)
{
    c->pool = p;
    c->node = node;
    c->backoff = p->backoff_min;
    uv_timer_init(p->loop, &c->timer);
    c->timer.data = p;
    p->open_handles++;
}

/* Start one connection attempt; on an immediate failure wait a backoff. */
void pool_conn_start(struct pool_conn *c)
{
    struct pool *p = c->pool;
    redisAsyncContext *ac;

    if (c->started)
        p->stats.reconnects++;
    c->started = true;
    const struct pool_node *n = &p->nodes[c->node];
    if (p->unix_path != NULL)
        ac = redisAsyncConnectUnix(p->unix_path);
    else
        ac = redisAsyncConnect(n->host, n->port);
    if (ac == NULL || ac->err) {
        pool_set_error(c, "connect", ac != NULL ? ac->errstr : "out of memory");
        goto err_free;
    }
    if (poll_attach(p, ac) < 0) {
        pool_set_error(c, "connect", "cannot watch the socket");
        goto err_free;
    }
    if (p->unix_path == NULL)
        conn_keepalive(ac->c.fd);
    ac->data = c;
    redisAsyncSetConnectCallback(ac, conn_connect_cb);
    redisAsyncSetDisconnectCallback(ac, conn_disconnect_cb);
    c->ac = ac;
    c->state = CONN_CONNECTING;
    uv_timer_start(&c->timer, conn_timer_cb, p->timeout, 0);
    return;

err_free:
    /* Not attached or not connected: freeing runs no callback of ours. */
    if (ac != NULL)
        redisAsyncFree(ac);
    conn_down(c);
}

/* The context is gone (hiredis freed it, or we did): wait, then retry. */
static void conn_down(struct pool_conn *c)
{
    struct pool *p = c->pool;

    c->ac = NULL;
    c->setup_step = c->setup_count = 0;
    /* What waited on a held connection was never written (or must be
     * written again): fail it, as everything in flight on c just was. */
    pool_conn_fail_held(c);
    if (p->closing) {
        conn_set_state(c, CONN_CLOSED);
        uv_timer_stop(&c->timer);
        return;
    }
    if (p->cluster && !c->pubsub)
        pool_cluster_conn_lost(c);
    if (c->pubsub)
        pool_sub_conn_lost(c);
    conn_set_state(c, CONN_WAIT);
    uv_timer_start(&c->timer, conn_timer_cb, conn_next_delay(c), 0);
}

/* hiredis is freeing ac (a NULL reply, a failed connect, or its
 * disconnect callback): forget it. Only the first notice about the
 * current context counts. */
void pool_conn_gone(struct pool_conn *c, const redisAsyncContext *ac, const char *what)
{
    if (c->ac != ac || ac == NULL)
        return;
    pool_fence_note(c, false);
    pool_set_error(c, what, ac->errstr[0] != '\0' ? ac->errstr : "closed");
    conn_down(c);
}

/* Tear c's context down now, failing its requests. Only from our own timer
 * or idle callbacks: redisAsyncFree must not run inside hiredis. */
void pool_conn_kill(struct pool_conn *c)
{
    redisAsyncContext *ac = c->ac;

    /* Out of rotation before the callbacks run, so none resubmits here;
     * the loss counted before they see it. */
    pool_fence_note(c, false);
    conn_set_state(c, CONN_FAILING);
    c->ac = NULL;
    if (ac != NULL) {
        ac->data = NULL;
        redisAsyncFree(ac);
    }
    conn_down(c);
}

/* Tear c down on the next turn (from inside a hiredis callback). */
void pool_conn_fail_soon(struct pool_conn *c)
{
    if (c->state == CONN_FAILING || c->state == CONN_CLOSED)
        return;
    conn_set_state(c, CONN_FAILING);
    uv_timer_start(&c->timer, conn_timer_cb, 0, 0);
}

static void conn_ready(struct pool_conn *c)
{
    struct pool *p = c->pool;

    uv_timer_stop(&c->timer);
    c->backoff = p->backoff_min;
    /* A failure after this one is news again, even for the same reason. */
    p->error[0] = '\0';
    p->errors_unlogged = 0;
    /* Back after it was lost (the metrics' reconnects): the start-up
     * connect is not, however many tries it took (Redis still loading at
     * boot is not an outage), and neither is a failed attempt. */
    if (c->was_ready)
        p->stats.recovered++;
    c->was_ready = true;
    c->loss_noted = false;
    conn_set_state(c, CONN_READY);
    if (p->cluster && !c->pubsub)
        pool_cluster_conn_ready(c);
    if (!c->pubsub) {
        pool_fence_kick(p);
        /* On a cluster, requests may have waited for it to connect. */
        pool_conn_release_waiting(c);
    }
    if (c->pubsub) {
        /* Setup has answered and nothing else was sent: from here on its
         * replies are read raw (pool_sub.c says why). */
        ((struct pool_poll *)c->ac->ev.data)->raw = true;
        pool_sub_sync(p);
    }
}

static void conn_connect_cb(const redisAsyncContext *ac, int status)
{
    struct pool_conn *c = ac->data;

    if (c == NULL || c->ac != ac)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context right after this returns. */
        pool_conn_gone(c, ac, "connect");
        return;
    }
    conn_set_state(c, CONN_SETUP);
    conn_setup(c);
}

static void conn_disconnect_cb(const redisAsyncContext *ac, int status)
{
    struct pool_conn *c = ac->data;

    (void)status;
    if (c == NULL)
        return;
    pool_conn_gone(c, ac, "connection lost");
}

/* The run_id line of an INFO server reply, into out (41 bytes); "" if
 * none. */
static void run_id_parse(const redisReply *reply, char out[41])
{
    out[0] = '\0';
    if (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS)
        return;
    const char *at = strstr(reply->str, "run_id:");
    if (at == NULL)
        return;
    at += 7;
    size_t n = strspn(at, "0123456789abcdef");
    if (n == 40) {
        memcpy(out, at, 40);
        out[40] = '\0';
    }
}

/* The replies to CLIENT ID and INFO server: who c is at Redis. A server
 * that refuses either (an ACL) leaves c unfenceable, not unusable. */
static void setup_identity(struct pool_conn *c, int step, const redisReply *reply)
{
    if (step == c->step_client_id)
        c->client_id = reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0;
    else
        run_id_parse(reply, c->run_id);
    if (reply->type == REDIS_REPLY_ERROR)
        log_event(LOG_WARN, "redis refused a setup command: lost connections cannot be fenced",
                  "command=%s error=%s", step == c->step_client_id ? "CLIENT ID" : "INFO server",
                  reply->str);
}

bool pool_function_missing(const char *err)
{
    return strncmp(err, "ERR Function not found", 22) == 0;
}

bool pool_library_loaded(const redisReply *reply)
{
    if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS)
        return strcmp(reply->str, lua_library_name) == 0;
    /* "ERR Library 'emq_<v>' already exists": the name carries the
     * library's version (scripts/embed_lua.py), so the one there is this
     * one, byte for byte. */
    return reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "ERR Library '", 13) == 0 &&
           strncmp(reply->str + 13, lua_library_name, strlen(lua_library_name)) == 0 &&
           strcmp(reply->str + 13 + strlen(lua_library_name), "' already exists") == 0;
}

void pool_library_reply(struct pool_conn *c, const redisReply *reply)
{
    bool was = c->by_eval;
    c->by_eval = !pool_library_loaded(reply);
    if (c->by_eval && !was)
        c->scripts_cached = false; /* load them before the first EVALSHA */
    c->load_tried_ms = uv_now(c->pool->loop);
    c->load_refusals = c->by_eval ? c->load_refusals + 1 : 0;
    /* A replica (a cluster seed, a master turned replica) takes no
     * FUNCTION LOAD and runs no script call (it answers MOVED): nothing
     * to tell. */
    bool replica = reply->type == REDIS_REPLY_ERROR && strncmp(reply->str, "READONLY", 8) == 0;
    if (c->by_eval && !was && !replica)
        log_event(
            LOG_WARN,
            "redis refused to load the lane scripts: running them by EVAL until it takes them",
            "library=%s error=%s", lua_library_name,
            reply->type == REDIS_REPLY_ERROR ? reply->str : "an unexpected reply");
    else if (!c->by_eval && was)
        log_event(LOG_INFO, "redis took the lane scripts: running them by FCALL again",
                  "library=%s", lua_library_name);
}

void pool_library_load_cb(redisAsyncContext *ac, void *rep, void *privdata)
{
    struct pool_conn *c = privdata;
    if (rep != NULL && c->ac == ac)
        pool_library_reply(c, rep);
}

/* One setup reply: AUTH, SELECT, CLIENT ID, INFO server, then FUNCTION
 * LOAD of the lane scripts' library. */
static void setup_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    struct pool_conn *c = privdata;
    redisReply *reply = r;

    if (reply == NULL) {
        pool_conn_gone(c, ac, "connection lost");
        return;
    }
    if (c->ac != ac || c->state != CONN_SETUP)
        return;
    int step = c->setup_step++;
    int load_step = c->pubsub ? -1 : c->setup_count - 1;
    if (step == load_step) {
        /* Refused, the connection still comes up: at maxmemory Redis
         * refuses FUNCTION LOAD before it looks, and a daemon started
         * then must still drain the backlog; the scripts then run by
         * EVAL (pool_library_reply, pool.c:pool_req_write). */
        c->scripts_cached = false; /* a new connection: maybe a new Redis */
        pool_library_reply(c, reply);
    } else if (step == c->step_client_id || step == c->step_run_id) {
        setup_identity(c, step, reply);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        pool_set_error(c, "connection setup", reply->str);
        pool_conn_fail_soon(c);
        return;
    }
    if (c->setup_step == c->setup_count)
        conn_ready(c);
}

static void setup_send(struct pool_conn *c, int argc, const char **argv, const size_t *lens)
{
    if (redisAsyncCommandArgv(c->ac, setup_cb, c, argc, argv, lens) == REDIS_OK)
        c->setup_count++;
    else
        pool_conn_fail_soon(c);
}

/* Pipeline the setup commands; the connection is ready when all answered. */
static void conn_setup(struct pool_conn *c)
{
    struct pool *p = c->pool;
    char db[16];

    if (p->password != NULL) {
        const char *argv[2] = {"AUTH", p->password};
        size_t lens[2] = {4, strlen(p->password)};
        setup_send(c, 2, argv, lens);
    }
    if (p->db > 0 && !c->pubsub) {
        int n = snprintf(db, sizeof(db), "%d", p->db);
        const char *argv[2] = {"SELECT", db};
        size_t lens[2] = {6, (size_t)n};
        setup_send(c, 2, argv, lens);
    }
    c->client_id = 0;
    c->run_id[0] = '\0';
    c->step_client_id = c->step_run_id = -1;
    if (!c->pubsub) {
        /* Who this connection is, to fence it should it be lost
         * (pool_fence.c). */
        const char *id[2] = {"CLIENT", "ID"}, *info[2] = {"INFO", "server"};
        size_t id_lens[2] = {6, 2}, info_lens[2] = {4, 6};
        c->step_client_id = c->setup_count;
        setup_send(c, 2, id, id_lens);
        c->step_run_id = c->setup_count;
        setup_send(c, 2, info, info_lens);
    }
    if (!c->pubsub) {
        /* Last, so that its reply is the last of setup (setup_cb). Loaded
         * on every connection: on a cluster each node needs it, and a
         * library already there costs Redis only the lookup of its name. */
        const char *argv[3] = {"FUNCTION", "LOAD", lua_library};
        size_t lens[3] = {8, 4, lua_library_len};
        setup_send(c, 3, argv, lens);
    }
    if (c->setup_count == 0 && c->state == CONN_SETUP)
        conn_ready(c);
}

/* ---- connection timer --------------------------------------------------- */

static bool conn_overdue(const struct pool_conn *c, uint64_t now)
{
    return c->sent.first != NULL && c->sent.first->deadline <= now;
}

static void conn_timer_cb(uv_timer_t *t)
{
    struct pool_conn *c = container_of(t, struct pool_conn, timer);
    struct pool *p = c->pool;
    uint64_t now = uv_now(p->loop);

    if (p->closing)
        return;
    switch (c->state) {
    case CONN_WAIT:
        pool_conn_start(c);
        break;
    case CONN_CONNECTING:
    case CONN_SETUP:
        pool_set_error(c, "connect", "timed out");
        pool_conn_kill(c);
        break;
    case CONN_FAILING:
        pool_conn_kill(c);
        break;
    case CONN_READY:
        /* Replies come in order, so the oldest request is the first. When
         * the loop was busy its reply may be sitting unread: read before
         * judging (each read takes at most one buffer's worth). */
        for (int i = 0; i < 64 && c->state == CONN_READY && conn_overdue(c, now); i++) {
            uint64_t before = c->replies;
            redisAsyncHandleRead(c->ac);
            if (c->replies == before)
                break;
        }
        if (c->state != CONN_READY || c->sent.first == NULL)
            break;
        if (c->sent.first->deadline <= now) {
            pool_set_error(c, "request", "timed out");
            pool_conn_kill(c);
        } else {
            uv_timer_start(t, conn_timer_cb, c->sent.first->deadline - now, 0);
        }
        break;
    case CONN_IDLE:
    case CONN_CLOSED:
        break;
    }
}

void pool_conn_watch(struct pool_conn *c)
{
    struct pool *p = c->pool;

    if (!uv_is_active((uv_handle_t *)&c->timer))
        uv_timer_start(&c->timer, conn_timer_cb, p->timeout, 0);
}
