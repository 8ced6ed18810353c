/* scan: a one-pass look over an enqueue line for payloads that need no
 * parse. jansson builds a tree of every payload only for the daemon to
 * write it back out compactly; a payload that is already in that compact
 * form (no whitespace, no escapes, integers only, no duplicate keys) can
 * be stored as the bytes received. The scanner finds such payloads and
 * nothing else: whatever it is unsure of it leaves to jansson. */
#ifndef EMQ_SCAN_H
#define EMQ_SCAN_H

#include <stdbool.h>
#include <stddef.h>

/* Where a payload sits: the top-level "payload" of an enqueue. */
#define SCAN_TOP ((size_t)-1)

/* One payload found in canonical form: its bytes in the line, and the
 * enqueue_many item it belongs to (SCAN_TOP for an enqueue). */
struct scan_span {
    size_t off, len;
    size_t item;
};

/* The payloads of one line. spans is owned (scan_deinit frees it). */
struct scan {
    struct scan_span *spans;
    size_t n, cap;
};

/* Look at one request line. Returns 0 with s->n spans (maybe none), or
 * -ENOMEM. A span is recorded only when the line is, as far as the
 * scanner can tell, a JSON object whose "op" is "enqueue" (then its
 * "payload") or "enqueue_many" (then each "jobs" item's "payload"), and
 * the payload is scan_canonical(). The rest of the line is only lexed, not
 * validated: the caller must still parse it (request_parse does, with the
 * payloads replaced by a placeholder) and use no span unless that parse
 * succeeds. */
int scan_request(struct scan *s, const char *line, size_t len);

/* Forget the spans. */
void scan_deinit(struct scan *s);

/* True when text (len bytes) is one JSON value that a request parse would
 * accept (valid UTF-8, no "\u0000", no duplicate keys, integers in the
 * signed 64-bit range, at most depth_room levels of arrays and objects)
 * and that payload_text would write back as exactly these bytes:
 * no whitespace, no backslash, no reals, no "-0". False means unsure, not
 * invalid. */
bool scan_canonical(const char *text, size_t len, int depth_room);

#endif
