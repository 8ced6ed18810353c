/* request: parsing and argument checking (see request.h). */
#include "request.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brand.h"
#include "scan.h"

#define ARG_ID_FLAGS (ARG_QUEUE | ARG_GROUP | ARG_JOB)
#define ARG_FLAGS    (ARG_REQUIRED | ARG_ID_FLAGS)

static int fail(struct request_error *err, enum wire_error code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fill err and return its code, for a caller to return in turn. */
static int fail(struct request_error *err, enum wire_error code, const char *fmt, ...)
{
    va_list ap;

    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return (int)code;
}

/* Copy a name from the wire into a message: at most REQUEST_NAME_SHOWN
 * bytes, cut on a UTF-8 character boundary, control bytes shown as '?'. */
static void shown_name(char *dst, const char *name)
{
    size_t n = strlen(name);

    if (n > REQUEST_NAME_SHOWN) {
        n = REQUEST_NAME_SHOWN;
        while (n > 0 && ((unsigned char)name[n] & 0xc0) == 0x80)
            n--;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        dst[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    dst[n] = '\0';
}

/* Where the string whose content starts at i ends: the first quote not
 * escaped by a backslash (len when there is none). A quote is escaped
 * when an odd run of backslashes precedes it inside the string, which is
 * what reading the escapes left to right gives. memchr finds the quotes:
 * the bytes between, most of a payload, are never looked at one by one. */
static size_t string_end(const unsigned char *s, size_t len, size_t i)
{
    size_t start = i;

    while (i < len) {
        const unsigned char *q = memchr(s + i, '"', len - i);
        if (q == NULL)
            break;
        size_t at = (size_t)(q - s), b = at;
        while (b > start && s[b - 1] == '\\')
            b--;
        if ((at - b) % 2 == 0)
            return at;
        i = at + 1;
    }
    return len;
}

/* True when the JSON text nests arrays and objects deeper than the limit.
 * Checked before parsing, so a hostile line never builds a deep tree. */
static bool too_deep(const char *s, size_t len)
{
    int depth = 0;

    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '"') {
            i = string_end((const unsigned char *)s, len, i + 1);
        } else if (c == '{' || c == '[') {
            if (++depth > REQUEST_DEPTH_MAX)
                return true;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return false;
}

/* Turn a jansson parse error into a wire error. jansson quotes the input
 * near the error, which may be anything, so only its ASCII is kept. */
static int parse_fail(struct request_error *err, const json_error_t *jerr)
{
    char text[JSON_ERROR_TEXT_LENGTH];
    size_t i;

    switch (json_error_code(jerr)) {
    case json_error_out_of_memory:
        return fail(err, WIRE_EINTERNAL, "out of memory");
    case json_error_invalid_utf8:
        return fail(err, WIRE_EPROTO, "request is not valid UTF-8 (byte %d)", jerr->position);
    case json_error_null_character:
    case json_error_null_byte_in_key:
        return fail(err, WIRE_EPROTO, "request contains \\u0000");
    default:
        break;
    }
    for (i = 0; i < sizeof(text) - 1 && jerr->text[i] != '\0'; i++) {
        unsigned char c = (unsigned char)jerr->text[i];
        text[i] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    }
    text[i] = '\0';
    return fail(err, WIRE_EPROTO, "invalid JSON: %s", text);
}

/* The checks on a parsed line's tree that do not depend on its payloads. */
static int check_root(struct request *req, struct request_error *err)
{
    json_t *op, *ref;

    if (!json_is_object(req->root))
        return fail(err, WIRE_EPROTO, "request must be a JSON object");
    ref = json_object_get(req->root, "ref");
    if (ref != NULL) {
        if (json_is_object(ref) || json_is_array(ref))
            return fail(err, WIRE_EPROTO, "\"ref\" must be a string, number, boolean or null");
        req->ref = ref;
    }
    op = json_object_get(req->root, "op");
    if (op == NULL)
        return fail(err, WIRE_EPROTO, "request has no \"op\"");
    if (!json_is_string(op))
        return fail(err, WIRE_EPROTO, "\"op\" must be a string");
    req->op = json_string_value(op);
    req->op_len = json_string_length(op);
    return 0;
}

/* jansson's parse of a line that is not too deep. */
static int parse_plain(struct request *req, const char *line, size_t len, struct request_error *err)
{
    json_error_t jerr;

    memset(req, 0, sizeof(*req));
    /* No JSON_DISABLE_EOF_CHECK: bytes after the value are an error. */
    req->root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (req->root == NULL)
        return parse_fail(err, &jerr);
    return check_root(req, err);
}

int request_parse_plain(struct request *req, const char *line, size_t len,
                        struct request_error *err)
{
    memset(req, 0, sizeof(*req));
    if (too_deep(line, len))
        return fail(err, WIRE_EPROTO, "request nests deeper than %d levels", REQUEST_DEPTH_MAX);
    return parse_plain(req, line, len, err);
}

/* parse_fast's answer when the line is to be parsed the plain way. */
#define PARSE_PLAIN (-1)

/* The payload marker: the payload's text behind a NUL byte. No string
 * from the wire starts with NUL ("\u0000" is refused), so the marker
 * cannot be mistaken for a payload that is a string. */
static json_t *payload_marker(const char *text, size_t len, char **scratch, size_t *cap)
{
    if (len + 1 > *cap) {
        char *p = realloc(*scratch, len + 1);
        if (p == NULL)
            return NULL;
        *scratch = p;
        *cap = len + 1;
    }
    (*scratch)[0] = '\0';
    memcpy(*scratch + 1, text, len);
    /* The text was checked as UTF-8 by the scanner. */
    return json_stringn_nocheck(*scratch, len + 1);
}

/* Put each span's marker where the placeholder parsed. False when a
 * placeholder is not where the scanner said (then the line is parsed
 * again the plain way) or out of memory. */
static bool put_markers(json_t *root, const char *line, const struct scan *sc)
{
    json_t *jobs = json_object_get(root, "jobs");
    char *scratch = NULL;
    size_t cap = 0;
    bool ok = true;

    for (size_t i = 0; i < sc->n && ok; i++) {
        const struct scan_span *sp = &sc->spans[i];
        json_t *obj = sp->item == SCAN_TOP ? root : json_array_get(jobs, sp->item);
        json_t *old = json_object_get(obj, "payload");
        json_t *m;
        ok = json_is_integer(old) && json_integer_value(old) == 0 &&
             (m = payload_marker(line + sp->off, sp->len, &scratch, &cap)) != NULL &&
             json_object_set_new(obj, "payload", m) == 0;
    }
    free(scratch);
    return ok;
}

/* The line with each span replaced by the placeholder 0, so jansson
 * parses everything but the payloads the scanner already validated. NULL
 * when out of memory. */
static char *placeholder_line(const char *line, size_t len, const struct scan *sc, size_t *out)
{
    char *m = malloc(len + 1);
    size_t at = 0, n = 0;

    if (m == NULL)
        return NULL;
    for (size_t i = 0; i < sc->n; i++) {
        memcpy(m + n, line + at, sc->spans[i].off - at);
        n += sc->spans[i].off - at;
        m[n++] = '0';
        at = sc->spans[i].off + sc->spans[i].len;
    }
    memcpy(m + n, line + at, len - at);
    *out = n + len - at;
    return m;
}

/* The fast path: parse the line with its canonical payloads replaced, then
 * put the payloads back as markers. A valid value in place of a valid
 * value keeps a line valid or invalid alike, and the scanner validated the
 * payloads as jansson would, so the result is request_parse_plain's; when
 * jansson refuses the placeholder line, the plain parse gives the error
 * (its message may quote bytes that the placeholder moved). Returns
 * PARSE_PLAIN when the caller should parse the plain way. */
static int parse_fast(struct request *req, const char *line, size_t len, const struct scan *sc,
                      struct request_error *err)
{
    json_error_t jerr;
    size_t mlen;
    char *m = placeholder_line(line, len, sc, &mlen);

    if (m == NULL)
        return PARSE_PLAIN;
    req->root = json_loadb(m, mlen, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    free(m);
    if (req->root == NULL || !put_markers(req->root, line, sc)) {
        json_decref(req->root);
        req->root = NULL;
        return PARSE_PLAIN;
    }
    return check_root(req, err);
}

/* The tree of a flat request: a line that scan_canonical accepts with room
 * for one level only, so an object of strings, integers, true, false and
 * null in compact form. Most requests on the hot path look like this
 * (complete, extend, claim, stream...): building the tree straight from
 * the text skips jansson's lexer, which was a fifth of emqd's instructions
 * end to end. The text is known valid: strings hold no escape (their
 * bytes are their value, UTF-8 checked), keys are unique, integers are
 * canonical and fit in 64 bits; json_loadb would build the same tree, keys
 * in the same order. NULL when out of memory. */
static json_t *flat_tree(const char *s, size_t len)
{
    json_t *obj = json_object();
    size_t i = 1;

    while (obj != NULL && i < len && s[i] == '"') {
        const char *key = s + i + 1;
        const char *kend = memchr(key, '"', len - i - 1);
        json_t *v;

        i = (size_t)(kend - s) + 2; /* past the closing quote and the colon */
        if (s[i] == '"') {
            const char *vs = s + i + 1, *ve = memchr(vs, '"', len - i - 1);
            v = json_stringn_nocheck(vs, (size_t)(ve - vs));
            i = (size_t)(ve - s) + 1;
        } else if (s[i] == 't' || s[i] == 'n') {
            v = s[i] == 't' ? json_true() : json_null();
            i += 4;
        } else if (s[i] == 'f') {
            v = json_false();
            i += 5;
        } else {
            /* Digits, then ',' or '}' before the end: strtoll stops there. */
            char *end;
            v = json_integer(strtoll(s + i, &end, 10));
            i = (size_t)(end - s);
        }
        if (v == NULL || json_object_setn_new_nocheck(obj, key, (size_t)(kend - key), v) != 0) {
            json_decref(obj);
            return NULL;
        }
        i += s[i] == ','; /* else the closing brace: the loop ends */
    }
    return obj;
}

int request_parse(struct request *req, const char *line, size_t len, struct request_error *err)
{
    struct scan sc = {NULL, 0, 0};
    int rc = PARSE_PLAIN;

    memset(req, 0, sizeof(*req));
    if (len > 0 && line[0] == '{' && scan_canonical(line, len, 1)) {
        req->root = flat_tree(line, len);
        if (req->root != NULL)
            return check_root(req, err);
        /* out of memory: the plain parse says so */
    }
    if (too_deep(line, len))
        return fail(err, WIRE_EPROTO, "request nests deeper than %d levels", REQUEST_DEPTH_MAX);
    if (scan_request(&sc, line, len) == 0 && sc.n > 0)
        rc = parse_fast(req, line, len, &sc, err);
    scan_deinit(&sc);
    return rc == PARSE_PLAIN ? parse_plain(req, line, len, err) : rc;
}

const char *request_payload_text(const json_t *v, size_t *len)
{
    const char *s = json_string_value(v);

    if (s == NULL || json_string_length(v) == 0 || s[0] != '\0')
        return NULL;
    *len = json_string_length(v) - 1;
    return s + 1;
}

void request_deinit(struct request *req)
{
    json_decref(req->root);
    memset(req, 0, sizeof(*req));
}

/* Describe an integer range for a message. */
static void describe_int(char *buf, size_t size, json_int_t min, json_int_t max)
{
    if (min == ARG_INT_MIN && max == ARG_INT_MAX)
        snprintf(buf, size, "an integer");
    else if (max == ARG_INT_MAX)
        snprintf(buf, size, "an integer of at least %" JSON_INTEGER_FORMAT, min);
    else if (min == ARG_INT_MIN)
        snprintf(buf, size, "an integer of at most %" JSON_INTEGER_FORMAT, max);
    else
        snprintf(buf, size, "an integer from %" JSON_INTEGER_FORMAT " to %" JSON_INTEGER_FORMAT,
                 min, max);
}

/* Describe a size range ("a string of 1 to 64 bytes") for a message. */
static void describe_size(char *buf, size_t size, const char *what, const struct arg_spec *a,
                          const char *unit)
{
    if (a->max <= 0)
        snprintf(buf, size, "%s", what);
    else if (a->min <= 0)
        snprintf(buf, size, "%s of at most %" JSON_INTEGER_FORMAT " %s", what, a->max, unit);
    else
        snprintf(buf, size, "%s of %" JSON_INTEGER_FORMAT " to %" JSON_INTEGER_FORMAT " %s", what,
                 a->min, a->max, unit);
}

/* The argument a does not have its type or bounds: say what it must be. */
static int must(const struct arg_spec *a, struct request_error *err)
{
    char what[96];

    switch (a->type) {
    case ARG_STRING:
        describe_size(what, sizeof(what), "a string", a, "bytes");
        break;
    case ARG_INT:
        describe_int(what, sizeof(what), a->min, a->max);
        break;
    case ARG_INT_OR_NULL:
        memcpy(what, "null or ", 8);
        describe_int(what + 8, sizeof(what) - 8, a->min, a->max);
        break;
    case ARG_BOOL:
        snprintf(what, sizeof(what), "true or false");
        break;
    case ARG_ARRAY:
        describe_size(what, sizeof(what), "an array", a, "items");
        break;
    case ARG_OBJECT:
        snprintf(what, sizeof(what), "an object");
        break;
    default:
        snprintf(what, sizeof(what), "a JSON value");
        break;
    }
    return fail(err, WIRE_EARG, "argument \"%s\" must be %s", a->name, what);
}

/* Apply the id rules of a string argument. */
static int check_id(const struct arg_spec *a, const char *s, size_t len, struct request_error *err)
{
    if ((a->flags & ARG_QUEUE) && !brand_queue_valid(s, len))
        return fail(err, WIRE_EQUEUE,
                    "argument \"%s\" is not a queue name (1-64 of A-Z a-z 0-9 _ . -)", a->name);
    if ((a->flags & ARG_GROUP) && !brand_group_valid(s, len))
        return fail(err, WIRE_EBRAND,
                    "argument \"%s\" is not a group id (3 letters A-Z, then 1-64 of A-Z a-z 0-9 "
                    "_ -)",
                    a->name);
    if ((a->flags & ARG_JOB) && !brand_job_kind(s, len))
        return fail(err, WIRE_EKIND, "argument \"%s\" is not a job id: it must start with JOB",
                    a->name);
    if ((a->flags & ARG_JOB) && !brand_job_valid(s, len))
        return fail(err, WIRE_EARG,
                    "argument \"%s\" is a malformed job id (JOB, then 1-64 of A-Z a-z 0-9 _ -)",
                    a->name);
    return 0;
}

/* True when n lies in the bounds min..max, which apply only when max > 0. */
static bool size_ok(const struct arg_spec *a, size_t n)
{
    return a->max <= 0 || ((json_int_t)n >= a->min && (json_int_t)n <= a->max);
}

static int check_value(const struct arg_spec *a, const json_t *v, struct request_error *err)
{
    json_int_t n;

    switch (a->type) {
    case ARG_STRING:
        if (!json_is_string(v) || !size_ok(a, json_string_length(v)))
            return must(a, err);
        return check_id(a, json_string_value(v), json_string_length(v), err);
    case ARG_INT_OR_NULL:
        if (json_is_null(v))
            return 0;
        /* fall through */
    case ARG_INT:
        if (!json_is_integer(v))
            return must(a, err);
        n = json_integer_value(v);
        return n < a->min || n > a->max ? must(a, err) : 0;
    case ARG_BOOL:
        return json_is_boolean(v) ? 0 : must(a, err);
    case ARG_ARRAY:
        if (!json_is_array(v))
            return must(a, err);
        if (json_array_size(v) == 0 && a->min > 0)
            return fail(err, WIRE_EEMPTY, "argument \"%s\" must not be empty", a->name);
        return size_ok(a, json_array_size(v)) ? 0 : must(a, err);
    case ARG_OBJECT:
        return json_is_object(v) ? 0 : must(a, err);
    case ARG_ANY:
        return 0;
    default:
        return fail(err, WIRE_EINTERNAL, "argument \"%s\" has no known type", a->name);
    }
}

static const struct arg_spec *spec_find(const struct arg_spec *spec, const char *name)
{
    for (; spec->name != NULL; spec++)
        if (strcmp(spec->name, name) == 0)
            return spec;
    return NULL;
}

/* Check obj against spec; the request itself may also carry "op" and "ref". */
static int check_object(const struct arg_spec *spec, const json_t *obj, bool top,
                        struct request_error *err)
{
    for (void *it = json_object_iter((json_t *)obj); it != NULL;
         it = json_object_iter_next((json_t *)obj, it)) {
        const char *key = json_object_iter_key(it);
        char shown[REQUEST_NAME_SHOWN + 1];

        if (top && (strcmp(key, "op") == 0 || strcmp(key, "ref") == 0))
            continue;
        if (spec_find(spec, key) != NULL)
            continue;
        shown_name(shown, key);
        return fail(err, WIRE_EARG, "unknown argument \"%s\"", shown);
    }
    for (const struct arg_spec *a = spec; a->name != NULL; a++) {
        const json_t *v = json_object_get(obj, a->name);
        int rc;

        if (v == NULL) {
            if (a->flags & ARG_REQUIRED)
                return fail(err, WIRE_EARG, "missing argument \"%s\"", a->name);
            continue;
        }
        rc = check_value(a, v, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int request_check(const struct arg_spec *spec, const json_t *req, struct request_error *err)
{
    if (!json_is_object(req))
        return fail(err, WIRE_EPROTO, "request must be a JSON object");
    return check_object(spec, req, true, err);
}

int request_check_item(const struct arg_spec *spec, const json_t *item, struct request_error *err)
{
    if (!json_is_object(item))
        return fail(err, WIRE_EARG, "item must be an object");
    return check_object(spec, item, false, err);
}

bool request_spec_valid(const struct arg_spec *spec)
{
    for (const struct arg_spec *a = spec; a->name != NULL; a++) {
        unsigned ids = a->flags & ARG_ID_FLAGS;
        if (a->name[0] == '\0' || strcmp(a->name, "op") == 0 || strcmp(a->name, "ref") == 0)
            return false;
        if (strlen(a->name) > REQUEST_NAME_SHOWN)
            return false;
        if (spec_find(a + 1, a->name) != NULL)
            return false;
        if ((unsigned)a->type >= ARG__END || (a->flags & ~(unsigned)ARG_FLAGS) != 0)
            return false;
        if (ids != 0 && (a->type != ARG_STRING || (ids & (ids - 1)) != 0))
            return false;
        if ((a->type == ARG_INT || a->type == ARG_INT_OR_NULL) && a->min > a->max)
            return false;
        if ((a->type == ARG_STRING || a->type == ARG_ARRAY) && a->max > 0 &&
            (a->min < 0 || a->min > a->max))
            return false;
    }
    return true;
}

const char *request_string(const json_t *obj, const char *name, size_t *len)
{
    const json_t *v = json_object_get(obj, name);

    if (!json_is_string(v))
        return NULL;
    if (len != NULL)
        *len = json_string_length(v);
    return json_string_value(v);
}

json_int_t request_int(const json_t *obj, const char *name, json_int_t dflt)
{
    const json_t *v = json_object_get(obj, name);

    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

bool request_bool(const json_t *obj, const char *name, bool dflt)
{
    const json_t *v = json_object_get(obj, name);

    return json_is_boolean(v) ? json_is_true(v) : dflt;
}
