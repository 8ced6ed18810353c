/* req: a request's life (req.h): made from a line, checked against its
 * command's spec, run, and answered; answers leave in arrival order. */
#include "req.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "client.h"
#include "cmd.h"
#include "consumer.h"
#include "engine.h"
#include "log.h"
#include "perm.h"
#include "queue.h"
#include "request.h"
#include "server.h"

/* The request counts bytes in the budget (its parsed form): add them to
 * its connection's and the server's, or (bytes 0) take them out. A
 * closed connection's were all taken out at its close. */
static void req_count(struct req *r, size_t bytes)
{
    struct client *c = r->c;
    if (!c->closing) {
        c->req_bytes = c->req_bytes - r->bytes + bytes;
        c->srv->bud.requests = c->srv->bud.requests - r->bytes + bytes;
    }
    r->bytes = bytes;
}

/* What jansson has allocated since before, and not freed (0 if it freed
 * more). */
static size_t json_since(size_t before)
{
    size_t d = budget_json_bytes() - before;
    return (ptrdiff_t)d < 0 ? 0 : d;
}

static void req_free(struct req *r)
{
    struct client *c = r->c;
    if (c->running == r)
        c->running = NULL;
    req_count(r, 0);
    json_decref(r->root);
    json_decref(r->acc);
    free(r->reply);
    free(r);
    c->inflight--;
    client_maybe_resume(c);
    client_unref(c);
}

/* Move every finished reply at the head of the connection's line into
 * its output. */
static void req_drain(struct client *c)
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
        struct consumer *park = r->park;
        req_free(r);
        if (park != NULL && !c->closing)
            queue_park(park->w.q, &park->w);
        if (quit)
            client_mark_dirty(c); /* the flush closes it once written */
    }
}

void req_close_all(struct client *c)
{
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
}

/* The request's place in the op table (SERVER_OPS_MAX if none), for the
 * requests-by-op-and-result counters. */
static size_t op_index(const struct cmd *cmd)
{
    size_t i = cmd_index(cmd);
    return i < SERVER_OPS_MAX ? i : SERVER_OPS_MAX;
}

/* The request is answered (or dropped): let the lines after a barrier
 * run, and count it. */
static void finished(struct req *r)
{
    struct client *c = r->c;
    if (c->barrier == r) {
        /* Every call of it has run: the lines after it may run now. */
        c->barrier = NULL;
        client_maybe_resume(c);
    }
    c->srv->results.n[op_index(r->cmd)][r->err < WIRE__END ? r->err : 0]++;
}

void req_drop(struct req *r)
{
    finished(r);
    req_free(r);
}

void req_ok_line(struct req *r, struct outbuf *line, int rc)
{
    struct client *c = r->c;
    if (rc != 0 && !c->closing) {
        /* The reply cannot be sent, and every later reply of the
         * connection would wait behind it for ever: close it instead. */
        log_event(LOG_WARN, "out of memory building a reply: disconnecting", "client=%s op=%s",
                  c->addr, r->cmd ? r->cmd->name : "-");
        client_close(c, "out of memory");
    }
    if (c->closing) {
        /* Nobody to answer; the request was unlinked when the client
         * closed. */
        outbuf_deinit(line);
        req_drop(r);
        return;
    }
    finished(r);
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
    req_count(r, 0);
    c->queued_bytes += r->reply_len;
    req_drain(c);
    client_account(c);
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
    int rc = reply_ok(&line, r->ref, fields);
    json_decref(fields);
    req_ok_line(r, &line, rc);
}

void req_ok_string(struct req *r, const char *key, const char *value)
{
    struct outbuf line;
    outbuf_init(&line);
    reply_begin_ok(&line, r->ref);
    reply_key(&line, key);
    reply_string(&line, value, strlen(value));
    req_ok_line(r, &line, reply_end(&line));
}

__attribute__((format(printf, 4, 0))) static void
req_verror(struct req *r, json_t *fields, enum wire_error code, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    r->c->srv->count.errors++;
    r->err = (unsigned char)code;
    if (log_threshold >= LOG_DEBUG) {
        char q[600];
        log_event(LOG_DEBUG, "request refused", "client=%s op=%s code=%s message=%s", r->c->addr,
                  r->cmd ? r->cmd->name : "-", wire_error_name(code), log_quote(msg, q, sizeof(q)));
    }
    struct outbuf line;
    outbuf_init(&line);
    int rc = reply_error_fields(&line, r->ref, code, msg, fields);
    json_decref(fields);
    req_ok_line(r, &line, rc);
}

void req_error(struct req *r, enum wire_error code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    req_verror(r, NULL, code, fmt, ap);
    va_end(ap);
}

void req_error_fields(struct req *r, json_t *fields, enum wire_error code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    req_verror(r, fields, code, fmt, ap);
    va_end(ap);
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

void req_unread(struct client *c, bool too_long)
{
    struct req *r = req_new(c);
    if (r == NULL) {
        log_event(LOG_WARN, "out of memory for a request: disconnecting", "client=%s", c->addr);
        client_close(c, "out of memory");
        return;
    }
    if (too_long)
        req_error(r, WIRE_ETOOBIG, "line longer than %zu bytes", c->srv->cfg->max_line);
    else
        req_error(r, WIRE_ELIMIT, "line refused: the daemon's client buffers are full");
}

static bool auth_ok(struct client *c, const struct cmd *cmd)
{
    return c->authed || !server_auth_required(c->srv) || (cmd != NULL && (cmd->flags & CMD_NOAUTH));
}

void req_run_line(struct client *c, const char *line, size_t len)
{
    struct server *s = c->srv;
    struct req *r = req_new(c);
    struct request rq;
    struct request_error err;

    if (r == NULL) {
        log_event(LOG_WARN, "out of memory for a request: disconnecting", "client=%s", c->addr);
        client_close(c, "out of memory");
        return;
    }
    s->count.requests++;
    c->last_active = uv_now(s->loop);
    /* What the parsed form takes, as jansson allocated it: held until the
     * reply, it is what a request in flight costs beyond its backend
     * call (the pool counts that). */
    size_t before = budget_json_bytes();
    int parsed = request_parse(&rq, line, len, &err);
    req_count(r, sizeof(*r) + json_since(before));
    if (parsed != 0) {
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
    /* The role before the arguments: a token learns nothing of an op it
     * may not use. The queue's patterns need its name checked first. */
    if (!perm_op(r))
        return;
    if (request_check(r->cmd->spec, r->root, &err) != 0) {
        req_error(r, err.code, "%s", err.message);
        return;
    }
    if (!perm_queue(r))
        return;
    if (r->cmd->check != NULL && !r->cmd->check(r))
        return;
    if (r->cmd->flags & CMD_QUEUE) {
        size_t qlen;
        const char *qname = request_string(r->root, "queue", &qlen);
        /* A read does not put a queue in use (engine.h): reads of names
         * that do not exist leave nothing behind. */
        r->q = engine_queue(&s->eng, qname, qlen, !(r->cmd->flags & CMD_READ));
        if (r->q == NULL) {
            req_error(r, WIRE_ELIMIT, "too many queues");
            return;
        }
        if (!(r->cmd->flags & CMD_READ))
            r->q->nreq++; /* a forget running meanwhile keeps the queue (cmd_view.c) */
    }
    if (s->stopping && r->cmd->flags & CMD_WORK) {
        req_error(r, WIRE_EUNAVAILABLE, "the daemon is shutting down");
        return;
    }
    if (r->cmd->flags & CMD_BARRIER)
        c->barrier = r; /* cleared by its reply, maybe within run */
    c->running = r;     /* cleared if r is freed within run */
    r->cmd->run(r);
    /* Still waiting for its reply: count what it keeps now that its
     * handler has run (an enqueue gave its payload to the store, an
     * enqueue_many made its list of results). */
    if (c->running == r) {
        c->running = NULL;
        if (!r->done)
            req_count(r, sizeof(*r) + json_since(before));
    }
}
