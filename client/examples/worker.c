/* emq-worker: an example worker built on libemq, meant to be copied.
 *
 *   emq-worker [--addr [tls://]HOST:PORT | --socket PATH] [--token T] [--tls]
 *              [--credit N] [--lease-ms N] QUEUE
 *   emq-worker --help | --version
 *
 * $EMQ_ADDR and $EMQ_TOKEN are the defaults of --addr and --token, as
 * for emqctl.
 *
 * It streams QUEUE (both its grouped lanes and its flat set, each with
 * credit N, default 1) and handles one job at a time. The payload decides
 * what "work" is, so tests and demos can steer it:
 *
 *   {"sleep_ms": N}   work for N ms (in slices, heartbeating the lease)
 *   {"fail": true}    fail the job ("payload asked to fail"); the daemon
 *                     retries it with backoff or dead-letters it when its
 *                     attempts are spent
 *   anything else     done at once
 *
 * One line per settled job goes to stdout:
 *
 *   done JOB... group TENacme attempt 1
 *   failed JOB... group - attempt 2 state delayed      (group "-": ungrouped)
 *   released JOB... group TENacme attempt 1            (at shutdown)
 *
 * Each time its streams are open, after connecting or reconnecting, one
 * line goes to stderr with the errors, so an operator sees it at work:
 *
 *   emq-worker: connected to 127.0.0.1:7711, streaming queue mail (credit 1)
 *
 * Leases: the worker times each lease itself from when the library read
 * the job (the protocol's advice; lease_until is on the backend's clock)
 * and extends it by --lease-ms (default 30000) once half of it is gone.
 *
 * Reconnects: when the connection drops (the daemon restarted, the network
 * broke) it reconnects with exponential backoff (100 ms doubling to 5 s)
 * and opens its streams again. Leases held by the old connection are
 * released or reaped by the daemon; they come back as new attempts.
 *
 * SIGTERM / SIGINT: a job whose remaining work is short (at most 1 s) is
 * finished. Then the streams' credit goes to 0 (so no release frees a
 * credit the daemon would refill), a longer current job and every job
 * already pushed are released, and the worker says quit and exits 0.
 *
 * Exit status: 0 after such a stop (and for --help, --version), 1 for an
 * error that reconnecting cannot fix (a refused token, a bad queue name),
 * 2 for a bad command line, reported on stderr in three lines.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "emq.h"

#define QUICK_MS       1000 /* work left that is still finished at shutdown */
#define SLICE_MS       20   /* work is done in slices this long */
#define BACKOFF_MIN    100
#define BACKOFF_MAX    5000
#define EXIT_USAGE     2
#define EXIT_FATAL     1
#define WORKER_STOPPED (-1) /* a callback result: the worker was told to stop */

/* What the worker was asked to do. */
struct worker {
    struct emq_options opts;
    const char *queue;
    int credit, lease_ms;
    bool quiet; /* the streams' credit was set to 0 for shutdown */
};

/* Set by the signal handler; cur is the live connection (or NULL), so the
 * handler can interrupt a blocking call. A pointer read in a handler is
 * fine on every platform libemq runs on. */
static volatile sig_atomic_t stop;
static struct emq *volatile cur;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
    struct emq *c = cur;
    if (c != NULL)
        emq_interrupt(c); /* async-signal-safe */
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Sleep ms; a signal cuts it short (stop is then set). */
static void nap(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void print_job(const char *verb, const struct emq_job *j, const char *extra)
{
    printf("%s %s group %s attempt %d%s\n", verb, j->job, j->group ? j->group : "-", j->attempt,
           extra);
    fflush(stdout);
}

/* A settle that a stop signal must not cut short: retry after EINTR. */
#define SETTLE(call)                                                                               \
    ({                                                                                             \
        int rc_;                                                                                   \
        while ((rc_ = (call)) == EMQ_EINTR)                                                        \
            ;                                                                                      \
        rc_;                                                                                       \
    })

/* Open both streams of the queue with credit. */
static int open_streams(struct emq *c, const struct worker *w, int credit)
{
    int rc = emq_stream(c, w->queue, credit, w->lease_ms, false);
    if (rc == EMQ_OK)
        rc = emq_stream(c, w->queue, credit, w->lease_ms, true);
    return rc;
}

/* Stop the pushes (credit 0), once: a release must not free a credit
 * that the daemon would fill with the very job just released. Jobs pushed
 * before the change are queued in the library when its reply arrives. */
static int quiesce(struct emq *c, struct worker *w)
{
    int rc = w->quiet ? EMQ_OK : SETTLE(open_streams(c, w, 0));
    w->quiet = rc == EMQ_OK;
    return rc;
}

/* Give a job back (at shutdown). */
static int give_back(struct emq *c, struct worker *w, const struct emq_job *j)
{
    int rc = quiesce(c, w);
    if (rc != EMQ_OK)
        return rc;
    rc = SETTLE(emq_release(c, j, "worker shutting down", NULL));
    if (rc == EMQ_OK)
        print_job("released", j, "");
    else
        fprintf(stderr, "emq-worker: release %s: %s\n", j->job, emq_errmsg(c));
    return rc;
}

/* "Work" for ms milliseconds, extending the lease when half of it is gone.
 * EMQ_OK when done, WORKER_STOPPED if the job was released because the
 * worker must stop, or the code of a failed call. */
static int work(struct emq *c, struct emq_job *j, struct worker *w, long long ms)
{
    long long lease_start = j->received_ms, end = mono_ms() + ms;
    for (long long now = mono_ms(); now < end; now = mono_ms()) {
        if (stop && end - now > QUICK_MS)
            return give_back(c, w, j) == EMQ_OK ? WORKER_STOPPED : emq_errcode(c);
        if (now - lease_start >= w->lease_ms / 2) {
            int rc = emq_extend(c, j, w->lease_ms);
            if (rc == EMQ_EINTR) /* the stop signal: decide again at the top */
                continue;
            if (rc != EMQ_OK)
                return rc;
            lease_start = now;
        }
        long long left = end - now, slice = left < SLICE_MS ? left : SLICE_MS;
        nap((long)slice);
    }
    return EMQ_OK;
}

/* emq_stream_run's callback: one job, start to finish. */
static int handle_job(struct emq *c, struct emq_job *j, void *arg)
{
    struct worker *w = arg;
    if (stop)
        return give_back(c, w, j) == EMQ_OK ? WORKER_STOPPED : emq_errcode(c);
    json_t *sleep_ms = json_object_get(j->payload, "sleep_ms");
    int rc = EMQ_OK;
    if (json_is_true(json_object_get(j->payload, "fail"))) {
        enum emq_state st = EMQ_STATE_UNKNOWN;
        struct emq_fail_opts fo = {.error = "payload asked to fail"};
        rc = stop ? quiesce(c, w) : EMQ_OK; /* see quiesce */
        if (rc == EMQ_OK)
            rc = SETTLE(emq_fail(c, j, &fo, &st));
        if (rc == EMQ_OK) {
            char extra[32];
            snprintf(extra, sizeof(extra), " state %s", emq_state_name(st));
            print_job("failed", j, extra);
        }
    } else {
        if (json_is_integer(sleep_ms) && json_integer_value(sleep_ms) > 0)
            rc = work(c, j, w, json_integer_value(sleep_ms));
        if (rc == EMQ_OK && stop)
            rc = quiesce(c, w); /* a finished job's credit must not be refilled */
        if (rc == EMQ_OK)
            rc = SETTLE(emq_complete(c, j));
        if (rc == EMQ_OK)
            print_job("done", j, "");
    }
    if (rc == EMQ_ELEASE || rc == EMQ_ENOJOB) {
        /* Our lease ran out and the job went elsewhere: not ours to settle. */
        fprintf(stderr, "emq-worker: lost %s: %s\n", j->job, emq_errmsg(c));
        rc = EMQ_OK;
    }
    if (rc == EMQ_OK && stop)
        return WORKER_STOPPED;
    return rc;
}

/* Shutdown on a live connection: stop the pushes, release every job that
 * was pushed but not handled, then quit (emq_close). */
static void shut_down(struct emq *c, struct worker *w)
{
    struct emq_job *j;
    while (quiesce(c, w) == EMQ_OK && SETTLE(emq_next_job(c, &j, 0)) == EMQ_OK && j != NULL) {
        give_back(c, w, j);
        emq_job_free(j);
    }
    cur = NULL;
    emq_close(c);
}

/* Errors that reconnecting cannot fix. */
static bool fatal(int rc)
{
    return rc == EMQ_EAUTH || rc == EMQ_EQUEUE || rc == EMQ_EARG || rc == EMQ_EUSAGE ||
           rc == EMQ_ENOMEM;
}

/* Say where the worker is streaming from, once per connection: an operator
 * starting it, or watching it come back after emqd did, sees it working. */
static void say_connected(const struct worker *w, bool again)
{
    char where[300];
    fprintf(stderr, "emq-worker: %sconnected to %s, streaming queue %s (credit %d)\n",
            again ? "re" : "", emq_format_addr(&w->opts, where, sizeof(where)), w->queue,
            w->credit);
}

static int run(struct worker *w)
{
    long backoff = BACKOFF_MIN;
    bool streamed = false; /* a connection of this run has streamed before */
    while (!stop) {
        struct emq *c = NULL;
        int rc = emq_connect(&c, &w->opts);
        cur = c;
        w->quiet = false;
        if (rc == EMQ_OK && !stop)
            rc = open_streams(c, w, w->credit);
        if (rc == EMQ_OK) {
            backoff = BACKOFF_MIN; /* connected and streaming: start over */
            say_connected(w, streamed);
            streamed = true;
            rc = emq_stream_run(c, handle_job, w);
        }
        if (stop || rc == WORKER_STOPPED) {
            stop = 1;
            shut_down(c, w);
            break;
        }
        /* A server error's message already starts with its code. */
        fprintf(stderr, "emq-worker: %s%s%s\n", rc < EMQ_ECLIENT ? "" : emq_code_name(rc),
                rc < EMQ_ECLIENT ? "" : ": ", emq_errmsg(c));
        cur = NULL;
        emq_close(c);
        if (fatal(rc))
            return EXIT_FATAL;
        nap(backoff);
        backoff = backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 2;
    }
    return 0;
}

#define SYNOPSIS  "usage: emq-worker [options] QUEUE\n"
#define MAX_VALUE 86400000 /* the largest --credit or --lease-ms */

static void help(void)
{
    printf(SYNOPSIS
           "\n"
           "The example worker: streams QUEUE from emqd (its grouped lanes and its\n"
           "ungrouped set) and works one job at a time, as its payload says.\n"
           "\n"
           "Options:\n"
           "  --addr HOST:PORT   the server (default $EMQ_ADDR, else 127.0.0.1:7711)\n"
           "  --socket PATH      connect to a unix socket instead\n"
           "  --token T          authenticate with T (default $EMQ_TOKEN)\n"
           "  --tls              speak TLS (also: --addr tls://HOST:PORT)\n"
           "  --ca FILE          verify the server against FILE's CAs (implies --tls)\n"
           "  --cert FILE        present FILE's client certificate (implies --tls)\n"
           "  --key FILE         the client certificate's key (default: in --cert's file)\n"
           "  --credit N         jobs each of the two streams may hold at once (default 1)\n"
           "  --lease-ms N       lease length, extended when half is gone (default 30000)\n"
           "  -h, --help         show this help\n"
           "  --version          print \"emq-worker VERSION\" and exit\n"
           "\n"
           "Settled jobs go to stdout, one line each; (re)connections and errors go to\n"
           "stderr.\n"
           "SIGTERM or SIGINT releases held jobs and exits. Exit status: 0 stopped by a\n"
           "signal, 1 an error that reconnecting cannot fix, 2 usage.\n");
}

/* A bad command line: the error, the synopsis and where the help is, on
 * stderr (three lines, so the error stays on the screen). */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("emq-worker: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\n" SYNOPSIS "try 'emq-worker --help'\n", stderr);
    return EXIT_USAGE;
}

/* The option getopt_long refused (opterr is off, so it said nothing). */
static int bad_option(int opt, char **argv)
{
    const char *arg = argv[optind - 1];
    if (opt == ':')
        return usage_error("%s needs a value", arg);
    if (optopt != 0 && strncmp(arg, "--", 2) != 0) /* a short one, maybe in a cluster */
        return usage_error("unknown option \"-%c\"", optopt);
    return usage_error("unknown option \"%s\"", arg);
}

/* A positive int option (at most MAX_VALUE) into *out; 0 or the usage exit. */
static int positive(const char *name, const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *s == '\0' || *end != '\0' || v <= 0 || v > MAX_VALUE)
        return usage_error("--%s wants an integer in 1..%d, not \"%s\"", name, MAX_VALUE, s);
    *out = (int)v;
    return 0;
}

/* $EMQ_ADDR and $EMQ_TOKEN into o, the defaults emqctl takes too. Returns
 * an EMQ_ADDR that does not parse (an error unless --addr or --socket
 * stands in for it), or NULL. */
static const char *env_defaults(struct emq_options *o)
{
    const char *addr = getenv("EMQ_ADDR"), *token = getenv("EMQ_TOKEN");
    if (token != NULL && token[0] != '\0')
        o->token = token;
    if (addr == NULL || addr[0] == '\0' || emq_parse_addr(o, addr) == EMQ_OK)
        return NULL;
    return addr; /* emq_parse_addr changed nothing */
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"addr", required_argument, NULL, 'a'},     {"socket", required_argument, NULL, 's'},
        {"token", required_argument, NULL, 't'},    {"credit", required_argument, NULL, 'c'},
        {"lease-ms", required_argument, NULL, 'l'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},        {"tls", no_argument, NULL, 'T'},
        {"ca", required_argument, NULL, 'A'},       {"cert", required_argument, NULL, 'C'},
        {"key", required_argument, NULL, 'K'},      {NULL, 0, NULL, 0},
    };
    struct worker w = {.credit = 1, .lease_ms = 30000, .opts = {.name = "emq-worker"}};
    const char *bad_env = env_defaults(&w.opts);
    bool want_help = false, want_version = false;
    int opt, rc = 0;
    opterr = 0;
    while (rc == 0 && (opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (opt == 'a') {
            /* All of it replaces $EMQ_ADDR: "--addr 7712" is 127.0.0.1:7712. */
            w.opts.host = NULL;
            w.opts.port = 0;
            if (emq_parse_addr(&w.opts, optarg) != EMQ_OK)
                rc = usage_error("bad --addr \"%s\": expected HOST:PORT", optarg);
        } else if (opt == 's')
            w.opts.unix_path = optarg;
        else if (opt == 't')
            w.opts.token = optarg;
        else if (opt == 'T')
            w.opts.tls = true;
        else if (opt == 'A')
            w.opts.tls = true, w.opts.tls_ca = optarg;
        else if (opt == 'C')
            w.opts.tls = true, w.opts.tls_cert = optarg;
        else if (opt == 'K')
            w.opts.tls_key = optarg;
        else if (opt == 'c')
            rc = positive("credit", optarg, &w.credit);
        else if (opt == 'l')
            rc = positive("lease-ms", optarg, &w.lease_ms);
        else if (opt == 'h')
            want_help = true;
        else if (opt == 'V')
            want_version = true;
        else if (opt == '?' || opt == ':')
            rc = bad_option(opt, argv);
    }
    if (rc == 0 && bad_env != NULL && !want_help && !want_version && w.opts.unix_path == NULL &&
        w.opts.port == 0)
        rc = usage_error("bad EMQ_ADDR \"%s\": expected HOST:PORT", bad_env);
    if (rc != 0)
        return rc;
    if (want_help) {
        help();
        return 0;
    }
    if (want_version) {
        puts("emq-worker " EMQ_VERSION);
        return 0;
    }
    if (optind == argc)
        return usage_error("no QUEUE given");
    if (optind + 1 < argc)
        return usage_error("unexpected argument \"%s\"", argv[optind + 1]);
    w.queue = argv[optind];
    setvbuf(stdout, NULL, _IOLBF, 0);

    /* No SA_RESTART: a signal must cut a backoff nap short. */
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return run(&w);
}
