/* The backend URL: every accepted form, and the refused ones. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static struct redis_url parse_ok(const char *url, char *buf, size_t cap)
{
    struct redis_url pc = {0};
    cr_assert_eq(config_parse_redis(url, &pc, buf, cap), 0, "%s should parse", url);
    return pc;
}

Test(config, redis_urls)
{
    char buf[256];
    struct redis_url pc = parse_ok("redis://127.0.0.1:6380/2", buf, sizeof(buf));
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
    struct redis_url pc = {0};
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
    cr_assert_leq(config_nkeys, CONFIG_KEYS_MAX, "origins are kept for every key");
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

/* --- addresses -------------------------------------------------------------- */

/* listen and metrics take the same forms, and refuse the same mistakes
 * when the settings are read, before anything starts. */
Test(config, addresses_are_checked_when_read)
{
    const char *good[] = {"127.0.0.1:7711", "[::1]:7711", "localhost:7712", "0.0.0.0:1",
                          "10.1.2.3:65535"};
    const char *bad[] = {"127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1", "9711",
                         "999.1.1.1:7712",  "myhost:7711", ":7711",     "127.0.0.1:",
                         "127.0.0.1:7a",    "[::1:7711",   "[zz]:7711", "127.0.0.1:-1"};
    const char *names[] = {"listen", "metrics"};
    struct config c;
    char why[160];
    config_defaults(&c);
    for (size_t n = 0; n < 2; n++) {
        const struct config_key *k = config_key_find(names[n], strlen(names[n]));
        for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
            cr_assert_eq(config_set_why(&c, k, good[i], why, sizeof(why)), 0, "%s = %s: %s",
                         names[n], good[i], why);
        config_set(&c, k, "127.0.0.1:5");
        for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
            why[0] = '\0';
            cr_assert_eq(config_set_why(&c, k, bad[i], why, sizeof(why)), -EINVAL,
                         "%s = %s accepted", names[n], bad[i]);
            cr_assert(why[0] != '\0', "%s = %s: no reason given", names[n], bad[i]);
        }
        char buf[64];
        cr_assert_str_eq(config_format(&c, k, buf, sizeof(buf)), "127.0.0.1:5",
                         "a refused address changes nothing");
    }
    config_set_why(&c, config_key_find("listen", 6), "127.0.0.1:99999", why, sizeof(why));
    cr_assert(strstr(why, "1..65535") != NULL, "says the port range: %s", why);
    config_set_why(&c, config_key_find("listen", 6), "myhost:7711", why, sizeof(why));
    cr_assert(strstr(why, "names are not resolved") != NULL, "says names are not taken: %s", why);
    config_deinit(&c);
}

Test(config, the_redis_url_is_checked_when_read)
{
    struct config c;
    char err[512];
    config_defaults(&c);
    const struct config_key *k = config_key_find("redis", 5);
    cr_assert_eq(config_set(&c, k, "redis://myredis:6379"), 0, "a host name is taken");
    cr_assert_eq(config_set(&c, k, "redis://1.2.3.4:0"), -EINVAL);
    cr_assert_str_eq(c.redis, "redis://myredis:6379", "a refused URL changes nothing");
    cr_assert_eq(load_text("\nredis = redis://1.2.3.4:99999\n", &c, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, ":2: bad value for 'redis'") != NULL, "%s", err);
    config_deinit(&c);
}

Test(config, localhost_is_loopback)
{
    cr_assert(config_loopback("localhost:7712"));
    cr_assert(config_loopback("127.9.9.9:7712"));
    cr_assert_not(config_loopback("128.0.0.1:7712"));
}

/* PROTOCOL.md 6.5 and 5.8 define retention 0: delete at completion. */
Test(config, retention_zero_is_allowed)
{
    struct config c;
    config_defaults(&c);
    cr_assert_eq(config_set(&c, config_key_find("retention-ms", 12), "0"), 0);
    cr_assert_eq(c.retention_ms, 0);
    config_deinit(&c);
}

Test(config, each_value_remembers_where_it_came_from)
{
    struct config c;
    char err[512];
    config_defaults(&c);
    const struct config_key *k = config_key_find("max-batch", 9);
    cr_assert_str_eq(config_origin(&c, k), "default");
    cr_assert_eq(load_text("# x\n\nmax-batch = 7\n", &c, err, sizeof(err)), 0, "%s", err);
    cr_assert(strstr(config_origin(&c, k), ":3") != NULL, "%s", config_origin(&c, k));
    cr_assert_eq(config_set_origin(&c, k, "--max-batch"), 0);
    cr_assert_str_eq(config_origin(&c, k), "--max-batch");
    config_deinit(&c);
}

/* --- secrets from files ----------------------------------------------------- */

/* A temporary file holding text (len bytes); its path into path (32). */
static void secret_file(char *path, const char *text, size_t len)
{
    strcpy(path, "/tmp/emq-secret-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
}

/* Settings text, loaded and finished: what emqd does at start. */
static int finish_text(const char *text, struct config *c, char *err, size_t cap)
{
    config_defaults(c);
    int rc = load_text(text, c, err, cap);
    return rc != 0 ? rc : config_finish(c, err, cap);
}

Test(config, token_file_gives_the_token)
{
    char path[32], text[128], err[512];
    struct config c;
    secret_file(path, "s3cret-token\n", 13);
    snprintf(text, sizeof(text), "token-file = %s\n", path);
    cr_assert_eq(finish_text(text, &c, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(c.token, "s3cret-token", "the trailing newline is not part of it");
    config_deinit(&c);

    snprintf(text, sizeof(text), "token = other\ntoken-file = %s\n", path);
    cr_assert_eq(finish_text(text, &c, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, ":2: token-file and token") != NULL, "names both: %s", err);
    cr_assert(strstr(err, ":1)") != NULL, "names the token's line: %s", err);
    config_deinit(&c);
    unlink(path);

    const char *bad[] = {"", "\n", "two words\n", "tab\there", "line\nline2\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        secret_file(path, bad[i], strlen(bad[i]));
        snprintf(text, sizeof(text), "token-file = %s\n", path);
        cr_assert_eq(finish_text(text, &c, err, sizeof(err)), -EINVAL, "token file %zu taken", i);
        cr_assert(strstr(err, ":1: ") != NULL, "names the line: %s", err);
        cr_assert_null(c.token, "a refused file sets no token");
        config_deinit(&c);
        unlink(path);
    }
    cr_assert_eq(finish_text("token-file = /nonexistent/token\n", &c, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "/nonexistent/token") != NULL, "%s", err);
    config_deinit(&c);
}

/* Under systemd, LoadCredential= puts emqd.token in $CREDENTIALS_DIRECTORY:
 * used when neither token nor token-file is set, and only then. */
Test(config, systemd_credentials_give_token_and_password)
{
    char dir[] = "/tmp/emq-cred-XXXXXX", path[64], err[512];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/emqd.token", dir);
    FILE *f = fopen(path, "w");
    fputs("from-credential\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/emqd.redis-password", dir);
    f = fopen(path, "w");
    fputs("redis-pass", f);
    fclose(f);
    setenv("CREDENTIALS_DIRECTORY", dir, 1);
    struct config c;
    cr_assert_eq(finish_text("redis = redis://127.0.0.1:6379\n", &c, err, sizeof(err)), 0, "%s",
                 err);
    cr_assert_str_eq(c.token, "from-credential");
    cr_assert_str_eq(c.redis_password, "redis-pass");
    config_deinit(&c);
    cr_assert_eq(
        finish_text("token = mine\nredis = redis://:urlpass@127.0.0.1\n", &c, err, sizeof(err)), 0,
        "%s", err);
    cr_assert_str_eq(c.token, "mine", "a token that is set wins over the credential");
    cr_assert_null(c.redis_password, "a password in the URL wins over the credential");
    config_deinit(&c);
    unsetenv("CREDENTIALS_DIRECTORY");
    snprintf(path, sizeof(path), "%s/emqd.token", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/emqd.redis-password", dir);
    unlink(path);
    rmdir(dir);
}

Test(config, redis_password_file)
{
    char path[32], text[160], err[512];
    struct config c;
    secret_file(path, "pw\n", 3);
    snprintf(text, sizeof(text), "redis = redis://127.0.0.1:6379\nredis-password-file = %s\n",
             path);
    cr_assert_eq(finish_text(text, &c, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(c.redis_password, "pw");
    config_deinit(&c);
    snprintf(text, sizeof(text), "redis = redis://:pw@127.0.0.1\nredis-password-file = %s\n", path);
    cr_assert_eq(finish_text(text, &c, err, sizeof(err)), -EINVAL, "two passwords");
    cr_assert(strstr(err, "keep one") != NULL, "%s", err);
    config_deinit(&c);
    snprintf(text, sizeof(text), "redis-password-file = %s\n", path);
    cr_assert_eq(finish_text(text, &c, err, sizeof(err)), -EINVAL, "no redis to give it to");
    config_deinit(&c);
    unlink(path);
}

/* fsync: always by default (acknowledged means on disk), everysec on
 * request, nothing else; and only for the embedded backend. */
Test(config, fsync_is_always_unless_asked_and_only_for_the_embedded_backend)
{
    struct config c;
    char err[512];
    config_defaults(&c);
    cr_assert_eq(c.fsync, CONFIG_FSYNC_ALWAYS);
    const struct config_key *k = config_key_find("fsync", 5);
    cr_assert_eq(config_set(&c, k, "everysec"), 0);
    cr_assert_eq(c.fsync, CONFIG_FSYNC_EVERYSEC);
    cr_assert_eq(config_set(&c, k, "sometimes"), -EINVAL);
    cr_assert_eq(c.fsync, CONFIG_FSYNC_EVERYSEC, "a refused value changes nothing");
    config_deinit(&c);

    config_defaults(&c);
    cr_assert_eq(load_text("redis = redis://127.0.0.1:6379\n", &c, err, sizeof(err)), 0);
    cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "the default fsync is no objection");
    config_deinit(&c);

    config_defaults(&c);
    cr_assert_eq(
        load_text("redis = redis://127.0.0.1:6379\nfsync = everysec\n", &c, err, sizeof(err)), 0);
    cr_assert_eq(config_finish(&c, err, sizeof(err)), -EINVAL);
    cr_assert(strstr(err, "fsync applies to the embedded backend only") != NULL, "%s", err);
    config_deinit(&c);
}

/* redis-cluster: seed nodes as HOST:PORT, comma-separated; names, IPv4 and
 * [IPv6]; anything else refused when read, changing nothing. */
Test(config, redis_cluster_seeds)
{
    char buf[256];
    struct config_seed s[CONFIG_SEEDS_MAX];
    cr_assert_eq(config_parse_seeds("10.0.0.1:7000,redis-b.internal:7001,[::1]:7002,localhost:7003",
                                    s, buf, sizeof(buf)),
                 4);
    cr_assert_str_eq(s[0].host, "10.0.0.1");
    cr_assert_eq(s[0].port, 7000);
    cr_assert_str_eq(s[1].host, "redis-b.internal");
    cr_assert_str_eq(s[2].host, "::1");
    cr_assert_eq(s[2].port, 7002);
    cr_assert_str_eq(s[3].host, "127.0.0.1");
    const char *bad[] = {"",        "10.0.0.1",       "10.0.0.1:0",     "10.0.0.1:70000",
                         ":7000",   "10.0.0.1:7000,", "a b:7000",       "[::1:7000",
                         "[]:7000", "host:7x",        "redis://h:7000", "h:1,,h:2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
        cr_assert_eq(config_parse_seeds(bad[i], s, buf, sizeof(buf)), -EINVAL, "'%s'", bad[i]);
    char many[512] = "";
    for (int i = 0; i <= CONFIG_SEEDS_MAX; i++)
        strcat(many, i ? ",h:1" : "h:1");
    char big[1024];
    cr_assert_eq(config_parse_seeds(many, s, big, sizeof(big)), -EINVAL, "more than the most");

    struct config c;
    config_defaults(&c);
    const struct config_key *k = config_key_find("redis-cluster", 13);
    cr_assert_not_null(k);
    cr_assert_eq(config_set(&c, k, "127.0.0.1:7000,127.0.0.1:7001"), 0);
    cr_assert_eq(config_set(&c, k, "127.0.0.1"), -EINVAL);
    cr_assert_str_eq(c.redis_cluster, "127.0.0.1:7000,127.0.0.1:7001",
                     "a refused value changes nothing");
    config_deinit(&c);
}

/* redis-cluster and redis are exclusive; the password comes as for redis
 * (redis-password-file); fsync is the embedded backend's only. */
Test(config, redis_cluster_is_exclusive_with_redis_and_takes_the_password_file)
{
    char path[32], text[200], err[512];
    struct config c;
    cr_assert_eq(finish_text("redis = redis://127.0.0.1:6379\nredis-cluster = 127.0.0.1:7000\n", &c,
                             err, sizeof(err)),
                 -EINVAL);
    cr_assert(strstr(err, "keep one") != NULL, "%s", err);
    config_deinit(&c);
    cr_assert_eq(
        finish_text("redis-cluster = 127.0.0.1:7000\nfsync = everysec\n", &c, err, sizeof(err)),
        -EINVAL);
    cr_assert(strstr(err, "fsync") != NULL, "%s", err);
    config_deinit(&c);
    secret_file(path, "pw\n", 3);
    snprintf(text, sizeof(text), "redis-cluster = 127.0.0.1:7000\nredis-password-file = %s\n",
             path);
    cr_assert_eq(finish_text(text, &c, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(c.redis_password, "pw");
    config_deinit(&c);
    unlink(path);
}
