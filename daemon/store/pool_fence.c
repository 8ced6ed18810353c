/* pool_fence: making sure a lost connection's commands can no longer run
 * (see pool_internal.h and pool_fenced in pool.h).
 *
 * A request whose connection was lost, or timed out, has an unknown
 * outcome, and "unknown" includes "later": a stalled Redis still has the
 * lost connection's commands in its socket buffer and runs them when it
 * resumes (closing our end does not take them back), and a proxy may hold
 * them for longer. A caller that wants to undo what such a request may
 * have done (the store gives back leases whose reply was lost) must first
 * know that it is over. CLIENT KILL ID removes the lost client at Redis
 * and, with it, whatever it had not yet run: Redis runs one command at a
 * time, so once CLIENT KILL has answered, that client's commands have
 * either run already or never will.
 *
 * Client ids are counted per Redis process, so each connection also asks
 * for the server's run_id in its setup: a fence whose process is gone (a
 * restart) needs no CLIENT KILL, and must not get one, as the id may by
 * now belong to somebody else. */
#include "pool_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void pool_fence_note(struct pool_conn *c, bool written)
{
    struct pool *p = c->pool;

    if (c->pubsub || c->loss_noted || (!written && c->sent.first == NULL))
        return;
    c->loss_noted = true;
    p->losses++;
    if (c->client_id <= 0) /* the server would not say who c was */
        return;
    struct pool_fence *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        log_event(LOG_WARN, "out of memory: a lost connection is not fenced", "client_id=%lld",
                  c->client_id);
        return;
    }
    f->pool = p;
    f->epoch = p->losses;
    f->client_id = c->client_id;
    f->node = c->node;
    memcpy(f->run_id, c->run_id, sizeof(f->run_id));
    struct pool_fence **tail = &p->fences;
    while (*tail != NULL)
        tail = &(*tail)->next;
    *tail = f;
    /* Not from here: c is still in rotation, inside a hiredis callback or
     * about to be freed. The idle handle sends it on the next turn. */
    pool_kick(p);
}

static void fence_remove(struct pool *p, struct pool_fence *f)
{
    for (struct pool_fence **at = &p->fences; *at != NULL; at = &(*at)->next)
        if (*at == f) {
            *at = f->next;
            break;
        }
    free(f);
    p->stats.fenced++;
}

static void fence_cb(void *priv, int status, redisReply *reply)
{
    struct pool_fence *f = priv;
    struct pool *p = f->pool;

    f->inflight = false;
    if (status != 0)
        return; /* not answered: the next connection to become ready tries again */
    /* An integer (1: killed, 0: no such client) or "ERR No such client":
     * either way that client is gone. Any other error (an ACL refusing
     * CLIENT KILL) leaves it unfenced: say so once, and go on as if it
     * were, rather than hold back recovery for good. */
    if (reply->type == REDIS_REPLY_ERROR && strstr(reply->str, "No such client") == NULL &&
        !p->fence_refused_logged) {
        p->fence_refused_logged = true;
        log_event(LOG_WARN,
                  "redis refused CLIENT KILL: a lost connection's commands may still run after "
                  "their effects were undone",
                  "error=%s", reply->str);
    }
    fence_remove(p, f);
}

void pool_fence_kick(struct pool *p)
{
    for (struct pool_fence *f = p->fences, *next; f != NULL; f = next) {
        next = f->next;
        if (f->inflight)
            continue;
        /* CLIENT KILL goes to the server the lost client was on (on a
         * cluster, its node). A node no longer in the slot map after a
         * failover is dead or a replica: its clients cannot write. */
        struct pool_conn *c = p->cluster ? pool_node_pick(p, f->node, 0) : pool_pick(p);
        if (c != NULL && c->state != CONN_READY)
            c = NULL;
        if (c == NULL && p->cluster && p->map_known && !p->nodes[f->node].mapped) {
            fence_remove(p, f);
            continue;
        }
        if (c == NULL) {
            if (p->cluster)
                continue;
            return;
        }
        if (strcmp(c->run_id, f->run_id) != 0 || f->run_id[0] == '\0') {
            /* Another Redis process than the one that had the lost client
             * (it restarted): what that client had sent died with it. */
            fence_remove(p, f);
            continue;
        }
        char id[24];
        int n = snprintf(id, sizeof(id), "%lld", f->client_id);
        const char *argv[4] = {"CLIENT", "KILL", "ID", id};
        size_t lens[4] = {6, 4, 2, (size_t)n};
        if (pool_command_on(c, 4, argv, lens, fence_cb, f) == 0)
            f->inflight = true;
    }
}

void pool_fence_free_all(struct pool *p)
{
    while (p->fences != NULL) {
        struct pool_fence *f = p->fences;
        p->fences = f->next;
        free(f);
    }
}

uint64_t pool_losses(const struct pool *p)
{
    return p->losses;
}

bool pool_fenced(const struct pool *p, uint64_t epoch)
{
    for (const struct pool_fence *f = p->fences; f != NULL; f = f->next)
        if (f->epoch <= epoch)
            return false;
    return true;
}
