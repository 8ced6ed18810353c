/* pool: async hiredis connections on one libuv loop (see pool.h).
 *
 * Each connection walks IDLE -> CONNECTING -> SETUP -> READY and, when it
 * fails, back through WAIT (a backoff delay) to CONNECTING. One uv_timer_t
 * per connection serves whichever deadline its state needs: the connect
 * and setup deadline, the watchdog over the oldest request, the backoff
 * delay, or a deferred teardown. One uv_idle_t per pool runs what must not
 * run inside a caller's stack: failing requests that found no connection,
 * up/down notifications, and the close.
 *
 * hiredis frees a context by itself after a connect failure or an error
 * (running every pending callback with a NULL reply first); the pool only
 * ever frees one with redisAsyncFree from its own timer or idle callback,
 * never from inside a hiredis callback. */
#include "pool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <hiredis/async.h>

#include "log.h"

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

enum conn_state {
    CONN_IDLE,       /* never started (the pub/sub connection before its first subscribe) */
    CONN_WAIT,       /* down; the timer starts the next attempt */
    CONN_CONNECTING, /* connect(2) in flight; the timer is the connect deadline */
    CONN_SETUP,      /* AUTH, SELECT, SCRIPT LOAD in flight; the same deadline */
    CONN_READY,      /* serving; the timer watches the oldest request */
    CONN_FAILING,    /* the timer tears it down on the next turn */
    CONN_CLOSED,     /* the pool is closing */
};

/* One accepted request, from submission to its callback. Script calls keep
 * their formatted EVALSHA command for the NOSCRIPT resend. */
struct pool_req {
    struct pool_req *prev, *next; /* in its connection's list, oldest first, or the fail queue */
    struct pool *pool;
    struct pool_conn *conn; /* where it was sent; NULL on the fail queue */
    pool_reply_cb *cb;
    void *priv;
    uint64_t deadline; /* loop time in ms */
    int script;        /* a script id, or -1 for a plain command */
    bool resent;       /* already resent as EVAL once */
    size_t len;        /* bytes in cmd */
    size_t tail;       /* offset in cmd of the arguments after the SHA-1 */
    char cmd[];
};

/* One connection slot: the context it holds now and its requests. */
struct pool_conn {
    struct pool *pool;
    redisAsyncContext *ac; /* NULL when down; hiredis owns the memory */
    enum conn_state state;
    bool pubsub;      /* the dedicated pub/sub connection */
    bool started;     /* an attempt was made before (for the reconnect count) */
    int setup_step;   /* setup replies received so far */
    int setup_count;  /* setup commands sent */
    uint64_t backoff; /* the current backoff ceiling, ms */
    uint64_t replies; /* replies received, to see a read make progress */
    struct pool_req *first, *last;
    uv_timer_t timer;
};

/* The libuv side of one hiredis context (our own adapter, see poll_cb). */
struct pool_poll {
    uv_poll_t handle;
    redisAsyncContext *ac; /* NULL once hiredis cleaned up */
    struct pool *pool;
    int events;
};

/* One channel subscription, replayed on every (re)connect. */
struct pool_sub {
    struct pool_sub *next;
    void (*cb)(void *priv, const char *channel, const char *msg, size_t len);
    void *priv;
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
    struct pool_conn *conns; /* size command connections, then the pub/sub one */
    int ready;               /* READY command connections */
    int cursor;              /* round-robin position */
    bool notified_up;        /* what on_state was last told */
    bool closing;
    bool closed; /* handles are being closed; free when open_handles is 0 */
    int open_handles;
    struct pool_req *fail_first, *fail_last; /* requests to fail on the next turn */
    struct pool_sub *subs;
    uv_idle_t idle;
    void (*state_cb)(void *priv, bool up);
    void *state_priv;
    void (*done)(void *priv);
    void *done_priv;
    uint64_t rng;
    struct pool_stats stats;
    char error[128];
};

static void conn_timer_cb(uv_timer_t *t);
static void conn_setup(struct pool_conn *c);
static void conn_down(struct pool_conn *c);
static void pool_kick(struct pool *p);

/* Remember why a connection failed, and log it once: a reconnect loop
 * failing the same way again logs at debug level only. */
static void pool_set_error(struct pool *p, const char *what, const char *detail)
{
    char msg[sizeof(p->error)];

    snprintf(msg, sizeof(msg), "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
    if (strcmp(msg, p->error) != 0)
        log_warn("redis: %s", msg);
    else
        log_debug("redis: %s", msg);
    memcpy(p->error, msg, sizeof(msg));
}

/* ---- libuv adapter ------------------------------------------------------
 * hiredis 0.14's adapters/libuv.h drops a poll error (status < 0) on the
 * floor, and libuv reports a refused connect or a reset as exactly that, so
 * the context would never learn of it. This adapter hands errors to hiredis
 * as the events it was waiting for, so its read or write sees the error. */

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct pool_poll *pp = h->data;

    if (status < 0)
        events = pp->events;
    if (pp->ac != NULL && (events & UV_READABLE))
        redisAsyncHandleRead(pp->ac);
    if (pp->ac != NULL && (events & UV_WRITABLE))
        redisAsyncHandleWrite(pp->ac);
}

static void poll_update(struct pool_poll *pp, int add, int del)
{
    pp->events = (pp->events | add) & ~del;
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
    poll_update(data, UV_WRITABLE, 0);
}

static void poll_del_write(void *data)
{
    poll_update(data, 0, UV_WRITABLE);
}

static void pool_maybe_done(struct pool *p);

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
    if ((p->ready > 0) != p->notified_up)
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

/* Start one connection attempt; on an immediate failure wait a backoff. */
static void conn_start(struct pool_conn *c)
{
    struct pool *p = c->pool;
    redisAsyncContext *ac;

    if (c->started)
        p->stats.reconnects++;
    c->started = true;
    if (p->unix_path != NULL)
        ac = redisAsyncConnectUnix(p->unix_path);
    else
        ac = redisAsyncConnect(p->host, p->port);
    if (ac == NULL || ac->err) {
        pool_set_error(p, "connect", ac != NULL ? ac->errstr : "out of memory");
        goto err_free;
    }
    if (poll_attach(p, ac) < 0) {
        pool_set_error(p, "connect", "cannot watch the socket");
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
    if (p->closing) {
        conn_set_state(c, CONN_CLOSED);
        uv_timer_stop(&c->timer);
        return;
    }
    conn_set_state(c, CONN_WAIT);
    uv_timer_start(&c->timer, conn_timer_cb, conn_next_delay(c), 0);
}

/* hiredis is freeing ac (a NULL reply, a failed connect, or its
 * disconnect callback): forget it. Only the first notice about the
 * current context counts. */
static void conn_gone(struct pool_conn *c, const redisAsyncContext *ac, const char *what)
{
    if (c->ac != ac || ac == NULL)
        return;
    pool_set_error(c->pool, what, ac->errstr[0] != '\0' ? ac->errstr : "closed");
    conn_down(c);
}

/* Tear c's context down now, failing its requests. Only from our own timer
 * or idle callbacks: redisAsyncFree must not run inside hiredis. */
static void conn_kill(struct pool_conn *c)
{
    redisAsyncContext *ac = c->ac;

    /* Out of rotation before the callbacks run, so none resubmits here. */
    conn_set_state(c, CONN_FAILING);
    c->ac = NULL;
    if (ac != NULL) {
        ac->data = NULL;
        redisAsyncFree(ac);
    }
    conn_down(c);
}

/* Tear c down on the next turn (from inside a hiredis callback). */
static void conn_fail_soon(struct pool_conn *c)
{
    if (c->state == CONN_FAILING || c->state == CONN_CLOSED)
        return;
    conn_set_state(c, CONN_FAILING);
    uv_timer_start(&c->timer, conn_timer_cb, 0, 0);
}

static void sub_cb(redisAsyncContext *ac, void *r, void *privdata);

static void sub_send(struct pool_conn *c, struct pool_sub *s)
{
    const char *argv[2] = {"SUBSCRIBE", s->channel};
    size_t lens[2] = {9, s->len};

    if (redisAsyncCommandArgv(c->ac, sub_cb, s, 2, argv, lens) != REDIS_OK)
        conn_fail_soon(c);
}

static void conn_ready(struct pool_conn *c)
{
    struct pool *p = c->pool;

    uv_timer_stop(&c->timer);
    c->backoff = p->backoff_min;
    conn_set_state(c, CONN_READY);
    if (c->pubsub)
        for (struct pool_sub *s = p->subs; s != NULL && c->state == CONN_READY; s = s->next)
            sub_send(c, s);
}

static void conn_connect_cb(const redisAsyncContext *ac, int status)
{
    struct pool_conn *c = ac->data;

    if (c == NULL || c->ac != ac)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context right after this returns. */
        conn_gone(c, ac, "connect");
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
    conn_gone(c, ac, "connection lost");
}

/* One setup reply: AUTH, SELECT, then one SCRIPT LOAD per script. */
static void setup_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    struct pool_conn *c = privdata;
    redisReply *reply = r;
    struct pool *p = c->pool;

    if (reply == NULL) {
        conn_gone(c, ac, "connection lost");
        return;
    }
    if (c->ac != ac || c->state != CONN_SETUP)
        return;
    int step = c->setup_step++;
    int first_script = c->setup_count - (c->pubsub ? 0 : SCRIPT__COUNT);
    if (reply->type == REDIS_REPLY_ERROR) {
        pool_set_error(p, "connection setup", reply->str);
        conn_fail_soon(c);
        return;
    }
    if (step >= first_script) {
        const struct script *s = &script_table[step - first_script];
        if (reply->type != REDIS_REPLY_STRING || strcmp(reply->str, s->sha1) != 0) {
            pool_set_error(p, "SCRIPT LOAD returned another SHA-1 for", s->name);
            conn_fail_soon(c);
            return;
        }
    }
    if (c->setup_step == c->setup_count)
        conn_ready(c);
}

static void setup_send(struct pool_conn *c, int argc, const char **argv, const size_t *lens)
{
    if (redisAsyncCommandArgv(c->ac, setup_cb, c, argc, argv, lens) == REDIS_OK)
        c->setup_count++;
    else
        conn_fail_soon(c);
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
    for (int i = 0; i < SCRIPT__COUNT && !c->pubsub; i++) {
        const char *argv[3] = {"SCRIPT", "LOAD", script_table[i].source};
        size_t lens[3] = {6, 4, script_table[i].length};
        setup_send(c, 3, argv, lens);
    }
    if (c->setup_count == 0 && c->state == CONN_SETUP)
        conn_ready(c);
}

/* ---- requests ------------------------------------------------------------ */

static void req_link(struct pool_conn *c, struct pool_req *r)
{
    struct pool *p = c->pool;

    r->conn = c;
    r->deadline = uv_now(p->loop) + p->timeout;
    r->next = NULL;
    r->prev = c->last;
    if (c->last != NULL)
        c->last->next = r;
    else
        c->first = r;
    c->last = r;
    if (!uv_is_active((uv_handle_t *)&c->timer))
        uv_timer_start(&c->timer, conn_timer_cb, p->timeout, 0);
}

static void req_unlink(struct pool_req *r)
{
    struct pool_conn *c = r->conn;

    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        c->first = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    else
        c->last = r->prev;
    r->conn = NULL;
}

/* Deliver the outcome and free the request. */
static void req_finish(struct pool_req *r, redisReply *reply)
{
    struct pool *p = r->pool;

    p->stats.inflight--;
    if (reply == NULL)
        p->stats.failures++;
    r->cb(r->priv, reply != NULL ? 0 : POOL_EUNAVAILABLE, reply);
    free(r);
}

static struct pool_conn *pool_pick(struct pool *p)
{
    for (int i = 0; i < p->size && p->ready > 0; i++) {
        int at = (p->cursor + i) % p->size;
        if (p->conns[at].state == CONN_READY) {
            p->cursor = (at + 1) % p->size;
            return &p->conns[at];
        }
    }
    return NULL;
}

/* Fail r on the next turn: no connection could take it. */
static void req_fail_later(struct pool *p, struct pool_req *r)
{
    r->conn = NULL;
    r->next = NULL;
    r->prev = p->fail_last;
    if (p->fail_last != NULL)
        p->fail_last->next = r;
    else
        p->fail_first = r;
    p->fail_last = r;
    pool_kick(p);
}

static void req_reply_cb(redisAsyncContext *ac, void *r, void *privdata);

/* Send r (and, for a plain command, its argv) on a ready connection. */
static void req_dispatch(struct pool *p, struct pool_req *r, const char *cmd, size_t len, int argc,
                         const char **argv, const size_t *lens)
{
    struct pool_conn *c;

    while ((c = pool_pick(p)) != NULL) {
        int rc = cmd != NULL ? redisAsyncFormattedCommand(c->ac, req_reply_cb, r, cmd, len)
                             : redisAsyncCommandArgv(c->ac, req_reply_cb, r, argc, argv, lens);
        if (rc == REDIS_OK) {
            req_link(c, r);
            return;
        }
        conn_fail_soon(c);
    }
    req_fail_later(p, r);
}

static size_t resp_digits(size_t n)
{
    size_t d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

static char *resp_put_uint(char *w, size_t n)
{
    size_t d = resp_digits(n);

    for (size_t i = d; i > 0; i--) {
        w[i - 1] = (char)('0' + n % 10);
        n /= 10;
    }
    return w + d;
}

/* "*<n>\r\n" or "$<n>\r\n". */
static char *resp_put_num(char *w, char mark, size_t n)
{
    *w++ = mark;
    w = resp_put_uint(w, n);
    *w++ = '\r';
    *w++ = '\n';
    return w;
}

static char *resp_put_arg(char *w, const char *s, size_t n)
{
    w = resp_put_num(w, '$', n);
    memcpy(w, s, n);
    w += n;
    *w++ = '\r';
    *w++ = '\n';
    return w;
}

static size_t resp_arg_len(size_t n)
{
    return 1 + resp_digits(n) + 2 + n + 2;
}

/* On NOSCRIPT: send r again as EVAL with the script source (which also
 * caches the script). Returns 0 when sent. */
static int req_resend_eval(struct pool *p, struct pool_req *r)
{
    const struct script *s = &script_table[r->script];
    const char *hdr_end = memchr(r->cmd, '\n', r->len);
    size_t hdr = (size_t)(hdr_end - r->cmd) + 1;
    size_t len = hdr + resp_arg_len(4) + resp_arg_len(s->length) + (r->len - r->tail);
    char *buf = malloc(len), *w;

    if (buf == NULL)
        return -ENOMEM;
    memcpy(buf, r->cmd, hdr);
    w = resp_put_arg(buf + hdr, "EVAL", 4);
    w = resp_put_arg(w, s->source, s->length);
    memcpy(w, r->cmd + r->tail, r->len - r->tail);
    r->resent = true;
    p->stats.noscript++;
    req_dispatch(p, r, buf, len, 0, NULL, NULL);
    free(buf);
    return 0;
}

static void req_reply_cb(redisAsyncContext *ac, void *rep, void *privdata)
{
    struct pool_req *r = privdata;
    struct pool_conn *c = r->conn;
    redisReply *reply = rep;

    c->replies++;
    req_unlink(r);
    if (reply == NULL) {
        /* hiredis is freeing the context: take it out of rotation before
         * the caller's callback can submit again. */
        conn_gone(c, ac, "connection lost");
    } else if (r->script >= 0 && !r->resent && reply->type == REDIS_REPLY_ERROR &&
               strncmp(reply->str, "NOSCRIPT", 8) == 0) {
        if (req_resend_eval(r->pool, r) == 0)
            return;
        reply = NULL;
    }
    req_finish(r, reply);
}

static int req_check(const struct pool *p, int argc, const char **argv, pool_reply_cb *cb)
{
    if (p->closing)
        return -ESHUTDOWN;
    if (argc < 0 || (argc > 0 && argv == NULL) || cb == NULL)
        return -EINVAL;
    return 0;
}

static size_t arg_len(const char **argv, const size_t *lens, int i)
{
    return lens != NULL ? lens[i] : strlen(argv[i]);
}

int pool_script(struct pool *p, enum script_id id, const struct keys *k, int argc,
                const char **argv, const size_t *lens, pool_reply_cb *cb, void *priv)
{
    int err = req_check(p, argc, argv, cb);
    if (err < 0)
        return err;
    if ((int)id < 0 || id >= SCRIPT__COUNT || k == NULL)
        return -EINVAL;

    /* EVALSHA sha numkeys KEYS... prefix ARGV... as one RESP command. */
    const struct script *s = &script_table[id];
    size_t nargs = 3 + KEY__COUNT + 1 + (size_t)argc;
    size_t len = 1 + resp_digits(nargs) + 2 + resp_arg_len(7) + resp_arg_len(40);
    size_t tail = len;
    len += resp_arg_len(resp_digits(KEY__COUNT)) + resp_arg_len(k->prefix_len);
    for (int i = 0; i < KEY__COUNT; i++)
        len += resp_arg_len(k->lens[i]);
    for (int i = 0; i < argc; i++)
        len += resp_arg_len(arg_len(argv, lens, i));

    struct pool_req *r = malloc(sizeof(*r) + len);
    if (r == NULL)
        return -ENOMEM;
    *r = (struct pool_req){
        .pool = p, .cb = cb, .priv = priv, .script = id, .len = len, .tail = tail};
    char numkeys[24], *w = r->cmd;
    size_t numkeys_len = (size_t)(resp_put_uint(numkeys, KEY__COUNT) - numkeys);
    w = resp_put_num(w, '*', nargs);
    w = resp_put_arg(w, "EVALSHA", 7);
    w = resp_put_arg(w, s->sha1, 40);
    w = resp_put_arg(w, numkeys, numkeys_len);
    for (int i = 0; i < KEY__COUNT; i++)
        w = resp_put_arg(w, k->names[i], k->lens[i]);
    w = resp_put_arg(w, k->prefix, k->prefix_len);
    for (int i = 0; i < argc; i++)
        w = resp_put_arg(w, argv[i], arg_len(argv, lens, i));

    p->stats.requests++;
    p->stats.inflight++;
    req_dispatch(p, r, r->cmd, r->len, 0, NULL, NULL);
    return 0;
}

int pool_command(struct pool *p, int argc, const char **argv, const size_t *lens, pool_reply_cb *cb,
                 void *priv)
{
    int err = req_check(p, argc, argv, cb);
    if (err < 0)
        return err;
    if (argc < 1)
        return -EINVAL;

    struct pool_req *r = malloc(sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    *r = (struct pool_req){.pool = p, .cb = cb, .priv = priv, .script = -1};
    p->stats.requests++;
    p->stats.inflight++;
    req_dispatch(p, r, NULL, 0, argc, argv, lens);
    return 0;
}

/* ---- pub/sub ------------------------------------------------------------- */

static void sub_cb(redisAsyncContext *ac, void *r, void *privdata)
{
    struct pool_sub *s = privdata;
    redisReply *reply = r;

    if (reply == NULL) {
        /* The context is going; its pool is the one holding ac. */
        struct pool_conn *c = ac->data;
        if (c != NULL)
            conn_gone(c, ac, "connection lost");
        return;
    }
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
        reply->element[0]->type == REDIS_REPLY_STRING &&
        strcmp(reply->element[0]->str, "message") == 0 &&
        reply->element[2]->type == REDIS_REPLY_STRING)
        s->cb(s->priv, s->channel, reply->element[2]->str, reply->element[2]->len);
}

int pool_subscribe(struct pool *p, const char *channel,
                   void (*on_message)(void *priv, const char *channel, const char *msg, size_t len),
                   void *priv)
{
    struct pool_conn *c = &p->conns[p->size];
    size_t len;
    struct pool_sub *s, **tail = &p->subs;

    if (p->closing)
        return -ESHUTDOWN;
    if (channel == NULL || on_message == NULL)
        return -EINVAL;
    len = strlen(channel);
    for (; *tail != NULL; tail = &(*tail)->next)
        if ((*tail)->len == len && memcmp((*tail)->channel, channel, len) == 0)
            return -EEXIST;
    s = malloc(sizeof(*s) + len + 1);
    if (s == NULL)
        return -ENOMEM;
    *s = (struct pool_sub){.cb = on_message, .priv = priv, .len = len};
    memcpy(s->channel, channel, len + 1);
    *tail = s;
    if (c->state == CONN_IDLE)
        conn_start(c);
    else if (c->state == CONN_READY)
        sub_send(c, s);
    return 0;
}

/* ---- timers, idle, close ------------------------------------------------ */

static bool conn_overdue(const struct pool_conn *c, uint64_t now)
{
    return c->first != NULL && c->first->deadline <= now;
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
        conn_start(c);
        break;
    case CONN_CONNECTING:
    case CONN_SETUP:
        pool_set_error(p, "connect", "timed out");
        conn_kill(c);
        break;
    case CONN_FAILING:
        conn_kill(c);
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
        if (c->state != CONN_READY || c->first == NULL)
            break;
        if (c->first->deadline <= now) {
            pool_set_error(p, "request", "timed out");
            conn_kill(c);
        } else {
            uv_timer_start(t, conn_timer_cb, c->first->deadline - now, 0);
        }
        break;
    case CONN_IDLE:
    case CONN_CLOSED:
        break;
    }
}

static void pool_handle_close_cb(uv_handle_t *h)
{
    struct pool *p = h->data;

    p->open_handles--;
    pool_maybe_done(p);
}

static void pool_maybe_done(struct pool *p)
{
    if (!p->closed || p->open_handles > 0)
        return;
    void (*done)(void *) = p->done;
    void *priv = p->done_priv;
    while (p->subs != NULL) {
        struct pool_sub *s = p->subs;
        p->subs = s->next;
        free(s);
    }
    free(p->conns);
    free(p->host);
    free(p->unix_path);
    free(p->password);
    free(p);
    if (done != NULL)
        done(priv);
}

static void pool_fail_queued(struct pool *p)
{
    struct pool_req *r = p->fail_first;

    p->fail_first = p->fail_last = NULL;
    while (r != NULL) {
        struct pool_req *next = r->next;
        req_finish(r, NULL);
        r = next;
    }
}

static void pool_close_now(struct pool *p)
{
    for (int i = 0; i <= p->size; i++) {
        struct pool_conn *c = &p->conns[i];
        uv_timer_stop(&c->timer);
        if (c->ac != NULL)
            conn_kill(c);
        c->state = CONN_CLOSED;
    }
    pool_fail_queued(p);
    p->closed = true;
    for (int i = 0; i <= p->size; i++)
        uv_close((uv_handle_t *)&p->conns[i].timer, pool_handle_close_cb);
    uv_close((uv_handle_t *)&p->idle, pool_handle_close_cb);
}

static void pool_idle_cb(uv_idle_t *h)
{
    struct pool *p = h->data;

    if (p->closing) {
        pool_close_now(p);
        return;
    }
    pool_fail_queued(p);
    bool up = p->ready > 0;
    if (up != p->notified_up && !p->closing) {
        p->notified_up = up;
        if (p->state_cb != NULL)
            p->state_cb(p->state_priv, up);
    }
    if (!p->closing && p->fail_first == NULL && (p->ready > 0) == p->notified_up)
        uv_idle_stop(&p->idle);
}

static void pool_kick(struct pool *p)
{
    if (!p->closed)
        uv_idle_start(&p->idle, pool_idle_cb);
}

void pool_close(struct pool *p, void (*done)(void *priv), void *priv)
{
    if (p->closing)
        return;
    p->closing = true;
    p->done = done;
    p->done_priv = priv;
    pool_kick(p);
}

/* ---- construction and queries ------------------------------------------ */

static int pool_dup(char **dst, const char *src)
{
    *dst = NULL;
    if (src == NULL)
        return 0;
    *dst = strdup(src);
    return *dst != NULL ? 0 : -ENOMEM;
}

static int pool_config_check(const struct pool_config *cfg)
{
    unsigned char addr[sizeof(struct in6_addr)];
    struct sockaddr_un sa;

    if (cfg->size < 1 || cfg->port < 0 || cfg->port > 65535 || cfg->db < 0)
        return -EINVAL;
    if (cfg->unix_path != NULL)
        return strlen(cfg->unix_path) < sizeof(sa.sun_path) ? 0 : -EINVAL;
    /* Only an IP literal: hiredis would resolve a name with a blocking
     * getaddrinfo on the loop. */
    if (cfg->host != NULL && inet_pton(AF_INET, cfg->host, addr) != 1 &&
        inet_pton(AF_INET6, cfg->host, addr) != 1)
        return -EINVAL;
    return 0;
}

int pool_new(uv_loop_t *loop, const struct pool_config *cfg, struct pool **out)
{
    int err = pool_config_check(cfg);
    if (err < 0)
        return err;
    struct pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    p->conns = calloc((size_t)cfg->size + 1, sizeof(*p->conns));
    if (p->conns == NULL || pool_dup(&p->host, cfg->host ? cfg->host : "127.0.0.1") < 0 ||
        pool_dup(&p->unix_path, cfg->unix_path) < 0 || pool_dup(&p->password, cfg->password) < 0)
        goto err_free;

    p->loop = loop;
    p->port = cfg->port > 0 ? cfg->port : 6379;
    p->db = cfg->db;
    p->size = cfg->size;
    p->timeout = cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000;
    p->backoff_min = cfg->backoff_min_ms > 0 ? cfg->backoff_min_ms : 50;
    p->backoff_max = cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : 2000;
    if (p->backoff_max < p->backoff_min)
        p->backoff_max = p->backoff_min;
    p->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)p) | 1;
    p->stats.size = p->size;

    /* Handles cannot fail to initialise on a live loop. */
    uv_idle_init(loop, &p->idle);
    p->idle.data = p;
    p->open_handles++;
    for (int i = 0; i <= p->size; i++) {
        struct pool_conn *c = &p->conns[i];
        c->pool = p;
        c->pubsub = i == p->size;
        c->backoff = p->backoff_min;
        uv_timer_init(loop, &c->timer);
        c->timer.data = p;
        p->open_handles++;
    }
    for (int i = 0; i < p->size; i++)
        conn_start(&p->conns[i]);
    *out = p;
    return 0;

err_free:
    free(p->conns);
    free(p->host);
    free(p->unix_path);
    free(p->password);
    free(p);
    return -ENOMEM;
}

void pool_on_state(struct pool *p, void (*cb)(void *priv, bool up), void *priv)
{
    p->state_cb = cb;
    p->state_priv = priv;
}

bool pool_up(const struct pool *p)
{
    return p->ready > 0;
}

void pool_stats(const struct pool *p, struct pool_stats *out)
{
    *out = p->stats;
    out->connected = p->ready;
}

const char *pool_last_error(const struct pool *p)
{
    return p->error;
}
