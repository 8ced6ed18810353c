/* config: every setting of emqd, described once in a static table
 * (config_keys) that drives the config file parser, the command-line
 * flags, --help, SIGHUP reload and the test that keeps config/emqd.conf
 * in step with the code. */
#ifndef EMQ_CONFIG_H
#define EMQ_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The settings. Strings are owned by the struct (config_deinit frees them). */
struct config {
    char *listen;          /* HOST:PORT for TCP, or NULL for none */
    char *unix_path;       /* a unix socket to listen on too, or NULL */
    char *redis;           /* redis://HOST:PORT[/DB], unix:///path; NULL = embedded */
    char *data_dir;        /* the embedded redis-server's directory */
    char *redis_bin;       /* the redis-server binary for the embedded backend */
    char *token;           /* clients must hello with it; NULL = no auth */
    bool allow_insecure;   /* listen beyond loopback without a token */
    char *metrics;         /* HOST:PORT of the Prometheus endpoint, or NULL */
    size_t metrics_groups; /* groups per queue the metrics describe */
    int log_level;         /* enum log_level */
    int pool_size;
    size_t max_line;
    size_t max_payload; /* bytes of one job's payload, as compact JSON */
    size_t max_batch;   /* items in one enqueue_many */
    size_t max_clients;
    size_t max_inflight;      /* unanswered requests per connection before reads pause */
    size_t max_output;        /* bytes queued to one connection before it is dropped */
    uint64_t idle_timeout_ms; /* close a connection idle this long; 0 = never */
    uint64_t redis_timeout_ms;
    uint64_t lease_ms;     /* default lease of claim / stream */
    uint64_t retention_ms; /* how long a completed row answers 'duplicate' */
    int max_attempts;      /* default for enqueue; 0 = unlimited */
    uint64_t upkeep_ms;    /* longest sleep of the reaper / promoter */
};

enum config_type {
    CONFIG_STRING, /* char *; "" (or "none" with CONFIG_NONE) means unset */
    CONFIG_SIZE,   /* size_t */
    CONFIG_U64,    /* uint64_t */
    CONFIG_INT,    /* int */
    CONFIG_BOOL,   /* bool: true/false, yes/no, on/off, 1/0 */
    CONFIG_LEVEL,  /* int: error, warn, info, debug */
};

enum {
    CONFIG_RELOAD = 1u << 0, /* SIGHUP applies a new value at once */
    CONFIG_NONE = 1u << 1,   /* a string that "none" turns off */
    CONFIG_SECRET = 1u << 2, /* never logged */
};

/* One setting: the same name in the file (name = value) and on the
 * command line (--name value). */
struct config_key {
    const char *name;
    enum config_type type;
    size_t offset; /* in struct config */
    uint64_t min, max;
    const char *dflt; /* in the file's syntax; "" = unset */
    unsigned flags;
    const char *help;
};

/* The table, and its length. */
extern const struct config_key config_keys[];
extern const size_t config_nkeys;

/* The key called name (len bytes), or NULL. */
const struct config_key *config_key_find(const char *name, size_t len);

/* Every setting at its default. */
void config_defaults(struct config *c);
void config_deinit(struct config *c);

/* Set one key from its text form. Returns 0, -EINVAL when the value is
 * refused (nothing changes), or -ENOMEM. */
int config_set(struct config *c, const struct config_key *k, const char *value);

/* What k accepts, as a phrase for error messages ("an integer in 1..64"). */
const char *config_expected(const struct config_key *k, char *buf, size_t cap);

/* Read a config file (name = value lines, # comments) into c. On an error
 * writes "FILE:LINE: ..." into err and returns -EINVAL (or -errno when
 * the file cannot be read). */
int config_load(struct config *c, const char *path, char *err, size_t errlen);

/* The value of k in c, in the file's syntax, into buf. */
const char *config_format(const struct config *c, const struct config_key *k, char *buf,
                          size_t cap);

/* True if k has the same value in a and b. */
bool config_equal(const struct config *a, const struct config *b, const struct config_key *k);

/* Copy k's value from src to dst (strings duplicated). 0 or -ENOMEM. */
int config_copy(struct config *dst, const struct config *src, const struct config_key *k);

/* True if the HOST:PORT listens on loopback only. */
bool config_loopback(const char *listen);

/* Parse "redis://[:password@]HOST:PORT[/DB]" or "unix:///path[?db=N]" into
 * a pool configuration. Returns 0 or -EINVAL. The strings it stores point
 * into buf (size cap). */
struct pool_config;
int config_parse_redis(const char *url, struct pool_config *pc, char *buf, size_t cap);

#endif
