/* supervise: emqd's embedded default store. When no Redis is configured,
 * emqd runs its own redis-server as a child process, listening only on a
 * unix socket in the data directory with an append-only file, restarts it
 * with exponential backoff when it dies, and stops it when emqd exits. */
#ifndef EMQ_SUPERVISE_H
#define EMQ_SUPERVISE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

/* Defaults used where a supervise_config field is left 0 (or NULL). */
#define SUPERVISE_BIN_DEFAULT         "redis-server"
#define SUPERVISE_RESTART_MIN_DEFAULT 100
#define SUPERVISE_RESTART_MAX_DEFAULT 10000
#define SUPERVISE_GRACE_DEFAULT       5000

/* The embedded Redis's zset-max-listpack-entries (supervise.c says why);
 * README.md recommends the same for a Redis of one's own. */
#define EMQ_ZSET_LISTPACK_ENTRIES "16"

/* A child that exits within SUPERVISE_FAST_MS of its start this many times
 * in a row is given up on: it is not going to work (bad binary, bad
 * directory, corrupt AOF) and restarting it forever only hides that. */
#define SUPERVISE_FAST_MS    1000
#define SUPERVISE_FAST_LIMIT 5

/* How to run the embedded redis-server. Strings are copied by
 * supervise_start(); zero fields take the defaults above. */
struct supervise_config {
    const char *redis_bin;   /* NULL: "redis-server", searched in PATH */
    const char *data_dir;    /* created (mkdir -p, 0700) if missing; holds the AOF, socket, log */
    bool fsync_everysec;     /* appendfsync everysec instead of always */
    uint64_t restart_min_ms; /* the first delay before a restart after a crash */
    uint64_t restart_max_ms; /* the delay doubles per quick crash up to this */
    uint64_t stop_grace_ms;  /* how long supervise_stop waits after SIGTERM before SIGKILL */
    /* Optional: runs once if the supervisor gives up restarting (the child
     * kept exiting at once, or could not be spawned any more); err is
     * -ECHILD or the spawn error. No child runs afterwards, but
     * supervise_stop must still be called to release the supervisor. */
    void (*fail_cb)(void *priv, int err);
    void *priv;
};

struct supervise;

/* Create data_dir, then spawn redis-server on data_dir/redis.sock and
 * supervise it from loop. Returns 0 and sets *out, or -errno: -EINVAL (no
 * data_dir, min > max), -ENAMETOOLONG (the socket path does not fit a
 * sockaddr_un), -EADDRINUSE (a live server already listens on the socket,
 * e.g. another emqd on the same data_dir), or the uv_spawn error (UV_ENOENT
 * when the binary is not found). It returns once the child is spawned, not
 * once it answers: clients connect and retry on their own. If uv_spawn
 * failed, handles are still closing: run the loop before uv_loop_close. */
int supervise_start(uv_loop_t *loop, const struct supervise_config *cfg, struct supervise **out);

/* The unix socket path the child listens on (data_dir/redis.sock, made
 * absolute); valid until the done callback of supervise_stop returns. */
const char *supervise_socket(const struct supervise *s);

/* Block (start-up only, before the loop runs) until the child accepts on
 * its socket, so the pool's first connect finds it. 0 or -ETIMEDOUT. */
int supervise_wait_ready(const struct supervise *s, int timeout_ms);

/* The pid of the running child, or 0 between a crash and its restart. */
int supervise_pid(const struct supervise *s);

/* Ask the child to stop (SIGTERM, so it fsyncs its AOF and removes its
 * socket), SIGKILL it after stop_grace_ms, and close every handle; then
 * done(priv) runs once (done may be NULL) and s is freed. Call it once. */
void supervise_stop(struct supervise *s, void (*done)(void *priv), void *priv);

#endif
