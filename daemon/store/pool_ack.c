/* pool_ack: replica-acks (see pool_internal.h and docs/ARCHITECTURE.md,
 * "replica-acks"). A script call is followed on its connection by WAIT N
 * (half the request timeout), written in the same turn, so replies come
 * call, WAIT, call, WAIT and a route's callbacks still run in order. The
 * call's reply is kept (hiredis frees a reply when its callback returns)
 * until its WAIT answers: enough replicas and it is delivered, fewer or
 * the WAIT lost and the call fails POOL_EUNAVAILABLE. */
#include "pool_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pool_ack_detach(struct pool_req *r)
{
    if (r->ack_req != NULL) {
        r->ack_req->priv = NULL;
        r->ack_req = NULL;
    }
}

/* A deep copy of reply, freed with freeReplyObject (hiredis frees a reply
 * when its callback returns; a call waiting for WAIT keeps its own). */
static redisReply *reply_dup(const redisReply *reply)
{
    redisReply *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return NULL;
    d->type = reply->type;
    d->integer = reply->integer;
    if (reply->str != NULL) {
        d->str = malloc(reply->len + 1);
        if (d->str == NULL)
            goto err_free;
        memcpy(d->str, reply->str, reply->len + 1);
        d->len = reply->len;
    }
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements > 0) {
        d->element = calloc(reply->elements, sizeof(*d->element));
        if (d->element == NULL)
            goto err_free;
        d->elements = reply->elements;
        for (size_t i = 0; i < reply->elements; i++)
            if ((d->element[i] = reply_dup(reply->element[i])) == NULL)
                goto err_free;
    }
    return d;

err_free:
    freeReplyObject(d);
    return NULL;
}

/* The WAIT after a script call answered: the call's kept reply goes to
 * its caller if enough replicas have it, else POOL_EUNAVAILABLE (it ran
 * on the master; a failover may lose it). */
static void ack_cb(void *priv, int status, redisReply *reply)
{
    struct pool_req *r = priv;
    if (r == NULL)
        return; /* detached: its call failed or was resent */
    r->ack_req = NULL;
    if (r->ack_reply == NULL) {
        /* Not sent (its connection went before it was written): the
         * call's own reply, when it comes, is not confirmed. */
        r->ack_missing = true;
        return;
    }
    redisReply *kept = r->ack_reply;
    r->ack_reply = NULL;
    bool acked = status == 0 && reply->type == REDIS_REPLY_INTEGER &&
                 reply->integer >= r->pool->replica_acks;
    if (!acked)
        r->pool->stats.unacked++;
    pool_req_finish(r, acked ? kept : NULL, POOL_EUNAVAILABLE);
    freeReplyObject(kept);
}

/* Write WAIT replica_acks right after script call r on c. */
void pool_ack_write(struct pool_conn *c, struct pool_req *r)
{
    struct pool *p = c->pool;
    char n[24], ms[24];
    snprintf(n, sizeof(n), "%d", p->replica_acks);
    snprintf(ms, sizeof(ms), "%llu", (unsigned long long)(p->timeout / 2));
    const char *argv[3] = {"WAIT", n, ms};
    r->ack_missing = false;
    struct pool_req *w = pool_req_new_command(p, 3, argv, NULL, ack_cb, r);
    if (w == NULL) {
        r->ack_missing = true;
        return;
    }
    pool_req_accept(p, w);
    r->ack_req = w;
    if (pool_req_write(c, w) != 0)
        pool_req_fail_later(p, w);
}

/* r's reply (not an error) on a pool with replica-acks: keep it until
 * its WAIT answers. False when it is to be delivered now (as a failure
 * if its WAIT could not be sent or the copy failed). */
bool pool_ack_hold(struct pool_req *r, const redisReply *reply)
{
    if (r->ack_req == NULL || r->ack_missing) {
        if (r->ack_missing) {
            r->pool->stats.unacked++;
            pool_req_finish(r, NULL, POOL_EUNAVAILABLE);
            return true;
        }
        return false;
    }
    r->ack_reply = reply_dup(reply);
    if (r->ack_reply == NULL) {
        pool_req_finish(r, NULL, POOL_EUNAVAILABLE);
        return true;
    }
    return true;
}
