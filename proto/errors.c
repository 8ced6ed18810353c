/* errors: the wire error table (see errors.h). */
#include "errors.h"

#include <string.h>

/* One row per code, indexed by the code (emq_errors.def). */
static const struct wire_error_row {
    const char *name;
    const char *summary;
} wire_errors[WIRE__END] = {
#define EMQ_ERROR(name, summary, class) [WIRE_E##name] = {"E" #name, summary},
#include "emq_errors.def"
#undef EMQ_ERROR
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
