/* The command tables: names unique, specs well-formed, and the flags
 * agreeing with the specs (a CMD_QUEUE op must require a valid queue). */
#include <criterion/criterion.h>
#include <string.h>

#include "cmd.h"
#include "server.h"

Test(cmd, every_row_is_well_formed_and_unique)
{
    size_t n = 0;
    for (const struct cmd *c; (c = cmd_at(n)) != NULL; n++) {
        cr_assert_not_null(c->run, "%s has no handler", c->name);
        cr_assert(request_spec_valid(c->spec), "%s: malformed argument spec", c->name);
        for (size_t k = 0; k < n; k++)
            cr_assert_str_neq(c->name, cmd_at(k)->name, "%s is in the tables twice", c->name);
        bool has_queue = false;
        for (const struct arg_spec *a = c->spec; a->name != NULL; a++)
            if (strcmp(a->name, "queue") == 0)
                has_queue = (a->flags & ARG_REQUIRED) && (a->flags & ARG_QUEUE);
        cr_assert_eq(has_queue, (c->flags & CMD_QUEUE) != 0,
                     "%s: CMD_QUEUE must match a required, checked queue argument", c->name);
        cr_assert_eq(cmd_lookup(c->name, strlen(c->name)), c);
    }
    cr_assert_eq(n, 29, "the protocol has 29 ops");
}

Test(cmd, lookup_is_exact)
{
    cr_assert_not_null(cmd_lookup("claim", 5));
    cr_assert_null(cmd_lookup("clai", 4));
    cr_assert_null(cmd_lookup("claims", 6));
    cr_assert_null(cmd_lookup("CLAIM", 5));
    cr_assert_null(cmd_lookup("", 0));
}

Test(cmd, only_session_ops_skip_authentication)
{
    const char *open[] = {"hello", "ping", "quit"};
    size_t n = 0;
    for (const struct cmd *c; (c = cmd_at(n)) != NULL; n++) {
        bool allowed = false;
        for (size_t i = 0; i < 3; i++)
            allowed |= strcmp(c->name, open[i]) == 0;
        cr_assert_eq((c->flags & CMD_NOAUTH) != 0, allowed, "%s", c->name);
    }
}

/* The requests-by-op counters have a row per op. */
Test(cmd, ops_fit_the_metrics_table)
{
    size_t n = 0;
    while (cmd_at(n) != NULL)
        n++;
    cr_assert_leq(n, SERVER_OPS_MAX, "%zu ops, SERVER_OPS_MAX is %d", n, SERVER_OPS_MAX);
}
