/* lane_module: a what-if, not a part of echomq. The hot path of the lane
 * engine (lua/enqueue_many.lua, the bulk claim of lua/claim.lua and the
 * completions of lua/complete.lua, for a queue with no lane setting) as a
 * Redis module in C, making the same Redis commands with the same
 * arguments in the same order and answering the same replies. It exists
 * so that tests/bench/module_ir can measure what taking the lane logic
 * out of Lua would save (RESULTS.md), before anyone builds it for real:
 * the commands stay, and what goes is Lua's part (the VM, its collector,
 * the hashing of every string it makes, its tables around each call).
 *
 * Also enqueue.lua's single enqueue with its hand-off to a parked
 * consumer (the light-load path). Its claim plays the turns as claim.lua
 * did before it popped a long ring's lanes two deep without sizing them:
 * the same replies and keys, other commands on such a ring.
 *
 * Each command takes FCALL's arguments for the library's function of
 * the same work (the function, numkeys, then its ARGV: the prefix and
 * the rest), so that a caller swaps only the command's name. What the
 * module does not do itself it passes on, whole, to that function
 * (RedisModule_Call of FCALL), always before it has written anything, so
 * that one command still has one effect: a call with a delayed job or a
 * fail item, a call that declares keys, and any call in a queue with a
 * lane setting (glimit or paused exists). emqd never sends these
 * commands.
 *
 * Redis ships redismodule.h in its source tree only, and Debian packages
 * none, so the few parts of the module API used here are declared below
 * as Redis 7's module ABI defines them: the API table is reached through
 * the first word of the context given to RedisModule_OnLoad, and each
 * function is looked up by name. */
#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef int (*rm_cmd_fn)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#define RM_OK            0
#define RM_ERR           1
#define RM_APIVER_1      1
#define RM_REPLY_INTEGER 2
#define RM_POSTPONED_LEN -1

static int (*rm_get_api)(const char *name, void *fn);
static void (*rm_set_attribs)(RedisModuleCtx *ctx, const char *name, int ver, int apiver);
static int (*rm_create_command)(RedisModuleCtx *ctx, const char *name, rm_cmd_fn fn,
                                const char *flags, int first, int last, int step);
static RedisModuleCallReply *(*rm_call)(RedisModuleCtx *ctx, const char *cmd, const char *fmt, ...);
static void (*rm_free_reply)(RedisModuleCallReply *r);
static int (*rm_reply_type)(RedisModuleCallReply *r);
static long long (*rm_reply_integer)(RedisModuleCallReply *r);
static size_t (*rm_reply_length)(RedisModuleCallReply *r);
static RedisModuleCallReply *(*rm_reply_element)(RedisModuleCallReply *r, size_t i);
static const char *(*rm_reply_str)(RedisModuleCallReply *r, size_t *len);
static RedisModuleString *(*rm_create_string)(RedisModuleCtx *ctx, const char *p, size_t len);
static void (*rm_free_string)(RedisModuleCtx *ctx, RedisModuleString *s);
static const char *(*rm_str)(const RedisModuleString *s, size_t *len);
static int (*rm_reply_array)(RedisModuleCtx *ctx, long len);
static void (*rm_reply_set_len)(RedisModuleCtx *ctx, long len);
static int (*rm_reply_buffer)(RedisModuleCtx *ctx, const char *p, size_t len);
static int (*rm_reply_ll)(RedisModuleCtx *ctx, long long v);
static int (*rm_reply_error)(RedisModuleCtx *ctx, const char *err);
static int (*rm_reply_call_reply)(RedisModuleCtx *ctx, RedisModuleCallReply *r);

/* ---- small helpers ------------------------------------------------------ */

/* A key or number built in place: the prefix, then parts. */
struct buf {
    char s[512];
    size_t n;
};

static void buf_put(struct buf *b, const char *p, size_t n)
{
    if (n > sizeof(b->s) - b->n)
        n = sizeof(b->s) - b->n; /* the callers' ids and groups are bounded far below */
    memcpy(b->s + b->n, p, n);
    b->n += n;
}

static void buf_cstr(struct buf *b, const char *p)
{
    buf_put(b, p, strlen(p));
}

static void buf_key(struct buf *b, const char *pfx, size_t pn, const char *a, const char *mid,
                    size_t mn, const char *z)
{
    b->n = 0;
    buf_put(b, pfx, pn);
    buf_cstr(b, a);
    if (mid != NULL)
        buf_put(b, mid, mn);
    if (z != NULL)
        buf_cstr(b, z);
}

static size_t fmt_ll(char *out, long long v)
{
    return (size_t)snprintf(out, 24, "%lld", v);
}

/* Lua's tonumber for the texts these scripts read: a decimal number, the
 * whole text. */
static bool to_num(const char *p, size_t n, double *v)
{
    char tmp[64], *end;
    if (n == 0 || n >= sizeof(tmp))
        return false;
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    *v = strtod(tmp, &end);
    return end == tmp + n;
}

static bool word_ok(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)p[i]) && p[i] != '_' && p[i] != '-')
            return false;
    return n > 0;
}

/* lib.lua: valid_job, valid_group. */
static bool valid_job(const char *p, size_t n)
{
    return n >= 4 && n <= 67 && memcmp(p, "JOB", 3) == 0 && word_ok(p + 3, n - 3);
}

static bool valid_group(const char *p, size_t n)
{
    return n >= 4 && n <= 67 && isupper((unsigned char)p[0]) && isupper((unsigned char)p[1]) &&
           isupper((unsigned char)p[2]) && word_ok(p + 3, n - 3);
}

/* A set of strings (a call's ids or groups), by pointer into argv or a
 * reply that outlives it; each with a slot of its own for the caller. */
struct set {
    const char **p;
    size_t *n;
    int *slot;
    size_t cap, used;
};

static bool set_init(struct set *s, size_t want)
{
    s->cap = 16;
    while (s->cap < 2 * want)
        s->cap *= 2;
    s->used = 0;
    s->p = calloc(s->cap, sizeof(*s->p));
    s->n = calloc(s->cap, sizeof(*s->n));
    s->slot = calloc(s->cap, sizeof(*s->slot));
    return s->p != NULL && s->n != NULL && s->slot != NULL;
}

static void set_free(struct set *s)
{
    free(s->p);
    free(s->n);
    free(s->slot);
}

static int set_find(struct set *s, const char *p, size_t n, bool add, int add_slot);

/* Twice the room, the entries hashed again (kept at most half full). */
static void set_grow(struct set *s)
{
    struct set old = *s;
    if (!set_init(s, old.cap))
        abort(); /* a bench tool's module */
    for (size_t i = 0; i < old.cap; i++)
        if (old.p[i] != NULL)
            set_find(s, old.p[i], old.n[i], true, old.slot[i]);
    set_free(&old);
}

/* The slot of p, or -1 when absent; with add, added with slot add_slot. */
static int set_find(struct set *s, const char *p, size_t n, bool add, int add_slot)
{
    if (add && 2 * (s->used + 1) > s->cap)
        set_grow(s);
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    size_t i = h & (s->cap - 1);
    while (s->p[i] != NULL) {
        if (s->n[i] == n && memcmp(s->p[i], p, n) == 0)
            return s->slot[i];
        i = (i + 1) & (s->cap - 1);
    }
    if (!add)
        return -1;
    s->p[i] = p;
    s->n[i] = n;
    s->slot[i] = add_slot;
    s->used++;
    return add_slot;
}

/* The queue's prefix (ARGV 1) and the time, as begin() and now_ms() read
 * them. */
struct call {
    RedisModuleCtx *ctx;
    const char *pfx;
    size_t pn;
    struct buf k;
};

static long long now_ms(struct call *c)
{
    RedisModuleCallReply *t = rm_call(c->ctx, "TIME", "");
    size_t n1, n2;
    const char *s1 = rm_reply_str(rm_reply_element(t, 0), &n1);
    const char *s2 = rm_reply_str(rm_reply_element(t, 1), &n2);
    double a = 0, b = 0;
    to_num(s1, n1, &a);
    to_num(s2, n2, &b);
    rm_free_reply(t);
    return (long long)a * 1000 + (long long)b / 1000;
}

static long long call_int(RedisModuleCallReply *r)
{
    long long v = rm_reply_type(r) == RM_REPLY_INTEGER ? rm_reply_integer(r) : -1;
    rm_free_reply(r);
    return v;
}

/* The settings memo: whether glimit or paused exists (one EXISTS of both,
 * lib.lua:memos()). The what-if serves only a queue with neither. */
static bool plain_queue(struct call *c, bool paused_too)
{
    struct buf a, b;
    buf_key(&a, c->pfx, c->pn, "glimit", NULL, 0, NULL);
    if (!paused_too)
        return call_int(rm_call(c->ctx, "EXISTS", "b", a.s, a.n)) == 0;
    buf_key(&b, c->pfx, c->pn, "paused", NULL, 0, NULL);
    return call_int(rm_call(c->ctx, "EXISTS", "bb", a.s, a.n, b.s, b.n)) == 0;
}

static void wake(struct call *c)
{
    struct buf w;
    buf_key(&w, c->pfx, c->pn, "wake", NULL, 0, NULL);
    rm_free_reply(rm_call(c->ctx, "LPUSH", "!bc", w.s, w.n, "1"));
    rm_free_reply(rm_call(c->ctx, "LTRIM", "!bcc", w.s, w.n, "0", "63"));
    rm_free_reply(rm_call(c->ctx, "SPUBLISH", "!bb", w.s, w.n, c->pfx, c->pn));
}

/* Strings made for a variadic command ("v"), freed after the call. */
struct vec {
    RedisModuleString **v;
    size_t n, cap;
};

static void vec_put(struct call *c, struct vec *v, const char *p, size_t n)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 16;
        v->v = realloc(v->v, v->cap * sizeof(*v->v));
    }
    v->v[v->n++] = rm_create_string(c->ctx, p, n);
}

static void vec_clear(struct call *c, struct vec *v)
{
    for (size_t i = 0; i < v->n; i++)
        rm_free_string(c->ctx, v->v[i]);
    v->n = 0;
}

/* ---- enqueue and enqueue_many ------------------------------------------ */

/* admit_row's checks of one item, in its order: the error, or NULL. */
static const char *item_error(const char *id, size_t idn, const char *g, size_t gn, const char *m,
                              size_t mn, double *max)
{
    if (!valid_job(id, idn))
        return idn >= 3 && memcmp(id, "JOB", 3) == 0 ? "EARG malformed job id"
                                                     : "EKIND job id must be JOB-namespaced";
    if (gn > 0 && !valid_group(g, gn))
        return "EBRAND malformed group id";
    if (!to_num(m, mn, max) || *max < 0)
        return "EARG delay_ms and max_attempts must be non-negative";
    return NULL;
}

/* The command being served, whole (its name, the function, numkeys, ...),
 * for delegate(): set by cmd_* before each native_* runs. */
static RedisModuleString **call_argv;
static int call_argc;

/* Pass the command on to the library's function: FCALL with the same
 * arguments. Its reply, error or not, is the command's. "!": the
 * function's writes are propagated (to the AOF, to replicas) as a
 * client's FCALL's are; without it a module's RedisModule_Call of FCALL
 * propagates none of them (found with an AOF: the jobs were gone after a
 * restart). */
static int delegate(RedisModuleCtx *ctx)
{
    RedisModuleCallReply *r = rm_call(ctx, "FCALL", "!v", call_argv + 1, (size_t)(call_argc - 1));
    if (r == NULL)
        return rm_reply_error(ctx, "ERR the library's function could not be called");
    rm_reply_call_reply(ctx, r);
    rm_free_reply(r);
    return RM_OK;
}

/* to_backlog(id, g, seen): into the lane (or the flat set); a lane made
 * non-empty joins the registry and the ring, waking parked consumers
 * when the ring was empty. seen (NULL: none) holds the lanes this call
 * has put a job in already, which are known non-empty. */
static void to_backlog(struct call *c, RedisModuleString *id, RedisModuleString *gs,
                       struct set *seen)
{
    size_t gn;
    const char *g = rm_str(gs, &gn);
    if (gn == 0)
        buf_key(&c->k, c->pfx, c->pn, "pending", NULL, 0, NULL);
    else
        buf_key(&c->k, c->pfx, c->pn, "g:", g, gn, ":pending");
    rm_free_reply(rm_call(c->ctx, "ZADD", "!bcs", c->k.s, c->k.n, "0", id));
    if (seen != NULL) {
        if (set_find(seen, g, gn, false, 0) >= 0)
            return;
        set_find(seen, g, gn, true, 1);
    }
    if (call_int(rm_call(c->ctx, "ZCARD", "b", c->k.s, c->k.n)) != 1)
        return;
    if (gn == 0) {
        wake(c);
        return;
    }
    struct buf k;
    buf_key(&k, c->pfx, c->pn, "groups", NULL, 0, NULL);
    rm_free_reply(rm_call(c->ctx, "SADD", "!bs", k.s, k.n, gs));
    buf_key(&k, c->pfx, c->pn, "ring", NULL, 0, NULL);
    if (call_int(rm_call(c->ctx, "RPUSH", "!bs", k.s, k.n, gs)) == 1)
        wake(c);
}

/* The row of a job due now, pending (its row has no attempts yet). */
static void write_pending(struct call *c, RedisModuleString *row, const char *g, size_t gn,
                          RedisModuleString *payload, double max, const char *now_s, size_t now_n)
{
    char ms[24];
    size_t msn = fmt_ll(ms, (long long)max);
    rm_free_reply(rm_call(c->ctx, "HSET", "!scccbcscbcb", row, "state", "pending", "group", g, gn,
                          "payload", payload, "max_attempts", ms, msn, "created_ms", now_s, now_n));
}

static int native_enqueue_many(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 7 || (argc - 2) % 5 != 0)
        return rm_reply_error(ctx, "EARG five arguments per item expected");
    struct call c = {.ctx = ctx};
    c.pfx = rm_str(argv[1], &c.pn);
    size_t items = (size_t)(argc - 2) / 5;
    for (size_t i = 0; i < items; i++) {
        size_t dn;
        const char *d = rm_str(argv[2 + 5 * i + 3], &dn);
        if (dn != 1 || d[0] != '0')
            return delegate(ctx);
    }
    long long now = now_ms(&c);
    char now_s[24];
    size_t now_n = fmt_ll(now_s, now);
    /* The duplicate check of the whole call: one EXISTS of every row. */
    struct vec rows = {0};
    for (size_t i = 0; i < items; i++) {
        size_t idn;
        const char *id = rm_str(argv[2 + 5 * i], &idn);
        buf_key(&c.k, c.pfx, c.pn, "job:", id, idn, NULL);
        vec_put(&c, &rows, c.k.s, c.k.n);
    }
    bool fresh = items <= 1000 && call_int(rm_call(ctx, "EXISTS", "v", rows.v, rows.n)) == 0;
    /* Whether the queue has a setting, read before any write (the
     * library reads it at its first grouped item: the same one EXISTS). */
    bool grouped = false;
    for (size_t i = 0; i < items && !grouped; i++) {
        size_t gn;
        rm_str(argv[2 + 5 * i + 1], &gn);
        grouped = gn > 0;
    }
    if (grouped && !plain_queue(&c, true)) {
        vec_clear(&c, &rows);
        free(rows.v);
        return delegate(ctx);
    }
    struct set ids, seen;
    if (!set_init(&ids, items) || !set_init(&seen, items + 1))
        abort(); /* a bench tool's module */
    rm_reply_array(ctx, (long)items);
    for (size_t i = 0; i < items; i++) {
        RedisModuleString **a = argv + 2 + 5 * i;
        size_t idn, gn, mn;
        const char *id = rm_str(a[0], &idn), *g = rm_str(a[1], &gn), *m = rm_str(a[4], &mn);
        double max;
        const char *err = item_error(id, idn, g, gn, m, mn, &max);
        if (err != NULL) {
            rm_reply_error(ctx, err);
            continue;
        }
        RedisModuleString *row = rows.v[i];
        if (fresh) {
            if (set_find(&ids, id, idn, false, 0) >= 0) {
                rm_reply_ll(ctx, 0);
                continue;
            }
            set_find(&ids, id, idn, true, 1);
        } else if (call_int(rm_call(ctx, "HSETNX", "!scc", row, "state", "pending")) == 0) {
            rm_reply_ll(ctx, 0);
            continue;
        }
        write_pending(&c, row, g, gn, a[2], max, now_s, now_n);
        to_backlog(&c, a[0], a[1], &seen);
        rm_reply_ll(ctx, 1);
    }
    set_free(&ids);
    set_free(&seen);
    vec_clear(&c, &rows);
    free(rows.v);
    return RM_OK;
}

/* enqueue.lua: one job, handed off on a lease to a consumer the caller
 * has parked (ARGV 7 lease_ms > 0) when a claim would serve it next
 * anyway (may_hand: nothing else serviceable, its lane empty). */
static int native_enqueue(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 7)
        return rm_reply_error(ctx, "EARG five arguments per item expected");
    struct call c = {.ctx = ctx};
    c.pfx = rm_str(argv[1], &c.pn);
    size_t idn, gn, dn, mn, hn = 1, byn = 0;
    const char *id = rm_str(argv[2], &idn), *g = rm_str(argv[3], &gn);
    const char *d = rm_str(argv[5], &dn), *m = rm_str(argv[6], &mn);
    const char *hs = argc > 7 ? rm_str(argv[7], &hn) : "0";
    const char *by = argc > 8 ? rm_str(argv[8], &byn) : "";
    double hand, delay;
    if (!to_num(hs, hn, &hand) || hand < 0)
        return rm_reply_error(ctx, "EARG lease_ms must be non-negative");
    if (!to_num(d, dn, &delay) || delay != 0)
        return delegate(ctx);
    long long now = now_ms(&c);
    int memo = -1; /* memos(): whether the queue has no setting */
    bool leased = false;
    if (hand > 0) {
        /* may_hand(g) */
        if (gn == 0) {
            buf_key(&c.k, c.pfx, c.pn, "pending", NULL, 0, NULL);
            leased = call_int(rm_call(ctx, "ZCARD", "b", c.k.s, c.k.n)) == 0;
        } else {
            buf_key(&c.k, c.pfx, c.pn, "ring", NULL, 0, NULL);
            if (call_int(rm_call(ctx, "LLEN", "b", c.k.s, c.k.n)) == 0) {
                buf_key(&c.k, c.pfx, c.pn, "g:", g, gn, ":pending");
                if (call_int(rm_call(ctx, "ZCARD", "b", c.k.s, c.k.n)) == 0) {
                    memo = plain_queue(&c, true);
                    if (memo == 0)
                        return delegate(ctx);
                    leased = true;
                }
            }
        }
    }
    /* admit_row */
    double max;
    const char *err = item_error(id, idn, g, gn, m, mn, &max);
    if (err != NULL)
        return rm_reply_error(ctx, err);
    if (gn > 0 && memo < 0 && !plain_queue(&c, true))
        return delegate(ctx);
    buf_key(&c.k, c.pfx, c.pn, "job:", id, idn, NULL);
    RedisModuleString *row = rm_create_string(ctx, c.k.s, c.k.n);
    if (call_int(rm_call(ctx, "HSETNX", "!scc", row, "state", leased ? "active" : "pending")) ==
        0) {
        rm_free_string(ctx, row);
        return rm_reply_ll(ctx, 0);
    }
    char now_s[24];
    size_t now_n = fmt_ll(now_s, now);
    if (!leased) {
        write_pending(&c, row, g, gn, argv[4], max, now_s, now_n);
        rm_free_string(ctx, row);
        to_backlog(&c, argv[2], argv[3], NULL);
        return rm_reply_ll(ctx, 1);
    }
    struct buf k;
    buf_key(&k, c.pfx, c.pn, "seq", NULL, 0, NULL);
    long long seq = call_int(rm_call(ctx, "INCR", "!b", k.s, k.n));
    char ts[40], ms[24], dl[24];
    size_t tsn = (size_t)snprintf(ts, sizeof(ts), "%llx-%llx", (unsigned long long)seq,
                                  (unsigned long long)(now % 4294967296LL));
    size_t msn = fmt_ll(ms, (long long)max);
    size_t dln = fmt_ll(dl, now + (long long)hand);
    rm_free_reply(rm_call(ctx, "HSET", "!scccbcscccbcbcbcb", row, "state", "active", "group", g, gn,
                          "payload", argv[4], "attempts", "1", "max_attempts", ms, msn,
                          "created_ms", now_s, now_n, "lease", ts, tsn, "lease_by", by, byn));
    rm_free_string(ctx, row);
    buf_key(&k, c.pfx, c.pn, "active", NULL, 0, NULL);
    rm_free_reply(rm_call(ctx, "ZADD", "!bbs", k.s, k.n, dl, dln, argv[2]));
    if (gn > 0) {
        buf_key(&k, c.pfx, c.pn, "g:", g, gn, ":active");
        rm_free_reply(rm_call(ctx, "ZADD", "!bbs", k.s, k.n, dl, dln, argv[2]));
        buf_key(&k, c.pfx, c.pn, "groups", NULL, 0, NULL);
        rm_free_reply(rm_call(ctx, "SADD", "!bs", k.s, k.n, argv[3]));
    }
    rm_reply_array(ctx, 7);
    rm_reply_ll(ctx, 1);
    rm_reply_ll(ctx, now + (long long)hand);
    rm_reply_buffer(ctx, id, idn);
    rm_reply_buffer(ctx, g, gn);
    size_t pn;
    const char *p = rm_str(argv[4], &pn);
    rm_reply_buffer(ctx, p, pn);
    rm_reply_ll(ctx, 1);
    rm_reply_buffer(ctx, ts, tsn);
    return RM_OK;
}

/* ---- claim (the bulk turns of claim.lua) -------------------------------- */

/* A lane met by the call: its name (into a reply kept for the call), its
 * size as read, what the played turns leave of it, its jobs of the call. */
struct lane {
    const char *g;
    size_t gn;
    long long size, left;
    int k, at;
    bool popped;
    RedisModuleCallReply *ids; /* ZPOPMIN's {id, score} or ZRANGE's ids */
};

struct claim {
    struct call c;
    struct lane *lanes;
    int nlanes;
    struct set by_name;
    int *ring;                  /* the ring's head as read: lane indexes */
    int nring, ring_len;        /* how many read; LLEN */
    RedisModuleCallReply **got; /* the LRANGE replies the names point into */
    int ngot;
    size_t room; /* of lanes, ring and got each: grown as the ring is read */
};

/* Room for n more names read off the ring (each may be a new lane) and
 * one more reply: a ring whose lanes are empty (the ring rule broken) is
 * read further than the turns need. */
static void claim_room(struct claim *cl, size_t n)
{
    size_t want = (size_t)cl->nring + n + 1;
    if (want <= cl->room)
        return;
    while (cl->room < want)
        cl->room *= 2;
    cl->lanes = realloc(cl->lanes, cl->room * sizeof(*cl->lanes));
    cl->ring = realloc(cl->ring, cl->room * sizeof(*cl->ring));
    cl->got = realloc(cl->got, cl->room * sizeof(*cl->got));
    if (cl->lanes == NULL || cl->ring == NULL || cl->got == NULL)
        abort(); /* a bench tool's module */
}

/* ring_at(i, want): the i-th lane (1-based) of the ring as it was, read in
 * chunks, each new lane's size with it; -1 past its end. */
static int ring_at(struct claim *cl, int i, int want)
{
    if (i > cl->nring && i <= cl->ring_len) {
        struct buf k;
        char a[24], b[24];
        size_t an = fmt_ll(a, i - 1), bn = fmt_ll(b, i - 2 + (want > 1 ? want : 1));
        buf_key(&k, cl->c.pfx, cl->c.pn, "ring", NULL, 0, NULL);
        RedisModuleCallReply *r = rm_call(cl->c.ctx, "LRANGE", "bbb", k.s, k.n, a, an, b, bn);
        size_t n = rm_reply_length(r);
        claim_room(cl, n);
        cl->got[cl->ngot++] = r;
        for (size_t j = 0; j < n; j++) {
            size_t gn;
            const char *g = rm_reply_str(rm_reply_element(r, j), &gn);
            int at = set_find(&cl->by_name, g, gn, false, 0);
            if (at < 0) {
                at = set_find(&cl->by_name, g, gn, true, cl->nlanes);
                struct lane *l = &cl->lanes[cl->nlanes++];
                memset(l, 0, sizeof(*l));
                l->g = g;
                l->gn = gn;
                l->left = -1;
                buf_key(&k, cl->c.pfx, cl->c.pn, "g:", g, gn, ":pending");
                l->size = call_int(rm_call(cl->c.ctx, "ZCARD", "b", k.s, k.n));
            }
            cl->ring[cl->nring++] = at;
        }
    }
    return i <= cl->nring ? cl->ring[i - 1] : -1;
}

/* play(limit): the turns (lane indexes, in order), how many lanes of the
 * ring as it was were taken off its head, and the lanes served that still
 * hold jobs in the order they went to the tail. */
static int play(struct claim *cl, int limit, int *turns, int *taken, int *tail, int *ntail,
                int *back)
{
    int nt = 0, nb = 0, i = 1, b = 0;
    for (int j = 0; j < cl->nlanes; j++)
        cl->lanes[j].left = -1;
    while (nt < limit) {
        int g;
        if (i <= cl->ring_len) {
            g = ring_at(cl, i, limit - nt);
            i++;
            if (g < 0)
                break; /* the ring is shorter than LLEN said: cannot happen in one call */
        } else if (b < nb) {
            g = back[b++];
        } else {
            break;
        }
        struct lane *l = &cl->lanes[g];
        long long left = l->left >= 0 ? l->left : l->size;
        if (left > 0) {
            turns[nt++] = g;
            left--;
            if (left > 0)
                back[nb++] = g;
        }
        l->left = left;
    }
    *ntail = 0;
    for (int j = b; j < nb; j++)
        tail[(*ntail)++] = back[j];
    *taken = i - 1;
    return nt;
}

static int native_claim(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    if (argc < 4)
        return rm_reply_error(ctx, "EARG count and lease_ms must be positive");
    struct claim cl = {.c = {.ctx = ctx}};
    cl.c.pfx = rm_str(argv[1], &cl.c.pn);
    size_t nn, ln, wn = 0, mbn = 0, byn = 0;
    const char *ns = rm_str(argv[2], &nn), *ls = rm_str(argv[3], &ln);
    const char *ws = argc > 4 ? rm_str(argv[4], &wn) : "";
    const char *mbs = argc > 5 ? rm_str(argv[5], &mbn) : "0";
    const char *by = argc > 6 ? rm_str(argv[6], &byn) : "";
    double n, lease_ms, max_bytes = 0;
    if (!to_num(ns, nn, &n) || n < 1 || !to_num(ls, ln, &lease_ms) || lease_ms < 1)
        return rm_reply_error(ctx, "EARG count and lease_ms must be positive");
    if (n > 100000)
        return delegate(ctx);
    int width = wn == 1 && ws[0] == '1' ? 6 : 5;
    if (!to_num(mbs, mbn, &max_bytes))
        max_bytes = 0;
    long long now = now_ms(&cl.c), deadline = now + (long long)lease_ms;
    if (!plain_queue(&cl.c, false))
        return delegate(ctx);
    struct buf k;
    buf_key(&k, cl.c.pfx, cl.c.pn, "ring", NULL, 0, NULL);
    cl.ring_len = (int)call_int(rm_call(ctx, "LLEN", "b", k.s, k.n));
    if (cl.ring_len <= 0) {
        rm_reply_array(ctx, 1);
        return rm_reply_ll(ctx, deadline);
    }
    int limit = (int)n;
    char tmp[24];
    size_t tn = fmt_ll(tmp, limit);
    buf_key(&k, cl.c.pfx, cl.c.pn, "seq", NULL, 0, NULL);
    long long tok = call_int(rm_call(ctx, "INCRBY", "!bb", k.s, k.n, tmp, tn)) - limit;
    /* Turns, lanes served and lanes sent back: at most limit each. The
     * ring's names read, its lanes and its replies: room grown as read. */
    size_t most = (size_t)limit + 2;
    cl.room = most;
    cl.lanes = calloc(most, sizeof(*cl.lanes));
    cl.ring = calloc(most, sizeof(*cl.ring));
    cl.got = calloc(most, sizeof(*cl.got));
    int *turns = calloc(most, sizeof(int)), *tail = calloc(most, sizeof(int));
    int *back = calloc(most, sizeof(int));
    int *order = calloc(most, sizeof(int)), norder = 0;
    if (!set_init(&cl.by_name, most) || cl.lanes == NULL || cl.ring == NULL || cl.got == NULL ||
        turns == NULL || tail == NULL || back == NULL || order == NULL)
        abort(); /* a bench tool's module: no way to give back the INCRBY's numbers */
    int taken, ntail;
    int nt = play(&cl, limit, turns, &taken, tail, &ntail, &back[0]);
    /* Each lane's jobs of the call: ZPOPMIN for one, ZRANGE for more. */
    for (int t = 0; t < nt; t++)
        cl.lanes[turns[t]].k++;
    for (int t = 0; t < nt; t++) {
        struct lane *l = &cl.lanes[turns[t]];
        if (l->ids != NULL)
            continue;
        buf_key(&k, cl.c.pfx, cl.c.pn, "g:", l->g, l->gn, ":pending");
        if (l->k == 1) {
            l->ids = rm_call(ctx, "ZPOPMIN", "!b", k.s, k.n);
            l->popped = true;
        } else {
            size_t en = fmt_ll(tmp, l->k - 1);
            l->ids = rm_call(ctx, "ZRANGE", "bcb", k.s, k.n, "0", tmp, en);
        }
        l->at = 0;
        order[norder++] = turns[t];
    }
    char dl[24], att_s[24];
    size_t dln = fmt_ll(dl, deadline);
    struct vec all = {0};
    struct vec *per = calloc((size_t)cl.nlanes + 1, sizeof(*per));
    rm_reply_array(ctx, RM_POSTPONED_LEN); /* a byte bound may cut the batch short */
    rm_reply_ll(ctx, deadline);
    long long bytes = 0;
    int served = nt;
    for (int t = 0; t < nt; t++) {
        struct lane *l = &cl.lanes[turns[t]];
        size_t idn;
        const char *id = rm_reply_str(rm_reply_element(l->ids, (size_t)l->at), &idn);
        l->at++;
        /* lease() */
        buf_key(&k, cl.c.pfx, cl.c.pn, "job:", id, idn, NULL);
        RedisModuleCallReply *f = rm_call(ctx, "HMGET", "bcccc", k.s, k.n, "attempts", "payload",
                                          "ready_ms", "created_ms");
        size_t an = 0, pn = 0;
        const char *as = rm_reply_str(rm_reply_element(f, 0), &an);
        double att = 1;
        if (as != NULL && to_num(as, an, &att))
            att += 1;
        size_t atn = fmt_ll(att_s, (long long)att);
        char ts[40];
        size_t tsn =
            (size_t)snprintf(ts, sizeof(ts), "%llx-%llx", (unsigned long long)(tok + t + 1),
                             (unsigned long long)(now % 4294967296LL));
        rm_free_reply(rm_call(ctx, "HSET", "!bcccbcbcb", k.s, k.n, "state", "active", "attempts",
                              att_s, atn, "lease", ts, tsn, "lease_by", by, byn));
        vec_put(&cl.c, &all, dl, dln);
        vec_put(&cl.c, &all, id, idn);
        vec_put(&cl.c, &per[turns[t]], dl, dln);
        vec_put(&cl.c, &per[turns[t]], id, idn);
        const char *payload = rm_reply_str(rm_reply_element(f, 1), &pn);
        rm_reply_buffer(ctx, id, idn);
        rm_reply_buffer(ctx, l->g, l->gn);
        rm_reply_buffer(ctx, payload != NULL ? payload : "", payload != NULL ? pn : 0);
        rm_reply_ll(ctx, (long long)att);
        rm_reply_buffer(ctx, ts, tsn);
        if (width == 6) {
            size_t rn = 0;
            const char *rs = rm_reply_str(rm_reply_element(f, 2), &rn);
            if (rs == NULL)
                rs = rm_reply_str(rm_reply_element(f, 3), &rn);
            double since = (double)now;
            if (rs != NULL && !to_num(rs, rn, &since))
                since = (double)now;
            long long wait = now - (long long)since;
            rm_reply_ll(ctx, wait > 0 ? wait : 0);
        }
        rm_free_reply(f);
        bytes += (long long)pn;
        if (max_bytes > 0 && (double)bytes >= max_bytes && t + 1 < nt) {
            served = t + 1;
            play(&cl, served, turns, &taken, tail, &ntail, back);
            break;
        }
    }
    rm_reply_set_len(ctx, 1 + (long)served * width);
    /* Each lane's leased jobs are its first at, in the order read. */
    for (int j = 0; j < norder; j++) {
        struct lane *l = &cl.lanes[order[j]];
        buf_key(&k, cl.c.pfx, cl.c.pn, "g:", l->g, l->gn, ":pending");
        if (l->popped) {
            if (l->at == 0) {
                size_t idn;
                const char *id = rm_reply_str(rm_reply_element(l->ids, 0), &idn);
                rm_free_reply(rm_call(ctx, "ZADD", "!bcb", k.s, k.n, "0", id, idn));
            }
        } else if (l->at > 0) {
            size_t en = fmt_ll(tmp, l->at - 1);
            rm_free_reply(rm_call(ctx, "ZREMRANGEBYRANK", "!bcb", k.s, k.n, "0", tmp, en));
        }
    }
    /* batch_run(later, 'ZADD'): the queue-wide index, then each lane's. */
    if (all.n > 0) {
        buf_key(&k, cl.c.pfx, cl.c.pn, "active", NULL, 0, NULL);
        rm_free_reply(rm_call(ctx, "ZADD", "!bv", k.s, k.n, all.v, all.n));
    }
    for (int j = 0; j < norder; j++) {
        struct vec *v = &per[order[j]];
        if (v->n == 0)
            continue;
        struct lane *l = &cl.lanes[order[j]];
        buf_key(&k, cl.c.pfx, cl.c.pn, "g:", l->g, l->gn, ":active");
        rm_free_reply(rm_call(ctx, "ZADD", "!bv", k.s, k.n, v->v, v->n));
    }
    buf_key(&k, cl.c.pfx, cl.c.pn, "ring", NULL, 0, NULL);
    if (taken > 0) {
        size_t en = fmt_ll(tmp, taken);
        rm_free_reply(rm_call(ctx, "LTRIM", "!bbc", k.s, k.n, tmp, en, "-1"));
    }
    if (ntail > 0) {
        struct vec v = {0};
        for (int j = 0; j < ntail; j++)
            vec_put(&cl.c, &v, cl.lanes[tail[j]].g, cl.lanes[tail[j]].gn);
        rm_free_reply(rm_call(ctx, "RPUSH", "!bv", k.s, k.n, v.v, v.n));
        vec_clear(&cl.c, &v);
        free(v.v);
    }
    vec_clear(&cl.c, &all);
    free(all.v);
    for (int j = 0; j < cl.nlanes; j++) {
        vec_clear(&cl.c, &per[j]);
        free(per[j].v);
        if (cl.lanes[j].ids != NULL)
            rm_free_reply(cl.lanes[j].ids);
    }
    for (int j = 0; j < cl.ngot; j++)
        rm_free_reply(cl.got[j]);
    set_free(&cl.by_name);
    free(per);
    free(order);
    free(turns);
    free(tail);
    free(back);
    free(cl.lanes);
    free(cl.ring);
    free(cl.got);
    return RM_OK;
}

/* ---- complete (completions only) ---------------------------------------- */

static int native_complete(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    struct call c = {.ctx = ctx};
    size_t kn;
    const char *ks = argc > 2 ? rm_str(argv[2], &kn) : "";
    double keep;
    if (argc < 5 || !to_num(ks, kn, &keep) || keep < 0)
        return rm_reply_error(ctx, "EARG retention_ms and items expected");
    for (int i = 3; i < argc; i += 2) {
        size_t n;
        const char *w = rm_str(argv[i], &n);
        if (n == 4 && memcmp(w, "fail", 4) == 0)
            return delegate(ctx);
    }
    if ((argc - 3) % 2 != 0)
        return rm_reply_error(ctx, "EARG a completion needs a job and a lease");
    c.pfx = rm_str(argv[1], &c.pn);
    long long t_now = now_ms(&c);
    char now[24];
    size_t now_n = fmt_ll(now, t_now);
    if (!plain_queue(&c, false))
        return delegate(ctx);
    int items = (argc - 3) / 2;
    /* The call's settled jobs leave the lease indexes together at its end
     * (lib.lua: batch_put / batch_run): the lanes in the order met. */
    struct vec all = {0}, kept = {0};
    struct vec *per = calloc((size_t)items, sizeof(*per));
    RedisModuleCallReply **names = calloc((size_t)items, sizeof(*names));
    int nlanes = 0;
    struct set lanes;
    set_init(&lanes, (size_t)items);
    rm_reply_array(ctx, items);
    for (int i = 0; i < items; i++) {
        RedisModuleString *id = argv[3 + 2 * i], *tok = argv[4 + 2 * i];
        size_t idn, tn;
        const char *ids = rm_str(id, &idn), *ts = rm_str(tok, &tn);
        buf_key(&c.k, c.pfx, c.pn, "job:", ids, idn, NULL);
        RedisModuleCallReply *f =
            rm_call(ctx, "HMGET", "bccc", c.k.s, c.k.n, "state", "lease", "group");
        size_t sn = 0, ln = 0, gn = 0;
        const char *st = rm_reply_str(rm_reply_element(f, 0), &sn);
        const char *ls = rm_reply_str(rm_reply_element(f, 1), &ln);
        const char *g = rm_reply_str(rm_reply_element(f, 2), &gn);
        bool lease_ok = ls != NULL && ln == tn && memcmp(ls, ts, tn) == 0;
        if (st == NULL) {
            rm_reply_buffer(ctx, "ENOJOB", 6);
        } else if (sn != 6 || memcmp(st, "active", 6) != 0 || !lease_ok) {
            bool again = sn == 9 && memcmp(st, "completed", 9) == 0 && lease_ok;
            rm_reply_buffer(ctx, again ? "completed" : "ELEASE", again ? 9 : 6);
        } else {
            vec_put(&c, &all, ids, idn);
            if (g != NULL && gn > 0) {
                int at = set_find(&lanes, g, gn, false, 0);
                if (at < 0) {
                    at = set_find(&lanes, g, gn, true, nlanes);
                    names[nlanes++] = f; /* g points into f: kept to the end */
                    f = NULL;
                }
                vec_put(&c, &per[at], ids, idn);
            }
            if (keep == 0) {
                rm_free_reply(rm_call(ctx, "DEL", "!b", c.k.s, c.k.n));
            } else {
                rm_free_reply(rm_call(ctx, "HSET", "!bcccbcc", c.k.s, c.k.n, "state", "completed",
                                      "finished_ms", now, now_n, "payload", ""));
                vec_put(&c, &kept, ids, idn);
            }
            rm_reply_buffer(ctx, "completed", 9);
        }
        if (f != NULL)
            rm_free_reply(f);
    }
    struct buf k;
    if (all.n > 0) {
        buf_key(&k, c.pfx, c.pn, "active", NULL, 0, NULL);
        rm_free_reply(rm_call(ctx, "ZREM", "!bv", k.s, k.n, all.v, all.n));
    }
    for (int j = 0; j < nlanes; j++) {
        size_t gn;
        const char *g = rm_reply_str(rm_reply_element(names[j], 2), &gn);
        buf_key(&k, c.pfx, c.pn, "g:", g, gn, ":active");
        rm_free_reply(rm_call(ctx, "ZREM", "!bv", k.s, k.n, per[j].v, per[j].n));
        vec_clear(&c, &per[j]);
        free(per[j].v);
        rm_free_reply(names[j]);
    }
    if (kept.n > 0) {
        /* The retention bucket of the second at or after now + keep. */
        long long t = ((t_now + (long long)keep + 999) / 1000) * 1000;
        char tb[24];
        size_t tbn = fmt_ll(tb, t);
        buf_key(&k, c.pfx, c.pn, "done:", tb, tbn, NULL);
        if (call_int(rm_call(ctx, "RPUSH", "!bv", k.s, k.n, kept.v, kept.n)) == (long long)kept.n) {
            struct buf d;
            buf_key(&d, c.pfx, c.pn, "done", NULL, 0, NULL);
            rm_free_reply(rm_call(ctx, "ZADD", "!bbb", d.s, d.n, tb, tbn, tb, tbn));
        }
    }
    vec_clear(&c, &all);
    vec_clear(&c, &kept);
    free(all.v);
    free(kept.v);
    free(per);
    free(names);
    set_free(&lanes);
    return RM_OK;
}

/* ---- the commands: NAME function numkeys [key ...] prefix ARGV... ---- */

/* Each command takes FCALL's arguments for the library's function of the
 * same work, so a caller swaps only the command's name. A call that
 * declares keys (a cluster's) is passed on whole; otherwise native_*
 * reads argv as the function's ARGV, argv[1] the prefix. */
#define COMMAND(name)                                                                              \
    static int cmd_##name(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)                 \
    {                                                                                              \
        if (argc < 4)                                                                              \
            return rm_reply_error(ctx, "ERR a function, numkeys and a prefix expected");           \
        call_argv = argv;                                                                          \
        call_argc = argc;                                                                          \
        size_t n;                                                                                  \
        const char *keys = rm_str(argv[2], &n);                                                    \
        if (n != 1 || keys[0] != '0')                                                              \
            return delegate(ctx);                                                                  \
        return native_##name(ctx, argv + 2, argc - 2);                                             \
    }

COMMAND(enqueue_many)
COMMAND(enqueue)
COMMAND(claim)
COMMAND(complete)

/* ---- loading ------------------------------------------------------------ */

#define API(var, name)                                                                             \
    if (rm_get_api("RedisModule_" name, (void *)&(var)) != RM_OK)                                  \
    return RM_ERR

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc)
{
    (void)argv;
    (void)argc;
    /* The module ABI: the context's first word is RedisModule_GetApi. */
    rm_get_api = (int (*)(const char *, void *))((void **)ctx)[0];
    API(rm_set_attribs, "SetModuleAttribs");
    API(rm_create_command, "CreateCommand");
    API(rm_call, "Call");
    API(rm_free_reply, "FreeCallReply");
    API(rm_reply_type, "CallReplyType");
    API(rm_reply_integer, "CallReplyInteger");
    API(rm_reply_length, "CallReplyLength");
    API(rm_reply_element, "CallReplyArrayElement");
    API(rm_reply_str, "CallReplyStringPtr");
    API(rm_create_string, "CreateString");
    API(rm_free_string, "FreeString");
    API(rm_str, "StringPtrLen");
    API(rm_reply_array, "ReplyWithArray");
    API(rm_reply_set_len, "ReplySetArrayLength");
    API(rm_reply_buffer, "ReplyWithStringBuffer");
    API(rm_reply_ll, "ReplyWithLongLong");
    API(rm_reply_error, "ReplyWithError");
    API(rm_reply_call_reply, "ReplyWithCallReply");
    rm_set_attribs(ctx, "emqlanes", 1, RM_APIVER_1);
    if (rm_create_command(ctx, "emqlanes.enqueue_many", cmd_enqueue_many, "write deny-oom", 0, 0,
                          0) != RM_OK ||
        rm_create_command(ctx, "emqlanes.enqueue", cmd_enqueue, "write deny-oom", 0, 0, 0) !=
            RM_OK ||
        rm_create_command(ctx, "emqlanes.claim", cmd_claim, "write", 0, 0, 0) != RM_OK ||
        rm_create_command(ctx, "emqlanes.complete", cmd_complete, "write", 0, 0, 0) != RM_OK)
        return RM_ERR;
    return RM_OK;
}
