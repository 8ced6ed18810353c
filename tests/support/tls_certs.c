/* tls_certs: see tls_certs.h. */
#include "tls_certs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Run a shell command in t->dir; 0 or -1 (its output goes to stderr). */
static int sh(const struct tls_certs *t, const char *cmd)
{
    char line[2048];
    snprintf(line, sizeof(line),
             "cd '%s' && { %s ; } >openssl.log 2>&1 || { cat openssl.log >&2; exit 1; }", t->dir,
             cmd);
    int rc = system(line);
    if (rc != 0)
        fprintf(stderr, "tls_certs: failed: %s\n", cmd);
    return rc == 0 ? 0 : -1;
}

/* The `openssl ca` configuration, for the one certificate whose dates
 * must lie in the past (openssl x509 -req cannot set a start date; `ca`
 * takes -startdate and -enddate), so that "expired" needs no clock
 * tricks and no waiting. */
static const char ca_conf[] =
    "[ca]\\ndefault_ca = test\\n"
    "[test]\\ndir = .\\ndatabase = index.txt\\nserial = serial\\nnew_certs_dir = .\\n"
    "certificate = ca.pem\\nprivate_key = ca.key\\ndefault_md = sha256\\n"
    "policy = any\\nunique_subject = no\\ncopy_extensions = none\\n"
    "[any]\\ncommonName = supplied\\n";

int tls_certs_make(struct tls_certs *t)
{
    snprintf(t->dir, sizeof(t->dir), "/tmp/emq-tls-XXXXXX");
    if (mkdtemp(t->dir) == NULL)
        return -1;
#define PATH(field, name) snprintf(t->field, sizeof(t->field), "%s/%s", t->dir, name)
    PATH(ca, "ca.pem");
    PATH(server, "server.pem");
    PATH(server_key, "server.key");
    PATH(server2, "server2.pem");
    PATH(server2_key, "server2.key");
    PATH(client, "client.pem");
    PATH(client_key, "client.key");
    PATH(expired, "expired.pem");
    PATH(expired_key, "expired.key");
    PATH(other_ca, "other-ca.pem");
    PATH(stranger, "stranger.pem");
    PATH(stranger_key, "stranger.key");
#undef PATH
    char conf[600];
    snprintf(conf, sizeof(conf), "printf '%s' > ca.cnf && : > index.txt && echo 5005 > serial",
             ca_conf);
    const char *const steps[] = {
        /* Two CAs. */
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out "
        "ca.pem -days 30 "
        "-subj '/CN=emq test CA'",
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout other-ca.key "
        "-out other-ca.pem "
        "-days 30 -subj '/CN=other CA'",
        /* The server certificates, for the address the tests connect to. */
        "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext",
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out "
        "server.csr "
        "-subj '/CN=emqd-one'",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -set_serial 1001 -days 30 "
        "-extfile san.ext -out server.pem",
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server2.key -out "
        "server2.csr "
        "-subj '/CN=emqd-two'",
        "openssl x509 -req -in server2.csr -CA ca.pem -CAkey ca.key -set_serial 2002 -days 30 "
        "-extfile san.ext -out server2.pem",
        /* Client certificates: good, expired, from the other CA. */
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client.key -out "
        "client.csr "
        "-subj '/CN=worker-one'",
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -set_serial 3003 -days 30 "
        "-out client.pem",
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout stranger.key -out "
        "stranger.csr "
        "-subj '/CN=stranger'",
        "openssl x509 -req -in stranger.csr -CA other-ca.pem -CAkey other-ca.key "
        "-set_serial 4004 -days 30 -out stranger.pem",
        conf,
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout expired.key -out "
        "expired.csr "
        "-subj '/CN=worker-expired'",
        "openssl ca -batch -config ca.cnf -in expired.csr -out expired.pem -notext "
        "-startdate 20200101000000Z -enddate 20200102000000Z",
    };
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (sh(t, steps[i]) != 0)
            return -1;
    return 0;
}

void tls_certs_remove(struct tls_certs *t)
{
    char cmd[128];
    if (t->dir[0] == '\0')
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "tls_certs: cannot remove %s\n", t->dir);
    t->dir[0] = '\0';
}
