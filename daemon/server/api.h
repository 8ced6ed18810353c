/* api: the dashboard's JSON endpoints on the HTTP listener (proto/HTTP.md).
 * POST /api/<op> with the op's arguments as a JSON object runs that op
 * through the protocol's own request path (req_run_line on a detached
 * client, client.h): the same command table, argument checks, op checks
 * and replies, byte for byte. Only the reads and levers an operator
 * needs are offered. Before an op runs, the request must pass the
 * cross-site checks and carry the token (when one is set).
 *
 * Bounded: at most API_RUNNING_MAX ops run at once (the others wait their
 * turn, in order); identical reads are answered from one backend call
 * while it runs and for http-cache-ms after (so N dashboards polling the
 * same view cost what one does). */
#ifndef EMQ_API_H
#define EMQ_API_H

#include <stdbool.h>

struct api;
struct http_conn;
struct server;

/* Most ops of the API that run at once; the rest queue. */
#define API_RUNNING_MAX 4

/* NULL out of memory. */
struct api *api_new(struct server *s);
/* Calls in flight finish into the void; the memory goes with the last.
 * Returns NULL. */
struct api *api_free(struct api *a);

/* Serve one request whose path began with "/api/"; op is the rest. */
void api_handle(struct api *a, struct http_conn *c, const char *method, const char *op);

/* Whether the dashboard may be served at all: with a token, or on a
 * loopback listener, or with allow-insecure (as the protocol listener).
 * False: why in *why. */
bool api_open(const struct server *s, const char **why);

/* Serve the dashboard's files (GET /, /app.js, ...), embedded in emqd. */
void web_serve(const struct server *s, struct http_conn *c, const char *method, const char *path);

#endif
