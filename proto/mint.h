/* mint: job ids in mint order. An id is "JOB" then a 26-character ULID in
 * Crockford base32: a 48-bit millisecond timestamp, then 80 random bits.
 * Within one millisecond (or when the clock steps back) the random part of
 * the previous id is incremented instead, so within one minter the
 * byte-wise order of the ids is the order they were minted in; that order
 * is what score-0 sorted sets serve oldest first. */
#ifndef EMQ_MINT_H
#define EMQ_MINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MINT_ID_LEN   29 /* "JOB" + 26 */
#define MINT_TIME_MAX ((UINT64_C(1) << 48) - 1)

/* Expected conditions. */
enum { MINT_EINVAL = 1 };

/* A random source: xoshiro256** state. Seed it from getrandom() with
 * mint_rand_init(), or from a number with mint_rand_seed() (tests). */
struct mint_rand {
    uint64_t s[4];
};

/* Seed r from the kernel. Returns 0 or -errno. */
int mint_rand_init(struct mint_rand *r);

/* Seed r deterministically from seed. */
void mint_rand_seed(struct mint_rand *r, uint64_t seed);

/* The next 64 random bits. */
uint64_t mint_rand_next(struct mint_rand *r);

/* The state of one minter: the time and random part of the last id. */
struct mint {
    uint64_t last_ms;
    uint16_t rand_hi; /* the 80 random bits: 16 high ... */
    uint64_t rand_lo; /* ... and 64 low */
    bool started;
};

/* Set up a minter that has minted nothing yet. */
void mint_init(struct mint *m);

/* Mint the next id for the wall-clock time now_ms into out (MINT_ID_LEN
 * bytes and a NUL). A now_ms earlier than the last id's time reuses that
 * time. Returns 0, or MINT_EINVAL when now_ms exceeds 48 bits. */
int mint_next(struct mint *m, struct mint_rand *r, uint64_t now_ms, char out[MINT_ID_LEN + 1]);

/* The millisecond time inside a minted id (len bytes). Returns 0, or
 * MINT_EINVAL when id is not of the minted shape. */
int mint_time(const char *id, size_t len, uint64_t *ms);

#endif
