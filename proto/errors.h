/* errors: the wire error codes, the "error" word of a failed reply. One
 * table holds them all; the Lua scripts raise the same words as the first
 * word of their error replies ("ELEASE lease is not current"). */
#ifndef EMQ_ERRORS_H
#define EMQ_ERRORS_H

#include <stdbool.h>
#include <stddef.h>

/* The wire error codes. They start at 1, so 0 can mean "no error" and a
 * proto function can return one as its positive, expected condition. */
enum wire_error {
    WIRE_EPROTO = 1,   /* the line is not a well-formed request */
    WIRE_EUNKNOWN,     /* no such op */
    WIRE_EARG,         /* an argument is missing, unknown, mistyped or out of range */
    WIRE_EKIND,        /* a job id that is not JOB-namespaced */
    WIRE_EBRAND,       /* a malformed group id */
    WIRE_EQUEUE,       /* a malformed queue name */
    WIRE_ETOOBIG,      /* the line is longer than the limit */
    WIRE_EEMPTY,       /* an empty batch */
    WIRE_ENOJOB,       /* no such job */
    WIRE_ESTATE,       /* the job is not in a state that allows the move */
    WIRE_ELEASE,       /* the lease token is not current */
    WIRE_EAUTH,        /* not authenticated or not allowed */
    WIRE_EUNAVAILABLE, /* the backend cannot be reached in time */
    WIRE_EINTERNAL,    /* a bug or an unexpected backend reply */
    WIRE_ELIMIT,       /* a configured limit was reached */
    WIRE_EFULL,        /* the store has no room: Redis is out of memory */
    WIRE__END          /* one past the last code */
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
