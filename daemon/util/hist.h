/* hist: a fixed-bucket histogram of durations, as the metrics endpoint
 * exports it (a Prometheus histogram: a count per bucket, their total and
 * their sum). The buckets are the same for every histogram of this kind,
 * 1 ms to 60 s: job waits and runs span that range. Recording is a few
 * compares and adds into the struct itself: O(1), no allocation, fit for
 * every lease and settle. */
#ifndef EMQ_HIST_H
#define EMQ_HIST_H

#include <stddef.h>
#include <stdint.h>

#define HIST_BUCKETS 15

/* Upper bounds of the buckets, in microseconds; one more bucket past the
 * last counts the rest. */
extern const uint64_t hist_bounds_us[HIST_BUCKETS];

struct hist {
    uint64_t n[HIST_BUCKETS + 1]; /* per bucket (not cumulative) */
    uint64_t count;               /* everything recorded */
    uint64_t sum_us;              /* and its sum */
};

/* The bucket of v among n ascending upper bounds: the first bound v does
 * not exceed, or n when it exceeds them all. */
size_t hist_bucket(const uint64_t *bounds, size_t n, uint64_t v);

/* Record one duration of us microseconds. */
void hist_record(struct hist *h, uint64_t us);

#endif
