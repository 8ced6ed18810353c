/* budget: the bytes held for all clients together (budget.h): pausing and
 * resuming every connection's reads, and shedding what cannot drain. */
#include "budget.h"

#include <jansson.h>
#include <malloc.h>
#include <stdlib.h>

#include "client.h"
#include "log.h"
#include "pool.h"
#include "server.h"

#define SWEEP_BACKEND_MS 1000 /* a backend answering slower than this is the one that holds */
#define LOG_EVERY_MS     10000

/* --- jansson's allocations ------------------------------------------------
 * Counted through jansson's allocator hooks, with the sizes malloc really
 * gave. A block allocated before the hooks were set and freed after them
 * makes the count drift, which is why only differences are read. */

static size_t json_bytes;

static void *count_malloc(size_t n)
{
    void *p = malloc(n);
    if (p != NULL)
        json_bytes += malloc_usable_size(p);
    return p;
}

static void count_free(void *p)
{
    if (p == NULL)
        return;
    json_bytes -= malloc_usable_size(p);
    free(p);
}

size_t budget_json_bytes(void)
{
    return json_bytes;
}

void budget_init(struct budget *b)
{
    *b = (struct budget){.last = SIZE_MAX};
    json_set_alloc_funcs(count_malloc, count_free);
}

/* --- the total, pause and resume ---------------------------------------- */

/* A line of a kind logged at *last may be logged again now (one per
 * LOG_EVERY_MS); if so, now becomes its time. */
static bool log_due(uint64_t *last, uint64_t now)
{
    if (*last != 0 && now - *last < LOG_EVERY_MS)
        return false;
    *last = now;
    return true;
}

size_t budget_total(const struct server *s)
{
    const struct budget *b = &s->bud;
    return b->input + b->requests + b->output + s->eng.batched_bytes +
           (s->pool != NULL ? pool_buffered(s->pool) : 0);
}

static size_t low_water(const struct server *s)
{
    return s->cfg->max_buffered - s->cfg->max_buffered / 4;
}

static bool shed_lines(struct server *s, size_t total_max, size_t partial_max);

void budget_check(struct server *s)
{
    struct budget *b = &s->bud;
    if (b->paused)
        return;
    size_t total = budget_total(s);
    if (total <= s->cfg->max_buffered)
        return;
    uint64_t now = uv_now(s->loop);
    b->paused = true;
    b->pauses++;
    b->last = SIZE_MAX;
    b->paused_at = now;
    /* A daemon that hovers at the limit pauses often: one line per ten
     * seconds, with the count. */
    if (log_due(&b->logged_ms, now)) {
        log_event(LOG_WARN, "client buffers over max-buffered: reads paused",
                  "buffered=%zu max_buffered=%zu input=%zu requests=%zu output=%zu backend=%zu "
                  "clients=%zu pauses=%llu",
                  total, s->cfg->max_buffered, b->input, b->requests, b->output,
                  s->pool != NULL ? pool_buffered(s->pool) : 0, s->nclients,
                  (unsigned long long)b->pauses_quiet + 1);
        b->pauses_quiet = 0;
    } else {
        b->pauses_quiet++;
    }
    for (struct client *c = s->clients; c != NULL; c = c->next)
        client_hold_reads(c);
}

void budget_turn(struct server *s)
{
    struct budget *b = &s->bud;
    budget_check(s);
    if (!b->paused)
        return;
    /* Partial lines never end while reads are paused: when they hold
     * more than half the budget, the largest go at once, down to a
     * quarter of it. */
    if (b->partial > s->cfg->max_buffered / 2) {
        size_t partial = b->partial;
        uint64_t now = uv_now(s->loop), before = b->shed_lines;
        shed_lines(s, 0, s->cfg->max_buffered / 4);
        b->lines_quiet += b->shed_lines - before;
        if (log_due(&b->lines_logged_ms, now)) {
            log_event(LOG_WARN, "partial lines held over half of max-buffered: the largest refused",
                      "partial=%zu now=%zu max_buffered=%zu lines_refused=%llu", partial,
                      b->partial, s->cfg->max_buffered, (unsigned long long)b->lines_quiet);
            b->lines_quiet = 0;
        }
    }
    if (budget_total(s) > low_water(s))
        return;
    b->paused = false;
    log_event(LOG_DEBUG, "client buffers under the low-water mark: reads resumed",
              "buffered=%zu paused_ms=%llu", budget_total(s),
              (unsigned long long)(uv_now(s->loop) - b->paused_at));
    for (struct client *c = s->clients; c != NULL; c = c->next)
        client_release_reads(c);
}

/* --- shedding --------------------------------------------------------------- */

/* A connection and what it would give back. */
struct victim {
    struct client *c;
    size_t bytes;
};

static int by_bytes(const void *a, const void *b)
{
    const struct victim *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* The open connections holding something (lines: their partial line;
 * else all they hold), largest first, each referenced; *n of them. NULL
 * when there is none, or no memory for the list. */
static struct victim *victims(struct server *s, bool lines, size_t *n)
{
    struct victim *v = malloc((s->nclients + 1) * sizeof(*v));
    *n = 0;
    if (v == NULL)
        return NULL;
    for (struct client *c = s->clients; c != NULL; c = c->next) {
        size_t bytes = lines ? frame_partial(&c->frame) : client_buffered(c);
        if (c->closing || bytes == 0)
            continue;
        client_ref(c);
        v[(*n)++] = (struct victim){c, bytes};
    }
    qsort(v, *n, sizeof(*v), by_bytes);
    return v;
}

/* The total is at most total_max, or the partial lines hold at most
 * partial_max (SIZE_MAX: not asked). */
static bool enough(const struct server *s, size_t total_max, size_t partial_max)
{
    return budget_total(s) <= total_max ||
           (partial_max != SIZE_MAX && s->bud.partial <= partial_max);
}

/* Shed the victims of one kind (lines: partial lines, refused; else
 * connections, closed), largest first, until enough(). True once it
 * holds. */
static bool shed_some(struct server *s, bool lines, size_t total_max, size_t partial_max)
{
    struct budget *b = &s->bud;
    size_t n, i;
    struct victim *v = victims(s, lines, &n);
    for (i = 0; i < n && !enough(s, total_max, partial_max); i++) {
        struct client *c = v[i].c;
        if (c->closing)
            continue;
        if (lines) {
            if (client_refuse_line(c) == 0)
                continue;
            b->shed_lines++;
            log_event(LOG_DEBUG, "partial line refused: client buffers over max-buffered",
                      "client=%s bytes=%zu", c->addr, v[i].bytes);
        } else {
            b->shed_conns++;
            log_event(LOG_WARN, "client buffers over max-buffered: disconnecting",
                      "client=%s buffered=%zu", c->addr, v[i].bytes);
            client_close(c, "client buffers over max-buffered");
        }
    }
    for (i = 0; i < n; i++)
        client_unref(v[i].c);
    free(v);
    return enough(s, total_max, partial_max);
}

static bool shed_lines(struct server *s, size_t total_max, size_t partial_max)
{
    return shed_some(s, true, total_max, partial_max);
}

/* Shed until the total is at most low: partial lines, then (if they were
 * not enough) connections. True if that got it there. */
static bool shed(struct server *s, size_t low)
{
    shed_lines(s, low, 0);
    return budget_total(s) <= low || shed_some(s, false, low, SIZE_MAX);
}

void budget_sweep(struct server *s)
{
    struct budget *b = &s->bud;
    if (!b->paused)
        return;
    size_t total = budget_total(s), low = low_water(s), last = b->last;
    b->last = total;
    /* The total fell since the last sweep, or the backend is slow (it
     * holds calls, and fails them at its deadline): waiting helps. */
    if (total < last || total <= low ||
        (s->pool != NULL && pool_oldest_ms(s->pool) >= SWEEP_BACKEND_MS))
        return;
    uint64_t lines = b->shed_lines, conns = b->shed_conns, now = uv_now(s->loop);
    bool done = shed(s, low), none = b->shed_lines == lines && b->shed_conns == conns;
    /* What holds the bytes is nobody's to shed (the backend's, say): say
     * so once in a while, not every second. */
    if (!none || log_due(&b->stuck_logged_ms, now))
        log_event(LOG_WARN, "client buffers stayed over max-buffered with reads paused: shed",
                  "buffered=%zu now=%zu max_buffered=%zu lines_refused=%llu "
                  "connections_closed=%llu%s",
                  total, budget_total(s), s->cfg->max_buffered,
                  (unsigned long long)(b->shed_lines - lines),
                  (unsigned long long)(b->shed_conns - conns), done ? "" : " still_over=true");
    b->last = budget_total(s);
}
