/* mint: time-ordered job ids (see mint.h). */
#include "mint.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

/* Crockford's base32 alphabet, in ASCII order, so comparing the text of
 * two ids compares the numbers they encode. */
static const char crockford[32] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t mint_rand_next(struct mint_rand *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* splitmix64 spreads one number over the whole state, never all zero. */
void mint_rand_seed(struct mint_rand *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        r->s[i] = z ^ (z >> 31);
    }
}

int mint_rand_init(struct mint_rand *r)
{
    unsigned char *p = (unsigned char *)r->s;
    size_t got = 0;

    while (got < sizeof(r->s)) {
        ssize_t n = getrandom(p + got, sizeof(r->s) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)n;
    }
    /* xoshiro must not start from all zeros. */
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0)
        mint_rand_seed(r, 0);
    return 0;
}

void mint_init(struct mint *m)
{
    memset(m, 0, sizeof(*m));
}

/* Five bits of the 80-bit random part, starting at bit pos (0 = lowest). */
static unsigned rand_bits(const struct mint *m, unsigned pos)
{
    if (pos >= 64)
        return (unsigned)(m->rand_hi >> (pos - 64)) & 31;
    if (pos + 5 <= 64)
        return (unsigned)(m->rand_lo >> pos) & 31;
    return (unsigned)((m->rand_lo >> pos) | ((uint64_t)m->rand_hi << (64 - pos))) & 31;
}

static void draw(struct mint *m, struct mint_rand *r)
{
    m->rand_lo = mint_rand_next(r);
    m->rand_hi = (uint16_t)mint_rand_next(r);
}

int mint_next(struct mint *m, struct mint_rand *r, uint64_t now_ms, char out[MINT_ID_LEN + 1])
{
    if (now_ms > MINT_TIME_MAX)
        return MINT_EINVAL;
    if (!m->started || now_ms > m->last_ms) {
        m->last_ms = now_ms;
        draw(m, r);
    } else if (++m->rand_lo == 0 && ++m->rand_hi == 0) {
        /* All 80 bits wrapped: move on to the next millisecond instead. */
        if (m->last_ms == MINT_TIME_MAX)
            return MINT_EINVAL;
        m->last_ms++;
        draw(m, r);
    }
    m->started = true;
    memcpy(out, "JOB", 3);
    for (unsigned i = 0; i < 10; i++)
        out[3 + i] = crockford[(m->last_ms >> (45 - 5 * i)) & 31];
    for (unsigned i = 0; i < 16; i++)
        out[13 + i] = crockford[rand_bits(m, 75 - 5 * i)];
    out[MINT_ID_LEN] = '\0';
    return 0;
}

/* The value of one base32 character, or -1. */
static int digit(char c)
{
    const char *p = c != '\0' ? memchr(crockford, c, sizeof(crockford)) : NULL;

    return p ? (int)(p - crockford) : -1;
}

int mint_time(const char *id, size_t len, uint64_t *ms)
{
    uint64_t t = 0;

    if (len != MINT_ID_LEN || memcmp(id, "JOB", 3) != 0 || id[3] > '7')
        return MINT_EINVAL;
    for (size_t i = 3; i < MINT_ID_LEN; i++)
        if (digit(id[i]) < 0)
            return MINT_EINVAL;
    for (size_t i = 3; i < 13; i++)
        t = (t << 5) | (uint64_t)digit(id[i]);
    *ms = t;
    return 0;
}
