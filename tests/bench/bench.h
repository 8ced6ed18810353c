/* bench: the shared state of emq-bench, a loopback load generator for emqd
 * (and, for comparison, beanstalkd). One libuv loop drives every
 * connection; nothing blocks. emq_bench.c holds the run; bench_opts.c the
 * options; bench_report.c the figures; bench_conn.c the connection
 * plumbing; bench_emq.c and bench_bs.c the two wire protocols. */
#ifndef EMQ_BENCH_H
#define EMQ_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Which server the run speaks to. */
enum bench_proto { BENCH_EMQ, BENCH_BEANSTALK };

/* What a connection does. */
enum bench_role { BENCH_PRODUCER, BENCH_WORKER, BENCH_IDLE, BENCH_ADMIN, BENCH_LONE };

/* How a worker settles each job it is given. */
enum bench_settle { BENCH_COMPLETE, BENCH_FAIL, BENCH_DEAD };

/* A growable byte buffer (reads and pending writes). */
struct bench_buf {
    char *data;
    size_t len, cap;
};

/* A sample set of latencies in nanoseconds, sorted for percentiles. */
struct bench_lat {
    uint64_t *ns;
    size_t n, cap;
};

struct bench;
struct tls;
struct tls_ctx;

/* One connection: a producer, a worker or an idle holder. */
struct bench_conn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    struct bench *b;
    enum bench_role role;
    bool open, closing;
    struct bench_buf in, out;
    /* Producer: send times and job counts of the requests in flight, in
     * order (replies come in request order). */
    uint64_t *fifo_t;
    uint32_t *fifo_n;
    size_t fifo_head, fifo_len, fifo_cap;
    uv_timer_t tick; /* producer at a fixed rate */
    bool tick_on;
    /* beanstalk worker: reserves outstanding */
    unsigned reserves;
    unsigned index;    /* in bench.conns */
    uint64_t requests; /* producer: requests sent (--queues rotates over them) */
    char queue[80];    /* worker: the queue its stream is on */
    /* With --tls-ca: its TLS state (util/tls.h, client side), and whether
     * the handshake is done (the protocol starts then). */
    struct tls *tls;
    bool tls_up;
    /* Worker with --hold: the settle lines of the jobs it holds, sent
     * only once every job is leased. */
    struct bench_buf held;
};

/* Options and counters of one run. */
struct bench {
    uv_loop_t *loop;
    enum bench_proto proto;
    const char *host;
    int port;
    const char *queue;
    unsigned queues; /* > 1: queue0..queue(queues-1), producers rotating, worker i on i % queues */
    struct tls_ctx *tls; /* --tls-ca: every emqd connection speaks TLS */
    unsigned producers, workers, idle;
    unsigned batch, pipeline, credit, groups;
    uint64_t jobs;    /* jobs to enqueue */
    unsigned payload; /* payload bytes */
    double duration;  /* hard cap, seconds */
    unsigned rate;    /* jobs/s per producer (0 = as fast as allowed) */
    bool prefill;     /* enqueue everything before workers start */
    bool json;
    int emqd_pid;               /* to read VmRSS around the idle connections */
    uint64_t heavy;             /* fairness shape: heavy backlog, */
    unsigned light, light_jobs; /* then light groups of light_jobs each */
    /* Phases (--claim, --hold, --settle, --marks): lease by claim rather
     * than by stream; hold every lease until all jobs are leased, then
     * settle them all; how to settle; and a line on stdout and one
     * awaited on stdin at each phase boundary, so the caller can read
     * Redis' counters there. */
    bool claim, hold, marks, settling;
    enum bench_settle settle;
    /* Tenant settings (--weights, --group-rate, sent by one admin
     * connection before the run): group g's weight is weights[g % nweights];
     * the first rate_groups groups are limited to rate_max per rate_per_ms.
     * With weighted_jobs the jobs are spread in proportion to the weights
     * (pattern: each group g repeated by its weight). */
    unsigned *weights, nweights;
    bool weighted_jobs;
    unsigned *pattern, npattern;
    unsigned rate_max, rate_per_ms, rate_groups;
    unsigned setup_sent, setup_ok;
    /* --window W: deliveries per group among the first W, against each
     * group's weighted share. */
    uint64_t window;
    uint64_t *served, *queued; /* per group */
    /* --watch G: the push times of group G's jobs (achieved rate). */
    long watch;
    struct bench_lat watch_t;
    /* --stop-ms S: end the run S ms after the workers start. */
    uint64_t stop_ms;
    uv_timer_t stop_timer;
    bool stop_on;
    /* --lone N: one more tenant, TENlone, enqueueing N single jobs at
     * lone_rate per second once the workers start (after a prefill of the
     * other groups), its enqueue -> push times kept apart; lone_weight is
     * its weight (0 = none set). */
    unsigned lone, lone_rate, lone_weight;
    uint64_t lone_sent, lone_acked, lone_enqueued;
    struct bench_lat lone_wait;

    struct bench_conn *conns;
    unsigned nconns, connected, idle_ready, idle_opened;
    char *pad; /* payload padding */

    /* counters */
    uint64_t sent, acked, enqueued, enq_errors;
    uint64_t pushed, completed, settle_errors;
    uint64_t t_start, t_enq_done, t_work_start, t_first_push, t_last_push, t_last_done;
    bool workers_started, stopping, timed_out;
    struct bench_lat rtt, e2p;
    /* fairness */
    uint64_t *light_last; /* per light group: delivery index of its last job */
    unsigned *light_seen;
    unsigned light_done;
    /* memory */
    long rss_before_kb, rss_idle_kb, rss_after_kb;
    uv_timer_t deadline;
    char err[256];
};

/* bench_conn.c */
int bench_conns_open(struct bench *b, unsigned from, unsigned to, enum bench_role role);
void bench_conn_flush(struct bench_conn *c);
void bench_buf_put(struct bench_buf *buf, const void *p, size_t n);
void bench_buf_printf(struct bench_buf *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void bench_lat_add(struct bench_lat *l, uint64_t ns);
uint64_t bench_lat_pct(struct bench_lat *l, double pct);
void bench_fifo_push(struct bench_conn *c, uint64_t t, uint32_t n);
int bench_fifo_pop(struct bench_conn *c, uint64_t *t, uint32_t *n);
void bench_acked(struct bench *b, uint64_t t0, uint32_t n, uint64_t k);
void bench_stop(struct bench *b);
void bench_check_done(struct bench *b);
void bench_start_workers(struct bench *b);
void bench_idle_ready(struct bench *b);
void bench_setup_done(struct bench *b);
int bench_group_of(const struct bench *b, uint64_t job, char *out, size_t cap);
long bench_group_index(const struct bench *b, uint64_t job);
void bench_mark(struct bench *b, const char *phase);
size_t bench_payload(const struct bench *b, char *out, size_t cap);
uint64_t bench_parse_t(const char *p, const char *end);

/* bench_opts.c */
int bench_parse_args(struct bench *b, int argc, char **argv);
unsigned bench_weight_of(const struct bench *b, unsigned g);

/* bench_report.c */
void bench_report(struct bench *b);

/* bench_emq.c */
void bench_emq_connected(struct bench_conn *c);
size_t bench_emq_input(struct bench_conn *c, const char *p, size_t n);
void bench_emq_produce(struct bench_conn *c);
void bench_emq_lone(struct bench_conn *c);
void bench_emq_settle_held(struct bench *b);

/* bench_bs.c */
void bench_bs_connected(struct bench_conn *c);
size_t bench_bs_input(struct bench_conn *c, const char *p, size_t n);
void bench_bs_produce(struct bench_conn *c);

#endif
