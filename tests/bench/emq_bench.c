/* emq-bench: a loopback load generator for emqd (and beanstalkd, for the
 * comparison in tests/bench/compare). N producer connections enqueue (or
 * enqueue_many with batch B), M worker connections stream with credit C (or
 * claim) and settle each job, over G groups or a fairness shape (one heavy
 * backlog, then light groups), optionally with tenant weights and rates set
 * first. One phase at a time can be run (prefill, lease, settle, with a
 * pause between them for the caller to read Redis' counters). Reports
 * enqueue / claim / end-to-end jobs per second, per-group shares, a
 * rate-limited group's achieved rate, a lone tenant's wait
 * and p50/p99/p99.9 of the enqueue round trip and of enqueue -> push (the
 * send time rides in the payload, on the monotonic clock). Optionally holds
 * many idle connections and reports emqd's memory per connection. Bounded by
 * a job count and a hard time cap. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tls.h"

/* Idle connections are opened this many at a time, so the listen backlog
 * never overflows (an overflow costs a 1 s SYN retry). */
#define IDLE_CHUNK 256

static long rss_kb(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static void close_cb(uv_handle_t *h)
{
    (void)h;
}

void bench_stop(struct bench *b)
{
    if (b->stopping)
        return;
    b->stopping = true;
    if (!b->t_last_done)
        b->t_last_done = uv_hrtime();
    uv_close((uv_handle_t *)&b->deadline, close_cb);
    if (b->stop_on)
        uv_close((uv_handle_t *)&b->stop_timer, close_cb);
    for (unsigned i = 0; i < b->nconns; i++) {
        struct bench_conn *c = &b->conns[i];
        if (!c->b)
            continue;
        c->open = false;
        if (c->tick_on)
            uv_close((uv_handle_t *)&c->tick, close_cb);
        uv_close((uv_handle_t *)&c->tcp, close_cb);
    }
}

static void finish(struct bench *b)
{
    b->t_last_done = uv_hrtime();
    if (b->emqd_pid)
        b->rss_after_kb = rss_kb(b->emqd_pid);
    bench_stop(b);
}

void bench_check_done(struct bench *b)
{
    if (b->stopping)
        return;
    if (b->light) {
        if (b->light_done == b->light)
            finish(b);
    } else if (b->producers + b->workers == 0) {
        if (b->idle_ready == b->idle)
            finish(b);
    } else if (b->stop_ms) {
        return; /* the stop timer ends it */
    } else if (b->acked == b->jobs && b->lone_acked == b->lone) {
        if (b->workers == 0 || b->completed + b->settle_errors >= b->enqueued + b->lone_enqueued)
            finish(b);
    }
}

static void tick_cb(uv_timer_t *t)
{
    struct bench_conn *c = t->data;
    if (!c->open || c->b->stopping)
        return;
    if (c->role == BENCH_LONE)
        bench_emq_lone(c);
    else if (c->b->proto == BENCH_EMQ)
        bench_emq_produce(c);
    else
        bench_bs_produce(c);
    bench_conn_flush(c);
}

static void start_producers(struct bench *b)
{
    b->t_start = uv_hrtime();
    if (b->producers > 0)
        bench_mark(b, "enqueue");
    if (b->stopping)
        return;
    if (b->producers == 0 && b->workers > 0 && !b->light) {
        /* Drain only: the jobs were queued before this run started. */
        b->acked = b->enqueued = b->jobs;
        b->t_enq_done = b->t_start;
        return;
    }
    if (bench_conns_open(b, 0, b->producers, BENCH_PRODUCER) != 0) {
        snprintf(b->err, sizeof(b->err), "cannot connect producers");
        bench_stop(b);
        return;
    }
    for (unsigned i = 0; b->rate && i < b->producers; i++) {
        struct bench_conn *c = &b->conns[i];
        uv_timer_init(b->loop, &c->tick);
        c->tick.data = c;
        c->tick_on = true;
        uint64_t every = 1000 / b->rate;
        uv_timer_start(&c->tick, tick_cb, every ? every : 1, every ? every : 1);
    }
}

static void stop_timer_cb(uv_timer_t *t)
{
    finish(t->data);
}

/* The lone tenant's producer, after the admin connection's slot. */
static void start_lone(struct bench *b)
{
    unsigned at = b->producers + b->workers + b->idle + 1;
    if (bench_conns_open(b, at, at + 1, BENCH_LONE) != 0) {
        snprintf(b->err, sizeof(b->err), "cannot connect the lone producer");
        bench_stop(b);
        return;
    }
    struct bench_conn *c = &b->conns[at];
    uint64_t every = 1000 / b->lone_rate;
    uv_timer_init(b->loop, &c->tick);
    c->tick.data = c;
    c->tick_on = true;
    uv_timer_start(&c->tick, tick_cb, every ? every : 1, every ? every : 1);
}

void bench_start_workers(struct bench *b)
{
    if (b->workers_started || b->stopping)
        return;
    bench_mark(b, "lease");
    if (b->stopping)
        return;
    b->workers_started = true;
    b->t_work_start = uv_hrtime();
    if (bench_conns_open(b, b->producers, b->producers + b->workers, BENCH_WORKER) != 0) {
        snprintf(b->err, sizeof(b->err), "cannot connect workers");
        bench_stop(b);
        return;
    }
    if (b->lone)
        start_lone(b);
    if (b->stop_ms) {
        uv_timer_init(b->loop, &b->stop_timer);
        b->stop_timer.data = b;
        b->stop_on = true;
        uv_timer_start(&b->stop_timer, stop_timer_cb, b->stop_ms, 0);
    }
}

/* The work proper starts once every idle connection has its ping answered. */
static void start_work(struct bench *b)
{
    if (b->emqd_pid)
        b->rss_idle_kb = rss_kb(b->emqd_pid);
    start_producers(b);
    if (!b->prefill || b->producers == 0)
        bench_start_workers(b);
    bench_check_done(b);
}

/* The admin connection's settings are all in: the run proper starts. */
void bench_setup_done(struct bench *b)
{
    start_work(b);
}

/* The tenant settings go first, on the admin connection (the slot after
 * the idle ones); with none, the run starts at once. */
static void start_setup(struct bench *b)
{
    unsigned at = b->producers + b->workers + b->idle;
    if (!b->nweights && !b->rate_groups && !b->lone_weight) {
        start_work(b);
        return;
    }
    if (bench_conns_open(b, at, at + 1, BENCH_ADMIN) != 0) {
        snprintf(b->err, sizeof(b->err), "cannot connect the admin connection");
        bench_stop(b);
    }
}

void bench_idle_ready(struct bench *b)
{
    unsigned first = b->producers + b->workers;
    if (b->idle_ready == b->idle) {
        start_setup(b);
    } else if (b->idle_ready == b->idle_opened) {
        unsigned n = b->idle - b->idle_opened < IDLE_CHUNK ? b->idle - b->idle_opened : IDLE_CHUNK;
        if (bench_conns_open(b, first + b->idle_opened, first + b->idle_opened + n, BENCH_IDLE) !=
            0) {
            snprintf(b->err, sizeof(b->err), "cannot open idle connection %u", b->idle_opened);
            bench_stop(b);
            return;
        }
        b->idle_opened += n;
    }
}

static void deadline_cb(uv_timer_t *t)
{
    struct bench *b = t->data;
    b->timed_out = true;
    bench_stop(b);
}

static int setup(struct bench *b)
{
    if (b->light) {
        b->light_last = calloc(b->light, sizeof(*b->light_last));
        b->light_seen = calloc(b->light, sizeof(*b->light_seen));
    }
    /* The payload is {"t":<20 digits>,"p":"<pad>"}: pad it to the size. */
    size_t pad = b->payload > 32 ? b->payload - 32 : 1;
    b->pad = malloc(pad + 1);
    /* ... then the admin connection and the lone tenant's producer. */
    b->nconns = b->producers + b->workers + b->idle + 2;
    b->conns = calloc(b->nconns ? b->nconns : 1, sizeof(*b->conns));
    if (!b->pad || !b->conns || (b->light && (!b->light_last || !b->light_seen)))
        return -1;
    if (b->weighted_jobs && b->nweights && b->groups) {
        for (unsigned g = 0; g < b->groups; g++)
            b->npattern += bench_weight_of(b, g);
        if (!(b->pattern = calloc(b->npattern, sizeof(*b->pattern))))
            return -1;
        for (unsigned g = 0, at = 0; g < b->groups; g++)
            for (unsigned k = 0; k < bench_weight_of(b, g); k++)
                b->pattern[at++] = g;
    }
    if (b->window && b->groups &&
        (!(b->served = calloc(b->groups, sizeof(*b->served))) ||
         !(b->queued = calloc(b->groups, sizeof(*b->queued)))))
        return -1;
    memset(b->pad, 'x', pad);
    b->pad[pad] = '\0';
    /* Thousands of connections need descriptors: raise the soft limit. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    return 0;
}

/* Everything setup() and the run allocated (the loop is closed: every
 * write callback has run). */
static void teardown(struct bench *b)
{
    for (unsigned i = 0; i < b->nconns; i++) {
        struct bench_conn *c = &b->conns[i];
        free(c->in.data);
        free(c->out.data);
        free(c->fifo_t);
        free(c->fifo_n);
        free(c->held.data);
        c->tls = tls_free(c->tls);
    }
    free(b->conns);
    free(b->pad);
    free(b->light_last);
    free(b->light_seen);
    free(b->rtt.ns);
    free(b->e2p.ns);
    free(b->weights);
    free(b->pattern);
    free(b->served);
    free(b->queued);
    free(b->watch_t.ns);
    free(b->lone_wait.ns);
}

int main(int argc, char **argv)
{
    struct bench b = {
        .host = "127.0.0.1",
        .queue = "bench",
        .producers = 4,
        .batch = 100,
        .pipeline = 2,
        .workers = 4,
        .credit = 100,
        .groups = 10,
        .jobs = 100000,
        .payload = 1024,
        .duration = 120,
        .watch = -1,
        .lone_rate = 100,
    };
    if (bench_parse_args(&b, argc, argv) != 0)
        return 2;
    if (setup(&b) != 0) {
        fprintf(stderr, "emq-bench: out of memory\n");
        return 2;
    }
    if (!b.producers && !b.workers)
        b.jobs = 0;
    if (!b.producers && b.workers)
        b.prefill = true; /* drain only: report the drain rate */
    if (b.light)
        b.producers = 1; /* the heavy backlog must be in before the light jobs */
    b.loop = uv_default_loop();
    uv_timer_init(b.loop, &b.deadline);
    b.deadline.data = &b;
    uv_timer_start(&b.deadline, deadline_cb, (uint64_t)(b.duration * 1000), 0);
    if (b.emqd_pid)
        b.rss_before_kb = rss_kb(b.emqd_pid);
    if (b.idle) {
        b.idle_opened = 0;
        b.idle_ready = 0;
        bench_idle_ready(&b); /* opens the first chunk */
    } else {
        start_setup(&b);
    }
    uv_run(b.loop, UV_RUN_DEFAULT);
    uv_loop_close(b.loop);

    bench_report(&b);
    int rc = b.err[0] || b.timed_out ? 1 : 0;
    teardown(&b);
    b.tls = tls_ctx_free(b.tls);
    return rc;
}
