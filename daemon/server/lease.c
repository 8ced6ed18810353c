/* lease: the jobs leased to one connection (lease.h). */
#include "lease.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "consumer.h"
#include "hist.h"
#include "log.h"
#include "queue.h"
#include "server.h"

/* "queue job" into key (cap bytes: sized for the longest of each, so
 * nothing is cut; were it not, the key is cut, never overrun). Three per
 * job (hold, then settle): a copy, not snprintf. */
static size_t held_key(struct queue *q, const char *job, size_t jlen, char *key, size_t cap)
{
    size_t qlen = strlen(q->name);
    if (qlen > cap - 2)
        qlen = cap - 2;
    if (jlen > cap - 2 - qlen)
        jlen = cap - 2 - qlen;
    memcpy(key, q->name, qlen);
    key[qlen] = ' ';
    memcpy(key + qlen + 1, job, jlen);
    key[qlen + 1 + jlen] = '\0';
    return qlen + 1 + jlen;
}

/* Free a lease entry taken out of its table. */
static void lease_free(struct lease *l)
{
    assert(l->q->attached > 0 && l->q->leases > 0);
    l->q->attached--;
    l->q->leases--;
    free(l);
}

/* The stream s (or none) stops counting a job it was pushed. */
static void stream_forget(struct consumer *s)
{
    if (s != NULL) {
        s->outstanding--;
        consumer_credit(s);
    }
}

int lease_hold(struct client *c, struct queue *q, const struct store_job *sj, long long until,
               uint64_t lease_ms, struct consumer *stream)
{
    char key[sizeof(((struct lease *)0)->key)];
    size_t klen = held_key(q, sj->id, sj->id_len, key, sizeof(key));
    struct lease *l = map_get(&c->held, key, klen);
    struct consumer *was = NULL;
    if (l != NULL) {
        /* The job comes back to us on a new lease (the old one expired,
         * Redis reaped it and leased it here again before the sweep
         * forgot it): the entry now stands for the new lease alone, and
         * the stream the old one was pushed on stops counting it. */
        was = l->stream;
    } else {
        if ((l = calloc(1, sizeof(*l))) == NULL)
            return -ENOMEM;
        l->q = q;
        memcpy(l->key, key, klen + 1);
        l->klen = klen;
        if (map_put(&c->held, l->key, l->klen, l) != 0) {
            free(l);
            return -ENOMEM;
        }
        q->attached++; /* it points at q until lease_free */
        q->leases++;
    }
    l->stream = stream;
    size_t tlen = sj->lease_len < sizeof(l->lease) ? sj->lease_len : sizeof(l->lease) - 1;
    memcpy(l->lease, sj->lease, tlen);
    l->lease[tlen] = '\0';
    /* A plain copy (this is the claim path): group_len fits, a valid id. */
    size_t glen = sj->group_len < sizeof(l->group) ? sj->group_len : sizeof(l->group) - 1;
    memcpy(l->group, sj->group ? sj->group : "", sj->group ? glen : 0);
    l->group[sj->group ? glen : 0] = '\0';
    l->until = until;
    l->expires = uv_now(c->srv->loop) + lease_ms;
    l->since_ns = uv_hrtime();
    if (stream != NULL)
        stream->outstanding++;
    stream_forget(was);
    return 0;
}

/* The entry for job of q when it stands for lease token (NULL: any). */
static struct lease *held(struct client *c, struct queue *q, const char *job, size_t jlen,
                          const char *token, char *key, size_t *klen)
{
    *klen = held_key(q, job, jlen, key, sizeof(((struct lease *)0)->key));
    struct lease *l = map_get(&c->held, key, *klen);
    return l != NULL && (token == NULL || strcmp(l->lease, token) == 0) ? l : NULL;
}

void lease_extend(struct client *c, struct queue *q, const char *job, size_t jlen,
                  const char *token, uint64_t lease_ms, long long until)
{
    char key[sizeof(((struct lease *)0)->key)];
    size_t klen;
    struct lease *l = held(c, q, job, jlen, token, key, &klen);
    if (l != NULL) {
        l->expires = uv_now(c->srv->loop) + lease_ms;
        l->until = until;
    }
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
            lease_unhold(c, gone[i]->q, job, strlen(job), NULL, false);
        }
    } while (n == 64);
}

void lease_unhold(struct client *c, struct queue *q, const char *job, size_t jlen,
                  const char *token, bool settled)
{
    char key[sizeof(((struct lease *)0)->key)];
    size_t klen;
    /* A settle presenting an older token (a late complete after the job
     * was reaped and leased to us again) says nothing of the current
     * lease: it stays held, to be released if the connection closes. */
    struct lease *l = held(c, q, job, jlen, token, key, &klen);
    if (l == NULL)
        return;
    map_del(&c->held, key, klen);
    if (settled)
        hist_record(&q->latency.run, (uv_hrtime() - l->since_ns) / 1000);
    struct consumer *k = l->stream;
    lease_free(l);
    stream_forget(k);
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
        queue_release(qs[i].q, qs[i].pairs.n, qs[i].pairs.v, "connection closed",
                      STORE_RELEASE_COUNTED);
        free(qs[i].pairs.v);
    }
    free(qs);
    for (struct map_entry *e = map_first(&c->held, &b); e; e = map_next(&c->held, &b, e))
        lease_free(e->value);
    map_deinit(&c->held);
}
