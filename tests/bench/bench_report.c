/* bench_report: the figures of a finished emq-bench run, computed from its
 * counters and samples, printed as a table or as one JSON object. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    double share_max, share_p99; /* |served / ideal - 1| over the groups */
    bool share_backlogged;       /* every group had jobs left after the window */
    double watch_rate;           /* the watched group's leases/s after its first period */
    uint64_t watch_steady;       /* the leases counted for it */
    double lone_wait[3];
};

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Each group's share of the first `window` deliveries against its ideal
 * share, weight / total weight (meaningful while every group is
 * backlogged, which is checked: it still had jobs after the window). */
static void compute_shares(const struct bench *b, struct bench_result *r)
{
    double total = 0;
    double *dev = calloc(b->groups, sizeof(*dev));
    if (!dev)
        return;
    for (uint64_t j = 0; j < b->jobs; j++)
        b->queued[bench_group_index(b, j)]++;
    for (unsigned g = 0; g < b->groups; g++)
        total += bench_weight_of(b, g);
    r->share_backlogged = true;
    for (unsigned g = 0; g < b->groups; g++) {
        double ideal = (double)b->window * bench_weight_of(b, g) / total;
        double d = (double)b->served[g] / ideal - 1.0;
        dev[g] = d < 0 ? -d : d;
        if (b->served[g] >= b->queued[g])
            r->share_backlogged = false;
    }
    qsort(dev, b->groups, sizeof(*dev), cmp_dbl);
    size_t rank = (size_t)(0.99 * b->groups + 0.999999);
    r->share_max = dev[b->groups - 1];
    r->share_p99 = dev[(rank ? rank : 1) - 1];
    free(dev);
}

/* The watched group's achieved lease rate: leases from its first lease +
 * per_ms to the end of the run, over that time. The first period is left
 * out so that a limiter allowing a burst at the start (emqd's GCRA allows
 * none) could not make a short run look faster than its steady rate. */
static void compute_watch(const struct bench *b, struct bench_result *r)
{
    if (b->watch_t.n == 0)
        return;
    uint64_t from = b->watch_t.ns[0] + (uint64_t)b->rate_per_ms * 1000000u;
    uint64_t n = 0;
    for (size_t i = 0; i < b->watch_t.n; i++)
        n += b->watch_t.ns[i] >= from;
    r->watch_steady = n;
    if (b->t_last_done > from)
        r->watch_rate = (double)n * 1e9 / (double)(b->t_last_done - from);
}

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
    if (b->window && b->served)
        compute_shares(b, r);
    compute_watch(b, r);
    for (int i = 0; i < 3; i++)
        r->lone_wait[i] = ms(bench_lat_pct(&b->lone_wait, pcts[i]));
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
    if (b->window)
        printf("\"share_window\":%llu,\"share_dev_max\":%.4f,\"share_dev_p99\":%.4f,"
               "\"share_backlogged\":%s,",
               (unsigned long long)b->window, r->share_max, r->share_p99,
               r->share_backlogged ? "true" : "false");
    if (b->watch >= 0)
        printf("\"watch_leased\":%zu,\"watch_steady\":%llu,\"watch_rate\":%.2f,"
               "\"watch_limit\":%.2f,",
               b->watch_t.n, (unsigned long long)r->watch_steady, r->watch_rate,
               b->rate_per_ms ? b->rate_max * 1000.0 / b->rate_per_ms : 0.0);
    if (b->lone)
        printf("\"lone\":%u,\"lone_enqueued\":%llu,\"lone_pushed\":%zu,"
               "\"lone_wait_ms\":[%.3f,%.3f,%.3f],",
               b->lone, (unsigned long long)b->lone_enqueued, b->lone_wait.n, r->lone_wait[0],
               r->lone_wait[1], r->lone_wait[2]);
    printf("\"settle\":\"%s\",\"claim\":%s,\"hold\":%s,",
           b->settle == BENCH_COMPLETE ? "complete"
           : b->settle == BENCH_FAIL   ? "fail"
                                       : "dead",
           b->claim ? "true" : "false", b->hold ? "true" : "false");
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
    if (b->window)
        printf("  shares of the first %llu deliveries: |served/ideal - 1| max %.4f, p99 %.4f%s\n",
               (unsigned long long)b->window, r->share_max, r->share_p99,
               r->share_backlogged ? "" : " (NOT every group backlogged)");
    if (b->watch >= 0)
        printf("  group %ld: %zu leased, %.2f/s after its first period\n", b->watch, b->watch_t.n,
               r->watch_rate);
    if (b->lone)
        printf("  lone tenant: %zu of %u pushed; enqueue -> push ms p50 %.3f p99 %.3f p99.9 %.3f\n",
               b->lone_wait.n, b->lone, r->lone_wait[0], r->lone_wait[1], r->lone_wait[2]);
    if (b->timed_out)
        printf("  TIMED OUT after %.0f s\n", b->duration);
    if (b->err[0])
        printf("  ERROR: %s\n", b->err);
}

/* Compute the run's figures and print them (--json: one object). */
void bench_report(struct bench *b)
{
    struct bench_result r;
    compute(b, &r);
    if (b->json)
        report_json(b, &r);
    else
        report_text(b, &r);
}
