/* emqd_proc: the real emqd binary ($EMQD) for integration tests, on a free
 * loopback port, and a tiny blocking line client that speaks its protocol. */
#ifndef EMQ_TEST_EMQD_PROC_H
#define EMQ_TEST_EMQD_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

/* One running emqd child. */
struct emqd_proc {
    pid_t pid;
    int port;
    int metrics_port; /* its /metrics, or 0 when extra chose its own */
    char log[64];     /* its stderr goes here when set (emqd_log_to_file) */
};

/* Start $EMQD against redis on 127.0.0.1:redis_port (0: its embedded
 * default backend; pass --data-dir in extra), listening on a free
 * port; extra is a NULL-terminated list of further arguments or NULL.
 * Unless extra has --metrics, it serves /metrics on another free port, so
 * tests can wait on the daemon's own counters (emqd_metric). Waits until
 * it accepts a TCP connection. Returns 0 or -errno. */
int emqd_start(struct emqd_proc *p, int redis_port, const char *const *extra);

/* Start it again on the port it had (after emqd_kill or emqd_stop), so
 * clients that reconnect to that port find it. Returns 0 or -errno. */
int emqd_restart(struct emqd_proc *p, int redis_port, const char *const *extra);

/* Send the stderr (its log) of p, from its next start on, to a new
 * temporary file, appended across restarts. 0 or -errno. */
int emqd_log_to_file(struct emqd_proc *p);

/* True if p's log file holds needle (in its first MiB). */
bool emqd_log_has(const struct emqd_proc *p, const char *needle);

/* How many times p's log file holds needle (in its first MiB). */
int emqd_log_count(const struct emqd_proc *p, const char *needle);

/* Run $EMQD with args (a shell fragment) to its exit and return its exit
 * code (-1 if it did not exit by itself within the wait deadline); its
 * stderr goes into out. For refusals: emqd must exit on its own. */
int emqd_run(const char *args, char *out, size_t cap);

/* The same for the program named by environment variable env ("EMQCTL"):
 * its stdout and stderr go into out. */
int emqd_run_tool(const char *env, const char *args, char *out, size_t cap);

/* Write text to a new temporary file; its path goes into path (32 bytes). */
void emqd_write_temp(char *path, const char *text);

/* Remove p's log file, if it has one; its stderr is inherited again. */
void emqd_log_remove(struct emqd_proc *p);

/* Make the emqd children started from now on give freed memory back, so
 * that their VmRSS shows what they keep: a small quarantine under ASan
 * (by default 256 MB of freed memory still counts) and, under glibc, large
 * blocks mmapped. For tests that bound emqd's memory. */
void emqd_rss_shows_live_memory(void);

/* Its resident memory (VmRSS) in KiB, or -1. */
long emqd_rss_kb(const struct emqd_proc *p);

/* Wait until a backend op (depth) answers ok: emqd accepts connections
 * before its Redis pool is connected. 0 or -ETIMEDOUT. */
int emqd_await_backend(struct emqd_proc *p);

/* One sample of a series of its /metrics, named as the exposition writes
 * it up to the value (e.g. "emqd_pool_inflight" or
 * "emqd_jobs_total{queue=\"q\",event=\"claimed\"}"); -1 when it has no
 * metrics port, does not answer, or has no such series. */
long long emqd_metric(const struct emqd_proc *p, const char *series);

/* True if no backend call of the daemon is awaiting its answer: every
 * claim it made for its parked consumers, every upkeep pass and every
 * release is back and handled. A request a client sent before asking
 * this has been read by then (the daemon handles sockets in the order
 * they became readable). */
bool emqd_quiet(const struct emqd_proc *p);

/* SIGTERM it and reap it: its wait status as an exit code (128+signal if it
 * died of a signal, -1 if it had to be SIGKILLed at the deadline). */
int emqd_stop(struct emqd_proc *p);

/* SIGKILL it and reap it (safe to call when already stopped). */
void emqd_kill(struct emqd_proc *p);

/* A blocking connection to emqd with a line buffer. */
struct tc_conn {
    int fd;
    size_t len;
    char buf[1 << 20];
};

/* Connect to 127.0.0.1:port; NULL on failure. */
struct tc_conn *tc_connect(int port);

/* Close and free; returns NULL. */
struct tc_conn *tc_close(struct tc_conn *c);

/* Write all of data (no newline is added). 0 or -errno. */
int tc_send(struct tc_conn *c, const char *data, size_t len);

/* Write line plus a newline. */
int tc_send_line(struct tc_conn *c, const char *line);

/* Read one line and parse it; NULL on timeout, EOF or bad JSON. */
json_t *tc_read(struct tc_conn *c, int timeout_ms);

/* True if the peer closed the connection within timeout_ms (no more lines). */
int tc_read_eof(struct tc_conn *c, int timeout_ms);

/* Send one request (printf-style JSON text) and read its reply (within
 * wait_deadline_ms(0): a reply that does not come is a hang).
 * Caller owns the result; NULL on timeout. */
json_t *tc_call(struct tc_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The reply's "error" code, or "" if none. */
const char *tc_error(const json_t *reply);

/* True if reply is {"ok":true,...}. */
int tc_ok(const json_t *reply);

#endif
