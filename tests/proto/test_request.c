/* request: parsing lines and holding them to argument specs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

/* Parse s; expect code (0 = success). The request is returned parsed. */
static int parse(struct request *req, const char *s, size_t len, struct request_error *err)
{
    memset(err, 0, sizeof(*err));
    return request_parse(req, s, len, err);
}

#define PARSE_OK(req, s)                                                                           \
    do {                                                                                           \
        struct request_error e_;                                                                   \
        int rc_ = parse(req, s, strlen(s), &e_);                                                   \
        cr_assert_eq(rc_, 0, "%s: %d %s", s, rc_, e_.message);                                     \
    } while (0)

static void refused(const char *s, size_t len, const char *why)
{
    struct request req;
    struct request_error err;
    int rc = parse(&req, s, len, &err);

    cr_assert_eq(rc, WIRE_EPROTO, "%s: rc %d", why, rc);
    cr_assert_eq(err.code, WIRE_EPROTO, "%s", why);
    cr_assert_neq(err.message[0], '\0', "%s: no message", why);
    cr_assert_null(req.op, "%s", why);
    request_deinit(&req);
}

#define REFUSED(s) refused(s, sizeof(s) - 1, s)

Test(request, minimal_request)
{
    struct request req;

    PARSE_OK(&req, "{\"op\":\"ping\"}");
    cr_assert_str_eq(req.op, "ping");
    cr_assert_eq(req.op_len, 4);
    cr_assert_null(req.ref);
    request_deinit(&req);
    cr_assert_null(req.root);
}

Test(request, whitespace_around_is_fine)
{
    struct request req;

    PARSE_OK(&req, "  { \"op\" : \"ping\" , \"ref\" : 7 }\t ");
    cr_assert_str_eq(req.op, "ping");
    cr_assert(json_is_integer(req.ref));
    request_deinit(&req);
}

Test(request, scalar_refs)
{
    static const char *const lines[] = {
        "{\"op\":\"x\",\"ref\":\"abc\"}", "{\"op\":\"x\",\"ref\":42}",
        "{\"op\":\"x\",\"ref\":-1.5}",    "{\"op\":\"x\",\"ref\":true}",
        "{\"op\":\"x\",\"ref\":false}",   "{\"ref\":null,\"op\":\"x\"}",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        struct request req;
        PARSE_OK(&req, lines[i]);
        cr_assert_not_null(req.ref, "%s", lines[i]);
        request_deinit(&req);
    }
}

Test(request, non_scalar_ref)
{
    REFUSED("{\"op\":\"x\",\"ref\":[1]}");
    REFUSED("{\"op\":\"x\",\"ref\":{}}");
}

Test(request, missing_or_mistyped_op)
{
    REFUSED("{}");
    REFUSED("{\"ref\":1}");
    REFUSED("{\"op\":1}");
    REFUSED("{\"op\":null}");
    REFUSED("{\"op\":[\"ping\"]}");
    REFUSED("{\"OP\":\"ping\"}");
}

Test(request, error_keeps_a_usable_ref)
{
    struct request req;
    struct request_error err;
    const char *s = "{\"ref\":\"r1\",\"op\":5}";

    cr_assert_eq(parse(&req, s, strlen(s), &err), WIRE_EPROTO);
    cr_assert_not_null(req.ref, "the error reply can still echo the ref");
    cr_assert_str_eq(json_string_value(req.ref), "r1");
    request_deinit(&req);

    s = "{\"ref\":[1],\"op\":\"x\"}";
    cr_assert_eq(parse(&req, s, strlen(s), &err), WIRE_EPROTO);
    cr_assert_null(req.ref, "a non-scalar ref is not echoed");
    request_deinit(&req);
}

Test(request, non_objects)
{
    REFUSED("[]");
    REFUSED("[{\"op\":\"ping\"}]");
    REFUSED("\"ping\"");
    REFUSED("42");
    REFUSED("null");
    REFUSED("true");
}

Test(request, invalid_json)
{
    REFUSED("");
    REFUSED("   ");
    REFUSED("{");
    REFUSED("{\"op\":\"ping\"");
    REFUSED("{\"op\":'ping'}");
    REFUSED("{op:\"ping\"}");
    REFUSED("{\"op\":\"ping\",}");
    REFUSED("{\"op\":\"pi\nng\"}");
    REFUSED("{\"op\":\"ping\",\"n\":NaN}");
    REFUSED("{\"op\":\"ping\",\"n\":99999999999999999999999}");
}

Test(request, trailing_garbage)
{
    REFUSED("{\"op\":\"ping\"}x");
    REFUSED("{\"op\":\"ping\"}{\"op\":\"ping\"}");
    REFUSED("{\"op\":\"ping\"} 1");
    REFUSED("{\"op\":\"ping\"}]");
}

Test(request, duplicate_keys)
{
    REFUSED("{\"op\":\"ping\",\"op\":\"pong\"}");
    REFUSED("{\"op\":\"ping\",\"ref\":1,\"ref\":2}");
    REFUSED("{\"op\":\"ping\",\"payload\":{\"a\":1,\"a\":2}}");
}

Test(request, bad_utf8)
{
    struct request req;
    struct request_error err;

    REFUSED("{\"op\":\"p\xffing\"}");
    REFUSED("{\"op\":\"ping\",\"payload\":\"\xc3\"}");         /* truncated sequence */
    REFUSED("{\"op\":\"ping\",\"payload\":\"\xc0\xaf\"}");     /* overlong '/' */
    REFUSED("{\"op\":\"ping\",\"payload\":\"\xed\xa0\x80\"}"); /* a surrogate */
    REFUSED("{\"op\":\"ping\",\"\xfe\":1}");
    REFUSED("{\"op\":\"ping\",\"payload\":\"\\ud800\"}"); /* lone surrogate escape */
    const char *s = "{\"op\":\"p\xffing\"}";
    cr_assert_eq(parse(&req, s, strlen(s), &err), WIRE_EPROTO);
    cr_assert(strstr(err.message, "UTF-8") != NULL, "%s", err.message);
    for (const char *p = err.message; *p; p++)
        cr_assert((unsigned char)*p < 0x80, "messages are ASCII");
    request_deinit(&req);
}

Test(request, good_utf8)
{
    struct request req;

    PARSE_OK(&req, "{\"op\":\"ping\",\"payload\":\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\"}");
    request_deinit(&req);
}

Test(request, nul_is_refused)
{
    REFUSED("{\"op\":\"pi\\u0000ng\"}");
    REFUSED("{\"op\":\"ping\",\"a\\u0000b\":1}");
    refused("{\"op\":\"ping\"}\0", 14, "a raw NUL after the object");
    refused("{\"op\":\"pi\0ng\"}", 14, "a raw NUL inside a string");
}

/* An object nesting depth levels deep: {"op":"x","a":[[[...]]]} */
static char *nested(int depth, char open, char close)
{
    size_t cap = 32 + 2 * (size_t)depth;
    char *s = malloc(cap);
    size_t n = (size_t)snprintf(s, cap, "{\"op\":\"x\",\"a\":");

    for (int i = 1; i < depth; i++)
        s[n++] = open;
    for (int i = 1; i < depth; i++)
        s[n++] = close;
    s[n++] = '}';
    s[n] = '\0';
    return s;
}

Test(request, nesting_depth)
{
    struct request req;
    struct request_error err;
    char *s;

    s = nested(REQUEST_DEPTH_MAX, '[', ']');
    PARSE_OK(&req, s);
    request_deinit(&req);
    free(s);

    s = nested(REQUEST_DEPTH_MAX + 1, '[', ']');
    cr_assert_eq(parse(&req, s, strlen(s), &err), WIRE_EPROTO);
    cr_assert(strstr(err.message, "deeper") != NULL, "%s", err.message);
    request_deinit(&req);
    free(s);

    s = nested(5000, '[', ']'); /* past jansson's own limit too */
    cr_assert_eq(parse(&req, s, strlen(s), &err), WIRE_EPROTO);
    request_deinit(&req);
    free(s);
}

Test(request, nesting_inside_strings_does_not_count)
{
    struct request req;
    char s[256];
    size_t n = (size_t)snprintf(s, sizeof(s), "{\"op\":\"x\",\"a\":\"");

    for (int i = 0; i < 100; i++)
        s[n++] = i % 2 ? '[' : '{';
    memcpy(s + n, "\\\"[\"}", 6); /* an escaped quote does not end the string */
    PARSE_OK(&req, s);
    request_deinit(&req);
}

/* The depth check skips strings in runs of four bytes: wherever an escape
 * falls in a run, the string ends at the right quote and brackets after
 * it count (31 more levels are the limit, 32 one too many). */
Test(request, nesting_after_escapes_at_every_offset)
{
    static const char *const escapes[] = {"\\\\", "\\\"", "\\\\\\\""};

    for (size_t e = 0; e < sizeof(escapes) / sizeof(escapes[0]); e++)
        for (int pad = 0; pad < 8; pad++)
            for (int extra = 0; extra < 2; extra++) {
                struct request req;
                struct request_error err;
                char s[256];
                int levels = REQUEST_DEPTH_MAX - 1 + extra;
                size_t n =
                    (size_t)snprintf(s, sizeof(s), "{\"op\":\"x\",\"s\":\"%.*s%s[{\",\"a\":", pad,
                                     "abcdefgh", escapes[e]);
                memset(s + n, '[', (size_t)levels);
                memset(s + n + levels, ']', (size_t)levels);
                memcpy(s + n + 2 * levels, "}", 2);
                int rc = parse(&req, s, strlen(s), &err);
                cr_assert_eq(rc, extra ? WIRE_EPROTO : 0, "%s: %s", s, rc ? err.message : "ok");
                request_deinit(&req);
            }
}

/* --- argument specs ---------------------------------------------------- */

static const struct arg_spec spec_enqueue[] = {
    {"queue", ARG_STRING, ARG_REQUIRED | ARG_QUEUE},
    {"id", ARG_STRING, ARG_JOB},
    {"group", ARG_STRING, ARG_GROUP},
    {"payload", ARG_ANY, ARG_REQUIRED},
    {"delay_ms", ARG_INT, 0, 0, 86400000},
    {"limit", ARG_INT_OR_NULL, 0, 1, 1000000},
    {"lifo", ARG_BOOL, 0},
    {"meta", ARG_OBJECT, 0},
    {"tags", ARG_ARRAY, 0, 0, 3},
    {"note", ARG_STRING, 0, 1, 8},
    {"offset", ARG_INT, 0, ARG_INT_MIN, ARG_INT_MAX},
    {NULL},
};

static const struct arg_spec spec_item[] = {
    {"id", ARG_STRING, ARG_REQUIRED | ARG_JOB},
    {"payload", ARG_ANY, ARG_REQUIRED},
    {NULL},
};

static const struct arg_spec spec_batch[] = {
    {"queue", ARG_STRING, ARG_REQUIRED | ARG_QUEUE},
    {"items", ARG_ARRAY, ARG_REQUIRED, 1, 1000},
    {NULL},
};

static const struct arg_spec spec_claim[] = {
    {"queue", ARG_STRING, ARG_REQUIRED | ARG_QUEUE},
    {"count", ARG_INT, 0, 1, 1000},
    {NULL},
};

/* Parse s (which must parse) and check it against spec. */
static int check(const struct arg_spec *spec, const char *s, struct request_error *err)
{
    struct request req;
    int rc;

    PARSE_OK(&req, s);
    memset(err, 0, sizeof(*err));
    rc = request_check(spec, req.root, err);
    if (rc == 0)
        cr_assert_eq(err->code, 0, "no error code on success");
    else
        cr_assert_eq(err->code, rc);
    request_deinit(&req);
    return rc;
}

#define CHECK_OK(spec, s)                                                                          \
    do {                                                                                           \
        struct request_error e_;                                                                   \
        int rc_ = check(spec, s, &e_);                                                             \
        cr_assert_eq(rc_, 0, "%s: %d %s", s, rc_, e_.message);                                     \
    } while (0)

#define CHECK_FAILS(spec, s, code, msg)                                                            \
    do {                                                                                           \
        struct request_error e_;                                                                   \
        int rc_ = check(spec, s, &e_);                                                             \
        cr_assert_eq(rc_, code, "%s: got %d (%s)", s, rc_, e_.message);                            \
        if ((msg) != NULL)                                                                         \
            cr_assert_str_eq(e_.message, (const char *)(msg), "%s", s);                            \
    } while (0)

Test(request, specs_are_valid)
{
    cr_assert(request_spec_valid(spec_enqueue));
    cr_assert(request_spec_valid(spec_item));
    cr_assert(request_spec_valid(spec_batch));
    cr_assert(request_spec_valid(spec_claim));
}

Test(request, invalid_specs)
{
    static const struct arg_spec dup[] = {{"a", ARG_INT, 0, 0, 1}, {"a", ARG_BOOL, 0}, {NULL}};
    static const struct arg_spec op[] = {{"op", ARG_STRING, 0}, {NULL}};
    static const struct arg_spec ref[] = {{"ref", ARG_ANY, 0}, {NULL}};
    static const struct arg_spec bounds[] = {{"n", ARG_INT, 0, 5, 1}, {NULL}};
    static const struct arg_spec sbounds[] = {{"s", ARG_STRING, 0, 9, 3}, {NULL}};
    static const struct arg_spec idtype[] = {{"q", ARG_INT, ARG_QUEUE, 0, 1}, {NULL}};
    static const struct arg_spec twoids[] = {{"q", ARG_STRING, ARG_QUEUE | ARG_JOB}, {NULL}};
    static const struct arg_spec badtype[] = {{"x", ARG__END, 0}, {NULL}};
    static const struct arg_spec badflag[] = {{"x", ARG_BOOL, 1u << 9}, {NULL}};
    static const struct arg_spec empty[] = {{"", ARG_BOOL, 0}, {NULL}};

    cr_assert_not(request_spec_valid(dup));
    cr_assert_not(request_spec_valid(op));
    cr_assert_not(request_spec_valid(ref));
    cr_assert_not(request_spec_valid(bounds));
    cr_assert_not(request_spec_valid(sbounds));
    cr_assert_not(request_spec_valid(idtype));
    cr_assert_not(request_spec_valid(twoids));
    cr_assert_not(request_spec_valid(badtype));
    cr_assert_not(request_spec_valid(badflag));
    cr_assert_not(request_spec_valid(empty));
}

Test(request, all_arguments_good)
{
    CHECK_OK(spec_enqueue, "{\"op\":\"enqueue\",\"ref\":1,\"queue\":\"orders\",\"id\":\"JOB01abc\","
                           "\"group\":\"TENacme\",\"payload\":{\"a\":[1,2]},\"delay_ms\":0,"
                           "\"limit\":null,\"lifo\":false,\"meta\":{},\"tags\":[1,\"x\",null],"
                           "\"note\":\"12345678\",\"offset\":-9223372036854775808}");
    CHECK_OK(spec_enqueue, "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":null}");
    CHECK_OK(spec_enqueue, "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":\"text\",\"limit\":5}");
}

Test(request, unknown_argument)
{
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"cuont\":3}", WIRE_EARG,
                "unknown argument \"cuont\"");
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"Count\":3}", WIRE_EARG, NULL);
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"\":3}", WIRE_EARG,
                "unknown argument \"\"");
}

Test(request, unknown_argument_name_is_cut_and_cleaned)
{
    char s[512];
    struct request_error err;

    /* 70 'a's then a 2-byte character straddling the cut at 64... */
    int n = snprintf(s, sizeof(s), "{\"op\":\"x\",\"queue\":\"q\",\"");
    for (int i = 0; i < 63; i++)
        s[n++] = 'a';
    memcpy(s + n, "\xc3\xa9zzzzzz\":1}", 13);
    cr_assert_eq(check(spec_claim, s, &err), WIRE_EARG);
    cr_assert_eq(strlen(err.message), strlen("unknown argument \"\"") + 63, "%s", err.message);

    /* ... and a control character shown as '?'. */
    cr_assert_eq(check(spec_claim, "{\"op\":\"x\",\"queue\":\"q\",\"a\\nb\":1}", &err), WIRE_EARG);
    cr_assert_str_eq(err.message, "unknown argument \"a?b\"");
}

Test(request, missing_argument)
{
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\"}", WIRE_EARG, "missing argument \"queue\"");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"enqueue\",\"queue\":\"q\"}", WIRE_EARG,
                "missing argument \"payload\"");
}

Test(request, int_type_and_bounds)
{
    const char *msg = "argument \"count\" must be an integer from 1 to 1000";

    CHECK_OK(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":1}");
    CHECK_OK(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":1000}");
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":0}", WIRE_EARG, msg);
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":1001}", WIRE_EARG, msg);
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":-1}", WIRE_EARG, msg);
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":5.0}", WIRE_EARG, msg);
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":\"5\"}", WIRE_EARG, msg);
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":null}", WIRE_EARG, msg);
    CHECK_FAILS(spec_claim, "{\"op\":\"claim\",\"queue\":\"q\",\"count\":true}", WIRE_EARG, msg);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"offset\":1.5}",
                WIRE_EARG, "argument \"offset\" must be an integer");
}

Test(request, int_or_null)
{
    const char *msg = "argument \"limit\" must be null or an integer from 1 to 1000000";

    CHECK_OK(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"limit\":null}");
    CHECK_OK(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"limit\":1000000}");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"limit\":0}", WIRE_EARG,
                msg);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"limit\":\"x\"}",
                WIRE_EARG, msg);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"limit\":false}",
                WIRE_EARG, msg);
}

Test(request, bool_object_array_string_types)
{
    CHECK_OK(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"lifo\":true}");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"lifo\":1}", WIRE_EARG,
                "argument \"lifo\" must be true or false");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"lifo\":null}",
                WIRE_EARG, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"meta\":[]}", WIRE_EARG,
                "argument \"meta\" must be an object");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"tags\":{}}", WIRE_EARG,
                "argument \"tags\" must be an array of at most 3 items");
    CHECK_OK(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"tags\":[]}");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"tags\":[1,2,3,4]}",
                WIRE_EARG, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":1,\"payload\":1}", WIRE_EARG,
                "argument \"queue\" must be a string");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"note\":\"\"}",
                WIRE_EARG, "argument \"note\" must be a string of 1 to 8 bytes");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"note\":\"123456789\"}",
                WIRE_EARG, NULL);
    /* Length is in bytes: four 2-byte characters fit in 8, five do not. */
    CHECK_OK(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"note\":"
                           "\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}");
    CHECK_FAILS(
        spec_enqueue,
        "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"note\":\"\xc3\xa9\xc3\xa9\xc3\xa9\xc3"
        "\xa9\xc3\xa9\"}",
        WIRE_EARG, NULL);
}

Test(request, any_takes_every_json_value)
{
    static const char *const values[] = {"null",  "true", "0",         "-2.5e10",
                                         "\"s\"", "[]",   "{\"a\":{}}"};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char s[128];
        snprintf(s, sizeof(s), "{\"op\":\"e\",\"queue\":\"q\",\"payload\":%s}", values[i]);
        CHECK_OK(spec_enqueue, s);
    }
}

Test(request, queue_validation)
{
    CHECK_OK(spec_claim, "{\"op\":\"c\",\"queue\":\"a.b-c_D9\"}");
    CHECK_FAILS(spec_claim, "{\"op\":\"c\",\"queue\":\"\"}", WIRE_EQUEUE, NULL);
    CHECK_FAILS(spec_claim, "{\"op\":\"c\",\"queue\":\"a}b\"}", WIRE_EQUEUE, NULL);
    CHECK_FAILS(spec_claim, "{\"op\":\"c\",\"queue\":\"a:b\"}", WIRE_EQUEUE, NULL);
    CHECK_FAILS(spec_claim, "{\"op\":\"c\",\"queue\":\"a b\"}", WIRE_EQUEUE, NULL);
    CHECK_FAILS(spec_claim, "{\"op\":\"c\",\"queue\":\"caf\xc3\xa9\"}", WIRE_EQUEUE, NULL);
}

Test(request, group_validation)
{
    CHECK_OK(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"group\":\"TENacme-42\"}");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"group\":\"acme\"}",
                WIRE_EBRAND, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"group\":\"TEN\"}",
                WIRE_EBRAND, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"group\":\"TENa:b\"}",
                WIRE_EBRAND, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"group\":7}", WIRE_EARG,
                NULL);
}

Test(request, job_validation)
{
    CHECK_OK(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"id\":\"JOB01HZX\"}");
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"id\":\"TEN01\"}",
                WIRE_EKIND, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"id\":\"job01\"}",
                WIRE_EKIND, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"id\":\"\"}",
                WIRE_EKIND, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"id\":\"JOB\"}",
                WIRE_EARG, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"id\":\"JOB a\"}",
                WIRE_EARG, NULL);
    CHECK_FAILS(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"id\":\"JOB}x\"}",
                WIRE_EARG, NULL);
}

Test(request, messages_name_the_argument)
{
    struct request_error err;

    cr_assert_eq(
        check(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"id\":\"X\"}", &err),
        WIRE_EKIND);
    cr_assert(strstr(err.message, "\"id\"") != NULL, "%s", err.message);
    cr_assert_eq(
        check(spec_enqueue, "{\"op\":\"e\",\"queue\":\"q\",\"payload\":1,\"group\":\"x\"}", &err),
        WIRE_EBRAND);
    cr_assert(strstr(err.message, "\"group\"") != NULL, "%s", err.message);
    cr_assert_eq(check(spec_claim, "{\"op\":\"c\",\"queue\":\"{q}\"}", &err), WIRE_EQUEUE);
    cr_assert(strstr(err.message, "\"queue\"") != NULL, "%s", err.message);
}

Test(request, batch_items)
{
    struct request req;
    struct request_error err;
    const char *s = "{\"op\":\"enqueue_many\",\"queue\":\"q\",\"items\":["
                    "{\"id\":\"JOB1\",\"payload\":1},"
                    "{\"id\":\"TEN1\",\"payload\":1},"
                    "{\"id\":\"JOB3\"},"
                    "{\"id\":\"JOB4\",\"payload\":1,\"op\":\"x\"},"
                    "5,"
                    "{\"id\":\"JOB6\",\"payload\":[],\"extra\":1}]}";
    static const int want[] = {0, WIRE_EKIND, WIRE_EARG, WIRE_EARG, WIRE_EARG, WIRE_EARG};
    json_t *items;

    PARSE_OK(&req, s);
    cr_assert_eq(request_check(spec_batch, req.root, &err), 0, "%s", err.message);
    items = json_object_get(req.root, "items");
    cr_assert_eq(json_array_size(items), 6);
    for (size_t i = 0; i < json_array_size(items); i++) {
        memset(&err, 0, sizeof(err));
        int rc = request_check_item(spec_item, json_array_get(items, i), &err);
        cr_assert_eq(rc, want[i], "item %zu: %d %s", i, rc, err.message);
    }
    request_deinit(&req);
}

Test(request, empty_batch_is_eempty)
{
    CHECK_FAILS(spec_batch, "{\"op\":\"m\",\"queue\":\"q\",\"items\":[]}", WIRE_EEMPTY,
                "argument \"items\" must not be empty");
    CHECK_FAILS(spec_batch, "{\"op\":\"m\",\"queue\":\"q\",\"items\":{}}", WIRE_EARG,
                "argument \"items\" must be an array of 1 to 1000 items");
}

Test(request, oversized_batch)
{
    size_t cap = 64 + 2 * 1001;
    char *s = malloc(cap);
    size_t n = (size_t)snprintf(s, cap, "{\"op\":\"m\",\"queue\":\"q\",\"items\":[");

    for (int i = 0; i < 1001; i++)
        s[n++] = '1', s[n++] = ',';
    memcpy(s + n - 1, "]}", 3);
    CHECK_FAILS(spec_batch, s, WIRE_EARG, NULL);
    s[n - 3] = ']', s[n - 2] = '}', s[n - 1] = '\0'; /* 1000 items */
    CHECK_OK(spec_batch, s);
    free(s);
}

Test(request, check_rejects_non_objects)
{
    struct request_error err;
    json_t *arr = json_array();

    cr_assert_eq(request_check(spec_claim, arr, &err), WIRE_EPROTO);
    cr_assert_eq(request_check_item(spec_item, arr, &err), WIRE_EARG);
    cr_assert_eq(request_check_item(spec_item, NULL, &err), WIRE_EARG);
    json_decref(arr);
}

Test(request, accessors)
{
    struct request req;
    size_t len = 0;

    PARSE_OK(&req, "{\"op\":\"e\",\"queue\":\"orders\",\"n\":7,\"b\":true,\"z\":null}");
    cr_assert_str_eq(request_string(req.root, "queue", &len), "orders");
    cr_assert_eq(len, 6);
    cr_assert_null(request_string(req.root, "n", NULL));
    cr_assert_null(request_string(req.root, "missing", NULL));
    cr_assert_eq(request_int(req.root, "n", -1), 7);
    cr_assert_eq(request_int(req.root, "z", -1), -1);
    cr_assert_eq(request_int(req.root, "missing", 3), 3);
    cr_assert(request_bool(req.root, "b", false));
    cr_assert_not(request_bool(req.root, "missing", false));
    cr_assert(request_bool(req.root, "n", true), "a non-boolean gives the default");
    request_deinit(&req);
}
