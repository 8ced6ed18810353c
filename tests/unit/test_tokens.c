/* The tokens file (daemon/util/tokens.c): its format, every refusal with
 * its line number, the hash (a known SHA-256 vector), matching by token
 * and by name, and queue-name patterns. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokens.h"

/* SHA-256("abc") (FIPS 180-2, appendix B.1). */
#define ABC_HASH "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static char file[64];

/* Write text to a new temporary file (its path in file). */
static const char *write_file(const char *text)
{
    snprintf(file, sizeof(file), "/tmp/emq-tokens-XXXXXX");
    int fd = mkstemp(file);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return file;
}

static struct tokens *load_ok(const char *text)
{
    struct tokens *t = NULL;
    char err[256] = "";
    int rc = tokens_load(write_file(text), &t, err, sizeof(err));
    unlink(file);
    cr_assert_eq(rc, 0, "refused: %s", err);
    return t;
}

/* The file is refused, and err names its line and says why. */
static void load_refused(const char *text, int line, const char *why)
{
    struct tokens *t = NULL;
    char err[256] = "", where[80];
    int rc = tokens_load(write_file(text), &t, err, sizeof(err));
    unlink(file);
    cr_assert_eq(rc, -EINVAL, "accepted: %s", text);
    cr_assert_null(t);
    snprintf(where, sizeof(where), "%s:%d: ", file, line);
    cr_assert(strncmp(err, where, strlen(where)) == 0, "'%s' does not start with '%s'", err, where);
    cr_assert(strstr(err, why) != NULL, "'%s' does not say '%s'", err, why);
}

Test(tokens, the_hash_is_sha256_in_hex)
{
    char hex[65];
    tokens_hash_hex("abc", 3, hex);
    cr_assert_str_eq(hex, ABC_HASH);
}

Test(tokens, a_file_with_comments_blanks_and_patterns)
{
    struct tokens *t =
        load_ok("# who may connect\n"
                "\n"
                "mailer producer " ABC_HASH "\n"
                "   \t\n"
                "  ingest worker "
                "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AE"
                "  tenant-a.*  jobs\r\n"
                "ops admin 0000000000000000000000000000000000000000000000000000000000000001");
    cr_assert_eq(t->n, 3);
    cr_assert_str_eq(t->v[0].name, "mailer");
    cr_assert_eq(t->v[0].role, TOKENS_PRODUCER);
    cr_assert_eq(t->v[0].npatterns, 0);
    cr_assert_eq(t->v[1].role, TOKENS_WORKER);
    cr_assert_eq(t->v[1].npatterns, 2);
    cr_assert_str_eq(t->v[1].patterns[0], "tenant-a.*");
    cr_assert_str_eq(t->v[1].patterns[1], "jobs");
    cr_assert_eq(t->v[2].role, TOKENS_ADMIN, "the last line needs no newline");

    cr_assert_eq(tokens_match(t, "abc", 3), &t->v[0]);
    cr_assert_null(tokens_match(t, "abd", 3));
    cr_assert_null(tokens_match(t, "ab", 2));
    cr_assert_null(tokens_match(t, "", 0));
    cr_assert_eq(tokens_find(t, "mailer", t->v[0].hash), &t->v[0]);
    cr_assert_null(tokens_find(t, "mailer", t->v[1].hash), "same name, other hash");
    cr_assert_null(tokens_find(t, "nobody", t->v[0].hash));
    tokens_free(t);
}

Test(tokens, an_empty_file_is_a_table_of_none)
{
    struct tokens *t = load_ok("# nobody yet\n");
    cr_assert_eq(t->n, 0);
    cr_assert_null(tokens_match(t, "abc", 3));
    tokens_free(t);
}

Test(tokens, each_bad_line_is_refused_with_its_number)
{
    load_refused("# ok\nmailer producer\n", 2, "expected 'NAME ROLE SHA256-HEX");
    load_refused("mailer boss " ABC_HASH "\n", 1, "the role must be producer, worker or admin");
    load_refused("mailer producer abc\n", 1, "the hash must be 64 hex digits");
    load_refused("mailer producer " ABC_HASH "0\n", 1, "the hash must be 64 hex digits");
    load_refused("mailer producer "
                 "zz7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n",
                 1, "the hash must be 64 hex digits");
    load_refused("mailer producer "
                 "0000000000000000000000000000000000000000000000000000000000000000\n",
                 1, "the hash must be 64 hex digits");
    load_refused("mail{er producer " ABC_HASH "\n", 1, "the name must be");
    load_refused("\n\nmailer producer " ABC_HASH " tenant:a\n", 3, "a queue pattern must be");
    load_refused("a producer " ABC_HASH "\na worker "
                 "0000000000000000000000000000000000000000000000000000000000000001\n",
                 2, "the name is on an earlier line");
    load_refused("a producer " ABC_HASH "\nb worker " ABC_HASH "\n", 2,
                 "the hash is on an earlier line");
    char many[4096] = "a producer " ABC_HASH;
    for (int i = 0; i < 33; i++)
        strcat(many, " q");
    load_refused(many, 1, "too many queue patterns");
    char *longline = malloc(10000);
    memset(longline, 'a', 9999);
    longline[9999] = '\0';
    load_refused(longline, 1, "line too long");
    free(longline);
}

Test(tokens, a_missing_file_is_an_errno)
{
    struct tokens *t = NULL;
    char err[256];
    cr_assert_eq(tokens_load("/nonexistent/tokens", &t, err, sizeof(err)), -ENOENT);
    cr_assert_null(t);
    cr_assert(strstr(err, "/nonexistent/tokens") != NULL, "%s", err);
}

static bool glob(const char *p, const char *s)
{
    return tokens_glob(p, s, strlen(s));
}

/* '*' is any run of bytes, the empty one too; everything else is itself;
 * the whole name must match. */
Test(tokens, patterns_match_whole_names)
{
    cr_assert(glob("jobs", "jobs"));
    cr_assert_not(glob("jobs", "jobs2"));
    cr_assert_not(glob("jobs", "job"));
    cr_assert(glob("*", ""));
    cr_assert(glob("*", "anything"));
    cr_assert(glob("tenant-a.*", "tenant-a."));
    cr_assert(glob("tenant-a.*", "tenant-a.mail"));
    cr_assert_not(glob("tenant-a.*", "tenant-a"));
    cr_assert_not(glob("tenant-a.*", "tenant-b.mail"));
    cr_assert_not(glob("tenant-a.*", "xtenant-a.mail"));
    cr_assert(glob("*.mail", "a.b.mail"));
    cr_assert_not(glob("*.mail", "a.mail.x"));
    cr_assert(glob("a*b*c", "abc"));
    cr_assert(glob("a*b*c", "aXbYbZc"));
    cr_assert_not(glob("a*b*c", "aXbYbZ"));
    cr_assert(glob("**a", "a"));
    cr_assert(glob("a.b", "a.b"));
    cr_assert_not(glob("a.b", "aXb"), "'.' is no wildcard");
    cr_assert(tokens_glob("q", "qq", 1), "len bounds the name");
}

Test(tokens, a_token_without_patterns_may_name_every_queue)
{
    struct tokens *t = load_ok("a worker " ABC_HASH "\nb worker "
                               "0000000000000000000000000000000000000000000000000000000000000001"
                               " t1.* t2\n");
    cr_assert(tokens_queue_allowed(&t->v[0], "whatever", 8));
    cr_assert(tokens_queue_allowed(&t->v[1], "t1.x", 4));
    cr_assert(tokens_queue_allowed(&t->v[1], "t2", 2));
    cr_assert_not(tokens_queue_allowed(&t->v[1], "t3", 2));
    cr_assert_not(tokens_queue_allowed(&t->v[1], "t2x", 3));
    tokens_free(t);
}

Test(tokens, role_names_round_trip)
{
    for (int r = TOKENS_PRODUCER; r <= TOKENS_ADMIN; r++)
        cr_assert_eq(tokens_role_parse(tokens_role_name((enum tokens_role)r)), r);
    cr_assert_eq(tokens_role_parse("Admin"), 0);
    cr_assert_eq(tokens_role_parse(""), 0);
    cr_assert_str_eq(tokens_role_name(0), "none");
}
