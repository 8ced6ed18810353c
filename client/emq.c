/* emq: libemq's connection core: connect, line framing, the request/reply
 * cycle, queued pushes and interruption (see emq.h). The typed ops are in
 * emq_ops.c and emq_admin.c, address parsing in emq_addr.c. */
#include "emq_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EMQ_DEFAULT_TIMEOUT 10000
#define EMQ_CLOSE_WAIT_MS   2000 /* how long emq_close waits for quit's reply */

/* Wire names of the codes, indexed by code (server codes) or by
 * code - EMQ_ECLIENT (library codes). */
static const char *const emq_server_names[] = {
    [EMQ_OK] = "OK",
#define EMQ_ERROR(name, summary, class) [EMQ_E##name] = "E" #name,
#include "emq_errors.def"
#undef EMQ_ERROR
};

static const char *const emq_client_names[] = {
    [EMQ_EIO - EMQ_ECLIENT] = "EIO",
    [EMQ_ETIMEOUT - EMQ_ECLIENT] = "ETIMEOUT",
    [EMQ_EBADREPLY - EMQ_ECLIENT] = "EBADREPLY",
    [EMQ_EUSAGE - EMQ_ECLIENT] = "EUSAGE",
    [EMQ_ENOMEM - EMQ_ECLIENT] = "ENOMEM",
    [EMQ_EINTR - EMQ_ECLIENT] = "EINTR",
    [EMQ_ESERVER - EMQ_ECLIENT] = "ESERVER",
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

const char *emq_code_name(int code)
{
    if (code >= 0 && (size_t)code < NELEM(emq_server_names))
        return emq_server_names[code];
    if (code >= EMQ_ECLIENT && (size_t)(code - EMQ_ECLIENT) < NELEM(emq_client_names))
        return emq_client_names[code - EMQ_ECLIENT];
    return "EUNKNOWNCODE";
}

int emq_code_from_name(const char *name)
{
    if (name == NULL)
        return EMQ_ESERVER;
    for (size_t i = 0; i < NELEM(emq_server_names); i++)
        if (strcmp(emq_server_names[i], name) == 0)
            return (int)i;
    for (size_t i = 0; i < NELEM(emq_client_names); i++)
        if (strcmp(emq_client_names[i], name) == 0)
            return EMQ_ECLIENT + (int)i;
    return EMQ_ESERVER;
}

int emq_seterr(struct emq *c, int code, const char *fmt, ...)
{
    va_list ap;
    c->code = code;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
    va_end(ap);
    if (code == EMQ_EIO || code == EMQ_ETIMEOUT || code == EMQ_EBADREPLY)
        c->broken = true;
    return code;
}

int emq_ok(struct emq *c)
{
    c->code = EMQ_OK;
    c->msg[0] = '\0';
    return EMQ_OK;
}

const char *emq_errmsg(const struct emq *c)
{
    return c != NULL ? c->msg : "no connection";
}

int emq_errcode(const struct emq *c)
{
    return c != NULL ? c->code : EMQ_EUSAGE;
}

void emq_interrupt(struct emq *c)
{
    /* Only async-signal-safe work here: a flag and one write(2). */
    c->interrupted = 1;
    ssize_t r = write(c->wake[1], "!", 1);
    (void)r; /* a full pipe already holds a wake-up */
}

bool emq_interrupted(const struct emq *c)
{
    return c->interrupted != 0;
}

/* Consume pending wake-ups; true if there was one. Ignored while closing. */
static bool take_interrupt(struct emq *c)
{
    char junk[64];
    bool woken = false;
    if (c->closing)
        return false;
    while (read(c->wake[0], junk, sizeof(junk)) > 0)
        woken = true;
    return woken;
}

long long emq_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A deadline timeout_ms from now; -1 for none. */
static long long deadline_in(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : emq_now_ms() + timeout_ms;
}

static int poll_timeout(long long deadline)
{
    if (deadline < 0)
        return -1;
    long long left = deadline - emq_now_ms();
    return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

/* Read what the socket has into the buffer. */
static int read_some(struct emq *c)
{
    if (c->cap - c->len < 4096) {
        size_t cap = c->cap ? c->cap * 2 : 16384;
        char *b = realloc(c->buf, cap);
        if (b == NULL)
            return emq_seterr(c, EMQ_ENOMEM, "out of memory reading a reply");
        c->buf = b;
        c->cap = cap;
    }
    ssize_t n = c->ssl != NULL ? emq_tls_recv(c, c->buf + c->len, c->cap - c->len)
                               : recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (n > 0) {
        c->len += (size_t)n;
        return EMQ_OK;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return EMQ_OK;
    if (n == 0)
        return emq_seterr(c, EMQ_EIO, "the server closed the connection");
    if (c->ssl != NULL && errno == EPROTO)
        return emq_seterr(c, EMQ_EIO, "%s", c->tls_err);
    return emq_seterr(c, EMQ_EIO, "read: %s", strerror(errno));
}

/* Wait until the socket is readable (and read) or, with `out`, writable;
 * the deadline ends the wait, and so does an interrupt, except while a
 * request is being written (`out`): a line is always sent whole, so an
 * interrupt never leaves the connection unusable. */
static int wait_io(struct emq *c, long long deadline, bool out)
{
    for (;;) {
        /* TLS may hold decrypted bytes the socket no longer shows. */
        if (!out && emq_tls_pending(c))
            return read_some(c);
        struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN | (out ? POLLOUT : 0)},
                              {.fd = c->wake[0], .events = POLLIN}};
        int r = poll(p, c->closing || out ? 1 : 2, poll_timeout(deadline));
        if (r < 0 && errno == EINTR)
            continue; /* a handler that interrupts us has made the pipe readable */
        if (r < 0)
            return emq_seterr(c, EMQ_EIO, "poll: %s", strerror(errno));
        if (!c->closing && !out && (p[1].revents & POLLIN) && take_interrupt(c))
            return emq_seterr(c, EMQ_EINTR, "interrupted");
        if (r == 0)
            return emq_seterr(c, EMQ_ETIMEOUT, "no reply from the server in time");
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            int rc = read_some(c);
            if (rc != EMQ_OK || !out)
                return rc;
        }
        if (out && (p[0].revents & POLLOUT))
            return EMQ_OK;
    }
}

/* Send all of data, reading (not parsing) whatever arrives meanwhile so a
 * server pushing to us while we write a large request never stalls. */
static int send_all(struct emq *c, const char *data, size_t len, long long deadline)
{
    while (len > 0) {
        ssize_t n =
            c->ssl != NULL ? emq_tls_send(c, data, len) : send(c->fd, data, len, MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && c->ssl != NULL && errno == EPROTO)
            return emq_seterr(c, EMQ_EIO, "%s", c->tls_err);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return emq_seterr(c, EMQ_EIO, "write: %s", strerror(errno));
        int rc = wait_io(c, deadline, true);
        if (rc != EMQ_OK)
            return rc;
    }
    return EMQ_OK;
}

/* The next server line, parsed. */
static int next_line(struct emq *c, long long deadline, json_t **out)
{
    for (;;) {
        char *nl = c->len > c->scan ? memchr(c->buf + c->scan, '\n', c->len - c->scan) : NULL;
        if (nl != NULL) {
            size_t n = (size_t)(nl - c->buf), used = n + 1;
            if (n > 0 && c->buf[n - 1] == '\r')
                n--;
            json_t *line = NULL;
            json_error_t err;
            if (n > 0)
                line = json_loadb(c->buf, n, JSON_REJECT_DUPLICATES, &err);
            memmove(c->buf, c->buf + used, c->len - used);
            c->len -= used;
            c->scan = 0;
            if (n == 0)
                continue; /* an empty line: nothing */
            if (!json_is_object(line)) {
                json_decref(line);
                return emq_seterr(c, EMQ_EBADREPLY,
                                  "the server sent a line that is not a JSON object");
            }
            *out = line;
            return EMQ_OK;
        }
        c->scan = c->len;
        if (c->len > EMQ_MAX_LINE)
            return emq_seterr(c, EMQ_EBADREPLY, "server line longer than %u bytes", EMQ_MAX_LINE);
        int rc = wait_io(c, deadline, false);
        if (rc != EMQ_OK)
            return rc;
    }
}

/* Queue a push line (consumed). */
static int queue_push(struct emq *c, json_t *line)
{
    struct emq_push *p = malloc(sizeof(*p));
    if (p == NULL) {
        json_decref(line);
        return emq_seterr(c, EMQ_ENOMEM, "out of memory queueing a push");
    }
    p->next = NULL;
    p->line = line;
    *c->tail = p;
    c->tail = &p->next;
    return EMQ_OK;
}

/* Sort one line: a push is queued (*reply NULL), a reply is checked
 * against the request it must answer (answered + 1) and handed back. */
static int sort_line(struct emq *c, json_t *line, json_t **reply)
{
    *reply = NULL;
    if (json_object_get(line, "push") != NULL)
        return queue_push(c, line);
    json_t *ok = json_object_get(line, "ok"), *ref = json_object_get(line, "ref");
    if (!json_is_boolean(ok) || c->answered >= c->sent) {
        json_decref(line);
        return emq_seterr(c, EMQ_EBADREPLY, "the server sent a line that answers nothing");
    }
    /* A reply without ref is legal only for a line the server could not
     * read (ETOOBIG): an error. */
    bool ref_ok = ref == NULL ? json_is_false(ok)
                              : json_is_integer(ref) &&
                                    (unsigned long long)json_integer_value(ref) == c->answered + 1;
    if (!ref_ok) {
        json_decref(line);
        return emq_seterr(c, EMQ_EBADREPLY, "reply out of order (expected ref %llu)",
                          c->answered + 1);
    }
    c->answered++;
    *reply = line;
    return EMQ_OK;
}

/* Turn a reply into the call's result: EMQ_OK, or its server error. */
static int reply_result(struct emq *c, const json_t *reply)
{
    if (json_is_true(json_object_get(reply, "ok")))
        return emq_ok(c);
    const char *code = json_string_value(json_object_get(reply, "error"));
    const char *msg = json_string_value(json_object_get(reply, "message"));
    int rc = emq_code_from_name(code);
    if (rc >= EMQ_ECLIENT && rc != EMQ_ESERVER)
        rc = EMQ_ESERVER; /* a server cannot send a library code */
    emq_seterr(c, rc, "%s%s%s", code ? code : "error", msg ? ": " : "", msg ? msg : "");
    c->code = rc;
    return rc;
}

int emq_call(struct emq *c, json_t *req, json_t **reply, int extra_ms)
{
    if (reply != NULL)
        *reply = NULL;
    if (c == NULL) {
        json_decref(req);
        return EMQ_EUSAGE;
    }
    if (req == NULL)
        return emq_seterr(c, EMQ_EUSAGE, "bad request arguments (a NULL string?)");
    if (c->broken || c->fd < 0) {
        json_decref(req);
        return emq_seterr(c, EMQ_EIO, "the connection is broken; reconnect");
    }
    if (take_interrupt(c)) {
        json_decref(req);
        return emq_seterr(c, EMQ_EINTR, "interrupted");
    }
    unsigned long long ref = c->sent + 1;
    char *text = NULL;
    if (json_object_set_new(req, "ref", json_integer((json_int_t)ref)) == 0)
        text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (text == NULL)
        return emq_seterr(c, EMQ_ENOMEM, "cannot encode the request");
    long long deadline = deadline_in(c->timeout_ms < 0 ? -1 : c->timeout_ms + extra_ms);
    size_t len = strlen(text);
    text[len] = '\n'; /* json_dumps' NUL becomes the line end */
    c->sent = ref;
    int rc = send_all(c, text, len + 1, deadline);
    free(text);
    while (rc == EMQ_OK) {
        json_t *line = NULL, *r = NULL;
        rc = next_line(c, deadline, &line);
        if (rc == EMQ_OK)
            rc = sort_line(c, line, &r);
        if (rc != EMQ_OK || r == NULL)
            continue;
        if (c->answered < ref) { /* the reply to an interrupted request */
            json_decref(r);
            continue;
        }
        rc = reply_result(c, r);
        if (reply != NULL)
            *reply = r;
        else
            json_decref(r);
        return rc;
    }
    return rc;
}

int emq_request(struct emq *c, json_t *request, json_t **reply)
{
    if (reply != NULL)
        *reply = NULL;
    if (c == NULL)
        return EMQ_EUSAGE;
    if (!json_is_object(request) || json_object_get(request, "ref") != NULL)
        return emq_seterr(c, EMQ_EUSAGE, "a request must be an object without \"ref\"");
    return emq_call(c, json_copy(request), reply, 0);
}

int emq_next_push(struct emq *c, json_t **push, int timeout_ms)
{
    *push = NULL;
    if (c->head == NULL) {
        if (c->broken || c->fd < 0)
            return emq_seterr(c, EMQ_EIO, "the connection is broken; reconnect");
        if (take_interrupt(c))
            return emq_seterr(c, EMQ_EINTR, "interrupted");
    }
    long long deadline = deadline_in(timeout_ms);
    while (c->head == NULL) {
        json_t *line = NULL, *r = NULL;
        int rc = next_line(c, deadline, &line);
        if (rc == EMQ_ETIMEOUT) {
            c->broken = false; /* waiting for a push owes nothing: not broken */
            return emq_ok(c);
        }
        if (rc == EMQ_OK)
            rc = sort_line(c, line, &r);
        if (rc != EMQ_OK)
            return rc;
        json_decref(r); /* a reply to an interrupted request */
    }
    struct emq_push *p = c->head;
    c->head = p->next;
    if (c->head == NULL)
        c->tail = &c->head;
    *push = p->line;
    free(p);
    return emq_ok(c);
}

/* Connect fd to addr within the deadline (fd is non-blocking). */
static int connect_fd(struct emq *c, int fd, const struct sockaddr *sa, socklen_t salen,
                      long long deadline)
{
    if (connect(fd, sa, salen) == 0)
        return EMQ_OK;
    if (errno != EINPROGRESS)
        return -errno;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int r;
    do
        r = poll(&p, 1, poll_timeout(deadline));
    while (r < 0 && errno == EINTR);
    if (r == 0)
        return -ETIMEDOUT;
    int err = 0;
    socklen_t elen = sizeof(err);
    if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        return -errno;
    (void)c;
    return -err;
}

static int open_socket(int family)
{
    return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static int connect_unix(struct emq *c, const char *path, long long deadline)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return emq_seterr(c, EMQ_EUSAGE, "unix socket path too long: %s", path);
    strcpy(sa.sun_path, path);
    int fd = open_socket(AF_UNIX);
    if (fd < 0)
        return emq_seterr(c, EMQ_EIO, "socket: %s", strerror(errno));
    int rc = connect_fd(c, fd, (struct sockaddr *)&sa, sizeof(sa), deadline);
    if (rc != 0) {
        close(fd);
        return emq_seterr(c, rc == -ETIMEDOUT ? EMQ_ETIMEOUT : EMQ_EIO, "connect %s: %s", path,
                          strerror(-rc));
    }
    c->fd = fd;
    return EMQ_OK;
}

/* TCP to host:port, trying each address getaddrinfo gives (a client may
 * block on name resolution; emqd itself never does). */
static int connect_tcp(struct emq *c, const char *host, int port, long long deadline)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res;
    char service[16];
    snprintf(service, sizeof(service), "%d", port);
    int gai = getaddrinfo(host, service, &hints, &res);
    if (gai != 0)
        return emq_seterr(c, EMQ_EIO, "cannot resolve %s: %s", host, gai_strerror(gai));
    int rc = -ENOENT;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        int fd = open_socket(ai->ai_family);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        rc = connect_fd(c, fd, ai->ai_addr, ai->ai_addrlen, deadline);
        if (rc == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
            c->fd = fd;
            break;
        }
        close(fd);
        if (rc == -ETIMEDOUT)
            break;
    }
    freeaddrinfo(res);
    if (rc != 0)
        return emq_seterr(c, rc == -ETIMEDOUT ? EMQ_ETIMEOUT : EMQ_EIO, "connect %s:%d: %s", host,
                          port, strerror(-rc));
    return EMQ_OK;
}

static int say_hello(struct emq *c, const struct emq_options *o)
{
    json_t *req = json_pack("{s:s, s:i}", "op", "hello", "protocol", 1);
    if (req != NULL && o->token != NULL)
        json_object_set_new(req, "token", json_string(o->token));
    if (req != NULL && o->name != NULL)
        json_object_set_new(req, "name", json_string(o->name));
    json_t *reply = NULL;
    int rc = emq_call(c, req, &reply, 0);
    if (rc == EMQ_OK && json_integer_value(json_object_get(reply, "protocol")) != 1)
        rc = emq_seterr(c, EMQ_EBADREPLY, "the server does not speak protocol 1");
    json_decref(reply);
    return rc;
}

int emq_connect(struct emq **out, const struct emq_options *opts)
{
    static const struct emq_options none;
    const struct emq_options *o = opts != NULL ? opts : &none;
    struct emq *c = calloc(1, sizeof(*c));
    *out = c;
    if (c == NULL)
        return EMQ_ENOMEM;
    c->fd = -1;
    c->tail = &c->head;
    c->timeout_ms = o->timeout_ms == 0 ? EMQ_DEFAULT_TIMEOUT : o->timeout_ms;
    if (pipe2(c->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
        c->wake[0] = c->wake[1] = -1;
        return emq_seterr(c, EMQ_EIO, "pipe: %s", strerror(errno));
    }
    long long deadline = deadline_in(c->timeout_ms);
    int rc;
    const char *host = o->host != NULL ? o->host : EMQ_DEFAULT_HOST;
    if (o->unix_path != NULL)
        rc = o->tls ? emq_seterr(c, EMQ_EUSAGE, "TLS is for TCP: a unix socket is plain")
                    : connect_unix(c, o->unix_path, deadline);
    else
        rc = connect_tcp(c, host, o->port > 0 ? o->port : EMQ_DEFAULT_PORT, deadline);
    if (rc == EMQ_OK && o->tls)
        rc = emq_tls_start(c, o, host, deadline);
    if (rc != EMQ_OK)
        return rc;
    return say_hello(c, o);
}

void emq_close(struct emq *c)
{
    if (c == NULL)
        return;
    if (c->fd >= 0 && !c->broken) {
        /* Say quit and wait for its reply, so the server has read every
         * request before the socket closes (a close with unread data
         * could reset the connection). Interrupts no longer count. */
        c->closing = true;
        c->timeout_ms = c->timeout_ms < 0 || c->timeout_ms > EMQ_CLOSE_WAIT_MS ? EMQ_CLOSE_WAIT_MS
                                                                               : c->timeout_ms;
        emq_call(c, json_pack("{s:s}", "op", "quit"), NULL, 0);
    }
    emq_tls_close(c);
    if (c->fd >= 0)
        close(c->fd);
    if (c->wake[0] >= 0) {
        close(c->wake[0]);
        close(c->wake[1]);
    }
    while (c->head != NULL) {
        struct emq_push *p = c->head;
        c->head = p->next;
        json_decref(p->line);
        free(p);
    }
    free(c->buf);
    free(c);
}
