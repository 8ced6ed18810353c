/* tls: TLS for a stream the caller moves the bytes of. OpenSSL works on
 * two memory BIOs and never sees a socket: the caller feeds what it read
 * from the peer (tls_feed), takes the plaintext out (tls_read), hands in
 * plaintext to send (tls_write) and takes the records to write
 * (tls_take_out). Nothing here blocks or knows of libuv, so one helper
 * serves every listener (the protocol's client.c, and http.c if it
 * adopts it).
 *
 * A context (struct tls_ctx) holds the certificate, key and CA as read
 * from their files at one moment: a reload makes a new context, and each
 * connection keeps the one it was accepted with (OpenSSL counts the
 * references of the SSL_CTX beneath). */
#ifndef EMQ_TLS_H
#define EMQ_TLS_H

#include <stdbool.h>
#include <stddef.h>

/* The files a server context is made from. */
struct tls_config {
    const char *cert;   /* PEM: the certificate, then any chain */
    const char *key;    /* PEM: its private key */
    const char *ca;     /* PEM: CAs client certificates must chain to, or NULL */
    bool verify_client; /* a client without a valid certificate is refused */
};

struct tls_ctx;
struct tls;

/* Results of tls_read besides a count of bytes. */
enum {
    TLS_EAGAIN = 1, /* no plaintext until more input is fed */
    TLS_ECLOSED,    /* the peer sent close_notify */
    TLS_EFAIL,      /* a handshake or record failure: tls_error says why */
};

/* Read tc's files into a new server context (TLS 1.2 and later only,
 * OpenSSL's default ciphers at security level 2). 0 with *out set, or
 * -EINVAL with why (cap bytes) naming the file and the problem. */
int tls_ctx_new(const struct tls_config *tc, struct tls_ctx **out, char *why, size_t cap);
/* A client context (for load generators and tests of the daemon): the
 * server's certificate is verified against the CAs in the PEM file ca.
 * 0 with *out set, or -EINVAL with why. */
int tls_ctx_new_client(const char *ca, struct tls_ctx **out, char *why, size_t cap);
/* Drop the caller's reference; connections still using it keep theirs.
 * Returns NULL. */
struct tls_ctx *tls_ctx_free(struct tls_ctx *x);
/* The certificate's subject and serial, for logs ("subject=... serial=..."). */
const char *tls_ctx_subject(const struct tls_ctx *x);
const char *tls_ctx_serial(const struct tls_ctx *x);

/* A connection on x: server side, waiting for the peer's ClientHello,
 * or client side (x from tls_ctx_new_client), whose ClientHello the first
 * tls_read makes. NULL when out of memory. */
struct tls *tls_new(struct tls_ctx *x);
struct tls *tls_free(struct tls *t);

/* n bytes read from the peer. 0 or -ENOMEM. */
int tls_feed(struct tls *t, const void *data, size_t n);
/* Run the handshake and decrypt into buf (cap bytes): a count > 0, or
 * TLS_EAGAIN, TLS_ECLOSED or TLS_EFAIL (as a negative number). */
long tls_read(struct tls *t, char *buf, size_t cap);
/* Encrypt n bytes of plaintext (all of them, into the records waiting to
 * be written). 0, or -TLS_EFAIL. Only once the handshake is done. */
int tls_write(struct tls *t, const void *data, size_t n);
/* Queue a close_notify alert (once). */
void tls_shutdown(struct tls *t);
/* Bytes of records waiting to be written. */
size_t tls_out_pending(const struct tls *t);
/* Move up to cap of them into buf; returns how many. */
size_t tls_take_out(struct tls *t, void *buf, size_t cap);
/* Bytes t holds besides the caller's buffers (input not yet decrypted,
 * records not yet taken): for the connection's buffer budget. */
size_t tls_buffered(const struct tls *t);

/* The handshake is done. */
bool tls_established(const struct tls *t);
/* The handshake failed, or a record did: nothing more can be read. */
bool tls_failed(const struct tls *t);
/* Why it failed (a verify result for a refused certificate). */
const char *tls_error(const struct tls *t);
/* "TLSv1.3 TLS_AES_256_GCM_SHA384", once established. */
const char *tls_describe(const struct tls *t, char *buf, size_t cap);
/* The client certificate's subject (one line), or NULL without one. */
const char *tls_peer_subject(const struct tls *t, char *buf, size_t cap);

#endif
