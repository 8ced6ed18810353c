/* proxy: a TCP proxy in front of a test's redis-server, on a free loopback
 * port, run by a thread of its own, that can lose replies and hold
 * requests on purpose: the faults where a call's outcome is unknown to
 * the daemon (it ran at Redis, but its answer never came back; or it is
 * still on its way and runs later). */
#ifndef EMQ_TEST_PROXY_H
#define EMQ_TEST_PROXY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* What the proxy does with bytes from now on. */
enum proxy_mode {
    PROXY_PASS, /* both ways, as they come */
    /* Requests reach Redis, but the first reply bytes of any connection
     * are dropped and that connection (both sides) is closed: every call
     * then in flight ran, or may have, and its caller never hears. */
    PROXY_CUT,
    /* Requests of the connections open now are kept in the proxy, not
     * sent; their clients closing does not close the Redis side. New
     * connections pass. proxy_release() sends what was kept. */
    PROXY_HOLD,
};

struct proxy_pair;

struct proxy {
    int port;        /* where clients connect */
    int target_port; /* the Redis behind it, on 127.0.0.1 */
    int listen_fd;
    int wake[2]; /* a pipe that wakes the thread */
    pthread_t thread;
    pthread_mutex_t lock;
    enum proxy_mode mode;
    bool stop;
    struct proxy_pair *pairs;
    size_t accepted; /* connections taken, ever */
    size_t cut;      /* connections closed by PROXY_CUT */
    size_t held;     /* request bytes kept under PROXY_HOLD, not yet released */
    /* Held connections whose Redis side closed (Redis killed that client,
     * before or after the release: what it held never ran), and released
     * ones that got an answer (the client was alive and ran what it was
     * sent). */
    size_t released_closed, released_answered;
};

/* Start a proxy to 127.0.0.1:target_port in PROXY_PASS. 0 or -errno. */
int proxy_start(struct proxy *p, int target_port);

/* Switch mode (see enum proxy_mode). */
void proxy_set_mode(struct proxy *p, enum proxy_mode mode);

/* Send what PROXY_HOLD kept, each held connection's bytes followed by
 * marker (a whole RESP command, e.g. a PING, whose answer shows the Redis
 * side still ran commands), and count, as the Redis sides answer or
 * close, released_answered and released_closed. The mode becomes
 * PROXY_PASS. */
void proxy_release(struct proxy *p, const char *marker, size_t marker_len);

/* A snapshot of the counters, under the lock. */
void proxy_counts(struct proxy *p, size_t *accepted, size_t *cut, size_t *held,
                  size_t *released_closed, size_t *released_answered);

/* Stop the thread and close every socket. */
void proxy_stop(struct proxy *p);

#endif
