/* emqctl_top.c: `emqctl top QUEUE`, a refreshing view of one queue: the
 * stats totals with their rates of change, then every group, largest
 * backlog first, with its depth's rate of change. Rates come from two
 * successive snapshots (the server keeps no counters), so the first frame
 * has none.
 *
 * On a terminal it redraws in place with plain ANSI escapes (alternate
 * screen, cursor hidden, stdin in non-canonical mode so `q` quits at
 * once) and puts the terminal back however it ends; otherwise each refresh
 * is a plain snapshot, or under --json one {"stats":…,"groups":[…]} line. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "emqctl.h"
#include "emqctl_table.h"

#define TOP_PAGE     1000
#define TOP_MAX_ROWS 100000 /* groups fetched per refresh at most */

/* One group as one snapshot saw it. */
struct top_group {
    const char *name;    /* points into the snapshot's groups JSON */
    const json_t *entry; /* its entry there: where each setting comes from */
    long long depth, active, limit, weight, cap; /* cap -1: none */
    long long rate_max, rate_per_ms;             /* -1: no rate */
    bool paused, throttled;
    double rate; /* depth change per second; NAN without a previous snapshot */
};

/* One refresh: the stats reply, the groups (sorted by name for lookup),
 * and when it was taken. */
struct top_snap {
    json_t *stats;
    json_t *groups; /* every page's entries, in one array */
    struct top_group *g;
    size_t n;
    double t;
};

/* The terminal state to restore and the quit flag the signal handler sets. */
static struct termios top_saved_tio;
static bool top_raw, top_screen;
static volatile sig_atomic_t top_quit;
static struct emq *volatile top_conn;

static void top_signal_cb(int sig)
{
    (void)sig;
    top_quit = 1;
    if (top_conn != NULL)
        emq_interrupt(top_conn);
}

static double top_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void top_restore(void)
{
    if (top_raw)
        tcsetattr(STDIN_FILENO, TCSANOW, &top_saved_tio);
    if (top_screen)
        fputs("\x1b[?25h\x1b[?1049l", stdout);
    fflush(stdout);
    top_raw = top_screen = false;
}

static void top_terminal_enter(bool tty_out)
{
    struct sigaction sa = {0};
    sa.sa_handler = top_signal_cb; /* no SA_RESTART: waits end at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (!tty_out)
        return;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &top_saved_tio) == 0) {
        struct termios raw = top_saved_tio;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        top_raw = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    fputs("\x1b[?1049h\x1b[?25l", stdout);
    top_screen = true;
    atexit(top_restore);
}

static void top_snap_clear(struct top_snap *s)
{
    json_decref(s->stats);
    json_decref(s->groups);
    free(s->g);
    memset(s, 0, sizeof(*s));
}

static int top_by_name(const void *a, const void *b)
{
    return strcmp(((const struct top_group *)a)->name, ((const struct top_group *)b)->name);
}

/* Largest backlog first, then most active, then by name. */
static int top_by_size(const void *a, const void *b)
{
    const struct top_group *x = *(const struct top_group *const *)a;
    const struct top_group *y = *(const struct top_group *const *)b;
    if (x->depth != y->depth)
        return x->depth < y->depth ? 1 : -1;
    if (x->active != y->active)
        return x->active < y->active ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* Take one snapshot: stats, then every page of groups. */
static int top_fetch(struct ctl *ctl, struct top_snap *s)
{
    json_t *sreq = ctl_req("stats", ctl->pos[0]);
    int rc = ctl_call_quiet(ctl, sreq, &s->stats);
    json_decref(sreq);
    if (s->stats != NULL)
        json_object_del(s->stats, "ref"); /* libemq's, not the user's */
    s->groups = json_array();
    char cursor[40] = "0";
    while (rc == 0 && json_array_size(s->groups) < TOP_MAX_ROWS) {
        json_t *req = ctl_req("groups", ctl->pos[0]), *reply;
        json_object_set_new(req, "cursor", json_string(cursor));
        json_object_set_new(req, "count", json_integer(TOP_PAGE));
        rc = ctl_call_quiet(ctl, req, &reply);
        json_decref(req);
        if (rc != 0)
            break;
        json_array_extend(s->groups, json_object_get(reply, "groups"));
        const char *next = json_string_value(json_object_get(reply, "cursor"));
        snprintf(cursor, sizeof(cursor), "%s", next != NULL ? next : "0");
        json_decref(reply);
        if (strcmp(cursor, "0") == 0)
            break;
    }
    s->t = top_now();
    return rc;
}

/* Fill s->g from s->groups, sorted by name, with rates against prev. */
static int top_index(struct top_snap *s, const struct top_snap *prev)
{
    s->n = json_array_size(s->groups);
    s->g = calloc(s->n + 1, sizeof(*s->g));
    if (s->g == NULL)
        return -1;
    for (size_t i = 0; i < s->n; i++) {
        const json_t *e = json_array_get(s->groups, i);
        const json_t *lim = json_object_get(e, "limit");
        struct top_group *g = &s->g[i];
        g->name = json_string_value(json_object_get(e, "group"));
        g->name = g->name != NULL ? g->name : "?";
        g->depth = json_integer_value(json_object_get(e, "depth"));
        g->active = json_integer_value(json_object_get(e, "active"));
        g->limit = json_is_integer(lim) ? json_integer_value(lim) : -1;
        /* A daemon from before weights sends none: every group has 1. */
        g->weight = json_is_integer(json_object_get(e, "weight"))
                        ? json_integer_value(json_object_get(e, "weight"))
                        : 1;
        g->paused = json_is_true(json_object_get(e, "paused"));
        const json_t *rate = json_object_get(e, "rate");
        g->rate_max = json_is_object(rate) ? json_integer_value(json_object_get(rate, "max")) : -1;
        g->rate_per_ms = json_integer_value(json_object_get(rate, "per_ms"));
        g->throttled = json_is_true(json_object_get(e, "throttled"));
        const json_t *cap = json_object_get(e, "cap");
        g->cap = json_is_integer(cap) ? json_integer_value(cap) : -1;
        g->entry = e;
    }
    qsort(s->g, s->n, sizeof(*s->g), top_by_name);
    double dt = prev->stats != NULL ? s->t - prev->t : 0;
    for (size_t i = 0; i < s->n; i++) {
        struct top_group *g = &s->g[i];
        const struct top_group *p =
            dt > 0 ? bsearch(g, prev->g, prev->n, sizeof(*g), top_by_name) : NULL;
        /* A group new since the last refresh grew from nothing. */
        g->rate = dt <= 0 ? NAN : (double)(g->depth - (p ? p->depth : 0)) / dt;
    }
    return 0;
}

/* One stats field and its rate: "12,345 (+3.0/s)". */
static const char *top_stat(char *buf, const struct top_snap *s, const struct top_snap *prev,
                            const char *key)
{
    char n[32], r[32];
    long long v = json_integer_value(json_object_get(s->stats, key));
    if (prev->stats == NULL || s->t <= prev->t) {
        snprintf(buf, 64, "%s", fmt_num(n, v));
        return buf;
    }
    long long pv = json_integer_value(json_object_get(prev->stats, key));
    snprintf(buf, 64, "%s (%s)", fmt_num(n, v), fmt_rate(r, (double)(v - pv) / (s->t - prev->t)));
    return buf;
}

static long long top_total(const json_t *stats)
{
    static const char *const keys[] = {"pending", "active", "delayed", "dead"};
    long long t = 0;
    for (size_t i = 0; i < 4; i++)
        t += json_integer_value(json_object_get(stats, keys[i]));
    return t;
}

/* The totals block: every stats field, rates for the moving ones, and the
 * net rate of jobs entering minus leaving the queue. */
static void top_totals(FILE *out, const struct ctl *ctl, const struct top_snap *s,
                       const struct top_snap *prev)
{
    char b[4][64], n[4][32], net[32];
    fprintf(out, "%s pending %s  active %s  delayed %s  dead %s%s\n", table_bold(ctl->color),
            top_stat(b[0], s, prev, "pending"), top_stat(b[1], s, prev, "active"),
            top_stat(b[2], s, prev, "delayed"), top_stat(b[3], s, prev, "dead"),
            table_reset(ctl->color));
    bool rated = prev->stats != NULL && s->t > prev->t;
    fmt_rate(net,
             rated ? (double)(top_total(s->stats) - top_total(prev->stats)) / (s->t - prev->t) : 0);
    fprintf(out, " groups %s  ring %s  paused %s  flat %s  net in %s\n",
            fmt_num(n[0], json_integer_value(json_object_get(s->stats, "groups"))),
            fmt_num(n[1], json_integer_value(json_object_get(s->stats, "ring"))),
            fmt_num(n[2], json_integer_value(json_object_get(s->stats, "paused"))),
            fmt_num(n[3], json_integer_value(json_object_get(s->stats, "flat"))),
            rated ? net : "-");
}

static const struct table_col top_cols[] = {
    {"GROUP", false}, {"DEPTH", true},  {"RATE", true}, {"ACTIVE", true},  {"LIMIT", true},
    {"WEIGHT", true}, {"LEASES", true}, {"CAP", true},  {"PAUSED", false},
};
#define TOP_COLS (sizeof(top_cols) / sizeof(top_cols[0]))

/* bufs holds 6 x 32 bytes, lim 64 (the rate limit: "5/1000ms", and
 * " held" while the group is off the ring for it). RATE is the depth's
 * rate of change; LEASES the group's rate limit. A LIMIT, WEIGHT, LEASES
 * or CAP from the queue default is marked "(q)", as groups marks it. */
static void top_cells(const struct top_group *g, char bufs[6][32], char lim[64],
                      const char *cells[TOP_COLS])
{
    cells[0] = g->name;
    cells[1] = fmt_num(bufs[0], g->depth);
    cells[2] = isnan(g->rate) ? "-" : fmt_rate(bufs[1], g->rate);
    cells[3] = fmt_num(bufs[2], g->active);
    cells[4] = g->limit < 0 ? "-" : fmt_num(bufs[3], g->limit);
    cells[5] = fmt_num(bufs[4], g->weight);
    if (g->rate_max >= 0)
        snprintf(lim, 64, "%lld/%lldms%s", g->rate_max, g->rate_per_ms,
                 g->throttled ? " held" : "");
    cells[6] = g->rate_max < 0 ? "-" : lim;
    cells[7] = g->cap < 0 ? "-" : fmt_num(bufs[5], g->cap);
    cells[8] = g->paused ? "yes" : "no";
    if (g->entry == NULL)
        return;
    cmd_mark_default(g->entry, "limit_from", bufs[3], &cells[4]);
    cmd_mark_default(g->entry, "weight_from", bufs[4], &cells[5]);
    cmd_mark_default(g->entry, "rate_from", lim, &cells[6]);
    cmd_mark_default(g->entry, "cap_from", bufs[5], &cells[7]);
}

/* The groups table, largest first, at most rows lines of groups. */
static void top_table(FILE *out, const struct ctl *ctl, const struct top_snap *s, size_t rows)
{
    const struct top_group **order = calloc(s->n + 1, sizeof(*order));
    if (order == NULL)
        return;
    for (size_t i = 0; i < s->n; i++)
        order[i] = &s->g[i];
    qsort(order, s->n, sizeof(*order), top_by_size);
    size_t shown = s->n < rows ? s->n : rows;
    struct table t;
    char bufs[6][32], lim[64];
    const char *cells[TOP_COLS];
    table_init(&t, top_cols, TOP_COLS, ctl->color, out);
    for (size_t i = 0; i < shown; i++) {
        top_cells(order[i], bufs, lim, cells);
        table_fit(&t, cells);
    }
    table_header(&t);
    for (size_t i = 0; i < shown; i++) {
        top_cells(order[i], bufs, lim, cells);
        table_row(&t, cells, order[i]->paused);
    }
    if (shown < s->n)
        fprintf(out, "... and %zu more groups\n", s->n - shown);
    free(order);
}

/* Draw one frame: in place on a terminal, else as a plain snapshot. */
static void top_draw(const struct ctl *ctl, const struct top_snap *s, const struct top_snap *prev,
                     long frame, bool tty)
{
    char *buf = NULL, when[32];
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (out == NULL)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    fmt_time_ms(when, (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
    fprintf(out, "emqctl top %s  refresh %ld  %s%s\n", ctl->pos[0], frame, when,
            tty ? "  (q quits)" : "");
    top_totals(out, ctl, s, prev);
    fputc('\n', out);
    size_t rows = ctl->opt[CTL_O_LIMIT] ? (size_t)ctl->num[CTL_O_LIMIT] : (size_t)-1;
    struct winsize ws;
    if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 7)
        rows = rows < (size_t)ws.ws_row - 7 ? rows : (size_t)ws.ws_row - 7;
    top_table(out, ctl, s, rows);
    fclose(out);
    if (!tty) {
        printf("%s\n", buf);
    } else {
        /* Home, each line cleared to its end, then the rest of the screen. */
        fputs("\x1b[H", stdout);
        for (char *line = buf, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1)
            printf("%.*s\x1b[K\n", (int)(nl - line), line);
        fputs("\x1b[J", stdout);
    }
    free(buf);
    fflush(stdout);
}

static void top_print_json(const struct top_snap *s)
{
    json_t *o = json_pack("{s:O, s:O}", "stats", s->stats, "groups", s->groups);
    char *line = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    if (line != NULL)
        puts(line);
    free(line);
    json_decref(o);
    fflush(stdout);
}

/* Wait ms, returning early on `q` (terminal) or a signal. */
static void top_wait(long long ms)
{
    double end = top_now() + (double)ms / 1000.0;
    while (!top_quit) {
        double left = end - top_now();
        if (left <= 0)
            return;
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int n = poll(&p, top_raw ? 1 : 0, (int)(left * 1000) + 1);
        char c;
        if (n > 0 && read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q'))
            top_quit = 1;
    }
}

static int top_run(struct ctl *ctl)
{
    bool tty = !ctl->json && isatty(STDOUT_FILENO);
    long long interval = ctl->opt[CTL_O_INTERVAL] ? ctl->num[CTL_O_INTERVAL] : 1000;
    long long iterations = ctl->opt[CTL_O_ITERATIONS] ? ctl->num[CTL_O_ITERATIONS] : -1;
    struct top_snap prev = {0}, cur = {0};
    int rc = 0;
    top_terminal_enter(tty);
    for (long frame = 1; !top_quit && (iterations < 0 || frame <= iterations); frame++) {
        if (frame > 1)
            top_wait(interval);
        if (top_quit)
            break;
        rc = top_fetch(ctl, &cur);
        top_conn = ctl->conn;
        if (rc != 0 || top_index(&cur, &prev) != 0)
            break;
        if (ctl->json)
            top_print_json(&cur);
        else
            top_draw(ctl, &cur, &prev, frame, tty);
        top_snap_clear(&prev);
        prev = cur;
        memset(&cur, 0, sizeof(cur));
    }
    top_restore();
    top_snap_clear(&prev);
    top_snap_clear(&cur);
    /* Quitting by q or a signal is the normal way out of top. */
    if (rc != 0 && top_quit && ctl->conn != NULL && emq_errcode(ctl->conn) == EMQ_EINTR)
        rc = 0;
    return rc == 0 ? CTL_EXIT_OK : rc;
}

const struct ctl_cmd ctl_top_cmd = {
    "top",
    "QUEUE",
    "a live view: totals and groups (largest first) with rates",
    "On a terminal, redraws every --interval ms until q or Ctrl-C. RATE is the\n"
    "change of a group's depth per second between refreshes; \"net in\" is the\n"
    "change of pending+active+delayed+dead per second (jobs enqueued minus jobs\n"
    "completed or removed). When stdout is not a terminal, prints one plain\n"
    "snapshot per refresh; under --json, one {\"stats\":...,\"groups\":[...]} line.\n",
    1,
    1,
    CTL_F(CTL_O_INTERVAL) | CTL_F(CTL_O_ITERATIONS) | CTL_F(CTL_O_LIMIT),
    false,
    top_run,
};
