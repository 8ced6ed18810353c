/* Reliability: workers that die, stop reading, hang, or crowd a ceiling.
 * Each scenario enqueues a known job set over several groups with
 * ceilings, runs workers, injects the fault, and ends with wl_account():
 * every job completed, none missing, none active or pending, check clean. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "fixture.h"
#include "workload.h"

TestSuite(rel_workers, .init = fx_setup, .fini = fx_teardown, .timeout = 120);

#define WORKERS_MAX 50

static struct wl_worker workers[WORKERS_MAX];

static void start_workers(struct workload *wl, int n, int port, int count, int lease_ms,
                          int hold_ms)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(wl_worker_start(&workers[i], wl, port, count, lease_ms, hold_ms), 0);
}

/* Stop the workers; none may have seen an unexpected reply. */
static void stop_workers(int n)
{
    for (int i = 0; i < n; i++)
        wl_worker_stop(&workers[i]);
    for (int i = 0; i < n; i++)
        cr_assert_eq(atomic_load(&workers[i].errors), 0, "worker %d got unexpected replies", i);
}

/* Run n workers (count per claim, hold_ms per job) until every job of
 * the set was completed, then stop them. */
static void drain(struct workload *wl, int n, int count, int hold_ms)
{
    start_workers(wl, n, fx_emqd.port, count, 10000, hold_ms);
    cr_assert(wl_await_done(wl, 60000), "the set was not drained");
    stop_workers(n);
}

/* A forked worker that claims count jobs on an hour's lease, tells the
 * parent how many it holds through fd, and then sits on them until
 * killed. */
static pid_t hold_jobs_in_child(int port, const char *queue, int count, int *held)
{
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pfd[0]);
        int n = -1;
        struct tc_conn *c = tc_connect(port);
        json_t *r = c ? tc_call(c,
                                "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":%d,"
                                "\"lease_ms\":3600000}",
                                queue, count)
                      : NULL;
        if (r != NULL && tc_ok(r))
            n = (int)json_array_size(json_object_get(r, "jobs"));
        json_decref(r);
        if (write(pfd[1], &n, sizeof(n)) != sizeof(n))
            _exit(1);
        for (;;)
            pause(); /* mid-job, for ever */
    }
    close(pfd[1]);
    cr_assert_eq(read(pfd[0], held, sizeof(*held)), (ssize_t)sizeof(*held));
    close(pfd[0]);
    return pid;
}

/* A worker SIGKILLed mid-job: its connection closes, so its jobs go back
 * at once. Their lease is an hour, far past the deadline of the wait
 * below: only the release on disconnect can hand them to the other
 * workers in time. */
Test(rel_workers, a_worker_killed_mid_job_has_its_jobs_redelivered_at_once)
{
    struct workload wl;
    wl_init(&wl, "rk", "k", 120, 6, 2);
    cr_assert_eq(wl_enqueue(&wl, fx_emqd.port, 0, wl.n, NULL), wl.n);
    int held = 0;
    pid_t child = hold_jobs_in_child(fx_emqd.port, wl.queue, 6, &held);
    cr_assert_eq(held, 6, "the doomed worker holds %d jobs", held);
    struct tc_conn *c = fx_conn();
    cr_assert_eq(fx_stat(c, wl.queue, "active"), 6);

    /* The others are at work when the doomed one dies. */
    start_workers(&wl, 4, fx_emqd.port, 4, 10000, 1);
    await(atomic_load(&wl.completed_total) > 0, "the other workers to complete a job");
    cr_assert_eq(kill(child, SIGKILL), 0);
    cr_assert_eq(waitpid(child, NULL, 0), child);
    cr_assert(wl_await_done(&wl, 20000), "jobs of the killed worker were not redelivered");
    stop_workers(4);
    /* The killed worker's six jobs were attempted twice. */
    int twice = 0;
    char id[64];
    for (int i = 0; i < wl.n; i++) {
        wl_job_id(&wl, i, id, sizeof(id));
        json_t *r = tc_call(c, "{\"op\":\"job\",\"queue\":\"%s\",\"job\":\"%s\"}", wl.queue, id);
        assert_ok(r);
        twice += jint(json_object_get(r, "job"), "attempts") >= 2;
        json_decref(r);
    }
    cr_assert_eq(twice, 6, "%d jobs show a second attempt", twice);
    tc_close(c);
    wl_account(&wl, fx_emqd.port);
    wl_deinit(&wl);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* Track the daemon's peak RSS while a wait polls. */
static long rss_peak;

static void sample_rss(void)
{
    long rss = emqd_rss_kb(&fx_emqd);
    rss_peak = rss > rss_peak ? rss : rss_peak;
}

/* The daemon's count of its client connections; samples its RSS too. */
static long long connections(void)
{
    sample_rss();
    return emqd_metric(&fx_emqd, "emqd_connections");
}

/* A worker that streams and never reads: once its unwritten output passes
 * --max-output the daemon drops it and releases its leases (an hour, so
 * only the release can bring them back), and its memory stays bounded. The
 * cut is seen in the daemon's own counters: its connection count drops,
 * and the jobs it claimed for the stream (which pushed past the cap) are
 * all pending again. */
Test(rel_workers, a_worker_that_stops_reading_is_cut_at_the_output_cap)
{
    fx_teardown();
    emqd_rss_shows_live_memory(); /* RSS is the measure here */
    const char *const extra[] = {"--max-output", "1048576", NULL};
    fx_start(extra);
    struct workload wl;
    wl_init(&wl, "rs", "s", 64, 4, 100);
    wl.payload_bytes = 256 * 1024; /* 16 MiB in all: past any socket buffer */
    cr_assert_eq(wl_enqueue(&wl, fx_emqd.port, 0, wl.n, NULL), wl.n);
    long rss0 = emqd_rss_kb(&fx_emqd);
    cr_assert_gt(rss0, 0);
    rss_peak = rss0;

    struct tc_conn *c = fx_conn();
    struct tc_conn *slow = fx_conn();
    await(connections() == 2, "emqd to count the two connections");
    cr_assert_eq(tc_send_line(slow, "{\"op\":\"stream\",\"queue\":\"rs\",\"credit\":1000,"
                                    "\"lease_ms\":3600000}"),
                 0);
    await(connections() == 1, "emqd to cut the slow reader");
    char series[96];
    snprintf(series, sizeof(series), "emqd_jobs_total{queue=\"%s\",event=\"claimed\"}", wl.queue);
    long long claimed = emqd_metric(&fx_emqd, series);
    cr_assert_gt(claimed, 0, "the stream never took a job");
    /* The release on disconnect is one more backend call: once the daemon
     * is quiet, it has landed. */
    fx_await_quiet(&fx_emqd);
    sample_rss();
    long long active = fx_stat(c, wl.queue, "active");
    cr_assert_eq(active, 0,
                 "the slow reader's leases were not released (%lld of %lld still active)", active,
                 claimed);
    cr_assert_eq(fx_stat(c, wl.queue, "pending"), wl.n, "every job is pending again");
    cr_assert_lt(rss_peak - rss0, 1024 + 64 * 1024, "emqd grew by %ld KiB", rss_peak - rss0);
    /* It was disconnected: what it can still read ends in EOF, short of
     * all the jobs. */
    int pushes = 0;
    json_t *p;
    while ((p = tc_read(slow, wait_deadline_ms(0))) != NULL) {
        pushes += json_object_get(p, "push") != NULL;
        json_decref(p);
    }
    cr_assert(tc_read_eof(slow, wait_deadline_ms(0)), "the slow reader is still connected");
    cr_assert_lt(pushes, wl.n, "the slow reader got every job (%d)", pushes);
    tc_close(slow);

    /* Three 256 KiB jobs per claim, most of the cap in one reply, reach a
     * worker that reads (four would overflow the test client's 1 MiB line
     * buffer; test_operate covers a reply larger than the cap). */
    drain(&wl, 2, 3, 0);
    cr_assert_lt(emqd_rss_kb(&fx_emqd) - rss0, 1024 + 64 * 1024);
    tc_close(c);
    wl_account(&wl, fx_emqd.port);
    wl_deinit(&wl);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* A worker that hangs without closing: its short leases run out, the
 * reaper hands the jobs to the others, and its late complete with the old
 * lease is refused. */
Test(rel_workers, a_hung_worker_loses_its_leases_and_its_late_complete_is_refused)
{
    struct workload wl;
    wl_init(&wl, "rh", "h", 90, 6, 2);
    cr_assert_eq(wl_enqueue(&wl, fx_emqd.port, 0, wl.n, NULL), wl.n);
    struct tc_conn *hung = fx_conn();
    json_t *r = tc_call(hung, "{\"op\":\"claim\",\"queue\":\"rh\",\"count\":6,\"lease_ms\":300}");
    json_t *held = claim_jobs(r);
    cr_assert_eq(json_array_size(held), 6);

    drain(&wl, 4, 4, 1); /* the hung worker's jobs must be reaped for this */
    for (size_t k = 0; k < json_array_size(held); k++) {
        json_t *j = json_array_get(held, k);
        json_t *d = tc_call(hung,
                            "{\"op\":\"complete\",\"queue\":\"rh\",\"job\":\"%s\","
                            "\"lease\":\"%s\"}",
                            jstr(j, "job"), jstr(j, "lease"));
        assert_err(d, "ELEASE");
        json_decref(d);
    }
    json_decref(r);
    tc_close(hung);
    wl_account(&wl, fx_emqd.port);
    wl_deinit(&wl);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}

/* 50 workers on ceilings of 1: no group ever has two jobs in flight, as
 * the workers themselves see it (counted from receipt to complete). */
Test(rel_workers, ceilings_hold_under_contention)
{
    struct workload wl;
    wl_init(&wl, "rc", "c", 240, 8, 1);
    cr_assert_eq(wl_enqueue(&wl, fx_emqd.port, 0, wl.n, NULL), wl.n);
    drain(&wl, WORKERS_MAX, 2, 2);
    for (int g = 0; g < wl.groups; g++) {
        int max = atomic_load(&wl.max_inflight[g]);
        cr_assert_eq(max, 1, "group %d had %d jobs in flight at once", g, max);
    }
    wl_account(&wl, fx_emqd.port);
    wl_deinit(&wl);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (under ASan: a leak?)");
}
