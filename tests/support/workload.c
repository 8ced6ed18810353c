/* workload: a known job set, worker threads, the closing accounting (see
 * workload.h). */
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "emqd_proc.h"
#include "wait.h"

void wl_init(struct workload *wl, const char *queue, const char *tag, int n, int groups,
             int ceiling)
{
    memset(wl, 0, sizeof(*wl));
    wl->queue = queue;
    wl->tag = tag;
    wl->n = n;
    wl->groups = groups < 1 ? 1 : groups > WL_GROUPS_MAX ? WL_GROUPS_MAX : groups;
    wl->ceiling = ceiling;
    wl->done = calloc((size_t)n, sizeof(*wl->done));
    wl->unacked = calloc((size_t)n, 1);
    cr_assert(wl->done != NULL && wl->unacked != NULL);
}

void wl_deinit(struct workload *wl)
{
    free(wl->done);
    free(wl->unacked);
    wl->done = NULL;
    wl->unacked = NULL;
}

void wl_job_id(const struct workload *wl, int i, char *buf, size_t cap)
{
    snprintf(buf, cap, "JOB%s%06d", wl->tag, i);
}

void wl_group_id(const struct workload *wl, int g, char *buf, size_t cap)
{
    snprintf(buf, cap, "TEN%sg%d", wl->tag, g);
}

int wl_index(const struct workload *wl, const char *job)
{
    size_t t = strlen(wl->tag);
    if (strncmp(job, "JOB", 3) != 0 || strncmp(job + 3, wl->tag, t) != 0)
        return -1;
    char *end;
    long i = strtol(job + 3 + t, &end, 10);
    return *end == '\0' && i >= 0 && i < wl->n ? (int)i : -1;
}

int wl_enqueue_one(struct workload *wl, struct tc_conn *c, int i, const char **code)
{
    static _Thread_local char err[32];
    char id[64], g[64];
    wl_job_id(wl, i, id, sizeof(id));
    wl_group_id(wl, i % wl->groups, g, sizeof(g));
    size_t pad = wl->payload_bytes > 0 ? (size_t)wl->payload_bytes : 0;
    char *fill = malloc(pad + 1);
    cr_assert_not_null(fill);
    memset(fill, 'x', pad);
    fill[pad] = '\0';
    json_t *r = tc_call(c,
                        "{\"op\":\"enqueue\",\"queue\":\"%s\",\"job\":\"%s\",\"group\":\"%s\","
                        "\"payload\":{\"i\":%d,\"pad\":\"%s\"}}",
                        wl->queue, id, g, i, fill);
    free(fill);
    const char *verdict = json_string_value(json_object_get(r, "verdict"));
    int rc = -1;
    if (tc_ok(r) && verdict != NULL)
        rc = strcmp(verdict, "enqueued") == 0 ? 1 : strcmp(verdict, "duplicate") == 0 ? 0 : -1;
    snprintf(err, sizeof(err), "%s", r != NULL ? tc_error(r) : "(no reply)");
    if (code != NULL)
        *code = err;
    json_decref(r);
    return rc;
}

int wl_enqueue(struct workload *wl, int port, int from, int to, int *dup)
{
    int enqueued = 0, dups = 0;
    struct tc_conn *c = tc_connect(port);
    if (c == NULL)
        goto out;
    if (wl->ceiling > 0 && from == 0)
        for (int k = 0; k < wl->groups; k++) {
            char g[64];
            wl_group_id(wl, k, g, sizeof(g));
            json_t *r =
                tc_call(c, "{\"op\":\"limit\",\"queue\":\"%s\",\"group\":\"%s\",\"max\":%d}",
                        wl->queue, g, wl->ceiling);
            cr_assert(tc_ok(r), "limit %s refused", g);
            json_decref(r);
        }
    for (int i = from; i < to; i++) {
        const char *code;
        int rc = wl_enqueue_one(wl, c, i, &code);
        enqueued += rc == 1;
        dups += rc == 0;
        if (rc < 0 && strcmp(code, "(no reply)") == 0)
            break; /* the daemon went away: the caller decides */
    }
    tc_close(c);
out:
    if (dup != NULL)
        *dup = dups;
    return enqueued;
}

/* Settle one claimed job: the in-flight record drops before complete is
 * sent, so a job the daemon hands out right after our complete can never
 * be counted together with this one. */
static void settle(struct wl_worker *w, struct tc_conn *c, const json_t *job)
{
    struct workload *wl = w->wl;
    const char *id = json_string_value(json_object_get(job, "job"));
    const char *lease = json_string_value(json_object_get(job, "lease"));
    int i = id != NULL ? wl_index(wl, id) : -1;
    if (i < 0 || lease == NULL) {
        atomic_fetch_add(&w->errors, 1);
        return;
    }
    int g = i % wl->groups;
    int now = atomic_fetch_add(&wl->inflight[g], 1) + 1;
    int max = atomic_load(&wl->max_inflight[g]);
    while (now > max && !atomic_compare_exchange_weak(&wl->max_inflight[g], &max, now))
        ;
    if (w->hold_ms > 0)
        wait_sleep_ms(w->hold_ms); /* working on it */
    atomic_fetch_sub(&wl->inflight[g], 1);
    for (int tries = 0; tries < 100 && !atomic_load(&w->stop); tries++) {
        json_t *r =
            tc_call(c, "{\"op\":\"complete\",\"queue\":\"%s\",\"job\":\"%s\",\"lease\":\"%s\"}",
                    wl->queue, id, lease);
        int ok = tc_ok(r);
        const char *e = r != NULL ? tc_error(r) : "";
        int again = r != NULL && strcmp(e, "EUNAVAILABLE") == 0;
        if (ok) {
            atomic_fetch_add(&wl->done[i], 1);
            atomic_fetch_add(&wl->completed_total, 1);
        } else if (again) {
            atomic_fetch_add(&w->unavailable, 1);
        } else if (r != NULL && strcmp(e, "ELEASE") == 0) {
            atomic_fetch_add(&w->refused, 1);
        } else if (r != NULL) {
            atomic_fetch_add(&w->errors, 1);
        }
        json_decref(r);
        if (!again)
            return;        /* done, refused, or the connection is gone */
        wait_sleep_ms(50); /* a retry's backoff */
    }
}

static void *worker_main(void *arg)
{
    struct wl_worker *w = arg;
    struct tc_conn *c = NULL;
    while (!atomic_load(&w->stop)) {
        if (c == NULL && (c = tc_connect(w->port)) == NULL) {
            wait_sleep_ms(50); /* the daemon is restarting: a retry's backoff */
            continue;
        }
        json_t *r = tc_call(c,
                            "{\"op\":\"claim\",\"queue\":\"%s\",\"count\":%d,\"lease_ms\":%d,"
                            "\"wait_ms\":200}",
                            w->wl->queue, w->count, w->lease_ms);
        if (r == NULL) {
            c = tc_close(c);
            continue;
        }
        json_t *jobs = json_object_get(r, "jobs");
        if (!tc_ok(r) && strcmp(tc_error(r), "EUNAVAILABLE") == 0) {
            atomic_fetch_add(&w->unavailable, 1);
            wait_sleep_ms(50); /* a retry's backoff */
        } else if (!tc_ok(r))
            atomic_fetch_add(&w->errors, 1);
        for (size_t k = 0; k < json_array_size(jobs); k++)
            settle(w, c, json_array_get(jobs, k));
        json_decref(r);
    }
    tc_close(c);
    return NULL;
}

int wl_worker_start(struct wl_worker *w, struct workload *wl, int port, int count, int lease_ms,
                    int hold_ms)
{
    memset(w, 0, sizeof(*w));
    w->wl = wl;
    w->port = port;
    w->count = count;
    w->lease_ms = lease_ms;
    w->hold_ms = hold_ms;
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    w->running = rc == 0;
    return -rc;
}

void wl_worker_stop(struct wl_worker *w)
{
    if (!w->running)
        return;
    atomic_store(&w->stop, true);
    pthread_join(w->thread, NULL);
    w->running = false;
}

/* True when every job of the set was completed at least once. */
static bool all_done(const struct workload *wl)
{
    for (int i = 0; i < wl->n; i++)
        if (atomic_load(&wl->done[i]) == 0)
            return false;
    return true;
}

bool wl_await_done(struct workload *wl, int timeout_ms)
{
    return wait_for_ms(timeout_ms, all_done(wl));
}

/* True when job i's row says completed. */
static bool row_completed(struct workload *wl, struct tc_conn *c, int i)
{
    char id[64];
    wl_job_id(wl, i, id, sizeof(id));
    json_t *r = tc_call(c, "{\"op\":\"job\",\"queue\":\"%s\",\"job\":\"%s\"}", wl->queue, id);
    const char *st = json_string_value(json_object_get(json_object_get(r, "job"), "state"));
    bool done = st != NULL && strcmp(st, "completed") == 0;
    json_decref(r);
    return done;
}

/* One pass over the jobs no worker saw completed: flag those whose row is
 * completed as unacked. True when none is left. *c is (re)connected as
 * needed. */
static bool all_settled(struct workload *wl, int port, struct tc_conn **c)
{
    bool all = true;
    for (int i = 0; i < wl->n; i++) {
        if (atomic_load(&wl->done[i]) > 0 || wl->unacked[i])
            continue;
        if (*c == NULL)
            *c = tc_connect(port);
        if (*c != NULL && row_completed(wl, *c, i))
            wl->unacked[i] = 1;
        else
            all = false;
    }
    return all;
}

bool wl_await_settled(struct workload *wl, int port, int timeout_ms)
{
    struct tc_conn *c = NULL;
    bool all = wait_for_ms(timeout_ms, all_settled(wl, port, &c));
    tc_close(c);
    return all;
}

void wl_account(struct workload *wl, int port)
{
    struct tc_conn *c = tc_connect(port);
    cr_assert_not_null(c, "accounting: cannot connect");
    char id[64];
    for (int i = 0; i < wl->n; i++) {
        wl_job_id(wl, i, id, sizeof(id));
        cr_assert(atomic_load(&wl->done[i]) > 0 || wl->unacked[i],
                  "%s was never completed by a worker", id);
        json_t *r = tc_call(c, "{\"op\":\"job\",\"queue\":\"%s\",\"job\":\"%s\"}", wl->queue, id);
        cr_assert(tc_ok(r), "%s is missing (%s)", id, r ? tc_error(r) : "no reply");
        const char *st = json_string_value(json_object_get(json_object_get(r, "job"), "state"));
        cr_assert(st != NULL && strcmp(st, "completed") == 0, "%s is %s, not completed", id,
                  st ? st : "(none)");
        json_decref(r);
    }
    json_t *r = tc_call(c, "{\"op\":\"stats\",\"queue\":\"%s\"}", wl->queue);
    cr_assert(tc_ok(r), "stats refused");
    cr_assert_eq(json_integer_value(json_object_get(r, "active")), 0, "jobs stuck active");
    cr_assert_eq(json_integer_value(json_object_get(r, "pending")), 0, "jobs left pending");
    cr_assert_eq(json_integer_value(json_object_get(r, "delayed")), 0, "jobs left delayed");
    cr_assert_eq(json_integer_value(json_object_get(r, "dead")), 0,
                 "jobs dead: no fault may kill a job (every job of the set was completed)");
    json_decref(r);
    r = tc_call(c, "{\"op\":\"check\",\"queue\":\"%s\"}", wl->queue);
    cr_assert(tc_ok(r), "check refused");
    json_t *v = json_object_get(r, "violations");
    char *d = json_dumps(v, JSON_COMPACT);
    cr_assert(json_is_array(v) && json_array_size(v) == 0, "invariants broken: %s", d ? d : "?");
    free(d);
    json_decref(r);
    tc_close(c);
}
