/* server: listeners, the queue registry, the end-of-turn flush, and the
 * orderly stop. */
#include "server.h"

#include "client.h"
#include "cmd.h"
#include "lease.h"
#include "queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addr.h"
#include "admin.h"
#include "log.h"
#include "tls.h"

static void flush_cb(uv_check_t *h)
{
    struct server *s = h->data;
    uv_idle_stop(&s->kick); /* the flush is here (client.c:client_mark_dirty) */
    /* Completions first (their replies come later); then the budget
     * (which may pause or resume reads, and answer refused lines); then
     * every reply and push of this turn leaves in one write per
     * connection. */
    engine_tick(&s->eng);
    budget_turn(s);
    client_flush_all(s);
}

static void known_queues_cb(void *priv, const struct store_status *st, size_t n,
                            const struct store_text *names);

static void sweep_cb(uv_timer_t *t)
{
    struct server *s = t->data;
    uint64_t now = uv_now(s->loop);
    struct client *next;
    for (struct client *c = s->clients; c != NULL; c = next) {
        next = c->next; /* the idle check may unlink c */
        if (c->held.count > 0)
            lease_sweep(c, now);
        client_idle_check(c, now);
    }
    budget_sweep(s);
    if (now >= s->history_next) {
        s->history_next = now + QUEUE_HISTORY_MS;
        cmd_throughput_sample(s);
    }
    backoff_sweep(&s->backoff, now);
    if (s->registry_unread && !s->stopping) {
        s->registry_unread = false; /* set again if this read fails too */
        store_queues_list(s->pool, known_queues_cb, s);
    }
}

/* Every queue any daemon has used is named in emq:queues, so a daemon
 * that starts (or restarts) runs the upkeep of all of them, not only of
 * those its own clients name. A read that fails (a Redis restarted with
 * data answers LOADING until it is in memory, though it is connected) is
 * made again by the next sweep, until one succeeds: else the leases and
 * delayed jobs of a queue no client names would wait for the next
 * reconnection. */
static void known_queues_cb(void *priv, const struct store_status *st, size_t n,
                            const struct store_text *names)
{
    struct server *s = priv;
    if (st->code != 0) {
        char m[300];
        if (!s->registry_warned)
            log_event(LOG_WARN,
                      "backend connected, but its queue registry could not be read: "
                      "reading it again every second",
                      "redis=%s queues=%zu error=%s", pool_where(s->pool), s->eng.queues.count,
                      log_quote(st->message, m, sizeof(m)));
        s->registry_unread = s->registry_warned = true;
        return;
    }
    s->registry_unread = s->registry_warned = false;
    for (size_t i = 0; i < n; i++)
        engine_queue(&s->eng, names[i].str, names[i].len, true);
    /* Logged once the registry is read, so the count is the backend's. */
    log_event(LOG_INFO, "backend connected", "redis=%s queues=%zu", pool_where(s->pool),
              s->eng.queues.count);
}

static void pool_state_cb(void *priv, bool up)
{
    struct server *s = priv;
    if (!up) {
        char q[300];
        log_event(LOG_WARN, "backend unreachable: requests answer EUNAVAILABLE until it is back",
                  "redis=%s error=%s", pool_where(s->pool),
                  log_quote(pool_last_error(s->pool), q, sizeof(q)));
        return;
    }
    store_queues_list(s->pool, known_queues_cb, s);
    /* Clients are let in once the backend first answers, so a request
     * right after start-up does not meet an unconnected pool. */
    if (!s->listening) {
        s->listening = true;
        if (server_listen(s) != 0) {
            s->exit_code = 1;
            server_stop(s);
            return;
        }
        /* The rest of start-up (the metrics endpoint) runs first, so that
         * "ready" is not logged by a daemon about to exit. */
        if (s->ready != NULL && s->ready(s) != 0)
            return;
        log_event(LOG_INFO, "ready", "version=%s", EMQ_VERSION);
    }
    /* Streams and parked claims resume by themselves. */
    engine_pump_all(&s->eng);
}

int server_init(struct server *s, uv_loop_t *loop, const struct config *cfg)
{
    memset(s, 0, sizeof(*s));
    s->loop = loop;
    s->cfg = cfg;
    engine_init(&s->eng, loop, cfg);
    budget_init(&s->bud);
    backoff_init(&s->backoff);
    mint_init(&s->mint);
    mint_rand_init(&s->rand);
    uv_check_init(loop, &s->flush);
    s->flush.data = s;
    uv_check_start(&s->flush, flush_cb);
    uv_unref((uv_handle_t *)&s->flush);
    uv_idle_init(loop, &s->resume);
    s->resume.data = s;
    uv_idle_init(loop, &s->kick);
    uv_unref((uv_handle_t *)&s->kick); /* it never keeps the loop alive by itself */
    uv_timer_init(loop, &s->sweep);
    s->sweep.data = s;
    uv_timer_start(&s->sweep, sweep_cb, 1000, 1000);
    uv_unref((uv_handle_t *)&s->sweep);
    return 0;
}

bool server_auth_required(const struct server *s)
{
    return s->cfg->token != NULL || s->tokens != NULL;
}

/* Attach the pool (made by main from the configured or embedded backend). */
void server_attach_pool(struct server *s, struct pool *p)
{
    s->pool = p;
    engine_attach_pool(&s->eng, p);
    pool_on_state(p, pool_state_cb, s);
}

static void accept_cb(uv_stream_t *listener, int status)
{
    struct server *s = listener->data;
    if (status < 0) {
        log_event(LOG_WARN, "accept failed", "error=%s", uv_err_name(status));
        return;
    }
    if (s->stopping)
        return;
    int rc = client_accept(s, listener);
    if (rc < 0)
        log_event(LOG_WARN, "accept failed", "error=%s", uv_err_name(rc));
}

static int listen_tcp(struct server *s, const char *spec)
{
    struct sockaddr_storage sa;
    if (addr_parse(spec, &sa, NULL, 0) != 0) /* checked when the settings were read */
        return UV_EINVAL;
    uv_tcp_init(s->loop, &s->tcp);
    s->tcp.data = s;
    s->tcp_open = true;
    int rc = uv_tcp_bind(&s->tcp, (struct sockaddr *)&sa, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->tcp, 1024, accept_cb);
    return rc;
}

int server_listen(struct server *s)
{
    int rc;
    if (s->cfg->listen != NULL) {
        if ((rc = listen_tcp(s, s->cfg->listen)) != 0) {
            log_event(LOG_ERROR, "cannot listen", "listen=%s error=%s", s->cfg->listen,
                      uv_err_name(rc));
            return rc;
        }
        log_event(LOG_INFO, "listening", "listen=%s", s->cfg->listen);
    }
    if (s->cfg->unix_path != NULL) {
        unlink(s->cfg->unix_path);
        uv_pipe_init(s->loop, &s->unix_listener, 0);
        s->unix_listener.data = s;
        s->unix_open = true;
        rc = uv_pipe_bind(&s->unix_listener, s->cfg->unix_path);
        if (rc == 0)
            rc = uv_listen((uv_stream_t *)&s->unix_listener, 1024, accept_cb);
        if (rc != 0) {
            log_event(LOG_ERROR, "cannot listen", "unix=%s error=%s", s->cfg->unix_path,
                      uv_err_name(rc));
            return rc;
        }
        log_event(LOG_INFO, "listening", "unix=%s", s->cfg->unix_path);
    }
    return 0;
}

static void stopped_cb(void *priv)
{
    struct server *s = priv;
    engine_deinit(&s->eng);
    uv_close((uv_handle_t *)&s->flush, NULL);
    uv_close((uv_handle_t *)&s->sweep, NULL);
    client_resume_all(s); /* drops the references of any still queued */
    uv_close((uv_handle_t *)&s->resume, NULL);
    uv_close((uv_handle_t *)&s->kick, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    s->tls = tls_ctx_free(s->tls); /* connections still open keep their own references */
    if (s->stop_done != NULL)
        s->stop_done(s);
}

/* Wait for the last releases and replies to reach Redis before closing
 * the pool (bounded: the pool's own deadline fails anything stuck). */
static void drain_timer_cb(uv_timer_t *t)
{
    struct server *s = t->data;
    struct pool_stats st;
    pool_stats(s->pool, &st);
    if ((st.inflight > 0 || s->clients != NULL) && ++s->drain_ticks < 500)
        return;
    while (s->clients != NULL)
        client_close(s->clients, "daemon stopped");
    uv_timer_stop(t);
    uv_close((uv_handle_t *)t, NULL);
    engine_flush(&s->eng);
    client_flush_all(s);
    pool_close(s->pool, stopped_cb, s);
}

void server_stop(struct server *s)
{
    if (s->stopping)
        return;
    s->stopping = true;
    log_event(LOG_INFO, "stopping: no new connections or work; releasing leases", "clients=%zu",
              s->nclients);
    if (s->tcp_open)
        uv_close((uv_handle_t *)&s->tcp, NULL);
    if (s->unix_open) {
        uv_close((uv_handle_t *)&s->unix_listener, NULL);
        unlink(s->cfg->unix_path);
    }
    engine_stop(&s->eng);
    /* Each client gets the replies it is owed, then closes (its leases go
     * back to their lanes). */
    for (struct client *c = s->clients; c != NULL; c = c->next)
        client_shutdown(c);
    uv_timer_init(s->loop, &s->drain_timer);
    s->drain_timer.data = s;
    uv_timer_start(&s->drain_timer, drain_timer_cb, 10, 10);
}
