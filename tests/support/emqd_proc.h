/* emqd_proc: the real emqd binary ($EMQD) for integration tests, on a free
 * loopback port, and a tiny blocking line client that speaks its protocol. */
#ifndef EMQ_TEST_EMQD_PROC_H
#define EMQ_TEST_EMQD_PROC_H

#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

/* One running emqd child. */
struct emqd_proc {
    pid_t pid;
    int port;
};

/* Start $EMQD against redis on 127.0.0.1:redis_port (0: its embedded
 * default backend; pass --data-dir in extra), listening on a free
 * port; extra is a NULL-terminated list of further arguments or NULL. Waits
 * until it accepts a TCP connection. Returns 0 or -errno. */
int emqd_start(struct emqd_proc *p, int redis_port, const char *const *extra);

/* Wait (up to 5 s) until a backend op (depth) answers ok: emqd accepts
 * connections before its Redis pool is connected. 0 or -ETIMEDOUT. */
int emqd_await_backend(struct emqd_proc *p);

/* SIGTERM it and reap it: its wait status as an exit code (128+signal if it
 * died of a signal, -1 if it had to be SIGKILLed after 10 s). */
int emqd_stop(struct emqd_proc *p);

/* SIGKILL it and reap it (safe to call when already stopped). */
void emqd_kill(struct emqd_proc *p);

/* A blocking connection to emqd with a line buffer. */
struct emq_conn {
    int fd;
    size_t len;
    char buf[1 << 20];
};

/* Connect to 127.0.0.1:port; NULL on failure. */
struct emq_conn *emq_connect(int port);

/* Close and free; returns NULL. */
struct emq_conn *emq_close(struct emq_conn *c);

/* Write all of data (no newline is added). 0 or -errno. */
int emq_send(struct emq_conn *c, const char *data, size_t len);

/* Write line plus a newline. */
int emq_send_line(struct emq_conn *c, const char *line);

/* Read one line and parse it; NULL on timeout, EOF or bad JSON. */
json_t *emq_read(struct emq_conn *c, int timeout_ms);

/* True if the peer closed the connection within timeout_ms (no more lines). */
int emq_read_eof(struct emq_conn *c, int timeout_ms);

/* Send one request (printf-style JSON text) and read its reply (5 s).
 * Caller owns the result; NULL on timeout. */
json_t *emq_call(struct emq_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The reply's "error" code, or "" if none. */
const char *emq_error(const json_t *reply);

/* True if reply is {"ok":true,...}. */
int emq_ok(const json_t *reply);

/* Milliseconds on a monotonic clock. */
long long emq_now_ms(void);

/* Sleep ms milliseconds. */
void emq_sleep_ms(long ms);

#endif
