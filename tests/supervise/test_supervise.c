/* supervise: the embedded redis-server is started, answers on its socket,
 * keeps its data across a crash and restart, and is stopped for good. Each
 * test runs its own loop and closes it cleanly. */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "supervise.h"
#include "wait.h"

/* One test's world: its loop, its temporary directory, its supervisor. */
static uv_loop_t loop;
static char tmp[32];
static char data[64];
static struct supervise *sup;
static int done_calls;
static int fail_calls;
static int fail_err;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void setup(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/emq-sup-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    /* Two levels that do not exist yet: supervise_start makes them. */
    snprintf(data, sizeof(data), "%s/var/data", tmp);
    cr_assert_eq(uv_loop_init(&loop), 0);
    sup = NULL;
    done_calls = fail_calls = fail_err = 0;
}

/* After a failed assertion a child may still run: kill it so it does not
 * outlive the test, then remove the directory either way. */
static void teardown(void)
{
    if (sup != NULL && supervise_pid(sup) > 0)
        kill(supervise_pid(sup), SIGKILL);
    nftw(tmp, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(supervise, .init = setup, .fini = teardown, .timeout = 60);

static void fail_cb(void *priv, int err)
{
    cr_assert_eq(priv, &fail_calls);
    fail_calls++;
    fail_err = err;
}

static void done_cb(void *priv)
{
    cr_assert_eq(priv, &done_calls);
    done_calls++;
    sup = NULL;
}

static struct supervise_config config(void)
{
    return (struct supervise_config){
        .redis_bin = getenv("REDIS_SERVER"),
        .data_dir = data,
        .restart_min_ms = 20,
        .restart_max_ms = 200,
        .fail_cb = fail_cb,
        .priv = &fail_calls,
    };
}

/* Connect and PING once, blocking (the child is another process, so the
 * loop need not run meanwhile). NULL unless it answered PONG. */
static redisContext *try_ping(const char *sock)
{
    struct timeval tv = {.tv_sec = 2};
    redisContext *c = redisConnectUnixWithTimeout(sock, tv);
    redisReply *r;
    bool ok;

    if (c == NULL)
        return NULL;
    if (c->err) {
        redisFree(c);
        return NULL;
    }
    r = redisCommand(c, "PING");
    ok = r != NULL && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
    freeReplyObject(r);
    if (!ok) {
        redisFree(c);
        return NULL;
    }
    return c;
}

/* Turn the loop once without blocking (the supervisor reaps and
 * restarts from it); true, so it can lead a wait's condition. */
static bool turn(void)
{
    uv_run(&loop, UV_RUN_NOWAIT);
    return true;
}

/* Turn the loop until the server at sock answers; NULL if it never does. */
static redisContext *await_ping(const char *sock)
{
    redisContext *c = NULL;
    wait_for(turn() && (c = try_ping(sock)) != NULL);
    return c;
}

/* Turn the loop until the supervisor runs a child other than old. */
static int await_new_pid(int old)
{
    int pid = 0;
    wait_for(turn() && (pid = supervise_pid(sup)) > 0 && pid != old);
    return pid > 0 && pid != old ? pid : 0;
}

static void command_ok(redisContext *c, const char *const *argv, int argc)
{
    redisReply *r = redisCommandArgv(c, argc, (const char **)argv, NULL);
    cr_assert_not_null(r, "%s: %s", argv[0], c->errstr);
    cr_assert_neq(r->type, REDIS_REPLY_ERROR, "%s: %s", argv[0], r->str);
    freeReplyObject(r);
}

/* Stop the supervisor, run the loop dry and close it. */
static void stop_and_close(void)
{
    supervise_stop(sup, done_cb, &done_calls);
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(done_calls, 1, "done runs exactly once");
    cr_assert_eq(uv_loop_close(&loop), 0);
}

static bool path_exists(const char *dir, const char *name)
{
    char path[256];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return stat(path, &st) == 0;
}

Test(supervise, starts_and_answers_ping)
{
    struct supervise_config cfg = config();
    char sock[256];
    struct stat st;

    cr_assert_eq(supervise_start(&loop, &cfg, &sup), 0);
    snprintf(sock, sizeof(sock), "%s/redis.sock", data);
    cr_assert_str_eq(supervise_socket(sup), sock);
    cr_assert_gt(supervise_pid(sup), 0);
    cr_assert_eq(stat(data, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "the data dir is private");

    redisContext *c = await_ping(supervise_socket(sup));
    cr_assert_not_null(c, "the embedded redis answers on %s", sock);
    /* No TCP listener at all: only the socket. */
    const char *get_port[] = {"CONFIG", "GET", "port"};
    redisReply *r = redisCommandArgv(c, 3, get_port, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[1]->str, "0");
    freeReplyObject(r);
    redisFree(c);

    int pid = supervise_pid(sup);
    stop_and_close();
    cr_assert_eq(kill(pid, 0), -1);
    cr_assert_eq(errno, ESRCH, "the child is gone");
    cr_assert_not(path_exists(data, "redis.sock"), "a clean stop removes the socket");
    cr_assert(path_exists(data, "redis.log"));
}

Test(supervise, writes_an_aof)
{
    struct supervise_config cfg = config();

    cr_assert_eq(supervise_start(&loop, &cfg, &sup), 0);
    redisContext *c = await_ping(supervise_socket(sup));
    cr_assert_not_null(c);
    const char *set[] = {"SET", "k", "v"};
    command_ok(c, set, 3);
    /* By default every write is on disk before Redis answers it. */
    const char *get_fsync[] = {"CONFIG", "GET", "appendfsync"};
    redisReply *r = redisCommandArgv(c, 3, get_fsync, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[1]->str, "always");
    freeReplyObject(r);
    /* Sorted sets above 16 members are skiplists (supervise.c says why). */
    const char *get_zset[] = {"CONFIG", "GET", "zset-max-listpack-entries"};
    r = redisCommandArgv(c, 3, get_zset, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[1]->str, EMQ_ZSET_LISTPACK_ENTRIES);
    freeReplyObject(r);
    redisFree(c);
    /* Redis 7 keeps a multi-part AOF under appendonlydir/. */
    cr_assert(path_exists(data, "appendonlydir/appendonly.aof.manifest"));
    stop_and_close();
}

Test(supervise, restarts_after_a_crash_with_its_data)
{
    struct supervise_config cfg = config();
    cfg.fsync_everysec = true; /* the setting must reach every child */

    cr_assert_eq(supervise_start(&loop, &cfg, &sup), 0);
    redisContext *c = await_ping(supervise_socket(sup));
    cr_assert_not_null(c);
    /* Write through to disk so the data does not depend on timing. */
    const char *always[] = {"CONFIG", "SET", "appendfsync", "always"};
    const char *set[] = {"SET", "survivor", "still-here"};
    command_ok(c, always, 4);
    command_ok(c, set, 3);
    redisFree(c);

    int old = supervise_pid(sup);
    cr_assert_eq(kill(old, SIGKILL), 0);
    int pid = await_new_pid(old);
    cr_assert_gt(pid, 0, "a new child was spawned");

    c = await_ping(supervise_socket(sup));
    cr_assert_not_null(c, "the restarted redis answers on the same socket");
    const char *get[] = {"GET", "survivor"};
    redisReply *r = redisCommandArgv(c, 2, get, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING);
    cr_assert_str_eq(r->str, "still-here");
    freeReplyObject(r);
    /* The restarted child has the configured fsync policy again. */
    const char *get_fsync[] = {"CONFIG", "GET", "appendfsync"};
    r = redisCommandArgv(c, 3, get_fsync, NULL);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[1]->str, "everysec");
    freeReplyObject(r);
    redisFree(c);

    stop_and_close();
    cr_assert_eq(kill(pid, 0), -1);
    cr_assert_eq(errno, ESRCH);
    cr_assert_eq(fail_calls, 0);
}

Test(supervise, stop_during_backoff)
{
    struct supervise_config cfg = config();

    /* A backoff of an hour: a stop that waited it out would never end
     * within the test. */
    cfg.restart_min_ms = cfg.restart_max_ms = 3600000;
    cr_assert_eq(supervise_start(&loop, &cfg, &sup), 0);
    int pid = supervise_pid(sup);
    cr_assert_eq(kill(pid, SIGKILL), 0);
    await(turn() && supervise_pid(sup) == 0, "the supervisor to notice the death");

    long long t0 = wait_now_ms();
    stop_and_close();
    cr_assert_lt(wait_now_ms() - t0, (long long)cfg.restart_min_ms,
                 "stop does not wait out the backoff");
}

Test(supervise, missing_binary_fails_at_start)
{
    struct supervise_config cfg = config();
    struct supervise *s = (struct supervise *)&s;

    cfg.redis_bin = "/nonexistent/redis-server";
    cr_assert_eq(supervise_start(&loop, &cfg, &s), UV_ENOENT);
    cr_assert_null(s);
    cfg.redis_bin = "emq-no-such-redis-server";
    cr_assert_eq(supervise_start(&loop, &cfg, &s), UV_ENOENT, "PATH is searched");
    cr_assert_null(s);
    /* The failed start's handles close on the next turn of the loop. */
    cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    cr_assert_eq(uv_loop_close(&loop), 0);
    cr_assert_eq(fail_calls, 0);
}

Test(supervise, gives_up_when_the_child_keeps_exiting)
{
    struct supervise_config cfg = config();

    cfg.redis_bin = "false";
    cr_assert_eq(supervise_start(&loop, &cfg, &sup), 0);
    await(turn() && fail_calls > 0, "the supervisor to give up");
    cr_assert_eq(fail_calls, 1);
    cr_assert_eq(fail_err, -ECHILD);
    cr_assert_eq(supervise_pid(sup), 0);
    /* Nothing is pending any more: the loop would return at once. */
    cr_assert_eq(uv_run(&loop, UV_RUN_NOWAIT), 0);
    cr_assert_eq(fail_calls, 1);
    stop_and_close();
}

Test(supervise, stale_socket_does_not_break_start)
{
    struct supervise_config cfg = config();
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char cmd[256];

    /* A socket file nobody listens on, as a killed server leaves behind. */
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", data);
    cr_assert_eq(system(cmd), 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/redis.sock", data);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    cr_assert(path_exists(data, "redis.sock"));

    cr_assert_eq(supervise_start(&loop, &cfg, &sup), 0);
    redisContext *c = await_ping(supervise_socket(sup));
    cr_assert_not_null(c, "redis-server replaced the stale socket");
    redisFree(c);
    stop_and_close();
}

Test(supervise, a_second_supervisor_on_the_data_dir_is_refused)
{
    struct supervise_config cfg = config();
    struct supervise *second = (struct supervise *)&second;

    cr_assert_eq(supervise_start(&loop, &cfg, &sup), 0);
    redisContext *c = await_ping(supervise_socket(sup));
    cr_assert_not_null(c);
    redisFree(c);
    cr_assert_eq(supervise_start(&loop, &cfg, &second), -EBUSY,
                 "a second supervisor must not share the data dir");
    cr_assert_null(second);
    c = try_ping(supervise_socket(sup));
    cr_assert_not_null(c, "the first server is untouched");
    redisFree(c);
    stop_and_close();
}

Test(supervise, sigkill_after_the_grace_period)
{
    struct supervise_config cfg = config();
    char script[256];

    /* A "server" that ignores SIGTERM (SIG_IGN survives exec), and says
     * so with a file once its trap is in. */
    snprintf(script, sizeof(script), "%s/stubborn", tmp);
    FILE *f = fopen(script, "w");
    cr_assert_not_null(f);
    fprintf(f, "#!/bin/sh\ntrap '' TERM\n: > %s/trapped\nexec sleep 3600\n", tmp);
    fclose(f);
    cr_assert_eq(chmod(script, 0700), 0);
    cfg.redis_bin = script;
    cfg.stop_grace_ms = 300;

    cr_assert_eq(supervise_start(&loop, &cfg, &sup), 0);
    int pid = supervise_pid(sup);
    await(path_exists(tmp, "trapped"), "the shell to install its trap");
    long long t0 = wait_now_ms();
    stop_and_close();
    /* It outlived SIGTERM: only the SIGKILL at the end of the grace
     * period stopped it. */
    cr_assert_geq(wait_now_ms() - t0, 290, "stopped before the grace period was over");
    cr_assert_eq(kill(pid, 0), -1);
    cr_assert_eq(errno, ESRCH);
}

Test(supervise, rejects_bad_config)
{
    struct supervise_config cfg = config();
    struct supervise *s;

    cfg.data_dir = NULL;
    cr_assert_eq(supervise_start(&loop, &cfg, &s), -EINVAL);
    cfg = config();
    cfg.restart_min_ms = 500;
    cfg.restart_max_ms = 100;
    cr_assert_eq(supervise_start(&loop, &cfg, &s), -EINVAL);
    cfg = config();
    char longdir[200];
    snprintf(longdir, sizeof(longdir), "%s/%0120d", tmp, 0);
    cfg.data_dir = longdir;
    cr_assert_eq(supervise_start(&loop, &cfg, &s), -ENAMETOOLONG);
    cr_assert_eq(uv_loop_close(&loop), 0, "no handle was left behind");
}

/* The process has exited (a zombie that this container's PID 1 does not
 * reap counts as exited). */
static bool gone(int pid)
{
    char path[64], buf[512];
    if (kill(pid, 0) != 0)
        return true;
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return true;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *rp = strrchr(buf, ')');
    return rp != NULL && rp[1] == ' ' && rp[2] == 'Z';
}

/* emqd SIGKILLed: its detached redis-server lives on with the socket. The
 * next start stops that orphan (found by its pidfile) and starts its own,
 * on the same data. */
Test(supervise, an_orphan_left_by_a_killed_emqd_is_stopped_and_replaced)
{
    struct supervise_config cfg = config();
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "mkdir -p %s && %s --port 0 --unixsocket %s/redis.sock --dir %s --pidfile %s/redis.pid"
             " --appendonly yes --save '' --daemonize yes --logfile %s/orphan.log",
             data, getenv("REDIS_SERVER") ? getenv("REDIS_SERVER") : "redis-server", data, data,
             data, data);
    cr_assert_eq(system(cmd), 0);
    char sock[128];
    snprintf(sock, sizeof(sock), "%s/redis.sock", data);
    redisContext *c = await_ping(sock);
    cr_assert_not_null(c, "the orphan did not start");
    redisReply *r = redisCommand(c, "SET survived yes");
    freeReplyObject(r);
    r = redisCommand(c, "INFO server");
    char *p = strstr(r->str, "process_id:");
    cr_assert_not_null(p);
    int orphan = atoi(p + strlen("process_id:"));
    freeReplyObject(r);
    redisFree(c);

    cr_assert_eq(supervise_start(&loop, &cfg, &sup), 0);
    cr_assert(gone(orphan), "the orphan is gone");
    c = await_ping(supervise_socket(sup));
    cr_assert_not_null(c);
    r = redisCommand(c, "GET survived");
    cr_assert_eq(r->type, REDIS_REPLY_STRING, "the orphan's data was kept (AOF)");
    cr_assert_str_eq(r->str, "yes");
    freeReplyObject(r);
    redisFree(c);
    cr_assert_neq(supervise_pid(sup), orphan);
    stop_and_close();
}
