/* The payload text an enqueue stores (cmd_payload_text) is byte for byte
 * what json_dumps(JSON_COMPACT | JSON_ENCODE_ANY) wrote before it: every
 * value kind, every escape, multi-byte UTF-8, nesting, key order, and a
 * seeded random sweep of strings over all byte classes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"

/* Parse text as a request would (duplicates rejected, any value), encode
 * the value both ways, and compare. */
static void same_as_jansson(const char *text, size_t len)
{
    json_error_t err;
    json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    cr_assert_not_null(v, "test input does not parse: %s (%.*s)", err.text, (int)len, text);
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    struct outbuf got;
    outbuf_init(&got);
    cr_assert_eq(cmd_payload_text(&got, v), 0);
    cr_assert_eq(got.len, strlen(want), "length %zu, jansson %zu for %s", got.len, strlen(want),
                 want);
    cr_assert(memcmp(got.data, want, got.len) == 0, "got %.*s, jansson %s", (int)got.len, got.data,
              want);
    outbuf_deinit(&got);
    free(want);
    json_decref(v);
}

#define SAME(lit) same_as_jansson(lit, sizeof(lit) - 1)

Test(payload, scalars)
{
    SAME("null");
    SAME("true");
    SAME("false");
    SAME("0");
    SAME("-1");
    SAME("9223372036854775807");
    SAME("-9223372036854775808");
    SAME("1.5");
    SAME("-0.0");
    SAME("1e300");
    SAME("2.5E-7");
    SAME("0.1");
    SAME("\"\"");
    SAME("\"plain\"");
}

Test(payload, escapes_and_utf8)
{
    SAME("\"quote \\\" backslash \\\\ slash / \\/\"");
    SAME("\"\\b\\f\\n\\r\\t\"");
    SAME("\"\\u0001\\u001f\\u0010\\u007f\"");
    SAME("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \\u00e9 \\ud83d\\ude00\"");
}

Test(payload, containers_keep_their_order)
{
    SAME("{}");
    SAME("[]");
    SAME("{ \"z\" : 1 , \"a\" : [ 1 , 2.25 , { } ] , \"m\" : { \"k\\n\" : null } }");
    SAME("[[[[[[[[[[\"deep\"]]]]]]]]]]");
    SAME("{\"t\":1234567890123,\"p\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}");
}

Test(payload, random_strings_over_every_byte_class)
{
    static const char *const atoms[] = {
        "a",       " ",        "\\\"",           "\\\\",
        "\\n",     "\\u0007",  "\\u001b",        "\\u007f",
        "/",       "\xc3\xa9", "\xe2\x82\xac",   "\xf0\x9f\x98\x80",
        "\\u2028", "~",        "\\ud800\\udc00",
    };
    unsigned seed = 12345;
    char text[4096];
    for (int round = 0; round < 500; round++) {
        size_t n = 0;
        text[n++] = '"';
        int atomsn = (int)(rand_r(&seed) % 40);
        for (int i = 0; i < atomsn; i++) {
            const char *a = atoms[rand_r(&seed) % (sizeof(atoms) / sizeof(atoms[0]))];
            memcpy(text + n, a, strlen(a));
            n += strlen(a);
        }
        text[n++] = '"';
        same_as_jansson(text, n);
    }
}
