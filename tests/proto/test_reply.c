/* reply: every encoding parses back as JSON with the right keys. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "reply.h"

#define FFFD "\xef\xbf\xbd" /* U+FFFD in UTF-8 */

/* The one line in out, without its "\n", parsed back (caller decrefs). */
static json_t *one_line(const struct outbuf *out)
{
    json_error_t jerr;
    json_t *v;

    cr_assert_gt(out->len, 1);
    cr_assert_eq(out->data[out->len - 1], '\n', "a line ends in \\n");
    cr_assert_null(memchr(out->data, '\n', out->len - 1), "exactly one line");
    v = json_loadb(out->data, out->len - 1, JSON_REJECT_DUPLICATES, &jerr);
    cr_assert_not_null(v, "%.*s: %s", (int)out->len, out->data, jerr.text);
    cr_assert(json_is_object(v));
    return v;
}

/* The text of the line, NUL-terminated, for exact comparisons. */
static const char *text(struct outbuf *out)
{
    cr_assert_eq(outbuf_reserve(out, 1), 0);
    out->data[out->len] = '\0';
    return out->data;
}

Test(reply, ok_without_ref_or_fields)
{
    struct outbuf out;

    outbuf_init(&out);
    cr_assert_eq(reply_ok(&out, NULL, NULL), 0);
    cr_assert_str_eq(text(&out), "{\"ok\":true}\n");
    outbuf_reset(&out);
    json_t *empty = json_object();
    cr_assert_eq(reply_ok(&out, NULL, empty), 0);
    cr_assert_str_eq(text(&out), "{\"ok\":true}\n");
    json_decref(empty);
    outbuf_deinit(&out);
}

Test(reply, ok_with_ref_and_fields_in_order)
{
    struct outbuf out;
    json_t *ref = json_string("r-1");
    json_t *fields = json_pack("{s:i,s:s,s:[i,i],s:{s:b}}", "count", 3, "id", "JOB1", "ids", 1, 2,
                               "nested", "x", 1);

    outbuf_init(&out);
    cr_assert_eq(reply_ok(&out, ref, fields), 0);
    cr_assert_str_eq(text(&out), "{\"ref\":\"r-1\",\"ok\":true,\"count\":3,\"id\":\"JOB1\","
                                 "\"ids\":[1,2],\"nested\":{\"x\":true}}\n");
    json_t *back = one_line(&out);
    cr_assert(json_equal(json_object_get(back, "ref"), ref));
    cr_assert(json_is_true(json_object_get(back, "ok")));
    cr_assert_eq(json_integer_value(json_object_get(back, "count")), 3);
    json_decref(back);
    json_decref(ref);
    json_decref(fields);
    outbuf_deinit(&out);
}

Test(reply, every_kind_of_ref_is_echoed)
{
    json_t *refs[] = {json_string("a\"b\\c\n\xc3\xa9"),
                      json_integer(-42),
                      json_real(1.5),
                      json_true(),
                      json_false(),
                      json_null()};

    for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
        struct outbuf out;
        outbuf_init(&out);
        cr_assert_eq(reply_ok(&out, refs[i], NULL), 0);
        cr_assert_eq(memcmp(out.data, "{\"ref\":", 7), 0, "ref comes first");
        json_t *back = one_line(&out);
        cr_assert(json_equal(json_object_get(back, "ref"), refs[i]), "ref %zu", i);
        json_decref(back);
        outbuf_deinit(&out);
        json_decref(refs[i]);
    }
}

Test(reply, error_line)
{
    struct outbuf out;
    json_t *ref = json_integer(9);

    outbuf_init(&out);
    cr_assert_eq(reply_error(&out, ref, WIRE_ELEASE, "lease is not current"), 0);
    cr_assert_str_eq(text(&out), "{\"ref\":9,\"ok\":false,\"error\":\"ELEASE\","
                                 "\"message\":\"lease is not current\"}\n");
    outbuf_reset(&out);
    cr_assert_eq(reply_error(&out, NULL, WIRE_EPROTO, NULL), 0);
    json_t *back = one_line(&out);
    cr_assert_null(json_object_get(back, "ref"));
    cr_assert(json_is_false(json_object_get(back, "ok")));
    cr_assert_str_eq(json_string_value(json_object_get(back, "error")), "EPROTO");
    cr_assert_str_eq(json_string_value(json_object_get(back, "message")),
                     wire_error_summary(WIRE_EPROTO));
    json_decref(back);
    json_decref(ref);
    outbuf_deinit(&out);
}

Test(reply, error_with_an_invalid_code_is_internal)
{
    struct outbuf out;

    outbuf_init(&out);
    cr_assert_eq(reply_error(&out, NULL, (enum wire_error)0, "x"), 0);
    json_t *back = one_line(&out);
    cr_assert_str_eq(json_string_value(json_object_get(back, "error")), "EINTERNAL");
    json_decref(back);
    outbuf_deinit(&out);
}

Test(reply, messages_are_escaped_and_made_valid_utf8)
{
    struct outbuf out;
    /* quotes, backslash, controls, DEL, good UTF-8, then bad bytes */
    const char *msg = "a\"b\\c\n\r\t\x01\x1f\x7f \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 "
                      "\xff\xc3(\xed\xa0\x80\xc0\xaf\xf4\x90\x80\x80\xe2\x82";

    outbuf_init(&out);
    cr_assert_eq(reply_error(&out, NULL, WIRE_EINTERNAL, msg), 0);
    json_t *back = one_line(&out);
    /* Each byte that starts no valid sequence becomes one U+FFFD. */
    cr_assert_str_eq(json_string_value(json_object_get(back, "message")),
                     "a\"b\\c\n\r\t\x01\x1f\x7f \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 " FFFD FFFD
                     "(" FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD FFFD);
    json_decref(back);
    outbuf_deinit(&out);
}

Test(reply, push_line)
{
    struct outbuf out;
    json_t *fields = json_pack("{s:s,s:i}", "queue", "q", "depth", 0);

    outbuf_init(&out);
    cr_assert_eq(reply_push(&out, "wake", fields), 0);
    cr_assert_str_eq(text(&out), "{\"push\":\"wake\",\"queue\":\"q\",\"depth\":0}\n");
    outbuf_reset(&out);
    cr_assert_eq(reply_push(&out, "bye", NULL), 0);
    cr_assert_str_eq(text(&out), "{\"push\":\"bye\"}\n");
    json_decref(fields);
    outbuf_deinit(&out);
}

Test(reply, fields_that_clash_are_refused)
{
    struct outbuf out;
    json_t *has_ok = json_pack("{s:b}", "ok", 0);
    json_t *has_ref = json_pack("{s:i}", "ref", 1);
    json_t *has_push = json_pack("{s:s}", "push", "x");
    json_t *arr = json_array();

    outbuf_init(&out);
    cr_assert_eq(reply_ok(&out, NULL, has_ok), -EINVAL);
    cr_assert_eq(reply_ok(&out, NULL, has_ref), -EINVAL);
    cr_assert_eq(reply_ok(&out, NULL, arr), -EINVAL);
    cr_assert_eq(reply_push(&out, "job", has_push), -EINVAL);
    cr_assert_eq(reply_push(&out, "job", has_ref), -EINVAL);
    cr_assert_eq(out.len, 0, "nothing is left behind");
    cr_assert_eq(reply_push(&out, "job", has_ok), 0, "ok is only the reply's key");
    json_decref(has_ok);
    json_decref(has_ref);
    json_decref(has_push);
    json_decref(arr);
    outbuf_deinit(&out);
}

static const struct reply_job job1 = {
    .queue = "orders",
    .queue_len = 6,
    .id = "JOB01ARZ3NDEKTSV4RRFFQ69G5FAV",
    .id_len = 29,
    .group = "TENacme",
    .group_len = 7,
    .lease = "1234",
    .lease_len = 4,
    .attempt = 1,
    .deadline = 1700000000123,
    .payload = "{\"to\":\"a@b.c\",\"n\":[1,2.5,null]}",
    .payload_len = 31,
};

Test(reply, push_job_splices_the_payload)
{
    struct outbuf out;

    outbuf_init(&out);
    cr_assert_eq(reply_push_job(&out, &job1), 0);
    cr_assert_str_eq(text(&out), "{\"push\":\"job\",\"queue\":\"orders\","
                                 "\"job\":\"JOB01ARZ3NDEKTSV4RRFFQ69G5FAV\",\"group\":\"TENacme\","
                                 "\"lease\":\"1234\",\"attempt\":1,\"lease_until\":1700000000123,"
                                 "\"payload\":{\"to\":\"a@b.c\",\"n\":[1,2.5,null]}}\n");
    json_t *back = one_line(&out);
    json_t *payload = json_loads(job1.payload, 0, NULL);
    cr_assert(json_equal(json_object_get(back, "payload"), payload));
    json_decref(payload);
    json_decref(back);
    outbuf_deinit(&out);
}

Test(reply, push_job_ungrouped_without_queue)
{
    struct outbuf out;
    struct reply_job job = job1;

    job.group = NULL;
    job.queue = NULL;
    job.payload = "\"plain\"";
    job.payload_len = 7;
    outbuf_init(&out);
    cr_assert_eq(reply_push_job(&out, &job), 0);
    json_t *back = one_line(&out);
    cr_assert(json_is_null(json_object_get(back, "group")), "ungrouped: group is null");
    cr_assert_null(json_object_get(back, "queue"));
    cr_assert_str_eq(json_string_value(json_object_get(back, "payload")), "plain");
    cr_assert_str_eq(json_string_value(json_object_get(back, "push")), "job");
    json_decref(back);
    outbuf_deinit(&out);
}

Test(reply, push_job_refuses_a_payload_that_would_break_the_frame)
{
    struct outbuf out;
    struct reply_job job = job1;

    outbuf_init(&out);
    cr_assert_eq(reply_ok(&out, NULL, NULL), 0);
    size_t before = out.len;
    job.payload = "{\"a\":\n1}";
    job.payload_len = 8;
    cr_assert_eq(reply_push_job(&out, &job), -EINVAL);
    cr_assert_eq(out.len, before, "the partial line is removed");
    job.payload_len = 0;
    cr_assert_eq(reply_push_job(&out, &job), -EINVAL);
    cr_assert_eq(out.len, before);
    cr_assert_eq(reply_push_job(&out, &job1), 0, "the builder recovers");
    outbuf_deinit(&out);
}

Test(reply, builder_claim_reply_with_jobs)
{
    struct outbuf out;
    json_t *ref = json_string("c1");
    struct reply_job job2 = job1;

    job2.id = "JOB2";
    job2.id_len = 4;
    job2.group = NULL;
    outbuf_init(&out);
    reply_begin_ok(&out, ref);
    reply_key(&out, "deadline");
    reply_int(&out, 5);
    reply_key(&out, "jobs");
    reply_begin_array(&out);
    reply_job(&out, &job1);
    reply_job(&out, &job2);
    reply_end_array(&out);
    reply_key(&out, "empty");
    reply_begin_array(&out);
    reply_end_array(&out);
    reply_key(&out, "obj");
    reply_begin_object(&out);
    reply_key(&out, "a");
    reply_bool(&out, true);
    reply_key(&out, "b");
    reply_string(&out, "x\"y", 3);
    reply_key(&out, "c");
    reply_value(&out, ref);
    reply_end_object(&out);
    reply_key(&out, "list");
    reply_begin_array(&out);
    reply_int(&out, 1);
    reply_string(&out, "two", 3);
    reply_bool(&out, false);
    reply_raw(&out, "null", 4);
    reply_begin_object(&out);
    reply_end_object(&out);
    reply_end_array(&out);
    cr_assert_eq(reply_end(&out), 0);

    json_t *back = one_line(&out);
    cr_assert_eq(memcmp(out.data, "{\"ref\":\"c1\",\"ok\":true,", 22), 0);
    json_t *jobs = json_object_get(back, "jobs");
    cr_assert_eq(json_array_size(jobs), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(jobs, 1), "job")), "JOB2");
    cr_assert(json_is_null(json_object_get(json_array_get(jobs, 1), "group")));
    cr_assert_eq(json_array_size(json_object_get(back, "empty")), 0);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(back, "obj"), "b")), "x\"y");
    cr_assert_eq(json_array_size(json_object_get(back, "list")), 5);
    json_decref(back);
    json_decref(ref);
    outbuf_deinit(&out);
}

Test(reply, integers_at_the_edges)
{
    static const long long values[] = {0, 1, -1, 9, 10, -10, LLONG_MAX, LLONG_MIN};
    struct outbuf out;

    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        outbuf_init(&out);
        reply_begin_push(&out, "n");
        reply_key(&out, "v");
        reply_int(&out, values[i]);
        cr_assert_eq(reply_end(&out), 0);
        json_t *back = one_line(&out);
        cr_assert_eq(json_integer_value(json_object_get(back, "v")), values[i]);
        json_decref(back);
        outbuf_deinit(&out);
    }
}

Test(reply, lines_append)
{
    struct outbuf out;
    size_t lines = 0;

    outbuf_init(&out);
    for (int i = 0; i < 2000; i++) {
        json_t *ref = json_integer(i);
        cr_assert_eq(i % 2 ? reply_ok(&out, ref, NULL) : reply_error(&out, ref, WIRE_ELIMIT, NULL),
                     0);
        json_decref(ref);
    }
    for (size_t i = 0; i < out.len; i++)
        lines += out.data[i] == '\n';
    cr_assert_eq(lines, 2000);
    cr_assert_geq(out.cap, out.len);
    outbuf_reset(&out);
    cr_assert_eq(out.len, 0);
    outbuf_deinit(&out);
    cr_assert_null(out.data);
}

/* Strings and keys with nothing to escape are copied at once; one escape
 * anywhere (first byte, after a plain run, last byte) takes the escaping
 * path from there. The exact text shows both paths agree. */
Test(reply, plain_and_escaped_strings_and_keys)
{
    struct outbuf out;
    outbuf_init(&out);
    cr_assert_eq(reply_begin_ok(&out, NULL), 0);
    reply_key(&out, "plain");
    reply_string(&out, "JOB01-abc_xyz", 13);
    reply_key(&out, "k\"ey");
    reply_string(&out, "\"first", 6);
    reply_key(&out, "mid");
    reply_string(&out, "ab\\cd", 5);
    reply_key(&out, "last");
    reply_string(&out, "abc\n", 4);
    reply_key(&out, "utf8");
    reply_string(&out, "caf\xc3\xa9", 5);
    reply_key(&out, "empty");
    reply_string(&out, "", 0);
    cr_assert_eq(reply_end(&out), 0);
    cr_assert_str_eq(text(&out),
                     "{\"ok\":true,\"plain\":\"JOB01-abc_xyz\",\"k\\\"ey\":\"\\\"first\","
                     "\"mid\":\"ab\\\\cd\",\"last\":\"abc\\n\",\"utf8\":\"caf\xc3\xa9\","
                     "\"empty\":\"\"}\n");
    json_decref(one_line(&out));
    outbuf_deinit(&out);
}
