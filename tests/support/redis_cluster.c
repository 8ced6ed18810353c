/* redis_cluster: a throwaway Redis Cluster for one test (see
 * redis_cluster.h). */
#include "redis_cluster.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "pool.h"
#include "wait.h"

/* How long redis-cli may take to create the cluster, and the cluster to
 * settle after it, before scaling (wait.h): hang guards, not speeds. */
#define CREATE_MS 30000
#define SETTLE_MS 30000
/* How long one redis-cli --cluster reshard may take (the same kind of
 * hang guard: it moves every key of its slots in batches). */
#define RESHARD_MS 60000

#define STR_(x) #x
#define STR(x)  STR_(x)

/* Every node: the low bus timeout; no persistence (save "" is
 * redis_server's own); a replica's first sync at once, not after Redis 7's
 * default 5 s wait for more replicas to share it; and a replication ping
 * every second instead of every 10 s: an idle master's offset grows only
 * by them, and CLUSTER SLOTS leaves out a replica whose offset is still 0.
 * One option and its value per line. */
/* clang-format off */
static const char *const node_args[] = {
    "--cluster-node-timeout", STR(REDIS_CLUSTER_NODE_TIMEOUT_MS),
    "--appendonly", "no",
    "--repl-diskless-sync-delay", "0",
    "--repl-ping-replica-period", "1",
    NULL,
};
/* clang-format on */

/* redis-cli beside $REDIS_SERVER when it is there, else from PATH. */
static void cli_path(char *out, size_t cap)
{
    const char *srv = getenv("REDIS_SERVER");
    const char *slash = srv != NULL ? strrchr(srv, '/') : NULL;
    if (slash != NULL) {
        snprintf(out, cap, "%.*sredis-cli", (int)(slash - srv + 1), srv);
        if (access(out, X_OK) == 0)
            return;
    }
    snprintf(out, cap, "redis-cli");
}

/* Put what redis-cli said into the test's log (it explains a failure):
 * the last 4 KiB, where it says why it stopped. */
static void log_file(const char *path)
{
    char text[4096];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > (long)sizeof(text) - 1)
        fseek(f, -(long)(sizeof(text) - 1), SEEK_END);
    else
        rewind(f);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    cr_log_error("%s:\n%s", path, text);
}

/* Run redis-cli with argv (argv[0] is set here), its output to log; 0
 * once it exits 0 within deadline_ms (scaled), else what it said goes to
 * the test's log and -ETIMEDOUT or -EPROTO. */
static int run_cli(const char **argv, const char *log, int deadline_ms)
{
    char cli[PATH_MAX];
    int status = 0;

    cli_path(cli, sizeof(cli));
    argv[0] = cli;
    pid_t pid = test_spawn(argv, log);
    if (pid < 0)
        return pid;
    if (!wait_for_ms(deadline_ms, test_reaped(&pid, &status))) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        log_file(log);
        return -ETIMEDOUT;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        log_file(log);
        return -EPROTO;
    }
    return 0;
}

/* redis-cli --cluster create over every node; 0 once it exits 0. */
static int create(struct redis_cluster *rc)
{
    char addr[REDIS_CLUSTER_NODES_MAX][32], reps[16], log[128];
    const char *argv[REDIS_CLUSTER_NODES_MAX + 8];
    int n = 1; /* argv[0]: run_cli's */

    snprintf(reps, sizeof(reps), "%d", rc->replicas);
    snprintf(log, sizeof(log), "%s/cluster-create.log", rc->node[0].dir);
    argv[n++] = "--cluster";
    argv[n++] = "create";
    for (int i = 0; i < rc->n; i++) {
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d", rc->node[i].port);
        argv[n++] = addr[i];
    }
    argv[n++] = "--cluster-replicas";
    argv[n++] = reps;
    argv[n++] = "--cluster-yes";
    argv[n] = NULL;
    return run_cli(argv, log, CREATE_MS);
}

/* The integer after key in an INFO-style text ("k:v\r\n" lines); -1 if
 * absent. */
static long long text_int(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p != NULL ? atoll(p + strlen(key)) : -1;
}

/* CLUSTER INFO on c says the cluster is up with every slot served, and
 * (known >= 0) that it knows known nodes. */
static bool info_ok(redisContext *c, int known)
{
    redisReply *r = redisCommand(c, "CLUSTER INFO");
    bool ok = r != NULL && r->type == REDIS_REPLY_STRING &&
              strstr(r->str, "cluster_state:ok\r\n") != NULL &&
              text_int(r->str, "cluster_slots_ok:") == REDIS_CLUSTER_SLOTS &&
              (known < 0 || text_int(r->str, "cluster_known_nodes:") == known);
    freeReplyObject(r);
    return ok;
}

/* One line of CLUSTER NODES is of a settled cluster: connected, with no
 * failure, handshake or missing-address flag, and either a master that
 * serves slots or a replica that has a master. Counts it. */
static bool node_line_ok(char *line, int *masters, int *replicas)
{
    char *f[10], *save = NULL;
    int nf = 0;
    for (char *t = strtok_r(line, " ", &save); t != NULL && nf < 10; t = strtok_r(NULL, " ", &save))
        f[nf++] = t;
    if (nf < 8 || strcmp(f[7], "connected") != 0 || strstr(f[2], "fail") != NULL ||
        strstr(f[2], "handshake") != NULL || strstr(f[2], "noaddr") != NULL)
        return false;
    if (strstr(f[2], "master") != NULL && nf > 8)
        (*masters)++;
    else if (strstr(f[2], "slave") != NULL && strcmp(f[3], "-") != 0)
        (*replicas)++;
    else
        return false;
    return true;
}

/* CLUSTER NODES on c shows every node, each in the role it was given. */
static bool nodes_ok(const struct redis_cluster *rc, redisContext *c)
{
    redisReply *r = redisCommand(c, "CLUSTER NODES");
    int lines = 0, masters = 0, replicas = 0;
    bool ok = r != NULL && r->type == REDIS_REPLY_STRING;
    char *save = NULL;
    for (char *l = ok ? strtok_r(r->str, "\n", &save) : NULL; l != NULL && ok;
         l = strtok_r(NULL, "\n", &save)) {
        lines++;
        /* node_line_ok tokenises its line in place: strtok_r's state for
         * the lines is in save, not disturbed. */
        ok = node_line_ok(l, &masters, &replicas);
    }
    freeReplyObject(r);
    return ok && lines == rc->n && masters == rc->masters && replicas == rc->masters * rc->replicas;
}

/* c's side of replication is up: a master has all its replicas, a
 * replica's link to its master is up. */
static bool replication_ok(const struct redis_cluster *rc, redisContext *c)
{
    redisReply *r = redisCommand(c, "INFO replication");
    bool ok = false;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        if (strstr(r->str, "role:master\r\n") != NULL)
            ok = text_int(r->str, "connected_slaves:") == rc->replicas;
        else
            ok = strstr(r->str, "master_link_status:up\r\n") != NULL;
    }
    freeReplyObject(r);
    return ok;
}

/* CLUSTER SLOTS on c, if it is an array of well-formed ranges: {start,
 * end, master, replica...}, each node {ip, port, ...}. NULL otherwise. */
static redisReply *cluster_slots(redisContext *c)
{
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    bool ok = r != NULL && r->type == REDIS_REPLY_ARRAY;
    for (size_t i = 0; ok && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        ok = e->type == REDIS_REPLY_ARRAY && e->elements >= 3 &&
             e->element[0]->type == REDIS_REPLY_INTEGER &&
             e->element[1]->type == REDIS_REPLY_INTEGER;
        for (size_t j = 2; ok && j < e->elements; j++)
            ok = e->element[j]->type == REDIS_REPLY_ARRAY && e->element[j]->elements >= 2 &&
                 e->element[j]->element[1]->type == REDIS_REPLY_INTEGER;
    }
    if (!ok) {
        freeReplyObject(r);
        return NULL;
    }
    return r;
}

/* CLUSTER SLOTS on c covers all 16384 slots, each with a master and all
 * its replicas. */
static bool slots_ok(const struct redis_cluster *rc, redisContext *c)
{
    redisReply *r = cluster_slots(c);
    long long covered = 0;
    bool ok = r != NULL;
    for (size_t i = 0; ok && i < r->elements; i++) {
        const redisReply *e = r->element[i];
        covered += e->element[1]->integer - e->element[0]->integer + 1;
        ok = e->elements == (size_t)(3 + rc->replicas);
    }
    freeReplyObject(r);
    return ok && covered == REDIS_CLUSTER_SLOTS;
}

/* Node i agrees that the cluster is whole (see redis_cluster_start). */
static bool node_settled(const struct redis_cluster *rc, int i)
{
    redisContext *c = redis_cluster_connect(rc, i);
    if (c == NULL)
        return false;
    bool ok = info_ok(c, rc->n) && nodes_ok(rc, c) && replication_ok(rc, c) && slots_ok(rc, c);
    redisFree(c);
    return ok;
}

static bool settled(const struct redis_cluster *rc)
{
    for (int i = 0; i < rc->n; i++)
        if (!node_settled(rc, i))
            return false;
    return true;
}

/* Put the view of the first node that is not settled into the test's log
 * (its directory goes with the failed start). */
static void log_unsettled(const struct redis_cluster *rc)
{
    for (int i = 0; i < rc->n; i++) {
        if (node_settled(rc, i))
            continue;
        redisContext *c = redis_cluster_connect(rc, i);
        redisReply *r = c != NULL ? redisCommand(c, "CLUSTER NODES") : NULL;
        cr_log_error("the cluster did not settle; node %d (port %d) sees:\n%s", i, rc->node[i].port,
                     r != NULL && r->str != NULL ? r->str : "(no answer)");
        freeReplyObject(r);
        redisFree(c);
        return;
    }
}

int redis_cluster_start(struct redis_cluster *rc, int masters, int replicas_per_master)
{
    memset(rc, 0, sizeof(*rc));
    if (masters < 3 || replicas_per_master < 0 ||
        masters * (1 + replicas_per_master) > REDIS_CLUSTER_NODES_MAX)
        return -EINVAL;
    rc->masters = masters;
    rc->replicas = replicas_per_master;
    int want = masters * (1 + replicas_per_master), err = 0;
    while (rc->n < want && err == 0) {
        rc->n++; /* counted first: stop() removes a failed node's dir */
        err = redis_server_start_node(&rc->node[rc->n - 1], node_args);
    }
    if (err == 0)
        err = create(rc);
    if (err == 0 && !wait_for_ms(SETTLE_MS, settled(rc))) {
        log_unsettled(rc);
        err = -ETIMEDOUT;
    }
    if (err != 0)
        redis_cluster_stop(rc);
    return err;
}

void redis_cluster_stop(struct redis_cluster *rc)
{
    /* Every node is told first, so they shut down side by side. */
    for (int i = 0; i < rc->n; i++)
        if (rc->node[i].pid > 0)
            kill(rc->node[i].pid, SIGTERM);
    for (int i = 0; i < rc->n; i++)
        redis_server_stop(&rc->node[i]);
}

void redis_cluster_kill_node(struct redis_cluster *rc, int i)
{
    if (i >= 0 && i < rc->n)
        redis_server_kill(&rc->node[i]);
}

bool redis_cluster_ok(const struct redis_cluster *rc)
{
    for (int i = 0; i < rc->n; i++) {
        if (rc->node[i].pid <= 0)
            continue;
        redisContext *c = redis_cluster_connect(rc, i);
        bool ok = c != NULL && info_ok(c, -1);
        redisFree(c);
        if (!ok)
            return false;
    }
    return true;
}

/* The index of the node on port, or -1. */
static int node_on_port(const struct redis_cluster *rc, long long port)
{
    for (int i = 0; i < rc->n; i++)
        if (rc->node[i].pid > 0 && rc->node[i].port == port)
            return i;
    return -1;
}

int redis_cluster_node_for_slot(const struct redis_cluster *rc, int slot)
{
    for (int i = 0; i < rc->n; i++) {
        if (rc->node[i].pid <= 0)
            continue;
        redisContext *c = redis_cluster_connect(rc, i);
        redisReply *r = c != NULL ? cluster_slots(c) : NULL;
        redisFree(c);
        if (r == NULL)
            continue;
        int owner = -1;
        for (size_t j = 0; j < r->elements; j++) {
            const redisReply *e = r->element[j];
            if (e->element[0]->integer <= slot && slot <= e->element[1]->integer)
                owner = node_on_port(rc, e->element[2]->element[1]->integer);
        }
        freeReplyObject(r);
        return owner;
    }
    return -1;
}

int redis_cluster_slot(const char *tag, size_t len)
{
    return pool_slot(tag, len);
}

redisContext *redis_cluster_connect(const struct redis_cluster *rc, int i)
{
    return i >= 0 && i < rc->n ? redis_server_connect(&rc->node[i]) : NULL;
}

redisContext *redis_cluster_connect_tag(const struct redis_cluster *rc, const char *tag, size_t len)
{
    return redis_cluster_connect(rc, redis_cluster_node_for_slot(rc, redis_cluster_slot(tag, len)));
}

int redis_cluster_node_id(const struct redis_cluster *rc, int i, char out[48])
{
    redisContext *c = redis_cluster_connect(rc, i);
    redisReply *r = c != NULL ? redisCommand(c, "CLUSTER MYID") : NULL;
    int err = r != NULL && r->type == REDIS_REPLY_STRING && r->len < 48 ? 0 : -EPROTO;
    if (err == 0)
        memcpy(out, r->str, r->len + 1);
    freeReplyObject(r);
    redisFree(c);
    return err;
}

int redis_cluster_reshard(const struct redis_cluster *rc, int from, int to, int slots, int pipeline)
{
    char from_id[48], to_id[48], seed[32], nslots[16], npipe[16], log[128];
    if (redis_cluster_node_id(rc, from, from_id) != 0 || redis_cluster_node_id(rc, to, to_id) != 0)
        return -EPROTO;
    snprintf(seed, sizeof(seed), "127.0.0.1:%d", rc->node[from].port);
    snprintf(nslots, sizeof(nslots), "%d", slots);
    snprintf(npipe, sizeof(npipe), "%d", pipeline);
    snprintf(log, sizeof(log), "%s/cluster-reshard.log", rc->node[from].dir);
    const char *argv[] = {NULL,
                          "--cluster",
                          "reshard",
                          seed,
                          "--cluster-from",
                          from_id,
                          "--cluster-to",
                          to_id,
                          "--cluster-slots",
                          nslots,
                          "--cluster-yes",
                          "--cluster-pipeline",
                          npipe,
                          NULL};
    return run_cli(argv, log, RESHARD_MS);
}
