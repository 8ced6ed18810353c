/* lease: the jobs leased to one connection (lease.h). */
#include "lease.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "consumer.h"
#include "hist.h"
#include "log.h"
#include "queue.h"
#include "server.h"

int lease_hold(struct client *c, struct queue *q, const char *job, size_t jlen, const char *lease,
               uint64_t lease_ms, struct consumer *stream)
{
    struct lease *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return -ENOMEM;
    l->q = q;
    l->stream = stream;
    snprintf(l->lease, sizeof(l->lease), "%s", lease);
    l->klen = (size_t)snprintf(l->key, sizeof(l->key), "%s %.*s", q->name, (int)jlen, job);
    l->expires = uv_now(c->srv->loop) + lease_ms;
    l->since_ns = uv_hrtime();
    if (map_put(&c->held, l->key, l->klen, l) != 0) {
        free(l);
        return -ENOMEM;
    }
    if (stream != NULL)
        stream->outstanding++;
    return 0;
}

static size_t held_key(struct queue *q, const char *job, size_t jlen, char *key, size_t cap)
{
    return (size_t)snprintf(key, cap, "%s %.*s", q->name, (int)jlen, job);
}

void lease_extend(struct client *c, struct queue *q, const char *job, size_t jlen,
                  uint64_t lease_ms)
{
    char key[sizeof(((struct lease *)0)->key)];
    struct lease *l = map_get(&c->held, key, held_key(q, job, jlen, key, sizeof(key)));
    if (l != NULL)
        l->expires = uv_now(c->srv->loop) + lease_ms;
}

/* Leases whose time ran out are not ours any more (the reaper gives the
 * jobs to someone else): forget them, so a stream whose worker let a job
 * expire gets its credit back instead of stalling, and the table of a
 * worker that never settles stays bounded. The local clock runs from the
 * moment of delivery, later than the claim, so this never forgets a lease
 * Redis still honours. */
void lease_sweep(struct client *c, uint64_t now)
{
    struct lease *gone[64];
    size_t n;

    /* In rounds of 64 (the map cannot change while it is walked). */
    do {
        size_t b;
        n = 0;
        for (struct map_entry *e = map_first(&c->held, &b); e != NULL && n < 64;
             e = map_next(&c->held, &b, e)) {
            struct lease *l = e->value;
            if (l->expires <= now)
                gone[n++] = l;
        }
        for (size_t i = 0; i < n; i++) {
            const char *job = strchr(gone[i]->key, ' ') + 1;
            lease_unhold(c, gone[i]->q, job, strlen(job), false);
        }
    } while (n == 64);
}

void lease_unhold(struct client *c, struct queue *q, const char *job, size_t jlen, bool settled)
{
    char key[sizeof(((struct lease *)0)->key)];
    struct lease *l = map_del(&c->held, key, held_key(q, job, jlen, key, sizeof(key)));
    if (l == NULL)
        return;
    if (settled)
        hist_record(&q->latency.run, (uv_hrtime() - l->since_ns) / 1000);
    struct consumer *k = l->stream;
    free(l);
    if (k != NULL) {
        k->outstanding--;
        consumer_credit(k);
    }
}

/* Give back every job leased to the client: one release call per queue
 * (a connection holds the jobs of a few queues, so the queues are found
 * by a walk of the ones seen so far). */
void lease_release_all(struct client *c)
{
    struct byq {
        struct queue *q;
        struct queue_pairs pairs;
    } *qs = NULL;
    size_t nq = 0, b;
    bool oom = false;

    for (struct map_entry *e = map_first(&c->held, &b); e; e = map_next(&c->held, &b, e)) {
        struct lease *l = e->value;
        size_t i = 0;
        while (i < nq && qs[i].q != l->q)
            i++;
        if (i == nq) {
            struct byq *more = realloc(qs, (nq + 1) * sizeof(*qs));
            if (more == NULL) {
                oom = true;
                continue;
            }
            qs = more;
            qs[nq++] = (struct byq){.q = l->q};
        }
        /* The strings stay in the lease table until the calls are made. */
        if (queue_pairs_add(&qs[i].pairs, strchr(l->key, ' ') + 1, l->lease) != 0)
            oom = true;
    }
    if (oom)
        log_event(LOG_WARN,
                  "out of memory: some leases of a closed connection stay until they expire",
                  "client=%s", c->addr);
    for (size_t i = 0; i < nq; i++) {
        log_event(LOG_INFO, "connection closed holding jobs: released",
                  "client=%s queue=%s jobs=%zu", c->addr, qs[i].q->name, qs[i].pairs.n);
        queue_release(qs[i].q, qs[i].pairs.n, qs[i].pairs.v, "connection closed", true);
        free(qs[i].pairs.v);
    }
    free(qs);
    for (struct map_entry *e = map_first(&c->held, &b); e; e = map_next(&c->held, &b, e))
        free(e->value);
    map_deinit(&c->held);
}
