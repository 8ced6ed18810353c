/* pool_new: building the pool from its settings, and what it tells about
 * itself (see pool.h): stats, buffered bytes, the oldest unanswered
 * command, the last error, its address. */
#include "pool_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

/* ---- construction and queries ------------------------------------------ */

static int pool_dup(char **dst, const char *src)
{
    *dst = NULL;
    if (src == NULL)
        return 0;
    *dst = strdup(src);
    return *dst != NULL ? 0 : -ENOMEM;
}

static int pool_config_check(const struct pool_config *cfg)
{
    unsigned char addr[sizeof(struct in6_addr)];
    struct sockaddr_un sa;

    if (cfg->size < 1 || cfg->port < 0 || cfg->port > 65535 || cfg->db < 0)
        return -EINVAL;
    if (cfg->nseeds > 0) {
        /* A cluster has database 0 only; its seeds are IP literals. */
        if (cfg->db != 0 || cfg->seeds == NULL || cfg->nseeds > POOL_NODES_MAX)
            return -EINVAL;
        for (int i = 0; i < cfg->nseeds; i++)
            if (cfg->seeds[i].host == NULL || cfg->seeds[i].port < 1 ||
                cfg->seeds[i].port > 65535 ||
                (inet_pton(AF_INET, cfg->seeds[i].host, addr) != 1 &&
                 inet_pton(AF_INET6, cfg->seeds[i].host, addr) != 1) ||
                strlen(cfg->seeds[i].host) >= sizeof(((struct pool_node *)0)->host))
                return -EINVAL;
        return 0;
    }
    if (cfg->unix_path != NULL)
        return strlen(cfg->unix_path) < sizeof(sa.sun_path) ? 0 : -EINVAL;
    /* Only an IP literal: hiredis would resolve a name with a blocking
     * getaddrinfo on the loop. */
    if (cfg->host != NULL && inet_pton(AF_INET, cfg->host, addr) != 1 &&
        inet_pton(AF_INET6, cfg->host, addr) != 1)
        return -EINVAL;
    return 0;
}

int pool_new(uv_loop_t *loop, const struct pool_config *cfg, struct pool **out)
{
    int err = pool_config_check(cfg);
    if (err < 0)
        return err;
    struct pool *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return -ENOMEM;
    map_init(&p->sub_names);
    p->cluster = cfg->nseeds > 0;
    p->nodes_cap = p->cluster ? POOL_NODES_MAX : 1;
    p->size = cfg->size;
    /* size command connections and one subscriber connection per node. */
    p->conns = calloc((size_t)p->nodes_cap * ((size_t)cfg->size + 1), sizeof(*p->conns));
    p->nodes = calloc((size_t)p->nodes_cap, sizeof(*p->nodes));
    if (p->conns == NULL || p->nodes == NULL ||
        pool_dup(&p->host, cfg->host ? cfg->host : "127.0.0.1") < 0 ||
        pool_dup(&p->unix_path, p->cluster ? NULL : cfg->unix_path) < 0 ||
        pool_dup(&p->password, cfg->password) < 0)
        goto err_free;

    p->loop = loop;
    p->port = cfg->port > 0 ? cfg->port : 6379;
    if (p->cluster && pool_cluster_init(p, cfg) != 0)
        goto err_free;
    if (!p->cluster) {
        snprintf(p->nodes[0].host, sizeof(p->nodes[0].host), "%s", p->host);
        p->nodes[0].port = p->port;
    }
    if (p->cluster)
        snprintf(p->where, sizeof(p->where), "cluster:%s:%d%s", p->seeds[0].host, p->seeds[0].port,
                 p->nseeds > 1 ? ",..." : "");
    else if (p->unix_path != NULL)
        snprintf(p->where, sizeof(p->where), "unix:%s", p->unix_path);
    else if (strchr(p->host, ':') != NULL) /* IPv6 */
        snprintf(p->where, sizeof(p->where), "[%s]:%d", p->host, p->port);
    else
        snprintf(p->where, sizeof(p->where), "%s:%d", p->host, p->port);
    p->db = cfg->db;
    p->replica_acks = cfg->replica_acks > 0 ? cfg->replica_acks : 0;
    p->timeout = cfg->timeout_ms > 0 ? cfg->timeout_ms : 2000;
    p->backoff_min = cfg->backoff_min_ms > 0 ? cfg->backoff_min_ms : 50;
    p->backoff_max = cfg->backoff_max_ms > 0 ? cfg->backoff_max_ms : 2000;
    if (p->backoff_max < p->backoff_min)
        p->backoff_max = p->backoff_min;
    p->rng = (uv_hrtime() ^ (uint64_t)(uintptr_t)p) | 1;
    p->stats.size = p->size;

    /* Handles cannot fail to initialise on a live loop. */
    uv_idle_init(loop, &p->idle);
    p->idle.data = p;
    p->open_handles++;
    uv_idle_init(loop, &p->flush);
    p->flush.data = p;
    p->open_handles++;
    pool_conn_init(p, pool_ps(p, 0), 0);
    pool_ps(p, 0)->pubsub = true;
    p->nnodes = 1;
    for (int i = 0; i < p->size; i++)
        pool_conn_init(p, &p->conns[i], 0);
    if (p->cluster) {
        uv_timer_init(loop, &p->map_timer);
        p->map_timer.data = p;
        uv_timer_init(loop, &p->retry_timer);
        p->retry_timer.data = p;
        p->open_handles += 2;
    }
    for (int i = 0; i < p->size; i++)
        pool_conn_start(&p->conns[i]);
    *out = p;
    return 0;

err_free:
    pool_free(p);
    return -ENOMEM;
}

void pool_free(struct pool *p)
{
    pool_sub_free_all(p);
    pool_fence_free_all(p);
    pool_cluster_free(p);
    free(p->conns);
    free(p->nodes);
    free(p->host);
    free(p->unix_path);
    free(p->password);
    free(p);
}

void pool_on_state(struct pool *p, void (*cb)(void *priv, bool up), void *priv)
{
    p->state_cb = cb;
    p->state_priv = priv;
}

bool pool_up(const struct pool *p)
{
    return pool_is_up(p);
}

void pool_stats(const struct pool *p, struct pool_stats *out)
{
    *out = p->stats;
    out->connected = p->ready;
    out->size = pool_nconn(p);
    out->by_eval = 0;
    for (int i = 0; i < pool_nconn(p); i++)
        out->by_eval += p->conns[i].state == CONN_READY && p->conns[i].by_eval;
    out->nodes = 1;
    if (p->cluster) {
        out->nodes = 0;
        for (int i = 0; i < p->nnodes; i++)
            out->nodes += p->nodes[i].mapped;
    }
}

size_t pool_buffered(const struct pool *p)
{
    size_t n = p->held_bytes;
    for (int i = -p->nnodes; i < pool_nconn(p); i++) {
        const redisAsyncContext *ac = (i < 0 ? pool_ps(p, -i - 1) : &p->conns[i])->ac;
        if (ac == NULL)
            continue;
        /* hiredis keeps a copy of every command until the socket takes
         * it (all of them while Redis does not read), and reads replies
         * into a buffer of its own. */
        if (ac->c.obuf != NULL)
            n += sdsalloc(ac->c.obuf);
        if (ac->c.reader != NULL && ac->c.reader->buf != NULL)
            n += sdsalloc(ac->c.reader->buf);
    }
    return n;
}

uint64_t pool_oldest_ms(const struct pool *p)
{
    uint64_t now = uv_now(p->loop), oldest = 0;
    for (int i = 0; i < pool_nconn(p); i++) {
        const struct pool_req *r = p->conns[i].sent.first;
        /* Each connection's list is oldest first; its deadline was set
         * one timeout after it was written. */
        if (r != NULL && now + p->timeout > r->deadline && now + p->timeout - r->deadline > oldest)
            oldest = now + p->timeout - r->deadline;
    }
    return oldest;
}

const char *pool_last_error(const struct pool *p)
{
    return p->error;
}

const char *pool_where(const struct pool *p)
{
    return p->where;
}
