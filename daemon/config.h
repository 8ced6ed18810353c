/* config: every setting of emqd, with its default (config_defaults). */
#ifndef EMQ_CONFIG_H
#define EMQ_CONFIG_H

#include <stddef.h>
#include <stdint.h>

struct config {
    const char *listen;    /* HOST:PORT for TCP, or NULL for none */
    const char *unix_path; /* a unix socket to listen on too, or NULL */
    const char *redis;     /* redis://HOST:PORT[/DB], unix:///path; NULL = embedded */
    const char *data_dir;  /* the embedded redis-server's directory */
    const char *redis_bin; /* the redis-server binary for the embedded backend */
    const char *token;     /* clients must hello with it; NULL = no auth */
    int pool_size;
    size_t max_line;
    size_t max_batch; /* items in one enqueue_many */
    size_t max_clients;
    size_t max_inflight; /* unanswered requests per connection before reads pause */
    size_t max_output;   /* bytes queued to one connection before it is dropped */
    uint64_t redis_timeout_ms;
    uint64_t lease_ms;     /* default lease of claim / stream */
    uint64_t retention_ms; /* how long a completed row answers 'duplicate' */
    int max_attempts;      /* default for enqueue; 0 = unlimited */
    uint64_t upkeep_ms;    /* longest sleep of the reaper / promoter */
    int verbose;
};

void config_defaults(struct config *c);

/* Parse "redis://[:password@]HOST:PORT[/DB]" or "unix:///path[?db=N]" into
 * a pool configuration. Returns 0 or -EINVAL. The strings it stores point
 * into buf (size cap). */
struct pool_config;
int config_parse_redis(const char *url, struct pool_config *pc, char *buf, size_t cap);

#endif
