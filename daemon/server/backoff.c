/* backoff: failed hellos per client address (backoff.h). */
#include "backoff.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

/* One address. */
struct backoff_entry {
    unsigned failures; /* since its last success, or since it was forgotten */
    uint64_t last;     /* uv_now of its last failure */
    uint64_t until;    /* end of its window; 0 or past: none */
    uint64_t refused;  /* hellos refused in its current window */
};

void backoff_init(struct backoff *b)
{
    map_init(&b->addrs);
}

static void drop_all(struct map *m)
{
    size_t i;
    for (struct map_entry *e = map_first(m, &i); e != NULL; e = map_next(m, &i, e))
        free(e->value);
}

void backoff_deinit(struct backoff *b)
{
    drop_all(&b->addrs);
    map_deinit(&b->addrs);
}

const char *backoff_key(const char *client_addr, bool unix_socket, char *buf, size_t cap)
{
    if (unix_socket)
        return "unix";
    const char *colon = strrchr(client_addr, ':');
    size_t n = colon != NULL ? (size_t)(colon - client_addr) : strlen(client_addr);
    if (n >= cap)
        n = cap - 1;
    memcpy(buf, client_addr, n);
    buf[n] = '\0';
    return buf;
}

uint64_t backoff_wait(struct backoff *b, const char *addr, uint64_t now)
{
    struct backoff_entry *e = map_get(&b->addrs, addr, strlen(addr));
    if (e == NULL || e->until <= now)
        return 0;
    e->refused++;
    return e->until - now;
}

static bool stale(const struct backoff_entry *e, uint64_t now)
{
    return e->until <= now && now - e->last >= BACKOFF_FORGET_MS;
}

void backoff_sweep(struct backoff *b, uint64_t now)
{
    /* Collect first: entries must not be removed while iterating. */
    char *gone[64];
    size_t n;
    do {
        size_t i;
        n = 0;
        for (struct map_entry *e = map_first(&b->addrs, &i); e != NULL && n < 64;
             e = map_next(&b->addrs, &i, e))
            if (stale(e->value, now))
                gone[n++] = e->key;
        for (size_t k = 0; k < n; k++)
            free(map_del(&b->addrs, gone[k], strlen(gone[k])));
    } while (n == 64);
}

/* Room for one more address: the stale go, else the one whose last
 * failure is oldest (an address in a long window may so lose it early,
 * but only when BACKOFF_ENTRIES others failed since). */
static void make_room(struct backoff *b, uint64_t now)
{
    backoff_sweep(b, now);
    if (b->addrs.count < BACKOFF_ENTRIES)
        return;
    size_t i;
    struct map_entry *oldest = NULL;
    for (struct map_entry *e = map_first(&b->addrs, &i); e != NULL; e = map_next(&b->addrs, &i, e))
        if (oldest == NULL || ((struct backoff_entry *)e->value)->last <
                                  ((struct backoff_entry *)oldest->value)->last)
            oldest = e;
    free(map_del(&b->addrs, oldest->key, oldest->klen));
}

void backoff_failed(struct backoff *b, const char *addr, uint64_t now, uint64_t first_ms)
{
    if (first_ms == 0)
        return;
    size_t len = strlen(addr);
    struct backoff_entry *e = map_get(&b->addrs, addr, len);
    if (e == NULL) {
        if (b->addrs.count >= BACKOFF_ENTRIES)
            make_room(b, now);
        if ((e = calloc(1, sizeof(*e))) == NULL)
            return; /* out of memory: this failure goes uncounted */
        if (map_put(&b->addrs, addr, len, e) != 0) {
            free(e);
            return;
        }
    }
    e->last = now;
    if (++e->failures < BACKOFF_FREE)
        return;
    unsigned shift = e->failures - BACKOFF_FREE;
    uint64_t max = first_ms > BACKOFF_MAX_MS ? first_ms : BACKOFF_MAX_MS;
    uint64_t ms = shift >= 16 ? max : first_ms << shift;
    if (ms > max)
        ms = max;
    /* A failure can only be counted outside a window (hellos in one are
     * refused unchecked), so each window is opened, and logged, once. */
    log_event(LOG_WARN, "failed hellos from an address: refusing its hellos for a while",
              "addr=%s failures=%u backoff_ms=%llu refused_last_window=%llu", addr, e->failures,
              (unsigned long long)ms, (unsigned long long)e->refused);
    e->until = now + ms;
    e->refused = 0;
}

void backoff_passed(struct backoff *b, const char *addr)
{
    free(map_del(&b->addrs, addr, strlen(addr)));
}
