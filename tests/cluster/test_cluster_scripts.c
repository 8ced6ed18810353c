/* The lane scripts on a real Redis Cluster (issue 13): 3 masters and 3
 * replicas (tests/support/redis_cluster.h), where Redis itself refuses a
 * script that touches a key outside its slot. Every embedded script runs
 * (recipes.h), for queues on each master, on that queue's slot owner, as
 * emqd sends it (FCALL: Redis holds a function to the slot of its
 * declared keys), and must give its usual answer; a script with no recipe
 * fails the test. A deliberate stray is refused, so the harness would see
 * one. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_fixture.h"
#include "recipes.h"
#include "wait.h"

#define QUEUES_PER_MASTER 2

TestSuite(cluster, .init = cf_setup, .fini = cf_teardown, .timeout = 120);

/* Nothing left behind in the queue's indexes, and its invariants hold. */
static void expect_empty(const char *after)
{
    static const enum key_id idx[] = {KEY_PENDING, KEY_ACTIVE, KEY_DELAYED, KEY_DEAD};
    cr_assert_eq(cf_key_int("LLEN", fx_q.names[KEY_RING]), 0, "the ring after %s", after);
    for (size_t i = 0; i < sizeof(idx) / sizeof(idx[0]); i++)
        cr_assert_eq(cf_key_int("ZCARD", fx_q.names[idx[i]]), 0, "%s after %s", keys_suffix[idx[i]],
                     after);
    fx_assert_invariants(&fx_q);
}

/* Every recipe on queue p, on its slot owner. */
static void run_recipes(const struct cf_queue *p)
{
    unsigned long before[SCRIPT__COUNT];
    cf_use(p);
    for (int id = 0; id < SCRIPT__COUNT; id++)
        before[id] = lanes_calls(id);
    for (int id = 0; id < SCRIPT__COUNT; id++) {
        cluster_recipes[id]();
        expect_empty(script_table[id].name);
    }
    for (int id = 0; id < SCRIPT__COUNT; id++)
        cr_assert_gt(lanes_calls(id), before[id], "%s never ran", script_table[id].name);
}

Test(cluster, every_script_keeps_to_its_queue_slot_on_every_master)
{
    for (int id = 0; id < SCRIPT__COUNT; id++)
        cr_assert_not_null(cluster_recipes[id], "script %s has no cluster recipe",
                           script_table[id].name);
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX * QUEUES_PER_MASTER];
    cf_place_queues(q, QUEUES_PER_MASTER);
    for (int m = 0; m < cf_cluster.masters; m++) {
        for (int i = 0; i < QUEUES_PER_MASTER; i++)
            run_recipes(&q[m * QUEUES_PER_MASTER + i]);
    }
}

/* --- what proves the harness, and the wake ----------------------------- */

/* Run script id on fx_conn declaring fx_q's keys (as emqd does on a
 * cluster) but with ARGV[1], the prefix every key is built from, of queue
 * other: a script that strays out of its slot. Asserts that it is
 * refused. */
static void expect_refused(enum script_id id, const char *other, const char *why, ...)
{
    struct keys mixed = fx_q, o;
    cr_assert_eq(keys_init(&o, other, strlen(other)), 0);
    memcpy(mixed.prefix, o.prefix, o.prefix_len + 1);
    mixed.prefix_len = o.prefix_len;
    va_list ap;
    va_start(ap, why);
    redisReply *r = lanes_vcall(fx_conn, &mixed, id, ap);
    va_end(ap);
    cr_assert(cf_refused(r), "%s (%s) was not refused: %s", script_table[id].name, why,
              r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "it ran");
    freeReplyObject(r);
}

Test(cluster, a_call_that_leaves_its_slot_is_refused)
{
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX * 2];
    cf_place_queues(q, 2);
    const struct cf_queue *a = &q[0], *near = &q[1], *far = &q[2];
    cr_assert_neq(redis_cluster_slot(a->name, strlen(a->name)),
                  redis_cluster_slot(near->name, strlen(near->name)));
    cf_use(a);

    /* Keys of two slots declared in one call: refused before it runs. */
    struct keys kn;
    cr_assert_eq(keys_init(&kn, near->name, strlen(near->name)), 0);
    const char *eval[] = {"EVAL", "return 1", "2", fx_q.names[KEY_RING], kn.names[KEY_RING]};
    redisReply *r = redisCommandArgv(fx_conn, 5, eval, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "CROSSSLOT", 9) == 0,
              "two declared slots: %s", r && r->str ? r->str : "it ran");
    freeReplyObject(r);

    /* Undeclared keys of another master's slot: refused. */
    expect_refused(SCRIPT_ENQUEUE, far->name, "row on another master", "JOBx1", "", "{}", "0", "0",
                   NULL);
    /* Of another slot on the same master: refused too, for a function
     * with the flag allow-oom (pause.lua) and for one with no flag
     * (enqueue.lua) alike. Redis lets an EVAL script without a shebang
     * through there; every function is held to its declared slot. */
    expect_refused(SCRIPT_PAUSE, near->name, "lane in another slot", "TENx", NULL);
    expect_refused(SCRIPT_ENQUEUE, near->name, "row in another slot", "JOBx1", "", "{}", "0", "0",
                   NULL);
}

Test(cluster, a_wake_is_published_on_its_queue_s_shard)
{
    /* lib.lua's wake() SPUBLISHes on the queue's wake key, which carries
     * the queue's hash tag: Redis delivers it to the subscribers on the
     * slot's owner (the bus takes it to that shard's replicas only, not
     * to every node), and any other master refuses the channel. */
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    cf_use(&q[0]);
    int ms = wait_deadline_ms(0);
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    redisContext *owner = redis_cluster_connect(&cf_cluster, q[0].node);
    redisContext *other = redis_cluster_connect(&cf_cluster, q[1].node);
    cr_assert(owner != NULL && other != NULL && q[1].node != q[0].node);
    cr_assert_eq(redisSetTimeout(owner, tv), REDIS_OK);
    redisReply *r = redisCommand(owner, "SSUBSCRIBE %s", fx_q.names[KEY_WAKE]);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 3, "SSUBSCRIBE failed");
    cr_assert_str_eq(r->element[0]->str, "ssubscribe");
    freeReplyObject(r);
    r = redisCommand(other, "SSUBSCRIBE %s", fx_q.names[KEY_WAKE]);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "MOVED ", 6) == 0,
              "another master took the channel: %s", r != NULL && r->str ? r->str : "?");
    freeReplyObject(r);
    redisFree(other);

    cr_assert_eq(fx_enqueue("JOBwk1", NULL, "{}"), 1); /* the flat set was empty: a wake */
    r = NULL;
    cr_assert_eq(redisGetReply(owner, (void **)&r), REDIS_OK,
                 "the owner's subscriber heard no wake");
    cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    cr_assert_str_eq(r->element[0]->str, "smessage");
    cr_assert_str_eq(r->element[1]->str, fx_q.names[KEY_WAKE]);
    cr_assert_str_eq(r->element[2]->str, fx_q.prefix);
    freeReplyObject(r);
    redisFree(owner);
    cf_settle();
}

/* --- a slot being migrated --------------------------------------------- */

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int by_reply_str(const void *a, const void *b)
{
    return strcmp((*(redisReply *const *)a)->str, (*(redisReply *const *)b)->str);
}

/* A command on c, after ASKING when asking (c is the importing node). */
static redisReply *ask_cmd(redisContext *c, bool asking, const char *fmt, const char *key)
{
    if (asking)
        freeReplyObject(redisCommand(c, "ASKING"));
    redisReply *r = redisCommand(c, fmt, key);
    cr_assert(r != NULL && r->type != REDIS_REPLY_ERROR, "%s %s: %s", fmt, key,
              r != NULL && r->str != NULL ? r->str : "?");
    return r;
}

/* Key's value as text, the same on any node: "key type: item item ...",
 * a set's members and a hash's "field=value" pairs sorted (their order is
 * the node's own). */
static void key_text(redisContext *c, bool asking, const char *key, char *out, size_t cap)
{
    static const char *const read[][2] = {
        {"string", "GET %s"},
        {"list", "LRANGE %s 0 -1"},
        {"set", "SMEMBERS %s"},
        {"hash", "HGETALL %s"},
        {"zset", "ZRANGE %s 0 -1 WITHSCORES"},
    };
    redisReply *t = ask_cmd(c, asking, "TYPE %s", key);
    size_t len = (size_t)snprintf(out, cap, "%s %s:", key, t->str);
    for (size_t i = 0; i < sizeof(read) / sizeof(read[0]); i++) {
        if (strcmp(t->str, read[i][0]) != 0)
            continue;
        redisReply *v = ask_cmd(c, asking, read[i][1], key);
        bool hash = i == 3, sorted = i == 2 || i == 3;
        size_t n = v->type == REDIS_REPLY_ARRAY ? v->elements / (hash ? 2 : 1) : 1;
        char **items = calloc(n, sizeof(*items));
        cr_assert_not_null(items);
        for (size_t k = 0; k < n; k++) {
            const redisReply *e = v->type == REDIS_REPLY_ARRAY ? v->element[k * (hash ? 2 : 1)] : v;
            size_t cap_k = e->len + (hash ? v->element[k * 2 + 1]->len : 0) + 2;
            items[k] = malloc(cap_k);
            cr_assert_not_null(items[k]);
            snprintf(items[k], cap_k, "%s%s%s", e->str, hash ? "=" : "",
                     hash ? v->element[k * 2 + 1]->str : "");
        }
        if (sorted)
            qsort(items, n, sizeof(*items), by_str);
        for (size_t k = 0; k < n; k++) {
            len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, " %s", items[k]);
            free(items[k]);
        }
        free(items);
        freeReplyObject(v);
    }
    freeReplyObject(t);
    cr_assert_lt(len, cap, "the value of %s is too long", key);
}

/* Every key of slot on c, by name, with its value, as one comparable
 * text. */
static char *slot_dump(redisContext *c, int slot, bool asking)
{
    redisReply *keys = redisCommand(c, "CLUSTER GETKEYSINSLOT %d 1000", slot);
    cr_assert(keys != NULL && keys->type == REDIS_REPLY_ARRAY);
    qsort(keys->element, keys->elements, sizeof(*keys->element), by_reply_str);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    out[0] = '\0';
    for (size_t i = 0; i < keys->elements; i++) {
        key_text(c, asking, keys->element[i]->str, out + len, cap - len - 1);
        len += strlen(out + len);
        out[len++] = '\n';
        out[len] = '\0';
    }
    freeReplyObject(keys);
    return out;
}

/* Every script, sent on c (after ASKING when asking), is refused with
 * want before it runs. */
static void expect_every_script(redisContext *c, bool asking, const char *want)
{
    for (int id = 0; id < SCRIPT__COUNT; id++) {
        if (asking)
            freeReplyObject(redisCommand(c, "ASKING"));
        redisReply *r = lanes_call(c, &fx_q, id, NULL);
        cr_assert(r != NULL && r->type == REDIS_REPLY_ERROR &&
                      strncmp(r->str, want, strlen(want)) == 0,
                  "%s while its slot migrates: %s, want %s", script_table[id].name,
                  r == NULL                      ? "no reply"
                  : r->type == REDIS_REPLY_ERROR ? r->str
                                                 : "it ran",
                  want);
        freeReplyObject(r);
    }
}

/* Script id sent on c (after ASKING when asking) without the guard: its
 * reply. */
static redisReply *unguarded(redisContext *c, bool asking, enum script_id id, ...)
{
    va_list ap;
    /* Loaded first: the retry after "Function not found" would go without
     * ASKING. */
    cr_assert(lanes_load(c), "the library did not load");
    lanes_set_guard(false);
    if (asking)
        freeReplyObject(redisCommand(c, "ASKING"));
    va_start(ap, id);
    redisReply *r = lanes_vcall(c, &fx_q, id, ap);
    va_end(ap);
    lanes_set_guard(true);
    cr_assert_not_null(r);
    return r;
}

/* MIGRATE keys (n of them) of the queue from node from to node to. */
static void migrate(int from, int to, const char *const *keys, size_t n)
{
    char port[16];
    const char *argv[16] = {"MIGRATE", "127.0.0.1", port, "", "0", "10000", "KEYS"};
    cr_assert_leq(n, 9);
    snprintf(port, sizeof(port), "%d", cf_cluster.node[to].port);
    for (size_t i = 0; i < n; i++)
        argv[7 + i] = keys[i];
    redisContext *c = redis_cluster_connect(&cf_cluster, from);
    cr_assert_not_null(c);
    redisReply *r = redisCommandArgv(c, (int)(7 + n), argv, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "MIGRATE: %s",
              r != NULL && r->str != NULL ? r->str : "?");
    freeReplyObject(r);
    redisFree(c);
}

Test(cluster, no_script_runs_on_either_side_while_its_slot_is_migrated)
{
    /* A queue with every one of its ten keys: the one case where Redis
     * would run a script on a migrating slot, since the call's declared
     * keys are all there. The guard, declared too and never there, makes
     * Redis refuse every script with TRYAGAIN on the old owner while any
     * of the queue's keys is still on it, and on the new one (after ASK)
     * until the slot is assigned: no script meets a row or lane half moved. */
    struct cf_queue q[REDIS_CLUSTER_NODES_MAX];
    cf_place_queues(q, 1);
    cf_use(&q[0]);
    int slot = redis_cluster_slot(q[0].name, strlen(q[0].name)), from = q[0].node;
    int to = cf_other_master(from);
    struct leased l;
    cr_assert_eq(fx_enqueue_delayed("JOBmg1", "TENmgd", 0, 1), 1);
    l = cf_claim_one(false, 600000);
    redisReply *r =
        cf_array(1, SCRIPT_COMPLETE, "86400000", "fail", l.job, l.lease, "x", "0", "1", NULL);
    cf_expect_str_at(r, 0, "dead");
    freeReplyObject(r);
    cr_assert_eq(fx_enqueue("JOBmg2", "TENmga", "{}"), 1);
    l = cf_claim_one(false, 600000);                       /* active, seq */
    cr_assert_eq(fx_enqueue("JOBmg3", "TENmga", "{}"), 1); /* ring, its lane */
    cr_assert_eq(fx_enqueue("JOBmg4", NULL, "{}"), 1);     /* pending */
    cr_assert_eq(fx_enqueue_delayed("JOBmg5", "TENmgb", 3600000, 0), 1);
    freeReplyObject(cf_call(SCRIPT_LIMIT, "TENmgb", "2", NULL));
    freeReplyObject(cf_call(SCRIPT_PAUSE, "TENmgc", NULL));
    for (int k = 0; k < KEY__COUNT; k++)
        cr_assert_eq(cf_key_int("EXISTS", fx_q.names[k]), 1, "%s", keys_suffix[k]);
    char *before = slot_dump(fx_conn, slot, false);
    size_t lines = 0;
    for (const char *p = before; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    cr_assert_gt(lines, KEY__COUNT, "the slot holds the ten keys and the jobs' rows");

    /* MIGRATING, nothing moved yet: refused, though every key is there;
     * without the guard a script runs. */
    char from_id[48], to_id[48];
    cr_assert_eq(redis_cluster_node_id(&cf_cluster, from, from_id), 0);
    cr_assert_eq(redis_cluster_node_id(&cf_cluster, to, to_id), 0);
    redisContext *t = redis_cluster_connect(&cf_cluster, to);
    cr_assert_not_null(t);
    freeReplyObject(redisCommand(t, "CLUSTER SETSLOT %d IMPORTING %s", slot, from_id));
    freeReplyObject(redisCommand(fx_conn, "CLUSTER SETSLOT %d MIGRATING %s", slot, to_id));
    expect_every_script(fx_conn, false, "TRYAGAIN");
    r = unguarded(fx_conn, false, SCRIPT_DEPTH, "", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "without the guard depth runs");
    freeReplyObject(r);

    /* A row gone ahead of the queue's keys (a batch of redis-cli's): a
     * script that reaches it fails there, after what it wrote before
     * (Redis does not roll a script back); with the guard it never runs. */
    char row[KEYS_PREFIX_MAX + 16];
    snprintf(row, sizeof(row), "%sjob:JOBmg3", fx_q.prefix);
    const char *moved[] = {row};
    migrate(from, to, moved, 1);
    r = unguarded(fx_conn, false, SCRIPT_JOB, "JOBmg3", NULL);
    cr_assert(r->type == REDIS_REPLY_ERROR && strstr(r->str, "non local key") != NULL,
              "a script reaching a moved row: %s", r->str != NULL ? r->str : "it ran");
    freeReplyObject(r);
    expect_every_script(fx_conn, false, "TRYAGAIN");

    /* Every key moved: the old owner says ASK; the new one, importing,
     * would run a script (its declared keys are all there), but with the
     * guard answers TRYAGAIN. */
    for (;;) {
        redisReply *rest = redisCommand(fx_conn, "CLUSTER GETKEYSINSLOT %d 9", slot);
        cr_assert(rest != NULL && rest->type == REDIS_REPLY_ARRAY);
        const char *names[9];
        size_t n = rest->elements;
        for (size_t i = 0; i < n; i++)
            names[i] = rest->element[i]->str;
        if (n > 0)
            migrate(from, to, names, n);
        freeReplyObject(rest);
        if (n == 0)
            break;
    }
    expect_every_script(fx_conn, false, "ASK ");
    expect_every_script(t, true, "TRYAGAIN");
    r = unguarded(t, true, SCRIPT_DEPTH, "", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_INTEGER,
                 "without the guard depth runs on the importing node");
    freeReplyObject(r);

    /* Nothing changed: the keys arrived as they left. */
    char *after = slot_dump(t, slot, true);
    cr_assert_str_eq(after, before);
    free(before);
    free(after);
    redisFree(t);

    /* Assigned: the queue is served on its new owner. */
    cf_slot_assign(slot, to);
    q[0].node = to;
    cf_use(&q[0]);
    cr_assert_eq(cf_key_int("ZCARD", fx_q.names[KEY_DEAD]), 1);
    cr_assert_eq(fx_enqueue("JOBmg6", "TENmga", "{}"), 1);
}
