/* emqd: the echomq daemon. Parses options, picks the backend (a Redis URL,
 * or an embedded redis-server it supervises), and runs the loop until
 * SIGTERM / SIGINT. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"
#include "supervise.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: emqd [options]\n"
            "  --listen HOST:PORT    TCP address (default 127.0.0.1:7711; 'none' = off)\n"
            "  --unix PATH           also listen on a unix socket\n"
            "  --redis URL           redis://[:PASSWORD@]IP:PORT[/DB] or unix:///PATH[?db=N];\n"
            "                        default: an embedded redis-server under --data-dir\n"
            "  --data-dir DIR        embedded Redis directory (default ./emqd-data)\n"
            "  --redis-bin PATH      redis-server binary (default: from PATH)\n"
            "  --pool N              Redis connections (default 4)\n"
            "  --token T             clients must 'hello' with this token\n"
            "  --max-line BYTES      longest request line (default 1048576)\n"
            "  --max-batch N         items per enqueue_many (default 10000)\n"
            "  --max-clients N       connections (default 20000)\n"
            "  --max-output BYTES    queued output per connection (default 64 MiB)\n"
            "  --max-inflight N      unanswered requests per connection before reads pause\n"
            "                        (default 4096)\n"
            "  --lease-ms MS         default lease (default 30000)\n"
            "  --retention-ms MS     completed rows kept for dedup (default 86400000)\n"
            "  --max-attempts N      default attempts before dead-lettering (default 5)\n"
            "  --redis-timeout-ms MS backend deadline (default 2000)\n"
            "  --verbose             debug logging\n"
            "  --version, --help\n");
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || s[0] == '-' || v == 0)
        return -1;
    *out = (size_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, struct config *c)
{
    enum {
        O_UNIX = 256,
        O_REDIS,
        O_DATA,
        O_BIN,
        O_POOL,
        O_TOKEN,
        O_LINE,
        O_BATCH,
        O_CLIENTS,
        O_OUTPUT,
        O_INFLIGHT,
        O_LEASE,
        O_RET,
        O_ATT,
        O_RTO,
        O_VERSION
    };
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"unix", required_argument, NULL, O_UNIX},
        {"redis", required_argument, NULL, O_REDIS},
        {"data-dir", required_argument, NULL, O_DATA},
        {"redis-bin", required_argument, NULL, O_BIN},
        {"pool", required_argument, NULL, O_POOL},
        {"token", required_argument, NULL, O_TOKEN},
        {"max-line", required_argument, NULL, O_LINE},
        {"max-batch", required_argument, NULL, O_BATCH},
        {"max-clients", required_argument, NULL, O_CLIENTS},
        {"max-output", required_argument, NULL, O_OUTPUT},
        {"max-inflight", required_argument, NULL, O_INFLIGHT},
        {"lease-ms", required_argument, NULL, O_LEASE},
        {"retention-ms", required_argument, NULL, O_RET},
        {"max-attempts", required_argument, NULL, O_ATT},
        {"redis-timeout-ms", required_argument, NULL, O_RTO},
        {"verbose", no_argument, NULL, 'v'},
        {"version", no_argument, NULL, O_VERSION},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int o;
    size_t v;
    while ((o = getopt_long(argc, argv, "l:vh", opts, NULL)) != -1) {
        int bad = 0;
        switch (o) {
        case 'l':
            c->listen = strcmp(optarg, "none") ? optarg : NULL;
            break;
        case O_UNIX:
            c->unix_path = optarg;
            break;
        case O_REDIS:
            c->redis = optarg;
            break;
        case O_DATA:
            c->data_dir = optarg;
            break;
        case O_BIN:
            c->redis_bin = optarg;
            break;
        case O_TOKEN:
            c->token = optarg;
            break;
        case O_POOL:
            bad = parse_size(optarg, &v) || v > 64;
            c->pool_size = (int)v;
            break;
        case O_LINE:
            bad = parse_size(optarg, &c->max_line);
            break;
        case O_BATCH:
            bad = parse_size(optarg, &c->max_batch);
            break;
        case O_CLIENTS:
            bad = parse_size(optarg, &c->max_clients);
            break;
        case O_OUTPUT:
            bad = parse_size(optarg, &c->max_output);
            break;
        case O_INFLIGHT:
            bad = parse_size(optarg, &c->max_inflight);
            break;
        case O_LEASE:
            bad = parse_size(optarg, &v);
            c->lease_ms = v;
            break;
        case O_RET:
            bad = parse_size(optarg, &v);
            c->retention_ms = v;
            break;
        case O_ATT:
            bad = parse_size(optarg, &v);
            c->max_attempts = (int)v;
            break;
        case O_RTO:
            bad = parse_size(optarg, &v);
            c->redis_timeout_ms = v;
            break;
        case 'v':
            c->verbose = 1;
            break;
        case O_VERSION:
            printf("emqd %s\n", EMQ_VERSION);
            exit(0);
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
        if (bad) {
            const char *name = "?";
            for (const struct option *op = opts; op->name != NULL; op++)
                if (op->val == o)
                    name = op->name;
            fprintf(stderr, "emqd: bad value for --%s: %s\n", name, optarg);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "emqd: unexpected argument: %s\n", argv[optind]);
        return -1;
    }
    return 0;
}

struct emqd {
    struct server srv;
    struct supervise *sup;
    char url[1024];
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
    log_info("stopped");
}

static void signal_cb(uv_signal_t *h, int sig)
{
    struct emqd *d = h->data;
    log_info("signal %d: shutting down", sig);
    server_stop(&d->srv);
}

static void sup_fail_cb(void *priv, int err)
{
    struct emqd *d = priv;
    log_error("embedded redis-server keeps failing (%s): stopping", strerror(-err));
    d->srv.exit_code = 1;
    server_stop(&d->srv);
}

int main(int argc, char **argv)
{
    static struct config cfg;
    static struct emqd d;
    uv_loop_t *loop = uv_default_loop();
    struct pool_config pc = {0};

    config_defaults(&cfg);
    if (parse_args(argc, argv, &cfg) != 0)
        return 2;
    if (cfg.verbose)
        log_threshold = LOG_DEBUG;
    signal(SIGPIPE, SIG_IGN);

    if (cfg.redis != NULL) {
        if (config_parse_redis(cfg.redis, &pc, d.url, sizeof(d.url)) != 0) {
            fprintf(stderr, "emqd: bad --redis URL: %s\n", cfg.redis);
            return 2;
        }
    } else {
        struct supervise_config sc = {.redis_bin = cfg.redis_bin,
                                      .data_dir = cfg.data_dir,
                                      .fail_cb = sup_fail_cb,
                                      .priv = &d};
        int rc = supervise_start(loop, &sc, &d.sup);
        if (rc != 0) {
            fprintf(stderr, "emqd: cannot start the embedded redis-server (%s): %s\n",
                    cfg.redis_bin, uv_strerror(rc));
            uv_run(loop, UV_RUN_NOWAIT);
            return 1;
        }
        pc.unix_path = supervise_socket(d.sup);
        if (supervise_wait_ready(d.sup, 10000) != 0)
            log_warn("embedded redis-server is slow to start; connecting as it comes up");
        log_info("embedded redis-server on %s", pc.unix_path);
    }
    if (cfg.token == NULL && cfg.listen != NULL && strncmp(cfg.listen, "127.", 4) != 0 &&
        strncmp(cfg.listen, "[::1]", 5) != 0 && strncmp(cfg.listen, "localhost", 9) != 0)
        log_warn("listening on %s without a token: anyone who can reach it can use it", cfg.listen);
    pc.size = cfg.pool_size;
    pc.timeout_ms = cfg.redis_timeout_ms;

    server_init(&d.srv, loop, &cfg);
    d.srv.stop_done = server_stopped;
    struct pool *pool;
    if (pool_new(loop, &pc, &pool) != 0) {
        fprintf(stderr, "emqd: cannot create the Redis pool\n");
        return 1;
    }
    /* Listening starts when the backend first answers (server.c). */
    server_attach_pool(&d.srv, pool);
    uv_signal_init(loop, &d.srv.sigterm);
    uv_signal_init(loop, &d.srv.sigint);
    d.srv.sigterm.data = d.srv.sigint.data = &d;
    uv_signal_start(&d.srv.sigterm, signal_cb, SIGTERM);
    uv_signal_start(&d.srv.sigint, signal_cb, SIGINT);
    uv_run(loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(loop);
    if (rc != 0)
        log_warn("loop closed with handles open: %s", uv_strerror(rc));
    return d.srv.exit_code;
}
