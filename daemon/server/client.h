/* client: one connection. Bytes come in through the frame reader, each
 * complete line runs as a request (req.h); replies and pushes are batched
 * into one write per loop turn. The jobs leased to it (lease.h) and its
 * parked claims and streams (consumer.h) end with it. */
#ifndef EMQ_CLIENT_H
#define EMQ_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "frame.h"
#include "map.h"
#include "reply.h"
#include "tokens.h"

struct consumer;
struct req;
struct server;

/* Where a detached client's output goes (client_new_detached): the bytes
 * of this loop turn's replies, valid only during the call. */
typedef void client_sink_cb(void *priv, const char *data, size_t len);

struct client {
    struct client *prev, *next;
    struct client *dirty_next;
    struct server *srv;
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;
        uv_pipe_t pipe;
    } h;
    uint64_t id; /* this daemon's number for it, from 1, never reused */
    char addr[64];
    char name[129]; /* what its last hello called it (named), for clients */
    bool named;
    struct frame frame;
    struct outbuf out;  /* bytes waiting for the next write */
    struct outbuf wbuf; /* bytes being written */
    uv_write_t write_req;
    bool writing, dirty, closing, quit, authed, reading, unix_socket, resume_queued;
    bool eof;        /* the peer sent its last byte (it may still read) */
    bool read_held;  /* it would read, but the daemon is over max-buffered (budget.h) */
    bool lines_left; /* complete lines read but not run yet (reads paused) */
    /* A request that runs in several backend calls (drain): the lines after
     * it wait until it is answered, so they see all of its effects. */
    struct req *barrier;
    struct client *resume_next; /* in the server's resumed list */
    int refs;                   /* requests and writes that still point here */
    struct req *head, *tail;    /* requests in arrival order, until replied */
    size_t inflight;            /* requests not yet answered */
    size_t queued_bytes;        /* replies done but waiting behind an earlier one */
    size_t req_bytes;           /* its requests' parsed forms, until answered (req.c) */
    struct req *running;        /* the request whose handler runs now (req_run_line) */
    /* What it adds to the server's budget now (client_account): its
     * input not yet run (of it, its partial line), and its output
     * (queued_bytes, out, wbuf). */
    size_t counted_in, counted_partial, counted_out;
    struct map held;            /* "queue job" -> struct lease, jobs leased to us */
    struct consumer *consumers; /* its parked claims and streams */
    /* Detached (client_new_detached): no socket; its replies go to sink
     * at the end of the loop turn, instead of being written. */
    client_sink_cb *sink;
    void *sink_priv;
    int auth_failures;
    /* What it may do (perm.h): the role, and the tokens-file line that gave
     * it (NULL: the token setting, or no authentication; both admin on
     * every queue). 0 until hello when authentication is required. */
    enum tokens_role role;
    const struct token *tok;
    bool unauthed;   /* counted in the server's nunauthed: a token is set, no hello yet */
    uint64_t opened; /* uv_now() at accept */
    /* TLS (client_tls.h): its state once its first byte was 0x16 (owned;
     * NULL for a plain connection), and whether its first byte is still
     * to come on a listener that takes both. */
    struct tls *tls;
    bool sniff, tls_announced;
    uint64_t last_active;
};

int client_accept(struct server *s, uv_stream_t *listener);
/* A session that is not a connection: the dashboard's /api runs each of
 * its requests on one of these (api.c), through the same request path
 * (req_run_line) as a connection's lines, so the same table, checks and
 * order apply. It has no socket and is in no list of the server (so no
 * idle check, no max-clients, not among the connections the clients op
 * shows); its replies go to sink, batched per loop turn as a
 * connection's are. It is authenticated, with role and tok as a hello
 * would have given it (perm.h; the caller has checked the token). Close
 * it with client_close when done; NULL out of memory. */
struct client *client_new_detached(struct server *s, const char *addr, enum tokens_role role,
                                   const struct token *tok, client_sink_cb *sink, void *priv);
/* Queue bytes for the client (written at the end of this loop turn). Past
 * max-output, or out of memory, it closes the client (with a log line). */
void client_send(struct client *c, const char *data, size_t len);
/* client_send of a job's push line (reply_push_job), built in place in
 * c's output. */
void client_push_job(struct client *c, const struct reply_job *j);
void client_close(struct client *c, const char *why);
/* Stop reading, answer parked claims, close once every reply is written. */
void client_shutdown(struct client *c);
void client_ref(struct client *c);
void client_unref(struct client *c);
/* The client has fewer requests in flight: resume reading if it paused. */
void client_maybe_resume(struct client *c);
/* The client has bytes to write this turn (or a quit to finish). */
void client_mark_dirty(struct client *c);
/* Resume reading the clients whose requests in flight fell below the
 * limit, running the lines they had sent already. */
void client_resume_all(struct server *s);
/* hello succeeded: the connection may use every op. */
void client_set_authed(struct client *c);
/* Close the client if it has been idle past the idle timeout, or has not
 * said hello within auth-timeout-ms when a token is set (now: uv_now). */
void client_idle_check(struct client *c, uint64_t now);
/* Write every dirty client's buffer (called from the flush handle). */
void client_flush_all(struct server *s);

/* Bring the server's budget up to date with c's input and output. */
void client_account(struct client *c);
/* Bytes c holds in the budget: input, requests, output. */
size_t client_buffered(const struct client *c);
/* The budget is over max-buffered: stop reading c (if it reads). */
void client_hold_reads(struct client *c);
/* The budget is back under its low-water mark: read c again if it was
 * held. */
void client_release_reads(struct client *c);
/* Refuse c's partial line (frame_refuse): its ELIMIT answer takes its
 * place in the order. Returns the bytes given back (0: none). */
size_t client_refuse_line(struct client *c);

/* For client_tls.c, which reads and writes TLS connections with the
 * plain path's own steps: */
/* Room in c's frame reader for a read (the plain alloc callback). */
void client_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
/* Room for input in the loop-wide read buffer, lent to c's frame reader
 * (frame_space_lent) until client_give_back, which every read callback
 * calls before it returns (client_input does). 0 or -ENOMEM. */
int client_room(struct client *c, char **room, size_t *room_len);
/* Give the lent read buffer back: the bytes c has not run yet move to a
 * buffer of its own (none when there are none). Out of memory, it closes
 * c. A no-op when nothing is lent. */
void client_give_back(struct client *c);
/* New input is in the frame reader: run its lines, count the bytes. */
void client_input(struct client *c);
/* The read ended (nread < 0): end of input, or an error. */
void client_read_end(struct client *c, ssize_t nread);
/* Its first n bytes (in the frame reader's room) were not TLS: take
 * them, and read it as a plain connection from now on. */
void client_go_plain(struct client *c, size_t n);
/* A write of c's finished (the write callback). */
void client_write_done(struct client *c, int status);

#endif
