/* mint: ids sort in mint order, within and across milliseconds. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "brand.h"
#include "mint.h"

static void well_formed(const char *id)
{
    static const char alphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

    cr_assert_eq(strlen(id), MINT_ID_LEN, "%s", id);
    cr_assert_eq(memcmp(id, "JOB", 3), 0, "%s", id);
    for (size_t i = 3; i < MINT_ID_LEN; i++)
        cr_assert_not_null(strchr(alphabet, id[i]), "%s: bad character at %zu", id, i);
    cr_assert(brand_job_valid(id, MINT_ID_LEN), "%s passes the brand rules", id);
    cr_assert(id[3] <= '7', "48 bits of time leave the first character <= 7");
}

Test(mint, shape_and_time_round_trip)
{
    static const uint64_t times[] = {0, 1, 31, 32, 1469918176385, 1700000000000, MINT_TIME_MAX};
    struct mint_rand r;
    struct mint m;
    char id[MINT_ID_LEN + 1];
    uint64_t ms;

    mint_rand_seed(&r, 1);
    mint_init(&m);
    for (size_t i = 0; i < sizeof(times) / sizeof(times[0]); i++) {
        cr_assert_eq(mint_next(&m, &r, times[i], id), 0);
        well_formed(id);
        cr_assert_eq(mint_time(id, strlen(id), &ms), 0);
        cr_assert_eq(ms, times[i], "%s", id);
    }
}

Test(mint, known_time_encodings)
{
    struct mint_rand r;
    struct mint m;
    char id[MINT_ID_LEN + 1];

    mint_rand_seed(&r, 2);
    mint_init(&m);
    cr_assert_eq(mint_next(&m, &r, 0, id), 0);
    cr_assert_eq(memcmp(id, "JOB0000000000", 13), 0, "%s", id);
    mint_init(&m);
    cr_assert_eq(mint_next(&m, &r, 1469918176385, id), 0); /* the ULID spec's example */
    cr_assert_eq(memcmp(id, "JOB01ARYZ6S41", 13), 0, "%s", id);
    mint_init(&m);
    cr_assert_eq(mint_next(&m, &r, MINT_TIME_MAX, id), 0);
    cr_assert_eq(memcmp(id, "JOB7ZZZZZZZZZ", 13), 0, "%s", id);
}

Test(mint, deterministic_for_a_seed)
{
    struct mint_rand r1, r2;
    struct mint m1, m2;
    char a[MINT_ID_LEN + 1], b[MINT_ID_LEN + 1];

    mint_rand_seed(&r1, 42);
    mint_rand_seed(&r2, 42);
    mint_init(&m1);
    mint_init(&m2);
    for (uint64_t t = 1000; t < 1100; t += 3) {
        cr_assert_eq(mint_next(&m1, &r1, t, a), 0);
        cr_assert_eq(mint_next(&m2, &r2, t, b), 0);
        cr_assert_str_eq(a, b);
    }
    mint_rand_seed(&r2, 43);
    mint_init(&m2);
    cr_assert_eq(mint_next(&m2, &r2, 2000, b), 0);
    mint_init(&m1);
    cr_assert_eq(mint_next(&m1, &r1, 2000, a), 0);
    cr_assert_str_neq(a + 13, b + 13, "another seed, other random bits");
}

Test(mint, monotonic_within_one_millisecond)
{
    struct mint_rand r;
    struct mint m;
    char prev[MINT_ID_LEN + 1], id[MINT_ID_LEN + 1];

    mint_rand_seed(&r, 7);
    mint_init(&m);
    cr_assert_eq(mint_next(&m, &r, 5000, prev), 0);
    for (int i = 0; i < 10000; i++) {
        cr_assert_eq(mint_next(&m, &r, 5000, id), 0);
        cr_assert_gt(strcmp(id, prev), 0, "%s after %s", id, prev);
        cr_assert_eq(memcmp(id, prev, 13), 0, "same millisecond, same time part");
        memcpy(prev, id, sizeof(id));
    }
}

Test(mint, clock_stepping_back_keeps_the_order)
{
    struct mint_rand r;
    struct mint m;
    char a[MINT_ID_LEN + 1], b[MINT_ID_LEN + 1];
    uint64_t ms;

    mint_rand_seed(&r, 8);
    mint_init(&m);
    cr_assert_eq(mint_next(&m, &r, 9000, a), 0);
    cr_assert_eq(mint_next(&m, &r, 8000, b), 0);
    cr_assert_gt(strcmp(b, a), 0);
    cr_assert_eq(mint_time(b, MINT_ID_LEN, &ms), 0);
    cr_assert_eq(ms, 9000, "the later time is kept");
}

Test(mint, increment_carries)
{
    struct mint_rand r;
    struct mint m;
    char a[MINT_ID_LEN + 1], b[MINT_ID_LEN + 1];
    uint64_t ms;

    mint_rand_seed(&r, 9);
    mint_init(&m);
    cr_assert_eq(mint_next(&m, &r, 100, a), 0);
    m.rand_lo = UINT64_MAX - 1; /* the low 64 bits about to wrap into the high 16 */
    m.rand_hi = 0x00ff;
    cr_assert_eq(mint_next(&m, &r, 100, a), 0);
    cr_assert_eq(mint_next(&m, &r, 100, b), 0);
    cr_assert_gt(strcmp(b, a), 0, "%s after %s", b, a);
    cr_assert_eq(m.rand_hi, 0x0100);
    cr_assert_eq(m.rand_lo, 0);

    m.rand_lo = UINT64_MAX; /* all 80 bits about to wrap */
    m.rand_hi = 0xffff;
    cr_assert_eq(mint_next(&m, &r, 100, b), 0);
    cr_assert_gt(strcmp(b, a), 0);
    cr_assert_eq(mint_time(b, MINT_ID_LEN, &ms), 0);
    cr_assert_eq(ms, 101, "a full wrap moves to the next millisecond");

    m.last_ms = MINT_TIME_MAX;
    m.rand_lo = UINT64_MAX;
    m.rand_hi = 0xffff;
    cr_assert_eq(mint_next(&m, &r, MINT_TIME_MAX, b), MINT_EINVAL, "nowhere left to go");
}

static int cmp_ids(const void *a, const void *b)
{
    return strcmp(a, b);
}

Test(mint, sorted_text_is_mint_order)
{
    enum { N = 5000 };
    static char ids[N][MINT_ID_LEN + 1], sorted[N][MINT_ID_LEN + 1];
    struct mint_rand r, pick;
    struct mint m;
    uint64_t now = 1700000000000;

    mint_rand_seed(&r, 11);
    mint_rand_seed(&pick, 12);
    mint_init(&m);
    for (int i = 0; i < N; i++) {
        /* Bursts in one millisecond, gaps, and now and then a clock step back. */
        uint64_t dice = mint_rand_next(&pick) % 10;
        if (dice < 3)
            now += dice;
        else if (dice == 9)
            now -= 2;
        cr_assert_eq(mint_next(&m, &r, now, ids[i]), 0);
    }
    memcpy(sorted, ids, sizeof(ids));
    /* Shuffle, then sort as text: the mint order must come back. */
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(mint_rand_next(&pick) % (uint64_t)(i + 1));
        char t[MINT_ID_LEN + 1];
        memcpy(t, sorted[i], sizeof(t));
        memcpy(sorted[i], sorted[j], sizeof(t));
        memcpy(sorted[j], t, sizeof(t));
    }
    qsort(sorted, N, sizeof(sorted[0]), cmp_ids);
    for (int i = 0; i < N; i++)
        cr_assert_str_eq(sorted[i], ids[i], "position %d", i);
}

Test(mint, time_out_of_range)
{
    struct mint_rand r;
    struct mint m;
    char id[MINT_ID_LEN + 1];

    mint_rand_seed(&r, 3);
    mint_init(&m);
    cr_assert_eq(mint_next(&m, &r, MINT_TIME_MAX + 1, id), MINT_EINVAL);
    cr_assert_eq(mint_next(&m, &r, UINT64_MAX, id), MINT_EINVAL);
}

Test(mint, time_of_malformed_ids)
{
    uint64_t ms;

    cr_assert_eq(mint_time("JOB01ARYZ6S41TSV4RRFFQ69G5FA", 28, &ms), MINT_EINVAL, "too short");
    cr_assert_eq(mint_time("JOB01ARYZ6S41TSV4RRFFQ69G5FAVX", 30, &ms), MINT_EINVAL);
    cr_assert_eq(mint_time("TEN01ARYZ6S41TSV4RRFFQ69G5FAV", 29, &ms), MINT_EINVAL);
    cr_assert_eq(mint_time("JOB81ARYZ6S41TSV4RRFFQ69G5FAV", 29, &ms), MINT_EINVAL, "over 48 bits");
    cr_assert_eq(mint_time("JOB01ARYZ6S41TSV4RRFFQ69G5FAU", 29, &ms), MINT_EINVAL, "no U");
    cr_assert_eq(mint_time("JOB01aryz6s41TSV4RRFFQ69G5FAV", 29, &ms), MINT_EINVAL, "lower case");
    cr_assert_eq(mint_time("JOB01ARYZ6S41TSV4RRFFQ69G5FAV", 29, &ms), 0);
    cr_assert_eq(ms, 1469918176385);
}

Test(mint, kernel_seed)
{
    struct mint_rand a, b;

    cr_assert_eq(mint_rand_init(&a), 0);
    cr_assert_eq(mint_rand_init(&b), 0);
    cr_assert(memcmp(&a, &b, sizeof(a)) != 0, "two kernel seeds differ");
    cr_assert_neq(mint_rand_next(&a), mint_rand_next(&b));
}
