/* emq_int.h: what the libemq source files share and the library does not
 * export: the connection struct, error recording and the request call the
 * typed ops are built on. */
#ifndef EMQ_INT_H
#define EMQ_INT_H

#include <signal.h>
#include <sys/types.h>

#include <openssl/ssl.h>

#include "emq.h"

#define EMQ_HIDDEN __attribute__((visibility("hidden")))

/* The longest server line the library accepts. The server's own limit is
 * 1 MiB by default (--max-line); the cap only stops a broken server from
 * exhausting memory. */
#define EMQ_MAX_LINE (64u << 20)

/* Where emq_connect goes when emq_options leaves host or port unset. */
#define EMQ_DEFAULT_HOST "127.0.0.1"
#define EMQ_DEFAULT_PORT 7711

/* One queued push line, in arrival order. */
struct emq_push {
    struct emq_push *next;
    json_t *line; /* owned */
};

/* One connection (see emq.h). Refs are per connection: request n carries
 * "ref":n, and as replies come strictly in order, the next reply answers
 * request `answered + 1`. Replies to requests abandoned by emq_interrupt
 * (answered < sent - 1 while waiting) are read and dropped. */
struct emq {
    int fd;
    SSL *ssl;                          /* a TLS connection's state (emq_tls.c), or NULL */
    char tls_err[300];                 /* why the last TLS read or write failed */
    int wake[2];                       /* self-pipe: emq_interrupt writes one byte */
    volatile sig_atomic_t interrupted; /* sticky: emq_interrupt was called */
    bool closing;                      /* emq_close: interrupts are ignored */
    bool broken;                       /* EIO/ETIMEOUT/EBADREPLY: only emq_close is left */
    int timeout_ms;
    unsigned long long sent;     /* refs handed out so far */
    unsigned long long answered; /* replies received so far */
    char *buf;                   /* read buffer: len bytes, the first `scan` have no '\n' */
    size_t len, cap, scan;
    struct emq_push *head, **tail; /* pushes not yet taken */
    int code;
    char msg[512];
};

/* Record a failure on c and return its code. */
EMQ_HIDDEN int emq_seterr(struct emq *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Record success on c; returns EMQ_OK. */
EMQ_HIDDEN int emq_ok(struct emq *c);

/* emq_request with a request it consumes (NULL: out of memory or bad
 * arguments to json_pack, EMQ_EUSAGE) and a timeout extended by extra_ms
 * (for claims that wait). */
EMQ_HIDDEN int emq_call(struct emq *c, json_t *req, json_t **reply, int extra_ms);

/* One page of a set scan (groups, queues): req (consumed; NULL as for
 * emq_call) with cursor (NULL: the start) and count (0: the daemon's
 * default) added. On EMQ_OK *reply is the reply (decref it), *arr its
 * array field key and next (33 bytes) its cursor. */
EMQ_HIDDEN int emq_scan_page(struct emq *c, json_t *req, const char *cursor, int count,
                             const char *key, json_t **reply, json_t **arr, char next[33]);

/* Milliseconds on CLOCK_MONOTONIC. */
EMQ_HIDDEN long long emq_now_ms(void);

/* A leased job built from a claim entry or a push (fields of 6.7). NULL
 * with c's error set (EMQ_EBADREPLY / EMQ_ENOMEM) when it cannot be read. */
EMQ_HIDDEN struct emq_job *emq_job_from_json(struct emq *c, const json_t *o);

/* TLS (emq_tls.c). Start it on c->fd, connected to host, within the
 * deadline: EMQ_OK or a code with c's error set. */
EMQ_HIDDEN int emq_tls_start(struct emq *c, const struct emq_options *o, const char *host,
                             long long deadline);
/* recv(2) and send(2) through TLS, with their results and errno
 * (EAGAIN: wait for the socket; EPROTO: a TLS failure, see tls_err). */
EMQ_HIDDEN ssize_t emq_tls_recv(struct emq *c, void *buf, size_t n);
EMQ_HIDDEN ssize_t emq_tls_send(struct emq *c, const void *data, size_t n);
/* Decrypted bytes wait in OpenSSL: read them before polling. */
EMQ_HIDDEN bool emq_tls_pending(const struct emq *c);
/* Send close_notify (if the connection works) and free the TLS state. */
EMQ_HIDDEN void emq_tls_close(struct emq *c);

#endif
