/* req: one request, from its line to its reply. Replies leave in the
 * order the requests arrived; a request that finishes early waits for
 * those before it (its reply encoded and kept). Every request is finished
 * exactly once, by req_ok* or req_error*, even when its connection has
 * gone (the reply is dropped then). */
#ifndef EMQ_REQ_H
#define EMQ_REQ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "reply.h"
#include "store.h"

struct client;
struct cmd;
struct consumer;
struct queue;
struct server;

struct req {
    struct req *next;
    struct client *c;
    json_t *root; /* the parsed request (owned) */
    json_t *ref;  /* borrowed from root */
    const struct cmd *cmd;
    struct queue *q; /* the "queue" argument's queue, if any */
    bool done;
    unsigned char err; /* the wire error it was answered with, 0 = ok */
    char *reply;       /* encoded reply line, when done out of order */
    size_t reply_len;
    int outstanding;       /* backend calls still to answer (enqueue_many) */
    json_t *acc;           /* what a multi-call request gathers (owned) */
    uint64_t n;            /* a counter a multi-call request keeps */
    struct consumer *park; /* a stream to park once this reply is out */
    size_t bytes;          /* what it counts in the budget while its parsed form is held */
};

/* Run one line of c as a request (the connection's read path calls it
 * for every complete line, in order). */
void req_run_line(struct client *c, const char *line, size_t len);
/* A request for a line that was not read: too_long, one longer than
 * max-line (answered ETOOBIG); else one refused because the daemon's
 * client buffers were full (ELIMIT, budget.h). */
void req_unread(struct client *c, bool too_long);

/* Finish ok with fields (stolen; may be NULL). */
void req_ok(struct req *r, json_t *fields);
/* req_ok with one string field, written straight into the reply line (no
 * jansson object: complete's {"state":"completed"} is on the hot path). */
void req_ok_string(struct req *r, const char *key, const char *value);
/* Finish with a reply line built in place (taken over from line); rc is
 * what building it returned (reply_end's result). A line that could not
 * be built (out of memory) closes the connection with a log line: the
 * reply cannot be dropped, since every later reply waits behind it. */
void req_ok_line(struct req *r, struct outbuf *line, int rc);
void req_error(struct req *r, enum wire_error code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* req_error with fields after the message (stolen; may be NULL). */
void req_error_fields(struct req *r, json_t *fields, enum wire_error code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Finish with the error a store call ended with (st->code != 0). */
void req_store_error(struct req *r, const struct store_status *st);
/* Finish a request whose connection has closed, with no reply. */
void req_drop(struct req *r);
struct server *req_server(const struct req *r);

/* The connection closed: free the requests that are finished, and unlink
 * the rest (they finish into the void). */
void req_close_all(struct client *c);

#endif
