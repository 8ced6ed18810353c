/* tls: see tls.h. */
#include "tls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

/* One server context: the SSL_CTX, and what its certificate says. */
struct tls_ctx {
    SSL_CTX *ctx;
    bool client;
    char subject[256];
    char serial[80];
};

/* One connection's TLS state. rbio holds what the peer sent and SSL has
 * not consumed, wbio the records SSL made and the caller has not taken. */
struct tls {
    SSL *ssl;
    BIO *rbio, *wbio;
    bool established, failed, shut;
    char error[256];
};

/* The first error on OpenSSL's queue, as text (and the queue cleared). */
static void take_error(char *buf, size_t cap, const char *fallback)
{
    unsigned long e = ERR_get_error();
    if (e == 0)
        snprintf(buf, cap, "%s", fallback);
    else
        ERR_error_string_n(e, buf, cap);
    ERR_clear_error();
}

static void name_line(X509_NAME *n, char *buf, size_t cap)
{
    BIO *b = BIO_new(BIO_s_mem());
    buf[0] = '\0';
    if (b == NULL)
        return;
    if (X509_NAME_print_ex(b, n, 0, XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB) >= 0) {
        int len = BIO_read(b, buf, (int)cap - 1);
        buf[len > 0 ? len : 0] = '\0';
    }
    BIO_free(b);
}

static void describe_cert(struct tls_ctx *x)
{
    X509 *cert = SSL_CTX_get0_certificate(x->ctx);
    snprintf(x->subject, sizeof(x->subject), "?");
    snprintf(x->serial, sizeof(x->serial), "?");
    if (cert == NULL)
        return;
    name_line(X509_get_subject_name(cert), x->subject, sizeof(x->subject));
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(cert), NULL);
    char *hex = bn != NULL ? BN_bn2hex(bn) : NULL;
    if (hex != NULL)
        snprintf(x->serial, sizeof(x->serial), "%s", hex);
    OPENSSL_free(hex);
    BN_free(bn);
}

/* Load the files into x->ctx; on failure say which file and why. */
static int load_files(struct tls_ctx *x, const struct tls_config *tc, char *why, size_t cap)
{
    char e[200];
    if (SSL_CTX_use_certificate_chain_file(x->ctx, tc->cert) != 1) {
        take_error(e, sizeof(e), "unreadable");
        snprintf(why, cap, "tls-cert %s: %s", tc->cert, e);
        return -EINVAL;
    }
    if (SSL_CTX_use_PrivateKey_file(x->ctx, tc->key, SSL_FILETYPE_PEM) != 1) {
        take_error(e, sizeof(e), "unreadable");
        snprintf(why, cap, "tls-key %s: %s", tc->key, e);
        return -EINVAL;
    }
    if (SSL_CTX_check_private_key(x->ctx) != 1) {
        take_error(e, sizeof(e), "does not match");
        snprintf(why, cap, "tls-key %s does not match tls-cert %s: %s", tc->key, tc->cert, e);
        return -EINVAL;
    }
    if (tc->ca == NULL)
        return 0;
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(tc->ca);
    if (SSL_CTX_load_verify_locations(x->ctx, tc->ca, NULL) != 1 || names == NULL) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        take_error(e, sizeof(e), "no certificate in it");
        snprintf(why, cap, "tls-ca %s: %s", tc->ca, e);
        return -EINVAL;
    }
    SSL_CTX_set_client_CA_list(x->ctx, names); /* takes names */
    return 0;
}

int tls_ctx_new(const struct tls_config *tc, struct tls_ctx **out, char *why, size_t cap)
{
    struct tls_ctx *x = calloc(1, sizeof(*x));
    *out = NULL;
    if (x == NULL || (x->ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
        free(x);
        snprintf(why, cap, "out of memory");
        return -ENOMEM;
    }
    ERR_clear_error();
    /* TLS 1.2 and 1.3 only; ciphers are OpenSSL's defaults, held to
     * security level 2 (112-bit keys and stronger: no RSA under 2048
     * bits, no SHA-1 signatures) whatever the system's openssl.cnf says.
     * No renegotiation: a client cannot make the daemon redo handshakes
     * on an open connection. */
    SSL_CTX_set_min_proto_version(x->ctx, TLS1_2_VERSION);
    SSL_CTX_set_security_level(x->ctx, 2);
    SSL_CTX_set_options(x->ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* Idle connections give their read and write buffers back. */
    SSL_CTX_set_mode(x->ctx, SSL_MODE_RELEASE_BUFFERS);
    static const unsigned char sid[] = "emqd";
    SSL_CTX_set_session_id_context(x->ctx, sid, sizeof(sid) - 1);
    int rc = load_files(x, tc, why, cap);
    if (rc != 0) {
        tls_ctx_free(x);
        return rc;
    }
    if (tc->verify_client)
        SSL_CTX_set_verify(x->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    describe_cert(x);
    *out = x;
    return 0;
}

int tls_ctx_new_client(const char *ca, struct tls_ctx **out, char *why, size_t cap)
{
    struct tls_ctx *x = calloc(1, sizeof(*x));
    char e[200];
    *out = NULL;
    if (x == NULL || (x->ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
        free(x);
        snprintf(why, cap, "out of memory");
        return -ENOMEM;
    }
    x->client = true;
    SSL_CTX_set_min_proto_version(x->ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(x->ctx, SSL_VERIFY_PEER, NULL);
    if (SSL_CTX_load_verify_locations(x->ctx, ca, NULL) != 1) {
        take_error(e, sizeof(e), "unreadable");
        snprintf(why, cap, "%s: %s", ca, e);
        tls_ctx_free(x);
        return -EINVAL;
    }
    snprintf(x->subject, sizeof(x->subject), "(client)");
    snprintf(x->serial, sizeof(x->serial), "-");
    *out = x;
    return 0;
}

struct tls_ctx *tls_ctx_free(struct tls_ctx *x)
{
    if (x != NULL) {
        SSL_CTX_free(x->ctx); /* connections made on it hold their own references */
        free(x);
    }
    return NULL;
}

const char *tls_ctx_subject(const struct tls_ctx *x)
{
    return x->subject;
}

const char *tls_ctx_serial(const struct tls_ctx *x)
{
    return x->serial;
}

struct tls *tls_new(struct tls_ctx *x)
{
    struct tls *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->ssl = SSL_new(x->ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (t->ssl == NULL || t->rbio == NULL || t->wbio == NULL) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    /* An empty input BIO means "wait for more", not end of file. */
    BIO_set_mem_eof_return(t->rbio, -1);
    BIO_set_mem_eof_return(t->wbio, -1);
    SSL_set_bio(t->ssl, t->rbio, t->wbio); /* the SSL owns both now */
    if (x->client)
        SSL_set_connect_state(t->ssl);
    else
        SSL_set_accept_state(t->ssl);
    return t;
}

struct tls *tls_free(struct tls *t)
{
    if (t != NULL) {
        SSL_free(t->ssl);
        free(t);
    }
    return NULL;
}

int tls_feed(struct tls *t, const void *data, size_t n)
{
    while (n > 0) {
        int chunk = n > (1u << 30) ? 1 << 30 : (int)n;
        int w = BIO_write(t->rbio, data, chunk);
        if (w <= 0) {
            ERR_clear_error();
            return -ENOMEM;
        }
        data = (const char *)data + w;
        n -= (size_t)w;
    }
    return 0;
}

/* Record why t failed: the certificate check's verdict if it refused the
 * peer's, else OpenSSL's first error. */
static long fail(struct tls *t, const char *fallback)
{
    long v = SSL_get_verify_result(t->ssl);
    t->failed = true;
    if (v != X509_V_OK) {
        snprintf(t->error, sizeof(t->error), "client certificate refused: %s",
                 X509_verify_cert_error_string(v));
        ERR_clear_error();
    } else {
        take_error(t->error, sizeof(t->error), fallback);
    }
    return -TLS_EFAIL;
}

long tls_read(struct tls *t, char *buf, size_t cap)
{
    if (t->failed)
        return -TLS_EFAIL;
    ERR_clear_error();
    int n = SSL_read(t->ssl, buf, cap > (1u << 30) ? 1 << 30 : (int)cap);
    if (!t->established && SSL_is_init_finished(t->ssl))
        t->established = true;
    if (n > 0)
        return n;
    switch (SSL_get_error(t->ssl, n)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE: /* a memory BIO takes every write */
        return -TLS_EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return -TLS_ECLOSED;
    case SSL_ERROR_SYSCALL:
        return fail(t, "unexpected end of the TLS stream");
    default:
        return fail(t, t->established ? "bad TLS record" : "TLS handshake failed");
    }
}

int tls_write(struct tls *t, const void *data, size_t n)
{
    if (t->failed || !t->established)
        return -TLS_EFAIL;
    ERR_clear_error();
    while (n > 0) {
        size_t done = 0;
        if (SSL_write_ex(t->ssl, data, n, &done) != 1) {
            fail(t, "TLS write failed");
            return -TLS_EFAIL;
        }
        data = (const char *)data + done;
        n -= done;
    }
    return 0;
}

void tls_shutdown(struct tls *t)
{
    if (t->shut || t->failed || !t->established)
        return;
    t->shut = true;
    ERR_clear_error();
    SSL_shutdown(t->ssl);
    ERR_clear_error();
}

size_t tls_out_pending(const struct tls *t)
{
    return BIO_ctrl_pending(t->wbio);
}

size_t tls_take_out(struct tls *t, void *buf, size_t cap)
{
    int n = BIO_read(t->wbio, buf, cap > (1u << 30) ? 1 << 30 : (int)cap);
    return n > 0 ? (size_t)n : 0;
}

size_t tls_buffered(const struct tls *t)
{
    return BIO_ctrl_pending(t->rbio) + BIO_ctrl_pending(t->wbio);
}

bool tls_established(const struct tls *t)
{
    return t->established;
}

bool tls_failed(const struct tls *t)
{
    return t->failed;
}

const char *tls_error(const struct tls *t)
{
    return t->error;
}

const char *tls_describe(const struct tls *t, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s %s", SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl));
    return buf;
}

const char *tls_peer_subject(const struct tls *t, char *buf, size_t cap)
{
    X509 *peer = SSL_get1_peer_certificate(t->ssl);
    if (peer == NULL)
        return NULL;
    name_line(X509_get_subject_name(peer), buf, cap);
    X509_free(peer);
    return buf;
}
