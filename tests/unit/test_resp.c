/* resp: the exact bytes of each encoding, and that the sizes the pool
 * allocates by match what is written. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "resp.h"
#include "store_internal.h"

/* Check that the n bytes from buf to end are exactly the literal want. */
#define BYTES(buf, end, want)                                                                      \
    do {                                                                                           \
        size_t n_ = (size_t)((end) - (buf));                                                       \
        cr_assert_eq(n_, sizeof(want) - 1, "wrote %zu bytes, want %zu", n_, sizeof(want) - 1);     \
        cr_assert(memcmp((buf), (want), n_) == 0, "wrote \"%.*s\", want \"%s\"", (int)n_, (buf),   \
                  (want));                                                                         \
    } while (0)

Test(resp, digits)
{
    cr_assert_eq(resp_digits(0), 1);
    cr_assert_eq(resp_digits(9), 1);
    cr_assert_eq(resp_digits(10), 2);
    cr_assert_eq(resp_digits(99), 2);
    cr_assert_eq(resp_digits(100), 3);
    cr_assert_eq(resp_digits(18446744073709551615ULL), 20);
}

Test(resp, put_uint)
{
    char buf[32];

    BYTES(buf, resp_put_uint(buf, 0), "0");
    BYTES(buf, resp_put_uint(buf, 7), "7");
    BYTES(buf, resp_put_uint(buf, 40), "40");
    BYTES(buf, resp_put_uint(buf, 1234567890), "1234567890");
    BYTES(buf, resp_put_uint(buf, 18446744073709551615ULL), "18446744073709551615");
}

Test(resp, put_num)
{
    char buf[32];

    BYTES(buf, resp_put_num(buf, '*', 3), "*3\r\n");
    BYTES(buf, resp_put_num(buf, '$', 0), "$0\r\n");
    BYTES(buf, resp_put_num(buf, '$', 12), "$12\r\n");
}

Test(resp, put_arg)
{
    char buf[64];

    BYTES(buf, resp_put_arg(buf, "FCALL", 5), "$5\r\nFCALL\r\n");
    BYTES(buf, resp_put_arg(buf, "", 0), "$0\r\n\r\n");
    /* Binary safe: an embedded NUL and CRLF are copied as they are. */
    BYTES(buf, resp_put_arg(buf, "a\0b\r\n", 5), "$5\r\na\0b\r\n\r\n");
}

Test(resp, arg_len_matches_put_arg)
{
    static const size_t sizes[] = {0, 1, 9, 10, 99, 100, 1000};
    char src[1000], buf[1100];

    memset(src, 'x', sizeof(src));
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char *end = resp_put_arg(buf, src, sizes[i]);
        cr_assert_eq((size_t)(end - buf), resp_arg_len(sizes[i]), "size %zu", sizes[i]);
    }
}

Test(resp, whole_command)
{
    char buf[64], *w = buf;
    size_t len = 1 + resp_digits(2) + 2 + resp_arg_len(3) + resp_arg_len(5);

    w = resp_put_num(w, '*', 2);
    w = resp_put_arg(w, "GET", 3);
    w = resp_put_arg(w, "key:1", 5);
    BYTES(buf, w, "*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n");
    cr_assert_eq((size_t)(w - buf), len);
}

/* store_num: a script call's number arguments, in decimal as %lld writes
 * them, every edge included. */
Test(resp, store_num_is_lld)
{
    static const long long vals[] = {
        0, 1, -1, 9, 10, -10, 99, 1000000007, -1000000007, LLONG_MAX, LLONG_MIN, 1 - LLONG_MAX};
    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        char got[24], want[24];
        snprintf(want, sizeof(want), "%lld", vals[i]);
        cr_assert_str_eq(store_num(got, vals[i]), want);
    }
}
