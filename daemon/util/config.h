/* config: every setting of emqd, described once in a static table
 * (config_keys) that drives the config file parser, the command-line
 * flags, --help, SIGHUP reload and the test that keeps config/emqd.conf
 * in step with the code. */
#ifndef EMQ_CONFIG_H
#define EMQ_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most keys any build has; config_nkeys stays below it (a unit test). */
#define CONFIG_KEYS_MAX 48

/* The settings. Strings are owned by the struct (config_deinit frees them). */
struct config {
    char *listen;              /* HOST:PORT for TCP, or NULL for none */
    char *unix_path;           /* a unix socket to listen on too, or NULL */
    char *redis;               /* redis://HOST:PORT[/DB], unix:///path; NULL = embedded */
    char *redis_cluster;       /* HOST:PORT[,HOST:PORT...] seeds of a Redis Cluster, or NULL */
    char *redis_password_file; /* the Redis password, read from this file */
    char *data_dir;            /* the embedded redis-server's directory */
    int fsync;                 /* enum config_fsync: the embedded redis-server's appendfsync */
    char *redis_bin;           /* the redis-server binary for the embedded backend */
    char *token;               /* clients must hello with it; NULL = no auth */
    char *token_file;          /* where token is read from (a file or a credential) */
    char *tokens_file;         /* tokens with roles (tokens.h), or NULL */
    bool allow_insecure;       /* listen beyond loopback without a token */
    char *metrics;             /* HOST:PORT of the Prometheus endpoint, or NULL */
    size_t metrics_groups;     /* groups per queue the metrics describe */
    uint64_t http_cache_ms;    /* how long the dashboard's /api keeps a read reply */
    int log_level;             /* enum log_level */
    int pool_size;
    size_t max_line;
    size_t max_payload; /* bytes of one job's payload, as compact JSON */
    size_t max_batch;   /* items in one enqueue_many */
    size_t max_clients;
    size_t max_unauthed;      /* connections before hello, when a token is set */
    size_t max_claim_bytes;   /* payload bytes one claim call leases, about */
    uint64_t auth_timeout_ms; /* a connection's time to say hello, when a token is set */
    uint64_t auth_backoff_ms; /* an address's first window of refused hellos (0 = none) */
    size_t max_inflight;      /* unanswered requests per connection before reads pause */
    size_t max_output;        /* bytes queued to one connection before it is dropped */
    size_t max_buffered;      /* bytes held for all connections together before reads pause */
    uint64_t idle_timeout_ms; /* close a connection idle this long; 0 = never */
    uint64_t redis_timeout_ms;
    int replica_acks;      /* WAIT for this many replicas after each script call; 0: none */
    uint64_t lease_ms;     /* default lease of claim / stream */
    uint64_t retention_ms; /* how long a completed row answers 'duplicate' */
    int max_attempts;      /* default for enqueue; 0 = unlimited */
    uint64_t upkeep_ms;    /* longest sleep of the reaper / promoter */
    uint64_t spin_us;      /* poll this long after work before sleeping (util/spin.h) */

    /* TLS on the TCP listener (util/tls.h, server/client_tls.c). */
    char *tls_cert;         /* PEM certificate (and chain); NULL = no TLS */
    char *tls_key;          /* PEM private key of tls_cert */
    char *tls_ca;           /* PEM CAs that client certificates must chain to */
    bool tls_verify_client; /* mutual TLS: refuse a client without a valid certificate */
    bool tls_only;          /* refuse plain connections on the TCP listener */
    bool http_tls;          /* the HTTP listener speaks HTTPS only (same files) */

    /* Not settings of their own: what config_finish derived. */
    char *redis_password; /* from redis-password-file, or NULL */
    /* Where each key's value came from ("FILE:LINE", "--name", or NULL
     * for the default), by index in config_keys: errors found after the
     * file is read still point at the line to fix. */
    char *origin[CONFIG_KEYS_MAX];
};

/* When the embedded backend writes its append-only file to disk. */
enum config_fsync {
    CONFIG_FSYNC_ALWAYS,   /* before each reply: an acknowledged move survives a power loss */
    CONFIG_FSYNC_EVERYSEC, /* once a second: up to a second of acknowledged moves may be lost */
};

enum config_type {
    CONFIG_STRING, /* char *; "" (or "none" with CONFIG_NONE) means unset */
    CONFIG_SIZE,   /* size_t */
    CONFIG_U64,    /* uint64_t */
    CONFIG_INT,    /* int */
    CONFIG_BOOL,   /* bool: true/false, yes/no, on/off, 1/0 */
    CONFIG_LEVEL,  /* int: error, warn, info, debug */
    CONFIG_FSYNC,  /* int: enum config_fsync, by name */
    CONFIG_ADDR,   /* char *: IP:PORT as addr_parse takes it (or "none" with CONFIG_NONE) */
    CONFIG_URL,    /* char *: a backend URL as config_parse_redis takes it */
    CONFIG_SEEDS,  /* char *: HOST:PORT[,HOST:PORT...] as config_parse_seeds takes it */
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

/* config_set, and on -EINVAL a phrase saying why into why (cap bytes):
 * what the key expects, or for an address exactly what is wrong. */
int config_set_why(struct config *c, const struct config_key *k, const char *value, char *why,
                   size_t cap);

/* Record where k's value came from (copied; "FILE:LINE" or "--name").
 * 0 or -ENOMEM. */
int config_set_origin(struct config *c, const struct config_key *k, const char *origin);

/* Where k's value came from, for error messages: "FILE:LINE", "--name"
 * or "default". */
const char *config_origin(const struct config *c, const struct config_key *k);

/* After the file and the flags: the checks that span keys, and the
 * secrets read from their files. token-file (or, when neither token nor
 * token-file is set and emqd runs under systemd with credentials, the
 * credential "emqd.token" in $CREDENTIALS_DIRECTORY) sets token;
 * redis-password-file sets redis_password. Returns 0, or -EINVAL with
 * "ORIGIN: ..." in err. */
int config_finish(struct config *c, char *err, size_t errlen);

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

/* True if the HOST:PORT listens on loopback only (NULL: no listener). */
bool config_loopback(const char *listen);

/* Where a backend URL points. The settings layer knows no pool: main.c
 * copies this into the store's pool_config. */
struct redis_url {
    const char *host;      /* a name or an IP literal ("localhost" becomes 127.0.0.1) */
    int port;              /* default 6379 */
    const char *unix_path; /* set instead of host for unix:// */
    const char *password;  /* NULL: none in the URL */
    int db;                /* 0 unless given */
};

/* Parse "redis://[:password@]HOST:PORT[/DB]" or "unix:///path[?db=N]".
 * Returns 0 or -EINVAL. The strings it stores point into buf (size cap). */
int config_parse_redis(const char *url, struct redis_url *ru, char *buf, size_t cap);

/* The most seed nodes redis-cluster takes. */
#define CONFIG_SEEDS_MAX 16

/* One seed node of redis-cluster. */
struct config_seed {
    const char *host; /* a name or an IP literal ("localhost" becomes 127.0.0.1) */
    int port;
};

/* Parse "HOST:PORT[,HOST:PORT...]" (HOST a name, an IPv4 address or
 * [IPv6]; at most CONFIG_SEEDS_MAX) into out. Returns how many, or
 * -EINVAL. The strings it stores point into buf (size cap). */
int config_parse_seeds(const char *list, struct config_seed *out, char *buf, size_t cap);

#endif
