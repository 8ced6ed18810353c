/* config: the settings table, the file parser, and the backend URL. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "addr.h"
#include "log.h"

#define OFF(field) offsetof(struct config, field)
#define DAY_MS     "86400000"

/* Every setting, in the order of config/emqd.conf and --help. Bounds keep
 * a typo from becoming a daemon that cannot work (a 0-byte line, a pool
 * of 10000 connections). */
const struct config_key config_keys[] = {
    {"listen", CONFIG_ADDR, OFF(listen), 0, 0, "127.0.0.1:7711", CONFIG_NONE,
     "TCP address IP:PORT or localhost:PORT ('none' = no TCP)"},
    {"unix", CONFIG_STRING, OFF(unix_path), 0, 0, "", 0, "also listen on this unix socket"},
    {"allow-insecure", CONFIG_BOOL, OFF(allow_insecure), 0, 1, "false", 0,
     "allow a non-loopback listen without a token"},
    {"token", CONFIG_STRING, OFF(token), 0, 0, "", CONFIG_RELOAD | CONFIG_SECRET,
     "clients must 'hello' with this token ('' = no authentication)"},
    {"token-file", CONFIG_STRING, OFF(token_file), 0, 0, "", CONFIG_RELOAD,
     "read the token from this file instead (re-read on SIGHUP)"},
    /* Roles (issue 18): read by main.c into the server's table at start
     * and at every SIGHUP, whether or not the path changed. */
    {"tokens-file", CONFIG_STRING, OFF(tokens_file), 0, 0, "", CONFIG_RELOAD,
     "tokens with roles: 'NAME ROLE SHA256 [QUEUE-PATTERN...]' lines (re-read on SIGHUP)"},
    {"redis", CONFIG_URL, OFF(redis), 0, 0, "", 0,
     "redis://[:PASSWORD@]HOST:PORT[/DB] or unix:///PATH[?db=N] ('' = embedded)"},
    {"redis-cluster", CONFIG_SEEDS, OFF(redis_cluster), 0, 0, "", 0,
     "HOST:PORT[,HOST:PORT...]: seed nodes of a Redis Cluster (instead of redis)"},
    {"redis-password-file", CONFIG_STRING, OFF(redis_password_file), 0, 0, "", 0,
     "read the Redis password from this file"},
    {"data-dir", CONFIG_STRING, OFF(data_dir), 0, 0, "emqd-data", 0,
     "the embedded redis-server's directory"},
    {"fsync", CONFIG_FSYNC, OFF(fsync), 0, 1, "always", 0,
     "embedded backend: always (an acknowledged move is on disk) or everysec"},
    {"redis-bin", CONFIG_STRING, OFF(redis_bin), 0, 0, "redis-server", 0,
     "the redis-server binary for the embedded backend"},
    {"pool", CONFIG_INT, OFF(pool_size), 1, 64, "4", 0, "Redis connections"},
    {"redis-timeout-ms", CONFIG_U64, OFF(redis_timeout_ms), 10, 600000, "2000", 0,
     "deadline of one backend call"},
    {"replica-acks", CONFIG_INT, OFF(replica_acks), 0, 16, "0", 0,
     "answer a call that writes only once WAIT says this many replicas have it (0 = don't wait)"},
    {"log-level", CONFIG_LEVEL, OFF(log_level), 0, 3, "info", CONFIG_RELOAD,
     "error, warn, info or debug"},
    {"metrics", CONFIG_ADDR, OFF(metrics), 0, 0, "none", CONFIG_NONE,
     "IP:PORT of the HTTP listener: /metrics, the dashboard at /, its /api ('none' = off)"},
    {"metrics-groups", CONFIG_SIZE, OFF(metrics_groups), 0, 1000, "10", CONFIG_RELOAD,
     "groups per queue described in /metrics (the deepest)"},
    {"http-cache-ms", CONFIG_U64, OFF(http_cache_ms), 0, 60000, "1000", CONFIG_RELOAD,
     "dashboard /api: identical reads share one backend call for this long"},
    /* TLS: the files are read again at every SIGHUP (new connections use
     * what they hold then), whether or not their names changed. */
    {"tls-cert", CONFIG_STRING, OFF(tls_cert), 0, 0, "", CONFIG_RELOAD,
     "PEM certificate (and chain) for TLS on the TCP listener ('' = no TLS)"},
    {"tls-key", CONFIG_STRING, OFF(tls_key), 0, 0, "", CONFIG_RELOAD,
     "PEM private key of tls-cert"},
    {"tls-ca", CONFIG_STRING, OFF(tls_ca), 0, 0, "", CONFIG_RELOAD,
     "PEM CA certificates that client certificates must chain to"},
    {"tls-verify-client", CONFIG_BOOL, OFF(tls_verify_client), 0, 1, "false", CONFIG_RELOAD,
     "mutual TLS: refuse a TLS client without a certificate from tls-ca"},
    {"tls-only", CONFIG_BOOL, OFF(tls_only), 0, 1, "false", CONFIG_RELOAD,
     "refuse plain (non-TLS) connections on the TCP listener"},
    {"http-tls", CONFIG_BOOL, OFF(http_tls), 0, 1, "false", CONFIG_NONE,
     "the HTTP listener (metrics, dashboard) speaks HTTPS only, with tls-cert"},
    {"max-clients", CONFIG_SIZE, OFF(max_clients), 1, 1000000, "20000", CONFIG_RELOAD,
     "connections at once"},
    {"max-line", CONFIG_SIZE, OFF(max_line), 64, 1u << 30, "1048576", CONFIG_RELOAD,
     "longest request line in bytes (new connections)"},
    {"max-payload", CONFIG_SIZE, OFF(max_payload), 1, 1u << 30, "524288", CONFIG_RELOAD,
     "longest job payload in bytes, as compact JSON"},
    {"max-batch", CONFIG_SIZE, OFF(max_batch), 1, 1000000, "10000", CONFIG_RELOAD,
     "items in one enqueue_many"},
    {"max-claim-bytes", CONFIG_SIZE, OFF(max_claim_bytes), 1024, 1u << 30, "16777216",
     CONFIG_RELOAD, "payload bytes one claim (or stream refill) leases before it stops"},
    {"max-inflight", CONFIG_SIZE, OFF(max_inflight), 1, 1000000, "4096", CONFIG_RELOAD,
     "unanswered requests per connection before its reads pause"},
    {"max-output", CONFIG_SIZE, OFF(max_output), 4096, 1ULL << 40, "67108864", CONFIG_RELOAD,
     "bytes queued to one connection before it is dropped"},
    {"max-buffered", CONFIG_SIZE, OFF(max_buffered), 1u << 20, 1ULL << 40, "1073741824",
     CONFIG_RELOAD, "bytes held for all connections together before every read pauses"},
    {"idle-timeout-ms", CONFIG_U64, OFF(idle_timeout_ms), 0, 1ULL << 40, "600000", CONFIG_RELOAD,
     "close a connection idle this long (0 = never)"},
    {"auth-timeout-ms", CONFIG_U64, OFF(auth_timeout_ms), 100, 1ULL << 40, "10000", CONFIG_RELOAD,
     "with a token: close a connection that has not said hello in this long"},
    {"auth-backoff-ms", CONFIG_U64, OFF(auth_backoff_ms), 0, 3600000, "1000", CONFIG_RELOAD,
     "after 5 failed hellos from an address, refuse its hellos this long, doubling per failure "
     "(0 = never)"},
    {"max-unauthed", CONFIG_SIZE, OFF(max_unauthed), 1, 1000000, "256", CONFIG_RELOAD,
     "with a token: connections at once that have not said hello yet"},
    {"lease-ms", CONFIG_U64, OFF(lease_ms), 1, 1ULL << 40, "30000", CONFIG_RELOAD,
     "default lease of claim and stream"},
    {"retention-ms", CONFIG_U64, OFF(retention_ms), 0, 1ULL << 40, DAY_MS, CONFIG_RELOAD,
     "how long a completed job answers 'duplicate' (0 = delete at completion)"},
    {"max-attempts", CONFIG_INT, OFF(max_attempts), 0, 1000000, "5", CONFIG_RELOAD,
     "default attempts before a job is dead (0 = unlimited)"},
    {"upkeep-ms", CONFIG_U64, OFF(upkeep_ms), 10, 3600000, "1000", 0,
     "longest sleep of each queue's reaper and promoter"},
    {"spin-us", CONFIG_U64, OFF(spin_us), 0, 100000, "100", CONFIG_RELOAD,
     "after work, poll for more this long before sleeping (0 = sleep at once): lower latency "
     "at light load"},
};
const size_t config_nkeys = sizeof(config_keys) / sizeof(config_keys[0]);

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char *const fsync_names[] = {"always", "everysec"}; /* enum config_fsync */

/* The names a CONFIG_LEVEL or CONFIG_FSYNC value is spelled with (*n of
 * them; the value is the index). */
static const char *const *choice_names(const struct config_key *k, int *n)
{
    if (k->type == CONFIG_FSYNC) {
        *n = 2;
        return fsync_names;
    }
    *n = 4;
    return level_names;
}

const struct config_key *config_key_find(const char *name, size_t len)
{
    for (size_t i = 0; i < config_nkeys; i++)
        if (strlen(config_keys[i].name) == len && memcmp(config_keys[i].name, name, len) == 0)
            return &config_keys[i];
    return NULL;
}

static void *field(const struct config *c, const struct config_key *k)
{
    return (char *)c + k->offset;
}

static int parse_uint(const char *s, const struct config_key *k, uint64_t *out)
{
    char *end;
    if (!isdigit((unsigned char)s[0]))
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < k->min || v > k->max)
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"}, *const no[] = {"false", "no",
                                                                                "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(s, yes[i]) == 0 || strcmp(s, no[i]) == 0) {
            *out = strcmp(s, yes[i]) == 0;
            return 0;
        }
    }
    return -EINVAL;
}

static int parse_choice(const struct config_key *k, const char *s, int *out)
{
    int n;
    const char *const *names = choice_names(k, &n);
    for (int i = 0; i < n; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    return -EINVAL;
}

static int set_string(char **slot, const struct config_key *k, const char *value)
{
    char *v = NULL;
    if (value[0] != '\0' && !((k->flags & CONFIG_NONE) && strcmp(value, "none") == 0)) {
        if ((v = strdup(value)) == NULL)
            return -ENOMEM;
    }
    free(*slot);
    *slot = v;
    return 0;
}

const char *config_expected(const struct config_key *k, char *buf, size_t cap)
{
    if (k->type == CONFIG_BOOL)
        return "true or false";
    if (k->type == CONFIG_LEVEL)
        return "error, warn, info or debug";
    if (k->type == CONFIG_FSYNC)
        return "always or everysec";
    if (k->type == CONFIG_STRING)
        return "a string";
    if (k->type == CONFIG_ADDR)
        return "IP:PORT: an IPv4 address, [IPv6] or localhost, and a port in 1..65535";
    if (k->type == CONFIG_URL)
        return "redis://[:PASSWORD@]HOST[:PORT][/DB] or unix:///PATH[?db=N]";
    if (k->type == CONFIG_SEEDS)
        return "HOST:PORT[,HOST:PORT...] (at most 16; HOST a name, an IPv4 address or [IPv6])";
    snprintf(buf, cap, "an integer in %llu..%llu", (unsigned long long)k->min,
             (unsigned long long)k->max);
    return buf;
}

/* A string that is off ("" or "none" where allowed): nothing to check. */
static bool unset_text(const struct config_key *k, const char *value)
{
    return value[0] == '\0' || ((k->flags & CONFIG_NONE) && strcmp(value, "none") == 0);
}

int config_set(struct config *c, const struct config_key *k, const char *value)
{
    return config_set_why(c, k, value, NULL, 0);
}

int config_set_why(struct config *c, const struct config_key *k, const char *value, char *why,
                   size_t cap)
{
    void *f = field(c, k);
    uint64_t v = 0;
    int rc = 0;
    char tmp[64], url[1024];
    struct sockaddr_storage sa;
    struct redis_url pc = {0};

    switch (k->type) {
    case CONFIG_STRING:
        return set_string(f, k, value);
    case CONFIG_ADDR:
        if (!unset_text(k, value) && addr_parse(value, &sa, why, cap) != 0)
            return -EINVAL;
        return set_string(f, k, value);
    case CONFIG_URL:
        if (!unset_text(k, value) && config_parse_redis(value, &pc, url, sizeof(url)) != 0) {
            rc = -EINVAL;
            break;
        }
        return set_string(f, k, value);
    case CONFIG_SEEDS: {
        struct config_seed seeds[CONFIG_SEEDS_MAX];
        if (!unset_text(k, value) && config_parse_seeds(value, seeds, url, sizeof(url)) < 0) {
            rc = -EINVAL;
            break;
        }
        return set_string(f, k, value);
    }
    case CONFIG_SIZE:
    case CONFIG_U64:
    case CONFIG_INT:
        if ((rc = parse_uint(value, k, &v)) != 0)
            break;
        if (k->type == CONFIG_SIZE)
            *(size_t *)f = (size_t)v;
        else if (k->type == CONFIG_U64)
            *(uint64_t *)f = v;
        else
            *(int *)f = (int)v;
        break;
    case CONFIG_BOOL:
        rc = parse_bool(value, f);
        break;
    case CONFIG_LEVEL:
    case CONFIG_FSYNC:
        rc = parse_choice(k, value, f);
        break;
    }
    if (rc == -EINVAL && why != NULL)
        snprintf(why, cap, "expected %s", config_expected(k, tmp, sizeof(tmp)));
    return rc;
}

int config_set_origin(struct config *c, const struct config_key *k, const char *origin)
{
    size_t i = (size_t)(k - config_keys);
    char *o = strdup(origin);
    if (o == NULL)
        return -ENOMEM;
    free(c->origin[i]);
    c->origin[i] = o;
    return 0;
}

const char *config_origin(const struct config *c, const struct config_key *k)
{
    const char *o = c->origin[k - config_keys];
    return o != NULL ? o : "default";
}

void config_defaults(struct config *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < config_nkeys; i++)
        if (config_set(c, &config_keys[i], config_keys[i].dflt) != 0)
            abort(); /* a bad default is a bug the unit test catches */
}

/* Strings of every kind: plain, addresses, URLs. */
static bool is_string(const struct config_key *k)
{
    return k->type == CONFIG_STRING || k->type == CONFIG_ADDR || k->type == CONFIG_URL ||
           k->type == CONFIG_SEEDS;
}

void config_deinit(struct config *c)
{
    for (size_t i = 0; i < config_nkeys; i++) {
        if (is_string(&config_keys[i])) {
            char **slot = field(c, &config_keys[i]);
            free(*slot);
            *slot = NULL;
        }
        free(c->origin[i]);
        c->origin[i] = NULL;
    }
    free(c->redis_password);
    c->redis_password = NULL;
}

/* A string setting's text, as the config file would spell it. */
static const char *string_text(const struct config *c, const struct config_key *k)
{
    const char *s = *(char *const *)field(c, k);
    return s != NULL ? s : (k->flags & CONFIG_NONE) ? "none" : "";
}

const char *config_format(const struct config *c, const struct config_key *k, char *buf, size_t cap)
{
    const void *f = field(c, k);
    switch (k->type) {
    case CONFIG_STRING:
    case CONFIG_ADDR:
    case CONFIG_URL:
    case CONFIG_SEEDS:
        snprintf(buf, cap, "%s", string_text(c, k));
        break;
    case CONFIG_SIZE:
        snprintf(buf, cap, "%zu", *(const size_t *)f);
        break;
    case CONFIG_U64:
        snprintf(buf, cap, "%llu", (unsigned long long)*(const uint64_t *)f);
        break;
    case CONFIG_INT:
        snprintf(buf, cap, "%d", *(const int *)f);
        break;
    case CONFIG_BOOL:
        snprintf(buf, cap, "%s", *(const bool *)f ? "true" : "false");
        break;
    case CONFIG_LEVEL:
    case CONFIG_FSYNC: {
        int n;
        snprintf(buf, cap, "%s", choice_names(k, &n)[*(const int *)f]);
        break;
    }
    }
    return buf;
}

/* Strings are compared and copied whole, not through a formatting
 * buffer: a long token must not be cut short (and a change past the
 * buffer's end must not go unseen) on reload. */
bool config_equal(const struct config *a, const struct config *b, const struct config_key *k)
{
    if (is_string(k))
        return strcmp(string_text(a, k), string_text(b, k)) == 0;
    char x[64], y[64];
    return strcmp(config_format(a, k, x, sizeof(x)), config_format(b, k, y, sizeof(y))) == 0;
}

int config_copy(struct config *dst, const struct config *src, const struct config_key *k)
{
    if (is_string(k))
        return config_set(dst, k, string_text(src, k));
    char buf[64];
    return config_set(dst, k, config_format(src, k, buf, sizeof(buf)));
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* One "name = value" line (comments and blanks already skipped). */
static int load_line(struct config *c, char *line, const char *path, int lineno, char *err,
                     size_t errlen)
{
    char *eq = strchr(line, '=');
    if (eq == NULL) {
        snprintf(err, errlen, "%s:%d: expected 'name = value'", path, lineno);
        return -EINVAL;
    }
    *eq = '\0';
    char *name = trim(line), *value = trim(eq + 1);
    size_t vlen = strlen(value);
    /* A value may be quoted, so that it can be empty or end in spaces. */
    if (vlen >= 2 && value[0] == '"' && value[vlen - 1] == '"') {
        value[vlen - 1] = '\0';
        value++;
    }
    const struct config_key *k = config_key_find(name, strlen(name));
    char why[160], where[4200];
    if (k == NULL) {
        snprintf(err, errlen, "%s:%d: unknown key '%s'", path, lineno, name);
        return -EINVAL;
    }
    int rc = config_set_why(c, k, value, why, sizeof(why));
    if (rc == -EINVAL)
        snprintf(err, errlen, "%s:%d: bad value for '%s': '%s' (%s)", path, lineno, name,
                 (k->flags & CONFIG_SECRET) ? "..." : value, why);
    snprintf(where, sizeof(where), "%s:%d", path, lineno);
    if (rc == 0)
        rc = config_set_origin(c, k, where);
    if (rc != 0 && rc != -EINVAL)
        snprintf(err, errlen, "%s:%d: %s", path, lineno, strerror(-rc));
    return rc;
}

int config_load(struct config *c, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    int lineno = 0, rc = 0;

    if (f == NULL) {
        rc = -errno;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return rc;
    }
    while (rc == 0 && fgets(line, sizeof(line), f) != NULL) {
        lineno++;
        if (strchr(line, '\n') == NULL && !feof(f)) {
            snprintf(err, errlen, "%s:%d: line too long", path, lineno);
            rc = -EINVAL;
            break;
        }
        char *s = trim(line);
        if (s[0] == '\0' || s[0] == '#')
            continue;
        rc = load_line(c, s, path, lineno, err, errlen);
    }
    if (rc == 0 && ferror(f)) {
        rc = -EIO;
        snprintf(err, errlen, "%s: read error", path);
    }
    fclose(f);
    return rc;
}

bool config_loopback(const char *listen)
{
    return addr_loopback(listen);
}

int config_parse_redis(const char *url, struct redis_url *pc, char *buf, size_t cap)
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
    /* The host may be a name: main.c resolves it once, before the loop
     * runs (hiredis would resolve it with a blocking getaddrinfo at every
     * reconnect). localhost needs no lookup. */
    if (host[0] == '\0')
        return -EINVAL;
    if (strcmp(host, "localhost") == 0)
        host = "127.0.0.1";
    pc->host = host;
    return 0;
}

/* One HOST:PORT of a seed list, in place (s is NUL-terminated). */
static int parse_seed(char *s, struct config_seed *out)
{
    char *colon = strrchr(s, ':'), *end;
    if (colon == NULL || colon == s)
        return -EINVAL;
    *colon = '\0';
    long port = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port < 1 || port > 65535)
        return -EINVAL;
    if (s[0] == '[') { /* [IPv6] */
        size_t n = strlen(s);
        if (n < 3 || s[n - 1] != ']')
            return -EINVAL;
        s[n - 1] = '\0';
        s++;
        if (strspn(s, "0123456789abcdefABCDEF:.") != strlen(s))
            return -EINVAL;
    } else if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
               strlen(s)) {
        return -EINVAL;
    }
    out->host = strcmp(s, "localhost") == 0 ? "127.0.0.1" : s;
    out->port = (int)port;
    return 0;
}

int config_parse_seeds(const char *list, struct config_seed *out, char *buf, size_t cap)
{
    if (strlen(list) >= cap || list[0] == '\0')
        return -EINVAL;
    strcpy(buf, list);
    int n = 0;
    for (char *s = buf, *comma; s != NULL; s = comma) {
        comma = strchr(s, ',');
        if (comma != NULL)
            *comma++ = '\0';
        if (n == CONFIG_SEEDS_MAX || parse_seed(s, &out[n]) != 0)
            return -EINVAL;
        n++;
    }
    return n;
}

/* --- secrets from files ----------------------------------------------------- */

#define SECRET_MAX 4096 /* the longest token hello takes (PROTOCOL.md 5.1) */

/* Read a secret (a token, a password) from path into a new string at *out:
 * the file's text less one trailing newline. It must be a regular file of
 * 1..SECRET_MAX bytes with no control bytes or spaces, so that a stray
 * blank line or a binary file is an error at start and not a token nobody
 * can type. A file other users may read is allowed but warned about. */
static int read_secret(const char *path, const char *what, char **out, char *err, size_t errlen)
{
    char buf[SECRET_MAX + 2];
    struct stat st;
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "cannot read the %s from %s: %s", what, path, strerror(errno));
        return -EINVAL;
    }
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    int bad = ferror(f) || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode);
    fclose(f);
    if (bad) {
        snprintf(err, errlen, "cannot read the %s from %s: not a readable regular file", what,
                 path);
        return -EINVAL;
    }
    if (n > 0 && buf[n - 1] == '\n')
        n--;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    buf[n] = '\0';
    if (n == 0 || n > SECRET_MAX) {
        snprintf(err, errlen, "the %s in %s must be 1..%d bytes on one line", what, path,
                 SECRET_MAX);
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)buf[i] <= ' ' || buf[i] == 0x7f) {
            snprintf(err, errlen, "the %s in %s has a space or a control byte at byte %zu", what,
                     path, i + 1);
            return -EINVAL;
        }
    }
    if (st.st_mode & S_IROTH) {
        char q[600], wq[64];
        log_event(LOG_WARN, "secret file is readable by every user", "what=%s file=%s",
                  log_quote(what, wq, sizeof(wq)), log_quote(path, q, sizeof(q)));
    }
    if ((*out = strdup(buf)) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

/* The credential systemd's LoadCredential= passes as name, or NULL. */
static const char *credential(const char *name, char *buf, size_t cap)
{
    const char *dir = getenv("CREDENTIALS_DIRECTORY");
    struct stat st;
    if (dir == NULL || dir[0] == '\0')
        return NULL;
    snprintf(buf, cap, "%s/%s", dir, name);
    return stat(buf, &st) == 0 ? buf : NULL;
}

/* --- TLS settings ------------------------------------------------------------ */

/* The TLS keys that only mean something together. The files themselves
 * are read by the server (util/tls.h), once at start and at each SIGHUP. */
static int finish_tls(struct config *c, char *err, size_t errlen)
{
    static const struct {
        size_t need_off; /* this key... */
        size_t have_off; /* ...is needed when this one is set */
        bool have_bool;
        const char *need, *have;
    } rules[] = {
        {OFF(tls_key), OFF(tls_cert), false, "tls-key", "tls-cert"},
        {OFF(tls_cert), OFF(tls_key), false, "tls-cert", "tls-key"},
        {OFF(tls_cert), OFF(tls_ca), false, "tls-cert", "tls-ca"},
        {OFF(tls_ca), OFF(tls_verify_client), true, "tls-ca", "tls-verify-client"},
        {OFF(tls_cert), OFF(tls_only), true, "tls-cert", "tls-only"},
        {OFF(tls_cert), OFF(http_tls), true, "tls-cert", "http-tls"},
    };
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        const char *base = (const char *)c;
        bool have = rules[i].have_bool ? *(const bool *)(base + rules[i].have_off)
                                       : *(char *const *)(base + rules[i].have_off) != NULL;
        if (have && *(char *const *)(base + rules[i].need_off) == NULL) {
            const struct config_key *k = config_key_find(rules[i].have, strlen(rules[i].have));
            snprintf(err, errlen, "%s: %s needs %s", config_origin(c, k), rules[i].have,
                     rules[i].need);
            return -EINVAL;
        }
    }
    return 0;
}

int config_finish(struct config *c, char *err, size_t errlen)
{
    const struct config_key *tk = config_key_find("token", 5),
                            *tf = config_key_find("token-file", 10),
                            *rk = config_key_find("redis", 5),
                            *pf = config_key_find("redis-password-file", 19);
    char why[1200], path[4200];
    struct redis_url pc = {0};
    char url[1024];
    int rc = 0;

    if (c->token != NULL && c->token_file != NULL) {
        snprintf(err, errlen, "%s: token-file and token (%s) are both set: keep one",
                 config_origin(c, tf), config_origin(c, tk));
        return -EINVAL;
    }
    const char *tpath = c->token_file;
    if (c->token == NULL && tpath == NULL && (tpath = credential("emqd.token", path, sizeof(path))))
        log_event(LOG_INFO, "token from a systemd credential", "credential=emqd.token");
    if (tpath != NULL && (rc = read_secret(tpath, "token", &c->token, why, sizeof(why))) != 0) {
        snprintf(err, errlen, "%s: %s", c->token_file ? config_origin(c, tf) : "credential", why);
        return rc;
    }

    const struct config_key *ck = config_key_find("redis-cluster", 13);
    if (c->redis != NULL && c->redis_cluster != NULL) {
        snprintf(err, errlen, "%s: redis-cluster and redis (%s) are both set: keep one",
                 config_origin(c, ck), config_origin(c, rk));
        return -EINVAL;
    }
    /* A cluster is an external backend like redis: the checks and the
     * password that apply to redis apply to it. */
    bool external = c->redis != NULL || c->redis_cluster != NULL;
    const struct config_key *fk = config_key_find("fsync", 5);
    if (c->redis == NULL && c->redis_cluster != NULL && c->origin[fk - config_keys] != NULL) {
        snprintf(err, errlen,
                 "%s: fsync applies to the embedded backend only; with redis-cluster (%s), set "
                 "appendfsync on its nodes (README: durability)",
                 config_origin(c, fk), config_origin(c, ck));
        return -EINVAL;
    }
    if (c->redis != NULL && c->origin[fk - config_keys] != NULL) {
        snprintf(err, errlen,
                 "%s: fsync applies to the embedded backend only; with redis (%s), set "
                 "appendfsync on that server (README: durability)",
                 config_origin(c, fk), config_origin(c, rk));
        return -EINVAL;
    }
    const char *ppath = c->redis_password_file;
    if (ppath != NULL && !external) {
        snprintf(err, errlen,
                 "%s: redis-password-file needs redis or redis-cluster (the embedded backend has "
                 "none)",
                 config_origin(c, pf));
        return -EINVAL;
    }
    if (c->redis != NULL && config_parse_redis(c->redis, &pc, url, sizeof(url)) == 0 &&
        pc.password != NULL && ppath != NULL) {
        snprintf(err, errlen, "%s: redis-password-file and a password in redis (%s): keep one",
                 config_origin(c, pf), config_origin(c, rk));
        return -EINVAL;
    }
    if (ppath == NULL && external && pc.password == NULL)
        ppath = credential("emqd.redis-password", path, sizeof(path));
    if (ppath != NULL &&
        (rc = read_secret(ppath, "Redis password", &c->redis_password, why, sizeof(why))) != 0) {
        snprintf(err, errlen, "%s: %s",
                 c->redis_password_file ? config_origin(c, pf) : "credential", why);
        return rc;
    }
    return finish_tls(c, err, errlen);
}
