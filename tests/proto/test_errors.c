/* errors: the wire error table and its invariants. */
#include <criterion/criterion.h>
#include <string.h>

#include "errors.h"

Test(errors, every_code_has_a_name_and_summary)
{
    for (int e = WIRE_EPROTO; e < WIRE__END; e++) {
        const char *name = wire_error_name((enum wire_error)e);
        cr_assert_not_null(name, "code %d has no name", e);
        cr_assert_not_null(wire_error_summary((enum wire_error)e), "code %d has no summary", e);
        cr_assert(name[0] == 'E' && strlen(name) >= 4, "\"%s\" is not an E-word", name);
        for (const char *p = name; *p; p++)
            cr_assert(*p >= 'A' && *p <= 'Z', "\"%s\" is not upper case", name);
    }
}

Test(errors, names_are_unique)
{
    for (int a = WIRE_EPROTO; a < WIRE__END; a++)
        for (int b = a + 1; b < WIRE__END; b++)
            cr_assert_str_neq(wire_error_name((enum wire_error)a),
                              wire_error_name((enum wire_error)b));
}

Test(errors, lookup_round_trips)
{
    for (int e = WIRE_EPROTO; e < WIRE__END; e++) {
        const char *name = wire_error_name((enum wire_error)e);
        cr_assert_eq(wire_error_lookup(name, strlen(name)), e, "%s", name);
    }
}

Test(errors, the_expected_set)
{
    static const char *const names[] = {
        "EPROTO",       "EUNKNOWN",  "EARG",   "EKIND",  "EBRAND", "EQUEUE",
        "ETOOBIG",      "EEMPTY",    "ENOJOB", "ESTATE", "ELEASE", "EAUTH",
        "EUNAVAILABLE", "EINTERNAL", "ELIMIT", "EFULL",  "EPERM",  "ENOTFOUND",
    };
    cr_assert_eq(WIRE__END - WIRE_EPROTO, (int)(sizeof(names) / sizeof(names[0])));
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        cr_assert_str_eq(wire_error_name((enum wire_error)(WIRE_EPROTO + (int)i)), names[i]);
}

Test(errors, lookup_takes_the_first_word_of_a_script_error)
{
    const char *s = "ELEASE lease is not current";
    cr_assert_eq(wire_error_lookup(s, strlen(s)), WIRE_ELEASE);
    s = "ENOJOB no such job";
    cr_assert_eq(wire_error_lookup(s, strlen(s)), WIRE_ENOJOB);
    s = "EBRAND";
    cr_assert_eq(wire_error_lookup(s, strlen(s)), WIRE_EBRAND);
    /* Only len bytes count: the word is cut at len. */
    cr_assert_eq(wire_error_lookup("EARGUMENT", 4), WIRE_EARG);
}

Test(errors, unknown_words_are_internal)
{
    static const char *const words[] = {
        "ERR user_script:1: Script attempted to access nonexistent global variable",
        "NOSCRIPT No matching script",
        "elease lease",
        "ELEASEX",
        "ELEAS",
        " ELEASE",
        "",
        "EMQKIND job id must be JOB-namespaced",
    };
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        cr_assert_eq(wire_error_lookup(words[i], strlen(words[i])), WIRE_EINTERNAL, "\"%s\"",
                     words[i]);
    cr_assert_eq(wire_error_lookup(NULL, 0), WIRE_EINTERNAL);
}

Test(errors, invalid_codes)
{
    cr_assert_null(wire_error_name((enum wire_error)0));
    cr_assert_null(wire_error_name(WIRE__END));
    cr_assert_null(wire_error_summary((enum wire_error)0));
    cr_assert_not(wire_error_valid(0));
    cr_assert_not(wire_error_valid(-1));
    cr_assert_not(wire_error_valid(WIRE__END));
    cr_assert(wire_error_valid(WIRE_EPROTO));
    cr_assert(wire_error_valid(WIRE_ELIMIT));
}
