/* supervise: the embedded redis-server child (see supervise.h). */
#include "supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

/* Where the supervisor is in the child's life. */
enum supervise_state {
    SUPERVISE_RUNNING,  /* a child was spawned (or a spawn is being retried) */
    SUPERVISE_WAITING,  /* the child died; the restart timer is armed */
    SUPERVISE_FAILED,   /* gave up restarting; fail_cb ran */
    SUPERVISE_STOPPING, /* supervise_stop was called */
};

/* One supervised redis-server. The three handles live inside it, so it is
 * freed only once all of them have closed. */
struct supervise {
    uv_loop_t *loop;
    uv_process_t proc;
    uv_timer_t restart_timer;
    uv_timer_t kill_timer;
    enum supervise_state state;
    bool child_alive; /* spawned and its exit_cb has not run yet */
    bool proc_open;   /* proc was initialised by uv_spawn and is not closed yet */
    int closing;      /* handles whose close callback is still to come */

    /* How the last child ended: spawn error, exit status or signal. */
    int spawn_err;
    int64_t exit_status;
    int term_signal;
    uint64_t started_ms; /* uv_hrtime of the last spawn, in ms */
    unsigned fast_fails; /* quick deaths in a row */
    uint64_t delay_ms;   /* the next restart delay */

    uint64_t restart_min_ms, restart_max_ms, grace_ms;
    bool fsync_everysec;
    void (*fail_cb)(void *priv, int err);
    void *fail_priv;
    void (*done)(void *priv);
    void *done_priv;

    char *bin; /* owned copy of cfg->redis_bin */
    char dir[PATH_MAX];
    char log[PATH_MAX + sizeof("/redis.log")];
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char pidfile[PATH_MAX + sizeof("/redis.pid")];
    int lock_fd; /* flock on data_dir/emqd.lock: one emqd per data dir */
};

static uint64_t now_ms(void)
{
    return uv_hrtime() / 1000000;
}

/* mkdir -p with mode 0700 for every directory it creates. */
static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    struct stat st;
    size_t len = strlen(path);

    if (len == 0)
        return -EINVAL;
    if (len >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p != '\0'; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return -errno;
    if (stat(buf, &st) != 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* Whether a server answers on the unix socket at path. A stale socket file
 * (nobody listening) is fine: redis-server unlinks it before binding. */
static bool socket_live(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live;

    if (fd < 0)
        return false;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return live;
}

static void exit_cb(uv_process_t *proc, int64_t exit_status, int term_signal);
static void restart_timer_cb(uv_timer_t *t);

/* Spawn one child into s->proc. On error proc is initialised but not
 * active, and must still be closed. */
static int spawn(struct supervise *s)
{
    /* One option and its value per line. */
    /* clang-format off */
    char *args[] = {
        s->bin,
        "--port", "0", /* no TCP listener at all: only our socket */
        "--unixsocket", s->sock,
        "--unixsocketperm", "700",
        "--dir", s->dir,
        "--appendonly", "yes",
        /* always: a move acknowledged to a client is on disk (the
         * fsync setting; everysec trades up to a second of them for
         * speed). */
        "--appendfsync", s->fsync_everysec ? "everysec" : "always",
        "--save", "",
        /* emqd's sorted sets take their members in time order (a lane
         * in mint order, a lease index by deadline), so each insert
         * lands at the tail: a listpack-encoded zset pays a walk of the
         * whole set for it, and a lookup, a scan; Redis's default keeps
         * that encoding up to 128 members. Above 16 a skiplist is
         * O(log n) (docs/ARCHITECTURE.md 7.2: ~8 % of a job's Redis
         * work end to end), and one-job lanes, the many-tenant case,
         * stay small listpacks. */
        "--zset-max-listpack-entries", EMQ_ZSET_LISTPACK_ENTRIES,
        "--daemonize", "no",
        "--logfile", s->log,
        "--pidfile", s->pidfile, /* so an orphan can be found (stop_orphan) */
        NULL,
    };
    /* clang-format on */
    /* stdin and stdout are /dev/null; stderr is ours, for errors printed
     * before redis-server opens its log file. */
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE},
        {.flags = UV_IGNORE},
        {.flags = UV_INHERIT_FD, .data.fd = STDERR_FILENO},
    };
    /* Detached: a ^C on emqd's terminal must not stop the store under a
     * draining daemon; supervise_stop does that, in order. */
    uv_process_options_t opts = {
        .exit_cb = exit_cb,
        .file = s->bin,
        .args = args,
        .stdio = stdio,
        .stdio_count = 3,
        .flags = UV_PROCESS_DETACHED,
    };
    int err;

    s->spawn_err = 0;
    s->exit_status = 0;
    s->term_signal = 0;
    s->started_ms = now_ms();
    err = uv_spawn(s->loop, &s->proc, &opts);
    s->proc.data = s;
    s->proc_open = true;
    s->child_alive = err == 0;
    s->spawn_err = err;
    return err;
}

static void release(struct supervise *s)
{
    if (s->lock_fd >= 0)
        close(s->lock_fd);
    free(s->bin);
    free(s);
}

/* The last handle closed: report and release. */
static void handle_close_cb(uv_handle_t *h)
{
    struct supervise *s = h->data;

    if (--s->closing > 0)
        return;
    if (s->done != NULL)
        s->done(s->done_priv);
    release(s);
}

/* Close the timers (the child is gone and proc is closed). */
static void stop_finish(struct supervise *s)
{
    s->closing += 2;
    uv_close((uv_handle_t *)&s->restart_timer, handle_close_cb);
    uv_close((uv_handle_t *)&s->kill_timer, handle_close_cb);
}

/* Describe how the last child ended, for a log line. */
/* How the child ended, as logfmt fields. */
static void describe_end(const struct supervise *s, char *buf, size_t size)
{
    if (s->spawn_err != 0)
        snprintf(buf, size, "spawn_error=%s", uv_err_name(s->spawn_err));
    else if (s->term_signal != 0)
        snprintf(buf, size, "signal=%d", s->term_signal);
    else
        snprintf(buf, size, "status=%lld", (long long)s->exit_status);
}

/* The child is gone and proc closed, unasked: restart it after a backoff,
 * or give up if it keeps dying at once. */
static void restart_later(struct supervise *s)
{
    char what[128];

    describe_end(s, what, sizeof(what));
    if (now_ms() - s->started_ms < SUPERVISE_FAST_MS) {
        s->fast_fails++;
    } else {
        s->fast_fails = 0;
        s->delay_ms = s->restart_min_ms;
    }
    if (s->fast_fails >= SUPERVISE_FAST_LIMIT) {
        log_event(LOG_ERROR, "embedded redis-server keeps dying at start; giving up",
                  "%s in_a_row=%u", what, s->fast_fails);
        s->state = SUPERVISE_FAILED;
        if (s->fail_cb != NULL)
            s->fail_cb(s->fail_priv, s->spawn_err != 0 ? s->spawn_err : -ECHILD);
        return;
    }
    log_event(LOG_WARN, "embedded redis-server ended; restarting it", "%s restart_in_ms=%llu", what,
              (unsigned long long)s->delay_ms);
    s->state = SUPERVISE_WAITING;
    uv_timer_start(&s->restart_timer, restart_timer_cb, s->delay_ms, 0);
    s->delay_ms = s->delay_ms * 2 > s->restart_max_ms ? s->restart_max_ms : s->delay_ms * 2;
}

/* The process handle closed after a death or a failed spawn. */
static void proc_close_cb(uv_handle_t *h)
{
    struct supervise *s = h->data;

    s->proc_open = false;
    if (s->state == SUPERVISE_STOPPING)
        stop_finish(s);
    else
        restart_later(s);
}

static void exit_cb(uv_process_t *proc, int64_t exit_status, int term_signal)
{
    struct supervise *s = proc->data;

    s->child_alive = false;
    s->exit_status = exit_status;
    s->term_signal = term_signal;
    uv_timer_stop(&s->kill_timer);
    uv_close((uv_handle_t *)proc, proc_close_cb);
}

static void restart_timer_cb(uv_timer_t *t)
{
    struct supervise *s = t->data;

    s->state = SUPERVISE_RUNNING;
    if (spawn(s) != 0)
        uv_close((uv_handle_t *)&s->proc, proc_close_cb);
}

/* The child ignored SIGTERM for the whole grace period. */
static void kill_timer_cb(uv_timer_t *t)
{
    struct supervise *s = t->data;

    if (!s->child_alive)
        return;
    log_event(LOG_WARN, "embedded redis-server did not stop in time; killing it", "grace_ms=%llu",
              (unsigned long long)s->grace_ms);
    uv_process_kill(&s->proc, SIGKILL);
}

/* Copy cfg into a new supervisor, paths made absolute (redis-server chdirs
 * into its --dir before it binds the socket). Touches no handle. */
static int supervise_alloc(const struct supervise_config *cfg, struct supervise **out)
{
    struct supervise *s;
    int err, n;

    if (cfg->data_dir == NULL)
        return -EINVAL;
    err = mkdir_p(cfg->data_dir);
    if (err != 0)
        return err;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return -ENOMEM;
    s->lock_fd = -1;
    if (realpath(cfg->data_dir, s->dir) == NULL) {
        err = -errno;
        goto err_free;
    }
    s->restart_min_ms = cfg->restart_min_ms ? cfg->restart_min_ms : SUPERVISE_RESTART_MIN_DEFAULT;
    s->restart_max_ms = cfg->restart_max_ms ? cfg->restart_max_ms : SUPERVISE_RESTART_MAX_DEFAULT;
    s->grace_ms = cfg->stop_grace_ms ? cfg->stop_grace_ms : SUPERVISE_GRACE_DEFAULT;
    s->delay_ms = s->restart_min_ms;
    s->fail_cb = cfg->fail_cb;
    s->fail_priv = cfg->priv;
    err = -EINVAL;
    if (s->restart_min_ms > s->restart_max_ms)
        goto err_free;
    err = -ENAMETOOLONG;
    n = snprintf(s->sock, sizeof(s->sock), "%s/redis.sock", s->dir);
    if (n < 0 || (size_t)n >= sizeof(s->sock))
        goto err_free;
    snprintf(s->log, sizeof(s->log), "%s/redis.log", s->dir);
    snprintf(s->pidfile, sizeof(s->pidfile), "%s/redis.pid", s->dir);
    err = -ENOMEM;
    s->fsync_everysec = cfg->fsync_everysec;
    s->bin = strdup(cfg->redis_bin != NULL ? cfg->redis_bin : SUPERVISE_BIN_DEFAULT);
    if (s->bin == NULL)
        goto err_free;
    *out = s;
    return 0;

err_free:
    release(s);
    return err;
}

/* Hold data_dir/emqd.lock for as long as this supervisor lives. The lock
 * goes with the process (and is not inherited by the child: O_CLOEXEC), so
 * a server answering on the socket while nobody holds the lock was left by
 * an emqd that died without stopping it. */
static int lock_dir(struct supervise *s)
{
    char path[PATH_MAX + sizeof("/emqd.lock")];
    snprintf(path, sizeof(path), "%s/emqd.lock", s->dir);
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (s->lock_fd < 0)
        return -errno;
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0)
        return errno == EWOULDBLOCK ? -EBUSY : -errno;
    return 0;
}

/* The pid of the redis-server named by our pidfile, or 0 when there is
 * none or that process is not a redis-server (never signal a stranger). */
static pid_t orphan_pid(const struct supervise *s)
{
    char comm[64] = "", path[64];
    long pid = 0;
    FILE *f = fopen(s->pidfile, "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%ld", &pid) != 1 || pid <= 1)
        pid = 0;
    fclose(f);
    if (pid == 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
    f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fgets(comm, sizeof(comm), f) == NULL)
        comm[0] = '\0';
    fclose(f);
    return strncmp(comm, "redis-server", 12) == 0 ? (pid_t)pid : 0;
}

/* Whether pid still runs (a zombie nobody reaps, as under a container's
 * PID 1, counts as gone). */
static bool alive(pid_t pid)
{
    char path[64], state = 0;
    if (kill(pid, 0) != 0)
        return errno != ESRCH;
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    /* pid (comm) state ...: comm may hold spaces, so look after the ')'. */
    char buf[512];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    if (rp != NULL && rp[1] == ' ')
        state = rp[2];
    return state != 'Z';
}

/* An emqd that was SIGKILLed leaves its redis-server running (the child is
 * detached). Stop it in order (SIGTERM flushes the AOF; SIGKILL after the
 * grace period) so this supervisor can start its own on the same data. */
static int stop_orphan(struct supervise *s)
{
    pid_t pid = orphan_pid(s);
    if (pid == 0)
        return -EADDRINUSE;
    log_event(LOG_WARN, "stopping a redis-server left running by an emqd that died", "pid=%ld",
              (long)pid);
    kill(pid, SIGTERM);
    bool killed = false;
    for (uint64_t waited = 0; alive(pid); waited += 10) {
        if (!killed && waited >= s->grace_ms) {
            kill(pid, SIGKILL);
            killed = true;
        }
        if (waited >= s->grace_ms + 5000)
            return -EADDRINUSE;
        usleep(10000);
    }
    return 0;
}

int supervise_start(uv_loop_t *loop, const struct supervise_config *cfg, struct supervise **out)
{
    struct supervise *s = NULL;
    char q[600];
    int err;

    *out = NULL;
    err = supervise_alloc(cfg, &s);
    if (err != 0)
        return err;
    err = lock_dir(s);
    if (err != 0) {
        log_event(LOG_ERROR, "data-dir is in use by another emqd", "data_dir=%s error=%s",
                  log_quote(s->dir, q, sizeof(q)), uv_err_name(err));
        goto err_free;
    }
    if (socket_live(s->sock) && (err = stop_orphan(s)) != 0) {
        log_event(LOG_ERROR, "a server that is not ours listens on the embedded socket",
                  "socket=%s", log_quote(s->sock, q, sizeof(q)));
        goto err_free;
    }
    s->loop = loop;
    uv_timer_init(loop, &s->restart_timer);
    uv_timer_init(loop, &s->kill_timer);
    s->restart_timer.data = s;
    s->kill_timer.data = s;
    err = spawn(s);
    if (err != 0) {
        log_event(LOG_ERROR, "cannot start the embedded redis-server", "redis_bin=%s error=%s",
                  log_quote(s->bin, q, sizeof(q)), uv_err_name(err));
        goto err_close;
    }
    *out = s;
    return 0;

err_close:
    /* The handles are in the loop now: s goes in their close callbacks;
     * the data dir is free at once. */
    close(s->lock_fd);
    s->lock_fd = -1;
    s->closing = 3;
    uv_close((uv_handle_t *)&s->proc, handle_close_cb);
    uv_close((uv_handle_t *)&s->restart_timer, handle_close_cb);
    uv_close((uv_handle_t *)&s->kill_timer, handle_close_cb);
    return err;
err_free:
    release(s);
    return err;
}

int supervise_wait_ready(const struct supervise *s, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 10) {
        if (socket_live(s->sock))
            return 0;
        usleep(10000);
    }
    return -ETIMEDOUT;
}

const char *supervise_socket(const struct supervise *s)
{
    return s->sock;
}

int supervise_pid(const struct supervise *s)
{
    return s->child_alive ? s->proc.pid : 0;
}

void supervise_stop(struct supervise *s, void (*done)(void *priv), void *priv)
{
    if (s->state == SUPERVISE_STOPPING)
        return;
    s->state = SUPERVISE_STOPPING;
    s->done = done;
    s->done_priv = priv;
    uv_timer_stop(&s->restart_timer);
    if (s->child_alive) {
        /* exit_cb closes proc, whose close callback finishes the stop. */
        uv_process_kill(&s->proc, SIGTERM);
        uv_update_time(s->loop); /* the grace counts from now, not the last poll */
        uv_timer_start(&s->kill_timer, kill_timer_cb, s->grace_ms, 0);
    } else if (!s->proc_open) {
        stop_finish(s);
    }
    /* Otherwise proc is closing already and proc_close_cb finishes. */
}
