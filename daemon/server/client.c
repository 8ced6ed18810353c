/* client: one connection's I/O (client.h): reading lines, pausing and
 * resuming reads, batching writes, closing. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#include "client_tls.h"
#include "consumer.h"
#include "lease.h"
#include "addr.h"
#include "log.h"
#include "req.h"
#include "server.h"
#include "spin.h"
#include "tls.h"

static void on_close_cb(uv_handle_t *h);
static void read_start(struct client *c);
static bool run_lines(struct client *c);

void client_ref(struct client *c)
{
    c->refs++;
}

static void client_free(struct client *c)
{
    c->tls = tls_free(c->tls);
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
static void resume_cb(uv_idle_t *h)
{
    struct server *s = h->data;
    uv_idle_stop(h);
    client_resume_all(s);
}

void client_maybe_resume(struct client *c)
{
    struct server *s = c->srv;
    if (c->sink != NULL)
        return; /* nothing to read: its one line has run */
    if (c->reading || c->closing || c->quit || c->resume_queued || c->barrier != NULL ||
        c->inflight > s->cfg->max_inflight / 2)
        return;
    client_ref(c); /* dropped by client_resume_all */
    c->resume_queued = true;
    c->resume_next = s->resumed;
    s->resumed = c;
    uv_idle_start(&s->resume, resume_cb);
}

/* Does nothing: while it is active, libuv's poll does not block, so the
 * check phase (server.c:flush_cb, which stops it) comes at once. */
static void kick_cb(uv_idle_t *h)
{
    (void)h;
}

/* c has output (or a close) for this turn's flush. A client marked from
 * outside the poll phase — a write callback, which libuv runs in the next
 * turn's pending phase, before poll — would otherwise wait for poll to
 * return: until some other event or timer, up to the 1 s sweep (a quit's
 * close waited ~0.9 s). */
void client_mark_dirty(struct client *c)
{
    if (c->srv->dirty == NULL)
        uv_idle_start(&c->srv->kick, kick_cb);
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
    if (outbuf_append(&c->out, data, len) != 0) {
        /* A reply or push lost here would leave the client waiting for it
         * (and every reply after it): close instead. */
        log_event(LOG_WARN, "out of memory for output: disconnecting", "client=%s", c->addr);
        client_close(c, "out of memory");
        return;
    }
    client_account(c);
    client_mark_dirty(c);
}

void client_push_job(struct client *c, const struct reply_job *j)
{
    if (c->closing)
        return;
    /* Built in place, as client_send would copy it there: no line buffer
     * of its own to allocate, fill, copy and free for every job. On
     * failure the builder leaves out as it was. */
    size_t before = c->out.len, pending = c->out.len + c->wbuf.len;
    int rc = reply_push_job(&c->out, j);
    if (rc != 0) {
        /* Out of memory: the takers sent only sendable jobs
         * (queue_job_sendable), so the builder has nothing else to refuse. */
        log_event(LOG_WARN, "cannot build a job push: disconnecting", "client=%s error=%s", c->addr,
                  strerror(-rc));
        client_close(c, rc == -ENOMEM ? "out of memory" : "job push refused");
        return;
    }
    /* client_send's cap, on the line just built. */
    if (pending > 0 && pending + (c->out.len - before) > c->srv->cfg->max_output) {
        c->out.len = c->out.line = before;
        log_event(LOG_WARN, "output buffer full (not reading?): disconnecting",
                  "client=%s max_output=%zu", c->addr, c->srv->cfg->max_output);
        client_close(c, "output buffer full");
        return;
    }
    client_account(c);
    client_mark_dirty(c);
}

void client_account(struct client *c)
{
    struct budget *b = &c->srv->bud;
    if (c->closing)
        return; /* client_close took what it held out of the sums */
    size_t in = frame_pending(&c->frame), partial = frame_partial(&c->frame),
           out = c->queued_bytes + c->out.len + c->wbuf.len;
    if (c->tls != NULL)
        in += tls_buffered(c->tls); /* ciphertext not yet decrypted, records not yet taken */
    b->input = b->input - c->counted_in + in;
    b->partial = b->partial - c->counted_partial + partial;
    b->output = b->output - c->counted_out + out;
    c->counted_in = in;
    c->counted_partial = partial;
    c->counted_out = out;
}

size_t client_buffered(const struct client *c)
{
    return c->counted_in + c->req_bytes + c->counted_out;
}

/* c would read but the budget holds it (budget.h), or no longer. */
static void hold(struct client *c)
{
    if (c->read_held)
        return;
    c->read_held = true;
    c->srv->bud.held++;
    c->srv->bud.holds++;
}

static void unhold(struct client *c)
{
    if (!c->read_held)
        return;
    c->read_held = false;
    c->srv->bud.held--;
}

/* Every connection reads into this one buffer, lent to its frame reader
 * (frame_space_lent) for the length of one read callback: the loop runs
 * one callback at a time, and each gives it back (client_give_back)
 * before it returns. Complete lines run where they landed; only a partial
 * line is copied out, so an idle connection holds no input buffer. */
static char lent_in[64 * 1024];

int client_room(struct client *c, char **room, size_t *room_len)
{
    return frame_space_lent(&c->frame, lent_in, sizeof(lent_in), room, room_len);
}

void client_give_back(struct client *c)
{
    if (frame_return(&c->frame) != 0) {
        /* Its unread bytes are gone: it cannot go on in order. */
        log_event(LOG_WARN, "out of memory for input: disconnecting", "client=%s", c->addr);
        client_close(c, "out of memory");
    }
}

void client_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct client *c = h->data;
    char *room;
    size_t room_len;
    (void)suggested;
    if (client_room(c, &room, &room_len) != 0) {
        buf->base = NULL;
        buf->len = 0;
        return;
    }
    buf->base = room;
    buf->len = room_len;
}

/* Stop reading c (the lines already read stay in its frame buffer). It
 * waits for its own reason now (quit, requests in flight), not for the
 * budget. */
static void read_pause(struct client *c)
{
    if (c->reading)
        uv_read_stop(&c->h.stream);
    c->reading = false;
    unhold(c);
}

void client_read_end(struct client *c, ssize_t nread)
{
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
    client_close(c, uv_strerror((int)nread));
}

void client_input(struct client *c)
{
    c->lines_left = !run_lines(c);
    client_give_back(c); /* lines left (reads paused) move to its own buffer */
    client_account(c);
    /* Past max-buffered every connection stops reading here, this one
     * included: the budget is passed by at most this one read. */
    budget_check(c->srv);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct client *c = st->data;
    (void)buf;
    if (nread > 0) {
        spin_touch(); /* a request: its reply and push are near (util/spin.h) */
        frame_commit(&c->frame, (size_t)nread);
        client_input(c);
        return;
    }
    client_give_back(c); /* nothing read: the lent buffer holds only what it held */
    if (nread < 0 && !c->closing)
        client_read_end(c, nread);
}

static void read_start(struct client *c)
{
    if (c->srv->bud.paused) {
        hold(c); /* over max-buffered: it reads when the budget lets it */
        return;
    }
    /* A connection that may still turn out to be TLS, or is, reads
     * through client_tls.c; a plain one never does. */
    bool tls = c->sniff || c->tls != NULL;
    if (uv_read_start(&c->h.stream, tls ? client_tls_alloc_cb : client_alloc_cb,
                      tls ? client_tls_read_cb : read_cb) == 0)
        c->reading = true;
}

void client_go_plain(struct client *c, size_t n)
{
    /* Its first read came through the TLS callbacks, into the frame
     * reader's room as a plain read's would: take it, and read the plain
     * way from now on. */
    if (c->reading)
        uv_read_stop(&c->h.stream);
    c->reading = false;
    read_start(c);
    frame_commit(&c->frame, n);
    client_input(c);
}

void client_hold_reads(struct client *c)
{
    if (!c->reading)
        return;
    uv_read_stop(&c->h.stream);
    c->reading = false;
    hold(c);
}

void client_release_reads(struct client *c)
{
    if (!c->read_held)
        return;
    unhold(c);
    if (!c->closing && !c->quit && !c->eof)
        read_start(c);
}

/* Run the lines c has buffered (a half-closed peer whose last lines ran
 * is shut down), and count what that changed. */
static void run_buffered(struct client *c)
{
    c->lines_left = !run_lines(c);
    if (c->eof && !c->lines_left && !c->closing)
        client_shutdown(c);
    client_account(c);
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
            run_buffered(c);
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
        if (rc == FRAME_ETOOBIG || rc == FRAME_EREFUSED) {
            req_unread(c, rc == FRAME_ETOOBIG);
            continue;
        }
        req_run_line(c, line, len);
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

void client_write_done(struct client *c, int status)
{
    c->writing = false;
    outbuf_reset(&c->wbuf);
    if (c->out.len == 0 && c->head == NULL && c->consumers == NULL) {
        /* Nothing more to write, no request to answer, no stream or
         * parked claim to push to: nothing will come for it until it
         * sends a request, so an idle connection keeps no output buffer.
         * A busy one (a streaming worker, a pipelining producer) keeps
         * both, reused from write to write. */
        outbuf_deinit(&c->wbuf);
        outbuf_deinit(&c->out);
    }
    client_account(c);
    if (status < 0 && !c->closing)
        client_close(c, uv_strerror(status));
    else if (!c->closing &&
             (c->out.len > 0 || c->quit || (c->tls != NULL && tls_out_pending(c->tls) > 0)))
        client_mark_dirty(c);
    client_unref(c);
}

static void write_cb(uv_write_t *w, int status)
{
    client_write_done(w->data, status);
}

static void flush_one(struct client *c)
{
    if (c->tls != NULL) {
        client_tls_flush(c);
        return;
    }
    if (c->closing || c->writing)
        return;
    if (c->sink != NULL) {
        if (c->out.len > 0) {
            /* Taken out of out first: the sink may close the client. */
            struct outbuf o = c->out;
            outbuf_init(&c->out);
            client_account(c);
            c->sink(c->sink_priv, o.data, o.len);
            outbuf_deinit(&o);
        }
        return;
    }
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
        uv_tcp_nodelay(&c->h.tcp, 1);
        addr_peer(&c->h.tcp, c->addr, sizeof(c->addr));
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
    c->last_active = c->opened = uv_now(s->loop);
    /* Opened while no token is set: it stays in if a reload sets one. */
    c->authed = !server_auth_required(s);
    c->role = c->authed ? TOKENS_ADMIN : 0;
    if (!c->authed) {
        /* Before hello a connection can do nothing but hello, ping and
         * quit: many of them must not hold every slot (max-clients). */
        if (s->nunauthed >= s->cfg->max_unauthed) {
            static const char full[] = "{\"ok\":false,\"error\":\"ELIMIT\",\"message\":"
                                       "\"too many connections waiting to say hello\"}\n";
            log_event(LOG_WARN, "connection refused: too many connections before hello",
                      "client=%s max_unauthed=%zu", c->addr, s->cfg->max_unauthed);
            client_send(c, full, sizeof(full) - 1);
            c->quit = true;
            return 0;
        }
        c->unauthed = true;
        s->nunauthed++;
    }
    log_event(LOG_DEBUG, "connection opened", "client=%s", c->addr);
    /* With a certificate configured, its first byte says TLS or plain. */
    c->sniff = s->tls != NULL && !c->unix_socket;
    read_start(c);
    return 0;
}

struct client *client_new_detached(struct server *s, const char *addr, enum tokens_role role,
                                   const struct token *tok, client_sink_cb *sink, void *priv)
{
    struct client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->srv = s;
    c->refs = 1; /* the creator's, dropped by client_close */
    c->sink = sink;
    c->sink_priv = priv;
    c->authed = true;
    c->role = role;
    c->tok = tok;
    frame_init(&c->frame, s->cfg->max_line);
    outbuf_init(&c->out);
    outbuf_init(&c->wbuf);
    map_init(&c->held);
    snprintf(c->addr, sizeof(c->addr), "%s", addr);
    c->last_active = c->opened = uv_now(s->loop);
    return c;
}

void client_set_authed(struct client *c)
{
    c->authed = true;
    if (c->unauthed) {
        c->unauthed = false;
        c->srv->nunauthed--;
    }
}

static void on_close_cb(uv_handle_t *h)
{
    client_unref(h->data);
}

void client_close(struct client *c, const char *why)
{
    struct server *s = c->srv;
    if (c->closing)
        return;
    c->closing = true;
    c->barrier = NULL; /* it finishes into the void, like every request */
    /* What it held leaves the budget now (its requests finish into the
     * void, its buffers go with it). */
    s->bud.input -= c->counted_in;
    s->bud.partial -= c->counted_partial;
    s->bud.output -= c->counted_out;
    s->bud.requests -= c->req_bytes;
    c->counted_in = c->counted_partial = c->counted_out = c->req_bytes = 0;
    unhold(c);
    if (log_threshold >= LOG_DEBUG) {
        char q[200];
        log_event(LOG_DEBUG, "connection closed", "client=%s reason=%s", c->addr,
                  log_quote(why, q, sizeof(q)));
    }
    if (c->reading)
        uv_read_stop(&c->h.stream);
    c->reading = false;

    lease_release_all(c);
    req_close_all(c);
    consumer_close_all(c); /* after req_close_all: a parked claim's request is unlinked */
    if (c->sink != NULL) {
        client_unref(c); /* no handle to close, in no list */
        return;
    }

    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->clients = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    s->nclients--;
    if (c->unauthed) {
        c->unauthed = false;
        s->nunauthed--;
    }
    uv_close(&c->h.handle, on_close_cb);
}

void client_shutdown(struct client *c)
{
    if (c->closing)
        return;
    read_pause(c);
    c->quit = true;
    consumer_stop_all(c);
    if (!c->closing)
        client_mark_dirty(c);
}

size_t client_refuse_line(struct client *c)
{
    size_t n = frame_refuse(&c->frame);
    if (n == 0)
        return 0;
    /* Its answer takes its place once the lines before it have run: now,
     * unless they wait for a reason of their own (requests in flight, a
     * barrier: they run when it ends), or nothing after quit runs. */
    if (!c->lines_left && !c->quit && !c->closing)
        run_buffered(c);
    else
        client_account(c);
    return n;
}

/* Idle: no request for idle_timeout_ms, none unanswered, no lease held and
 * no parked claim or stream. A streaming worker waiting for work is never
 * idle: it waits legitimately, and the push it waits for is the daemon's
 * to send. */
void client_idle_check(struct client *c, uint64_t now)
{
    if ((c->sniff || (c->tls != NULL && !tls_established(c->tls))) && client_tls_overdue(c, now))
        return;
    /* A connection that has not said hello gets auth-timeout-ms to do it,
     * pings or not: it may hold no lease, so nothing is lost. */
    if (c->unauthed && server_auth_required(c->srv) && !c->closing &&
        now - c->opened >= c->srv->cfg->auth_timeout_ms) {
        log_event(LOG_INFO, "connection closed: no hello within auth-timeout-ms",
                  "client=%s auth_timeout_ms=%llu", c->addr,
                  (unsigned long long)c->srv->cfg->auth_timeout_ms);
        client_close(c, "no hello in time");
        return;
    }
    uint64_t limit = c->srv->cfg->idle_timeout_ms;
    if (limit == 0 || c->closing || c->quit || c->head != NULL || c->held.count > 0 ||
        c->consumers != NULL || now - c->last_active < limit)
        return;
    log_event(LOG_DEBUG, "idle connection closed", "client=%s idle_ms=%llu", c->addr,
              (unsigned long long)(now - c->last_active));
    client_close(c, "idle timeout");
}
