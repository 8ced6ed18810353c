/* lanes_fixture: the per-test world of the lane tests: a fresh
 * redis-server, a blocking connection, queue "q", and the invariant check
 * run after every test. Also small wrappers that assert each script's
 * reply shape, so tests read as the moves they make. */
#ifndef EMQ_TEST_LANES_FIXTURE_H
#define EMQ_TEST_LANES_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

#include "lanes.h"
#include "redis_server.h"

extern struct redis_server fx_redis;
extern redisContext *fx_conn;
extern struct keys fx_q;

void fx_setup(void);
void fx_teardown(void);

/* A lane test: its body, then the invariant check on fx_q as part of the
 * same test (Criterion 2.4 ignores assertions made in .fini, so the check
 * cannot live there). */
#define LANE_TEST(suite, name, ...)                                                                \
    static void name##_body(void);                                                                 \
    Test(suite, name, ##__VA_ARGS__)                                                               \
    {                                                                                              \
        name##_body();                                                                             \
        fx_assert_invariants(&fx_q);                                                               \
    }                                                                                              \
    static void name##_body(void)

/* Assert that queue k satisfies every invariant: the check (check_run.h)
 * finds none, in steps of one item and in the daemon's own steps. */
void fx_assert_invariants(const struct keys *k);

/* One leased job out of a claim reply. */
struct leased {
    char job[72];
    char group[72];
    char payload[256];
    long long attempt;
    char lease[32];
};

/* enqueue: returns 1 (enqueued) or 0 (duplicate); asserts no error. */
int fx_enqueue(const char *job, const char *group, const char *payload);
int fx_enqueue_delayed(const char *job, const char *group, long long delay_ms,
                       long long max_attempts);

/* claim / claim_flat n jobs into out (capacity n); returns how many. */
size_t fx_claim(size_t n, long long lease_ms, struct leased *out, long long *deadline);
size_t fx_claim_flat(size_t n, long long lease_ms, struct leased *out);

/* One status string of complete/release for one pair ("completed", ...). */
void fx_complete(const char *job, const char *lease, char *status, size_t cap);
/* Fail one lease (a 'fail' item of complete.lua, alone in its call; retry_ms
 * and dead as the script takes them): its status (the job's new state,
 * ELEASE or ENOJOB) into status[cap]. */
void fx_fail(const char *job, const char *lease, const char *error, const char *retry_ms,
             const char *dead, char *status, size_t cap);

/* A script that returns an integer; asserts the reply is one. */
long long fx_int(enum script_id id, ...);

/* A script that must fail: returns the error code word ("ELEASE", ...). */
void fx_error(char *code, size_t cap, enum script_id id, ...);

/* Ring contents, joined with ',' (e.g. "TENa,TENb"). */
void fx_ring(char *out, size_t cap);

/* Redis's count of calls of one command since the last CONFIG RESETSTAT
 * (INFO commandstats), 0 if none. */
long long fx_calls_of(const char *cmd);

/* Script calls Redis has run since CONFIG RESETSTAT, however sent: FCALL,
 * or in the fallback (EMQ_LANES_EVAL) EVALSHA and EVAL, less the EVALSHAs
 * refused NOSCRIPT. */
long long fx_script_runs(void);

/* Enqueue n jobs <prefix>0.. into TENa and lease them all into out
 * (asserting all n were leased). */
void fx_lease_n(const char *prefix, int n, struct leased *out);

/* Complete j[0..n) (n <= 16) in one call, keeping the rows keep_ms;
 * asserts each answered completed. */
void fx_complete_all(const struct leased *j, int n, const char *keep_ms);

/* HGET of a job row field into out ("" when absent). */
void fx_row(const char *job, const char *field, char *out, size_t cap);

/* A leased job's deadline: its score in the queue's active index (the row
 * does not keep it); asserts the job is there. */
long long fx_deadline(const char *job);

/* Redis's clock in ms (the scripts' now_ms), asserting TIME answered. */
long long fx_now_ms(void);

/* Wait until Redis's clock is past ms (a lease deadline, a due time):
 * what a test waits for when its point is that time passes. */
void fx_await_past(long long ms);

#endif
