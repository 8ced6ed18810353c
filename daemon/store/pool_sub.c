/* pool_sub: wakes by sharded pub/sub (see pool_internal.h and
 * docs/ARCHITECTURE.md, "Wakes" in section 7.3).
 *
 * The scripts SPUBLISH a queue's wake on its channel emq:{q}:wake, which
 * hashes to the queue's slot; Redis delivers it only to the clients
 * SSUBSCRIBEd on the node that ran the script (the cluster bus carries it
 * to that shard's replicas, not to every node). So the pool keeps one
 * subscriber connection per node (pool_ps), started when a subscription
 * first needs it, and each channel is subscribed on the connection of its
 * slot's owner in the map: off a cluster the one node, on a cluster
 * whichever master the map names, and again after the map changes
 * (pool_sub_sync, from the map's reader and its timer) or the node drops
 * the subscription (a "sunsubscribe" push: its slot left that node).
 *
 * hiredis 0.14 knows only SUBSCRIBE and PSUBSCRIBE: it treats SSUBSCRIBE
 * as an ordinary command and, in a context not in its subscribed mode,
 * asserts on a push that no callback waits for (every "smessage"). So a
 * subscriber connection uses hiredis only to connect and for its setup
 * (AUTH); once ready it is switched to raw replies (pool_conn_set_raw):
 * its reads go through the context's reader here (pool_sub_read), every
 * reply handed to sub_reply whatever it is, and its commands are appended
 * to the context's output buffer and written by the adapter. hiredis's
 * own callback list stays empty on it. */
#include "pool_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* The node whose subscriber connection s belongs on now, or -1 (the map
 * does not know its slot yet). */
static int sub_target(const struct pool *p, const struct pool_sub *s)
{
    if (!p->cluster)
        return 0;
    int node = p->slot_node[s->slot];
    return node == POOL_NO_NODE ? -1 : node;
}

/* Append cmd channel to c's output; the adapter writes it this turn. */
static void sub_write(struct pool_conn *c, const char *cmd, const struct pool_sub *s)
{
    const char *argv[2] = {cmd, s->channel};
    size_t lens[2] = {strlen(cmd), s->len};

    if (redisAppendCommandArgv(&c->ac->c, 2, argv, lens) != REDIS_OK) {
        pool_conn_fail_soon(c);
        return;
    }
    c->ac->ev.addWrite(c->ac->ev.data);
}

/* Put s where its slot is served: leave the node it was on (if that one
 * is still there to tell), and subscribe on its owner's connection when
 * that is ready (else start it; its readiness calls pool_sub_sync). */
static void sub_place(struct pool *p, struct pool_sub *s)
{
    int want = sub_target(p, s);
    if (want < 0 || want == s->node)
        return;
    if (s->node >= 0) {
        struct pool_conn *old = pool_ps(p, s->node);
        if (old->state == CONN_READY)
            sub_write(old, "SUNSUBSCRIBE", s);
        s->node = -1;
    }
    struct pool_conn *c = pool_ps(p, want);
    if (c->state == CONN_IDLE) {
        pool_conn_start(c);
    } else if (c->state == CONN_READY) {
        s->node = want;
        s->confirmed = false;
        sub_write(c, "SSUBSCRIBE", s);
    }
}

void pool_sub_sync(struct pool *p)
{
    if (p->closing)
        return;
    for (struct pool_sub *s = p->subs; s != NULL; s = s->next)
        sub_place(p, s);
}

void pool_sub_conn_lost(struct pool_conn *c)
{
    struct pool *p = c->pool;
    for (struct pool_sub *s = p->subs; s != NULL; s = s->next)
        if (s->node == c->node)
            s->node = -1;
}

/* One reply on subscriber connection c: a message, a confirmation, the
 * node dropping a channel, or an SSUBSCRIBE refused. */
static void sub_reply(struct pool_conn *c, const redisReply *r)
{
    struct pool *p = c->pool;

    if (r->type == REDIS_REPLY_ERROR) {
        /* An SSUBSCRIBE refused. Off a cluster (LOADING, an ACL, a Redis
         * before 7): reconnect after a backoff and subscribe again. On a
         * cluster (MOVED: the map is behind): errors name no channel, so
         * every subscription not yet confirmed here is placed again once
         * the map has been read again. */
        if (!p->cluster) {
            pool_set_error(c, "wake subscription", r->str);
            pool_conn_fail_soon(c);
            return;
        }
        log_event(LOG_WARN, "redis refused a wake subscription; retrying", "error=%s", r->str);
        for (struct pool_sub *s = p->subs; s != NULL; s = s->next)
            if (s->node == c->node && !s->confirmed)
                s->node = -1;
        p->map_stale = true;
        return;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_STRING)
        return;
    const char *kind = r->element[0]->str;
    struct pool_sub *s = map_get(&p->sub_names, r->element[1]->str, r->element[1]->len);
    if (s == NULL || s->node != c->node)
        return; /* not ours, or an answer from where it no longer is */
    if (strcmp(kind, "smessage") == 0 && r->element[2]->type == REDIS_REPLY_STRING) {
        s->cb(s->priv, s->channel, r->element[2]->str, r->element[2]->len);
    } else if (strcmp(kind, "ssubscribe") == 0) {
        /* (Re)subscribed: anything published while we were not listening
         * is lost, so tell the caller to look for itself. */
        s->confirmed = true;
        s->cb(s->priv, s->channel, NULL, 0);
    } else if (strcmp(kind, "sunsubscribe") == 0) {
        /* The node dropped it unasked: the slot has left it. Read the map
         * and subscribe on the new owner (the timer does both). */
        s->node = -1;
        p->map_stale = true;
    }
}

void pool_sub_read(struct pool_conn *c)
{
    redisContext *rc = &c->ac->c;
    void *reply = NULL;

    if (redisBufferRead(rc) != REDIS_OK) {
        pool_set_error(c, "pub/sub connection lost", rc->errstr);
        pool_conn_fail_soon(c);
        return;
    }
    while (c->state == CONN_READY) {
        if (redisGetReplyFromReader(rc, &reply) != REDIS_OK) {
            pool_set_error(c, "pub/sub reply", rc->errstr);
            pool_conn_fail_soon(c);
            return;
        }
        if (reply == NULL)
            return;
        sub_reply(c, reply);
        freeReplyObject(reply);
    }
}

int pool_subscribe(struct pool *p, const char *channel,
                   void (*on_message)(void *priv, const char *channel, const char *msg, size_t len),
                   void *priv)
{
    size_t len;
    struct pool_sub *s;

    if (p->closing)
        return -ESHUTDOWN;
    if (channel == NULL || on_message == NULL)
        return -EINVAL;
    len = strlen(channel);
    if (map_get(&p->sub_names, channel, len) != NULL)
        return -EEXIST;
    s = malloc(sizeof(*s) + len + 1);
    if (s == NULL)
        return -ENOMEM;
    *s = (struct pool_sub){.cb = on_message,
                           .priv = priv,
                           .node = -1,
                           .slot = pool_key_slot(channel, len),
                           .len = len};
    memcpy(s->channel, channel, len + 1);
    if (map_put(&p->sub_names, s->channel, len, s) != 0) {
        free(s);
        return -ENOMEM;
    }
    s->next = p->subs;
    p->subs = s;
    sub_place(p, s);
    return 0;
}

void pool_sub_free_all(struct pool *p)
{
    while (p->subs != NULL) {
        struct pool_sub *s = p->subs;
        p->subs = s->next;
        free(s);
    }
    map_deinit(&p->sub_names);
}
