/* hist: see hist.h. */
#include "hist.h"

const uint64_t hist_bounds_us[HIST_BUCKETS] = {1000,    2500,    5000,     10000,    25000,
                                               50000,   100000,  250000,   500000,   1000000,
                                               2500000, 5000000, 10000000, 30000000, 60000000};

size_t hist_bucket(const uint64_t *bounds, size_t n, uint64_t v)
{
    size_t b = 0;
    while (b < n && v > bounds[b])
        b++;
    return b;
}

void hist_record(struct hist *h, uint64_t us)
{
    h->n[hist_bucket(hist_bounds_us, HIST_BUCKETS, us)]++;
    h->count++;
    h->sum_us += us;
}
