/* client: one connection. Bytes come in through the frame reader, each line
 * becomes a request run by its command; replies leave in request order,
 * batched into one write per loop turn. Jobs leased to the connection are
 * remembered so they can be given back the moment it closes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

static void on_close_cb(uv_handle_t *h);
static void read_start(struct client *c);
static bool run_lines(struct client *c);

void client_ref(struct client *c)
{
    c->refs++;
}

static void client_free(struct client *c)
{
    frame_deinit(&c->frame);
    outbuf_deinit(&c->out);
    outbuf_deinit(&c->wbuf);
    map_deinit(&c->held);
    free(c);
}

void client_unref(struct client *c)
{
    if (--c->refs == 0)
        client_free(c);
}

/* Reads pause while too many requests wait for replies (a pipelining
 * client cannot make the daemon buffer without bound) and resume below
 * half of that. Lines already read but not run when reads paused run at
 * the resume, from the server's idle handle (never from inside the reply
 * that freed the room: handlers must not nest). */
static void maybe_resume(struct client *c)
{
    struct server *s = c->srv;
    if (c->reading || c->closing || c->quit || c->resume_queued || c->barrier != NULL ||
        c->inflight > s->cfg->max_inflight / 2)
        return;
    client_ref(c); /* dropped by client_resume_all */
    c->resume_queued = true;
    c->resume_next = s->resumed;
    s->resumed = c;
    uv_idle_start(&s->resume, server_resume_cb);
}

static void mark_dirty(struct client *c)
{
    if (!c->dirty) {
        client_ref(c); /* dropped by client_flush_all */
        c->dirty = true;
        c->dirty_next = c->srv->dirty;
        c->srv->dirty = c;
    }
}

void client_send(struct client *c, const char *data, size_t len)
{
    if (c->closing)
        return;
    /* The cap is on output the client has not taken yet. One line into an
     * empty buffer is always accepted, however long: a client that keeps
     * up must get a reply larger than the cap (a claim of many large jobs)
     * rather than be dropped for it. Memory per connection stays bounded
     * by max_output plus one line. */
    size_t pending = c->out.len + c->wbuf.len;
    if (pending > 0 && pending + len > c->srv->cfg->max_output) {
        log_event(LOG_WARN, "output buffer full (not reading?): disconnecting",
                  "client=%s max_output=%zu", c->addr, c->srv->cfg->max_output);
        client_close(c, "output buffer full");
        return;
    }
    outbuf_append(&c->out, data, len);
    mark_dirty(c);
}

static void req_free(struct req *r)
{
    struct client *c = r->c;
    json_decref(r->root);
    json_decref(r->acc);
    free(r->reply);
    free(r);
    c->inflight--;
    maybe_resume(c);
    client_unref(c);
}

/* Move every finished reply at the head of the line into the output. */
static void drain_replies(struct client *c)
{
    while (c->head != NULL && c->head->done) {
        struct req *r = c->head;
        c->head = r->next;
        if (c->head == NULL)
            c->tail = NULL;
        c->queued_bytes -= r->reply_len;
        client_send(c, r->reply, r->reply_len);
        bool quit = c->quit && c->head == NULL;
        /* A stream starts pushing only once its own reply is out, so a
         * worker never sees a job before the ack of the stream it asked
         * for. */
        struct waiter *park = r->park;
        req_free(r);
        if (park != NULL && !c->closing)
            queue_park(park->q, park);
        if (quit)
            mark_dirty(c); /* the flush closes it once written */
    }
}

/* The request's place in the op table (SERVER_OPS_MAX if none), for the
 * requests-by-op-and-result counters. */
static size_t op_index(const struct cmd *cmd)
{
    const struct cmd *k;
    for (size_t i = 0; cmd != NULL && i < SERVER_OPS_MAX && (k = cmd_at(i)) != NULL; i++)
        if (k == cmd)
            return i;
    return SERVER_OPS_MAX;
}

void req_ok_line(struct req *r, struct outbuf *line)
{
    struct client *c = r->c;
    if (c->barrier == r) {
        /* Every call of it has run: the lines after it may run now. */
        c->barrier = NULL;
        maybe_resume(c);
    }
    c->srv->results.n[op_index(r->cmd)][r->err < WIRE__END ? r->err : 0]++;
    if (c->closing) {
        /* Nobody to answer; the request was unlinked when the client
         * closed. */
        outbuf_deinit(line);
        req_free(r);
        return;
    }
    r->done = true;
    r->reply = line->data;
    r->reply_len = line->len;
    line->data = NULL;
    /* The reply is all that is left to send: drop the parsed request (a
     * payload, maybe) now rather than when an earlier reply, perhaps a
     * claim parked for an hour, lets this one out. */
    json_decref(r->root);
    json_decref(r->acc);
    r->root = r->acc = NULL;
    r->ref = NULL;
    c->queued_bytes += r->reply_len;
    drain_replies(c);
    /* Replies queued behind a parked request count against the output
     * cap too, so a client cannot pile them up without bound. */
    if (!c->closing && c->queued_bytes > c->srv->cfg->max_output) {
        log_event(LOG_WARN, "replies held behind an earlier request exceed max-output",
                  "client=%s queued=%zu", c->addr, c->queued_bytes);
        client_close(c, "replies held past max-output");
    }
}

void req_ok(struct req *r, json_t *fields)
{
    struct outbuf line;
    outbuf_init(&line);
    reply_ok(&line, r->ref, fields);
    json_decref(fields);
    req_ok_line(r, &line);
}

void req_ok_string(struct req *r, const char *key, const char *value)
{
    struct outbuf line;
    outbuf_init(&line);
    reply_begin_ok(&line, r->ref);
    reply_key(&line, key);
    reply_string(&line, value, strlen(value));
    if (reply_end(&line) != 0) {
        outbuf_deinit(&line);
        req_error(r, WIRE_EINTERNAL, "out of memory");
        return;
    }
    req_ok_line(r, &line);
}

void req_error(struct req *r, enum wire_error code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    r->c->srv->count.errors++;
    r->err = (unsigned char)code;
    if (log_threshold >= LOG_DEBUG) {
        char q[600];
        log_event(LOG_DEBUG, "request refused", "client=%s op=%s code=%s message=%s", r->c->addr,
                  r->cmd ? r->cmd->name : "-", wire_error_name(code), log_quote(msg, q, sizeof(q)));
    }
    struct outbuf line;
    outbuf_init(&line);
    reply_error(&line, r->ref, code, msg);
    req_ok_line(r, &line);
}

void req_backend_error(struct req *r, int status, const redisReply *reply)
{
    if (status != 0 || reply == NULL) {
        req_error(r, WIRE_EUNAVAILABLE,
                  "the backend is not connected or did not answer in time; retry");
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        /* Lane scripts fail with "ECODE message"; anything else is ours. */
        size_t w = strcspn(reply->str, " ");
        enum wire_error code = wire_error_lookup(reply->str, w);
        const char *msg = reply->str[w] ? reply->str + w + 1 : reply->str;
        if (code == WIRE_EINTERNAL) {
            char q[600];
            log_event(LOG_ERROR, "backend error", "op=%s error=%s", r->cmd ? r->cmd->name : "-",
                      log_quote(reply->str, q, sizeof(q)));
        }
        req_error(r, code, "%s", msg);
        return;
    }
    log_event(LOG_ERROR, "unexpected backend reply", "op=%s type=%d", r->cmd ? r->cmd->name : "-",
              reply->type);
    req_error(r, WIRE_EINTERNAL, "unexpected backend reply");
}

void req_store_error(struct req *r, const struct store_status *st)
{
    req_error(r, st->code, "%s", st->message);
}

struct server *req_server(const struct req *r)
{
    return r->c->srv;
}

static struct req *req_new(struct client *c)
{
    struct req *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->c = c;
    client_ref(c);
    c->inflight++;
    if (c->tail != NULL)
        c->tail->next = r;
    else
        c->head = r;
    c->tail = r;
    return r;
}

static bool auth_ok(struct client *c, const struct cmd *cmd)
{
    return c->authed || c->srv->cfg->token == NULL || (cmd != NULL && (cmd->flags & CMD_NOAUTH));
}

static void handle_line(struct client *c, const char *line, size_t len)
{
    struct server *s = c->srv;
    struct req *r = req_new(c);
    struct request rq;
    struct request_error err;

    if (r == NULL) {
        client_close(c, "out of memory");
        return;
    }
    s->count.requests++;
    c->last_active = uv_now(s->loop);
    if (request_parse(&rq, line, len, &err) != 0) {
        r->root = rq.root;
        r->ref = rq.ref;
        req_error(r, err.code, "%s", err.message);
        return;
    }
    r->root = rq.root;
    r->ref = rq.ref;
    r->cmd = cmd_lookup(rq.op, rq.op_len);
    /* Authentication comes first: a client without the token learns
     * nothing, not even which ops exist. */
    if (!auth_ok(c, r->cmd)) {
        r->cmd = NULL;
        req_error(r, WIRE_EAUTH, "say hello with the token first");
        return;
    }
    if (r->cmd == NULL) {
        req_error(r, WIRE_EUNKNOWN, "no such op \"%.*s\"", (int)(rq.op_len > 64 ? 64 : rq.op_len),
                  rq.op);
        return;
    }
    if (request_check(r->cmd->spec, r->root, &err) != 0) {
        req_error(r, err.code, "%s", err.message);
        return;
    }
    if (r->cmd->flags & CMD_QUEUE) {
        size_t qlen;
        const char *qname = request_string(r->root, "queue", &qlen);
        r->q = server_queue(s, qname, qlen);
        if (r->q == NULL) {
            req_error(r, WIRE_ELIMIT, "too many queues");
            return;
        }
    }
    if (s->stopping && r->cmd->flags & CMD_WORK) {
        req_error(r, WIRE_EUNAVAILABLE, "the daemon is shutting down");
        return;
    }
    if (r->cmd->flags & CMD_BARRIER)
        c->barrier = r; /* cleared by its reply, maybe within run */
    r->cmd->run(r);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct client *c = h->data;
    char *room;
    size_t room_len;
    (void)suggested;
    if (frame_space(&c->frame, 64 * 1024, &room, &room_len) != 0) {
        buf->base = NULL;
        buf->len = 0;
        return;
    }
    buf->base = room;
    buf->len = room_len;
}

/* Stop reading c (the lines already read stay in its frame buffer). */
static void read_pause(struct client *c)
{
    if (c->reading)
        uv_read_stop(&c->h.stream);
    c->reading = false;
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct client *c = st->data;
    (void)buf;
    if (nread == UV_EOF) {
        /* The peer may only have half-closed (shutdown(SHUT_WR), as nc -N
         * and many scripts do): it still reads. Run every line it sent
         * (those waiting behind a pause run at the resume), answer them
         * all, as a stop does, then close. */
        log_event(LOG_DEBUG, "end of input: closing once every reply is written", "client=%s",
                  c->addr);
        c->eof = true;
        read_pause(c);
        if (!c->lines_left)
            client_shutdown(c);
        return;
    }
    if (nread < 0) {
        client_close(c, uv_strerror((int)nread));
        return;
    }
    if (nread == 0)
        return;
    frame_commit(&c->frame, (size_t)nread);
    c->lines_left = !run_lines(c);
}

static void read_start(struct client *c)
{
    if (uv_read_start(&c->h.stream, alloc_cb, read_cb) == 0)
        c->reading = true;
}

void client_resume_all(struct server *s)
{
    struct client *c = s->resumed;
    s->resumed = NULL;
    while (c != NULL) {
        struct client *next = c->resume_next;
        c->resume_queued = false;
        c->resume_next = NULL;
        if (!c->reading && !c->closing && !c->quit) {
            if (!c->eof)
                read_start(c);
            c->lines_left = !run_lines(c);
            if (c->eof && !c->lines_left && !c->closing)
                client_shutdown(c); /* the last lines of a half-closed peer ran */
        }
        client_unref(c);
        c = next;
    }
}

/* Run the complete lines in the frame buffer until none is left, the
 * client quits, too many requests are in flight, or a barrier request
 * (drain) is running (reads pause then). True when every complete line
 * has run. */
static bool run_lines(struct client *c)
{
    bool all = false;
    client_ref(c); /* a handler may close the client */
    for (;;) {
        const char *line;
        size_t len;
        int rc = frame_next(&c->frame, &line, &len);
        if (rc == FRAME_EAGAIN || c->closing) {
            all = true;
            break;
        }
        if (rc == FRAME_ETOOBIG) {
            struct req *r = req_new(c);
            if (r == NULL)
                break;
            req_error(r, WIRE_ETOOBIG, "line longer than %zu bytes", c->srv->cfg->max_line);
            continue;
        }
        handle_line(c, line, len);
        if (c->quit) {
            /* quit (or too many failed hellos): nothing after it runs. */
            read_pause(c);
            all = true;
            break;
        }
        if (c->inflight >= c->srv->cfg->max_inflight || c->barrier != NULL) {
            read_pause(c);
            break;
        }
    }
    client_unref(c);
    return all;
}

static void write_cb(uv_write_t *w, int status)
{
    struct client *c = w->data;
    c->writing = false;
    outbuf_reset(&c->wbuf);
    if (status < 0 && !c->closing)
        client_close(c, uv_strerror(status));
    else if (!c->closing && (c->out.len > 0 || c->quit))
        mark_dirty(c);
    client_unref(c);
}

static void flush_one(struct client *c)
{
    if (c->closing || c->writing)
        return;
    if (c->out.len == 0) {
        if (c->quit && c->head == NULL)
            client_close(c, "quit");
        return;
    }
    /* Swap: the write owns wbuf until write_cb; new bytes go to out. */
    struct outbuf t = c->wbuf;
    c->wbuf = c->out;
    c->out = t;
    /* A uv_buf_t holds at most 4 GiB (an unsigned length): an output that
     * large (a huge claim reply under raised limits) goes as several
     * buffers of 1 GiB, never truncated. uv_write copies the array. */
    const size_t chunk = (size_t)1 << 30;
    size_t nb = c->wbuf.len / chunk + (c->wbuf.len % chunk != 0);
    uv_buf_t one, *bufs = nb <= 1 ? &one : malloc(nb * sizeof(*bufs));
    if (bufs == NULL) {
        outbuf_reset(&c->wbuf);
        client_close(c, "out of memory");
        return;
    }
    for (size_t i = 0; i < nb; i++) {
        size_t off = i * chunk, n = c->wbuf.len - off < chunk ? c->wbuf.len - off : chunk;
        bufs[i] = uv_buf_init(c->wbuf.data + off, (unsigned)n);
    }
    c->write_req.data = c;
    int rc = uv_write(&c->write_req, &c->h.stream, bufs, (unsigned)nb, write_cb);
    if (bufs != &one)
        free(bufs);
    if (rc != 0) {
        outbuf_reset(&c->wbuf);
        client_close(c, "write failed");
        return;
    }
    c->writing = true;
    client_ref(c);
}

void client_flush_all(struct server *s)
{
    struct client *c = s->dirty;
    s->dirty = NULL;
    while (c != NULL) {
        struct client *next = c->dirty_next;
        c->dirty = false;
        c->dirty_next = NULL;
        flush_one(c);
        client_unref(c);
        c = next;
    }
}

int client_accept(struct server *s, uv_stream_t *listener)
{
    struct client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -ENOMEM;
    c->srv = s;
    c->refs = 1; /* the handle's, dropped in on_close_cb */
    c->unix_socket = listener->type == UV_NAMED_PIPE;
    int rc =
        c->unix_socket ? uv_pipe_init(s->loop, &c->h.pipe, 0) : uv_tcp_init(s->loop, &c->h.tcp);
    if (rc != 0) {
        free(c);
        return rc;
    }
    c->h.handle.data = c;
    frame_init(&c->frame, s->cfg->max_line);
    outbuf_init(&c->out);
    outbuf_init(&c->wbuf);
    map_init(&c->held);
    c->id = ++s->count.connections;
    c->next = s->clients;
    if (s->clients != NULL)
        s->clients->prev = c;
    s->clients = c;
    s->nclients++;

    if ((rc = uv_accept(listener, &c->h.stream)) != 0) {
        client_close(c, uv_strerror(rc));
        return rc;
    }
    if (c->unix_socket) {
        snprintf(c->addr, sizeof(c->addr), "unix#%llu", (unsigned long long)c->id);
    } else {
        struct sockaddr_storage sa;
        int len = sizeof(sa);
        char ip[48] = "?";
        int port = 0;
        uv_tcp_nodelay(&c->h.tcp, 1);
        if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&sa, &len) == 0) {
            if (sa.ss_family == AF_INET6) {
                uv_ip6_name((struct sockaddr_in6 *)&sa, ip, sizeof(ip));
                port = ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
            } else {
                uv_ip4_name((struct sockaddr_in *)&sa, ip, sizeof(ip));
                port = ntohs(((struct sockaddr_in *)&sa)->sin_port);
            }
        }
        snprintf(c->addr, sizeof(c->addr), "%s:%d", ip, port);
    }
    if (s->nclients > s->cfg->max_clients) {
        static const char full[] =
            "{\"ok\":false,\"error\":\"ELIMIT\",\"message\":\"too many connections\"}\n";
        log_event(LOG_WARN, "connection refused: too many connections", "client=%s max_clients=%zu",
                  c->addr, s->cfg->max_clients);
        client_send(c, full, sizeof(full) - 1);
        c->quit = true;
        return 0;
    }
    log_event(LOG_DEBUG, "connection opened", "client=%s", c->addr);
    c->last_active = uv_now(s->loop);
    /* Opened while no token is set: it stays in if a reload sets one. */
    c->authed = s->cfg->token == NULL;
    read_start(c);
    return 0;
}

static void on_close_cb(uv_handle_t *h)
{
    client_unref(h->data);
}

/* Give back every job leased to the client: one release call per queue
 * (a connection holds the jobs of a few queues, so the queues are found
 * by a walk of the ones seen so far). */
static void release_held(struct client *c)
{
    struct byq {
        struct queue *q;
        struct queue_pairs pairs;
    } *qs = NULL;
    size_t nq = 0, b;
    bool oom = false;

    for (struct map_entry *e = map_first(&c->held, &b); e; e = map_next(&c->held, &b, e)) {
        struct lease *l = e->value;
        size_t i = 0;
        while (i < nq && qs[i].q != l->q)
            i++;
        if (i == nq) {
            struct byq *more = realloc(qs, (nq + 1) * sizeof(*qs));
            if (more == NULL) {
                oom = true;
                continue;
            }
            qs = more;
            qs[nq++] = (struct byq){.q = l->q};
        }
        /* The strings stay in the lease table until the calls are made. */
        if (queue_pairs_add(&qs[i].pairs, strchr(l->key, ' ') + 1, l->lease) != 0)
            oom = true;
    }
    if (oom)
        log_event(LOG_WARN,
                  "out of memory: some leases of a closed connection stay until they expire",
                  "client=%s", c->addr);
    for (size_t i = 0; i < nq; i++) {
        log_event(LOG_INFO, "connection closed holding jobs: released",
                  "client=%s queue=%s jobs=%zu", c->addr, qs[i].q->name, qs[i].pairs.n);
        queue_release(qs[i].q, qs[i].pairs.n, qs[i].pairs.v, "connection closed", true);
        free(qs[i].pairs.v);
    }
    free(qs);
    for (struct map_entry *e = map_first(&c->held, &b); e; e = map_next(&c->held, &b, e))
        free(e->value);
    map_deinit(&c->held);
}

void client_close(struct client *c, const char *why)
{
    struct server *s = c->srv;
    if (c->closing)
        return;
    c->closing = true;
    c->barrier = NULL; /* it finishes into the void, like every request */
    if (log_threshold >= LOG_DEBUG) {
        char q[200];
        log_event(LOG_DEBUG, "connection closed", "client=%s reason=%s", c->addr,
                  log_quote(why, q, sizeof(q)));
    }
    if (c->reading)
        uv_read_stop(&c->h.stream);
    c->reading = false;

    release_held(c);

    /* Requests still running finish into the void (req_ok_line sees
     * closing); those already finished but waiting their turn are freed
     * now. */
    struct req *r = c->head;
    c->head = c->tail = NULL;
    while (r != NULL) {
        struct req *next = r->next;
        r->next = NULL;
        if (r->done)
            req_free(r);
        r = next;
    }

    /* Parked consumers stop waiting. A parked claim's request would never
     * finish on its own (its waiter is gone): finish it into the void, so
     * it drops its reference on the client. */
    while (c->waiters != NULL) {
        struct waiter *w = c->waiters;
        struct req *parked = w->stream ? NULL : w->req;
        c->waiters = w->cnext;
        queue_unpark(w);
        waiter_free(w);
        if (parked != NULL) {
            struct outbuf none;
            outbuf_init(&none);
            req_ok_line(parked, &none);
        }
    }

    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->clients = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    s->nclients--;
    uv_close(&c->h.handle, on_close_cb);
}

void client_hold(struct client *c, struct queue *q, const char *job, size_t jlen, const char *lease,
                 uint64_t lease_ms, struct waiter *stream)
{
    struct lease *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return;
    l->q = q;
    l->stream = stream;
    snprintf(l->lease, sizeof(l->lease), "%s", lease);
    l->klen = (size_t)snprintf(l->key, sizeof(l->key), "%s %.*s", q->name, (int)jlen, job);
    l->expires = uv_now(c->srv->loop) + lease_ms;
    l->since_ns = uv_hrtime();
    if (map_put(&c->held, l->key, l->klen, l) != 0) {
        free(l);
        return;
    }
    if (stream != NULL)
        stream->outstanding++;
}

static size_t held_key(struct queue *q, const char *job, size_t jlen, char *key, size_t cap)
{
    return (size_t)snprintf(key, cap, "%s %.*s", q->name, (int)jlen, job);
}

void client_extend(struct client *c, struct queue *q, const char *job, size_t jlen,
                   uint64_t lease_ms)
{
    char key[sizeof(((struct lease *)0)->key)];
    struct lease *l = map_get(&c->held, key, held_key(q, job, jlen, key, sizeof(key)));
    if (l != NULL)
        l->expires = uv_now(c->srv->loop) + lease_ms;
}

/* Leases whose time ran out are not ours any more (the reaper gives the
 * jobs to someone else): forget them, so a stream whose worker let a job
 * expire gets its credit back instead of stalling, and the table of a
 * worker that never settles stays bounded. The local clock runs from the
 * moment of delivery, later than the claim, so this never forgets a lease
 * Redis still honours. */
void client_sweep(struct client *c, uint64_t now)
{
    struct lease *gone[64];
    size_t n;

    /* In rounds of 64 (the map cannot change while it is walked). */
    do {
        size_t b;
        n = 0;
        for (struct map_entry *e = map_first(&c->held, &b); e != NULL && n < 64;
             e = map_next(&c->held, &b, e)) {
            struct lease *l = e->value;
            if (l->expires <= now)
                gone[n++] = l;
        }
        for (size_t i = 0; i < n; i++) {
            const char *job = strchr(gone[i]->key, ' ') + 1;
            client_unhold(c, gone[i]->q, job, strlen(job), false);
        }
    } while (n == 64);
}

void client_unhold(struct client *c, struct queue *q, const char *job, size_t jlen, bool settled)
{
    char key[sizeof(((struct lease *)0)->key)];
    struct lease *l = map_del(&c->held, key, held_key(q, job, jlen, key, sizeof(key)));
    if (l == NULL)
        return;
    if (settled)
        hist_record(&q->latency.run, (uv_hrtime() - l->since_ns) / 1000);
    struct waiter *w = l->stream;
    free(l);
    if (w != NULL) {
        w->outstanding--;
        /* Credit came back: wait for (or take) more work. */
        if (!w->linked && w->outstanding < w->credit && !c->closing)
            queue_park(w->q, w);
    }
}

void client_shutdown(struct client *c)
{
    if (c->closing)
        return;
    if (c->reading)
        uv_read_stop(&c->h.stream);
    c->reading = false;
    c->quit = true;
    /* Answering a claim may close the client (past max-output), which
     * frees every other waiter: after each claim, start again from the
     * list's head rather than from a saved next. Stopped streams stay. */
    struct waiter *w = c->waiters;
    while (w != NULL && !c->closing) {
        bool claim = !w->stream;
        queue_stop_waiter(w); /* a claim unlinks and frees itself */
        w = claim ? c->waiters : w->cnext;
    }
    if (!c->closing)
        mark_dirty(c);
}

/* Idle: no request for idle_timeout_ms, none unanswered, no lease held and
 * no parked claim or stream. A streaming worker waiting for work is never
 * idle: it waits legitimately, and the push it waits for is the daemon's
 * to send. */
void client_idle_check(struct client *c, uint64_t now)
{
    uint64_t limit = c->srv->cfg->idle_timeout_ms;
    if (limit == 0 || c->closing || c->quit || c->head != NULL || c->held.count > 0 ||
        c->waiters != NULL || now - c->last_active < limit)
        return;
    log_event(LOG_DEBUG, "idle connection closed", "client=%s idle_ms=%llu", c->addr,
              (unsigned long long)(now - c->last_active));
    client_close(c, "idle timeout");
}
