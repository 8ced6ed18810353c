/* Roles (PROTOCOL.md 7): tokens from a tokens file, each with a role and
 * maybe queue patterns. Every op of the command tables is tried by each
 * role, pipelined: refused EPERM exactly where PROTOCOL.md 7's table says
 * (the list below, written from the protocol, not read from the tables),
 * with nothing reaching Redis (MONITOR), counted and logged; allowed
 * everywhere else. Then the patterns, a reload by SIGHUP (for new hellos
 * and for connections already authenticated), a malformed file at start
 * and at reload, and the per-address backoff of failed hellos. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmd.h"
#include "fixture.h"
#include "monitor.h"
#include "tokens.h"

static char tokens_path[32];

static void roles_teardown(void)
{
    if (tokens_path[0] != '\0')
        unlink(tokens_path);
    fx_teardown();
}

TestSuite(roles, .fini = roles_teardown, .timeout = 120);

/* The roles of PROTOCOL.md 7: what a producer may do, and what a worker
 * may do besides. Every other op, including any added later, is admin's:
 * a new op is tried here by each role without this file changing. */
static const char *const producer_ops[] = {"hello",        "ping",  "quit", "enqueue",
                                           "enqueue_many", "depth", "stats"};
static const char *const worker_ops[] = {"claim",   "complete", "fail",
                                         "release", "extend",   "stream"};

static bool listed(const char *const *ops, size_t n, const char *op)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ops[i], op) == 0)
            return true;
    return false;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static bool allowed(enum tokens_role role, const char *op)
{
    return role == TOKENS_ADMIN || listed(producer_ops, N(producer_ops), op) ||
           (role == TOKENS_WORKER && listed(worker_ops, N(worker_ops), op));
}

/* --- the tokens file -------------------------------------------------- */

/* "NAME ROLE HASH PATTERNS" for token. */
static void token_line(char *out, size_t cap, const char *name, const char *role, const char *token,
                       const char *patterns)
{
    char hex[65];
    tokens_hash_hex(token, strlen(token), hex);
    snprintf(out, cap, "%s %s %s %s\n", name, role, hex, patterns ? patterns : "");
}

/* The usual file: one token per role, and a worker held to tenant-a. */
static void usual_tokens(char *text, size_t cap)
{
    char l[4][256];
    token_line(l[0], sizeof(l[0]), "mailer", "producer", "prod-secret", NULL);
    token_line(l[1], sizeof(l[1]), "crunch", "worker", "work-secret", NULL);
    token_line(l[2], sizeof(l[2]), "ops", "admin", "admin-secret", NULL);
    token_line(l[3], sizeof(l[3]), "tenant-a", "worker", "tenant-secret", "tenant-a.* shared");
    snprintf(text, cap, "# the roles test\n\n%s%s%s%s", l[0], l[1], l[2], l[3]);
}

static void rewrite_tokens(const char *text)
{
    FILE *f = fopen(tokens_path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

/* Redis, and an emqd with the tokens file holding text (its log in a
 * file); more is further arguments or NULL. emqd listens only once Redis
 * answers, so the backend is up when this returns. */
static void start_with(const char *text, const char *const *more)
{
    const char *extra[16] = {"--tokens-file", NULL};
    size_t n = 2;
    emqd_write_temp(tokens_path, text);
    extra[1] = tokens_path;
    for (size_t i = 0; more != NULL && more[i] != NULL && n < 15; i++)
        extra[n++] = more[i];
    extra[n] = NULL;
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0, "emqd did not start");
}

static void start_usual(void)
{
    char text[2048];
    usual_tokens(text, sizeof(text));
    start_with(text, NULL);
}

static void await_log(const char *needle)
{
    await(emqd_log_has(&fx_emqd, needle), "the log line %s", needle);
}

/* A new connection, authenticated with token (asserting the hello's
 * reply names role). */
static struct tc_conn *conn_as(const char *token, const char *role)
{
    struct tc_conn *c = fx_conn();
    json_t *r = OK(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"%s\"}", token);
    cr_assert_str_eq(jstr(r, "role"), role, "hello's reply says the role");
    json_decref(r);
    return c;
}

/* --- a request for every op, made from its argument spec ---------------- */

/* A value for one required argument: of its type and in its bounds, and
 * valid as an id where the spec checks one. */
static json_t *value_for(const struct arg_spec *a, const char *queue)
{
    switch (a->type) {
    case ARG_STRING:
        if (a->flags & ARG_QUEUE)
            return json_string(queue);
        if (a->flags & ARG_JOB)
            return json_string("JOBroles1");
        if (a->flags & ARG_GROUP)
            return json_string("TENroles");
        if (strcmp(a->name, "action") == 0)
            return json_string("list"); /* dead's check wants one of its words */
        return json_string("1-0");
    case ARG_INT:
    case ARG_INT_OR_NULL:
        return json_integer(a->min);
    case ARG_BOOL:
        return json_false();
    case ARG_ARRAY:
        return json_pack("[{s:i}]", "payload", 1);
    case ARG_OBJECT:
        return json_object();
    default:
        return json_integer(1);
    }
}

/* The request line for cmd on queue, with ref, as text (caller frees). */
static char *request_for(const struct cmd *cmd, const char *queue, size_t ref)
{
    json_t *o = json_pack("{s:s, s:I}", "op", cmd->name, "ref", (json_int_t)ref);
    for (const struct arg_spec *a = cmd->spec; a->name != NULL; a++)
        if (a->flags & ARG_REQUIRED)
            json_object_set_new(o, a->name, value_for(a, queue));
    char *line = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    cr_assert_not_null(line);
    return line;
}

/* Send, in one write, the request of every op for which want(role, op)
 * holds (hello and quit aside: every test says hello, and quit ends the
 * connection), then read the replies in order: each has its ref, and is
 * EPERM exactly when refused is true. Returns how many were sent. */
static size_t pipeline_ops(struct tc_conn *c, enum tokens_role role, bool refused,
                           const char *queue)
{
    char *all = calloc(1, 1 << 16);
    size_t len = 0, sent = 0, refs[64];
    const struct cmd *cmd;
    cr_assert_not_null(all);
    for (size_t i = 0; (cmd = cmd_at(i)) != NULL; i++) {
        if (strcmp(cmd->name, "hello") == 0 || strcmp(cmd->name, "quit") == 0 ||
            allowed(role, cmd->name) == refused)
            continue;
        char *line = request_for(cmd, queue, i);
        len += (size_t)snprintf(all + len, (1 << 16) - len, "%s\n", line);
        free(line);
        refs[sent++] = i;
    }
    cr_assert_eq(tc_send(c, all, len), 0);
    free(all);
    for (size_t k = 0; k < sent; k++) {
        const char *op = cmd_at(refs[k])->name;
        json_t *r = tc_read(c, wait_deadline_ms(0));
        cr_assert_not_null(r, "%s %s: no reply", tokens_role_name(role), op);
        cr_assert_eq(jint(r, "ref"), (long long)refs[k], "%s: replies in request order", op);
        if (refused)
            cr_assert_str_eq(tc_error(r), "EPERM", "%s may not %s: got %s", tokens_role_name(role),
                             op, tc_error(r));
        else
            cr_assert_str_neq(tc_error(r), "EPERM", "%s may %s", tokens_role_name(role), op);
        json_decref(r);
    }
    return sent;
}

/* --- what reached Redis -------------------------------------------------- */

static void watch(struct monitor *m)
{
    cr_assert_eq(monitor_start(m, &fx_redis), 0, "MONITOR refused");
}

/* Stop m and assert that no command emqd sent Redis meanwhile names one
 * of the queues (NULL-terminated: their keys, their registration) or,
 * with no_scripts, runs any script (on a daemon that has no queue in use,
 * any script call came from a request). */
static void assert_untouched(struct monitor *m, const char *const *queues, bool no_scripts)
{
    monitor_stop(m);
    for (size_t i = 0; i < m->n; i++) {
        for (const char *const *q = queues; *q != NULL; q++)
            cr_assert(strstr(m->lines[i], *q) == NULL, "a refused request reached Redis: %s",
                      m->lines[i]);
        cr_assert(!no_scripts || strstr(m->lines[i], "\"FCALL\"") == NULL,
                  "a script ran for a refused request: %s", m->lines[i]);
    }
    monitor_free(m);
}

/* --- every op by every role --------------------------------------------- */

/* Each role tries every op it may not use, pipelined, on a queue nobody
 * has named: each is EPERM, and Redis sees nothing of any of them (not
 * even the queue's registration). */
Test(roles, every_op_outside_a_role_is_refused_and_reaches_nothing)
{
    start_usual();
    struct monitor m;
    watch(&m);
    struct tc_conn *p = conn_as("prod-secret", "producer");
    struct tc_conn *w = conn_as("work-secret", "worker");
    size_t np = pipeline_ops(p, TOKENS_PRODUCER, true, "roles-denied");
    size_t nw = pipeline_ops(w, TOKENS_WORKER, true, "roles-denied");
    cr_assert_gt(np, nw, "a producer is refused more than a worker");
    cr_assert_gt(nw, 0);
    /* Both connections still work. */
    json_decref(OK(p, "{\"op\":\"ping\"}"));
    json_decref(OK(w, "{\"op\":\"ping\"}"));
    assert_untouched(&m, (const char *const[]){"roles-denied", NULL}, true);

    /* Counted by role and op, and logged with the token's name. */
    await(emqd_metric(&fx_emqd, "emqd_denied_total{role=\"producer\",op=\"claim\"}") == 1,
          "a producer's claim counted as denied");
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_denied_total{role=\"worker\",op=\"drain\"}"), 1);
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_denied_total{role=\"worker\",op=\"claim\"}"), -1,
                 "a worker may claim: no such series");
    await_log("token=mailer role=producer");
    json_t *r = tc_call(p, "{\"op\":\"drain\",\"queue\":\"roles-denied\"}");
    assert_err(r, "EPERM");
    cr_assert_str_eq(jstr(r, "message"),
                     "the producer token \"mailer\" may not use \"drain\" (admin's)");
    json_decref(r);
    tc_close(p);
    tc_close(w);
}

/* Each role may use every op its table allows: none of them is EPERM. */
Test(roles, every_op_inside_a_role_is_allowed)
{
    start_usual();
    const char *tokens[] = {"prod-secret", "work-secret", "admin-secret"};
    for (enum tokens_role role = TOKENS_PRODUCER; role <= TOKENS_ADMIN; role++) {
        struct tc_conn *c = conn_as(tokens[role - 1], tokens_role_name(role));
        cr_assert_gt(pipeline_ops(c, role, false, "roles-ok"), 0);
        tc_close(c);
    }
    cr_assert_eq(emqd_metric(&fx_emqd, "emqd_requests_total{op=\"claim\",result=\"EPERM\"}"), -1);
}

/* The admin's stats of a queue a producer enqueued to: a producer's
 * enqueue_many and enqueue did their work. */
Test(roles, a_producer_enqueues_and_a_worker_consumes)
{
    start_usual();
    struct tc_conn *p = conn_as("prod-secret", "producer");
    struct tc_conn *w = conn_as("work-secret", "worker");
    json_decref(OK(p, "{\"op\":\"enqueue\",\"queue\":\"rq\",\"payload\":1}"));
    json_decref(OK(p, "{\"op\":\"enqueue_many\",\"queue\":\"rq\",\"jobs\":[{\"payload\":2}]}"));
    cr_assert_eq(fx_stat(p, "rq", "pending"), 2, "a producer reads the stats of its queue");
    json_t *r = OK(w, "{\"op\":\"claim\",\"queue\":\"rq\",\"count\":2,\"flat\":true}");
    json_t *jobs = claim_jobs(r);
    cr_assert_eq(json_array_size(jobs), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *j = json_array_get(jobs, i);
        json_decref(OK(w, "{\"op\":\"complete\",\"queue\":\"rq\",\"job\":\"%s\",\"lease\":\"%s\"}",
                       jstr(j, "job"), jstr(j, "lease")));
    }
    json_decref(r);
    cr_assert_eq(fx_stat(w, "rq", "pending"), 0);
    cr_assert_eq(fx_stat(w, "rq", "active"), 0);
    tc_close(p);
    tc_close(w);
}

/* --- queue patterns ---------------------------------------------------- */

/* A worker held to "tenant-a.* shared": ops on matching queues run, ops
 * on any other are refused EPERM with nothing reaching Redis; the
 * pattern matches whole names. */
Test(roles, queue_patterns_hold_a_token_to_its_queues)
{
    start_usual();
    struct tc_conn *t = conn_as("tenant-secret", "worker");
    json_decref(OK(t, "{\"op\":\"enqueue\",\"queue\":\"tenant-a.mail\",\"payload\":1}"));
    json_decref(OK(t, "{\"op\":\"depth\",\"queue\":\"shared\"}"));
    json_decref(OK(t, "{\"op\":\"claim\",\"queue\":\"tenant-a.\",\"count\":1}"));

    struct monitor m;
    watch(&m);
    const char *refused[] = {
        "{\"op\":\"enqueue\",\"queue\":\"tenant-b.mail\",\"payload\":1,\"ref\":1}",
        "{\"op\":\"claim\",\"queue\":\"tenant-b.mail\",\"ref\":2}",
        "{\"op\":\"stats\",\"queue\":\"tenant-b\",\"ref\":3}",
        "{\"op\":\"depth\",\"queue\":\"xtenant-a.mail\",\"ref\":4}",
        "{\"op\":\"stream\",\"queue\":\"shared2\",\"credit\":1,\"ref\":5}",
        "{\"op\":\"drain\",\"queue\":\"tenant-a.mail\",\"ref\":6}", /* in its queues, not its role
                                                                     */
    };
    char all[2048] = "";
    for (size_t i = 0; i < N(refused); i++) {
        strcat(all, refused[i]);
        strcat(all, "\n");
    }
    cr_assert_eq(tc_send(t, all, strlen(all)), 0);
    for (size_t i = 0; i < N(refused); i++) {
        json_t *r = tc_read(t, wait_deadline_ms(0));
        assert_err(r, "EPERM");
        cr_assert_eq(jint(r, "ref"), (long long)i + 1);
        json_decref(r);
    }
    json_decref(OK(t, "{\"op\":\"ping\"}"));
    /* The drain names tenant-a.mail, which is in use: its refusal is
     * proved by the queue's depth below instead. */
    assert_untouched(&m, (const char *const[]){"tenant-b", "xtenant-a", "shared2", NULL}, false);
    cr_assert_eq(fx_stat(t, "tenant-a.mail", "pending"), 1, "the refused drain drained nothing");
    json_t *r = tc_call(t, "{\"op\":\"depth\",\"queue\":\"tenant-b\"}");
    assert_err(r, "EPERM");
    cr_assert_str_eq(jstr(r, "message"), "the token \"tenant-a\" may not use queue \"tenant-b\"");
    json_decref(r);
    /* A malformed queue name is still EQUEUE: the patterns are checked
     * against valid names only. */
    assert_err_free(tc_call(t, "{\"op\":\"depth\",\"queue\":\"tenant-a.{x}\"}"), "EQUEUE");
    tc_close(t);
}

/* --- the token setting beside the file --------------------------------- */

/* token still means admin when a tokens file is set too; a token of
 * neither is refused. */
Test(roles, the_token_setting_is_admin_beside_the_file)
{
    char text[2048];
    usual_tokens(text, sizeof(text));
    const char *const more[] = {"--token", "plain-admin", NULL};
    start_with(text, more);
    struct tc_conn *a = conn_as("plain-admin", "admin");
    json_decref(OK(a, "{\"op\":\"drain\",\"queue\":\"ta\"}"));
    tc_close(a);
    tc_close(conn_as("prod-secret", "producer"));
    struct tc_conn *c = fx_conn();
    assert_err_free(tc_call(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"nobody\"}"), "EAUTH");
    assert_err_free(tc_call(c, "{\"op\":\"depth\",\"queue\":\"ta\"}"), "EAUTH");
    tc_close(c);
    cr_assert_not(emqd_log_has(&fx_emqd, "prod-secret"), "a token is never logged");
}

/* --- reload -------------------------------------------------------------- */

/* SIGHUP re-reads the file. New hellos see the new table; a connection
 * already authenticated keeps its connection if its line is still there
 * with the same hash, and takes that line's role at once; one whose line
 * is gone is closed (its replies owed written first). */
Test(roles, sighup_reloads_the_file_for_new_and_open_connections)
{
    char text[2048], l[3][256];
    token_line(l[0], sizeof(l[0]), "w1", "worker", "w1-secret", NULL);
    token_line(l[1], sizeof(l[1]), "w2", "worker", "w2-secret", NULL);
    snprintf(text, sizeof(text), "%s%s", l[0], l[1]);
    start_with(text, NULL);
    struct tc_conn *a = conn_as("w1-secret", "worker");
    struct tc_conn *b = conn_as("w2-secret", "worker");
    json_decref(OK(a, "{\"op\":\"claim\",\"queue\":\"rl\"}"));
    json_decref(OK(b, "{\"op\":\"claim\",\"queue\":\"rl\"}"));

    /* w1 becomes a producer, w2 goes, w3 comes. */
    token_line(l[0], sizeof(l[0]), "w1", "producer", "w1-secret", NULL);
    token_line(l[2], sizeof(l[2]), "w3", "worker", "w3-secret", "rl");
    snprintf(text, sizeof(text), "# reloaded\n%s%s", l[0], l[2]);
    rewrite_tokens(text);
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    await_log("msg=\"tokens reloaded\" tokens=2 connections_kept=1 connections_closed=1");

    json_t *r = tc_call(a, "{\"op\":\"claim\",\"queue\":\"rl\"}");
    assert_err(r, "EPERM");
    json_decref(r);
    json_decref(OK(a, "{\"op\":\"enqueue\",\"queue\":\"rl\",\"payload\":1}"));
    cr_assert(tc_read_eof(b, wait_deadline_ms(0)), "w2's connection is closed");
    tc_close(b);
    await_log("token gone from the tokens file: closing its connection");

    tc_close(conn_as("w3-secret", "worker"));
    struct tc_conn *c = fx_conn();
    assert_err_free(tc_call(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"w2-secret\"}"),
                    "EAUTH");
    tc_close(c);
    tc_close(a);
    /* The replaced table was freed (under ASan a leak fails the exit). */
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly");
}

/* A reload that drops the tokens file (on loopback, and no token): the
 * daemon needs no hello any more, so a connection that had not said one
 * may do everything, as before any token was set; a connection that came
 * in with a line of the file is closed, its line being gone. */
Test(roles, dropping_the_tokens_file_on_loopback_opens_the_door)
{
    char text[2048], conf[32], settings[128];
    usual_tokens(text, sizeof(text));
    emqd_write_temp(tokens_path, text);
    snprintf(settings, sizeof(settings), "tokens-file = %s\n", tokens_path);
    emqd_write_temp(conf, settings);
    const char *const extra[] = {"--config", conf, NULL};
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0, "emqd did not start");
    struct tc_conn *w = conn_as("work-secret", "worker");
    struct tc_conn *anon = fx_conn();
    assert_err_free(tc_call(anon, "{\"op\":\"depth\",\"queue\":\"open\"}"), "EAUTH");

    FILE *f = fopen(conf, "w");
    cr_assert_not_null(f);
    fputs("# no tokens any more\n", f);
    fclose(f);
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    await_log("msg=\"tokens reloaded\" tokens=0 connections_kept=0 connections_closed=1");
    json_decref(OK(anon, "{\"op\":\"drain\",\"queue\":\"open\"}"));
    json_t *r = OK(anon, "{\"op\":\"hello\",\"protocol\":1}");
    cr_assert_str_eq(jstr(r, "role"), "admin");
    json_decref(r);
    cr_assert(tc_read_eof(w, wait_deadline_ms(0)), "the file token's connection is closed");
    tc_close(w);
    tc_close(anon);
    unlink(conf);
}

/* A file that breaks on reload is not used: the running table stays
 * (its tokens work, the broken file's new one does not), and the log
 * says which line is wrong. */
Test(roles, a_bad_file_on_reload_keeps_the_running_table)
{
    start_usual();
    char text[2048], extra[256];
    usual_tokens(text, sizeof(text));
    token_line(extra, sizeof(extra), "newbie", "worker", "newbie-secret", NULL);
    strcat(text, extra);
    strcat(text, "broken boss 00\n");
    rewrite_tokens(text);
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    await_log("tokens file reload failed; keeping the running tokens");
    char where[64];
    snprintf(where, sizeof(where), "%s:8: the role must be", tokens_path);
    await_log(where);
    tc_close(conn_as("work-secret", "worker"));
    struct tc_conn *c = fx_conn();
    assert_err_free(tc_call(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"newbie-secret\"}"),
                    "EAUTH");
    tc_close(c);
}

/* A bad file at start stops emqd (exit code 2) naming the line. */
Test(roles, a_bad_file_at_start_stops_emqd_naming_the_line)
{
    char path[32], out[4096], args[128], want[96];
    emqd_write_temp(path, "# ok so far\n\nops admin nothex\n");
    snprintf(args, sizeof(args), "--tokens-file %s --redis redis://127.0.0.1:1", path);
    cr_assert_eq(emqd_run(args, out, sizeof(out)), 2, "%s", out);
    snprintf(want, sizeof(want), "%s:3: the hash must be 64 hex digits", path);
    cr_assert(strstr(out, want) != NULL, "got: %s", out);
    unlink(path);
    cr_assert_eq(
        emqd_run("--tokens-file /nonexistent/tokens --redis redis://127.0.0.1:1", out, sizeof(out)),
        2);
    cr_assert(strstr(out, "/nonexistent/tokens: No such file") != NULL, "got: %s", out);
}

/* --- failed hellos per address ------------------------------------------ */

/* A connection to emqd from source address ip (a loopback address other
 * than 127.0.0.1 makes another client address). */
static struct tc_conn *conn_from(const char *ip)
{
    struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &src.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    dst.sin_port = htons((uint16_t)fx_emqd.port);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0, "bind %s", ip);
    cr_assert_eq(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0);
    struct tc_conn *c = calloc(1, sizeof(*c));
    cr_assert_not_null(c);
    c->fd = fd;
    return c;
}

static void bad_hellos(int n)
{
    struct tc_conn *c = NULL;
    for (int i = 0; i < n; i++) {
        if (i % 3 == 0) { /* the third failure on a connection closes it */
            tc_close(c);
            c = fx_conn();
        }
        assert_err_free(tc_call(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"guess-%d\"}", i),
                        "EAUTH");
    }
    tc_close(c);
}

/* The usual tokens, with auth-backoff-ms = ms. */
static void start_backoff(const char *ms)
{
    char text[2048];
    usual_tokens(text, sizeof(text));
    const char *const more[] = {"--auth-backoff-ms", ms, NULL};
    start_with(text, more);
}

/* The reply to hello with token on a new connection (closed again). */
static json_t *hello_once(const char *token)
{
    struct tc_conn *c = fx_conn();
    json_t *r = tc_call(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"%s\"}", token);
    tc_close(c);
    return r;
}

/* Five failed hellos from an address (over two connections) open a
 * window in which even the right token is refused, unchecked; it is
 * logged once however many hellos it refuses; another address is not
 * affected. The window here is an hour, so nothing depends on timing. */
Test(roles, failed_hellos_back_off_their_address)
{
    start_backoff("3600000");
    bad_hellos(4);
    tc_close(conn_as("work-secret", "worker")); /* four: no window yet */
    /* The success started the count again: five more open the window. */
    bad_hellos(5);
    await_log("failed hellos from an address: refusing its hellos for a while");
    for (int i = 0; i < 4; i++) {
        json_t *r = hello_once("work-secret");
        assert_err(r, "EAUTH");
        cr_assert(strstr(jstr(r, "message"), "too many failed hellos from this address") != NULL,
                  "%s", jstr(r, "message"));
        json_decref(r);
    }
    cr_assert_eq(emqd_log_count(&fx_emqd, "failed hellos from an address"), 1,
                 "a window is logged once");
    cr_assert(emqd_log_has(&fx_emqd, "addr=127.0.0.1 failures=5 backoff_ms=3600000"));

    struct tc_conn *other = conn_from("127.0.0.2");
    json_decref(OK(other, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"work-secret\"}"));
    tc_close(other);
    cr_assert_eq(emqd_stop(&fx_emqd), 0, "emqd did not exit cleanly (the table freed?)");
}

/* A window ends: once it has passed, the right token works again. */
/* True if hello with token on a new connection succeeds. */
static bool hello_passes(const char *token)
{
    json_t *r = hello_once(token);
    bool ok = tc_ok(r);
    json_decref(r);
    return ok;
}

Test(roles, a_backoff_window_ends)
{
    start_backoff("200");
    bad_hellos(5);
    await_log("addr=127.0.0.1 failures=5 backoff_ms=200");
    cr_assert(wait_for(hello_passes("work-secret")),
              "the right token works once the window has passed");
}
