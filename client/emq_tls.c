/* emq_tls: libemq's TLS, OpenSSL on the connection's own non-blocking
 * socket: the handshake within the connect deadline, and reads and writes
 * with the same "would block" contract recv(2) and send(2) have, so that
 * emq.c's waits serve both kinds of connection. */
#include "emq_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* OpenSSL's first error as text, or fallback; the queue is cleared. */
static const char *ssl_why(char *buf, size_t cap, const char *fallback)
{
    unsigned long e = ERR_get_error();
    if (e == 0)
        snprintf(buf, cap, "%s", fallback);
    else
        ERR_error_string_n(e, buf, cap);
    ERR_clear_error();
    return buf;
}

/* The context: TLS 1.2+, the server verified against o->tls_ca (or the
 * system's CAs) unless o->tls_no_verify, and a client certificate if
 * given. NULL with c's error set. */
static SSL_CTX *make_ctx(struct emq *c, const struct emq_options *o)
{
    char why[256];
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        emq_seterr(c, EMQ_ENOMEM, "TLS: %s", ssl_why(why, sizeof(why), "out of memory"));
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, o->tls_no_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    int ok = o->tls_ca != NULL ? SSL_CTX_load_verify_locations(ctx, o->tls_ca, NULL)
                               : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        emq_seterr(c, EMQ_EUSAGE, "TLS CA file %s: %s", o->tls_ca ? o->tls_ca : "(system)",
                   ssl_why(why, sizeof(why), "unreadable"));
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (o->tls_cert != NULL) {
        const char *key = o->tls_key != NULL ? o->tls_key : o->tls_cert;
        if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1 ||
            SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
            emq_seterr(c, EMQ_EUSAGE, "TLS client certificate %s / key %s: %s", o->tls_cert, key,
                       ssl_why(why, sizeof(why), "unreadable"));
            SSL_CTX_free(ctx);
            return NULL;
        }
    }
    return ctx;
}

/* Name the server: SNI and the name its certificate must carry (an IP
 * literal is checked against the certificate's IP addresses). */
static int set_name(struct emq *c, const char *name)
{
    unsigned char bin[16];
    bool ip = inet_pton(AF_INET, name, bin) == 1 || inet_pton(AF_INET6, name, bin) == 1;
    if (ip) {
        X509_VERIFY_PARAM *p = SSL_get0_param(c->ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(p, name) != 1)
            return emq_seterr(c, EMQ_EUSAGE, "TLS: bad server address %s", name);
        return EMQ_OK;
    }
    if (SSL_set_tlsext_host_name(c->ssl, name) != 1 || SSL_set1_host(c->ssl, name) != 1)
        return emq_seterr(c, EMQ_EUSAGE, "TLS: bad server name %s", name);
    return EMQ_OK;
}

/* A failed handshake's reason: the verdict on the server's certificate
 * when that was the cause. */
static int handshake_failed(struct emq *c)
{
    char why[256];
    long v = SSL_get_verify_result(c->ssl);
    if (v != X509_V_OK) {
        ERR_clear_error();
        return emq_seterr(c, EMQ_EIO, "TLS: the server's certificate is refused: %s",
                          X509_verify_cert_error_string(v));
    }
    return emq_seterr(c, EMQ_EIO, "TLS handshake failed: %s",
                      ssl_why(why, sizeof(why), "the server closed the connection"));
}

int emq_tls_start(struct emq *c, const struct emq_options *o, const char *host, long long deadline)
{
    SSL_CTX *ctx = make_ctx(c, o);
    if (ctx == NULL)
        return c->code;
    c->ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL holds its own reference */
    if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1)
        return emq_seterr(c, EMQ_ENOMEM, "TLS: out of memory");
    if (!o->tls_no_verify) {
        int rc = set_name(c, o->tls_server_name != NULL ? o->tls_server_name : host);
        if (rc != EMQ_OK)
            return rc;
    } else if (o->tls_server_name != NULL) {
        SSL_set_tlsext_host_name(c->ssl, o->tls_server_name);
    }
    for (;;) {
        ERR_clear_error();
        int r = SSL_connect(c->ssl);
        if (r == 1)
            return EMQ_OK;
        int e = SSL_get_error(c->ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return handshake_failed(c);
        struct pollfd p = {.fd = c->fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
        long long left = deadline < 0 ? -1 : deadline - emq_now_ms();
        int n = left == 0 || left < -1 ? 0 : poll(&p, 1, left < 0 ? -1 : (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            return emq_seterr(c, EMQ_ETIMEOUT, "TLS handshake: no answer from the server in time");
        if (n < 0)
            return emq_seterr(c, EMQ_EIO, "poll: %s", strerror(errno));
    }
}

/* A failed SSL_read_ex or SSL_write_ex (r: its result) as recv/send
 * would give it: -1 with errno EAGAIN for "wait", 0 for the end. */
static ssize_t as_syscall(struct emq *c, int r, bool reading)
{
    char why[256];
    switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        if (reading)
            return 0;
        errno = EPIPE;
        return -1;
    case SSL_ERROR_SYSCALL:
        if (errno != 0)
            return -1;
        if (reading) /* the server closed without close_notify */
            return 0;
        errno = EPIPE;
        return -1;
    default:
        /* A refused client certificate (TLS 1.3 tells the client only
         * after its handshake) arrives here as an alert. */
        snprintf(c->tls_err, sizeof(c->tls_err), "TLS: %s",
                 ssl_why(why, sizeof(why), "bad record"));
        errno = EPROTO;
        return -1;
    }
}

ssize_t emq_tls_recv(struct emq *c, void *buf, size_t n)
{
    size_t got = 0;
    ERR_clear_error();
    errno = 0;
    if (SSL_read_ex(c->ssl, buf, n, &got) == 1)
        return (ssize_t)got;
    return as_syscall(c, 0, true);
}

ssize_t emq_tls_send(struct emq *c, const void *data, size_t n)
{
    size_t done = 0;
    ERR_clear_error();
    errno = 0;
    if (SSL_write_ex(c->ssl, data, n, &done) == 1)
        return (ssize_t)done;
    return as_syscall(c, 0, false);
}

bool emq_tls_pending(const struct emq *c)
{
    return c->ssl != NULL && SSL_pending(c->ssl) > 0;
}

void emq_tls_close(struct emq *c)
{
    if (c->ssl == NULL)
        return;
    if (!c->broken)
        SSL_shutdown(c->ssl); /* close_notify; not waited for */
    SSL_free(c->ssl);
    c->ssl = NULL;
    ERR_clear_error();
}
