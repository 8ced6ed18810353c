/* client_tls: see client_tls.h. */
#include "client_tls.h"

#include <stdio.h>
#include <string.h>

#include "client.h"
#include "log.h"
#include "server.h"
#include "tls.h"

/* One read's ciphertext. Each read callback feeds all of it to OpenSSL
 * before it returns, and the loop runs one callback at a time, so every
 * TLS connection can share it. */
static char scratch[64 * 1024];

int client_tls_load(struct server *s)
{
    const struct config *cfg = s->cfg;
    struct tls_ctx *x = NULL;
    char why[600], q[700];
    if (cfg->tls_cert != NULL) {
        struct tls_config tc = {.cert = cfg->tls_cert,
                                .key = cfg->tls_key,
                                .ca = cfg->tls_ca,
                                .verify_client = cfg->tls_verify_client};
        if (tls_ctx_new(&tc, &x, why, sizeof(why)) != 0) {
            log_event(LOG_ERROR,
                      s->tls != NULL ? "cannot load the TLS files; keeping the running certificate"
                                     : "cannot load the TLS files",
                      "error=%s", log_quote(why, q, sizeof(q)));
            return -EINVAL;
        }
        log_event(LOG_INFO, "TLS certificate loaded", "subject=%s serial=%s verify_client=%s",
                  log_quote(tls_ctx_subject(x), q, sizeof(q)), tls_ctx_serial(x),
                  cfg->tls_verify_client ? "true" : "false");
    }
    tls_ctx_free(s->tls);
    s->tls = x;
    return 0;
}

void client_tls_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct client *c = h->data;
    if (c->sniff) {
        /* A plain client's first bytes land where a plain read puts
         * them: nothing is copied if it is not TLS. */
        client_alloc_cb(h, suggested, buf);
        return;
    }
    *buf = uv_buf_init(scratch, sizeof(scratch));
}

/* The first bytes of c: TLS (returns true, they are fed to a new TLS
 * state) or plain (handed to the plain path, or refused by tls-only). */
static bool sniff(struct client *c, const uv_buf_t *buf, size_t n)
{
    struct server *s = c->srv;
    c->sniff = false;
    if ((unsigned char)buf->base[0] != 0x16) {
        if (s->cfg->tls_only) {
            static const char refused[] = "{\"ok\":false,\"error\":\"EAUTH\",\"message\":"
                                          "\"this listener takes TLS connections only\"}\n";
            log_event(LOG_INFO, "plain connection refused: tls-only", "client=%s", c->addr);
            client_send(c, refused, sizeof(refused) - 1);
            client_shutdown(c);
            return false;
        }
        client_go_plain(c, n);
        return false;
    }
    if (s->tls == NULL || (c->tls = tls_new(s->tls)) == NULL) {
        client_close(c, "out of memory");
        return false;
    }
    if (tls_feed(c->tls, buf->base, n) != 0) {
        client_close(c, "out of memory");
        return false;
    }
    return true;
}

/* The handshake has just finished: say so, with the client's certificate
 * subject when it showed one (mutual TLS). */
static void announce(struct client *c)
{
    char how[128], subj[512], q[600];
    c->tls_announced = true;
    const char *who = tls_peer_subject(c->tls, subj, sizeof(subj));
    tls_describe(c->tls, how, sizeof(how));
    if (who != NULL)
        log_event(LOG_INFO, "TLS connection", "client=%s tls=\"%s\" subject=%s", c->addr, how,
                  log_quote(who, q, sizeof(q)));
    else
        log_event(LOG_DEBUG, "TLS connection", "client=%s tls=\"%s\"", c->addr, how);
}

/* Decrypt everything fed so far into the frame reader (one read's worth,
 * as a plain read), then run the lines. */
static void pump(struct client *c)
{
    long n;
    for (;;) {
        char *room;
        size_t len;
        if (client_room(c, &room, &len) != 0) {
            client_close(c, "out of memory");
            return;
        }
        if ((n = tls_read(c->tls, room, len)) <= 0)
            break;
        frame_commit(&c->frame, (size_t)n);
    }
    if (!c->tls_announced && tls_established(c->tls))
        announce(c);
    if (tls_out_pending(c->tls) > 0)
        client_mark_dirty(c); /* handshake records, or an alert */
    if (n == -TLS_EFAIL) {
        char q[300];
        /* The alert OpenSSL made goes out, then the connection closes:
         * nothing it sent ran (a failed handshake has no lines). */
        log_event(LOG_WARN, "TLS connection refused", "client=%s error=%s", c->addr,
                  log_quote(tls_error(c->tls), q, sizeof(q)));
        client_input(c);
        client_shutdown(c);
        return;
    }
    client_input(c);
    if (n == -TLS_ECLOSED && !c->closing)
        client_read_end(c, UV_EOF);
}

void client_tls_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct client *c = st->data;
    if (nread <= 0) {
        client_give_back(c);
        if (nread < 0 && !c->closing)
            client_read_end(c, nread);
        return;
    }
    if (c->sniff) {
        if (sniff(c, buf, (size_t)nread))
            pump(c);
    } else if (tls_feed(c->tls, buf->base, (size_t)nread) != 0) {
        client_close(c, "out of memory");
    } else {
        pump(c);
    }
    /* Every path above that read into the lent buffer (the sniffed first
     * bytes, the decrypted records) has given it back, but a refused or
     * failed one may not have: nothing may keep it past this callback. */
    client_give_back(c);
}

static void tls_write_cb(uv_write_t *w, int status)
{
    client_write_done(w->data, status);
}

void client_tls_flush(struct client *c)
{
    if (c->closing || c->writing)
        return;
    if (c->out.len > 0) {
        /* Output before the handshake is done has nowhere to go (a TLS
         * client cannot read plaintext): it is dropped. */
        if (tls_established(c->tls) && tls_write(c->tls, c->out.data, c->out.len) != 0) {
            client_close(c, "TLS write failed");
            return;
        }
        outbuf_reset(&c->out);
        if (c->head == NULL && c->consumers == NULL)
            outbuf_deinit(&c->out); /* idle (client_write_done): none kept */
    }
    if (c->quit && c->head == NULL)
        tls_shutdown(c->tls); /* close_notify, once, after the last reply */
    /* One uv_buf_t holds at most 4 GiB: the rest goes at the next turn. */
    size_t n = tls_out_pending(c->tls);
    if (n > (size_t)1 << 30)
        n = (size_t)1 << 30;
    if (n == 0) {
        client_account(c);
        if (c->quit && c->head == NULL)
            client_close(c, "quit");
        return;
    }
    outbuf_reset(&c->wbuf);
    if (outbuf_reserve(&c->wbuf, n) != 0) {
        client_close(c, "out of memory");
        return;
    }
    c->wbuf.len = tls_take_out(c->tls, c->wbuf.data, n);
    client_account(c);
    uv_buf_t b = uv_buf_init(c->wbuf.data, (unsigned)c->wbuf.len);
    c->write_req.data = c;
    if (uv_write(&c->write_req, &c->h.stream, &b, 1, tls_write_cb) != 0) {
        outbuf_reset(&c->wbuf);
        client_close(c, "write failed");
        return;
    }
    c->writing = true;
    client_ref(c);
}

bool client_tls_overdue(struct client *c, uint64_t now)
{
    const struct config *cfg = c->srv->cfg;
    uint64_t limit = cfg->idle_timeout_ms != 0 ? cfg->idle_timeout_ms : cfg->auth_timeout_ms;
    if (c->closing || now - c->opened < limit)
        return false;
    log_event(LOG_INFO, "connection closed: no TLS handshake in time", "client=%s limit_ms=%llu",
              c->addr, (unsigned long long)limit);
    client_close(c, "no TLS handshake in time");
    return true;
}
