/* The backend URL: every accepted form, and the refused ones. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "pool.h"

static struct pool_config parse_ok(const char *url, char *buf, size_t cap)
{
    struct pool_config pc = {0};
    cr_assert_eq(config_parse_redis(url, &pc, buf, cap), 0, "%s should parse", url);
    return pc;
}

Test(config, redis_urls)
{
    char buf[256];
    struct pool_config pc = parse_ok("redis://127.0.0.1:6380/2", buf, sizeof(buf));
    cr_assert_str_eq(pc.host, "127.0.0.1");
    cr_assert_eq(pc.port, 6380);
    cr_assert_eq(pc.db, 2);
    cr_assert_null(pc.password);

    pc = parse_ok("redis://:s3cret@10.0.0.5", buf, sizeof(buf));
    cr_assert_str_eq(pc.password, "s3cret");
    cr_assert_str_eq(pc.host, "10.0.0.5");
    cr_assert_eq(pc.port, 6379, "the default port");

    pc = parse_ok("redis://localhost:7000", buf, sizeof(buf));
    cr_assert_str_eq(pc.host, "127.0.0.1", "localhost is the one name allowed");

    pc = parse_ok("unix:///run/redis.sock?db=3", buf, sizeof(buf));
    cr_assert_str_eq(pc.unix_path, "/run/redis.sock");
    cr_assert_eq(pc.db, 3);
}

Test(config, bad_redis_urls_are_refused)
{
    char buf[64];
    struct pool_config pc = {0};
    const char *bad[] = {"http://x",
                         "redis://1.2.3.4:0",
                         "redis://1.2.3.4:99999",
                         "redis://1.2.3.4:12ab",
                         "unix://relative.sock",
                         "unix:///s?x=1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        cr_assert_eq(config_parse_redis(bad[i], &pc, buf, sizeof(buf)), -EINVAL, "%s", bad[i]);
    char longurl[100];
    memset(longurl, 'a', sizeof(longurl) - 1);
    longurl[sizeof(longurl) - 1] = '\0';
    cr_assert_eq(config_parse_redis(longurl, &pc, buf, sizeof(buf)), -EINVAL, "too long");
}

/* --- the settings table ---------------------------------------------------- */

Test(config, table_invariants)
{
    struct config c;
    config_defaults(&c); /* aborts on a default its own key refuses */
    for (size_t i = 0; i < config_nkeys; i++) {
        const struct config_key *k = &config_keys[i];
        cr_assert(k->name[0] != '\0' &&
                      strspn(k->name, "abcdefghijklmnopqrstuvwxyz-") == strlen(k->name),
                  "%s: lower-case and dashes only (it is also a flag)", k->name);
        cr_assert(k->help != NULL && k->help[0] != '\0', "%s has no help", k->name);
        cr_assert_leq(k->min, k->max, "%s: bounds", k->name);
        cr_assert_eq(config_key_find(k->name, strlen(k->name)), k, "%s: unique", k->name);
        char buf[256];
        cr_assert_str_eq(config_format(&c, k, buf, sizeof(buf)), k->dflt[0] ? k->dflt : "",
                         "%s: the default reads back as written", k->name);
        if (k->type != CONFIG_STRING) {
            cr_assert_neq(config_set(&c, k, "nonsense"), 0, "%s accepts nonsense", k->name);
            cr_assert_str_eq(config_format(&c, k, buf, sizeof(buf)), k->dflt,
                             "%s: a refused value changes nothing", k->name);
        }
    }
    config_deinit(&c);
}

Test(config, bounds_are_enforced)
{
    struct config c;
    config_defaults(&c);
    const struct config_key *k = config_key_find("pool", 4);
    cr_assert_eq(config_set(&c, k, "0"), -EINVAL);
    cr_assert_eq(config_set(&c, k, "65"), -EINVAL);
    cr_assert_eq(config_set(&c, k, "-1"), -EINVAL);
    cr_assert_eq(config_set(&c, k, "64"), 0);
    cr_assert_eq(c.pool_size, 64);
    k = config_key_find("listen", 6);
    cr_assert_eq(config_set(&c, k, "none"), 0);
    cr_assert_null(c.listen, "'none' turns the TCP listener off");
    k = config_key_find("allow-insecure", 14);
    cr_assert_eq(config_set(&c, k, "yes"), 0);
    cr_assert(c.allow_insecure);
    config_deinit(&c);
}

/* config/emqd.conf names every key exactly once, with its default, and
 * nothing else: the example cannot drift from the code. */
Test(config, example_file_matches_the_table)
{
    char path[4096], line[4096];
    bool seen[256] = {false};
    snprintf(path, sizeof(path), "%s/config/emqd.conf", getenv("EMQ_SOURCE_ROOT"));
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    cr_assert_lt(config_nkeys, sizeof(seen));
    while (fgets(line, sizeof(line), f) != NULL) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char name[64], value[256] = "";
        cr_assert_geq(sscanf(line, "%63s = %255[^\n]", name, value), 1, "odd line: %s", line);
        const struct config_key *k = config_key_find(name, strlen(name));
        cr_assert_not_null(k, "emqd.conf has '%s', which the table does not", name);
        cr_assert_not(seen[k - config_keys], "'%s' twice in emqd.conf", name);
        seen[k - config_keys] = true;
        if (strcmp(value, "\"\"") == 0)
            value[0] = '\0';
        cr_assert_str_eq(value, k->dflt, "emqd.conf gives %s = '%s', the default is '%s'", name,
                         value, k->dflt);
    }
    fclose(f);
    for (size_t i = 0; i < config_nkeys; i++)
        cr_assert(seen[i], "emqd.conf does not document '%s'", config_keys[i].name);

    struct config c;
    char err[512];
    config_defaults(&c);
    cr_assert_eq(config_load(&c, path, err, sizeof(err)), 0, "%s", err);
    config_deinit(&c);
}

static int load_text(const char *text, struct config *c, char *err, size_t cap)
{
    char path[] = "/tmp/emq-config-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    int rc = config_load(c, path, err, cap);
    unlink(path);
    return rc;
}

Test(config, file_errors_name_file_line_and_key)
{
    struct config c;
    char err[512];
    config_defaults(&c);
    cr_assert_eq(load_text("# ok\nmax-batch = 7\n\n  bogus = 1\n", &c, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, ":4: unknown key 'bogus'") != NULL, "%s", err);
    cr_assert_eq(load_text("max-line = 10\n", &c, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, ":1: bad value for 'max-line': '10'") != NULL, "%s", err);
    cr_assert(strstr(err, "64..") != NULL, "says the range: %s", err);
    cr_assert_eq(load_text("token\n", &c, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, ":1: expected 'name = value'") != NULL, "%s", err);
    cr_assert_eq(load_text("token = \"s3 cret \"\nmax-batch=9 \n", &c, err, sizeof(err)), 0, "%s",
                 err);
    cr_assert_str_eq(c.token, "s3 cret ", "quotes keep inner spaces");
    cr_assert_eq(c.max_batch, 9);
    cr_assert_eq(load_text("token = \"\"\n", &c, err, sizeof(err)), 0);
    cr_assert_null(c.token, "an empty token is no token");
    config_deinit(&c);
}

Test(config, loopback)
{
    cr_assert(config_loopback("127.0.0.1:7711"));
    cr_assert(config_loopback("[::1]:7711"));
    cr_assert(config_loopback(NULL), "no TCP at all");
    cr_assert_not(config_loopback("0.0.0.0:7711"));
    cr_assert_not(config_loopback("10.1.2.3:7711"));
    cr_assert_not(config_loopback("[::]:7711"));
}

/* A reload compares and copies string settings whole: two 5000-byte
 * tokens that differ only in their last byte are different, and the copy
 * is the whole token. */
Test(config, long_strings_compare_and_copy_whole)
{
    const struct config_key *k = config_key_find("token", strlen("token"));
    cr_assert_not_null(k);
    char *t = malloc(5001);
    cr_assert_not_null(t);
    memset(t, 'a', 5000);
    t[5000] = '\0';
    struct config a, b;
    config_defaults(&a);
    config_defaults(&b);
    t[4999] = 'B';
    cr_assert_eq(config_set(&a, k, t), 0);
    t[4999] = 'C';
    cr_assert_eq(config_set(&b, k, t), 0);
    cr_assert_not(config_equal(&a, &b, k), "the last byte differs");
    cr_assert_eq(config_copy(&a, &b, k), 0);
    cr_assert(config_equal(&a, &b, k));
    cr_assert_str_eq(a.token, t);
    config_deinit(&a);
    config_deinit(&b);
    free(t);
}
