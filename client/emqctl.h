/* emqctl.h: what the modules of emqctl, the admin CLI, share: the run
 * context each command gets, the command table, and the helpers that talk
 * to the server and report errors the same way everywhere.
 *
 * Modules: emqctl.c (argument parsing, help, connecting, main),
 * emqctl_table.c (aligned tables, readable numbers, colour),
 * emqctl_cmd.c (the one-request commands), emqctl_view.c (the daemon-wide
 * views: queues, forget, clients), emqctl_enqueue.c (enqueue, single or
 * batched from stdin), emqctl_top.c (the live view) and emqctl_token.c
 * (token new: a token for emqd's tokens-file). */
#ifndef EMQCTL_H
#define EMQCTL_H

#include <stdbool.h>

#include <jansson.h>

#include "emq.h"

/* Exit codes (documented in emqctl.1). */
enum ctl_exit {
    CTL_EXIT_OK = 0,
    CTL_EXIT_FAIL = 1,  /* a server error, a connection failure, a failed item */
    CTL_EXIT_USAGE = 2, /* bad command line, or a refused confirmation */
};

/* The per-command options; each has a row in emqctl.c's option table. */
enum ctl_opt {
    CTL_O_LIMIT,
    CTL_O_YES,
    CTL_O_GROUP,
    CTL_O_JOB,
    CTL_O_DELAY,
    CTL_O_ATTEMPTS,
    CTL_O_BATCH,
    CTL_O_INTERVAL,
    CTL_O_ITERATIONS,
    CTL_O_PAGE,
    CTL_O_STATE,
    CTL_O_COUNT_, /* not an option: the number of them */
};

#define CTL_F(o)    (1u << (o))
#define CTL_MAX_POS 35 /* token new NAME ROLE and 32 patterns */

struct ctl;

/* One row of the command table: name, synopsis, help text, the positional
 * arguments and options it takes (checked before it runs), and its body. */
struct ctl_cmd {
    const char *name;
    const char *synopsis; /* what follows the name in a usage line */
    const char *summary;  /* one line, for `emqctl --help` */
    const char *details;  /* more lines for `emqctl NAME --help`, or NULL */
    int min_pos, max_pos; /* positional arguments after the name */
    unsigned opts;        /* CTL_F() of the options it accepts */
    bool slow;            /* may run long on the server: no reply timeout */
    int (*run)(struct ctl *ctl);
};

/* The state of one emqctl run, filled by argument parsing. */
struct ctl {
    struct emq_options opts;   /* where to connect; strings point into argv/env */
    const struct ctl_cmd *cmd; /* the command being run */
    struct emq *conn;          /* connected on first use by ctl_call() */
    bool json;                 /* --json: print the server's replies as they are */
    bool color;                /* stdout is a terminal and NO_COLOR is unset */
    int npos;
    const char *pos[CTL_MAX_POS];  /* positional arguments after the name */
    const char *opt[CTL_O_COUNT_]; /* each option's value ("" for a flag), or NULL */
    long long num[CTL_O_COUNT_];   /* numeric options, checked against their bounds */
};

/* The command tables of the command modules, each ended by a zeroed row. */
extern const struct ctl_cmd ctl_cmd_table[], ctl_view_table[];
extern const struct ctl_cmd ctl_enqueue_cmd;
extern const struct ctl_cmd ctl_top_cmd;
extern const struct ctl_cmd ctl_token_cmd;

/* Send request (borrowed) and wait for its reply, connecting first if need
 * be. On success returns 0 with *reply set (a new reference) and, under
 * --json, the reply already printed as one line. On failure prints
 * `emqctl: CODE: message` to stderr and returns CTL_EXIT_FAIL. */
int ctl_call(struct ctl *ctl, json_t *request, json_t **reply);

/* Like ctl_call but never prints the reply, for commands that print
 * something else under --json (top). */
int ctl_call_quiet(struct ctl *ctl, json_t *request, json_t **reply);

/* A new request object {"op":op,"queue":queue} (queue may be NULL). */
json_t *ctl_req(const char *op, const char *queue);

/* Print `emqctl: CMD: message` and the command's usage to stderr;
 * returns CTL_EXIT_USAGE. */
int ctl_usage_error(const struct ctl *ctl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print `emqctl: CODE: message` to stderr (one place for the error form). */
void ctl_error(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Ask "question [y/N]" on the terminal unless --yes was given. Returns 0 to
 * go on, CTL_EXIT_USAGE (after saying why) when stdin is not a terminal and
 * there is no --yes, CTL_EXIT_FAIL when the user said no. */
int ctl_confirm(const struct ctl *ctl, const char *question);

struct table_col;

/* A paged listing of a set scan (groups, queues): the op, the reply's
 * array, the table's columns, the default and the largest page size the
 * op takes, and the cells of one entry (bufs: 32 bytes per column;
 * returns true to highlight it). */
struct ctl_scan {
    const char *op, *key;
    const struct table_col *cols;
    int ncols;
    long long page, page_max;
    bool (*cells)(const json_t *entry, char bufs[][32], const char **cells);
};

/* Page through scan (of queue, or NULL), printing each page as it comes
 * (--json: each reply as a line), at most --limit rows, --page-size per
 * request; "(no KEY)" when there is none. 0 or the exit code. */
int ctl_scan(struct ctl *ctl, const struct ctl_scan *scan, const char *queue);

/* Parse a decimal integer in [min, max]; 0 or -EINVAL. */
int ctl_parse_int(const char *s, long long min, long long max, long long *out);

/* Mark a cell whose value comes from the queue default with " (q)": when
 * group entry g's key (limit_from, weight_from, rate_from, cap_from) is
 * "queue", *cell is copied into buf (32 bytes), marked, and pointed at it
 * (emqctl_cmd.c; groups and top). */
void cmd_mark_default(const json_t *g, const char *key, char *buf, const char **cell);

#endif
