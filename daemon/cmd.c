/* cmd: the command table. Each row names an op, its argument spec (checked
 * by the client layer before the handler runs, so handlers see only valid
 * arguments) and its handler. Handlers turn a request into lane-script
 * calls and answer with req_ok / req_error exactly once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "server.h"

#define DAY_MS     (24LL * 3600 * 1000)
#define COUNT_MAX  1000
#define CREDIT_MAX 10000

#define Q                                                                                          \
    {                                                                                              \
        "queue", ARG_STRING, ARG_REQUIRED | ARG_QUEUE, 0, 0                                        \
    }
#define JOB                                                                                        \
    {                                                                                              \
        "job", ARG_STRING, ARG_REQUIRED | ARG_JOB, 0, 0                                            \
    }
#define GROUP                                                                                      \
    {                                                                                              \
        "group", ARG_STRING, ARG_REQUIRED | ARG_GROUP, 0, 0                                        \
    }
#define LEASE                                                                                      \
    {                                                                                              \
        "lease", ARG_STRING, ARG_REQUIRED, 1, 23                                                   \
    }
#define END                                                                                        \
    {                                                                                              \
        NULL, ARG__END, 0, 0, 0                                                                    \
    }

/* --- helpers ------------------------------------------------------------ */

static const char *str(const struct req *r, const char *name)
{
    const char *s = request_string(r->root, name, NULL);
    return s != NULL ? s : "";
}

/* Wall-clock ms: job ids carry their mint time. */
static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void num(char *buf, size_t cap, long long v)
{
    snprintf(buf, cap, "%lld", v);
}

static void run_script(struct req *r, enum script_id id, int argc, const char **argv,
                       pool_reply_cb *cb)
{
    if (queue_script(r->q, id, argc, argv, cb, r) != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
}

/* A reply is an error or unavailable: answer from it and say so. */
static bool failed(struct req *r, int status, redisReply *reply)
{
    if (status != 0 || reply == NULL || reply->type == REDIS_REPLY_ERROR) {
        req_backend_error(r, status, reply);
        return true;
    }
    return false;
}

/* --- hello, ping, quit ------------------------------------------------- */

static const struct arg_spec hello_spec[] = {
    {"protocol", ARG_INT, ARG_REQUIRED, 1, 1},
    {"token", ARG_STRING, 0, 0, 4096},
    {"name", ARG_STRING, 0, 0, 128},
    END,
};

static void cmd_hello(struct req *r)
{
    struct client *c = r->c;
    const char *want = c->srv->cfg->token;
    if (want != NULL) {
        size_t len = 0;
        const char *tok = request_string(r->root, "token", &len);
        /* Constant time in the token's length: no early exit on a mismatch. */
        size_t wl = strlen(want);
        unsigned diff = (unsigned)(len ^ wl);
        for (size_t i = 0; i < wl; i++)
            diff |= (unsigned char)want[i] ^ (unsigned char)(i < len && tok ? tok[i] : 0);
        if (tok == NULL || diff != 0) {
            if (++c->auth_failures >= 3) {
                log_warn("client %s: %d failed hellos, disconnecting", c->addr, c->auth_failures);
                c->quit = true;
            }
            req_error(r, WIRE_EAUTH, "bad or missing token");
            return;
        }
        c->authed = true;
    }
    req_ok(r,
           json_pack("{s:s, s:s, s:i}", "server", "emqd", "version", EMQ_VERSION, "protocol", 1));
}

static void cmd_ping(struct req *r)
{
    req_ok(r, NULL);
}

static void cmd_quit(struct req *r)
{
    r->c->quit = true;
    req_ok(r, NULL);
}

/* --- enqueue ------------------------------------------------------------ */

#define ENQ_FIELDS                                                                                 \
    {"payload", ARG_ANY, ARG_REQUIRED, 0, 0}, {"job", ARG_STRING, ARG_JOB, 0, 0},                  \
        {"group", ARG_STRING, ARG_GROUP, 0, 0}, {"delay_ms", ARG_INT, 0, 0, 365 * DAY_MS},         \
    {                                                                                              \
        "max_attempts", ARG_INT, 0, 0, 1000000                                                     \
    }

static const struct arg_spec enqueue_spec[] = {Q, ENQ_FIELDS, END};
static const struct arg_spec item_spec[] = {ENQ_FIELDS, END};

/* One enqueue script call for one item; cb gets priv. The minted id (if
 * any) is written back into the item so the reply can name it. */
static int enqueue_item(struct req *r, json_t *item, const char *dflt_group, pool_reply_cb *cb,
                        void *priv)
{
    struct server *s = req_server(r);
    const char *job = request_string(item, "job", NULL);
    if (job == NULL) {
        char id[MINT_ID_LEN + 1];
        mint_next(&s->mint, &s->rand, wall_ms(), id);
        json_object_set_new(item, "job", json_string(id));
        job = json_string_value(json_object_get(item, "job"));
    }
    const char *group = request_string(item, "group", NULL);
    if (group == NULL)
        group = dflt_group;
    char *payload = json_dumps(json_object_get(item, "payload"), JSON_COMPACT | JSON_ENCODE_ANY);
    if (payload == NULL)
        return -ENOMEM;
    if (strlen(payload) > s->cfg->max_line) {
        free(payload);
        return -E2BIG;
    }
    char delay[24], max[24];
    num(delay, sizeof(delay), request_int(item, "delay_ms", 0));
    num(max, sizeof(max), request_int(item, "max_attempts", s->cfg->max_attempts));
    const char *argv[] = {job, group, payload, delay, max};
    int rc = queue_script(r->q, SCRIPT_ENQUEUE, 5, argv, cb, priv);
    free(payload);
    return rc;
}

static json_t *verdict(const redisReply *reply, const char *job)
{
    return json_pack("{s:s, s:s}", "job", job, "verdict",
                     reply->integer == 1 ? "enqueued" : "duplicate");
}

static void enqueue_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    if (reply->integer == 1) {
        req_server(r)->count.enqueued++;
        json_int_t delay = request_int(r->root, "delay_ms", 0);
        if (delay > 0)
            queue_due_in(r->q, (uint64_t)delay);
    }
    req_ok(r, verdict(reply, str(r, "job")));
}

static void cmd_enqueue(struct req *r)
{
    int rc = enqueue_item(r, r->root, "", enqueue_cb, r);
    if (rc == -E2BIG)
        req_error(r, WIRE_ETOOBIG, "payload too large");
    else if (rc != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
}

static const struct arg_spec enqueue_many_spec[] = {
    Q,
    {"jobs", ARG_ARRAY, ARG_REQUIRED, 0, 0}, /* size: EEMPTY / ELIMIT below */
    {"group", ARG_STRING, ARG_GROUP, 0, 0},
    END,
};

/* One item of a batch: where its verdict goes. */
struct item {
    struct req *r;
    size_t index;
};

static void many_done(struct req *r)
{
    if (--r->outstanding == 0) {
        json_t *results = r->acc;
        r->acc = NULL;
        req_ok(r, json_pack("{s:o}", "results", results));
    }
}

static void item_error(json_t *results, size_t i, enum wire_error code, const char *msg)
{
    json_array_set_new(results, i,
                       json_pack("{s:s, s:s}", "error", wire_error_name(code), "message", msg));
}

static void many_cb(void *priv, int status, redisReply *reply)
{
    struct item *it = priv;
    struct req *r = it->r;
    json_t *item = json_array_get(json_object_get(r->root, "jobs"), it->index);
    if (status != 0 || reply == NULL) {
        item_error(r->acc, it->index, WIRE_EUNAVAILABLE, "the backend did not answer in time");
    } else if (reply->type == REDIS_REPLY_ERROR) {
        size_t w = strcspn(reply->str, " ");
        item_error(r->acc, it->index, wire_error_lookup(reply->str, w),
                   reply->str[w] ? reply->str + w + 1 : reply->str);
    } else {
        if (reply->integer == 1) {
            req_server(r)->count.enqueued++;
            json_int_t delay = request_int(item, "delay_ms", 0);
            if (delay > 0)
                queue_due_in(r->q, (uint64_t)delay);
        }
        json_array_set_new(r->acc, it->index, verdict(reply, request_string(item, "job", NULL)));
    }
    free(it);
    many_done(r);
}

static void cmd_enqueue_many(struct req *r)
{
    json_t *jobs = json_object_get(r->root, "jobs");
    size_t n = json_array_size(jobs);
    const char *group = request_string(r->root, "group", NULL);
    if (n == 0) {
        req_error(r, WIRE_EEMPTY, "\"jobs\" is empty: nothing to enqueue");
        return;
    }
    if (n > req_server(r)->cfg->max_batch) {
        req_error(r, WIRE_ELIMIT, "%zu jobs is more than the batch limit of %zu", n,
                  req_server(r)->cfg->max_batch);
        return;
    }
    r->acc = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(r->acc, json_null());
    /* Every item is checked first; the valid ones are all sent in this
     * loop turn, so the pool pipelines them in one flush per connection. */
    r->outstanding = 1; /* held until every item is sent */
    for (size_t i = 0; i < n; i++) {
        json_t *item = json_array_get(jobs, i);
        struct request_error err;
        if (request_check_item(item_spec, item, &err) != 0) {
            item_error(r->acc, i, err.code, err.message);
            continue;
        }
        struct item *it = malloc(sizeof(*it));
        if (it == NULL) {
            item_error(r->acc, i, WIRE_EINTERNAL, "out of memory");
            continue;
        }
        *it = (struct item){.r = r, .index = i};
        r->outstanding++;
        int rc = enqueue_item(r, item, group ? group : "", many_cb, it);
        if (rc != 0) {
            r->outstanding--;
            free(it);
            item_error(r->acc, i, rc == -E2BIG ? WIRE_ETOOBIG : WIRE_EUNAVAILABLE,
                       rc == -E2BIG ? "payload too large" : "the backend is unavailable");
        }
    }
    many_done(r);
}

/* --- claim and stream --------------------------------------------------- */

static const struct arg_spec claim_spec[] = {
    Q,
    {"count", ARG_INT, 0, 1, COUNT_MAX},
    {"lease_ms", ARG_INT, 0, 1, DAY_MS},
    {"wait_ms", ARG_INT, 0, 0, 3600 * 1000},
    {"flat", ARG_BOOL, 0, 0, 0},
    END,
};

static void claim_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    struct client *c = r->c;
    long long deadline = reply->element[0]->integer;
    size_t got = (reply->elements - 1) / 5;
    if (c->closing) {
        /* The worker left while we claimed: give the jobs straight back. */
        json_t *pairs = NULL;
        for (size_t i = 0; i < got; i++)
            pairs = queue_pair_add(pairs, reply->element + 1 + 5 * i);
        if (pairs != NULL)
            queue_release(r->q, pairs, "connection closed");
        req_ok(r, NULL);
        return;
    }
    uint64_t wait = (uint64_t)request_int(r->root, "wait_ms", 0);
    if (got == 0 && wait > 0 && !c->srv->stopping) {
        size_t count = (size_t)request_int(r->root, "count", 1);
        uint64_t lease =
            (uint64_t)request_int(r->root, "lease_ms", (json_int_t)c->srv->cfg->lease_ms);
        if (queue_wait_claim(r->q, r, count, lease, request_bool(r->root, "flat", false), wait) !=
            0)
            req_error(r, WIRE_EINTERNAL, "out of memory");
        return;
    }
    /* The stored payloads are spliced into the reply as they are. */
    struct outbuf line;
    outbuf_init(&line);
    reply_begin_ok(&line, r->ref);
    reply_key(&line, "jobs");
    reply_begin_array(&line);
    for (size_t i = 0; i < got; i++) {
        redisReply **f = reply->element + 1 + 5 * i;
        struct reply_job j;
        queue_job_view(r->q, f, deadline, &j);
        reply_job(&line, &j);
        client_hold(c, r->q, f[0]->str, f[0]->len, f[4]->str,
                    (uint64_t)request_int(r->root, "lease_ms", (json_int_t)c->srv->cfg->lease_ms),
                    NULL);
    }
    reply_end_array(&line);
    reply_end(&line);
    c->srv->count.claimed += got;
    if (got > 0) /* reap on time if the worker lets these run out */
        queue_due_in(r->q,
                     (uint64_t)request_int(r->root, "lease_ms", (json_int_t)c->srv->cfg->lease_ms));
    req_ok_line(r, &line);
}

static void cmd_claim(struct req *r)
{
    char count[24], lease[24];
    num(count, sizeof(count), request_int(r->root, "count", 1));
    num(lease, sizeof(lease),
        request_int(r->root, "lease_ms", (json_int_t)req_server(r)->cfg->lease_ms));
    const char *argv[] = {count, lease};
    bool flat = request_bool(r->root, "flat", false);
    run_script(r, flat ? SCRIPT_CLAIM_FLAT : SCRIPT_CLAIM, 2, argv, claim_cb);
}

static const struct arg_spec stream_spec[] = {
    Q,
    {"credit", ARG_INT, ARG_REQUIRED, 0, CREDIT_MAX},
    {"lease_ms", ARG_INT, 0, 1, DAY_MS},
    {"flat", ARG_BOOL, 0, 0, 0},
    END,
};

static void cmd_stream(struct req *r)
{
    struct client *c = r->c;
    bool flat = request_bool(r->root, "flat", false);
    struct waiter *w = c->waiters;
    while (w != NULL && !(w->stream && w->q == r->q && w->flat == flat))
        w = w->cnext;
    if (w == NULL) {
        w = calloc(1, sizeof(*w));
        if (w == NULL) {
            req_error(r, WIRE_EINTERNAL, "out of memory");
            return;
        }
        w->q = r->q;
        w->c = c;
        w->flat = flat;
        w->stream = true;
        w->cnext = c->waiters;
        c->waiters = w;
    }
    w->credit = (size_t)request_int(r->root, "credit", 0);
    w->lease_ms = (uint64_t)request_int(r->root, "lease_ms", (json_int_t)c->srv->cfg->lease_ms);
    /* The stream parks once its reply is out (drain_replies), so pushes
     * always follow the ack; credit 0 (or none left) just stops it. */
    if (w->credit > w->outstanding)
        r->park = w;
    else
        queue_unpark(w);
    req_ok(r, NULL);
}

/* --- settling a lease --------------------------------------------------- */

static const struct arg_spec settle_spec[] = {Q, JOB, LEASE, END};

static void cmd_complete(struct req *r)
{
    /* Completions of one loop turn go out together (queue_flush_all). */
    queue_complete(r->q, r);
}

/* The status word of a settling move's reply: "ELEASE", "ENOJOB", a
 * state, or NULL when the backend failed. release answers per pair (an
 * array), the others with a value or an error reply. */
static const char *status_word(int status, const redisReply *reply)
{
    if (status != 0 || reply == NULL)
        return NULL;
    if (reply->type == REDIS_REPLY_ARRAY)
        return reply->elements == 1 ? reply->element[0]->str : NULL;
    if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_ERROR)
        return reply->str;
    return "";
}

/* The lease is not ours any more (settled, stale, or the job is gone):
 * forget it, which returns a stream's credit. */
static void forget(struct req *r, const char *word)
{
    if (word == NULL || r->c->closing)
        return;
    if (strncmp(word, "ELEASE", 6) != 0 && strncmp(word, "ENOJOB", 6) != 0 && word[0] == 'E')
        return; /* EARG and the like: the lease is still held */
    size_t jlen;
    const char *job = request_string(r->root, "job", &jlen);
    client_unhold(r->c, r->q, job, jlen);
}

static void state_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    const char *word = status_word(status, reply);
    if (word == NULL || reply->type == REDIS_REPLY_ERROR) {
        forget(r, word);
        req_backend_error(r, status, reply);
        return;
    }
    forget(r, word);
    if (strcmp(word, "ELEASE") == 0)
        req_error(r, WIRE_ELEASE, "the lease is not current (expired and re-leased?)");
    else if (strcmp(word, "ENOJOB") == 0)
        req_error(r, WIRE_ENOJOB, "no such job");
    else {
        if (strcmp(word, "delayed") == 0) {
            json_int_t retry = request_int(r->root, "retry_ms", -1);
            /* The default backoff is at least 1 s: the regular pass. */
            if (retry > 0)
                queue_due_in(r->q, (uint64_t)retry);
        }
        req_ok(r, json_pack("{s:s}", "state", word));
    }
}

static const struct arg_spec fail_spec[] = {
    Q,
    JOB,
    LEASE,
    {"error", ARG_STRING, 0, 0, 4096},
    {"retry_ms", ARG_INT, 0, 0, 365 * DAY_MS},
    {"dead", ARG_BOOL, 0, 0, 0},
    END,
};

static void cmd_fail(struct req *r)
{
    req_server(r)->count.failed++;
    char retry[24];
    num(retry, sizeof(retry), request_int(r->root, "retry_ms", -1));
    const char *argv[] = {str(r, "job"), str(r, "lease"), str(r, "error"), retry,
                          request_bool(r->root, "dead", false) ? "1" : "0"};
    run_script(r, SCRIPT_FAIL, 5, argv, state_cb);
}

static const struct arg_spec release_spec[] = {
    Q, JOB, LEASE, {"error", ARG_STRING, 0, 0, 4096}, END};

static void cmd_release(struct req *r)
{
    const char *why = request_string(r->root, "error", NULL);
    const char *argv[] = {why ? why : "released by the worker", str(r, "job"), str(r, "lease")};
    run_script(r, SCRIPT_RELEASE, 3, argv, state_cb);
}

static const struct arg_spec extend_spec[] = {
    Q, JOB, LEASE, {"lease_ms", ARG_INT, ARG_REQUIRED, 1, DAY_MS}, END,
};

static void extend_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (status == 0 && reply != NULL && reply->type == REDIS_REPLY_ERROR)
        forget(r, reply->str);
    if (failed(r, status, reply))
        return;
    size_t jlen;
    const char *job = request_string(r->root, "job", &jlen);
    client_extend(r->c, r->q, job, jlen, (uint64_t)request_int(r->root, "lease_ms", 1));
    req_ok(r, json_pack("{s:I}", "lease_until", (json_int_t)reply->integer));
}

static void cmd_extend(struct req *r)
{
    char ms[24];
    num(ms, sizeof(ms), request_int(r->root, "lease_ms", 1));
    const char *argv[] = {str(r, "job"), str(r, "lease"), ms};
    run_script(r, SCRIPT_EXTEND, 3, argv, extend_cb);
}

/* --- per-tenant levers --------------------------------------------------- */

static void empty_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (!failed(r, status, reply))
        req_ok(r, NULL);
}

static void changed_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (!failed(r, status, reply))
        req_ok(r, json_pack("{s:b}", "changed", reply->integer == 1));
}

static const struct arg_spec limit_spec[] = {
    Q,
    GROUP,
    {"max", ARG_INT_OR_NULL, ARG_REQUIRED, 0, 1000000},
    END,
};

static void cmd_limit(struct req *r)
{
    char max[24];
    json_t *m = json_object_get(r->root, "max");
    num(max, sizeof(max), json_is_integer(m) ? json_integer_value(m) : 0);
    const char *argv[] = {str(r, "group"), max};
    run_script(r, SCRIPT_LIMIT, 2, argv, empty_cb);
}

static const struct arg_spec group_spec[] = {Q, GROUP, END};

static void cmd_pause(struct req *r)
{
    const char *argv[] = {str(r, "group")};
    run_script(r, SCRIPT_PAUSE, 1, argv, changed_cb);
}

static void cmd_resume(struct req *r)
{
    const char *argv[] = {str(r, "group")};
    run_script(r, SCRIPT_RESUME, 1, argv, changed_cb);
}

static const struct arg_spec reassign_spec[] = {Q, JOB, GROUP, END};

static void reassign_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    req_ok(r, json_pack("{s:o}", "from",
                        reply->len ? json_stringn(reply->str, reply->len) : json_null()));
}

static void cmd_reassign(struct req *r)
{
    const char *argv[] = {str(r, "job"), str(r, "group")};
    run_script(r, SCRIPT_REASSIGN, 2, argv, reassign_cb);
}

/* Drain runs in bounded script calls (so Redis never blocks long) until
 * the lane is empty. */
static void drain_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    uint64_t drained = (uint64_t)reply->element[0]->integer;
    uint64_t left = (uint64_t)reply->element[1]->integer;
    /* The first call fixes the goal: what was pending then. Jobs that
     * producers add while we drain are theirs to keep, so a busy lane
     * cannot keep the drain (and this connection's replies) going for
     * ever. */
    if (r->n == 0 && r->acc == NULL)
        r->acc = json_integer((json_int_t)(drained + left));
    r->n += drained;
    if (left > 0 && r->n < (uint64_t)json_integer_value(r->acc)) {
        const char *argv[] = {str(r, "group"), "1000"};
        run_script(r, SCRIPT_DRAIN, 2, argv, drain_cb);
        return;
    }
    req_ok(r, json_pack("{s:I}", "drained", (json_int_t)r->n));
}

static void cmd_drain(struct req *r)
{
    const char *argv[] = {str(r, "group"), "1000"};
    run_script(r, SCRIPT_DRAIN, 2, argv, drain_cb);
}

static const struct arg_spec opt_group_spec[] = {Q, {"group", ARG_STRING, ARG_GROUP, 0, 0}, END};

static void depth_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (!failed(r, status, reply))
        req_ok(r, json_pack("{s:I}", "depth", (json_int_t)reply->integer));
}

static void cmd_depth(struct req *r)
{
    const char *argv[] = {str(r, "group")};
    run_script(r, SCRIPT_DEPTH, 1, argv, depth_cb);
}

static void reap_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    long long n = reply->type == REDIS_REPLY_ARRAY ? reply->element[0]->integer : reply->integer;
    req_server(r)->count.reaped += (uint64_t)n;
    req_ok(r, json_pack("{s:I}", "reaped", (json_int_t)n));
}

static void cmd_reap(struct req *r)
{
    const char *group = request_string(r->root, "group", NULL);
    if (group != NULL) {
        const char *argv[] = {group, "10000"};
        run_script(r, SCRIPT_REAP_GROUP, 2, argv, reap_cb);
    } else {
        const char *argv[] = {"10000"};
        run_script(r, SCRIPT_REAP, 1, argv, reap_cb);
    }
}

/* --- reading the queue ---------------------------------------------------- */

static const struct arg_spec queue_spec[] = {Q, END};

static void stats_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    static const char *const names[] = {"pending", "active", "delayed", "dead",
                                        "ring",    "groups", "paused",  "flat"};
    json_t *o = json_object();
    for (size_t i = 0; i < reply->elements && i < 8; i++)
        json_object_set_new(o, names[i], json_integer(reply->element[i]->integer));
    req_ok(r, o);
}

static void cmd_stats(struct req *r)
{
    run_script(r, SCRIPT_STATS, 0, NULL, stats_cb);
}

static const struct arg_spec groups_spec[] = {
    Q,
    {"cursor", ARG_STRING, 0, 0, 32},
    {"count", ARG_INT, 0, 1, 10000},
    END,
};

static void groups_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    json_t *list = json_array();
    for (size_t i = 1; i + 4 < reply->elements; i += 5) {
        redisReply **f = reply->element + i;
        json_array_append_new(
            list, json_pack("{s:s, s:I, s:I, s:o, s:b}", "group", f[0]->str, "depth",
                            (json_int_t)f[1]->integer, "active", (json_int_t)f[2]->integer, "limit",
                            f[3]->integer < 0 ? json_null() : json_integer(f[3]->integer), "paused",
                            f[4]->integer == 1));
    }
    req_ok(r, json_pack("{s:o, s:s}", "groups", list, "cursor", reply->element[0]->str));
}

static void cmd_groups(struct req *r)
{
    char count[24];
    const char *cursor = request_string(r->root, "cursor", NULL);
    if (cursor != NULL && (cursor[0] == '\0' || cursor[strspn(cursor, "0123456789")] != '\0')) {
        req_error(r, WIRE_EARG, "argument \"cursor\" must be a cursor from a previous reply");
        return;
    }
    num(count, sizeof(count), request_int(r->root, "count", 100));
    const char *argv[] = {cursor ? cursor : "0", count};
    run_script(r, SCRIPT_GROUPS, 2, argv, groups_cb);
}

static const struct arg_spec job_spec[] = {Q, JOB, END};

static void job_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    if (reply->elements == 0) {
        req_error(r, WIRE_ENOJOB, "no such job (never enqueued, or expired after completion)");
        return;
    }
    json_t *row = json_object();
    json_object_set_new(row, "job", json_string(str(r, "job")));
    for (size_t i = 0; i + 1 < reply->elements; i += 2) {
        const char *k = reply->element[i]->str;
        redisReply *v = reply->element[i + 1];
        json_t *val;
        if (strcmp(k, "lease") == 0)
            continue; /* the fencing token belongs to the holder alone */
        if (strcmp(k, "payload") == 0) {
            val = json_loadb(v->str, v->len, JSON_DECODE_ANY, NULL);
            if (val == NULL)
                val = json_stringn(v->str, v->len);
        } else if (strcmp(k, "group") == 0 && v->len == 0) {
            val = json_null();
        } else if (strcmp(k, "attempts") == 0 || strcmp(k, "max_attempts") == 0 ||
                   strstr(k, "_ms") != NULL || strcmp(k, "lease_until") == 0) {
            val = json_integer(strtoll(v->str, NULL, 10));
        } else {
            val = json_stringn(v->str, v->len);
        }
        json_object_set_new(row, k, val);
    }
    req_ok(r, json_pack("{s:o}", "job", row));
}

static void cmd_job(struct req *r)
{
    char key[KEYS_PREFIX_MAX + BRAND_ID_MAX + 8];
    snprintf(key, sizeof(key), "%sjob:%s", r->q->keys.prefix, str(r, "job"));
    const char *argv[] = {"HGETALL", key};
    size_t lens[] = {7, strlen(key)};
    if (pool_command(req_server(r)->pool, 2, argv, lens, job_cb, r) != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
}

static const struct arg_spec dead_spec[] = {
    Q,
    {"action", ARG_STRING, ARG_REQUIRED, 1, 8},
    {"job", ARG_STRING, ARG_JOB, 0, 0},
    {"limit", ARG_INT, 0, 1, 10000},
    END,
};

static void dead_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    if (reply->type == REDIS_REPLY_INTEGER) {
        req_ok(r, json_pack("{s:I}", "count", (json_int_t)reply->integer));
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; i + 4 < reply->elements; i += 5) {
        redisReply **f = reply->element + i;
        json_array_append_new(list,
                              json_pack("{s:s, s:o, s:I, s:s, s:I}", "job", f[0]->str, "group",
                                        f[1]->len ? json_string(f[1]->str) : json_null(),
                                        "attempts", (json_int_t)f[2]->integer, "error", f[3]->str,
                                        "died_ms", (json_int_t)f[4]->integer));
    }
    req_ok(r, json_pack("{s:o}", "jobs", list));
}

static void cmd_dead(struct req *r)
{
    const char *action = str(r, "action");
    if (strcmp(action, "list") && strcmp(action, "retry") && strcmp(action, "purge")) {
        req_error(r, WIRE_EARG, "argument \"action\" must be list, retry or purge");
        return;
    }
    char limit[24];
    num(limit, sizeof(limit), request_int(r->root, "limit", 100));
    const char *argv[] = {action, str(r, "job"), limit};
    run_script(r, SCRIPT_DEAD, 3, argv, dead_cb);
}

static void check_cb(void *priv, int status, redisReply *reply)
{
    struct req *r = priv;
    if (failed(r, status, reply))
        return;
    json_t *v = json_array();
    for (size_t i = 0; i < reply->elements; i++)
        json_array_append_new(v, json_string(reply->element[i]->str));
    req_ok(r, json_pack("{s:o}", "violations", v));
}

static void cmd_check(struct req *r)
{
    run_script(r, SCRIPT_CHECK, 0, NULL, check_cb);
}

/* --- the table -------------------------------------------------------- */

static const struct arg_spec none_spec[] = {END};

const struct cmd cmd_table[] = {
    {"hello", hello_spec, cmd_hello, CMD_NOAUTH},
    {"ping", none_spec, cmd_ping, CMD_NOAUTH},
    {"quit", none_spec, cmd_quit, CMD_NOAUTH},
    {"enqueue", enqueue_spec, cmd_enqueue, CMD_QUEUE},
    {"enqueue_many", enqueue_many_spec, cmd_enqueue_many, CMD_QUEUE},
    {"claim", claim_spec, cmd_claim, CMD_QUEUE | CMD_WORK},
    {"stream", stream_spec, cmd_stream, CMD_QUEUE | CMD_WORK},
    {"complete", settle_spec, cmd_complete, CMD_QUEUE},
    {"fail", fail_spec, cmd_fail, CMD_QUEUE},
    {"release", release_spec, cmd_release, CMD_QUEUE},
    {"extend", extend_spec, cmd_extend, CMD_QUEUE},
    {"limit", limit_spec, cmd_limit, CMD_QUEUE},
    {"pause", group_spec, cmd_pause, CMD_QUEUE},
    {"resume", group_spec, cmd_resume, CMD_QUEUE},
    {"reassign", reassign_spec, cmd_reassign, CMD_QUEUE},
    {"drain", group_spec, cmd_drain, CMD_QUEUE},
    {"depth", opt_group_spec, cmd_depth, CMD_QUEUE},
    {"reap", opt_group_spec, cmd_reap, CMD_QUEUE},
    {"stats", queue_spec, cmd_stats, CMD_QUEUE},
    {"groups", groups_spec, cmd_groups, CMD_QUEUE},
    {"job", job_spec, cmd_job, CMD_QUEUE},
    {"dead", dead_spec, cmd_dead, CMD_QUEUE},
    {"check", queue_spec, cmd_check, CMD_QUEUE},
};
const size_t cmd_count = sizeof(cmd_table) / sizeof(cmd_table[0]);

const struct cmd *cmd_lookup(const char *name, size_t len)
{
    for (size_t i = 0; i < cmd_count; i++)
        if (strlen(cmd_table[i].name) == len && memcmp(cmd_table[i].name, name, len) == 0)
            return &cmd_table[i];
    return NULL;
}
