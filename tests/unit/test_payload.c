/* The payload text an enqueue stores (payload_text) is byte for byte
 * what json_dumps(JSON_COMPACT | JSON_ENCODE_ANY) wrote before it: every
 * value kind, every escape, multi-byte UTF-8, nesting, key order, and a
 * seeded random sweep of strings over all byte classes. */
#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "payload.h"
#include "request.h"

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
    cr_assert_eq(payload_text(&got, v), 0);
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

/* --- request_parse's fast path against jansson alone -------------------- */

#include "parse_diff.h"

/* Parse a line both ways (parse_diff.h); the results must agree, and the
 * fast path must have kept exactly `kept` payloads as text. */
static void both_ways(const char *line, size_t len, size_t kept)
{
    struct parse_diff d;

    parse_diff(&d, line, len);
    cr_assert_str_empty(d.what, "%s for %.*s", d.what, (int)len, line);
    cr_assert_eq(d.kept, kept, "kept %zu payloads, not %zu, of %.*s", d.kept, kept, (int)len, line);
}

#define BOTH(lit, kept) both_ways(lit, sizeof(lit) - 1, kept)
#define ENQ(payload)    "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":" payload "}"

/* An enqueue_many of one item with this payload (never a flat line). */
#define MANY1(payload)                                                                             \
    "{\"op\":\"enqueue_many\",\"queue\":\"q\",\"jobs\":[{\"payload\":" payload "}]}"

/* A scalar payload: an enqueue of it is a flat line, whose whole tree is
 * built without jansson's lexer (nothing to keep: the tree is the one
 * jansson builds, so the stored text is the same); inside enqueue_many the
 * scanner keeps it. */
#define SCALAR(payload)                                                                            \
    do {                                                                                           \
        BOTH(ENQ(payload), 0);                                                                     \
        BOTH(MANY1(payload), 1);                                                                   \
    } while (0)

Test(fast_path, canonical_payloads_are_kept)
{
    BOTH(ENQ("{\"t\":1,\"p\":\"xxxx\"}"), 1);
    SCALAR("null");
    SCALAR("true");
    SCALAR("false");
    SCALAR("0");
    SCALAR("-7");
    SCALAR("\"\"");
    BOTH(ENQ("{}"), 1);
    BOTH(ENQ("[]"), 1);
    BOTH(ENQ("[1,[2,[3,{}]],\"x\"]"), 1);
    SCALAR("9223372036854775807");
    SCALAR("-9223372036854775808");
    SCALAR("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \x7f\"");
    BOTH(ENQ("{\"a\":1,\"b\":{\"a\":2},\"ab\":3,\"A\":4}"), 1);
    /* Whitespace and other members around the payload are jansson's. */
    BOTH(" { \"payload\" : {\"k\":[1]} , \"op\" : \"enqueue\" , \"queue\" : \"q\" , "
         "\"ref\" : 1.5e3 } ",
         1);
    BOTH("{\"op\":\"enqueue_many\",\"queue\":\"q\",\"jobs\":[{\"payload\":1},{\"payload\":"
         "\"a b\",\"group\":\"GRPx\"},{\"job\":\"JOBa\",\"payload\":{\"x\":[]}}]}",
         3);
}

Test(fast_path, other_payloads_take_the_plain_path)
{
    BOTH(ENQ("{ \"t\":1}"), 0);
    BOTH(ENQ("[1, 2]"), 0);
    BOTH(ENQ("1.5"), 0);
    BOTH(ENQ("1e3"), 0);
    BOTH(ENQ("1E3"), 0);
    BOTH(ENQ("-0"), 0);
    BOTH(ENQ("-0.0"), 0);
    BOTH(ENQ("\"a\\nb\""), 0);
    BOTH(ENQ("\"\\u00e9\""), 0);
    BOTH(ENQ("\"\\/\""), 0);
    BOTH(ENQ("{\"k\\u0061\":1}"), 0);
    /* Outside int64: the plain parse refuses it. */
    BOTH(ENQ("9223372036854775808"), 0);
    BOTH(ENQ("-9223372036854775809"), 0);
    BOTH(ENQ("12345678901234567890123"), 0);
    /* A mixed batch: each item on its own. */
    BOTH("{\"op\":\"enqueue_many\",\"queue\":\"q\",\"jobs\":[{\"payload\":1.5},{\"payload\":2}]}",
         1);
    /* Not an enqueue: a payload there is only an unknown argument. */
    BOTH("{\"op\":\"ping\",\"payload\":1}", 0);
    BOTH("{\"op\":\"enqueue_many\",\"queue\":\"q\",\"payload\":1,\"jobs\":[{\"payload\":1}]}", 1);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1,\"jobs\":[{\"payload\":1}]}", 1);
    BOTH("{\"op\":\"enq\\u0075eue\",\"queue\":\"q\",\"payload\":1}", 0);
    BOTH("{\"o\\u0070\":\"enqueue\",\"queue\":\"q\",\"payload\":1}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"pay\\u006coad\":1}", 0);
}

Test(fast_path, invalid_lines_are_refused_alike)
{
    /* Duplicate keys inside the payload, beside it, and of the payload. */
    BOTH(ENQ("{\"a\":1,\"a\":2}"), 0);
    BOTH(ENQ("{\"x\":{\"a\":1,\"b\":2,\"a\":3}}"), 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1,\"payload\":2}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1,\"pay\\u006coad\":2}", 0);
    BOTH("{\"op\":\"enqueue\",\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1}", 0);
    BOTH("{\"op\":\"enqueue\",\"o\\u0070\":\"claim\",\"queue\":\"q\",\"payload\":1}", 0);
    /* "\u0000" and bad UTF-8, in the payload and elsewhere. */
    BOTH(ENQ("\"a\\u0000b\""), 0);
    BOTH(ENQ("{\"a\\u0000\":1}"), 0);
    BOTH(ENQ("\"\xc3\""), 0);
    BOTH(ENQ("\"\xc0\x80\""), 0);
    BOTH(ENQ("\"\xed\xa0\x80\""), 0);
    BOTH(ENQ("\"\xf4\x90\x80\x80\""), 0);
    BOTH(ENQ("\"\xe0\x80\xaf\""), 0);
    BOTH(ENQ("\"\xf0\x80\x80\xaf\""), 0);
    BOTH(ENQ("\"\xff\""), 0);
    BOTH(ENQ("\"tab\there\""), 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\xff\",\"payload\":1}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1,\"x\":\"\\u0000\"}", 0);
    /* Broken JSON before, after and around a canonical payload. */
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1}x", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1}{}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1x}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1.}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":01}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":truex}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":[1,]}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":{\"a\":}}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\" \"payload\":1}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1,}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\\x\",\"payload\":1}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"n\":012,\"payload\":1}", 0);
    BOTH("[{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1}]", 0);
    /* Valid JSON, but not a request: the plain checks on the rest still
     * run (a refused line's payloads are not compared, so none count). */
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":1,\"ref\":[1]}", 0);
    BOTH("{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":{},\"ref\":\"r\"}", 1);
    BOTH("{\"queue\":\"q\",\"payload\":1,\"x\":\"\\\"enqueue\\\"\"}", 0);
}

/* Lines that are one flat object in compact form (most requests: complete,
 * extend, claim, stream...) get their tree built without the lexer; it
 * must be jansson's tree, keys in the same order, and anything else must
 * take the plain path with the same reply. */
Test(flat_path, flat_requests_parse_as_jansson_does)
{
    BOTH("{\"op\":\"complete\",\"queue\":\"q\",\"job\":\"JOB01\",\"lease\":\"17\"}", 0);
    BOTH("{\"op\":\"ping\"}", 0);
    BOTH("{}", 0);
    BOTH("{\"ref\":null,\"op\":\"x\",\"a\":true,\"b\":false,\"c\":0,\"d\":-1}", 0);
    BOTH("{\"op\":\"claim\",\"n\":9223372036854775807,\"m\":-9223372036854775808}", 0);
    BOTH("{\"op\":\"x\",\"k\":\"caf\xc3\xa9 \xf0\x9f\x98\x80 \x7f\",\"\xc3\xa9\":1}", 0);
    BOTH("{\"op\":\"x\",\"\":\"\",\"ref\":\"\"}", 0);
    /* Not flat or not compact: the plain path, alike. */
    BOTH("{\"op\":\"x\",\"n\":-0}", 0);
    BOTH("{\"op\":\"x\",\"n\":1.5}", 0);
    BOTH("{\"op\":\"x\",\"s\":\"a\\nb\"}", 0);
    BOTH("{\"op\":\"x\", \"s\":1}", 0);
    BOTH("{\"op\":\"x\",\"ref\":[1]}", 0);
    BOTH("{\"op\":\"x\",\"ref\":{}}", 0);
    /* Refused alike. */
    BOTH("{\"op\":\"x\",\"op\":\"y\"}", 0);
    BOTH("{\"op\":\"x\",\"n\":9223372036854775808}", 0);
    BOTH("{\"op\":\"x\",\"s\":\"\xff\"}", 0);
    BOTH("{\"op\":\"x\",\"s\":\"\xc3\"}", 0);
    BOTH("{\"op\":\"x\"}x", 0);
    BOTH("{\"op\":\"x\"", 0);
    BOTH("{\"op\":1}", 0);
    BOTH("{\"ref\":1}", 0);
    BOTH("\"op\"", 0);
    BOTH("7", 0);
}

Test(flat_path, many_keys_and_their_order)
{
    /* 64 keys is the scanner's duplicate-check limit; 65 goes plain. */
    for (int n = 63; n <= 66; n++) {
        char line[4096];
        size_t len = (size_t)snprintf(line, sizeof(line), "{\"op\":\"x\"");
        for (int k = n - 1; k >= 1; k--)
            len += (size_t)snprintf(line + len, sizeof(line) - len, ",\"k%02d\":%d", k, k);
        len += (size_t)snprintf(line + len, sizeof(line) - len, "}");
        both_ways(line, len, 0);

        struct request req;
        struct request_error err;
        cr_assert_eq(request_parse(&req, line, len, &err), 0);
        const char *key;
        json_t *v;
        int expect = n;
        json_object_foreach(req.root, key, v)
        {
            if (strcmp(key, "op") != 0) {
                cr_assert_eq(json_integer_value(v), --expect, "keys out of order: %s", key);
            }
        }
        request_deinit(&req);
    }
}

/* A payload of n nested arrays at depth (the request object is 1; an
 * enqueue_many item's payload starts at 3): kept when within the limit. */
static void nested(const char *head, const char *tail, int n, size_t kept)
{
    char line[512];
    size_t len = strlen(head);

    memcpy(line, head, len);
    memset(line + len, '[', (size_t)n);
    memset(line + len + n, ']', (size_t)n);
    len += 2 * (size_t)n;
    memcpy(line + len, tail, strlen(tail));
    len += strlen(tail);
    both_ways(line, len, kept);
}

Test(fast_path, depth_is_counted_from_the_request)
{
    const char *one = "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":";
    const char *many = "{\"op\":\"enqueue_many\",\"queue\":\"q\",\"jobs\":[{\"payload\":";

    nested(one, "}", 30, 1);
    nested(one, "}", 31, 1); /* 32 in all */
    nested(one, "}", 32, 0); /* 33: refused */
    nested(one, "}", 33, 0);
    nested(many, "}]}", 28, 1);
    nested(many, "}]}", 29, 1); /* 32 in all */
    nested(many, "}]}", 30, 0);
}

Test(fast_path, random_lines_agree)
{
    /* Pieces of payloads, valid and not, joined at random into enqueue and
     * enqueue_many lines. */
    static const char *const atoms[] = {
        "1",
        "-2",
        "0",
        "1.5",
        "\"s\"",
        "\"\\n\"",
        "\"\xc3\xa9\"",
        "\xc3",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        " ",
        "\"k\":",
        "\"k\":",
        "\"j\":",
        "null",
        "tru",
        "\"\\u0000\"",
        "-0",
        "1e2",
        "{\"a\":1",
        "\"\xed\xa0\x80\"",
        "\"\\\"\"",
        "\x7f",
        "\"\t\"",
    };
    unsigned seed = 777;
    char line[2048];

    for (int round = 0; round < 3000; round++) {
        bool many = rand_r(&seed) % 2;
        size_t n = (size_t)snprintf(line, sizeof(line), "%s",
                                    many ? "{\"op\":\"enqueue_many\",\"queue\":\"q\",\"jobs\":[{"
                                           "\"payload\":"
                                         : "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":");
        int count = (int)(rand_r(&seed) % 12);
        for (int i = 0; i < count; i++) {
            const char *a = atoms[rand_r(&seed) % (sizeof(atoms) / sizeof(atoms[0]))];
            memcpy(line + n, a, strlen(a));
            n += strlen(a);
        }
        const char *end = many ? "}]}" : "}";
        memcpy(line + n, end, strlen(end));
        n += strlen(end);
        struct parse_diff d;
        parse_diff(&d, line, n);
        cr_assert_str_empty(d.what, "%s for %.*s", d.what, (int)n, line);
    }
}
