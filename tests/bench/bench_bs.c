/* bench_bs: the beanstalkd side of emq-bench, for the comparison. Producers
 * pipeline `put`s (batch x pipeline in flight, replies come in order);
 * workers keep `credit` reserves outstanding on their connection and answer
 * each RESERVED with `delete` + a new `reserve` in one write.
 *
 * beanstalkd runs a connection's commands one after the other, so a delete
 * sent behind a reserve that waits for work waits with it. When every job
 * has been delivered, the bench therefore puts one small "end" job per
 * reserve still waiting, so the last deletes go through; those extra jobs
 * are deleted but not counted (they only add work to beanstalkd's side). */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char END_JOB[] = "end";

static void put_one(struct bench_conn *c, const char *data, size_t len)
{
    bench_buf_printf(&c->out, "put 0 0 120 %zu\r\n", len);
    bench_buf_put(&c->out, data, len);
    bench_buf_put(&c->out, "\r\n", 2);
}

void bench_bs_produce(struct bench_conn *c)
{
    struct bench *b = c->b;
    char payload[70000];
    size_t limit = (size_t)b->pipeline * b->batch;
    while (!b->stopping && b->sent < b->jobs && c->fifo_len < limit) {
        unsigned n = b->rate ? 1 : b->batch;
        for (unsigned i = 0; i < n && b->sent < b->jobs; i++) {
            put_one(c, payload, bench_payload(b, payload, sizeof(payload)));
            bench_fifo_push(c, uv_hrtime(), 1);
            b->sent++;
        }
        if (b->rate)
            break;
    }
}

void bench_bs_connected(struct bench_conn *c)
{
    struct bench *b = c->b;
    /* Each run uses its own tube (the queue name), so nothing left over
     * from an earlier run is counted. */
    if (c->role == BENCH_PRODUCER) {
        bench_buf_printf(&c->out, "use %s\r\n", b->queue);
        bench_fifo_push(c, 0, 0); /* USING: not a put */
        if (!b->rate)
            bench_bs_produce(c);
    }
    if (c->role == BENCH_WORKER) {
        bench_buf_printf(&c->out, "watch %s\r\nignore default\r\n", b->queue);
        for (unsigned i = 0; i < b->credit; i++)
            bench_buf_put(&c->out, "reserve\r\n", 9);
        c->reserves = b->credit;
    }
}

/* Once every real job is delivered: unblock the reserves still waiting. */
static void send_end_jobs(struct bench *b)
{
    unsigned waiting = 0;
    for (unsigned i = 0; i < b->nconns; i++)
        if (b->conns[i].role == BENCH_WORKER)
            waiting += b->conns[i].reserves;
    struct bench_conn *p = &b->conns[0]; /* a producer: they are opened first */
    for (unsigned i = 0; i < waiting; i++) {
        put_one(p, END_JOB, sizeof(END_JOB) - 1);
        bench_fifo_push(p, 0, 0);
    }
    bench_conn_flush(p);
}

static void on_reserved(struct bench_conn *c, const char *id, size_t idlen, const char *data,
                        size_t dlen)
{
    struct bench *b = c->b;
    uint64_t now = uv_hrtime();
    c->reserves--;
    bench_buf_printf(&c->out, "delete %.*s\r\n", (int)idlen, id);
    bool end = dlen == sizeof(END_JOB) - 1 && memcmp(data, END_JOB, dlen) == 0;
    bench_fifo_push(c, 0, end ? 0 : 1); /* so its DELETED is counted or not */
    if (end) {
        if (b->pushed < b->jobs) { /* not ours: an end job from an earlier run */
            bench_buf_put(&c->out, "reserve\r\n", 9);
            c->reserves++;
        }
        return;
    }
    b->pushed++;
    b->t_last_push = now;
    if (!b->t_first_push)
        b->t_first_push = now;
    uint64_t t = bench_parse_t(data, data + dlen);
    if (t && t <= now)
        bench_lat_add(&b->e2p, now - t);
    if (b->pushed < b->jobs) {
        bench_buf_put(&c->out, "reserve\r\n", 9);
        c->reserves++;
    } else if (b->pushed == b->jobs) {
        send_end_jobs(b);
    }
}

static void on_line(struct bench_conn *c, const char *s, size_t len)
{
    struct bench *b = c->b;
    if (c->role == BENCH_PRODUCER) {
        uint64_t t0;
        uint32_t n;
        if (bench_fifo_pop(c, &t0, &n) != 0 || n == 0)
            return; /* an end job */
        bench_acked(b, t0, 1, len > 9 && memcmp(s, "INSERTED ", 9) == 0);
        if (!b->rate)
            bench_bs_produce(c);
    } else if (len > 9 && memcmp(s, "WATCHING ", 9) == 0) {
        return;
    } else if (len == 7 && memcmp(s, "DELETED", 7) == 0) {
        uint64_t t0;
        uint32_t real;
        if (bench_fifo_pop(c, &t0, &real) == 0 && real)
            b->completed++;
    } else {
        snprintf(b->err, sizeof(b->err), "beanstalkd: %.*s", (int)len, s);
        bench_stop(b);
        return;
    }
    bench_check_done(b);
}

/* Handle every complete reply in [p, p+n); returns the bytes used. */
size_t bench_bs_input(struct bench_conn *c, const char *p, size_t n)
{
    size_t used = 0;
    while (used < n && !c->b->stopping) {
        const char *s = p + used;
        const char *crlf = memmem(s, n - used, "\r\n", 2);
        if (!crlf)
            break;
        size_t len = (size_t)(crlf - s);
        if (len > 9 && memcmp(s, "RESERVED ", 9) == 0) {
            const char *id = s + 9;
            const char *sp = memchr(id, ' ', len - 9);
            if (!sp)
                break;
            size_t dlen = strtoul(sp + 1, NULL, 10);
            const char *data = crlf + 2;
            if ((size_t)(p + n - data) < dlen + 2)
                break; /* the body is not all here yet */
            on_reserved(c, id, (size_t)(sp - id), data, dlen);
            used = (size_t)(data + dlen + 2 - p);
            continue;
        }
        on_line(c, s, len);
        used = (size_t)(crlf - p) + 2;
    }
    return c->b->stopping ? n : used;
}
