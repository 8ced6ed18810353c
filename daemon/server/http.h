/* http: a minimal HTTP/1.1 server on the daemon's loop, for /metrics,
 * the dashboard and its /api (metrics.c routes them). Requests are parsed
 * by libhttp-parser; one request per connection, the answer closes it.
 * Bounded: 64 connections (at the cap the oldest one still sending its
 * request is dropped), 8 KiB of request line and headers, 64 KiB of
 * body, 10 s to send it all, then 120 s for the answer. */
#ifndef EMQ_HTTP_H
#define EMQ_HTTP_H

#include <stddef.h>
#include <uv.h>

struct http_server;
struct http_conn;
struct tls_ctx;

/* The most body a request may carry (a larger one is answered 413). */
#define HTTP_BODY_MAX 65536

/* The request headers a handler can read (http_header). */
enum http_header {
    HTTP_H_HOST,
    HTTP_H_ORIGIN,
    HTTP_H_AUTHORIZATION,
    HTTP_H_CONTENT_TYPE,
    HTTP_H_SEC_FETCH_SITE,
    HTTP_H_EMQ_REQUEST,
    HTTP_H__COUNT
};

/* A complete request arrived: answer it now or later with http_respond
 * (holding a reference with http_conn_ref meanwhile). path is the URL
 * without its query; both strings live only during the call. */
typedef void http_request_cb(void *priv, struct http_conn *c, const char *method, const char *path);

/* Listen on sa: HTTPS when tls is not NULL (each connection is accepted
 * with the context *tls holds then, so a reload that replaces it serves
 * new connections; a connection arriving while it is NULL is closed),
 * plain HTTP otherwise. 0 or a negative libuv error. */
int http_server_new(uv_loop_t *loop, const struct sockaddr *sa, struct tls_ctx *const *tls,
                    http_request_cb *cb, void *priv, struct http_server **out);

/* Stop listening and close every connection (the memory goes in the close
 * callbacks). Returns NULL. */
struct http_server *http_server_free(struct http_server *h);

/* Send the answer (body copied) and close. A no-op if the connection has
 * closed meanwhile. */
void http_respond(struct http_conn *c, int status, const char *content_type, const char *body,
                  size_t len);

/* http_respond with extra header lines (each ending "\r\n"; may be NULL). */
void http_respond_with(struct http_conn *c, int status, const char *content_type, const char *extra,
                       const char *body, size_t len);

/* The value of header h (NUL-terminated, its length in *len if len is not
 * NULL), or NULL when the request did not send it. Valid while the
 * connection is referenced. */
const char *http_header(const struct http_conn *c, enum http_header h, size_t *len);
/* The request's body (NUL-terminated, "" when none), its length in *len. */
const char *http_body(const struct http_conn *c, size_t *len);

/* The peer's address as "IP:PORT" (as the protocol's connections name
 * theirs), "?:0" when it cannot be had; into buf. */
const char *http_peer(const struct http_conn *c, char *buf, size_t cap);

void http_conn_ref(struct http_conn *c);
void http_conn_unref(struct http_conn *c);

#endif
