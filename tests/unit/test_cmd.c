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
    cr_assert_eq(n, 32, "the protocol has 32 ops");
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

/* Every op declares who may use it, in its own row (cmd.h): exactly one
 * role flag, so a new op without one fails here instead of being open to
 * every token; and an op that names no queue, other than the session
 * ops, is admin's (a token held to queue patterns could not be held to
 * them there). */
Test(cmd, every_op_declares_exactly_one_role)
{
    size_t n = 0;
    for (const struct cmd *c; (c = cmd_at(n)) != NULL; n++) {
        unsigned roles = c->flags & CMD_ROLES;
        cr_assert(roles == CMD_PRODUCER || roles == CMD_WORKER || roles == CMD_ADMIN,
                  "%s declares %s role (one of CMD_PRODUCER, CMD_WORKER, CMD_ADMIN)", c->name,
                  roles == 0 ? "no" : "more than one");
        cr_assert_neq(cmd_role(c), 0, "%s", c->name);
        if (!(c->flags & (CMD_QUEUE | CMD_NOAUTH)))
            cr_assert_eq(cmd_role(c), TOKENS_ADMIN, "%s names no queue: it must be CMD_ADMIN",
                         c->name);
    }
}

/* cmd_role reads the flags exactly: none or two is no role. */
Test(cmd, cmd_role_refuses_none_and_two)
{
    struct cmd none = {"x", NULL, NULL, CMD_QUEUE, NULL};
    struct cmd two = {"x", NULL, NULL, CMD_WORKER | CMD_ADMIN, NULL};
    struct cmd one = {"x", NULL, NULL, CMD_WORKER | CMD_QUEUE, NULL};
    cr_assert_eq(cmd_role(&none), 0);
    cr_assert_eq(cmd_role(&two), 0);
    cr_assert_eq(cmd_role(&one), TOKENS_WORKER);
}

/* The roles of PROTOCOL.md 7, as the issue defined them: the tables say
 * the same. */
Test(cmd, roles_are_those_of_the_protocol)
{
    const char *producer[] = {"hello", "ping", "quit", "enqueue", "enqueue_many", "depth", "stats"};
    const char *worker[] = {"claim", "stream", "complete", "fail", "release", "extend"};
    size_t n = 0;
    for (const struct cmd *c; (c = cmd_at(n)) != NULL; n++) {
        enum tokens_role want = TOKENS_ADMIN;
        for (size_t i = 0; i < sizeof(producer) / sizeof(producer[0]); i++)
            if (strcmp(c->name, producer[i]) == 0)
                want = TOKENS_PRODUCER;
        for (size_t i = 0; i < sizeof(worker) / sizeof(worker[0]); i++)
            if (strcmp(c->name, worker[i]) == 0)
                want = TOKENS_WORKER;
        cr_assert_eq(cmd_role(c), want, "%s is %s's, PROTOCOL.md 7 says %s's", c->name,
                     tokens_role_name(cmd_role(c)), tokens_role_name(want));
    }
}
