/* budget: the bytes emqd holds for its clients, all connections together,
 * held to max-buffered. Each connection is bounded on its own (max-line,
 * max-inflight, max-output), but many connections are not: the budget
 * adds up what they make the daemon hold and, past max-buffered, stops
 * reading every connection until the total is back under a low-water mark
 * (three quarters of it). Nothing is dropped by a pause: lines already
 * read still run, requests are answered in order.
 *
 * What is counted: the bytes read and not yet run (partial lines
 * included), each request's parsed form until it is answered (measured
 * from jansson's allocations at parse), replies held behind earlier ones,
 * output not yet written, the enqueues gathered for this turn's batch
 * calls (core/batch.c, engine.batched_bytes) and the pool's bytes for the
 * backend calls in flight (pool_buffered). Not counted: the fixed cost of a connection
 * (its struct, its frame buffer's spare room; bounded by max-clients),
 * leases and parked consumers' bookkeeping, allocator slack.
 *
 * A pause ends by itself when what holds the bytes drains: the backend
 * answers (or fails a call at redis-timeout-ms), clients read their
 * output. Some of it never drains while reads are paused: a partial line
 * needs more input, and a client may not read. So when the total has not
 * fallen in a whole second of pause while the backend answers promptly,
 * the daemon sheds (budget_sweep): first the partial lines, largest first
 * (each is answered ELIMIT in its place, the rest of it discarded up to
 * its newline; the connection stays), then, if that is not enough, whole
 * connections, those holding the most first, closed as max-output would
 * close them (their leases are released), until the total is under the
 * low-water mark. */
#ifndef EMQ_BUDGET_H
#define EMQ_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct server;

/* The sums and the state; one per server. */
struct budget {
    size_t input;    /* bytes read and not yet run, over the connections */
    size_t partial;  /* of them, those of lines still arriving (no newline yet) */
    size_t requests; /* parsed requests not yet answered */
    size_t output;   /* replies held behind earlier ones, output not yet written */
    bool paused;     /* reads are held: over max-buffered, until under the low-water mark */
    size_t held;     /* connections whose reads are held now */
    uint64_t holds;  /* times a connection's reads were held */
    uint64_t pauses; /* times the daemon went over max-buffered */
    uint64_t shed_lines, shed_conns;
    size_t last;           /* the total at the last sweep of this pause (SIZE_MAX: none) */
    uint64_t paused_at;    /* uv_now() when the pause began */
    uint64_t logged_ms;    /* uv_now() of the last pause logged */
    uint64_t pauses_quiet; /* pauses since then, not logged */
    uint64_t lines_logged_ms, lines_quiet; /* the same for lines refused at once */
    uint64_t stuck_logged_ms;              /* a sweep that found nothing to shed */
};

/* Set up b and count jansson's allocations (process-wide, idempotent). */
void budget_init(struct budget *b);

/* Bytes jansson has allocated and not freed, as a running count that may
 * wrap: only the difference of two readings means anything (a request's
 * parse). */
size_t budget_json_bytes(void);

/* Everything counted now, the pool's share included. */
size_t budget_total(const struct server *s);

/* Bytes were added (a read, a reply, a push): past max-buffered, hold
 * every connection's reads. */
void budget_check(struct server *s);

/* End of a loop turn: budget_check, and once under the low-water mark
 * give every held connection its reads back. */
void budget_turn(struct server *s);

/* Once a second: a pause that has not brought the total down in a whole
 * second while the backend answers promptly sheds what cannot drain. */
void budget_sweep(struct server *s);

#endif
