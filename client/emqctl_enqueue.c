/* emqctl_enqueue.c: `emqctl enqueue`: one job from the command line, or
 * many from stdin (one JSON text per line) sent as enqueue_many batches,
 * with a verdict per item and a summary. A line that is not JSON is
 * reported and skipped, never sent; any failed item makes the exit 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "emqctl.h"

/* A request line must fit the daemon's max_line (default 1 MiB): a batch
 * is also sent once its items' text reaches this, whatever --batch says. */
#define ENQ_MAX_BYTES (512 * 1024)

/* A batch being filled from stdin, and the running tally. */
struct enq {
    struct ctl *ctl;
    json_t *jobs; /* the items of the batch being filled */
    long *lines;  /* the stdin line number of each item */
    size_t cap;   /* --batch */
    size_t bytes; /* the JSON text of the batch so far, roughly */
    long enqueued, duplicate, failed;
    bool broken; /* the connection failed: stop reading */
};

/* The item for one stdin value (consumed): an object with "payload" is an
 * item as it stands; anything else is a bare payload. The command line's
 * --delay-ms / --max-attempts fill in what an item does not say. */
static json_t *enq_item(const struct ctl *ctl, json_t *v)
{
    json_t *item = v;
    if (!json_is_object(v) || json_object_get(v, "payload") == NULL) {
        item = json_object();
        json_object_set_new(item, "payload", v);
    }
    if (ctl->opt[CTL_O_DELAY] != NULL && json_object_get(item, "delay_ms") == NULL)
        json_object_set_new(item, "delay_ms", json_integer(ctl->num[CTL_O_DELAY]));
    if (ctl->opt[CTL_O_ATTEMPTS] != NULL && json_object_get(item, "max_attempts") == NULL)
        json_object_set_new(item, "max_attempts", json_integer(ctl->num[CTL_O_ATTEMPTS]));
    return item;
}

/* Tally and print one verdict or item error of a batch reply. */
static void enq_result(struct enq *e, long line, const json_t *res)
{
    const char *err = json_string_value(json_object_get(res, "error"));
    if (err != NULL) {
        e->failed++;
        const char *msg = json_string_value(json_object_get(res, "message"));
        ctl_error(err, "line %ld: %s", line, msg ? msg : "");
        return;
    }
    const char *job = json_string_value(json_object_get(res, "job"));
    const char *verdict = json_string_value(json_object_get(res, "verdict"));
    verdict = verdict != NULL ? verdict : "?";
    if (strcmp(verdict, "duplicate") == 0)
        e->duplicate++;
    else
        e->enqueued++;
    if (!e->ctl->json)
        printf("%s %s\n", job ? job : "?", verdict);
}

/* Send the batch being filled, if any, and start a new one. */
static void enq_flush(struct enq *e)
{
    size_t n = json_array_size(e->jobs);
    if (n == 0)
        return;
    struct ctl *ctl = e->ctl;
    json_t *req = ctl_req("enqueue_many", ctl->pos[0]), *reply;
    json_object_set(req, "jobs", e->jobs);
    if (ctl->opt[CTL_O_GROUP] != NULL)
        json_object_set_new(req, "group", json_string(ctl->opt[CTL_O_GROUP]));
    int rc = ctl_call(ctl, req, &reply);
    json_decref(req);
    if (rc != 0) {
        /* The whole batch was refused, or the connection broke (then the
         * outcome is unknown and there is no point in reading on). */
        e->failed += (long)n;
        fprintf(stderr, "emqctl: lines %ld..%ld were not enqueued\n", e->lines[0], e->lines[n - 1]);
        e->broken = ctl->conn == NULL || emq_errcode(ctl->conn) >= EMQ_ECLIENT;
    } else {
        const json_t *results = json_object_get(reply, "results");
        for (size_t i = 0; i < n; i++)
            enq_result(e, e->lines[i], json_array_get(results, i));
    }
    json_decref(reply);
    json_array_clear(e->jobs);
    e->bytes = 0;
    fflush(stdout);
}

/* One stdin line: parse, add to the batch, send the batch when full. */
static void enq_line(struct enq *e, char *text, long lineno)
{
    size_t len = strlen(text);
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
        text[--len] = '\0';
    if (len == 0)
        return;
    json_error_t jerr;
    json_t *v = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (v == NULL) {
        e->failed++;
        ctl_error("EARG", "line %ld: not JSON (%s); not sent", lineno, jerr.text);
        return;
    }
    if (e->bytes + len > ENQ_MAX_BYTES)
        enq_flush(e);
    if (e->broken) {
        e->failed++; /* read but never sent */
        json_decref(v);
        return;
    }
    e->bytes += len + 16;
    e->lines[json_array_size(e->jobs)] = lineno;
    json_array_append_new(e->jobs, enq_item(e->ctl, v));
    if (json_array_size(e->jobs) == e->cap)
        enq_flush(e);
}

static int enq_stdin(struct ctl *ctl)
{
    struct enq e = {.ctl = ctl};
    e.cap = ctl->opt[CTL_O_BATCH] != NULL ? (size_t)ctl->num[CTL_O_BATCH] : 1000;
    e.jobs = json_array();
    e.lines = calloc(e.cap, sizeof(*e.lines));
    if (e.jobs == NULL || e.lines == NULL) {
        json_decref(e.jobs);
        free(e.lines);
        ctl_error("ENOMEM", "out of memory");
        return CTL_EXIT_FAIL;
    }
    char *text = NULL;
    size_t size = 0;
    long lineno = 0;
    while (!e.broken && getline(&text, &size, stdin) >= 0)
        enq_line(&e, text, ++lineno);
    if (!e.broken)
        enq_flush(&e);
    free(text);
    free(e.lines);
    json_decref(e.jobs);
    if (!ctl->json)
        printf("%ld enqueued, %ld duplicate, %ld failed\n", e.enqueued, e.duplicate, e.failed);
    if (e.broken)
        ctl_error("EIO", "stopped after line %ld: the connection failed", lineno);
    return e.failed > 0 || e.broken ? CTL_EXIT_FAIL : CTL_EXIT_OK;
}

static int enq_one(struct ctl *ctl, const char *text)
{
    json_error_t jerr;
    json_t *payload = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (payload == NULL)
        return ctl_usage_error(ctl, "PAYLOAD is not JSON: %s", jerr.text);
    json_t *req = ctl_req("enqueue", ctl->pos[0]), *reply;
    json_object_set_new(req, "payload", payload);
    if (ctl->opt[CTL_O_JOB] != NULL)
        json_object_set_new(req, "job", json_string(ctl->opt[CTL_O_JOB]));
    if (ctl->opt[CTL_O_GROUP] != NULL)
        json_object_set_new(req, "group", json_string(ctl->opt[CTL_O_GROUP]));
    if (ctl->opt[CTL_O_DELAY] != NULL)
        json_object_set_new(req, "delay_ms", json_integer(ctl->num[CTL_O_DELAY]));
    if (ctl->opt[CTL_O_ATTEMPTS] != NULL)
        json_object_set_new(req, "max_attempts", json_integer(ctl->num[CTL_O_ATTEMPTS]));
    int rc = ctl_call(ctl, req, &reply);
    json_decref(req);
    if (rc == 0 && !ctl->json)
        printf("%s %s\n", json_string_value(json_object_get(reply, "job")),
               json_string_value(json_object_get(reply, "verdict")));
    json_decref(reply);
    return rc;
}

static int enq_run(struct ctl *ctl)
{
    bool from_stdin = ctl->npos < 2 ? !isatty(STDIN_FILENO) : strcmp(ctl->pos[1], "-") == 0;
    if (ctl->npos < 2 && !from_stdin)
        return ctl_usage_error(ctl, "no PAYLOAD, and stdin is a terminal");
    if (from_stdin && ctl->opt[CTL_O_JOB] != NULL)
        return ctl_usage_error(ctl, "--job names one job: give ids per line on stdin instead");
    if (!from_stdin && ctl->opt[CTL_O_BATCH] != NULL)
        return ctl_usage_error(ctl, "--batch applies to stdin only");
    return from_stdin ? enq_stdin(ctl) : enq_one(ctl, ctl->pos[1]);
}

const struct ctl_cmd ctl_enqueue_cmd = {
    "enqueue",
    "QUEUE [options] [PAYLOAD|-]",
    "admit a job (PAYLOAD is JSON text), or many from stdin",
    "With PAYLOAD - (or none, when stdin is not a terminal), reads stdin: one JSON\n"
    "text per line, either a bare payload or an item object with \"payload\" and any\n"
    "of \"job\", \"group\", \"delay_ms\", \"max_attempts\". Lines go to the server as\n"
    "enqueue_many batches of --batch items (fewer when their text passes 512 KiB);\n"
    "each item's verdict is printed, each\n"
    "failure (and each line that is not JSON) is reported on stderr, then a summary.\n"
    "Any failed item makes the exit status 1. Under --json, prints each batch's\n"
    "reply as one line and no summary.\n",
    1,
    2,
    CTL_F(CTL_O_GROUP) | CTL_F(CTL_O_JOB) | CTL_F(CTL_O_DELAY) | CTL_F(CTL_O_ATTEMPTS) |
        CTL_F(CTL_O_BATCH),
    false,
    enq_run,
};
