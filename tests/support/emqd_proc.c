/* emqd_proc: the real emqd for integration tests (see emqd_proc.h). */
#include "emqd_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "redis_server.h"
#include "wait.h"

static int tcp_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((unsigned short)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* True if extra names the option opt. */
static bool has_option(const char *const *extra, const char *opt)
{
    for (; extra != NULL && *extra != NULL; extra++)
        if (strcmp(*extra, opt) == 0)
            return true;
    return false;
}

/* True once the child exited (p->pid is then 0) or accepts on p->port. */
static bool started_or_gone(struct emqd_proc *p)
{
    if (test_reaped(&p->pid, NULL))
        return true;
    int fd = tcp_connect(p->port);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* Start emqd on p->port (already chosen), serving /metrics on
 * p->metrics_port unless extra chose its own --metrics. */
static int start_on_port(struct emqd_proc *p, int redis_port, const char *const *extra)
{
    const char *bin = getenv("EMQD");
    char redis[64], listen[64], metrics[64];
    const char *argv[64];
    int n = 0;

    if (bin == NULL)
        return -ENOENT;
    snprintf(redis, sizeof(redis), "redis://127.0.0.1:%d", redis_port);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", p->port);
    argv[n++] = bin;
    if (redis_port > 0) { /* else emqd's embedded backend (pass --data-dir) */
        argv[n++] = "--redis";
        argv[n++] = redis;
    }
    argv[n++] = "--listen";
    argv[n++] = listen;
    if (has_option(extra, "--metrics"))
        p->metrics_port = 0;
    else if (p->metrics_port > 0) {
        snprintf(metrics, sizeof(metrics), "127.0.0.1:%d", p->metrics_port);
        argv[n++] = "--metrics";
        argv[n++] = metrics;
    }
    for (; extra != NULL && *extra != NULL && n < 62; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;

    p->pid = fork();
    if (p->pid < 0)
        return -errno;
    if (p->pid == 0) {
        /* Never outlive a test process that died on a failed assertion. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        int log = p->log[0] ? open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
        if (log >= 0)
            dup2(log, STDERR_FILENO);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    if (!wait_for(started_or_gone(p))) {
        emqd_kill(p);
        return -ETIMEDOUT;
    }
    return p->pid > 0 ? 0 : -ECHILD;
}

int emqd_start(struct emqd_proc *p, int redis_port, const char *const *extra)
{
    p->port = test_free_port();
    p->metrics_port = test_free_port();
    if (p->port < 0 || p->metrics_port < 0)
        return -EADDRNOTAVAIL;
    return start_on_port(p, redis_port, extra);
}

int emqd_restart(struct emqd_proc *p, int redis_port, const char *const *extra)
{
    if (p->pid > 0 || p->port <= 0)
        return -EINVAL;
    return start_on_port(p, redis_port, extra);
}

int emqd_log_to_file(struct emqd_proc *p)
{
    snprintf(p->log, sizeof(p->log), "/tmp/emq-emqd-log-XXXXXX");
    int fd = mkstemp(p->log);
    if (fd < 0) {
        p->log[0] = '\0';
        return -errno;
    }
    close(fd);
    return 0;
}

int emqd_log_count(const struct emqd_proc *p, const char *needle)
{
    static char text[1 << 20];
    FILE *f = p->log[0] ? fopen(p->log, "r") : NULL;
    if (f == NULL)
        return 0;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    int count = 0;
    for (const char *at = strstr(text, needle); at != NULL; at = strstr(at + 1, needle))
        count++;
    return count;
}

bool emqd_log_has(const struct emqd_proc *p, const char *needle)
{
    return emqd_log_count(p, needle) > 0;
}

int emqd_run(const char *args, char *out, size_t cap)
{
    return emqd_run_tool("EMQD", args, out, cap);
}

int emqd_run_tool(const char *env, const char *args, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "timeout %d %s %s 2>&1", wait_deadline_ms(0) / 1000, getenv(env),
             args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void emqd_write_temp(char *path, const char *text)
{
    strcpy(path, "/tmp/emq-test-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

void emqd_log_remove(struct emqd_proc *p)
{
    if (p->log[0])
        unlink(p->log);
    p->log[0] = '\0';
}

void emqd_rss_shows_live_memory(void)
{
    const char *old = getenv("ASAN_OPTIONS");
    char opts[512];
    if (old == NULL || strstr(old, "quarantine_size_mb") == NULL) {
        snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=8", old ? old : "", old ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
    }
    setenv("MALLOC_MMAP_THRESHOLD_", "131072", 1);
}

long emqd_rss_kb(const struct emqd_proc *p)
{
    char path[64], line[256];
    long kb = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)p->pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

int emqd_stop(struct emqd_proc *p)
{
    int status;
    if (p->pid <= 0)
        return -1;
    kill(p->pid, SIGTERM);
    if (!wait_for_ms(10000, test_reaped(&p->pid, &status))) {
        emqd_kill(p);
        return -1;
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

void emqd_kill(struct emqd_proc *p)
{
    if (p->pid <= 0)
        return;
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = 0;
}

struct tc_conn *tc_connect(int port)
{
    int fd = tcp_connect(port);
    if (fd < 0)
        return NULL;
    struct tc_conn *c = malloc(sizeof(*c));
    if (c == NULL) {
        close(fd);
        return NULL;
    }
    c->fd = fd;
    c->len = 0;
    return c;
}

struct tc_conn *tc_close(struct tc_conn *c)
{
    if (c != NULL) {
        close(c->fd);
        free(c);
    }
    return NULL;
}

int tc_send(struct tc_conn *c, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t w = send(c->fd, data, len, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

int tc_send_line(struct tc_conn *c, const char *line)
{
    int rc = tc_send(c, line, strlen(line));
    return rc != 0 ? rc : tc_send(c, "\n", 1);
}

/* Fill the buffer until it holds a newline; its index, or -1 on timeout
 * and -2 on EOF or error. */
static long fill_line(struct tc_conn *c, int timeout_ms)
{
    long long deadline = wait_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl != NULL)
            return nl - c->buf;
        if (c->len == sizeof(c->buf))
            return -2;
        long long left = deadline - wait_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            return pr == 0 ? -1 : -2;
        ssize_t r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -2;
        c->len += (size_t)r;
    }
}

json_t *tc_read(struct tc_conn *c, int timeout_ms)
{
    long nl = fill_line(c, timeout_ms);
    if (nl < 0)
        return NULL;
    json_t *v = json_loadb(c->buf, (size_t)nl, 0, NULL);
    c->len -= (size_t)nl + 1;
    memmove(c->buf, c->buf + nl + 1, c->len);
    return v;
}

int tc_read_eof(struct tc_conn *c, int timeout_ms)
{
    return fill_line(c, timeout_ms) == -2;
}

json_t *tc_call(struct tc_conn *c, const char *fmt, ...)
{
    char stack[8192];
    char *line = stack;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(stack, sizeof(stack), fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    if ((size_t)n >= sizeof(stack)) {
        line = malloc((size_t)n + 1);
        if (line == NULL)
            return NULL;
        va_start(ap, fmt);
        vsnprintf(line, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    int rc = tc_send_line(c, line);
    if (line != stack)
        free(line);
    return rc == 0 ? tc_read(c, wait_deadline_ms(0)) : NULL;
}

const char *tc_error(const json_t *reply)
{
    const char *e = json_string_value(json_object_get(reply, "error"));
    return e != NULL ? e : "";
}

int tc_ok(const json_t *reply)
{
    return json_is_true(json_object_get(reply, "ok"));
}

/* True if a depth call on c answers ok. */
static bool backend_answers(struct tc_conn *c)
{
    json_t *r = tc_call(c, "{\"op\":\"depth\",\"queue\":\"emq-test-ready\"}");
    bool ok = tc_ok(r);
    json_decref(r);
    return ok;
}

int emqd_await_backend(struct emqd_proc *p)
{
    struct tc_conn *c = tc_connect(p->port);
    if (c == NULL)
        return -ECONNREFUSED;
    bool ok = wait_for(backend_answers(c));
    tc_close(c);
    return ok ? 0 : -ETIMEDOUT;
}

long long emqd_metric(const struct emqd_proc *p, const char *series)
{
    static char resp[1 << 20];
    if (p->metrics_port <= 0)
        return -1;
    int fd = tcp_connect(p->metrics_port);
    if (fd < 0)
        return -1;
    static const char get[] = "GET /metrics HTTP/1.1\r\nHost: emq-test\r\n\r\n";
    size_t len = 0;
    if (send(fd, get, sizeof(get) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(get) - 1) {
        /* One answer per connection, then the daemon closes it. */
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        while (len + 1 < sizeof(resp) && poll(&pfd, 1, wait_deadline_ms(0)) == 1) {
            ssize_t r = recv(fd, resp + len, sizeof(resp) - 1 - len, 0);
            if (r <= 0)
                break;
            len += (size_t)r;
        }
    }
    close(fd);
    resp[len] = '\0';
    if (strncmp(resp, "HTTP/1.1 200", 12) != 0)
        return -1;
    size_t n = strlen(series);
    for (const char *line = strstr(resp, "\r\n\r\n"); line != NULL; line = strchr(line, '\n')) {
        line++;
        if (strncmp(line, series, n) == 0 && line[n] == ' ')
            return atoll(line + n + 1);
    }
    return -1;
}

bool emqd_quiet(const struct emqd_proc *p)
{
    return emqd_metric(p, "emqd_pool_inflight") == 0;
}
