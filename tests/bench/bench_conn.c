/* bench_conn: connection plumbing shared by both protocols: connect, read
 * into a buffer handed to the protocol, batched writes, latency samples,
 * the producer's in-order request FIFO, payloads and group names. */
#include "bench.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls.h"

static void die_oom(void)
{
    fprintf(stderr, "emq-bench: out of memory\n");
    exit(2);
}

static void buf_reserve(struct bench_buf *buf, size_t extra)
{
    if (buf->len + extra <= buf->cap)
        return;
    size_t cap = buf->cap ? buf->cap : 4096;
    while (cap < buf->len + extra)
        cap *= 2;
    char *p = realloc(buf->data, cap);
    if (!p)
        die_oom();
    buf->data = p;
    buf->cap = cap;
}

void bench_buf_put(struct bench_buf *buf, const void *p, size_t n)
{
    buf_reserve(buf, n);
    memcpy(buf->data + buf->len, p, n);
    buf->len += n;
}

/* GCC 12 with -fsanitize=address,undefined at -O2 reports a "null format
 * string" here that no caller passes (every format is a literal, checked
 * by the format attribute in bench.h): silenced for this function only. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"
void bench_buf_printf(struct bench_buf *buf, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    buf_reserve(buf, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(buf->data + buf->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf->len += (size_t)n;
}
#pragma GCC diagnostic pop

void bench_lat_add(struct bench_lat *l, uint64_t ns)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        uint64_t *p = realloc(l->ns, cap * sizeof(*p));
        if (!p)
            die_oom();
        l->ns = p;
        l->cap = cap;
    }
    l->ns[l->n++] = ns;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile; sorts the samples on first use. */
uint64_t bench_lat_pct(struct bench_lat *l, double pct)
{
    if (l->n == 0)
        return 0;
    static const struct bench_lat *sorted;
    if (sorted != l) {
        qsort(l->ns, l->n, sizeof(*l->ns), cmp_u64);
        sorted = l;
    }
    size_t rank = (size_t)(pct / 100.0 * (double)l->n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > l->n)
        rank = l->n;
    return l->ns[rank - 1];
}

void bench_fifo_push(struct bench_conn *c, uint64_t t, uint32_t n)
{
    if (c->fifo_len == c->fifo_cap) {
        size_t cap = c->fifo_cap ? c->fifo_cap * 2 : 64;
        uint64_t *nt = malloc(cap * sizeof(*nt));
        uint32_t *nn = malloc(cap * sizeof(*nn));
        if (!nt || !nn)
            die_oom();
        for (size_t i = 0; i < c->fifo_len; i++) {
            nt[i] = c->fifo_t[(c->fifo_head + i) % c->fifo_cap];
            nn[i] = c->fifo_n[(c->fifo_head + i) % c->fifo_cap];
        }
        free(c->fifo_t);
        free(c->fifo_n);
        c->fifo_t = nt;
        c->fifo_n = nn;
        c->fifo_head = 0;
        c->fifo_cap = cap;
    }
    size_t at = (c->fifo_head + c->fifo_len) % c->fifo_cap;
    c->fifo_t[at] = t;
    c->fifo_n[at] = n;
    c->fifo_len++;
}

int bench_fifo_pop(struct bench_conn *c, uint64_t *t, uint32_t *n)
{
    if (c->fifo_len == 0)
        return -1;
    *t = c->fifo_t[c->fifo_head];
    *n = c->fifo_n[c->fifo_head];
    c->fifo_head = (c->fifo_head + 1) % c->fifo_cap;
    c->fifo_len--;
    return 0;
}

/* A producer request sent at t0 with n jobs was answered, k of them
 * admitted. When the last is in, a prefilled run lets its workers start. */
void bench_acked(struct bench *b, uint64_t t0, uint32_t n, uint64_t k)
{
    bench_lat_add(&b->rtt, uv_hrtime() - t0);
    b->enqueued += k;
    b->enq_errors += n - k;
    b->acked += n;
    if (b->acked == b->jobs) {
        b->t_enq_done = uv_hrtime();
        if (b->prefill)
            bench_start_workers(b);
    }
}

/* The group index of job number `job` (not for a fairness shape): jobs
 * spread round-robin over `groups`, or with --weighted-jobs in proportion
 * to the groups' weights; -1 for no group (flat). */
long bench_group_index(const struct bench *b, uint64_t job)
{
    if (b->groups == 0)
        return -1;
    if (b->npattern)
        return (long)b->pattern[job % b->npattern];
    return (long)(job % b->groups);
}

/* The group of job number `job`: with a fairness shape, the first `heavy`
 * jobs go to one heavy group and the rest fill the light groups one after
 * the other; otherwise as bench_group_index. Returns 1 for a light
 * group's job, 0 otherwise, -1 for no group. */
int bench_group_of(const struct bench *b, uint64_t job, char *out, size_t cap)
{
    if (b->light) {
        if (job < b->heavy) {
            snprintf(out, cap, "TENheavy");
            return 0;
        }
        snprintf(out, cap, "TENlight%05llu",
                 (unsigned long long)((job - b->heavy) / b->light_jobs));
        return 1;
    }
    long g = bench_group_index(b, job);
    if (g < 0)
        return -1;
    snprintf(out, cap, "TENg%07ld", g);
    return 0;
}

/* With --marks: tell the caller (one JSON line on stdout) that `phase` is
 * about to start, and wait for its go-ahead (a line on stdin), so it can
 * read Redis' counters exactly between two phases. Blocking here is
 * deliberate: nothing of the run is in flight at a phase boundary. */
void bench_mark(struct bench *b, const char *phase)
{
    char line[64];
    if (!b->marks)
        return;
    printf("{\"mark\":\"%s\"}\n", phase);
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin)) {
        snprintf(b->err, sizeof(b->err), "no go-ahead on stdin for phase %s", phase);
        bench_stop(b);
    }
}

/* A JSON object payload of about b->payload bytes carrying the send time
 * (monotonic ns) so the worker can time enqueue -> push. */
size_t bench_payload(const struct bench *b, char *out, size_t cap)
{
    int n =
        snprintf(out, cap, "{\"t\":%llu,\"p\":\"%s\"}", (unsigned long long)uv_hrtime(), b->pad);
    return n < 0 ? 0 : (size_t)n;
}

/* The send time from a payload: the digits after "\"t\":" in [p, end). */
uint64_t bench_parse_t(const char *p, const char *end)
{
    static const char key[] = "{\"t\":";
    const char *s = memmem(p, (size_t)(end - p), key, sizeof(key) - 1);
    if (!s)
        return 0;
    uint64_t v = 0;
    for (s += sizeof(key) - 1; s < end && *s >= '0' && *s <= '9'; s++)
        v = v * 10 + (uint64_t)(*s - '0');
    return v;
}

struct wreq {
    uv_write_t req;
    char *data;
};

static void write_cb(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    free(w->data);
    free(w);
    (void)status; /* a failed write shows as a read error/EOF */
}

/* A TLS connection's flush: its output encrypted (once the handshake is
 * done), then every record waiting in one uv_write. */
static void tls_flush(struct bench_conn *c)
{
    if (c->tls_up && c->out.len > 0) {
        if (tls_write(c->tls, c->out.data, c->out.len) != 0) {
            snprintf(c->b->err, sizeof(c->b->err), "TLS: %s", tls_error(c->tls));
            bench_stop(c->b);
            return;
        }
        c->out.len = 0;
    }
    size_t n = tls_out_pending(c->tls);
    if (n == 0)
        return;
    struct wreq *w = malloc(sizeof(*w));
    if (!w || !(w->data = malloc(n)))
        die_oom();
    uv_buf_t buf = uv_buf_init(w->data, (unsigned)tls_take_out(c->tls, w->data, n));
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, write_cb) != 0) {
        free(w->data);
        free(w);
    }
}

/* Write everything buffered on c in one uv_write (the buffer moves to the
 * request; c starts a new one). */
void bench_conn_flush(struct bench_conn *c)
{
    if (c->open && c->tls != NULL) {
        tls_flush(c);
        return;
    }
    if (!c->open || c->out.len == 0)
        return;
    struct wreq *w = malloc(sizeof(*w));
    if (!w)
        die_oom();
    w->data = c->out.data;
    uv_buf_t buf = uv_buf_init(w->data, (unsigned)c->out.len);
    c->out.data = NULL;
    c->out.len = c->out.cap = 0;
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, write_cb) != 0) {
        free(w->data);
        free(w);
    }
}

/* One read's ciphertext, fed to OpenSSL before the next read. */
static char tls_scratch[65536];

static void connected(struct bench_conn *c)
{
    if (c->b->proto == BENCH_EMQ)
        bench_emq_connected(c);
    else
        bench_bs_connected(c);
}

/* Ciphertext read (n bytes at p): decrypt all of it into c->in; the
 * protocol starts once the handshake is done. False if TLS failed. */
static bool tls_in(struct bench_conn *c, const char *p, size_t n)
{
    long r;
    if (tls_feed(c->tls, p, n) != 0)
        die_oom();
    for (;;) {
        buf_reserve(&c->in, 65536);
        if ((r = tls_read(c->tls, c->in.data + c->in.len, c->in.cap - c->in.len)) <= 0)
            break;
        c->in.len += (size_t)r;
    }
    if (r == -TLS_EFAIL || r == -TLS_ECLOSED) {
        if (!c->b->stopping) {
            snprintf(c->b->err, sizeof(c->b->err), "TLS: %s",
                     r == -TLS_ECLOSED ? "closed" : tls_error(c->tls));
            bench_stop(c->b);
        }
        return false;
    }
    if (!c->tls_up && tls_established(c->tls)) {
        c->tls_up = true;
        connected(c);
    }
    return true;
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    struct bench_conn *c = h->data;
    (void)hint;
    if (c->tls != NULL) {
        *buf = uv_buf_init(tls_scratch, sizeof(tls_scratch));
        return;
    }
    buf_reserve(&c->in, 65536);
    *buf = uv_buf_init(c->in.data + c->in.len, (unsigned)(c->in.cap - c->in.len));
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct bench_conn *c = s->data;
    (void)buf;
    if (n < 0) {
        if (!c->b->stopping) {
            snprintf(c->b->err, sizeof(c->b->err), "connection lost: %s", uv_strerror((int)n));
            bench_stop(c->b);
        }
        return;
    }
    if (c->tls != NULL) {
        if (!tls_in(c, buf->base, (size_t)n))
            return;
    } else {
        c->in.len += (size_t)n;
    }
    size_t used = c->b->proto == BENCH_EMQ ? bench_emq_input(c, c->in.data, c->in.len)
                                           : bench_bs_input(c, c->in.data, c->in.len);
    if (used > 0) {
        memmove(c->in.data, c->in.data + used, c->in.len - used);
        c->in.len -= used;
    }
    bench_conn_flush(c);
}

static void connect_cb(uv_connect_t *req, int status)
{
    struct bench_conn *c = req->data;
    struct bench *b = c->b;
    if (status != 0) {
        snprintf(b->err, sizeof(b->err), "connect: %s", uv_strerror(status));
        bench_stop(b);
        return;
    }
    c->open = true;
    b->connected++;
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    if (b->tls != NULL) {
        /* The protocol starts when the handshake is done (tls_in). */
        if ((c->tls = tls_new(b->tls)) == NULL)
            die_oom();
        tls_in(c, NULL, 0); /* makes the ClientHello */
    } else {
        connected(c);
    }
    bench_conn_flush(c);
}

/* Start connecting conns [from, to) with the given role. */
int bench_conns_open(struct bench *b, unsigned from, unsigned to, enum bench_role role)
{
    struct sockaddr_in addr;
    int rc = uv_ip4_addr(b->host, b->port, &addr);
    if (rc != 0)
        return rc;
    for (unsigned i = from; i < to; i++) {
        struct bench_conn *c = &b->conns[i];
        c->b = b;
        c->role = role;
        c->index = i;
        uv_tcp_init(b->loop, &c->tcp);
        c->tcp.data = c;
        c->connect.data = c;
        uv_tcp_nodelay(&c->tcp, 1);
        rc = uv_tcp_connect(&c->connect, &c->tcp, (const struct sockaddr *)&addr, connect_cb);
        if (rc != 0)
            return rc;
    }
    return 0;
}
