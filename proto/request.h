/* request: one line of the wire turned into a checked request. Parsing
 * refuses anything that is not a single JSON object with a string "op";
 * request_check() then holds the object to a command's argument spec, so a
 * handler only ever sees arguments of the right names, types and ranges. */
#ifndef EMQ_REQUEST_H
#define EMQ_REQUEST_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

#define REQUEST_DEPTH_MAX   32  /* deepest nesting of arrays and objects, the request included */
#define REQUEST_MESSAGE_MAX 192 /* room for an error message, NUL included */
#define REQUEST_NAME_SHOWN  64  /* longest argument name quoted in a message */

/* Why a request was refused: the wire code and a message for the reply. */
struct request_error {
    enum wire_error code;
    char message[REQUEST_MESSAGE_MAX];
};

/* A parsed request. root is owned; op and ref point into it. */
struct request {
    json_t *root;
    const char *op; /* NUL-terminated, op_len bytes; NULL when the parse failed */
    size_t op_len;
    json_t *ref; /* the "ref" to echo, NULL when absent or unusable */
};

/* The argument types. */
enum arg_type {
    ARG_STRING,      /* a string; min..max bound its length in bytes when max > 0 */
    ARG_INT,         /* an integer (not a real) within min..max, always */
    ARG_BOOL,        /* true or false */
    ARG_ANY,         /* any JSON value (a payload) */
    ARG_ARRAY,       /* an array; min..max bound its size when max > 0 */
    ARG_OBJECT,      /* an object */
    ARG_INT_OR_NULL, /* null, or an integer within min..max */
    ARG__END
};

/* The widest integer bounds, for an argument with no bound on that side. */
#define ARG_INT_MIN LLONG_MIN
#define ARG_INT_MAX LLONG_MAX
_Static_assert(sizeof(json_int_t) == sizeof(long long), "jansson integers are long long");

/* Argument flags. ARG_QUEUE, ARG_GROUP and ARG_JOB (at most one, on an
 * ARG_STRING) add the id rules of brand.h. */
enum {
    ARG_REQUIRED = 1u << 0,
    ARG_QUEUE = 1u << 1, /* brand_queue_valid(), else EQUEUE */
    ARG_GROUP = 1u << 2, /* brand_group_valid(), else EBRAND */
    ARG_JOB = 1u << 3,   /* brand_job_kind(), else EKIND; brand_job_valid(), else EARG */
};

/* One argument a command accepts. A spec is a static const array of these
 * ended by a row whose name is NULL. */
struct arg_spec {
    const char *name;
    enum arg_type type;
    unsigned flags;
    json_int_t min, max;
};

/* Parse one line (len bytes, no newline) into req. Returns 0, or a wire
 * code with err filled: WIRE_EPROTO (WIRE_EINTERNAL when out of memory). Refused: invalid JSON or
 * UTF-8, trailing bytes after the value, duplicate keys, "\u0000", nesting
 * deeper than REQUEST_DEPTH_MAX, a value that is not an object, an "op"
 * that is missing or not a string, a "ref" that is not a scalar. Even on
 * failure req->ref is set when the line was an object with a scalar "ref",
 * so the error reply can echo it. Call request_deinit() in either case. */
int request_parse(struct request *req, const char *line, size_t len, struct request_error *err);

/* request_parse's result, but by jansson alone: every payload a tree. The
 * differential tests hold request_parse to it. (request_parse stores an
 * enqueue's payload that is already compact JSON as its text instead:
 * scan.h, request_payload_text.) */
int request_parse_plain(struct request *req, const char *line, size_t len,
                        struct request_error *err);

/* When v is a payload request_parse kept as text, that text (NUL-
 * terminated, *len bytes): exactly what payload_text would write for
 * the value jansson parses from it. NULL for any other value, which is
 * then an ordinary JSON value. */
const char *request_payload_text(const json_t *v, size_t *len);

/* Drop the parsed object. */
void request_deinit(struct request *req);

/* Hold a request object to spec: every key is "op", "ref" or in spec,
 * every required argument is present, every present one has its type,
 * bounds and id rules. Returns 0, or a wire code with err filled (the
 * message names the argument). */
int request_check(const struct arg_spec *spec, const json_t *req, struct request_error *err);

/* The same for one item of an array argument (an enqueue_many item): the
 * item must be an object and every key in spec ("op" and "ref" included). */
int request_check_item(const struct arg_spec *spec, const json_t *item, struct request_error *err);

/* True when spec is well formed: names unique and not "op" or "ref", types
 * known, min <= max where bounds apply, id rules only on strings and at
 * most one of them. For the unit tests of the command tables. */
bool request_spec_valid(const struct arg_spec *spec);

/* Accessors for a checked object: the value of argument name, or NULL /
 * dflt when it is absent (or null, for request_int). */
const char *request_string(const json_t *obj, const char *name, size_t *len);
json_int_t request_int(const json_t *obj, const char *name, json_int_t dflt);
bool request_bool(const json_t *obj, const char *name, bool dflt);

#endif
