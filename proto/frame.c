/* frame: the line reader (see frame.h).
 *
 * The buffer holds [start, tail) complete lines, each ending in '\n', then
 * [tail, end) the start of a line still arriving. When that partial line
 * grows past max_line + 1 bytes it can no longer be a valid line, even with
 * a "\r" still to strip: its first max_line + 2 bytes are kept, closed with
 * a '\n' of our own so frame_next() reports it in its place, and the rest of
 * it is dropped as it arrives, up to and including its real '\n'. A line
 * refused by frame_refuse() is dropped the same way, whole; what marks its
 * place is the offset refused_at (it is followed by the lines after it,
 * once its '\n' has come). */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define FRAME_CHUNK_MAX ((size_t)64 << 10) /* frame_feed() copies at most this at once */
#define FRAME_CAP_MIN   ((size_t)4 << 10)
#define FRAME_CAP_KEEP  ((size_t)64 << 10) /* an empty buffer above this is released */

void frame_init(struct frame *f, size_t max_line)
{
    memset(f, 0, sizeof(*f));
    f->max_line = max_line ? max_line : FRAME_LINE_DEFAULT;
}

void frame_deinit(struct frame *f)
{
    if (!f->lent)
        free(f->buf);
    f->lent = false;
    f->buf = NULL;
    f->cap = f->start = f->tail = f->end = f->refused_at = 0;
    f->discarding = f->refused = false;
}

/* Move the unreturned bytes to the front of buf (cap bytes, which may be
 * the reader's own buffer), which becomes the reader's buffer; the old
 * one is not freed. */
static void rebase(struct frame *f, char *buf, size_t cap)
{
    if (f->end > f->start)
        memmove(buf, f->buf + f->start, f->end - f->start);
    f->tail -= f->start;
    f->end -= f->start;
    if (f->refused)
        f->refused_at -= f->start;
    f->start = 0;
    f->buf = buf;
    f->cap = cap;
}

/* Move the unreturned bytes to the front of the buffer. */
static void compact(struct frame *f)
{
    if (f->start != 0)
        rebase(f, f->buf, f->cap);
}

/* Make room for want more bytes plus the one spare byte a cut line may need
 * for its '\n'. Growth doubles, but not past the most a drained reader can
 * need: max_line + 3 bytes of partial line plus the chunk. */
static int reserve(struct frame *f, size_t want)
{
    size_t need = f->end + want + 1;
    size_t ceiling = f->max_line + 3 + want;
    size_t cap;
    char *buf;

    if (need <= f->cap)
        return 0;
    if (f->lent) {
        /* The borrowed buffer cannot grow: carry on in one of our own. */
        int err = frame_return(f);
        if (err < 0)
            return err;
        need = f->end + want + 1;
    }
    cap = f->cap * 2 > FRAME_CAP_MIN ? f->cap * 2 : FRAME_CAP_MIN;
    if (cap > ceiling && ceiling >= need)
        cap = ceiling;
    if (cap < need)
        cap = need;
    buf = realloc(f->buf, cap);
    if (buf == NULL)
        return -ENOMEM;
    f->buf = buf;
    f->cap = cap;
    return 0;
}

int frame_space(struct frame *f, size_t want, char **room, size_t *room_len)
{
    int err;

    if (want == 0)
        want = 1;
    if (f->start == f->end) {
        f->start = f->tail = f->end = f->refused_at = 0;
        /* An idle connection does not keep the memory of one big line. */
        if (!f->lent && f->cap > FRAME_CAP_KEEP && f->cap > 2 * (want + 1)) {
            free(f->buf);
            f->buf = NULL;
            f->cap = 0;
        }
    } else {
        compact(f);
    }
    err = reserve(f, want);
    if (err < 0)
        return err;
    *room = f->buf + f->end;
    *room_len = f->cap - f->end - 1;
    return 0;
}

int frame_space_lent(struct frame *f, char *shared, size_t cap, char **room, size_t *room_len)
{
    size_t held = f->end - f->start;

    if (!f->lent && held <= cap / 4 && f->cap <= cap) {
        /* Copying a short partial line is cheaper than keeping a buffer
         * per connection; a long one stays where it is, in a buffer that
         * frame_return sized for it and the next read. */
        char *own = f->buf;
        rebase(f, shared, cap);
        free(own);
        f->lent = true;
    }
    /* Lent: all the room there is; else as much as one read of cap. Its
     * own buffer, grown by doubling, may have more room than that: one
     * read still takes at most cap, since what one read may add is what
     * the daemon's budget allows past max-buffered (server/budget.h). */
    int err = frame_space(f, f->lent ? 1 : cap, room, room_len);
    if (err == 0 && !f->lent && *room_len > cap)
        *room_len = cap;
    return err;
}

int frame_return(struct frame *f)
{
    size_t held = f->end - f->start, cap;
    char *own = NULL;

    if (!f->lent) {
        if (f->start == f->end && f->buf != NULL) {
            /* A long line has run: nothing is left to keep. */
            free(f->buf);
            f->buf = NULL;
            f->cap = f->start = f->tail = f->end = f->refused_at = 0;
        }
        return 0;
    }
    /* A short partial line gets a buffer of its size; a long one (the
     * start of a line longer than a read, or lines not run) one with room
     * for the next read too, which then goes there without a realloc. */
    cap = held == 0 ? 0 : held <= f->cap / 4 ? held + 1 : held + f->cap + 1;
    f->lent = false;
    if (held > 0 && (own = malloc(cap)) == NULL) {
        f->buf = NULL;
        f->cap = f->start = f->tail = f->end = f->refused_at = 0;
        f->discarding = f->refused = false;
        return -ENOMEM;
    }
    rebase(f, own, cap);
    return 0;
}

void frame_commit(struct frame *f, size_t n)
{
    char *fresh = f->buf + f->end;
    char *nl;

    if (n == 0)
        return;
    if (f->discarding) {
        nl = memchr(fresh, '\n', n);
        if (nl == NULL)
            return; /* all of it belongs to the line being dropped */
        n -= (size_t)(nl - fresh) + 1;
        memmove(fresh, nl + 1, n);
        f->discarding = false;
    }
    nl = n ? memrchr(fresh, '\n', n) : NULL;
    f->end += n;
    if (nl != NULL)
        f->tail = (size_t)(nl - f->buf) + 1;
    if (f->end - f->tail > f->max_line + 1) {
        /* reserve() left one spare byte past end for this '\n'. */
        f->end = f->tail + f->max_line + 2;
        f->buf[f->end++] = '\n';
        f->tail = f->end;
        f->discarding = true;
    }
}

int frame_feed(struct frame *f, const char *data, size_t len)
{
    while (len > 0) {
        size_t n = len < FRAME_CHUNK_MAX ? len : FRAME_CHUNK_MAX;
        size_t room_len;
        char *room;
        int err = frame_space(f, n, &room, &room_len);

        if (err < 0)
            return err;
        memcpy(room, data, n);
        frame_commit(f, n);
        data += n;
        len -= n;
    }
    return 0;
}

int frame_next(struct frame *f, const char **line, size_t *len)
{
    for (;;) {
        if (f->refused && f->start == f->refused_at) {
            f->refused = false;
            return FRAME_EREFUSED;
        }
        if (f->start >= f->tail)
            return FRAME_EAGAIN;
        char *s = f->buf + f->start;
        /* Every byte before tail belongs to a line ending in '\n'. */
        char *nl = memchr(s, '\n', f->tail - f->start);
        size_t n = (size_t)(nl - s);

        f->start += n + 1;
        if (n > 0 && s[n - 1] == '\r')
            n--;
        if (n == 0)
            continue;
        if (n > f->max_line)
            return FRAME_ETOOBIG;
        s[n] = '\0';
        *line = s;
        *len = n;
        return 0;
    }
}

size_t frame_pending(const struct frame *f)
{
    return f->end - f->start;
}

size_t frame_partial(const struct frame *f)
{
    return f->end - f->tail;
}

size_t frame_refuse(struct frame *f)
{
    size_t n = f->end - f->tail;
    if (n == 0 || f->refused)
        return 0;
    f->end = f->tail;
    f->refused = true;
    f->refused_at = f->tail;
    f->discarding = true;
    if (!f->lent && f->start == f->end && f->cap > FRAME_CAP_KEEP) {
        free(f->buf);
        f->buf = NULL;
        f->cap = f->start = f->tail = f->end = f->refused_at = 0;
    }
    return n;
}
