/* frame: scripted byte chunks through the line reader. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

#define TOOBIG    "<ETOOBIG>"
#define REFUSED   "<EREFUSED>"
#define LINES_MAX 64

/* The lines pulled out of a reader, ETOOBIG shown as TOOBIG. */
struct got {
    char *lines[LINES_MAX];
    size_t lens[LINES_MAX];
    int n;
};

static void got_free(struct got *g)
{
    for (int i = 0; i < g->n; i++)
        free(g->lines[i]);
    g->n = 0;
}

/* Pull every complete line, as the daemon does after each read. */
static void drain(struct frame *f, struct got *g)
{
    const char *line;
    size_t len;
    int rc;

    while ((rc = frame_next(f, &line, &len)) != FRAME_EAGAIN) {
        cr_assert_lt(g->n, LINES_MAX);
        if (rc == FRAME_ETOOBIG || rc == FRAME_EREFUSED) {
            g->lines[g->n] = strdup(rc == FRAME_ETOOBIG ? TOOBIG : REFUSED);
            g->lens[g->n] = strlen(g->lines[g->n]);
            g->n++;
            continue;
        }
        cr_assert_eq(rc, 0);
        cr_assert_eq(line[len], '\0', "lines are NUL-terminated in place");
        g->lines[g->n] = malloc(len + 1);
        memcpy(g->lines[g->n], line, len + 1);
        g->lens[g->n++] = len;
    }
}

static void feed_chunks(struct frame *f, const char *s, size_t len, size_t chunk, struct got *g)
{
    for (size_t at = 0; at < len; at += chunk) {
        size_t n = len - at < chunk ? len - at : chunk;
        cr_assert_eq(frame_feed(f, s + at, n), 0);
        drain(f, g);
    }
}

static void expect(const struct got *g, const char *const *want, int nwant, size_t chunk)
{
    cr_assert_eq(g->n, nwant, "chunk %zu: %d lines, want %d", chunk, g->n, nwant);
    for (int i = 0; i < nwant; i++)
        cr_assert_str_eq(g->lines[i], want[i], "chunk %zu, line %d", chunk, i);
}

/* Feed input in every chunk size from 1 byte to all of it at once. */
static void check_all_chunkings(size_t max_line, const char *input, size_t len,
                                const char *const *want, int nwant)
{
    for (size_t chunk = 1; chunk <= len; chunk++) {
        struct frame f;
        struct got g = {0};
        frame_init(&f, max_line);
        feed_chunks(&f, input, len, chunk, &g);
        expect(&g, want, nwant, chunk);
        got_free(&g);
        frame_deinit(&f);
    }
}

#define CHECK(max, input, ...)                                                                     \
    do {                                                                                           \
        static const char *const want_[] = {__VA_ARGS__};                                          \
        check_all_chunkings(max, input, sizeof(input) - 1, want_,                                  \
                            (int)(sizeof(want_) / sizeof(want_[0])));                              \
    } while (0)

Test(frame, one_line)
{
    CHECK(64, "{\"op\":\"ping\"}\n", "{\"op\":\"ping\"}");
}

Test(frame, many_lines_in_any_chunking)
{
    CHECK(64, "alpha\nbeta\ngamma delta\n{\"x\":[1,2,3]}\nz\n", "alpha", "beta", "gamma delta",
          "{\"x\":[1,2,3]}", "z");
}

Test(frame, crlf_is_stripped)
{
    CHECK(64, "a\r\nbb\r\nc\n", "a", "bb", "c");
    /* Only the one "\r" before the "\n"; others belong to the line. */
    CHECK(64, "a\r\r\nb\rc\n", "a\r", "b\rc");
}

Test(frame, empty_lines_are_skipped)
{
    CHECK(64, "\n\n\r\na\n\r\n\nb\n\n", "a", "b");
    CHECK(64, " \n", " ");
}

Test(frame, incomplete_line_waits)
{
    struct frame f;
    const char *line;
    size_t len;

    frame_init(&f, 64);
    cr_assert_eq(frame_next(&f, &line, &len), FRAME_EAGAIN, "empty reader");
    cr_assert_eq(frame_feed(&f, "abc", 3), 0);
    cr_assert_eq(frame_next(&f, &line, &len), FRAME_EAGAIN);
    cr_assert_eq(frame_pending(&f), 3);
    cr_assert_eq(frame_feed(&f, "d\r", 2), 0);
    cr_assert_eq(frame_next(&f, &line, &len), FRAME_EAGAIN, "\\r alone ends nothing");
    cr_assert_eq(frame_feed(&f, "\nef", 3), 0);
    cr_assert_eq(frame_next(&f, &line, &len), 0);
    cr_assert_eq(len, 4);
    cr_assert_eq(memcmp(line, "abcd", 4), 0);
    cr_assert_eq(frame_next(&f, &line, &len), FRAME_EAGAIN);
    cr_assert_eq(frame_pending(&f), 2);
    frame_deinit(&f);
}

Test(frame, binary_bytes_pass_through)
{
    static const char input[] = "a\0b\xff\n";
    struct frame f;
    struct got g = {0};

    frame_init(&f, 64);
    feed_chunks(&f, input, sizeof(input) - 1, 1, &g);
    cr_assert_eq(g.n, 1);
    cr_assert_eq(g.lens[0], 4);
    cr_assert_eq(memcmp(g.lines[0], "a\0b\xff", 4), 0);
    got_free(&g);
    frame_deinit(&f);
}

Test(frame, line_length_limit_is_exact)
{
    /* max_line counts the line without its "\r\n". */
    CHECK(8, "12345678\n123456789\n12345678\r\nok\n", "12345678", TOOBIG, "12345678", "ok");
    CHECK(1, "a\nab\nb\r\n", "a", TOOBIG, "b");
}

Test(frame, oversized_line_then_good_line)
{
    CHECK(8, "0123456789abcdefghij\n{\"op\":1}\n", TOOBIG, "{\"op\":1}");
    CHECK(8, "0123456789abcdefghij\r\nok\r\n", TOOBIG, "ok");
    CHECK(8, "a\n0123456789abcdefghijklmnopqrstuvwxyz\nb\n", "a", TOOBIG, "b");
}

Test(frame, oversized_lines_back_to_back)
{
    CHECK(4, "a\n0123456789\nb\nABCDEFGHIJKLMNOP\nc\nxxxxxxxxxxxxxxxxxxxxxxxxx\n\nd\n", "a", TOOBIG,
          "b", TOOBIG, "c", TOOBIG, "d");
}

Test(frame, oversized_line_reported_once_and_early)
{
    struct frame f;
    struct got g = {0};
    char junk[100];

    memset(junk, 'x', sizeof(junk));
    frame_init(&f, 16);
    feed_chunks(&f, junk, sizeof(junk), 7, &g);
    /* Reported as soon as it cannot fit, before its newline arrives. */
    cr_assert_eq(g.n, 1);
    cr_assert_str_eq(g.lines[0], TOOBIG);
    feed_chunks(&f, junk, sizeof(junk), 100, &g);
    feed_chunks(&f, "xx\nnext\n", 8, 3, &g);
    cr_assert_eq(g.n, 2, "reported once, then the next line");
    cr_assert_str_eq(g.lines[1], "next");
    got_free(&g);
    frame_deinit(&f);
}

Test(frame, huge_line_at_the_default_limit)
{
    size_t big = 3 * FRAME_LINE_DEFAULT;
    char *s = malloc(big + 32);
    struct frame f;
    struct got g = {0};
    size_t at;

    memset(s, 'y', big);
    at = big;
    memcpy(s + at, "\n{\"op\":\"ping\"}\r\n", 16);
    at += 16;
    frame_init(&f, 0);
    cr_assert_eq(f.max_line, FRAME_LINE_DEFAULT, "0 means the default");
    for (size_t off = 0; off < at; off += 4096) {
        size_t n = at - off < 4096 ? at - off : 4096;
        cr_assert_eq(frame_feed(&f, s + off, n), 0);
        drain(&f, &g);
        cr_assert_leq(f.cap, FRAME_LINE_DEFAULT + 4096 + 3, "memory stays bounded (cap %zu)",
                      f.cap);
    }
    cr_assert_eq(g.n, 2);
    cr_assert_str_eq(g.lines[0], TOOBIG);
    cr_assert_str_eq(g.lines[1], "{\"op\":\"ping\"}");
    got_free(&g);
    frame_deinit(&f);
    free(s);
}

Test(frame, line_of_exactly_the_default_limit)
{
    size_t n = FRAME_LINE_DEFAULT;
    char *s = malloc(n + 2);
    struct frame f;
    struct got g = {0};

    memset(s, 'z', n);
    memcpy(s + n, "\r\n", 2);
    frame_init(&f, FRAME_LINE_DEFAULT);
    feed_chunks(&f, s, n + 2, 65536, &g);
    cr_assert_eq(g.n, 1);
    cr_assert_eq(g.lens[0], n);
    got_free(&g);
    frame_deinit(&f);
    free(s);
}

Test(frame, endless_garbage_keeps_memory_bounded)
{
    char chunk[65536];
    struct frame f;
    struct got g = {0};

    memset(chunk, 'g', sizeof(chunk));
    frame_init(&f, 1024);
    for (int i = 0; i < 160; i++) { /* 10 MiB, no newline */
        cr_assert_eq(frame_feed(&f, chunk, sizeof(chunk)), 0);
        drain(&f, &g);
        cr_assert_leq(f.cap, 1024 + sizeof(chunk) + 3, "cap %zu", f.cap);
    }
    cr_assert_eq(g.n, 1);
    cr_assert_str_eq(g.lines[0], TOOBIG);
    got_free(&g);
    frame_deinit(&f);
}

Test(frame, one_big_feed_with_everything)
{
    /* Fed at once without draining in between: order still holds. */
    static const char input[] = "one\r\n\n0123456789012345678901234567890123456789\ntwo\n"
                                "0123456789012345678901234567890123456789\r\nthree";
    struct frame f;
    struct got g = {0};

    frame_init(&f, 10);
    cr_assert_eq(frame_feed(&f, input, sizeof(input) - 1), 0);
    drain(&f, &g);
    cr_assert_eq(frame_feed(&f, "\n", 1), 0);
    drain(&f, &g);
    cr_assert_eq(g.n, 5);
    cr_assert_str_eq(g.lines[0], "one");
    cr_assert_str_eq(g.lines[1], TOOBIG);
    cr_assert_str_eq(g.lines[2], "two");
    cr_assert_str_eq(g.lines[3], TOOBIG);
    cr_assert_str_eq(g.lines[4], "three");
    got_free(&g);
    frame_deinit(&f);
}

Test(frame, zero_copy_space_and_commit)
{
    static const char input[] = "{\"op\":\"a\"}\n{\"op\":\"b\"}\r\n{\"op\"";
    struct frame f;
    struct got g = {0};
    char *room;
    size_t room_len;

    frame_init(&f, 64);
    for (size_t at = 0; at < sizeof(input) - 1; at += 5) {
        size_t n = sizeof(input) - 1 - at < 5 ? sizeof(input) - 1 - at : 5;
        cr_assert_eq(frame_space(&f, 5, &room, &room_len), 0);
        cr_assert_geq(room_len, 5);
        memcpy(room, input + at, n);
        frame_commit(&f, n);
        drain(&f, &g);
    }
    cr_assert_eq(frame_space(&f, 64, &room, &room_len), 0);
    memcpy(room, ":\"c\"}\n", 6);
    frame_commit(&f, 6);
    drain(&f, &g);
    cr_assert_eq(g.n, 3);
    cr_assert_str_eq(g.lines[0], "{\"op\":\"a\"}");
    cr_assert_str_eq(g.lines[1], "{\"op\":\"b\"}");
    cr_assert_str_eq(g.lines[2], "{\"op\":\"c\"}");
    frame_commit(&f, 0);
    cr_assert_eq(frame_pending(&f), 0);
    got_free(&g);
    frame_deinit(&f);
}

Test(frame, idle_buffer_is_released)
{
    size_t n = 512 << 10;
    char *s = malloc(n + 1);
    struct frame f;
    struct got g = {0};
    char *room;
    size_t room_len;

    memset(s, 'q', n);
    s[n] = '\n';
    frame_init(&f, FRAME_LINE_DEFAULT);
    cr_assert_eq(frame_feed(&f, s, n + 1), 0);
    drain(&f, &g);
    cr_assert_eq(g.n, 1);
    cr_assert_geq(f.cap, n);
    cr_assert_eq(frame_space(&f, 4096, &room, &room_len), 0);
    cr_assert_lt(f.cap, 65536, "an idle reader gives the big buffer back (cap %zu)", f.cap);
    got_free(&g);
    frame_deinit(&f);
    free(s);
}

/* frame_refuse: the line still arriving is dropped, reported once in its
 * place (after the complete lines before it, before those after its
 * newline), and the rest of it is dropped as it comes, in any chunking. */
Test(frame, a_refused_line_is_reported_in_its_place)
{
    static const char before[] = "a\nb\npart", rest[] = "ial line\nc\n\nd\n";
    for (size_t chunk = 1; chunk <= sizeof(rest) - 1; chunk++) {
        struct frame f;
        struct got g = {0};
        frame_init(&f, 64);
        cr_assert_eq(frame_feed(&f, before, sizeof(before) - 1), 0);
        cr_assert_eq(frame_partial(&f), 4);
        cr_assert_eq(frame_refuse(&f), 4, "the partial line's bytes are dropped");
        cr_assert_eq(frame_partial(&f), 0);
        cr_assert_eq(frame_pending(&f), 4, "the complete lines stay");
        cr_assert_eq(frame_refuse(&f), 0, "nothing to refuse");
        feed_chunks(&f, rest, sizeof(rest) - 1, chunk, &g);
        static const char *const want[] = {"a", "b", REFUSED, "c", "d"};
        expect(&g, want, 5, chunk);
        got_free(&g);
        frame_deinit(&f);
    }
}

/* The lines before a refused one may be pulled later (reads paused): its
 * place still comes after them, and a second refusal waits until the
 * first is reported. */
Test(frame, a_refused_line_waits_behind_unread_lines)
{
    struct frame f;
    struct got g = {0};
    const char *line;
    size_t len;

    frame_init(&f, 64);
    cr_assert_eq(frame_feed(&f, "one\ntwo\nthr", 11), 0);
    cr_assert_eq(frame_next(&f, &line, &len), 0);
    cr_assert_eq(frame_refuse(&f), 3);
    cr_assert_eq(frame_feed(&f, "ee\nfour\nfi", 10), 0);
    cr_assert_eq(frame_refuse(&f), 0, "the first refusal is not reported yet");
    drain(&f, &g);
    static const char *const want[] = {"two", REFUSED, "four"};
    expect(&g, want, 3, 0);
    cr_assert_eq(frame_refuse(&f), 2, "now the next line can be refused");
    cr_assert_eq(frame_feed(&f, "ve\nsix\n", 7), 0);
    got_free(&g);
    drain(&f, &g);
    static const char *const after[] = {REFUSED, "six"};
    expect(&g, after, 2, 0);
    got_free(&g);
    frame_deinit(&f);
}

/* A refused line's memory goes at once when nothing else is buffered. */
Test(frame, a_refused_big_line_gives_its_buffer_back)
{
    size_t n = 512 << 10;
    char *s = malloc(n);
    struct frame f;

    memset(s, 'q', n);
    frame_init(&f, FRAME_LINE_DEFAULT);
    cr_assert_eq(frame_feed(&f, s, n), 0);
    cr_assert_geq(f.cap, n);
    cr_assert_eq(frame_refuse(&f), n);
    cr_assert_eq(f.cap, 0, "the buffer is released (cap %zu)", f.cap);
    cr_assert_eq(frame_pending(&f), 0);
    frame_deinit(&f);
    free(s);
}

/* frame_space_lent / frame_return, as the daemon reads: every read lands
 * in one shared buffer, whatever is left after the lines ran is copied
 * out, and another reader's read then overwrites the shared buffer. */
static char shared[4096];

/* One read of n bytes of s through the shared buffer, then the lines,
 * then the buffer given back and scribbled over (another connection's
 * read). */
static void lent_read(struct frame *f, const char *s, size_t n, struct got *g)
{
    char *room;
    size_t room_len;
    cr_assert_eq(frame_space_lent(f, shared, sizeof(shared), &room, &room_len), 0);
    cr_assert_geq(room_len, n);
    memcpy(room, s, n);
    frame_commit(f, n);
    drain(f, g);
    cr_assert_eq(frame_return(f), 0);
    cr_assert_not(f->lent);
    cr_assert(f->buf == NULL || f->buf < shared || f->buf >= shared + sizeof(shared),
              "a reader keeps nothing in the shared buffer");
    memset(shared, '#', sizeof(shared));
}

Test(frame, lent_reads_keep_only_the_partial_line)
{
    static const char input[] = "{\"op\":\"a\"}\n{\"op\":\"b\"}\r\n{\"op\":\"c\",\"x\":\"yyyy\"}\n";
    const char *want[] = {"{\"op\":\"a\"}", "{\"op\":\"b\"}", "{\"op\":\"c\",\"x\":\"yyyy\"}"};
    size_t len = sizeof(input) - 1;

    for (size_t chunk = 1; chunk <= len; chunk++) {
        struct frame f;
        struct got g = {0};
        frame_init(&f, 64);
        for (size_t at = 0; at < len; at += chunk) {
            size_t n = len - at < chunk ? len - at : chunk;
            lent_read(&f, input + at, n, &g);
            /* Between reads it holds exactly the partial line, in its own
             * buffer, and nothing at all after a newline. */
            cr_assert_eq(frame_pending(&f), frame_partial(&f));
            if (frame_pending(&f) == 0)
                cr_assert_null(f.buf, "chunk %zu: an empty reader holds no buffer", chunk);
        }
        expect(&g, want, 3, chunk);
        got_free(&g);
        frame_deinit(&f);
    }
}

/* A partial line longer than a quarter of the shared buffer stays in the
 * reader's own buffer and grows there; once it has run, the next read
 * is lent again and the big buffer is freed. */
Test(frame, a_line_longer_than_one_lent_read)
{
    size_t n = 3 * sizeof(shared) + 100;
    char *s = malloc(n + 8);
    memset(s, 'z', n);
    memcpy(s + n, "\nok\n", 4);
    struct frame f;
    struct got g = {0};
    frame_init(&f, FRAME_LINE_DEFAULT);
    size_t chunk = sizeof(shared) / 2 + 1;
    for (size_t at = 0; at < n + 4; at += chunk)
        lent_read(&f, s + at, n + 4 - at < chunk ? n + 4 - at : chunk, &g);
    cr_assert_eq(g.n, 2);
    cr_assert_eq(g.lens[0], n);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(g.lines[0][i], 'z', "byte %zu of the long line", i);
    cr_assert_str_eq(g.lines[1], "ok");
    lent_read(&f, "x\n", 2, &g);
    cr_assert_null(f.buf, "the long line's buffer is freed once the reader is empty");
    got_free(&g);
    frame_deinit(&f);
    free(s);
}

/* Lines not run when the read ends (the daemon paused: too many requests
 * in flight) are kept, complete, with the partial line after them; an
 * oversized line cut in the lent buffer and a refused line keep their
 * places across the copy. */
Test(frame, unrun_lines_and_refusals_survive_the_return)
{
    static const char input[] = "one\ntwo-is-too-long-for-the-limit\nthree\nfou";
    struct frame f;
    struct got g = {0};
    char *room;
    size_t room_len;
    const char *line;
    size_t len;

    frame_init(&f, 8);
    cr_assert_eq(frame_space_lent(&f, shared, sizeof(shared), &room, &room_len), 0);
    memcpy(room, input, sizeof(input) - 1);
    frame_commit(&f, sizeof(input) - 1);
    cr_assert_eq(frame_next(&f, &line, &len), 0);
    cr_assert_str_eq(line, "one");
    cr_assert_eq(frame_return(&f), 0); /* "two..." and "three" not run yet */
    memset(shared, '#', sizeof(shared));
    cr_assert_eq(frame_refuse(&f), 3, "the partial \"fou\" is refused");
    drain(&f, &g);
    lent_read(&f, "r-five\nsix\n", 11, &g);
    const char *want[] = {TOOBIG, "three", REFUSED, "six"};
    expect(&g, want, 4, 0);
    got_free(&g);
    frame_deinit(&f);
}

/* The start of a long line, copied out of the lent buffer, gets room for
 * the next read with it: that read goes into the reader's own buffer
 * without moving it. Once the line has run, the reader frees it at the
 * end of that read. */
Test(frame, a_long_partial_line_keeps_room_for_the_next_read)
{
    char *s = malloc(3 * sizeof(shared));
    memset(s, 'w', 3 * sizeof(shared));
    struct frame f;
    struct got g = {0};
    char *room;
    size_t room_len;
    frame_init(&f, FRAME_LINE_DEFAULT);
    lent_read(&f, s, sizeof(shared) - 1, &g); /* all of the room, no newline */
    cr_assert_eq(frame_partial(&f), sizeof(shared) - 1);
    char *own = f.buf;
    cr_assert_eq(frame_space_lent(&f, shared, sizeof(shared), &room, &room_len), 0);
    cr_assert_eq(f.buf, own, "the next read goes where the partial line is, unmoved");
    cr_assert_geq(room_len, sizeof(shared) - 1);
    memcpy(room, "tail\n", 5);
    frame_commit(&f, 5);
    drain(&f, &g);
    cr_assert_eq(g.n, 1);
    cr_assert_eq(g.lens[0], sizeof(shared) - 1 + 4);
    cr_assert_eq(frame_return(&f), 0);
    cr_assert_null(f.buf, "a reader left empty frees its own buffer");
    got_free(&g);
    frame_deinit(&f);
    free(s);
}

/* However far a long partial line has grown its reader's own buffer (it
 * doubles), one read into it takes at most one lent read's worth: the
 * daemon's budget counts on a read adding at most that. */
Test(frame, a_read_into_a_grown_buffer_takes_at_most_one_lent_read)
{
    size_t n = 20 * sizeof(shared);
    char *s = malloc(n);
    memset(s, 'v', n);
    struct frame f;
    struct got g = {0};
    char *room;
    size_t room_len;
    frame_init(&f, FRAME_LINE_DEFAULT);
    size_t at = 0, most = 0;
    while (at < n) {
        cr_assert_eq(frame_space_lent(&f, shared, sizeof(shared), &room, &room_len), 0);
        cr_assert_leq(room_len, sizeof(shared), "a read of %zu bytes offered at %zu", room_len, at);
        most = room_len > most ? room_len : most;
        size_t k = n - at < room_len ? n - at : room_len;
        memcpy(room, s + at, k);
        frame_commit(&f, k);
        at += k;
        drain(&f, &g);
        cr_assert_eq(frame_return(&f), 0);
        memset(shared, '#', sizeof(shared));
    }
    cr_assert_gt(f.cap, 2 * sizeof(shared), "the partial line grew the reader's own buffer");
    cr_assert_eq(most, sizeof(shared), "reads into it still take a whole lent read");
    cr_assert_eq(frame_partial(&f), n);
    lent_read(&f, "\n", 1, &g);
    cr_assert_eq(g.n, 1);
    cr_assert_eq(g.lens[0], n);
    got_free(&g);
    frame_deinit(&f);
    free(s);
}
