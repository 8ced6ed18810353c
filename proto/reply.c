/* reply: the line encoder (see reply.h). */
#include "reply.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A buffer's first allocation. Small enough for the allocator's per-thread
 * cache (glibc's tcache takes up to 1 KiB): most reply lines are a few
 * dozen bytes, each in a buffer of its own (req.c), and a 4 KiB block cost
 * ~3,000 instructions to allocate and free where a cached one costs ~50. */
#define OUTBUF_CAP_MIN ((size_t)512)

void outbuf_init(struct outbuf *out)
{
    memset(out, 0, sizeof(*out));
}

void outbuf_deinit(struct outbuf *out)
{
    free(out->data);
    memset(out, 0, sizeof(*out));
}

int outbuf_reserve(struct outbuf *out, size_t n)
{
    size_t cap;
    char *data;

    if (n <= out->cap - out->len)
        return 0;
    if (n > SIZE_MAX / 2 - out->len)
        return -ENOMEM;
    cap = out->cap ? out->cap : OUTBUF_CAP_MIN;
    while (cap - out->len < n)
        cap *= 2;
    data = realloc(out->data, cap);
    if (data == NULL)
        return -ENOMEM;
    out->data = data;
    out->cap = cap;
    return 0;
}

int outbuf_append(struct outbuf *out, const void *data, size_t n)
{
    int err = outbuf_reserve(out, n);

    if (err < 0)
        return err;
    memcpy(out->data + out->len, data, n);
    out->len += n;
    return 0;
}

void outbuf_reset(struct outbuf *out)
{
    out->len = out->line = 0;
    out->err = 0;
}

/* Append within a line being built: a no-op once the line has failed. */
static int put(struct outbuf *out, const void *data, size_t n)
{
    if (out->err == 0)
        out->err = outbuf_append(out, data, n);
    return out->err;
}

#define PUT_LITERAL(out, s) put(out, s, sizeof(s) - 1)

/* The comma before a key or an array element: needed unless the value
 * opens the line or follows {, [ or a key's colon. */
static int sep(struct outbuf *out)
{
    char last;

    if (out->len == out->line)
        return out->err;
    last = out->data[out->len - 1];
    if (last == '{' || last == '[' || last == ':')
        return out->err;
    return put(out, ",", 1);
}

/* Length of the valid UTF-8 sequence at s (left bytes), 0 when invalid:
 * no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t left)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;

    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (s[0] == 0xe0)
        lo = 0xa0;
    else if (s[0] == 0xed)
        hi = 0x9f;
    else if (s[0] == 0xf0)
        lo = 0x90;
    else if (s[0] == 0xf4)
        hi = 0x8f;
    if (left < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return n;
}

/* How many bytes at the start of s a JSON string holds as they are. */
static size_t plain_prefix(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\')
        i++;
    return i;
}

/* "s", and a ':' after it for a key, of bytes that need no escape: one
 * reservation and copy (most strings of a reply: ids, keys, states). */
static int put_plain(struct outbuf *out, const char *s, size_t len, bool colon)
{
    if (out->err == 0 && (out->err = outbuf_reserve(out, len + 3)) == 0) {
        char *d = out->data + out->len;
        d[0] = '"';
        memcpy(d + 1, s, len);
        d[len + 1] = '"';
        d[len + 2] = ':';
        out->len += len + 2 + (colon ? 1 : 0);
    }
    return out->err;
}

/* A JSON string: runs of plain bytes copied at once, the rest escaped. */
static int put_string(struct outbuf *out, const char *str, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)str;
    size_t i = plain_prefix(s, len), run = 0;

    if (i == len)
        return put_plain(out, str, len, false);
    put(out, "\"", 1);
    while (i < len) {
        unsigned char c = s[i];
        char esc[6] = {'\\', 0};
        size_t esc_len = 2, n;

        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80 && (n = utf8_seq(s + i, len - i)) != 0) {
            i += n;
            continue;
        }
        put(out, s + run, i - run);
        switch (c) {
        case '"':
        case '\\':
            esc[1] = (char)c;
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            if (c >= 0x80) {
                memcpy(esc, "\\ufffd", 6); /* an invalid UTF-8 byte */
            } else {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 0xf];
            }
            esc_len = 6;
            break;
        }
        put(out, esc, esc_len);
        run = ++i;
    }
    put(out, s + run, len - run);
    return put(out, "\"", 1);
}

static int put_key(struct outbuf *out, const char *key)
{
    size_t len = strlen(key);
    sep(out);
    if (plain_prefix((const unsigned char *)key, len) == len)
        return put_plain(out, key, len, true);
    put_string(out, key, len);
    return put(out, ":", 1);
}

static int dump_cb(const char *buf, size_t size, void *data)
{
    return put(data, buf, size) == 0 ? 0 : -1;
}

/* A jansson value, compact. A failure that is not ours is -EINVAL. */
static int put_value(struct outbuf *out, const json_t *v)
{
    if (out->err != 0)
        return out->err;
    if (json_dump_callback(v, dump_cb, out, JSON_COMPACT | JSON_ENCODE_ANY) != 0 && out->err == 0)
        out->err = -EINVAL;
    return out->err;
}

/* Start a line. The line before it is complete, so its failure is gone. */
static void begin(struct outbuf *out)
{
    out->line = out->len;
    out->err = 0;
    put(out, "{", 1);
}

static int begin_reply(struct outbuf *out, const json_t *ref, bool ok)
{
    begin(out);
    if (ref != NULL) {
        PUT_LITERAL(out, "\"ref\":");
        put_value(out, ref);
        put(out, ",", 1);
    }
    return ok ? PUT_LITERAL(out, "\"ok\":true") : PUT_LITERAL(out, "\"ok\":false");
}

int reply_begin_ok(struct outbuf *out, const json_t *ref)
{
    return begin_reply(out, ref, true);
}

int reply_begin_push(struct outbuf *out, const char *kind)
{
    begin(out);
    PUT_LITERAL(out, "\"push\":");
    return put_string(out, kind, strlen(kind));
}

int reply_end(struct outbuf *out)
{
    int err;

    PUT_LITERAL(out, "}\n");
    err = out->err;
    if (err != 0)
        out->len = out->line;
    out->line = out->len;
    out->err = 0;
    return err;
}

int reply_key(struct outbuf *out, const char *key)
{
    return put_key(out, key);
}

int reply_string(struct outbuf *out, const char *s, size_t len)
{
    sep(out);
    return put_string(out, s, len);
}

int reply_int(struct outbuf *out, long long v)
{
    char buf[24];
    char *p = buf + sizeof(buf);
    /* Negate in unsigned arithmetic, so LLONG_MIN is no overflow. */
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;

    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        *--p = '-';
    sep(out);
    return put(out, p, (size_t)(buf + sizeof(buf) - p));
}

int reply_bool(struct outbuf *out, bool v)
{
    sep(out);
    return v ? PUT_LITERAL(out, "true") : PUT_LITERAL(out, "false");
}

int reply_value(struct outbuf *out, const json_t *v)
{
    sep(out);
    return put_value(out, v);
}

int reply_raw(struct outbuf *out, const char *json, size_t len)
{
    /* Compact JSON has no raw newline; one here would split the frame. */
    if (out->err == 0 && (len == 0 || memchr(json, '\n', len) != NULL))
        out->err = -EINVAL;
    sep(out);
    return put(out, json, len);
}

int reply_begin_object(struct outbuf *out)
{
    sep(out);
    return put(out, "{", 1);
}

int reply_end_object(struct outbuf *out)
{
    return put(out, "}", 1);
}

int reply_begin_array(struct outbuf *out)
{
    sep(out);
    return put(out, "[", 1);
}

int reply_end_array(struct outbuf *out)
{
    return put(out, "]", 1);
}

/* The fields of a leased job, after whatever the line already holds. */
static int put_job_fields(struct outbuf *out, const struct reply_job *job)
{
    if (job->queue != NULL) {
        put_key(out, "queue");
        put_string(out, job->queue, job->queue_len);
    }
    put_key(out, "job");
    put_string(out, job->id, job->id_len);
    /* An ungrouped job says so with null, as claim replies do. */
    put_key(out, "group");
    if (job->group != NULL)
        put_string(out, job->group, job->group_len);
    else
        put(out, "null", 4);
    put_key(out, "lease");
    put_string(out, job->lease, job->lease_len);
    put_key(out, "attempt");
    reply_int(out, job->attempt);
    put_key(out, "lease_until");
    reply_int(out, job->deadline);
    put_key(out, "payload");
    return reply_raw(out, job->payload, job->payload_len);
}

int reply_job(struct outbuf *out, const struct reply_job *job)
{
    reply_begin_object(out);
    put_job_fields(out, job);
    return reply_end_object(out);
}

int reply_push_job(struct outbuf *out, const struct reply_job *job)
{
    reply_begin_push(out, "job");
    put_job_fields(out, job);
    return reply_end(out);
}

/* Splice the members of fields into the open line: encode the object, then
 * turn its '{' into a comma and drop its '}'. */
static int put_fields(struct outbuf *out, const json_t *fields)
{
    size_t at = out->len;

    if (fields == NULL || put_value(out, fields) != 0)
        return out->err;
    if (out->len - at == 2) {
        out->len = at; /* {} */
    } else {
        out->data[at] = ',';
        out->len--;
    }
    return 0;
}

/* Fields must be an object without the keys the frame sets itself. */
static bool fields_ok(const json_t *fields, const char *own)
{
    return fields == NULL || (json_is_object(fields) && json_object_get(fields, own) == NULL &&
                              json_object_get(fields, "ref") == NULL);
}

int reply_ok(struct outbuf *out, const json_t *ref, const json_t *fields)
{
    if (!fields_ok(fields, "ok"))
        return -EINVAL;
    begin_reply(out, ref, true);
    put_fields(out, fields);
    return reply_end(out);
}

int reply_error(struct outbuf *out, const json_t *ref, enum wire_error code, const char *message)
{
    return reply_error_fields(out, ref, code, message, NULL);
}

int reply_error_fields(struct outbuf *out, const json_t *ref, enum wire_error code,
                       const char *message, const json_t *fields)
{
    const char *name = wire_error_name(code);
    if (!fields_ok(fields, "ok") ||
        (fields != NULL &&
         (json_object_get(fields, "error") != NULL || json_object_get(fields, "message") != NULL)))
        return -EINVAL;

    if (name == NULL) {
        code = WIRE_EINTERNAL;
        name = wire_error_name(code);
    }
    if (message == NULL)
        message = wire_error_summary(code);
    begin_reply(out, ref, false);
    put_key(out, "error");
    put_string(out, name, strlen(name));
    put_key(out, "message");
    put_string(out, message, strlen(message));
    put_fields(out, fields);
    return reply_end(out);
}

int reply_push(struct outbuf *out, const char *kind, const json_t *fields)
{
    if (!fields_ok(fields, "push"))
        return -EINVAL;
    reply_begin_push(out, kind);
    put_fields(out, fields);
    return reply_end(out);
}
