/* emqctl_table.c: aligned tables and readable numbers for emqctl's human
 * output (emqctl_table.h). Widths are counted in bytes: every name the
 * server hands out (queue, group, job ids) is ASCII by the id rules. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "emqctl_table.h"

#define ESC_BOLD   "\x1b[1m"
#define ESC_YELLOW "\x1b[33m"
#define ESC_RESET  "\x1b[0m"

void table_init(struct table *t, const struct table_col *cols, int ncols, bool color, FILE *out)
{
    memset(t, 0, sizeof(*t));
    t->cols = cols;
    t->ncols = ncols < TABLE_MAX_COLS ? ncols : TABLE_MAX_COLS;
    t->color = color;
    t->out = out;
    for (int i = 0; i < t->ncols; i++)
        t->width[i] = (int)strlen(cols[i].title);
}

void table_fit(struct table *t, const char *const *cells)
{
    for (int i = 0; i < t->ncols; i++) {
        int w = (int)strlen(cells[i]);
        if (w > t->width[i])
            t->width[i] = w;
    }
}

/* One line of cells; the last column is not padded (no trailing blanks). */
static void table_line(const struct table *t, const char *const *cells)
{
    for (int i = 0; i < t->ncols; i++) {
        const char *sep = i + 1 < t->ncols ? "  " : "";
        if (t->cols[i].right)
            fprintf(t->out, "%*s%s", t->width[i], cells[i], sep);
        else if (i + 1 < t->ncols)
            fprintf(t->out, "%-*s%s", t->width[i], cells[i], sep);
        else
            fputs(cells[i], t->out);
    }
}

void table_header(const struct table *t)
{
    const char *titles[TABLE_MAX_COLS];
    for (int i = 0; i < t->ncols; i++)
        titles[i] = t->cols[i].title;
    fputs(table_bold(t->color), t->out);
    table_line(t, titles);
    fprintf(t->out, "%s\n", table_reset(t->color));
}

void table_row(const struct table *t, const char *const *cells, bool hl)
{
    if (hl && t->color)
        fputs(ESC_YELLOW, t->out);
    table_line(t, cells);
    fprintf(t->out, "%s\n", hl ? table_reset(t->color) : "");
}

void table_kv(FILE *out, bool color, const char *const *keys, const char *const *vals, int n)
{
    int w = 0;
    for (int i = 0; i < n; i++)
        if ((int)strlen(keys[i]) > w)
            w = (int)strlen(keys[i]);
    for (int i = 0; i < n; i++)
        fprintf(out, "%s%-*s%s  %s\n", table_bold(color), w, keys[i], table_reset(color), vals[i]);
}

const char *fmt_num(char *buf, long long v)
{
    char digits[24];
    /* Work on the magnitude as unsigned so LLONG_MIN does not overflow. */
    unsigned long long m = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    int n = snprintf(digits, sizeof(digits), "%llu", m);
    char *p = buf;
    if (v < 0)
        *p++ = '-';
    for (int i = 0; i < n; i++) {
        if (i > 0 && (n - i) % 3 == 0)
            *p++ = ',';
        *p++ = digits[i];
    }
    *p = '\0';
    return buf;
}

const char *fmt_rate(char *buf, double per_s)
{
    if (per_s > -0.05 && per_s < 0.05)
        snprintf(buf, 32, "0/s");
    else
        snprintf(buf, 32, "%+.1f/s", per_s);
    return buf;
}

const char *fmt_time_ms(char *buf, long long ms)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;
    if (ms < 0 || gmtime_r(&s, &tm) == NULL) {
        snprintf(buf, 32, "%lld", ms);
        return buf;
    }
    size_t n = strftime(buf, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, 32 - n, ".%03lldZ", ms % 1000);
    return buf;
}

const char *table_bold(bool color)
{
    return color ? ESC_BOLD : "";
}

const char *table_reset(bool color)
{
    return color ? ESC_RESET : "";
}
