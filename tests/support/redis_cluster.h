/* redis_cluster: a throwaway Redis Cluster for one test: its nodes are
 * redis_server cluster nodes (each on free loopback ports, in its own
 * temporary directory with its own cluster-config-file), joined by
 * `redis-cli --cluster create`. */
#ifndef EMQ_TEST_REDIS_CLUSTER_H
#define EMQ_TEST_REDIS_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include <hiredis/hiredis.h>

#include "redis_server.h"

#define REDIS_CLUSTER_NODES_MAX 16
#define REDIS_CLUSTER_SLOTS     16384

/* The cluster bus timeout the nodes run with (cluster-node-timeout, ms):
 * low, so that a failover after redis_cluster_kill_node is quick. */
#define REDIS_CLUSTER_NODE_TIMEOUT_MS 2000

/* One cluster: its nodes in the order redis-cli was given them (it makes
 * the first masters of them masters and the rest their replicas, but
 * roles are read from the cluster, never assumed from the order). */
struct redis_cluster {
    int masters;
    int replicas; /* per master */
    int n;        /* nodes started: masters * (1 + replicas) */
    struct redis_server node[REDIS_CLUSTER_NODES_MAX];
};

/* Start masters * (1 + replicas_per_master) nodes, create the cluster
 * (redis-cli beside $REDIS_SERVER, else from PATH) and wait until every
 * node reports cluster_state:ok with all 16384 slots served, knows every
 * other node as connected in the role it was given, and every replica's
 * link to its master is up. masters >= 3 (redis-cli's minimum). Returns 0,
 * or -errno with nothing left running. */
int redis_cluster_start(struct redis_cluster *rc, int masters, int replicas_per_master);

/* Stop every node it started (SIGTERM, then reap, by pid) and remove their
 * directories. Safe on a cluster that is stopped, half started or zeroed,
 * so a suite's .fini may call it after a test that failed mid-way. */
void redis_cluster_stop(struct redis_cluster *rc);

/* SIGKILL node i and reap it (a crash, for failover tests); its directory
 * stays until redis_cluster_stop, so redis_server_restart(&rc->node[i],
 * ...) brings it back with its cluster config. */
void redis_cluster_kill_node(struct redis_cluster *rc, int i);

/* True if every running node says cluster_state:ok with all slots ok. */
bool redis_cluster_ok(const struct redis_cluster *rc);

/* The index of the node that serves slot as a master, by CLUSTER SLOTS
 * asked of the first running node that answers; -1 if none does. */
int redis_cluster_node_for_slot(const struct redis_cluster *rc, int slot);

/* The slot of the keys of hash tag tag (len bytes: the text between the
 * braces of "emq:{q}:"); the daemon's own function (pool_slot). */
int redis_cluster_slot(const char *tag, size_t len);

/* A new blocking connection to node i, or NULL. */
redisContext *redis_cluster_connect(const struct redis_cluster *rc, int i);

/* A new blocking connection to the master that serves the slot of hash
 * tag tag (len bytes), or NULL. */
redisContext *redis_cluster_connect_tag(const struct redis_cluster *rc, const char *tag,
                                        size_t len);

/* Node i's cluster id (CLUSTER MYID) into out; 0 or -EPROTO. */
int redis_cluster_node_id(const struct redis_cluster *rc, int i, char out[48]);

/* Move slots slots from master from to master to with `redis-cli
 * --cluster reshard --cluster-pipeline pipeline --cluster-yes`: redis-cli
 * takes from's lowest slots, sets each MIGRATING and IMPORTING, MIGRATEs
 * its keys pipeline at a time and then assigns it. 0 once redis-cli exits
 * 0; else what it said is in the test's log and -ETIMEDOUT or -EPROTO. */
int redis_cluster_reshard(const struct redis_cluster *rc, int from, int to, int slots,
                          int pipeline);

#endif
