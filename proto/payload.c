/* payload: the text an enqueue stores for a job's payload. */
#include "payload.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text an enqueue stores is the payload re-encoded compactly, byte for
 * byte as json_dumps(JSON_COMPACT | JSON_ENCODE_ANY) writes it. jansson's
 * encoder decodes every string one code point at a time and keeps a
 * loop-check table per container: under callgrind it was a fifth of emqd's
 * instructions per 1 KiB enqueue. This walks the parsed value once and
 * copies runs of plain bytes; reals, rare, are left to jansson for its
 * exact number format. tests/unit/test_payload.c compares the two. */

/* One string, escaped as jansson escapes it (named escapes for \b \f \n \r
 * \t, upper-case \u00XX for other control bytes, nothing else). A parsed
 * request holds only valid UTF-8, so bytes >= 0x80 are copied as they are. */
static int payload_string(struct outbuf *out, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    int rc = outbuf_append(out, "\"", 1);
    while (rc == 0) {
        /* The common case, a run of bytes that need nothing, in a tight loop. */
        while (i < len && u[i] >= 0x20 && u[i] != '"' && u[i] != '\\')
            i++;
        rc = outbuf_append(out, s + run, i - run);
        if (i == len || rc != 0)
            break;
        /* jansson's names for \b \t \n \f \r; other control bytes as \u00XX */
        static const char named[0x20] = {
            ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r'};
        char esc[6] = {'\\', (char)u[i], '0', '0', 0, 0};
        size_t n = 2;
        if (u[i] < 0x20 && named[u[i]] != 0) {
            esc[1] = named[u[i]];
        } else if (u[i] < 0x20) {
            esc[1] = 'u';
            esc[4] = hex[u[i] >> 4];
            esc[5] = hex[u[i] & 15];
            n = 6;
        }
        rc = outbuf_append(out, esc, n);
        run = ++i;
    }
    return rc == 0 ? outbuf_append(out, "\"", 1) : rc;
}

static int payload_members(struct outbuf *out, const json_t *v)
{
    int rc = 0;
    bool first = true;
    for (void *it = json_object_iter((json_t *)v); it != NULL && rc == 0;
         it = json_object_iter_next((json_t *)v, it), first = false) {
        if (!first)
            rc = outbuf_append(out, ",", 1);
        if (rc == 0)
            rc = payload_string(out, json_object_iter_key(it), json_object_iter_key_len(it));
        if (rc == 0)
            rc = outbuf_append(out, ":", 1);
        if (rc == 0)
            rc = payload_text(out, json_object_iter_value(it));
    }
    return rc;
}

int payload_text(struct outbuf *out, const json_t *v)
{
    char num[32];
    int rc = 0;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        rc = outbuf_append(out, "{", 1);
        if (rc == 0)
            rc = payload_members(out, v);
        return rc == 0 ? outbuf_append(out, "}", 1) : rc;
    case JSON_ARRAY:
        rc = outbuf_append(out, "[", 1);
        for (size_t i = 0; i < json_array_size(v) && rc == 0; i++) {
            if (i > 0)
                rc = outbuf_append(out, ",", 1);
            if (rc == 0)
                rc = payload_text(out, json_array_get(v, i));
        }
        return rc == 0 ? outbuf_append(out, "]", 1) : rc;
    case JSON_STRING:
        return payload_string(out, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return outbuf_append(out, num, strlen(num));
    case JSON_TRUE:
        return outbuf_append(out, "true", 4);
    case JSON_FALSE:
        return outbuf_append(out, "false", 5);
    case JSON_NULL:
        return outbuf_append(out, "null", 4);
    default: { /* a real: jansson's own number format, exactly */
        char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        rc = text != NULL ? outbuf_append(out, text, strlen(text)) : -ENOMEM;
        free(text);
        return rc;
    }
    }
}
