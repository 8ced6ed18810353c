/* emqd: the echomq daemon. Reads its settings (defaults, then --config
 * FILE, then flags: flags win), picks the backend (a Redis URL, or an
 * embedded redis-server it supervises), and runs the loop until SIGTERM /
 * SIGINT. SIGHUP reloads the settings that can change live. systemd hears
 * READY=1 once clients are let in and STOPPING=1 when the stop begins. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include "client_tls.h"
#include "log.h"
#include "metrics.h"
#include "perm.h"
#include "server.h"
#include "spin.h"
#include "supervise.h"

/* A flag given on the command line, applied over the file (and again
 * over it at each reload, so flags keep winning). */
struct flag {
    const struct config_key *key;
    const char *value;
};

/* What the command line said. */
struct args {
    const char *config_path;
    struct flag flags[128];
    size_t nflags;
};

static void usage(FILE *out)
{
    char opt[64];
    fprintf(out, "usage: emqd [--config FILE] [options]\n"
                 "Every option is also a config file key (name = value); flags win.\n"
                 "  --config FILE                 read settings from FILE\n");
    for (size_t i = 0; i < config_nkeys; i++) {
        const struct config_key *k = &config_keys[i];
        snprintf(opt, sizeof(opt), "--%s%s", k->name, k->type == CONFIG_BOOL ? "" : " VALUE");
        fprintf(out, "  %-29s %s (default: %s)%s\n", opt, k->help, k->dflt[0] ? k->dflt : "''",
                (k->flags & CONFIG_RELOAD) ? " [SIGHUP]" : "");
    }
    fprintf(out, "  --verbose                     same as --log-level debug\n"
                 "  --version, --help\n");
}

static int parse_args(int argc, char **argv, struct args *a)
{
    enum { O_CONFIG = 1, O_VERSION, O_HELP, O_VERBOSE, O_KEY = 1000 };
    static struct option opts[sizeof(a->flags) / sizeof(a->flags[0]) + 8];
    size_t n = 0;
    int o, idx;

    for (size_t i = 0; i < config_nkeys; i++)
        opts[n++] =
            (struct option){config_keys[i].name,
                            config_keys[i].type == CONFIG_BOOL ? no_argument : required_argument,
                            NULL, O_KEY + (int)i};
    opts[n++] = (struct option){"config", required_argument, NULL, O_CONFIG};
    opts[n++] = (struct option){"verbose", no_argument, NULL, O_VERBOSE};
    opts[n++] = (struct option){"version", no_argument, NULL, O_VERSION};
    opts[n++] = (struct option){"help", no_argument, NULL, O_HELP};
    opts[n] = (struct option){NULL, 0, NULL, 0};
    while ((o = getopt_long(argc, argv, "l:vh", opts, &idx)) != -1) {
        const struct config_key *k = NULL;
        const char *value = optarg;
        if (o == 'l')
            k = config_key_find("listen", 6);
        else if (o == 'v' || o == O_VERBOSE)
            k = config_key_find("log-level", 9), value = "debug";
        else if (o >= O_KEY)
            k = &config_keys[o - O_KEY];
        else if (o == O_CONFIG)
            a->config_path = optarg;
        else if (o == O_VERSION) {
            printf("emqd %s\n", EMQ_VERSION);
            exit(0);
        } else if (o == 'h' || o == O_HELP) {
            usage(stdout);
            exit(0);
        } else {
            /* getopt has said what was wrong; the full help would scroll
             * it away. */
            fprintf(stderr, "try 'emqd --help'\n");
            return -1;
        }
        if (k != NULL && a->nflags < sizeof(a->flags) / sizeof(a->flags[0]))
            a->flags[a->nflags++] = (struct flag){k, k->type == CONFIG_BOOL ? "true" : value};
    }
    if (optind < argc) {
        fprintf(stderr, "emqd: unexpected argument: %s\ntry 'emqd --help'\n", argv[optind]);
        return -1;
    }
    return 0;
}

/* Defaults, the file, the flags: into c. 0, or -EINVAL with err set. */
static int build_config(const struct args *a, struct config *c, char *err, size_t errlen)
{
    config_defaults(c);
    if (a->config_path != NULL && config_load(c, a->config_path, err, errlen) != 0)
        return -EINVAL;
    for (size_t i = 0; i < a->nflags; i++) {
        const struct flag *f = &a->flags[i];
        char why[160], where[80];
        if (config_set_why(c, f->key, f->value, why, sizeof(why)) != 0) {
            snprintf(err, errlen, "bad value for --%s: '%s' (%s)", f->key->name,
                     (f->key->flags & CONFIG_SECRET) ? "..." : f->value, why);
            return -EINVAL;
        }
        snprintf(where, sizeof(where), "--%s", f->key->name);
        if (config_set_origin(c, f->key, where) != 0) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
    }
    return config_finish(c, err, errlen);
}

/* The daemon's parts, for the signal and state callbacks. */
struct emqd {
    struct server srv;
    struct supervise *sup;
    struct metrics *metrics;
    struct args args;
    struct config cfg;
    uv_signal_t sighup;
    bool ready; /* READY=1 was sent: a reload may say RELOADING / READY */
    char url[1024];
    char redis_ip[INET6_ADDRSTRLEN]; /* the redis URL's host, resolved */
    /* redis-cluster's seeds, resolved. */
    struct pool_seed seeds[CONFIG_SEEDS_MAX];
    char seed_ip[CONFIG_SEEDS_MAX][INET6_ADDRSTRLEN];
};

static void sup_stopped_cb(void *priv)
{
    (void)priv;
}

static void server_stopped(struct server *s)
{
    struct emqd *d = (struct emqd *)s;
    if (d->sup != NULL)
        supervise_stop(d->sup, sup_stopped_cb, d);
    d->sup = NULL;
    uv_close((uv_handle_t *)&d->sighup, NULL);
    s->tokens = tokens_free(s->tokens);
    backoff_deinit(&s->backoff);
    log_msg(LOG_INFO, "stopped");
}

static void stop(struct emqd *d)
{
    if (d->srv.stopping)
        return;
    sd_notify(0, "STOPPING=1");
    d->metrics = metrics_free(d->metrics);
    server_stop(&d->srv);
}

static void signal_cb(uv_signal_t *h, int sig)
{
    struct emqd *d = h->data;
    log_event(LOG_INFO, "shutting down", "signal=%d", sig);
    stop(d);
}

/* Apply one changed key: live if it can change live, else say so. */
static void reload_key(struct emqd *d, const struct config *next, const struct config_key *k)
{
    char v[256], q[300];
    config_format(next, k, v, sizeof(v));
    if (!(k->flags & CONFIG_RELOAD)) {
        log_event(LOG_WARN, "changed setting needs a restart; keeping the running value", "key=%s",
                  k->name);
        return;
    }
    if (strcmp(k->name, "token") == 0 && next->token == NULL && !config_loopback(d->cfg.listen) &&
        !d->cfg.allow_insecure) {
        log_event(LOG_WARN, "refusing to drop the token on a non-loopback listen", "key=token");
        return;
    }
    if (strcmp(k->name, "tokens-file") == 0 && next->tokens_file == NULL && d->cfg.token == NULL &&
        !config_loopback(d->cfg.listen) && !d->cfg.allow_insecure) {
        log_event(LOG_WARN, "refusing to drop the tokens file on a non-loopback listen",
                  "key=tokens-file");
        return;
    }
    if (config_copy(&d->cfg, next, k) != 0) {
        log_event(LOG_ERROR, "cannot apply setting", "key=%s", k->name);
        return;
    }
    log_event(LOG_INFO, "setting reloaded", "key=%s value=%s", k->name,
              (k->flags & CONFIG_SECRET) ? "(hidden)" : log_quote(v, q, sizeof(q)));
    if (k->offset == offsetof(struct config, log_level))
        log_threshold = (enum log_level)d->cfg.log_level;
    if (k->offset == offsetof(struct config, spin_us))
        spin_set_budget(d->cfg.spin_us);
}

/* Read the tokens file named by the running settings into a new table:
 * 0, or -EINVAL with err set (nothing changed). NULL when none is set. */
static int load_tokens(const struct config *c, struct tokens **out, char *err, size_t errlen)
{
    *out = NULL;
    if (c->tokens_file == NULL)
        return 0;
    return tokens_load(c->tokens_file, out, err, errlen) != 0 ? -EINVAL : 0;
}

/* At every reload, changed or not (its lines may have): a bad file keeps
 * the running table. */
static void reload_tokens(struct emqd *d)
{
    struct tokens *t;
    char err[512], q[600];
    if (load_tokens(&d->cfg, &t, err, sizeof(err)) != 0) {
        log_event(LOG_ERROR, "tokens file reload failed; keeping the running tokens", "error=%s",
                  log_quote(err, q, sizeof(q)));
        return;
    }
    if (t == NULL && d->srv.tokens == NULL)
        return;
    perm_set_tokens(&d->srv, t);
}

static void sighup_cb(uv_signal_t *h, int sig)
{
    struct emqd *d = h->data;
    struct config next;
    char err[512], q[600];
    size_t changed = 0;
    (void)sig;
    if (d->srv.stopping) {
        log_msg(LOG_INFO, "SIGHUP while stopping: not reloading");
        return;
    }
    /* Before clients are let in, systemd must not hear READY=1 from here. */
    if (d->ready)
        sd_notify(0, "RELOADING=1");
    /* A small local file read once per operator's SIGHUP: the one disk
     * read after start-up, accepted for the sake of live reload. */
    if (build_config(&d->args, &next, err, sizeof(err)) != 0) {
        log_event(LOG_ERROR, "reload failed; keeping the running settings", "error=%s",
                  log_quote(err, q, sizeof(q)));
    } else {
        for (size_t i = 0; i < config_nkeys; i++) {
            if (!config_equal(&d->cfg, &next, &config_keys[i])) {
                reload_key(d, &next, &config_keys[i]);
                changed++;
            }
        }
        reload_tokens(d);
        log_event(LOG_INFO, "reloaded", "changed=%zu", changed);
        /* The certificate files are read again even when their names did
         * not change: a renewal replaces them in place. */
        client_tls_load(&d->srv);
    }
    config_deinit(&next);
    if (d->ready)
        sd_notify(0, "READY=1");
}

static void sup_fail_cb(void *priv, int err)
{
    struct emqd *d = priv;
    log_event(LOG_ERROR, "embedded redis-server keeps failing: stopping", "error=%s",
              uv_err_name(err));
    d->srv.exit_code = 1;
    stop(d);
}

/* Clients are let in (server.c): the metrics endpoint opens, systemd is
 * told. */
static int ready_cb(struct server *s)
{
    struct emqd *d = (struct emqd *)s;
    if (d->cfg.metrics != NULL && metrics_new(s, d->cfg.metrics, &d->metrics) != 0) {
        s->exit_code = 1;
        stop(d);
        return -1;
    }
    d->ready = true;
    sd_notify(0, "READY=1\nSTATUS=accepting clients");
    return 0;
}

/* What keeps strangers out of the TCP listener, as the start-up log
 * names it: tls+token, mtls, mtls+token (tls-only), token+tls (TLS
 * offered, plain allowed), token (in clear), or none. */
static const char *protection(const struct config *c, bool mtls)
{
    /* A tokens file is tokens too: every hello must carry one of its lines. */
    bool token = c->token != NULL || c->tokens_file != NULL;
    if (mtls)
        return token ? "mtls+token" : "mtls";
    if (token)
        return c->tls_only ? "tls+token" : c->tls_cert != NULL ? "token+tls" : "token";
    return c->tls_cert != NULL ? "tls-without-auth" : "none";
}

/* Refuse an open door: beyond loopback, a token, client certificates
 * on a tls-only listener, or an explicit allow-insecure is needed. Says which at start either way.
 */
static int check_exposure(const struct config *c)
{
    /* The metrics endpoint has no authentication: its labels name queues
     * and groups (tenants). Beyond loopback, say so. */
    if (c->metrics != NULL && !config_loopback(c->metrics))
        log_event(LOG_WARN,
                  "metrics endpoint beyond loopback: it is unauthenticated and names queues and "
                  "groups",
                  "metrics=%s", c->metrics);
    /* Client certificates on a listener that takes nothing else keep
     * strangers out as a token does. */
    bool mtls = c->tls_cert != NULL && c->tls_verify_client && c->tls_only;
    log_event(LOG_INFO, "protection", "listen=%s protection=%s", c->listen ? c->listen : "none",
              protection(c, mtls));
    if ((c->token != NULL || c->tokens_file != NULL) && c->tls_cert == NULL &&
        !config_loopback(c->listen))
        log_event(LOG_WARN,
                  "token without TLS beyond loopback: the token and every payload cross the "
                  "network in clear (set tls-cert and tls-key)",
                  "listen=%s", c->listen);
    if (c->token != NULL || c->tokens_file != NULL || mtls)
        return 0;
    if (config_loopback(c->listen)) {
        log_event(LOG_WARN, "no token: listening on loopback only", "listen=%s",
                  c->listen ? c->listen : "none");
        return 0;
    }
    if (!c->allow_insecure) {
        log_event(LOG_ERROR,
                  "refusing to listen on a non-loopback address without a token (set token or "
                  "token-file, client certificates: tls-verify-client with tls-only, or "
                  "allow-insecure = true)",
                  "listen=%s origin=%s", c->listen, config_origin(c, config_key_find("listen", 6)));
        return -1;
    }
    log_event(LOG_WARN, "no token and a non-loopback listen: anyone who can reach it can use it",
              "listen=%s", c->listen);
    return 0;
}

/* The pool reaches Redis by IP (hiredis would resolve a name with a
 * blocking getaddrinfo on the loop, at every reconnect): a host name in
 * the URL (or a seed of redis-cluster, key) is resolved here into ip,
 * once, before the loop runs. A Redis that moves to another address
 * needs a restart of emqd. */
static int resolve_host(struct emqd *d, const char *key, const char **host,
                        char ip[INET6_ADDRSTRLEN])
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    unsigned char bin[sizeof(struct in6_addr)];
    char q[300];
    if (inet_pton(AF_INET, *host, bin) == 1 || inet_pton(AF_INET6, *host, bin) == 1)
        return 0;
    int rc = getaddrinfo(*host, NULL, &hints, &res);
    if (rc != 0) {
        char err[600];
        snprintf(err, sizeof(err), "%s: cannot resolve the redis host '%s': %s",
                 config_origin(&d->cfg, config_key_find(key, strlen(key))), *host,
                 gai_strerror(rc));
        log_event(LOG_ERROR, "bad configuration", "error=%s", log_quote(err, q, sizeof(q)));
        return -EINVAL;
    }
    const void *a = res->ai_family == AF_INET6
                        ? (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr
                        : (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;
    inet_ntop(res->ai_family, a, ip, INET6_ADDRSTRLEN);
    freeaddrinfo(res);
    log_event(LOG_INFO, "redis host resolved (once, at start)", "host=%s ip=%s", *host, ip);
    *host = ip;
    return 0;
}

/* redis-cluster: its seeds (checked when read), resolved, for the pool. */
static int setup_cluster(struct emqd *d, struct pool_config *pc)
{
    struct config_seed seeds[CONFIG_SEEDS_MAX];
    int n = config_parse_seeds(d->cfg.redis_cluster, seeds, d->url, sizeof(d->url));
    if (n < 1)
        return 2;
    for (int i = 0; i < n; i++) {
        d->seeds[i].host = seeds[i].host;
        d->seeds[i].port = seeds[i].port;
        if (resolve_host(d, "redis-cluster", &d->seeds[i].host, d->seed_ip[i]) != 0)
            return 2;
    }
    pc->seeds = d->seeds;
    pc->nseeds = n;
    pc->password = d->cfg.redis_password;
    return 0;
}

static int setup_backend(struct emqd *d, uv_loop_t *loop, struct pool_config *pc)
{
    const struct config *cfg = &d->cfg;
    if (cfg->redis_cluster != NULL)
        return setup_cluster(d, pc);
    if (cfg->redis != NULL) {
        /* The URL was checked when it was read: this cannot fail. */
        struct redis_url ru = {0};
        if (config_parse_redis(cfg->redis, &ru, d->url, sizeof(d->url)) != 0)
            return 2;
        pc->host = ru.host;
        pc->port = ru.port;
        pc->unix_path = ru.unix_path;
        pc->password = ru.password;
        pc->db = ru.db;
        if (cfg->redis_password != NULL)
            pc->password = cfg->redis_password;
        return pc->unix_path == NULL && resolve_host(d, "redis", &pc->host, d->redis_ip) != 0 ? 2
                                                                                              : 0;
    }
    struct supervise_config sc = {.redis_bin = cfg->redis_bin,
                                  .data_dir = cfg->data_dir,
                                  .fsync_everysec = cfg->fsync == CONFIG_FSYNC_EVERYSEC,
                                  .fail_cb = sup_fail_cb,
                                  .priv = d};
    int rc = supervise_start(loop, &sc, &d->sup);
    if (rc != 0) {
        char q[600];
        log_event(LOG_ERROR, "cannot start the embedded redis-server", "redis_bin=%s error=%s",
                  log_quote(cfg->redis_bin, q, sizeof(q)), uv_err_name(rc));
        uv_run(loop, UV_RUN_NOWAIT);
        return 1;
    }
    pc->unix_path = supervise_socket(d->sup);
    if (supervise_wait_ready(d->sup, 10000) != 0)
        log_msg(LOG_WARN, "embedded redis-server is slow to start; connecting as it comes up");
    log_event(LOG_INFO, "embedded redis-server", "socket=%s fsync=%s", pc->unix_path,
              cfg->fsync == CONFIG_FSYNC_EVERYSEC ? "everysec" : "always");
    return 0;
}

/* Descriptors emqd needs besides its clients: the pool and its pub/sub
 * connection, the listeners, the metrics endpoint's 64 connections, the
 * supervisor, logs and slack. */
#define FD_RESERVE 128

/* Connections past the open-file limit cannot be answered (there is no
 * descriptor to write ELIMIT on: they are reset), so max-clients must fit
 * under it. Raise the soft limit as far as the hard one allows; if that
 * is not enough, say so once, at start. */
static void fd_limit_check(const struct config *c)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)c->max_clients + (rlim_t)c->pool_size + FD_RESERVE;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
    if (rl.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &rl) == 0)
        log_event(LOG_INFO, "raised the open-file limit for max-clients", "from=%llu to=%llu",
                  (unsigned long long)was, (unsigned long long)rl.rlim_cur);
    else
        rl.rlim_cur = was;
    if (rl.rlim_cur < need)
        log_event(LOG_WARN,
                  "the open-file limit is below what max-clients needs: connections past it are "
                  "reset without a reply (raise LimitNOFILE / ulimit -n, or lower max-clients)",
                  "limit=%llu needed=%llu max_clients=%zu", (unsigned long long)rl.rlim_cur,
                  (unsigned long long)need, c->max_clients);
}

static void signals_start(struct emqd *d, uv_loop_t *loop)
{
    uv_signal_init(loop, &d->srv.sigterm);
    uv_signal_init(loop, &d->srv.sigint);
    uv_signal_init(loop, &d->sighup);
    d->srv.sigterm.data = d->srv.sigint.data = d->sighup.data = d;
    uv_signal_start(&d->srv.sigterm, signal_cb, SIGTERM);
    uv_signal_start(&d->srv.sigint, signal_cb, SIGINT);
    uv_signal_start(&d->sighup, sighup_cb, SIGHUP);
}

int main(int argc, char **argv)
{
    static struct emqd d;
    uv_loop_t *loop = uv_default_loop();
    struct pool_config pc = {0};
    char err[512];
    int rc;

    if (parse_args(argc, argv, &d.args) != 0)
        return 2;
    if (build_config(&d.args, &d.cfg, err, sizeof(err)) != 0) {
        char q[sizeof(err) + 100];
        log_event(LOG_ERROR, "bad configuration", "error=%s", log_quote(err, q, sizeof(q)));
        return 2;
    }
    log_threshold = (enum log_level)d.cfg.log_level;
    if (check_exposure(&d.cfg) != 0)
        return 2;
    /* Before the backend starts: a bad file stops emqd with nothing to undo. */
    struct tokens *tokens;
    if (load_tokens(&d.cfg, &tokens, err, sizeof(err)) != 0) {
        char q[sizeof(err) + 100];
        log_event(LOG_ERROR, "bad tokens file", "error=%s", log_quote(err, q, sizeof(q)));
        return 2;
    }
    if (tokens != NULL)
        log_event(LOG_INFO, "tokens file loaded", "tokens=%zu", tokens->n);
    fd_limit_check(&d.cfg);
    signal(SIGPIPE, SIG_IGN);
    /* Until the loop's handler is installed (after the embedded backend
     * is up, which may take seconds), a SIGHUP must not kill emqd. */
    signal(SIGHUP, SIG_IGN);
    if ((rc = setup_backend(&d, loop, &pc)) != 0)
        return rc;
    pc.size = d.cfg.pool_size;
    pc.timeout_ms = d.cfg.redis_timeout_ms;
    pc.replica_acks = d.cfg.replica_acks;

    server_init(&d.srv, loop, &d.cfg);
    if (client_tls_load(&d.srv) != 0)
        return 2;
    d.srv.tokens = tokens;
    d.srv.stop_done = server_stopped;
    d.srv.ready = ready_cb;
    struct pool *pool;
    if ((rc = pool_new(loop, &pc, &pool)) != 0) {
        log_event(LOG_ERROR, "cannot create the Redis pool", "error=%s", strerror(-rc));
        return 1;
    }
    /* Listening starts when the backend first answers (server.c). */
    server_attach_pool(&d.srv, pool);
    signals_start(&d, loop);
    log_event(LOG_INFO, "starting", "version=%s config=%s", EMQ_VERSION,
              d.args.config_path ? d.args.config_path : "none");
    /* emqd listens only once Redis answers (server.c): say what it waits
     * for, so a daemon that is not listening yet is not a mystery. */
    log_event(LOG_INFO, "waiting for redis before listening", "redis=%s listen=%s",
              pool_where(pool), d.cfg.listen ? d.cfg.listen : "none");
    spin_init(loop, d.cfg.spin_us);
    uv_run(loop, UV_RUN_DEFAULT);
    spin_close(); /* unreferenced: it never kept the loop; its close runs below */
    uv_run(loop, UV_RUN_NOWAIT);
    rc = uv_loop_close(loop);
    if (rc != 0)
        log_event(LOG_WARN, "loop closed with handles open", "error=%s", uv_err_name(rc));
    config_deinit(&d.cfg);
    return d.srv.exit_code;
}
