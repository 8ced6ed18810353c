/* Integration: the dashboard's /api on emqd's HTTP listener (proto/HTTP.md)
 * against a real redis-server. An /api op answers the protocol's own
 * reply line; the gate (token, cross-site checks, media type, method, op)
 * refuses before anything reaches Redis; bad arguments get the
 * protocol's errors and write nothing; bodies are bounded; identical
 * reads share one backend call; the page's files are served. */
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <jansson.h>

#include "fixture.h"
#include "lua_scripts.h"
#include "tokens.h"

TestSuite(dashboard_api, .fini = fx_teardown, .timeout = 120);

/* One HTTP answer: its status and body (NUL-terminated). */
struct answer {
    int status;
    char *body;
    char raw[1 << 18];
};

static int http_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "http port");
    return fd;
}

static void http_send(int fd, const char *method, const char *path, const char *headers,
                      const char *body)
{
    size_t blen = body != NULL ? strlen(body) : 0;
    size_t cap = 256 + strlen(path) + strlen(headers) + blen;
    char *req = malloc(cap);
    /* Host: 127.0.0.1 unless the test sends its own. */
    int n = snprintf(req, cap, "%s %s HTTP/1.1\r\n%s%sContent-Length: %zu\r\n\r\n", method, path,
                     strstr(headers, "Host:") != NULL ? "" : "Host: 127.0.0.1\r\n", headers, blen);
    cr_assert(n > 0 && (size_t)n < cap);
    memcpy(req + n, body != NULL ? body : "", blen);
    size_t len = (size_t)n + blen, off = 0;
    while (off < len) {
        ssize_t w = write(fd, req + off, len - off);
        if (w <= 0)
            break; /* the daemon may answer (413) and close before all is sent */
        off += (size_t)w;
    }
    free(req);
}

/* Read the whole answer (the daemon closes after it) into a. */
static void http_read(int fd, struct answer *a)
{
    size_t len = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (len + 1 < sizeof(a->raw) && poll(&pfd, 1, wait_deadline_ms(10000)) == 1) {
        ssize_t r = read(fd, a->raw + len, sizeof(a->raw) - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    a->raw[len] = '\0';
    close(fd);
    cr_assert(sscanf(a->raw, "HTTP/1.1 %d", &a->status) == 1, "no answer: %.200s", a->raw);
    char *b = strstr(a->raw, "\r\n\r\n");
    cr_assert_not_null(b);
    a->body = b + 4;
}

static struct answer *http(const char *method, const char *path, const char *headers,
                           const char *body)
{
    static struct answer a;
    int fd = http_open(fx_emqd.metrics_port);
    http_send(fd, method, path, headers, body);
    http_read(fd, &a);
    return &a;
}

/* The headers the page sends. */
#define PAGE "Content-Type: application/json\r\nX-Emq-Request: dashboard\r\n"

/* POST /api/op as the page does (extra headers first), expecting status. */
static char *api(const char *extra, const char *op, const char *body, int status)
{
    char path[64], headers[512];
    snprintf(path, sizeof(path), "/api/%s", op);
    snprintf(headers, sizeof(headers), "%s%s", extra, PAGE);
    struct answer *a = http("POST", path, headers, body);
    cr_assert_eq(a->status, status, "%s %s: HTTP %d: %s", op, body, a->status, a->body);
    return a->body;
}

/* The body is the protocol error line with code. */
static void assert_error_body(const char *body, const char *code)
{
    json_t *r = json_loads(body, 0, NULL);
    assert_err(r, code);
    json_decref(r);
}

/* Whether the group is paused, read over the protocol (c said hello). */
static bool paused(struct tc_conn *c, const char *q, const char *group)
{
    json_t *r = OK(c, "{\"op\":\"groups\",\"queue\":\"%s\",\"count\":1000}", q);
    bool p = false;
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(r, "groups"), i, g)
    {
        if (strcmp(jstr(g, "group"), group) == 0)
            p = json_is_true(json_object_get(g, "paused"));
    }
    json_decref(r);
    return p;
}

/* Count the calls of one script Redis runs from now on: every command
 * goes to the slow log (threshold 0), which stats_calls then reads.
 * The daemon's own upkeep runs other scripts meanwhile; only this one's
 * calls are counted. */
static void script_calls_begin(void)
{
    redisContext *r = redis_server_connect(&fx_redis);
    cr_assert_not_null(r);
    const char *const cmds[] = {"CONFIG SET slowlog-max-len 100000",
                                "CONFIG SET slowlog-log-slower-than 0", "SLOWLOG RESET"};
    for (size_t i = 0; i < 3; i++) {
        redisReply *rep = redisCommand(r, cmds[i]);
        cr_assert(rep != NULL && rep->type != REDIS_REPLY_ERROR, "%s", cmds[i]);
        freeReplyObject(rep);
    }
    redisFree(r);
}

static long long script_calls(enum script_id id)
{
    redisContext *r = redis_server_connect(&fx_redis);
    cr_assert_not_null(r);
    redisReply *rep = redisCommand(r, "SLOWLOG GET 100000");
    cr_assert(rep != NULL && rep->type == REDIS_REPLY_ARRAY);
    long long n = 0;
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        const redisReply *argv = e->elements > 3 ? e->element[3] : NULL;
        if (argv != NULL && argv->type == REDIS_REPLY_ARRAY && argv->elements > 1 &&
            strcasecmp(argv->element[0]->str, "fcall") == 0 &&
            strcmp(argv->element[1]->str, script_table[id].function) == 0)
            n++;
    }
    freeReplyObject(rep);
    redisFree(r);
    return n;
}

/* The body is {"ok":true,...}: parsed, for the caller to free. */
static json_t *ok_body(const char *body)
{
    json_t *r = json_loads(body, 0, NULL);
    assert_ok(r);
    return r;
}

Test(dashboard_api, an_op_answers_the_protocols_own_reply_line)
{
    fx_setup();
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"dq\",\"payload\":1,\"group\":\"TENa\"}"));
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"dq\",\"payload\":2}"));

    /* Byte for byte the line a connection gets (the reply's own order of
     * fields kept), newline included. */
    json_t *want = OK(c, "{\"op\":\"stats\",\"queue\":\"dq\",\"ref\":7}");
    char *want_s = json_dumps(want, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *got = api("", "stats", " { \"queue\":\"dq\", \"ref\":7 }", 200);
    size_t n = strlen(got);
    cr_assert(n > 0 && got[n - 1] == '\n', "not a line: %s", got);
    got[n - 1] = '\0';
    cr_assert_str_eq(got, want_s);
    free(want_s);
    json_decref(want);

    /* A lever takes effect, as the protocol then shows it. */
    cr_assert(!paused(c, "dq", "TENa"));
    json_t *r = ok_body(api("", "pause", "{\"queue\":\"dq\",\"group\":\"TENa\"}", 200));
    cr_assert(json_is_true(json_object_get(r, "changed")));
    json_decref(r);
    cr_assert(paused(c, "dq", "TENa"));
    json_decref(ok_body(api("", "resume", "{\"queue\":\"dq\",\"group\":\"TENa\"}", 200)));
    cr_assert(!paused(c, "dq", "TENa"));
    /* An empty body is {}: the op's own argument check answers. */
    assert_error_body(api("", "stats", "", 200), "EARG");
    tc_close(c);
}

/* Each refusal of the gate: its status and code, and the lever it
 * carried did nothing. */
Test(dashboard_api, the_gate_refuses_forged_and_unauthenticated_requests)
{
    const char *const extra[] = {"--token", "s3cret", NULL};
    /* emqd lets clients in once its backend answers; with a token the
     * fixture's readiness probe (a depth) would need a hello. */
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"s3cret\"}"));
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"gq\",\"payload\":1,\"group\":\"TENa\"}"));
    const char *pause = "{\"queue\":\"gq\",\"group\":\"TENa\"}";
    static const struct {
        const char *headers; /* the whole head but Host and Content-Length */
        const char *method;
        int status;
        const char *code;
    } refused[] = {
        /* no token, a wrong one, one of another scheme */
        {PAGE, "POST", 401, "EAUTH"},
        {"Authorization: Bearer s3cre\r\n" PAGE, "POST", 401, "EAUTH"},
        {"Authorization: Bearer s3cret2\r\n" PAGE, "POST", 401, "EAUTH"},
        {"Authorization: Basic s3cret\r\n" PAGE, "POST", 401, "EAUTH"},
        /* another site's page, with the token (a browser that kept it) */
        {"Authorization: Bearer s3cret\r\nOrigin: http://evil.example\r\n" PAGE, "POST", 403,
         "EAUTH"},
        {"Authorization: Bearer s3cret\r\nOrigin: null\r\n" PAGE, "POST", 403, "EAUTH"},
        {"Authorization: Bearer s3cret\r\nSec-Fetch-Site: cross-site\r\n" PAGE, "POST", 403,
         "EAUTH"},
        {"Authorization: Bearer s3cret\r\nSec-Fetch-Site: same-site\r\n" PAGE, "POST", 403,
         "EAUTH"},
        /* a plain form post: no custom header, not JSON */
        {"Authorization: Bearer s3cret\r\nContent-Type: application/json\r\n", "POST", 403,
         "EAUTH"},
        {"Authorization: Bearer s3cret\r\nX-Emq-Request: 1\r\n"
         "Content-Type: application/x-www-form-urlencoded\r\n",
         "POST", 415, "EPROTO"},
        {"Authorization: Bearer s3cret\r\nX-Emq-Request: 1\r\nContent-Type: text/plain\r\n", "POST",
         415, "EPROTO"},
        /* not a POST */
        {"Authorization: Bearer s3cret\r\n" PAGE, "GET", 405, "EPROTO"},
        {"Authorization: Bearer s3cret\r\n" PAGE, "PUT", 405, "EPROTO"},
    };
    long long before = fx_redis_dbsize();
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        struct answer *a = http(refused[i].method, "/api/pause", refused[i].headers, pause);
        cr_assert_eq(a->status, refused[i].status, "case %zu: HTTP %d %s", i, a->status, a->body);
        assert_error_body(a->body, refused[i].code);
        cr_assert(!paused(c, "gq", "TENa"), "case %zu paused the group", i);
    }
    cr_assert_eq(fx_redis_dbsize(), before);

    /* Without the token even an op that does not exist is EAUTH (as on a
     * connection before hello). */
    assert_error_body(api("", "nosuch", "{}", 401), "EAUTH");
    /* The page's own origin, and the token: it runs. */
    json_decref(ok_body(api("Authorization: Bearer s3cret\r\nOrigin: http://127.0.0.1\r\n"
                            "Sec-Fetch-Site: same-origin\r\n",
                            "pause", pause, 200)));
    cr_assert(paused(c, "gq", "TENa"));
    tc_close(c);
}

/* Failed tokens over /api count against the address as failed hellos
 * do: five open a window (an hour here, so nothing depends on timing) in
 * which the right token is refused too, over /api and over hello, and
 * the request reaches nothing. */
Test(dashboard_api, failed_tokens_back_off_the_address_as_hellos_do)
{
    const char *const extra[] = {"--token", "s3cret", "--auth-backoff-ms", "3600000", NULL};
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"s3cret\"}"));
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"bq\",\"payload\":1,\"group\":\"TENa\"}"));
    const char *pause = "{\"queue\":\"bq\",\"group\":\"TENa\"}";
    /* A right token first: the count starts at none. */
    json_decref(
        ok_body(api("Authorization: Bearer s3cret\r\n", "depth", "{\"queue\":\"bq\"}", 200)));
    for (int i = 0; i < 5; i++)
        assert_error_body(api("Authorization: Bearer wrong\r\n", "pause", pause, 401), "EAUTH");
    char *body = api("Authorization: Bearer s3cret\r\n", "pause", pause, 401);
    assert_error_body(body, "EAUTH");
    cr_assert(strstr(body, "too many failed token checks from this address") != NULL, "%s", body);
    cr_assert(!paused(c, "bq", "TENa"), "a refused request paused the group");
    /* The window is the address's: a hello with the right token waits too. */
    struct tc_conn *h = fx_conn();
    json_t *r = tc_call(h, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"s3cret\"}");
    assert_err(r, "EAUTH");
    cr_assert(strstr(jstr(r, "message"), "too many failed hellos from this address") != NULL, "%s",
              jstr(r, "message"));
    json_decref(r);
    tc_close(h);
    tc_close(c);
}

/* Without a token, a page of another site whose name points at
 * 127.0.0.1 (DNS rebinding) is same-origin by the browser's lights: its
 * Host gives it away. */
Test(dashboard_api, without_a_token_only_a_loopback_host_is_served)
{
    fx_setup();
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"hq\",\"payload\":1,\"group\":\"TENa\"}"));
    const char *pause = "{\"queue\":\"hq\",\"group\":\"TENa\"}";
    const char *const foreign[] = {
        "Host: evil.example:9711\r\nOrigin: http://evil.example:9711\r\n",
        "Host: evil.example\r\n",
        "Host: 127.0.0.1.evil.example\r\n",
        "Host: 10.0.0.1:9711\r\n",
        "Host: [::2]:9711\r\n",
        "Host: 127.0.0.1x\r\n",
    };
    for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
        assert_error_body(api(foreign[i], "pause", pause, 403), "EAUTH");
        cr_assert(!paused(c, "hq", "TENa"), "case %zu paused the group", i);
    }
    const char *const loopback[] = {"Host: localhost:9711\r\n", "Host: [::1]:9711\r\n",
                                    "Host: 127.0.0.2\r\n", "Host: LOCALHOST\r\n"};
    for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
        json_decref(
            ok_body(api(loopback[i], "depth", "{\"queue\":\"hq\",\"group\":\"TENa\"}", 200)));
    tc_close(c);
}

/* A token of the tokens file has its role over /api as over hello: a
 * producer's reads run, a lever is EPERM and does nothing; a worker's
 * token pulls no lever either; the admin's does. */
Test(dashboard_api, a_tokens_file_token_keeps_its_role)
{
    char path[] = "/tmp/emq-dash-tokens-XXXXXX", text[1024], hp[65], hw[65], ha[65];
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    tokens_hash_hex("prod-secret", 11, hp);
    tokens_hash_hex("work-secret", 11, hw);
    tokens_hash_hex("admin-secret", 12, ha);
    snprintf(text, sizeof(text), "mailer producer %s\ncrunch worker %s\nops admin %s\n", hp, hw,
             ha);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    const char *const extra[] = {"--tokens-file", path, NULL};
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0);
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"admin-secret\"}"));
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"tq\",\"payload\":1,\"group\":\"TENa\"}"));
    const char *pause = "{\"queue\":\"tq\",\"group\":\"TENa\"}";
    json_t *r =
        ok_body(api("Authorization: Bearer prod-secret\r\n", "stats", "{\"queue\":\"tq\"}", 200));
    cr_assert_eq(jint(r, "pending"), 1);
    json_decref(r);
    assert_error_body(api("Authorization: Bearer prod-secret\r\n", "pause", pause, 200), "EPERM");
    assert_error_body(api("Authorization: Bearer work-secret\r\n", "pause", pause, 200), "EPERM");
    assert_error_body(api("Authorization: Bearer nope\r\n", "stats", "{\"queue\":\"tq\"}", 401),
                      "EAUTH");
    cr_assert(!paused(c, "tq", "TENa"));
    json_decref(ok_body(api("Authorization: Bearer admin-secret\r\n", "pause", pause, 200)));
    cr_assert(paused(c, "tq", "TENa"));
    tc_close(c);
    unlink(path);
}

Test(dashboard_api, ops_the_api_does_not_offer_are_refused)
{
    fx_setup();
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"oq\",\"payload\":1}"));
    long long before = fx_redis_dbsize();
    const char *const offlimits[] = {"claim",  "stream", "complete", "hello", "enqueue", "quit",
                                     "nosuch", "STATS",  "stats/x",  "a-b",   ""};
    for (size_t i = 0; i < sizeof(offlimits) / sizeof(offlimits[0]); i++)
        assert_error_body(api("", offlimits[i], "{\"queue\":\"oq\",\"payload\":1}", 404),
                          "EUNKNOWN");
    cr_assert_eq(fx_redis_dbsize(), before);
    json_t *r = OK(c, "{\"op\":\"stats\",\"queue\":\"oq\"}");
    cr_assert_eq(jint(r, "pending"), 1);
    cr_assert_eq(jint(r, "active"), 0);
    json_decref(r);
    tc_close(c);
}

/* Bad arguments: the protocol's errors, from the same checks, and not a
 * key written (nor a queue registered). */
Test(dashboard_api, bad_input_gets_the_protocols_errors_and_writes_nothing)
{
    fx_setup();
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"bq\",\"payload\":1,\"group\":\"TENa\"}"));
    long long before = fx_redis_dbsize();
    static const struct {
        const char *op, *body, *code;
    } bad[] = {
        {"pause", "{\"queue\":\"bq\",\"group\":\"bad\"}", "EBRAND"},
        {"pause", "{\"queue\":\"new queue\",\"group\":\"TENa\"}", "EQUEUE"},
        {"pause", "{\"queue\":\"fresh\",\"group\":\"TENa\",\"x\":1}", "EARG"},
        {"pause", "{\"queue\":\"fresh\"}", "EARG"},
        {"limit", "{\"queue\":\"fresh\",\"group\":\"TENa\",\"max\":-1}", "EARG"},
        {"limit", "{\"queue\":\"fresh\",\"group\":\"TENa\",\"max\":\"2\"}", "EARG"},
        {"drain", "{\"queue\":\"fresh\",\"group\":7}", "EARG"},
        {"remove", "{\"queue\":\"fresh\",\"job\":\"nope\"}", "EKIND"},
        {"dead", "{\"queue\":\"fresh\",\"action\":\"burn\"}", "EARG"},
        {"groups", "{\"queue\":\"fresh\",\"cursor\":\"x\"}", "EARG"},
        {"peek", "{\"queue\":\"fresh\",\"state\":\"dead\",\"group\":\"TENa\"}", "EARG"},
        /* the parse rules of a request line apply to the body */
        {"pause", "{\"queue\":\"bq\",\"group\":\"TENa\",\"group\":\"TENb\"}", "EPROTO"},
        {"pause", "{\"op\":\"claim\",\"queue\":\"bq\",\"group\":\"TENa\"}", "EPROTO"},
        {"pause", "{\"queue\":\"bq\",\"group\":\"TENa\"", "EPROTO"},
        {"pause", "{\"queue\":\"bq\",\"group\":\"TENa\"} {}", "EPROTO"},
        {"pause", "{\"queue\":\"bq\",\"group\":\"TEN\\u0000\"}", "EPROTO"},
        {"pause", "{\"queue\":\"bq\",\"group\":\"TENa\",\"ref\":[1]}", "EPROTO"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_error_body(api("", bad[i].op, bad[i].body, 200), bad[i].code);
    /* Not an object at all: refused before it is a request line. */
    const char *const not_objects[] = {"[1]", "\"x\"", "7", "null", "queue=bq"};
    for (size_t i = 0; i < sizeof(not_objects) / sizeof(not_objects[0]); i++)
        assert_error_body(api("", "pause", not_objects[i], 400), "EPROTO");
    cr_assert_eq(fx_redis_dbsize(), before, "a refused request wrote to Redis");
    cr_assert(!paused(c, "bq", "TENa"));
    json_t *q = OK(c, "{\"op\":\"stats\",\"queue\":\"fresh\"}");
    cr_assert_eq(jint(q, "groups"), 0);
    json_decref(q);
    tc_close(c);
}

/* A body past 64 KiB is refused (413) without being run, and so is a
 * head past 8 KiB; the daemon serves on. */
Test(dashboard_api, bodies_and_heads_are_bounded)
{
    fx_setup();
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"lq\",\"payload\":1,\"group\":\"TENa\"}"));
    size_t big = 70 * 1024;
    char *body = malloc(big + 64);
    int n = snprintf(body, big + 64, "{\"queue\":\"lq\",\"group\":\"TENa\",\"ref\":\"");
    memset(body + n, 'x', big);
    strcpy(body + n + big, "\"}");
    struct answer *a = http("POST", "/api/pause", PAGE, body);
    cr_assert_eq(a->status, 413, "HTTP %d", a->status);
    cr_assert(!paused(c, "lq", "TENa"));

    /* Just under the cap it is a request like any other. */
    size_t fits = 60 * 1024;
    n = snprintf(body, big + 64, "{\"queue\":\"lq\",\"group\":\"TENa\",\"ref\":\"");
    memset(body + n, 'y', fits);
    strcpy(body + n + fits, "\"}");
    json_t *r = ok_body(api("", "pause", body, 200));
    cr_assert_eq(strlen(jstr(r, "ref")), fits);
    json_decref(r);
    cr_assert(paused(c, "lq", "TENa"));

    char *head = malloc(12 * 1024);
    n = snprintf(head, 12 * 1024, "X-Filler: ");
    memset(head + n, 'h', 10 * 1024);
    strcpy(head + n + 10 * 1024, "\r\n" PAGE);
    a = http("POST", "/api/resume", head, "{\"queue\":\"lq\",\"group\":\"TENa\"}");
    cr_assert_eq(a->status, 413, "HTTP %d", a->status);
    cr_assert(paused(c, "lq", "TENa"));
    free(head);
    free(body);
    json_decref(ok_body(api("", "stats", "{\"queue\":\"lq\"}", 200)));
    tc_close(c);
}

/* Twenty dashboards ask for the same view at once, and again: Redis sees
 * one call. Distinct reads, more than run at once, are all answered,
 * each with its own reply. */
Test(dashboard_api, identical_reads_share_one_backend_call)
{
    const char *const extra[] = {"--http-cache-ms", "60000", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"cq\",\"payload\":1,\"group\":\"TENa\"}"));
    enum { TABS = 20 };
    int fds[TABS];
    static struct answer a[TABS];
    const char *body = "{\"queue\":\"cq\"}";
    script_calls_begin();
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < TABS; i++) {
            fds[i] = http_open(fx_emqd.metrics_port);
            http_send(fds[i], "POST", "/api/stats", PAGE, body);
        }
        for (int i = 0; i < TABS; i++) {
            http_read(fds[i], &a[i]);
            cr_assert_eq(a[i].status, 200);
            json_t *r = ok_body(a[i].body);
            cr_assert_eq(jint(r, "pending"), 1);
            json_decref(r);
        }
    }
    long long calls = script_calls(SCRIPT_STATS);
    cr_assert_eq(calls, 1, "%lld stats calls for 40 reads", calls);

    /* Forty different reads at once (ten times API_RUNNING_MAX): each
     * answered, with its own depth. */
    enum { MANY = 40 };
    static char bodies[MANY][96];
    int mfds[MANY];
    for (int i = 0; i < MANY; i++) {
        snprintf(bodies[i], sizeof(bodies[i]), "{\"queue\":\"cq\",\"group\":\"TENg%d\",\"ref\":%d}",
                 i, i);
        if (i % 4 == 0)
            json_decref(OK(
                c, "{\"op\":\"enqueue\",\"queue\":\"cq\",\"payload\":1,\"group\":\"TENg%d\"}", i));
    }
    for (int i = 0; i < MANY; i++) {
        mfds[i] = http_open(fx_emqd.metrics_port);
        http_send(mfds[i], "POST", "/api/depth", PAGE, bodies[i]);
    }
    for (int i = 0; i < MANY; i++) {
        static struct answer m;
        http_read(mfds[i], &m);
        cr_assert_eq(m.status, 200);
        json_t *r = ok_body(m.body);
        cr_assert_eq(jint(r, "ref"), i);
        cr_assert_eq(jint(r, "depth"), i % 4 == 0 ? 1 : 0, "TENg%d", i);
        json_decref(r);
    }
    /* A lever is never shared: each pause runs (the second finds it
     * paused already). */
    json_t *p1 = ok_body(api("", "pause", "{\"queue\":\"cq\",\"group\":\"TENa\"}", 200));
    json_t *p2 = ok_body(api("", "pause", "{\"queue\":\"cq\",\"group\":\"TENa\"}", 200));
    cr_assert(json_is_true(json_object_get(p1, "changed")));
    cr_assert(json_is_false(json_object_get(p2, "changed")));
    json_decref(p1);
    json_decref(p2);
    tc_close(c);
}

/* throughput: the jobs the daemon saw move, from memory (no backend call);
 * its history fills in ten-second steps. */
Test(dashboard_api, rates_counts_what_the_daemon_saw)
{
    fx_setup();
    struct tc_conn *c = fx_conn();
    for (int i = 0; i < 3; i++)
        json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"rq\",\"payload\":%d}", i));
    json_t *cl = OK(c, "{\"op\":\"claim\",\"queue\":\"rq\",\"flat\":true}");
    json_t *job = json_array_get(json_object_get(cl, "jobs"), 0);
    json_decref(OK(c, "{\"op\":\"complete\",\"queue\":\"rq\",\"job\":\"%s\",\"lease\":\"%s\"}",
                   jstr(job, "job"), jstr(job, "lease")));
    json_decref(cl);
    /* With Redis stopped (SIGSTOP: it answers nothing), throughput answers
     * all the same. */
    kill(fx_redis.pid, SIGSTOP);
    json_t *r = ok_body(api("", "throughput", "{\"queue\":\"rq\"}", 200));
    kill(fx_redis.pid, SIGCONT);
    cr_assert_eq(jint(r, "interval_ms"), 10000);
    json_t *q = json_array_get(json_object_get(r, "queues"), 0);
    cr_assert_str_eq(jstr(q, "queue"), "rq");
    cr_assert_eq(jint(q, "enqueued"), 3);
    cr_assert_eq(jint(q, "completed"), 1);
    cr_assert_eq(jint(q, "failed"), 0);
    json_decref(r);
    /* Over the protocol too, and a queue it does not know is no entry. */
    r = OK(c, "{\"op\":\"throughput\",\"queue\":\"unknown\"}");
    cr_assert_eq(json_array_size(json_object_get(r, "queues")), 0);
    json_decref(r);

    /* Wait for one complete interval of history. */
    struct wait w;
    wait_begin(&w, 60000);
    size_t n = 0;
    do {
        r = OK(c, "{\"op\":\"throughput\",\"queue\":\"rq\"}");
        q = json_array_get(json_object_get(r, "queues"), 0);
        n = json_array_size(json_object_get(json_object_get(q, "history"), "enqueued"));
        json_decref(r);
    } while (n == 0 && wait_again(&w));
    cr_assert_geq(n, 1, "no history after %lld ms", wait_elapsed_ms(&w));
    tc_close(c);
}

/* The page's files, from the binary; unknown paths 404; /metrics as before. */
Test(dashboard_api, the_page_is_served)
{
    fx_setup();
    struct answer *a = http("GET", "/", "", NULL);
    cr_assert_eq(a->status, 200);
    cr_assert(strstr(a->raw, "Content-Type: text/html") != NULL);
    cr_assert(strstr(a->raw, "Content-Security-Policy: default-src 'self'") != NULL);
    cr_assert(strstr(a->body, "<script src=\"app.js\"") != NULL, "%.300s", a->body);
    a = http("GET", "/app.js", "", NULL);
    cr_assert_eq(a->status, 200);
    cr_assert(strstr(a->raw, "Content-Type: text/javascript") != NULL);
    cr_assert(strstr(a->body, "X-Emq-Request") != NULL);
    a = http("GET", "/app.css", "", NULL);
    cr_assert_eq(a->status, 200);
    a = http("GET", "/nope.html", "", NULL);
    cr_assert_eq(a->status, 404);
    a = http("POST", "/", PAGE, "{}");
    cr_assert_eq(a->status, 405);
    a = http("HEAD", "/", "", NULL);
    cr_assert_eq(a->status, 405);
    a = http("GET", "/metrics", "", NULL);
    cr_assert_eq(a->status, 200);
    cr_assert(strstr(a->body, "emqd_requests_total") != NULL);
}
