/* redis_server: a throwaway redis-server for one test, on a free loopback
 * port, in its own temporary directory. */
#ifndef EMQ_TEST_REDIS_SERVER_H
#define EMQ_TEST_REDIS_SERVER_H

#include <stdbool.h>
#include <sys/types.h>

#include <hiredis/hiredis.h>

struct redis_server {
    pid_t pid;
    int port;
    int bus_port; /* a cluster node's bus port (--cluster-port), else 0 */
    char dir[64];
};

/* Start redis-server ($REDIS_SERVER, else from PATH) and wait until it
 * answers PING. extra is a NULL-terminated list of further arguments
 * (e.g. "--appendonly", "yes") or NULL. Returns 0 or -errno. */
int redis_server_start(struct redis_server *rs, const char *const *extra);

/* The same for a Redis Cluster node: cluster mode on, with its own
 * cluster-config-file in rs->dir and a second free port, rs->bus_port,
 * for the cluster bus (redis_cluster.h joins the nodes into a cluster). */
int redis_server_start_node(struct redis_server *rs, const char *const *extra);

/* SIGKILL the server (a crash, for fault tests) and reap it; the directory
 * stays so a restart finds its AOF. */
void redis_server_kill(struct redis_server *rs);

/* Start it again on the same port and directory (after redis_server_kill);
 * a cluster node keeps its bus port and its cluster-config-file. */
int redis_server_restart(struct redis_server *rs, const char *const *extra);

/* Stop it (SIGTERM, then reap) and remove its directory. */
void redis_server_stop(struct redis_server *rs);

/* A new blocking connection to it, or NULL. */
redisContext *redis_server_connect(const struct redis_server *rs);

/* Redis's clock (TIME) in milliseconds: the clock every lane script reads
 * (now_ms), so the one that says whether a lease or a delay has run out.
 * -1 on a connection error. */
long long redis_time_ms(redisContext *c);

/* The same, on a connection of its own to rs. */
long long redis_server_time_ms(const struct redis_server *rs);

/* Run a command (printf-style, as redisCommand) whose reply must be an
 * integer, and return it; the test fails otherwise, naming the command. */
long long redis_int(redisContext *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The integer that follows key (e.g. "blocked_clients:" or
 * "cmdstat_blpop:calls=") in INFO section; 0 if key is absent, -1 on a
 * connection error. */
long long redis_info_int(redisContext *c, const char *section, const char *key);

/* Field (e.g. "calls=", "failed_calls=") of command cmd's line in INFO
 * commandstats ("cmdstat_<cmd>:..."); 0 if cmd never ran. The test fails
 * if INFO does. */
long long redis_cmdstat(redisContext *c, const char *cmd, const char *field);

/* The subscribers of queue's wake channel emq:{queue}:wake on the server
 * c is connected to (PUBSUB SHARDNUMSUB: wakes are sharded pub/sub, and a
 * node counts its own subscribers only). */
long long redis_wake_subscribers(redisContext *c, const char *queue);

/* True if the child *pid has exited: it is reaped, its wait status goes
 * into *status (may be NULL) and *pid becomes 0. Never blocks. */
bool test_reaped(pid_t *pid, int *status);

/* Fork and exec argv (NULL-terminated; argv[0] is looked up in PATH
 * unless it has a slash) with stdin from /dev/null, and stdout to
 * /dev/null, or stdout and stderr to the file out (created or truncated)
 * when out is not NULL. The child dies with the test process. Returns its
 * pid, or -errno. */
pid_t test_spawn(const char *const *argv, const char *out);

/* A free TCP port on 127.0.0.1 (the kernel picks it). */
int test_free_port(void);

#endif
