/* scan: finding payloads already in compact form (see scan.h). Two
 * grammars: a strict one for a payload (canon_*: only what is certainly
 * valid and certainly written back byte for byte) and a loose one for the
 * rest of the line (skip_*: token boundaries only, left for jansson to
 * validate). Either gives up by returning false. */
#include "scan.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

/* Keys compared pairwise for duplicates in one payload object; an object
 * with more is left to jansson, whose hash table does this better. */
#define SCAN_KEYS_MAX 64

/* The depth a payload starts at: inside the request object for enqueue,
 * inside the request, "jobs" and the item for enqueue_many. */
#define ROOM_TOP  (REQUEST_DEPTH_MAX - 1)
#define ROOM_ITEM (REQUEST_DEPTH_MAX - 3)

/* A read position in a line. */
struct cur {
    const unsigned char *s;
    size_t len, i;
};

/* --- shared by both grammars -------------------------------------------- */

/* JSON's whitespace, jansson's too. */
static void skip_ws(struct cur *c)
{
    while (c->i < c->len &&
           (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

/* Past a container's opening byte (and whitespace, when ws): true, and
 * past close, when close follows at once. */
static bool opens_empty(struct cur *c, char close, bool ws)
{
    c->i++;
    if (ws)
        skip_ws(c);
    if (c->i < c->len && c->s[c->i] == close) {
        c->i++;
        return true;
    }
    return false;
}

/* After a member or an item: 1 when close ends the container, 0 when a
 * comma says another follows, -1 for anything else. */
static int next_or_close(struct cur *c, char close, bool ws)
{
    if (ws)
        skip_ws(c);
    if (c->i >= c->len)
        return -1;
    char b = (char)c->s[c->i++];
    if (b == close)
        return 1;
    if (b != ',')
        return -1;
    if (ws)
        skip_ws(c);
    return 0;
}

/* --- the strict grammar: a canonical payload ---------------------------- */

/* One value by the strict grammar (strict) or the loose one; room is how
 * many more levels of arrays and objects the depth limit allows. */
static bool value(struct cur *c, int room, bool strict);

static bool canon_value(struct cur *c, int room)
{
    return value(c, room, true);
}

static bool skip_value(struct cur *c, int room)
{
    return value(c, room, false);
}

static bool cont(unsigned char b)
{
    return (b & 0xc0) == 0x80;
}

/* The length of the UTF-8 sequence at s (n bytes left), 0 when it is not
 * one jansson accepts: no overlong forms, no surrogates, nothing past
 * U+10FFFF. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char b = s[0], lo = 0x80, hi = 0xbf;

    if (b < 0xc2 || b > 0xf4)
        return 0;
    if (b < 0xe0)
        return n >= 2 && cont(s[1]) ? 2 : 0;
    if (b < 0xf0) {
        lo = b == 0xe0 ? 0xa0 : 0x80;
        hi = b == 0xed ? 0x9f : 0xbf;
        return n >= 3 && s[1] >= lo && s[1] <= hi && cont(s[2]) ? 3 : 0;
    }
    lo = b == 0xf0 ? 0x90 : 0x80;
    hi = b == 0xf4 ? 0x8f : 0xbf;
    return n >= 4 && s[1] >= lo && s[1] <= hi && cont(s[2]) && cont(s[3]) ? 4 : 0;
}

/* True when none of the eight bytes at p is a control byte, the quote,
 * the backslash or a byte >= 0x80: all are plain ASCII (plain[] below).
 * Word-at-a-time tests (each exact about whether some byte matches): a high
 * bit; a byte below 0x20; a byte equal to '"' or '\\' (a zero byte after
 * the XOR). */
static bool plain8(const unsigned char *p)
{
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    uint64_t w, q, b;

    memcpy(&w, p, sizeof(w));
    q = w ^ (ones * '"');
    b = w ^ (ones * '\\');
    return ((w | ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b)) & high) == 0;
}

/* A string with no escape and no control byte: what it decodes to is its
 * bytes, and payload_text writes those bytes back unchanged. */
static bool canon_string(struct cur *c)
{
    /* The bytes a string holds as they are: ASCII but control bytes, the
     * quote and the backslash (0x7f included: jansson neither refuses it
     * nor escapes it). */
    static const bool plain[256] = {
        [0x20 ... '"' - 1] = true, ['"' + 1 ... '\\' - 1] = true, ['\\' + 1 ... 0x7f] = true};
    const unsigned char *s = c->s;
    size_t i = c->i + 1;

    for (;;) {
        /* The common case, a run of plain bytes, eight at a time. */
        while (i + 8 <= c->len && plain8(s + i))
            i += 8;
        while (i < c->len && plain[s[i]])
            i++;
        if (i >= c->len)
            return false;
        if (s[i] == '"')
            break;
        if (s[i] < 0x80)
            return false; /* a backslash or a control byte */
        size_t n = utf8_len(s + i, c->len - i);
        if (n == 0)
            return false;
        i += n;
    }
    c->i = i + 1;
    return true;
}

static bool is_digit(unsigned char b)
{
    return b >= '0' && b <= '9';
}

/* An integer written as "%lld" writes it: no leading zero, no "-0", no
 * fraction or exponent (a real is jansson's to format), within int64. */
static bool canon_number(struct cur *c)
{
    const unsigned char *s = c->s;
    size_t i = c->i, start;
    bool neg = s[i] == '-';

    if (neg)
        i++;
    start = i;
    while (i < c->len && is_digit(s[i]))
        i++;
    size_t digits = i - start;
    if (digits == 0 || digits > 19 || (s[start] == '0' && (digits > 1 || neg)))
        return false;
    if (i < c->len && (s[i] == '.' || s[i] == 'e' || s[i] == 'E'))
        return false;
    if (digits == 19 &&
        memcmp(s + start, neg ? "9223372036854775808" : "9223372036854775807", 19) > 0)
        return false;
    c->i = i;
    return true;
}

static bool literal(struct cur *c, const char *word, size_t n)
{
    if (c->len - c->i < n || memcmp(c->s + c->i, word, n) != 0)
        return false;
    c->i += n;
    return true;
}

/* An object with no whitespace and no key twice. Keys hold no escapes, so
 * equal text is an equal key. */
static bool canon_object(struct cur *c, int room)
{
    size_t key_off[SCAN_KEYS_MAX], key_len[SCAN_KEYS_MAX], n = 0;

    if (opens_empty(c, '}', false))
        return true;
    for (;;) {
        size_t k = c->i;
        if (k >= c->len || c->s[k] != '"' || !canon_string(c) || n == SCAN_KEYS_MAX)
            return false;
        size_t klen = c->i - k - 2;
        for (size_t j = 0; j < n; j++)
            if (key_len[j] == klen && memcmp(c->s + key_off[j], c->s + k + 1, klen) == 0)
                return false;
        key_off[n] = k + 1;
        key_len[n++] = klen;
        if (c->i >= c->len || c->s[c->i] != ':')
            return false;
        c->i++;
        int next = canon_value(c, room - 1) ? next_or_close(c, '}', false) : -1;
        if (next != 0)
            return next > 0;
    }
}

static bool canon_array(struct cur *c, int room)
{
    if (opens_empty(c, ']', false))
        return true;
    for (;;) {
        int next = canon_value(c, room - 1) ? next_or_close(c, ']', false) : -1;
        if (next != 0)
            return next > 0;
    }
}

/* --- the loose grammar: the rest of the line ---------------------------- */

/* A string's extent: up to the first quote not after a backslash. Its
 * content is jansson's to check. */
static bool skip_string(struct cur *c)
{
    for (size_t i = c->i + 1; i < c->len; i++) {
        if (c->s[i] == '\\')
            i++;
        else if (c->s[i] == '"') {
            c->i = i + 1;
            return true;
        }
    }
    return false;
}

static size_t skip_digits(struct cur *c)
{
    size_t start = c->i;

    while (c->i < c->len && is_digit(c->s[c->i]))
        c->i++;
    return c->i - start;
}

/* A number by JSON's grammar, so its extent is the one jansson lexes. */
static bool skip_number(struct cur *c)
{
    if (c->s[c->i] == '-')
        c->i++;
    if (skip_digits(c) == 0)
        return false;
    if (c->i < c->len && c->s[c->i] == '.') {
        c->i++;
        if (skip_digits(c) == 0)
            return false;
    }
    if (c->i < c->len && (c->s[c->i] == 'e' || c->s[c->i] == 'E')) {
        c->i++;
        if (c->i < c->len && (c->s[c->i] == '+' || c->s[c->i] == '-'))
            c->i++;
        if (skip_digits(c) == 0)
            return false;
    }
    return true;
}

/* The members or items of a container, whose opening byte is at c->i. */
static bool skip_container(struct cur *c, int room, bool object)
{
    char close = object ? '}' : ']';

    if (opens_empty(c, close, true))
        return true;
    for (;;) {
        if (object) {
            if (c->i >= c->len || c->s[c->i] != '"' || !skip_string(c))
                return false;
            skip_ws(c);
            if (c->i >= c->len || c->s[c->i] != ':')
                return false;
            c->i++;
            skip_ws(c);
        }
        int next = skip_value(c, room - 1) ? next_or_close(c, close, true) : -1;
        if (next != 0)
            return next > 0;
    }
}

static bool value(struct cur *c, int room, bool strict)
{
    if (c->i >= c->len)
        return false;
    switch (c->s[c->i]) {
    case '{':
        return room > 0 && (strict ? canon_object(c, room) : skip_container(c, room, true));
    case '[':
        return room > 0 && (strict ? canon_array(c, room) : skip_container(c, room, false));
    case '"':
        return strict ? canon_string(c) : skip_string(c);
    case 't':
        return literal(c, "true", 4);
    case 'f':
        return literal(c, "false", 5);
    case 'n':
        return literal(c, "null", 4);
    default:
        if (c->s[c->i] != '-' && !is_digit(c->s[c->i]))
            return false;
        return strict ? canon_number(c) : skip_number(c);
    }
}

bool scan_canonical(const char *text, size_t len, int depth_room)
{
    struct cur c = {(const unsigned char *)text, len, 0};

    return canon_value(&c, depth_room) && c.i == len;
}

/* --- the request's shape ------------------------------------------------- */

/* The state of one scan_request. */
struct walk {
    struct cur c;
    struct scan *out;
    size_t op_off, op_len; /* the raw "op" string, op_len 0 when unknown */
    bool oom;
};

/* A payload value at c->i: recorded when canonical, skipped otherwise. */
static bool payload_value(struct walk *w, int room, size_t item)
{
    size_t start = w->c.i;

    if (!canon_value(&w->c, room)) {
        w->c.i = start;
        return skip_value(&w->c, room);
    }
    struct scan *s = w->out;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        struct scan_span *spans = realloc(s->spans, cap * sizeof(*spans));
        if (spans == NULL) {
            w->oom = true;
            return false;
        }
        s->spans = spans;
        s->cap = cap;
    }
    s->spans[s->n++] = (struct scan_span){start, w->c.i - start, item};
    return true;
}

/* True when the key from k to end (quotes included) is name, unescaped. */
static bool key_is(const struct cur *c, size_t k, size_t end, const char *name)
{
    size_t n = strlen(name);

    return end - k == n + 2 && memcmp(c->s + k + 1, name, n) == 0;
}

static bool walk_object(struct walk *w, size_t item);

/* The value of the request's "jobs": an item that is an object is walked
 * for its payload, anything else skipped. */
static bool walk_jobs(struct walk *w)
{
    struct cur *c = &w->c;

    if (opens_empty(c, ']', true))
        return true;
    for (size_t item = 0;; item++) {
        bool ok = c->i < c->len && c->s[c->i] == '{' ? walk_object(w, item)
                                                     : skip_value(c, ROOM_ITEM + 1);
        int next = ok ? next_or_close(c, ']', true) : -1;
        if (next != 0)
            return next > 0;
    }
}

/* The value of the member whose key spans k..end: item is SCAN_TOP in the
 * request object itself, else the index of the enqueue_many item. */
static bool walk_member(struct walk *w, size_t k, size_t end, size_t item)
{
    struct cur *c = &w->c;
    bool top = item == SCAN_TOP;

    if (key_is(c, k, end, "payload"))
        return payload_value(w, top ? ROOM_TOP : ROOM_ITEM, item);
    if (top && key_is(c, k, end, "jobs") && c->i < c->len && c->s[c->i] == '[')
        return walk_jobs(w);
    if (top && key_is(c, k, end, "op") && c->i < c->len && c->s[c->i] == '"') {
        size_t v = c->i;
        if (!skip_string(c))
            return false;
        /* An op with an escape is left unknown: no spans are kept. */
        bool plain = memchr(c->s + v + 1, '\\', c->i - v - 2) == NULL;
        w->op_off = v + 1;
        w->op_len = plain ? c->i - v - 2 : 0;
        return true;
    }
    return skip_value(c, top ? ROOM_TOP : ROOM_ITEM);
}

/* The request object (item SCAN_TOP) or one enqueue_many item. */
static bool walk_object(struct walk *w, size_t item)
{
    struct cur *c = &w->c;

    if (opens_empty(c, '}', true))
        return true;
    for (;;) {
        size_t k = c->i;
        if (c->i >= c->len || c->s[c->i] != '"' || !skip_string(c))
            return false;
        size_t end = c->i;
        skip_ws(c);
        if (c->i >= c->len || c->s[c->i] != ':')
            return false;
        c->i++;
        skip_ws(c);
        int next = walk_member(w, k, end, item) ? next_or_close(c, '}', true) : -1;
        if (next != 0)
            return next > 0;
    }
}

/* Keep the spans the op uses: the top-level payload of an enqueue, the
 * items' of an enqueue_many. */
static void keep_for_op(struct walk *w)
{
    struct scan *s = w->out;
    const char *op = (const char *)w->c.s + w->op_off;
    bool one = w->op_len == 7 && memcmp(op, "enqueue", 7) == 0;
    bool many = w->op_len == 12 && memcmp(op, "enqueue_many", 12) == 0;
    size_t n = 0;

    for (size_t i = 0; i < s->n; i++)
        if ((one && s->spans[i].item == SCAN_TOP) || (many && s->spans[i].item != SCAN_TOP))
            s->spans[n++] = s->spans[i];
    s->n = n;
}

int scan_request(struct scan *s, const char *line, size_t len)
{
    struct walk w = {{(const unsigned char *)line, len, 0}, s, 0, 0, false};

    s->n = 0;
    /* Most lines are no enqueue: one memmem says so. */
    if (memmem(line, len, "\"enqueue", 8) == NULL)
        return 0;
    skip_ws(&w.c);
    if (w.c.i >= len || w.c.s[w.c.i] != '{' || !walk_object(&w, SCAN_TOP)) {
        s->n = 0;
        return w.oom ? -ENOMEM : 0;
    }
    skip_ws(&w.c);
    if (w.c.i != len)
        s->n = 0;
    keep_for_op(&w);
    return 0;
}

void scan_deinit(struct scan *s)
{
    free(s->spans);
    memset(s, 0, sizeof(*s));
}
