/* client_tls: TLS for the protocol listener's connections, on top of the
 * same libuv stream a plain connection uses (util/tls.h does the TLS over
 * memory buffers; this file moves the bytes).
 *
 * One port takes both: when a certificate is configured, the first byte a
 * TCP client sends decides. A TLS ClientHello always starts with 0x16 (a
 * handshake record), which no request line can start with (a line is a
 * JSON object: '{' or blanks). Plain connections then go the plain way
 * for good, with nothing of TLS on their read or write path; tls-only
 * answers them one EAUTH line and closes. A unix socket is never TLS.
 *
 * A TLS connection reads its ciphertext into a scratch buffer, feeds it to
 * OpenSSL and decrypts what it can into the frame reader, where its lines
 * run as a plain connection's do; its replies are encrypted at the flush,
 * as one write per loop turn. */
#ifndef EMQ_CLIENT_TLS_H
#define EMQ_CLIENT_TLS_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct client;
struct server;

/* Read the certificate, key and CA named by the settings into a new
 * context for the connections accepted from now on (those open keep
 * theirs), or drop TLS if tls-cert is unset. At start and at each SIGHUP.
 * 0, or -EINVAL (logged; the running context stays). */
int client_tls_load(struct server *s);

/* The read callbacks of a connection that has not sent its first byte
 * yet (c->sniff) or speaks TLS (c->tls). */
void client_tls_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
void client_tls_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* Encrypt c's output and write it (flush_one for a TLS connection). */
void client_tls_flush(struct client *c);

/* Its handshake (or its first byte) has not come within the bound
 * (idle-timeout-ms, or auth-timeout-ms when that is 0): closed, true. */
bool client_tls_overdue(struct client *c, uint64_t now);

#endif
