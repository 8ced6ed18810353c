/* tls_certs: a throw-away PKI for TLS tests, made with the openssl
 * command line in a temporary directory: a test CA, a server certificate
 * for 127.0.0.1 / localhost, a second one (for a reload), client
 * certificates (valid, expired, from another CA) and that other CA. */
#ifndef EMQ_TEST_TLS_CERTS_H
#define EMQ_TEST_TLS_CERTS_H

/* The files, each a path in dir. Keys are unencrypted PEM. */
struct tls_certs {
    char dir[64];
    char ca[128];     /* the test CA's certificate ("CN=emq test CA") */
    char server[128]; /* "CN=emqd-one", serial 1001, signed by the CA */
    char server_key[128];
    char server2[128]; /* "CN=emqd-two", serial 2002, signed by the CA */
    char server2_key[128];
    char client[128]; /* "CN=worker-one", signed by the CA */
    char client_key[128];
    char expired[128]; /* "CN=worker-expired", by the CA, valid in 2020 only */
    char expired_key[128];
    char other_ca[128]; /* another CA ("CN=other CA") */
    char stranger[128]; /* "CN=stranger", signed by the other CA */
    char stranger_key[128];
};

/* Make them all (a few seconds: RSA keys). 0, or -1 with a message on
 * stderr. */
int tls_certs_make(struct tls_certs *t);

/* Remove the directory and everything in it. */
void tls_certs_remove(struct tls_certs *t);

#endif
