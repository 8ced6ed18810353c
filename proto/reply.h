/* reply: reply and push lines, encoded into the caller's output buffer.
 * Every line is one compact JSON object and a "\n". Keys come in a fixed
 * order: "ref" first (only when the request had one), then "ok" or "push",
 * then the fields. Strings are escaped here and always come out as valid
 * UTF-8 (an invalid byte becomes U+FFFD), so no reply can break a client's
 * parser. The hot path, a leased job, is written field by field with its
 * payload spliced in as the JSON text stored in Redis, never re-parsed. */
#ifndef EMQ_REPLY_H
#define EMQ_REPLY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

/* An append-only buffer of reply lines, owned by the caller (the daemon
 * hands data/len to uv_write). err and line belong to the builder below. */
struct outbuf {
    char *data;
    size_t len;
    size_t cap;
    size_t line; /* where the line being built started */
    int err;     /* first failure while building it, 0 if none */
};

void outbuf_init(struct outbuf *out);
void outbuf_deinit(struct outbuf *out);

/* Make room for n more bytes. Returns 0 or -ENOMEM. */
int outbuf_reserve(struct outbuf *out, size_t n);

/* Append n bytes. Returns 0 or -ENOMEM. */
int outbuf_append(struct outbuf *out, const void *data, size_t n);

/* Forget the contents (after they were written), keeping the memory. */
void outbuf_reset(struct outbuf *out);

/* Whole lines. Each returns 0, -ENOMEM, or -EINVAL (fields not an object
 * or holding a key the frame sets itself); on failure nothing is left in
 * out. ref is the request's "ref" (NULL: none); fields may be NULL. */

/* {"ref":…,"ok":true,…fields}\n */
int reply_ok(struct outbuf *out, const json_t *ref, const json_t *fields);

/* {"ref":…,"ok":false,"error":"ELEASE","message":"…"}\n. A NULL message
 * is the code's summary; an invalid code is sent as EINTERNAL. */
int reply_error(struct outbuf *out, const json_t *ref, enum wire_error code, const char *message);
/* reply_error with fields after the message (an enqueue's "job"); fields
 * may be NULL, and must not set "ok", "error", "message" or "ref". */
int reply_error_fields(struct outbuf *out, const json_t *ref, enum wire_error code,
                       const char *message, const json_t *fields);

/* {"push":"<kind>",…fields}\n */
int reply_push(struct outbuf *out, const char *kind, const json_t *fields);

/* A leased job, as Redis returned it. Strings are not NUL-terminated;
 * payload is the stored JSON text, spliced in unchanged. */
struct reply_job {
    const char *queue; /* NULL: left out */
    size_t queue_len;
    const char *id;
    size_t id_len;
    const char *group; /* NULL: an ungrouped job, left out */
    size_t group_len;
    const char *lease; /* the fencing token complete / fail / extend need */
    size_t lease_len;
    long long attempt;
    long long deadline; /* lease deadline, ms on the Redis clock */
    const char *payload;
    size_t payload_len;
};

/* {"push":"job","queue":…,"id":…,"group":…,"lease":…,"attempt":…,
 * "deadline":…,"payload":<raw>}\n. Returns as reply_ok(); -EINVAL also
 * when the payload is empty or holds a newline (it cannot be compact JSON). */
int reply_push_job(struct outbuf *out, const struct reply_job *job);

/* The builder, for lines assembled piece by piece (a claim reply with an
 * array of jobs). Open a line with reply_begin_ok() or reply_begin_push(),
 * add keys and values (commas are placed automatically: a value follows a
 * key or is an array element), end it with reply_end(). Failures are
 * sticky: the pieces return 0 or the first error, and reply_end() returns
 * it and removes the partial line, so only its result must be checked. */

/* Start {"ref":…,"ok":true  (ref NULL: no "ref"). */
int reply_begin_ok(struct outbuf *out, const json_t *ref);

/* Start {"push":"<kind>" */
int reply_begin_push(struct outbuf *out, const char *kind);

/* "key": */
int reply_key(struct outbuf *out, const char *key);

/* A string value, escaped (len bytes, need not be NUL-terminated). */
int reply_string(struct outbuf *out, const char *s, size_t len);

/* An integer value. */
int reply_int(struct outbuf *out, long long v);

/* true or false. */
int reply_bool(struct outbuf *out, bool v);

/* Any jansson value, encoded compactly. */
int reply_value(struct outbuf *out, const json_t *v);

/* JSON text the caller vouches for (one compact value), copied as it is. */
int reply_raw(struct outbuf *out, const char *json, size_t len);

/* { and } of a nested object; [ and ] of an array. */
int reply_begin_object(struct outbuf *out);
int reply_end_object(struct outbuf *out);
int reply_begin_array(struct outbuf *out);
int reply_end_array(struct outbuf *out);

/* The job's object as a value: {"queue":…,…,"payload":<raw>}. */
int reply_job(struct outbuf *out, const struct reply_job *job);

/* End the line: }\n. Returns 0 or the first error of the line (then the
 * partial line is removed). */
int reply_end(struct outbuf *out);

#endif
