/* emq.h: libemq, a small blocking C client for emqd's wire protocol v1
 * (proto/PROTOCOL.md).
 *
 * One `struct emq` is one connection. It is not thread-safe: use one per
 * thread. There is no global state. Every call that talks to the server
 * blocks until its reply arrives or the connection's timeout passes.
 *
 * Errors: functions return EMQ_OK (0) or an `enum emq_code`. Codes below
 * EMQ_ECLIENT are the server's wire error codes (section 3 of the protocol);
 * the others are raised by the library itself. After any failure,
 * emq_errmsg() gives a human-readable message (the server's `message` for
 * server errors). A connection that answered EMQ_EIO or EMQ_ETIMEOUT is
 * broken: close it and connect again.
 *
 * JSON values cross the API as jansson `json_t *`; who owns a reference is
 * stated on each function.
 */
#ifndef EMQ_H
#define EMQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes. The server's codes keep their wire names (EMQ_ELEASE is
 * "ELEASE"); see emq_code_name() and emq_code_from_name(). */
enum emq_code {
    EMQ_OK = 0,
    /* Server error codes (protocol section 3). */
    EMQ_EPROTO,
    EMQ_EUNKNOWN,
    EMQ_EARG,
    EMQ_EKIND,
    EMQ_EBRAND,
    EMQ_EQUEUE,
    EMQ_ETOOBIG,
    EMQ_EEMPTY,
    EMQ_ENOJOB,
    EMQ_ESTATE,
    EMQ_ELEASE,
    EMQ_EAUTH,
    EMQ_EUNAVAILABLE,
    EMQ_EINTERNAL,
    EMQ_ELIMIT,
    /* Library codes. */
    EMQ_ECLIENT = 100, /* not a code: the first library code */
    EMQ_EIO = EMQ_ECLIENT, /* cannot connect, or the connection broke */
    EMQ_ETIMEOUT,          /* no reply within the timeout; connection unusable */
    EMQ_EBADREPLY,         /* the server sent a line the library cannot read */
    EMQ_EUSAGE,            /* a bad argument to a libemq function */
    EMQ_ENOMEM,            /* out of memory */
    EMQ_EINTR,             /* emq_interrupt() was called */
    EMQ_ESERVER,           /* a server error code this library does not know */
};

/* The wire name of a code ("ELEASE", "EIO", ...); "OK" for EMQ_OK. */
const char *emq_code_name(int code);

/* The code for a wire name; EMQ_ESERVER if unknown. */
int emq_code_from_name(const char *name);

/* How to reach the server. Zero-initialise and set what you need. */
struct emq_options {
    const char *host;      /* TCP host (IPv4/IPv6 literal or name); default "127.0.0.1" */
    int port;              /* TCP port; default 7711 */
    const char *unix_path; /* if set, connect to this unix socket instead of TCP */
    const char *token;     /* sent in hello when set */
    const char *name;      /* client name sent in hello (informational) */
    int timeout_ms;        /* connect and per-reply timeout; default 10000, <0: none */
};

/* One connection. Opaque. */
struct emq;

/* Connect and say hello (protocol 1, token and name from opts). On success
 * *out is a new connection (free with emq_close). On failure *out is still
 * set when a connection object could be made, so emq_errmsg(*out) explains
 * the failure; emq_close() it all the same. */
int emq_connect(struct emq **out, const struct emq_options *opts);

/* Parse "HOST:PORT", "[V6]:PORT", "PORT", or "unix:PATH" / a path starting
 * with '/' into opts (strings point into addr). EMQ_EUSAGE if malformed. */
int emq_parse_addr(struct emq_options *opts, const char *addr);

/* Say quit, close and free. Safe with NULL. Leases the connection holds are
 * released by the server (protocol 6.4). */
void emq_close(struct emq *c);

/* The message for the last failure on c ("" if none). Valid until the next
 * call on c. */
const char *emq_errmsg(const struct emq *c);

/* The last failure's code on c (EMQ_OK if the last call succeeded). */
int emq_errcode(const struct emq *c);

/* Make the current or next blocking call on c return EMQ_EINTR at once.
 * Async-signal-safe: meant for SIGTERM/SIGINT handlers. The connection
 * stays usable; emq_interrupted() tells whether it was called. */
void emq_interrupt(struct emq *c);
bool emq_interrupted(const struct emq *c);

/* Send one request object (borrowed; "ref" is managed by the library and
 * must not be set) and wait for its reply. On EMQ_OK or a server error,
 * *reply (if not NULL) receives the whole reply object, a new reference the
 * caller must json_decref. Pushes that arrive meanwhile are queued for
 * emq_next_push / emq_stream_run. This is the escape hatch every typed call
 * below is built on. */
int emq_request(struct emq *c, json_t *request, json_t **reply);

#ifdef __cplusplus
}
#endif

#endif
