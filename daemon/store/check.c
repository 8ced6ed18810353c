/* check: the store-invariant check of one queue (check.h), and
 * store_check (admin.h), which runs it over the pool.
 *
 * The walk: rows (SCAN of the queue's keys), flat (the four flat
 * structures), sets (the group registry, paused, glimit), ring, then off.
 * A rows or sets step names groups; groups steps examine them before the
 * walk goes on. The groups found serviceable are kept here, and the ring
 * walk marks each lane it reads, with its index: a lane read at two
 * indexes is confirmed (dups) at once, and once the ring is walked the
 * serviceable groups it never met are confirmed (off). Each step is one
 * atomic script call, so every violation reported held when it was seen;
 * what the walk holds between steps only picks what to confirm. */
#include "check.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "map.h"
#include "store_internal.h"

const char *const store_check_steps[STORE_CHECK__COUNT] = {
    [STORE_CHECK_ROWS] = "rows",     [STORE_CHECK_FLAT] = "flat", [STORE_CHECK_SETS] = "sets",
    [STORE_CHECK_GROUPS] = "groups", [STORE_CHECK_RING] = "ring", [STORE_CHECK_DUPS] = "dups",
    [STORE_CHECK_OFF] = "off",
};

/* A lane of the lanes map: serviceable when its group was examined, and
 * not yet read on the ring; else read at ring index value - LANE_AT. */
#define LANE_SERVICEABLE ((uintptr_t)1)
#define LANE_AT          ((uintptr_t)2)

#define TEXT(x)   #x
#define NUMBER(x) TEXT(x)
static const char stopped[] =
    "and more: the check stopped after " NUMBER(STORE_CHECK_MAX) " violations";

/* The strings a step is sent with, owned. */
struct check_list {
    size_t n, cap;
    char **s;
    size_t *len;
};

struct store_check_walk {
    unsigned budget;
    enum store_check_step walk; /* rows, flat, sets, ring, then off */
    char *cursor;               /* the walk's */
    /* A list step (groups, dups, off) in progress: it runs to its end
     * before the walk goes on. */
    enum store_check_step step;
    struct check_list list;
    char *list_cursor;
    enum store_check_step sent; /* what walk_next gave last */
    struct map lanes;
    /* The off step's place in lanes: the entry to look at next. */
    bool off_started;
    struct map_entry *off_next;
    size_t off_bucket;
    /* The violations, each once, in the order found (strings owned). */
    struct map said;
    struct store_text *v;
    size_t nv;
    bool more; /* one more than STORE_CHECK_MAX was found: stopped */
};

static void list_clear(struct check_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->s[i]);
    l->n = 0;
}

static char *copy(const char *s, size_t len)
{
    char *c = malloc(len + 1);
    if (c != NULL) {
        memcpy(c, s, len);
        c[len] = '\0';
    }
    return c;
}

static int list_push(struct check_list *l, const char *s, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **ns = realloc(l->s, cap * sizeof(*ns));
        if (ns != NULL)
            l->s = ns;
        size_t *nl = ns != NULL ? realloc(l->len, cap * sizeof(*nl)) : NULL;
        if (nl == NULL)
            return -ENOMEM;
        l->len = nl;
        l->cap = cap;
    }
    if ((l->s[l->n] = copy(s, len)) == NULL)
        return -ENOMEM;
    l->len[l->n++] = len;
    return 0;
}

/* Set *dst to a copy of the text t ("" frees it: NULL). */
static int set_text(char **dst, const struct store_text *t)
{
    char *c = t->len > 0 ? copy(t->str, t->len) : NULL;
    if (t->len > 0 && c == NULL)
        return -ENOMEM;
    free(*dst);
    *dst = c;
    return 0;
}

struct store_check_walk *store_check_walk_new(unsigned budget)
{
    struct store_check_walk *w = budget >= 1 ? calloc(1, sizeof(*w)) : NULL;
    if (w == NULL)
        return NULL;
    w->budget = budget;
    w->walk = STORE_CHECK_ROWS;
    map_init(&w->lanes);
    map_init(&w->said);
    return w;
}

void store_check_walk_free(struct store_check_walk *w)
{
    if (w == NULL)
        return;
    list_clear(&w->list);
    free(w->list.s);
    free(w->list.len);
    free(w->cursor);
    free(w->list_cursor);
    map_deinit(&w->lanes);
    map_deinit(&w->said);
    for (size_t i = 0; i < w->nv; i++)
        if (w->v[i].str != stopped)
            free((char *)w->v[i].str);
    free(w->v);
    free(w);
}

/* Keep a violation, once; past STORE_CHECK_MAX, note that there are
 * more. 0 or -ENOMEM. */
static int said(struct store_check_walk *w, const struct store_text *t)
{
    if (map_get(&w->said, t->str, t->len) != NULL)
        return 0;
    if (w->nv == STORE_CHECK_MAX) {
        w->more = true;
        return 0;
    }
    if (w->nv % 64 == 0) {
        /* Room for one more: the sentence that says the walk stopped. */
        struct store_text *v = realloc(w->v, (w->nv + 65) * sizeof(*v));
        if (v == NULL)
            return -ENOMEM;
        w->v = v;
    }
    char *s = copy(t->str, t->len);
    if (s == NULL)
        return -ENOMEM;
    w->v[w->nv++] = (struct store_text){s, t->len};
    return map_put(&w->said, s, t->len, s);
}

/* The ring step read names from ring index first on: mark each lane, and
 * list the ones read before at another index for a dups step. */
static int ring_read(struct store_check_walk *w, const struct store_check_page *p)
{
    for (size_t i = 0; i < p->nnames; i++) {
        const struct store_text *g = &p->names[i];
        uintptr_t at = (uintptr_t)p->first + i + LANE_AT;
        uintptr_t was = (uintptr_t)map_get(&w->lanes, g->str, g->len);
        if (was >= LANE_AT && was != at) {
            char a[24], b[24];
            store_num(a, (long long)(was - LANE_AT));
            store_num(b, (long long)(at - LANE_AT));
            if (list_push(&w->list, g->str, g->len) != 0 ||
                list_push(&w->list, a, strlen(a)) != 0 || list_push(&w->list, b, strlen(b)) != 0)
                return -ENOMEM;
            continue; /* the first index stays the one to confirm against */
        }
        if (was < LANE_AT && map_put(&w->lanes, g->str, g->len, (void *)at) != 0)
            return -ENOMEM;
    }
    if (w->list.n > 0)
        w->step = STORE_CHECK_DUPS;
    return 0;
}

/* What a step's names mean to the walk. */
static int take_names(struct store_check_walk *w, enum store_check_step step,
                      const struct store_check_page *p)
{
    switch (step) {
    case STORE_CHECK_ROWS:
    case STORE_CHECK_SETS:
        /* Groups to examine before the walk goes on. */
        for (size_t i = 0; i < p->nnames; i++)
            if (list_push(&w->list, p->names[i].str, p->names[i].len) != 0)
                return -ENOMEM;
        w->step = STORE_CHECK_GROUPS;
        return 0;
    case STORE_CHECK_GROUPS:
        /* Serviceable: the ring walk must meet them. */
        for (size_t i = 0; i < p->nnames; i++)
            if (map_put(&w->lanes, p->names[i].str, p->names[i].len, (void *)LANE_SERVICEABLE) != 0)
                return -ENOMEM;
        return 0;
    case STORE_CHECK_RING:
        return ring_read(w, p);
    default:
        return 0;
    }
}

/* The next batch of serviceable groups the ring walk never met, into the
 * list (left empty when none is left). */
static int off_batch(struct store_check_walk *w)
{
    struct map_entry *e = w->off_started ? w->off_next : map_first(&w->lanes, &w->off_bucket);
    w->off_started = true;
    for (; e != NULL && w->list.n < w->budget; e = map_next(&w->lanes, &w->off_bucket, e))
        if ((uintptr_t)e->value == LANE_SERVICEABLE && list_push(&w->list, e->key, e->klen) != 0)
            return -ENOMEM;
    w->off_next = e; /* the next to look at; off_bucket is its bucket */
    w->step = STORE_CHECK_OFF;
    return 0;
}

/* A step that works through a list (the walk waits for it). */
static bool list_step(enum store_check_step s)
{
    return s == STORE_CHECK_GROUPS || s == STORE_CHECK_DUPS || s == STORE_CHECK_OFF;
}

int store_check_walk_next(struct store_check_walk *w, struct store_check_call *call)
{
    if (w->more)
        return 0;
    if (w->list.n == 0 && w->walk == STORE_CHECK_OFF && (!w->off_started || w->off_next != NULL) &&
        off_batch(w) != 0)
        return -ENOMEM;
    if (w->list.n > 0) {
        *call = (struct store_check_call){w->step,   w->list_cursor ? w->list_cursor : "",
                                          w->budget, w->list.n,
                                          w->list.s, w->list.len};
    } else if (w->walk != STORE_CHECK_OFF) {
        *call = (struct store_check_call){w->walk, w->cursor ? w->cursor : "", w->budget, 0, NULL,
                                          NULL};
    } else {
        return 0;
    }
    w->sent = call->step;
    return 1;
}

/* The walk's steps, in order. */
static enum store_check_step walk_after(enum store_check_step s)
{
    switch (s) {
    case STORE_CHECK_ROWS:
        return STORE_CHECK_FLAT;
    case STORE_CHECK_FLAT:
        return STORE_CHECK_SETS;
    case STORE_CHECK_SETS:
        return STORE_CHECK_RING;
    default:
        return STORE_CHECK_OFF;
    }
}

int store_check_walk_feed(struct store_check_walk *w, const struct store_check_page *p)
{
    for (size_t i = 0; i < p->nviolations; i++)
        if (said(w, &p->violations[i]) != 0)
            return -ENOMEM;
    int rc;
    if (list_step(w->sent)) {
        /* On from its cursor, or the list is done. */
        rc = set_text(&w->list_cursor, &p->next);
        if (p->next.len == 0)
            list_clear(&w->list);
    } else {
        rc = set_text(&w->cursor, &p->next);
        if (p->next.len == 0)
            w->walk = walk_after(w->walk);
    }
    return rc != 0 ? rc : take_names(w, w->sent, p);
}

int store_check_walk_result(struct store_check_walk *w, size_t *n, const struct store_text **v)
{
    if (w->more && (w->nv == 0 || w->v[w->nv - 1].str != stopped))
        w->v[w->nv++] = (struct store_text){stopped, sizeof(stopped) - 1};
    *n = w->nv;
    *v = w->v;
    return 0;
}

/* --- store_check: the walk over the pool ---------------------------------- */

struct check_run {
    struct store_queue *sq;
    struct store_check_walk *w;
    store_check_cb *cb;
    void *priv;
};

/* A step after the first could not be sent: the pool is down or stopping. */
static const struct store_status check_unsent = {WIRE_EUNAVAILABLE, "the backend is unavailable"};

/* The check is over: answer with st, or (st code 0) the violations. */
static void finish(struct check_run *run, const struct store_status *st)
{
    size_t n = 0;
    const struct store_text *v = NULL;
    if (st->code == 0)
        store_check_walk_result(run->w, &n, &v);
    run->cb(run->priv, st, n, v);
    store_check_walk_free(run->w);
    free(run);
}

static void page_cb(void *priv, const struct store_status *st, const struct store_check_page *p);

/* Send the walk's next step (0), or say why not: 1 (the walk is over)
 * or a negative errno. */
static int send_next(struct check_run *run)
{
    struct store_check_call call;
    int rc = store_check_walk_next(run->w, &call);
    return rc == 1 ? store_check_step(run->sq, &call, page_cb, run) : rc == 0 ? 1 : rc;
}

static void page_cb(void *priv, const struct store_status *st, const struct store_check_page *p)
{
    struct check_run *run = priv;
    if (st->code != 0) {
        finish(run, st);
        return;
    }
    int rc = store_check_walk_feed(run->w, p);
    if (rc == 0)
        rc = send_next(run);
    if (rc != 0)
        finish(run, rc == 1 ? &store_ok : rc == -ENOMEM ? &store_oom : &check_unsent);
}

int store_check(struct store_queue *sq, unsigned budget, store_check_cb *cb, void *priv)
{
    struct check_run *run = malloc(sizeof(*run));
    if (run == NULL)
        return -ENOMEM;
    *run = (struct check_run){sq, store_check_walk_new(budget), cb, priv};
    int rc = run->w != NULL ? send_next(run) : budget < 1 ? -EINVAL : -ENOMEM;
    if (rc != 0) {
        store_check_walk_free(run->w);
        free(run);
    }
    return rc == 1 ? -EINVAL : rc;
}
