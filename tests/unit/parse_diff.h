/* parse_diff: the differential check of request_parse's fast paths (a
 * flat line's tree built without the lexer, canonical payloads kept as
 * text), shared by tests/unit/test_payload.c and tests/fuzz/fuzz_payload.c.
 * One line is parsed both ways, request_parse and request_parse_plain
 * (jansson alone), and everything the daemon uses of the result must
 * agree: the code and message, the echoed ref, the op, the tree and its
 * top-level key order, and for each payload an enqueue would store, its
 * text (the fast path's kept text, or payload_text of its tree,
 * against payload_text of the plain tree). Header-only: each includer
 * is one program. */
#ifndef EMQ_TEST_PARSE_DIFF_H
#define EMQ_TEST_PARSE_DIFF_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "payload.h"
#include "request.h"

/* What a diff found: the first difference (empty when none) and how many
 * payloads the fast path kept as text. */
struct parse_diff {
    char what[512];
    size_t kept;
};

/* The text an enqueue stores for payload v: kept text or written. */
static char *diff_stored(const json_t *v, size_t *len)
{
    struct outbuf out;
    const char *kept = request_payload_text(v, len);

    outbuf_init(&out);
    if (kept != NULL && outbuf_append(&out, kept, *len) != 0)
        abort();
    if (kept == NULL && payload_text(&out, v) != 0)
        abort();
    *len = out.len;
    if (outbuf_append(&out, "", 1) != 0)
        abort();
    return out.data;
}

/* Compare the payload of object fast_obj with plain_obj's: stored text
 * equal, and the kept text parses back to the plain value. A kept payload
 * is replaced in fast_obj by its parsed value, for the tree comparison. */
static void diff_payload(struct parse_diff *d, json_t *fast_obj, const json_t *plain_obj)
{
    json_t *fv = json_object_get(fast_obj, "payload");
    const json_t *pv = json_object_get(plain_obj, "payload");
    size_t flen, plen, klen;

    if (fv == NULL || pv == NULL)
        return;
    char *f = diff_stored(fv, &flen), *p = diff_stored(pv, &plen);
    if (flen != plen || memcmp(f, p, flen) != 0)
        snprintf(d->what, sizeof(d->what), "stored text differs: %.100s | %.100s", f, p);
    const char *kept = request_payload_text(fv, &klen);
    if (kept != NULL) {
        d->kept++;
        json_error_t jerr;
        json_t *back = json_loadb(kept, klen, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (back == NULL)
            snprintf(d->what, sizeof(d->what), "kept text does not parse: %s", jerr.text);
        else
            json_object_set_new(fast_obj, "payload", back);
    }
    free(f);
    free(p);
}

/* True when objects a and b list their keys in the same order (unknown
 * arguments are reported by the first in that order). */
static bool diff_same_order(const json_t *a, const json_t *b)
{
    void *ia = json_object_iter((json_t *)a), *ib = json_object_iter((json_t *)b);

    for (; ia != NULL && ib != NULL;
         ia = json_object_iter_next((json_t *)a, ia), ib = json_object_iter_next((json_t *)b, ib))
        if (strcmp(json_object_iter_key(ia), json_object_iter_key(ib)) != 0)
            return false;
    return ia == NULL && ib == NULL;
}

/* Compare the two parses of one line (see the top of this file). */
static void parse_diff(struct parse_diff *d, const char *line, size_t len)
{
    struct request fast, plain;
    struct request_error ferr, perr;
    int frc = request_parse(&fast, line, len, &ferr);
    int prc = request_parse_plain(&plain, line, len, &perr);

    memset(d, 0, sizeof(*d));
    if (frc != prc) {
        snprintf(d->what, sizeof(d->what), "code %d, plain %d", frc, prc);
    } else if (frc != 0 && (ferr.code != perr.code || strcmp(ferr.message, perr.message) != 0)) {
        snprintf(d->what, sizeof(d->what), "error \"%.200s\", plain \"%.200s\"", ferr.message,
                 perr.message);
    } else if ((fast.ref == NULL) != (plain.ref == NULL) ||
               (fast.ref != NULL && !json_equal(fast.ref, plain.ref))) {
        snprintf(d->what, sizeof(d->what), "ref differs");
    } else if (frc == 0 &&
               (fast.op_len != plain.op_len || memcmp(fast.op, plain.op, fast.op_len) != 0)) {
        snprintf(d->what, sizeof(d->what), "op differs");
    } else if (frc == 0 && json_is_object(plain.root)) {
        json_t *copy = json_deep_copy(fast.root);
        const json_t *pjobs = json_object_get(plain.root, "jobs");
        json_t *fjobs = json_object_get(copy, "jobs");
        if (copy == NULL)
            abort();
        diff_payload(d, copy, plain.root);
        for (size_t i = 0; i < json_array_size(pjobs); i++)
            if (json_is_object(json_array_get(pjobs, i)))
                diff_payload(d, json_array_get(fjobs, i), json_array_get(pjobs, i));
        if (d->what[0] == '\0' && !json_equal(copy, plain.root))
            snprintf(d->what, sizeof(d->what), "trees differ");
        else if (d->what[0] == '\0' && !diff_same_order(fast.root, plain.root))
            snprintf(d->what, sizeof(d->what), "keys in another order");
        json_decref(copy);
    }
    request_deinit(&fast);
    request_deinit(&plain);
}

#endif
