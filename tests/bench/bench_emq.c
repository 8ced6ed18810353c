/* bench_emq: the emqd side of emq-bench. Producers pipeline enqueue or
 * enqueue_many requests; workers hold one stream with credit and complete
 * every pushed job; idle connections ping once and then hold. Lines are
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
        bench_buf_printf(&c->out, "{\"op\":\"stream\",\"queue\":\"%s\",\"credit\":%u%s}\n",
                         c->queue, b->credit, b->groups || b->light ? "" : ",\"flat\":true");
        break;
    }
    case BENCH_IDLE:
        bench_buf_put(&c->out, "{\"op\":\"ping\"}\n", 14);
        break;
    }
}

static void on_reply(struct bench_conn *c, const char *p, const char *end)
{
    struct bench *b = c->b;
    bool ok = memmem(p, (size_t)(end - p), "\"ok\":true", 9) != NULL;
    if (c->role == BENCH_IDLE) {
        b->idle_ready++;
        bench_idle_ready(b);
    } else if (c->role == BENCH_WORKER) {
        if (memmem(p, (size_t)(end - p), "\"state\"", 7)) {
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
    } else {
        uint64_t t0;
        uint32_t n;
        if (bench_fifo_pop(c, &t0, &n) != 0)
            return;
        bench_acked(b, t0, n, ok ? count_of(p, end, "\"verdict\":\"enqueued\"") : 0);
        if (!b->rate)
            bench_emq_produce(c);
    }
    bench_check_done(b);
}

static void on_push(struct bench_conn *c, const char *p, const char *end)
{
    struct bench *b = c->b;
    uint64_t now = uv_hrtime();
    size_t jlen = 0, llen = 0, glen = 0; /* -O3 cannot see str_field sets them */
    const char *job = str_field(p, end, "\"job\":\"", &jlen);
    const char *lease = str_field(p, end, "\"lease\":\"", &llen);
    const char *group = str_field(p, end, "\"group\":\"", &glen);
    const char *payload = memmem(p, (size_t)(end - p), "\"payload\":", 10);
    if (!job || !lease || !payload) {
        snprintf(b->err, sizeof(b->err), "bad push: %.*s", (int)(end - p), p);
        bench_stop(b);
        return;
    }
    b->pushed++;
    b->t_last_push = now;
    if (!b->t_first_push)
        b->t_first_push = now;
    uint64_t t = bench_parse_t(payload, end);
    if (t && t <= now)
        bench_lat_add(&b->e2p, now - t);
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
    bench_buf_printf(&c->out,
                     "{\"op\":\"complete\",\"queue\":\"%s\",\"job\":\"%.*s\",\"lease\":\"%.*s\"}\n",
                     c->queue, (int)jlen, job, (int)llen, lease);
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
        if (nl - s >= 8 && memcmp(s, "{\"push\":", 8) == 0)
            on_push(c, s, nl);
        else
            on_reply(c, s, nl);
        used = (size_t)(nl - p) + 1;
    }
    return c->b->stopping ? n : used;
}
