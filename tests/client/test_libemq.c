/* libemq against the real emqd and a real redis-server: the connection
 * core (connect, request/reply, errors, interruption, broken connections),
 * every typed call, and pushes delivered in order. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <jansson.h>

#include "../integration/fixture.h"
#include "emq.h"

/* Under UBSan, a runtime error in the library fails the test instead of
 * only printing. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
    return "halt_on_error=1:print_stacktrace=1";
}

TestSuite(libemq, .init = fx_setup, .fini = fx_teardown, .timeout = 60);

/* A libemq connection to the fixture's daemon; asserts on failure. */
static struct emq *lib_conn(void)
{
    struct emq_options o = {.port = fx_emqd.port};
    struct emq *c = NULL;
    int rc = emq_connect(&c, &o);
    cr_assert_eq(rc, EMQ_OK, "emq_connect: %s (%s)", emq_code_name(rc), emq_errmsg(c));
    return c;
}

/* Assert a call succeeded, showing the connection's message otherwise. */
#define assert_emq_ok(c, call)                                                                     \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        cr_assert_eq(rc_, EMQ_OK, "%s: %s (%s)", #call, emq_code_name(rc_), emq_errmsg(c));        \
    } while (0)

/* Assert a call failed with code. */
#define assert_emq_err(c, call, code)                                                              \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        cr_assert_eq(rc_, (code), "%s: expected %s, got %s (%s)", #call, emq_code_name(code),      \
                     emq_code_name(rc_), emq_errmsg(c));                                           \
        cr_assert_eq(emq_errcode(c), (code));                                                      \
    } while (0)

/* Enqueue {"n":n} to queue/group with a chosen id; asserts "enqueued". */
static void put(struct emq *c, const char *queue, const char *job, const char *group, int n)
{
    json_t *p = json_pack("{s:i}", "n", n);
    struct emq_enqueue_opts o = {.job = job, .group = group};
    struct emq_enqueued out;
    assert_emq_ok(c, emq_enqueue(c, queue, p, &o, &out));
    json_decref(p);
    cr_assert_str_eq(out.job, job);
    cr_assert(!out.duplicate);
}

/* n jobs JOBa<i> in TENa and n JOBb<i> in TENb, enqueued a, b, a, b... */
static void put_pairs(struct emq *c, const char *queue, int n)
{
    for (int i = 0; i < n; i++) {
        char a[16], b[16];
        snprintf(a, sizeof(a), "JOBa%d", i);
        snprintf(b, sizeof(b), "JOBb%d", i);
        put(c, queue, a, "TENa", i);
        put(c, queue, b, "TENb", i);
    }
}

static enum emq_state state_of(struct emq *c, const char *queue, const char *job)
{
    enum emq_state s = EMQ_STATE_UNKNOWN;
    assert_emq_ok(c, emq_job_state(c, queue, job, &s));
    return s;
}

/* One reap of group; what it reaped is added to *total. True, so it can
 * lead a wait's condition. */
static bool reap_group(struct emq *c, const char *queue, const char *group, long long *total)
{
    long long reaped = 0;
    assert_emq_ok(c, emq_reap(c, queue, group, &reaped));
    *total += reaped;
    return true;
}

Test(libemq, connect_request_and_raw_replies)
{
    struct emq *c = lib_conn();
    json_t *req = json_pack("{s:s}", "op", "ping"), *reply = NULL;
    assert_emq_ok(c, emq_request(c, req, &reply));
    cr_assert(json_is_true(json_object_get(reply, "ok")));
    cr_assert(json_is_integer(json_object_get(reply, "ref")), "the library sets ref");
    json_decref(reply);
    /* The request stays the caller's and unchanged: it can be sent again. */
    cr_assert_null(json_object_get(req, "ref"));
    assert_emq_ok(c, emq_request(c, req, NULL));
    json_decref(req);

    /* A request with its own ref, or not an object, is refused locally. */
    req = json_pack("{s:s, s:i}", "op", "ping", "ref", 7);
    assert_emq_err(c, emq_request(c, req, NULL), EMQ_EUSAGE);
    json_decref(req);
    assert_emq_ok(c, emq_ping(c)); /* and the connection is still fine */

    /* A server error: the mapped code, the server's message, the reply. */
    req = json_pack("{s:s}", "op", "frobnicate");
    assert_emq_err(c, emq_request(c, req, &reply), EMQ_EUNKNOWN);
    cr_assert_str_eq(json_string_value(json_object_get(reply, "error")), "EUNKNOWN");
    cr_assert(strstr(emq_errmsg(c), "EUNKNOWN") != NULL, "message: %s", emq_errmsg(c));
    json_decref(reply);
    json_decref(req);
    assert_emq_ok(c, emq_ping(c));
    cr_assert_str_eq(emq_errmsg(c), "");
    emq_close(c);
}

Test(libemq, code_names_round_trip)
{
    for (int code = EMQ_OK; code <= EMQ_ENOTFOUND; code++)
        cr_assert_eq(emq_code_from_name(emq_code_name(code)), code, "%s", emq_code_name(code));
    for (int code = EMQ_EIO; code <= EMQ_ESERVER; code++)
        cr_assert_eq(emq_code_from_name(emq_code_name(code)), code, "%s", emq_code_name(code));
    cr_assert_str_eq(emq_code_name(EMQ_ELEASE), "ELEASE");
    cr_assert_str_eq(emq_code_name(EMQ_EIO), "EIO");
    cr_assert_eq(emq_code_from_name("ENOSUCH"), EMQ_ESERVER);
    cr_assert_eq(emq_code_from_name(NULL), EMQ_ESERVER);
    cr_assert_eq(emq_state_from_name("completed"), EMQ_STATE_COMPLETED);
    cr_assert_eq(emq_state_from_name("zombie"), EMQ_STATE_UNKNOWN);
    cr_assert_str_eq(emq_state_name(EMQ_STATE_DELAYED), "delayed");
}

Test(libemq, parse_addr_cases)
{
    struct emq_options o = {0};
    cr_assert_eq(emq_parse_addr(&o, "10.1.2.3:7000"), EMQ_OK);
    cr_assert_str_eq(o.host, "10.1.2.3");
    cr_assert_eq(o.port, 7000);
    cr_assert_eq(emq_parse_addr(&o, "[::1]:7712"), EMQ_OK);
    cr_assert_str_eq(o.host, "::1");
    cr_assert_eq(o.port, 7712);
    cr_assert_eq(emq_parse_addr(&o, "localhost:1"), EMQ_OK);
    cr_assert_str_eq(o.host, "localhost");
    cr_assert_eq(emq_parse_addr(&o, "65535"), EMQ_OK);
    cr_assert_eq(o.port, 65535);
    cr_assert_str_eq(o.host, "localhost", "PORT alone keeps the host");
    cr_assert_null(o.unix_path);
    cr_assert_eq(emq_parse_addr(&o, "unix:/run/emqd.sock"), EMQ_OK);
    cr_assert_str_eq(o.unix_path, "/run/emqd.sock");
    cr_assert_eq(emq_parse_addr(&o, "/tmp/e.sock"), EMQ_OK);
    cr_assert_str_eq(o.unix_path, "/tmp/e.sock");
    cr_assert_eq(emq_parse_addr(&o, "h:2"), EMQ_OK);
    cr_assert_null(o.unix_path, "a TCP address clears unix_path");

    static const char *const bad[] = {
        "",       "host",    "host:",  ":7711", "host:0", "host:65536",  "host:12a",
        "::1:80", "[::1]80", "[::1]:", "unix:", "h:-1",   "host:123456", "[]:80",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(emq_parse_addr(&o, bad[i]), EMQ_EUSAGE, "accepted \"%s\"", bad[i]);
    cr_assert_eq(emq_parse_addr(NULL, "1"), EMQ_EUSAGE);
    cr_assert_eq(emq_parse_addr(&o, NULL), EMQ_EUSAGE);
}

Test(libemq, format_addr_fills_in_the_defaults_and_parses_back)
{
    char buf[300];
    struct emq_options o = {0};
    cr_assert_str_eq(emq_format_addr(&o, buf, sizeof(buf)), "127.0.0.1:7711");
    static const char *const addrs[] = {"10.1.2.3:7000", "[::1]:7712", "localhost:1",
                                        "/run/emqd.sock", "unix:rel.sock"};
    for (size_t i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++) {
        o = (struct emq_options){0};
        cr_assert_eq(emq_parse_addr(&o, addrs[i]), EMQ_OK);
        cr_assert_str_eq(emq_format_addr(&o, buf, sizeof(buf)), addrs[i]);
    }
    o = (struct emq_options){.port = 9000};
    cr_assert_str_eq(emq_format_addr(&o, buf, sizeof(buf)), "127.0.0.1:9000");
    cr_assert_str_eq(emq_format_addr(&o, buf, 5), "127.", "truncated, still a string");
}

Test(libemq, connect_refused_is_eio)
{
    struct emq_options o = {.port = test_free_port(), .timeout_ms = 2000};
    struct emq *c = NULL;
    cr_assert_eq(emq_connect(&c, &o), EMQ_EIO);
    cr_assert_not_null(c);
    cr_assert(strstr(emq_errmsg(c), "refused") != NULL, "message: %s", emq_errmsg(c));
    /* Every later call says the connection is unusable. */
    assert_emq_err(c, emq_ping(c), EMQ_EIO);
    emq_close(c);

    o = (struct emq_options){.unix_path = "/nonexistent/emqd.sock"};
    cr_assert_eq(emq_connect(&c, &o), EMQ_EIO);
    emq_close(c);
}

Test(libemq, token_daemon_refuses_a_wrong_token_with_eauth)
{
    emqd_kill(&fx_emqd);
    const char *const extra[] = {"--token", "s3cret", NULL};
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);
    struct emq_options o = {.port = fx_emqd.port, .token = "wrong", .name = "t"};
    struct emq *c = NULL;
    cr_assert_eq(emq_connect(&c, &o), EMQ_EAUTH);
    cr_assert(strstr(emq_errmsg(c), "EAUTH") != NULL, "message: %s", emq_errmsg(c));
    emq_close(c);
    o.token = NULL;
    cr_assert_eq(emq_connect(&c, &o), EMQ_EAUTH);
    emq_close(c);
    o.token = "s3cret";
    assert_emq_ok(c, emq_connect(&c, &o));
    long long d = -1;
    assert_emq_ok(c, emq_depth(c, "q", NULL, &d));
    cr_assert_eq(d, 0);
    emq_close(c);
}

Test(libemq, enqueue_claim_and_settle)
{
    struct emq *c = lib_conn();
    struct emq_enqueued e;
    json_t *payload = json_pack("{s:s}", "to", "a@b.c");
    assert_emq_ok(c, emq_enqueue(c, "mail", payload, NULL, &e));
    cr_assert(strncmp(e.job, "JOB", 3) == 0 && strlen(e.job) == 29, "minted id %s", e.job);
    cr_assert(!e.duplicate);
    char minted[EMQ_ID_SIZE];
    strcpy(minted, e.job);
    struct emq_enqueue_opts eo = {.job = "JOBx1", .group = "TENacme", .max_attempts = 2};
    assert_emq_ok(c, emq_enqueue(c, "mail", payload, &eo, &e));
    assert_emq_ok(c, emq_enqueue(c, "mail", payload, &eo, &e));
    cr_assert(e.duplicate, "the same id again is a duplicate");
    eo = (struct emq_enqueue_opts){.job = "JOBlater", .group = "TENacme", .delay_ms = 3600000};
    assert_emq_ok(c, emq_enqueue(c, "mail", payload, &eo, NULL));
    cr_assert_eq(state_of(c, "mail", "JOBlater"), EMQ_STATE_DELAYED);
    eo = (struct emq_enqueue_opts){.job = "JOBinf", .max_attempts = EMQ_ATTEMPTS_UNLIMITED};
    assert_emq_ok(c, emq_enqueue(c, "mail", payload, &eo, NULL));
    json_t *row;
    assert_emq_ok(c, emq_job_row(c, "mail", "JOBinf", &row));
    cr_assert_eq(jint(row, "max_attempts"), 0, "unlimited is 0 on the wire");
    cr_assert(json_is_null(json_object_get(row, "group")));
    json_decref(row);

    /* Server errors surface with their codes, and change nothing. */
    eo = (struct emq_enqueue_opts){.job = "x1"};
    assert_emq_err(c, emq_enqueue(c, "mail", payload, &eo, NULL), EMQ_EKIND);
    eo = (struct emq_enqueue_opts){.group = "acme"};
    assert_emq_err(c, emq_enqueue(c, "mail", payload, &eo, NULL), EMQ_EBRAND);
    assert_emq_err(c, emq_enqueue(c, "bad queue", payload, NULL, NULL), EMQ_EQUEUE);
    assert_emq_err(c, emq_enqueue(c, "mail", NULL, NULL, NULL), EMQ_EUSAGE);
    assert_emq_err(c, emq_enqueue(c, NULL, payload, NULL, NULL), EMQ_EUSAGE);
    json_decref(payload);

    /* claim: the grouped job, with every field of a leased job. */
    struct emq_job **jobs = NULL;
    size_t n = 0;
    struct emq_claim_opts co = {.count = 5, .lease_ms = 60000};
    assert_emq_ok(c, emq_claim(c, "mail", &co, &jobs, &n));
    cr_assert_eq(n, 1);
    struct emq_job *j = jobs[0];
    cr_assert_str_eq(j->queue, "mail");
    cr_assert_str_eq(j->job, "JOBx1");
    cr_assert_str_eq(j->group, "TENacme");
    cr_assert_eq(j->attempt, 1);
    cr_assert_gt(j->lease_until, 0);
    cr_assert_str_eq(j->payload_text, "{\"to\":\"a@b.c\"}");
    cr_assert_str_eq(json_string_value(json_object_get(j->payload, "to")), "a@b.c");
    cr_assert_eq(state_of(c, "mail", "JOBx1"), EMQ_STATE_ACTIVE);

    /* extend moves the deadline; a forged lease is ELEASE. */
    long long before = j->lease_until;
    assert_emq_ok(c, emq_extend(c, j, 600000));
    cr_assert_gt(j->lease_until, before);
    struct emq_job forged = {.queue = "mail", .job = "JOBx1", .lease = "999999"};
    assert_emq_err(c, emq_extend(c, &forged, 1000), EMQ_ELEASE);
    assert_emq_err(c, emq_complete(c, &forged), EMQ_ELEASE);
    cr_assert(strstr(emq_errmsg(c), "ELEASE") != NULL);

    /* release: pending again, attempt returned (a worker gave it back);
     * the old lease is fenced. */
    enum emq_state st = EMQ_STATE_UNKNOWN;
    assert_emq_ok(c, emq_release(c, j, "shutting down", &st));
    cr_assert_eq(st, EMQ_STATE_PENDING);
    assert_emq_err(c, emq_complete(c, j), EMQ_ELEASE);
    emq_jobs_free(jobs, n);

    /* Claim again: attempt 1 again (the release returned it). Fail with
     * retry now, then attempt 2 of 2 fails too, so it is dead. */
    struct emq_fail_opts fo = {.error = "SMTP 451", .retry_ms = EMQ_RETRY_NOW};
    for (int attempt = 1; attempt <= 2; attempt++) {
        assert_emq_ok(c, emq_claim(c, "mail", NULL, &jobs, &n));
        cr_assert_eq(n, 1);
        cr_assert_eq(jobs[0]->attempt, attempt);
        assert_emq_ok(c, emq_fail(c, jobs[0], &fo, &st));
        cr_assert_eq(st, attempt == 2 ? EMQ_STATE_DEAD : EMQ_STATE_PENDING, "attempt %d of 2",
                     attempt);
        emq_jobs_free(jobs, n);
    }

    /* The flat job: claim flat, fail with backoff (delayed), then the
     * dead-letter flag. */
    co = (struct emq_claim_opts){.flat = true};
    assert_emq_ok(c, emq_claim(c, "mail", &co, &jobs, &n));
    cr_assert_eq(n, 1);
    cr_assert_null(jobs[0]->group);
    cr_assert_str_eq(jobs[0]->job, minted);
    assert_emq_ok(c, emq_fail(c, jobs[0], NULL, &st));
    cr_assert_eq(st, EMQ_STATE_DELAYED);
    emq_jobs_free(jobs, n);

    /* Nothing left to claim: an empty array, not an error. */
    co = (struct emq_claim_opts){.count = 3, .wait_ms = 50};
    assert_emq_ok(c, emq_claim(c, "mail", &co, &jobs, &n));
    cr_assert_eq(n, 0);
    cr_assert_null(jobs);

    /* complete of a job that does not exist: ENOJOB; a bad id: EKIND. */
    struct emq_job ghost = {.queue = "mail", .job = "JOBghost", .lease = "1"};
    assert_emq_err(c, emq_complete(c, &ghost), EMQ_ENOJOB);
    ghost.job = "ghost";
    assert_emq_err(c, emq_release(c, &ghost, NULL, NULL), EMQ_EKIND);
    emq_close(c);
}

Test(libemq, enqueue_many_gives_a_verdict_per_item)
{
    struct emq *c = lib_conn();
    put(c, "b", "JOBdup", "TENa", 0);
    json_t *p1 = json_integer(1), *p2 = json_integer(2), *p3 = json_integer(3);
    struct emq_item items[] = {
        {.payload = p1},
        {.payload = p2, .opts = {.job = "JOBdup"}},
        {.payload = p3, .opts = {.job = "bad-kind"}},
        {.payload = p1, .opts = {.job = "JOBother", .group = "TENb"}},
        {.payload = p2, .opts = {.group = "nobrand"}},
    };
    struct emq_item_result r[5];
    assert_emq_ok(c, emq_enqueue_many(c, "b", "TENa", items, 5, r));
    cr_assert_eq(r[0].code, EMQ_OK);
    cr_assert(!r[0].enqueued.duplicate);
    cr_assert(strncmp(r[0].enqueued.job, "JOB", 3) == 0);
    cr_assert_eq(r[1].code, EMQ_OK);
    cr_assert(r[1].enqueued.duplicate);
    cr_assert_str_eq(r[1].enqueued.job, "JOBdup");
    cr_assert_eq(r[2].code, EMQ_EKIND);
    cr_assert_neq(r[2].message[0], '\0');
    cr_assert_eq(r[3].code, EMQ_OK);
    cr_assert_eq(r[4].code, EMQ_EBRAND);
    long long d;
    assert_emq_ok(c, emq_depth(c, "b", "TENa", &d));
    cr_assert_eq(d, 2, "JOBdup and the minted one ride the batch group");
    assert_emq_ok(c, emq_depth(c, "b", "TENb", &d));
    cr_assert_eq(d, 1);

    /* Whole-request errors. */
    assert_emq_err(c, emq_enqueue_many(c, "b", NULL, NULL, 0, NULL), EMQ_EEMPTY);
    assert_emq_err(c, emq_enqueue_many(c, "b", "bad", items, 1, r), EMQ_EBRAND);
    struct emq_item nopayload = {0};
    assert_emq_err(c, emq_enqueue_many(c, "b", NULL, &nopayload, 1, r), EMQ_EUSAGE);
    json_decref(p1);
    json_decref(p2);
    json_decref(p3);
    emq_close(c);
}

Test(libemq, admin_levers_and_reads)
{
    struct emq *c = lib_conn();
    put_pairs(c, "adm", 3);
    bool changed = false;
    assert_emq_ok(c, emq_limit(c, "adm", "TENa", 1));
    assert_emq_ok(c, emq_pause(c, "adm", "TENb", &changed));
    cr_assert(changed);
    assert_emq_ok(c, emq_pause(c, "adm", "TENb", &changed));
    cr_assert(!changed, "already paused");

    struct emq_stats s;
    assert_emq_ok(c, emq_stats(c, "adm", &s));
    cr_assert_eq(s.pending, 6);
    cr_assert_eq(s.active, 0);
    cr_assert_eq(s.groups, 2);
    cr_assert_eq(s.paused, 1);
    cr_assert_eq(s.ring, 1);

    /* groups, paged one entry at a time until the cursor says done. */
    char cursor[33] = "0";
    int seen = 0, pages = 0;
    do {
        struct emq_group_info *g = NULL;
        size_t n = 0;
        assert_emq_ok(c, emq_groups(c, "adm", cursor, 1, &g, &n, cursor));
        for (size_t i = 0; i < n; i++) {
            seen++;
            if (strcmp(g[i].group, "TENa") == 0) {
                cr_assert_eq(g[i].limit, 1);
                cr_assert(!g[i].paused);
                cr_assert_eq(g[i].depth, 3);
            } else {
                cr_assert_str_eq(g[i].group, "TENb");
                cr_assert(g[i].paused);
                cr_assert_eq(g[i].limit, 0, "no ceiling");
            }
        }
        free(g);
        cr_assert_lt(++pages, 20);
    } while (strcmp(cursor, "0") != 0);
    cr_assert_eq(seen, 2);
    assert_emq_err(
        c, emq_groups(c, "adm", "x", 0, &(struct emq_group_info *){0}, &(size_t){0}, cursor),
        EMQ_EARG);

    /* The ceiling of 1 lets one TENa job out; TENb is paused. */
    struct emq_job **jobs;
    size_t n;
    struct emq_claim_opts co = {.count = 5, .lease_ms = 60000};
    assert_emq_ok(c, emq_claim(c, "adm", &co, &jobs, &n));
    cr_assert_eq(n, 1);
    cr_assert_str_eq(jobs[0]->job, "JOBa0");
    assert_emq_ok(c, emq_resume(c, "adm", "TENb", &changed));
    cr_assert(changed);

    /* reassign a pending job; ESTATE for the active one. */
    char from[EMQ_ID_SIZE];
    assert_emq_ok(c, emq_reassign(c, "adm", "JOBb2", "TENc", from));
    cr_assert_str_eq(from, "TENb");
    assert_emq_err(c, emq_reassign(c, "adm", "JOBa0", "TENc", from), EMQ_ESTATE);
    assert_emq_err(c, emq_reassign(c, "adm", "JOBnone", "TENc", from), EMQ_ENOJOB);

    /* Shorten the lease to 1 ms, then reap (group-wide, then queue-wide)
     * until it is pending again; the daemon's own reaper may get there
     * first. */
    assert_emq_ok(c, emq_extend(c, jobs[0], 1));
    emq_jobs_free(jobs, n);
    long long total = 0;
    await(reap_group(c, "adm", "TENa", &total) && state_of(c, "adm", "JOBa0") == EMQ_STATE_PENDING,
          "the lease cut to 1 ms to be reaped");
    cr_assert_leq(total, 1);
    long long reaped = 0;
    assert_emq_ok(c, emq_reap(c, "adm", NULL, &reaped));
    cr_assert_eq(reaped, 0, "nothing left to reap");

    /* peek TENb's lane a page at a time, then remove the job moved to TENc. */
    json_t *page = NULL;
    char next[EMQ_CURSOR_MAX];
    struct emq_peek_opts po = {.group = "TENb", .count = 1};
    assert_emq_ok(c, emq_peek(c, "adm", &po, &page, next));
    cr_assert_eq(json_array_size(page), 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(page, 0), "job")), "JOBb0");
    cr_assert_str_eq(next, "JOBb0");
    json_decref(page);
    po.cursor = next;
    po.count = 10;
    assert_emq_ok(c, emq_peek(c, "adm", &po, &page, next));
    cr_assert_eq(json_array_size(page), 1, "JOBb1 follows (JOBb2 moved to TENc)");
    cr_assert_str_eq(next, "", "nothing follows");
    json_decref(page);
    po = (struct emq_peek_opts){.state = "done"};
    assert_emq_err(c, emq_peek(c, "adm", &po, &page, next), EMQ_EARG);
    enum emq_state was = EMQ_STATE_UNKNOWN;
    assert_emq_ok(c, emq_remove(c, "adm", "JOBb2", &was));
    cr_assert_eq(was, EMQ_STATE_PENDING);
    assert_emq_err(c, emq_remove(c, "adm", "JOBb2", &was), EMQ_ENOJOB);

    long long drained = 0, d = -1;
    assert_emq_ok(c, emq_drain(c, "adm", "TENb", &drained));
    cr_assert_eq(drained, 2);
    assert_emq_ok(c, emq_depth(c, "adm", "TENb", &d));
    cr_assert_eq(d, 0);
    assert_emq_ok(c, emq_limit(c, "adm", "TENa", 0));
    assert_emq_err(c, emq_limit(c, "adm", "nobrand", 1), EMQ_EBRAND);
    assert_emq_err(c, emq_drain(c, "adm", "x", NULL), EMQ_EBRAND);
    json_t *row;
    assert_emq_err(c, emq_job_row(c, "adm", "JOBb0", &row), EMQ_ENOJOB);

    json_t *v = NULL;
    assert_emq_ok(c, emq_check(c, "adm", &v));
    cr_assert_eq(json_array_size(v), 0);
    json_decref(v);
    assert_emq_ok(c, emq_ping(c));
    emq_close(c);
}

Test(libemq, weight_steers_the_turns_and_groups_shows_it)
{
    struct emq *c = lib_conn();
    put_pairs(c, "wgt", 4);
    assert_emq_ok(c, emq_weight(c, "wgt", "TENa", 3));
    assert_emq_err(c, emq_weight(c, "wgt", "TENa", 1001), EMQ_EARG);
    assert_emq_err(c, emq_weight(c, "wgt", "TENa", -1), EMQ_EARG);
    assert_emq_err(c, emq_weight(c, "wgt", "nobrand", 2), EMQ_EBRAND);
    struct emq_group_info *g = NULL;
    size_t n = 0;
    char cursor[33];
    assert_emq_ok(c, emq_groups(c, "wgt", "0", 10, &g, &n, cursor));
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(g[i].weight, strcmp(g[i].group, "TENa") == 0 ? 3 : 1, "%s", g[i].group);
    free(g);

    struct emq_job **jobs;
    struct emq_claim_opts co = {.count = 5, .lease_ms = 60000};
    assert_emq_ok(c, emq_claim(c, "wgt", &co, &jobs, &n));
    const char *want[] = {"JOBa0", "JOBa1", "JOBa2", "JOBb0", "JOBa3"};
    cr_assert_eq(n, 5);
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(jobs[i]->job, want[i], "position %zu", i);
    emq_jobs_free(jobs, n);
    assert_emq_ok(c, emq_weight(c, "wgt", "TENa", 0));
    assert_emq_ok(c, emq_groups(c, "wgt", "0", 10, &g, &n, cursor));
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(g[i].weight, 1, "reset: %s", g[i].group);
    free(g);
    emq_close(c);
}

/* group NULL: the queue defaults, shown by stats and by each group's
 * _from fields. */
Test(libemq, defaults_apply_to_groups_without_their_own)
{
    struct emq *c = lib_conn();
    put_pairs(c, "dfl", 4);
    assert_emq_ok(c, emq_limit(c, "dfl", NULL, 1));
    assert_emq_ok(c, emq_limit(c, "dfl", "TENb", 2));
    assert_emq_ok(c, emq_weight(c, "dfl", NULL, 2));
    assert_emq_ok(c, emq_rate(c, "dfl", NULL, 100, 1000));
    assert_emq_err(c, emq_limit(c, "dfl", NULL, -1), EMQ_EARG);
    struct emq_stats s;
    assert_emq_ok(c, emq_stats(c, "dfl", &s));
    cr_assert(s.def_limit == 1 && s.def_weight == 2 && s.def_rate_max == 100 &&
              s.def_rate_per_ms == 1000);
    struct emq_group_info *g = NULL;
    size_t n = 0;
    char cursor[33];
    assert_emq_ok(c, emq_groups(c, "dfl", "0", 10, &g, &n, cursor));
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        bool a = strcmp(g[i].group, "TENa") == 0;
        cr_assert_eq(g[i].limit, a ? 1 : 2);
        cr_assert_eq(g[i].limit_from, a ? EMQ_FROM_QUEUE : EMQ_FROM_GROUP);
        cr_assert(g[i].weight == 2 && g[i].weight_from == EMQ_FROM_QUEUE);
        cr_assert(g[i].rate_max == 100 && g[i].rate_from == EMQ_FROM_QUEUE);
    }
    free(g);
    assert_emq_ok(c, emq_limit(c, "dfl", NULL, 0));
    assert_emq_ok(c, emq_weight(c, "dfl", NULL, 0));
    assert_emq_ok(c, emq_rate(c, "dfl", NULL, 0, 0));
    assert_emq_ok(c, emq_stats(c, "dfl", &s));
    cr_assert(s.def_limit == 0 && s.def_weight == 0 && s.def_rate_max == 0);
    emq_close(c);
}

/* emq_cap: a full lane refuses with EMQ_EFULL, the rest of the queue is
 * unaffected; groups and stats show the cap and where it comes from. */
Test(libemq, cap_refuses_an_enqueue_into_a_full_lane)
{
    struct emq *c = lib_conn();
    assert_emq_ok(c, emq_cap(c, "cap", "TENa", 1));
    assert_emq_err(c, emq_cap(c, "cap", "TENa", -1), EMQ_EARG);
    assert_emq_err(c, emq_cap(c, "cap", "nobrand", 1), EMQ_EBRAND);
    put_pairs(c, "cap", 1);
    json_t *p = json_integer(1);
    struct emq_enqueue_opts o = {.group = "TENa"};
    assert_emq_err(c, emq_enqueue(c, "cap", p, &o, NULL), EMQ_EFULL);
    cr_assert(strstr(emq_errmsg(c), "TENa") != NULL, "the message names the group: %s",
              emq_errmsg(c));
    o.group = "TENb";
    assert_emq_ok(c, emq_enqueue(c, "cap", p, &o, NULL));
    assert_emq_ok(c, emq_cap(c, "cap", NULL, 5));
    struct emq_stats s;
    assert_emq_ok(c, emq_stats(c, "cap", &s));
    cr_assert_eq(s.def_cap, 5);
    struct emq_group_info *g = NULL;
    size_t n = 0;
    char cursor[33];
    assert_emq_ok(c, emq_groups(c, "cap", "0", 10, &g, &n, cursor));
    cr_assert_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        bool a = strcmp(g[i].group, "TENa") == 0;
        cr_assert_eq(g[i].cap, a ? 1 : 5);
        cr_assert_eq(g[i].cap_from, a ? EMQ_FROM_GROUP : EMQ_FROM_QUEUE);
        cr_assert_eq(g[i].delayed, 0);
    }
    free(g);
    assert_emq_ok(c, emq_cap(c, "cap", "TENa", 0));
    assert_emq_ok(c, emq_cap(c, "cap", NULL, 0));
    o.group = "TENa";
    assert_emq_ok(c, emq_enqueue(c, "cap", p, &o, NULL));
    json_decref(p);
    emq_close(c);
}

Test(libemq, rate_holds_a_group_to_its_max_per_window)
{
    struct emq *c = lib_conn();
    put_pairs(c, "rat", 3);
    assert_emq_ok(c, emq_rate(c, "rat", "TENa", 1, 60000));
    assert_emq_err(c, emq_rate(c, "rat", "TENa", 1, 0), EMQ_EARG);
    assert_emq_err(c, emq_rate(c, "rat", "TENa", -1, 10), EMQ_EARG);
    struct emq_job **jobs;
    size_t n;
    struct emq_claim_opts co = {.count = 6, .lease_ms = 60000};
    assert_emq_ok(c, emq_claim(c, "rat", &co, &jobs, &n));
    const char *want[] = {"JOBa0", "JOBb0", "JOBb1", "JOBb2"};
    cr_assert_eq(n, 4, "one lease of TENa, then TENb's three");
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(jobs[i]->job, want[i], "position %zu", i);
    emq_jobs_free(jobs, n);
    struct emq_group_info *g = NULL;
    char cursor[33];
    assert_emq_ok(c, emq_groups(c, "rat", "0", 10, &g, &n, cursor));
    for (size_t i = 0; i < n; i++) {
        bool a = strcmp(g[i].group, "TENa") == 0;
        cr_assert_eq(g[i].rate_max, a ? 1 : 0, "%s", g[i].group);
        cr_assert_eq(g[i].rate_per_ms, a ? 60000 : 0);
        cr_assert_eq(g[i].throttled, a);
    }
    free(g);
    assert_emq_ok(c, emq_rate(c, "rat", "TENa", 0, 0));
    assert_emq_ok(c, emq_claim(c, "rat", &co, &jobs, &n));
    cr_assert_eq(n, 2, "the rate removed: TENa's other two");
    emq_jobs_free(jobs, n);
    emq_close(c);
}

/* The daemon-wide views: queues paged one queue at a time. */
Test(libemq, daemon_wide_views)
{
    struct emq *c = lib_conn();
    put(c, "va", "JOBa1", "TENa", 1);
    put(c, "va", "JOBa2", "TENb", 2);
    put(c, "vb", "JOBb1", "TENa", 3);
    bool changed;
    assert_emq_ok(c, emq_pause(c, "vb", "TENa", &changed));
    char cursor[33] = "0";
    int pages = 0, seen = 0;
    do {
        json_t *page = NULL;
        assert_emq_ok(c, emq_queues(c, cursor, 1, &page, cursor));
        for (size_t i = 0; i < json_array_size(page); i++) {
            json_t *q = json_array_get(page, i);
            const char *name = json_string_value(json_object_get(q, "queue"));
            bool a = strcmp(name, "va") == 0;
            cr_assert(a || strcmp(name, "vb") == 0, "unknown queue %s", name);
            cr_assert_eq(json_integer_value(json_object_get(q, "pending")), a ? 2 : 1);
            cr_assert_eq(json_integer_value(json_object_get(q, "groups")), a ? 2 : 1);
            cr_assert_eq(json_integer_value(json_object_get(q, "paused")), a ? 0 : 1);
            seen++;
        }
        json_decref(page);
        cr_assert_lt(++pages, 20);
    } while (strcmp(cursor, "0") != 0);
    cr_assert_eq(seen, 2);
    assert_emq_err(c, emq_queues(c, "x", 0, &(json_t *){0}, cursor), EMQ_EARG);

    /* clients: this connection is the one marked self; by id, its row. */
    json_t *rows = NULL;
    assert_emq_ok(c, emq_clients(c, NULL, 0, &rows, cursor));
    cr_assert_str_eq(cursor, "0");
    long long self = -1;
    for (size_t i = 0; i < json_array_size(rows); i++)
        if (json_is_true(json_object_get(json_array_get(rows, i), "self")))
            self = json_integer_value(json_object_get(json_array_get(rows, i), "id"));
    json_decref(rows);
    cr_assert_gt(self, 0);
    json_t *me = NULL;
    assert_emq_ok(c, emq_client(c, self, &me));
    cr_assert_eq(json_integer_value(json_object_get(me, "id")), self);
    cr_assert(json_is_array(json_object_get(me, "held")));
    json_decref(me);
    assert_emq_err(c, emq_client(c, self + 1000, &me), EMQ_ENOTFOUND);

    /* forget: refused while va holds jobs; vb, drained, goes. */
    assert_emq_err(c, emq_forget(c, "va"), EMQ_ESTATE);
    assert_emq_ok(c, emq_drain(c, "vb", "TENa", NULL));
    assert_emq_ok(c, emq_forget(c, "vb"));
    json_t *page = NULL;
    assert_emq_ok(c, emq_queues(c, NULL, 1000, &page, cursor));
    for (size_t i = 0; i < json_array_size(page); i++)
        cr_assert_str_neq(json_string_value(json_object_get(json_array_get(page, i), "queue")),
                          "vb", "a forgotten queue is listed");
    json_decref(page);
    assert_emq_err(c, emq_forget(c, "not a queue"), EMQ_EQUEUE);
    emq_close(c);
}

Test(libemq, dead_list_retry_purge)
{
    struct emq *c = lib_conn();
    for (int i = 0; i < 3; i++) {
        char id[16];
        snprintf(id, sizeof(id), "JOBd%d", i);
        put(c, "dl", id, "TENa", i);
    }
    struct emq_job **jobs;
    size_t n;
    struct emq_claim_opts co = {.count = 3};
    assert_emq_ok(c, emq_claim(c, "dl", &co, &jobs, &n));
    cr_assert_eq(n, 3);
    struct emq_fail_opts fo = {.error = "poison", .dead = true};
    for (size_t i = 0; i < n; i++)
        assert_emq_ok(c, emq_fail(c, jobs[i], &fo, NULL));
    emq_jobs_free(jobs, n);

    json_t *list = NULL;
    assert_emq_ok(c, emq_dead_list(c, "dl", 2, &list));
    cr_assert_eq(json_array_size(list), 2);
    cr_assert_str_eq(jstr(json_array_get(list, 0), "error"), "poison");
    json_decref(list);
    long long count = 0;
    assert_emq_ok(c, emq_dead_retry(c, "dl", "JOBd1", 0, &count));
    cr_assert_eq(count, 1);
    cr_assert_eq(state_of(c, "dl", "JOBd1"), EMQ_STATE_PENDING);
    assert_emq_err(c, emq_dead_retry(c, "dl", "JOBd1", 0, &count), EMQ_ENOJOB);
    assert_emq_ok(c, emq_dead_purge(c, "dl", NULL, 10, &count));
    cr_assert_eq(count, 2);
    assert_emq_ok(c, emq_dead_list(c, "dl", 0, &list));
    cr_assert_eq(json_array_size(list), 0);
    json_decref(list);
    assert_emq_err(c, emq_dead_purge(c, "dl", "nojob", 0, NULL), EMQ_EKIND);
    emq_close(c);
}

/* The number of active jobs of queue, asserting stats answered. */
static long long active_of(struct emq *c, const char *queue)
{
    struct emq_stats s = {0};
    assert_emq_ok(c, emq_stats(c, queue, &s));
    return s.active;
}

/* Wait until queue has `active` jobs leased (so the pushes are on the wire). */
static void await_active(struct emq *c, const char *queue, long long active)
{
    await(active_of(c, queue) == active, "%lld jobs of %s active", active, queue);
}

Test(libemq, pushes_that_arrive_during_a_request_are_kept_in_order)
{
    struct emq *w = lib_conn(), *p = lib_conn();
    assert_emq_ok(w, emq_stream(w, "s", 5, 60000, false));
    for (int i = 0; i < 5; i++) {
        char id[16];
        snprintf(id, sizeof(id), "JOBs%d", i);
        put(p, "s", id, "TENa", i);
    }
    await_active(p, "s", 5);
    /* All five pushes were written before the reply to this ping: the
     * library reads and queues them while it waits for the reply. */
    assert_emq_ok(w, emq_ping(w));
    for (int i = 0; i < 5; i++) {
        struct emq_job *j = NULL;
        char id[16];
        snprintf(id, sizeof(id), "JOBs%d", i);
        assert_emq_ok(w, emq_next_job(w, &j, 0));
        cr_assert_not_null(j, "push %d was lost", i);
        cr_assert_str_eq(j->job, id);
        cr_assert_str_eq(j->group, "TENa");
        cr_assert_eq(json_integer_value(json_object_get(j->payload, "n")), i);
        assert_emq_ok(w, emq_complete(w, j));
        emq_job_free(j);
    }
    struct emq_job *none = (struct emq_job *)1;
    assert_emq_ok(w, emq_next_job(w, &none, 50));
    cr_assert_null(none, "no more pushes: NULL, not an error");
    assert_emq_ok(w, emq_ping(w));
    emq_close(w);
    emq_close(p);
}

/* emq_stream_run's callback: record ids, complete, stop after `want`. */
struct run_state {
    char ids[16][EMQ_ID_SIZE];
    int n, want;
};

static int run_cb(struct emq *c, struct emq_job *job, void *arg)
{
    struct run_state *rs = arg;
    snprintf(rs->ids[rs->n++], EMQ_ID_SIZE, "%s", job->job);
    if (emq_complete(c, job) != EMQ_OK)
        return -1;
    return rs->n == rs->want ? 42 : 0;
}

Test(libemq, stream_run_delivers_every_job_to_the_callback_in_order)
{
    struct emq *w = lib_conn(), *p = lib_conn();
    assert_emq_ok(w, emq_stream(w, "r", 2, 0, true)); /* flat, credit 2 */
    for (int i = 0; i < 8; i++) {
        char id[16];
        snprintf(id, sizeof(id), "JOBr%d", i);
        put(p, "r", id, NULL, i);
    }
    struct run_state rs = {.want = 8};
    cr_assert_eq(emq_stream_run(w, run_cb, &rs), 42);
    for (int i = 0; i < 8; i++) {
        char id[16];
        snprintf(id, sizeof(id), "JOBr%d", i);
        cr_assert_str_eq(rs.ids[i], id);
        cr_assert_eq(state_of(p, "r", id), EMQ_STATE_COMPLETED);
    }
    assert_emq_err(w, emq_stream(w, "r", -1, 0, true), EMQ_EARG);
    assert_emq_err(w, emq_stream_run(w, NULL, NULL), EMQ_EUSAGE);
    emq_close(w);
    emq_close(p);
}

/* True once thread tid of this process sleeps in poll(2): blocked in a
 * libemq call, waiting on the server. */
static bool blocked_in_poll(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    long nr = -1;
    bool in_syscall = fscanf(f, "%ld", &nr) == 1; /* "running" when it is not */
    fclose(f);
#ifdef SYS_poll
    if (in_syscall && nr == SYS_poll)
        return true;
#endif
    return in_syscall && nr == SYS_ppoll;
}

/* A thread that interrupts a connection or kills the daemon once the
 * thread that started it is blocked in a call. */
struct later {
    pthread_t thread;
    struct emq *c;
    pthread_t target; /* with sig: signal this thread instead */
    int sig;
    bool kill_daemon;
    pid_t caller; /* the thread that will block */
    bool blocked; /* it was seen blocked before the blow */
};

static void *later_main(void *arg)
{
    struct later *l = arg;
    /* No Criterion assertion off the test's thread: the test asserts
     * l->blocked after the join. */
    l->blocked = wait_for(blocked_in_poll(l->caller));
    if (l->kill_daemon)
        emqd_kill(&fx_emqd);
    else if (l->sig != 0)
        pthread_kill(l->target, l->sig);
    else
        emq_interrupt(l->c);
    return NULL;
}

/* Start l against the calling thread, which is about to block. */
static void later_start(struct later *l)
{
    l->caller = gettid();
    l->blocked = false;
    cr_assert_eq(pthread_create(&l->thread, NULL, later_main, l), 0);
}

/* Join l; the call it hit was blocked when it struck. */
static void later_join(struct later *l)
{
    pthread_join(l->thread, NULL);
    cr_assert(l->blocked, "the call never blocked waiting on the server");
}

Test(libemq, interrupt_from_another_thread_ends_a_blocking_stream)
{
    struct emq *c = lib_conn();
    assert_emq_ok(c, emq_stream(c, "idle", 1, 0, false));
    struct later l = {.c = c};
    later_start(&l);
    struct run_state rs = {.want = 1};
    assert_emq_err(c, emq_stream_run(c, run_cb, &rs), EMQ_EINTR);
    later_join(&l);
    cr_assert(emq_interrupted(c));
    cr_assert_eq(rs.n, 0);
    /* The connection stays usable. */
    assert_emq_ok(c, emq_ping(c));

    /* An interrupt before a call makes that call return at once... */
    emq_interrupt(c);
    assert_emq_err(c, emq_ping(c), EMQ_EINTR);
    assert_emq_ok(c, emq_ping(c));

    /* ...and one in the middle of a request abandons it: its reply, when
     * it comes, is skipped and the next call gets its own. The claim
     * waits an hour, so only the interrupt ends the call; a job enqueued
     * afterwards answers the abandoned claim. */
    later_start(&l);
    struct emq_job **jobs;
    size_t n;
    struct emq_claim_opts co = {.wait_ms = 3600000};
    assert_emq_err(c, emq_claim(c, "abandoned", &co, &jobs, &n), EMQ_EINTR);
    later_join(&l);
    struct emq *p = lib_conn();
    put(p, "abandoned", "JOBlate", "TENa", 1);
    put(p, "abandoned", "JOBnext", "TENa", 2);
    await_active(p, "abandoned", 1); /* one leased to the abandoned claim: its reply is out */
    long long d = -1;
    assert_emq_ok(c, emq_depth(c, "abandoned", "TENa", &d));
    cr_assert_eq(d, 1, "the depth call got its own reply (the other job waits)");
    emq_close(p);
    emq_close(c);
}

static struct emq *sig_conn;

static void on_usr1(int sig)
{
    (void)sig;
    emq_interrupt(sig_conn);
}

Test(libemq, interrupt_from_a_signal_handler_ends_a_blocking_wait)
{
    sig_conn = lib_conn();
    struct sigaction sa = {.sa_handler = on_usr1}, old;
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGUSR1, &sa, &old), 0);
    assert_emq_ok(sig_conn, emq_stream(sig_conn, "idle", 1, 0, false));
    struct later l = {.target = pthread_self(), .sig = SIGUSR1};
    later_start(&l);
    struct emq_job *j = NULL;
    assert_emq_err(sig_conn, emq_next_job(sig_conn, &j, -1), EMQ_EINTR);
    later_join(&l);
    cr_assert_null(j);
    assert_emq_ok(sig_conn, emq_ping(sig_conn));
    sigaction(SIGUSR1, &old, NULL);
    emq_close(sig_conn);
}

Test(libemq, a_daemon_killed_mid_call_is_eio)
{
    struct emq *c = lib_conn();
    struct later l = {.kill_daemon = true};
    later_start(&l);
    struct emq_job **jobs;
    size_t n;
    struct emq_claim_opts co = {.wait_ms = 3600000};
    assert_emq_err(c, emq_claim(c, "q", &co, &jobs, &n), EMQ_EIO);
    later_join(&l);
    assert_emq_err(c, emq_ping(c), EMQ_EIO);
    emq_close(c); /* no quit on a broken connection; no crash, no SIGPIPE */
}

Test(libemq, a_stopped_daemon_is_etimeout)
{
    struct emq_options o = {.port = fx_emqd.port, .timeout_ms = 200};
    struct emq *c = NULL;
    assert_emq_ok(c, emq_connect(&c, &o));
    kill(fx_emqd.pid, SIGSTOP);
    assert_emq_err(c, emq_ping(c), EMQ_ETIMEOUT);
    kill(fx_emqd.pid, SIGCONT);
    assert_emq_err(c, emq_ping(c), EMQ_EIO); /* broken: reconnect */
    emq_close(c);
}

/* Whether a connection to the unix socket at path is accepted now. */
static bool unix_accepts(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

Test(libemq, unix_socket_connect)
{
    char path[64];
    snprintf(path, sizeof(path), "/tmp/emq-libtest-%d.sock", (int)getpid());
    unlink(path);
    emqd_kill(&fx_emqd);
    const char *const extra[] = {"--unix", path, NULL};
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);
    /* emqd_start waits for the TCP listener, which emqd opens just before
     * the unix one: wait for the socket this test uses. */
    await(unix_accepts(path), "emqd to listen on %s", path);
    struct emq_options o = {0};
    char addr[80];
    snprintf(addr, sizeof(addr), "unix:%s", path);
    cr_assert_eq(emq_parse_addr(&o, addr), EMQ_OK);
    struct emq *c = NULL;
    assert_emq_ok(c, emq_connect(&c, &o));
    put(c, "u", "JOBu1", "TENa", 1);
    cr_assert_eq(state_of(c, "u", "JOBu1"), EMQ_STATE_PENDING);
    emq_close(c);
    emqd_kill(&fx_emqd);
    unlink(path);
}

/* A fake server on a free port that answers the first line with `reply`. */
struct fake {
    pthread_t thread;
    int lfd, port;
    const char *reply;
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);
    char buf[4096];
    if (fd >= 0 && read(fd, buf, sizeof(buf)) > 0) {
        ssize_t w = write(fd, f->reply, strlen(f->reply));
        (void)w;
        /* A reply with a line end stays on the line until the client is
         * done with it and hangs up; one without is followed by the EOF
         * the client must see. */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        while (strchr(f->reply, '\n') != NULL && poll(&p, 1, wait_deadline_ms(0)) == 1 &&
               read(fd, buf, sizeof(buf)) > 0)
            ;
    }
    if (fd >= 0)
        close(fd);
    return NULL;
}

static int fake_hello(const char *reply)
{
    struct fake f = {.reply = reply, .port = test_free_port()};
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((unsigned short)f.port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    f.lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(f.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    cr_assert_eq(bind(f.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(f.lfd, 1), 0);
    cr_assert_eq(pthread_create(&f.thread, NULL, fake_main, &f), 0);
    struct emq_options o = {.port = f.port, .timeout_ms = 2000};
    struct emq *c = NULL;
    int rc = emq_connect(&c, &o);
    emq_close(c);
    pthread_join(f.thread, NULL);
    close(f.lfd);
    return rc;
}

Test(libemq, a_broken_server_is_ebadreply_not_a_crash)
{
    cr_assert_eq(fake_hello("{\"ref\":9,\"ok\":true,\"protocol\":1}\n"), EMQ_EBADREPLY);
    cr_assert_eq(fake_hello("not json\n"), EMQ_EBADREPLY);
    cr_assert_eq(fake_hello("[1,2]\n"), EMQ_EBADREPLY);
    cr_assert_eq(fake_hello("{\"ref\":1,\"ok\":true,\"protocol\":2}\n"), EMQ_EBADREPLY);
    cr_assert_eq(fake_hello("{\"ref\":1,\"ok\":false,\"error\":\"EWHAT\"}\n"), EMQ_ESERVER);
    cr_assert_eq(fake_hello("{\"ref\":1,\"ok\":true,\"protocol\":1}"), EMQ_EIO, "no line end");
    cr_assert_eq(fake_hello("\n{\"push\":\"news\"}\r\n{\"ref\":1,\"ok\":true,\"protocol\":1}\n"),
                 EMQ_OK);
}

Test(libemq, large_requests_and_an_oversized_line)
{
    struct emq *c = lib_conn();
    /* ~600 KB in one line: written in many partial sends. */
    enum { N = 3000 };
    static struct emq_item items[N];
    static struct emq_item_result r[N];
    char pad[201];
    memset(pad, 'x', 200);
    pad[200] = '\0';
    json_t *p = json_pack("{s:s}", "pad", pad);
    for (int i = 0; i < N; i++)
        items[i] = (struct emq_item){.payload = p, .opts = {.group = i % 2 ? "TENa" : "TENb"}};
    assert_emq_ok(c, emq_enqueue_many(c, "big", NULL, items, N, r));
    for (int i = 0; i < N; i++)
        cr_assert_eq(r[i].code, EMQ_OK, "item %d: %s", i, r[i].message);
    struct emq_stats s;
    assert_emq_ok(c, emq_stats(c, "big", &s));
    cr_assert_eq(s.pending, N);
    json_decref(p);

    /* Over the server's 1 MiB line limit: ETOOBIG, answered without ref
     * (the server never read the line); the connection goes on. */
    size_t big = (1u << 20) + 16;
    char *text = malloc(big + 1);
    cr_assert_not_null(text);
    memset(text, 'y', big);
    text[big] = '\0';
    p = json_string(text);
    free(text);
    assert_emq_err(c, emq_enqueue(c, "big", p, NULL, NULL), EMQ_ETOOBIG);
    json_decref(p);
    long long d = -1;
    assert_emq_ok(c, emq_depth(c, "big", "TENa", &d));
    cr_assert_eq(d, N / 2);
    emq_close(c);
}
