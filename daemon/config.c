/* config: the settings table, the file parser, and the backend URL. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

#define OFF(field) offsetof(struct config, field)
#define DAY_MS     "86400000"

/* Every setting, in the order of config/emqd.conf and --help. Bounds keep
 * a typo from becoming a daemon that cannot work (a 0-byte line, a pool
 * of 10000 connections). */
const struct config_key config_keys[] = {
    {"listen", CONFIG_STRING, OFF(listen), 0, 0, "127.0.0.1:7711", CONFIG_NONE,
     "TCP address HOST:PORT ('none' = no TCP)"},
    {"unix", CONFIG_STRING, OFF(unix_path), 0, 0, "", 0, "also listen on this unix socket"},
    {"allow-insecure", CONFIG_BOOL, OFF(allow_insecure), 0, 1, "false", 0,
     "allow a non-loopback listen without a token"},
    {"token", CONFIG_STRING, OFF(token), 0, 0, "", CONFIG_RELOAD | CONFIG_SECRET,
     "clients must 'hello' with this token ('' = no authentication)"},
    {"redis", CONFIG_STRING, OFF(redis), 0, 0, "", 0,
     "redis://[:PASSWORD@]IP:PORT[/DB] or unix:///PATH[?db=N] ('' = embedded)"},
    {"data-dir", CONFIG_STRING, OFF(data_dir), 0, 0, "emqd-data", 0,
     "the embedded redis-server's directory"},
    {"redis-bin", CONFIG_STRING, OFF(redis_bin), 0, 0, "redis-server", 0,
     "the redis-server binary for the embedded backend"},
    {"pool", CONFIG_INT, OFF(pool_size), 1, 64, "4", 0, "Redis connections"},
    {"redis-timeout-ms", CONFIG_U64, OFF(redis_timeout_ms), 10, 600000, "2000", 0,
     "deadline of one backend call"},
    {"log-level", CONFIG_LEVEL, OFF(log_level), 0, 3, "info", CONFIG_RELOAD,
     "error, warn, info or debug"},
    {"metrics", CONFIG_STRING, OFF(metrics), 0, 0, "none", CONFIG_NONE,
     "HOST:PORT serving Prometheus /metrics ('none' = off)"},
    {"metrics-groups", CONFIG_SIZE, OFF(metrics_groups), 0, 1000, "10", CONFIG_RELOAD,
     "groups per queue described in /metrics (the deepest)"},
    {"max-clients", CONFIG_SIZE, OFF(max_clients), 1, 1000000, "20000", CONFIG_RELOAD,
     "connections at once"},
    {"max-line", CONFIG_SIZE, OFF(max_line), 64, 1u << 30, "1048576", CONFIG_RELOAD,
     "longest request line in bytes (new connections)"},
    {"max-payload", CONFIG_SIZE, OFF(max_payload), 1, 1u << 30, "524288", CONFIG_RELOAD,
     "longest job payload in bytes, as compact JSON"},
    {"max-batch", CONFIG_SIZE, OFF(max_batch), 1, 1000000, "10000", CONFIG_RELOAD,
     "items in one enqueue_many"},
    {"max-inflight", CONFIG_SIZE, OFF(max_inflight), 1, 1000000, "4096", CONFIG_RELOAD,
     "unanswered requests per connection before its reads pause"},
    {"max-output", CONFIG_SIZE, OFF(max_output), 4096, 1ULL << 40, "67108864", CONFIG_RELOAD,
     "bytes queued to one connection before it is dropped"},
    {"idle-timeout-ms", CONFIG_U64, OFF(idle_timeout_ms), 0, 1ULL << 40, "600000", CONFIG_RELOAD,
     "close a connection idle this long (0 = never)"},
    {"lease-ms", CONFIG_U64, OFF(lease_ms), 1, 1ULL << 40, "30000", CONFIG_RELOAD,
     "default lease of claim and stream"},
    {"retention-ms", CONFIG_U64, OFF(retention_ms), 1, 1ULL << 40, DAY_MS, CONFIG_RELOAD,
     "how long a completed job answers 'duplicate'"},
    {"max-attempts", CONFIG_INT, OFF(max_attempts), 0, 1000000, "5", CONFIG_RELOAD,
     "default attempts before a job is dead (0 = unlimited)"},
    {"upkeep-ms", CONFIG_U64, OFF(upkeep_ms), 10, 3600000, "1000", 0,
     "longest sleep of each queue's reaper and promoter"},
};
const size_t config_nkeys = sizeof(config_keys) / sizeof(config_keys[0]);

static const char *const level_names[] = {"error", "warn", "info", "debug"};

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

static int parse_level(const char *s, int *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
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
    if (k->type == CONFIG_STRING)
        return "a string";
    snprintf(buf, cap, "an integer in %llu..%llu", (unsigned long long)k->min,
             (unsigned long long)k->max);
    return buf;
}

int config_set(struct config *c, const struct config_key *k, const char *value)
{
    void *f = field(c, k);
    uint64_t v = 0;
    int rc = 0;

    switch (k->type) {
    case CONFIG_STRING:
        return set_string(f, k, value);
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
        rc = parse_level(value, f);
        break;
    }
    return rc;
}

void config_defaults(struct config *c)
{
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < config_nkeys; i++)
        if (config_set(c, &config_keys[i], config_keys[i].dflt) != 0)
            abort(); /* a bad default is a bug the unit test catches */
}

void config_deinit(struct config *c)
{
    for (size_t i = 0; i < config_nkeys; i++) {
        if (config_keys[i].type == CONFIG_STRING) {
            char **slot = field(c, &config_keys[i]);
            free(*slot);
            *slot = NULL;
        }
    }
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
        snprintf(buf, cap, "%s", level_names[*(const int *)f]);
        break;
    }
    return buf;
}

/* Strings are compared and copied whole, not through a formatting
 * buffer: a long token must not be cut short (and a change past the
 * buffer's end must not go unseen) on reload. */
bool config_equal(const struct config *a, const struct config *b, const struct config_key *k)
{
    if (k->type == CONFIG_STRING)
        return strcmp(string_text(a, k), string_text(b, k)) == 0;
    char x[64], y[64];
    return strcmp(config_format(a, k, x, sizeof(x)), config_format(b, k, y, sizeof(y))) == 0;
}

int config_copy(struct config *dst, const struct config *src, const struct config_key *k)
{
    if (k->type == CONFIG_STRING)
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
    char why[64];
    if (k == NULL) {
        snprintf(err, errlen, "%s:%d: unknown key '%s'", path, lineno, name);
        return -EINVAL;
    }
    int rc = config_set(c, k, value);
    if (rc == -EINVAL)
        snprintf(err, errlen, "%s:%d: bad value for '%s': '%s' (expected %s)", path, lineno, name,
                 (k->flags & CONFIG_SECRET) ? "..." : value, config_expected(k, why, sizeof(why)));
    else if (rc != 0)
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
    return listen == NULL || strncmp(listen, "127.", 4) == 0 || strncmp(listen, "[::1]:", 6) == 0;
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
