/* pool_cluster: the pool on a Redis Cluster (see pool_internal.h and
 * docs/ARCHITECTURE.md, "Routing on a cluster").
 *
 * The pool learns the slot map (CLUSTER SLOTS) from a seed once one of
 * its connections is ready, then keeps size connections to every master
 * of it, and sends each request to the owner of its slot (pool.c's
 * route_pick asks pool_node_pick). A request refused with MOVED or ASK is
 * resent to the node named (pool.c holds its connection meanwhile, so the
 * order of a route survives the bounce); MOVED also updates the map and
 * has it read again. A timer reads the map again every
 * POOL_MAP_REFRESH_MS, and every POOL_MAP_CHECK_MS while a mapped node has
 * no ready connection or a MOVED said it changed: after a failover that
 * is how the promoted replica is found. Nothing here runs off a cluster. */
#include "pool_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* How often the timer looks, and how often it reads the map anyway. */
#define POOL_MAP_CHECK_MS   250
#define POOL_MAP_REFRESH_MS 10000

static void map_timer_cb(uv_timer_t *t);

uint16_t pool_slot(const char *tag, size_t len)
{
    /* CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), bit by
     * bit: the key-slot function of the Redis Cluster specification. */
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)tag[i] << 8);
        for (int b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
    return crc & 16383;
}

uint16_t pool_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len);
    if (open != NULL) {
        size_t from = (size_t)(open - key) + 1;
        const char *close = memchr(open + 1, '}', len - from);
        if (close != NULL && close > open + 1)
            return pool_slot(open + 1, (size_t)(close - open - 1));
    }
    return pool_slot(key, len);
}

int pool_cluster_init(struct pool *p, const struct pool_config *cfg)
{
    p->slot_node = malloc(16384);
    p->seeds = calloc((size_t)cfg->nseeds, sizeof(*p->seeds));
    if (p->slot_node == NULL || p->seeds == NULL)
        return -ENOMEM;
    memset(p->slot_node, POOL_NO_NODE, 16384);
    p->nseeds = cfg->nseeds;
    for (int i = 0; i < cfg->nseeds; i++) {
        snprintf(p->seeds[i].host, sizeof(p->seeds[i].host), "%s", cfg->seeds[i].host);
        p->seeds[i].port = cfg->seeds[i].port;
    }
    p->nodes[0] = p->seeds[0];
    return 0;
}

void pool_cluster_free(struct pool *p)
{
    free(p->slot_node);
    free(p->seeds);
    p->slot_node = NULL;
    p->seeds = NULL;
}

bool pool_is_up(const struct pool *p)
{
    return p->ready > 0 && (!p->cluster || p->map_known);
}

struct pool_conn *pool_node_pick(struct pool *p, int node, uint16_t slot)
{
    if (node < 0 || node >= p->nnodes)
        return NULL;
    struct pool_conn *first = &p->conns[node * p->size], *home = &first[slot % p->size];
    if (home->state == CONN_READY)
        return home;
    for (int j = 0; j < p->size; j++)
        if (first[j].state == CONN_READY)
            return &first[j];
    /* Nothing ready: a node being connected to (just found, or coming
     * back) is waited for, within its connect deadline; a node that is
     * down fails the request now. */
    if (home->state == CONN_CONNECTING || home->state == CONN_SETUP)
        return home;
    for (int j = 0; j < p->size; j++)
        if (first[j].state == CONN_CONNECTING || first[j].state == CONN_SETUP)
            return &first[j];
    return NULL;
}

static int node_find(const struct pool *p, const char *host, int port)
{
    for (int i = 0; i < p->nnodes; i++)
        if (p->nodes[i].port == port && strcmp(p->nodes[i].host, host) == 0)
            return i;
    return -1;
}

/* The index of the node at host:port, added (and its connections
 * started) when new; -1 when it cannot be (not an IP literal, too many
 * nodes, the pool closing). */
static int node_get(struct pool *p, const char *host, int port)
{
    int i = node_find(p, host, port);
    if (i >= 0)
        return i;
    unsigned char bin[sizeof(struct in6_addr)];
    if (p->closing || port < 1 || port > 65535 || strlen(host) >= sizeof(p->nodes[0].host) ||
        (inet_pton(AF_INET, host, bin) != 1 && inet_pton(AF_INET6, host, bin) != 1)) {
        log_event(LOG_WARN, "cluster node address not usable (an IP literal is needed)",
                  "host=%s port=%d", host, port);
        return -1;
    }
    if (p->nnodes == p->nodes_cap) {
        log_event(LOG_ERROR, "cluster has more nodes than the pool can reach", "max=%d",
                  POOL_NODES_MAX);
        return -1;
    }
    i = p->nnodes++;
    snprintf(p->nodes[i].host, sizeof(p->nodes[i].host), "%s", host);
    p->nodes[i].port = port;
    log_event(LOG_INFO, "cluster node added", "node=%s:%d", host, port);
    for (int j = 0; j < p->size; j++)
        pool_conn_init(p, &p->conns[i * p->size + j], i);
    pool_conn_init(p, pool_ps(p, i), i); /* started when a wake channel needs it */
    pool_ps(p, i)->pubsub = true;
    for (int j = 0; j < p->size; j++)
        pool_conn_start(&p->conns[i * p->size + j]);
    return i;
}

/* One range of a CLUSTER SLOTS reply into map: its first, last and
 * master. False when its shape is not that. */
static bool map_range(struct pool *p, const redisReply *e, uint8_t *map)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER || e->element[1]->type != REDIS_REPLY_INTEGER ||
        e->element[2]->type != REDIS_REPLY_ARRAY || e->element[2]->elements < 2 ||
        e->element[2]->element[0]->type != REDIS_REPLY_STRING ||
        e->element[2]->element[1]->type != REDIS_REPLY_INTEGER)
        return false;
    long long from = e->element[0]->integer, to = e->element[1]->integer;
    if (from < 0 || to > 16383 || from > to)
        return false;
    int node = node_get(p, e->element[2]->element[0]->str, (int)e->element[2]->element[1]->integer);
    if (node < 0)
        return true; /* logged; its slots stay unknown and answer EUNAVAILABLE */
    p->nodes[node].mapped = true;
    memset(map + from, node, (size_t)(to - from + 1));
    return true;
}

static void map_cb(void *priv, int status, redisReply *reply)
{
    struct pool *p = priv;
    uint8_t *map = NULL;

    p->map_inflight = false;
    if (status != 0 || reply->type != REDIS_REPLY_ARRAY || p->closing ||
        (map = malloc(16384)) == NULL) {
        /* Once: the timer asks again every POOL_MAP_CHECK_MS. */
        if (status == 0 && reply->type == REDIS_REPLY_ERROR && !p->map_refused_logged) {
            p->map_refused_logged = true;
            log_event(LOG_ERROR, "CLUSTER SLOTS refused (is redis-cluster a cluster?)", "error=%s",
                      reply->str);
        }
        p->map_stale = true;
        return;
    }
    memset(map, POOL_NO_NODE, 16384);
    for (int i = 0; i < p->nnodes; i++)
        p->nodes[i].mapped = false;
    for (size_t i = 0; i < reply->elements; i++)
        if (!map_range(p, reply->element[i], map)) {
            log_msg(LOG_ERROR, "unexpected CLUSTER SLOTS reply");
            p->map_stale = true;
            free(map);
            return;
        }
    memcpy(p->slot_node, map, 16384);
    free(map);
    if (!p->map_known)
        log_event(LOG_INFO, "cluster slot map read", "nodes=%d", p->nnodes);
    p->map_known = true;
    p->map_stale = false;
    p->map_read_ms = uv_now(p->loop);
    p->stats.map_loads++;
    pool_sub_sync(p); /* wake channels follow their slots */
    pool_kick(p);     /* up, now that the map is known */
}

/* Ask a ready connection for the slot map, unless that is already out. */
static void map_read(struct pool *p)
{
    if (p->map_inflight || p->closing)
        return;
    struct pool_conn *c = pool_pick(p);
    if (c == NULL)
        return;
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    size_t lens[2] = {7, 5};
    if (pool_command_on(c, 2, argv, lens, map_cb, p) == 0)
        p->map_inflight = true;
}

/* Whether a node of the map has no ready connection (down, or failing
 * over: the map will change). */
static bool map_node_down(const struct pool *p)
{
    for (int i = 0; i < p->nnodes; i++) {
        if (!p->nodes[i].mapped)
            continue;
        bool ready = false;
        for (int j = 0; j < p->size && !ready; j++)
            ready = p->conns[i * p->size + j].state == CONN_READY;
        if (!ready)
            return true;
    }
    return false;
}

static void map_timer_cb(uv_timer_t *t)
{
    struct pool *p = t->data;
    uint64_t now = uv_now(p->loop);

    if (p->closing)
        return;
    /* A wake subscription refused or dropped (its slot moved) is placed
     * again once the map says where. */
    pool_sub_sync(p);
    if (!p->map_known || p->map_stale || now - p->map_read_ms >= POOL_MAP_REFRESH_MS ||
        (map_node_down(p) && now - p->map_read_ms >= 4 * POOL_MAP_CHECK_MS))
        map_read(p);
}

void pool_cluster_conn_ready(struct pool_conn *c)
{
    struct pool *p = c->pool;
    if (!uv_is_active((uv_handle_t *)&p->map_timer))
        uv_timer_start(&p->map_timer, map_timer_cb, POOL_MAP_CHECK_MS, POOL_MAP_CHECK_MS);
    if (!p->map_known)
        map_read(p);
}

void pool_cluster_conn_lost(struct pool_conn *c)
{
    struct pool *p = c->pool;
    p->map_stale = true;
    /* Before the first map, try the seeds in turn. */
    if (!p->map_known && c == &p->conns[0] && p->nseeds > 1) {
        p->seed_next = (p->seed_next + 1) % p->nseeds;
        p->nodes[0] = p->seeds[p->seed_next];
    }
}

/* How long a connection held for TRYAGAIN waits before it resends. */
#define POOL_TRYAGAIN_MS 10

static void retry_timer_cb(uv_timer_t *t)
{
    struct pool *p = t->data;
    for (int i = 0; i < pool_nconn(p); i++) {
        struct pool_conn *c = &p->conns[i];
        if (c->retry_later) {
            c->retry_later = false;
            pool_conn_release_waiting(c);
        }
    }
}

void pool_cluster_retry_soon(struct pool_conn *c)
{
    struct pool *p = c->pool;
    if (!p->closing && !uv_is_active((uv_handle_t *)&p->retry_timer))
        uv_timer_start(&p->retry_timer, retry_timer_cb, POOL_TRYAGAIN_MS, 0);
}

enum pool_redirect pool_cluster_redirect(struct pool *p, struct pool_req *r, int node,
                                         const redisReply *reply)
{
    if (strncmp(reply->str, "TRYAGAIN", 8) == 0) {
        /* The slot is being moved and this call's keys are on both sides
         * for now: the same node again, once the move has gone on. */
        if (uv_now(p->loop) - r->first_ms >= p->timeout)
            return POOL_REDIRECT_NONE;
        r->target = node;
        p->stats.tryagain++;
        return POOL_REDIRECT_LATER;
    }
    bool ask = strncmp(reply->str, "ASK ", 4) == 0;
    if (!ask && strncmp(reply->str, "MOVED ", 6) != 0)
        return POOL_REDIRECT_NONE;
    if (r->redirects >= POOL_REDIRECTS_MAX)
        return POOL_REDIRECT_NONE;
    /* "MOVED <slot> <ip>:<port>": the port after the last ':' (an IPv6
     * address has colons of its own). */
    char host[64];
    const char *at = reply->str + (ask ? 4 : 6), *sp = strchr(at, ' ');
    char *end;
    long slot = strtol(at, &end, 10);
    if (sp == NULL || end != sp || slot < 0 || slot > 16383)
        return POOL_REDIRECT_NONE;
    const char *colon = strrchr(sp + 1, ':');
    if (colon == NULL || colon == sp + 1 || (size_t)(colon - sp - 1) >= sizeof(host))
        return POOL_REDIRECT_NONE;
    memcpy(host, sp + 1, (size_t)(colon - sp - 1));
    host[colon - sp - 1] = '\0';
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0')
        return POOL_REDIRECT_NONE;
    int to = node_get(p, host, (int)port);
    if (to < 0)
        return POOL_REDIRECT_NONE;
    if (!ask) {
        p->slot_node[slot] = (uint8_t)to;
        p->nodes[to].mapped = true;
        p->map_stale = true; /* one slot moved: others may have too */
        p->stats.moved++;
        pool_sub_sync(p); /* its wake channel too */
    } else {
        p->stats.asked++;
    }
    r->target = to;
    r->asking = ask;
    r->redirects++;
    return POOL_REDIRECT_NOW;
}
