/* cluster_fixture: see cluster_fixture.h. */
#include "cluster_fixture.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wait.h"

struct redis_cluster cf_cluster;

void cf_setup(void)
{
    /* Scripts are called as emqd calls them on a cluster: with the guard. */
    lanes_set_guard(true);
    cr_assert_eq(redis_cluster_start(&cf_cluster, 3, 1), 0, "the cluster did not start");
}

void cf_teardown(void)
{
    redisFree(fx_conn);
    fx_conn = NULL;
    redis_cluster_stop(&cf_cluster);
}

void cf_use(const struct cf_queue *q)
{
    redisFree(fx_conn);
    fx_conn = redis_cluster_connect(&cf_cluster, q->node);
    cr_assert_not_null(fx_conn, "cannot connect to node %d", q->node);
    cr_assert_eq(keys_init(&fx_q, q->name, strlen(q->name)), 0);
}

void cf_place_queues(struct cf_queue *out, int per)
{
    int owners[REDIS_CLUSTER_NODES_MAX], count[REDIS_CLUSTER_NODES_MAX] = {0}, nowners = 0;
    int done = 0;
    for (int k = 0; done < cf_cluster.masters * per; k++) {
        cr_assert_lt(k, 10000, "no queue name found on every master");
        char name[16];
        snprintf(name, sizeof(name), "c%d", k);
        int node = redis_cluster_node_for_slot(&cf_cluster, redis_cluster_slot(name, strlen(name)));
        cr_assert_geq(node, 0, "no master serves the slot of %s", name);
        int m = 0;
        while (m < nowners && owners[m] != node)
            m++;
        if (m == nowners)
            owners[nowners++] = node;
        cr_assert_leq(nowners, cf_cluster.masters, "more masters serve slots than were made");
        if (count[m] == per)
            continue;
        struct cf_queue *p = &out[m * per + count[m]++];
        snprintf(p->name, sizeof(p->name), "%s", name);
        p->node = node;
        done++;
    }
}

bool cf_refused(const redisReply *r)
{
    static const char *const codes[] = {"CROSSSLOT", "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"};
    if (r == NULL || r->type != REDIS_REPLY_ERROR)
        return false;
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        if (strncmp(r->str, codes[i], strlen(codes[i])) == 0)
            return true;
    return strstr(r->str, "non local key") != NULL || strstr(r->str, "same slot") != NULL;
}

redisReply *cf_call(enum script_id id, ...)
{
    va_list ap;
    va_start(ap, id);
    redisReply *r = lanes_vcall(fx_conn, &fx_q, id, ap);
    va_end(ap);
    cr_assert_not_null(r, "%s: connection error: %s", script_table[id].name, fx_conn->errstr);
    cr_assert_neq(r->type, REDIS_REPLY_ERROR, "%s on %s: %s%s", script_table[id].name, fx_q.prefix,
                  r->str, cf_refused(r) ? " (a cluster refusal: it left its slot)" : "");
    return r;
}

redisReply *cf_array(size_t n, enum script_id id, ...)
{
    va_list ap;
    va_start(ap, id);
    redisReply *r = lanes_vcall(fx_conn, &fx_q, id, ap);
    va_end(ap);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY, "%s on %s: %s", script_table[id].name,
              fx_q.prefix, r != NULL && r->str != NULL ? r->str : "not an array");
    cr_assert_eq(r->elements, n, "%s: %zu elements, want %zu", script_table[id].name, r->elements,
                 n);
    return r;
}

long long cf_int_at(const redisReply *r, size_t i)
{
    cr_assert_eq(r->element[i]->type, REDIS_REPLY_INTEGER, "element %zu is not an integer", i);
    return r->element[i]->integer;
}

void cf_expect_str_at(const redisReply *r, size_t i, const char *want)
{
    const redisReply *e = r->element[i];
    cr_assert(e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS,
              "element %zu is not a string", i);
    cr_assert_str_eq(e->str, want, "element %zu is %s, want %s", i, e->str, want);
}

long long cf_key_int(const char *cmd, const char *key)
{
    return redis_int(fx_conn, "%s %s", cmd, key);
}

void cf_expect_row(const char *job, const char *field, const char *want)
{
    char v[128];
    fx_row(job, field, v, sizeof(v));
    cr_assert_str_eq(v, want, "%s's %s is \"%s\", want \"%s\"", job, field, v, want);
}

bool cf_row_exists(const char *job)
{
    char key[KEYS_PREFIX_MAX + 80];
    snprintf(key, sizeof(key), "%sjob:%s", fx_q.prefix, job);
    return cf_key_int("EXISTS", key) == 1;
}

struct leased cf_claim_one(bool flat, long long lease_ms)
{
    struct leased l[1];
    size_t n = flat ? fx_claim_flat(1, lease_ms, l) : fx_claim(1, lease_ms, l, NULL);
    cr_assert_eq(n, 1, "nothing to claim");
    return l[0];
}

void cf_complete(const struct leased *l)
{
    char st[32];
    fx_complete(l->job, l->lease, st, sizeof(st));
    cr_assert_str_eq(st, "completed", "%s: %s", l->job, st);
}

void cf_settle(void)
{
    struct leased l[16];
    size_t n;
    while ((n = fx_claim(16, 60000, l, NULL)) > 0 || (n = fx_claim_flat(16, 60000, l)) > 0)
        for (size_t i = 0; i < n; i++)
            cf_complete(&l[i]);
}

void cf_await_lease_out(const char *job)
{
    fx_await_past(fx_deadline(job));
}

/* ---- moving a queue's slot --------------------------------------------- */

static void cf_node_id(int i, char out[48])
{
    cr_assert_eq(redis_cluster_node_id(&cf_cluster, i, out), 0, "CLUSTER MYID of node %d", i);
}

static void expect_status(redisContext *c, redisReply *r, const char *what)
{
    cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS, "%s: %s", what,
              r == NULL                      ? c->errstr
              : r->type == REDIS_REPLY_ERROR ? r->str
                                             : "not a status");
    freeReplyObject(r);
}

/* The first half of a slot move: from MIGRATING, to IMPORTING, and every
 * key of the slot MIGRATEd (in one MIGRATE, so no script sees the queue
 * half moved). Requests to from now answer ASK. */
void cf_slot_migrate(int slot, int from, int to)
{
    char from_id[48], to_id[48];
    cf_node_id(from, from_id);
    cf_node_id(to, to_id);
    redisContext *f = redis_cluster_connect(&cf_cluster, from);
    redisContext *t = redis_cluster_connect(&cf_cluster, to);
    cr_assert(f != NULL && t != NULL);
    expect_status(t, redisCommand(t, "CLUSTER SETSLOT %d IMPORTING %s", slot, from_id),
                  "IMPORTING");
    expect_status(f, redisCommand(f, "CLUSTER SETSLOT %d MIGRATING %s", slot, to_id), "MIGRATING");
    redisReply *keys = redisCommand(f, "CLUSTER GETKEYSINSLOT %d 100000", slot);
    cr_assert(keys != NULL && keys->type == REDIS_REPLY_ARRAY);
    if (keys->elements > 0) {
        const char **argv = calloc(8 + keys->elements, sizeof(*argv));
        size_t n = 0;
        char port[16];
        cr_assert_not_null(argv);
        snprintf(port, sizeof(port), "%d", cf_cluster.node[to].port);
        argv[n++] = "MIGRATE";
        argv[n++] = "127.0.0.1";
        argv[n++] = port;
        argv[n++] = "";
        argv[n++] = "0";
        argv[n++] = "10000";
        argv[n++] = "KEYS";
        for (size_t i = 0; i < keys->elements; i++)
            argv[n++] = keys->element[i]->str;
        expect_status(f, redisCommandArgv(f, (int)n, argv, NULL), "MIGRATE");
        free(argv);
    }
    freeReplyObject(keys);
    redisFree(f);
    redisFree(t);
}

/* Whether node i is a master now. */
static bool is_master(int i)
{
    if (cf_cluster.node[i].pid <= 0)
        return false;
    redisContext *c = redis_cluster_connect(&cf_cluster, i);
    cr_assert_not_null(c);
    redisReply *r = redisCommand(c, "INFO replication");
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    bool master = strstr(r->str, "role:master") != NULL;
    freeReplyObject(r);
    redisFree(c);
    return master;
}

/* The second half: every master is told the slot is to's now. Requests
 * to from answer MOVED. */
void cf_slot_assign(int slot, int to)
{
    char to_id[48];
    cf_node_id(to, to_id);
    /* The new owner first, then the others (as redis-cli does). */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < cf_cluster.n; i++) {
            if ((pass == 0) != (i == to) || !is_master(i))
                continue;
            redisContext *c = redis_cluster_connect(&cf_cluster, i);
            cr_assert_not_null(c);
            expect_status(c, redisCommand(c, "CLUSTER SETSLOT %d NODE %s", slot, to_id),
                          "SETSLOT NODE");
            redisFree(c);
        }
    await(redis_cluster_node_for_slot(&cf_cluster, slot) == to, "node %d to own slot %d", to, slot);
}

/* Another master than m. */
int cf_other_master(int m)
{
    for (int i = 0; i < cf_cluster.n; i++)
        if (i != m && is_master(i))
            return i;
    cr_assert_fail("no other master");
    return -1;
}

/* ---- emqd on the cluster ------------------------------------------------- */

void cf_emqd_start(struct emqd_proc *p, int seed, const char *const *extra)
{
    char seeds[64];
    const char *argv[16] = {"--redis-cluster", seeds};
    int n = 2;
    snprintf(seeds, sizeof(seeds), "127.0.0.1:%d", cf_cluster.node[seed].port);
    for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
        cr_assert_lt(n, 15);
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    cr_assert_eq(emqd_start(p, 0, argv), 0, "emqd did not start");
    cr_assert_eq(emqd_await_backend(p), 0, "emqd never reached the cluster");
}

const char *cf_jstr(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s != NULL ? s : "";
}

json_t *cf_ok(struct tc_conn *c, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    json_t *r = tc_call(c, "%s", line);
    cr_assert(r != NULL && tc_ok(r), "%s: %s %s", line, r ? tc_error(r) : "no reply",
              r ? cf_jstr(r, "message") : "");
    return r;
}
