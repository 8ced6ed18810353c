/* emqctl_table.h: emqctl's human output: aligned text tables, numbers with
 * thousands separators (12,345), rates, times, and colour that is used only
 * when stdout is a terminal and NO_COLOR is unset. */
#ifndef EMQCTL_TABLE_H
#define EMQCTL_TABLE_H

#include <stdbool.h>
#include <stdio.h>

#define TABLE_MAX_COLS 10

/* One column: its title and whether its cells are right-aligned (numbers). */
struct table_col {
    const char *title;
    bool right;
};

/* A table being printed: columns, their widths so far, where it goes. The
 * caller fits every row it has before printing the header; rows that come
 * later (the next page) may widen a column, which then shifts. */
struct table {
    const struct table_col *cols;
    int ncols;
    int width[TABLE_MAX_COLS];
    bool color;
    FILE *out;
};

/* Start a table of ncols columns; widths start at the titles'. */
void table_init(struct table *t, const struct table_col *cols, int ncols, bool color, FILE *out);

/* Widen the columns to fit one row of ncols cells. */
void table_fit(struct table *t, const char *const *cells);

/* Print the header line (bold when colour is on). */
void table_header(const struct table *t);

/* Print one row; hl marks it for highlight (yellow when colour is on). */
void table_row(const struct table *t, const char *const *cells, bool hl);

/* Print "key  value" lines with the keys padded to one width. */
void table_kv(FILE *out, bool color, const char *const *keys, const char *const *vals, int n);

/* v with thousands separators: 12345 -> "12,345". buf holds 32 bytes. */
const char *fmt_num(char *buf, long long v);

/* A per-second rate, signed, one decimal: "+12.5/s", "-3.0/s", "0/s". */
const char *fmt_rate(char *buf, double per_s);

/* Milliseconds since the epoch as UTC "2026-01-01T00:00:00.000Z". */
const char *fmt_time_ms(char *buf, long long ms);

/* Bold/reset escapes, or "" when colour is off. */
const char *table_bold(bool color);
const char *table_reset(bool color);

#endif
