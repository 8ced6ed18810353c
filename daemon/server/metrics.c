/* metrics: see metrics.h. A scrape snapshots the list of queues, asks the
 * backend for each queue's numbers (stats) and one page of its groups,
 * and renders when the last answer is in. The groups shown per queue are
 * the metrics-groups deepest of that page (at most GROUP_PAGE groups):
 * bounded cardinality and bounded backend work, at the price of missing
 * a deep group that sits past the first page on a queue with very many
 * groups. A scrape waits at most SCRAPE_WAIT_MS for the backend: a stalled
 * Redis must not silence the metrics that show what the daemon holds
 * meanwhile. The reads that have not answered by then are left out (and
 * counted), and until they have, later scrapes do not ask the backend
 * again: they answer at once without its gauges. */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "api.h"
#include "http.h"
#include "admin.h"
#include "client.h"
#include "log.h"
#include "procinfo.h"
#include "cmd.h"
#include "queue.h"
#include "server.h"
#include "spin.h"

#define GROUP_PAGE     256
#define SCRAPES_MAX    2    /* at once; each costs two backend calls per queue */
#define SCRAPE_WAIT_MS 2000 /* for the backend's answers, before answering without them */

/* Scrapes not answered yet, and scrapes answered at their deadline whose
 * backend reads are still out, over the process (a scrape outlives
 * metrics_free when the daemon stops mid-scrape, so the counts cannot
 * live there). */
static int scrapes_inflight, scrapes_late;

struct metrics {
    struct server *srv;
    struct http_server *http;
    struct api *api; /* the dashboard's /api on the same listener */
};

/* One group's numbers from the groups script. */
struct group_row {
    char name[BRAND_ID_MAX + 1];
    long long depth, active, limit, paused, weight, rate_max, rate_per_ms, throttled, delayed, cap;
};

/* What the scrape learnt about one queue. */
struct queue_read {
    struct scrape *sc;
    struct queue *q;
    bool stats_ok;
    long long stats[4]; /* pending, active, delayed, dead */
    struct group_row *groups;
    size_t ngroups;
};

/* One scrape in flight. Owns its reads; holds a reference to the
 * connection it answers. It lives until its last backend read has
 * answered, which may be after it answered (its deadline); the memory
 * goes when its timer has closed. */
struct scrape {
    struct server *srv;
    struct http_conn *conn;
    struct queue_read *reads;
    size_t nreads;
    int outstanding;
    size_t backend_errors;
    bool answered;
    uv_timer_t deadline;
};

/* --- text ------------------------------------------------------------------ */

static void put(struct outbuf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct outbuf *o, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0)
        outbuf_append(o, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static void family(struct outbuf *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family of one unlabelled sample: a whole number, or (scalar_real) a
 * number of seconds written with prec decimals. */
static void scalar(struct outbuf *o, const char *name, const char *type, const char *help,
                   uint64_t v)
{
    family(o, name, type, help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

static void scalar_real(struct outbuf *o, const char *name, const char *type, const char *help,
                        double v, int prec)
{
    family(o, name, type, help);
    put(o, "%s %.*f\n", name, prec, v);
}

/* A label value with \, " and newline escaped (names are checked brand
 * ids, but the format's rule costs nothing). */
static const char *label(const char *s, char *buf, size_t cap)
{
    size_t o = 0;
    for (; *s != '\0' && o + 3 < cap; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            buf[o++] = '\\';
            buf[o++] = *s == '\n' ? 'n' : *s;
        } else {
            buf[o++] = *s;
        }
    }
    buf[o] = '\0';
    return buf;
}

/* --- rendering ------------------------------------------------------------- */

static void render_requests(struct outbuf *o, const struct server *s)
{
    family(o, "emqd_requests_total", "counter", "Requests answered, by op and result.");
    for (size_t i = 0; i <= SERVER_OPS_MAX; i++) {
        const struct cmd *c = i < SERVER_OPS_MAX ? cmd_at(i) : NULL;
        if (c == NULL && i < SERVER_OPS_MAX)
            continue;
        for (size_t e = 0; e < WIRE__END; e++)
            if (s->results.n[i][e] > 0)
                put(o, "emqd_requests_total{op=\"%s\",result=\"%s\"} %llu\n", c ? c->name : "-",
                    e == 0 ? "ok" : wire_error_name((enum wire_error)e),
                    (unsigned long long)s->results.n[i][e]);
    }
}

/* Refusals by role and op (perm.c): at most 4 x the ops series, and only
 * those that happened. The role "none" is a connection whose token was
 * revoked by a reload while it still sent. */
static void render_denied(struct outbuf *o, const struct server *s)
{
    family(o, "emqd_denied_total", "counter",
           "Requests refused EPERM: outside their token's role or queue patterns.");
    for (unsigned r = 0; r <= TOKENS_ADMIN; r++) {
        const struct cmd *c;
        for (size_t i = 0; i < SERVER_OPS_MAX && (c = cmd_at(i)) != NULL; i++)
            if (s->denied.n[r][i] > 0)
                put(o, "emqd_denied_total{role=\"%s\",op=\"%s\"} %llu\n",
                    tokens_role_name((enum tokens_role)r), c->name,
                    (unsigned long long)s->denied.n[r][i]);
    }
}

static void render_jobs(struct outbuf *o, const struct scrape *sc)
{
    static const char *const events[] = {"enqueued", "claimed", "completed", "failed",
                                         "dead",     "reaped",  "recovered"};
    static const char *const states[] = {"pending", "active", "delayed", "dead"};
    char q[BRAND_QUEUE_MAX * 2 + 1];

    family(o, "emqd_jobs_total", "counter",
           "Jobs this daemon saw move, by queue and event (dead: failed into the dead set; "
           "recovered: leased by a call whose reply was lost, and given back).");
    for (size_t i = 0; i < sc->nreads; i++) {
        const struct queue_counters *k = &sc->reads[i].q->count;
        const uint64_t v[] = {k->enqueued, k->claimed, k->completed, k->failed,
                              k->dead,     k->reaped,  k->recovered};
        label(sc->reads[i].q->name, q, sizeof(q));
        for (size_t e = 0; e < sizeof(v) / sizeof(v[0]); e++)
            put(o, "emqd_jobs_total{queue=\"%s\",event=\"%s\"} %llu\n", q, events[e],
                (unsigned long long)v[e]);
    }
    family(o, "emqd_queue_jobs", "gauge", "Jobs in the backend now, by queue and state.");
    for (size_t i = 0; i < sc->nreads; i++) {
        if (!sc->reads[i].stats_ok)
            continue;
        label(sc->reads[i].q->name, q, sizeof(q));
        for (size_t st = 0; st < 4; st++)
            put(o, "emqd_queue_jobs{queue=\"%s\",state=\"%s\"} %lld\n", q, states[st],
                sc->reads[i].stats[st]);
    }
}

/* Refusals are counted per queue, not per group: groups are as many as
 * tenants, and a counter per group would grow the daemon with every
 * tenant ever refused. Which lane is full shows in emqd_group_cap against
 * emqd_group_depth + emqd_group_delayed. */
static void render_refused(struct outbuf *o, const struct scrape *sc)
{
    char q[BRAND_QUEUE_MAX * 2 + 1];
    family(o, "emqd_refused_total", "counter",
           "Enqueues this daemon refused EFULL because the job's lane held its cap.");
    for (size_t i = 0; i < sc->nreads; i++) {
        label(sc->reads[i].q->name, q, sizeof(q));
        put(o, "emqd_refused_total{queue=\"%s\",reason=\"cap\"} %llu\n", q,
            (unsigned long long)sc->reads[i].q->count.refused);
    }
}

static void render_groups(struct outbuf *o, const struct scrape *sc)
{
    static const char *const names[] = {"emqd_group_depth",          "emqd_group_active",
                                        "emqd_group_limit",          "emqd_group_paused",
                                        "emqd_group_weight",         "emqd_group_rate_max",
                                        "emqd_group_rate_period_ms", "emqd_group_throttled",
                                        "emqd_group_delayed",        "emqd_group_cap"};
    static const char *const help[] = {
        "Jobs waiting in the group's lane (deepest groups only).",
        "Jobs of the group leased now (deepest groups only).",
        "The group's ceiling on active jobs (groups with one; deepest groups only).",
        "1 if the group is paused (deepest groups only).",
        "The group's jobs per ring turn (deepest groups only).",
        "The most leases its rate allows per period (groups with a rate; deepest only).",
        "The period of the group's rate, ms (groups with a rate; deepest only).",
        "1 if the group is off the ring until its rate allows a lease (deepest only).",
        "Delayed jobs of the group: with its depth, what its cap counts (deepest only).",
        "The most pending + delayed jobs its lane admits (groups with a cap; deepest only)."};
    char q[BRAND_QUEUE_MAX * 2 + 1], g[BRAND_ID_MAX * 2 + 1];

    for (size_t m = 0; m < sizeof(names) / sizeof(names[0]); m++) {
        family(o, names[m], "gauge", help[m]);
        for (size_t i = 0; i < sc->nreads; i++) {
            const struct queue_read *rd = &sc->reads[i];
            label(rd->q->name, q, sizeof(q));
            for (size_t j = 0; j < rd->ngroups; j++) {
                const struct group_row *gr = &rd->groups[j];
                long long v[] = {gr->depth,   gr->active,   gr->limit,       gr->paused,
                                 gr->weight,  gr->rate_max, gr->rate_per_ms, gr->throttled,
                                 gr->delayed, gr->cap};
                if ((m == 2 && gr->limit < 0) || ((m == 5 || m == 6) && gr->rate_max < 0) ||
                    (m == 9 && gr->cap < 0))
                    continue;
                put(o, "%s{queue=\"%s\",group=\"%s\"} %lld\n", names[m], q,
                    label(gr->name, g, sizeof(g)), v[m]);
            }
        }
    }
}

/* One histogram's samples: the buckets, cumulative, up to +Inf, then the
 * sum and the count. n holds nb + 1 counts per bucket (the last past the
 * bounds); labels is "" or one label pair, written before le. */
static void histogram(struct outbuf *o, const char *name, const char *labels,
                      const uint64_t *bounds_us, size_t nb, const uint64_t *n, uint64_t count,
                      uint64_t sum_us)
{
    const char *sep = labels[0] != '\0' ? "," : "";
    uint64_t cum = 0;
    for (size_t b = 0; b < nb; b++) {
        cum += n[b];
        put(o, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, (double)bounds_us[b] / 1e6,
            (unsigned long long)cum);
    }
    put(o, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)count);
    const char *open = labels[0] != '\0' ? "{" : "", *close = labels[0] != '\0' ? "}" : "";
    put(o, "%s_sum%s%s%s %.6f\n", name, open, labels, close, (double)sum_us / 1e6);
    put(o, "%s_count%s%s%s %llu\n", name, open, labels, close, (unsigned long long)count);
}

/* The job latency histograms, one of each per queue this daemon knows. */
static void render_latency(struct outbuf *o, const struct scrape *sc)
{
    static const char *const names[] = {"emqd_job_wait_seconds", "emqd_job_run_seconds"};
    static const char *const help[] = {
        "Time from a job becoming claimable (its enqueue; for a delayed or backed-off job, the "
        "time it was due; for one put back by release, reap or fail with retry_ms 0, that "
        "moment) to a lease of it that this daemon handed out, by queue. Redis clock, whole ms.",
        "Time from this daemon handing a lease out to the holder settling it (complete, or "
        "fail, on the connection the lease went to), by queue."};
    char q[BRAND_QUEUE_MAX * 2 + 1], labels[sizeof(q) + 16];

    for (size_t m = 0; m < 2; m++) {
        family(o, names[m], "histogram", help[m]);
        for (size_t i = 0; i < sc->nreads; i++) {
            const struct queue_latency *l = &sc->reads[i].q->latency;
            const struct hist *h = m == 0 ? &l->wait : &l->run;
            snprintf(labels, sizeof(labels), "queue=\"%s\"",
                     label(sc->reads[i].q->name, q, sizeof(q)));
            histogram(o, names[m], labels, hist_bounds_us, HIST_BUCKETS, h->n, h->count, h->sum_us);
        }
    }
}

static void render_pool(struct outbuf *o, const struct scrape *sc)
{
    struct pool_stats st;

    pool_stats(sc->srv->pool, &st);
    family(o, "emqd_backend_rtt_seconds", "histogram",
           "Round trips of backend calls that got an answer.");
    histogram(o, "emqd_backend_rtt_seconds", "", pool_rtt_bounds_us, POOL_RTT_BUCKETS,
              st.rtt_buckets, st.rtt_count, st.rtt_sum_us);
    scalar(o, "emqd_pool_connections", "gauge", "Backend connections ready now.",
           (uint64_t)st.connected);
    scalar(o, "emqd_pool_size", "gauge", "Backend connections configured.", (uint64_t)st.size);
    scalar(o, "emqd_pool_inflight", "gauge", "Backend calls awaiting their answer.", st.inflight);
    scalar(o, "emqd_pool_requests_total", "counter", "Backend calls made.", st.requests);
    scalar(o, "emqd_pool_failures_total", "counter", "Backend calls that got no answer.",
           st.failures);
    scalar(o, "emqd_pool_reconnects_total", "counter",
           "Backend connections back after being lost: each time a pool connection that had "
           "been ready is ready again (not the start-up connect, however many tries it takes, "
           "nor failed attempts).",
           st.recovered);
    scalar(o, "emqd_pool_fenced_total", "counter",
           "Backend connections lost with calls unanswered and then fenced (CLIENT KILL), so "
           "that what they may have done could be undone.",
           st.fenced);
    scalar(o, "emqd_pool_nodes", "gauge",
           "Redis servers the pool sends calls to: 1, or on a cluster the masters of its slot map.",
           (uint64_t)st.nodes);
    scalar(o, "emqd_pool_fallback_connections", "gauge",
           "Backend connections whose Redis refused the script library (maxmemory, an ACL) and "
           "that run the scripts by EVALSHA of their fallback form, slower, until it takes it.",
           (uint64_t)st.by_eval);
    scalar(o, "emqd_pool_script_resends_total", "counter",
           "Script calls Redis refused for want of their script (the library or the script cache "
           "flushed, Redis restarted without persistence) and that were sent again after loading "
           "it.",
           st.reloaded);
    scalar(o, "emqd_pool_moved_total", "counter",
           "Backend calls a cluster node answered MOVED (its slot is served elsewhere) and that "
           "were sent again to the node named.",
           st.moved);
    scalar(o, "emqd_pool_asked_total", "counter",
           "Backend calls a cluster node answered ASK (their slot is being moved) and that were "
           "sent again, with ASKING, to the node named.",
           st.asked);
    scalar(o, "emqd_pool_tryagain_total", "counter",
           "Backend calls a cluster node answered TRYAGAIN (their slot is half moved) and that "
           "were sent again after a short wait.",
           st.tryagain);
    scalar(o, "emqd_pool_unacked_total", "counter",
           "Backend calls answered EUNAVAILABLE because WAIT found fewer replicas than "
           "replica-acks had their writes.",
           st.unacked);
    scalar(o, "emqd_pool_slot_maps_total", "counter",
           "Cluster slot maps read (CLUSTER SLOTS answered); 0 off a cluster.", st.map_loads);
}

/* The process_* families every Prometheus client library exports, with
 * their usual help texts; left out when procfs cannot be read. */
static void render_process(struct outbuf *o)
{
    struct procinfo pi;
    if (procinfo_read(&pi) != 0)
        return;
    scalar_real(o, "process_cpu_seconds_total", "counter",
                "Total user and system CPU time spent in seconds.", pi.cpu_seconds, 6);
    scalar(o, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
           pi.resident_bytes);
    scalar(o, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
           pi.virtual_bytes);
    scalar(o, "process_open_fds", "gauge", "Number of open file descriptors.", pi.open_fds);
    scalar(o, "process_max_fds", "gauge", "Maximum number of open file descriptors.", pi.max_fds);
    scalar_real(o, "process_start_time_seconds", "gauge",
                "Start time of the process since unix epoch in seconds.", pi.start_time, 2);
}

/* The loop's polling before sleep (spin-us, util/spin.h): what it costs. */
static void render_spin(struct outbuf *o)
{
    struct spin_stats st;
    spin_get_stats(&st);
    scalar(o, "emqd_loop_spins_total", "counter",
           "Spells of polling for work before sleeping (spin-us), each begun after a sleep.",
           st.spins);
    scalar_real(o, "emqd_loop_spin_seconds_total", "counter",
                "Wall time the loop spent polling for work instead of sleeping (spin-us).",
                (double)st.ns / 1e9, 6);
}

/* The bytes held for clients against max-buffered (budget.h). */
static void render_budget(struct outbuf *o, const struct server *s)
{
    const struct budget *b = &s->bud;
    scalar(o, "emqd_buffered_bytes", "gauge",
           "Bytes held for clients now: lines read and not yet run, requests awaiting their "
           "reply, replies and output not yet written, and the backend calls made for them.",
           budget_total(s));
    scalar(o, "emqd_buffered_limit_bytes", "gauge",
           "max-buffered: past it every connection's reads pause.", s->cfg->max_buffered);
    scalar(o, "emqd_reads_paused", "gauge",
           "Connections whose reads are paused now because the daemon is over max-buffered.",
           b->held);
    scalar(o, "emqd_reads_paused_total", "counter",
           "Times a connection's reads were paused because the daemon was over max-buffered.",
           b->holds);
    scalar(o, "emqd_buffered_pauses_total", "counter",
           "Times the daemon went over max-buffered and paused every connection's reads.",
           b->pauses);
    family(o, "emqd_buffered_shed_total", "counter",
           "What was shed because the daemon stayed over max-buffered with reads paused: "
           "partial lines refused (ELIMIT), connections closed.");
    put(o, "emqd_buffered_shed_total{what=\"line\"} %llu\n", (unsigned long long)b->shed_lines);
    put(o, "emqd_buffered_shed_total{what=\"connection\"} %llu\n",
        (unsigned long long)b->shed_conns);
}

static void render(struct outbuf *o, const struct scrape *sc)
{
    const struct server *s = sc->srv;
    family(o, "emqd_build_info", "gauge", "The running emqd's version.");
    put(o, "emqd_build_info{version=\"%s\"} 1\n", EMQ_VERSION);
    render_process(o);
    render_spin(o);
    scalar(o, "emqd_connections", "gauge", "Client connections open now.", s->nclients);
    scalar(o, "emqd_connections_accepted_total", "counter", "Client connections accepted.",
           s->count.connections);
    render_budget(o, s);
    render_requests(o, s);
    render_denied(o, s);
    render_jobs(o, sc);
    render_refused(o, sc);
    render_groups(o, sc);
    render_latency(o, sc);
    render_pool(o, sc);
    scalar(o, "emqd_scrape_backend_errors", "gauge",
           "Backend reads of this scrape that failed (their gauges are missing).",
           sc->backend_errors);
}

/* --- the scrape ------------------------------------------------------------ */

static void scrape_free_cb(uv_handle_t *h)
{
    struct scrape *sc = h->data;
    for (size_t i = 0; i < sc->nreads; i++)
        free(sc->reads[i].groups);
    free(sc->reads);
    http_conn_unref(sc->conn);
    free(sc);
}

static void scrape_answer(struct scrape *sc)
{
    struct outbuf o;
    sc->answered = true;
    scrapes_inflight--;
    uv_timer_stop(&sc->deadline);
    outbuf_init(&o);
    render(&o, sc);
    http_respond(sc->conn, 200, "text/plain; version=0.0.4; charset=utf-8", o.data, o.len);
    outbuf_deinit(&o);
}

/* One backend read (or the start's own hold) is done. */
static void scrape_done(struct scrape *sc)
{
    if (--sc->outstanding > 0)
        return;
    if (!sc->answered)
        scrape_answer(sc);
    else
        scrapes_late--;
    uv_close((uv_handle_t *)&sc->deadline, scrape_free_cb);
}

/* The backend has not answered every read in time: answer without the
 * missing gauges; the reads still out finish into this scrape later. */
static void deadline_cb(uv_timer_t *t)
{
    struct scrape *sc = t->data;
    sc->backend_errors += (size_t)sc->outstanding;
    scrapes_late++;
    scrape_answer(sc);
}

/* A backend read failed: its gauges are left out, and the scrape says so. */
static bool read_ok(struct scrape *sc, const struct store_status *st)
{
    if (st->code == 0)
        return true;
    sc->backend_errors++;
    return false;
}

static void stats_cb(void *priv, const struct store_status *st, const struct store_stats *res)
{
    struct queue_read *rd = priv;
    if (read_ok(rd->sc, st)) {
        rd->stats_ok = true;
        rd->stats[0] = (long long)res->pending;
        rd->stats[1] = (long long)res->active;
        rd->stats[2] = (long long)res->delayed;
        rd->stats[3] = (long long)res->dead;
    }
    scrape_done(rd->sc);
}

static int by_depth(const void *a, const void *b)
{
    const struct group_row *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth < y->depth ? 1 : -1;
    return strcmp(x->name, y->name);
}

static void groups_cb(void *priv, const struct store_status *st, const struct store_groups *res)
{
    struct queue_read *rd = priv;
    size_t keep = rd->sc->srv->cfg->metrics_groups;
    if (read_ok(rd->sc, st) && keep > 0) {
        rd->groups = calloc(res->n > 0 ? res->n : 1, sizeof(*rd->groups));
        for (size_t i = 0; rd->groups != NULL && i < res->n; i++) {
            const struct store_group_row *f = &res->rows[i];
            struct group_row *g = &rd->groups[rd->ngroups++];
            snprintf(g->name, sizeof(g->name), "%.*s", (int)f->group_len, f->group);
            g->depth = (long long)f->depth;
            g->active = (long long)f->active;
            g->limit = f->limit;
            g->paused = f->paused;
            g->weight = f->weight < 0 ? 1 : f->weight;
            g->rate_max = f->rate_max;
            g->rate_per_ms = f->rate_per_ms;
            g->throttled = f->throttled;
            g->delayed = (long long)f->delayed;
            g->cap = f->cap;
        }
        qsort(rd->groups, rd->ngroups, sizeof(*rd->groups), by_depth);
        if (rd->ngroups > keep)
            rd->ngroups = keep;
    }
    scrape_done(rd->sc);
}

static void scrape_start(struct server *s, struct http_conn *conn)
{
    struct scrape *sc = calloc(1, sizeof(*sc));
    size_t b;
    if (sc == NULL || (sc->reads = calloc(s->eng.queues.count + 1, sizeof(*sc->reads))) == NULL) {
        free(sc);
        http_respond(conn, 503, "text/plain", "out of memory\n", 14);
        return;
    }
    scrapes_inflight++;
    sc->srv = s;
    sc->conn = conn;
    http_conn_ref(conn);
    sc->outstanding = 1; /* ours, dropped below: render at once if no queue */
    uv_timer_init(s->loop, &sc->deadline);
    sc->deadline.data = sc;
    uv_timer_start(&sc->deadline, deadline_cb, SCRAPE_WAIT_MS, 0);
    uv_unref((uv_handle_t *)&sc->deadline);
    /* An earlier scrape's reads still out: the backend is slow, and
     * asking again would only pile up more of them. */
    bool skip = scrapes_late > 0;
    for (struct map_entry *e = map_first(&s->eng.queues, &b); e;
         e = map_next(&s->eng.queues, &b, e)) {
        /* A queue only reads have named is none of the metrics' business
         * (and is freed once they are answered, while this scrape may
         * still be out). */
        if (!((struct queue *)e->value)->used)
            continue;
        struct queue_read *rd = &sc->reads[sc->nreads++];
        rd->sc = sc;
        rd->q = e->value;
        if (skip) {
            sc->backend_errors += 2;
            continue;
        }
        sc->outstanding += 2;
        if (store_stats(queue_store(rd->q), stats_cb, rd) != 0) {
            sc->backend_errors++;
            sc->outstanding--;
        }
        if (store_groups(queue_store(rd->q), "0", GROUP_PAGE, groups_cb, rd) != 0) {
            sc->backend_errors++;
            sc->outstanding--;
        }
    }
    scrape_done(sc);
}

static void request_cb(void *priv, struct http_conn *c, const char *method, const char *path)
{
    struct metrics *m = priv;
    if (strncmp(path, "/api/", 5) == 0) {
        api_handle(m->api, c, method, path + 5);
        return;
    }
    if (strcmp(path, "/metrics") != 0) {
        web_serve(m->srv, c, method, path);
        return;
    }
    if (strcmp(method, "GET") != 0) {
        http_respond(c, 405, "text/plain", "GET only\n", 9);
        return;
    }
    if (scrapes_inflight >= SCRAPES_MAX) {
        http_respond(c, 503, "text/plain", "scrapes already running\n", 24);
        return;
    }
    if (m->srv->stopping) {
        http_respond(c, 503, "text/plain", "stopping\n", 9);
        return;
    }
    scrape_start(m->srv, c);
}

int metrics_new(struct server *s, const char *addr, struct metrics **out)
{
    struct sockaddr_storage sa;
    struct metrics *m;
    int rc = addr_parse(addr, &sa, NULL, 0) == 0 ? 0 : UV_EINVAL;
    if (rc == 0 && (m = calloc(1, sizeof(*m))) == NULL)
        rc = UV_ENOMEM;
    if (rc == 0) {
        m->srv = s;
        if ((m->api = api_new(s)) == NULL) {
            free(m);
            rc = UV_ENOMEM;
        } else if ((rc = http_server_new(s->loop, (struct sockaddr *)&sa,
                                         s->cfg->http_tls ? &s->tls : NULL, request_cb, m,
                                         &m->http)) != 0) {
            api_free(m->api);
            free(m);
        }
    }
    if (rc != 0) {
        log_event(LOG_ERROR, "cannot serve metrics", "metrics=%s error=%s", addr, uv_err_name(rc));
        return rc;
    }
    log_event(LOG_INFO, "serving metrics and the dashboard",
              "metrics=%s scheme=%s path=/metrics dashboard=/", addr,
              s->cfg->http_tls ? "https" : "http");
    *out = m;
    return 0;
}

struct metrics *metrics_free(struct metrics *m)
{
    if (m == NULL)
        return NULL;
    http_server_free(m->http);
    api_free(m->api);
    free(m);
    return NULL;
}
