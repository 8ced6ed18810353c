/* frame: the line reader. The daemon feeds it the bytes of a connection in
 * whatever chunks the socket delivers and pulls complete lines back out, one
 * request per line. Memory stays bounded: one growable buffer, compacted
 * before each feed, holding at most one partial line (never more than
 * max_line + 2 bytes of it) plus the chunk being fed, as long as the caller
 * drains every complete line with frame_next() before it feeds again.
 *
 * A reader may also borrow a buffer for one read (frame_space_lent): the
 * daemon reads every connection into one loop-wide buffer, runs the
 * complete lines where they landed, and frame_return() keeps only what is
 * left (a partial line) in a buffer of the reader's own. A connection that
 * holds no partial line then holds no buffer at all. */
#ifndef EMQ_FRAME_H
#define EMQ_FRAME_H

#include <stdbool.h>
#include <stddef.h>

#define FRAME_LINE_DEFAULT ((size_t)1 << 20) /* the daemon's max_line: 1 MiB */

/* Expected conditions returned by frame_next(). */
enum {
    FRAME_EAGAIN = 1, /* no complete line is buffered: feed more bytes */
    FRAME_ETOOBIG,    /* a line longer than max_line was dropped (once per line) */
    FRAME_EREFUSED,   /* a line frame_refuse() dropped, in its place (once per line) */
};

/* A line reader for one connection. Lines end in "\n"; a "\r" before the
 * "\n" is stripped and empty lines are skipped. */
struct frame {
    char *buf;
    size_t cap;
    size_t start;    /* first byte not yet returned by frame_next() */
    size_t tail;     /* start of the last, unterminated line: no '\n' after it */
    size_t end;      /* one past the last buffered byte */
    size_t max_line; /* longest line accepted, "\r\n" not counted */
    bool discarding; /* dropping the rest of an oversized or refused line up to its '\n' */
    bool refused;    /* a refused line is still to be reported, at refused_at */
    bool lent;       /* buf is borrowed (frame_space_lent), not ours to free or grow */
    size_t refused_at;
};

/* Set up an empty reader accepting lines of at most max_line bytes (>= 1).
 * Nothing is allocated until the first feed. */
void frame_init(struct frame *f, size_t max_line);

/* Free the buffer. The reader may be initialised again afterwards. */
void frame_deinit(struct frame *f);

/* Copy len bytes from data into the reader. Returns 0, or -ENOMEM (the
 * bytes are then not taken). Invalidates lines returned so far. */
int frame_feed(struct frame *f, const char *data, size_t len);

/* Zero-copy feeding, for a libuv alloc callback: get room for up to want
 * bytes at the end of the buffer (*room is set, possibly larger), read into
 * it, then hand over the n bytes read with frame_commit(). Returns 0 or
 * -ENOMEM. Invalidates lines returned so far. */
int frame_space(struct frame *f, size_t want, char **room, size_t *room_len);

/* frame_space() into a borrowed buffer of cap bytes (shared by every
 * reader of one thread, e.g. a loop-wide read buffer): when the reader
 * holds at most cap / 4 bytes in a buffer of at most cap, they are copied
 * to the front of shared (and the reader's own buffer is freed) and the
 * room is the rest of shared; otherwise (a long partial line) the room is
 * in the reader's own buffer, as frame_space(f, cap, ...) would give.
 * Lines pulled while the buffer is lent point into it. Every call must be
 * followed, before shared is used for anything else, by frame_return().
 * Returns 0 or -ENOMEM. */
int frame_space_lent(struct frame *f, char *shared, size_t cap, char **room, size_t *room_len);

/* Give a lent buffer back: the bytes not yet returned as lines move to a
 * buffer of the reader's own (none when there are none): exactly their
 * size when they are at most a quarter of the lent buffer, else with room
 * for one more read of its size. When nothing is lent, a reader left empty
 * frees its own buffer. Returns 0, or -ENOMEM (the bytes are then lost
 * and the reader is left empty: the caller must drop the connection).
 * Invalidates lines returned so far. */
int frame_return(struct frame *f);

/* Take n bytes (n <= *room_len) just written at the room frame_space()
 * handed out. */
void frame_commit(struct frame *f, size_t n);

/* Pull the next complete line. Returns 0 with *line / *len set (the line,
 * NUL-terminated in place, without "\r\n", valid until the next feed);
 * FRAME_ETOOBIG once for each line longer than max_line, in its place in
 * the order of lines; or FRAME_EAGAIN when no complete line is buffered. */
int frame_next(struct frame *f, const char **line, size_t *len);

/* Bytes buffered and not yet returned as lines (a partial line included). */
size_t frame_pending(const struct frame *f);

/* Bytes of the last line read so far, which has no '\n' yet. */
size_t frame_partial(const struct frame *f);

/* Refuse the line still arriving, whatever its length, as if it were over
 * max_line: its bytes read so far are dropped now, the rest as it arrives
 * up to its '\n', and frame_next() reports FRAME_EREFUSED once in its place
 * in the order of lines. A reader left empty gives its buffer back. Returns
 * the bytes dropped; 0 (and nothing changes) when there is no partial line
 * or a line refused before has not been reported yet. */
size_t frame_refuse(struct frame *f);

#endif
