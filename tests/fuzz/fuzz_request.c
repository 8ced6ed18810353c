/* fuzz_request: one line through what the daemon does before any handler
 * runs: request_parse(), the command lookup, request_check() against the
 * command's spec, and the error reply. Properties: a request that passes
 * its check has every argument of the right type and bounds and every id
 * valid (nothing malformed can reach a key); a refused one has a code and
 * a message, and its error reply is one valid JSON line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brand.h"
#include "reply.h"
#include "request.h"
#include "cmd.h"
#include "server.h"
#include "fuzz.h"

/* The error reply for code/message is exactly one line of valid JSON. */
static void check_error_reply(const json_t *ref, int code, const char *message)
{
    struct outbuf out;
    outbuf_init(&out);
    if (reply_error(&out, ref, (enum wire_error)code, message) == 0) {
        CHECK(out.len > 0 && out.data[out.len - 1] == '\n');
        CHECK(memchr(out.data, '\n', out.len - 1) == NULL);
        json_t *v = json_loadb(out.data, out.len - 1, JSON_REJECT_DUPLICATES, NULL);
        CHECK(json_is_object(v) && json_is_false(json_object_get(v, "ok")));
        json_decref(v);
    }
    outbuf_deinit(&out);
}

/* What request_check() promised about one argument that is present. */
static void check_arg(const struct arg_spec *a, const json_t *v)
{
    if (json_is_null(v) && a->type == ARG_INT_OR_NULL)
        return;
    switch (a->type) {
    case ARG_STRING: {
        const char *s = json_string_value(v);
        size_t len = json_string_length(v);
        CHECK(s != NULL);
        if (a->max > 0)
            CHECK((json_int_t)len >= a->min && (json_int_t)len <= a->max);
        if (a->flags & ARG_QUEUE)
            CHECK(brand_queue_valid(s, len));
        if (a->flags & ARG_GROUP)
            CHECK(brand_group_valid(s, len));
        if (a->flags & ARG_JOB)
            CHECK(brand_job_valid(s, len));
        break;
    }
    case ARG_INT:
    case ARG_INT_OR_NULL:
        CHECK(json_is_integer(v));
        CHECK(json_integer_value(v) >= a->min && json_integer_value(v) <= a->max);
        break;
    case ARG_BOOL:
        CHECK(json_is_boolean(v));
        break;
    case ARG_ARRAY:
        CHECK(json_is_array(v));
        if (a->max > 0)
            CHECK((json_int_t)json_array_size(v) >= a->min &&
                  (json_int_t)json_array_size(v) <= a->max);
        break;
    case ARG_OBJECT:
        CHECK(json_is_object(v));
        break;
    default:
        break;
    }
}

static void check_request(const struct cmd *cmd, const json_t *root)
{
    struct request_error err;
    memset(&err, 0xaa, sizeof(err));
    if (request_check(cmd->spec, root, &err) != 0) {
        CHECK(err.code != 0 && memchr(err.message, '\0', sizeof(err.message)) != NULL);
        check_error_reply(json_object_get(root, "ref"), err.code, err.message);
        return;
    }
    for (const struct arg_spec *a = cmd->spec; a->name != NULL; a++) {
        json_t *v = json_object_get(root, a->name);
        CHECK(v != NULL || !(a->flags & ARG_REQUIRED));
        if (v != NULL)
            check_arg(a, v);
        /* Arrays of items (enqueue_many): the item checker must cope with
         * anything, objects or not. */
        for (size_t i = 0; a->type == ARG_ARRAY && i < json_array_size(v) && i < 16; i++) {
            CHECK(request_check_item(cmd->spec, json_array_get(v, i), &err) >= 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The daemon hands over NUL-terminated lines (frame.h). */
    char *line = malloc(size + 1);
    CHECK(line != NULL);
    memcpy(line, data, size);
    line[size] = '\0';
    struct request rq;
    struct request_error err;
    memset(&err, 0xaa, sizeof(err));
    if (request_parse(&rq, line, size, &err) != 0) {
        CHECK(err.code != 0 && memchr(err.message, '\0', sizeof(err.message)) != NULL);
        check_error_reply(rq.ref, err.code, err.message);
    } else {
        CHECK(json_is_object(rq.root) && rq.op != NULL && strlen(rq.op) == rq.op_len);
        const struct cmd *cmd = cmd_lookup(rq.op, rq.op_len);
        if (cmd != NULL) {
            check_request(cmd, rq.root);
        } else {
            /* As client.c words it: a cut op may split a UTF-8 sequence. */
            char msg[128];
            snprintf(msg, sizeof(msg), "no such op \"%.*s\"",
                     (int)(rq.op_len > 64 ? 64 : rq.op_len), rq.op);
            check_error_reply(rq.ref, WIRE_EUNKNOWN, msg);
        }
    }
    request_deinit(&rq);
    free(line);
    return 0;
}
