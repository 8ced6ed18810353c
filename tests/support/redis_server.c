/* redis_server: a throwaway redis-server for one test (see redis_server.h). */
#include "redis_server.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdbool.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "wait.h"

int test_free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;

    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

pid_t test_spawn(const char *const *argv, const char *out)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        /* A test that crashes or times out never runs its teardown: the
         * child must not outlive the test process. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        int fd = out != NULL ? open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644) : devnull;
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            if (out != NULL)
                dup2(fd, STDERR_FILENO);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static pid_t spawn(const struct redis_server *rs, const char *const *extra)
{
    const char *bin = getenv("REDIS_SERVER") ? getenv("REDIS_SERVER") : "redis-server";
    char port[16], bus[16], log[128];
    const char *argv[64];
    int n = 0;

    snprintf(port, sizeof(port), "%d", rs->port);
    snprintf(log, sizeof(log), "%s/redis.log", rs->dir);
    argv[n++] = bin;
    argv[n++] = "--port";
    argv[n++] = port;
    argv[n++] = "--bind";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--dir";
    argv[n++] = rs->dir;
    argv[n++] = "--save";
    argv[n++] = "";
    argv[n++] = "--daemonize";
    argv[n++] = "no";
    argv[n++] = "--logfile";
    argv[n++] = log;
    if (rs->bus_port > 0) {
        snprintf(bus, sizeof(bus), "%d", rs->bus_port);
        argv[n++] = "--cluster-enabled";
        argv[n++] = "yes";
        argv[n++] = "--cluster-port";
        argv[n++] = bus;
        argv[n++] = "--cluster-config-file"; /* in --dir, one per node */
        argv[n++] = "nodes.conf";
    }
    for (; extra != NULL && *extra != NULL && n < 62; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;

    return test_spawn(argv, NULL);
}

bool test_reaped(pid_t *pid, int *status)
{
    int st;
    if (*pid <= 0 || waitpid(*pid, &st, WNOHANG) != *pid)
        return false;
    *pid = 0;
    if (status != NULL)
        *status = st;
    return true;
}

/* True once the child answers on its port, or has exited (rs->pid is then
 * 0). The answer must come from the child itself: when its bind failed
 * (another test's server took the port between the probe and the bind),
 * the server that does answer there is someone else's, and using it would
 * mix two tests' data. The child then exits, and the caller tries another
 * port. */
static bool ready_or_gone(struct redis_server *rs)
{
    if (test_reaped(&rs->pid, NULL))
        return true;
    redisContext *c = redis_server_connect(rs);
    if (c == NULL)
        return false;
    redisReply *r = redisCommand(c, "INFO server");
    bool ok = false;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, "process_id:");
        ok = p != NULL && atol(p + 11) == (long)rs->pid;
    }
    freeReplyObject(r);
    redisFree(c);
    return ok;
}

/* Wait until the child answers PING; 0, or -1 if it died or never did. */
static int await_ready(struct redis_server *rs)
{
    return wait_for(ready_or_gone(rs)) && rs->pid > 0 ? 0 : -1;
}

/* A free port other than port (the kernel may hand the same one out
 * twice: each probe's socket is closed before the next). */
static int other_free_port(int port)
{
    int p = test_free_port();
    for (int i = 0; i < 8 && p == port; i++)
        p = test_free_port();
    return p;
}

static int start(struct redis_server *rs, const char *const *extra, bool node)
{
    memset(rs, 0, sizeof(*rs));
    snprintf(rs->dir, sizeof(rs->dir), "/tmp/emq-redis-XXXXXX");
    if (mkdtemp(rs->dir) == NULL)
        return -errno;
    /* A free port can be taken between our probe and redis' bind (the
     * client port or a node's bus port: redis exits either way): retry. */
    for (int attempt = 0; attempt < 5; attempt++) {
        rs->port = test_free_port();
        if (node)
            rs->bus_port = other_free_port(rs->port);
        rs->pid = spawn(rs, extra);
        if (rs->pid < 0)
            return -errno;
        if (await_ready(rs) == 0)
            return 0;
        if (rs->pid > 0) {
            kill(rs->pid, SIGKILL);
            waitpid(rs->pid, NULL, 0);
            rs->pid = 0;
        }
        /* A node that got as far as writing its cluster config wrote the
         * ports that failed: the next attempt starts as a new node. */
        char conf[sizeof(rs->dir) + 16];
        snprintf(conf, sizeof(conf), "%s/nodes.conf", rs->dir);
        unlink(conf);
    }
    return -EADDRINUSE;
}

int redis_server_start(struct redis_server *rs, const char *const *extra)
{
    return start(rs, extra, false);
}

int redis_server_start_node(struct redis_server *rs, const char *const *extra)
{
    return start(rs, extra, true);
}

void redis_server_kill(struct redis_server *rs)
{
    if (rs->pid > 0) {
        kill(rs->pid, SIGKILL);
        waitpid(rs->pid, NULL, 0);
        rs->pid = 0;
    }
}

int redis_server_restart(struct redis_server *rs, const char *const *extra)
{
    for (int attempt = 0; attempt < 50; attempt++) {
        rs->pid = spawn(rs, extra);
        if (rs->pid < 0)
            return -errno;
        if (await_ready(rs) == 0)
            return 0;
        wait_sleep_ms(20); /* the old socket may linger for a moment */
    }
    return -EADDRINUSE;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void redis_server_stop(struct redis_server *rs)
{
    if (rs->pid > 0) {
        /* A test that failed while it had stopped the server (SIGSTOP)
         * must not hang here: a stopped process does not act on SIGTERM. */
        kill(rs->pid, SIGCONT);
        kill(rs->pid, SIGTERM);
        waitpid(rs->pid, NULL, 0);
        rs->pid = 0;
    }
    if (rs->dir[0] != '\0')
        nftw(rs->dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    rs->dir[0] = '\0';
}

redisContext *redis_server_connect(const struct redis_server *rs)
{
    struct timeval tv = {.tv_sec = 2};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", rs->port, tv);
    if (c != NULL && c->err) {
        redisFree(c);
        return NULL;
    }
    return c;
}

long long redis_time_ms(redisContext *c)
{
    redisReply *r = redisCommand(c, "TIME");
    long long ms = -1;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2)
        ms = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return ms;
}

long long redis_server_time_ms(const struct redis_server *rs)
{
    redisContext *c = redis_server_connect(rs);
    if (c == NULL)
        return -1;
    long long ms = redis_time_ms(c);
    redisFree(c);
    return ms;
}

long long redis_int(redisContext *c, const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    cr_assert(r != NULL && r->type == REDIS_REPLY_INTEGER, "%s: no integer reply (%s)", cmd,
              r != NULL && r->str != NULL ? r->str : "no reply");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

long long redis_wake_subscribers(redisContext *c, const char *queue)
{
    redisReply *r = redisCommand(c, "PUBSUB SHARDNUMSUB emq:{%s}:wake", queue);
    cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
                  r->element[1]->type == REDIS_REPLY_INTEGER,
              "PUBSUB SHARDNUMSUB: %s", r != NULL && r->str != NULL ? r->str : "no reply");
    long long n = r->element[1]->integer;
    freeReplyObject(r);
    return n;
}

long long redis_cmdstat(redisContext *c, const char *cmd, const char *field)
{
    redisReply *r = redisCommand(c, "INFO commandstats");
    cr_assert(r != NULL && r->type == REDIS_REPLY_STRING, "INFO commandstats failed");
    char key[64];
    snprintf(key, sizeof(key), "cmdstat_%s:", cmd);
    const char *line = strstr(r->str, key);
    const char *eol = line != NULL ? strchr(line, '\r') : NULL;
    const char *at = line != NULL ? strstr(line, field) : NULL;
    long long n = at != NULL && (eol == NULL || at < eol) ? atoll(at + strlen(field)) : 0;
    freeReplyObject(r);
    return n;
}

long long redis_info_int(redisContext *c, const char *section, const char *key)
{
    redisReply *r = redisCommand(c, "INFO %s", section);
    long long v = -1;
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
        const char *p = strstr(r->str, key);
        v = p != NULL ? atoll(p + strlen(key)) : 0;
    }
    freeReplyObject(r);
    return v;
}
