/* http: a minimal HTTP/1.1 server on the daemon's loop, for /metrics.
 * Requests are parsed by libhttp-parser; one request per connection, the
 * answer closes it. Bounded: 64 connections, 8 KiB of request, 10 s to
 * send it. */
#ifndef EMQ_HTTP_H
#define EMQ_HTTP_H

#include <stddef.h>
#include <uv.h>

struct http_server;
struct http_conn;

/* A complete request arrived: answer it now or later with http_respond
 * (holding a reference with http_conn_ref meanwhile). path is the URL
 * without its query; both strings live only during the call. */
typedef void http_request_cb(void *priv, struct http_conn *c, const char *method, const char *path);

/* Listen on sa. 0 or a negative libuv error. */
int http_server_new(uv_loop_t *loop, const struct sockaddr *sa, http_request_cb *cb, void *priv,
                    struct http_server **out);

/* Stop listening and close every connection (the memory goes in the close
 * callbacks). Returns NULL. */
struct http_server *http_server_free(struct http_server *h);

/* Send the answer (body copied) and close. A no-op if the connection has
 * closed meanwhile. */
void http_respond(struct http_conn *c, int status, const char *content_type, const char *body,
                  size_t len);

void http_conn_ref(struct http_conn *c);
void http_conn_unref(struct http_conn *c);

#endif
