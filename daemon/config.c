/* config: defaults and the backend URL. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

void config_defaults(struct config *c)
{
    memset(c, 0, sizeof(*c));
    c->listen = "127.0.0.1:7711";
    c->data_dir = "emqd-data";
    c->redis_bin = "redis-server";
    c->pool_size = 4;
    c->max_line = 1 << 20;
    c->max_batch = 10000;
    c->max_clients = 20000;
    c->max_inflight = 4096;
    c->max_output = 64u << 20;
    c->redis_timeout_ms = 2000;
    c->lease_ms = 30000;
    c->retention_ms = 24ULL * 3600 * 1000;
    c->max_attempts = 5;
    c->upkeep_ms = 1000;
}

int config_parse_redis(const char *url, struct pool_config *pc, char *buf, size_t cap)
{
    if (strlen(url) >= cap)
        return -EINVAL;
    strcpy(buf, url);
    if (strncmp(buf, "unix://", 7) == 0) {
        char *q = strchr(buf + 7, '?');
        if (q != NULL) {
            *q = '\0';
            if (strncmp(q + 1, "db=", 3) != 0)
                return -EINVAL;
            pc->db = atoi(q + 4);
        }
        pc->unix_path = buf + 7;
        return pc->unix_path[0] == '/' ? 0 : -EINVAL;
    }
    if (strncmp(buf, "redis://", 8) != 0)
        return -EINVAL;
    char *host = buf + 8;
    char *at = strrchr(host, '@');
    if (at != NULL) {
        *at = '\0';
        pc->password = host[0] == ':' ? host + 1 : host;
        host = at + 1;
    }
    char *slash = strchr(host, '/');
    if (slash != NULL) {
        *slash = '\0';
        pc->db = atoi(slash + 1);
    }
    char *colon = strrchr(host, ':');
    pc->port = 6379;
    if (colon != NULL) {
        *colon = '\0';
        char *end;
        long port = strtol(colon + 1, &end, 10);
        if (*end != '\0' || port < 1 || port > 65535)
            return -EINVAL;
        pc->port = (int)port;
    }
    /* hiredis would resolve names with a blocking getaddrinfo: only IP
     * literals are accepted (localhost is the one name allowed). */
    if (strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    pc->host = host;
    return 0;
}
