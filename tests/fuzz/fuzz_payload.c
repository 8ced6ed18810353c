/* fuzz_payload: request_parse's fast paths against jansson alone
 * (tests/unit/parse_diff.h). The first byte says how the rest is used:
 * as a whole line, as the payload of an enqueue, or as the payload of an
 * enqueue_many's second item, so most runs reach the scanner's strict
 * grammar. Property: both parses agree on the code, message, ref, op and
 * tree, and every payload's stored text is the same; and a value
 * scan_canonical accepts parses and is written back as its own bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse_diff.h"
#include "scan.h"
#include "fuzz.h"

static const char *const heads[] = {
    "",
    "{\"op\":\"enqueue\",\"queue\":\"q\",\"payload\":",
    "{\"op\":\"enqueue_many\",\"queue\":\"q\",\"jobs\":[{\"payload\":1},{\"payload\":",
};
static const char *const tails[] = {"", "}", "}]}"};

/* A value scan_canonical accepts is one jansson parses, and
 * payload_text writes it back as the same bytes. */
static void check_canonical(const char *text, size_t len)
{
    if (!scan_canonical(text, len, REQUEST_DEPTH_MAX - 1))
        return;
    json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
    CHECK(v != NULL);
    struct outbuf out;
    outbuf_init(&out);
    CHECK(payload_text(&out, v) == 0);
    CHECK(out.len == len && memcmp(out.data, text, len) == 0);
    outbuf_deinit(&out);
    json_decref(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    unsigned mode = data[0] % 3;
    const char *body = (const char *)data + 1;
    size_t blen = size - 1, hlen = strlen(heads[mode]), tlen = strlen(tails[mode]);
    char *line = malloc(hlen + blen + tlen + 1);
    if (line == NULL)
        return 0;
    memcpy(line, heads[mode], hlen);
    memcpy(line + hlen, body, blen);
    memcpy(line + hlen + blen, tails[mode], tlen);

    struct parse_diff d;
    parse_diff(&d, line, hlen + blen + tlen);
    CHECK(d.what[0] == '\0');
    check_canonical(body, blen);
    free(line);
    return 0;
}
