/* check: the store-invariant check of one queue (docs/ARCHITECTURE.md
 * section 4) as a walk of bounded lua/check.lua steps. The walk says what
 * each step is sent with and keeps what the steps found; sending them is
 * the caller's: store_check (admin.h) over the pool, or a test over a
 * connection of its own, one step after another. */
#ifndef EMQ_STORE_CHECK_H
#define EMQ_STORE_CHECK_H

#include <stddef.h>

#include "admin.h"

/* The steps; store_check_steps names them as the script does. */
enum store_check_step {
    STORE_CHECK_ROWS,
    STORE_CHECK_FLAT,
    STORE_CHECK_SETS,
    STORE_CHECK_GROUPS,
    STORE_CHECK_RING,
    STORE_CHECK_DUPS,
    STORE_CHECK_OFF,
    STORE_CHECK__COUNT
};

extern const char *const store_check_steps[STORE_CHECK__COUNT];

/* A step to send: lua/check.lua's ARGV after the prefix, in order (the
 * list's strings are NUL-terminated too). Borrowed from the walk until it
 * is fed the step's answer. */
struct store_check_call {
    enum store_check_step step;
    const char *cursor;
    unsigned budget;
    size_t nlist;
    char *const *list;
    const size_t *lens;
};

/* What one step answered: strings borrowed from the reply. */
struct store_check_page {
    struct store_text next; /* the cursor for the step's next call; "": it is done */
    long long first;        /* a ring step: the ring index of names[0] */
    size_t nnames, nviolations;
    const struct store_text *names, *violations;
};

struct store_check_walk;

/* A walk in steps of budget (>= 1) items; NULL when out of memory. */
struct store_check_walk *store_check_walk_new(unsigned budget);
void store_check_walk_free(struct store_check_walk *w);

/* The step to send next, into *call: 1; 0 when the walk is over (all
 * done, or STORE_CHECK_MAX violations found); -ENOMEM. */
int store_check_walk_next(struct store_check_walk *w, struct store_check_call *call);

/* What the step walk_next gave last answered. 0 or -ENOMEM. */
int store_check_walk_feed(struct store_check_walk *w, const struct store_check_page *p);

/* The violations, each once, in the order found (and, when the walk
 * stopped at STORE_CHECK_MAX, one more sentence saying so): *v borrowed
 * from w until it is freed. 0 or -ENOMEM. */
int store_check_walk_result(struct store_check_walk *w, size_t *n, const struct store_text **v);

#endif
