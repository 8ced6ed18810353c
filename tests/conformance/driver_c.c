/* driver_c: the conformance driver for libemq (tests/conformance/README.md).
 *
 * Reads one command per line on stdin, answers one result per line on
 * stdout, with "pushed" events in between while a stream is open. Each
 * command is one call of libemq's public API (client/emq.h) and a
 * translation of its result; what libemq cannot do (pipelining, a Worker)
 * answers UNSUPPORTED. libemq is blocking and keeps no descriptor in its
 * public API, so while a stream is open the driver waits on stdin 10 ms at
 * a time and takes the pushes that arrived in between (emq_next_job with
 * no wait). Logs go to stderr. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "emq.h"

#define PUSH_POLL_MS 10

static struct emq *conn;      /* the connection, or NULL */
static bool streaming;        /* a stream is open on conn: take its pushes */
static struct emq_job **kept; /* the client's own object per job id */
static size_t nkept, capkept;

/* Write one line (o is consumed). */
static void emit(json_t *o)
{
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (s == NULL) {
        fprintf(stderr, "driver_c: cannot encode a result\n");
        exit(2);
    }
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(s);
}

static json_t *ok_result(void)
{
    return json_pack("{s:b}", "ok", 1);
}

/* The result for a libemq failure: the wire code (the library's own
 * failures as the protocol's ECONN / ETIMEOUT / EUSAGE), and the code's
 * C name as the class. */
static json_t *err_result(int rc, const char *msg)
{
    const char *name = emq_code_name(rc);
    const char *code = rc == EMQ_EIO || rc == EMQ_EBADREPLY ? "ECONN" : name;
    char cls[40];
    snprintf(cls, sizeof(cls), "EMQ_%s", name);
    return json_pack("{s:b, s:s, s:s, s:s}", "ok", 0, "error", code, "class", cls, "message",
                     msg != NULL ? msg : "");
}

/* A failure of the driver itself (no client call made). */
static json_t *driver_err(const char *code, const char *msg)
{
    return json_pack("{s:b, s:s, s:n, s:s}", "ok", 0, "error", code, "class", "message", msg);
}

static json_t *conn_err(int rc)
{
    return err_result(rc, emq_errmsg(conn));
}

static const char *str_arg(const json_t *cmd, const char *key)
{
    return json_string_value(json_object_get(cmd, key));
}

static long long int_arg(const json_t *cmd, const char *key, long long dflt)
{
    const json_t *v = json_object_get(cmd, key);
    return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static bool bool_arg(const json_t *cmd, const char *key)
{
    return json_is_true(json_object_get(cmd, key));
}

static struct emq_job **find_kept(const char *job)
{
    for (size_t i = 0; job != NULL && i < nkept; i++)
        if (strcmp(kept[i]->job, job) == 0)
            return &kept[i];
    return NULL;
}

/* Keep job (owned from now on) under its id, replacing an older object. */
static void keep(struct emq_job *job)
{
    struct emq_job **old = find_kept(job->job);
    if (old != NULL) {
        emq_job_free(*old);
        *old = job;
        return;
    }
    if (nkept == capkept) {
        capkept = capkept ? capkept * 2 : 16;
        kept = realloc(kept, capkept * sizeof(*kept));
        if (kept == NULL) {
            fprintf(stderr, "driver_c: out of memory\n");
            exit(2);
        }
    }
    kept[nkept++] = job;
}

static void close_conn(void)
{
    emq_close(conn);
    conn = NULL;
    streaming = false;
    for (size_t i = 0; i < nkept; i++)
        emq_job_free(kept[i]);
    nkept = 0;
}

/* A leased job as the driver protocol shows it. */
static json_t *job_json(const struct emq_job *j)
{
    return json_pack("{s:s, s:s?, s:i, s:O, s:s}", "job", j->job, "group", j->group, "attempt",
                     j->attempt, "payload", j->payload, "lease", j->lease);
}

/* Emit the pushes libemq has received (or receives now), keeping each. */
static void drain_pushes(void)
{
    while (conn != NULL && streaming) {
        struct emq_job *job = NULL;
        int rc = emq_next_job(conn, &job, 0);
        if (rc != EMQ_OK) {
            fprintf(stderr, "driver_c: stream: %s: %s\n", emq_code_name(rc), emq_errmsg(conn));
            streaming = false;
            return;
        }
        if (job == NULL)
            return;
        json_t *ev =
            json_pack("{s:s, s:s, s:i, s:O, s:s}", "event", "pushed", "job", job->job, "attempt",
                      job->attempt, "payload", job->payload, "lease", job->lease);
        emit(ev);
        keep(job);
    }
}

static json_t *do_connect(const json_t *cmd)
{
    struct emq_options o = {.host = getenv("EMQ_HOST")};
    const char *port = getenv("EMQ_PORT"), *token = str_arg(cmd, "token");
    if (port == NULL || (o.port = atoi(port)) <= 0)
        return driver_err("EUSAGE", "EMQ_PORT is not set");
    if (token == NULL && getenv("EMQ_TOKEN") != NULL && *getenv("EMQ_TOKEN") != '\0')
        token = getenv("EMQ_TOKEN");
    o.token = token;
    o.name = str_arg(cmd, "name") != NULL ? str_arg(cmd, "name") : "conformance-c";
    /* run.py --tls: speak TLS, verifying emqd with that CA. */
    o.tls_ca = getenv("EMQ_TLS_CA");
    o.tls = o.tls_ca != NULL && *o.tls_ca != '\0';
    if (conn != NULL)
        close_conn();
    int rc = emq_connect(&conn, &o);
    if (rc == EMQ_OK)
        return ok_result();
    json_t *r = conn_err(rc);
    emq_close(conn);
    conn = NULL;
    return r;
}

static json_t *do_close(const json_t *cmd)
{
    (void)cmd;
    close_conn();
    return ok_result();
}

static json_t *do_ping(const json_t *cmd)
{
    (void)cmd;
    int rc = emq_ping(conn);
    return rc == EMQ_OK ? ok_result() : conn_err(rc);
}

/* enqueue / enqueue_many item options from a command or an item. */
static struct emq_enqueue_opts enqueue_opts(const json_t *o)
{
    struct emq_enqueue_opts eo = {
        .job = str_arg(o, "job"),
        .group = str_arg(o, "group"),
        .delay_ms = int_arg(o, "delay_ms", 0),
    };
    long long max = int_arg(o, "max_attempts", -1);
    eo.max_attempts = max < 0 ? 0 : max == 0 ? EMQ_ATTEMPTS_UNLIMITED : (int)max;
    return eo;
}

static json_t *verdict_json(const struct emq_enqueued *e)
{
    return json_pack("{s:s, s:s}", "job", e->job, "verdict",
                     e->duplicate ? "duplicate" : "enqueued");
}

static json_t *do_enqueue(const json_t *cmd)
{
    json_t *payload = json_object_get(cmd, "payload");
    if (payload == NULL)
        return driver_err("EUSAGE", "enqueue needs a payload");
    struct emq_enqueue_opts eo = enqueue_opts(cmd);
    struct emq_enqueued out;
    int rc = emq_enqueue(conn, str_arg(cmd, "queue"), payload, &eo, &out);
    if (rc != EMQ_OK)
        return conn_err(rc);
    json_t *r = verdict_json(&out);
    json_object_set_new(r, "ok", json_true());
    return r;
}

static json_t *do_enqueue_many(const json_t *cmd)
{
    const json_t *arr = json_object_get(cmd, "items");
    size_t n = json_array_size(arr);
    if (!json_is_array(arr))
        return driver_err("EUSAGE", "enqueue_many needs items");
    struct emq_item *items = calloc(n + 1, sizeof(*items));
    struct emq_item_result *res = calloc(n + 1, sizeof(*res));
    if (items == NULL || res == NULL) {
        fprintf(stderr, "driver_c: out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(arr, i);
        items[i].payload = json_object_get(it, "payload");
        items[i].opts = enqueue_opts(it);
    }
    int rc = emq_enqueue_many(conn, str_arg(cmd, "queue"), str_arg(cmd, "group"), items, n, res);
    json_t *r;
    if (rc != EMQ_OK) {
        r = conn_err(rc);
    } else {
        json_t *out = json_array();
        for (size_t i = 0; i < n; i++) {
            char cls[40];
            snprintf(cls, sizeof(cls), "EMQ_%s", emq_code_name(res[i].code));
            json_array_append_new(out, res[i].code == EMQ_OK
                                           ? verdict_json(&res[i].enqueued)
                                           : json_pack("{s:s, s:s, s:s}", "error",
                                                       emq_code_name(res[i].code), "class", cls,
                                                       "message", res[i].message));
        }
        r = json_pack("{s:b, s:o}", "ok", 1, "results", out);
    }
    free(items);
    free(res);
    return r;
}

static json_t *do_claim(const json_t *cmd)
{
    struct emq_claim_opts o = {
        .count = (int)int_arg(cmd, "count", 0),
        .lease_ms = (int)int_arg(cmd, "lease_ms", 0),
        .wait_ms = (int)int_arg(cmd, "wait_ms", 0),
        .flat = bool_arg(cmd, "flat"),
    };
    struct emq_job **jobs = NULL;
    size_t n = 0;
    int rc = emq_claim(conn, str_arg(cmd, "queue"), &o, &jobs, &n);
    if (rc != EMQ_OK)
        return conn_err(rc);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, job_json(jobs[i]));
        keep(jobs[i]);
    }
    free(jobs); /* the jobs themselves are kept */
    return json_pack("{s:b, s:o}", "ok", 1, "jobs", arr);
}

/* The object a settle uses: the kept one, or with "lease" given a copy of
 * it carrying that token (in *copy). NULL when none is kept. */
static struct emq_job *settle_target(const json_t *cmd, struct emq_job *copy)
{
    struct emq_job **k = find_kept(str_arg(cmd, "job"));
    if (k == NULL)
        return NULL;
    const char *lease = str_arg(cmd, "lease");
    if (lease == NULL)
        return *k;
    *copy = **k;
    copy->lease = (char *)lease; /* borrowed from cmd; the copy is not freed */
    return copy;
}

static json_t *state_result(int rc, enum emq_state state)
{
    return rc == EMQ_OK ? json_pack("{s:b, s:s}", "ok", 1, "state", emq_state_name(state))
                        : conn_err(rc);
}

static json_t *not_kept(void)
{
    return driver_err("EUSAGE", "the driver keeps no job by that id");
}

static json_t *do_complete(const json_t *cmd)
{
    struct emq_job copy, *j = settle_target(cmd, &copy);
    if (j == NULL)
        return not_kept();
    /* emq_complete reports success only: its state is "completed". */
    return state_result(emq_complete(conn, j), EMQ_STATE_COMPLETED);
}

static json_t *do_fail(const json_t *cmd)
{
    struct emq_job copy, *j = settle_target(cmd, &copy);
    if (j == NULL)
        return not_kept();
    const json_t *retry = json_object_get(cmd, "retry_ms");
    struct emq_fail_opts o = {
        .error = str_arg(cmd, "error"),
        .retry_ms = !json_is_integer(retry)          ? 0
                    : json_integer_value(retry) == 0 ? EMQ_RETRY_NOW
                                                     : json_integer_value(retry),
        .dead = bool_arg(cmd, "dead"),
    };
    enum emq_state state = EMQ_STATE_UNKNOWN;
    int rc = emq_fail(conn, j, &o, &state);
    return state_result(rc, state);
}

static json_t *do_release(const json_t *cmd)
{
    struct emq_job copy, *j = settle_target(cmd, &copy);
    if (j == NULL)
        return not_kept();
    enum emq_state state = EMQ_STATE_UNKNOWN;
    int rc = emq_release(conn, j, str_arg(cmd, "error"), &state);
    return state_result(rc, state);
}

static json_t *do_extend(const json_t *cmd)
{
    struct emq_job copy, *j = settle_target(cmd, &copy);
    if (j == NULL)
        return not_kept();
    int rc = emq_extend(conn, j, (int)int_arg(cmd, "lease_ms", 0));
    if (rc != EMQ_OK)
        return conn_err(rc);
    return json_pack("{s:b, s:I}", "ok", 1, "lease_until", (json_int_t)j->lease_until);
}

static json_t *do_stream(const json_t *cmd)
{
    int rc = emq_stream(conn, str_arg(cmd, "queue"), (int)int_arg(cmd, "credit", 0),
                        (int)int_arg(cmd, "lease_ms", 0), bool_arg(cmd, "flat"));
    if (rc != EMQ_OK)
        return conn_err(rc);
    streaming = true;
    return ok_result();
}

static json_t *do_pipeline(const json_t *cmd)
{
    (void)cmd;
    return driver_err("UNSUPPORTED",
                      "libemq has no pipelining API: every call waits for its reply");
}

static json_t *do_worker(const json_t *cmd)
{
    (void)cmd;
    return driver_err("UNSUPPORTED", "libemq has no Worker: emq_stream_run delivers pushes, with "
                                     "no concurrency, automatic extend, reconnect or graceful "
                                     "stop");
}

struct command {
    const char *name;
    bool needs_conn;
    json_t *(*run)(const json_t *cmd);
};

static const struct command commands[] = {
    {"connect", false, do_connect},
    {"close", false, do_close},
    {"ping", true, do_ping},
    {"enqueue", true, do_enqueue},
    {"enqueue_many", true, do_enqueue_many},
    {"claim", true, do_claim},
    {"complete", true, do_complete},
    {"fail", true, do_fail},
    {"release", true, do_release},
    {"extend", true, do_extend},
    {"stream", true, do_stream},
    {"pipeline", false, do_pipeline},
    {"worker_start", false, do_worker},
    {"worker_stop", false, do_worker},
};

/* Run one command line; false after quit. */
static bool run_line(const char *line, size_t len)
{
    json_error_t jerr;
    json_t *cmd = json_loadb(line, len, 0, &jerr);
    const char *name = json_string_value(json_object_get(cmd, "do"));
    if (name == NULL) {
        emit(driver_err("EUSAGE", "a command is a JSON object with \"do\""));
        json_decref(cmd);
        return true;
    }
    if (strcmp(name, "quit") == 0) {
        json_decref(cmd);
        close_conn();
        emit(ok_result());
        return false;
    }
    json_t *r = NULL;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(commands[i].name, name) != 0)
            continue;
        r = commands[i].needs_conn && conn == NULL ? err_result(EMQ_EIO, "not connected")
                                                   : commands[i].run(cmd);
        break;
    }
    emit(r != NULL ? r : driver_err("UNSUPPORTED", "no such command"));
    json_decref(cmd);
    drain_pushes();
    return true;
}

int main(void)
{
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    bool go = buf != NULL;
    while (go) {
        char *nl;
        while (go && (nl = memchr(buf, '\n', len)) != NULL) {
            size_t n = (size_t)(nl - buf);
            if (n > 0)
                go = run_line(buf, n);
            memmove(buf, nl + 1, len - n - 1);
            len -= n + 1;
        }
        if (!go)
            break;
        drain_pushes();
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int r = poll(&p, 1, conn != NULL && streaming ? PUSH_POLL_MS : -1);
        if (r < 0 && errno != EINTR)
            break;
        if (r <= 0)
            continue;
        if (cap - len < 65536) {
            char *b = realloc(buf, cap * 2);
            if (b == NULL)
                break;
            buf = b;
            cap *= 2;
        }
        ssize_t got = read(STDIN_FILENO, buf + len, cap - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; /* end of input: exit 0, as after quit */
        len += (size_t)got;
    }
    close_conn();
    free(buf);
    free(kept);
    return 0;
}
