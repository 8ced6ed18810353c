/* tls: emqd's TLS listener against libemq, emqctl and raw OpenSSL and TCP
 * clients, with certificates the fixture makes (tests/support/tls_certs.h):
 * end to end over TLS, plain and TLS on one port, tls-only, mutual TLS
 * (a good, a missing, an expired and a wrong-CA client certificate), a
 * stalled handshake, garbage before the handshake, and a certificate
 * reload by SIGHUP. Every refusal is checked to leave other clients
 * working. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "../integration/fixture.h"
#include "emq.h"
#include "tls_certs.h"

static struct tls_certs certs;

static void setup(void)
{
    cr_assert_eq(tls_certs_make(&certs), 0, "cannot make the test certificates");
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0, "redis-server did not start");
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
}

static void teardown(void)
{
    fx_teardown();
    tls_certs_remove(&certs);
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 120);

/* A libemq connection over TLS, verifying the server with certs.ca;
 * cert/key: a client certificate or NULL. Returns the code; *out is set
 * (close it). */
static int tls_connect(struct emq **out, const char *cert, const char *key)
{
    struct emq_options o = {.host = "127.0.0.1",
                            .port = fx_emqd.port,
                            .tls = true,
                            .tls_ca = certs.ca,
                            .tls_cert = cert,
                            .tls_key = key,
                            .timeout_ms = wait_deadline_ms(0)};
    int rc = emq_connect(out, &o);
    if (rc == EMQ_OK)
        rc = emq_ping(*out);
    return rc;
}

/* A working TLS client: connect, ping, and close it again. */
static bool tls_ping(const char *cert, const char *key)
{
    struct emq *c = NULL;
    int rc = tls_connect(&c, cert, key);
    emq_close(c);
    return rc == EMQ_OK;
}

/* A TLS client with the good certificate gets an answer from the
 * backend (depth). */
static bool backend_over_tls(void)
{
    struct emq *c = NULL;
    long long depth;
    bool ok = tls_connect(&c, certs.client, certs.client_key) == EMQ_OK &&
              emq_depth(c, "q", NULL, &depth) == EMQ_OK;
    emq_close(c);
    return ok;
}

/* Start emqd with extra flags (NULL-terminated) and wait until it serves
 * TLS clients (a plain probe would be refused by tls-only). */
static void start(const char *const *extra)
{
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0, "emqd did not start");
    await(backend_over_tls(), "a TLS client reaching the backend");
}

#define TLS_ARGS "--tls-cert", certs.server, "--tls-key", certs.server_key

/* ---- raw OpenSSL, for what libemq does not show ------------------------ */

/* A blocking TLS connection with OpenSSL directly: the server's
 * certificate is verified against certs.ca. NULL if the handshake fails. */
static SSL *raw_tls_to(int port, SSL_CTX **ctx_out);

static SSL *raw_tls(SSL_CTX **ctx_out)
{
    return raw_tls_to(fx_emqd.port, ctx_out);
}

/* raw_tls to another port of the daemon (its HTTP listener). */
static SSL *raw_tls_to(int port, SSL_CTX **ctx_out)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    cr_assert_not_null(ctx);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    cr_assert_eq(SSL_CTX_load_verify_locations(ctx, certs.ca, NULL), 1);
    cr_assert_eq(SSL_CTX_use_certificate_file(ctx, certs.client, SSL_FILETYPE_PEM), 1);
    cr_assert_eq(SSL_CTX_use_PrivateKey_file(ctx, certs.client_key, SSL_FILETYPE_PEM), 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    *ctx_out = ctx;
    if (SSL_connect(ssl) != 1) {
        SSL_free(ssl);
        close(fd);
        return NULL;
    }
    return ssl;
}

static void raw_close(SSL *ssl, SSL_CTX *ctx)
{
    int fd = SSL_get_fd(ssl);
    SSL_free(ssl);
    close(fd);
    SSL_CTX_free(ctx);
}

/* The common name of the certificate the server showed ssl. */
static void peer_cn(SSL *ssl, char *buf, size_t cap)
{
    X509 *x = SSL_get1_peer_certificate(ssl);
    cr_assert_not_null(x);
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, buf, (int)cap);
    X509_free(x);
}

/* Read one line from ssl (blocking) into buf; its length, or -1. */
static int raw_line(SSL *ssl, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        int r = SSL_read(ssl, buf + n, 1);
        if (r <= 0)
            return -1;
        if (buf[n] == '\n') {
            buf[n] = '\0';
            return (int)n;
        }
        n++;
    }
    return -1;
}

/* ---- raw TCP, for clients that send nothing or garbage ---------------- */

static int raw_tcp(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)fx_emqd.port)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* The daemon closed fd within timeout_ms: whatever it wrote first (an
 * alert, an error line) is read and dropped, then end of file or a reset. */
static bool raw_closed(int fd, int timeout_ms)
{
    char junk[4096];
    long long end = wait_now_ms() + timeout_ms;
    for (;;) {
        long long left = end - wait_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            return false;
        ssize_t n = recv(fd, junk, sizeof(junk), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return true;
        if (n < 0)
            return false;
    }
}

/* ---- end to end -------------------------------------------------------- */

Test(tls, libemq_enqueue_stream_complete_over_tls)
{
    start((const char *const[]){TLS_ARGS, NULL});
    struct emq *c = NULL;
    cr_assert_eq(tls_connect(&c, NULL, NULL), EMQ_OK, "%s", emq_errmsg(c));
    json_t *payload = json_pack("{s:s}", "secret", "over tls");
    struct emq_enqueued e;
    cr_assert_eq(emq_enqueue(c, "q", payload, NULL, &e), EMQ_OK, "%s", emq_errmsg(c));
    json_decref(payload);
    cr_assert_eq(emq_stream(c, "q", 1, 0, true), EMQ_OK, "%s", emq_errmsg(c));
    struct emq_job *job = NULL;
    cr_assert_eq(emq_next_job(c, &job, wait_deadline_ms(0)), EMQ_OK, "%s", emq_errmsg(c));
    cr_assert_not_null(job, "no job pushed over TLS");
    cr_assert_str_eq(job->job, e.job);
    cr_assert_str_eq(json_string_value(json_object_get(job->payload, "secret")), "over tls");
    cr_assert_eq(emq_complete(c, job), EMQ_OK, "%s", emq_errmsg(c));
    emq_job_free(job);
    emq_close(c);
    /* The same port still takes plain clients (no tls-only). */
    struct tc_conn *p = fx_conn();
    json_t *r = tc_call(p, "{\"op\":\"ping\",\"ref\":1}");
    cr_assert(json_is_true(json_object_get(r, "ok")), "a plain ping on the TLS port failed");
    json_decref(r);
    tc_close(p);
}

/* Requests pipelined in one TLS write take effect, and are answered, in
 * the order sent; with max-inflight 4 the connection's reads pause and
 * resume many times on the way (lines already decrypted wait in the
 * frame reader, as a plain connection's do). */
Test(tls, pipelined_requests_answer_in_order)
{
    start((const char *const[]){TLS_ARGS, "--max-inflight", "4", NULL});
    SSL_CTX *ctx;
    SSL *ssl = raw_tls(&ctx);
    cr_assert_not_null(ssl, "TLS handshake failed");
    enum { N = 200 };
    static char batch[N * 128];
    size_t len = 0;
    for (int i = 1; i <= N; i++)
        len += (size_t)snprintf(batch + len, sizeof(batch) - len,
                                "{\"op\":\"enqueue\",\"queue\":\"p\",\"job\":\"JOB%026d\","
                                "\"payload\":%d,\"ref\":%d}\n",
                                i, i, i);
    cr_assert_eq(SSL_write(ssl, batch, (int)len), (int)len);
    char line[512];
    for (int i = 1; i <= N; i++) {
        cr_assert_geq(raw_line(ssl, line, sizeof(line)), 0, "reply %d missing", i);
        json_t *r = json_loads(line, 0, NULL);
        cr_assert_eq(json_integer_value(json_object_get(r, "ref")), i, "out of order: %s", line);
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", line);
        json_decref(r);
    }
    /* And the queue holds them in that order: a claim of all of them. */
    const char claim[] = "{\"op\":\"claim\",\"queue\":\"p\",\"count\":200,\"flat\":true,\"ref\":"
                         "9999}\n";
    cr_assert_eq(SSL_write(ssl, claim, (int)sizeof(claim) - 1), (int)sizeof(claim) - 1);
    static char big[1 << 20];
    cr_assert_geq(raw_line(ssl, big, sizeof(big)), 0);
    json_t *r = json_loads(big, 0, NULL);
    json_t *jobs = json_object_get(r, "jobs");
    cr_assert_eq(json_array_size(jobs), N, "%s", big);
    for (size_t i = 0; i < N; i++)
        cr_assert_eq(json_integer_value(json_object_get(json_array_get(jobs, i), "payload")),
                     (json_int_t)i + 1);
    json_decref(r);
    raw_close(ssl, ctx);
}

/* TLS connections decrypt into the daemon's shared read buffer, as
 * plain ones read into it: a line split across records (and reads) while
 * a plain connection's reads go through that buffer arrives whole; the
 * connection then sits idle (it keeps no buffer of its own) and goes back
 * to work with pipelined requests, answered in order. */
Test(tls, a_split_line_survives_other_reads_and_the_connection_goes_idle_and_back)
{
    start((const char *const[]){TLS_ARGS, NULL});
    SSL_CTX *ctx;
    SSL *ssl = raw_tls(&ctx);
    cr_assert_not_null(ssl, "TLS handshake failed");
    enum { PAYLOAD = 5000, FIRST = 2000 };
    static char line[PAYLOAD + 128];
    int o = snprintf(line, 128, "{\"op\":\"enqueue\",\"queue\":\"split\",\"payload\":\"");
    memset(line + o, 's', PAYLOAD);
    memcpy(line + o + PAYLOAD, "\"}\n", 3);
    int len = o + PAYLOAD + 3;
    cr_assert_eq(SSL_write(ssl, line, FIRST), FIRST);
    await(emqd_metric(&fx_emqd, "emqd_buffered_bytes") >= FIRST,
          "emqd to decrypt the first %d bytes of the line", FIRST);
    /* A plain connection's lines, through the same buffer. */
    struct tc_conn *p = fx_conn();
    for (int i = 0; i < 100; i++) {
        json_t *r =
            tc_call(p, "{\"op\":\"enqueue\",\"queue\":\"plain\",\"payload\":\"%0300d\"}", i);
        cr_assert(json_is_true(json_object_get(r, "ok")));
        json_decref(r);
    }
    cr_assert_eq(SSL_write(ssl, line + FIRST, len - FIRST), len - FIRST);
    char reply[512];
    cr_assert_geq(raw_line(ssl, reply, sizeof(reply)), 0);
    cr_assert(strstr(reply, "\"verdict\":\"enqueued\"") != NULL, "%s", reply);
    json_t *r = tc_call(p, "{\"op\":\"claim\",\"queue\":\"split\",\"count\":2,\"flat\":true}");
    json_t *jobs = json_object_get(r, "jobs");
    char *d = json_dumps(r, JSON_COMPACT);
    cr_assert_eq(json_array_size(jobs), 1, "%.300s", d);
    free(d);
    const char *got = json_string_value(json_object_get(json_array_get(jobs, 0), "payload"));
    cr_assert_not_null(got);
    cr_assert_eq(strlen(got), PAYLOAD);
    for (size_t i = 0; i < PAYLOAD; i++)
        cr_assert_eq(got[i], 's', "byte %zu of the payload", i);
    json_decref(r);

    /* Idle (answered, nothing in flight), then back: 50 pipelined. */
    static char batch[50 * 96];
    size_t blen = 0;
    for (int i = 1; i <= 50; i++)
        blen += (size_t)snprintf(
            batch + blen, sizeof(batch) - blen,
            "{\"op\":\"enqueue\",\"queue\":\"back\",\"payload\":%d,\"ref\":%d}\n", i, i);
    cr_assert_eq(SSL_write(ssl, batch, (int)blen), (int)blen);
    for (int i = 1; i <= 50; i++) {
        cr_assert_geq(raw_line(ssl, reply, sizeof(reply)), 0, "reply %d missing", i);
        json_t *e = json_loads(reply, 0, NULL);
        cr_assert_eq(json_integer_value(json_object_get(e, "ref")), i, "out of order: %s", reply);
        cr_assert(json_is_true(json_object_get(e, "ok")), "%s", reply);
        json_decref(e);
    }
    tc_close(p);
    raw_close(ssl, ctx);
}

Test(tls, emqctl_over_tls)
{
    start((const char *const[]){TLS_ARGS, "--tls-only", NULL});
    const char *bin = getenv("EMQCTL");
    cr_assert_not_null(bin);
    char cmd[1024], out[256] = "";
    snprintf(cmd, sizeof(cmd), "%s --addr tls://127.0.0.1:%d --ca %s ping 2>&1", bin, fx_emqd.port,
             certs.ca);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    cr_assert_eq(pclose(f), 0, "emqctl over tls:// failed: %s", out);
    cr_assert_str_eq(out, "pong\n");
    /* --tls with a plain address form, and an enqueue. */
    snprintf(cmd, sizeof(cmd),
             "%s --tls --ca %s --addr 127.0.0.1:%d enqueue q '{\"a\":1}' >/dev/null 2>&1", bin,
             certs.ca, fx_emqd.port);
    cr_assert_eq(system(cmd), 0, "emqctl --tls enqueue failed");
    /* Without the CA, the server's certificate is refused: exit 1. */
    snprintf(cmd, sizeof(cmd), "%s --addr tls://127.0.0.1:%d ping >/dev/null 2>&1", bin,
             fx_emqd.port);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "emqctl without --ca: status %d", st);
    /* And plain emqctl on a tls-only listener is refused. */
    snprintf(cmd, sizeof(cmd), "%s --addr 127.0.0.1:%d ping 2>&1", bin, fx_emqd.port);
    f = popen(cmd, "r");
    n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    st = pclose(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "plain emqctl on tls-only: %d", st);
    cr_assert(strstr(out, "TLS") != NULL, "no word of TLS in: %s", out);
    struct emq *c = NULL;
    cr_assert_eq(tls_connect(&c, NULL, NULL), EMQ_OK, "%s", emq_errmsg(c));
    long long depth = -1;
    cr_assert_eq(emq_depth(c, "q", NULL, &depth), EMQ_OK);
    cr_assert_eq(depth, 1, "emqctl's enqueue over TLS did not land");
    emq_close(c);
}

/* ---- refusals ---------------------------------------------------------- */

Test(tls, plain_client_on_tls_only_is_refused)
{
    start((const char *const[]){TLS_ARGS, "--tls-only", NULL});
    struct emq *good = NULL;
    cr_assert_eq(tls_connect(&good, NULL, NULL), EMQ_OK, "%s", emq_errmsg(good));
    struct tc_conn *p = fx_conn();
    cr_assert_eq(tc_send_line(p, "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1,\"ref\":1}"),
                 0);
    json_t *r = tc_read(p, wait_deadline_ms(0));
    cr_assert_not_null(r, "no answer to a plain client");
    cr_assert_str_eq(jstr(r, "error"), "EAUTH");
    json_decref(r);
    cr_assert(tc_read_eof(p, wait_deadline_ms(0)), "the plain connection stayed open");
    tc_close(p);
    long long depth = -1;
    cr_assert_eq(emq_depth(good, "q", NULL, &depth), EMQ_OK, "%s", emq_errmsg(good));
    cr_assert_eq(depth, 0, "a plain client's enqueue ran on a tls-only listener");
    emq_close(good);
    cr_assert(emqd_log_has(&fx_emqd, "plain connection refused: tls-only"));
}

Test(tls, client_certificates)
{
    start((const char *const[]){TLS_ARGS, "--tls-ca", certs.ca, "--tls-verify-client", "--tls-only",
                                NULL});
    /* One good client stays connected through every refusal. */
    struct emq *good = NULL;
    cr_assert_eq(tls_connect(&good, certs.client, certs.client_key), EMQ_OK, "%s",
                 emq_errmsg(good));
    await(emqd_log_has(&fx_emqd, "subject=\"CN = worker-one\""),
          "the client certificate's subject in the log");

    struct {
        const char *cert, *key, *why, *log;
    } bad[] = {
        {NULL, NULL, "no certificate", "TLS connection refused"},
        {certs.expired, certs.expired_key, "expired", "certificate has expired"},
        {certs.stranger, certs.stranger_key, "wrong CA", "unable to get local issuer"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct emq *c = NULL;
        int rc = tls_connect(&c, bad[i].cert, bad[i].key);
        cr_assert_eq(rc, EMQ_EIO, "a client with %s: %s (%s)", bad[i].why, emq_code_name(rc),
                     emq_errmsg(c));
        emq_close(c);
        await(emqd_log_has(&fx_emqd, bad[i].log), "'%s' logged for %s", bad[i].log, bad[i].why);
        cr_assert_eq(emq_ping(good), EMQ_OK, "the good client broke after %s", bad[i].why);
    }
    cr_assert(tls_ping(certs.client, certs.client_key), "a new good client is refused");
    emq_close(good);
}

Test(tls, wrong_server_ca_is_refused_by_the_client)
{
    start((const char *const[]){TLS_ARGS, NULL});
    struct emq_options o = {.host = "127.0.0.1",
                            .port = fx_emqd.port,
                            .tls = true,
                            .tls_ca = certs.other_ca,
                            .timeout_ms = wait_deadline_ms(0)};
    struct emq *c = NULL;
    cr_assert_eq(emq_connect(&c, &o), EMQ_EIO);
    cr_assert(strstr(emq_errmsg(c), "certificate") != NULL, "%s", emq_errmsg(c));
    emq_close(c);
}

/* The name libemq checks: tls_server_name instead of the host (the
 * certificate names localhost and 127.0.0.1), a name it does not carry
 * refused, and tls_no_verify taking any certificate. */
Test(tls, libemq_server_name_and_no_verify)
{
    start((const char *const[]){TLS_ARGS, NULL});
    struct emq_options o = {.host = "127.0.0.1",
                            .port = fx_emqd.port,
                            .tls = true,
                            .tls_ca = certs.ca,
                            .tls_server_name = "localhost",
                            .timeout_ms = wait_deadline_ms(0)};
    struct emq *c = NULL;
    cr_assert_eq(emq_connect(&c, &o), EMQ_OK, "%s", emq_errmsg(c));
    emq_close(c);
    o.tls_server_name = "queue.example";
    cr_assert_eq(emq_connect(&c, &o), EMQ_EIO, "a certificate for another name was taken");
    cr_assert(strstr(emq_errmsg(c), "mismatch") != NULL, "%s", emq_errmsg(c));
    emq_close(c);
    o.tls_ca = NULL; /* the system's CAs do not know the test CA... */
    o.tls_server_name = NULL;
    cr_assert_eq(emq_connect(&c, &o), EMQ_EIO);
    emq_close(c);
    o.tls_no_verify = true; /* ...unless nothing is verified */
    cr_assert_eq(emq_connect(&c, &o), EMQ_OK, "%s", emq_errmsg(c));
    cr_assert_eq(emq_ping(c), EMQ_OK);
    emq_close(c);
}

/* emq_parse_addr's tls:// form, and what it refuses. */
Test(tls_addr, parse_and_format)
{
    struct emq_options o = {0};
    char buf[64];
    cr_assert_eq(emq_parse_addr(&o, "tls://127.0.0.1:7712"), EMQ_OK);
    cr_assert(o.tls);
    cr_assert_str_eq(o.host, "127.0.0.1");
    cr_assert_eq(o.port, 7712);
    cr_assert_str_eq(emq_format_addr(&o, buf, sizeof(buf)), "tls://127.0.0.1:7712");
    cr_assert_eq(emq_parse_addr(&o, "tls://[::1]:7713"), EMQ_OK);
    cr_assert_str_eq(emq_format_addr(&o, buf, sizeof(buf)), "tls://[::1]:7713");
    struct emq_options p = {0};
    const char *const bad[] = {"tls://", "tls://7711", "tls://unix:/x", "tls:///tmp/s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(emq_parse_addr(&p, bad[i]), EMQ_EUSAGE, "%s was taken", bad[i]);
    cr_assert_not(p.tls, "a refused address changed the options");
    cr_assert_eq(emq_parse_addr(&p, "127.0.0.1:7711"), EMQ_OK);
    cr_assert_not(p.tls, "a plain address set tls");
}

/* Open TCP, send nothing (or only a TLS record's first byte): cut at the
 * idle timeout, while a client that keeps talking stays. */
Test(tls, stalled_handshake_is_cut_at_the_idle_timeout)
{
    start((const char *const[]){TLS_ARGS, "--idle-timeout-ms", "1500", NULL});
    int silent = raw_tcp(), half = raw_tcp();
    cr_assert_eq(send(half, "\x16", 1, 0), 1);
    struct emq *busy = NULL;
    cr_assert_eq(tls_connect(&busy, NULL, NULL), EMQ_OK, "%s", emq_errmsg(busy));
    bool silent_cut = false, half_cut = false;
    struct wait w;
    wait_begin(&w, 0);
    while (!(silent_cut && half_cut)) {
        cr_assert_eq(emq_ping(busy), EMQ_OK, "the talking client was cut: %s", emq_errmsg(busy));
        silent_cut = silent_cut || raw_closed(silent, 20);
        half_cut = half_cut || raw_closed(half, 20);
        if (!wait_again(&w))
            wait_failed(&w, "stalled handshakes cut (silent %d, half %d)", silent_cut, half_cut);
    }
    cr_assert_eq(emq_ping(busy), EMQ_OK, "%s", emq_errmsg(busy));
    cr_assert(emqd_log_has(&fx_emqd, "no TLS handshake in time"));
    emq_close(busy);
    close(silent);
    close(half);
}

/* With idle-timeout-ms 0 (never), auth-timeout-ms bounds the handshake:
 * a silent connection is not kept forever. */
Test(tls, handshake_bounded_when_idle_connections_are_kept)
{
    start((const char *const[]){TLS_ARGS, "--idle-timeout-ms", "0", "--auth-timeout-ms", "1000",
                                NULL});
    int silent = raw_tcp();
    cr_assert(raw_closed(silent, wait_deadline_ms(0)), "a silent connection was kept");
    close(silent);
    cr_assert(emqd_log_has(&fx_emqd, "no TLS handshake in time"));
    /* A connection that finished its handshake and then idles is kept. */
    struct emq *c = NULL;
    cr_assert_eq(tls_connect(&c, NULL, NULL), EMQ_OK, "%s", emq_errmsg(c));
    int probe = raw_tcp();
    cr_assert(raw_closed(probe, wait_deadline_ms(0)));
    close(probe);
    cr_assert_eq(emq_ping(c), EMQ_OK, "an idle TLS connection was cut: %s", emq_errmsg(c));
    emq_close(c);
}

Test(tls, garbage_before_the_handshake)
{
    start((const char *const[]){TLS_ARGS, "--tls-only", NULL});
    struct emq *good = NULL;
    cr_assert_eq(tls_connect(&good, NULL, NULL), EMQ_OK, "%s", emq_errmsg(good));
    /* A handshake record byte, then nonsense: the handshake fails. */
    int g = raw_tcp();
    static const char junk[] = "\x16\x03\x01\x00\x05hello, this is not a ClientHello\n";
    cr_assert_eq(send(g, junk, sizeof(junk) - 1, 0), (ssize_t)sizeof(junk) - 1);
    cr_assert(raw_closed(g, wait_deadline_ms(0)), "garbage after 0x16 not cut");
    close(g);
    await(emqd_log_has(&fx_emqd, "TLS connection refused"), "the failed handshake logged");
    /* Binary garbage that is not TLS at all: the tls-only refusal. */
    struct tc_conn *b = fx_conn();
    static const char bin[] = "\x00\xff\xfe garbage\n";
    cr_assert_eq(tc_send(b, bin, sizeof(bin) - 1), 0);
    json_t *r = tc_read(b, wait_deadline_ms(0));
    cr_assert_str_eq(jstr(r, "error"), "EAUTH");
    json_decref(r);
    tc_close(b);
    cr_assert_eq(emq_ping(good), EMQ_OK, "%s", emq_errmsg(good));
    cr_assert(tls_ping(NULL, NULL));
    emq_close(good);
}

/* ---- reload ------------------------------------------------------------ */

static void copy_file(const char *from, const char *to)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s.new' && mv '%s.new' '%s'", from, to, to, to);
    cr_assert_eq(system(cmd), 0);
}

Test(tls, sighup_reloads_the_certificate_for_new_connections)
{
    /* The daemon reads server.pem / server.key by name; the test replaces
     * their contents, as a renewal does. */
    char cert[160], key[160];
    snprintf(cert, sizeof(cert), "%s/live.pem", certs.dir);
    snprintf(key, sizeof(key), "%s/live.key", certs.dir);
    copy_file(certs.server, cert);
    copy_file(certs.server_key, key);
    start((const char *const[]){"--tls-cert", cert, "--tls-key", key, NULL});
    SSL_CTX *ctx_old;
    SSL *old = raw_tls(&ctx_old);
    cr_assert_not_null(old);
    char cn[64];
    peer_cn(old, cn, sizeof(cn));
    cr_assert_str_eq(cn, "emqd-one");

    copy_file(certs.server2, cert);
    copy_file(certs.server2_key, key);
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    await(emqd_log_has(&fx_emqd, "serial=07D2"), "the new certificate (serial 2002) loaded");

    SSL_CTX *ctx_new;
    SSL *fresh = raw_tls(&ctx_new);
    cr_assert_not_null(fresh, "no handshake after the reload");
    peer_cn(fresh, cn, sizeof(cn));
    cr_assert_str_eq(cn, "emqd-two", "a new connection got the old certificate");
    X509 *x = SSL_get1_peer_certificate(fresh);
    cr_assert_eq(ASN1_INTEGER_get(X509_get_serialNumber(x)), 2002);
    X509_free(x);

    /* The connection opened before the reload still works. */
    char line[256];
    const char ping[] = "{\"op\":\"ping\",\"ref\":1}\n";
    cr_assert_eq(SSL_write(old, ping, (int)sizeof(ping) - 1), (int)sizeof(ping) - 1);
    cr_assert_geq(raw_line(old, line, sizeof(line)), 0, "the old connection broke");
    cr_assert(strstr(line, "\"ok\":true") != NULL, "%s", line);
    raw_close(old, ctx_old);
    raw_close(fresh, ctx_new);

    /* A broken file at the next reload keeps the running certificate. */
    FILE *f = fopen(cert, "w");
    cr_assert_not_null(f);
    fputs("not a certificate\n", f);
    fclose(f);
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    await(emqd_log_has(&fx_emqd, "keeping the running certificate"), "the failed reload logged");
    cr_assert(tls_ping(NULL, NULL), "TLS broke after a failed reload");
}

/* ---- settings ---------------------------------------------------------- */

/* Settings that only mean something together are refused at start. */
Test(tls, settings_that_need_each_other)
{
    const char *bin = getenv("EMQD");
    cr_assert_not_null(bin);
    char cmd[1024];
    char no_key[300], no_ca[600];
    snprintf(no_key, sizeof(no_key), "--tls-cert %s", certs.server);
    snprintf(no_ca, sizeof(no_ca), "--tls-cert %s --tls-key %s --tls-verify-client", certs.server,
             certs.server_key);
    const char *const bad[] = {no_key, "--tls-only", no_ca, "--http-tls"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(cmd, sizeof(cmd), "%s --redis redis://127.0.0.1:%d %s >/dev/null 2>&1", bin,
                 fx_redis.port, bad[i]);
        int st = system(cmd);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "'%s' was accepted (%d)", bad[i], st);
    }
    /* A key that is not the certificate's. */
    snprintf(cmd, sizeof(cmd),
             "%s --redis redis://127.0.0.1:%d --tls-cert %s --tls-key %s 2>&1 | grep -q "
             "'tls-key.*mismatch'",
             bin, fx_redis.port, certs.server, certs.client_key);
    cr_assert_eq(system(cmd), 0, "a mismatched key was not refused by name");
}

/* Beyond loopback, client certificates on a tls-only listener protect
 * the listener as a token does; the start-up log names the protection. */
Test(tls, mtls_protects_a_non_loopback_listen)
{
    const char *bin = getenv("EMQD");
    char cmd[1200];
    snprintf(cmd, sizeof(cmd),
             "timeout -s KILL 20 %s --redis redis://127.0.0.1:%d --listen 0.0.0.0:1 "
             "--tls-cert %s --tls-key %s 2>&1 | grep -q 'refusing to listen'",
             bin, fx_redis.port, certs.server, certs.server_key);
    cr_assert_eq(system(cmd), 0, "TLS without a token or client certificates was let out");
    /* The fixture's port, now on every address. */
    start((const char *const[]){TLS_ARGS, "--tls-ca", certs.ca, "--tls-verify-client", "--tls-only",
                                NULL});
    cr_assert_eq(emqd_stop(&fx_emqd), 0);
    char any[32];
    snprintf(any, sizeof(any), "0.0.0.0:%d", fx_emqd.port);
    cr_assert_eq(
        emqd_restart(&fx_emqd, fx_redis.port,
                     (const char *const[]){TLS_ARGS, "--tls-ca", certs.ca, "--tls-verify-client",
                                           "--tls-only", "--listen", any, NULL}),
        0, "emqd refused a non-loopback listen protected by client certificates");
    await(tls_ping(certs.client, certs.client_key), "a client with a certificate served");
    cr_assert(emqd_log_has(&fx_emqd, "protection=mtls"), "the protection was not logged");
}

/* One HTTPS request to the daemon's HTTP listener: the whole answer
 * (the daemon closes after it) into buf; its length. */
static size_t https_get(const char *path, char *buf, size_t cap)
{
    SSL_CTX *ctx;
    SSL *ssl = raw_tls_to(fx_emqd.metrics_port, &ctx);
    cr_assert_not_null(ssl, "no TLS handshake on the HTTP listener");
    char cn[128];
    peer_cn(ssl, cn, sizeof(cn));
    cr_assert_str_eq(cn, "emqd-one", "the HTTP listener showed %s", cn);
    char req[256];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
    cr_assert_eq(SSL_write(ssl, req, n), n);
    size_t got = 0;
    int r;
    while (got + 1 < cap && (r = SSL_read(ssl, buf + got, (int)(cap - 1 - got))) > 0)
        got += (size_t)r;
    buf[got] = '\0';
    raw_close(ssl, ctx);
    return got;
}

/* http-tls: the HTTP listener (metrics, the dashboard) speaks HTTPS with
 * the protocol listener's certificate, and a plain HTTP request gets no
 * HTTP answer from it. */
Test(tls, the_http_listener_speaks_https)
{
    const char *const extra[] = {TLS_ARGS, "--http-tls", NULL};
    start(extra);
    static char page[1 << 20];
    https_get("/metrics", page, sizeof(page));
    cr_assert(strncmp(page, "HTTP/1.1 200", 12) == 0, "GET /metrics: %.200s", page);
    cr_assert_not_null(strstr(page, "emqd_"), "no metrics in %.300s", page);
    https_get("/", page, sizeof(page));
    cr_assert(strncmp(page, "HTTP/1.1 200", 12) == 0, "GET /: %.200s", page);
    cr_assert_not_null(strstr(page, "text/html"), "the dashboard page: %.300s", page);

    /* Plain HTTP on it: refused by the TLS layer, never answered. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)fx_emqd.metrics_port)};
    sa.sin_addr.s_addr = htonl(0x7f000001);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    static const char plain[] = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    cr_assert_eq(send(fd, plain, sizeof(plain) - 1, 0), (ssize_t)(sizeof(plain) - 1));
    char first[8] = {0};
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, wait_deadline_ms(0)) == 1)
        (void)recv(fd, first, sizeof(first) - 1, MSG_PEEK);
    cr_assert(strncmp(first, "HTTP/", 5) != 0, "a plain request was answered over HTTPS");
    cr_assert(raw_closed(fd, wait_deadline_ms(0)), "the plain connection stayed open");
    close(fd);
    /* The protocol listener is unaffected. */
    cr_assert(tls_ping(certs.client, certs.client_key));
}
