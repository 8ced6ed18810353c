/* The backend URL: every accepted form, and the refused ones. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

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
