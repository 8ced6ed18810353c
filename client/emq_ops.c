/* emq_ops: libemq's producer and worker calls: enqueue, enqueue_many,
 * claim, stream and the settles (see emq.h). */
#include "emq_int.h"

#include <stdlib.h>
#include <string.h>

/* State names, indexed by enum emq_state. */
static const char *const emq_state_names[] = {
    [EMQ_STATE_UNKNOWN] = "unknown", [EMQ_STATE_PENDING] = "pending",
    [EMQ_STATE_ACTIVE] = "active",   [EMQ_STATE_DELAYED] = "delayed",
    [EMQ_STATE_DEAD] = "dead",       [EMQ_STATE_COMPLETED] = "completed",
};

const char *emq_state_name(enum emq_state state)
{
    if ((unsigned)state < sizeof(emq_state_names) / sizeof(emq_state_names[0]))
        return emq_state_names[state];
    return "unknown";
}

enum emq_state emq_state_from_name(const char *name)
{
    for (unsigned i = EMQ_STATE_PENDING; name != NULL && i <= EMQ_STATE_COMPLETED; i++)
        if (strcmp(emq_state_names[i], name) == 0)
            return (enum emq_state)i;
    return EMQ_STATE_UNKNOWN;
}

void emq_job_free(struct emq_job *job)
{
    if (job == NULL)
        return;
    free(job->queue);
    free(job->job);
    free(job->group);
    free(job->lease);
    json_decref(job->payload);
    free(job->payload_text);
    free(job);
}

void emq_jobs_free(struct emq_job **jobs, size_t n)
{
    for (size_t i = 0; jobs != NULL && i < n; i++)
        emq_job_free(jobs[i]);
    free(jobs);
}

/* A copy of o[key] when it is a string; NULL otherwise. */
static char *dup_field(const json_t *o, const char *key, bool *bad)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (s == NULL) {
        *bad = true;
        return NULL;
    }
    char *d = strdup(s);
    if (d == NULL)
        *bad = true;
    return d;
}

struct emq_job *emq_job_from_json(struct emq *c, const json_t *o)
{
    struct emq_job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        emq_seterr(c, EMQ_ENOMEM, "out of memory reading a job");
        return NULL;
    }
    bool bad = false;
    const json_t *group = json_object_get(o, "group");
    const json_t *attempt = json_object_get(o, "attempt");
    const json_t *until = json_object_get(o, "lease_until");
    j->queue = dup_field(o, "queue", &bad);
    j->job = dup_field(o, "job", &bad);
    j->lease = dup_field(o, "lease", &bad);
    if (!json_is_null(group))
        j->group = dup_field(o, "group", &bad);
    j->payload = json_incref(json_object_get(o, "payload"));
    if (j->payload != NULL)
        j->payload_text = json_dumps(j->payload, JSON_COMPACT | JSON_ENCODE_ANY);
    if (bad || !json_is_integer(attempt) || !json_is_integer(until) || j->payload == NULL ||
        j->payload_text == NULL) {
        emq_job_free(j);
        emq_seterr(c, EMQ_EBADREPLY, "the server sent a job without its fields");
        return NULL;
    }
    j->attempt = (int)json_integer_value(attempt);
    j->lease_until = json_integer_value(until);
    j->received_ms = emq_now_ms();
    return j;
}

/* Fill an enqueue request (or enqueue_many item) with opts. */
static int put_enqueue_opts(json_t *o, const struct emq_enqueue_opts *opts)
{
    int rc = 0;
    if (opts == NULL)
        return 0;
    if (opts->job != NULL)
        rc |= json_object_set_new(o, "job", json_string(opts->job));
    if (opts->group != NULL)
        rc |= json_object_set_new(o, "group", json_string(opts->group));
    if (opts->delay_ms != 0)
        rc |= json_object_set_new(o, "delay_ms", json_integer(opts->delay_ms));
    if (opts->max_attempts != 0)
        rc |= json_object_set_new(
            o, "max_attempts",
            json_integer(opts->max_attempts == EMQ_ATTEMPTS_UNLIMITED ? 0 : opts->max_attempts));
    return rc;
}

/* Read {"job","verdict"} into out. */
static bool read_verdict(const json_t *o, struct emq_enqueued *out)
{
    const char *job = json_string_value(json_object_get(o, "job"));
    const char *verdict = json_string_value(json_object_get(o, "verdict"));
    if (job == NULL || verdict == NULL || strlen(job) >= EMQ_ID_SIZE)
        return false;
    if (out != NULL) {
        strcpy(out->job, job);
        out->duplicate = strcmp(verdict, "duplicate") == 0;
    }
    return true;
}

int emq_enqueue(struct emq *c, const char *queue, json_t *payload,
                const struct emq_enqueue_opts *opts, struct emq_enqueued *out)
{
    if (payload == NULL)
        return emq_call(c, NULL, NULL, 0);
    json_t *req = json_pack("{s:s, s:s, s:O}", "op", "enqueue", "queue", queue, "payload", payload);
    if (req != NULL && put_enqueue_opts(req, opts) != 0) {
        json_decref(req);
        req = NULL;
    }
    json_t *reply;
    int rc = emq_call(c, req, &reply, 0);
    if (rc == EMQ_OK && !read_verdict(reply, out))
        rc = emq_seterr(c, EMQ_EBADREPLY, "enqueue reply without job and verdict");
    json_decref(reply);
    return rc;
}

/* The jobs array of an enqueue_many request; NULL if an item is bad. */
static json_t *batch_items(const struct emq_item *items, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        json_t *o =
            items[i].payload != NULL ? json_pack("{s:O}", "payload", items[i].payload) : NULL;
        if (o == NULL || put_enqueue_opts(o, &items[i].opts) != 0 ||
            json_array_append_new(arr, o) != 0) {
            json_decref(o);
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr;
}

/* Read the per-item results of an enqueue_many reply. */
static bool read_results(const json_t *reply, size_t n, struct emq_item_result *results)
{
    const json_t *arr = json_object_get(reply, "results");
    if (!json_is_array(arr) || json_array_size(arr) != n)
        return false;
    for (size_t i = 0; i < n; i++) {
        const json_t *r = json_array_get(arr, i);
        const char *code = json_string_value(json_object_get(r, "error"));
        struct emq_item_result *out = results != NULL ? &results[i] : NULL;
        if (code == NULL) {
            if (!read_verdict(r, out ? &out->enqueued : NULL))
                return false;
            if (out != NULL) {
                out->code = EMQ_OK;
                out->message[0] = '\0';
            }
            continue;
        }
        if (out != NULL) {
            const char *msg = json_string_value(json_object_get(r, "message"));
            out->code = emq_code_from_name(code);
            memset(&out->enqueued, 0, sizeof(out->enqueued));
            snprintf(out->message, sizeof(out->message), "%s", msg != NULL ? msg : code);
        }
    }
    return true;
}

int emq_enqueue_many(struct emq *c, const char *queue, const char *group,
                     const struct emq_item *items, size_t n, struct emq_item_result *results)
{
    json_t *jobs = items != NULL || n == 0 ? batch_items(items, n) : NULL;
    json_t *req = jobs != NULL ? json_pack("{s:s, s:s, s:o}", "op", "enqueue_many", "queue", queue,
                                           "jobs", jobs)
                               : NULL;
    if (req != NULL && group != NULL && json_object_set_new(req, "group", json_string(group))) {
        json_decref(req);
        req = NULL;
    }
    json_t *reply;
    int rc = emq_call(c, req, &reply, 0);
    if (rc == EMQ_OK && !read_results(reply, n, results))
        rc = emq_seterr(c, EMQ_EBADREPLY, "enqueue_many reply without one result per item");
    json_decref(reply);
    return rc;
}

int emq_claim(struct emq *c, const char *queue, const struct emq_claim_opts *opts,
              struct emq_job ***jobs, size_t *n)
{
    static const struct emq_claim_opts none;
    const struct emq_claim_opts *o = opts != NULL ? opts : &none;
    json_t *req = json_pack("{s:s, s:s, s:i, s:b}", "op", "claim", "queue", queue, "count",
                            o->count > 0 ? o->count : 1, "flat", o->flat);
    if (req != NULL && o->lease_ms != 0)
        json_object_set_new(req, "lease_ms", json_integer(o->lease_ms));
    if (req != NULL && o->wait_ms != 0)
        json_object_set_new(req, "wait_ms", json_integer(o->wait_ms));
    if (jobs == NULL || n == NULL) {
        json_decref(req);
        req = NULL;
    }
    json_t *reply;
    int rc = emq_call(c, req, &reply, o->wait_ms > 0 ? o->wait_ms : 0);
    const json_t *arr = json_object_get(reply, "jobs");
    if (rc == EMQ_OK && !json_is_array(arr))
        rc = emq_seterr(c, EMQ_EBADREPLY, "claim reply without jobs");
    size_t count = rc == EMQ_OK ? json_array_size(arr) : 0;
    struct emq_job **v = NULL;
    if (count > 0 && (v = calloc(count, sizeof(*v))) == NULL)
        rc = emq_seterr(c, EMQ_ENOMEM, "out of memory reading jobs");
    for (size_t i = 0; rc == EMQ_OK && i < count; i++)
        if ((v[i] = emq_job_from_json(c, json_array_get(arr, i))) == NULL)
            rc = c->code;
    json_decref(reply);
    if (rc != EMQ_OK) {
        emq_jobs_free(v, count);
        return rc;
    }
    *jobs = v;
    *n = count;
    return rc;
}

int emq_stream(struct emq *c, const char *queue, int credit, int lease_ms, bool flat)
{
    json_t *req = json_pack("{s:s, s:s, s:i, s:b}", "op", "stream", "queue", queue, "credit",
                            credit, "flat", flat);
    if (req != NULL && lease_ms != 0)
        json_object_set_new(req, "lease_ms", json_integer(lease_ms));
    return emq_call(c, req, NULL, 0);
}

int emq_next_job(struct emq *c, struct emq_job **job, int timeout_ms)
{
    *job = NULL;
    for (;;) {
        json_t *push;
        int rc = emq_next_push(c, &push, timeout_ms);
        if (rc != EMQ_OK || push == NULL)
            return rc;
        const char *kind = json_string_value(json_object_get(push, "push"));
        if (kind == NULL || strcmp(kind, "job") != 0) {
            json_decref(push); /* a kind this library does not know: skip it */
            continue;
        }
        *job = emq_job_from_json(c, push);
        json_decref(push);
        return *job != NULL ? emq_ok(c) : c->code;
    }
}

int emq_stream_run(struct emq *c, emq_job_cb cb, void *arg)
{
    if (cb == NULL)
        return emq_seterr(c, EMQ_EUSAGE, "emq_stream_run needs a callback");
    for (;;) {
        struct emq_job *job;
        int rc = emq_next_job(c, &job, -1);
        if (rc != EMQ_OK)
            return rc;
        if (job == NULL)
            continue;
        rc = cb(c, job, arg);
        emq_job_free(job);
        if (rc != 0)
            return rc;
    }
}

/* A settle request: op, queue, job, lease of j. */
static json_t *settle_req(const char *op, const struct emq_job *j)
{
    if (j == NULL)
        return NULL;
    return json_pack("{s:s, s:s, s:s, s:s}", "op", op, "queue", j->queue, "job", j->job, "lease",
                     j->lease);
}

/* Call req and read the reply's "state" into *state (may be NULL). */
static int call_state(struct emq *c, json_t *req, enum emq_state *state)
{
    json_t *reply;
    int rc = emq_call(c, req, &reply, 0);
    const char *s = json_string_value(json_object_get(reply, "state"));
    if (rc == EMQ_OK && s == NULL)
        rc = emq_seterr(c, EMQ_EBADREPLY, "reply without state");
    if (rc == EMQ_OK && state != NULL)
        *state = emq_state_from_name(s);
    json_decref(reply);
    return rc;
}

int emq_complete(struct emq *c, const struct emq_job *job)
{
    return call_state(c, settle_req("complete", job), NULL);
}

int emq_fail(struct emq *c, const struct emq_job *job, const struct emq_fail_opts *opts,
             enum emq_state *state)
{
    json_t *req = settle_req("fail", job);
    if (req != NULL && opts != NULL) {
        if (opts->error != NULL)
            json_object_set_new(req, "error", json_string(opts->error));
        if (opts->retry_ms != 0)
            json_object_set_new(
                req, "retry_ms",
                json_integer(opts->retry_ms == EMQ_RETRY_NOW ? 0 : (json_int_t)opts->retry_ms));
        if (opts->dead)
            json_object_set_new(req, "dead", json_true());
    }
    return call_state(c, req, state);
}

int emq_release(struct emq *c, const struct emq_job *job, const char *error, enum emq_state *state)
{
    json_t *req = settle_req("release", job);
    if (req != NULL && error != NULL)
        json_object_set_new(req, "error", json_string(error));
    return call_state(c, req, state);
}

int emq_extend(struct emq *c, struct emq_job *job, int lease_ms)
{
    json_t *req = settle_req("extend", job), *reply;
    if (req != NULL)
        json_object_set_new(req, "lease_ms", json_integer(lease_ms));
    int rc = emq_call(c, req, &reply, 0);
    const json_t *until = json_object_get(reply, "lease_until");
    if (rc == EMQ_OK && !json_is_integer(until))
        rc = emq_seterr(c, EMQ_EBADREPLY, "extend reply without lease_until");
    if (rc == EMQ_OK)
        job->lease_until = json_integer_value(until);
    json_decref(reply);
    return rc;
}
