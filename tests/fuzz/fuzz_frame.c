/* fuzz_frame: the line reader against a reference splitter. The input's
 * first byte picks max_line (1-64, so the limit is hit often), the second
 * seeds how the rest is cut into chunks, and the rest is the byte stream.
 * Whatever the chunking, frame_next() must yield exactly the lines and
 * ETOOBIG events the reference finds in the whole stream, and no line may
 * hold a '\n', exceed max_line, or lack its NUL. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One event of the reference: a line (off, len into the input) or ETOOBIG. */
struct event {
    size_t off, len;
    int toobig;
};

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            __builtin_trap();                                                                      \
    } while (0)

/* The protocol's rule on the whole stream: lines end in '\n', one '\r'
 * before it is dropped, empty lines are skipped, longer than max_line is
 * ETOOBIG. The unterminated tail yields nothing here. */
static size_t reference(const char *s, size_t n, size_t max_line, struct event *ev)
{
    size_t k = 0, start = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\n')
            continue;
        size_t len = i - start;
        if (len > 0 && s[i - 1] == '\r')
            len--;
        if (len > 0)
            ev[k++] = (struct event){start, len, len > max_line};
        start = i + 1;
    }
    return k;
}

/* xorshift: the chunk sizes, from the seed byte. */
static uint32_t next(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/* The loop-wide read buffer of the daemon, small here so that partial
 * lines both fit its quarter (copied in) and do not (kept apart). */
static char shared[512];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t max_line = 1 + data[0] % 64;
    uint32_t seed = 0x9e3779b9u ^ data[1];
    const char *s = (const char *)data + 2;
    size_t n = size - 2;

    struct event *ev = malloc((n / 2 + 1) * sizeof(*ev));
    CHECK(ev != NULL);
    size_t nev = reference(s, n, max_line, ev), seen = 0, extra = 0;
    struct frame f;
    frame_init(&f, max_line);
    for (size_t off = 0; off < n;) {
        size_t chunk = 1 + next(&seed) % 97;
        if (chunk > n - off)
            chunk = n - off;
        uint32_t how = next(&seed) % 3;
        if (how == 0) {
            CHECK(frame_feed(&f, s + off, chunk) == 0);
        } else if (how == 1) { /* the daemon's: one read buffer shared by all */
            char *room;
            size_t room_len;
            CHECK(frame_space_lent(&f, shared, sizeof(shared), &room, &room_len) == 0);
            CHECK(room_len >= chunk);
            memcpy(room, s + off, chunk);
            frame_commit(&f, chunk);
        } else { /* the zero-copy path into the reader's own buffer */
            char *room;
            size_t room_len;
            CHECK(frame_space(&f, chunk, &room, &room_len) == 0);
            CHECK(room_len >= chunk);
            memcpy(room, s + off, chunk);
            frame_commit(&f, chunk);
        }
        off += chunk;
        const char *line;
        size_t len;
        int rc;
        while ((rc = frame_next(&f, &line, &len)) != FRAME_EAGAIN) {
            if (seen == nev) {
                /* Only an unterminated oversized tail may be reported early. */
                CHECK(rc == FRAME_ETOOBIG && extra++ == 0);
                continue;
            }
            struct event *e = &ev[seen++];
            if (e->toobig) {
                CHECK(rc == FRAME_ETOOBIG);
                continue;
            }
            CHECK(rc == 0);
            CHECK(len == e->len && len > 0 && len <= max_line);
            CHECK(line[len] == '\0' && memchr(line, '\n', len) == NULL);
            CHECK(memcmp(line, s + e->off, len) == 0);
        }
        /* What is left must not stay in the shared buffer: the next
         * connection's read overwrites it. */
        CHECK(frame_return(&f) == 0);
        memset(shared, '#', sizeof(shared));
    }
    CHECK(seen == nev);
    if (extra > 0) { /* the tail really is oversized and unterminated */
        const char *nl = n > 0 ? memrchr(s, '\n', n) : NULL;
        size_t tail = nl != NULL ? n - (size_t)(nl - s) - 1 : n;
        CHECK(tail > max_line + 1);
    }
    frame_deinit(&f);
    free(ev);
    return 0;
}
