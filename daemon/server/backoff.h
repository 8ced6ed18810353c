/* backoff: failed hellos per client address. After BACKOFF_FREE failures
 * from one address (across its connections), hellos from it are refused
 * with EAUTH, the token unchecked, for a window (auth-backoff-ms) that doubles with each
 * further failure, so guessing a token from one address costs time that
 * grows exponentially. The table is bounded (BACKOFF_ENTRIES, the
 * stalest entry goes first) and entries expire, so addresses that come
 * and go cannot grow it. */
#ifndef EMQ_BACKOFF_H
#define EMQ_BACKOFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "map.h"

#define BACKOFF_FREE      5      /* failures from an address before its first window */
#define BACKOFF_MAX_MS    60000  /* the longest window, unless the first is longer */
#define BACKOFF_FORGET_MS 600000 /* an address quiet this long (no window open) is forgotten */
#define BACKOFF_ENTRIES   4096   /* addresses remembered at once */

/* The table, one in struct server. */
struct backoff {
    struct map addrs; /* address -> struct backoff_entry (owned) */
};

void backoff_init(struct backoff *b);
void backoff_deinit(struct backoff *b);

/* Milliseconds left of addr's window at now (uv_now), 0 when its hellos
 * may be checked. A hello refused in a window is counted for the log. */
uint64_t backoff_wait(struct backoff *b, const char *addr, uint64_t now);

/* A hello from addr failed (a wrong or missing token). From the
 * BACKOFF_FREE-th failure on, each opens a window of first_ms (the
 * auth-backoff-ms setting; 0: none), doubled per failure past that one,
 * at most BACKOFF_MAX_MS or first_ms; the window is logged once. */
void backoff_failed(struct backoff *b, const char *addr, uint64_t now, uint64_t first_ms);

/* A hello from addr succeeded: its count starts again. */
void backoff_passed(struct backoff *b, const char *addr);

/* Forget entries quiet for BACKOFF_FORGET_MS (from the server's sweep). */
void backoff_sweep(struct backoff *b, uint64_t now);

/* The address a connection is counted under: its IP for TCP ("IP:PORT"
 * less the port), "unix" for every unix-socket connection. Into buf. */
const char *backoff_key(const char *client_addr, bool unix_socket, char *buf, size_t cap);

#endif
