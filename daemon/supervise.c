/* supervise: the embedded redis-server child (see supervise.h). */
#include "supervise.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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
    void (*fail_cb)(void *priv, int err);
    void *fail_priv;
    void (*done)(void *priv);
    void *done_priv;

    char *bin; /* owned copy of cfg->redis_bin */
    char dir[PATH_MAX];
    char log[PATH_MAX + sizeof("/redis.log")];
    char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
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
        "--appendfsync", "everysec",
        "--save", "",
        "--daemonize", "no",
        "--logfile", s->log,
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
static void describe_end(const struct supervise *s, char *buf, size_t size)
{
    if (s->spawn_err != 0)
        snprintf(buf, size, "could not be spawned: %s", uv_strerror(s->spawn_err));
    else if (s->term_signal != 0)
        snprintf(buf, size, "exited (signal %d)", s->term_signal);
    else
        snprintf(buf, size, "exited (status %lld)", (long long)s->exit_status);
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
        fprintf(stderr, "emqd: embedded redis-server %s, %u times in a row at start; giving up\n",
                what, s->fast_fails);
        s->state = SUPERVISE_FAILED;
        if (s->fail_cb != NULL)
            s->fail_cb(s->fail_priv, s->spawn_err != 0 ? s->spawn_err : -ECHILD);
        return;
    }
    fprintf(stderr, "emqd: embedded redis-server %s, restarting in %llu ms\n", what,
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
    fprintf(stderr, "emqd: embedded redis-server did not stop within %llu ms, killing it\n",
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
    err = -ENOMEM;
    s->bin = strdup(cfg->redis_bin != NULL ? cfg->redis_bin : SUPERVISE_BIN_DEFAULT);
    if (s->bin == NULL)
        goto err_free;
    *out = s;
    return 0;

err_free:
    release(s);
    return err;
}

int supervise_start(uv_loop_t *loop, const struct supervise_config *cfg, struct supervise **out)
{
    struct supervise *s = NULL;
    int err;

    *out = NULL;
    err = supervise_alloc(cfg, &s);
    if (err != 0)
        return err;
    if (socket_live(s->sock)) {
        fprintf(stderr, "emqd: a server already listens on %s (another emqd on this data dir?)\n",
                s->sock);
        err = -EADDRINUSE;
        goto err_free;
    }
    s->loop = loop;
    uv_timer_init(loop, &s->restart_timer);
    uv_timer_init(loop, &s->kill_timer);
    s->restart_timer.data = s;
    s->kill_timer.data = s;
    err = spawn(s);
    if (err != 0) {
        fprintf(stderr, "emqd: cannot start embedded redis-server %s: %s\n", s->bin,
                uv_strerror(err));
        goto err_close;
    }
    *out = s;
    return 0;

err_close:
    /* The handles are in the loop now: s goes in their close callbacks. */
    s->closing = 3;
    uv_close((uv_handle_t *)&s->proc, handle_close_cb);
    uv_close((uv_handle_t *)&s->restart_timer, handle_close_cb);
    uv_close((uv_handle_t *)&s->kill_timer, handle_close_cb);
    return err;
err_free:
    release(s);
    return err;
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
