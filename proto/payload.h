/* payload: the stored text of a job's payload, the wire's compact JSON.
 * request_parse keeps a payload's bytes when they are already in this form
 * (scan_canonical); otherwise an enqueue writes them from the parsed tree
 * with payload_text. Either way the text is the same for the same value. */
#ifndef EMQ_PAYLOAD_H
#define EMQ_PAYLOAD_H

#include <jansson.h>

#include "reply.h"

/* Append v's compact JSON text to out, byte for byte what
 * json_dumps(JSON_COMPACT | JSON_ENCODE_ANY) writes for a parsed request's
 * value, in one pass. 0 or -ENOMEM. */
int payload_text(struct outbuf *out, const json_t *v);

#endif
