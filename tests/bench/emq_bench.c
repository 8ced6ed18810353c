/* emq-bench: a loopback load generator for emqd (and beanstalkd, for the
 * comparison in tests/bench/compare). N producer connections enqueue (or
 * enqueue_many with batch B), M worker connections stream with credit C and
 * complete each job, over G groups or a fairness shape (one heavy backlog,
 * then light groups). Reports enqueue / claim / end-to-end jobs per second
 * and p50/p99/p99.9 of the enqueue round trip and of enqueue -> push (the
 * send time rides in the payload, on the monotonic clock). Optionally holds
 * many idle connections and reports emqd's memory per connection. Bounded by
 * a job count and a hard time cap. */
#include "bench.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "tls.h"

/* Idle connections are opened this many at a time, so the listen backlog
 * never overflows (an overflow costs a 1 s SYN retry). */
#define IDLE_CHUNK 256

static void usage(FILE *f)
{
    fputs("usage: emq-bench [options]\n"
          "  --port N          server port (required); --host IP (default 127.0.0.1)\n"
          "  --beanstalk       speak beanstalkd's protocol instead of emqd's\n"
          "  --tls-ca FILE     speak TLS to emqd, verifying it against FILE's CAs\n"
          "  --queue Q         queue name (default bench)\n"
          "  --producers N     producer connections (default 4; 0 with --workers:\n"
          "                    drain --jobs N jobs already queued, e.g. by an\n"
          "                    earlier run with --workers 0)\n"
          "  --batch B         jobs per enqueue_many (1 = enqueue; default 100)\n"
          "  --pipeline P      requests in flight per producer (default 2)\n"
          "  --workers M       streaming worker connections (default 4)\n"
          "  --credit C        stream credit per worker (default 100)\n"
          "  --groups G        groups, jobs spread round-robin (0 = flat; default 10)\n"
          "  --jobs N          jobs to enqueue (default 100000)\n"
          "  --payload BYTES   payload size (default 1024)\n"
          "  --rate R          jobs/s per producer, one job per request (light load)\n"
          "  --prefill         enqueue every job before the workers connect\n"
          "  --fairness H,L,K  one group with H jobs, then L groups of K jobs\n"
          "                    (prefilled; reports deliveries until each light\n"
          "                    group's last job; one producer, so the heavy\n"
          "                    backlog is in first)\n"
          "  --idle N          hold N idle connections during the run\n"
          "  --emqd-pid PID    read emqd's VmRSS around the idle connections\n"
          "  --duration S      hard time cap in seconds (default 120)\n"
          "  --json            one JSON object instead of the table\n",
          f);
}

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
    } else if (b->acked == b->jobs) {
        if (b->workers == 0 || b->completed + b->settle_errors >= b->enqueued)
            finish(b);
    }
}

static void tick_cb(uv_timer_t *t)
{
    struct bench_conn *c = t->data;
    if (!c->open || c->b->stopping)
        return;
    if (c->b->proto == BENCH_EMQ)
        bench_emq_produce(c);
    else
        bench_bs_produce(c);
    bench_conn_flush(c);
}

static void start_producers(struct bench *b)
{
    b->t_start = uv_hrtime();
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

void bench_start_workers(struct bench *b)
{
    if (b->workers_started || b->stopping)
        return;
    b->workers_started = true;
    b->t_work_start = uv_hrtime();
    if (bench_conns_open(b, b->producers, b->producers + b->workers, BENCH_WORKER) != 0) {
        snprintf(b->err, sizeof(b->err), "cannot connect workers");
        bench_stop(b);
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

void bench_idle_ready(struct bench *b)
{
    unsigned first = b->producers + b->workers;
    if (b->idle_ready == b->idle) {
        start_work(b);
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

static double rate_of(uint64_t n, uint64_t from, uint64_t to)
{
    return to > from ? (double)n * 1e9 / (double)(to - from) : 0.0;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* The figures of a finished run. */
struct bench_result {
    double enq_rate, claim_rate, e2e_rate, drain_rate;
    double rtt[3], e2p[3];
    uint64_t light_max, light_p50;
    double per_conn_bytes;
};

static int cmp_u64p(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void compute(struct bench *b, struct bench_result *r)
{
    static const double pcts[3] = {50.0, 99.0, 99.9};
    uint64_t claim_from = b->prefill || b->light ? b->t_work_start : b->t_start;
    memset(r, 0, sizeof(*r));
    r->enq_rate = rate_of(b->acked, b->t_start, b->t_enq_done ? b->t_enq_done : b->t_last_done);
    r->claim_rate = rate_of(b->pushed, claim_from, b->t_last_push);
    r->e2e_rate = rate_of(b->completed, b->t_start, b->t_last_done);
    if (b->prefill)
        r->drain_rate = rate_of(b->completed, b->t_work_start, b->t_last_done);
    for (int i = 0; i < 3; i++) {
        r->rtt[i] = ms(bench_lat_pct(&b->rtt, pcts[i]));
        r->e2p[i] = ms(bench_lat_pct(&b->e2p, pcts[i]));
    }
    if (b->light) {
        qsort(b->light_last, b->light, sizeof(*b->light_last), cmp_u64p);
        r->light_max = b->light_last[b->light - 1];
        r->light_p50 = b->light_last[b->light / 2];
    }
    if (b->idle && b->rss_idle_kb > 0 && b->rss_before_kb > 0)
        r->per_conn_bytes = (double)(b->rss_idle_kb - b->rss_before_kb) * 1024.0 / b->idle;
}

static void report_json(const struct bench *b, const struct bench_result *r)
{
    printf("{\"proto\":\"%s\",\"producers\":%u,\"batch\":%u,\"pipeline\":%u,\"workers\":%u,"
           "\"credit\":%u,\"groups\":%u,\"jobs\":%llu,\"payload\":%u,\"rate\":%u,\"prefill\":%s,",
           b->proto == BENCH_EMQ ? "emq" : "beanstalk", b->producers, b->batch, b->pipeline,
           b->workers, b->credit, b->groups, (unsigned long long)b->jobs, b->payload, b->rate,
           b->prefill ? "true" : "false");
    printf("\"enqueued\":%llu,\"enq_errors\":%llu,\"pushed\":%llu,\"completed\":%llu,"
           "\"settle_errors\":%llu,",
           (unsigned long long)b->enqueued, (unsigned long long)b->enq_errors,
           (unsigned long long)b->pushed, (unsigned long long)b->completed,
           (unsigned long long)b->settle_errors);
    printf("\"enqueue_rate\":%.0f,\"claim_rate\":%.0f,\"e2e_rate\":%.0f,\"drain_rate\":%.0f,",
           r->enq_rate, r->claim_rate, r->e2e_rate, r->drain_rate);
    printf("\"rtt_ms\":[%.3f,%.3f,%.3f],\"e2p_ms\":[%.3f,%.3f,%.3f],", r->rtt[0], r->rtt[1],
           r->rtt[2], r->e2p[0], r->e2p[1], r->e2p[2]);
    if (b->light)
        printf(
            "\"fair_heavy\":%llu,\"fair_light\":%u,\"fair_light_jobs\":%u,\"fair_light_done\":%u,"
            "\"fair_last_max\":%llu,\"fair_last_p50\":%llu,",
            (unsigned long long)b->heavy, b->light, b->light_jobs, b->light_done,
            (unsigned long long)r->light_max, (unsigned long long)r->light_p50);
    if (b->idle)
        printf("\"idle\":%u,\"idle_ready\":%u,\"rss_before_kb\":%ld,\"rss_idle_kb\":%ld,"
               "\"rss_after_kb\":%ld,\"bytes_per_conn\":%.0f,",
               b->idle, b->idle_ready, b->rss_before_kb, b->rss_idle_kb, b->rss_after_kb,
               r->per_conn_bytes);
    printf("\"timed_out\":%s,\"error\":\"", b->timed_out ? "true" : "false");
    for (const char *p = b->err; *p; p++)
        if (*p >= 0x20 && *p != '"' && *p != '\\')
            putchar(*p);
    printf("\"}\n");
}

static void report_text(const struct bench *b, const struct bench_result *r)
{
    printf("emq-bench: %s, %u producers (batch %u, pipeline %u%s), %u workers (credit %u), "
           "%u groups, %llu jobs of %u B%s\n",
           b->proto == BENCH_EMQ ? "emqd" : "beanstalkd", b->producers, b->batch, b->pipeline,
           b->rate ? ", rate-limited" : "", b->workers, b->credit, b->groups,
           (unsigned long long)b->jobs, b->payload, b->prefill ? ", prefilled" : "");
    printf("  %-22s %12s\n", "", "jobs/s");
    printf("  %-22s %12.0f   (%llu acked, %llu errors)\n", "enqueue", r->enq_rate,
           (unsigned long long)b->acked, (unsigned long long)b->enq_errors);
    printf("  %-22s %12.0f   (%llu pushed)\n", "claim", r->claim_rate,
           (unsigned long long)b->pushed);
    printf("  %-22s %12.0f   (%llu completed)\n", "end to end", r->e2e_rate,
           (unsigned long long)b->completed);
    if (b->prefill)
        printf("  %-22s %12.0f\n", "drain (after prefill)", r->drain_rate);
    printf("  %-22s %9s %9s %9s\n", "latency, ms", "p50", "p99", "p99.9");
    printf("  %-22s %9.3f %9.3f %9.3f\n", "enqueue round trip", r->rtt[0], r->rtt[1], r->rtt[2]);
    printf("  %-22s %9.3f %9.3f %9.3f\n", "enqueue -> push", r->e2p[0], r->e2p[1], r->e2p[2]);
    if (b->light)
        printf("  fairness: %u/%u light groups done; deliveries until a light group's last job: "
               "max %llu, median %llu (heavy backlog %llu)\n",
               b->light_done, b->light, (unsigned long long)r->light_max,
               (unsigned long long)r->light_p50, (unsigned long long)b->heavy);
    if (b->idle)
        printf("  idle connections: %u held; emqd VmRSS %ld kB before, %ld kB held, %ld kB at end: "
               "%.0f bytes per connection\n",
               b->idle_ready, b->rss_before_kb, b->rss_idle_kb, b->rss_after_kb, r->per_conn_bytes);
    if (b->timed_out)
        printf("  TIMED OUT after %.0f s\n", b->duration);
    if (b->err[0])
        printf("  ERROR: %s\n", b->err);
}

static const struct option long_opts[] = {
    {"host", 1, 0, 'h'},      {"port", 1, 0, 'p'},
    {"beanstalk", 0, 0, 'k'}, {"queue", 1, 0, 'q'},
    {"producers", 1, 0, 'N'}, {"batch", 1, 0, 'B'},
    {"pipeline", 1, 0, 'P'},  {"workers", 1, 0, 'M'},
    {"credit", 1, 0, 'C'},    {"groups", 1, 0, 'G'},
    {"jobs", 1, 0, 'n'},      {"payload", 1, 0, 's'},
    {"rate", 1, 0, 'r'},      {"prefill", 0, 0, 'f'},
    {"fairness", 1, 0, 'F'},  {"idle", 1, 0, 'i'},
    {"emqd-pid", 1, 0, 'm'},  {"duration", 1, 0, 'd'},
    {"json", 0, 0, 'j'},      {"help", 0, 0, '?'},
    {"tls-ca", 1, 0, 'T'},    {0, 0, 0, 0},
};

static int num(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_fairness(struct bench *b, const char *s)
{
    unsigned long long h, l, k;
    if (sscanf(s, "%llu,%llu,%llu", &h, &l, &k) != 3 || l == 0 || l > 99999 || k == 0 ||
        k > 1000000)
        return -1;
    b->heavy = h;
    b->light = (unsigned)l;
    b->light_jobs = (unsigned)k;
    b->jobs = h + l * k;
    b->prefill = true;
    return 0;
}

static int parse_opt(struct bench *b, int o, const char *arg)
{
    unsigned long long v = 0;
    switch (o) {
    case 'h':
        b->host = arg;
        return 0;
    case 'q':
        b->queue = arg;
        return 0;
    case 'k':
        b->proto = BENCH_BEANSTALK;
        return 0;
    case 'T': {
        char why[300];
        if (tls_ctx_new_client(arg, &b->tls, why, sizeof(why)) == 0)
            return 0;
        fprintf(stderr, "emq-bench: %s\n", why);
        return -1;
    }
    case 'f':
        b->prefill = true;
        return 0;
    case 'j':
        b->json = true;
        return 0;
    case 'F':
        return parse_fairness(b, arg);
    case 'd':
        b->duration = atof(arg);
        return b->duration > 0 ? 0 : -1;
    default:
        break;
    }
    if (num(arg, 10000000000ULL, &v) != 0)
        return -1;
    switch (o) {
    case 'p':
        b->port = (int)v;
        return v > 0 && v < 65536 ? 0 : -1;
    case 'N':
        b->producers = (unsigned)v;
        return 0;
    case 'B':
        b->batch = (unsigned)v;
        return v >= 1 && v <= 10000 ? 0 : -1;
    case 'P':
        b->pipeline = (unsigned)v;
        return v >= 1 ? 0 : -1;
    case 'M':
        b->workers = (unsigned)v;
        return 0;
    case 'C':
        b->credit = (unsigned)v;
        return v >= 1 && v <= 10000 ? 0 : -1;
    case 'G':
        b->groups = (unsigned)v;
        return 0;
    case 'n':
        b->jobs = v;
        return 0;
    case 's':
        b->payload = (unsigned)v;
        return v <= 65536 ? 0 : -1;
    case 'r':
        b->rate = (unsigned)v;
        return v >= 1 && v <= 1000 ? 0 : -1;
    case 'i':
        b->idle = (unsigned)v;
        return v <= 100000 ? 0 : -1;
    case 'm':
        b->emqd_pid = (int)v;
        return 0;
    default:
        return -1;
    }
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
    b->nconns = b->producers + b->workers + b->idle;
    b->conns = calloc(b->nconns ? b->nconns : 1, sizeof(*b->conns));
    if (!b->pad || !b->conns || (b->light && (!b->light_last || !b->light_seen)))
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
        c->tls = tls_free(c->tls);
    }
    free(b->conns);
    free(b->pad);
    free(b->light_last);
    free(b->light_seen);
    free(b->rtt.ns);
    free(b->e2p.ns);
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
    };
    int o;
    while ((o = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
        if (o == '?') {
            usage(stderr);
            return 2;
        }
        if (parse_opt(&b, o, optarg) != 0) {
            fprintf(stderr, "emq-bench: bad value for --%s: %s\n", argv[optind - 1] + 2,
                    optarg ? optarg : "");
            return 2;
        }
    }
    if (optind != argc || b.port == 0 || (b.light && b.proto != BENCH_EMQ) ||
        (b.tls != NULL && b.proto != BENCH_EMQ) || (b.idle && b.proto != BENCH_EMQ) ||
        (b.jobs && !b.producers && !b.workers)) {
        usage(stderr);
        return 2;
    }
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
        start_work(&b);
    }
    uv_run(b.loop, UV_RUN_DEFAULT);
    uv_loop_close(b.loop);

    struct bench_result r;
    compute(&b, &r);
    if (b.json)
        report_json(&b, &r);
    else
        report_text(&b, &r);
    int rc = b.err[0] || b.timed_out ? 1 : 0;
    teardown(&b);
    b.tls = tls_ctx_free(b.tls);
    return rc;
}
