/* Operating emqd: the config file and flags, SIGHUP reload, start-up
 * refusals (addresses checked when read, FILE:LINE), secrets from files
 * and systemd credentials, retention 0, what the log says while Redis is
 * away, every limit hit once, the idle timeout, the metrics endpoint
 * (checked by promtool when it is installed), and sd_notify. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "scrape.h"

TestSuite(operate, .fini = fx_teardown, .timeout = 60);

static void enqueue_many(struct tc_conn *c, int n, const char *want)
{
    char line[4096];
    int o = snprintf(line, sizeof(line),
                     "{\"op\":\"enqueue_many\",\"queue\":\"cf\",\"group\":\"TENa\",\"jobs\":[");
    for (int i = 0; i < n; i++)
        o += snprintf(line + o, sizeof(line) - (size_t)o, "%s{\"payload\":%d}", i ? "," : "", i);
    snprintf(line + o, sizeof(line) - (size_t)o, "]}");
    json_t *r = tc_call(c, "%s", line);
    if (want == NULL)
        assert_ok(r);
    else
        assert_err(r, want);
    json_decref(r);
}

Test(operate, config_file_sets_and_flags_win)
{
    char path[32];
    emqd_write_temp(path, "# test\nmax-batch = 2\nlease-ms = 1234\n");
    const char *const extra[] = {"--config", path, "--lease-ms", "4321", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    enqueue_many(c, 2, NULL);
    enqueue_many(c, 3, "ELIMIT"); /* the file's max-batch */
    /* The lease runs from the claim's moment by Redis's clock, which lies
     * between these two readings of it. */
    long long before = redis_server_time_ms(&fx_redis);
    json_t *r = OK(c, "{\"op\":\"claim\",\"queue\":\"cf\"}");
    long long after = redis_server_time_ms(&fx_redis);
    json_t *job = json_array_get(json_object_get(r, "jobs"), 0);
    cr_assert_not_null(job);
    long long until = jint(job, "lease_until");
    json_decref(r);
    cr_assert(until >= before + 4321 && until <= after + 4321,
              "the flag's lease (4321 ms) beat the file's (1234 ms): %lld ms", until - before);
    tc_close(c);
    unlink(path);
}

Test(operate, bad_settings_stop_startup_naming_file_line_and_key)
{
    char path[32], out[4096], args[256];
    emqd_write_temp(path, "max-batch = 5\n\nmax-bach = 5\n");
    snprintf(args, sizeof(args), "--config %s", path);
    cr_assert_eq(emqd_run(args, out, sizeof(out)), 2);
    char want[128];
    snprintf(want, sizeof(want), "%s:3: unknown key 'max-bach'", path);
    cr_assert(strstr(out, want) != NULL, "got: %s", out);
    unlink(path);

    emqd_write_temp(path, "pool = 0\n");
    snprintf(args, sizeof(args), "--config %s", path);
    cr_assert_eq(emqd_run(args, out, sizeof(out)), 2);
    cr_assert(strstr(out, ":1: bad value for 'pool': '0'") != NULL, "got: %s", out);
    unlink(path);

    cr_assert_eq(emqd_run("--max-output 12", out, sizeof(out)), 2);
    cr_assert(strstr(out, "bad value for --max-output") != NULL, "got: %s", out);
    cr_assert_eq(emqd_run("--config /nonexistent/emqd.conf", out, sizeof(out)), 2);
    cr_assert(strstr(out, "/nonexistent/emqd.conf") != NULL, "got: %s", out);
}

/* Without a token emqd listens on loopback only, unless told otherwise.
 * (Only the refusal is run: a test never listens beyond loopback.) */
Test(operate, no_token_refuses_a_non_loopback_listen)
{
    char out[4096];
    cr_assert_eq(emqd_run("--listen 0.0.0.0:1 --redis redis://127.0.0.1:1", out, sizeof(out)), 2);
    cr_assert(strstr(out, "refusing to listen on a non-loopback address without a token") != NULL,
              "got: %s", out);
    cr_assert(strstr(out, "listen=0.0.0.0:1 origin=--listen") != NULL, "got: %s", out);
}

/* True if the fixture's emqd has logged needle. */
static bool logged(const char *needle)
{
    return emqd_log_has(&fx_emqd, needle);
}

Test(operate, sighup_applies_live_keys_and_names_the_rest)
{
    char path[32];
    emqd_write_temp(path, "max-batch = 2\n");
    const char *const extra[] = {"--config", path, NULL};
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    enqueue_many(c, 3, "ELIMIT");

    FILE *f = fopen(path, "w");
    fprintf(f, "max-batch = 3\npool = 7\ntoken = sesame\nlog-level = debug\n");
    fclose(f);
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    /* Every key's line comes before the summary. */
    await(logged("msg=reloaded changed=4"), "the reload to be logged");
    cr_assert(logged("needs a restart; keeping the running value\" key=pool"));
    cr_assert(logged("key=token value=(hidden)"), "a token is never logged");
    cr_assert_not(logged("sesame"), "a token is never logged");
    /* An authenticated connection stays so; max-batch is 3 now. */
    enqueue_many(c, 3, NULL);
    tc_close(c);
    c = fx_conn();
    assert_err_free(tc_call(c, "{\"op\":\"depth\",\"queue\":\"cf\"}"), "EAUTH");
    tc_close(c);
    /* log-level debug took effect: connections and refusals are logged
     * (before the refusal's reply is written). */
    cr_assert(logged("msg=\"connection opened\" client=127.0.0.1:"));
    cr_assert(logged("msg=\"request refused\" client=127.0.0.1:"));
    cr_assert(logged(" code=EAUTH message="));

    /* A bad file changes nothing. */
    f = fopen(path, "w");
    fprintf(f, "max-batch = many\n");
    fclose(f);
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    await(logged("reload failed; keeping the running settings"), "the failed reload to be logged");
    c = fx_conn();
    json_decref(OK(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"sesame\"}"));
    enqueue_many(c, 3, NULL);
    tc_close(c);
    unlink(path);
}

Test(operate, max_payload_is_its_own_limit)
{
    const char *const extra[] = {"--max-payload", "100", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    char big[300];
    memset(big, 'x', 150);
    big[150] = '\0';
    assert_err_free(tc_call(c, "{\"op\":\"enqueue\",\"queue\":\"p\",\"payload\":\"%s\"}", big),
                    "ETOOBIG");
    json_t *r = OK(c,
                   "{\"op\":\"enqueue_many\",\"queue\":\"p\",\"jobs\":[{\"payload\":\"%s\"},"
                   "{\"payload\":1}]}",
                   big);
    json_t *res = json_object_get(r, "results");
    cr_assert_str_eq(jstr(json_array_get(res, 0), "error"), "ETOOBIG");
    cr_assert_str_eq(jstr(json_array_get(res, 1), "verdict"), "enqueued");
    json_decref(r);
    big[90] = '\0';
    json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"p\",\"payload\":\"%s\"}", big));
    r = OK(c, "{\"op\":\"depth\",\"queue\":\"p\"}");
    cr_assert_eq(jint(r, "depth"), 2, "only the two small payloads went in");
    json_decref(r);
    tc_close(c);
}

/* A new connection to the fixture's emqd is refused: one ELIMIT reply
 * with message, then the daemon closes it. */
static void assert_refused(const char *message)
{
    struct tc_conn *c = fx_conn();
    json_t *r = tc_read(c, wait_deadline_ms(0));
    assert_err(r, "ELIMIT");
    cr_assert_str_eq(jstr(r, "message"), message);
    json_decref(r);
    cr_assert(tc_read_eof(c, wait_deadline_ms(0)), "the refused connection is closed");
    tc_close(c);
}

Test(operate, max_clients_refuses_the_one_over)
{
    const char *const extra[] = {"--max-clients", "2", NULL};
    fx_start(extra);
    /* fx_start's own check of the backend used a connection: the slots
     * are both free only once the daemon has seen it close. */
    await(emqd_metric(&fx_emqd, "emqd_connections") == 0, "emqd to close the start-up check");
    struct tc_conn *a = fx_conn(), *b = fx_conn();
    json_decref(OK(a, "{\"op\":\"ping\"}"));
    json_decref(OK(b, "{\"op\":\"ping\"}"));
    assert_refused("too many connections");
    tc_close(b);
    /* Room again once the daemon has closed b. */
    await(emqd_metric(&fx_emqd, "emqd_connections") == 1, "emqd to close the connection let go");
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"ping\"}"));
    tc_close(c);
    tc_close(a);
}

/* max-inflight: once that many requests of a connection await replies
 * (here a parked claim holds the line), emqd stops reading it, so a later
 * request does not run until the head is answered. */
Test(operate, max_inflight_pauses_reading_until_replies_drain)
{
    const char *const extra[] = {"--max-inflight", "4", NULL};
    fx_start(extra);
    struct tc_conn *w = fx_conn(), *p = fx_conn();
    const char *lines = "{\"op\":\"claim\",\"queue\":\"ia\",\"wait_ms\":3600000}\n"
                        "{\"op\":\"ping\"}\n{\"op\":\"ping\"}\n{\"op\":\"ping\"}\n"
                        "{\"op\":\"enqueue\",\"queue\":\"ib\",\"group\":\"TENa\",\"payload\":1}\n";
    cr_assert_eq(tc_send(w, lines, strlen(lines)), 0);
    /* The third ping is the fourth request in flight: once it is answered
     * (its reply held behind the claim), reads have paused, and the fifth
     * line was read but is not run. */
    await(emqd_metric(&fx_emqd, "emqd_requests_total{op=\"ping\",result=\"ok\"}") == 3,
          "the three pings behind the parked claim to run");
    json_t *r = OK(p, "{\"op\":\"stats\",\"queue\":\"ib\"}");
    cr_assert_eq(jint(r, "pending"), 0, "the fifth request was not read");
    json_decref(r);
    json_decref(OK(p, "{\"op\":\"enqueue\",\"queue\":\"ia\",\"group\":\"TENa\",\"payload\":2}"));
    r = tc_read(w, wait_deadline_ms(0));
    cr_assert_eq(json_array_size(claim_jobs(r)), 1, "the parked claim got the job");
    json_decref(r);
    for (int i = 0; i < 4; i++) {
        r = tc_read(w, wait_deadline_ms(0));
        assert_ok(r);
        json_decref(r);
    }
    r = OK(p, "{\"op\":\"stats\",\"queue\":\"ib\"}");
    cr_assert_eq(jint(r, "pending"), 1, "reading resumed and the enqueue ran");
    json_decref(r);
    tc_close(w);
    tc_close(p);
}

/* max-output bounds what a client has not read yet, not one reply: a
 * claim whose reply alone is twice the cap reaches a client that reads. */
Test(operate, a_reply_larger_than_max_output_reaches_a_reading_client)
{
    const char *const extra[] = {"--max-output", "4096", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    char payload[1100];
    memset(payload, 'y', 1000);
    payload[1000] = '\0';
    for (int i = 0; i < 8; i++)
        json_decref(
            OK(c, "{\"op\":\"enqueue\",\"queue\":\"mo\",\"group\":\"TEN%c\",\"payload\":\"%s\"}",
               'a' + i, payload));
    json_t *r = OK(c, "{\"op\":\"claim\",\"queue\":\"mo\",\"count\":8}");
    cr_assert_eq(json_array_size(json_object_get(r, "jobs")), 8, "one 8 KB reply, whole");
    json_decref(r);
    json_t *st = OK(c, "{\"op\":\"stats\",\"queue\":\"mo\"}");
    cr_assert_eq(jint(st, "active"), 8, "the connection kept its leases");
    json_decref(st);
    tc_close(c);
}

/* An idle connection is closed; a streaming worker waiting for work is
 * not idle. */
Test(operate, idle_timeout_spares_a_waiting_stream)
{
    const char *const extra[] = {"--idle-timeout-ms", "200", NULL};
    fx_start(extra);
    struct tc_conn *w = fx_conn();
    json_decref(OK(w, "{\"op\":\"stream\",\"queue\":\"it\",\"credit\":1}"));
    /* Several idle periods and sweeps pass: three idle connections, each
     * opened once the one before was cut, are cut in turn by the sweeps,
     * while the stream waits. */
    for (int i = 0; i < 3; i++) {
        struct tc_conn *idle = fx_conn();
        json_decref(OK(idle, "{\"op\":\"ping\"}"));
        cr_assert(tc_read_eof(idle, wait_deadline_ms(0)), "idle connection %d was closed", i);
        tc_close(idle);
    }
    struct tc_conn *p = fx_conn();
    json_decref(OK(p, "{\"op\":\"enqueue\",\"queue\":\"it\",\"group\":\"TENa\",\"job\":\"JOBit\","
                      "\"payload\":1}"));
    tc_close(p);
    json_t *push = tc_read(w, wait_deadline_ms(0));
    cr_assert_not_null(push, "the stream is still open and gets the job");
    cr_assert_str_eq(jstr(push, "job"), "JOBit");
    json_decref(push);
    tc_close(w);
}

/* --- metrics --------------------------------------------------------------- */

Test(operate, metrics_endpoint_counts_and_passes_promtool)
{
    static char resp[1 << 20];
    char addr[64];
    int mport = test_free_port();
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", mport);
    const char *const extra[] = {"--metrics", addr, "--metrics-groups", "2", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"limit\",\"queue\":\"mq\",\"group\":\"TENb\",\"max\":1}"));
    json_decref(OK(c, "{\"op\":\"pause\",\"queue\":\"mq\",\"group\":\"TENc\"}"));
    const char *groups[] = {"TENa", "TENa", "TENa", "TENb", "TENb", "TENc"};
    for (int i = 0; i < 6; i++)
        json_decref(OK(c, "{\"op\":\"enqueue\",\"queue\":\"mq\",\"group\":\"%s\",\"payload\":%d}",
                       groups[i], i));
    json_t *r = OK(c, "{\"op\":\"claim\",\"queue\":\"mq\"}");
    json_t *job = json_array_get(json_object_get(r, "jobs"), 0);
    json_decref(OK(c, "{\"op\":\"complete\",\"queue\":\"mq\",\"job\":\"%s\",\"lease\":\"%s\"}",
                   jstr(job, "job"), jstr(job, "lease")));
    json_decref(r);
    assert_err_free(tc_call(c, "{\"op\":\"depth\"}"), "EARG");
    tc_close(c);

    http_get(mport, "/metrics", resp, sizeof(resp));
    cr_assert(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0, "got: %.200s", resp);
    cr_assert(strstr(resp, "Content-Type: text/plain; version=0.0.4") != NULL);
    char *body = scrape_body(resp);
    const char *want[] = {
        "emqd_jobs_total{queue=\"mq\",event=\"enqueued\"} 6\n",
        "emqd_jobs_total{queue=\"mq\",event=\"claimed\"} 1\n",
        "emqd_jobs_total{queue=\"mq\",event=\"completed\"} 1\n",
        "emqd_queue_jobs{queue=\"mq\",state=\"pending\"} 5\n",
        "emqd_requests_total{op=\"enqueue\",result=\"ok\"} 6\n",
        "emqd_requests_total{op=\"depth\",result=\"EARG\"} 1\n",
        "emqd_group_limit{queue=\"mq\",group=\"TENb\"} 1\n",
        "emqd_backend_rtt_seconds_count ",
        "emqd_pool_size 4\n",
        "emqd_pool_connections ",
        "emqd_job_wait_seconds_count{queue=\"mq\"} 1\n",
        "emqd_job_run_seconds_count{queue=\"mq\"} 1\n",
        "process_open_fds ",
        "process_start_time_seconds ",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
        cr_assert(strstr(body, want[i]) != NULL, "missing %s in:\n%s", want[i], body);
    /* metrics-groups 2: the two deepest of three groups. */
    cr_assert(strstr(body, "emqd_group_depth{queue=\"mq\",group=\"TENa\"} 2\n") != NULL ||
                  strstr(body, "emqd_group_depth{queue=\"mq\",group=\"TENa\"} 3\n") != NULL,
              "%s", body);
    cr_assert(strstr(body, "emqd_group_depth{queue=\"mq\",group=\"TENb\"} 2\n") != NULL, "%s",
              body);
    cr_assert(strstr(body, "group=\"TENc\"") == NULL, "only 2 groups per queue: %s", body);

    scrape_promtool(body);

    http_get(mport, "/nope", resp, sizeof(resp));
    cr_assert(strncmp(resp, "HTTP/1.1 404", 12) == 0, "got: %.100s", resp);
    http_get(mport, "/metrics HTTP/1.1\r\nBad header", resp, sizeof(resp));
    cr_assert(strncmp(resp, "HTTP/1.1 400", 12) == 0, "a malformed request: %.100s", resp);
    static char huge[12000];
    memset(huge, 'a', sizeof(huge) - 1);
    memcpy(huge, "/metrics HTTP/1.1\r\nX: ", 22);
    http_get(mport, huge, resp, sizeof(resp));
    cr_assert(strncmp(resp, "HTTP/1.1 413", 12) == 0, "an endless header: %.100s", resp);
    /* Still serving after all that. */
    http_get(mport, "/metrics", resp, sizeof(resp));
    cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "got: %.100s", resp);
}

/* --- systemd --------------------------------------------------------------- */

static int read_notify(int fd, char *buf, size_t cap, const char *want)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (poll(&pfd, 1, wait_deadline_ms(0)) == 1) {
        ssize_t n = recv(fd, buf, cap - 1, 0);
        if (n <= 0)
            return 0;
        buf[n] = '\0';
        if (strstr(buf, want) != NULL)
            return 1;
    }
    return 0;
}

Test(operate, sd_notify_ready_then_stopping)
{
    char path[108], buf[512];
    snprintf(path, sizeof(path), "/tmp/emq-notify-%d.sock", (int)getpid());
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    setenv("NOTIFY_SOCKET", path, 1);
    fx_start(NULL);
    unsetenv("NOTIFY_SOCKET");
    cr_assert(read_notify(fd, buf, sizeof(buf), "READY=1"), "READY=1 once listening");
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    cr_assert(read_notify(fd, buf, sizeof(buf), "RELOADING=1"), "RELOADING=1 on SIGHUP");
    cr_assert(read_notify(fd, buf, sizeof(buf), "READY=1"), "READY=1 after the reload");
    cr_assert_eq(emqd_stop(&fx_emqd), 0);
    cr_assert(read_notify(fd, buf, sizeof(buf), "STOPPING=1"), "STOPPING=1 on SIGTERM");
    close(fd);
    unlink(path);
}

/* The metrics endpoint against abuse: 70 connections holding half-sent
 * requests (more than its 64 slots) do not lock a scrape out (the oldest
 * half-sent one is dropped), and requests pipelined on one connection get
 * exactly one answer. */
Test(operate, metrics_endpoint_survives_slow_and_pipelining_clients)
{
    static char resp[1 << 20];
    char addr[64];
    int mport = test_free_port();
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", mport);
    const char *const extra[] = {"--metrics", addr, NULL};
    fx_start(extra);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)mport)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);

    int slow[70];
    for (int i = 0; i < 70; i++) {
        slow[i] = socket(AF_INET, SOCK_STREAM, 0);
        cr_assert_eq(connect(slow[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(write(slow[i], "GET /metr", 9), 9);
    }
    /* The daemon accepts connections in the order they were made: the
     * scrape's comes after all 70, however late it gets to them. */
    http_get(mport, "/metrics", resp, sizeof(resp));
    cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "a scrape behind 70 slow clients: %.100s",
              resp);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char req[512] = "";
    for (int i = 0; i < 5; i++)
        strcat(req, "GET /metrics? HTTP/1.1\r\nHost: x\r\n\r\n");
    cr_assert_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    size_t len = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (len + 1 < sizeof(resp) && poll(&pfd, 1, wait_deadline_ms(0)) == 1) {
        ssize_t r = read(fd, resp + len, sizeof(resp) - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    resp[len] = '\0';
    close(fd);
    int answers = 0;
    for (const char *p = resp; (p = strstr(p, "HTTP/1.1 ")) != NULL; p++)
        answers++;
    cr_assert_eq(answers, 1, "five pipelined requests, one answer: %.200s", resp);
    cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "%.100s", resp);
    for (int i = 0; i < 70; i++)
        close(slow[i]);
}

/* A SIGHUP that arrives before clients are let in (the backend not
 * answering yet) neither kills emqd nor tells systemd READY=1 early;
 * READY=1 comes once the backend answers. */
Test(operate, sighup_before_ready_neither_kills_nor_says_ready)
{
    char path[108], buf[512], redis[64], listen[64];
    snprintf(path, sizeof(path), "/tmp/emq-notify-early-%d.sock", (int)getpid());
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(kill(fx_redis.pid, SIGSTOP), 0, "a backend that does not answer");
    fx_emqd.port = test_free_port();
    snprintf(redis, sizeof(redis), "redis://127.0.0.1:%d", fx_redis.port);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", fx_emqd.port);
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    fx_emqd.pid = fork();
    cr_assert_geq(fx_emqd.pid, 0);
    if (fx_emqd.pid == 0) {
        int log = open(fx_emqd.log, O_WRONLY | O_APPEND);
        if (log >= 0)
            dup2(log, STDERR_FILENO);
        setenv("NOTIFY_SOCKET", path, 1);
        execl(getenv("EMQD"), "emqd", "--redis", redis, "--listen", listen, (char *)NULL);
        _exit(127);
    }
    /* "starting" is logged once the signal handlers are in; the SIGHUP is
     * then handled (a reload, logged), and emqd lives on. */
    await(logged("msg=starting "), "emqd to start");
    kill(fx_emqd.pid, SIGHUP);
    await(logged("msg=reloaded changed=0"), "the early SIGHUP to be handled as a reload");
    bool alive = waitpid(fx_emqd.pid, NULL, WNOHANG) == 0;
    /* A READY=1 sent by then would be queued on our socket already. */
    bool early = false;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (poll(&pfd, 1, 0) == 1) {
        ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        early = early || strstr(buf, "READY=1") != NULL;
    }
    /* Let redis go before any assertion, so the teardown can stop it. */
    cr_assert_eq(kill(fx_redis.pid, SIGCONT), 0);
    cr_assert(alive, "emqd died of an early SIGHUP");
    cr_assert_not(early, "READY=1 before the backend answered");
    cr_assert(read_notify(fd, buf, sizeof(buf), "READY=1"), "READY=1 once the backend answers");
    cr_assert_eq(emqd_stop(&fx_emqd), 0);
    close(fd);
    unlink(path);
}

/* --- settings an operator gets wrong or needs ----------------------------- */

/* Wait until the daemon's log has needle; fails the test at the deadline. */
static void await_log(const char *needle)
{
    await(logged(needle), "the log line %s", needle);
}

/* Start the fixture's redis and emqd, emqd's log in a file (logged()).
 * emqd listens only once Redis answers, so the backend is up when this
 * returns. */
static void start_logged(const char *const *extra)
{
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0, "emqd did not start");
}

/* hello with token on a new connection: the connection, authenticated. */
static struct tc_conn *hello_conn(const char *token)
{
    struct tc_conn *c = fx_conn();
    assert_err_free(tc_call(c, "{\"op\":\"depth\",\"queue\":\"t\"}"), "EAUTH");
    json_decref(OK(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"%s\"}", token));
    return c;
}

/* Each address mistake is refused when the settings are read, naming
 * FILE:LINE, with exit code 2 and before anything starts. */
Test(operate, bad_addresses_stop_startup_at_their_line)
{
    static const struct {
        const char *line, *says;
    } cases[] = {
        {"listen = 127.0.0.1:99999", "the port is not in 1..65535"},
        {"listen = 127.0.0.1", "no ':PORT'"},
        {"listen = 999.1.1.1:7712", "names are not resolved"},
        {"listen = myhost:7712", "names are not resolved"},
        {"metrics = 9711", "no ':PORT'"},
        {"metrics = 127.0.0.1:0", "the port is not in 1..65535"},
        {"redis = redis://1.2.3.4:99999", "bad value for 'redis'"},
    };
    char path[32], text[256], args[128], out[4096], want[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        snprintf(text, sizeof(text), "# a comment\n%s\n", cases[i].line);
        emqd_write_temp(path, text);
        snprintf(args, sizeof(args), "--config %s", path);
        cr_assert_eq(emqd_run(args, out, sizeof(out)), 2, "%s: %s", cases[i].line, out);
        snprintf(want, sizeof(want), "%s:2: ", path);
        cr_assert(strstr(out, want) != NULL, "%s: no FILE:LINE in %s", cases[i].line, out);
        cr_assert(strstr(out, cases[i].says) != NULL, "%s: %s", cases[i].line, out);
        cr_assert(strstr(out, "msg=starting") == NULL, "%s: it started: %s", cases[i].line, out);
        unlink(path);
    }
}

/* A Redis host name is resolved at start; one that does not resolve is
 * an error naming where it was set, not "cannot create the pool". */
Test(operate, an_unresolvable_redis_host_is_named)
{
    char path[32], args[128], out[4096], want[128];
    emqd_write_temp(path, "redis = redis://no-such-host.invalid:6379\n");
    snprintf(args, sizeof(args), "--config %s --listen 127.0.0.1:%d", path, test_free_port());
    cr_assert_eq(emqd_run(args, out, sizeof(out)), 2, "%s", out);
    snprintf(want, sizeof(want), "%s:1: cannot resolve the redis host 'no-such-host.invalid'",
             path);
    cr_assert(strstr(out, want) != NULL, "%s", out);
    unlink(path);
}

/* localhost in the Redis URL reaches the fixture's Redis, and localhost
 * counts as loopback for listen (no token needed). */
Test(operate, localhost_is_taken_for_redis_and_listen)
{
    char redis[64], listen[64];
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    snprintf(redis, sizeof(redis), "redis://localhost:%d", fx_redis.port);
    fx_emqd.port = test_free_port();
    snprintf(listen, sizeof(listen), "localhost:%d", fx_emqd.port);
    /* These flags come after emqd_restart's own and win over them. */
    const char *const extra[] = {"--redis", redis, "--listen", listen, NULL};
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    cr_assert_eq(emqd_restart(&fx_emqd, 0, extra), 0, "emqd did not listen on localhost");
    await_log("msg=\"backend connected\" redis=127.0.0.1:"); /* reached Redis */
    cr_assert_not(logged("refusing"));
}

/* token-file: the token comes from the file, and SIGHUP re-reads it. */
Test(operate, token_file_is_read_and_reloaded)
{
    char tok[32];
    emqd_write_temp(tok, "first-token\n");
    const char *const extra[] = {"--token-file", tok, NULL};
    start_logged(extra);
    tc_close(hello_conn("first-token"));

    FILE *f = fopen(tok, "w");
    fputs("second-token\n", f);
    fclose(f);
    cr_assert_eq(kill(fx_emqd.pid, SIGHUP), 0);
    await_log("key=token value=(hidden)");
    struct tc_conn *c = fx_conn();
    assert_err_free(tc_call(c, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"first-token\"}"),
                    "EAUTH");
    tc_close(c);
    tc_close(hello_conn("second-token"));
    cr_assert_not(logged("first-token"), "a token is never logged");
    cr_assert_not(logged("second-token"), "a token is never logged");
    unlink(tok);
}

/* What the unit's LoadCredential= gives: $CREDENTIALS_DIRECTORY with
 * emqd.token in it, used when the config sets no token. */
Test(operate, systemd_credentials_are_used)
{
    char dir[] = "/tmp/emq-cred-XXXXXX", path[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/emqd.token", dir);
    FILE *f = fopen(path, "w");
    fputs("cred-token", f);
    fclose(f);
    chmod(path, 0600);
    setenv("CREDENTIALS_DIRECTORY", dir, 1);
    start_logged(NULL);
    unsetenv("CREDENTIALS_DIRECTORY");
    tc_close(hello_conn("cred-token"));
    cr_assert(logged("msg=\"token from a systemd credential\""));
    unlink(path);
    rmdir(dir);
}

/* redis-password-file: emqd AUTHs with the file's password (a wrong or
 * missing one would keep the pool from ever connecting). */
Test(operate, redis_password_file_authenticates)
{
    char pw[32];
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    freeReplyObject(redisCommand(rc, "CONFIG SET requirepass %s", "hunter2-pw"));
    redisFree(rc);
    emqd_write_temp(pw, "hunter2-pw\n");
    const char *const extra[] = {"--redis-password-file", pw, NULL};
    cr_assert_eq(emqd_start(&fx_emqd, fx_redis.port, extra), 0, "emqd authenticated to Redis");
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"depth\",\"queue\":\"pw\"}"));
    tc_close(c);
    unlink(pw);
}

/* retention-ms = 0 (PROTOCOL.md 6.5): the row goes at completion, so the
 * job is unknown afterwards and its id can be enqueued again. */
Test(operate, retention_zero_deletes_at_completion)
{
    const char *const extra[] = {"--retention-ms", "0", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    json_t *r = OK(c, "{\"op\":\"enqueue\",\"queue\":\"r0\",\"group\":\"TENa\",\"payload\":1}");
    char id[64];
    snprintf(id, sizeof(id), "%s", jstr(r, "job"));
    json_decref(r);
    json_t *cl = tc_call(c, "{\"op\":\"claim\",\"queue\":\"r0\",\"count\":1}");
    json_t *job = json_array_get(claim_jobs(cl), 0);
    cr_assert_not_null(job);
    json_decref(OK(c, "{\"op\":\"complete\",\"queue\":\"r0\",\"job\":\"%s\",\"lease\":\"%s\"}", id,
                   jstr(job, "lease")));
    json_decref(cl);
    assert_err_free(tc_call(c, "{\"op\":\"job\",\"queue\":\"r0\",\"job\":\"%s\"}", id), "ENOJOB");
    r = OK(c,
           "{\"op\":\"enqueue\",\"queue\":\"r0\",\"group\":\"TENa\",\"job\":\"%s\",\"payload\":2}",
           id);
    cr_assert_str_eq(jstr(r, "verdict"), "enqueued", "no row is left to answer duplicate");
    json_decref(r);
    tc_close(c);
}

/* While Redis is unreachable emqd says where it connects and that it
 * keeps trying; once it connects it counts the queues the registry holds
 * (not the zero it knew before reading it). */
Test(operate, the_log_says_what_emqd_waits_for)
{
    const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    char needle[160], redis[64], listen[64];
    cr_assert_eq(redis_server_start(&fx_redis, aof), 0);
    redisContext *rc = redis_server_connect(&fx_redis);
    cr_assert_not_null(rc);
    freeReplyObject(redisCommand(rc, "SADD emq:queues qa qb"));
    redisFree(rc);
    redis_server_kill(&fx_redis); /* its port is free now; its AOF stays */

    snprintf(redis, sizeof(redis), "redis://127.0.0.1:%d", fx_redis.port);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", test_free_port());
    /* Started by hand: emqd_start waits for the listener, which opens only
     * once Redis answers. */
    cr_assert_eq(emqd_log_to_file(&fx_emqd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int log = open(fx_emqd.log, O_WRONLY | O_APPEND);
        if (log >= 0)
            dup2(log, STDERR_FILENO);
        execl(getenv("EMQD"), "emqd", "--redis", redis, "--listen", listen, (char *)NULL);
        _exit(127);
    }
    fx_emqd.pid = pid;
    snprintf(needle, sizeof(needle),
             "msg=\"waiting for redis before listening\" redis=127.0.0.1:%d", fx_redis.port);
    await_log(needle);
    snprintf(needle, sizeof(needle),
             "msg=\"redis connection failed; retrying with backoff\" redis=127.0.0.1:%d",
             fx_redis.port);
    await_log(needle);

    cr_assert_eq(redis_server_restart(&fx_redis, aof), 0);
    snprintf(needle, sizeof(needle), "msg=\"backend connected\" redis=127.0.0.1:%d queues=2",
             fx_redis.port);
    await_log(needle);
    await_log("msg=ready");
}

/* A metrics address that cannot be bound stops emqd with exit code 1,
 * and it never says "ready" first. */
Test(operate, a_metrics_port_in_use_stops_startup_before_ready)
{
    cr_assert_eq(redis_server_start(&fx_redis, NULL), 0);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 1), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    char args[256], out[8192];
    snprintf(args, sizeof(args),
             "--redis redis://127.0.0.1:%d --listen 127.0.0.1:%d --metrics "
             "127.0.0.1:%d",
             fx_redis.port, test_free_port(), port);
    cr_assert_eq(emqd_run(args, out, sizeof(out)), 1, "%s", out);
    cr_assert(strstr(out, "msg=\"cannot serve metrics\"") != NULL, "%s", out);
    cr_assert(strstr(out, "msg=ready") == NULL, "said ready, then exited: %s", out);
    close(fd);
}

/* Half-closing behind a read pause: with max-inflight 4, most of 60
 * pipelined lines are still unread or unrun when the input ends; they
 * all run when the pause lifts, every reply comes, then the end. */
Test(operate, a_half_close_behind_max_inflight_runs_every_line)
{
    const char *const extra[] = {"--max-inflight", "4", NULL};
    fx_start(extra);
    struct tc_conn *c = fx_conn();
    static char lines[60 * 128];
    size_t o = 0;
    for (int i = 0; i < 60; i++)
        o += (size_t)snprintf(lines + o, sizeof(lines) - o,
                              "{\"op\":\"enqueue\",\"queue\":\"hcm\",\"group\":\"TENa\","
                              "\"payload\":%d,\"ref\":%d}\n",
                              i, i);
    cr_assert_eq(tc_send(c, lines, o), 0);
    cr_assert_eq(shutdown(c->fd, SHUT_WR), 0);
    for (int i = 0; i < 60; i++) {
        json_t *r = tc_read(c, wait_deadline_ms(0));
        assert_ok(r);
        cr_assert_eq(jint(r, "ref"), i);
        json_decref(r);
    }
    cr_assert(tc_read_eof(c, wait_deadline_ms(0)), "closed once every reply was written");
    tc_close(c);
    c = fx_conn();
    cr_assert_eq(fx_stat(c, "hcm", "pending"), 60);
    tc_close(c);
}

/* Lower this test process's open-file limits (emqd and its redis-server
 * inherit them): soft to soft, hard to hard. */
static void limit_files(rlim_t soft, rlim_t hard)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    cr_assert_geq(rl.rlim_max, hard, "the hard limit is already below %llu",
                  (unsigned long long)hard);
    rl.rlim_cur = soft;
    rl.rlim_max = hard;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

/* max-clients needs descriptors: emqd raises its soft open-file limit to
 * fit, as far as the hard limit allows. */
Test(operate, the_open_file_limit_is_raised_for_max_clients)
{
    limit_files(256, 8192);
    const char *const extra[] = {"--max-clients", "4000", NULL};
    start_logged(extra);
    await_log("msg=\"raised the open-file limit for max-clients\" from=256 to=");
    cr_assert_not(logged("below what max-clients needs"));
}

/* ...and says so at start when the hard limit does not allow it, rather
 * than resetting connections silently later. */
Test(operate, an_open_file_limit_below_max_clients_is_warned_about)
{
    limit_files(256, 512);
    const char *const extra[] = {"--max-clients", "4000", NULL};
    start_logged(extra);
    await_log("the open-file limit is below what max-clients needs");
    await_log("limit=512 needed=");
}

/* With a token, a connection gets auth-timeout-ms to say hello, pings or
 * not; one that said hello in time stays open past it. (2 s, so that even
 * a slow machine says hello on the first connection well within it.) */
Test(operate, a_connection_that_does_not_say_hello_is_closed_in_time)
{
    const char *const extra[] = {"--token", "sesame", "--auth-timeout-ms", "2000", NULL};
    start_logged(extra);
    await_log("msg=ready");
    struct tc_conn *in = fx_conn();
    json_decref(OK(in, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"sesame\"}"));
    struct tc_conn *c = fx_conn();
    json_decref(OK(c, "{\"op\":\"ping\"}"));
    cr_assert(tc_read_eof(c, wait_deadline_ms(0)), "closed without a hello, the ping regardless");
    await_log("msg=\"connection closed: no hello within auth-timeout-ms\"");
    /* in opened before c, so it is older than the timeout too. */
    json_decref(OK(in, "{\"op\":\"ping\"}"));
    tc_close(c);
    tc_close(in);
}

/* With a token, at most max-unauthed connections wait to say hello; one
 * more is refused ELIMIT and closed, and a hello makes room. */
Test(operate, connections_waiting_to_say_hello_are_capped)
{
    const char *const extra[] = {"--token", "sesame", "--max-unauthed", "2", NULL};
    start_logged(extra);
    await_log("msg=ready");
    /* The start-up probe's connection (emqd_start connects to see emqd
     * listen) counts until the daemon has seen it close. */
    await(emqd_metric(&fx_emqd, "emqd_connections") == 0, "the start-up probe's connection gone");
    struct tc_conn *a = fx_conn(), *b = fx_conn();
    json_decref(OK(a, "{\"op\":\"ping\"}"));
    json_decref(OK(b, "{\"op\":\"ping\"}"));
    assert_refused("too many connections waiting to say hello");
    json_decref(OK(a, "{\"op\":\"hello\",\"protocol\":1,\"token\":\"sesame\"}"));
    struct tc_conn *d = fx_conn();
    json_decref(OK(d, "{\"op\":\"ping\"}"));
    tc_close(d);
    tc_close(b);
    tc_close(a);
}
