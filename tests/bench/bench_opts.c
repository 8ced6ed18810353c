/* bench_opts: emq-bench's command line: the usage text, the option table
 * and the checks of which options go together. */
#include "bench.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tls.h"

static void usage(FILE *f)
{
    fputs("usage: emq-bench [options]\n"
          "  --port N          server port (required); --host IP (default 127.0.0.1)\n"
          "  --beanstalk       speak beanstalkd's protocol instead of emqd's\n"
          "  --tls-ca FILE     speak TLS to emqd, verifying it against FILE's CAs\n"
          "  --queue Q         queue name (default bench)\n"
          "  --queues K        spread over K queues Q0..Q(K-1): each producer\n"
          "                    rotates its requests over them, worker i streams\n"
          "                    queue i mod K (give --workers >= K)\n"
          "  --producers N     producer connections (default 4; 0 with --workers:\n"
          "                    drain --jobs N jobs already queued, e.g. by an\n"
          "                    earlier run with --workers 0)\n"
          "  --batch B         jobs per enqueue_many (1 = enqueue; default 100)\n"
          "  --pipeline P      requests in flight per producer (default 2)\n"
          "  --workers M       streaming worker connections (default 4)\n"
          "  --credit C        stream credit per worker (default 100)\n"
          "  --groups G        groups, jobs spread round-robin (0 = flat; default 10)\n"
          "  --jobs N          jobs to enqueue (default 100000)\n"
          "  --payload BYTES   payload size (default 1024)\n"
          "  --rate R          jobs/s per producer, one job per request (light load)\n"
          "  --prefill         enqueue every job before the workers connect\n"
          "  --fairness H,L,K  one group with H jobs, then L groups of K jobs\n"
          "                    (prefilled; reports deliveries until each light\n"
          "                    group's last job; one producer, so the heavy\n"
          "                    backlog is in first)\n"
          "  --claim           workers claim (count = credit, up to 1000) in a loop\n"
          "                    instead of streaming\n"
          "  --settle HOW      complete (default), fail (retry in an hour: the job\n"
          "                    goes delayed) or dead (fail with dead:true)\n"
          "  --hold            workers hold every lease until all jobs are leased,\n"
          "                    then settle them all (stream: give credit >= jobs\n"
          "                    / workers)\n"
          "  --marks           print {\"mark\":PHASE} before each phase (enqueue,\n"
          "                    lease, settle) and wait for a line on stdin\n"
          "  --weights W,..    group g gets weight W[g mod n] (sent before the run)\n"
          "  --weighted-jobs   spread jobs over the groups in proportion to weight\n"
          "  --group-rate M,P[,K]  the first K groups (default all) get rate M\n"
          "                    per P ms\n"
          "  --window N        report each group's share of the first N deliveries\n"
          "                    against its weighted share\n"
          "  --watch G         report group G's deliveries and achieved rate\n"
          "  --stop-ms MS      end the run MS ms after the workers start\n"
          "  --lone N          once the workers start, one more tenant (TENlone)\n"
          "                    enqueues N single jobs at --lone-rate per second\n"
          "                    (default 100); reports their enqueue -> push\n"
          "  --lone-weight W   the lone tenant's weight (sent before the run)\n"
          "  --idle N          hold N idle connections during the run\n"
          "  --emqd-pid PID    read emqd's VmRSS around the idle connections\n"
          "  --duration S      hard time cap in seconds (default 120)\n"
          "  --json            one JSON object instead of the table\n",
          f);
}

static const struct option long_opts[] = {
    {"host", 1, 0, 'h'},          {"port", 1, 0, 'p'},        {"beanstalk", 0, 0, 'k'},
    {"queue", 1, 0, 'q'},         {"producers", 1, 0, 'N'},   {"batch", 1, 0, 'B'},
    {"pipeline", 1, 0, 'P'},      {"workers", 1, 0, 'M'},     {"credit", 1, 0, 'C'},
    {"groups", 1, 0, 'G'},        {"jobs", 1, 0, 'n'},        {"payload", 1, 0, 's'},
    {"rate", 1, 0, 'r'},          {"prefill", 0, 0, 'f'},     {"fairness", 1, 0, 'F'},
    {"idle", 1, 0, 'i'},          {"emqd-pid", 1, 0, 'm'},    {"duration", 1, 0, 'd'},
    {"json", 0, 0, 'j'},          {"help", 0, 0, '?'},        {"tls-ca", 1, 0, 'T'},
    {"queues", 1, 0, 'Q'},        {"claim", 0, 0, 'c'},       {"settle", 1, 0, 'S'},
    {"hold", 0, 0, 'H'},          {"marks", 0, 0, 'K'},       {"weights", 1, 0, 'W'},
    {"weighted-jobs", 0, 0, 'w'}, {"group-rate", 1, 0, 'R'},  {"window", 1, 0, 'x'},
    {"watch", 1, 0, 'g'},         {"stop-ms", 1, 0, 't'},     {"lone", 1, 0, 'L'},
    {"lone-rate", 1, 0, 'l'},     {"lone-weight", 1, 0, 'e'}, {0, 0, 0, 0},
};

static int num(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_fairness(struct bench *b, const char *s)
{
    unsigned long long h, l, k;
    if (sscanf(s, "%llu,%llu,%llu", &h, &l, &k) != 3 || l == 0 || l > 99999 || k == 0 ||
        k > 1000000)
        return -1;
    b->heavy = h;
    b->light = (unsigned)l;
    b->light_jobs = (unsigned)k;
    b->jobs = h + l * k;
    b->prefill = true;
    return 0;
}

/* --weights W1,W2,..: up to 64 weights, each 1..1000. */
static int parse_weights(struct bench *b, const char *s)
{
    unsigned long long v;
    char buf[16];
    b->weights = calloc(64, sizeof(*b->weights));
    if (!b->weights)
        return -1;
    while (*s) {
        size_t n = strcspn(s, ",");
        if (n == 0 || n >= sizeof(buf) || b->nweights == 64)
            return -1;
        memcpy(buf, s, n);
        buf[n] = '\0';
        if (num(buf, 1000, &v) != 0 || v == 0)
            return -1;
        b->weights[b->nweights++] = (unsigned)v;
        s += n + (s[n] == ',');
    }
    return b->nweights ? 0 : -1;
}

static int parse_group_rate(struct bench *b, const char *s)
{
    unsigned m, p, k = 0xffffffffu;
    int n = sscanf(s, "%u,%u,%u", &m, &p, &k);
    if (n < 2 || m < 1 || m > 1000000 || p < 1 || p > 86400000 || k < 1)
        return -1;
    b->rate_max = m;
    b->rate_per_ms = p;
    b->rate_groups = k;
    return 0;
}

static int parse_settle(struct bench *b, const char *s)
{
    if (strcmp(s, "complete") == 0)
        b->settle = BENCH_COMPLETE;
    else if (strcmp(s, "fail") == 0)
        b->settle = BENCH_FAIL;
    else if (strcmp(s, "dead") == 0)
        b->settle = BENCH_DEAD;
    else
        return -1;
    return 0;
}

/* The options without a number. */
static int parse_flag(struct bench *b, int o, const char *arg)
{
    switch (o) {
    case 'c':
        b->claim = true;
        return 0;
    case 'H':
        b->hold = true;
        return 0;
    case 'K':
        b->marks = true;
        return 0;
    case 'w':
        b->weighted_jobs = true;
        return 0;
    case 'S':
        return parse_settle(b, arg);
    case 'W':
        return parse_weights(b, arg);
    case 'R':
        return parse_group_rate(b, arg);
    default:
        return 1; /* not one of these */
    }
}

static int parse_opt(struct bench *b, int o, const char *arg)
{
    unsigned long long v = 0;
    int rc = parse_flag(b, o, arg);
    if (rc <= 0)
        return rc;
    switch (o) {
    case 'h':
        b->host = arg;
        return 0;
    case 'q':
        b->queue = arg;
        return 0;
    case 'k':
        b->proto = BENCH_BEANSTALK;
        return 0;
    case 'T': {
        char why[300];
        if (tls_ctx_new_client(arg, &b->tls, why, sizeof(why)) == 0)
            return 0;
        fprintf(stderr, "emq-bench: %s\n", why);
        return -1;
    }
    case 'f':
        b->prefill = true;
        return 0;
    case 'j':
        b->json = true;
        return 0;
    case 'F':
        return parse_fairness(b, arg);
    case 'd':
        b->duration = atof(arg);
        return b->duration > 0 ? 0 : -1;
    default:
        break;
    }
    if (num(arg, 10000000000ULL, &v) != 0)
        return -1;
    switch (o) {
    case 'p':
        b->port = (int)v;
        return v > 0 && v < 65536 ? 0 : -1;
    case 'Q':
        b->queues = (unsigned)v;
        return v >= 1 && v <= 10000 ? 0 : -1;
    case 'N':
        b->producers = (unsigned)v;
        return 0;
    case 'B':
        b->batch = (unsigned)v;
        return v >= 1 && v <= 10000 ? 0 : -1;
    case 'P':
        b->pipeline = (unsigned)v;
        return v >= 1 ? 0 : -1;
    case 'M':
        b->workers = (unsigned)v;
        return 0;
    case 'C':
        b->credit = (unsigned)v;
        return v >= 1 && v <= 10000 ? 0 : -1;
    case 'G':
        b->groups = (unsigned)v;
        return 0;
    case 'n':
        b->jobs = v;
        return 0;
    case 's':
        b->payload = (unsigned)v;
        return v <= 65536 ? 0 : -1;
    case 'r':
        b->rate = (unsigned)v;
        return v >= 1 && v <= 1000 ? 0 : -1;
    case 'i':
        b->idle = (unsigned)v;
        return v <= 100000 ? 0 : -1;
    case 'm':
        b->emqd_pid = (int)v;
        return 0;
    case 'x':
        b->window = v;
        return v >= 1 ? 0 : -1;
    case 'g':
        b->watch = (long)v;
        return 0;
    case 't':
        b->stop_ms = v;
        return v >= 1 ? 0 : -1;
    case 'L':
        b->lone = (unsigned)v;
        return v <= 1000000 ? 0 : -1;
    case 'l':
        b->lone_rate = (unsigned)v;
        return v >= 1 && v <= 1000 ? 0 : -1;
    case 'e':
        b->lone_weight = (unsigned)v;
        return v >= 1 && v <= 1000 ? 0 : -1;
    default:
        return -1;
    }
}

/* Group g's weight: --weights cycled over the groups, else 1. */
unsigned bench_weight_of(const struct bench *b, unsigned g)
{
    return b->nweights ? b->weights[g % b->nweights] : 1;
}

/* The combinations the phase and tenant options allow. */
static bool valid_phases(const struct bench *b)
{
    bool emq_only = b->claim || b->hold || b->nweights || b->rate_groups || b->lone || b->window ||
                    b->settle != BENCH_COMPLETE;
    if (emq_only && b->proto != BENCH_EMQ)
        return false;
    if ((b->nweights || b->rate_groups || b->lone || b->window || b->watch >= 0) &&
        (b->queues > 1 || b->light || b->groups == 0))
        return false;
    /* Holding by stream needs the credit for every job at once. */
    if (b->hold && (!b->workers || b->lone || b->stop_ms ||
                    (!b->claim && (uint64_t)b->credit * b->workers < b->jobs)))
        return false;
    return !(b->weighted_jobs && !b->nweights);
}

/* Parse argv into b (which holds the defaults); 0, or -1 after printing
 * why (the usage for a wrong combination). */
int bench_parse_args(struct bench *b, int argc, char **argv)
{
    int o, which = 0;
    while ((o = getopt_long(argc, argv, "", long_opts, &which)) != -1) {
        if (o == '?') {
            usage(stderr);
            return -1;
        }
        /* By the table: argv[optind - 1] is the value when it came as a
         * word of its own (--rate 2000). */
        if (parse_opt(b, o, optarg) != 0) {
            fprintf(stderr, "emq-bench: bad value for --%s: %s\n", long_opts[which].name,
                    optarg ? optarg : "");
            return -1;
        }
    }
    if (optind != argc || b->port == 0 || (b->light && b->proto != BENCH_EMQ) ||
        (b->tls != NULL && b->proto != BENCH_EMQ) || (b->idle && b->proto != BENCH_EMQ) ||
        (b->jobs && !b->producers && !b->workers) || !valid_phases(b)) {
        usage(stderr);
        return -1;
    }
    return 0;
}
