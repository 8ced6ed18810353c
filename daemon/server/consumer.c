/* consumer: parked claims and streams (consumer.h). The core calls take
 * and filled through the waiter's ops; everything that touches the
 * connection (its lease table, its output, its reply line) is here. */
#include "consumer.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "client.h"
#include "lease.h"
#include "log.h"
#include "queue.h"
#include "req.h"
#include "server.h"

static struct consumer *of(struct waiter *w)
{
    return (struct consumer *)w; /* w is the first member */
}

static size_t room(const struct consumer *k)
{
    if (k->stream)
        return k->credit > k->outstanding ? k->credit - k->outstanding : 0;
    return k->want > k->njobs ? k->want - k->njobs : 0;
}

static void timer_closed_cb(uv_handle_t *h)
{
    free(h->data);
}

static void consumer_free(struct consumer *k)
{
    assert(k->w.q->attached > 0);
    k->w.q->attached--;
    outbuf_deinit(&k->jobs);
    if (k->timer_on) {
        /* The timer's memory is the consumer's: free it once closed. */
        k->timer.data = k;
        uv_close((uv_handle_t *)&k->timer, timer_closed_cb);
        return;
    }
    free(k);
}

static void unlink_client(struct consumer *k)
{
    for (struct consumer **p = &k->c->consumers; *p != NULL; p = &(*p)->cnext) {
        if (*p == k) {
            *p = k->cnext;
            break;
        }
    }
}

/* A parked claim that has jobs (or ran out of time) is answered. */
static void claim_answer(struct consumer *k)
{
    queue_unpark(&k->w);
    unlink_client(k);
    struct outbuf line;
    outbuf_init(&line);
    reply_begin_ok(&line, k->req->ref);
    reply_key(&line, "jobs");
    reply_begin_array(&line);
    if (k->njobs > 0)
        reply_raw(&line, k->jobs.data, k->jobs.len);
    reply_end_array(&line);
    struct req *r = k->req;
    consumer_free(k);
    req_ok_line(r, &line, reply_end(&line));
}

/* Hand one leased job to a consumer. The stored payload text is spliced
 * into the frame as it is (no re-parse on the hot path): a stream pushes
 * it now, a parked claim gathers it for its reply. If the connection
 * cannot remember the lease (out of memory) the job goes straight back. */
static bool take(struct waiter *w, const struct store_job *sj, long long deadline)
{
    struct consumer *k = of(w);
    struct client *c = k->c;
    struct reply_job j;
    if (lease_hold(c, w->q, sj, deadline, w->lease_ms, k->stream ? k : NULL) != 0) {
        struct store_pair back = {sj->id, sj->lease};
        log_event(LOG_WARN, "out of memory: a leased job is given back", "client=%s queue=%s",
                  c->addr, w->q->name);
        queue_release(w->q, 1, &back, "out of memory", STORE_RELEASE_UNDELIVERED);
        return true;
    }
    queue_job_view(w->q, sj, deadline, &j);
    if (!k->stream) {
        if (reply_job(&k->jobs, &j) != 0) {
            log_event(LOG_WARN, "out of memory building a claim reply: disconnecting", "client=%s",
                      c->addr);
            client_close(c, "out of memory");
            return false;
        }
        k->njobs++;
        w->room = room(k);
        return true;
    }
    w->room = room(k);
    /* A push past max-output closes the client, which frees k and gives
     * its leases back, this job's included. */
    client_ref(c);
    client_push_job(c, &j);
    bool gone = c->closing;
    client_unref(c);
    return !gone;
}

static void filled(struct waiter *w)
{
    claim_answer(of(w));
}

static const struct waiter_ops ops = {take, filled};

static struct consumer *consumer_new(struct client *c, struct queue *q, bool flat, bool stream,
                                     uint64_t lease_ms)
{
    struct consumer *k = calloc(1, sizeof(*k));
    if (k == NULL)
        return NULL;
    k->w = (struct waiter){
        .q = q, .ops = &ops, .flat = flat, .oneshot = !stream, .lease_ms = lease_ms};
    k->c = c;
    k->stream = stream;
    q->attached++; /* it points at q until consumer_free */
    outbuf_init(&k->jobs);
    k->cnext = c->consumers;
    c->consumers = k;
    return k;
}

struct consumer *consumer_stream(struct client *c, struct queue *q, bool flat, size_t credit,
                                 uint64_t lease_ms, int *err)
{
    struct consumer *k = c->consumers;
    *err = 0;
    while (k != NULL && !(k->stream && k->w.q == q && k->w.flat == flat))
        k = k->cnext;
    if (k == NULL && (k = consumer_new(c, q, flat, true, lease_ms)) == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    k->credit = credit;
    k->w.lease_ms = lease_ms;
    k->w.room = room(k);
    if (k->w.room > 0)
        return k;
    queue_unpark(&k->w);
    return NULL;
}

static void claim_timeout_cb(uv_timer_t *t)
{
    claim_answer(t->data);
}

int consumer_wait_claim(struct req *r, size_t count, uint64_t lease_ms, bool flat, uint64_t wait_ms)
{
    struct consumer *k = consumer_new(r->c, r->q, flat, false, lease_ms);
    if (k == NULL)
        return -ENOMEM;
    k->req = r;
    k->want = count;
    k->w.room = count;
    uv_timer_init(req_server(r)->loop, &k->timer);
    k->timer.data = k;
    k->timer_on = true;
    uv_timer_start(&k->timer, claim_timeout_cb, wait_ms, 0);
    queue_park(r->q, &k->w);
    return 0;
}

void consumer_credit(struct consumer *k)
{
    k->w.room = room(k);
    /* Credit came back: wait for (or take) more work. */
    if (!k->w.linked && k->w.room > 0 && !k->c->closing)
        queue_park(k->w.q, &k->w);
}

void consumer_stop_all(struct client *c)
{
    /* Answering a claim may close the client (past max-output), which
     * frees every other consumer: after each claim, start again from the
     * list's head rather than from a saved next. Stopped streams stay. */
    struct consumer *k = c->consumers;
    while (k != NULL && !c->closing) {
        if (k->stream) {
            k->credit = 0;
            k->w.room = 0;
            queue_unpark(&k->w);
            k = k->cnext;
        } else {
            claim_answer(k); /* unlinks and frees it */
            k = c->consumers;
        }
    }
}

void consumer_close_all(struct client *c)
{
    /* A parked claim's request would never finish on its own (its
     * consumer is gone): finish it into the void, so it drops its
     * reference on the client. */
    while (c->consumers != NULL) {
        struct consumer *k = c->consumers;
        struct req *parked = k->stream ? NULL : k->req;
        c->consumers = k->cnext;
        queue_unpark(&k->w);
        consumer_free(k);
        if (parked != NULL)
            req_drop(parked);
    }
}
