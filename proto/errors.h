/* errors: the wire error codes, the "error" word of a failed reply. One
 * table holds them all; the Lua scripts raise the same words as the first
 * word of their error replies ("ELEASE lease is not current"). */
#ifndef EMQ_ERRORS_H
#define EMQ_ERRORS_H

#include <stdbool.h>
#include <stddef.h>

/* The wire error codes (WIRE_EPROTO, WIRE_ELEASE, ...), from the one
 * table, emq_errors.def. They start at 1, so 0 can mean "no error" and a
 * proto function can return one as its positive, expected condition. */
enum wire_error {
#define EMQ_ERROR(name, summary, class) WIRE_E##name,
    WIRE__BEFORE_FIRST, /* 0: no error */
#include "emq_errors.def"
#undef EMQ_ERROR
    WIRE__END /* one past the last code */
};

/* The wire word of e ("ELEASE"), or NULL when e is not a code. */
const char *wire_error_name(enum wire_error e);

/* A one-line description of e, usable as a default message, or NULL. */
const char *wire_error_summary(enum wire_error e);

/* The code named by the first word of s (len bytes; the word ends at a
 * space or at len), e.g. the text of a script's error reply. A word that
 * names no code, including Redis's own "ERR" and "NOSCRIPT", is
 * WIRE_EINTERNAL. */
enum wire_error wire_error_lookup(const char *s, size_t len);

/* True when e is one of the codes above. */
bool wire_error_valid(int e);

#endif
