/* bench_emq: the emqd side of emq-bench. Producers pipeline enqueue or
 * enqueue_many requests; workers hold one stream with credit (or claim in
 * a loop, --claim) and settle every job they are given (or hold every
 * lease until all are leased, --hold); idle connections ping once and then
 * hold; an admin connection sends the tenant settings before the run; a
 * lone tenant's producer enqueues at a slow rate during it. Lines are
 * scanned by hand (the daemon's framing is fixed): a JSON parser per push
 * would make the bench, not the daemon, the bottleneck. */
#include "bench.h"

#include <stdio.h>
#include <string.h>

/* The string value after `key` (e.g. "\"job\":\"") in [p, end), or NULL. */
static const char *str_field(const char *p, const char *end, const char *key, size_t *len)
{
    size_t klen = strlen(key);
    const char *s = memmem(p, (size_t)(end - p), key, klen);
    if (!s)
        return NULL;
    s += klen;
    const char *q = memchr(s, '"', (size_t)(end - s));
    if (!q)
        return NULL;
    *len = (size_t)(q - s);
    return s;
}

static size_t count_of(const char *p, const char *end, const char *needle)
{
    size_t n = 0, nlen = strlen(needle);
    while (p < end) {
        const char *s = memmem(p, (size_t)(end - p), needle, nlen);
        if (!s)
            break;
        n++;
        p = s + nlen;
    }
    return n;
}

static void put_job(struct bench *b, struct bench_buf *out, uint64_t job, bool item)
{
    char group[32], payload[70000];
    int g = bench_group_of(b, job, group, sizeof(group));
    size_t plen = bench_payload(b, payload, sizeof(payload));
    if (item)
        bench_buf_put(out, "{", 1);
    if (g >= 0)
        bench_buf_printf(out, "\"group\":\"%s\",", group);
    bench_buf_put(out, "\"payload\":", 10);
    bench_buf_put(out, payload, plen);
    if (item)
        bench_buf_put(out, "}", 1);
}

/* The name of queue k of the run into buf: --queue itself, or with
 * --queues K the K names QUEUE0..QUEUE(K-1). */
static const char *queue_name(const struct bench *b, unsigned k, char buf[80])
{
    if (b->queues <= 1)
        return b->queue;
    snprintf(buf, 80, "%s%u", b->queue, k % b->queues);
    return buf;
}

/* Send one request of up to b->batch jobs (with --queues, to the next
 * queue of this producer's rotation). */
static void send_request(struct bench_conn *c)
{
    struct bench *b = c->b;
    char qbuf[80];
    const char *q = queue_name(b, (unsigned)(c->index + c->requests++), qbuf);
    uint64_t n = b->jobs - b->sent;
    if (n > b->batch)
        n = b->batch;
    if (b->batch == 1) {
        bench_buf_printf(&c->out, "{\"op\":\"enqueue\",\"queue\":\"%s\",", q);
        put_job(b, &c->out, b->sent, false);
        bench_buf_put(&c->out, "}\n", 2);
    } else {
        bench_buf_printf(&c->out, "{\"op\":\"enqueue_many\",\"queue\":\"%s\",\"jobs\":[", q);
        for (uint64_t i = 0; i < n; i++) {
            if (i)
                bench_buf_put(&c->out, ",", 1);
            put_job(b, &c->out, b->sent + i, true);
        }
        bench_buf_put(&c->out, "]}\n", 3);
    }
    bench_fifo_push(c, uv_hrtime(), (uint32_t)n);
    b->sent += n;
}

/* Keep the producer's pipeline full (rate-limited producers send from
 * their timer instead). */
void bench_emq_produce(struct bench_conn *c)
{
    struct bench *b = c->b;
    while (!b->stopping && b->sent < b->jobs && c->fifo_len < b->pipeline) {
        send_request(c);
        if (b->rate)
            break;
    }
}

/* The lone tenant's producer: one job per tick into group TENlone. */
void bench_emq_lone(struct bench_conn *c)
{
    struct bench *b = c->b;
    char payload[70000];
    if (b->stopping || b->lone_sent >= b->lone)
        return;
    size_t plen = bench_payload(b, payload, sizeof(payload));
    bench_buf_printf(&c->out, "{\"op\":\"enqueue\",\"queue\":\"%s\",\"group\":\"TENlone\",",
                     b->queue);
    bench_buf_put(&c->out, "\"payload\":", 10);
    bench_buf_put(&c->out, payload, plen);
    bench_buf_put(&c->out, "}\n", 2);
    bench_fifo_push(c, uv_hrtime(), 1);
    b->lone_sent++;
}

/* The tenant settings, one line each, on the admin connection. */
static void send_setup(struct bench_conn *c)
{
    struct bench *b = c->b;
    for (unsigned g = 0; b->nweights && g < b->groups; g++) {
        bench_buf_printf(
            &c->out, "{\"op\":\"weight\",\"queue\":\"%s\",\"group\":\"TENg%07u\",\"weight\":%u}\n",
            b->queue, g, b->weights[g % b->nweights]);
        b->setup_sent++;
    }
    for (unsigned g = 0; g < b->rate_groups && g < b->groups; g++) {
        bench_buf_printf(&c->out,
                         "{\"op\":\"rate\",\"queue\":\"%s\",\"group\":\"TENg%07u\",\"max\":%u,"
                         "\"per_ms\":%u}\n",
                         b->queue, g, b->rate_max, b->rate_per_ms);
        b->setup_sent++;
    }
    if (b->lone_weight) {
        bench_buf_printf(
            &c->out, "{\"op\":\"weight\",\"queue\":\"%s\",\"group\":\"TENlone\",\"weight\":%u}\n",
            b->queue, b->lone_weight);
        b->setup_sent++;
    }
}

/* Lease the next batch by claim (--claim): count = credit, up to 1000. */
static void send_claim(struct bench_conn *c)
{
    struct bench *b = c->b;
    unsigned count = b->credit < 1000 ? b->credit : 1000;
    bench_buf_printf(&c->out,
                     "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":%u,\"wait_ms\":1000%s%s}\n",
                     c->queue, count, b->hold ? ",\"lease_ms\":600000" : "",
                     b->groups || b->light ? "" : ",\"flat\":true");
}

void bench_emq_connected(struct bench_conn *c)
{
    struct bench *b = c->b;
    switch (c->role) {
    case BENCH_PRODUCER:
        if (!b->rate)
            bench_emq_produce(c);
        break;
    case BENCH_WORKER: {
        char qbuf[80];
        snprintf(c->queue, sizeof(c->queue), "%s", queue_name(b, c->index - b->producers, qbuf));
        if (b->claim) {
            send_claim(c);
            break;
        }
        /* Holding, the leases outlive the whole lease phase. */
        bench_buf_printf(&c->out, "{\"op\":\"stream\",\"queue\":\"%s\",\"credit\":%u%s%s}\n",
                         c->queue, b->credit, b->hold ? ",\"lease_ms\":600000" : "",
                         b->groups || b->light ? "" : ",\"flat\":true");
        break;
    }
    case BENCH_IDLE:
        bench_buf_put(&c->out, "{\"op\":\"ping\"}\n", 14);
        break;
    case BENCH_ADMIN:
        send_setup(c);
        break;
    case BENCH_LONE:
        break;
    }
}

/* The settle request for one leased job (--settle): a fail retries after
 * an hour (the job goes delayed, out of the run's way), or goes dead. */
static void put_settle(struct bench_conn *c, struct bench_buf *out, const char *job, size_t jlen,
                       const char *lease, size_t llen)
{
    static const char *const op[] = {"complete", "fail", "fail"};
    static const char *const tail[] = {"", ",\"retry_ms\":3600000,\"error\":\"bench\"",
                                       ",\"dead\":true,\"error\":\"bench\""};
    enum bench_settle s = c->b->settle;
    bench_buf_printf(out,
                     "{\"op\":\"%s\",\"queue\":\"%s\",\"job\":\"%.*s\",\"lease\":\"%.*s\"%s}\n",
                     op[s], c->queue, (int)jlen, job, (int)llen, lease, tail[s]);
}

/* With --hold, once every job is leased: stop the streams (so settling
 * does not make the daemon look for more work), then send every held
 * settle line. */
void bench_emq_settle_held(struct bench *b)
{
    if (b->settling || b->stopping)
        return;
    b->settling = true;
    bench_mark(b, "settle");
    for (unsigned i = 0; i < b->nconns && !b->stopping; i++) {
        struct bench_conn *c = &b->conns[i];
        if (c->role != BENCH_WORKER || !c->open)
            continue;
        if (!b->claim)
            bench_buf_printf(&c->out, "{\"op\":\"stream\",\"queue\":\"%s\",\"credit\":0}\n",
                             c->queue);
        bench_buf_put(&c->out, c->held.data, c->held.len);
        c->held.len = 0;
        bench_conn_flush(c);
    }
}

/* Every job is leased: the moment the hold ends. */
static bool all_leased(const struct bench *b)
{
    return b->hold && b->acked == b->jobs && b->pushed >= b->enqueued;
}

/* The group index of "TENg%07u" (glen bytes at g), or -1. */
static long group_index(const char *g, size_t glen)
{
    if (!g || glen != 11 || memcmp(g, "TENg", 4) != 0)
        return -1;
    long v = 0;
    for (size_t i = 4; i < glen; i++) {
        if (g[i] < '0' || g[i] > '9')
            return -1;
        v = v * 10 + (g[i] - '0');
    }
    return v;
}

/* The per-group accounting of one delivery: the window's shares, the
 * watched group's times, the lone tenant's wait, the fairness shape. */
static void account(struct bench *b, const char *group, size_t glen, uint64_t now, uint64_t t)
{
    long gi = group_index(group, glen);
    if (b->served && gi >= 0 && (unsigned long)gi < b->groups && b->pushed <= b->window)
        b->served[gi]++;
    if (b->watch >= 0 && gi == b->watch)
        bench_lat_add(&b->watch_t, now);
    if (b->lone && group && glen == 7 && memcmp(group, "TENlone", 7) == 0 && t && t <= now)
        bench_lat_add(&b->lone_wait, now - t);
    if (b->light && group && glen > 8 && memcmp(group, "TENlight", 8) == 0) {
        unsigned idx = 0;
        for (size_t i = 8; i < glen; i++)
            idx = idx * 10 + (unsigned)(group[i] - '0');
        if (idx < b->light) {
            b->light_last[idx] = b->pushed;
            if (++b->light_seen[idx] == b->light_jobs)
                b->light_done++;
        }
    }
}

/* One leased job, [p, end) being its push line or its object in a claim
 * reply: count it and settle it (or hold its settle line). False if it
 * could not be parsed (the run stops). */
static bool leased(struct bench_conn *c, const char *p, const char *end, uint64_t now)
{
    struct bench *b = c->b;
    size_t jlen = 0, llen = 0, glen = 0; /* -O3 cannot see str_field sets them */
    const char *job = str_field(p, end, "\"job\":\"", &jlen);
    const char *lease = str_field(p, end, "\"lease\":\"", &llen);
    const char *group = str_field(p, end, "\"group\":\"", &glen);
    const char *payload = memmem(p, (size_t)(end - p), "\"payload\":", 10);
    if (!job || !lease || !payload) {
        snprintf(b->err, sizeof(b->err), "bad job: %.*s", (int)(end - p), p);
        bench_stop(b);
        return false;
    }
    b->pushed++;
    b->t_last_push = now;
    if (!b->t_first_push)
        b->t_first_push = now;
    uint64_t t = bench_parse_t(payload, end);
    if (t && t <= now)
        bench_lat_add(&b->e2p, now - t);
    account(b, group, glen, now, t);
    put_settle(c, b->hold ? &c->held : &c->out, job, jlen, lease, llen);
    return true;
}

/* A claim's reply: each job object starts with {"queue": (section 6.7). */
static void on_claimed(struct bench_conn *c, const char *p, const char *end)
{
    struct bench *b = c->b;
    static const char key[] = "{\"queue\":";
    uint64_t now = uv_hrtime();
    const char *s = memmem(p, (size_t)(end - p), key, sizeof(key) - 1);
    while (s) {
        const char *next = memmem(s + 1, (size_t)(end - s - 1), key, sizeof(key) - 1);
        if (!leased(c, s, next ? next : end, now))
            return;
        s = next;
    }
    if (all_leased(b))
        bench_emq_settle_held(b);
    else if (b->pushed < b->enqueued + b->lone_enqueued || b->acked < b->jobs || b->lone)
        send_claim(c);
}

static void on_worker_reply(struct bench_conn *c, const char *p, const char *end, bool ok)
{
    struct bench *b = c->b;
    if (memmem(p, (size_t)(end - p), "\"jobs\":[", 8)) {
        on_claimed(c, p, end);
    } else if (memmem(p, (size_t)(end - p), "\"state\"", 7)) {
        b->completed++;
    } else if (!ok) {
        if (memmem(p, (size_t)(end - p), "ELEASE", 6) ||
            memmem(p, (size_t)(end - p), "ENOJOB", 6)) {
            b->settle_errors++;
        } else {
            snprintf(b->err, sizeof(b->err), "worker: %.*s", (int)(end - p), p);
            bench_stop(b);
        }
    }
}

static void on_reply(struct bench_conn *c, const char *p, const char *end)
{
    struct bench *b = c->b;
    bool ok = memmem(p, (size_t)(end - p), "\"ok\":true", 9) != NULL;
    uint64_t t0;
    uint32_t n;
    switch (c->role) {
    case BENCH_IDLE:
        b->idle_ready++;
        bench_idle_ready(b);
        break;
    case BENCH_WORKER:
        on_worker_reply(c, p, end, ok);
        break;
    case BENCH_ADMIN:
        if (!ok) {
            snprintf(b->err, sizeof(b->err), "setup: %.*s", (int)(end - p), p);
            bench_stop(b);
        } else if (++b->setup_ok == b->setup_sent) {
            bench_setup_done(b);
        }
        return;
    case BENCH_LONE:
        if (bench_fifo_pop(c, &t0, &n) != 0)
            return;
        b->lone_acked++;
        if (ok && memmem(p, (size_t)(end - p), "\"verdict\":\"enqueued\"", 20))
            b->lone_enqueued++;
        break;
    case BENCH_PRODUCER:
        if (bench_fifo_pop(c, &t0, &n) != 0)
            return;
        bench_acked(b, t0, n, ok ? count_of(p, end, "\"verdict\":\"enqueued\"") : 0);
        if (!b->rate)
            bench_emq_produce(c);
        break;
    }
    bench_check_done(b);
}

/* Handle every complete line in [p, p+n); returns the bytes used. */
size_t bench_emq_input(struct bench_conn *c, const char *p, size_t n)
{
    size_t used = 0;
    while (used < n && !c->b->stopping) {
        const char *s = p + used;
        const char *nl = memchr(s, '\n', n - used);
        if (!nl)
            break;
        if (nl - s >= 8 && memcmp(s, "{\"push\":", 8) == 0) {
            if (leased(c, s, nl, uv_hrtime()) && all_leased(c->b))
                bench_emq_settle_held(c->b);
        } else {
            on_reply(c, s, nl);
        }
        used = (size_t)(nl - p) + 1;
    }
    return c->b->stopping ? n : used;
}
