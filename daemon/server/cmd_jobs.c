/* cmd_jobs: the ops that produce and consume work: enqueue,
 * enqueue_many, claim, stream, and settling a lease (complete, fail,
 * release, extend). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"
#include "cmd.h"
#include "consumer.h"
#include "lease.h"
#include "log.h"
#include "payload.h"
#include "queue.h"
#include "req.h"
#include "server.h"

#define COUNT_MAX  1000
#define CREDIT_MAX 10000

/* Wall-clock ms: job ids carry their mint time. */
static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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

/* The store arguments of one item (its checks passed): the minted id
 * (if any) is written back into the item so the reply can name it. The
 * payload's text is borrowed from the request when request_parse found
 * it compact, else written into *text (owned: outbuf_deinit it once the
 * call is sent). 0, -E2BIG (payload too large) or -ENOMEM. */
static int item_args(struct req *r, json_t *item, const char *dflt_group,
                     struct store_enqueue_args *a, struct outbuf *text)
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
    const json_t *payload = json_object_get(item, "payload");
    outbuf_init(text);
    size_t len;
    const char *data = request_payload_text(payload, &len);
    if (data == NULL) {
        if (payload_text(text, payload) != 0 || outbuf_append(text, "", 1) != 0)
            return -ENOMEM;
        data = text->data;
        len = text->len - 1;
    }
    if (len > s->cfg->max_payload)
        return -E2BIG;
    *a = (struct store_enqueue_args){
        .job = job,
        .group = group,
        .payload = data,
        .payload_len = len,
        .delay_ms = request_int(item, "delay_ms", 0),
        .max_attempts = request_int(item, "max_attempts", s->cfg->max_attempts),
    };
    return 0;
}

/* After an item's call is sent: the store has its own copy of the
 * payload, and nothing after this reads it. The request, which waits for
 * its reply (as long as the backend takes), keeps only the few small
 * fields its reply and its hand-off need; a payload parsed into a tree
 * (not compact: many small values) is many times its text. */
static void item_sent(json_t *item, struct outbuf *text)
{
    outbuf_deinit(text);
    json_object_del(item, "payload");
}

/* One enqueue of one item; cb gets priv. handoff_ms > 0 lets the script
 * lease the job at once (queue_handoff_begin): its own enqueue call, made
 * now. Without one, the item joins the queue's batch of this turn, sent
 * as enqueue_many calls at the end of the turn or before the queue's next
 * call (core/batch.c), so the enqueues of many producers, or many
 * pipelined on one connection, share script calls and keep their order. */
static int enqueue_item(struct req *r, json_t *item, const char *dflt_group, uint64_t handoff_ms,
                        store_enqueue_cb *cb, void *priv)
{
    struct store_enqueue_args a;
    struct outbuf text;
    int rc = item_args(r, item, dflt_group, &a, &text);
    if (rc == 0 && handoff_ms > 0) {
        a.handoff_ms = handoff_ms;
        rc = store_enqueue(queue_store(r->q), &a, cb, priv);
    } else if (rc == 0) {
        rc = queue_enqueue(r->q, &a, cb, priv);
    }
    item_sent(item, &text);
    return rc;
}

/* An admitted job counted, and a delayed one's promotion scheduled; a
 * duplicate changed nothing. item holds the job's arguments. */
static void admitted(struct req *r, const json_t *item, bool enqueued)
{
    if (!enqueued)
        return;
    r->q->count.enqueued++;
    json_int_t delay = request_int(item, "delay_ms", 0);
    if (delay > 0)
        queue_due_in(r->q, (uint64_t)delay);
}

/* "job":…,"verdict":… into an open object, written straight into the line
 * (no jansson object: this is the enqueue hot path). */
static int put_verdict(struct outbuf *line, const json_t *item, bool enqueued)
{
    size_t len;
    const char *job = request_string(item, "job", &len);
    int rc = reply_key(line, "job");
    rc = rc ? rc : reply_string(line, job, len);
    rc = rc ? rc : reply_key(line, "verdict");
    return rc         ? rc
           : enqueued ? reply_string(line, "enqueued", 8)
                      : reply_string(line, "duplicate", 9);
}

/* Whether a single enqueue's job is ungrouped (served by flat consumers).
 * Such a request keeps in r->n the lease it asked to be handed off on
 * (0 = it did not ask). */
static bool enqueue_flat(struct req *r)
{
    return request_string(r->root, "group", NULL) == NULL;
}

/* {"job":…} of an item whose id is known (given, or minted by
 * enqueue_item): every error that follows the checks carries it, so that
 * a producer can retry with the same id and be told "duplicate" if the
 * first try took effect after all (PROTOCOL.md 3). */
static json_t *job_field(const json_t *item)
{
    const char *job = request_string(item, "job", NULL);
    return job != NULL ? json_pack("{s:s}", "job", job) : NULL;
}

/* The message and fields of an enqueue its lane's cap refused (EFULL):
 * the job, to retry with (as job_field), the group and its cap, so that a
 * client can tell a full lane from a full store (PROTOCOL.md 3). */
static json_t *full_fields(const json_t *item, const char *dflt_group,
                           const struct store_enqueued *res, char *msg, size_t size)
{
    const char *group = request_string(item, "group", NULL);
    if (group == NULL)
        group = dflt_group;
    const char *from = res->cap_from == STORE_CAP_GROUP ? "group" : "queue";
    snprintf(msg, size, "group %s holds its cap of %lld pending and delayed jobs (the %s's)", group,
             res->cap, from);
    json_t *f = job_field(item);
    if (f != NULL)
        json_object_update_new(f, json_pack("{s:s, s:I, s:s}", "group", group, "cap",
                                            (json_int_t)res->cap, "cap_from", from));
    return f;
}

/* Why enqueue_item's call was not made (rc < 0): its code and message. */
static enum wire_error refusal(int rc, const char **msg)
{
    if (rc == -E2BIG) {
        *msg = "payload too large";
        return WIRE_ETOOBIG;
    }
    if (rc == -ENOMEM) {
        *msg = "out of memory";
        return WIRE_EINTERNAL;
    }
    *msg = "the backend is unavailable";
    return WIRE_EUNAVAILABLE;
}

static void enqueue_cb(void *priv, const struct store_status *st, const struct store_enqueued *res)
{
    struct req *r = priv;
    /* Answering may free r: keep what the hand-off needs. */
    struct queue *q = r->q;
    uint64_t handoff_ms = r->n;
    bool flat = handoff_ms != 0 && enqueue_flat(r);
    if (st->code != 0) {
        req_error_fields(r, job_field(r->root), st->code, "%s", st->message);
        if (handoff_ms)
            queue_handoff_end(q, flat, handoff_ms, NULL);
        return;
    }
    if (res->cap > 0) {
        char msg[160];
        q->count.refused++;
        req_error_fields(r, full_fields(r->root, "", res, msg, sizeof(msg)), WIRE_EFULL, "%s", msg);
        if (handoff_ms)
            queue_handoff_end(q, flat, handoff_ms, NULL);
        return;
    }
    admitted(r, r->root, res->enqueued);
    struct outbuf line;
    outbuf_init(&line);
    int rc = reply_begin_ok(&line, r->ref);
    rc = rc ? rc : put_verdict(&line, r->root, res->enqueued);
    req_ok_line(r, &line, rc ? rc : reply_end(&line));
    if (handoff_ms)
        queue_handoff_end(q, flat, handoff_ms, res);
}

static void cmd_enqueue(struct req *r)
{
    /* A job due now may go straight to a consumer parked here: one Redis
     * round trip from enqueue to push instead of two (lua/enqueue.lua). */
    bool flat = enqueue_flat(r);
    r->n = request_int(r->root, "delay_ms", 0) == 0 ? queue_handoff_begin(r->q, flat) : 0;
    int rc = enqueue_item(r, r->root, "", r->n, enqueue_cb, r);
    if (rc == 0)
        return;
    if (r->n)
        queue_handoff_end(r->q, flat, r->n, NULL);
    const char *msg;
    enum wire_error code = refusal(rc, &msg);
    req_error_fields(r, job_field(r->root), code, "%s", msg);
}

static const struct arg_spec enqueue_many_spec[] = {
    Q,
    {"jobs", ARG_ARRAY, ARG_REQUIRED, 0, 0}, /* size: EEMPTY / ELIMIT below */
    {"group", ARG_STRING, ARG_GROUP, 0, 0},
    END,
};

/* One call of a batch: up to STORE_ITEMS_PER_CALL items, by their
 * index in "jobs", in input order. */
struct chunk {
    struct req *r;
    size_t n;
    size_t index[STORE_ITEMS_PER_CALL];
};

/* The reply, written straight into the line: an admitted item is held in
 * r->acc as a bare true (enqueued) or false (duplicate) and written as
 * {"job":…,"verdict":…} here, so the common case builds no jansson object
 * per item (a callgrind of enqueue_many showed json_pack and the dump of
 * the results among emqd's largest costs). Failed items are objects. */
static void many_done(struct req *r)
{
    if (--r->outstanding != 0)
        return;
    json_t *jobs = json_object_get(r->root, "jobs");
    struct outbuf line;
    outbuf_init(&line);
    int rc = reply_begin_ok(&line, r->ref);
    rc = rc ? rc : reply_key(&line, "results");
    rc = rc ? rc : reply_begin_array(&line);
    for (size_t i = 0; rc == 0 && i < json_array_size(r->acc); i++) {
        json_t *v = json_array_get(r->acc, i);
        if (!json_is_boolean(v)) {
            rc = reply_value(&line, v);
            continue;
        }
        rc = reply_begin_object(&line);
        rc = rc ? rc : put_verdict(&line, json_array_get(jobs, i), json_is_true(v));
        rc = rc ? rc : reply_end_object(&line);
    }
    rc = rc ? rc : reply_end_array(&line);
    req_ok_line(r, &line, rc ? rc : reply_end(&line));
}

/* An item's error entry; item (NULL: the item failed its checks) gives
 * the job id to carry, as job_field. */
static void item_error(json_t *results, size_t i, const json_t *item, enum wire_error code,
                       const char *msg)
{
    json_t *e = json_pack("{s:s, s:s}", "error", wire_error_name(code), "message", msg);
    const char *job = item != NULL ? request_string(item, "job", NULL) : NULL;
    if (e != NULL && job != NULL)
        json_object_set_new(e, "job", json_string(job));
    json_array_set_new(results, i, e);
}

static void many_cb(void *priv, const struct store_status *st, size_t n,
                    const struct store_item_verdict *each)
{
    struct chunk *ch = priv;
    struct req *r = ch->r;
    json_t *jobs = json_object_get(r->root, "jobs");
    const char *batch_group = request_string(r->root, "group", NULL);
    for (size_t i = 0; i < ch->n; i++) {
        json_t *item = json_array_get(jobs, ch->index[i]);
        const struct store_status *ist = st->code != 0 || i >= n ? st : &each[i].st;
        if (ist->code != 0) {
            item_error(r->acc, ch->index[i], item, ist->code, ist->message);
        } else if (each[i].res.cap > 0) {
            char msg[160];
            r->q->count.refused++;
            json_t *f =
                full_fields(item, batch_group ? batch_group : "", &each[i].res, msg, sizeof(msg));
            item_error(r->acc, ch->index[i], item, WIRE_EFULL, msg);
            json_object_update_new(json_array_get(r->acc, ch->index[i]), f);
        } else {
            admitted(r, item, each[i].res.enqueued);
            json_array_set_new(r->acc, ch->index[i], json_boolean(each[i].res.enqueued));
        }
    }
    free(ch);
    many_done(r);
}

static bool check_enqueue_many(struct req *r)
{
    size_t n = json_array_size(json_object_get(r->root, "jobs"));
    if (n == 0) {
        req_error(r, WIRE_EEMPTY, "\"jobs\" is empty: nothing to enqueue");
        return false;
    }
    if (n > req_server(r)->cfg->max_batch) {
        req_error(r, WIRE_ELIMIT, "%zu jobs is more than the batch limit of %zu", n,
                  req_server(r)->cfg->max_batch);
        return false;
    }
    return true;
}

/* Send ch's items (args[0..ch->n), texts their owned payload texts) as
 * one call, then let their payloads go. On a refused send, every item of
 * the call gets the refusal. */
static void many_send(struct req *r, struct chunk *ch, struct store_enqueue_args *args,
                      struct outbuf *texts)
{
    json_t *jobs = json_object_get(r->root, "jobs");
    r->outstanding++;
    int rc = store_enqueue_many(queue_store(r->q), args, ch->n, many_cb, ch);
    for (size_t i = 0; i < ch->n; i++)
        item_sent(json_array_get(jobs, ch->index[i]), &texts[i]);
    if (rc == 0)
        return;
    r->outstanding--;
    const char *msg;
    enum wire_error code = refusal(rc, &msg);
    for (size_t i = 0; i < ch->n; i++)
        item_error(r->acc, ch->index[i], json_array_get(jobs, ch->index[i]), code, msg);
    free(ch);
}

static void cmd_enqueue_many(struct req *r)
{
    json_t *jobs = json_object_get(r->root, "jobs");
    size_t n = json_array_size(jobs);
    const char *group = request_string(r->root, "group", NULL);
    r->acc = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(r->acc, json_null());
    /* Every item is checked first, and the valid ones go in calls of at
     * most STORE_ITEMS_PER_CALL items (fewer once their payloads reach
     * STORE_BYTES_PER_CALL), all sent in this loop turn and in
     * order on the queue's route: an item is admitted after every item
     * before it, as if each had its own call (lua/enqueue_many.lua). */
    struct store_enqueue_args args[STORE_ITEMS_PER_CALL];
    struct outbuf texts[STORE_ITEMS_PER_CALL];
    struct chunk *ch = NULL;
    size_t bytes = 0;   /* the payloads in ch */
    r->outstanding = 1; /* held until every call is sent */
    for (size_t i = 0; i < n; i++) {
        json_t *item = json_array_get(jobs, i);
        struct request_error err;
        if (request_check_item(item_spec, item, &err) != 0) {
            item_error(r->acc, i, NULL, err.code, err.message);
            continue;
        }
        if (ch == NULL) {
            if ((ch = malloc(sizeof(*ch))) == NULL) {
                item_error(r->acc, i, NULL, WIRE_EINTERNAL, "out of memory");
                continue;
            }
            *ch = (struct chunk){.r = r};
        }
        int rc = item_args(r, item, group ? group : "", &args[ch->n], &texts[ch->n]);
        if (rc != 0) {
            item_sent(item, &texts[ch->n]);
            const char *msg;
            enum wire_error code = refusal(rc, &msg);
            item_error(r->acc, i, item, code, msg);
            continue;
        }
        ch->index[ch->n++] = i;
        bytes += args[ch->n - 1].payload_len;
        if (ch->n == STORE_ITEMS_PER_CALL || bytes >= STORE_BYTES_PER_CALL) {
            bytes = 0;
            many_send(r, ch, args, texts);
            ch = NULL;
        }
    }
    if (ch != NULL && ch->n > 0)
        many_send(r, ch, args, texts);
    else
        free(ch); /* NULL, or every item after the last call failed its checks */
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

static void claim_cb(void *priv, const struct store_status *st, const struct store_leased *res)
{
    struct req *r = priv;
    if (st->code != 0) {
        req_store_error(r, st);
        return;
    }
    struct client *c = r->c;
    if (c->closing) {
        /* The worker left while we claimed: give the jobs straight back,
         * with their attempt (nobody saw them). */
        struct queue_pairs pairs = {0};
        for (size_t i = 0; i < res->n; i++)
            if (queue_pairs_add(&pairs, res->jobs[i].id, res->jobs[i].lease) != 0)
                break; /* the rest come back when their lease expires */
        queue_release(r->q, pairs.n, pairs.v, "connection closed", STORE_RELEASE_UNDELIVERED);
        free(pairs.v);
        req_ok(r, NULL);
        return;
    }
    uint64_t wait = (uint64_t)request_int(r->root, "wait_ms", 0);
    uint64_t lease = (uint64_t)request_int(r->root, "lease_ms", (json_int_t)c->srv->cfg->lease_ms);
    /* No parking while emqd stops, nor for a client whose input has ended
     * (quit, or a half-close): it is answered now, and closed once its
     * replies are out, instead of holding the connection for wait_ms. */
    if (res->n == 0 && wait > 0 && !c->srv->stopping && !c->quit) {
        size_t count = (size_t)request_int(r->root, "count", 1);
        if (consumer_wait_claim(r, count, lease, request_bool(r->root, "flat", false), wait) != 0)
            req_error(r, WIRE_EINTERNAL, "out of memory");
        return;
    }
    /* The stored payloads are spliced into the reply as they are. */
    struct outbuf line;
    outbuf_init(&line);
    reply_begin_ok(&line, r->ref);
    reply_key(&line, "jobs");
    reply_begin_array(&line);
    struct queue_pairs back = {0};
    for (size_t i = 0; i < res->n; i++) {
        const struct store_job *sj = &res->jobs[i];
        struct reply_job j;
        if (!queue_job_sendable(sj)) {
            queue_bury_unsendable(r->q, sj);
            continue;
        }
        /* A lease the connection cannot remember (out of memory) would
         * not be given back when it closes: give it back now instead. */
        if (lease_hold(c, r->q, sj, res->deadline, lease, NULL) != 0) {
            queue_pairs_add(&back, sj->id, sj->lease);
            continue;
        }
        queue_job_view(r->q, sj, res->deadline, &j);
        reply_job(&line, &j);
        queue_leased(r->q, sj->wait_ms);
    }
    if (back.n > 0)
        log_event(LOG_WARN, "out of memory: leased jobs are given back", "client=%s jobs=%zu",
                  c->addr, back.n);
    queue_release(r->q, back.n, back.v, "out of memory", STORE_RELEASE_UNDELIVERED);
    free(back.v);
    reply_end_array(&line);
    if (res->n > 0) /* reap on time if the worker lets these run out */
        queue_due_in(r->q, lease);
    req_ok_line(r, &line, reply_end(&line));
}

static void cmd_claim(struct req *r)
{
    size_t count = (size_t)request_int(r->root, "count", 1);
    uint64_t lease =
        (uint64_t)request_int(r->root, "lease_ms", (json_int_t)req_server(r)->cfg->lease_ms);
    bool flat = request_bool(r->root, "flat", false);
    if (store_claim(queue_store(r->q), flat, count, lease, req_server(r)->cfg->max_claim_bytes,
                    claim_cb, r) != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
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
    int err;
    struct consumer *k = consumer_stream(
        r->c, r->q, request_bool(r->root, "flat", false), (size_t)request_int(r->root, "credit", 0),
        (uint64_t)request_int(r->root, "lease_ms", (json_int_t)req_server(r)->cfg->lease_ms), &err);
    if (err != 0) {
        req_error(r, WIRE_EINTERNAL, "out of memory");
        return;
    }
    /* The stream parks once its reply is out (req_drain), so pushes
     * always follow the ack; credit 0 (or none left) just stops it. */
    r->park = k;
    req_ok(r, NULL);
}

/* --- settling a lease --------------------------------------------------- */

static const struct arg_spec settle_spec[] = {Q, JOB, LEASE, END};

static void completed(void *priv, const struct store_status *st, enum store_outcome o)
{
    struct req *r = priv;
    if (st->code != 0) {
        req_store_error(r, st);
        return;
    }
    size_t jlen;
    const char *job = request_string(r->root, "job", &jlen);
    /* Completed, stale or gone: either way the lease is not ours. */
    if (!r->c->closing)
        lease_unhold(r->c, r->q, job, jlen, cmd_str(r, "lease"), o == STORE_COMPLETED);
    if (o == STORE_COMPLETED)
        req_ok_string(r, "state", "completed");
    else if (o == STORE_ELEASE)
        req_error(r, WIRE_ELEASE, "the lease is not current (expired and re-leased?)");
    else
        req_error(r, WIRE_ENOJOB, "no such job");
}

static void cmd_complete(struct req *r)
{
    /* Settlements of one loop turn go out together (engine_flush); the
     * strings live in the request, which lives until completed runs. */
    struct queue_settlement c = {
        .job = cmd_str(r, "job"), .lease = cmd_str(r, "lease"), .done = completed, .priv = r};
    if (queue_settle(r->q, &c) != 0)
        req_error(r, WIRE_EINTERNAL, "out of memory");
}

/* The lease is not ours any more (settled, stale, or the job is gone):
 * forget it, which returns a stream's credit. An error such as EARG, or
 * a backend that did not answer, leaves it held. settled: the holder
 * failed it (timed into the run histogram). */
static void forget(struct req *r, enum wire_error code, bool settled)
{
    if (r->c->closing || (code != 0 && code != WIRE_ELEASE && code != WIRE_ENOJOB))
        return;
    size_t jlen;
    const char *job = request_string(r->root, "job", &jlen);
    lease_unhold(r->c, r->q, job, jlen, cmd_str(r, "lease"), settled);
}

/* Answer a fail (failing) or a release from where it left the job. fail
 * refuses a stale lease with the script's error, release with an outcome;
 * either way the lease is forgotten. */
static void settled(struct req *r, const struct store_status *st, enum store_outcome o,
                    bool failing)
{
    if (st->code != 0) {
        forget(r, st->code, false);
        req_store_error(r, st);
        return;
    }
    if (o == STORE_ELEASE || o == STORE_ENOJOB) {
        forget(r, o == STORE_ELEASE ? WIRE_ELEASE : WIRE_ENOJOB, false);
        if (o == STORE_ELEASE)
            req_error(r, WIRE_ELEASE, "the lease is not current (expired and re-leased?)");
        else
            req_error(r, WIRE_ENOJOB, "no such job");
        return;
    }
    forget(r, 0, failing);
    if (failing) {
        r->q->count.failed++;
        r->q->count.dead += o == STORE_DEAD;
    }
    if (o == STORE_DELAYED) {
        json_int_t retry = request_int(r->root, "retry_ms", -1);
        /* The default backoff is at least 1 s: the regular pass. */
        if (retry > 0)
            queue_due_in(r->q, (uint64_t)retry);
    }
    req_ok_string(r, "state", store_outcome_state(o));
}

/* A fail waiting in the turn's batch: how it failed (its strings are the
 * request's), and the request. */
struct failing {
    struct store_fail_args a;
    struct req *r;
};

static void fail_cb(void *priv, const struct store_status *st, enum store_outcome o)
{
    struct failing *f = priv;
    struct req *r = f->r;
    free(f);
    settled(r, st, o, true);
}

static void release_cb(void *priv, const struct store_status *st, size_t n,
                       const enum store_outcome *each)
{
    (void)n; /* one pair sent, one outcome back */
    settled(priv, st, st->code == 0 ? each[0] : STORE_ENOJOB, false);
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
    /* Fails join the turn's completions (queue_settle): one call settles
     * both, in the order they were read. */
    struct failing *f = malloc(sizeof(*f));
    if (f == NULL) {
        req_error(r, WIRE_EINTERNAL, "out of memory");
        return;
    }
    f->r = r;
    f->a = (struct store_fail_args){
        .error = cmd_str(r, "error"),
        .retry_ms = request_int(r->root, "retry_ms", -1),
        .dead = request_bool(r->root, "dead", false),
    };
    struct queue_settlement c = {.job = cmd_str(r, "job"),
                                 .lease = cmd_str(r, "lease"),
                                 .fail = &f->a,
                                 .done = fail_cb,
                                 .priv = f};
    if (queue_settle(r->q, &c) != 0) {
        free(f);
        req_error(r, WIRE_EINTERNAL, "out of memory");
    }
}

static const struct arg_spec release_spec[] = {
    Q, JOB, LEASE, {"error", ARG_STRING, 0, 0, 4096}, END};

static void cmd_release(struct req *r)
{
    const char *why = request_string(r->root, "error", NULL);
    struct store_pair pair = {cmd_str(r, "job"), cmd_str(r, "lease")};
    if (store_release(queue_store(r->q), why ? why : "released by the worker",
                      STORE_RELEASE_RETURNED, 1, &pair, release_cb, r) != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
}

static const struct arg_spec extend_spec[] = {
    Q, JOB, LEASE, {"lease_ms", ARG_INT, ARG_REQUIRED, 1, DAY_MS}, END,
};

static void extend_cb(void *priv, const struct store_status *st, long long lease_until)
{
    struct req *r = priv;
    if (st->code != 0) {
        forget(r, st->code, false);
        req_store_error(r, st);
        return;
    }
    size_t jlen;
    const char *job = request_string(r->root, "job", &jlen);
    lease_extend(r->c, r->q, job, jlen, cmd_str(r, "lease"),
                 (uint64_t)request_int(r->root, "lease_ms", 1), lease_until);
    req_ok(r, json_pack("{s:I}", "lease_until", (json_int_t)lease_until));
}

static void cmd_extend(struct req *r)
{
    if (store_extend(queue_store(r->q), cmd_str(r, "job"), cmd_str(r, "lease"),
                     (uint64_t)request_int(r->root, "lease_ms", 1), extend_cb, r) != 0)
        req_error(r, WIRE_EUNAVAILABLE, "the backend is unavailable");
}

/* Producing and consuming work. */
const struct cmd cmd_jobs[] = {
    {"enqueue", enqueue_spec, cmd_enqueue, CMD_QUEUE | CMD_PRODUCER},
    {"enqueue_many", enqueue_many_spec, cmd_enqueue_many, CMD_QUEUE | CMD_PRODUCER,
     check_enqueue_many},
    {"claim", claim_spec, cmd_claim, CMD_QUEUE | CMD_WORK | CMD_WORKER},
    {"stream", stream_spec, cmd_stream, CMD_QUEUE | CMD_WORK | CMD_WORKER},
    {"complete", settle_spec, cmd_complete, CMD_QUEUE | CMD_WORKER},
    {"fail", fail_spec, cmd_fail, CMD_QUEUE | CMD_WORKER},
    {"release", release_spec, cmd_release, CMD_QUEUE | CMD_WORKER},
    {"extend", extend_spec, cmd_extend, CMD_QUEUE | CMD_WORKER},
    {NULL, NULL, NULL, 0},
};
