/* pool: async hiredis connections on one libuv loop (see pool.h).
 *
 * This file takes requests, spreads them over the ready connections and
 * delivers their replies, and closes the pool; each connection's
 * lifecycle is in pool_conn.c, construction in pool_new.c, cluster
 * routing in pool_cluster.c, replica-acks in pool_ack.c, fences in
 * pool_fence.c and wakes (sharded pub/sub) in pool_sub.c. One uv_idle_t
 * per pool runs what must not run inside a caller's stack: failing
 * requests that found no connection, up/down notifications, and the
 * close. */
#include "pool_internal.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "hist.h"
#include "resp.h"

/* ---- requests ------------------------------------------------------------ */

static void list_append(struct pool_req_list *l, struct pool_req *r)
{
    r->next = NULL;
    r->prev = l->last;
    if (l->last != NULL)
        l->last->next = r;
    else
        l->first = r;
    l->last = r;
}

/* Take every request off l, oldest first, as a plain chain. */
static struct pool_req *list_take(struct pool_req_list *l)
{
    struct pool_req *r = l->first;
    l->first = l->last = NULL;
    return r;
}

static void req_link(struct pool_conn *c, struct pool_req *r)
{
    struct pool *p = c->pool;

    r->conn = c;
    r->deadline = uv_now(p->loop) + p->timeout;
    r->sent_ns = uv_hrtime();
    if (r->first_ms == 0)
        r->first_ms = uv_now(p->loop);
    list_append(&c->sent, r);
    pool_conn_watch(c);
}

static void req_unlink(struct pool_req *r)
{
    struct pool_conn *c = r->conn;

    if (r->prev != NULL)
        r->prev->next = r->next;
    else
        c->sent.first = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    else
        c->sent.last = r->prev;
    r->conn = NULL;
}

const uint64_t pool_rtt_bounds_us[POOL_RTT_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 500000, 2000000};

static void rtt_record(struct pool_stats *st, uint64_t sent_ns)
{
    uint64_t us = (uv_hrtime() - sent_ns) / 1000;
    st->rtt_buckets[hist_bucket(pool_rtt_bounds_us, POOL_RTT_BUCKETS, us)]++;
    st->rtt_count++;
    st->rtt_sum_us += us;
}

/* Deliver the outcome (reply, or with none the failure status) and free
 * the request. */
void pool_req_finish(struct pool_req *r, redisReply *reply, int failure)
{
    struct pool *p = r->pool;

    if (r->ack_req != NULL) { /* its WAIT no longer speaks for it */
        r->ack_req->priv = NULL;
        r->ack_req = NULL;
    }
    p->stats.inflight--;
    if (reply == NULL)
        p->stats.failures++;
    else if (r->sent_ns != 0)
        rtt_record(&p->stats, r->sent_ns);
    if (r->route != NULL) {
        assert(r->route->inflight > 0);
        r->route->inflight--;
    }
    assert(p->held_bytes >= sizeof(*r) + r->len);
    p->held_bytes -= sizeof(*r) + r->len;
    r->cb(r->priv, reply != NULL ? 0 : failure, reply);
    free(r);
}

struct pool_conn *pool_pick(struct pool *p)
{
    int n = pool_nconn(p);
    for (int i = 0; i < n && p->ready > 0; i++) {
        int at = (p->cursor + i) % n;
        if (p->conns[at].state == CONN_READY) {
            p->cursor = (at + 1) % n;
            return &p->conns[at];
        }
    }
    return NULL;
}

/* Where request r goes. With a route rt: the connection the route is on
 * while any of its requests is out there (or, on a cluster, waits there
 * for it to connect), so they run in order; else its home connection, or
 * any ready one while home is down; on a cluster, the same on the node
 * that owns its slot. A connection that went down with requests of rt on
 * it fails them (their outcome is unknown to the caller), and only then
 * may rt move with some still out. Without a route: any ready connection,
 * or on a cluster one of the owner of its key's slot. */
static struct pool_conn *route_pick(struct pool *p, struct pool_req *r)
{
    struct pool_route *rt = r->route;
    if (rt == NULL) {
        if (!p->cluster || r->slot < 0)
            return pool_pick(p);
        return pool_node_pick(p, p->slot_node[r->slot], (uint16_t)r->slot);
    }
    if (rt->inflight > 1 && rt->conn >= 0) {
        struct pool_conn *at = &p->conns[rt->conn];
        if (at->state == CONN_READY ||
            (p->cluster && (at->state == CONN_CONNECTING || at->state == CONN_SETUP)))
            return at;
    }
    if (p->cluster)
        return pool_node_pick(p, p->slot_node[rt->slot], rt->slot);
    struct pool_conn *home = &p->conns[rt->slot % p->size];
    return home->state == CONN_READY ? home : pool_pick(p);
}

/* Fail r on the next turn: no connection could take it, or it waited on
 * one that went. It was never written (or, after "Function not found",
 * it did not run): POOL_ENOTSENT. */
void pool_req_fail_later(struct pool *p, struct pool_req *r)
{
    r->conn = NULL;
    list_append(&p->failing, r);
    pool_kick(p);
}

static void req_reply_cb(redisAsyncContext *ac, void *r, void *privdata);

/* Whether r, about to be written on c, needs ASKING first (see pool_req_write). */
static bool p_cluster_asking(const struct pool_conn *c, const struct pool_req *r)
{
    const struct pool *p = c->pool;
    if (!p->cluster)
        return false;
    if (r->asking)
        return true;
    int slot = r->route != NULL ? r->route->slot : r->slot;
    return slot >= 0 && p->slot_node[slot] != c->node;
}

/* Write FUNCTION LOAD of the library on c (pool_library_load_cb takes
 * its reply). 0, or -1 when hiredis refused it (c is then failing). */
static int library_load(struct pool_conn *c)
{
    const char *argv[3] = {"FUNCTION", "LOAD", lua_library};
    size_t lens[3] = {8, 4, lua_library_len};
    if (redisAsyncCommandArgv(c->ac, pool_library_load_cb, c, 3, argv, lens) != REDIS_OK) {
        pool_conn_fail_soon(c);
        return -1;
    }
    c->load_tried_ms = uv_now(c->pool->loop);
    return 0;
}

/* Write SCRIPT LOAD of every fallback script on c, so that the EVALSHAs
 * written after find them all: were some cached and others not, a call
 * refused NOSCRIPT and resent could run after a later one that was not
 * (one connection is in order only for what runs). 0, or -1 (c is then
 * failing). */
static int scripts_load(struct pool_conn *c)
{
    for (int i = 0; i < SCRIPT__COUNT; i++) {
        const char *argv[3] = {"SCRIPT", "LOAD", script_table[i].source};
        size_t lens[3] = {6, 4, script_table[i].length};
        if (redisAsyncCommandArgv(c->ac, NULL, NULL, 3, argv, lens) != REDIS_OK) {
            pool_conn_fail_soon(c);
            return -1;
        }
    }
    c->scripts_cached = true;
    return 0;
}

/* Script call r by EVALSHA of its fallback script: the same arguments
 * after the verb and its function's name (r->tail on), so the same
 * count. */
static int write_evalsha(struct pool_conn *c, struct pool_req *r)
{
    const struct script *s = &script_table[r->script];
    const char *hdr_end = memchr(r->cmd, '\n', r->len);
    size_t hdr = (size_t)(hdr_end - r->cmd) + 1;
    size_t len = hdr + resp_arg_len(7) + resp_arg_len(40) + (r->len - r->tail);
    char *buf = malloc(len), *w;
    if (buf == NULL)
        return REDIS_ERR;
    memcpy(buf, r->cmd, hdr);
    w = resp_put_arg(buf + hdr, "EVALSHA", 7);
    w = resp_put_arg(w, s->sha1, 40);
    memcpy(w, r->cmd + r->tail, r->len - r->tail);
    int rc = redisAsyncFormattedCommand(c->ac, req_reply_cb, r, buf, len);
    free(buf);
    return rc;
}

/* Write r on c: its command (FCALL for a script call). A call Redis
 * refused with "Function not found" goes behind a FUNCTION LOAD, one per
 * connection per release. On a connection whose Redis would not load the
 * library (c->by_eval: at maxmemory, an ACL without FUNCTION) a script
 * call goes by EVALSHA of its fallback script, behind a SCRIPT LOAD of
 * them all whenever the cache may have lost them (entering that mode,
 * NOSCRIPT), and now and then a FUNCTION LOAD goes before it, to leave
 * that mode once Redis takes the library (scripts/embed_lua.py).
 * Returns 0, or -1 when hiredis refused it (c is then failing). */
int pool_req_write(struct pool_conn *c, struct pool_req *r)
{
    int rc;
    /* On a cluster, a request sent to a node other than its slot's owner
     * in the map was sent there by ASK (it, or the one of its route before
     * it): the importing node serves it only after ASKING. */
    if (p_cluster_asking(c, r) &&
        redisAsyncFormattedCommand(c->ac, NULL, NULL, "*1\r\n$6\r\nASKING\r\n", 16) != REDIS_OK) {
        pool_conn_fail_soon(c);
        return -1;
    }
    if (r->reload || r->noscript) {
        r->resends++;
        r->pool->stats.reloaded++;
    }
    if (r->script >= 0 && c->by_eval) {
        unsigned shift = c->load_refusals > 5 ? 5 : c->load_refusals;
        uint64_t wait = (1000u << shift) / 2; /* 1 s after the first refusal, up to 16 s */
        if (uv_now(c->pool->loop) - c->load_tried_ms >= wait && library_load(c) != 0)
            return -1;
        if (!c->scripts_cached && scripts_load(c) != 0)
            return -1;
        rc = write_evalsha(c, r);
    } else {
        /* Ahead of it on the same connection, so Redis has the library
         * again when the call runs (one connection is in order). A load
         * that meets the library already there (another connection's,
         * another daemon's) is as good as its own (pool_library_loaded). */
        if (r->reload && c->loaded_in != c->pool->releases) {
            if (library_load(c) != 0)
                return -1;
            c->loaded_in = c->pool->releases;
        }
        rc = redisAsyncFormattedCommand(c->ac, req_reply_cb, r, r->cmd, r->len);
    }
    r->reload = r->noscript = false;
    if (rc != REDIS_OK) {
        pool_conn_fail_soon(c);
        return -1;
    }
    req_link(c, r);
    /* A read (a no-writes script, a plain read) has nothing for a
     * replica to confirm: no WAIT, no round trip. */
    if (c->pool->replica_acks > 0 && r->writes)
        pool_ack_write(c, r);
    return 0;
}

/* Write r on c, or have it wait there while c is held or connecting. */
static void req_place(struct pool_conn *c, struct pool_req *r)
{
    if (c->holding || c->state != CONN_READY) {
        c->holding = true;
        r->conn = c;
        list_append(&c->held, r);
    } else if (pool_req_write(c, r) != 0) {
        pool_req_fail_later(c->pool, r);
    }
}

/* Send r on a ready connection (held there if that connection is held),
 * or fail it on the next turn. */
static void req_dispatch(struct pool *p, struct pool_req *r)
{
    struct pool_conn *c;

    while ((c = route_pick(p, r)) != NULL) {
        if (r->route != NULL)
            r->route->conn = (int)(c - p->conns);
        if (c->holding || c->state != CONN_READY) {
            /* Held, or (cluster) still connecting: it waits, in order. */
            c->holding = true;
            r->conn = c;
            list_append(&c->held, r);
            return;
        }
        if (pool_req_write(c, r) == 0)
            return;
    }
    pool_req_fail_later(p, r);
}

/* Resend r, one of the bounced requests (redo) of held connection c:
 * after MOVED or ASK to the node that serves it now, after TRYAGAIN to
 * the same node, after "Function not found" on c behind a FUNCTION LOAD
 * (pool_req_write). A request whose route has
 * had one resent in this release (gen) follows that one instead, to the
 * same connection and behind it, whatever its own bounce said: r was
 * written after it, and split over two nodes the later one could take
 * effect first (r1 answered TRYAGAIN and r2 ASK when a MIGRATE batch ran
 * between them; r2 on the importing node may run while r1 still waits
 * on the old owner). Where the first went, r is bounced again if it must
 * (docs/ARCHITECTURE.md 7.3). */
static void redo_place(struct pool_conn *c, struct pool_req *r, uint64_t gen)
{
    struct pool *p = c->pool;
    struct pool_route *rt = r->route;
    struct pool_conn *to = c;

    if (rt != NULL && rt->release == gen && rt->conn >= 0) {
        to = &p->conns[rt->conn];
        r->asking = false; /* ASKING goes where the map says the slot is not (pool_req_write) */
        /* What it met where it was is not a redirect it followed: it may
         * be bounced there again for as long as the first is (whose own
         * redirects and TRYAGAIN waits are bounded). */
        r->redirects = 0;
    } else if (r->target >= 0) {
        int slot = rt != NULL ? rt->slot : r->slot;
        to = pool_node_pick(p, r->target, (uint16_t)(slot < 0 ? 0 : slot));
    }
    r->target = -1;
    if (to == NULL) {
        pool_req_fail_later(p, r);
        return;
    }
    if (rt != NULL) {
        rt->release = gen;
        rt->conn = (int)(to - p->conns);
    }
    req_place(to, r);
    /* What was submitted meanwhile waits until the resent ones have
     * answered: if they are bounced again, it stays behind them. */
    to->holding = true;
}

/* A held connection with nothing written left unanswered: resend the
 * bounced ones (redo, in order); the route of each moves with the first
 * of its requests resent (redo_place). Then what waited (held): while a
 * connection has resent requests unanswered it stays held, so what
 * waited is written once they have answered, wherever its route went
 * (route_pick), and after them even if they are bounced again. Held
 * requests need not bounce as the resent ones did: a route's calls need
 * not declare the same keys. A write hiredis refuses fails c, and what
 * is left waits for it to go. */
static void conn_release(struct pool_conn *c)
{
    struct pool *p = c->pool;
    struct pool_req *redo = list_take(&c->redo), *held = list_take(&c->held);
    uint64_t gen = ++p->releases;
    c->holding = false;
    for (int pass = 0; pass < 2; pass++) {
        struct pool_req *r = pass == 0 ? redo : held;
        while (r != NULL) {
            struct pool_req *next = r->next;
            if (c->state != CONN_READY || (pass == 1 && c->holding)) {
                /* Failed, or resends of c out: the rest waits, in order. */
                r->conn = c;
                list_append(pass == 0 ? &c->redo : &c->held, r);
                c->holding = true;
            } else if (pass == 0) {
                redo_place(c, r, gen);
            } else if (p->cluster && !r->pinned) {
                req_dispatch(p, r); /* the map may have moved it */
            } else {
                req_place(c, r);
            }
            r = next;
        }
    }
    if (c->state != CONN_READY)
        pool_conn_fail_held(c);
}

void pool_conn_release_waiting(struct pool_conn *c)
{
    if (c->holding && c->sent.first == NULL && c->state == CONN_READY)
        conn_release(c);
}

/* A held connection with nothing unanswered: release it now, or after the
 * TRYAGAIN wait. */
static void conn_release_or_wait(struct pool_conn *c)
{
    if (c->retry_later)
        pool_cluster_retry_soon(c);
    else
        conn_release(c);
}

void pool_conn_fail_held(struct pool_conn *c)
{
    struct pool *p = c->pool;
    c->holding = false;
    c->retry_later = false;
    for (int pass = 0; pass < 2; pass++) {
        struct pool_req *r = list_take(pass == 0 ? &c->redo : &c->held);
        while (r != NULL) {
            struct pool_req *next = r->next;
            pool_req_fail_later(p, r);
            r = next;
        }
    }
}

static void req_reply_cb(redisAsyncContext *ac, void *rep, void *privdata)
{
    struct pool_req *r = privdata;
    struct pool_conn *c = r->conn;
    redisReply *reply = rep;
    enum pool_redirect redirect;

    c->replies++;
    req_unlink(r);
    if (reply == NULL) {
        /* hiredis is freeing the context: take it out of rotation before
         * the caller's callback can submit again. r was written and never
         * answered: the loss is counted before its callback runs. */
        pool_fence_note(c, true);
        pool_conn_gone(c, ac, "connection lost");
    } else if (c->pool->cluster && reply->type == REDIS_REPLY_ERROR &&
               (redirect = pool_cluster_redirect(c->pool, r, c->node, reply)) !=
                   POOL_REDIRECT_NONE) {
        /* The slot is served elsewhere (MOVED) or being moved there (ASK).
         * Every request written on c after r whose keys are in that slot
         * is refused the same way (docs/ARCHITECTURE.md: routing on a
         * cluster), so hold c as after a missing library: once all written before
         * have answered, the refused ones go to the new node in the order
         * they were sent, and what waited behind them follows. */
        pool_ack_detach(r);
        r->conn = c;
        list_append(&c->redo, r);
        c->holding = true;
        if (redirect == POOL_REDIRECT_LATER)
            c->retry_later = true;
        if (c->sent.first == NULL)
            conn_release_or_wait(c);
        return;
    } else if (r->script >= 0 && r->resends < POOL_SCRIPT_RESENDS &&
               reply->type == REDIS_REPLY_ERROR &&
               (pool_function_missing(reply->str) || strncmp(reply->str, "NOSCRIPT", 8) == 0)) {
        /* The library is gone (FUNCTION FLUSH, a Redis restarted without
         * persistence), or by EVALSHA the script cache: every call written
         * after this one is refused the same way. Hold c until they all
         * have answered, then resend them in the order they were sent,
         * behind a FUNCTION LOAD or a SCRIPT LOAD of the fallback scripts
         * (pool_req_write). */
        if (pool_function_missing(reply->str)) {
            r->reload = true;
        } else {
            r->noscript = true;
            c->scripts_cached = false;
        }
        pool_ack_detach(r);
        r->conn = c;
        list_append(&c->redo, r);
        c->holding = true;
        if (c->sent.first == NULL)
            conn_release(c);
        return;
    }
    /* With replica-acks, a script call's reply waits for its WAIT. */
    if (reply == NULL || c->pool->replica_acks == 0 || reply->type == REDIS_REPLY_ERROR ||
        !pool_ack_hold(r, reply))
        pool_req_finish(r, reply, POOL_EUNAVAILABLE);
    if (reply != NULL && c->holding && c->sent.first == NULL && c->state == CONN_READY)
        conn_release_or_wait(c);
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

/* Count r in: accepted, in flight until pool_req_finish, its bytes held. */
void pool_req_accept(struct pool *p, const struct pool_req *r)
{
    p->stats.requests++;
    p->stats.inflight++;
    p->held_bytes += sizeof(*r) + r->len;
}

/* Accept r: count it, tie it to its route, send it. */
static void req_submit(struct pool *p, struct pool_route *rt, struct pool_req *r)
{
    pool_req_accept(p, r);
    r->route = rt;
    if (rt != NULL)
        rt->inflight++;
    req_dispatch(p, r);
}

void pool_route_init(struct pool_route *rt, const char *tag, size_t len)
{
    *rt = (struct pool_route){.slot = pool_slot(tag, len), .conn = -1};
}

int pool_script(struct pool *p, struct pool_route *rt, enum script_id id, const struct keys *k,
                int argc, const char **argv, const size_t *lens, pool_reply_cb *cb, void *priv)
{
    int err = req_check(p, argc, argv, cb);
    if (err < 0)
        return err;
    if ((int)id < 0 || id >= SCRIPT__COUNT || k == NULL)
        return -EINVAL;

    /* FCALL function numkeys [KEYS...] prefix ARGV... as one RESP command.
     * The scripts build every key name from the prefix (lib.lua), so off
     * a cluster no key is declared: a key passed in KEYS costs Redis about
     * 1,300 instructions a call, several times what building it in Lua
     * does. On a cluster the ten fixed keys and the guard are declared,
     * though no script reads them, because Redis decides by the declared
     * keys whether a call may run while the queue's slot migrates: with
     * the guard (never present) among keys of which some are still on the
     * source, the source answers TRYAGAIN, and the importing node answers
     * TRYAGAIN to several keys some of which are missing, until it owns
     * the slot (keys.h; docs/ARCHITECTURE.md 7.3). The guard alone would
     * not do: to one missing key the source answers ASK, and the
     * importing node runs it. */
    const struct script *s = &script_table[id];
    size_t nkeys = p->cluster ? KEY__COUNT + 1 : 0;
    size_t nargs = 3 + nkeys + 1 + (size_t)argc;
    size_t len = 1 + resp_digits(nargs) + 2 + resp_arg_len(5) + resp_arg_len(s->function_len);
    len += resp_arg_len(resp_digits(nkeys)) + resp_arg_len(k->prefix_len);
    for (int i = 0; p->cluster && i < KEY__COUNT; i++)
        len += resp_arg_len(k->lens[i]);
    if (p->cluster)
        len += resp_arg_len(k->guard_len);
    for (int i = 0; i < argc; i++)
        len += resp_arg_len(arg_len(argv, lens, i));

    struct pool_req *r = malloc(sizeof(*r) + len);
    if (r == NULL)
        return -ENOMEM;
    *r = (struct pool_req){.pool = p,
                           .cb = cb,
                           .priv = priv,
                           .script = id,
                           .writes = s->writes,
                           .slot = -1,
                           .target = -1,
                           .len = len};
    char numkeys[24], *w = r->cmd;
    size_t numkeys_len = (size_t)(resp_put_uint(numkeys, nkeys) - numkeys);
    w = resp_put_num(w, '*', nargs);
    w = resp_put_arg(w, "FCALL", 5);
    w = resp_put_arg(w, s->function, s->function_len);
    r->tail = (size_t)(w - r->cmd);
    w = resp_put_arg(w, numkeys, numkeys_len);
    for (int i = 0; p->cluster && i < KEY__COUNT; i++)
        w = resp_put_arg(w, k->names[i], k->lens[i]);
    if (p->cluster)
        w = resp_put_arg(w, k->guard, k->guard_len);
    w = resp_put_arg(w, k->prefix, k->prefix_len);
    for (int i = 0; i < argc; i++)
        w = resp_put_arg(w, argv[i], arg_len(argv, lens, i));

    req_submit(p, rt, r);
    return 0;
}

/* A plain command as a request of p, formatted here rather than by
 * hiredis so that it can wait on a held connection like any script call.
 * NULL when out of memory. */
struct pool_req *pool_req_new_command(struct pool *p, int argc, const char **argv,
                                      const size_t *lens, pool_reply_cb *cb, void *priv)
{
    size_t len = 1 + resp_digits((size_t)argc) + 2;
    for (int i = 0; i < argc; i++)
        len += resp_arg_len(arg_len(argv, lens, i));
    struct pool_req *r = malloc(sizeof(*r) + len);
    if (r == NULL)
        return NULL;
    *r = (struct pool_req){
        .pool = p, .cb = cb, .priv = priv, .script = -1, .slot = -1, .target = -1, .len = len};
    char *w = resp_put_num(r->cmd, '*', (size_t)argc);
    for (int i = 0; i < argc; i++)
        w = resp_put_arg(w, argv[i], arg_len(argv, lens, i));
    return r;
}

/* pool_command and pool_command_write: writes says whether replica-acks
 * follows it with WAIT. */
static int command_submit(struct pool *p, struct pool_route *rt, int argc, const char **argv,
                          const size_t *lens, pool_reply_cb *cb, void *priv, bool writes)
{
    int err = req_check(p, argc, argv, cb);
    if (err < 0)
        return err;
    if (argc < 1)
        return -EINVAL;
    struct pool_req *r = pool_req_new_command(p, argc, argv, lens, cb, priv);
    if (r == NULL)
        return -ENOMEM;
    r->writes = writes;
    if (p->cluster && argc > 1)
        r->slot = pool_key_slot(argv[1], arg_len(argv, lens, 1));
    req_submit(p, rt, r);
    return 0;
}

int pool_command(struct pool *p, struct pool_route *rt, int argc, const char **argv,
                 const size_t *lens, pool_reply_cb *cb, void *priv)
{
    return command_submit(p, rt, argc, argv, lens, cb, priv, false);
}

int pool_command_write(struct pool *p, struct pool_route *rt, int argc, const char **argv,
                       const size_t *lens, pool_reply_cb *cb, void *priv)
{
    return command_submit(p, rt, argc, argv, lens, cb, priv, true);
}

int pool_command_on(struct pool_conn *c, int argc, const char **argv, const size_t *lens,
                    pool_reply_cb *cb, void *priv)
{
    struct pool *p = c->pool;
    struct pool_req *r = pool_req_new_command(p, argc, argv, lens, cb, priv);
    if (r == NULL)
        return -ENOMEM;
    pool_req_accept(p, r);
    r->pinned = true; /* c's own (a CLIENT KILL is for this server only) */
    if (c->holding) {
        r->conn = c;
        list_append(&c->held, r);
    } else if (pool_req_write(c, r) != 0) {
        pool_req_fail_later(p, r);
    }
    return 0;
}

/* ---- idle and close ------------------------------------------------------ */

static void pool_handle_close_cb(uv_handle_t *h)
{
    struct pool *p = h->data;

    p->open_handles--;
    pool_maybe_done(p);
}

void pool_maybe_done(struct pool *p)
{
    if (!p->closed || p->open_handles > 0)
        return;
    void (*done)(void *) = p->done;
    void *priv = p->done_priv;
    pool_free(p);
    if (done != NULL)
        done(priv);
}

static void pool_fail_queued(struct pool *p)
{
    struct pool_req *r = list_take(&p->failing);

    while (r != NULL) {
        struct pool_req *next = r->next;
        pool_req_finish(r, NULL, POOL_ENOTSENT); /* never written: see pool_req_fail_later */
        r = next;
    }
}

/* Connection i of p's in use: the command ones, then the subscriber
 * ones (one per node). */
static struct pool_conn *conn_at(struct pool *p, int i)
{
    return i < pool_nconn(p) ? &p->conns[i] : pool_ps(p, i - pool_nconn(p));
}

static void pool_close_now(struct pool *p)
{
    int all = pool_nconn(p) + p->nnodes;
    for (int i = 0; i < all; i++) {
        struct pool_conn *c = conn_at(p, i);
        uv_timer_stop(&c->timer);
        if (c->ac != NULL)
            pool_conn_kill(c);
        c->state = CONN_CLOSED;
    }
    pool_fail_queued(p);
    p->closed = true;
    for (int i = 0; i < all; i++)
        uv_close((uv_handle_t *)&conn_at(p, i)->timer, pool_handle_close_cb);
    if (p->cluster) {
        uv_close((uv_handle_t *)&p->map_timer, pool_handle_close_cb);
        uv_close((uv_handle_t *)&p->retry_timer, pool_handle_close_cb);
    }
    uv_close((uv_handle_t *)&p->idle, pool_handle_close_cb);
    uv_close((uv_handle_t *)&p->flush, pool_handle_close_cb);
}

static void pool_idle_cb(uv_idle_t *h)
{
    struct pool *p = h->data;

    if (p->closing) {
        pool_close_now(p);
        return;
    }
    pool_fail_queued(p);
    if (p->fences != NULL)
        pool_fence_kick(p);
    bool up = pool_is_up(p);
    if (up != p->notified_up && !p->closing) {
        p->notified_up = up;
        if (p->state_cb != NULL)
            p->state_cb(p->state_priv, up);
    }
    if (!p->closing && p->failing.first == NULL && pool_is_up(p) == p->notified_up)
        uv_idle_stop(&p->idle);
}

void pool_kick(struct pool *p)
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
