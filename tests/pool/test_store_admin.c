/* The admin typed calls (daemon/store/admin.h) against a real
 * redis-server on a real loop: each decodes what its script returns into
 * its typed result, and refuses (WIRE_EINTERNAL) a reply of a shape it
 * does not expect, which a hand-written row or registry can provoke. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "lanes.h"
#include "redis_server.h"
#include "loop_wait.h"
#include "wait.h"

/* What the last callback was told. */
struct got {
    int calls;
    enum wire_error code;
    char message[128];
    bool changed, some; /* some: the result pointer was non-NULL */
    uint64_t n, a, b;
    struct store_stats stats;
    char text[8][80]; /* strings of the result, copied */
    long long num[8];
};

static struct {
    uv_loop_t loop;
    uv_timer_t tick;
    struct redis_server rs;
    struct pool *pool;
    struct store_queue sq;
    redisContext *rc;
    int closed;
    struct got got;
} w;

/* Run the loop until cond holds or the hang guard passes. */
#define RUN_UNTIL(cond) LOOP_RUN_UNTIL(&w.loop, &w.tick, cond)

/* Start a call: the result of the one before is forgotten. */
#define CALL(expr)                                                                                 \
    do {                                                                                           \
        memset(&w.got, 0, sizeof(w.got));                                                          \
        cr_assert_eq((expr), 0, "%s not accepted", #expr);                                         \
        cr_assert_eq(w.got.calls, 0, "never from inside the call");                                \
        RUN_UNTIL(w.got.calls > 0);                                                                \
        cr_assert_eq(w.got.calls, 1, "the callback runs exactly once");                            \
    } while (0)

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    memset(&w, 0, sizeof(w));
    cr_assert_eq(redis_server_start(&w.rs, NULL), 0, "cannot start redis-server");
    cr_assert_eq(uv_loop_init(&w.loop), 0);
    uv_timer_init(&w.loop, &w.tick);
    /* One connection: the plain commands, on no route, stay in order. */
    struct pool_config cfg = {.host = "127.0.0.1", .port = w.rs.port, .size = 1};
    cr_assert_eq(pool_new(&w.loop, &cfg, &w.pool), 0);
    RUN_UNTIL(pool_up(w.pool));
    cr_assert(pool_up(w.pool), "pool never came up: %s", pool_last_error(w.pool));
    cr_assert_eq(store_queue_init(&w.sq, w.pool, "q", 1), 0);
    w.rc = redis_server_connect(&w.rs);
    cr_assert_not_null(w.rc);
}

static void done_cb(void *priv)
{
    (void)priv;
    w.closed++;
}

static void teardown(void)
{
    if (w.rc != NULL)
        redisFree(w.rc);
    if (w.pool != NULL) {
        pool_close(w.pool, done_cb, NULL);
        while (w.closed == 0)
            uv_run(&w.loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&w.tick, NULL);
    uv_run(&w.loop, UV_RUN_DEFAULT);
    uv_loop_close(&w.loop);
    redis_server_stop(&w.rs);
}

TestSuite(store_admin, .init = setup, .fini = teardown, .timeout = 60);

/* --- callbacks: each copies what it is given into w.got --------------- */

static void status(const struct store_status *st)
{
    w.got.calls++;
    w.got.code = st->code;
    snprintf(w.got.message, sizeof(w.got.message), "%s", st->message);
}

static void put_text(int i, const char *s, size_t len)
{
    snprintf(w.got.text[i], sizeof(w.got.text[i]), "%.*s", (int)len, s ? s : "");
}

static void done(void *priv, const struct store_status *st)
{
    (void)priv;
    status(st);
}

static void changed(void *priv, const struct store_status *st, bool c)
{
    (void)priv;
    status(st);
    w.got.changed = c;
}

static void count(void *priv, const struct store_status *st, uint64_t n)
{
    (void)priv;
    status(st);
    w.got.n = n;
}

static void reassigned(void *priv, const struct store_status *st, const char *from, size_t len)
{
    (void)priv;
    status(st);
    w.got.some = from != NULL;
    put_text(0, from, len);
}

static void drained(void *priv, const struct store_status *st, const struct store_drained *res)
{
    (void)priv;
    status(st);
    w.got.some = res != NULL;
    if (res != NULL) {
        w.got.a = res->drained;
        w.got.b = res->left;
    }
}

static void stats(void *priv, const struct store_status *st, const struct store_stats *res)
{
    (void)priv;
    status(st);
    w.got.some = res != NULL;
    if (res != NULL)
        w.got.stats = *res;
}

static void groups(void *priv, const struct store_status *st, const struct store_groups *res)
{
    (void)priv;
    status(st);
    w.got.some = res != NULL;
    if (res == NULL)
        return;
    w.got.n = res->n;
    put_text(0, res->cursor, strlen(res->cursor));
    for (size_t i = 0; i < res->n && i < 7; i++) {
        const struct store_group_row *g = &res->rows[i];
        put_text(1 + (int)i, g->group, g->group_len);
        w.got.num[1 + i] = (long long)g->depth * 1000 + (long long)g->active * 100 +
                           (g->limit + 1) * 10 + g->paused;
    }
}

static void row(void *priv, const struct store_status *st, const struct store_row *res)
{
    (void)priv;
    status(st);
    w.got.some = res != NULL;
    if (res == NULL)
        return;
    w.got.n = res->nfields;
    put_text(0, res->state.str, res->state.len);
    put_text(1, res->group.str, res->group.len);
    put_text(2, res->lease.str, res->lease.len);
    w.got.num[0] = res->attempts;
    w.got.num[1] = res->max_attempts;
    w.got.num[2] = res->created_ms;
    w.got.num[3] = res->lease_until;
    /* The fields in the row's order: "name=value" or "name#number". */
    for (size_t i = 0; i < res->nfields && i < 5; i++) {
        const struct store_row_field *f = &res->fields[i];
        if (f->numeric)
            snprintf(w.got.text[3 + i], sizeof(w.got.text[0]), "%s#%lld", f->name.str, f->num);
        else
            snprintf(w.got.text[3 + i], sizeof(w.got.text[0]), "%s=%s", f->name.str, f->value.str);
    }
}

static void dead(void *priv, const struct store_status *st, size_t n,
                 const struct store_dead_row *rows)
{
    (void)priv;
    status(st);
    w.got.n = n;
    w.got.some = rows != NULL;
    for (size_t i = 0; i < n && i < 8; i++) {
        put_text((int)i, rows[i].job.str, rows[i].job.len);
        w.got.num[i] = rows[i].attempts;
    }
}

static void texts(void *priv, const struct store_status *st, size_t n, const struct store_text *v)
{
    (void)priv;
    status(st);
    w.got.n = n;
    for (size_t i = 0; i < n && i < 8; i++)
        put_text((int)i, v[i].str, v[i].len);
}

/* --- helpers ----------------------------------------------------------- */

static void enqueue(const char *job, const char *group)
{
    redisReply *r =
        lanes_call(w.rc, &w.sq.keys, SCRIPT_ENQUEUE, job, group, "{\"n\":1}", "0", "0", NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1, "enqueue %s", job);
    freeReplyObject(r);
}

static void redis(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(w.rc, fmt, ap);
    va_end(ap);
    cr_assert(r != NULL && r->type != REDIS_REPLY_ERROR, "%s", fmt);
    freeReplyObject(r);
}

static bool has_text(const char *s)
{
    for (int i = 0; i < 8; i++)
        if (strcmp(w.got.text[i], s) == 0)
            return true;
    return false;
}

/* --- the calls, as the scripts answer them ---------------------------- */

Test(store_admin, levers_decode)
{
    enqueue("JOBa", "GRPa");
    enqueue("JOBb", "GRPa");
    enqueue("JOBc", "");

    CALL(store_limit(&w.sq, "GRPa", 1, done, NULL));
    cr_assert_eq(w.got.code, 0);
    CALL(store_pause(&w.sq, "GRPa", changed, NULL));
    cr_assert(w.got.code == 0 && w.got.changed);
    CALL(store_pause(&w.sq, "GRPa", changed, NULL));
    cr_assert(w.got.code == 0 && !w.got.changed, "already paused");
    CALL(store_resume(&w.sq, "GRPa", changed, NULL));
    cr_assert(w.got.code == 0 && w.got.changed);
    CALL(store_limit(&w.sq, "bad", 1, done, NULL));
    cr_assert_eq(w.got.code, WIRE_EBRAND, "the script's error, with its text");
    cr_assert_str_eq(w.got.message, "malformed group id");

    CALL(store_reassign(&w.sq, "JOBc", "GRPb", reassigned, NULL));
    cr_assert(w.got.code == 0 && !w.got.some, "from an ungrouped job: NULL");
    CALL(store_reassign(&w.sq, "JOBa", "GRPb", reassigned, NULL));
    cr_assert(w.got.code == 0 && w.got.some);
    cr_assert_str_eq(w.got.text[0], "GRPa");
    CALL(store_reassign(&w.sq, "JOBnone", "GRPb", reassigned, NULL));
    cr_assert_eq(w.got.code, WIRE_ENOJOB);

    CALL(store_drain(&w.sq, "GRPb", 1, drained, NULL));
    cr_assert(w.got.code == 0 && w.got.some);
    cr_assert_eq(w.got.a, 1);
    cr_assert_eq(w.got.b, 1, "one left in the lane for the next call");
    CALL(store_drain(&w.sq, "GRPb", 0, drained, NULL));
    cr_assert(w.got.code == WIRE_EARG && !w.got.some);
}

Test(store_admin, reads_decode)
{
    enqueue("JOBa", "GRPa");
    enqueue("JOBb", "GRPa");
    enqueue("JOBc", "");
    CALL(store_limit(&w.sq, "GRPa", 3, done, NULL));
    CALL(store_pause(&w.sq, "GRPa", changed, NULL));

    CALL(store_depth(&w.sq, "GRPa", count, NULL));
    cr_assert(w.got.code == 0 && w.got.n == 2);
    CALL(store_depth(&w.sq, "", count, NULL));
    cr_assert(w.got.code == 0 && w.got.n == 1, "the flat set");

    CALL(store_stats(&w.sq, stats, NULL));
    cr_assert(w.got.code == 0 && w.got.some);
    struct store_stats want = {.pending = 3,
                               .groups = 1,
                               .paused = 1,
                               .flat = 1,
                               .def_limit = -1,
                               .def_weight = -1,
                               .def_rate_max = -1,
                               .def_rate_per_ms = -1,
                               .def_cap = -1};
    cr_assert_arr_eq(&w.got.stats, &want, sizeof(want));

    CALL(store_groups(&w.sq, "0", 100, groups, NULL));
    cr_assert(w.got.code == 0 && w.got.some);
    cr_assert_str_eq(w.got.text[0], "0", "one page holds them all");
    cr_assert_eq(w.got.n, 1);
    cr_assert_str_eq(w.got.text[1], "GRPa");
    cr_assert_eq(w.got.num[1], 2000 + 0 + 40 + 1, "depth 2, active 0, limit 3, paused");

    CALL(store_check(&w.sq, STORE_CHECK_BUDGET, texts, NULL));
    cr_assert(w.got.code == 0 && w.got.n == 0, "%s", w.got.text[0]);
    redis("RPUSH emq:{q}:ring GRPa");
    CALL(store_check(&w.sq, STORE_CHECK_BUDGET, texts, NULL));
    cr_assert(w.got.code == 0 && w.got.n >= 1);
    cr_assert(has_text("ring: GRPa is on the ring but not serviceable"), "%s", w.got.text[0]);
}

Test(store_admin, job_row_decodes)
{
    enqueue("JOBa", "GRPa");
    CALL(store_job_row(&w.sq, "JOBa", row, NULL));
    cr_assert(w.got.code == 0 && w.got.some);
    cr_assert_str_eq(w.got.text[0], "pending");
    cr_assert_str_eq(w.got.text[1], "GRPa");
    cr_assert_str_eq(w.got.text[2], "", "no lease while pending");
    cr_assert_eq(w.got.num[0], 0);
    cr_assert_eq(w.got.num[1], 0);
    cr_assert_gt(w.got.num[2], 0, "created_ms");
    cr_assert_eq(w.got.num[3], -1, "no lease_until: -1");
    /* The row's own order: state first (HSETNX), then enqueue's HSET;
     * attempts, which a job has no field for before its first lease, is
     * shown as 0 after the row's fields (lib.lua:row_view). */
    cr_assert_str_eq(w.got.text[3], "state=pending");
    cr_assert_str_eq(w.got.text[4], "group=GRPa");
    cr_assert_str_eq(w.got.text[5], "payload={\"n\":1}");
    cr_assert_str_eq(w.got.text[6], "max_attempts#0");

    CALL(store_job_row(&w.sq, "JOBnone", row, NULL));
    cr_assert(w.got.code == WIRE_ENOJOB && !w.got.some);
    cr_assert_str_eq(w.got.message, "no such job (never enqueued, or expired after completion)");

    /* A field no script writes stays available: a "*_ms" number as one,
     * anything else as text; a payload that looks like a number stays
     * text. */
    redis("HSET emq:{q}:job:JOBh state pending payload 5 note_ms 12 other_ms soon x 7");
    CALL(store_job_row(&w.sq, "JOBh", row, NULL));
    cr_assert(w.got.code == 0 && w.got.some);
    cr_assert_str_eq(w.got.text[4], "payload=5");
    cr_assert_str_eq(w.got.text[5], "note_ms#12");
    cr_assert_str_eq(w.got.text[6], "other_ms=soon");
    cr_assert_str_eq(w.got.text[7], "x=7");
}

Test(store_admin, dead_decodes)
{
    CALL(store_dead_list(&w.sq, "", 10, dead, NULL));
    cr_assert(w.got.code == 0 && w.got.n == 0);
    redis("HSET emq:{q}:job:JOBd state dead group GRPa attempts 3 error boom finished_ms 5");
    redis("ZADD emq:{q}:dead 5 JOBd");
    CALL(store_dead_list(&w.sq, "", 10, dead, NULL));
    cr_assert(w.got.code == 0 && w.got.n == 1);
    cr_assert_str_eq(w.got.text[0], "JOBd");
    cr_assert_eq(w.got.num[0], 3);
    CALL(store_dead_list(&w.sq, "JOBnone", 10, dead, NULL));
    cr_assert(w.got.code == WIRE_ENOJOB && w.got.n == 0 && !w.got.some);
    CALL(store_dead_retry(&w.sq, "JOBd", 10, count, NULL));
    cr_assert(w.got.code == 0 && w.got.n == 1);
    CALL(store_dead_purge(&w.sq, "", 10, count, NULL));
    cr_assert(w.got.code == 0 && w.got.n == 0, "retried: nothing left to purge");
}

/* --- shapes the decoders refuse ---------------------------------------- */

Test(store_admin, malformed_replies_refused)
{
    /* A row whose attempts is not a number: the decoder refuses it rather
     * than show 0. */
    redis("HSET emq:{q}:job:JOBx state pending attempts many");
    CALL(store_job_row(&w.sq, "JOBx", row, NULL));
    cr_assert(w.got.code == WIRE_EINTERNAL && !w.got.some);
    cr_assert_str_eq(w.got.message, "unexpected backend reply");

    /* dead.lua's tonumber() of such a row is nil, which leaves a hole in
     * its reply: four elements for one job. */
    redis("ZADD emq:{q}:dead 5 JOBx");
    CALL(store_dead_list(&w.sq, "", 10, dead, NULL));
    cr_assert(w.got.code == WIRE_EINTERNAL && w.got.n == 0 && !w.got.some);
}

/* --- the registry ------------------------------------------------------ */

Test(store_admin, registry)
{
    cr_assert_eq(store_queues_add(w.pool, NULL, "qa", 2), 0);
    cr_assert_eq(store_queues_add(w.pool, NULL, "not valid", 9), -EINVAL);
    redis("SADD emq:queues qb {bad}");
    CALL(store_queues_list(w.pool, texts, NULL));
    cr_assert_eq(w.got.code, 0);
    cr_assert_eq(w.got.n, 2, "the invalid name is passed over");
    cr_assert(has_text("qa") && has_text("qb"));

    redis("DEL emq:queues");
    redis("SET emq:queues x");
    CALL(store_queues_list(w.pool, texts, NULL));
    cr_assert_eq(w.got.code, WIRE_EINTERNAL, "WRONGTYPE is the backend's error");
    cr_assert_eq(w.got.n, 0);
}
