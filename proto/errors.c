/* errors: the wire error table (see errors.h). */
#include "errors.h"

#include <string.h>

/* One row per code, indexed by the code. */
static const struct wire_error_row {
    const char *name;
    const char *summary;
} wire_errors[WIRE__END] = {
    [WIRE_EPROTO] = {"EPROTO", "malformed request"},
    [WIRE_EUNKNOWN] = {"EUNKNOWN", "unknown op"},
    [WIRE_EARG] = {"EARG", "bad argument"},
    [WIRE_EKIND] = {"EKIND", "job id must be JOB-namespaced"},
    [WIRE_EBRAND] = {"EBRAND", "malformed group id"},
    [WIRE_EQUEUE] = {"EQUEUE", "malformed queue name"},
    [WIRE_ETOOBIG] = {"ETOOBIG", "line too long"},
    [WIRE_EEMPTY] = {"EEMPTY", "empty batch"},
    [WIRE_ENOJOB] = {"ENOJOB", "no such job"},
    [WIRE_ESTATE] = {"ESTATE", "job is not in a state that allows this"},
    [WIRE_ELEASE] = {"ELEASE", "lease is not current"},
    [WIRE_EAUTH] = {"EAUTH", "not authorized"},
    [WIRE_EUNAVAILABLE] = {"EUNAVAILABLE", "backend unavailable"},
    [WIRE_EINTERNAL] = {"EINTERNAL", "internal error"},
    [WIRE_ELIMIT] = {"ELIMIT", "limit reached"},
    [WIRE_EFULL] = {"EFULL", "the store is full"},
};

bool wire_error_valid(int e)
{
    return e > 0 && e < WIRE__END;
}

const char *wire_error_name(enum wire_error e)
{
    return wire_error_valid((int)e) ? wire_errors[e].name : NULL;
}

const char *wire_error_summary(enum wire_error e)
{
    return wire_error_valid((int)e) ? wire_errors[e].summary : NULL;
}

enum wire_error wire_error_lookup(const char *s, size_t len)
{
    const char *space = s ? memchr(s, ' ', len) : NULL;
    size_t word = space ? (size_t)(space - s) : len;

    if (s == NULL)
        return WIRE_EINTERNAL;
    for (int e = 1; e < WIRE__END; e++) {
        const char *name = wire_errors[e].name;
        if (strlen(name) == word && memcmp(name, s, word) == 0)
            return (enum wire_error)e;
    }
    return WIRE_EINTERNAL;
}
