/* http: see http.h. */
#include "http.h"

#include <http_parser.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "addr.h"
#include "log.h"
#include "tls.h"

#define HTTP_CONNS_MAX  64
#define HTTP_HEAD_MAX   8192   /* request line and headers */
#define HTTP_TIMEOUT_MS 10000  /* to send the request */
#define HTTP_ANSWER_MS  120000 /* for the daemon to answer it, once it is in */
#define HTTP_FIELD_MAX  64     /* a header name we look for is shorter */

/* The listener. Freed once its handle and every connection has closed. */
struct http_server {
    uv_tcp_t tcp;
    http_request_cb *cb;
    void *priv;
    struct http_conn *conns;
    size_t nconns;
    /* HTTPS: where the current TLS context is (the server's, replaced at
     * each reload; a connection keeps the one it was accepted with), or
     * NULL for plain HTTP. */
    struct tls_ctx *const *tls;
    int handles; /* open handles: the listener's, and each connection's two */
    bool closing;
};

/* The headers a handler may read (enum http_header), as they are spelled
 * (compared without case). */
static const char *const header_names[HTTP_H__COUNT] = {
    [HTTP_H_HOST] = "Host",
    [HTTP_H_ORIGIN] = "Origin",
    [HTTP_H_AUTHORIZATION] = "Authorization",
    [HTTP_H_CONTENT_TYPE] = "Content-Type",
    [HTTP_H_SEC_FETCH_SITE] = "Sec-Fetch-Site",
    [HTTP_H_EMQ_REQUEST] = "X-Emq-Request",
};

/* One connection: its socket, a deadline, the parser, the request so far
 * (URL, the headers of header_names, the body up to HTTP_BODY_MAX). */
struct http_conn {
    struct http_conn *next, **pprev;
    struct http_server *srv;
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wreq;
    http_parser parser;
    char buf[4096]; /* the read buffer */
    char url[1024];
    size_t url_len, seen;
    size_t head_bytes;          /* of header names and values, against HTTP_HEAD_MAX */
    char field[HTTP_FIELD_MAX]; /* the header name being read */
    size_t field_len;
    int header;                   /* the header_names index of the value being read, or -1 */
    char *headers[HTTP_H__COUNT]; /* owned; NULL when absent */
    size_t header_len[HTTP_H__COUNT];
    char *body; /* owned */
    size_t body_len;
    char *out;
    struct tls *tls;  /* HTTPS only: the connection's TLS state */
    int refs;         /* the handles' (one for both) and the handler's */
    int open_handles; /* the socket and the timer, until their close callbacks */
    bool closing, answered, url_too_long, body_too_long, head_too_long, complete, in_value;
};

static void server_release(struct http_server *h)
{
    if (--h->handles == 0 && h->closing)
        free(h);
}

void http_conn_ref(struct http_conn *c)
{
    c->refs++;
}

void http_conn_unref(struct http_conn *c)
{
    if (--c->refs == 0) {
        for (size_t i = 0; i < HTTP_H__COUNT; i++)
            free(c->headers[i]);
        free(c->body);
        free(c->out);
        tls_free(c->tls);
        free(c);
    }
}

static void conn_closed_cb(uv_handle_t *hd)
{
    struct http_conn *c = hd->data;
    server_release(c->srv);
    if (--c->open_handles == 0)
        http_conn_unref(c);
}

static void conn_close(struct http_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    *c->pprev = c->next;
    if (c->next != NULL)
        c->next->pprev = c->pprev;
    c->srv->nconns--;
    uv_close((uv_handle_t *)&c->tcp, conn_closed_cb);
    uv_close((uv_handle_t *)&c->timer, conn_closed_cb);
}

static void write_cb(uv_write_t *w, int status)
{
    struct http_conn *c = w->data;
    (void)status;
    conn_close(c);
    http_conn_unref(c);
}

/* One write of TLS records (a handshake's, or the answer's). */
struct records {
    uv_write_t w;
    struct http_conn *c;
    bool close; /* the answer: the connection closes once it is written */
    char data[];
};

static void records_cb(uv_write_t *w, int status)
{
    struct records *r = w->data;
    struct http_conn *c = r->c;
    if (r->close || status < 0)
        conn_close(c);
    free(r);
    http_conn_unref(c);
}

/* Write the records TLS has made for c (if any); close says whether they
 * end the connection. */
static void send_records(struct http_conn *c, bool close)
{
    size_t n = tls_out_pending(c->tls);
    if (c->closing || (n == 0 && !close))
        return;
    if (n == 0) {
        conn_close(c);
        return;
    }
    struct records *r = malloc(sizeof(*r) + n);
    if (r == NULL) {
        conn_close(c);
        return;
    }
    r->c = c;
    r->close = close;
    r->w.data = r;
    uv_buf_t b = uv_buf_init(r->data, (unsigned)tls_take_out(c->tls, r->data, n));
    if (uv_write(&r->w, (uv_stream_t *)&c->tcp, &b, 1, records_cb) != 0) {
        free(r);
        conn_close(c);
        return;
    }
    http_conn_ref(c);
}

void http_respond_with(struct http_conn *c, int status, const char *content_type, const char *extra,
                       const char *body, size_t len)
{
    static const struct {
        int code;
        const char *text;
    } reasons[] = {{200, "OK"},
                   {400, "Bad Request"},
                   {401, "Unauthorized"},
                   {403, "Forbidden"},
                   {404, "Not Found"},
                   {405, "Method Not Allowed"},
                   {413, "Payload Too Large"},
                   {415, "Unsupported Media Type"},
                   {503, "Service Unavailable"}};
    const char *reason = "Error";
    char head[1024];

    if (c->closing || c->answered)
        return;
    c->answered = true;
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (reasons[i].code == status)
            reason = reasons[i].text;
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "%sConnection: close\r\n\r\n",
                     status, reason, content_type, len, extra != NULL ? extra : "");
    if (n < 0 || (size_t)n >= sizeof(head)) {
        conn_close(c);
        return;
    }
    c->out = malloc((size_t)n + len);
    if (c->out == NULL) {
        conn_close(c);
        return;
    }
    memcpy(c->out, head, (size_t)n);
    if (len > 0)
        memcpy(c->out + n, body, len);
    uv_read_stop((uv_stream_t *)&c->tcp);
    if (c->tls != NULL) {
        /* The answer, then close_notify, as records: the connection
         * closes once they are written. */
        if (tls_write(c->tls, c->out, (size_t)n + len) != 0) {
            conn_close(c);
            return;
        }
        tls_shutdown(c->tls);
        send_records(c, true);
        return;
    }
    uv_buf_t b = uv_buf_init(c->out, (unsigned)((size_t)n + len));
    c->wreq.data = c;
    if (uv_write(&c->wreq, (uv_stream_t *)&c->tcp, &b, 1, write_cb) != 0) {
        conn_close(c);
        return;
    }
    http_conn_ref(c);
}

void http_respond(struct http_conn *c, int status, const char *content_type, const char *body,
                  size_t len)
{
    http_respond_with(c, status, content_type, NULL, body, len);
}

const char *http_header(const struct http_conn *c, enum http_header h, size_t *len)
{
    if (len != NULL)
        *len = c->header_len[h];
    return c->headers[h];
}

const char *http_peer(const struct http_conn *c, char *buf, size_t cap)
{
    return addr_peer(&c->tcp, buf, cap);
}

const char *http_body(const struct http_conn *c, size_t *len)
{
    *len = c->body_len;
    return c->body != NULL ? c->body : "";
}

static void respond_text(struct http_conn *c, int status, const char *text)
{
    http_respond(c, status, "text/plain; charset=utf-8", text, strlen(text));
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    if (c->url_len + len >= sizeof(c->url)) {
        c->url_too_long = true;
        return 0;
    }
    memcpy(c->url + c->url_len, at, len);
    c->url_len += len;
    return 0;
}

/* Header names and values may come in pieces (split across reads): a
 * name is gathered in field (names longer than any we look for are not
 * ours), a value straight into its slot, up to HTTP_HEAD_MAX. Only the
 * first occurrence of a header counts. */
static int on_header_field(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    if ((c->head_bytes += len) > HTTP_HEAD_MAX)
        c->head_too_long = true;
    if (c->in_value) {
        c->in_value = false;
        c->field_len = 0;
    }
    if (c->field_len + len < sizeof(c->field)) {
        memcpy(c->field + c->field_len, at, len);
        c->field_len += len;
    } else {
        c->field_len = sizeof(c->field); /* too long to be one we read */
    }
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    if ((c->head_bytes += len) > HTTP_HEAD_MAX)
        c->head_too_long = true;
    if (!c->in_value) {
        c->in_value = true;
        c->header = -1;
        for (int i = 0; i < HTTP_H__COUNT && c->field_len < sizeof(c->field); i++)
            if (strlen(header_names[i]) == c->field_len &&
                strncasecmp(header_names[i], c->field, c->field_len) == 0 && c->headers[i] == NULL)
                c->header = i;
        if (c->header >= 0 && (c->headers[c->header] = calloc(1, 1)) == NULL)
            return -1;
    }
    if (c->header < 0)
        return 0;
    size_t have = c->header_len[c->header];
    if (c->head_too_long)
        return 0;
    char *v = realloc(c->headers[c->header], have + len + 1);
    if (v == NULL)
        return -1;
    memcpy(v + have, at, len);
    v[have + len] = '\0';
    c->headers[c->header] = v;
    c->header_len[c->header] = have + len;
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    struct http_conn *c = p->data;
    if (c->body_too_long || c->body_len + len > HTTP_BODY_MAX) {
        c->body_too_long = true;
        return 0;
    }
    char *b = realloc(c->body, c->body_len + len + 1);
    if (b == NULL)
        return -1;
    memcpy(b + c->body_len, at, len);
    b[c->body_len + len] = '\0';
    c->body = b;
    c->body_len += len;
    return 0;
}

static void timeout_cb(uv_timer_t *t);

static int on_message_complete(http_parser *p)
{
    struct http_conn *c = p->data;
    if (c->complete)
        return 0; /* a request pipelined behind the first: ignored */
    if (c->url_too_long || c->head_too_long || c->body_too_long) {
        c->complete = true;
        respond_text(c, 413, c->body_too_long ? "body too large\n" : "request too large\n");
        return 0;
    }
    c->url[c->url_len] = '\0';
    c->url[strcspn(c->url, "?#")] = '\0';
    c->complete = true; /* one request per connection: later bytes are ignored */
    /* The client's deadline is met; the daemon's own work has deadlines
     * of its own (redis-timeout-ms a call), and an /api request may wait
     * its turn behind others: this only bounds a connection whose answer
     * never comes. */
    uv_timer_start(&c->timer, timeout_cb, HTTP_ANSWER_MS, 0);
    http_conn_ref(c); /* the handler may close it */
    c->srv->cb(c->srv->priv, c, http_method_str((enum http_method)p->method), c->url);
    http_conn_unref(c);
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void alloc_cb(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    struct http_conn *c = hd->data;
    (void)suggested;
    *buf = uv_buf_init(c->buf, sizeof(c->buf));
}

/* Parse n bytes of the request; false once it is answered or closed. */
static bool parse(struct http_conn *c, const char *data, size_t n)
{
    c->seen += n;
    size_t used = http_parser_execute(&c->parser, &settings, data, n);
    if (c->complete || c->closing)
        return false;
    if (HTTP_PARSER_ERRNO(&c->parser) != HPE_OK || used != n) {
        respond_text(c, 400, "bad request\n");
        return false;
    }
    return true;
}

/* HTTPS: feed what was read to TLS, parse the plaintext it yields, and
 * write the records it makes (the handshake's). A failed handshake is
 * logged and closed once its alert is written. */
static void read_tls(struct http_conn *c, const char *data, size_t n)
{
    char plain[4096];
    long got = 0;
    if (tls_feed(c->tls, data, n) != 0) {
        conn_close(c);
        return;
    }
    while (!c->complete && !c->closing && (got = tls_read(c->tls, plain, sizeof(plain))) > 0)
        if (!parse(c, plain, (size_t)got))
            return;
    if (c->complete || c->closing)
        return;
    if (got == -TLS_EFAIL) {
        char q[300];
        log_event(LOG_INFO, "HTTPS connection refused", "error=%s",
                  log_quote(tls_error(c->tls), q, sizeof(q)));
        send_records(c, true);
        return;
    }
    if (got == -TLS_ECLOSED) {
        conn_close(c);
        return;
    }
    send_records(c, false);
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = st->data;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (c->complete || nread == 0)
        return;
    if (c->tls != NULL) {
        read_tls(c, buf->base, (size_t)nread);
        if (c->complete || c->closing)
            return;
    } else if (!parse(c, buf->base, (size_t)nread)) {
        return;
    }
    /* A body over its cap is refused as soon as it passes it; the head
     * has its own cap, counted over every byte that is not body. */
    if (c->body_too_long)
        respond_text(c, 413, "body too large\n");
    else if (c->seen - c->body_len > HTTP_HEAD_MAX)
        respond_text(c, 413, "request too large\n");
}

static void timeout_cb(uv_timer_t *t)
{
    conn_close(t->data);
}

/* At the connection cap, make room by closing the oldest connection that
 * has not finished sending its request: a scraper sends its request at
 * once, so only a slow or idle client (slowloris) is ever dropped, and
 * holding 64 half-sent requests no longer locks scrapes out. The list is
 * newest first, so the last match is the oldest. */
static bool evict_one(struct http_server *h)
{
    struct http_conn *oldest = NULL;
    for (struct http_conn *c = h->conns; c != NULL; c = c->next)
        if (!c->complete && !c->closing)
            oldest = c;
    if (oldest == NULL)
        return false;
    conn_close(oldest);
    return true;
}

static void accept_cb(uv_stream_t *listener, int status)
{
    struct http_server *h = listener->data;
    if (status < 0 || h->closing)
        return;
    struct http_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return;
    c->srv = h;
    c->refs = 1;
    c->open_handles = 2;
    uv_tcp_init(listener->loop, &c->tcp);
    uv_timer_init(listener->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    h->handles += 2;
    c->next = h->conns;
    c->pprev = &h->conns;
    if (h->conns != NULL)
        h->conns->pprev = &c->next;
    h->conns = c;
    h->nconns++;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    if (h->nconns > HTTP_CONNS_MAX && !evict_one(h)) {
        conn_close(c);
        return;
    }
    if (h->tls != NULL && (*h->tls == NULL || (c->tls = tls_new(*h->tls)) == NULL)) {
        conn_close(c);
        return;
    }
    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    uv_timer_start(&c->timer, timeout_cb, HTTP_TIMEOUT_MS, 0);
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

int http_server_new(uv_loop_t *loop, const struct sockaddr *sa, struct tls_ctx *const *tls,
                    http_request_cb *cb, void *priv, struct http_server **out)
{
    struct http_server *h = calloc(1, sizeof(*h));
    if (h == NULL)
        return UV_ENOMEM;
    h->tls = tls;
    h->cb = cb;
    h->priv = priv;
    uv_tcp_init(loop, &h->tcp);
    h->tcp.data = h;
    h->handles = 1;
    int rc = uv_tcp_bind(&h->tcp, sa, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&h->tcp, 64, accept_cb);
    if (rc != 0) {
        http_server_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

static void listener_closed_cb(uv_handle_t *hd)
{
    server_release(hd->data);
}

struct http_server *http_server_free(struct http_server *h)
{
    if (h == NULL)
        return NULL;
    h->closing = true;
    while (h->conns != NULL)
        conn_close(h->conns);
    uv_close((uv_handle_t *)&h->tcp, listener_closed_cb);
    return NULL;
}
